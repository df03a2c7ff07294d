import CTPM2

/// A device key just made (or adopted) in the TPM, and what that took.
public struct TPMProvisioning: Sendable {
    public let key: TPMDeviceKey
    /// The persistent handle devtrust made for the parent, if it made one.
    public let createdPersistentHandle: UInt32?
    /// What the user should know (a transient parent, say).
    public let notes: [String]
}

/// What `status` shows about the TPM.
public struct TPMDescription: Equatable, Sendable {
    public let tcti: String
    public let manufacturer: String
    public let firmwareVersion: String
}

/// Creating, adopting and checking device keys in the TPM.
public enum TPMKeyProvisioner {
    /// Where devtrust keeps the storage root key its keys are made under, in
    /// order: the conventional handle, then the TCG's handle for an ECC SRK.
    static let parentHandles = [TPMHandle.storageRootKey, TPMHandle.eccStorageRootKey]

    /// Creates a P-256 signing key under a storage root key exempt from
    /// dictionary-attack lockout (a DA-protected parent would let lockout stop
    /// every signature): the first of `parentHandles` that holds one, else one
    /// devtrust makes persistent at the first free one. When it cannot make
    /// one (an owner password, a full NV), a DA-protected storage key already
    /// there, else a transient primary from the same template.
    public static func create(_ selection: TPMSelection) throws(TPMError) -> TPMProvisioning {
        let context = try TPMContext.open(selection)
        let pinned = TPMSelection(tcti: context.tctiConfiguration)
        var notes = [String]()
        let choice = try chooseParent(context, notes: &notes)
        let (parent, parentHandle, parentIsTransient) = (choice.object, choice.handle, choice.handle == TPMHandle.owner)
        defer { parentIsTransient ? context.flush(parent) : context.close(parent) }

        // Trust on first use: the parent was just read from (or made by) this
        // TPM; from now on its name, recorded with the key, pins it. The
        // session salted to it authenticates the TPM's answers: the public
        // area the key is known by, and the self-test.
        let session = try context.startSaltedSession(saltedTo: parent)
        defer { context.flush(session) }
        let keyFile = try context.createSigningKey(parent: parent, parentHandle: parentHandle, session: session)
        let key = try TPMDeviceKey(keyFile: keyFile, selection: pinned, parentMetadata: try context.serialize(parent))
        try selfTest(key, context, parent: parent, session: session)
        return TPMProvisioning(key: key, createdPersistentHandle: choice.created ? parentHandle : nil, notes: notes)
    }

    /// The parent for a new key (see `create`); `handle` is TPMHandle.owner for a transient one.
    private static func chooseParent(_ context: TPMContext, notes: inout [String]) throws(TPMError) -> (object: ESYS_TR, handle: UInt32, created: Bool) {
        var passedOver = [String]()
        var exposed: (object: ESYS_TR, handle: UInt32)?
        var transient: ESYS_TR?
        func explained(_ outcome: String) -> String {
            (passedOver + [outcome]).joined(separator: "; ")
        }
        candidates: for handle in parentHandles {
            if let existing = try context.persistentObject(handle) {
                let suitability = Result { () throws(TPMError) in try context.parentSuitability(existing) }
                switch suitability {
                case .success((true, true)):
                    if let exposed { context.close(exposed.object) }
                    if !passedOver.isEmpty { notes.append(explained("the key is made under the storage root key at \(TPMHandle.format(handle)) instead")) }
                    return (existing, handle, false)
                case .success((true, false)):
                    passedOver.append("the storage key at \(TPMHandle.format(handle)) is not exempt from dictionary-attack lockout (no noDA), which would let any program stop devtrust's signatures")
                    if exposed == nil { exposed = (existing, handle) } else { context.close(existing) }
                case .success:
                    passedOver.append("the object at \(TPMHandle.format(handle)) is not a storage key")
                    context.close(existing)
                case let .failure(error):
                    context.close(existing)
                    throw error
                }
                continue
            }
            let primary: ESYS_TR
            do {
                primary = try context.createStorageRootKey()
            } catch .ownerAuthorizationRequired where exposed != nil {
                passedOver.append("the owner hierarchy has a password, so devtrust cannot make a storage root key exempt from lockout")
                break candidates
            }
            do {
                let persistent = try context.persist(primary, at: handle)
                context.flush(primary)
                if let exposed { context.close(exposed.object) }
                notes.append(explained("made the storage root key persistent at \(TPMHandle.format(handle))"))
                return (persistent, handle, true)
            } catch let error where !error.isConnectionLost {
                // Another handle would fail the same way (an owner password, a full NV).
                passedOver.append("no persistent storage root key: \(error)")
                transient = primary
                break candidates
            }
        }
        if let exposed {
            if let transient { context.flush(transient) }
            notes.append(explained("the key is made under the storage key at \(TPMHandle.format(exposed.handle)), which is exposed to lockout (`devtrust status` says so)"))
            return (exposed.object, exposed.handle, false)
        }
        let primary: ESYS_TR
        if let transient { primary = transient } else { primary = try context.createStorageRootKey() }
        notes.append(explained("the key uses a transient storage root key instead, so every signature first recreates it (CreatePrimary: 50-500 ms on real TPMs)"))
        return (primary, TPMHandle.owner, false)
    }

