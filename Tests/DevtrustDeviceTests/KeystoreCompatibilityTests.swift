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
        let store = DeviceStore(keystore: Keystore(path: path))
        let state = try store.state()
        #expect(state.registrations.map { JSONValue.string($0.registrationId) } == expected["registrationIds"]?.arrayValue)
        guard case let .string(backend)? = expected["backend"] else {
            #expect(state.key == nil)
            return
        }
        let device = try store.loadKey()
        #expect(device.record.backend.rawValue == backend)
        #expect(device.key.fingerprint == expected["fingerprint"]?.stringValue)
        #expect(device.key.publicKey.spkiBase64 == expected["publicKey"]?.stringValue)
        let token = try DeviceTokenMinter(key: device.key).deviceToken(deviceId: "d", attributes: DeviceAttributes())
        let publicKey = try P256PublicKey(spki: Base64.decode(try #require(expected["publicKey"]?.stringValue)))
        _ = try ES256Verifier(publicKey: publicKey).verify(compact: token)
        if let registration = state.registrations.first {
            #expect(try RegistrationSelector.select(from: state, server: registration.server) == registration)
        }
    }
}
