import DevtrustEncoding
import DevtrustKeys
import DevtrustKeystore
import Synchronization

/// The device key with the keystore state it was read with.
public struct LoadedDevice: Sendable {
    public let state: KeystoreState
    public let record: KeyRecord
    public let key: any DeviceKey
}

/// Which backend `init` should use.
public enum BackendChoice: String, Sendable, CaseIterable {
    case auto, tpm, software
}

/// What `init` did.
public enum InitOutcome: Sendable {
    /// A new key; `dropped` are the registrations of the key it replaced,
    /// `notes` what the user should know (why software, a transient parent).
    case created(KeyRecord, dropped: [RegistrationRecord], notes: [String])
    case kept(KeyRecord)
}

/// What `reset` removed.
public struct ResetOutcome: Sendable {
    public let previous: KeystoreState
}

/// A device key kept loaded between uses, for a process that signs many times (the system
/// agent): used again while the keystore names the same key record, loaded again once it names
/// another. A TPM key stays loaded in the TPM (`ResidentTPMKey`): each signature is one `Sign`,
/// after a ReadPublic that checks the key is still the object at its handle. `release()` lets the
/// TPM go (the agent's stop): no transient object is left behind; one a killed agent left is taken
/// back when the key is first used.
public final class LoadedKeyCache: Sendable {
    private let entry = Mutex<(record: KeyRecord, key: any DeviceKey)?>(nil)

    public init() {}

    /// The key kept for `record`, if it is the one kept.
    func key(for record: KeyRecord) -> (any DeviceKey)? {
        entry.withLock { $0?.record == record ? $0?.key : nil }
    }

    /// Keeps `key` for `record` (a TPM key, loaded in the TPM from its first signature on), letting
    /// go of the key kept before; the key to use.
    func keep(_ key: any DeviceKey, for record: KeyRecord) -> any DeviceKey {
        let kept: any DeviceKey = (key as? TPMDeviceKey).map(ResidentTPMKey.init) ?? key
        let previous = entry.withLock { entry in
            defer { entry = (record, kept) }
            return entry?.key
        }
        (previous as? ResidentTPMKey)?.release()
        return kept
    }

    /// Flushes a TPM key from the TPM and forgets the key.
    public func release() {
        let previous = entry.withLock { entry in
            defer { entry = nil }
            return entry?.key
        }
        (previous as? ResidentTPMKey)?.release()
    }
}

/// The device's identity in one keystore: its key, whichever backend holds it,
/// and its registrations.
public struct DeviceStore: Sendable {
    /// The most registrations one user may have in a keystore (each is one server; the system
    /// agent's machine keystore holds every user's, and one user must not fill it for all).
    public static let maximumRegistrationsPerUser = 32
    /// The most registrations a keystore holds, every user's together: the system agent's machine
    /// keystore holds them all, and however many users (or uids) register, its keystore.json must
    /// stay readable. With the agent's bounds on what a registration carries (`AgentRequest`: a
    /// server of 512 bytes, an id of 128, ASCII) the largest is about 500 KB, half of what a keystore
    /// reads (`Keystore.maximumManifestBytes`). A keystore of one's own never comes near it.
    public static let maximumRegistrations = 512
    /// The most forgotten registrations a keystore remembers whose they were (`FormerRegistration`),
    /// every user's together. Past it, the oldest of the holder (uid and account) that has the most goes: a user who forgets
    /// registrations over and over pushes out only their own. With the largest registrations, the
    /// largest keystore is about 650 KB.
    public static let maximumFormerRegistrations = FormerRegistration.maximumKept

    public let keystore: Keystore
    public let clock: any Clock
    public let tpm: TPMSelection
    /// What a software key mixes into its signatures' nonces.
    public let random: any RandomSource
    /// What a TPM key did on its own while this store's keys were used.
    public let tpmNotices: TPMNotices
    /// The key as it is used once loaded: the key itself. A test in the fast tier puts a key that
    /// answers as a TPM in trouble does (lockout, busy, gone) here, in place of a TPM.
    public var keyInUse: @Sendable (any DeviceKey) -> any DeviceKey = { $0 }
    /// Whose registrations `state()` and `loadKey()` show: the keystore owner's in a keystore of
    /// one's own (all of them, but those the agent made for other users), a client's in the agent's.
    public var viewer: UInt32 { holder.uid }
    /// The viewer, and the account that has the uid now when that is known (the agent's client): a
    /// registration an account recorded is not another account's that has the uid since.
    public let holder: RegistrationHolder
    /// Where the loaded key is kept between uses (the agent), if anywhere.
    public let keyCache: LoadedKeyCache?

