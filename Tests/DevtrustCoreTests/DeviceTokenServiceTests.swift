import CDeadline
import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustPosture
import DevtrustTestSupport
import Synchronization
import Testing

/// The application core without a front end: everything it uses is given to it
/// (clock, randomness, the posture's root, the keystore, where warnings go).
@Suite struct DeviceTokenServiceTests {
    static let now: Int64 = 1_800_000_000

    /// A software key in a fresh keystore, registered with `servers`, and the service over it.
    struct Setup {
        let directory = TemporaryDirectory()
        let store: DeviceStore
        let fingerprint: String
        let configuration: Configuration
        let warnings = Warnings()

        init(servers: [String] = [], configuration: Configuration = Configuration()) throws {
            store = DeviceStore(keystore: Keystore(path: directory.file("ks")), clock: FixedClock(seconds: DeviceTokenServiceTests.now))
            guard case let .created(key, _, _) = try store.initialize(backend: .software, force: false) else { throw FixtureError("no key") }
            fingerprint = key.fingerprint
            try store.keystore.update { state, _ in
                state.registrations = servers.enumerated().map { index, server in
                    RegistrationRecord(registrationId: "id\(index)", server: server, flowType: "REGISTRATION", keyFingerprint: key.fingerprint, registeredAt: "t")
                }
            }
            self.configuration = configuration
        }

        func service(clocks: ServerClocks? = nil) -> DeviceTokenService {
            let warnings = self.warnings
            // The posture read below an empty tree: nothing of this machine's files goes into the tests' tokens.
            let posture = PostureSources(root: directory.file("root"), effectiveUserID: 1000, home: nil, xdgConfigHome: nil, cache: nil)
            return DeviceTokenService(store: store, configuration: configuration, clock: FixedClock(seconds: DeviceTokenServiceTests.now),
                                      random: CountingRandom(), serverClocks: clocks ?? ServerClocks(store: nil, reading: Self.reading, warn: { warnings.add($0) }),
                                      posture: posture, warn: { warnings.add($0) })
        }

        static let reading: @Sendable () -> BootClockReading = { BootClockReading(wall: Double(now), raw: 100, bootID: "boot") }

        func verified(_ token: String) throws -> VerifiedJWS {
            try ES256Verifier(publicKey: try store.loadKey().key.publicKey).verify(compact: token)
        }
    }

    final class Warnings: @unchecked Sendable {
        private(set) var lines = [String]()
        func add(_ line: String) { lines.append(line) }
    }

    /// A given claim (the configuration's, `--claim`) only adds a name: one the administrator's collector
    /// produced is refused, naming the claim and the collector, found a value or not; other names are added.
    @Test func aGivenClaimNeverReplacesACollectorsClaim() throws {
        let report = PostureReport(attributes: [Attribute(name: "costCenter", value: "42", source: "printed by /usr/lib/acme/posture"),
                                                Attribute(name: "lockScreen", value: nil, source: "no desktop")])
        for (configuration, added, name, source) in [
            (Configuration(claims: [(name: "costCenter", value: "7")], source: "/etc/devtrust/config.json"), [(String, String)](), "costCenter",
             "the configuration's claims (/etc/devtrust/config.json)"),
            (Configuration(), [("costCenter", "7")], "costCenter", "--claim"),
            (Configuration(), [("lockScreen", "true")], "lockScreen", "--claim"),
        ] {
            #expect(throws: GivenClaimRefusal.self) { try DeviceAttributesForKey(configuration: configuration, addedClaims: added).attributes(posture: report) }
            do {
                _ = try DeviceAttributesForKey(configuration: configuration, addedClaims: added).attributes(posture: report)
            } catch {
                #expect(error.name == name && error.source == source)
                #expect(error.classification.category == .usage && error.classification.message.contains("the claim \(name) given in \(source) is one a collector measures"))
            }
        }
        let attributes = try DeviceAttributesForKey(configuration: Configuration(claims: [(name: "site", value: "lab")]), addedClaims: [("site", "berlin"), ("floor", "3")])
            .attributes(posture: report)
        #expect(attributes.claims["costCenter"] == .string("42") && attributes.claims["site"] == .string("berlin") && attributes.claims["floor"] == .string("3"))
        #expect(attributes.claims["lockScreen"] == nil)
    }

