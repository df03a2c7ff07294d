import CTPM2
import Synchronization

/// A P-256 key created inside a TPM 2.0. Only its wrapped blob (a
/// `TSS2 PRIVATE KEY` file) is on disk; the private key never leaves the TPM.
///
/// Each signature opens the TPM, loads the key under its parent, signs the
/// digest and flushes every transient object again, on a password session:
/// a forged Sign answer only yields a signature the server refuses, so
/// `devtrust token` pays for no session. What devtrust believes about the
/// key (its creation, its public area, the self-test) is read in an HMAC
/// session salted to the parent instead (`TPMKeyProvisioner`).
public struct TPMDeviceKey: DeviceKey {
    public let keyFile: TSS2KeyFile
    public let publicKey: P256PublicKey
    public let selection: TPMSelection
    /// ESAPI's serialization of the parent as it was at `init` (its handle,
    /// public area and name): signing needs no ReadPublic round trip, and its
    /// name pins the storage root key (trust on first use). Without it the
    /// parent is read from the TPM.
    public let parentMetadata: [UInt8]?
    /// Where the key says what it did on its own (it recreated a missing
    /// storage root key, say), for the command line to print.
    public let notices: TPMNotices?

    public var backend: KeyBackend { .tpm }

    /// - Parameter validatingPoint: false only when the caller then checks the
    ///   key's fingerprint against a trusted record (as loading from the keystore does).
    public init(keyFile: TSS2KeyFile, selection: TPMSelection, parentMetadata: [UInt8]? = nil, validatingPoint: Bool = true,
                notices: TPMNotices? = nil) throws(TPMError) {
        self.keyFile = keyFile
        self.selection = selection
        self.parentMetadata = parentMetadata
        self.notices = notices
        publicKey = try keyFile.publicKey(validatingPoint: validatingPoint)
    }

    public func sign(digest: SHA256Digest) throws -> ECDSASignature {
        let context = try TPMContext.open(selection)
        return try withLoadedKey(context) { key throws(TPMError) in try context.sign(key, digest: digest) }
    }

    /// The parent recorded at init, when there is one.
    public var parentRecord: TPMParentRecord? { parentMetadata.flatMap(TPMParentRecord.init(serialized:)) }

    /// Whether something else can stop this key from signing through
    /// dictionary-attack lockout: the key, or the parent it loads under, is not
    /// exempt (noDA). Read from the key file and the record, without the TPM.
    public var lockoutExposure: LockoutExposure {
        if !keyFile.isLockoutExempt { return .key }
        if let parent = parentRecord, parent.handle != TPMHandle.owner, !parent.isLockoutExempt { return .parent(handle: parent.handle) }
        return .none
    }

    public enum LockoutExposure: Equatable, Sendable {
        case none
        case key
        case parent(handle: UInt32)
    }

    /// Loads the key, runs `body`, and flushes what it loaded, whatever happens.
    func withLoadedKey<Result>(_ context: TPMContext, _ body: (ESYS_TR) throws(TPMError) -> Result) throws(TPMError) -> Result {
        let (parent, key) = try loadedKey(context)
        defer {
            context.flush(key)
            parent.release(context)
        }
        return try body(key)
    }

    /// The key loaded under its parent (both for the caller to release),
    /// recovering a parent that is missing or was replaced where that is safe.
    private func loadedKey(_ context: TPMContext) throws(TPMError) -> (ParentObject, ESYS_TR) {
        var parent = try parentObject(context)
        do {
            return (parent, try context.load(keyFile, parent: parent.object))
        } catch {
            parent.release(context)
            switch error {
            case let .commandFailed(_, code) where code.tpmCode == TPMResponseCode.handle:
                parent = try restoredParent(context)
            case .keyDoesNotLoad, .lockout:
                parent = try parentAfterRefusal(context, refusal: error)
            default:
                throw error
            }
        }
        do {
            return (parent, try context.load(keyFile, parent: parent.object))
        } catch {
            parent.release(context)
            throw error
        }
    }

    /// The parent, authenticated: the persistent one must be the object whose
    /// name was recorded at init, the transient one must derive to that name.
    /// The caller salts a session to the returned object (the recorded one,
    /// whatever the TPM claims), so answers in it come from the TPM that owns it.
    func authenticatedParent(_ context: TPMContext) throws(TPMError) -> ParentObject {
        guard keyFile.parent != TPMHandle.owner, let parentMetadata, let record = parentRecord else {
            let pinned = parentRecord?.name
            let parent = try parentObject(context)
            if let pinned, try context.name(of: parent.object) != pinned {
                parent.release(context)
                throw .storageRootKeyChanged(standardTemplate: true)
            }
            return parent
        }
        guard let current = try context.persistentObject(keyFile.parent) else { return try restoredParent(context) }
        // ESAPI holds one object per handle: read the TPM's, then the recorded one.
        let currentName = Result { () throws(TPMError) in try context.name(of: current) }
        context.close(current)
        guard try currentName.get() == record.name else { return try replacedParentCopy(context, record, otherwise: .storageRootKeyChanged(standardTemplate: record.isStandardStorageRootKey)) }
        return ParentObject(object: try context.deserialize(parentMetadata), isTransient: false)
    }

