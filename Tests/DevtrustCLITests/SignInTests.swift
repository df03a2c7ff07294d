import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Signing in from the device against the reference server: app-native with
/// the device token, browser URLs, device code, tokens, refresh, logout.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct SignInTests {
    static let basicAnswers = ReferenceServer.signInAnswers

    /// A device with a software key, and its own reference server; registered only when asked (`register: true`).
    typealias Setup = ReferenceServerFixture<DevtrustBinary>

    @Test func appNativeSignInCarriesAFreshDeviceTokenAndStoresTheTokens() throws {
        let setup = try Setup(register: true)
        let result = try setup.login()
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.isEmpty)
        let records = try setup.signInRecords()
        #expect(records.count == 1)
        #expect(records.first?["deviceToken"] == .bool(true) && records.first?["accepted"] == .bool(true), "\(records)")
        let registrationId = try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue?["registrations"]?.arrayValue?.first?.objectValue?["registrationId"]
        #expect(records.first?["deviceId"] == registrationId)
        // The stored sign-in, in status and in the keystore (0600), never on stdout.
        let status = try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue!
        let signIn = try #require(status["signIns"]?.arrayValue?.first?.objectValue)
        #expect(signIn["clientId"] == .string("devtrust-app") && signIn["method"] == .string("app-native") && signIn["server"] == .string(setup.server.url))
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        let attributes = try FileManager.default.attributesOfItem(atPath: setup.directory.file("ks/" + tokenFile))
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let accessToken = try setup.cli.run("access-token")
        #expect(accessToken.status == 0 && accessToken.output.count > 20)
        #expect(!(try setup.cli.run("status").stdout.contains(accessToken.output)))
        // A second sign-in: a new token again (the server would refuse a replay).
        #expect(try setup.login().status == 0)
        let second = try setup.signInRecords()
        #expect(second.count == 2 && second.allSatisfy { $0["accepted"] == .bool(true) })
    }

    /// The API description gives links[].href as an absolute path; servers also send absolute
    /// URLs; relative and network-path references are URLs too. Each is resolved against the URL
    /// of the answer that carried it, in the super tenant and below /t/{org}.
    @Test(arguments: ["absolute-path", "absolute", "relative", "network-path"], ["", "/t/acme"])
    func everyFormOfStepLinkIsResolvedAgainstTheAnswer(form: String, tenant: String) throws {
        let server = try ReferenceServer(["--link-form", form, "--mfa", "totp"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let base = server.url + tenant
        #expect(try cli.run(["register", "--server", base, "--non-interactive", "-q"] + RegisterTests.answers).status == 0)
        let result = try cli.run(["login", "--server", base, "--client-id", "devtrust-app", "--non-interactive", "--input", "token=123456"]
                                 + Self.basicAnswers)
        #expect(result.status == 0, "\(result)")
        let records = try server.get("/api/signin-records").arrayValue?.compactMap(\.objectValue) ?? []
        #expect(records.count == 1 && records.first?["accepted"] == .bool(true), "\(records)")
        #expect(try cli.run("access-token").status == 0)
    }

    @Test func theServerRecordsStaleAndReusedTokensWithoutFailingTheRequest() throws {
        let setup = try Setup(register: true)
        let token = try setup.cli.run("token").output
        for _ in 0..<2 {
            let form = "client_id=devtrust-app&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1%3A8765%2Fcallback&scope=openid&state=s&response_mode=direct&code_challenge=abc&code_challenge_method=S256"
            let answer = try ProcessRunner.run("/usr/bin/curl", ["-s", "-X", "POST", "-H", "X-Device-Token: \(token)", "--data", form, setup.server.url + "/oauth2/authorize"])
            #expect(answer.stdout.contains("MULTI_OPTIONS_PROMPT"), "a bad device token must not fail the sign-in: \(answer.stdout)")
        }
        let records = try setup.signInRecords()
        #expect(records.map { $0["accepted"] } == [.bool(true), .bool(false)])
        #expect(records.last?["reason"]?.stringValue?.contains("already used") == true)
    }

    @Test func withoutARegistrationItWarnsAndSignsInWithoutADeviceToken() throws {
        let setup = try Setup()
        let result = try setup.login()
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("not registered with \(setup.server.url)") && result.stderr.contains("signing in without a device token"))
        #expect(try setup.signInRecords().first?["deviceToken"] == .bool(false))
    }

    @Test(arguments: ["FAIL_INCOMPLETE", "FAILED_INCOMPLETE"])
    func aRefusedStepIsReportedInBothSpellings(spelling: String) throws {
        let setup = try Setup(["--fail-spelling", spelling])
        let result = try setup.login(answers: ["--authenticator", "BasicAuthenticator", "--input", "username=alice@example.com", "--input", "password=wrong"])
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("did not accept the values given for Username & Password: Authentication failed"), "\(result.stderr)")
        #expect(try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue?["signIns"] == .array([]))
    }

    @Test func multiOptionStepsAndASecondFactor() throws {
        let setup = try Setup(["--mfa", "totp"])
        let noChoice = try setup.login(answers: [])
        #expect(noChoice.status == 2 && noChoice.stderr.contains("choose one with --authenticator NAME"), "\(noChoice)")
        #expect(noChoice.stderr.contains("Username & Password (BasicAuthenticator), Email OTP (email-otp-authenticator)"))
        // An option without params is selected first; the server then says what it needs.
        let email = try setup.login(answers: ["--authenticator", "Email OTP", "--input", "username=alice@example.com", "--input", "OTPCode=123456", "--input", "token=123456"])
        #expect(email.status == 0, "\(email)")
        let missingSecondFactor = try setup.login(answers: Self.basicAnswers)
        #expect(missingSecondFactor.status == 2 && missingSecondFactor.stderr.contains("token (Authenticator app code)"), "\(missingSecondFactor)")
    }

    @Test func interactiveSignInHidesConfidentialParams() throws {
        let setup = try Setup(["--mfa", "totp"])
        var environment = setup.cli.environment
        environment["TERM"] = "xterm"
        let steps: [(String, String)] = [
            ("\\[1\\] Username & Password", ""), ("Choose 1-2: ", "1\n"),
            ("Username \\(required\\): ", "alice@example.com\n"), ("Password \\(required\\): ", "not it\n"),
            ("Authentication failed", ""),
            ("Choose 1-2: ", "1\n"), ("Username \\(required\\): ", "alice@example.com\n"), ("Password \\(required\\): ", "correct horse\n"),
            ("Authenticator app code \\(required\\): ", "123456\n"), ("signed in at ", ""),
        ]
        let script = JSONWriter.string(.array(steps.map { .object(["expect": .string($0.0), "send": .string($0.1)]) }))
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/pty_session.py"), script, "--", setup.cli.path,
                                                                          "login", "--server", setup.server.url, "--client-id", "devtrust-app"], environment: environment)
        let report = try JSONParser.parse(result.stdout).objectValue!
        let transcript = report["transcript"]?.stringValue ?? ""
        #expect(report["timedOut"] == .bool(false) && report["exit"] == .integer(0), "\(transcript)")
        #expect(!transcript.contains("correct horse") && !transcript.contains("not it") && !transcript.contains("123456"))
    }

    @Test func concurrentCallersOfAnExpiringTokenCauseOneRefresh() throws {
        // Make the stored token expire within the 60 s margin, as if it were an hour old.
        let setup = try Setup(["--access-token-ttl", "3600", "--refresh-delay", "0.5"])
        #expect(try setup.login().status == 0)
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        var tokens = try JSONParser.parse(try #require(setup.directory.read("ks/" + tokenFile))).objectValue!
        tokens["expiresAt"] = .integer(Int64(Date().timeIntervalSince1970) + 10)
        setup.directory.write("ks/" + tokenFile, JSONWriter.bytes(.object(tokens)))
        let processes = try (0..<20).map { _ -> (Process, Pipe) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: setup.cli.path)
            process.arguments = ["access-token"]
            process.environment = setup.cli.environment
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            return (process, output)
        }
        let outputs = processes.map { process, pipe -> String in
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            return String(decoding: data, as: UTF8.self)
        }
        #expect(try setup.stats()["refresh"] == .integer(1), "concurrent callers refreshed more than once")
        #expect(Set(outputs).count == 1, "callers printed different access tokens")
    }

    @Test func aRefusedRefreshDropsTheTokens() throws {
        let setup = try Setup(["--access-token-ttl", "30"])
        #expect(try setup.login().status == 0)
        setup.server.stop() // the new server knows none of the old refresh tokens
        let restarted = try ReferenceServer(["--port", String(URL(string: setup.server.url)!.port!)])
        _ = restarted
        let result = try setup.cli.run("access-token")
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("refused to refresh") && result.stderr.contains("run `devtrust login` again"))
        #expect(try setup.cli.run("access-token").status == 3)
    }

    /// An outage or a proxy's answer is not a revocation: the sign-in stays, the command
    /// says to run it again (exit 5; 4 for another refusal), and the next call refreshes.
    @Test(arguments: [("503-json", 5, "temporarily_unavailable"), ("401-bodyless", 5, "HTTP 401 without an OAuth error body"),
                      ("502-html", 5, "HTTP 502"), ("400-html", 5, "HTTP 400 (text/html) without an OAuth error body"),
                      ("drop", 5, "closed the connection without an answer"),
                      ("400-invalid-request", 4, "invalid_request")])
    func aRefreshThatFailsOnceKeepsTheSignIn(mode: String, exit: Int32, reason: String) throws {
        let setup = try Setup(["--access-token-ttl", "30", "--refresh-fault", mode])
        #expect(try setup.login().status == 0)
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        let before = setup.directory.read("ks/" + tokenFile)
        let failed = try setup.cli.run("access-token")
        #expect(failed.status == exit && failed.stdout.isEmpty, "\(failed)")
        #expect(failed.stderr.contains(reason) && failed.stderr.contains("it is kept"), "\(failed.stderr)")
        #expect(failed.stderr.contains(exit == 5 ? "run the command again in a while" : "run `devtrust login` again"), "\(failed.stderr)")
        #expect(setup.directory.read("ks/" + tokenFile) == before, "the stored tokens changed")
        let status = try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue
        #expect(status?["signIns"]?.arrayValue?.count == 1)
        // The server is back: the same refresh token works.
        let retried = try setup.cli.run("access-token")
        #expect(retried.status == 0 && retried.output.count > 20, "\(retried)")
        #expect(try setup.stats()["refreshFaults"] == .integer(1) && setup.stats()["refresh"] == .integer(1))
    }

    /// A token answer without expires_in: the lifetime is unknown, not endless. The access token
    /// is refreshed after an assumed lifetime, or on demand (`--refresh`, after a resource's 401);
    /// without a refresh token it is used as it is.
    @Test func aTokenWithoutALifetimeIsRefreshedAfterAnAssumedOne() throws {
        let setup = try Setup(["--no-expires-in"])
        let before = Int64(Date().timeIntervalSince1970)
        let login = try setup.login()
        let after = Int64(Date().timeIntervalSince1970)
        #expect(login.status == 0 && login.stderr.contains("the server gave no lifetime for the access token"), "\(login)")
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        var stored = try JSONParser.parse(try #require(setup.directory.read("ks/" + tokenFile))).objectValue!
        // 600 s from when the answer came, sometime during the login (1 s for rounding).
        #expect(stored["expiresAtAssumed"] == .bool(true) && (before + 599)...(after + 601) ~= stored["expiresAt"]!.int64Value!, "\(stored)")
        let status = try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue!
        #expect(status["signIns"]?.arrayValue?.first?.objectValue?["accessTokenLifetimeKnown"] == .bool(false))
        #expect(try setup.cli.run("status").output.contains("access token lifetime unknown (the server gave no expires_in)"))

        let first = try setup.cli.run("access-token").output
        #expect(try setup.stats()["refresh"] == .integer(0))
        let forced = try setup.cli.run("access-token", "--refresh")
        #expect(forced.status == 0 && forced.output != first && forced.output.count > 20, "\(forced)")
        #expect(try setup.stats()["refresh"] == .integer(1))
        // Past the assumed lifetime (the file says so): refreshed.
        stored = try JSONParser.parse(try #require(setup.directory.read("ks/" + tokenFile))).objectValue!
        stored["expiresAt"] = .integer(Int64(Date().timeIntervalSince1970) - 1)
        setup.directory.write("ks/" + tokenFile, JSONWriter.bytes(.object(stored)))
        #expect(try setup.cli.run("access-token").output != forced.output)
        #expect(try setup.stats()["refresh"] == .integer(2))
    }

    @Test func withoutARefreshTokenAnAccessTokenOfUnknownLifetimeIsKept() throws {
        let setup = try Setup(["--no-expires-in", "--no-refresh-token"])
        #expect(try setup.login().status == 0)
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        var stored = try JSONParser.parse(try #require(setup.directory.read("ks/" + tokenFile))).objectValue!
        stored["expiresAt"] = .integer(Int64(Date().timeIntervalSince1970) - 1)
        setup.directory.write("ks/" + tokenFile, JSONWriter.bytes(.object(stored)))
        let token = try setup.cli.run("access-token")
        #expect(token.status == 0 && token.output == stored["accessToken"]?.stringValue, "\(token)")
        let forced = try setup.cli.run("access-token", "--refresh")
        #expect(forced.status == 4 && forced.stderr.contains("the server gave no refresh token") && forced.stderr.contains("it is kept"), "\(forced)")
        #expect(try setup.cli.run("access-token").status == 0)
        #expect(try setup.cli.run("status").output.contains("used until a resource refuses it"))
    }

    @Test func logoutRevokesAndDeletes() throws {
        let setup = try Setup()
        #expect(try setup.login().status == 0)
        let result = try setup.cli.run("logout")
        #expect(result.status == 0 && result.stderr.contains("revoked the refresh token and access token"), "\(result)")
        #expect(try setup.stats()["revoked"] == .integer(2))
        #expect(setup.directory.entries("ks").filter { $0.hasPrefix("signin-") }.isEmpty)
        #expect(try setup.cli.run("logout").status == 3)
        #expect(try setup.cli.run("access-token").status == 3)
    }

    /// What logout could not revoke is said, and why: no endpoint, a refusal, or no answer.
    /// glewlwyd's non-standard delete_token grant is tried only where the profile says the server has it.
    @Test func logoutSaysWhyATokenWasNotRevoked() throws {
        let setup = try Setup(["--no-revocation"])
        #expect(try setup.login().status == 0)
        let noEndpoint = try setup.cli.run("logout")
        #expect(noEndpoint.status == 0 && noEndpoint.stderr.contains("deleted the sign-in at \(setup.server.url)"), "\(noEndpoint)")
        #expect(noEndpoint.stderr.contains("the refresh token was not revoked: the server offers no revocation endpoint"), "\(noEndpoint.stderr)")
        #expect(try setup.stats()["deleteTokenGrants"] == .integer(0), "a non-standard grant went to a server not known to have it")

        let down = try Setup()
        #expect(try down.login().status == 0)
        down.server.stop()
        let unreachable = try down.cli.run("logout")
        #expect(unreachable.status == 0 && !unreachable.stderr.contains("refused"), "\(unreachable)")
        #expect(unreachable.stderr.contains("the refresh token was not revoked: cannot connect to \(down.server.url)/oauth2/revoke"), "\(unreachable.stderr)")
        #expect(unreachable.stderr.contains("the access token was not revoked: cannot connect to"), "\(unreachable.stderr)")
    }

    /// `reset` revokes each stored sign-in before it deletes it, as logout does;
    /// one it cannot revoke is deleted all the same, with a line for each token left valid.
    @Test func resetRevokesTheSignInsFirst() throws {
        let setup = try Setup(register: true)
        #expect(try setup.login().status == 0)
        let reset = try setup.cli.run("reset", "--yes")
        #expect(reset.status == 0, "\(reset)")
        #expect(reset.stderr.contains("revoked the refresh token and access token of the sign-in at \(setup.server.url) (client devtrust-app)"), "\(reset)")
        #expect(reset.stderr.contains("deleted the device key, 1 registration(s) and 1 sign-in(s) from "), "\(reset)")
        #expect(try setup.stats()["revoked"] == .integer(2))
        #expect(setup.directory.entries("ks").filter { $0.hasPrefix("signin-") || $0.hasPrefix("key-") }.isEmpty)

        let down = try Setup()
        #expect(try down.login().status == 0)
        down.server.stop()
        let started = Date()
        let unreachable = try down.cli.run("reset", "--yes")
        #expect(unreachable.status == 0 && Date().timeIntervalSince(started) < 30, "\(unreachable)")
        let place = "the sign-in at \(down.server.url) (client devtrust-app)"
        let failures = unreachable.stderr.split(separator: "\n").filter { $0.hasPrefix("devtrust: warning: \(place): the ") }
        #expect(failures.count == 2 && failures.allSatisfy { $0.contains("was not revoked: cannot connect to") && $0.hasSuffix("it stays valid there until it expires") },
                "\(unreachable.stderr)")
        #expect(unreachable.stderr.contains("1 sign-in(s) from"), "\(unreachable)")
        #expect(down.directory.entries("ks").filter { $0.hasPrefix("signin-") }.isEmpty)
    }

    /// A sign-in whose token file is gone cannot be revoked: logout and reset both say
    /// so, once, with what stays valid, and delete the record all the same.
    @Test(arguments: [["logout"], ["reset", "--yes"]])
    func aSignInWithoutItsTokenFileSaysNothingWasRevoked(_ command: [String]) throws {
        let setup = try Setup()
        #expect(try setup.login().status == 0)
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        unlink(setup.directory.file("ks/" + tokenFile))
        let result = try setup.cli.run(command)
        #expect(result.status == 0, "\(result)")
        let lines = result.stderr.split(separator: "\n").filter { $0.contains("nothing was revoked: its token file cannot be read") }
        #expect(lines.count == 1 && lines[0].hasPrefix("devtrust: warning: ") && lines[0].hasSuffix("its tokens stay valid at the server until they expire"),
                "\(result.stderr)")
        #expect(try setup.stats()["revoked"] == .integer(0))
        #expect(try setup.cli.run("access-token").status == 3)
    }

    @Test func authorizeURLCarriesADeviceTokenAndPKCEAndFinishesWithTheCallback() throws {
        let setup = try Setup(register: true)
        for par in [false, true] {
            let printed = try setup.cli.run(["authorize-url", "--server", setup.server.url, "--client-id", "devtrust-app"] + (par ? ["--par"] : []))
            #expect(printed.status == 0, "\(printed)")
            let url = printed.output
            #expect(url.hasPrefix(setup.server.url + "/oauth2/authorize?"))
            if par {
                #expect(url.contains("request_uri=urn%3Aietf%3Aparams%3Aoauth%3Arequest_uri%3A") && !url.contains("device_token"))
            } else {
                #expect(url.contains("device_token=") && url.contains("code_challenge_method=S256") && url.contains("state="))
            }
            // What the server reads from the URL (directly, or from the pushed request).
            let seen = try JSONParser.parse(try ProcessRunner.run("/usr/bin/curl", ["-s", url]).stdout).objectValue!
            #expect(seen["pushed"] == .bool(par))
            #expect(seen["deviceCheck"]?.objectValue?["accepted"] == .bool(true), "\(seen)")
            let request = try #require(seen["request"]?.objectValue)
            #expect(request["code_challenge_method"] == .string("S256") && request["code_challenge"]?.stringValue?.count == 43)
            let state = try #require(request["state"]?.stringValue)
            // The browser signs in and is sent back with a code: obtain one the app-native way for this test.
            let code = try Self.code(setup, challengeFrom: request)
            let callback = "http://127.0.0.1:8765/callback?code=\(code)&state=\(state)"
            let finished = try setup.cli.run("login", "--callback", callback)
            #expect(finished.status == 0, "\(finished)")
            let replay = try setup.cli.run("login", "--callback", callback)
            #expect(replay.status == 2 && replay.stderr.contains("no pending sign-in has state"))
        }
        #expect(try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue?["signIns"]?.arrayValue?.first?.objectValue?["method"] == .string("authorization-code"))
    }

    /// With --discovery, the registration is found by the provider's authorization endpoint (where
    /// the token goes) and issuer, not by the document's URL; among registrations on that origin, the
    /// one whose base URL they are below.
    @Test func authorizeURLWithDiscoveryFindsTheRegistrationByTheProvidersURLs() throws {
        let setup = try Setup(register: true)
        #expect(try setup.cli.run(["register", "--server", setup.server.url + "/t/acme", "--non-interactive", "-q"] + RegisterTests.answers).status == 0)
        let discovery = setup.server.url + "/oauth2/token/.well-known/openid-configuration"
        let printed = try setup.cli.run(["authorize-url", "--discovery", discovery, "--client-id", "devtrust-app"])
        #expect(printed.status == 0 && printed.output.contains("device_token=") && !printed.stderr.contains("without a device token"), "\(printed)")
        let seen = try JSONParser.parse(try ProcessRunner.run("/usr/bin/curl", ["-s", printed.output]).stdout).objectValue!
        #expect(seen["deviceCheck"]?.objectValue?["accepted"] == .bool(true), "\(seen)")
        let rootID = try #require(try JSONParser.parse(try setup.cli.run("status", "--json").output).objectValue?["registrations"]?.arrayValue?
            .first { $0.objectValue?["server"] == .string(setup.server.url) }?.objectValue?["registrationId"])
        #expect(seen["deviceCheck"]?.objectValue?["deviceId"] == rootID, "the root's registration, not the tenant's")
    }

    /// A device token goes only to the server it was registered with: not to a PAR endpoint on
    /// another origin, and not to another tenant of the same host.
    @Test func aDeviceTokenGoesNowhereButItsOwnServer() throws {
        let listener = try RecordingListener(host: "127.0.0.1")
        let elsewhere = "http://\(listener.authority)/par"
        let setup = try Setup(["--par-endpoint", elsewhere], register: true)
        let pushed = try setup.cli.run(["authorize-url", "--server", setup.server.url, "--client-id", "devtrust-app", "--par"])
        #expect(pushed.stderr.contains("the request goes to http://\(listener.authority), not to \(setup.server.url) where this device is registered"), "\(pushed)")
        let received = listener.connections()
        #expect(received.count == 1 && !received.joined().contains("device_token"), "\(received)")

        let tenant = try Setup(register: true)
        var cli = tenant.cli
        try FileManager.default.removeItem(atPath: tenant.directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        #expect(try cli.run(["register", "--server", tenant.server.url + "/t/acme", "--non-interactive", "-q"] + RegisterTests.answers).status == 0)
        let discovery = tenant.server.url + "/oauth2/token/.well-known/openid-configuration"
        let printed = try cli.run(["authorize-url", "--discovery", discovery, "--client-id", "devtrust-app"])
        #expect(printed.status == 0 && !printed.output.contains("device_token="), "tenant acme's token went to the root: \(printed)")
    }

    /// A sign-in's profile flag for glewlwyd's delete_token survives a browser sign-in.
    @Test func aBrowserSignInKeepsTheProfilesDeleteTokenGrant() throws {
        let setup = try Setup(["--no-revocation"])
        var cli = setup.cli
        let profile: JSONObject = ["server": .string(setup.server.url), "clientId": .string("devtrust-app"), "deleteTokenGrant": .bool(true)]
        cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("config.json", JSONWriter.string(.object(["signIn": .object(["profiles": .object(["p": .object(profile)])])])))
        let url = try cli.run("authorize-url", "--profile", "p").output
        let seen = try JSONParser.parse(try ProcessRunner.run("/usr/bin/curl", ["-s", url]).stdout).objectValue!
        let request = try #require(seen["request"]?.objectValue)
        let code = try Self.code(setup, challengeFrom: request)
        #expect(try cli.run("login", "--callback", "http://127.0.0.1:8765/callback?code=\(code)&state=\(request["state"]!.stringValue!)").status == 0)
        #expect(try cli.run("logout").status == 0)
        #expect(try setup.stats()["deleteTokenGrants"] == .integer(1))
    }

    /// authorize-url + login --callback exchanges the code without a DPoP proof: a profile's "dpop": true is
    /// refused before anything is pending, naming the sign-ins that do DPoP; a server that only advertises
    /// DPoP gets one warning that the tokens will be bearer tokens, and the sign-in finishes with them.
    @Test func authorizeURLRefusesAProfilesDPoPAndWarnsWhenTheServerAdvertisesIt() throws {
        let setup = try Setup(["--dpop"])
        var cli = setup.cli
        let discovery = setup.server.url + "/oauth2/token/.well-known/openid-configuration"
        func profile(_ dpop: Bool) -> JSONObject {
            ["discovery": .string(discovery), "clientId": .string("devtrust-app"), "dpop": .bool(dpop)]
        }
        cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("config.json", JSONWriter.string(.object(["signIn": .object(["profiles": .object(
            ["bound": .object(profile(true)), "bearer": .object(profile(false))])])])))
        let refused = try cli.run("authorize-url", "--profile", "bound")
        #expect(refused.status == 2 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr.contains(#"sign-in profile "bound" asks for DPoP-bound tokens"#)
                && ["--browser", "--device-code", "--ciba", "app-native"].allSatisfy(refused.stderr.contains), "\(refused)")

        let advertised = try cli.run("authorize-url", "--discovery", discovery, "--client-id", "devtrust-app")
        let warnings = advertised.stderr.split(separator: "\n").filter { $0.contains("bearer tokens") }
        #expect(advertised.status == 0 && warnings.count == 1 && warnings[0].hasPrefix("devtrust: warning: ")
                && warnings[0].contains("--browser, --device-code, --ciba or app-native"), "\(advertised)")
        let seen = try JSONParser.parse(try ProcessRunner.run("/usr/bin/curl", ["-s", advertised.output]).stdout).objectValue!
        let request = try #require(seen["request"]?.objectValue)
        let code = try Self.code(setup, challengeFrom: request)
        let finished = try cli.run("login", "--callback", "http://127.0.0.1:8765/callback?code=\(code)&state=\(request["state"]!.stringValue!)")
        #expect(finished.status == 0, "\(finished)")
        #expect(try cli.run("--json", "access-token").output.contains(#""tokenType":"Bearer""#))

        // The profile's "dpop": false asked for bearer tokens: no warning.
        let quiet = try cli.run("authorize-url", "--profile", "bearer")
        #expect(quiet.status == 0 && !quiet.stderr.contains("bearer tokens"), "\(quiet)")
    }

    /// A code issued for the request's PKCE challenge, as the browser would get it.
    static func code(_ setup: Setup, challengeFrom request: JSONObject) throws -> String {
        let form = FormEncodingForTests.encode([
            ("client_id", "devtrust-app"), ("response_type", "code"), ("redirect_uri", request["redirect_uri"]?.stringValue ?? ""),
            ("scope", "openid"), ("state", request["state"]?.stringValue ?? ""), ("response_mode", "direct"),
            ("code_challenge", request["code_challenge"]?.stringValue ?? ""), ("code_challenge_method", "S256"),
        ])
        let first = try JSONParser.parse(try ProcessRunner.run("/usr/bin/curl", ["-s", "-X", "POST", "--data", form, setup.server.url + "/oauth2/authorize"]).stdout).objectValue!
        let flowId = first["flowId"]!.stringValue!
        let body = #"{"flowId":"\#(flowId)","selectedAuthenticator":{"authenticatorId":"QmFzaWNBdXRoZW50aWNhdG9yOkxPQ0FM","params":{"username":"alice@example.com","password":"correct horse"}}}"#
        let done = try JSONParser.parse(try ProcessRunner.run("/usr/bin/curl", ["-s", "-X", "POST", "-H", "Content-Type: application/json", "--data", body, setup.server.url + "/oauth2/authn"]).stdout).objectValue!
        return try #require(done["authData"]?.objectValue?["code"]?.stringValue)
    }
}

