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

    public init(tcti: String, manufacturer: String, firmwareVersion: String) {
        self.tcti = tcti
        self.manufacturer = manufacturer
        self.firmwareVersion = firmwareVersion
    }
}

/// Creating, adopting and checking device keys in the TPM.
public enum TPMKeyProvisioner {
    /// Where devtrust keeps the storage root key its keys are made under, in
    /// order: the conventional handle, then the TCG's handle for an ECC SRK.
    static let parentHandles = [TPMHandle.storageRootKey, TPMHandle.eccStorageRootKey]

    /// Creates a P-256 signing key under a storage root key exempt from
    /// dictionary-attack lockout (a DA-protected parent would let lockout stop
    /// every signature) that devtrust could make again if it were evicted: the
    /// first of `parentHandles` that holds one, else one devtrust makes
    /// persistent at the first free one, else a transient primary from the same
    /// template; a storage key exposed to lockout only when devtrust cannot
    /// make one at all (an owner password).
    ///
    /// `previousParent`: the parent the key being replaced (`init --force`) was
    /// pinned to; devtrust says so when the TPM now shows another object there.
    public static func create(_ selection: TPMSelection, previousParent: TPMParentRecord? = nil) throws(TPMError) -> TPMProvisioning {
        let context = try TPMContext.open(selection)
        let pinned = TPMSelection(tcti: context.tctiConfiguration)
        let changed = try parentChanged(since: previousParent, context)
        func warning(_ key: TPMDeviceKey) -> [String] {
            // At the old handle now, or in the new key's own parent there.
            guard let previousParent, changed || (key.parentRecord.map { $0.handle == previousParent.handle && $0.name != previousParent.name } ?? false) else { return [] }
            return ["the storage root key at \(TPMHandle.format(previousParent.handle)) is not the one the previous key was made under: the TPM was cleared, another program replaced it, or something between devtrust and the TPM answers for it; if none of the first two, find out which before registering this key"]
        }
        var search = ParentSearch()
        for handle in parentHandles {
            guard let candidate = try search.candidate(at: handle, context) else { continue }
            do {
                let key = try makeKey(under: candidate, context, selection: pinned)
                return TPMProvisioning(key: key, createdPersistentHandle: candidate.created ? handle : nil, notes: search.notes(using: candidate) + warning(key))
            } catch .authorizationRefused where !candidate.created {
                // A password on it (the refusal did not count: the candidate is exempt from lockout).
                search.passedOver.append("the storage key at \(TPMHandle.format(handle)) has a password")
            }
        }
        var fallbacks = try search.fallbacks(context)
        var refused: UInt32?
        while !fallbacks.isEmpty {
            let fallback = fallbacks.removeFirst()
            // A storage key exposed to lockout: a refused try counts towards the TPM's
            // lockout for every user. devtrust risks at most one, and none while the
            // counter is above zero (its own earlier try, or someone else's).
            if fallback.exposed {
                let failedTries = try context.property(devtrust_TPM2_PT_LOCKOUT_COUNTER())
                guard failedTries == 0 else {
                    fallback.parent.release(context)
                    fallbacks.forEach { $0.parent.release(context) }
                    throw .exposedParentsNotTried(refused: refused, untried: [fallback.handle] + fallbacks.map(\.handle),
                                                  failedTries: failedTries, freeHandle: search.firstFreeHandle)
                }
            }
            do {
                let key = try makeKey(under: fallback, context, selection: pinned)
                fallbacks.forEach { $0.parent.release(context) }
                return TPMProvisioning(key: key, createdPersistentHandle: nil, notes: search.notes(using: fallback) + warning(key))
            } catch .authorizationRefused where fallback.exposed {
                refused = fallback.handle
            } catch {
                fallbacks.forEach { $0.parent.release(context) }
                throw error
            }
        }
        throw .exposedParentsNotTried(refused: refused, untried: [], failedTries: 1, freeHandle: search.firstFreeHandle)
    }

