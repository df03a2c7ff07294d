import CQRCode
import DevtrustHTTP
import DevtrustKeys
import Glibc

/// `library.*`: the libraries devtrust loads with dlopen when a command needs
/// them, loaded by the loaders the commands use, with their checks (libcurl's
/// version, every tpm2-tss function devtrust calls, libqrencode's encoder, a
/// TCTI module's entry point). A missing one is a warning that says what still
/// works without it; the TPM's are a failure when the device key is in the TPM.
package struct LibraryDiagnosis {
    /// Why a TCTI module cannot be loaded (as tpm2-tss's TCTI loader opens it), or nil when it loads.
    package typealias Probe = @Sendable (String) -> String?

    package let selection: TPMSelection
    package let keyBackend: KeyBackend?
    package let tctiProbe: Probe

    /// dlopen and the entry point tpm2-tss's TCTI loader looks up (Tss2_Tcti_Info).
    package static let tctiModuleProbe: Probe = { name in
        guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else { return dlerror().map { String(cString: $0) } ?? "cannot be loaded" }
        return dlsym(handle, "Tss2_Tcti_Info") == nil ? "it has no Tss2_Tcti_Info: not a TCTI module" : nil
    }

    package func checks() -> [DoctorCheck] {
        [tss(), tcti(), curl(), qrencode()]
    }

    private var tpmProblem: DoctorVerdict { keyBackend == .tpm ? .fail : .warn }

    package func tss() -> DoctorCheck {
        let id = "library.tss2-esys", title = "TPM software stack (tpm2-tss)"
        guard let problem = TPMSoftwareStack.loadProblem() else {
            return DoctorCheck(id, title, .pass, DoctorText.listed(TPMSoftwareStack.libraries) + " load, with every function devtrust calls")
        }
        let effect = keyBackend == .tpm ? "the device key is in the TPM: no command can sign" : "devtrust can use no TPM (software keys work)"
        // Which library, as the loader opens them (it says only the first failure, by its path).
        let unopened = TPMSoftwareStack.libraries.lazy.compactMap { name in dlopenProblem(name).map { "\(name): \($0)" } }.first
        let what = unopened.map { "cannot load " + $0 } ?? "cannot use tpm2-tss: " + problem
        return DoctorCheck(id, title, tpmProblem, what + ": " + effect,
                           fix: "sudo apt-get install " + TPMSoftwareStack.packages.joined(separator: " "))
    }

    /// The TCTI module of each TCTI devtrust would try; the first one's is what counts.
    package func tcti() -> DoctorCheck {
        let id = "library.tcti", title = "TPM connection module (TCTI)"
        let effect = keyBackend == .tpm ? "the device key's TPM cannot be reached" : "devtrust cannot reach a TPM through it"
        if let first = selection.candidates.first {
            let name = TPMSoftwareStack.tctiName(first)
            if !TPMSelection.knownTCTINames.contains(name) && !TPMSelection.namesLibrary(name) {
                // A mistyped name is no package to install: the words every command uses.
                let unknown = TPMSelection.unknownTCTI(name)
                return DoctorCheck(id, title, tpmProblem, "\(unknown.reason) in \(first): \(effect)", fix: unknown.hint)
            }
        }
        var found = [String](), missing = [(configuration: String, library: String, reason: String)]()
        for configuration in selection.candidates {
            let library = TPMSoftwareStack.tctiLibrary(configuration)
            if let reason = tctiProbe(library) { missing.append((configuration, library, reason)) } else { found.append("\(library) (for \(configuration))") }
        }
        guard let first = selection.candidates.first, let absent = missing.first, absent.configuration == first else {
            let fallbacks = missing.map { "\($0.library) (for \($0.configuration), tried next) is not installed" }
            return DoctorCheck(id, title, .pass, (DoctorText.listed(found) + " loads" + (fallbacks.isEmpty ? "" : "; " + fallbacks.joined(separator: "; "))))
        }
        let package = TPMSoftwareStack.tctiPackage(first)
        let fix = TPMSoftwareStack.tctiName(first) == "tabrmd" ? "sudo apt-get install libtss2-tcti-tabrmd0 tpm2-abrmd"
            : package.map { "sudo apt-get install \($0)" } ?? "check the library path given in --tcti"
        return DoctorCheck(id, title, tpmProblem, "cannot load \(absent.library) (for \(first)): \(absent.reason): \(effect)", fix: fix)
    }

    /// As every request loads it: the library, its version (7.63.0 at least) and its functions.
    package func curl() -> DoctorCheck {
        let id = "library.libcurl", title = "libcurl (HTTPS)"
        let name = CurlHTTPClient.libraryName
        let problem: String
        var tooOld = false
        switch CurlHTTPClient.loadProblem() {
        case nil:
            return DoctorCheck(id, title, .pass, "\(name) loads (libcurl \(CurlHTTPClient.runtimeVersion))")
        case let .libraryTooOld(version)?:
            problem = "\(name) is libcurl \(version), too old: devtrust needs 7.63.0 or later"
            tooOld = true
        case let .libraryUnavailable(reason)?:
            problem = "cannot load \(name): \(reason)"
        case let other?:
            problem = "cannot load \(name): \(other)"
        }
        return DoctorCheck(id, title, .warn,
                           problem + ": register, login, access-token refreshes, logout and the clock checks here cannot reach a server; token, pubkey, status and the other offline commands work",
                           fix: tooOld ? "install a newer libcurl4 (7.63.0 or later)" : "sudo apt-get install libcurl4")
    }

    /// As `login --device-code` draws its QR code: the library and its encoder, on a short text.
    package func qrencode() -> DoctorCheck {
        let id = "library.libqrencode", title = "libqrencode (QR codes)"
        let name = DEVTRUST_QRENCODE_LIBRARY
        var width: Int32 = 0
        var modules: UnsafeMutablePointer<UInt8>?
        var error = [CChar](repeating: 0, count: 256)
        let encoded = devtrust_qrcode_encode("https://devtrust.invalid/doctor", &width, &modules, &error, Int32(error.count))
        free(modules)
        guard encoded == -1 else { return DoctorCheck(id, title, .pass, "\(name) loads and encodes") }
        let reason = String(decoding: error.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return DoctorCheck(id, title, .warn,
                           "cannot load \(name): \(reason): login --device-code shows the code and its URL without a QR code",
                           fix: "sudo apt-get install libqrencode4")
    }

    /// Why `name` cannot be opened (dlerror), or nil when it opens.
    private func dlopenProblem(_ name: String) -> String? {
        guard dlopen(name, RTLD_NOW | RTLD_LOCAL) == nil else { return nil }
        return dlerror().map { String(cString: $0) } ?? "cannot be loaded"
    }
}
