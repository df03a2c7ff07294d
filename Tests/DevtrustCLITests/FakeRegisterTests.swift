import DevtrustEncoding
import DevtrustKeys
import DevtrustTestSupport
import Testing

/// `devtrust register` in the fast tier: in-process, against `FakeIdentityServer` on virtual time,
/// through the account step and the Device Registration step to COMPLETE. The server verifies what
/// devtrust sends (the key, the signature over its challenge, the deviceData, its time). The same
/// against the reference server over HTTP: RegisterTests, RegisterFaultTests, ClockSkewTests (`make test`).
@Suite struct FakeRegisterTests {
    static let flowPath = "/api/server/v1/flow/execute"
    /// What devtrust names the server by in what it says of its clock.
    static let origin = "https://idp.example.test"

    /// A server with a device policy: the step requires deviceData, and `claims` in it.
    static func policy(_ claims: [String: String] = [:], clockOffset: Double = 0) -> FakeIdentityServer.Settings {
        var settings = FakeIdentityServer.Settings()
        settings.deviceDataRequired = true
        settings.requiredClaims = claims
        settings.clockOffset = clockOffset
        return settings
    }

    @Test func registersThroughTheDeviceStepAndTheServerStoresTheKeyItVerified() throws {
        let setup = try FakeServerSetup()
        let result = try setup.register(["--device-model", "Test Laptop 14", "--json"])
        #expect(result.status == 0, "\(result)")
        let summary = try #require(try JSONParser.parse(result.output).objectValue)
        let device = try #require(setup.server.devices.first)
        #expect(setup.server.devices.count == 1)
        #expect(summary["registrationId"] == .string(device.registrationId) && summary["server"] == .string(setup.url), "\(summary)")
        #expect(summary["backend"] == .string("software") && summary["flowType"] == .string("REGISTRATION") && summary["replaced"] == .null)
        #expect(device.publicKey == (try setup.publicKey()))
        #expect(device.user == FakeIdentityServer.user.email && device.deviceModel == "Test Laptop 14")
        // Without a device policy, no deviceData was asked for, and none sent.
        #expect(device.claims == nil && device.deviceData == nil)
        #expect(result.stderr.contains("registering this device with \(setup.url) (flow REGISTRATION)"), "\(result.stderr)")
        #expect(result.stderr.contains("registered: this device is \(device.registrationId) at \(setup.url)"), "\(result.stderr)")
        // The keystore records the registration, at the (virtual) time it completed.
        let record = try #require(try setup.registrations().first)
        #expect(record["registrationId"] == .string(device.registrationId) && record["server"] == .string(setup.url))
        #expect(record["registeredAt"] == .string(Timestamp.format(secondsSinceEpoch: setup.time.secondsSinceEpoch())))
        // Three requests: start, the account's inputs, the device step.
        #expect(setup.server.requests.map(\.path) == Array(repeating: Self.flowPath, count: 3))
    }

