import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `login --device-code` against the reference server: where the sign-in is
/// stored (under the issuer; found by the issuer or the discovery URL), how
/// polling survives a failing server and a wall clock that is set, and the
/// final `--json` event of every run.
enum DeviceCodeRun {
    static func events(_ text: String) -> [JSONObject] {
        text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)).objectValue }
    }

    static func names(_ events: [JSONObject]) -> [String] { events.map { $0["event"]?.stringValue ?? "?" } }

    /// The one final event (`success` or `failure`), which must be the last line; nil (with an issue) otherwise.
    static func finalEvent(_ events: [JSONObject], sourceLocation: SourceLocation = #_sourceLocation) -> JSONObject? {
        let finals = events.filter { ["success", "failure"].contains($0["event"]?.stringValue ?? "") }
        #expect(finals.count == 1 && events.last == finals.first, "events: \(names(events))", sourceLocation: sourceLocation)
        return finals.count == 1 ? events.last : nil
    }

    /// The gaps between the polls the server saw (the first from the device authorization).
    static func pollGaps(_ server: ReferenceServer) throws -> [Double] {
        let grant = try #require(try server.get("/api/device/polls").arrayValue?.first?.objectValue)
        let polls = grant["polls"]?.arrayValue?.compactMap(\.doubleValue) ?? []
        return zip(polls, [grant["created"]?.doubleValue ?? 0] + polls).map { $0 - $1 }
    }

    /// A wall clock that jumps `seconds` about 0.3 s after the program starts (Tests/Interop/jumping_clock.c).
    static func jumpingClock(_ directory: TemporaryDirectory, seconds: Int) throws -> [String: String] {
        let library = directory.file("jumping_clock.so")
        let built = try ExternalTool.cc.run(["-shared", "-fPIC", "-o", library, Repository.path("Tests/Interop/jumping_clock.c"), "-ldl"])
        #expect(built.status == 0, "\(built)")
        return ["LD_PRELOAD": library, "JUMP_CLOCK_SECONDS": "\(seconds)", "JUMP_CLOCK_AFTER_MS": "300"]
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun)) struct DeviceCodeIssuerTests {
    @Test func aDiscoverySignInIsStoredUnderTheIssuerAndFoundByItOrTheDiscoveryURL() throws {
        // RFC 8414's form: the well-known name comes before the issuer's path, so the discovery URL
        // without its suffix is not the issuer; the document says it (and must match the URL).
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "1", "--issuer", "/t/acme"])
        let issuer = server.url + "/t/acme"
        let host = String(server.url.dropFirst("http://".count))
        let discovery = server.url + "/.well-known/openid-configuration/t/acme"
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let login = try cli.run("login", "--device-code", "--discovery", discovery, "--client-id", "devtrust-app", "--scope", "openid offline_access", "--json")
        #expect(login.status == 0, "\(login)")
        let status = try JSONParser.parse(try cli.run("status", "--json").stdout).objectValue
        let record = try #require(status?["signIns"]?.arrayValue?.first?.objectValue)
        #expect(record["server"] == .string(issuer) && record["discovery"] == .string(discovery), "\(record)")

        let byIssuer = try cli.run("access-token", "--server", issuer)
        #expect(byIssuer.status == 0 && !byIssuer.output.isEmpty, "\(byIssuer)")
        for arguments in [["--server", host + "/t/acme"], ["--server", host], ["--discovery", discovery], ["--server", discovery], []] {
            let found = try cli.run(["access-token"] + arguments)
            #expect(found.status == 0 && found.output == byIssuer.output, "access-token \(arguments): \(found)")
        }
        #expect(try cli.run("access-token", "--server", server.url + "/other").status == 3)

        // What was written still matches the keystore's schema.
        let validated = try ExternalTool.python.run([Repository.path("Tests/Interop/validate_keystore.py"), Repository.path("keystore/schema"), directory.file("ks/keystore.json")])
        #expect(validated.output == "ok " + directory.file("ks/keystore.json"), "\(validated)")

        let logout = try cli.run("logout", "--server", issuer)
        #expect(logout.status == 0 && logout.stderr.contains("revoked the refresh token and access token"), "\(logout)")
        #expect(try server.get("/api/token-stats").objectValue?["revoked"] == .integer(2))
        #expect(try cli.run("access-token").status == 3)
    }

    @Test func aSignInStoredByAnEarlierVersionUnderItsDiscoveryURLIsFoundByItsIssuer() throws {
        // keystore/fixtures/v2/device-code-by-discovery: `login --device-code --discovery` by devtrust 1e02146 (no issuer recorded).
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: copyKeystoreFixture("v2/device-code-by-discovery", into: directory))
        let discovery = "http://127.0.0.1:18084/oauth2/token/.well-known/openid-configuration"
        for arguments in [["--server", "http://127.0.0.1:18084/oauth2/token"], ["--discovery", discovery], []] {
            let found = try cli.run(["access-token"] + arguments)
            #expect(found.status == 0 && found.output == "ROuR-QruZP_kjH0lotJBXg-rXtuxHvyoY2Qbf1nfVCs", "access-token \(arguments): \(found)")
        }
        // Nothing listens there: the revocation fails, and the sign-in is deleted all the same.
        let logout = try cli.run("logout", "--server", "http://127.0.0.1:18084/oauth2/token")
        #expect(logout.status == 0 && logout.stderr.contains("deleted the sign-in"), "\(logout)")
        #expect(try cli.run("access-token").status == 3)
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun)) struct DeviceCodeResilienceTests {
    @Test func aServerFailureWithAJSONErrorAndALostConnectionBackOffAndPollingGoesOn() throws {
        // Poll 2: the connection closes without an answer; poll 3: 503 {"error":"temporarily_unavailable"}; poll 4 is approved.
        let server = try ReferenceServer(["--device-interval", "1", "--device-drop-on", "2", "--device-unavailable-on", "3", "--device-approve-after", "4"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let result = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(result.status == 0, "\(result)")
        #expect(DeviceCodeRun.finalEvent(DeviceCodeRun.events(result.stdout))?["event"] == .string("success"))
        #expect(result.stderr.contains("closed the connection without an answer") && result.stderr.contains("trying again in 1 s"), "\(result.stderr)")
        #expect(result.stderr.contains("HTTP 503 (temporarily_unavailable") && result.stderr.contains("trying again in 2 s"), "\(result.stderr)")
        // Never sooner than the interval; the back-off doubles: 1 s, 1 s, then 1 s after the lost answer and 2 s after the 503.
        let gaps = try DeviceCodeRun.pollGaps(server)
        #expect(gaps.count == 4, "\(gaps)")
        for (gap, expected) in zip(gaps, [1.0, 1.0, 1.0, 2.0]) {
            #expect(gap >= expected - 0.05 && gap < expected + 0.9, "poll gaps \(gaps)")
        }
        #expect(try cli.run("access-token").status == 0)
    }

    @Test(.enabled(if: ExternalTool.cc.shouldRun))
    func aWallClockSetForwardDoesNotEndTheSignIn() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment = try DeviceCodeRun.jumpingClock(directory, seconds: 3600)
        let before = Date().timeIntervalSince1970
        let result = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(result.status == 0, "\(result)")
        let events = DeviceCodeRun.events(result.stdout)
        #expect(DeviceCodeRun.finalEvent(events)?["event"] == .string("success"))
        #expect(try DeviceCodeRun.pollGaps(server).count == 2)
        // The times shown are the (set) wall clock's.
        let shown = events.filter { $0["event"] == .string("polling") }.compactMap { $0["next_poll_at"]?.stringValue }
            .compactMap { ISO8601DateFormatter().date(from: $0)?.timeIntervalSince1970 }
        #expect(shown.count == 2 && shown[1] > before + 3000, "\(events)")
    }

    @Test(.enabled(if: ExternalTool.cc.shouldRun))
    func aWallClockSetBackDoesNotMakeItPollPastTheCodesLife() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-expires", "3"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment = try DeviceCodeRun.jumpingClock(directory, seconds: -3600)
        // Waiting on the wall clock would wait an hour: `timeout` ends that.
        let result = try ProcessRunner.run("/usr/bin/timeout", ["-s", "KILL", "30", cli.path, "login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json"],
                                           environment: cli.environment)
        #expect(result.status == 4, "\(result)")
        let failure = DeviceCodeRun.finalEvent(DeviceCodeRun.events(result.stdout))
        #expect(failure?["error"] == .string("expired_token"))
        // Polls 1 and 2 only: devtrust stopped at expires_in itself (the server never said expired_token).
        #expect(try DeviceCodeRun.pollGaps(server).count == 2)
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun)) struct DeviceCodeFinalEventTests {
    @Test func anExpiredCodeSaysExpiredThenEndsWithOneFailure() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-expires", "2"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let result = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(result.status == 4, "\(result)")
        let events = DeviceCodeRun.events(result.stdout)
        #expect(DeviceCodeRun.names(events).suffix(2) == ["expired", "failure"], "\(events)")
        let failure = DeviceCodeRun.finalEvent(events)
        #expect(failure?["error"] == .string("expired_token") && failure?["description"]?.stringValue?.contains("expired") == true, "\(events)")
    }

    @Test func failuresBeforeTheCodeIsShownEndWithOneFailure() throws {
        let server = try ReferenceServer(["--device-interval", "1"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let stopped = try ReferenceServer()
        let closed = stopped.url
        stopped.stop()
        let cases: [(arguments: [String], status: Int32, error: String, description: String)] = [
            (["--discovery", closed + "/.well-known/openid-configuration", "--client-id", "devtrust-app"], 5, "network_error", "cannot connect to"),
            (["--discovery", server.url + "/nowhere/.well-known/openid-configuration", "--client-id", "devtrust-app"], 5, "protocol_error", "answered HTTP 404"),
            (["--server", server.url, "--client-id", "someone-else"], 4, "invalid_client", "unknown client"),
        ]
        for (arguments, status, error, description) in cases {
            let result = try cli.run(["login", "--device-code", "--json"] + arguments)
            #expect(result.status == status, "\(arguments): \(result)")
            let events = DeviceCodeRun.events(result.stdout)
            #expect(events.count == 1, "\(arguments): \(result.stdout)")
            let failure = DeviceCodeRun.finalEvent(events)
            #expect(failure?["error"] == .string(error), "\(arguments): \(result.stdout)")
            #expect(failure?["description"]?.stringValue?.contains(description) == true, "\(arguments): \(result.stdout)")
        }
    }

    @Test func aKeystoreThatCannotTakeTheTokensEndsWithFailureNotSuccess() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "1"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        mkdir(directory.file("ks"), 0o700)
        _ = directory.write("ks/keystore.json", "{ this is not a keystore")
        let result = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(result.status == 7, "\(result)")
        let events = DeviceCodeRun.events(result.stdout)
        #expect(!DeviceCodeRun.names(events).contains("success"), "\(events)")
        let failure = DeviceCodeRun.finalEvent(events)
        #expect(failure?["error"] == .string("keystore_error") && failure?["description"]?.stringValue?.contains("keystore.json") == true, "\(events)")
    }
}