    /// Whether the object at the previous key's persistent parent handle is
    /// not the one it was pinned to: expected after the TPM was cleared,
    /// suspicious otherwise (the pin is trust on first use).
    private static func parentChanged(since previous: TPMParentRecord?, _ context: TPMContext) throws(TPMError) -> Bool {
        guard let previous, TPMHandle.isPersistent(previous.handle), let current = try context.persistentObject(previous.handle) else { return false }
        let name = try context.name(of: current, releasingOnError: .init(object: current, isTransient: false))
        context.close(current)
        return name != previous.name
    }

    /// A parent the key may be made under, and how it came to be chosen.
    private struct Candidate {
        let parent: TPMDeviceKey.ParentObject
        let handle: UInt32
        var created = false
        var exposed = false
    }

    /// Walks `parentHandles`, remembering what it passed over and why.
    private struct ParentSearch {
        var passedOver = [String]()
        /// The first handle that held nothing, where devtrust could not make its SRK (an owner password).
        private(set) var firstFreeHandle: UInt32?
        /// Storage keys exposed to lockout, kept open in case nothing better turns up.
        private var exposed = [(object: ESYS_TR, handle: UInt32)]()
        private var couldNotPersist: ESYS_TR?

        /// A usable parent at `handle`, existing or made persistent there; nil to go on.
        mutating func candidate(at handle: UInt32, _ context: TPMContext) throws(TPMError) -> Candidate? {
            guard couldNotPersist == nil else { return nil }
            if let existing = try context.persistentObject(handle) {
                let record = Result { () throws(TPMError) in try context.serialize(existing) }.map(TPMParentRecord.init(serialized:))
                guard case let .success(record?) = record else {
                    context.close(existing)
                    _ = try record.get()
                    passedOver.append("the object at \(TPMHandle.format(handle)) is not a key")
                    return nil
                }
                if let reason = record.unsuitability {
                    context.close(existing)
                    passedOver.append("the object at \(TPMHandle.format(handle)) cannot be the device key's parent: \(reason)")
                    return nil
                }
                // A child of another key, or a primary from a template devtrust cannot repeat, could not be made again if evicted.
                // (With an owner password devtrust cannot try, and takes it as it is.)
                let copy: (object: ESYS_TR, zeroUnique: Bool)??
                do {
                    copy = .some(try context.recreate(record))
                } catch .ownerAuthorizationRequired {
                    copy = .none
                } catch {
                    context.close(existing)
                    throw error
                }
                if case .some(nil) = copy {
                    context.close(existing)
                    passedOver.append("the storage key at \(TPMHandle.format(handle)) is not a primary key devtrust could make again if it were evicted")
                    return nil
                }
                if case let .some(made?) = copy { context.flush(made.object) }
                guard record.isLockoutExempt else {
                    passedOver.append("the storage key at \(TPMHandle.format(handle)) is not exempt from dictionary-attack lockout (no noDA), which would let any program stop devtrust's signatures")
                    exposed.append((existing, handle))
                    return nil
                }
                releaseExposed(context)
                return Candidate(parent: .init(object: existing, isTransient: false), handle: handle)
            }
            let primary: ESYS_TR
            do {
                primary = try context.createStorageRootKey()
            } catch .ownerAuthorizationRequired {
                // Go on: a later handle may hold a storage key devtrust can use.
                if firstFreeHandle == nil {
                    firstFreeHandle = handle
                    passedOver.append("the owner hierarchy has a password, so devtrust cannot make its own storage root key")
                }
                return nil
            }
            do {
                let persistent = try context.persist(primary, at: handle)
                context.flush(primary)
                releaseExposed(context)
                return Candidate(parent: .init(object: persistent, isTransient: false), handle: handle, created: true)
            } catch let error where !error.isConnectionLost {
                // Another handle would fail the same way (an owner password, a full NV).
                passedOver.append("no persistent storage root key: \(error)")
                couldNotPersist = primary
                return nil
            }
        }

        /// A better parent was found: the exposed ones are not needed.
        private mutating func releaseExposed(_ context: TPMContext) {
            exposed.forEach { context.close($0.object) }
            exposed = []
        }