    public init(keystore: Keystore, clock: any Clock = SystemClock(), tpm: TPMSelection = TPMSelection(explicit: nil, environment: [:]),
                random: any RandomSource = SystemRandom(), tpmNotices: TPMNotices = TPMNotices(), viewer: UInt32? = nil,
                viewerAccount: String? = nil, keyCache: LoadedKeyCache? = nil) {
        self.keystore = keystore
        self.clock = clock
        self.tpm = tpm
        self.random = random
        self.tpmNotices = tpmNotices
        self.holder = RegistrationHolder(uid: viewer ?? keystore.ownerID, account: viewerAccount)
        self.keyCache = keyCache
    }

    /// The committed state, with the viewer's registrations only; empty when there is no keystore yet.
    public func state() throws -> KeystoreState {
        try ownView(keystore.load() ?? .empty)
    }

    /// The committed state with every user's registrations (`status` in a keystore of one's own).
    public func wholeState() throws -> KeystoreState {
        try keystore.load() ?? .empty
    }

    private func ownView(_ state: KeystoreState) -> KeystoreState {
        // A keystore of one's own holds only its owner's registrations: nothing to filter.
        guard state.registrations.contains(where: { $0.uid != nil }) || viewer != keystore.ownerID else { return state }
        return state.belonging(to: holder, keystoreOwner: keystore.ownerID)
    }

    /// The device key, ready to sign (a TPM key is not touched until it signs), with the
    /// viewer's registrations.
    public func loadKey() throws -> LoadedDevice {
        if let keyCache, let state = try keystore.load(), let record = state.key, let key = keyCache.key(for: record) {
            return LoadedDevice(state: ownView(state), record: record, key: keyInUse(key))
        }
        guard var snapshot = try keystore.loadWithKey(), let record = snapshot.state.key, var file = snapshot.keyFile else {
            throw DeviceError.noDeviceKey(keystore: keystore.path)
        }
        snapshot.keyFile = nil
        var key = try DeviceKeyFactory.load(record, file: &file, path: keystore.path + "/" + record.file, tpm: tpm(for: record),
                                            random: random, notices: tpmNotices)
        if let keyCache { key = keyCache.keep(key, for: record) }
        return LoadedDevice(state: ownView(snapshot.state), record: record, key: keyInUse(key))
    }

    /// The TPM a key is used in: `--tcti` or a TCTI variable, else the TCTI recorded with it, else the default.
    public func tpm(for record: KeyRecord?) -> TPMSelection {
        tpm.forKey(recordedTCTI: record?.tcti)
    }

    /// Has a loaded TPM key's TPM load it and sign a test digest; checks that a
    /// software key's private part belongs to its public part.
    public func check(_ device: LoadedDevice) throws {
        if let key = device.key as? TPMDeviceKey ?? (device.key as? ResidentTPMKey)?.key { try TPMKeyProvisioner.checkKeyLoads(key) }
        if let key = device.key as? SoftwareDeviceKey, !key.isConsistent {
            throw KeystoreError.corrupt(path: keystore.path + "/" + device.record.file, detail: "its private key does not belong to its public key")
        }
    }

