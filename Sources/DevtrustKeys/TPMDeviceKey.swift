import CTPM2

/// A P-256 key created inside a TPM 2.0. Only its wrapped blob (a
/// `TSS2 PRIVATE KEY` file) is on disk; the private key never leaves the TPM.
///
/// Each signature opens the TPM, loads the key under its parent, signs the
/// digest and flushes every transient object again.
public struct TPMDeviceKey: DeviceKey {
    public let keyFile: TSS2KeyFile
    public let publicKey: P256PublicKey
    public let selection: TPMSelection
    /// ESAPI's serialization of the persistent parent, so that signing needs
    /// no ReadPublic round trip; without it the parent is read from the TPM.
    public let parentMetadata: [UInt8]?

    public var backend: KeyBackend { .tpm }

    /// - Parameter validatingPoint: false only when the caller then checks the
    ///   key's fingerprint against a trusted record (as loading from the keystore does).
    public init(keyFile: TSS2KeyFile, selection: TPMSelection, parentMetadata: [UInt8]? = nil, validatingPoint: Bool = true) throws(TPMError) {
        self.keyFile = keyFile
        self.selection = selection
        self.parentMetadata = parentMetadata
        publicKey = try keyFile.publicKey(validatingPoint: validatingPoint)
    }

    public func sign(digest: SHA256Digest) throws -> ECDSASignature {
        let context = try TPMContext.open(selection)
        return try withLoadedKey(context) { key throws(TPMError) in try context.sign(key, digest: digest) }
    }

    /// Loads the key, runs `body`, and flushes what it loaded, whatever happens.
    func withLoadedKey<Result>(_ context: TPMContext, _ body: (ESYS_TR) throws(TPMError) -> Result) throws(TPMError) -> Result {
        let parent = try parentObject(context)
        defer { parent.release(context) }
        let key: ESYS_TR
        do {
            key = try context.load(keyFile, parent: parent.object)
        } catch let TPMError.commandFailed(_, code) where code.tpmCode == TPMResponseCode.handle {
            throw .parentMissing(handle: keyFile.parent)
        }
        defer { context.flush(key) }
        return try body(key)
    }

    private struct Parent {
        let object: ESYS_TR
        let isTransient: Bool

        func release(_ context: TPMContext) {
            if isTransient { context.flush(object) } else { context.close(object) }
        }
    }

    private func parentObject(_ context: TPMContext) throws(TPMError) -> Parent {
        if keyFile.parent == TPMHandle.owner {
            return Parent(object: try context.createStorageRootKey(), isTransient: true)
        }
        if let parentMetadata {
            return Parent(object: try context.deserialize(parentMetadata), isTransient: false)
        }
        guard let object = try context.persistentObject(keyFile.parent) else { throw .parentMissing(handle: keyFile.parent) }
        return Parent(object: object, isTransient: false)
    }
}
