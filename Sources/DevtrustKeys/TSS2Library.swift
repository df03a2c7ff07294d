import CTPM2

/// tpm2-tss, loaded on first use (see devtrust_tpm2.h).
enum TSS2Library {
    /// The TSS functions; stable for the life of the process.
    static func load() throws(TPMError) -> UnsafePointer<devtrust_tss2> {
        var error = [CChar](repeating: 0, count: 512)
        guard let functions = devtrust_tss2_load(&error, error.count) else {
            let reason = String(decoding: error.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw .softwareStackMissing(reason: reason)
        }
        return functions
    }

    /// A marshalled TPM2B_PUBLIC, read whole; `what` names it in the error.
    static func unmarshalPublic(_ bytes: [UInt8], what: String) throws(TPMError) -> TPM2B_PUBLIC {
        let tss = try load().pointee
        var value = TPM2B_PUBLIC()
        var offset = 0
        let rc = bytes.withUnsafeBufferPointer { tss.Tss2_MU_TPM2B_PUBLIC_Unmarshal($0.baseAddress, $0.count, &offset, &value) }
        guard rc == 0, offset == bytes.count else { throw .unsupportedKey("\(what) is not a TPM2B_PUBLIC") }
        return value
    }
}

/// The libraries of tpm2-tss devtrust loads, by the names it loads them by
/// (devtrust_tpm2.h), and the Debian packages that install them: what
/// `devtrust doctor` probes, and what an error tells the user to install.
public enum TPMSoftwareStack {
    public static let libraries = [DEVTRUST_TSS2_ESYS_LIBRARY, DEVTRUST_TSS2_TCTILDR_LIBRARY, DEVTRUST_TSS2_MU_LIBRARY, DEVTRUST_TSS2_RC_LIBRARY]
    public static let packages = ["libtss2-esys-3.0.2-0", "libtss2-tctildr0", "libtss2-mu0", "libtss2-rc0"]

    /// Why the TSS cannot be used, as every command loads it (the libraries and
    /// every function devtrust calls in them), or nil when it loads.
    public static func loadProblem() -> String? {
        do {
            _ = try TSS2Library.load()
            return nil
        } catch {
            if case let .softwareStackMissing(reason) = error { return reason }
            return error.description
        }
    }

    /// The TCTI's name in a configuration `NAME[:CONF]`.
    public static func tctiName(_ configuration: String) -> String {
        String(configuration.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// The library tpm2-tss's TCTI loader opens for a configuration: `libtss2-tcti-NAME.so.0`,
    /// or the name itself when it is a library's file name or path.
    public static func tctiLibrary(_ configuration: String) -> String {
        let name = tctiName(configuration)
        return name.contains("/") || name.split(separator: ".").contains("so") ? name : "libtss2-tcti-\(name).so.0"
    }

    /// The Debian package of a TCTI's library (tabrmd's comes with tpm2-abrmd); nil for a library path.
    public static func tctiPackage(_ configuration: String) -> String? {
        let name = tctiName(configuration)
        return tctiLibrary(configuration) == name ? nil : "libtss2-tcti-\(name)0"
    }
}