    struct ParentObject {
        let object: ESYS_TR
        let isTransient: Bool

        func release(_ context: TPMContext) {
            if isTransient { context.flush(object) } else { context.close(object) }
        }
    }

    private func parentObject(_ context: TPMContext) throws(TPMError) -> ParentObject {
        if keyFile.parent == TPMHandle.owner {
            return ParentObject(object: try context.createStorageRootKey(), isTransient: true)
        }
        if let parentMetadata {
            return ParentObject(object: try context.deserialize(parentMetadata), isTransient: false)
        }
        guard let object = try context.persistentObject(keyFile.parent) else { return try restoredParent(context) }
        return ParentObject(object: object, isTransient: false)
    }

    /// The parent is gone from its handle (another program, or an older
    /// devtrust's `reset`, evicted it). The TPM derives a primary key from its
    /// template and seed, the same every time, so devtrust makes it again from
    /// the recorded public area and, when the name is the recorded one, makes
    /// it persistent again: the device key was never lost. Another name means
    /// the seed changed (the TPM was cleared).
    private func restoredParent(_ context: TPMContext) throws(TPMError) -> ParentObject {
        let handle = keyFile.parent
        let primary: ESYS_TR
        if let record = parentRecord {
            guard let recreated = try context.recreate(record) else { throw .storageRootKeyChanged(standardTemplate: record.isStandardStorageRootKey) }
            primary = recreated
        } else {
            // An older keystore records no parent: only the standard SRK can be tried, and the Load then tells.
            guard handle == TPMHandle.storageRootKey else { throw .parentMissing(handle: handle) }
            primary = try context.createStorageRootKey()
        }
        do {
            let persistent = try context.persist(primary, at: handle)
            context.flush(primary)
            notices?.add("the TPM had no storage root key at \(TPMHandle.format(handle)) any more (another program removed it); devtrust recreated it (the TPM derives the same key from its seed) and made it persistent again")
            return ParentObject(object: persistent, isTransient: false)
        } catch .ownerAuthorizationRequired {
            notices?.add("the TPM has no storage root key at \(TPMHandle.format(handle)) any more, and the owner hierarchy has a password, so devtrust cannot make it persistent again; it signs through a copy it recreates for every signature (CreatePrimary: 50-500 ms on real TPMs). Whoever knows the password can put it back, and devtrust then uses it by itself: \(TPMHandle.standardStorageRootKeyCommand(handle, ownerPassword: true))")
            return ParentObject(object: primary, isTransient: true)
        } catch let error where !error.isConnectionLost {
            notices?.add("the TPM has no storage root key at \(TPMHandle.format(handle)) any more, and devtrust cannot make it persistent again (\(error)); it signs through a copy it recreates for every signature (CreatePrimary: 50-500 ms on real TPMs) until the key is back at \(TPMHandle.format(handle))")
            return ParentObject(object: primary, isTransient: true)
        }
    }

    /// The TPM refused to load the key under its parent (`refusal`: the blob
    /// does not load, or lockout). When the object at the parent's handle is
    /// not the recorded one, another program replaced it: a transient copy of
    /// the recorded parent is returned to load under. Otherwise the refusal
    /// stands, or says that the TPM was cleared.
    private func parentAfterRefusal(_ context: TPMContext, refusal: TPMError) throws(TPMError) -> ParentObject {
        guard let record = parentRecord else { throw refusal }
        if keyFile.parent == TPMHandle.owner {
            let standard = try context.createStorageRootKey()
            let derived = Result { () throws(TPMError) in try context.name(of: standard) }
            context.flush(standard)
            throw try derived.get() == record.name ? refusal : .storageRootKeyChanged(standardTemplate: true)
        }
        guard let current = try context.persistentObject(keyFile.parent) else { return try restoredParent(context) }
        let currentName = Result { () throws(TPMError) in try context.name(of: current) }
        context.close(current)
        guard try currentName.get() != record.name else { throw refusal }
        let lost: TPMError = refusal == .lockout ? refusal : .storageRootKeyChanged(standardTemplate: record.isStandardStorageRootKey)
        return try replacedParentCopy(context, record, otherwise: lost)
    }

    /// Another object sits at the parent's handle: a transient copy of the
    /// recorded parent, made from its template, with a notice of what to do;
    /// `otherwise` when this TPM cannot make it (cleared, or not a primary).
    private func replacedParentCopy(_ context: TPMContext, _ record: TPMParentRecord, otherwise: TPMError) throws(TPMError) -> ParentObject {
        guard let copy = try context.recreate(record) else { throw otherwise }
        notices?.add(TPMError.parentReplaced(handle: keyFile.parent).description
            + " Until then devtrust signs through a copy of it that it recreates for every signature (CreatePrimary: 50-500 ms on real TPMs).")
        return ParentObject(object: copy, isTransient: true)
    }
}

/// What the TPM backend did on its own that the user should know; the
/// command line prints them after the command.
public final class TPMNotices: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    func add(_ line: String) {
        lines.withLock { if !$0.contains(line) { $0.append(line) } }
    }

    /// The notices so far, removed from here.
    public func drain() -> [String] {
        lines.withLock { lines in
            defer { lines = [] }
            return lines
        }
    }
}
