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

    /// Loads the key, runs `body`, and flushes what it loaded, whatever happens.
    func withLoadedKey<Result>(_ context: TPMContext, _ body: (ESYS_TR) throws(TPMError) -> Result) throws(TPMError) -> Result {
        let (parent, key) = try loadedKey(context)
        defer {
            context.flush(key)
            parent.release(context)
        }
        return try body(key)
    }

    /// The key loaded under its parent (both to be released by the caller),
    /// recovering a parent that is missing or was replaced where that is safe.
    private func loadedKey(_ context: TPMContext) throws(TPMError) -> (ParentObject, ESYS_TR) {
        var parent = try parentObject(context)
        do {
            return (parent, try context.load(keyFile, parent: parent.object))
        } catch let TPMError.commandFailed(_, code) where code.tpmCode == TPMResponseCode.handle {
            parent.release(context)
            parent = try restoredStorageRootKey(context)
        } catch .keyDoesNotLoad(let code) {
            let parentName = try? context.name(of: parent.object)
            parent.release(context)
            parent = try parentAfterRefusal(context, parentName: parentName, code: code)
        } catch {
            parent.release(context)
            throw error
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
        guard keyFile.parent != TPMHandle.owner, let parentMetadata else {
            let pinned = try pinnedParentName(context)
            let parent = try parentObject(context)
            if let pinned, try context.name(of: parent.object) != pinned {
                parent.release(context)
                throw .storageRootKeyChanged
            }
            return parent
        }
        let current: ESYS_TR
        if let object = try context.persistentObject(keyFile.parent) {
            current = object
        } else {
            return try restoredStorageRootKey(context)
        }
        // ESAPI holds one object per handle: read the TPM's, then the recorded one.
        let currentName = Result { () throws(TPMError) in try context.name(of: current) }
        context.close(current)
        guard try currentName.get() == pinnedParentName(context) else {
            return try parentAfterRefusal(context, parentName: nil, code: nil)
        }
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
        guard let object = try context.persistentObject(keyFile.parent) else { return try restoredStorageRootKey(context) }
        return ParentObject(object: object, isTransient: false)
    }

    /// The name of the parent recorded at init, or nil when none was.
    private func pinnedParentName(_ context: TPMContext) throws(TPMError) -> [UInt8]? {
        guard let parentMetadata else { return nil }
        let pinned = try context.deserialize(parentMetadata)
        defer { context.close(pinned) }
        return try context.name(of: pinned)
    }

    /// The standard storage root key is gone from its handle (another program,
    /// or an older devtrust's `reset`, evicted it). The TPM derives the same
    /// key from its owner seed every time, so devtrust creates it again and, if
    /// its name is the recorded one, makes it persistent again: the device key
    /// was never lost. A different name means the seed changed: the TPM was cleared.
    private func restoredStorageRootKey(_ context: TPMContext) throws(TPMError) -> ParentObject {
        let handle = keyFile.parent
        guard handle == TPMHandle.storageRootKey else { throw .parentMissing(handle: handle) }
        let primary = try context.createStorageRootKey()
        do throws(TPMError) {
            if let pinned = try pinnedParentName(context), try context.name(of: primary) != pinned { throw TPMError.storageRootKeyChanged }
        } catch {
            context.flush(primary)
            throw error
        }
        do {
            let persistent = try context.persist(primary, at: handle)
            context.flush(primary)
            notices?.add("the TPM had no storage root key at \(TPMHandle.format(handle)) any more (another program removed it); devtrust recreated it (the TPM derives the same key from its seed) and made it persistent again")
            return ParentObject(object: persistent, isTransient: false)
        } catch let error where !error.isConnectionLost {
            notices?.add("the TPM has no storage root key at \(TPMHandle.format(handle)) any more, and devtrust cannot make it persistent again (\(error)); it signs through a copy it recreates for every signature (CreatePrimary: 50-500 ms on real TPMs) until someone does: tpm2_createprimary -C o -g sha256 -G ecc256:aes128cfb -c srk.ctx && tpm2_evictcontrol -C o -c srk.ctx \(TPMHandle.format(handle))")
            return ParentObject(object: primary, isTransient: true)
        }
    }

    /// The TPM refuses the blob under its parent (`code`), or the object at the
    /// parent's handle is not the recorded one (`code` nil). When this TPM still
    /// derives the recorded SRK, another program replaced the persistent one:
    /// the key is not lost, and a transient copy of the SRK is returned to load
    /// it under. Otherwise the error says whether the TPM was cleared (or the
    /// keystore is another machine's).
    private func parentAfterRefusal(_ context: TPMContext, parentName: [UInt8]?, code: TPMResponseCode?) throws(TPMError) -> ParentObject {
        let lost: TPMError = code.map { .keyDoesNotLoad(code: $0) } ?? .storageRootKeyChanged
        guard let pinned = try pinnedParentName(context) else { throw lost }
        if keyFile.parent == TPMHandle.owner { throw parentName == pinned ? lost : .storageRootKeyChanged }
        if code != nil {
            guard let current = try context.persistentObject(keyFile.parent) else { throw .parentMissing(handle: keyFile.parent) }
            let currentName = Result { () throws(TPMError) in try context.name(of: current) }
            context.close(current)
            guard try currentName.get() != pinned else { throw lost }
        }
        guard keyFile.parent == TPMHandle.storageRootKey else { throw .parentReplaced(handle: keyFile.parent) }
        let standard = try context.createStorageRootKey()
        guard (try? context.name(of: standard)) == pinned else {
            context.flush(standard)
            throw lost
        }
        notices?.add(TPMError.parentReplaced(handle: keyFile.parent).description
            + " Until then devtrust signs through a copy of it that it recreates for every signature (CreatePrimary: 50-500 ms on real TPMs).")
        return ParentObject(object: standard, isTransient: true)
    }
}

/// What the TPM backend did on its own that the user should know; the
/// command line prints them after the command.
public final class TPMNotices: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    func add(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    /// The notices so far, removed from here.
    public func drain() -> [String] {
        lines.withLock { lines in
            defer { lines = [] }
            return lines
        }
    }
}
