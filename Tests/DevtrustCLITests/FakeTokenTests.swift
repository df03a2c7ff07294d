import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustTestSupport
import Testing

/// `devtrust token` and `device-data` in the fast tier, after `register` with `FakeIdentityServer`:
/// the server checks each token as it does at sign-in (`deviceCheck`: the registered key, jti,
/// iat in its time), and the tests verify them with the project's verifier. The same against the
/// reference server over HTTP and through the binary: RegisterTests, ClockSkewTests, CLIExitCodeTests,
/// TPMCommandTests (`make test`).
@Suite struct FakeTokenTests {
    static func server(clockOffset: Double) -> FakeIdentityServer.Settings {
        var settings = FakeIdentityServer.Settings()
        settings.clockOffset = clockOffset
        return settings
    }

    @Test func theTokenCarriesTheRegistrationAndTheServerAcceptsItOnce() throws {
        let setup = try FakeServerSetup(register: true)
        let device = try #require(setup.server.devices.first)
        let token = try setup.run("token")
        #expect(token.status == 0 && token.stderr.isEmpty, "\(token)")
        let (header, claims) = try FakeServerSetup.parts(token.output)
        #expect(header == ["alg": .string("ES256"), "typ": .string("JWT"), "deviceId": .string(device.registrationId)], "\(header)")
        #expect(claims["iat"] == .integer(setup.time.secondsSinceEpoch()) && claims["jti"]?.stringValue?.count == 36, "\(claims)")
        #expect(claims["platform"] == .string("linux") && claims["keyProtection"] == .string("software"), "\(claims)")
        let check = setup.server.deviceCheck(token.output)
        #expect(check.accepted && check.deviceId == device.registrationId, "\(check)")
        // A token is good once: the server keeps its jti.
        let replay = setup.server.deviceCheck(token.output)
        #expect(!replay.accepted && replay.reason?.contains("already used") == true, "\(replay)")
        let next = try setup.run("token").output
        #expect(next != token.output && setup.server.deviceCheck(next).accepted)
    }