enum FormEncodingForTests {
    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0.1)" }.joined(separator: "&")
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun)) struct SignInEdgeTests {
    @Test func aFederatedRedirectionStepResumesWithTheCallback() throws {
        let setup = try SignInTests.Setup(["--authenticators", "federated"])
        let answers = ["--authenticator", "Google", "--input", "code=abc", "--input", "state=federated-state-42"]
        let result = try setup.login(answers: answers)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("Continue in a browser (Google): https://accounts.google.example/o/oauth2/auth?state=federated-state-42"))
        let missing = try setup.login(answers: ["--authenticator", "Google"])
        #expect(missing.status == 2 && missing.stderr.contains("code (from the callback URL), state (from the callback URL)"), "\(missing)")
    }

    @Test func withoutAPAREndpointTheURLCarriesTheRequestAndSaysSo() throws {
        let setup = try SignInTests.Setup(["--no-par"], register: true)
        let printed = try setup.cli.run("authorize-url", "--server", setup.server.url, "--client-id", "devtrust-app", "--par")
        #expect(printed.status == 0, "\(printed)")
        #expect(printed.stderr.contains("advertises no pushed_authorization_request_endpoint; the URL carries the request itself"))
        #expect(printed.output.contains("device_token=") && !printed.output.contains("request_uri"))
    }
}

extension ReferenceServerFixture {
    /// App-native sign-in with the server's app, non-interactively.
    func login(_ extra: [String] = [], answers: [String] = SignInTests.basicAnswers) throws -> ProcessResult {
        try cli.run(["login", "--server", server.url, "--client-id", "devtrust-app", "--non-interactive"] + answers + extra)
    }

    /// The server's token endpoint counters (refreshes, revocations, grants).
    func stats() throws -> JSONObject { try server.get("/api/token-stats").objectValue ?? [:] }
}