    /// Creates (or imports) the device key unless one exists; `force` replaces
    /// it and drops the registrations made with the old key, in the same commit.
    public func initialize(backend choice: BackendChoice, force: Bool, importing: (contents: [UInt8], source: String)? = nil) throws -> InitOutcome {
        // "Keeping it" is only said of a key that loads: a damaged one is an error that names it.
        if !force, try keystore.load()?.key != nil {
            _ = try loadKey()
        }
        return try keystore.update { state, staging in
            if let existing = state.key, !force {
                if choice != .auto && choice.rawValue != existing.backend.rawValue {
                    throw DeviceError.keyExistsWithOtherBackend(existing: existing.backend.rawValue, requested: choice.rawValue)
                }
                return .kept(existing)
            }
            // A replaced key's recorded TCTI is where its replacement is made, unless the user says otherwise.
            let selection = tpm(for: state.key)
            var created = try makeKey(choice, importing: importing, replacing: state.key, in: selection)
            defer { created.file.zeroize() }
            if choice != .auto && choice.rawValue != created.key.backend.rawValue {
                throw DeviceError.importedKeyBackend(requested: choice.rawValue, found: created.key.backend.rawValue)
            }
            let fingerprint = created.key.fingerprint
            var notes = created.notes
            // The TCTI the user named is recorded with a TPM key; the default is not (it keeps its fallback to tabrmd).
            var recordedTCTI: String?
            if created.key.backend == .tpm, selection.isExplicit, let tcti = selection.candidates.first {
                if TPMSelection.isRecordable(tcti) {
                    recordedTCTI = tcti
                } else {
                    notes.append("the TCTI \(tcti) is not recorded with the key (only " + TPMSelection.recordableTCTINames.joined(separator: ", ")
                                 + " are, as they open no program or library a keystore could name): give --tcti with every command")
                }
            }
            let record = KeyRecord(backend: created.key.backend, file: KeyRecord.fileName(fingerprint: fingerprint), fingerprint: fingerprint,
                                   createdAt: Timestamp.format(secondsSinceEpoch: clock.secondsSinceEpoch()), tpmParent: created.tpmParent,
                                   tcti: recordedTCTI)
            try staging.writeKeyFile(named: record.file, contents: created.file)
            let dropped = state.registrations
            state.key = record
            state.registrations = []
            // Ids registered for the old key are nobody's danger with the new one: no token they name verifies.
            state.formerRegistrations = []
            if let handle = created.createdPersistentHandle, !state.tpmPersistentHandles.contains(handle) {
                state.tpmPersistentHandles.append(handle)
            }
            return .created(record, dropped: dropped, notes: notes)
        }
    }

    /// `previous`: the key being replaced, if any.
    private func makeKey(_ choice: BackendChoice, importing: (contents: [UInt8], source: String)?, replacing previous: KeyRecord?,
                         in tpm: TPMSelection) throws -> NewDeviceKey {
        let previousParent = previous?.tpmParent.flatMap(TPMParentRecord.init(serialized:))
        if let importing {
            return try DeviceKeyFactory.importKey(importing.contents, source: importing.source, selection: tpm, random: random)
        }
        switch choice {
        case .software:
            return try DeviceKeyFactory.createSoftwareKey(random: random)
        case .tpm:
            return try DeviceKeyFactory.createTPMKey(tpm, previousParent: previousParent)
        case .auto:
            do {
                return try DeviceKeyFactory.createTPMKey(tpm, previousParent: previousParent)
            } catch let error as TPMError where !error.isEvidenceOfTampering {
                // A TPM that is not there or cannot be used; never one whose answers may be forged.
                var key = try DeviceKeyFactory.createSoftwareKey(random: random)
                key.notes.append("\(error); using a software key")
                if previous?.backend == .tpm {
                    key.notes.append("the key this replaces was in the TPM; the new one is not (its tokens say keyProtection \"software\"): once the TPM works, `devtrust init --force --backend tpm` makes a TPM key again")
                }
                return key
            }
        }
    }

    /// Records a completed registration in one commit. It replaces an earlier
    /// registration of the same user with the same server, and is refused when the
    /// device key was replaced while the flow ran (the server registered the old key),
    /// or when the user has `maximumRegistrationsPerUser` with other servers, or the keystore
    /// holds `maximumRegistrations` (a replacement is recorded still: it adds none).
    public func recordRegistration(_ record: RegistrationRecord) throws {
        let owner = keystore.ownerID
        let user = RegistrationHolder(uid: record.owner(keystoreOwner: owner), account: record.account)
        try keystore.update { state, _ in
            guard let key = state.key, key.fingerprint == record.keyFingerprint else {
                throw DeviceError.keyChangedDuringRegistration
            }
            let replaced = state.registrations.filter { $0.belongs(to: user, keystoreOwner: owner) && RegistrationSelector.sameServer($0.server, record.server) }
            state.registrations.removeAll { $0.belongs(to: user, keystoreOwner: owner) && RegistrationSelector.sameServer($0.server, record.server) }
            guard state.registrations.filter({ $0.belongs(to: user, keystoreOwner: owner) }).count < Self.maximumRegistrationsPerUser else {
                throw DeviceError.tooManyRegistrations(limit: Self.maximumRegistrationsPerUser)
            }
            guard state.registrations.count < Self.maximumRegistrations else {
                throw DeviceError.keystoreFull(limit: Self.maximumRegistrations)
            }
            state.registrations.append(record)
            state.formerRegistrations.removeAll { $0 == FormerRegistration(record, keystoreOwner: owner) }
            Self.remember(replaced.filter { $0.registrationId != record.registrationId }, by: user, in: &state, keystoreOwner: owner)
        }
    }