    /// The policy's claims go in the deviceData, whose signature, jti and iat the server checks.
    @Test func theDevicePolicysClaimsAreSentInVerifiedDeviceData() throws {
        let setup = try FakeServerSetup(Self.policy(["lockScreen": "true", "site": "berlin"]))
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("config.json", #"{"claims":{"site":"berlin"}}"#)
        let refused = try cli.run(["register", "--server", setup.url, "--non-interactive"] + FakeIdentityServer.registrationAnswers)
        #expect(refused.status == 4, "\(refused)")
        #expect(refused.stderr.contains("DR-60004") && refused.stderr.contains("failed: lockScreen"), "\(refused.stderr)")
        #expect(refused.stderr.contains("does not meet the server's device policy"), "\(refused.stderr)")
        #expect(try setup.registrations().isEmpty && setup.server.devices.isEmpty)

        // lockScreen is measured, not given (a --claim of it is refused): GNOME's screen lock on.
        let given = try cli.run(["register", "--server", setup.url, "--non-interactive", "--claim", "lockScreen=true"] + FakeIdentityServer.registrationAnswers)
        #expect(given.status == 2 && given.stderr.contains("--claim lockScreen: lockScreen is measured by devtrust"), "\(given)")
        try setup.measuresLockScreen(true)
        let accepted = try cli.run(["register", "--server", setup.url, "--non-interactive"] + FakeIdentityServer.registrationAnswers)
        #expect(accepted.status == 0, "\(accepted)")
        let claims = try #require(setup.server.devices.first?.claims)
        #expect(claims["platform"] == .string("linux") && claims["lockScreen"] == .string("true") && claims["site"] == .string("berlin"), "\(claims)")
        #expect(claims["jti"]?.stringValue?.count == 36 && claims["iat"] == .integer(setup.time.secondsSinceEpoch()), "\(claims)")
        #expect(claims["attestationToken"] == nil)
        // The posture read below an empty tree: the key's protection is known, the machine's files are not read.
        #expect(claims["keyProtection"] == .string("software") && claims["linuxOsVersion"] == nil, "\(claims)")
    }

    /// The server's clock 100 s behind: deviceData with this machine's iat would be 100 s in its
    /// future, which it refuses. The first answer's Date header tells devtrust, which warns once and
    /// writes the deviceData in the server's time.
    @Test func aServerBehindThisClockGetsDeviceDataInItsTime() throws {
        let setup = try FakeServerSetup(Self.policy(clockOffset: -100))
        let result = try setup.register()
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("this machine's clock is 100 s ahead of \(Self.origin)'s (its Date header)"), "\(result.stderr)")
        #expect(result.stderr.contains("timedatectl set-ntp true") && result.stderr.components(separatedBy: "this machine's clock is").count == 2)
        let claims = try #require(setup.server.devices.first?.claims)
        #expect(claims["iat"] == .integer(setup.time.secondsSinceEpoch() - 100), "\(claims)")
        let status = try setup.status()
        #expect(status["registrations"]?.arrayValue?.first?.objectValue?["clockSkewSeconds"] == .integer(100), "\(status)")
    }

