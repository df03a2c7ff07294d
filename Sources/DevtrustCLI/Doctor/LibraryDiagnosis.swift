import CQRCode
import DevtrustHTTP
import DevtrustKeys
import Glibc

/// `library.*`: the libraries devtrust loads with dlopen when a command needs
/// them, probed under the same names (dlopen alone: no function of theirs is
/// called). A missing one is a warning that says what still works without it;
/// the TPM's are a failure when the device key is in the TPM.
struct LibraryDiagnosis {
    /// Why a library cannot be loaded (dlerror), or nil when it loads.
    typealias Probe = @Sendable (String) -> String?

    let selection: TPMSelection
    let keyBackend: KeyBackend?
    let probe: Probe

    /// dlopen: the library stays loaded, as the command that needs it would keep it.
    static let dlopenProbe: Probe = { name in
        guard dlopen(name, RTLD_LAZY | RTLD_LOCAL) == nil else { return nil }
        return dlerror().map { String(cString: $0) } ?? "cannot be loaded"
    }

    func checks() -> [DoctorCheck] {
        [tss(), tcti(), curl(), qrencode()]
    }

    private var tpmProblem: DoctorVerdict { keyBackend == .tpm ? .fail : .warn }

    func tss() -> DoctorCheck {
        let id = "library.tss2-esys", title = "TPM software stack (tpm2-tss)"
        let missing = TPMSoftwareStack.libraries.compactMap { name in probe(name).map { "\(name): \($0)" } }
        guard !missing.isEmpty else {
            return DoctorCheck(id, title, .pass, Self.listed(TPMSoftwareStack.libraries) + " load")
        }
        let effect = keyBackend == .tpm ? "the device key is in the TPM: no command can sign" : "devtrust can use no TPM (software keys work)"
        return DoctorCheck(id, title, tpmProblem, "cannot load " + missing.joined(separator: "; ") + ": " + effect,
                           fix: "sudo apt-get install " + TPMSoftwareStack.packages.joined(separator: " "))
    }

    /// The TCTI module of each TCTI devtrust would try; the first one's is what counts.
    func tcti() -> DoctorCheck {
        let id = "library.tcti", title = "TPM connection module (TCTI)"
        var found = [String](), missing = [(configuration: String, library: String, reason: String)]()
        for configuration in selection.candidates {
            let library = TPMSoftwareStack.tctiLibrary(configuration)
            if let reason = probe(library) { missing.append((configuration, library, reason)) } else { found.append("\(library) (for \(configuration))") }
        }
        guard let first = selection.candidates.first, let absent = missing.first, absent.configuration == first else {
            let fallbacks = missing.map { "\($0.library) (for \($0.configuration), tried next) is not installed" }
            return DoctorCheck(id, title, .pass, (Self.listed(found) + " loads" + (fallbacks.isEmpty ? "" : "; " + fallbacks.joined(separator: "; "))))
        }
        let effect = keyBackend == .tpm ? "the device key's TPM cannot be reached" : "devtrust cannot reach a TPM through it"
        let package = TPMSoftwareStack.tctiPackage(first)
        let fix = TPMSoftwareStack.tctiName(first) == "tabrmd" ? "sudo apt-get install libtss2-tcti-tabrmd0 tpm2-abrmd"
            : package.map { "sudo apt-get install \($0)" } ?? "check the library path given in --tcti"
        return DoctorCheck(id, title, tpmProblem, "cannot load \(absent.library) (for \(first)): \(absent.reason): \(effect)", fix: fix)
    }

    func curl() -> DoctorCheck {
        let id = "library.libcurl", title = "libcurl (HTTPS)"
        let name = CurlHTTPClient.libraryName
        guard let reason = probe(name) else { return DoctorCheck(id, title, .pass, "\(name) loads") }
        return DoctorCheck(id, title, .warn,
                           "cannot load \(name): \(reason): register, login, access-token refreshes, logout and the clock checks here cannot reach a server; token, pubkey, status and the other offline commands work",
                           fix: "sudo apt-get install libcurl4")
    }

    func qrencode() -> DoctorCheck {
        let id = "library.libqrencode", title = "libqrencode (QR codes)"
        let name = DEVTRUST_QRENCODE_LIBRARY
        guard let reason = probe(name) else { return DoctorCheck(id, title, .pass, "\(name) loads") }
        return DoctorCheck(id, title, .warn,
                           "cannot load \(name): \(reason): login --device-code shows the code and its URL without a QR code",
                           fix: "sudo apt-get install libqrencode4")
    }

    /// `a`, `a and b`, `a, b and c`.
    private static func listed(_ items: [String]) -> String {
        items.count > 1 ? items.dropLast().joined(separator: ", ") + " and " + items.last! : items.joined()
    }
}