/// However a device-code run ends, `--json` ends with one final event: a signal too.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct DeviceCodeSignalTests {
    /// Ctrl-C, SIGTERM, SIGHUP while polling: a `failure` event ("interrupted"), then the
    /// process ends by that signal, as the shell expects. Also with numbers too large to add.
    @Test(arguments: [(SIGINT, ["--device-interval", "1"]), (SIGTERM, ["--device-interval", "1"]), (SIGHUP, ["--device-interval", "1"]),
                      (SIGTERM, ["--device-expires", "9223372036854775807", "--device-interval", "9223372036854000000"])])
    func aSignalEndsWithAFinalEvent(signal: Int32, serverArguments: [String]) throws {
        let server = try ReferenceServer(serverArguments)
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli.path)
        process.arguments = ["login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json"]
        process.environment = cli.environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Once it has shown the code and waits (to poll, or for the code's end), signal it.
        var lines = [String]()
        var buffer = [UInt8]()
        while lines.isEmpty {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { break }
            if byte.first == 0x0A { lines.append(String(decoding: buffer, as: UTF8.self)); buffer.removeAll() } else { buffer.append(byte.first!) }
        }
        #expect(lines.first?.contains("\"event\":\"started\"") == true, "\(lines)")
        usleep(1_500_000)
        kill(process.processIdentifier, signal)
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        lines += String(decoding: rest, as: UTF8.self).split(separator: "\n").map(String.init)
        let last = try JSONParser.parse(lines.last ?? "").objectValue
        #expect(last?["event"] == .string("failure") && last?["error"] == .string("interrupted"), "\(lines)")
        #expect(lines.filter { $0.contains("\"event\":\"failure\"") || $0.contains("\"event\":\"success\"") }.count == 1, "\(lines)")
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == signal, "\(process.terminationReason) \(process.terminationStatus)")
    }

    /// A 404 page is no outage: trying again will not help, so the run ends at once with one
    /// failure event, instead of polling a wrong endpoint until the code expires.
    @Test func aNotFoundPageEndsThePolling() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-not-found-on", "1"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let login = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 5 && login.stderr.contains("answered HTTP 404"), "\(login)")
        let polls = try server.get("/api/device/polls").arrayValue?.first?.objectValue?["polls"]?.arrayValue?.count
        #expect(polls == 1, "polled \(String(describing: polls)) times")
        #expect(login.stdout.split(separator: "\n").last?.contains("\"event\":\"failure\"") == true, "\(login.stdout)")
    }

    @Test func aTokenLifetimeTooLargeToAddIsNoCrash() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "1", "--access-token-ttl", "9223372036854775807"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let login = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 0, "\(login)")
        #expect(login.stdout.split(separator: "\n").last?.contains("\"event\":\"success\"") == true, "\(login.stdout)")
        #expect(try cli.run("access-token").status == 0)
    }
}
