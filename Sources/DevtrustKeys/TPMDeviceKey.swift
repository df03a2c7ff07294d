import CTPM2
import Synchronization

/// A P-256 key created inside a TPM 2.0. Only its wrapped blob (a
/// `TSS2 PRIVATE KEY` file) is on disk; the private key never leaves the TPM.
///
/// Each signature opens the TPM, identifies the parent by its name (one
/// ReadPublic), loads the key under it, signs the digest and flushes every
/// transient object again, on a password session:
/// a forged Sign answer only yields a signature the server refuses, so
/// `devtrust token` pays for no session. What devtrust believes about the
/// key (its creation, its public area, the self-test) is read in an HMAC
/// session salted to the parent instead (`TPMKeyProvisioner`).
public struct TPMDeviceKey: DeviceKey {
    public let keyFile: TSS2KeyFile
    public let publicKey: P256PublicKey
    public let selection: TPMSelection
    /// ESAPI's serialization of the parent as it was at `init` (its handle,
    /// public area and name, `TPMParentRecord`): its name pins the storage root
    /// key (trust on first use), its public area is the template that makes it
    /// again. Without it (an older keystore) the parent is whatever the TPM says.
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
        if keyFile.parent != TPMHandle.owner, let parent = parentRecord, !parent.isLockoutExempt { return .parent(handle: keyFile.parent) }
        return .none
    }

    public enum LockoutExposure: Equatable, Sendable {
        case none
        case key
        case parent(handle: UInt32)
    }

    /// Loads the key, runs `body`, and flushes what it loaded, whatever happens.
    func withLoadedKey<Result>(_ context: TPMContext, _ body: (ESYS_TR) throws(TPMError) -> Result) throws(TPMError) -> Result {
        let parent = try identifiedParent(context)
        let key: ESYS_TR
        do {
            key = try context.load(keyFile, parent: parent.object)
        } catch {
            parent.release(context)
            throw error
        }
        defer {
            context.flush(key)
            parent.release(context)
        }
        return try body(key)
    }

    struct ParentObject {
        let object: ESYS_TR
        let isTransient: Bool

        func release(_ context: TPMContext) {
            if isTransient { context.flush(object) } else { context.close(object) }
        }
    }

    /// The parent, identified before anything is authorized against it (a
    /// password-protected object that another program put at the handle would
    /// count every attempt towards dictionary-attack lockout): the object at
    /// the handle when its name is the one recorded at init (then its public
    /// area, which ESAPI checked against that name, is the recorded one, and a
    /// session salted to it is salted to the pinned key), else a copy of the
    /// recorded parent made from its template. Without a record (an older
    /// keystore), whatever the TPM says is there.
    func identifiedParent(_ context: TPMContext) throws(TPMError) -> ParentObject {
        if keyFile.parent == TPMHandle.owner {
            let primary = try Self.ownerPrimary(context, record: parentRecord)
            guard let record = parentRecord, try context.name(of: primary.object, releasingOnError: primary) != record.name else { return primary }
            primary.release(context)
            throw .storageRootKeyChanged(standardTemplate: true)
        }
        switch try objectAtParentHandle(context) {
        case let .recorded(object)?: return object
        case let .other(record)?: return try replacedParentCopy(context, record)
        case nil: return try restoredParent(context)
        }
    }

    /// The names the TPM gives this key loaded under its recorded parent, worked out without a TPM
    /// command: a TPM without a resource manager whose slots are all taken cannot even read a
    /// persistent object (it is read into a slot), and that is when a copy of the key already loaded
    /// has to be found. The recorded parent is taken for a primary of the owner hierarchy, as devtrust
    /// makes its storage root keys (and the copies it signs through when another object holds their
    /// handle). Nil without a record (an older keystore) or when the names are not SHA-256 ones; also
    /// wrong, and so matching no loaded object, for a storage key that is not a primary.
    var loadedNames: TPMObjectNames? {
        guard let name = TPMObjectNames.name(ofPublicArea: keyFile.publicArea),
              let parentQualifiedName = parentRecord.flatMap({ TPMObjectNames.ownerPrimaryQualifiedName(of: $0.name) }),
              let qualifiedName = TPMObjectNames.qualifiedName(of: name, under: parentQualifiedName) else { return nil }
        return TPMObjectNames(name: name, qualifiedName: qualifiedName)
    }

    /// The primary a key file naming the owner hierarchy (0x40000001) is made
    /// under: made from the SRK template; or, when the owner hierarchy has a
    /// password, a persistent copy of it at one of devtrust's handles,
    /// recognised by the recorded name (without a record, an older keystore's:
    /// the first made from the SRK template; the Load then tells).
    static func ownerPrimary(_ context: TPMContext, record: TPMParentRecord?) throws(TPMError) -> ParentObject {
        do {
            return ParentObject(object: try context.createStorageRootKey(), isTransient: true)
        } catch .ownerAuthorizationRequired {
            let found = try persistentCopies(context) { object throws(TPMError) in
                guard let record else { return try hasStorageRootKeyTemplate(object, context) }
                return try context.name(of: object) == record.name
            }
            found.copies.dropFirst().forEach { $0.parent.release(context) }
            if let copy = found.copies.first { return copy.parent }
            // With a record, the command checks the name it makes, and says when the TPM was cleared.
            let handle = found.freeHandle ?? TPMHandle.eccStorageRootKey
            throw .primaryNeedsOwner(freeHandle: found.freeHandle,
                                     command: record?.recreationCommand(at: handle, zeroUnique: nil, ownerPassword: true)
                                         ?? TPMHandle.standardStorageRootKeyCommand(handle, ownerPassword: true))
        }
    }

    /// The persistent objects at devtrust's handles that `matches`, in order,
    /// and the first handle that holds nothing.
    static func persistentCopies(_ context: TPMContext, matching matches: (ESYS_TR) throws(TPMError) -> Bool) throws(TPMError)
        -> (copies: [(parent: ParentObject, handle: UInt32)], freeHandle: UInt32?) {
        var copies = [(parent: ParentObject, handle: UInt32)]()
        var freeHandle: UInt32?
        do {
            for handle in TPMKeyProvisioner.parentHandles {
                guard let object = try context.persistentObject(handle) else {
                    freeHandle = freeHandle ?? handle
                    continue
                }
                let candidate = ParentObject(object: object, isTransient: false)
                if try context.releasing(candidate, onError: { () throws(TPMError) in try matches(object) }) {
                    copies.append((candidate, handle))
                } else {
                    candidate.release(context)
                }
            }
        } catch {
            copies.forEach { $0.parent.release(context) }
            throw error
        }
        return (copies, freeHandle)
    }

    /// Whether `object` was made from devtrust's SRK template (whatever its unique field).
    static func hasStorageRootKeyTemplate(_ object: ESYS_TR, _ context: TPMContext) throws(TPMError) -> Bool {
        TPMParentRecord(serialized: try context.serialize(object))?.isStandardStorageRootKey == true
    }

    private enum HandleContent {
        /// The recorded parent (or, without a record, whatever is there).
        case recorded(ParentObject)
        /// Another object than the recorded parent.
        case other(TPMParentRecord)
    }

    /// What sits at the parent's persistent handle; nil when nothing does.
    private func objectAtParentHandle(_ context: TPMContext) throws(TPMError) -> HandleContent? {
        guard let current = try context.persistentObject(keyFile.parent) else { return nil }
        let object = ParentObject(object: current, isTransient: false)
        guard let record = parentRecord else { return .recorded(object) }
        if try context.name(of: current, releasingOnError: object) == record.name { return .recorded(object) }
        object.release(context)
        return .other(record)
    }

    /// The parent is gone from its handle (another program, or an older
    /// devtrust's `reset`, evicted it). The TPM derives a primary key from its
    /// template and seed, the same every time, so devtrust makes it again from
    /// the recorded public area and, when the name is the recorded one, makes
    /// it persistent again: the device key was never lost. Another name means
    /// the seed changed (the TPM was cleared) or the keystore is another machine's.
    private func restoredParent(_ context: TPMContext) throws(TPMError) -> ParentObject {
        let handle = keyFile.parent
        let primary: ESYS_TR
        /// The tpm2-tools commands that put it back, for when devtrust cannot (`ownerPassword`: with the owner's).
        let putBack: (_ ownerPassword: Bool) -> String?
        if let record = parentRecord {
            let recreated: (object: ESYS_TR, zeroUnique: Bool)?
            do {
                recreated = try context.recreate(record)
            } catch .ownerAuthorizationRequired {
                throw .parentNeedsOwner(handle: handle, command: record.recreationCommand(zeroUnique: nil, ownerPassword: true), replaced: false)
            }
            guard let recreated else { throw .storageRootKeyChanged(standardTemplate: record.isStandardStorageRootKey) }
            primary = recreated.object
            putBack = { record.recreationCommand(zeroUnique: recreated.zeroUnique, ownerPassword: $0) }
        } else {
            // An older keystore records no parent: only the standard SRK can be tried, and the Load then tells.
            guard handle == TPMHandle.storageRootKey else { throw .parentMissing(handle: handle) }
            primary = try context.createStorageRootKey()
            putBack = { TPMHandle.standardStorageRootKeyCommand(handle, ownerPassword: $0) }
        }
        do {
            let persistent = try context.persist(primary, at: handle)
            context.flush(primary)
            notices?.add("the TPM had no storage root key at \(TPMHandle.format(handle)) any more (another program removed it); devtrust recreated it (the TPM derives the same key from its seed) and made it persistent again")
            return ParentObject(object: persistent, isTransient: false)
        } catch let error where error.nvIndexTaken {
            // Another devtrust put it back first (use it), or another program put its own key there.
            context.flush(primary)
            switch try objectAtParentHandle(context) {
            case let .recorded(object)?: return object
            case let .other(record)?: return try replacedParentCopy(context, record)
            case nil: throw error
            }
        } catch let error where !error.isConnectionLost {
            var needsOwner = false
            if case .ownerAuthorizationRequired = error { needsOwner = true }
            let command = putBack(needsOwner)
            notices?.add(TPMNotice("the TPM has no storage root key at \(TPMHandle.format(handle)) any more, and devtrust cannot make it persistent again (\(error)); it signs through a copy it recreates for every signature (CreatePrimary: 50-500 ms on real TPMs) until the key is back at \(TPMHandle.format(handle))",
                                   fix: "put the storage root key back at \(TPMHandle.format(handle))" + (command.map { ": " + $0 } ?? " (made from the template recorded in keystore.json's `tpmParent`)"),
                                   degraded: true))
            return ParentObject(object: primary, isTransient: true)
        }
    }

    /// Another object sits at the parent's handle: a transient copy of the
    /// recorded parent, made from its template, with a notice of what to do.
    /// When this TPM cannot make it, the TPM was cleared or the keystore is
    /// another machine's.
    private func replacedParentCopy(_ context: TPMContext, _ record: TPMParentRecord) throws(TPMError) -> ParentObject {
        let copy: (object: ESYS_TR, zeroUnique: Bool)?
        do {
            copy = try context.recreate(record)
        } catch .ownerAuthorizationRequired {
            throw .parentNeedsOwner(handle: keyFile.parent, command: record.recreationCommand(zeroUnique: nil, ownerPassword: true), replaced: true)
        }
        guard let copy else { throw .storageRootKeyChanged(standardTemplate: record.isStandardStorageRootKey) }
        let handle = TPMHandle.format(keyFile.parent)
        let putBack = record.recreationCommand(zeroUnique: copy.zeroUnique, ownerPassword: false).map { ": " + $0 }
            ?? " (made again from the template it was made with; tpm2-tools cannot: it is an unusual one; keystore.json holds its public area, in ESAPI's serialization at `tpmParent`)"
        notices?.add(TPMNotice("the object at \(handle) is not the storage root key the device key was made under (its name differs from the one recorded at `devtrust init`): another program replaced it. The device key is not lost: devtrust signs through a copy of its storage root key that it recreates for every signature (CreatePrimary: 50-500 ms on real TPMs) until, once that program's key is moved elsewhere, the key is back at \(handle)\(putBack)",
                               fix: "find which program put its key at \(handle) and have that key moved to another handle; then put the storage root key back at \(handle)\(putBack)",
                               degraded: true))
        return ParentObject(object: copy.object, isTransient: true)
    }
}

/// Something the TPM backend did on its own that the user should know:
/// `degraded` when the key works but not as it should (slower, or until
/// something changes), with `fix`, what puts it right.
public struct TPMNotice: Sendable, Equatable {
    public let text: String
    public let fix: String?
    public let degraded: Bool

    public init(_ text: String, fix: String? = nil, degraded: Bool = false) {
        self.text = text
        self.fix = fix
        self.degraded = degraded
    }
}

/// What the TPM backend did on its own that the user should know; the
/// command line prints them after the command.
public final class TPMNotices: Sendable {
    private let notices = Mutex<[TPMNotice]>([])

    public init() {}

    func add(_ line: String) {
        add(TPMNotice(line))
    }

    func add(_ notice: TPMNotice) {
        notices.withLock { if !$0.contains(where: { $0.text == notice.text }) { $0.append(notice) } }
    }

    /// The notices' texts so far, removed from here.
    public func drain() -> [String] {
        drainNotices().map(\.text)
    }

    /// The notices so far, removed from here.
    public func drainNotices() -> [TPMNotice] {
        notices.withLock { notices in
            defer { notices = [] }
            return notices
        }
    }
}