    @Test func aTokenNamesTheChosenRegistrationAndCarriesTheClaims() throws {
        let setup = try Setup(servers: ["https://a.example/t/acme", "https://b.example"], configuration: Configuration(claims: [(name: "site", value: "lab")]))
        let token = try setup.service().deviceToken(for: .server("b.example"), addedClaims: [("floor", "3")])
        let verified = try setup.verified(token)
        #expect(verified.header["deviceId"] == .string("id1"))
        #expect(verified.claims?["iat"] == .integer(Self.now))
        #expect(verified.claims?["platform"] == .string("linux") && verified.claims?["site"] == .string("lab") && verified.claims?["floor"] == .string("3"))
        #expect(throws: DeviceError.ambiguousRegistration(servers: ["https://a.example/t/acme", "https://b.example"])) {
            try setup.service().deviceToken(for: .server(nil))
        }
        #expect(try setup.verified(try setup.service().deviceToken(for: .deviceID("any"))).header["deviceId"] == .string("any"))
    }

    /// The steps come in order, for a front end that says them; the claims' sources only then.
    @Test func theStepsAreReportedInOrder() throws {
        let setup = try Setup(servers: ["https://a.example"])
        var said = [String]()
        _ = try setup.service().deviceToken(for: .server(nil), addedClaims: [("x", "y")]) { step in
            switch step {
            case let .registrationChosen(device, selected): said.append("chosen \(selected.deviceID) \(device.record.backend.rawValue)")
            case let .attributesGathered(claimSources): said.append("sources \(claimSources.first ?? "") ... \(claimSources.last ?? "")")
            case .signing: said.append("signing")
            }
        }
        #expect(said == ["chosen id0 software", "sources claim platform: the configuration (linux) ... claim x: --claim", "signing"])
    }

    /// A token for a server whose clock was measured ahead is written in its time.
    @Test func aTokenIsWrittenInItsServersTime() throws {
        let setup = try Setup(servers: ["https://a.example:443/t/acme"])
        let clocks = ServerClocks(store: nil, reading: Setup.reading, warn: { _ in })
        clocks.observe(skewSeconds: -120, at: "https://A.example/t/acme/oauth2/token")
        let verified = try setup.verified(try setup.service(clocks: clocks).deviceToken(for: .server(nil)))
        #expect(verified.claims?["iat"] == .integer(Self.now + 120))
        #expect(try setup.verified(try setup.service(clocks: clocks).deviceData()).claims?["iat"] == .integer(Self.now))
    }

    /// A sign-in's token: without a key or a registration there, an outcome the front end words.
    @Test func aSignInGoesWithoutATokenAndSaysWhy() throws {
        let setup = try Setup(servers: ["https://idp.example/t/acme"])
        let service = setup.service()
        guard case .token = try service.signInDeviceToken(for: .server("https://idp.example/t/acme"), sendingTo: ["https://idp.example/t/acme/oauth2/authorize"]) else {
            Issue.record("no token for the registered server")
            return
        }
        #expect(try service.signInDeviceToken(for: .server("https://other.example"), sendingTo: [])
                == .withoutToken(because: .notRegistered(server: "https://other.example")))
        #expect(try service.signInDeviceToken(for: .server(nil), sendingTo: ["https://elsewhere.example/authorize"])
                == .withoutToken(because: .tokenGoesElsewhere(destination: "https://elsewhere.example", server: "https://idp.example")))
        #expect(try service.signInDeviceToken(for: nil, sendingTo: []) == .withoutToken(because: .notRegistered(server: nil)))
        let empty = DeviceStore(keystore: Keystore(path: setup.directory.file("empty")))
        let keyless = DeviceTokenService(store: empty, configuration: Configuration(), clock: FixedClock(seconds: Self.now), random: CountingRandom(),
                                         serverClocks: ServerClocks(store: nil, reading: Setup.reading, warn: { _ in }),
                                         posture: PostureSources(root: setup.directory.file("root"), effectiveUserID: 1000, home: nil, xdgConfigHome: nil, cache: nil),
                                         warn: { _ in })
        #expect(try keyless.signInDeviceToken(for: .server(nil), sendingTo: []) == .withoutToken(because: .noDeviceKey(keystore: setup.directory.file("empty"))))
    }

    /// The deadline bounds the work and is gone after it, however it ends.
    @Test func theDeadlineEndsWithTheWork() throws {
        let setup = try Setup(servers: ["https://a.example"])
        let deadline = SigningDeadline.command(error: Array("late\n".utf8), errorOnTerminal: nil, exitStatus: 6)
        #expect(deadline.seconds == SigningDeadline.commandSeconds && deadline.output == 2)
        #expect(SigningDeadline.nativeHost(reply: [1], exitStatus: 1).seconds == SigningDeadline.nativeHostSeconds)
        _ = try setup.service().deviceToken(for: .server(nil), deadline: deadline)
        #expect(throws: DeviceError.self) { try setup.service().deviceToken(for: .server("nowhere"), deadline: deadline) }
        #expect(devtrust_deadline_armed_on_this_thread() == 0, "the deadline was left armed after the work")
        // A signature is made under the deadline, which is gone after it, however the signature ends.
        let recording = ArmedWhileSigning(key: try setup.store.loadKey().key)
        let key = deadline.bounding(recording)
        #expect(try key.sign(message: [1, 2, 3]).der.count > 8 && key.fingerprint == setup.fingerprint)
        #expect(devtrust_deadline_armed_on_this_thread() == 0, "the deadline was left armed after a signature")
        let failing = deadline.bounding(ArmedWhileSigning(key: recording.key, fails: true))
        #expect(throws: ArmedWhileSigning.Failure.self) { try failing.sign(message: [1]) }
        #expect(devtrust_deadline_armed_on_this_thread() == 0, "the deadline was left armed after a failed signature")
        #expect(recording.armed.withLock { $0 } == [true])
    }

    /// A key that notes whether the deadline was armed on its thread when it was asked to sign.
    final class ArmedWhileSigning: DeviceKey {
        struct Failure: Error {}
        let key: any DeviceKey
        let fails: Bool
        let armed = Mutex<[Bool]>([])
        init(key: any DeviceKey, fails: Bool = false) {
            self.key = key
            self.fails = fails
        }
        var backend: KeyBackend { key.backend }
        var publicKey: P256PublicKey { key.publicKey }
        func sign(digest: SHA256Digest) throws -> ECDSASignature {
            armed.withLock { $0.append(devtrust_deadline_armed_on_this_thread() != 0) }
            if fails { throw Failure() }
            return try key.sign(digest: digest)
        }
    }
}