    /// Takes a key file made elsewhere (`openssl genpkey -provider tpm2`) after
    /// checking that it is a P-256 signing key that was generated in a TPM and
    /// cannot leave it (`TSS2KeyFile.publicKey`), and that it loads and signs
    /// in this TPM, under a parent it pins from now on.
    public static func adopt(_ keyFile: TSS2KeyFile, _ selection: TPMSelection) throws(TPMError) -> TPMProvisioning {
        _ = try keyFile.publicKey()
        let context = try TPMContext.open(selection)
        let pinned = TPMSelection(tcti: context.tctiConfiguration)
        let parent: TPMDeviceKey.ParentObject
        if keyFile.parent == TPMHandle.owner {
            parent = TPMDeviceKey.ParentObject(object: try context.createStorageRootKey(), isTransient: true)
        } else {
            guard let object = try context.persistentObject(keyFile.parent) else { throw .parentMissing(handle: keyFile.parent) }
            parent = TPMDeviceKey.ParentObject(object: object, isTransient: false)
        }
        defer { parent.release(context) }
        let session = try context.startSaltedSession(saltedTo: parent.object)
        defer { context.flush(session) }
        let key = try TPMDeviceKey(keyFile: keyFile, selection: pinned, parentMetadata: try context.serialize(parent.object))
        try selfTest(key, context, parent: parent.object, session: session)
        let notes = keyFile.parent == TPMHandle.owner
            ? ["the key's parent is a transient primary (0x40000001), so every signature first recreates it (CreatePrimary: 50-500 ms on real TPMs); keys made under a persistent SRK (openssl genpkey ... -pkeyopt parent:0x81000001) avoid that"]
            : []
        return TPMProvisioning(key: key, createdPersistentHandle: nil, notes: notes)
    }

    /// The self-test, with the parent checked against the name recorded at
    /// init: the key loads, the TPM holds the public area of the key file, and
    /// it signs, each answer authenticated by a session salted to that parent.
    public static func checkKeyLoads(_ key: TPMDeviceKey) throws(TPMError) {
        let context = try TPMContext.open(key.selection)
        let parent = try key.authenticatedParent(context)
        defer { parent.release(context) }
        let session = try context.startSaltedSession(saltedTo: parent.object)
        defer { context.flush(session) }
        try selfTest(key, context, parent: parent.object, session: session)
    }

    private static func selfTest(_ key: TPMDeviceKey, _ context: TPMContext, parent: ESYS_TR, session: ESYS_TR) throws(TPMError) {
        let loaded = try context.load(key.keyFile, parent: parent, session: session)
        defer { context.flush(loaded) }
        guard try context.readPublic(loaded, session: session) == key.keyFile.publicArea else {
            throw .responseNotAuthentic(operation: "loading the device key: the public area the TPM holds is not the key file's")
        }
        let digest = SHA256.hash(Array("devtrust self-test".utf8))
        let signature = try context.sign(loaded, digest: digest, session: session)
        guard key.publicKey.isValidSignature(signature, for: digest) else {
            throw .unsupportedKey("a test signature by the TPM does not verify with the key's public part")
        }
    }

    public static func describe(_ selection: TPMSelection) throws(TPMError) -> TPMDescription {
        let context = try TPMContext.open(selection)
        let manufacturer = try context.property(devtrust_TPM2_PT_MANUFACTURER())
        let version1 = try context.property(devtrust_TPM2_PT_FIRMWARE_VERSION_1())
        let version2 = try context.property(devtrust_TPM2_PT_FIRMWARE_VERSION_2())
        let vendor = withUnsafeBytes(of: manufacturer.bigEndian) { bytes in
            String(decoding: bytes.filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self).trimmingTrailingSpaces
        }
        let firmware = "\(version1 >> 16).\(version1 & 0xFFFF).\(version2 >> 16).\(version2 & 0xFFFF)"
        return TPMDescription(tcti: context.tctiConfiguration, manufacturer: vendor, firmwareVersion: firmware)
    }
}

extension Result<(isStorageKey: Bool, isLockoutExempt: Bool), TPMError> {
    fileprivate var isStorageKeyButExposed: Bool {
        if case let .success(suitability) = self { return suitability.isStorageKey && !suitability.isLockoutExempt }
        return false
    }
}

extension TPMError {
    var isConnectionLost: Bool {
        if case .connectionLost = self { return true }
        return false
    }
}

extension String {
    fileprivate var trimmingTrailingSpaces: String {
        String(reversed().drop(while: { $0 == " " }).reversed())
    }
}
