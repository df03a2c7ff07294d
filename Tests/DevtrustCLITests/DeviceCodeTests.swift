import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `login --device-code` against a real OpenID provider (glewlwyd) and, for
/// the server behaviours glewlwyd cannot be made to show on demand (slow_down
/// to a client that polls on time, access_denied), the reference server.
@Suite(.enabled(if: GlewlwydPeer.shouldRun)) struct GlewlwydDeviceCodeTests {
    static func events(_ lines: [String]) -> [JSONObject] { lines.compactMap { try? JSONParser.parse($0).objectValue } }

    /// glewlwyd answers a dead refresh token with an empty 400: the grant is dead, the sign-in goes
    /// (exit 4, "sign in again"), not kept and retried for ever as if the server were down.
    @Test func aDeadGrantAtGlewlwydEndsTheSignIn() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        #expect(try peer.signInWithDeviceCode(cli).status == 0)
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        var tokens = try JSONParser.parse(try #require(directory.read("ks/" + file))).objectValue!
        let refresh = try #require(tokens["refreshToken"]?.stringValue)
        let tokenEndpoint = try #require(tokens["tokenEndpoint"]?.stringValue)
        // The user ends the grant elsewhere (glewlwyd's own way for public clients).
        let killed = try ProcessRunner.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-d", "grant_type=delete_token",
                                                              "-d", "client_id=\(peer.clientID)", "-d", "refresh_token=\(refresh)", tokenEndpoint])
        #expect(killed.stdout == "200", "\(killed)")
        tokens["expiresAt"] = .integer(Int64(Date().timeIntervalSince1970) + 5)
        directory.write("ks/" + file, JSONWriter.bytes(.object(tokens)))
        let refused = try cli.run("access-token")
        #expect(refused.status == 4 && refused.stderr.contains("run `devtrust login` again") && !refused.stderr.contains("it is kept"), "\(refused)")
        #expect(try cli.run("access-token").status == 3)
    }

    @Test func approvedCodeSignsInRefreshesAndLogsOut() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        // glewlwyd's public clients cannot revoke (RFC 7009); its own delete_token grant ends a refresh token.
        let profile: JSONObject = ["discovery": .string(peer.discovery), "clientId": .string(peer.clientID), "deleteTokenGrant": .bool(true)]
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", JSONWriter.string(.object(["signIn": .object(["profiles": .object(["glewlwyd": .object(profile)])])])))
        let login = try RunningCommand(cli, ["login", "--device-code", "--profile", "glewlwyd", "--scope", "openid offline_access", "--json", "-v"])
        let started = try #require(login.nextLine().flatMap { try? JSONParser.parse($0).objectValue })
        #expect(started["event"] == .string("started"))
        let userCode = try #require(started["user_code"]?.stringValue)
        #expect(started["verification_uri_complete"]?.stringValue?.hasSuffix(userCode) == true)
        #expect(started["interval"] == .integer(5) && started["expires_in"] == .integer(600))
        let approval = try peer.approve(userCode)
        #expect(approval.status == 0, "\(approval)")
        let (status, lines, stderr) = login.finish()
        #expect(status == 0, "\(stderr)")
        let events = Self.events(lines)
        #expect(events.map { $0["event"]?.stringValue ?? "" }.last == "success")
        #expect(events.last?["token_type"]?.stringValue?.lowercased() == "bearer" && events.last?["scope"] == .string("openid offline_access"))
        // No event carries a code or a token.
        let accessToken = try cli.run("access-token").output
        #expect(accessToken.hasPrefix("eyJ"))
        // Stored under glewlwyd's issuer, and found by it as well as by the discovery URL.
        let issuer = try #require(peer.document["issuer"]?.stringValue)
        #expect(issuer != peer.discovery)
        for arguments in [["--server", issuer], ["--discovery", peer.discovery]] {
            let found = try cli.run(["access-token"] + arguments)
            #expect(found.status == 0 && found.output == accessToken, "access-token \(arguments): \(found)")
        }
        for line in lines + [stderr] {
            #expect(!line.contains(accessToken) && !line.contains("device_code") && !line.contains("refresh_token"))
        }
        // Refresh against glewlwyd: make the stored token look about to expire.
        let tokenFile = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        var tokens = try JSONParser.parse(try #require(directory.read("ks/" + tokenFile))).objectValue!
        tokens["expiresAt"] = .integer(Int64(Date().timeIntervalSince1970) + 5)
        directory.write("ks/" + tokenFile, JSONWriter.bytes(.object(tokens)))
        let refreshed = try cli.run("access-token")
        #expect(refreshed.status == 0 && refreshed.output != accessToken, "\(refreshed)")
        let logout = try cli.run("logout", "--server", issuer)
        #expect(logout.status == 0 && logout.stderr.contains("revoked the refresh token"), "\(logout)")
        #expect(try cli.run("access-token").status == 3)
    }

    @Test func anUnapprovedCodeExpires() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let start = Date()
        let result = try cli.run("login", "--device-code", "--discovery", peer.shortDiscovery, "--client-id", peer.clientID, "--json")
        #expect(result.status == 4, "\(result)")
        let events = Self.events(result.stdout.split(separator: "\n").map(String.init))
        #expect(events.first?["expires_in"] == .integer(8) && events.first?["interval"] == .integer(2))
        // `expired`, then the one final event.
        #expect(DeviceCodeRun.names(events).suffix(2) == ["expired", "failure"], "\(events)")
        #expect(DeviceCodeRun.finalEvent(events)?["error"] == .string("expired_token"))
        #expect(result.stderr.contains("the code expired before it was approved"))
        #expect(Date().timeIntervalSince(start) < 15)
    }

    @Test(.enabled(if: ExternalTool.cc.shouldRun))
    func aWallClockSetForwardDoesNotEndTheSignIn() throws {
        // oidc-quick: polls every 2 s; the wall clock jumps an hour before the first poll, far past the
        // code's 120 s. (oidc-short's 8 s left the approval below a few seconds on a loaded machine.)
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment = try DeviceCodeRun.jumpingClock(directory, seconds: 3600)
        let login = try RunningCommand(cli, ["login", "--device-code", "--discovery", peer.quickDiscovery, "--client-id", peer.clientID, "--json"])
        var events = [JSONObject]()
        // Approved only once the first poll came back pending, so that a second poll, after the jump, is needed.
        while let line = login.nextLine(), let event = try? JSONParser.parse(line).objectValue {
            events.append(event)
            if event["event"] != .string("started") && event["poll_count"] != .integer(1) { break }
        }
        #expect(events.last?["poll_count"] == .integer(2), "\(events)")
        let approval = try peer.approve(try #require(events.first?["user_code"]?.stringValue), plugin: "oidc-quick")
        #expect(approval.status == 0, "\(approval)")
        let (status, lines, stderr) = login.finish()
        #expect(status == 0, "\(stderr)")
        #expect(DeviceCodeRun.finalEvent(events + GlewlwydDeviceCodeTests.events(lines))?["event"] == .string("success"))
    }

    @Test func authorizeURLWithPARIsAcceptedByGlewlwyd() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let printed = try cli.run("authorize-url", "--discovery", peer.discovery, "--client-id", peer.clientID, "--par")
        #expect(printed.status == 0, "\(printed)")
        #expect(printed.output.hasPrefix(peer.base + "/api/oidc/auth?") && printed.output.contains("request_uri=urn%3Aietf%3Aparams%3Aoauth%3Arequest_uri%3A"))
        // glewlwyd accepts the pushed request: it sends the browser on to its login page.
        let accepted = try ProcessRunner.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", printed.output])
        #expect(accepted.stdout.hasPrefix("302 ") && accepted.stdout.contains("login.html"), "\(accepted.stdout)")
        let forged = printed.output.replacingOccurrences(of: "request_uri%3A", with: "request_uri%3AX")
        let refused = try ProcessRunner.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", forged])
        #expect(!refused.stdout.contains("login.html"), "\(refused.stdout)")
        // Without PAR the URL carries the request (PKCE S256, state) itself.
        let plain = try cli.run("authorize-url", "--discovery", peer.discovery, "--client-id", peer.clientID)
        #expect(plain.output.contains("code_challenge_method=S256") && plain.output.contains("state="))
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun)) struct ReferenceDeviceCodeTests {
    @Test func slowDownAddsFiveSecondsToEveryLaterPoll() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-slow-down-on", "2", "--device-approve-after", "4"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let result = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(result.status == 0, "\(result)")
        let grants = try server.get("/api/device/polls").arrayValue ?? []
        let polls = grants.first?.objectValue?["polls"]?.arrayValue?.compactMap(\.doubleValue) ?? []
        let created = grants.first?.objectValue?["created"]?.doubleValue ?? 0
        let gaps = zip(polls, [created] + polls).map { $0 - $1 }
        #expect(gaps.count == 4, "\(gaps)")
        // 1 s, 1 s (slow_down), then 6 s for this and every later poll: never sooner, and later
        // only by what a loaded machine adds (far from the next 5 s step).
        for (gap, expected) in zip(gaps, [1.0, 1.0, 6.0, 6.0]) {
            #expect(gap >= expected - 0.05 && gap < expected + 2.5, "poll gaps \(gaps)")
        }
        let deviceCode = try #require(grants.first?.objectValue?["deviceCode"]?.stringValue)
        #expect(!result.stdout.contains(deviceCode) && !result.stderr.contains(deviceCode))
        let intervals = result.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)).objectValue }
            .filter { $0["event"] == .string("polling") }.map { $0["interval"] }
        #expect(intervals == [.integer(1), .integer(1), .integer(6), .integer(6)])
    }

    @Test func aDeniedCodeEndsWithExitFour() throws {
        let server = try ReferenceServer(["--device-interval", "1"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let login = try RunningCommand(cli, ["login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json"])
        let started = try #require(login.nextLine().flatMap { try? JSONParser.parse($0).objectValue })
        let code = try #require(started["user_code"]?.stringValue)
        _ = try ProcessRunner.run("/usr/bin/curl", ["-s", "-X", "POST", "--data", #"{"user_code":"\#(code)"}"#, server.url + "/api/device/deny"])
        let (status, lines, stderr) = login.finish()
        #expect(status == 4 && stderr.contains("denied"), "\(stderr)")
        // `access_denied`, then the one final event.
        let events = GlewlwydDeviceCodeTests.events(lines)
        #expect(DeviceCodeRun.names(events).suffix(2) == ["access_denied", "failure"], "\(events)")
        #expect(DeviceCodeRun.finalEvent(events)?["error"] == .string("access_denied"))
        // The events stay on stdout; stderr ends with the error object, as for every command under --json.
        let lastLine = try #require(stderr.split(separator: "\n").last.map(String.init))
        let error = try #require(try JSONParser.parse(lastLine).objectValue?["error"]?.objectValue, "\(stderr)")
        #expect(error["exitCode"] == .integer(4) && error["message"] == DeviceCodeRun.finalEvent(events)?["description"], "\(error)")
    }

    /// On a pty (pty_session.py): the screen for its window. A pty nobody sized says 0 x 0,
    /// which tells nothing: the conservative screen, unless COLUMNS and LINES say the size.
    @Test func theTerminalShowsTheCodeLargeAndAQRCodeWhereTheyFit() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "1"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        func screen(size: String?, _ options: [String] = [], variables: [String: String] = [:]) throws -> [String] {
            var environment = cli.environment
            environment["TERM"] = "xterm"
            environment.merge(variables) { $1 }
            let script = #"[{"expect":"signed in at","send":""}]"#
            let run = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/pty_session.py")] + (size.map { ["--size", $0] } ?? [])
                                            + [script, "--", cli.path, "login", "--device-code"] + options + ["--server", server.url, "--client-id", "devtrust-app"],
                                            environment: environment)
            let report = try JSONParser.parse(run.stdout).objectValue!
            let transcript = report["transcript"]?.stringValue ?? ""
            #expect(report["exit"] == .integer(0) && transcript.contains("waiting for approval… "), "\(transcript)")
            return transcript.replacingOccurrences(of: "\r\n", with: "\n").replacing(#/\x1B\[[0-9;]*m/#, with: "").components(separatedBy: "\n")
        }
        let sized = try screen(size: "120x40")
        #expect(!DeviceCodeScreenReading.qrRows(sized).isEmpty && DeviceCodeScreenReading.bigLetterRows(sized).count == 5, "no QR code or large code drawn: \(sized)")
        let unsized = try screen(size: nil)
        #expect(DeviceCodeScreenReading.qrRows(unsized).isEmpty && DeviceCodeScreenReading.bigLetterRows(unsized).isEmpty, "\(unsized)")
        #expect(unsized.contains("(no QR code: the terminal does not say its size; set COLUMNS and LINES)"), "\(unsized)")
        let told = try screen(size: nil, variables: ["COLUMNS": "120", "LINES": "40"])
        #expect(!DeviceCodeScreenReading.qrRows(told).isEmpty && DeviceCodeScreenReading.bigLetterRows(told).count == 5, "\(told)")
        // As large as an Int goes (this overflowed the layout's arithmetic: SIGILL): taken as 1000×1000.
        let huge = try screen(size: nil, variables: ["COLUMNS": "9223372036854775807", "LINES": "9223372036854775807"])
        #expect(!DeviceCodeScreenReading.qrRows(huge).isEmpty && DeviceCodeScreenReading.bigLetterRows(huge).count == 5, "\(huge)")
        let noQR = try screen(size: "120x40", ["--no-qr"])
        #expect(DeviceCodeScreenReading.qrRows(noQR).isEmpty && !noQR.contains { $0.contains("QR code") }, "\(noQR)")
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun)) struct SignInProfileCommandTests {
    @Test func aProfileSuppliesTheClientAndAnEndpointTheServerDoesNotAdvertise() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "1"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        // A discovery document without device_authorization_endpoint would need this override; the override is what is used.
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"signIn":{"profiles":{"lab":{"server":"\#(server.url)","clientId":"devtrust-app","scope":"openid email","endpoints":{"deviceAuthorization":"\#(server.url)/oauth2/device_authorize"}}}}}"#)
        let result = try cli.run("login", "--device-code", "--profile", "lab", "--json")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains(#""scope":"openid email""#))
        let unknown = try cli.run("login", "--device-code", "--profile", "nope")
        #expect(unknown.status == 2 && unknown.stderr.contains("no sign-in profile \"nope\" in the configuration (profiles: lab)"), "\(unknown)")
    }
}
