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
        // glewlwyd echoes auth_req_id in its token answer: nothing of it is kept.
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        let stored = String(decoding: try #require(directory.read("ks/" + file)), as: UTF8.self)
        #expect(!stored.contains("auth_req"), "\(stored)")
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
