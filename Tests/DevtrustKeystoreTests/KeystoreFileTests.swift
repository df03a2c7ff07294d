import DevtrustKeys
import DevtrustKeystore
import DevtrustTestSupport
import Foundation
import Testing

@Suite struct KeystoreFileTests {
    static func record(_ name: String = "key-0123456789abcdef.pem") -> KeyRecord {
        KeyRecord(backend: .software, file: name, fingerprint: "fp-" + name, createdAt: "2026-11-30T00:00:00Z")
    }

    static func install(_ keystore: Keystore, _ record: KeyRecord, contents: String = "KEY") throws {
        try keystore.update { state, staging in
            try staging.writeKeyFile(named: record.file, contents: Array(contents.utf8))
            state.key = record
        }
    }

    @Test func createsAPrivateDirectoryAndFiles() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("a/b/keystore"))
        #expect(try keystore.load() == nil)
        try Self.install(keystore, Self.record())
        for (path, mode) in [(keystore.path, 0o700), (keystore.manifestPath, 0o600), (keystore.path + "/key-0123456789abcdef.pem", 0o600)] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(path)")
        }
        let snapshot = try #require(try keystore.loadWithKey())
        #expect(snapshot.state.key == Self.record())
        #expect(snapshot.keyFile == Array("KEY".utf8))
    }

    /// A state whose keystore.json would be larger than a keystore reads is not written: the
    /// keystore stays as it was, readable (before, it was written, and every later read said
    /// "keystore.json is corrupt", to everyone, until a reset), and what the update staged is removed.
    @Test func aStateLargerThanAKeystoreReadsIsNotWritten() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        try Self.install(keystore, Self.record())
        try keystore.update { state, _ in
            state.registrations = [RegistrationRecord(registrationId: "r", server: "https://s", flowType: "REGISTRATION", keyFingerprint: "fp", registeredAt: "t")]
        }
        let before = try #require(FileManager.default.contents(atPath: keystore.manifestPath))
        let server = "https://idp.example/" + String(repeating: "a", count: 4000)
        #expect {
            try keystore.update { state, staging in
                try staging.writeKeyFile(named: "key-new.pem", contents: Array("NEW".utf8))
                state.key = Self.record("key-new.pem")
                state.registrations = (0..<300).map {
                    RegistrationRecord(registrationId: "r\($0)", server: server, flowType: "REGISTRATION", keyFingerprint: "fp", registeredAt: "t", uid: 1000)
                }
            }
        } throws: { error in
            guard case let .stateTooLarge(path, bytes, limit)? = error as? KeystoreError else { return false }
            return path == keystore.manifestPath && bytes > Keystore.maximumManifestBytes && limit == Keystore.maximumManifestBytes
                && (error as? KeystoreError)?.classification.message.contains("so devtrust did not write it: the keystore is as it was; forget what is no longer used") == true
        }
        #expect(FileManager.default.contents(atPath: keystore.manifestPath) == before)
        #expect(try keystore.load()?.registrations.map(\.registrationId) == ["r"])
        #expect(directory.entries("ks") == [".lock", "key-0123456789abcdef.pem", "keystore.json"])
    }

    @Test func replacingTheKeyRemovesTheOldFile() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        try Self.install(keystore, Self.record("key-old.pem"))
        try Self.install(keystore, Self.record("key-new.pem"))
        #expect(directory.entries("ks") == [".lock", "key-new.pem", "keystore.json"])
    }

    @Test func refusesExposedDirectoryAndKeyFile() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        try Self.install(keystore, Self.record())

        chmod(keystore.path, 0o755)
        #expect(throws: KeystoreError.unsafePermissions(path: keystore.path, mode: 0o40755, fix: "chmod 700 \(keystore.path)")) { try keystore.load() }
        #expect(throws: KeystoreError.self) { try Self.install(keystore, Self.record("key-x.pem")) }
        chmod(keystore.path, 0o700)

        let keyPath = keystore.path + "/key-0123456789abcdef.pem"
        chmod(keyPath, 0o640)
        #expect(throws: KeystoreError.unsafePermissions(path: keyPath, mode: 0o100640, fix: "chmod 600 \(keyPath)")) { try keystore.loadWithKey() }
        let message = KeystoreError.unsafePermissions(path: keyPath, mode: 0o100640, fix: "chmod 600 \(keyPath)").description
        #expect(message.contains("mode 640") && message.hasSuffix("Run: chmod 600 \(keyPath)"))
        chmod(keyPath, 0o600)
        _ = try keystore.loadWithKey()
    }

    @Test func refusesSymlinksInsideTheKeystore() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        try Self.install(keystore, Self.record())
        let keyPath = keystore.path + "/key-0123456789abcdef.pem"
        let elsewhere = directory.write("elsewhere", "SECRET OF SOMEONE ELSE")
        try FileManager.default.removeItem(atPath: keyPath)
        try FileManager.default.createSymbolicLink(atPath: keyPath, withDestinationPath: elsewhere)
        #expect(throws: KeystoreError.notRegularFile(path: keyPath)) { try keystore.loadWithKey() }

        let manifest = keystore.manifestPath
        try FileManager.default.moveItem(atPath: manifest, toPath: directory.file("real.json"))
        try FileManager.default.createSymbolicLink(atPath: manifest, withDestinationPath: directory.file("real.json"))
        #expect(throws: KeystoreError.notRegularFile(path: manifest)) { try keystore.load() }
    }

    @Test func aFailedUpdateChangesNothing() throws {
        struct Abort: Error {}
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        try Self.install(keystore, Self.record())
        let before = try #require(directory.read("ks/keystore.json"))
        #expect(throws: Abort.self) {
            try keystore.update { state, staging in
                try staging.writeKeyFile(named: "key-staged.pem", contents: [1, 2, 3])
                state.key = Self.record("key-staged.pem")
                state.registrations = []
                throw Abort()
            }
        }
        #expect(directory.read("ks/keystore.json") == before)
        #expect(directory.entries("ks") == [".lock", "key-0123456789abcdef.pem", "keystore.json"])
    }

    /// What a writer killed mid-way leaves: a temp file and a key file the
    /// manifest never named. Readers ignore both; the next writer removes them.
    @Test func leftoversOfACrashedWriterAreIgnoredThenCleaned() throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        try Self.install(keystore, Self.record())
        directory.write("ks/.tmp-keystore.json-4242-17", "{\"version\":1,\"key\":nu")
        directory.write("ks/.tmp-key-deadbeef.pem-4242-18", "-----BEGIN PRIV")
        directory.write("ks/key-orphan0000000000.pem", "orphan key written before the crash")
        let snapshot = try #require(try keystore.loadWithKey())
        #expect(snapshot.state.key == Self.record())
        #expect(snapshot.keyFile == Array("KEY".utf8))

        try keystore.update { state, _ in
            state.registrations.append(RegistrationRecord(registrationId: "r", server: "https://s", flowType: "REGISTRATION",
                                                          keyFingerprint: state.key!.fingerprint, registeredAt: "t"))
        }
        #expect(directory.entries("ks") == [".lock", "key-0123456789abcdef.pem", "keystore.json"])
        #expect(try keystore.load()?.registrations.count == 1)
    }

    @Test func aHeldLockTimesOut() throws {
        let directory = TemporaryDirectory()
        var keystore = Keystore(path: directory.file("ks"), lockTimeoutMilliseconds: 300)
        try Self.install(keystore, Self.record())
        let holder = open(keystore.path + "/.lock", O_RDWR)
        #expect(flock(holder, LOCK_EX) == 0)
        let start = Date()
        #expect(throws: KeystoreError.locked(path: keystore.path, waitedSeconds: 0)) {
            try keystore.update { state, _ in state.registrations = [] }
        }
        #expect(Date().timeIntervalSince(start) >= 0.3)
        close(holder)
        keystore.lockTimeoutMilliseconds = 1000
        try keystore.update { state, _ in state.registrations = [] }
    }

    @Test func concurrentWritersAreSerialised() async throws {
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        try Self.install(keystore, Self.record())
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    try keystore.update { state, _ in
                        state.registrations.append(RegistrationRecord(registrationId: "r\(index)", server: "https://s\(index)",
                                                                      flowType: "REGISTRATION", keyFingerprint: "fp", registeredAt: "t"))
                    }
                }
            }
            try await group.waitForAll()
        }
        let ids = Set(try #require(try keystore.load()).registrations.map(\.registrationId))
        #expect(ids == Set((0..<40).map { "r\($0)" }))
    }

    @Test func aFileWhereTheDirectoryShouldBeIsAnError() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("not-a-dir", "x")
        #expect(throws: KeystoreError.notDirectory(path: path)) { try Keystore(path: path).load() }
    }

    @Test func defaultLocationFollowsTheContract() {
        #expect(KeystoreLocation.resolve(explicit: "/x", environment: ["DEVTRUST_KEYSTORE": "/y"], effectiveUserID: 1000) == "/x")
        #expect(KeystoreLocation.resolve(explicit: nil, environment: ["DEVTRUST_KEYSTORE": "/y", "HOME": "/h"], effectiveUserID: 0) == "/y")
        #expect(KeystoreLocation.resolve(explicit: nil, environment: ["HOME": "/h"], effectiveUserID: 0) == "/var/lib/devtrust")
        #expect(KeystoreLocation.resolve(explicit: nil, environment: ["HOME": "/h", "XDG_DATA_HOME": "/d"], effectiveUserID: 1000) == "/d/devtrust")
        #expect(KeystoreLocation.resolve(explicit: nil, environment: ["HOME": "/h", "XDG_DATA_HOME": "relative"], effectiveUserID: 1000) == "/h/.local/share/devtrust")
        #expect(KeystoreLocation.resolve(explicit: nil, environment: [:], effectiveUserID: 1000) == nil)
    }
}