        /// No handle would do: a transient primary from devtrust's template,
        /// or, when devtrust cannot make one (an owner password), the storage
        /// keys exposed to lockout it found, in order.
        mutating func fallbacks(_ context: TPMContext) throws(TPMError) -> [Candidate] {
            if let couldNotPersist {
                releaseExposed(context)
                return [Candidate(parent: .init(object: couldNotPersist, isTransient: true), handle: TPMHandle.owner)]
            }
            if firstFreeHandle == nil {
                do {
                    let primary = try context.createStorageRootKey()
                    releaseExposed(context)
                    return [Candidate(parent: .init(object: primary, isTransient: true), handle: TPMHandle.owner)]
                } catch .ownerAuthorizationRequired {
                    passedOver.append("the owner hierarchy has a password, so devtrust cannot make its own storage root key")
                }
            }
            guard !exposed.isEmpty else { throw .noStorageRootKey(freeHandle: firstFreeHandle, passedOver: passedOver) }
            defer { exposed = [] }
            return exposed.map { Candidate(parent: .init(object: $0.object, isTransient: false), handle: $0.handle, exposed: true) }
        }

        /// What `init` says about the choice.
        func notes(using candidate: Candidate) -> [String] {
            let outcome: String
            switch (candidate.handle, candidate.created, candidate.exposed) {
            case (TPMHandle.owner, _, _):
                outcome = "the key uses a transient storage root key, so every signature first recreates it (CreatePrimary: 50-500 ms on real TPMs)"
            case (_, true, _):
                outcome = "made the storage root key persistent at \(TPMHandle.format(candidate.handle))"
            case (_, _, true):
                outcome = "the key is made under the storage key at \(TPMHandle.format(candidate.handle)), which is exposed to lockout (`devtrust status` says so)"
            default:
                guard !passedOver.isEmpty else { return [] }
                outcome = "the key is made under the storage root key at \(TPMHandle.format(candidate.handle))"
            }
            return [(passedOver + [outcome]).joined(separator: "; ")]
        }
    }

    /// The key, created under `candidate` in a session salted to it, and self-tested.
    private static func makeKey(under candidate: Candidate, _ context: TPMContext, selection: TPMSelection) throws(TPMError) -> TPMDeviceKey {
        let parent = candidate.parent
        defer { parent.release(context) }
        // Trust on first use: the parent was just read from (or made by) this
        // TPM; from now on its name, recorded with the key, pins it. The
        // session salted to it authenticates the TPM's answers: the public
        // area the key is known by, and the self-test.
        let session = try context.startSaltedSession(saltedTo: parent.object)
        defer { context.flush(session) }
        let parentHandle = candidate.handle
        let keyFile = try context.createSigningKey(parent: parent.object, parentHandle: parentHandle, session: session)
        let key = try TPMDeviceKey(keyFile: keyFile, selection: selection, parentMetadata: try context.serialize(parent.object))
        try selfTest(key, context, parent: parent.object, session: session)
        return key
    }