    /// `verify`, the project's own verifier, and the key the server holds agree on the token.
    @Test func theTokenVerifiesWithTheKeyTheServerRegistered() throws {
        let setup = try FakeServerSetup(register: true)
        let token = try setup.run("token").output
        let registered = try #require(setup.server.devices.first?.publicKey)
        let verified = try setup.run("verify", "--public-key", registered, "--jwt", token)
        #expect(verified.status == 0, "\(verified)")
        let key = try P256PublicKey(spki: Base64.decode(registered))
        #expect(throws: Never.self) { try ES256Verifier(publicKey: key).verify(compact: token, freshness: (maxAge: 300, now: setup.time.secondsSinceEpoch())) }
        // One changed byte of the claims, and neither accepts it.
        let parts = token.split(separator: ".").map(String.init)
        let forged = [parts[0], Base64URL.encode(Array(#"{"jti":"x","iat":1}"#.utf8)), parts[2]].joined(separator: ".")
        #expect(try setup.run("verify", "--public-key", registered, "--jwt", forged).status == 1)
        #expect(!setup.server.deviceCheck(forged).accepted)
    }

    @Test func claimsGivenAndConfiguredGoInTheToken() throws {
        let setup = try FakeServerSetup(register: true)
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("config.json", #"{"claims":{"site":"berlin","floor":"3"}}"#)
        let token = try cli.run(["token", "--claim", "site=paris", "--json"], stdin: nil)
        #expect(token.status == 0, "\(token)")
        let compact = try #require(try JSONParser.parse(token.output).objectValue?["token"]?.stringValue)
        let check = setup.server.deviceCheck(compact)
        #expect(check.accepted && check.claims?["site"] == .string("paris") && check.claims?["floor"] == .string("3"), "\(check)")
        // jti and iat are devtrust's own.
        let refused = try cli.run(["token", "--claim", "jti=mine"], stdin: nil)
        #expect(refused.status == 2 && refused.stdout.isEmpty, "\(refused)")
    }

    /// The server 100 s behind: a token with this machine's iat would be in its future. The
    /// registration measured its clock (the `Date` headers); a token minted later, in another run,
    /// is written in its time while the measurement holds (an hour), then no more.
    @Test func aTokenIsWrittenInTheServersTimeWhileItsMeasuredClockHolds() throws {
        let setup = try FakeServerSetup(Self.server(clockOffset: -100), register: true)
        setup.time.advance(by: 600)
        let token = try setup.run("token").output
        #expect(try FakeServerSetup.parts(token).claims["iat"] == .integer(setup.time.secondsSinceEpoch() - 100))
        let check = setup.server.deviceCheck(token)
        #expect(check.accepted, "\(check)")
        let status = try setup.status()
        let clocks = try #require(status["clocks"]?.arrayValue?.first?.objectValue, "\(status)")
        #expect(clocks["clockSkewSeconds"] == .integer(100) && clocks["correctsTokens"] == .bool(true), "\(clocks)")
        // An hour after the measurement it no longer says how this clock stands: this machine's time, which the server refuses.
        setup.time.advance(by: 3600)
        let late = try setup.run("token").output
        #expect(try FakeServerSetup.parts(late).claims["iat"] == .integer(setup.time.secondsSinceEpoch()))
        let refused = setup.server.deviceCheck(late)
        #expect(!refused.accepted && refused.reason?.contains("in the future") == true, "\(refused)")
    }

    @Test func aServerAheadGetsTokensInItsTime() throws {
        let setup = try FakeServerSetup(Self.server(clockOffset: 400), register: true)
        let token = try setup.run("token").output
        #expect(try FakeServerSetup.parts(token).claims["iat"] == .integer(setup.time.secondsSinceEpoch() + 400))
        #expect(setup.server.deviceCheck(token).accepted)
    }

    @Test func anExplicitDeviceIDIsCarriedAsGiven() throws {
        let setup = try FakeServerSetup(register: true)
        let token = try setup.run("token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936").output
        #expect(try FakeServerSetup.parts(token).header["deviceId"] == .string("74070bae-df8c-42bf-8754-5173c237c936"))
        let check = setup.server.deviceCheck(token)
        #expect(!check.accepted && check.reason == "unknown deviceId 74070bae-df8c-42bf-8754-5173c237c936", "\(check)")
    }

    @Test func withoutARegistrationOrAKeyItExitsThree() throws {
        let unregistered = try FakeServerSetup()
        let token = try unregistered.run("token")
        #expect(token.status == 3 && token.stdout.isEmpty && token.stderr.contains("not registered"), "\(token)")
        let keyless = try FakeServerSetup(softwareKey: false)
        let noKey = try keyless.run("token")
        #expect(noKey.status == 3 && noKey.stdout.isEmpty && noKey.stderr.contains("devtrust init"), "\(noKey)")
    }

    /// What a TPM in trouble answers, and what each command says: exit 6, the TPM's words, nothing on stdout.
    @Test(arguments: [
        (TPMError.lockout, "the TPM is in dictionary-attack lockout"),
        (TPMError.busy(operation: "signing"), "the TPM was busy and did not run signing (TPM_RC_RETRY); nothing was changed: run the command again"),
        (TPMError.unreachable(tcti: "device:/dev/tpmrm0", reason: "no such device", hint: nil), "device:/dev/tpmrm0"),
        (TPMError.connectionLost(operation: "signing", code: TPMResponseCode(0x000A_000A)), "the TPM stopped answering during signing"),
    ])
    func aTPMInTroubleExitsSix(trouble: TPMError, words: String) throws {
        var setup = try FakeServerSetup(register: true)
        setup.tpm(failing: trouble)
        for command in [["token"], ["device-data"], ["sign-challenge", "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y"]] {
            let result = try setup.run(command)
            #expect(result.status == 6 && result.stdout.isEmpty, "\(command): \(result)")
            #expect(result.stderr.hasPrefix("devtrust: error: ") && result.stderr.contains(words), "\(command): \(result.stderr)")
        }
        let json = try setup.run("token", "--json")
        let error = try #require(try JSONParser.parse(String(json.stderr.split(separator: "\n").last ?? "")).objectValue?["error"]?.objectValue, "\(json)")
        #expect(json.status == 6 && error["exitCode"] == .integer(6), "\(error)")
    }

    /// `device-data`: the same claims, no deviceId, verified with the device's key.
    @Test func deviceDataIsSignedByTheDeviceKeyWithoutADeviceID() throws {
        let setup = try FakeServerSetup(register: true)
        try setup.measuresLockScreen(true)
        let deviceData = try setup.run("device-data", "--claim", "site=berlin")
        #expect(deviceData.status == 0, "\(deviceData)")
        let key = try P256PublicKey(spki: Base64.decode(try setup.publicKey()))
        let verified = try ES256Verifier(publicKey: key).verify(compact: deviceData.output, freshness: (maxAge: 300, now: setup.time.secondsSinceEpoch()))
        #expect(verified.header == ["alg": .string("ES256"), "typ": .string("JWT")], "\(verified.header)")
        #expect(verified.claims?["lockScreen"] == .string("true") && verified.claims?["site"] == .string("berlin")
                && verified.claims?["platform"] == .string("linux"), "\(String(describing: verified.claims))")
    }
}
