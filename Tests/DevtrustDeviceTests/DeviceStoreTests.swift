import DevtrustDevice
import DevtrustKeys
import DevtrustKeystore
import DevtrustTestSupport
import Foundation
import Testing

@Suite struct DeviceStoreTests {
    @Test func initIsIdempotentAndForceReplacesAndForgetsRegistrations() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        let store = DeviceStore(keystore: keystore)
        guard case let .created(first, dropped, _) = try store.initialize(backend: .software, force: false) else {
            Issue.record("first init did not create a key")
            return
        }
        #expect(dropped.isEmpty)
        guard case let .kept(kept) = try store.initialize(backend: .auto, force: false) else {
            Issue.record("second init replaced the key")
            return
        }
        #expect(kept == first)
        #expect(throws: DeviceError.keyExistsWithOtherBackend(existing: "software", requested: "tpm")) {
            try store.initialize(backend: .tpm, force: false)
        }
        try keystore.update { state, _ in
            state.registrations = [RegistrationRecord(registrationId: "r", server: "https://s", flowType: "REGISTRATION",
                                                      keyFingerprint: first.fingerprint, registeredAt: "t")]
        }
        guard case let .created(second, forgotten, _) = try store.initialize(backend: .software, force: true) else {
            Issue.record("--force did not replace the key")
            return
        }
        #expect(second.fingerprint != first.fingerprint)
        #expect(forgotten.map(\.registrationId) == ["r"])
        #expect(try store.state().registrations.isEmpty)
        #expect(try store.loadKey().key.fingerprint == second.fingerprint)
        #expect(directory.entries("ks").filter { $0.hasPrefix("key-") } == [second.file])
    }

    /// The system agent's machine keystore holds every user's registrations (`uid`): a store shows a
    /// viewer only their own (a record without a uid is the keystore owner's), records one user's
    /// registration without touching another's with the same server, and keeps at most
    /// `maximumRegistrationsPerUser` for one user.
    @Test func eachUserSeesAndReplacesOnlyTheirOwnRegistrations() throws {
        let fixture = try KeyedKeystore()
        let keystore = fixture.keystore, key = fixture.key
        func record(_ id: String, _ server: String, uid: UInt32?) -> RegistrationRecord {
            RegistrationRecord(registrationId: id, server: server, flowType: "REGISTRATION", keyFingerprint: key.fingerprint, registeredAt: "t", uid: uid)
        }
        let owner = DeviceStore(keystore: keystore)
        let alice = DeviceStore(keystore: keystore, viewer: 1001), bob = DeviceStore(keystore: keystore, viewer: 1002)
        try owner.recordRegistration(record("own", "https://idp.example", uid: nil))
        try alice.recordRegistration(record("alice-1", "https://idp.example", uid: 1001))
        try bob.recordRegistration(record("bob-1", "https://idp.example", uid: 1002))
        #expect(try owner.state().registrations.map(\.registrationId) == ["own"])
        #expect(try alice.state().registrations.map(\.registrationId) == ["alice-1"])
        #expect(try bob.loadKey().state.registrations.map(\.registrationId) == ["bob-1"])
        #expect(try owner.wholeState().registrations.count == 3)
        // A user's new registration with a server replaces their own there, nobody else's.
        try alice.recordRegistration(record("alice-2", "https://IDP.example/", uid: 1001))
        #expect(try owner.wholeState().registrations.map(\.registrationId) == ["own", "bob-1", "alice-2"])
        for index in 0..<(DeviceStore.maximumRegistrationsPerUser - 1) {
            try bob.recordRegistration(record("bob-s\(index)", "https://s\(index).example", uid: 1002))
        }
        #expect(throws: DeviceError.tooManyRegistrations(limit: DeviceStore.maximumRegistrationsPerUser)) {
            try bob.recordRegistration(record("bob-over", "https://over.example", uid: 1002))
        }
        try alice.recordRegistration(record("alice-3", "https://over.example", uid: 1001))
        #expect(try alice.state().registrations.count == 2)
    }

    /// A keystore keeps at most `maximumRegistrations`, every user's together (the system agent's
    /// machine keystore holds them all): one more is refused and nothing changes; a user's new
    /// registration with a server they are registered with replaces theirs, and is recorded still.
    @Test func aKeystoreHoldsAtMostItsRegistrationsForAllUsersTogether() throws {
        let fixture = try KeyedKeystore()
        let keystore = fixture.keystore, key = fixture.key
        func record(_ id: String, _ server: String, uid: UInt32) -> RegistrationRecord {
            RegistrationRecord(registrationId: id, server: server, flowType: "REGISTRATION", keyFingerprint: key.fingerprint, registeredAt: "t", uid: uid)
        }
        let limit = DeviceStore.maximumRegistrations, perUser = DeviceStore.maximumRegistrationsPerUser
        try keystore.update { state, _ in
            state.registrations = (0..<(limit - 1)).map { record("r-\($0)", "https://s\($0 % perUser).example", uid: 2000 + UInt32($0 / perUser)) }
        }
        let alice = DeviceStore(keystore: keystore, viewer: 5000), bob = DeviceStore(keystore: keystore, viewer: 5001)
        try alice.recordRegistration(record("alice-1", "https://idp.example", uid: 5000))
        let full = try #require(FileManager.default.contents(atPath: keystore.manifestPath))
        #expect(throws: DeviceError.keystoreFull(limit: limit)) {
            try bob.recordRegistration(record("bob-1", "https://idp.example", uid: 5001))
        }
        #expect(FileManager.default.contents(atPath: keystore.manifestPath) == full)
        #expect(try bob.state().registrations.isEmpty && alice.wholeState().registrations.count == limit)
        // Alice registers again with her server: hers is replaced, the keystore holds as many as before.
        try alice.recordRegistration(record("alice-2", "https://idp.example", uid: 5000))
        #expect(try alice.state().registrations.map(\.registrationId) == ["alice-2"] && alice.wholeState().registrations.count == limit)
        #expect(DeviceError.keystoreFull(limit: limit).classification.message
                == "this keystore keeps at most \(limit) registrations, every user's together, and holds that many; nothing was recorded: "
                + "`devtrust status` lists them; `devtrust reset` forgets a user's")
    }

    /// A registration records the account that had its uid: an account given the uid after it shows
    /// and replaces none of the departed account's (a record without an account, of an agent before
    /// it, is the uid's whoever has it). Forgetting by uid alone forgets every account's.
    @Test func aUidsNewAccountSeesNoneOfTheDepartedAccounts() throws {
        let fixture = try KeyedKeystore()
        let keystore = fixture.keystore, key = fixture.key
        func record(_ id: String, account: String?) -> RegistrationRecord {
            RegistrationRecord(registrationId: id, server: "https://idp.example", flowType: "REGISTRATION", keyFingerprint: key.fingerprint,
                               registeredAt: "t", uid: 1001, account: account)
        }
        let alice = DeviceStore(keystore: keystore, viewer: 1001, viewerAccount: "alice")
        let bob = DeviceStore(keystore: keystore, viewer: 1001, viewerAccount: "bob")
        try alice.recordRegistration(record("alice-1", account: "alice"))
        #expect(try bob.state().registrations.isEmpty && alice.state().registrations.map(\.registrationId) == ["alice-1"])
        // Bob's registration with her server replaces none of hers.
        try bob.recordRegistration(record("bob-1", account: "bob"))
        #expect(try bob.loadKey().state.registrations.map(\.registrationId) == ["bob-1"])
        #expect(try alice.wholeState().registrations.map(\.registrationId) == ["alice-1", "bob-1"])
        #expect(try bob.forgetRegistrations(of: bob.holder).map(\.registrationId) == ["bob-1"])
        #expect(try alice.wholeState().registrations.map(\.registrationId) == ["alice-1"])
        // An older agent's record (no account) is the uid's, whoever has it.
        try keystore.update { state, _ in state.registrations.append(record("old-1", account: nil)) }
        #expect(try bob.state().registrations.map(\.registrationId) == ["old-1"])
        // Root forgets the uid's, every account's.
        let root = DeviceStore(keystore: keystore)
        #expect(try root.forgetRegistrations(of: RegistrationHolder(uid: 1001)).map(\.registrationId) == ["alice-1", "old-1"])
        let state = try root.wholeState()
        #expect(state.registrations.isEmpty)
        #expect(state.formerRegistrations == [FormerRegistration(registrationId: "bob-1", uid: 1001, account: "bob"),
                                             FormerRegistration(registrationId: "alice-1", uid: 1001, account: "alice"),
                                             FormerRegistration(registrationId: "old-1", uid: 1001, account: nil)])
    }

    /// Forgotten registrations are remembered as their users' (a replaced one too), 32 per account and
    /// `maximumFormerRegistrations` in all: past it the oldest of the account with the most goes, so a
    /// user who forgets over and over pushes out only their own. Recording one's own id again takes it out; a new key empties them.
    @Test func forgottenRegistrationsAreRememberedWithinABound() throws {
        let fixture = try KeyedKeystore()
        let keystore = fixture.keystore, key = fixture.key
        func record(_ id: String, _ server: String = "https://idp.example", uid: UInt32?) -> RegistrationRecord {
            RegistrationRecord(registrationId: id, server: server, flowType: "REGISTRATION", keyFingerprint: key.fingerprint, registeredAt: "t",
                               uid: uid, account: uid.map { "user\($0)" })
        }
        let owner = DeviceStore(keystore: keystore)

        let alice = DeviceStore(keystore: keystore, viewer: 1001, viewerAccount: "user1001")
        let mallory = DeviceStore(keystore: keystore, viewer: 1002, viewerAccount: "user1002")
        try alice.recordRegistration(record("alice-1", uid: 1001))
        _ = try alice.forgetRegistrations(of: alice.holder)
        let limit = DeviceStore.maximumFormerRegistrations, perUser = DeviceStore.maximumRegistrationsPerUser
        // Mallory replaces a registration of his over and over, far past the bound: he keeps his newest 32.
        for index in 0...(limit + 10) { try mallory.recordRegistration(record("m-\(index)", uid: 1002)) }
        var formers = try owner.wholeState().formerRegistrations
        #expect(formers.count == 1 + perUser)
        #expect(formers.first == FormerRegistration(registrationId: "alice-1", uid: 1001, account: "user1001"))
        #expect(formers.last == FormerRegistration(registrationId: "m-\(limit + 9)", uid: 1002, account: "user1002"))
        #expect(!formers.contains { $0.registrationId == "m-\(limit + 9 - perUser)" } && formers.contains { $0.registrationId == "m-\(limit + 10 - perUser)" })
        // 16 more accounts forget 32 each: past the 512, the oldest of those holding the most go, not Alice's one.
        for uid in UInt32(2000)..<2016 {
            let other = DeviceStore(keystore: keystore, viewer: uid, viewerAccount: "user\(uid)")
            for index in 0...perUser { try other.recordRegistration(record("u\(uid)-\(index)", uid: uid)) }
        }
        formers = try owner.wholeState().formerRegistrations
        #expect(formers.count == limit && formers.first?.registrationId == "alice-1", "\(formers.count) \(formers.prefix(2))")
        let held = Dictionary(grouping: formers, by: \.uid).mapValues(\.count)
        #expect(held.values.allSatisfy { $0 <= perUser } && held.values.filter { $0 < perUser - 2 }.count == 1, "\(held)")
        // Alice records her id again: it is a registration of hers, not a former one.
        try alice.recordRegistration(record("alice-1", uid: 1001))
        formers = try owner.wholeState().formerRegistrations
        #expect(!formers.contains { $0.registrationId == "alice-1" } && formers.count == limit - 1)
        // The keystore stays within what a keystore reads (it is read back above) and a new key empties them.
        _ = try owner.initialize(backend: .software, force: true)
        #expect(try owner.wholeState().formerRegistrations.isEmpty)
    }

    /// The keystore owner's registration, made directly (root's, in the machine keystore before the
    /// agent serves it: no uid), is remembered when it is replaced, as a former of no account: the
    /// agent records it for no one. (Not remembered, another user recorded root's replaced id through
    /// the agent, and the server took her tokens as root's device: a third review.)
    @Test func anOwnersReplacedRegistrationIsRemembered() throws {
        let fixture = try KeyedKeystore()
        let keystore = fixture.keystore, key = fixture.key
        let owner = DeviceStore(keystore: keystore)
        for id in ["own-1", "own-2"] {
            try owner.recordRegistration(RegistrationRecord(registrationId: id, server: "https://idp.example", flowType: "REGISTRATION",
                                                            keyFingerprint: key.fingerprint, registeredAt: "t", uid: nil))
        }
        #expect(try owner.wholeState().formerRegistrations == [FormerRegistration(registrationId: "own-1", uid: keystore.ownerID, account: nil)])
    }

    /// The bound is kept by holder, a uid and an account: a new account given a departed user's uid
    /// pushes out its own forgotten ids, never the departed user's. (Counted by uid, Bob's loop pushed
    /// Alice's out first, being the oldest of the uid's, and could then record her id.)
    @Test func aReusedUidPushesOutOnlyItsOwnFormerRegistrations() throws {
        let fixture = try KeyedKeystore()
        let keystore = fixture.keystore, key = fixture.key
        func record(_ id: String, account: String?) -> RegistrationRecord {
            RegistrationRecord(registrationId: id, server: "https://idp.example", flowType: "REGISTRATION", keyFingerprint: key.fingerprint,
                               registeredAt: "t", uid: 1001, account: account)
        }
        let alice = DeviceStore(keystore: keystore, viewer: 1001, viewerAccount: "alice")
        try alice.recordRegistration(record("alice-1", account: "alice"))
        _ = try DeviceStore(keystore: keystore).forgetRegistrations(of: RegistrationHolder(uid: 1001))  // root, by uid
        let bob = DeviceStore(keystore: keystore, viewer: 1001, viewerAccount: "bob")
        for index in 0...DeviceStore.maximumFormerRegistrations { try bob.recordRegistration(record("b-\(index)", account: "bob")) }
        let formers = try bob.wholeState().formerRegistrations
        #expect(formers.count == 1 + DeviceStore.maximumRegistrationsPerUser)
        #expect(formers.first == FormerRegistration(registrationId: "alice-1", uid: 1001, account: "alice"), "\(formers.prefix(2))")
        #expect(!formers.contains { $0.registrationId == "b-0" })
    }

    /// A record of a uid alone (an agent before accounts were recorded wrote them) that its user
    /// forgets is remembered as that account's; one root forgets by uid stays a former of no account.
    @Test func aRecordWithoutAnAccountIsRememberedAsItsForgettersAccount() throws {
        let fixture = try KeyedKeystore()
        let keystore = fixture.keystore, key = fixture.key
        func legacy(_ id: String, uid: UInt32) -> RegistrationRecord {
            RegistrationRecord(registrationId: id, server: "https://idp\(uid).example", flowType: "REGISTRATION", keyFingerprint: key.fingerprint,
                               registeredAt: "t", uid: uid, account: nil)
        }
        let owner = DeviceStore(keystore: keystore)
        try owner.recordRegistration(legacy("old-1001", uid: 1001))
        try owner.recordRegistration(legacy("old-1002", uid: 1002))
        _ = try DeviceStore(keystore: keystore, viewer: 1001, viewerAccount: "alice").forgetRegistrations(of: RegistrationHolder(uid: 1001, account: "alice"))
        _ = try owner.forgetRegistrations(of: RegistrationHolder(uid: 1002))
        #expect(try owner.wholeState().formerRegistrations == [FormerRegistration(registrationId: "old-1001", uid: 1001, account: "alice"),
                                                              FormerRegistration(registrationId: "old-1002", uid: 1002, account: nil)])
    }

    /// A store with a key cache (the agent) loads the key once, and again once the keystore names another.
    @Test func aCachedKeyIsUsedWhileTheKeystoreNamesIt() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        let cache = LoadedKeyCache()
        let store = DeviceStore(keystore: keystore, keyCache: cache)
        _ = try store.initialize(backend: .software, force: false)
        let first = try store.loadKey()
        // The key file is not read again while the manifest names the same key: its loss goes unnoticed then...
        let keyPath = directory.file("ks/" + first.record.file)
        let keyBytes = try #require(directory.read("ks/" + first.record.file))
        try FileManager.default.removeItem(atPath: keyPath)
        #expect(try store.loadKey().key.publicKey == first.key.publicKey)
        _ = FileManager.default.createFile(atPath: keyPath, contents: Data(keyBytes), attributes: [.posixPermissions: 0o600])
        // ...and a new key is loaded as soon as the keystore names it.
        _ = try store.initialize(backend: .software, force: true)
        let second = try store.loadKey()
        #expect(second.key.publicKey != first.key.publicKey && second.record.fingerprint == second.key.fingerprint)
    }

    @Test func noKeyIsReported() throws {
        let directory = TemporaryDirectory()
        let store = DeviceStore(keystore: Keystore(path: directory.file("ks")))
        #expect(throws: DeviceError.noDeviceKey(keystore: directory.file("ks"))) { try store.loadKey() }
        #expect(try store.reset().previous == .empty)
    }

    @Test func aSwappedKeyFileIsDetected() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        let store = DeviceStore(keystore: keystore)
        guard case let .created(record, _, _) = try store.initialize(backend: .software, force: false) else { return }
        directory.write("ks/" + record.file, try SoftwareDeviceKey.generate().pkcs8PEM())
        #expect(throws: KeystoreError.self) { try store.loadKey() }
        directory.write("ks/" + record.file, "not a key")
        do {
            _ = try store.loadKey()
            Issue.record("loaded a garbage key file")
        } catch let KeystoreError.corrupt(path, detail) {
            #expect(path == directory.file("ks/" + record.file))
            #expect(detail.contains("PKCS#8"))
        }
    }

    @Test func resetRemovesKeyAndRegistrations() throws {
        let directory = TemporaryDirectory()
        let store = DeviceStore(keystore: Keystore(path: directory.file("ks")))
        _ = try store.initialize(backend: .software, force: false)
        let removed = try store.reset()
        #expect(removed.previous.key != nil)
        #expect(try store.state() == .empty)
        #expect(directory.entries("ks") == [".lock", "keystore.json"])
    }
}

