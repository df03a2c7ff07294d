import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// The browser extension (browser/) in real headless browsers, Debian's chromium and
/// firefox-esr, talking to the real `devtrust native-host` that `devtrust browser install`
/// registered. The reference server plays the identity server and records every
/// authorization navigation; its start page drives the browser (browser_pages.py).
/// Browsers are heavy on two cores: one at a time.
@Suite(.serialized, .enabled(if: ReferenceServer.shouldRun)) struct BrowserExtensionTests {
    static let kinds = HeadlessBrowser.Kind.allCases.filter { $0.tool.shouldRun }

    struct Setup {
        let fixture: ReferenceServerFixture<DevtrustBinary>
        /// An origin this device is not registered with, with the same /oauth2/authorize.
        let other: ReferenceServer
        let cli: DevtrustBinary
        let home: String

        var server: ReferenceServer { fixture.server }
        var endpoint: String { server.url + "/oauth2/authorize" }

        init(installHost: Bool = true) throws {
            var fixture = try ReferenceServerFixture<DevtrustBinary>(register: true)
            home = fixture.directory.file("home")
            fixture.cli.extraEnvironment["HOME"] = home
            self.fixture = fixture
            cli = fixture.cli
            other = try ReferenceServer()
            if installHost { try install() }
        }

        func install() throws {
            let installed = try cli.run("browser", "install", "--chromium", "--firefox",
                                        "--chromium-dir", HeadlessBrowser.chromiumDirectory(home: home))
            guard installed.status == 0 else { throw FixtureError("devtrust browser install failed: \(installed)") }
        }

        func uninstall() throws {
            let removed = try cli.run("browser", "uninstall", "--chromium", "--firefox",
                                      "--chromium-dir", HeadlessBrowser.chromiumDirectory(home: home))
            guard removed.status == 0 else { throw FixtureError("devtrust browser uninstall failed: \(removed)") }
        }

        /// The host manifests `browser install` wrote.
        var hostManifests: [String] {
            [HeadlessBrowser.chromiumDirectory(home: home) + "/NativeMessagingHosts/dev.devtrust.host.json",
             home + "/.mozilla/native-messaging-hosts/dev.devtrust.host.json"]
        }

        /// The browser, with the extension, opening the start page with these parameters.
        func browser(_ kind: HeadlessBrowser.Kind, _ parameters: [(String, String)]) throws -> HeadlessBrowser {
            var start = URLComponents(string: server.url + "/test/start")!
            start.queryItems = parameters.map { URLQueryItem(name: $0.0, value: $0.1) }
            // URLComponents leaves "+" and "&" of a value as they are in a query; the page reads them with URLSearchParams.
            start.percentEncodedQuery = start.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
            return try HeadlessBrowser(kind, home: home, environment: cli.environment, url: start.string!)
        }

        /// Waits until the start page reported "done" and `server` recorded every one of `states`.
        func waitFor(_ states: [String], at server: ReferenceServer? = nil, _ browser: HeadlessBrowser, seconds: Double = 120) throws {
            let server = server ?? self.server
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                let done = try self.server.browserReports().contains("done")
                let seen = Set(try server.authorizeRecords().compactMap { $0["state"]?.stringValue })
                if done && states.allSatisfy(seen.contains) { return }
                usleep(200_000)
            }
            throw FixtureError("the \(browser.kind) run did not finish within \(Int(seconds)) s; reports: \(try self.server.browserReports());"
                               + " records: \(try server.authorizeRecords().map { $0["state"] ?? .null });"
                               + " browser output: \(browser.output.suffix(3000))")
        }

        func record(_ state: String, at server: ReferenceServer? = nil) throws -> JSONObject? {
            try (server ?? self.server).authorizeRecords().last { $0["state"]?.stringValue == state }
        }

        var registrationId: String? {
            (try? fixture.registrations())?.first?.objectValue?["registrationId"]?.stringValue
        }
    }

    /// The query of an authorization URL the tests navigate to.
    static func query(_ state: String, extra: String = "") -> String {
        "response_type=code&client_id=web-app&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&scope=openid+profile&state=\(state)" + extra
    }

    /// Each token checked independently of devtrust and of the reference server: PyJWT with
    /// the device's public key (ES256 only), its header and claims, and its age.
    static func verified(_ tokens: [String], publicKeyPEM: String) throws -> [JSONObject] {
        let script = """
            import json, sys, time, jwt
            document = json.load(sys.stdin)
            results = []
            for token in document["tokens"]:
                try:
                    claims = jwt.decode(token, document["pem"], algorithms=["ES256"], options={"verify_aud": False})
                    header = jwt.get_unverified_header(token)
                    results.append({"valid": True, "header": header, "claims": claims, "age": time.time() - claims["iat"]})
                except Exception as error:
                    results.append({"valid": False, "error": repr(error)})
            print(json.dumps(results))
            """
        let input = JSONWriter.string(.object(["tokens": .array(tokens.map(JSONValue.string)), "pem": .string(publicKeyPEM)]))
        let result = try ExternalTool.python.run(["-c", script], stdin: Array(input.utf8))
        guard result.status == 0 else { throw FixtureError("the PyJWT check failed: \(result)") }
        return try JSONParser.parse(result.stdout).arrayValue?.compactMap(\.objectValue) ?? []
    }

    // MARK: navigations

    /// A navigation to the registered server's authorization endpoint arrives with a fresh token of
    /// this device (appended, the rest of the query as it was); a second one with another jti; an
    /// unregistered origin's /oauth2/authorize, a URL that already has device_token, a frame and a
    /// fetch of the endpoint arrive as they were sent; a sign-in in a popup stays its opener's.
    @Test(arguments: kinds) func aRegisteredEndpointGetsAFreshTokenAndNothingElseDoes(kind: HeadlessBrowser.Kind) throws {
        let setup = try Setup()
        let endpoint = setup.endpoint, elsewhere = setup.other.url + "/oauth2/authorize"
        let browser = try setup.browser(kind, [
            ("gate", endpoint + "?client_id=gate"),
            ("open", endpoint + "?" + Self.query("first")),
            ("open", endpoint + "?" + Self.query("second")),
            ("open", elsewhere + "?" + Self.query("elsewhere")),
            ("open", endpoint + "?" + Self.query("preset", extra: "&device_token=preset.token.value")),
            ("frame", endpoint + "?" + Self.query("frame")),
            ("xhr", endpoint + "?" + Self.query("xhr")),
            ("popup", endpoint + "?" + Self.query("popup")),
        ])
        defer { browser.stop() }
        try setup.waitFor(["first", "second", "preset", "frame", "xhr", "popup"], browser)
        try setup.waitFor(["elsewhere"], at: setup.other, browser)
        let pem = try setup.cli.run("pubkey", "--format", "pem").stdout

        var jtis = [String]()
        for state in ["first", "second"] {
            let record = try #require(try setup.record(state), "no \(state) navigation arrived")
            let token = try #require(record["deviceToken"]?.stringValue, "the \(state) navigation carried no device token: \(record)")
            #expect(record["query"]?.stringValue == Self.query(state) + "&device_token=" + token, "\(record)")
            #expect(record["deviceTokenCount"]?.int64Value == 1)
            #expect(record["deviceCheck"]?.objectValue?["accepted"] == .bool(true), "the server refused it: \(record)")
            let check = try #require(try Self.verified([token], publicKeyPEM: pem).first)
            #expect(check["valid"] == .bool(true), "\(check)")
            #expect(check["header"]?.objectValue?["alg"] == .string("ES256"))
            #expect(check["header"]?.objectValue?["deviceId"]?.stringValue == setup.registrationId, "\(check)")
            let age = try #require(check["age"]?.doubleValue)
            #expect(age > -5 && age < 120, "iat is not now: \(age) s old")
            jtis.append(try #require(check["claims"]?.objectValue?["jti"]?.stringValue))
        }
        #expect(jtis.count == 2 && jtis[0] != jtis[1], "\(jtis)")

        let elsewhereRecord = try #require(try setup.record("elsewhere", at: setup.other))
        #expect(elsewhereRecord["query"]?.stringValue == Self.query("elsewhere"), "\(elsewhereRecord)")
        #expect(try setup.other.authorizeRecords().allSatisfy { $0["deviceToken"] == .null }, "an unregistered origin got a token")
        let preset = try #require(try setup.record("preset"))
        #expect(preset["query"]?.stringValue == Self.query("preset", extra: "&device_token=preset.token.value"), "\(preset)")
        for state in ["frame", "xhr"] {
            let record = try #require(try setup.record(state))
            #expect(record["query"]?.stringValue == Self.query(state), "a \(state) request was changed: \(record)")
        }
        // A sign-in in a popup stays the opener's: it sees the URL with the token (window.opener works both ways).
        let popup = try #require(try setup.record("popup"))
        let popupToken = try #require(popup["deviceToken"]?.stringValue, "the popup's navigation carried no token: \(popup)")
        let reports = try setup.server.browserReports()
        #expect(reports.contains("popup: at \(endpoint)?\(Self.query("popup"))&device_token=\(popupToken)"), "\(reports)")
        // Never a token twice.
        let tokens = try setup.server.authorizeRecords().compactMap { $0["deviceToken"]?.stringValue }
        #expect(Set(tokens).count == tokens.count, "a token was used twice: \(tokens)")
    }

    /// No host installed: navigations go on untouched, and the extension's console says why.
    @Test(arguments: kinds) func withoutTheHostNavigationsGoOnAndTheExtensionSaysWhy(kind: HeadlessBrowser.Kind) throws {
        let setup = try Setup(installHost: false)
        let browser = try setup.browser(kind, [("wait", "3000"), ("open", setup.endpoint + "?" + Self.query("no-host"))])
        defer { browser.stop() }
        try setup.waitFor(["no-host"], browser)
        let record = try #require(try setup.record("no-host"))
        #expect(record["query"]?.stringValue == Self.query("no-host"), "\(record)")
        #expect(browser.waitForOutput(seconds: 30) { $0.contains("devtrust: cannot read the configuration from the native host dev.devtrust.host") },
                "the extension did not say why: \(browser.output.suffix(3000))")
    }

    /// Waits until the start page reported on gate `index` ("gate I: ..."); what it said.
    func gateReport(_ setup: Setup, _ index: Int) throws -> String? {
        let deadline = Date().addingTimeInterval(200)
        while Date() < deadline {
            if let line = try setup.server.browserReports().first(where: { $0.hasPrefix("gate \(index): ") }) { return line }
            usleep(100_000)
        }
        return nil
    }

    /// While the browser runs: a new registration reaches the extension's rules (its periodic
    /// config check) and its endpoint starts getting tokens; after a reset the host gives no
    /// token, the navigation goes on without one, the extension says why, and drops the endpoints.
    @Test(arguments: kinds) func aNewRegistrationAndAResetReachTheRulesWhileTheBrowserRuns(kind: HeadlessBrowser.Kind) throws {
        let setup = try Setup()
        let second = setup.other.url + "/oauth2/authorize"
        let browser = try setup.browser(kind, [("gate", setup.endpoint + "?client_id=gate"), ("gate", second + "?client_id=gate"),
                                               ("wait", "5000"),
                                               ("open", setup.endpoint + "?" + Self.query("after-reset")),
                                               ("open", second + "?" + Self.query("after-reset-elsewhere")),
                                               ("open", setup.endpoint + "?" + Self.query("after-refresh"))])
        defer { browser.stop() }
        let first = try gateReport(setup, 1)
        #expect(first?.hasPrefix("gate 1: passed") == true, "\(String(describing: first))")
        let registered = try setup.cli.run(["register", "--server", setup.other.url, "--non-interactive", "-q"] + ReferenceServer.registrationAnswers)
        #expect(registered.status == 0, "\(registered)")
        let later = try gateReport(setup, 2)
        #expect(later?.hasPrefix("gate 2: passed") == true, "the new registration's endpoint got no token: \(String(describing: later))")
        let reset = try setup.cli.run("reset", "--yes")
        #expect(reset.status == 0, "\(reset)")
        try setup.waitFor(["after-reset", "after-refresh"], browser)
        try setup.waitFor(["after-reset-elsewhere"], at: setup.other, browser)
        for (state, server) in [("after-reset", setup.server), ("after-refresh", setup.server), ("after-reset-elsewhere", setup.other)] {
            let record = try #require(try setup.record(state, at: server))
            #expect(record["query"]?.stringValue == Self.query(state), "\(record)")
        }
        #expect(browser.waitForOutput(seconds: 30) { $0.contains("devtrust: no device token for \(setup.server.url); the sign-in goes on without one") },
                "the extension did not say why: \(browser.output.suffix(3000))")
    }

    // MARK: what a web page can do

    /// A web page cannot reach the host: it has no runtime messaging to the extension, the
    /// continue page opened with crafted URLs navigates nowhere, and the host (its input
    /// recorded by a wrapper the manifests name) minted tokens only for the navigations
    /// that arrived with one.
    @Test(arguments: kinds) func aWebPageCannotReachTheHost(kind: HeadlessBrowser.Kind) throws {
        let setup = try Setup()
        let hostInput = setup.fixture.directory.file("host-input")
        for manifest in setup.hostManifests {
            let text = String(decoding: try #require(FileManager.default.contents(atPath: manifest)), as: UTF8.self)
            let path = try #require(try JSONParser.parse(text).objectValue?["path"]?.stringValue)
            let wrapper = setup.fixture.directory.write("host-wrapper-" + URL(fileURLWithPath: manifest).deletingLastPathComponent().lastPathComponent,
                                                        "#!/bin/sh\ntee -a '\(hostInput)' | '\(path)' \"$@\"\n", mode: 0o755)
            let rewritten = text.replacingOccurrences(of: "\"" + path + "\"", with: "\"" + wrapper + "\"")
            _ = FileManager.default.createFile(atPath: manifest, contents: Data(rewritten.utf8))
        }
        let registeredTarget = setup.endpoint + "?" + Self.query("attack-registered")
        let browser = try setup.browser(kind, [
            ("gate", setup.endpoint + "?client_id=gate"),
            ("attack", HeadlessBrowser.chromiumExtensionID),
            ("target", setup.other.url + "/oauth2/authorize?" + Self.query("attack-elsewhere")),
            ("target", registeredTarget),
        ])
        defer { browser.stop() }
        try setup.waitFor([], browser)
        let reports = try setup.server.browserReports()
        #expect(reports.contains { $0.hasPrefix("gate 1: passed") }, "\(reports)")
        #expect(reports.contains("attack: the page has no runtime.sendMessage"), "\(reports)")
        #expect(!reports.contains("attack: fetch of the continue page succeeded"), "\(reports)")
        let elsewhere = try setup.other.authorizeRecords()
        #expect(elsewhere.isEmpty, "the crafted URL was navigated to: \(elsewhere)")
        #expect(try setup.record("attack-registered") == nil, "the continue page navigated for a page")

        let input = String(decoding: FileManager.default.contents(atPath: hostInput) ?? Data(), as: UTF8.self)
        let tokenRequests = input.components(separatedBy: "\"type\":\"token\"").count - 1
        let tokened = try setup.server.authorizeRecords().filter { $0["deviceToken"] != .null }
        #expect(tokenRequests == tokened.count, "the host was asked for \(tokenRequests) tokens; \(tokened.count) arrived: \(input)")
        #expect(!input.contains("attack"), "the host was asked about a crafted URL: \(input)")
    }
}
