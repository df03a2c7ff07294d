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
}
