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
