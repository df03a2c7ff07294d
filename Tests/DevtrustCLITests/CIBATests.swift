import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `login --ciba` (OpenID CIBA, poll mode, public client).
enum CIBARun {
    /// The requests the reference server took, each with its poll times and its auth_req_id.
    static func requests(_ server: ReferenceServer) throws -> [JSONObject] {
        try server.get("/api/ciba/requests").arrayValue?.compactMap(\.objectValue) ?? []
    }

    /// The gaps between the polls the server saw (the first from the request).
    static func pollGaps(_ server: ReferenceServer) throws -> [Double] {
        let request = try #require(try requests(server).first)
        let polls = request["polls"]?.arrayValue?.compactMap(\.doubleValue) ?? []
        return zip(polls, [request["created"]?.doubleValue ?? 0] + polls).map { $0 - $1 }
    }

    static func login(_ cli: DevtrustBinary, _ server: ReferenceServer, _ extra: [String] = []) throws -> ProcessResult {
        try cli.run(["login", "--ciba", "--server", server.url, "--client-id", "devtrust-app", "--login-hint", "alice@example.com", "--json"] + extra)
    }
}

/// The polling rules against the reference server, which can answer what glewlwyd never does
/// (slow_down, a failing server); intervals are measured from the server's recorded poll times.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct CIBAPollingTests {
    @Test func theRequestCarriesTheHintAsGivenAndPendingKeepsPollingAndSlowDownAddsFiveSeconds() throws {
        let server = try ReferenceServer(["--ciba-interval", "1", "--ciba-slow-down-on", "2", "--ciba-approve-after", "3"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let hint = #"{"username":"alice"}"#
        let result = try cli.run("login", "--ciba", "--server", server.url, "--client-id", "devtrust-app", "--login-hint", hint,
                                 "--binding-message", "Kiosk 7: sign in?", "--requested-expiry", "300", "--json")
        #expect(result.status == 0, "\(result)")
        let events = DeviceCodeRun.events(result.stdout)
        #expect(DeviceCodeRun.names(events) == ["started", "polling", "polling", "polling", "success"], "\(events)")
        #expect(events.first == ["event": .string("started"), "binding_message": .string("Kiosk 7: sign in?"), "expires_in": .integer(300),
                                 "interval": .integer(1)])
        #expect(events.dropFirst().compactMap { $0["interval"]?.int64Value } == [1, 1, 6], "\(events)")
        let request = try #require(try CIBARun.requests(server).first)
        #expect(request["loginHint"] == .string(hint) && request["bindingMessage"] == .string("Kiosk 7: sign in?")
                && request["requestedExpiry"] == .string("300") && request["scope"] == .string("openid"), "\(request)")
        // Poll 1 pending after 1 s, poll 2 slow_down after 1 s, then 1 + 5 s.
        let gaps = try CIBARun.pollGaps(server)
        #expect(gaps.count == 3, "\(gaps)")
        for (gap, expected) in zip(gaps, [1.0, 1.0, 6.0]) {
            #expect(gap >= expected - 0.05 && gap < expected + 0.9, "poll gaps \(gaps)")
        }
        #expect(result.stderr.contains("Kiosk 7: sign in?") && result.stderr.contains(#"device of {"username":"alice"}"#), "\(result.stderr)")
        let status = try JSONParser.parse(try cli.run("status", "--json").stdout).objectValue
        #expect(status?["signIns"]?.arrayValue?.first?.objectValue?["method"] == .string("ciba"), "\(String(describing: status))")
        let accessToken = try cli.run("access-token")
        #expect(accessToken.status == 0 && !accessToken.output.isEmpty, "\(accessToken)")
    }

    @Test func withoutAnIntervalItPollsEveryFiveSeconds() throws {
        let server = try ReferenceServer(["--ciba-interval", "0", "--ciba-approve-after", "1"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let result = try CIBARun.login(cli, server)
        #expect(result.status == 0, "\(result)")
        let gaps = try CIBARun.pollGaps(server)
        #expect(gaps.count == 1 && gaps[0] >= 4.95 && gaps[0] < 5.9, "\(gaps)")
    }

    @Test func aFailingServerAndALostConnectionBackOffAndPollingGoesOn() throws {
        let server = try ReferenceServer(["--ciba-interval", "1", "--ciba-unavailable-on", "1", "--ciba-drop-on", "2", "--ciba-approve-after", "3"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let result = try CIBARun.login(cli, server)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("HTTP 503 (temporarily_unavailable") && result.stderr.contains("trying again in 1 s")
                && result.stderr.contains("trying again in 2 s"), "\(result.stderr)")
        let gaps = try CIBARun.pollGaps(server)
        #expect(gaps.count == 3, "\(gaps)")
        for (gap, expected) in zip(gaps, [1.0, 1.0, 2.0]) {
            #expect(gap >= expected - 0.05 && gap < expected + 0.9, "poll gaps \(gaps)")
        }
    }

    @Test func deniedAndExpiredEndWithExitFourAndTheirEvents() throws {
        for (option, event, words) in [("--ciba-deny-on", "access_denied", "denied"), ("--ciba-expire-on", "expired_token", "expired")] {
            let server = try ReferenceServer(["--ciba-interval", "1", option, "2"])
            let directory = TemporaryDirectory()
            let cli = DevtrustBinary(keystore: directory.file("ks"))
            let result = try CIBARun.login(cli, server)
            #expect(result.status == 4 && result.stderr.contains(words), "\(option): \(result)")
            let events = DeviceCodeRun.events(result.stdout)
            #expect(DeviceCodeRun.names(events) == ["started", "polling", "polling", event == "access_denied" ? "access_denied" : "expired", "failure"],
                    "\(events)")
            #expect(DeviceCodeRun.finalEvent(events)?["error"] == .string(event))
            #expect(try cli.run("access-token").status == 3)
        }
    }

    @Test func itStopsAtExpiresInEvenWhenTheServerNeverSaysSo() throws {
        // requested_expiry 3 s, interval 1 s: polls at 1 and 2 s; the next would come at the deadline.
        let server = try ReferenceServer(["--ciba-interval", "1"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let started = Date()
        let result = try CIBARun.login(cli, server, ["--requested-expiry", "3"])
        #expect(result.status == 4 && result.stderr.contains("expired before it was approved"), "\(result)")
        #expect(DeviceCodeRun.finalEvent(DeviceCodeRun.events(result.stdout))?["error"] == .string("expired_token"))
        #expect(try CIBARun.pollGaps(server).count == 2)
        #expect(Date().timeIntervalSince(started) < 6)
    }

    @Test func aServerWithoutABackchannelEndpointGetsAClearErrorAndAProfileCanNameOne() throws {
        let server = try ReferenceServer(["--no-ciba"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        let result = try CIBARun.login(cli, server)
        #expect(result.status == 4 && result.stderr.contains("advertises no backchannel authentication endpoint")
                && result.stderr.contains("endpoints.backchannelAuthentication"), "\(result)")
        #expect(DeviceCodeRun.finalEvent(DeviceCodeRun.events(result.stdout))?["error"] == .string("unsupported"))

        // The configuration names the endpoint another server has.
        let other = try ReferenceServer(["--ciba-interval", "1", "--ciba-approve-after", "1"])
        let profile: JSONObject = ["server": .string(server.url), "clientId": .string("devtrust-app"),
                                   "endpoints": .object(["backchannelAuthentication": .string(other.url + "/oauth2/ciba"),
                                                         "token": .string(other.url + "/oauth2/token")])]
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", JSONWriter.string(.object(["signIn": .object(["profiles": .object(["p": .object(profile)])])])))
        let configured = try cli.run("login", "--ciba", "--profile", "p", "--login-hint", "alice@example.com")
        #expect(configured.status == 0, "\(configured)")
        #expect(try CIBARun.requests(other).count == 1)
    }

    @Test func aProfileWithAClientSecretIsRefused() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        let profile: JSONObject = ["server": .string("https://idp.example"), "clientId": .string("devtrust-app"), "clientSecret": .string("s3cret-Value")]
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", JSONWriter.string(.object(["signIn": .object(["profiles": .object(["p": .object(profile)])])])))
        let result = try cli.run("login", "--ciba", "--profile", "p", "--login-hint", "alice")
        #expect(result.status == 2 && result.stderr.contains("signIn.profiles.p.clientSecret") && result.stderr.contains("public client")
                && !result.stderr.contains("s3cret-Value"), "\(result)")
    }

    @Test func badOptionsAreUsageErrorsBeforeAnythingIsSent() throws {
        let server = try ReferenceServer()
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let base = ["login", "--server", server.url, "--client-id", "devtrust-app"]
        for (extra, message) in [
            (["--ciba"], "--ciba needs --login-hint"),
            (["--ciba", "--login-hint", ""], "--ciba needs --login-hint"),
            (["--login-hint", "alice"], "--login-hint goes with --ciba"),
            (["--binding-message", "hello"], "--binding-message goes with --ciba"),
            (["--requested-expiry", "60"], "--requested-expiry goes with --ciba"),
            (["--ciba", "--device-code", "--login-hint", "alice"], "give one of --browser, --device-code, --ciba and --callback"),
            (["--ciba", "--login-hint", "alice", "--binding-message", "line one\nline two"], "plain text on one line"),
            (["--ciba", "--login-hint", "alice", "--binding-message", "\u{1B}[2Jcleared"], "plain text on one line"),
            (["--ciba", "--login-hint", "alice", "--binding-message", String(repeating: "x", count: 65)], "1 to 64 characters"),
            // Counted in Unicode scalars: one letter with 2000 accents (4 KB) is no single character.
            (["--ciba", "--login-hint", "alice", "--binding-message", "e" + String(repeating: "\u{301}", count: 2000)], "1 to 64 characters"),
            (["--ciba", "--login-hint", "alice", "--binding-message", "Kiosk e" + String(repeating: "\u{301}", count: 5)], "more than 4 accents"),
            (["--ciba", "--login-hint", "alice", "--no-qr"], "--no-qr does not go with --ciba"),
            (["--ciba", "--login-hint", "alice", "--non-interactive"], "--non-interactive does not go with --ciba"),
            (["--ciba", "--login-hint", "alice", "--redirect-uri", "http://127.0.0.1:9/cb"], "--redirect-uri does not go with --ciba"),
            (["--ciba", "--login-hint", "alice", "--authenticator", "BasicAuthenticator"], "--authenticator does not go with --ciba"),
            (["--ciba", "--login-hint", "alice", "--input", "username=alice"], "--input does not go with --ciba"),
            (["--ciba", "--login-hint", "alice", "--inputs", "-"], "--inputs does not go with --ciba"),
            (["--ciba", "--login-hint", "alice", "--requested-expiry", "0"], "--requested-expiry must be a whole number"),
            (["--ciba", "--login-hint", "alice", "--requested-expiry", "5m"], "--requested-expiry must be a whole number"),
        ] {
            let result = try cli.run(base + extra)
            #expect(result.status == 2 && result.stderr.contains(message), "\(extra): \(result)")
            #expect(!result.stderr.contains("\u{1B}[2J"), "\(extra): \(result)")
        }
        #expect(try CIBARun.requests(server).isEmpty)
    }
}

/// What the server says reaches the terminal on one line and without the auth_req_id; the
/// started event and the countdown use the server's expires_in; a signal says what became of
/// the request. Each test fails on the binary before the outside review's mends.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct CIBAReviewTests {
    /// The lines of stderr that devtrust's own messages could be taken for, when they do not start with "devtrust: ".
    static func forgedLines(_ stderr: String) -> [Substring] {
        stderr.split(separator: "\n").filter { $0.hasPrefix("fake line") }
    }

    @Test func theStartedEventAndTheDeadlineAreTheServersExpiresInNotTheRequestedOne() throws {
        let server = try ReferenceServer(["--ciba-interval", "1", "--ciba-max-expiry", "2"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let result = try CIBARun.login(cli, server, ["--requested-expiry", "300"])
        #expect(result.status == 4 && result.stderr.contains("expired before it was approved"), "\(result)")
        let events = DeviceCodeRun.events(result.stdout)
        #expect(events.first?["expires_in"] == .integer(2), "\(events)")
        #expect(try CIBARun.requests(server).first?["requestedExpiry"] == .string("300"))
    }

    @Test func serverAnswersAreCappedAndAnUnusableIntervalIsFiveSeconds() throws {
        for (extra, expiresIn, interval) in [(#"{"expires_in": 1e12, "interval": 1}"#, Int64(86_400), Int64(1)),
                                             (#"{"interval": 0}"#, 600, 5), (#"{"interval": -2}"#, 600, 5),
                                             (#"{"expires_in": "600", "interval": "1"}"#, 600, 1), (#"{"expires_in": 8.0}"#, 8, 1)] {
            let server = try ReferenceServer(["--ciba-interval", "1", "--ciba-approve-after", "1", "--ciba-answer-extra", extra])
            let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
            let result = try CIBARun.login(cli, server)
            let started = DeviceCodeRun.events(result.stdout).first
            #expect(started?["expires_in"] == .integer(expiresIn) && started?["interval"] == .integer(interval), "\(extra): \(result)")
            if interval == 1 { #expect(result.status == 0, "\(extra): \(result)") }
        }
    }

    @Test func theLoginHintIsShownOnOneLineWithoutEscapeSequences() throws {
        let server = try ReferenceServer(["--ciba-interval", "1", "--ciba-approve-after", "1"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let result = try cli.run("login", "--ciba", "--server", server.url, "--client-id", "devtrust-app",
                                 "--login-hint", "alice\n\u{1B}[2Jfake line: devtrust: signed in")
        #expect(result.status == 0, "\(result)")
        #expect(!result.stderr.contains("\u{1B}") && Self.forgedLines(result.stderr).isEmpty
                && result.stderr.contains(#"device of alice\u{A}\u{1B}[2Jfake line"#), "\(result.stderr)")
    }

    /// A line break in an error_description, from the backchannel endpoint or a poll, starts no line of its own.
    @Test func aLineBreakInTheServersWordsStartsNoLine() throws {
        let refusing = try ReferenceServer(["--ciba-request-error", "bad hint\nfake line: devtrust: signed in"])
        let invalid = try ReferenceServer(["--ciba-interval", "1", "--ciba-invalid-on", "1",
                                           "--ciba-invalid-description", "bad request\nfake line: devtrust: signed in"])
        for server in [refusing, invalid] {
            let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
            let result = try cli.run("login", "--ciba", "--server", server.url, "--client-id", "devtrust-app", "--login-hint", "alice")
            #expect(result.status == 4 && Self.forgedLines(result.stderr).isEmpty && result.stderr.contains(#"\u{A}fake line"#), "\(result)")
        }
    }

    /// glewlwyd answers invalid_grant to a request that a newer one for the same user replaced.
    @Test func anInvalidGrantSaysTheRequestIsNoLongerValidNotACode() throws {
        let server = try ReferenceServer(["--ciba-interval", "1", "--ciba-invalid-on", "2"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let result = try CIBARun.login(cli, server)
        #expect(result.status == 4 && result.stderr.contains("the sign-in request was replaced by a newer one for the same user, or is no longer valid")
                && !result.stderr.contains("code or refresh token"), "\(result)")
        #expect(DeviceCodeRun.finalEvent(DeviceCodeRun.events(result.stdout))?["error"] == .string("invalid_grant"))
    }

    /// A signal while the request is on its way, and while polling: a final `interrupted` event,
    /// the CIBA words on stderr (the request stays pending on the phone), and the end by that signal.
    @Test(arguments: [(SIGINT, ["--delay-seconds", "6", "--delay-answers", "1"], "while sending the sign-in request; nothing was stored"),
                      (SIGTERM, ["--ciba-interval", "1"], "the request stays pending on the user's device until it expires")])
    func aSignalSaysWhatBecomesOfTheRequest(signal: Int32, serverArguments: [String], words: String) throws {
        let server = try ReferenceServer(serverArguments)
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli.path)
        process.arguments = ["login", "--ciba", "--server", server.url, "--client-id", "devtrust-app", "--login-hint", "alice", "--json"]
        process.environment = cli.environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Until the request has reached the server (and, polling, been answered), then the signal.
        let deadline = Date().addingTimeInterval(10)
        while try CIBARun.requests(server).isEmpty && serverArguments.first == "--ciba-interval" && Date() < deadline { usleep(100_000) }
        usleep(1_500_000)
        kill(process.processIdentifier, signal)
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let last = DeviceCodeRun.events(stdout).last
        #expect(last?["event"] == .string("failure") && last?["error"] == .string("interrupted"), "\(stdout)")
        #expect(stderr.contains(words) && !stderr.contains("code"), "\(stderr)")
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == signal, "\(process.terminationReason) \(process.terminationStatus) \(stderr)")
    }

    /// An unusable backchannel endpoint in discovery is said by --ciba, and the other sign-ins still work there.
    @Test func anUnusableBackchannelEndpointBreaksOnlyCIBA() throws {
        let server = try ReferenceServer(["--ciba-endpoint", "http://idp.example/ciba", "--device-interval", "1", "--device-approve-after", "1"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        // --discovery: a document that does not serve is an error there (--server would fall back to WSO2's paths).
        let discovery = server.url + "/oauth2/token/.well-known/openid-configuration"
        let device = try cli.run("login", "--device-code", "--discovery", discovery, "--client-id", "devtrust-app", "--json")
        #expect(device.status == 0, "\(device)")
        let ciba = try cli.run("login", "--ciba", "--discovery", discovery, "--client-id", "devtrust-app", "--login-hint", "alice")
        #expect(ciba.status == 5 && ciba.stderr.contains("the backchannel authentication endpoint http://idp.example/ciba is not a usable URL"), "\(ciba)")
    }
}

/// Against glewlwyd's CIBA (plugin oidc-dpop, poll mode, public client devtrust-cli), approved and
/// denied through its user API as the user would on their phone.
@Suite(.enabled(if: GlewlwydPeer.shouldRun)) struct GlewlwydCIBATests {
    static let hint = #"{"username":"demo"}"#

    static func start(_ cli: DevtrustBinary, _ peer: GlewlwydPeer, binding: String, extra: [String] = []) throws -> RunningCommand {
        try RunningCommand(cli, ["login", "--ciba", "--discovery", peer.dpopDiscovery, "--client-id", peer.clientID, "--login-hint", hint,
                                 "--binding-message", binding, "--scope", "openid offline_access", "--json"] + extra)
    }

    @Test func anApprovedRequestSignsInAndTheAccessTokenWorks() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let login = try Self.start(cli, peer, binding: "devtrust test 1")
        let started = try #require(login.nextLine().flatMap { try? JSONParser.parse($0).objectValue })
        #expect(started["event"] == .string("started") && started["binding_message"] == .string("devtrust test 1") && started["auth_req_id"] == nil,
                "\(started)")
        let approval = try peer.approveCIBA(binding: "devtrust test 1")
        #expect(approval.status == 0, "\(approval)")
        let (status, lines, stderr) = login.finish()
        #expect(status == 0, "\(lines) \(stderr)")
        #expect(DeviceCodeRun.finalEvent(DeviceCodeRun.events(lines.joined(separator: "\n")))?["event"] == .string("success"), "\(lines)")
        #expect(stderr.contains("devtrust test 1") && stderr.contains("signed in at"), "\(stderr)")
        let accessToken = try cli.run("access-token")
        #expect(accessToken.status == 0 && accessToken.output.split(separator: ".").count == 3, "\(accessToken)")
        // glewlwyd echoes auth_req_id in its token answer, and its ID token carries it as CIBA Core's claim
        // urn:openid:params:jwt:claim:auth_req_id. The echo is not kept; the signed ID token is, with the
        // claim: the id was redeemed for these tokens, and glewlwyd refuses it from then on.
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        let stored = String(decoding: try #require(directory.read("ks/" + file)), as: UTF8.self)
        let record = try #require(try JSONParser.parse(stored).objectValue)
        #expect(!record.members.contains { $0.key.contains("auth_req") }, "\(record.members.map(\.key))")
        let idToken = try #require(record["idToken"]?.stringValue)
        let claims = try #require(try JSONParser.parse(try Base64.decode(idToken.split(separator: ".")[1], alphabet: .url)).objectValue)
        let authReqID = try #require(claims["urn:openid:params:jwt:claim:auth_req_id"]?.stringValue)
        #expect(authReqID.count >= 20 && !stored.contains(authReqID), "\(claims)")
        let again = try ProcessRunner.run("/usr/bin/curl", ["-s", "--max-time", "10", "-d", "client_id=\(peer.clientID)",
                                                            "-d", "grant_type=urn:openid:params:grant-type:ciba", "-d", "auth_req_id=\(authReqID)",
                                                            peer.base + "/api/oidc-dpop/token"])
        #expect(again.stdout.contains(#""error""#) && !again.stdout.contains("access_token"), "\(again)")
    }

    @Test func aDeniedRequestEndsWithExitFour() throws {
        let peer = try GlewlwydPeer()
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let login = try Self.start(cli, peer, binding: "devtrust test 2")
        _ = login.nextLine()
        let denial = try peer.approveCIBA(binding: "devtrust test 2", deny: true)
        #expect(denial.status == 0, "\(denial)")
        let (status, lines, stderr) = login.finish()
        #expect(status == 4 && stderr.contains("the sign-in was denied"), "\(lines) \(stderr)")
        #expect(DeviceCodeRun.finalEvent(DeviceCodeRun.events(lines.joined(separator: "\n")))?["error"] == .string("access_denied"), "\(lines)")
        #expect(try cli.run("access-token").status == 3)
    }

    @Test func anUnapprovedRequestExpires() throws {
        // requested_expiry 7 s at glewlwyd's 5 s interval: one poll (pending), then the deadline.
        let peer = try GlewlwydPeer()
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let result = try cli.run("login", "--ciba", "--discovery", peer.dpopDiscovery, "--client-id", peer.clientID, "--login-hint", Self.hint,
                                 "--requested-expiry", "7", "--json")
        #expect(result.status == 4 && result.stderr.contains("expired before it was approved"), "\(result)")
        let events = DeviceCodeRun.events(result.stdout)
        #expect(events.first?["expires_in"] == .integer(7) && events.first?["interval"] == .integer(5), "\(events)")
        #expect(DeviceCodeRun.finalEvent(events)?["error"] == .string("expired_token"), "\(events)")
    }

    @Test func aPluginWithoutCIBAGetsAClearErrorAndAPlainHintIsRefusedByTheServer() throws {
        let peer = try GlewlwydPeer()
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let none = try cli.run("login", "--ciba", "--discovery", peer.discovery, "--client-id", peer.clientID, "--login-hint", Self.hint)
        #expect(none.status == 4 && none.stderr.contains("advertises no backchannel authentication endpoint"), "\(none)")
        // glewlwyd wants the hint as JSON: a plain name is its invalid_request, said as the server said it.
        let plain = try cli.run("login", "--ciba", "--discovery", peer.dpopDiscovery, "--client-id", peer.clientID, "--login-hint", "demo")
        #expect(plain.status == 4 && plain.stderr.contains("invalid_request"), "\(plain)")
    }
}
