import DevtrustDevice
import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustTestSupport
import Foundation
import Testing

/// Every keystore version devtrust ever wrote (keystore/fixtures/vN/*) still
/// loads, and its key still signs.
@Suite struct KeystoreCompatibilityTests {
    static let fixtures: [String] = {
        let root = Repository.path("keystore/fixtures")
        return ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted().flatMap { version in
            ((try? FileManager.default.contentsOfDirectory(atPath: root + "/" + version)) ?? []).sorted().map { version + "/" + $0 }
        }
    }()

    @Test func thereAreFixturesForTheCurrentVersion() {
        #expect(Self.fixtures.contains { $0.hasPrefix("v\(KeystoreFormat.currentVersion)/") })
    }

    @Test(arguments: fixtures)
    func fixtureLoadsAndSigns(fixture: String) throws {
        let directory = TemporaryDirectory()
        let path = copyKeystoreFixture(fixture, into: directory)
        let expectedBytes = try #require(FileManager.default.contents(atPath: Repository.path("keystore/fixtures/\(fixture)/expected.json")))
        let expected = try JSONParser.parse(Array(expectedBytes)).objectValue!
        // A TPM fixture comes with the swtpm state its key was made in.
        var tpm: Swtpm?
        let savedState = Repository.path("keystore/fixtures/\(fixture)/swtpm-state/tpm2-00.permall")
        if FileManager.default.fileExists(atPath: savedState) {
            guard Swtpm.shouldRun else { return }
            let state = TemporaryDirectory("swtpm-state")
            try FileManager.default.copyItem(atPath: savedState, toPath: state.file("tpm2-00.permall"))
            tpm = try Swtpm(state: state)
        }
        let store = DeviceStore(keystore: Keystore(path: path), tpm: TPMSelection(tcti: tpm?.tcti ?? "device:/nonexistent"))
        let state = try store.state()
        #expect(state.registrations.map { JSONValue.string($0.registrationId) } == expected["registrationIds"]?.arrayValue)
        guard case let .string(backend)? = expected["backend"] else {
            #expect(state.key == nil)
            return
        }
        // A recorded TCTI is read back (the store's explicit one, the fixture's swtpm, wins).
        #expect(state.key?.tcti.map(JSONValue.string) == expected["tcti"])
        let device = try store.loadKey()
        #expect(device.record.backend.rawValue == backend)
        #expect(device.key.fingerprint == expected["fingerprint"]?.stringValue)
        #expect(device.key.publicKey.spkiBase64 == expected["publicKey"]?.stringValue)
        let token = try DeviceTokenMinter(key: device.key).deviceToken(deviceId: "d", attributes: DeviceAttributes())
        let publicKey = try P256PublicKey(spki: Base64.decode(try #require(expected["publicKey"]?.stringValue)))
        _ = try ES256Verifier(publicKey: publicKey).verify(compact: token)
        if let tpm { #expect(try tpm.transientHandles().isEmpty) }
        if let signIns = expected["signIns"]?.arrayValue {
            #expect(state.signIns.map { JSONValue.string($0.clientId) } == signIns.map { $0.objectValue?["clientId"] ?? .null })
            for record in state.signIns {
                let tokens = try store.tokens(of: record)
                #expect(!tokens.accessToken.isEmpty && tokens.refreshToken != nil)
            }
        }
        if let registration = state.registrations.first {
            #expect(try RegistrationSelector.select(from: state, .server(registration.server)).registration == registration)
        }
    }
}

/// An older keystore is read as it is, and migrated by the first change only.
@Suite struct KeystoreMigrationTests {
    @Test func version1IsReadUntouchedAndMigratedOnTheFirstWrite() throws {
        let directory = TemporaryDirectory()
        let path = copyKeystoreFixture("v1/software-registered", into: directory)
        let before = try #require(directory.read("keystore/keystore.json"))
        let store = DeviceStore(keystore: Keystore(path: path))
        _ = try store.loadKey()
        _ = try store.state()
        #expect(directory.read("keystore/keystore.json") == before, "a read rewrote the keystore")

        let old = try store.state()
        try store.keystore.update { state, _ in state.tpmPersistentHandles = [] }
        #expect(directory.read("keystore/keystore.json") == before, "an update that changes nothing rewrote the keystore")
        try store.recordRegistration(RegistrationRecord(registrationId: "new", server: "https://new.example", flowType: "REGISTRATION",
                                                         keyFingerprint: old.key!.fingerprint, registeredAt: "2026-11-30T06:00:00Z"))
        let migrated = try JSONParser.parse(try #require(directory.read("keystore/keystore.json"))).objectValue!
        #expect(migrated["version"] == .integer(KeystoreFormat.currentVersion))
        #expect(migrated["signIns"] == .array([]))
        let state = try store.state()
        #expect(state.key == old.key)
        #expect(Array(state.registrations.prefix(2)) == old.registrations)
        #expect(state.registrations.count == 3)
    }
}

/// What devtrust writes matches the committed JSON Schema (checked by python3-jsonschema).
@Suite struct KeystoreSchemaTests {
    static var validatorAvailable: Bool {
        ExternalTool.python.isInstalled && (try? ExternalTool.python.run(["-c", "import jsonschema"]).status) == 0
    }

    @Test(.enabled(if: validatorAvailable || ExternalTool.isCI))
    func writtenKeystoresAndFixturesMatchTheSchema() throws {
        #expect(Self.validatorAvailable, "python3-jsonschema is required (apt-get install python3-jsonschema)")
        let directory = TemporaryDirectory()
        let keystore = Keystore(path: directory.file("ks"))
        let store = DeviceStore(keystore: keystore)
        _ = try store.initialize(backend: .software, force: false)
        try keystore.update { state, _ in
            state.registrations.append(RegistrationRecord(registrationId: "74070bae-df8c-42bf-8754-5173c237c936", server: "https://api.asgardeo.io/t/acme",
                                                          flowType: "REGISTRATION", keyFingerprint: state.key!.fingerprint, registeredAt: "2026-11-30T04:00:00Z"))
            state.tpmPersistentHandles = [0x8100_0001]
        }
        _ = try store.saveSignIn(server: "https://api.asgardeo.io/t/acme", discovery: nil, clientId: "devtrust-app", scope: "openid", method: "app-native",
                                 tokens: TokenSet(accessToken: "a", tokenType: "Bearer", refreshToken: "r", idToken: nil, scope: "openid", expiresAt: 1,
                                                  tokenEndpoint: "https://api.asgardeo.io/t/acme/oauth2/token", revocationEndpoint: nil))
        let broken = directory.write("broken.json", #"{"version":1,"key":null,"registrations":[{"registrationId":"x"}]}"#)
        let files = [keystore.manifestPath, broken] + KeystoreCompatibilityTests.fixtures.map { Repository.path("keystore/fixtures/\($0)/keystore.json") }
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/validate_keystore.py"), Repository.path("keystore/schema")] + files)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == files.count, "\(result)")
        for (line, file) in zip(lines, files) {
            if file == broken {
                #expect(line.hasPrefix("invalid "), "the validator accepted a broken record: \(line)")
            } else {
                #expect(line == "ok \(file)")
            }
        }
    }
}