    /// Forgets the registrations of `user` (the system agent's `reset` for one of its users, or root's
    /// for a uid whichever account had it): the key and every other user's registrations stay. The
    /// registrations forgotten.
    public func forgetRegistrations(of user: RegistrationHolder) throws -> [RegistrationRecord] {
        let owner = keystore.ownerID
        guard let current = try keystore.load(), current.registrations.contains(where: { $0.belongs(to: user, keystoreOwner: owner) }) else { return [] }
        return try keystore.update { state, _ in
            let forgotten = state.registrations.filter { $0.belongs(to: user, keystoreOwner: owner) }
            state.registrations.removeAll { $0.belongs(to: user, keystoreOwner: owner) }
            Self.remember(forgotten, by: user, in: &state, keystoreOwner: owner)
            return forgotten
        }
    }

    /// Keeps whose the forgotten registrations were, so that the agent records none of their ids for
    /// anyone else: those the agent recorded for a uid, and those without one, the keystore owner's
    /// (root's, registered directly in the machine keystore before the agent served it; whether a
    /// keystore will be served cannot be told from it, so a keystore of one's own keeps its owner's
    /// replaced ids too, a few dozen bytes each). Bounded: a holder (uid and account) keeps its
    /// `maximumRegistrationsPerUser` newest, so that its own churn pushes out only its own; past
    /// `maximumFormerRegistrations` in all, the oldest of the holder with the most goes.
    static func remember(_ forgotten: [RegistrationRecord], by forgetter: RegistrationHolder, in state: inout KeystoreState,
                         keystoreOwner: UInt32) {
        for var record in forgotten {
            // A record of the uid alone (an older agent's, or the owner's own) forgotten by an account of
            // that uid was that account's (it was served to it): its id stays that account's. Root naming
            // a uid knows no account: the former is then nobody's (the agent records it for no one).
            if record.account == nil, forgetter.uid == record.owner(keystoreOwner: keystoreOwner) { record.account = forgetter.account }
            let former = FormerRegistration(record, keystoreOwner: keystoreOwner)
            state.formerRegistrations.removeAll { $0 == former }
            state.formerRegistrations.append(former)
            let holder = RegistrationHolder(uid: former.uid, account: former.account)
            let held = state.formerRegistrations.indices.filter { RegistrationHolder(uid: state.formerRegistrations[$0].uid, account: state.formerRegistrations[$0].account) == holder }
            if held.count > maximumRegistrationsPerUser { state.formerRegistrations.remove(at: held[0]) }
        }
        while state.formerRegistrations.count > maximumFormerRegistrations {
            // By holder (uid and account), not by uid: a departed account's ids are not pushed out by
            // the account that has its uid now.
            var counts = [RegistrationHolder: Int]()
            for former in state.formerRegistrations { counts[RegistrationHolder(uid: former.uid, account: former.account), default: 0] += 1 }
            let most = counts.values.max() ?? 0
            // The first (oldest) of a holder with the most.
            guard let index = state.formerRegistrations.firstIndex(where: { counts[RegistrationHolder(uid: $0.uid, account: $0.account)] == most }) else { break }
            state.formerRegistrations.remove(at: index)
        }
    }

    /// Deletes the key and the registrations. It leaves the TPM's storage root
    /// key where it is: other keystores' keys, tpm2-openssl's or systemd's may
    /// depend on it, devtrust cannot know which, and it holds no secret (the
    /// TPM derives the same key from its seed every time). The device key itself
    /// was never in the TPM's memory: deleting its wrapped blob deletes it.
    public func reset() throws -> ResetOutcome {
        guard try keystore.load() != nil else { return ResetOutcome(previous: .empty) }
        return try keystore.update { state, _ in
            let previous = state
            state = KeystoreState()
            return ResetOutcome(previous: previous)
        }
    }
}