@Suite struct RegistrationSelectorTests {
    static func state(_ servers: [String], fingerprint: String = "fp") -> KeystoreState {
        KeystoreState(
            key: KeyRecord(backend: .software, file: "key-x.pem", fingerprint: "fp", createdAt: "t"),
            registrations: servers.enumerated().map { index, server in
                RegistrationRecord(registrationId: "id\(index)", server: server, flowType: "REGISTRATION", keyFingerprint: fingerprint, registeredAt: "t")
            })
    }

    @Test func picksTheOnlyOneOrTheNamedOne() throws {
        #expect(try RegistrationSelector.select(from: Self.state(["https://a.example/t/acme"]), .server(nil)).deviceID == "id0")
        let two = Self.state(["https://api.asgardeo.io/t/acme", "https://localhost:9443"])
        #expect(throws: DeviceError.ambiguousRegistration(servers: ["https://api.asgardeo.io/t/acme", "https://localhost:9443"])) {
            try RegistrationSelector.select(from: two, .server(nil))
        }
        for name in ["https://API.asgardeo.io:443/t/acme/", "api.asgardeo.io/t/acme", "api.asgardeo.io"] {
            #expect(try RegistrationSelector.select(from: two, .server(name)).deviceID == "id0", "\(name)")
        }
        #expect(try RegistrationSelector.select(from: two, .server("localhost:9443")).deviceID == "id1")
        #expect(throws: DeviceError.notRegistered(server: "https://api.asgardeo.io/t/other")) {
            try RegistrationSelector.select(from: two, .server("https://api.asgardeo.io/t/other"))
        }
        #expect(throws: DeviceError.notRegistered(server: "http://api.asgardeo.io/t/acme")) {
            try RegistrationSelector.select(from: two, .server("http://api.asgardeo.io/t/acme"))
        }
        #expect(throws: DeviceError.notRegistered(server: nil)) { try RegistrationSelector.select(from: Self.state([]), .server(nil)) }
    }

    /// --device-id names its id as given; a registration with that id only sets the clock.
    @Test func aDeviceIDIsTakenAsGivenWithItsRegistrationIfAny() throws {
        let state = Self.state(["https://a.example", "https://b.example"], fingerprint: "old")
        #expect(try RegistrationSelector.select(from: state, .deviceID("id1")) == SelectedRegistration(deviceID: "id1", registration: state.registrations[1]))
        #expect(try RegistrationSelector.select(from: state, .deviceID("other")) == SelectedRegistration(deviceID: "other", registration: nil))
    }

    /// A registration chosen from an earlier read is checked against the key now at hand.
    @Test func aChosenRegistrationMustBeOfTheKey() throws {
        let current = Self.state(["https://a.example"])
        #expect(try RegistrationSelector.select(from: current, .chosen(current.registrations[0])).registration == current.registrations[0])
        let old = Self.state(["https://a.example"], fingerprint: "old").registrations[0]
        #expect(throws: DeviceError.registrationForOtherKey(registrationId: "id0", server: "https://a.example")) {
            try RegistrationSelector.select(from: current, .chosen(old))
        }
    }

    /// A device token goes only to its registration's origin; a provider's is found below its URLs.
    @Test func destinationsMustBeOnTheRegistrationsOrigin() throws {
        let state = Self.state(["https://idp.example/t/acme", "https://idp.example/t/other"])
        let choice = RegistrationChoice.provider(destination: "https://IDP.example:443/t/acme/oauth2/authorize", providerURLs: ["https://idp.example/t/acme/oauth2/token"])
        #expect(try RegistrationSelector.select(from: state, choice, sendingTo: ["https://idp.example/t/acme/oauth2/par"]).deviceID == "id0")
        #expect(throws: DeviceError.tokenGoesElsewhere(destination: "https://par.example", server: "https://idp.example")) {
            try RegistrationSelector.select(from: state, choice, sendingTo: ["https://idp.example/x", "https://par.example/par"])
        }
        #expect(throws: DeviceError.notRegistered(server: "https://elsewhere.example")) {
            try RegistrationSelector.select(from: state, .provider(destination: "https://elsewhere.example/oauth2/authorize", providerURLs: []))
        }
    }

    @Test func aRegistrationOfAnotherKeyIsRefused() {
        #expect(throws: DeviceError.registrationForOtherKey(registrationId: "id0", server: "https://a")) {
            try RegistrationSelector.select(from: Self.state(["https://a"], fingerprint: "old"), .server(nil))
        }
    }
}

/// A keystore with a new software key, in a directory of its own (kept while the fixture is).
struct KeyedKeystore {
    let directory = TemporaryDirectory()
    let keystore: Keystore
    let key: KeyRecord

    init() throws {
        keystore = Keystore(path: directory.file("ks"))
        guard case let .created(key, _, _) = try DeviceStore(keystore: keystore).initialize(backend: .software, force: false) else {
            throw FixtureError("no key was created in \(keystore.path)")
        }
        self.key = key
    }
}