    /// The server's clock 400 s ahead: deviceData 400 s old when it arrives is dropped; devtrust writes it in the server's time.
    @Test func aServerAheadOfThisClockGetsDeviceDataInItsTime() throws {
        let setup = try FakeServerSetup(Self.policy(clockOffset: 400))
        let result = try setup.register()
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("400 s behind \(Self.origin)'s (its Date header): the server drops device tokens older than 5 minutes"), "\(result.stderr)")
        #expect(setup.server.devices.first?.claims?["iat"] == .integer(setup.time.secondsSinceEpoch() + 400))
    }

    /// 10 s: within what the server tolerates, so not said, but corrected (beyond 5 s); 3 s: neither.
    @Test func aSmallDifferenceIsCorrectedWithoutAWordAndATinyOneIsLeft() throws {
        for (offset, corrected) in [(-10, true), (-3, false)] {
            let setup = try FakeServerSetup(Self.policy(clockOffset: Double(offset)))
            let result = try setup.register()
            #expect(result.status == 0 && !result.stderr.contains("clock"), "\(result)")
            let now = setup.time.secondsSinceEpoch()
            #expect(setup.server.devices.first?.claims?["iat"] == .integer(corrected ? now + Int64(offset) : now), "offset \(offset)")
        }
    }

    @Test func aRefusedDeviceStepExitsFourAndRecordsNothing() throws {
        var settings = FakeIdentityServer.Settings()
        settings.deviceStepError = "DR-60001"
        let setup = try FakeServerSetup(settings)
        let result = try setup.register(["--json"])
        #expect(result.status == 4 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("DR-60001"), "\(result.stderr)")
        let error = try #require(try JSONParser.parse(String(result.stderr.split(separator: "\n").last ?? "")).objectValue?["error"]?.objectValue, "\(result.stderr)")
        #expect(error["exitCode"] == .integer(4), "\(error)")
        #expect(try setup.registrations().isEmpty && setup.server.devices.isEmpty)
    }

    @Test func aServerThatIsDownExitsFiveAndRecordsNothing() throws {
        let setup = try FakeServerSetup()
        setup.server.goOffline()
        let result = try setup.register()
        #expect(result.status == 5, "\(result)")
        #expect(result.stderr.contains("cannot connect to \(setup.url)\(Self.flowPath) (Connection refused); is the server up and reachable?"), "\(result.stderr)")
        #expect(try setup.registrations().isEmpty)
    }

    @Test func aHostThatDoesNotExistExitsFive() throws {
        let setup = try FakeServerSetup()
        let result = try setup.run(["register", "--server", "https://elsewhere.example.test", "--non-interactive"] + FakeIdentityServer.registrationAnswers)
        #expect(result.status == 5 && result.stderr.contains("cannot resolve the host of https://elsewhere.example.test\(Self.flowPath)"), "\(result)")
        #expect(setup.server.requests.isEmpty)
    }

    /// Non-interactive: what a step needs and was not given is named, and the device step is never reached.
    @Test func missingInputsAreNamedAndTheDeviceStepIsNotReached() throws {
        let setup = try FakeServerSetup()
        let result = try setup.register(answers: ["--input", "password=correct horse"])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("missing input: http://wso2.com/claims/emailaddress (Email); give it with --input NAME=VALUE"), "\(result.stderr)")
        #expect(setup.server.requests.count == 1 && setup.server.devices.isEmpty)
    }

    @Test func inputsTheServerRefusesExitFour() throws {
        let setup = try FakeServerSetup()
        let result = try setup.register(answers: ["--input", "http://wso2.com/claims/emailaddress=alice", "--input", "password=short"])
        #expect(result.status == 4 && result.stderr.contains("FE-60008"), "\(result)")
        #expect(try setup.registrations().isEmpty)
    }

    /// A second registration with the same server needs --replace, asked before any request;
    /// the server keeps the old record, which devtrust says.
    @Test func registeringAgainNeedsReplace() throws {
        let setup = try FakeServerSetup(register: true)
        let first = try #require(setup.server.devices.first?.registrationId)
        let requests = setup.server.requests.count
        let again = try setup.register()
        #expect(again.status == 2 && again.stderr.contains("this device is already registered with \(setup.url) as \(first)"), "\(again)")
        #expect(setup.server.requests.count == requests, "a request went out before the refusal")
        let replaced = try setup.register(["--replace", "--json"])
        #expect(replaced.status == 0, "\(replaced)")
        let second = try #require(setup.server.devices.last?.registrationId)
        #expect(second != first && setup.server.devices.count == 2)
        #expect(try JSONParser.parse(replaced.output).objectValue?["replaced"] == .string(first))
        #expect(replaced.stderr.contains("replaced the registration \(first) with \(setup.url): the server keeps that old device record"), "\(replaced.stderr)")
        #expect(try setup.registrations().compactMap { $0["registrationId"]?.stringValue } == [second])
    }

    /// A key that cannot sign (its TPM in lockout) fails before the first request: the server
    /// creates no account for a device that could not finish.
    @Test func aKeyThatCannotSignFailsBeforeTheServerIsAsked() throws {
        var setup = try FakeServerSetup()
        setup.tpm(failing: .lockout)
        let result = try setup.register()
        #expect(result.status == 6, "\(result)")
        #expect(result.stderr.contains("the TPM is in dictionary-attack lockout"), "\(result.stderr)")
        #expect(try setup.server.requests.isEmpty && setup.registrations().isEmpty)
    }

    /// A device without a key gets one first (no TPM answers here: a software key).
    @Test func createsTheKeyFirstWhenThereIsNone() throws {
        let setup = try FakeServerSetup(softwareKey: false)
        let result = try setup.register()
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("this device has no key yet; creating one first") && result.stderr.contains("using a software key"), "\(result.stderr)")
        #expect(setup.server.devices.first?.publicKey == (try setup.publicKey()))
    }
}