    /// Takes a key file made elsewhere (`openssl genpkey -provider tpm2`) after
    /// checking that it is a P-256 signing key that was generated in a TPM and
    /// cannot leave it (`TSS2KeyFile.publicKey`), and that it loads and signs
    /// in this TPM, under a parent it pins from now on.
    public static func adopt(_ keyFile: TSS2KeyFile, _ selection: TPMSelection) throws(TPMError) -> TPMProvisioning {
        _ = try keyFile.publicKey()
        let context = try TPMContext.open(selection)
        let pinned = TPMSelection(tcti: context.tctiConfiguration)
        let (candidates, freeHandle) = try adoptionParents(keyFile, context)
        var untried = candidates[...]
        defer { untried.forEach { $0.parent.release(context) } }
        var refusal: TPMError?
        while let (parent, handle) = untried.popFirst() {
            defer { parent.release(context) }
            let key: TPMDeviceKey
            do {
                let session = try context.startSaltedSession(saltedTo: parent.object)
                defer { context.flush(session) }
                key = try TPMDeviceKey(keyFile: keyFile, selection: pinned, parentMetadata: try context.serialize(parent.object))
                try selfTest(key, context, parent: parent.object, session: session)
            } catch {
                // Persistent copies of the owner's primary share its template: the one that
                // loads the key is its parent. Trying another costs no lockout try (noDA).
                let isCopy = keyFile.parent == TPMHandle.owner && handle != TPMHandle.owner
                switch error {
                case .keyDoesNotLoad where isCopy, .authorizationRefused where isCopy:
                    refusal = error
                    continue
                default:
                    throw error
                }
            }
            var notes = [String]()
            if keyFile.parent == TPMHandle.owner {
                notes.append(handle == TPMHandle.owner
                    ? "the key's parent is a transient primary (0x40000001), so every signature first recreates it (CreatePrimary: 50-500 ms on real TPMs); keys made under a persistent SRK (openssl genpkey ... -pkeyopt parent:0x81000001) avoid that"
                    : "the key file names the owner hierarchy, which has a password: devtrust uses the persistent copy of the key's parent at \(TPMHandle.format(handle)), recognised by its name from now on")
            }
            if key.lockoutExposure != .none {
                notes.append("the key can be stopped by dictionary-attack lockout (it, or its parent, was made without noDA); `devtrust status` says how to make one that cannot")
            }
            return TPMProvisioning(key: key, createdPersistentHandle: nil, notes: notes)
        }
        // No persistent copy loads the key: its parent may be the one missing at the free handle.
        if let freeHandle { throw .primaryNeedsOwner(freeHandle: freeHandle, command: TPMHandle.standardStorageRootKeyCommand(freeHandle, ownerPassword: true)) }
        throw refusal ?? .parentMissing(handle: keyFile.parent)
    }

    /// The parents a key file may be under, in order: the persistent one it
    /// names; or, for the owner hierarchy, the primary made from the SRK
    /// template, or when the owner has a password (devtrust cannot make it),
    /// the persistent keys at devtrust's handles made from that template (with
    /// the first free handle).
    private static func adoptionParents(_ keyFile: TSS2KeyFile, _ context: TPMContext) throws(TPMError)
        -> (candidates: [(parent: TPMDeviceKey.ParentObject, handle: UInt32)], freeHandle: UInt32?) {
        guard keyFile.parent == TPMHandle.owner else {
            guard let object = try context.persistentObject(keyFile.parent) else { throw .parentMissing(handle: keyFile.parent) }
            return ([(.init(object: object, isTransient: false), keyFile.parent)], nil)
        }
        do {
            return ([(.init(object: try context.createStorageRootKey(), isTransient: true), TPMHandle.owner)], nil)
        } catch .ownerAuthorizationRequired {
            let found = try TPMDeviceKey.persistentCopies(context) { object throws(TPMError) in try TPMDeviceKey.hasStorageRootKeyTemplate(object, context) }
            guard found.copies.isEmpty else { return (found.copies, found.freeHandle) }
            let handle = found.freeHandle ?? TPMHandle.eccStorageRootKey
            throw .primaryNeedsOwner(freeHandle: found.freeHandle, command: TPMHandle.standardStorageRootKeyCommand(handle, ownerPassword: true))
        }
    }

    /// The self-test, with the parent checked against the name recorded at
    /// init: the key loads, the TPM holds the public area of the key file, and
    /// it signs, each answer authenticated by a session salted to that parent.
    public static func checkKeyLoads(_ key: TPMDeviceKey) throws(TPMError) {
        let context = try TPMContext.open(key.selection)
        let parent = try key.identifiedParent(context)
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

extension TPMError {
    var isConnectionLost: Bool {
        if case .connectionLost = self { return true }
        return false
    }

    /// EvictControl to a handle that holds an object already.
    var nvIndexTaken: Bool {
        if case let .commandFailed(_, code) = self { return code.tpmCode == TPMResponseCode.nvDefined }
        return false
    }
}

extension String {
    fileprivate var trimmingTrailingSpaces: String {
        String(reversed().drop(while: { $0 == " " }).reversed())
    }
}
