import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `login --browser`: the loopback redirect (RFC 8252) against the reference server's
/// browser path (--browser-login: a 302 back with a code bound to the PKCE challenge),
/// with a real headless chromium as the browser, curl as a browser and as a hostile
/// local client, and the listener checked from outside (its port, what it answers).
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct BrowserSignInTests {
    static let client = ["--client-id", "devtrust-app"]

    struct Setup {
        let inner: SignInTests.Setup
        var cli: DevtrustBinary { inner.cli }
        var server: ReferenceServer { inner.server }
        var directory: TemporaryDirectory { inner.directory }

        init(_ mode: String = "approve", _ serverArguments: [String] = []) throws {
            inner = try SignInTests.Setup(["--browser-login", mode] + serverArguments, register: true)
        }

        /// `login --browser` left running; `environment` adds to the test binary's.
        func start(_ extra: [String], environment: [String: String] = [:]) throws -> BackgroundProcess {
            try BackgroundProcess(cli.path, ["login", "--browser", "--server", server.url] + BrowserSignInTests.client + extra,
                                  environment: cli.environment.merging(environment) { $1 })
        }

        func records() throws -> [JSONObject] { try inner.signInRecords() }

        func signIns() throws -> [JSONObject] {
            try JSONParser.parse(try cli.run("status", "--json").output).objectValue?["signIns"]?.arrayValue?.compactMap(\.objectValue) ?? []
        }

        var registrationId: JSONValue? {
            (try? JSONParser.parse(try cli.run("status", "--json").output))?.objectValue?["registrations"]?.arrayValue?.first?.objectValue?["registrationId"]
        }
    }

    /// Ctrl-C, SIGTERM, SIGHUP while waiting for the browser: with --json one final failure event
    /// ("interrupted"), the listener closed, and the process ends by that signal.
    @Test(arguments: [SIGINT, SIGTERM, SIGHUP])
    func aSignalEndsTheWaitWithAFinalEvent(signal: Int32) throws {
        let setup = try Setup()
        let process = try setup.start(["--no-browser", "--json"])
        let url = try #require(Self.printedURL(process, server: setup.server))
        let port = try #require(Self.port(of: url))
        kill(process.pid, signal)
        let result = try #require(process.finish(), "login --browser did not end on the signal")
        #expect(result.signaled && result.status == signal, "\(result)")
        let last = try JSONParser.parse(String(result.stdout.split(separator: "\n").last ?? "")).objectValue
        #expect(last?["event"] == .string("failure") && last?["error"] == .string("interrupted"), "\(result.stdout)")
        #expect(try Self.isClosed(port))
    }

    /// With a localhost redirect on a fixed port, a program already on [::1]:PORT would get the
    /// callback from a browser that tries ::1 first: the sign-in does not start.
    @Test func aPortTakenOnTheIPv6LoopbackIsRefused() throws {
        let setup = try Setup()
        let squatter = try ListeningProcess(ExternalTool.python.rawValue, ["-c", """
            import socket, time
            s = socket.socket(socket.AF_INET6); s.bind(("::1", 0)); s.listen(1)
            print("listening on", s.getsockname()[1], flush=True); time.sleep(60)
            """], what: "the squatter")
        let login = try setup.cli.run(["login", "--browser", "--no-browser", "--server", setup.server.url] + Self.client
                                      + ["--redirect-uri", "http://localhost:\(squatter.announced)/callback"])
        #expect(login.status == 5 && login.stderr.contains("cannot listen on"), "\(login)")
    }

    /// The authorization URL as printed on stderr (its own line).
    static func printedURL(_ process: BackgroundProcess, server: ReferenceServer) -> String? {
        guard process.waitFor({ _, stderr in stderr.contains("Waiting up to") }) else { return nil }
        return process.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix(server.url + "/oauth2/authorize?") }
    }

    static func parameter(_ name: String, of url: String) -> String? {
        URLComponents(string: url)?.queryItems?.first { $0.name == name }?.value
    }

    /// The port of the URL's redirect_uri (the listener's).
    static func port(of url: String) -> Int? {
        parameter("redirect_uri", of: url).flatMap { URLComponents(string: $0)?.port }
    }

    static func curl(_ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run("/usr/bin/curl", ["-s", "--max-time", "10"] + arguments)
    }

    /// Status code and body of a GET (or what the arguments make it) to the listener.
    static func ask(_ port: Int, _ target: String, _ extra: [String] = []) throws -> (status: String, body: String) {
        let result = try curl(extra + ["-w", "\n%{http_code}", "http://127.0.0.1:\(port)" + target])
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
    }

    /// Nothing listens there any more: curl cannot connect (exit 7).
    static func isClosed(_ port: Int) throws -> Bool {
        try ProcessRunner.run("/usr/bin/curl", ["-s", "--max-time", "3", "http://127.0.0.1:\(port)/callback"]).status == 7
    }

    static func freePort() throws -> Int {
        let script = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
        return Int(try ProcessRunner.run(ExternalTool.python.rawValue, ["-c", script]).output) ?? 0
    }

    /// `login --browser --no-browser` with a redirect URI on a port found free, and the URL it printed.
    /// The port is free when found and bound by devtrust later: when another program took it in
    /// between (devtrust says "Address already in use"), another port is tried.
    static func startOnAFixedFreePort(_ setup: Setup) throws -> (process: BackgroundProcess, url: String, port: Int) {
        var refusals = [String]()
        for _ in 0..<5 {
            let port = try freePort()
            let process = try setup.start(["--no-browser", "--redirect-uri", "http://127.0.0.1:\(port)/callback"])
            if let url = printedURL(process, server: setup.server) { return (process, url, port) }
            guard let ended = process.finish(), ended.status == 5, ended.stderr.contains("cannot listen on 127.0.0.1:\(port)"),
                  ended.stderr.contains("Address already in use") else {
                throw SwtpmError("login --browser on port \(port) did not start: \(process.stderr)")
            }
            refusals.append(ended.stderr)
        }
        throw SwtpmError("every port found free was taken before devtrust bound it: \(refusals)")
    }

    // MARK: a real browser

    /// A real headless chromium is the browser: a stand-in xdg-open (test only) starts it with
    /// the URL; it follows the server's 302 to the listener and shows the page it serves.
    @Test(.enabled(if: ExternalTool.chromium.shouldRun)) func aRealBrowserSignsInThroughTheLoopbackListener() throws {
        let setup = try Setup()
        let browser = TemporaryDirectory("chromium")
        // setsid: chromium and its helpers in their own process group, which the test ends.
        setup.directory.write("bin/xdg-open", """
            #!/bin/sh
            unset DISPLAY
            setsid \(ExternalTool.chromium.rawValue) --headless=new --no-sandbox --disable-gpu --no-first-run \\
              --user-data-dir='\(browser.file("profile"))' --dump-dom "$1" > '\(browser.file("dom.html"))' 2> '\(browser.file("chromium.log"))' < /dev/null &
            echo $! > '\(browser.file("pid"))'

            """, mode: 0o755)
        var cli = setup.cli
        cli.extraEnvironment["PATH"] = setup.directory.file("bin") + ":/usr/bin:/bin"
        cli.extraEnvironment["DISPLAY"] = ":99"
        defer {
            if let pid = browser.read("pid").flatMap({ Int32(String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) }) {
                kill(-pid, SIGKILL)
            }
        }
        let result = try cli.run(["login", "--browser", "--server", setup.server.url, "--timeout", "90"] + Self.client)
        #expect(result.status == 0, "\(result)\n\(String(decoding: browser.read("chromium.log") ?? [], as: UTF8.self).suffix(2000))")
        #expect(result.stdout.isEmpty && result.stderr.contains("Opening the sign-in page in your browser"), "\(result)")
        #expect(try setup.signIns().first?["method"] == .string("browser"))
        let record = try #require(try setup.records().last)
        #expect(record["path"] == .string("browser") && record["accepted"] == .bool(true) && record["deviceId"] == setup.registrationId, "\(record)")
        let redirect = try #require(record["redirectUri"]?.stringValue)
        #expect(redirect.hasPrefix("http://127.0.0.1:") && redirect.hasSuffix("/callback"))
        let code = try #require(record["code"]?.stringValue)
        #expect(!result.stderr.contains(code) && !result.stdout.contains(code), "the code was printed")
        #expect(try Self.isClosed(try #require(URLComponents(string: redirect)?.port)), "the listener is still open")
        // What the browser showed: the fixed page, nothing of the request.
        let deadline = Date().addingTimeInterval(30)
        var page = ""
        while Date() < deadline {
            page = String(decoding: browser.read("dom.html") ?? [], as: UTF8.self)
            if page.contains("</html>") { break }
            usleep(100_000)
        }
        #expect(page.contains("You can close this tab") && !page.contains(code), "\(page)")
    }

    // MARK: --no-browser, --json, --par

    @Test func withNoBrowserTheURLIsPrintedAndABrowserElsewhereFinishes() throws {
        let setup = try Setup()
        // An xdg-open that would say it was run: --no-browser must not run it.
        setup.directory.write("bin/xdg-open", "#!/bin/sh\necho \"$1\" > '\(setup.directory.file("opened"))'\n", mode: 0o755)
        let process = try setup.start(["--no-browser"], environment: ["PATH": setup.directory.file("bin") + ":/usr/bin:/bin", "DISPLAY": ":99"])
        let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
        #expect(process.stderr.contains("Open this URL in a browser on this machine:"))
        #expect(process.stderr.contains("Open it within 5 minutes (the device token in it is good for that long)"), "\(process.stderr)")
        #expect(!process.stderr.contains("10 minutes"))
        #expect(Self.parameter("device_token", of: url) != nil && Self.parameter("code_challenge_method", of: url) == "S256")
        let redirect = try #require(Self.parameter("redirect_uri", of: url))
        #expect(redirect.hasPrefix("http://127.0.0.1:") && redirect.hasSuffix("/callback") && redirect != "http://127.0.0.1:8765/callback", "\(redirect)")
        #expect(process.stderr.contains("Waiting up to 5 minutes for the browser to come back to \(redirect)"))
        // curl as the browser: follows the 302 to the listener.
        let page = try Self.curl(["-L", url])
        #expect(page.stdout.contains("<h1>Signed in</h1>") && page.stdout.contains("You can close this tab"), "\(page)")
        let result = try #require(process.finish(), "login --browser did not end after the callback")
        #expect(result.status == 0 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("signed in at \(setup.server.url) as client devtrust-app"))
        #expect(setup.directory.read("opened") == nil, "--no-browser ran xdg-open")
        let code = try #require(try setup.records().last?["code"]?.stringValue)
        #expect(!result.stderr.contains(code) && !page.stdout.contains(code))
        #expect(try setup.signIns().first?["method"] == .string("browser"))
        #expect(try setup.records().last?["accepted"] == .bool(true))
        #expect(try Self.isClosed(try #require(Self.port(of: url))))
        #expect(try setup.cli.run("access-token").status == 0)
    }

    /// With --verbose and curl's debug log, neither the code nor the tokens it bought appear
    /// in any stream (the authorization URL, with its device token, is meant to).
    @Test func theCodeAndTheTokensAppearInNoStreamOfAVerboseRun() throws {
        let setup = try Setup()
        let process = try BackgroundProcess(setup.cli.path, ["-v", "login", "--browser", "--no-browser", "--server", setup.server.url] + Self.client,
                                            environment: setup.cli.environment.merging(["DEVTRUST_HTTP_DEBUG": "1"]) { $1 })
        let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
        let page = try Self.curl(["-L", url])
        let result = try #require(process.finish())
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("devtrust: http: > POST /oauth2/token"), "the debug log did not run: \(result.stderr)")
        let code = try #require(try setup.records().last?["code"]?.stringValue)
        let tokens = try SecretsHygieneTests.storedTokens(setup.directory)
        #expect(tokens.count == 2)
        for secret in [code] + tokens {
            for stream in [result.stdout, result.stderr, page.stdout] {
                #expect(!stream.contains(secret), "a secret reached an output stream: \(secret.prefix(6))…")
            }
        }
    }

    /// --json: one object per status on stdout (never the code or a token); --quiet keeps
    /// stderr for errors; --par pushes the request, and the URL is good for its expires_in.
    @Test func jsonEventsAndAPushedRequest() throws {
        let setup = try Setup()
        let launched = Date()
        let process = try setup.start(["--no-browser", "--json", "-q", "--par"])
        try #require(process.waitFor { stdout, _ in stdout.contains("\n") }, "\(process.stderr)")
        let started = try #require(try JSONParser.parse(String(process.stdout.split(separator: "\n").first ?? "")).objectValue)
        #expect(started["event"] == .string("started") && started["timeout"] == .integer(300), "\(started)")
        // The reference server's pushed requests live 90 s: less than the device token's 5 minutes.
        #expect(started["url_expires_in"] == .integer(90), "\(started)")
        let url = try #require(started["authorization_url"]?.stringValue)
        #expect(Self.parameter("request_uri", of: url) != nil && Self.parameter("device_token", of: url) == nil, "\(url)")
        #expect(Self.parameter("redirect_uri", of: url) == nil)
        #expect(started["redirect_uri"]?.stringValue?.hasPrefix("http://127.0.0.1:") == true)
        #expect(try Self.curl(["-L", url]).stdout.contains("Signed in"))
        let result = try #require(process.finish())
        #expect(result.status == 0 && result.stderr.isEmpty, "\(result)")
        let events = result.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)).objectValue }
        #expect(events.map { $0["event"] } == [.string("started"), .string("success")], "\(result.stdout)")
        // The token's remaining lifetime when the event was written: the server's 3600 s, less
        // the seconds a loaded machine took between the token answer and the event.
        let elapsed = Int64(Date().timeIntervalSince(launched).rounded(.up))
        let expiresIn = try #require(events.last?["expires_in"]?.int64Value, "\(result.stdout)")
        #expect(events.last?["token_type"] == .string("Bearer") && (3600 - elapsed)...3600 ~= expiresIn, "\(expiresIn)")
        let record = try #require(try setup.records().last)
        #expect(record["pushed"] == .bool(true) && record["accepted"] == .bool(true), "\(record)")
        #expect(!result.stdout.contains(try #require(record["code"]?.stringValue)))
    }

    // MARK: what the listener does with other requests

    /// Only a GET of the redirect path with this sign-in's state ends the wait: a favicon, a
    /// wrong or missing state, another method, another Host, a callback without a code are
    /// answered (404, 400, 405) with fixed text and the wait goes on. Nothing is reflected.
    @Test func strayAndForgedRequestsDoNotEndTheWait() throws {
        let setup = try Setup()
        let process = try setup.start(["--no-browser", "--timeout", "60"])
        let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
        let port = try #require(Self.port(of: url))
        let state = try #require(Self.parameter("state", of: url))
        let marker = "%3Cscript%3Ealert(1)%3C%2Fscript%3E"
        let stray: [(String, [String], String)] = [
            ("/favicon.ico", [], "404"),
            ("/callback?code=\(marker)&state=\(marker)", [], "400"),
            ("/callback?code=\(marker)", [], "400"),
            ("/callback?code=\(marker)&state=\(state)&state=\(marker)", [], "400"),
            ("/callback?state=\(state)", [], "400"),
            ("/callback?code=\(marker)&state=\(state)", ["-X", "POST"], "405"),
            ("/callback?code=\(marker)&state=\(state)", ["-H", "Host: evil.example:\(port)"], "400"),
            ("/\(marker)?state=\(state)&code=\(marker)", [], "404"),
        ]
        for (target, extra, expected) in stray {
            let answer = try Self.ask(port, target, extra)
            #expect(answer.status == expected, "\(target) \(extra): \(answer)")
            #expect(!answer.body.contains("script") && !answer.body.contains(state) && !answer.body.contains("alert"), "\(answer.body)")
            #expect(process.isRunning, "\(target) \(extra) ended the wait: \(process.stderr)")
        }
        #expect(process.stderr.contains("ignored a request to http://127.0.0.1:\(port)/callback with a wrong or missing state"), "\(process.stderr)")
        #expect(!process.stderr.contains("script") && !process.stderr.contains("alert"))
        #expect(try Self.curl(["-L", url]).stdout.contains("Signed in"))
        let result = try #require(process.finish())
        #expect(result.status == 0, "\(result)")
        #expect(try Self.isClosed(port))
    }

    /// The server's error comes back with this sign-in's state: exit 4, the server's words
    /// with their escape sequences shown, not obeyed; the browser is told the sign-in failed.
    @Test func anAccessDeniedCallbackEndsWithExitFourAndTheServersWordsShownSafely() throws {
        let setup = try Setup("deny")
        let process = try setup.start(["--no-browser"])
        let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
        let page = try Self.curl(["-L", url])
        #expect(page.stdout.contains("Sign-in not completed") && !page.stdout.contains("denied"), "\(page)")
        let result = try #require(process.finish())
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("the server refused: access_denied (The user denied the request\\u{1B}]0;owned\\u{7}\\u{1B}[2J)"), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{1B}") && !result.stderr.contains("\u{07}"))
        #expect(try setup.signIns().isEmpty)
        #expect(try Self.isClosed(try #require(Self.port(of: url))))
    }

    @Test func theWaitEndsAtTheTimeoutAndTheListenerCloses() throws {
        let setup = try Setup()
        let process = try setup.start(["--no-browser", "--timeout", "2", "--json"])
        let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
        // From when it waits (its start, on a loaded machine, can take a while).
        let waiting = Date()
        let result = try #require(process.finish(seconds: 20), "login --browser --timeout 2 was still running after 20 s")
        #expect(result.status == 5, "\(result)")
        #expect(Date().timeIntervalSince(waiting) < 15)
        #expect(result.stderr.contains("the browser did not come back to http://127.0.0.1:\(Self.port(of: url) ?? 0)/callback within 2 s"), "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").last == #"{"event":"timeout"}"#, "\(result.stdout)")
        #expect(try Self.isClosed(try #require(Self.port(of: url))))
        for bad in ["0", "abc", "86401"] {
            let refused = try setup.cli.run(["login", "--browser", "--server", setup.server.url, "--timeout", bad] + Self.client)
            #expect(refused.status == 2 && refused.stderr.contains("--timeout takes a number of seconds"), "\(refused)")
        }
    }

    /// A client that sends a huge header, one that trickles its request and one that sends
    /// nothing: none blocks the real callback, none keeps its connection past 10 s, and none
    /// keeps the command past its timeout.
    /// The handoff page sends someone on only while devtrust's browser may be coming for it: when
    /// xdg-open fails, it is withdrawn (before, it kept sending anyone who asked on for the whole
    /// wait, through an `ssh -L` forward, say, that devtrust itself suggests; review of issue 25).
    @Test func theHandoffPageIsWithdrawnWhenXdgOpenFails() throws {
        let setup = try Setup()
        setup.directory.write("bin/xdg-open", "#!/bin/sh\necho \"$1\" > '\(setup.directory.file("asked"))'\nexit 3\n", mode: 0o755)
        let process = try setup.start([], environment: ["PATH": setup.directory.file("bin") + ":/usr/bin:/bin", "DISPLAY": ":99"])
        #expect(process.waitFor { _, stderr in stderr.contains("xdg-open could not open a browser (exit 3)") }, "\(process.stderr)")
        let asked = String(decoding: setup.directory.read("asked") ?? [], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(asked.contains("/devtrust-sign-in/"), "\(asked)")
        let answer = try Self.curl(["-o", "/dev/null", "-w", "%{http_code}", asked])
        #expect(answer.stdout == "404", "the page still sends a browser on after xdg-open failed: \(answer)")
        // The URL printed on stderr still signs in.
        let url = try #require(Self.printedURL(process, server: setup.server))
        #expect(try Self.curl(["-L", url]).stdout.contains("<h1>Signed in</h1>"))
        #expect(process.finish()?.status == 0)
    }

    /// A kernel without TCP socket diagnostics (Tests/Interop/no_sock_diag.c: netlink refused, or
    /// every lookup answered ENOENT as when inet_diag is not loaded): the owner comes from
    /// /proc/net/tcp. Another user's callback (nobody's, with this sign-in's state) is refused,
    /// the user's own browser signs in. Before, the ENOENT kernel refused the user's browser too.
    @Test(.enabled(if: ExternalTool.cc.shouldRun), arguments: ["refuse", "enoent"])
    func withoutSocketDiagnosticsTheProcFilesNameTheOwner(mode: String) throws {
        let setup = try Setup()
        let library = setup.directory.file("no_sock_diag.so")
        let built = try ExternalTool.cc.run(["-shared", "-fPIC", "-o", library, Repository.path("Tests/Interop/no_sock_diag.c"), "-ldl"])
        try #require(built.status == 0, "\(built)")
        chmod(setup.directory.path, 0o755)
        let process = try setup.start(["--no-browser"], environment: ["LD_PRELOAD": library, "NO_SOCK_DIAG": mode])
        let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
        let port = try #require(Self.port(of: url))
        let state = try #require(Self.parameter("state", of: url))
        let other = try ProcessRunner.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "-s", "--max-time", "10",
                                                               "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/callback?code=stolen&state=\(state)"])
        #expect(other.stdout.hasSuffix("\n403") && other.stdout.contains("This sign-in belongs to someone else"), "\(other)")
        #expect(try Self.curl(["-L", url]).stdout.contains("<h1>Signed in</h1>"))
        let result = try #require(process.finish())
        #expect(result.status == 0 && result.stderr.contains("from another user of this machine (uid 65534)"), "\(result)")
    }

    /// A callback whose sender has gone by the time devtrust accepts it (devtrust was stopped),
    /// on a port a program of the user's then listens on: the kernel's exact lookup of the other
    /// end finds that listener instead, which is no answer (a listening socket, not this
    /// connection's end): refused as of no known owner. The old devtrust signed the user in with
    /// the other user's code. Run in a network namespace of its own (Tests/Interop/gone_peer.sh),
    /// where a closed socket's FIN_WAIT2 lasts 1 s instead of 60.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")))
    func aCallbackWhoseSenderHasGoneIsNotTakenForAListenersOwner() throws {
        let scratch = TemporaryDirectory("gone-peer")
        let run = try ProcessRunner.run("/usr/bin/unshare", ["-n", Repository.path("Tests/Interop/gone_peer.sh"), DevtrustBinary.defaultPath,
                                                             Repository.path("Tests/ReferenceServer/reference_server.py"), scratch.path],
                                        environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        #expect(run.stdout.contains("outcome: refused") && run.stderr.contains("whose owner the system could not name"), "\(run)")
    }

    /// The listener's accept queue is long (4096): while devtrust is busy (here: stopped), 200
    /// waiting connections of a flood still leave room for the browser's, whose connection the
    /// kernel completes at once instead of dropping its SYN (a queue of 16 made it wait for
    /// retries, seconds apart). Then devtrust, let go, signs in.
    @Test func theBrowsersConnectionFindsRoomBehindAFlood() throws {
        let setup = try Setup()
        let process = try setup.start(["--no-browser"])
        let url = try #require(Self.printedURL(process, server: setup.server))
        let port = try #require(Self.port(of: url))
        kill(process.pid, SIGSTOP)
        var stopped = true
        defer { if stopped { kill(process.pid, SIGCONT) } }
        let script = """
            import socket, sys, select
            port = int(sys.argv[1]); held = []
            for _ in range(200):
                s = socket.socket(); s.setblocking(False); s.connect_ex(("127.0.0.1", port)); held.append(s)
            browser = socket.socket(); browser.settimeout(5)
            try:
                browser.connect(("127.0.0.1", port)); print("connected")
            except OSError as error:
                print("not connected:", error)
            """
        let flood = try ProcessRunner.run(ExternalTool.python.rawValue, ["-c", script, String(port)])
        #expect(flood.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "connected", "\(flood)")
        kill(process.pid, SIGCONT)
        stopped = false
        let page = try Self.curl(["-L", url])
        #expect(page.stdout.contains("<h1>Signed in</h1>"), "\(page)")
        #expect(process.finish()?.status == 0)
    }

    @Test func aHugeHeaderOrASlowClientDoesNotHangTheSignIn() throws {
        let setup = try Setup()
        let process = try setup.start(["--no-browser", "--timeout", "60"])
        let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
        let port = try #require(Self.port(of: url))
        // Each says when it is connected, then how long the listener kept its connection.
        let client = """
            import socket, sys, time
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            start = time.time()
            print("connected", flush=True)
            trickle = sys.argv[2] == "trickle"
            s.settimeout(1)
            try:
                while time.time() - start < 40:
                    if trickle:
                        s.send(b"G")
                    try:
                        if s.recv(100) == b"":
                            break
                    except socket.timeout:
                        pass
            except OSError:
                pass
            print("closed after %.1f" % (time.time() - start), flush=True)
            """
        let trickler = try BackgroundProcess(ExternalTool.python.rawValue, ["-c", client, "\(port)", "trickle"], environment: [:])
        let idler = try BackgroundProcess(ExternalTool.python.rawValue, ["-c", client, "\(port)", "idle"], environment: [:])
        for slow in [trickler, idler] {
            try #require(slow.waitFor { stdout, _ in stdout.contains("connected") }, "a slow client did not connect: \(slow.stderr)")
        }
        let huge = try Self.ask(port, "/callback", ["-H", "X-Padding: " + String(repeating: "a", count: 64 * 1024)])
        #expect(huge.status == "431" || huge.status == "000", "\(huge)")
        #expect(process.isRunning)
        // The real callback is served at once, slow clients or not.
        let begun = Date()
        #expect(try Self.curl(["-L", url]).stdout.contains("Signed in"))
        let result = try #require(process.finish(seconds: 10))
        #expect(result.status == 0 && Date().timeIntervalSince(begun) < 5, "\(result)")
        // Their connections closed with the listener.
        for slow in [trickler, idler] {
            #expect(slow.waitFor(seconds: 5) { stdout, _ in stdout.contains("closed after") }, "a slow client is still connected")
        }

        // Without the callback: each connection is cut after 10 s, and the command ends at its timeout.
        let waiting = try setup.start(["--no-browser", "--timeout", "16"])
        let second = try #require(Self.printedURL(waiting, server: setup.server))
        let secondPort = try #require(Self.port(of: second))
        let idle = try BackgroundProcess(ExternalTool.python.rawValue, ["-c", client, "\(secondPort)", "idle"], environment: [:])
        let slow = try BackgroundProcess(ExternalTool.python.rawValue, ["-c", client, "\(secondPort)", "trickle"], environment: [:])
        for connection in [idle, slow] {
            #expect(connection.waitFor(seconds: 13) { stdout, _ in stdout.contains("closed after") }, "a slow client kept its connection")
            let seconds = Double(connection.stdout.split(separator: " ").last.map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "") ?? 99
            #expect(seconds >= 9 && seconds < 12.5, "\(connection.stdout)")
        }
        #expect(waiting.isRunning, "the listener stopped before its timeout")
        let timedOut = try #require(waiting.finish(seconds: 12), "login --browser outlived its timeout")
        #expect(timedOut.status == 5, "\(timedOut)")
    }

    /// Two sign-ins at once: each listens on its own port, and neither takes the other's
    /// answer (its code comes with the other's state).
    @Test func concurrentSignInsGetTheirOwnPortsAndCodes() throws {
        let setup = try Setup()
        let first = try setup.start(["--no-browser"])
        let second = try setup.start(["--no-browser"])
        let firstURL = try #require(Self.printedURL(first, server: setup.server), "\(first.stderr)")
        let secondURL = try #require(Self.printedURL(second, server: setup.server), "\(second.stderr)")
        let firstPort = try #require(Self.port(of: firstURL)), secondPort = try #require(Self.port(of: secondURL))
        #expect(firstPort != secondPort && Self.parameter("state", of: firstURL) != Self.parameter("state", of: secondURL))
        // The browser at the server for the first sign-in: where it is sent back to.
        let redirect = try Self.curl(["-o", "/dev/null", "-w", "%{redirect_url}", firstURL]).stdout
        #expect(redirect.hasPrefix("http://127.0.0.1:\(firstPort)/callback?code="), "\(redirect)")
        let target = String(redirect.dropFirst("http://127.0.0.1:\(firstPort)".count))
        #expect(try Self.ask(secondPort, target).status == "400")
        #expect(second.isRunning && first.isRunning)
        #expect(try Self.ask(firstPort, target).body.contains("Signed in"))
        let firstResult = try #require(first.finish())
        #expect(firstResult.status == 0, "\(firstResult)")
        #expect(try Self.isClosed(firstPort))
        #expect(second.isRunning)
        #expect(try Self.curl(["-L", secondURL]).stdout.contains("Signed in"))
        let secondResult = try #require(second.finish())
        #expect(secondResult.status == 0, "\(secondResult)")
        let records = try setup.records().filter { $0["path"] == .string("browser") }
        #expect(records.count == 2 && records.allSatisfy { $0["accepted"] == .bool(true) }, "\(records)")
    }

    /// A redirect URI with a port (a server that compares redirect URIs exactly) is used as it
    /// is; a second sign-in cannot take that port while the first holds it.
    @Test func aFixedRedirectPortIsHonouredAndASecondListenerIsRefused() throws {
        let setup = try Setup()
        let (process, url, port) = try Self.startOnAFixedFreePort(setup)
        let fixed = "http://127.0.0.1:\(port)/callback"
        #expect(Self.parameter("redirect_uri", of: url) == fixed)
        let refused = try setup.cli.run(["login", "--browser", "--no-browser", "--server", setup.server.url, "--redirect-uri", fixed] + Self.client)
        #expect(refused.status == 5, "\(refused)")
        #expect(refused.stderr.contains("cannot listen on 127.0.0.1:\(port) for the browser's redirect: Address already in use"), "\(refused.stderr)")
        #expect(process.isRunning)
        #expect(try Self.curl(["-L", url]).stdout.contains("Signed in"))
        #expect(try #require(process.finish()).status == 0)
        #expect(try setup.records().last?["redirectUri"] == .string(fixed))
        // The port is free again at once for the next sign-in.
        let again = try setup.start(["--no-browser", "--redirect-uri", fixed])
        let next = try #require(Self.printedURL(again, server: setup.server), "\(again.stderr)")
        #expect(try Self.curl(["-L", next]).stdout.contains("Signed in"))
        #expect(try #require(again.finish()).status == 0)
    }

    /// `http://[::1]/...` listens on IPv6; `http://localhost/...` (servers registered that way)
    /// on both loopback addresses, one port: the browser may resolve localhost to either.
    @Test(.enabled(if: (try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8))?.contains("00000000000000000000000000000001") == true))
    func theIPv6LoopbackAndLocalhost() throws {
        let setup = try Setup()
        for (redirect, family) in [("http://[::1]/cb", "-6"), ("http://localhost/cb", "-4"), ("http://localhost/cb", "-6")] {
            let process = try setup.start(["--no-browser", "--redirect-uri", redirect])
            let url = try #require(Self.printedURL(process, server: setup.server), "\(process.stderr)")
            let callback = try #require(Self.parameter("redirect_uri", of: url))
            #expect(callback.hasPrefix(redirect.replacingOccurrences(of: "/cb", with: ":")) && callback.hasSuffix("/cb"), "\(callback)")
            // The browser at the server, then back to the listener over the address family chosen.
            let location = try Self.curl(["-o", "/dev/null", "-w", "%{redirect_url}", url]).stdout
            #expect(location.hasPrefix(callback + "?code="), "\(location)")
            #expect(try Self.curl([family, location]).stdout.contains("Signed in"), "\(redirect) over \(family)")
            let result = try #require(process.finish())
            #expect(result.status == 0, "\(redirect): \(result)")
        }
    }

    @Test func usageErrors() throws {
        let setup = try Setup()
        let base = ["login", "--server", setup.server.url] + Self.client
        for (extra, message) in [
            (["--browser", "--redirect-uri", "https://app.example/callback"], "login --browser needs a loopback redirect URI"),
            (["--browser", "--redirect-uri", "http://127.0.0.1.evil.example/callback"], "login --browser needs a loopback redirect URI"),
            (["--browser", "--device-code"], "give one of --browser, --device-code, --ciba and --callback"),
            (["--browser", "--callback", "http://127.0.0.1:8765/callback?code=a&state=b"], "give one of --browser, --device-code, --ciba and --callback"),
            (["--dpop", "--callback", "http://127.0.0.1:8765/callback?code=a&state=b"],
             "--dpop goes with app-native, --browser, --device-code and --ciba sign-ins, not with --callback"),
            (["--no-browser"], "--no-browser goes with --browser"),
            (["--timeout", "5"], "--timeout goes with --browser"),
        ] {
            let result = try setup.cli.run(base + extra)
            #expect(result.status == 2 && result.stderr.contains(message), "\(extra): \(result)")
        }
    }

    /// The listener's sockets are closed on exec: a browser (or anything) that xdg-open starts
    /// and that outlives devtrust does not keep the port open.
    @Test func theListenerIsClosedEvenWhenTheBrowserOutlivesTheCommand() throws {
        let setup = try Setup()
        // A "browser" that stays behind, holding whatever descriptors it inherited, and finishes the sign-in.
        setup.directory.write("bin/xdg-open", """
            #!/bin/sh
            sleep 60 &
            echo $! > '\(setup.directory.file("lingering"))'
            /usr/bin/curl -s -L --max-time 20 "$1" > '\(setup.directory.file("page"))' &

            """, mode: 0o755)
        let process = try setup.start(["--timeout", "30"], environment: ["PATH": setup.directory.file("bin") + ":/usr/bin:/bin", "DISPLAY": ":99"])
        var lingering: Int32?
        defer { if let lingering { kill(lingering, SIGKILL) } }
        let deadline = Date().addingTimeInterval(30)
        while !process.hasEnded && Date() < deadline { usleep(20_000) }
        lingering = setup.directory.read("lingering").flatMap { Int32(String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(process.hasEnded, "login --browser did not end: \(process.stderr)")
        let pid = try #require(lingering, "xdg-open was not run: \(process.stderr)")
        // Checked while devtrust has ended and what xdg-open started still runs.
        #expect(kill(pid, 0) == 0, "the lingering process is gone: the test proves nothing")
        let redirect = try #require(try setup.records().last?["redirectUri"]?.stringValue)
        #expect(try Self.isClosed(try #require(URLComponents(string: redirect)?.port)), "a process xdg-open started holds the listener")
        kill(pid, SIGKILL)
        lingering = nil
        let result = try #require(process.finish())
        #expect(result.status == 0, "\(result)")
        #expect(setup.directory.read("page").map { String(decoding: $0, as: UTF8.self).contains("Signed in") } == true)
    }

    /// authorize-url tells the truth about the URL's life: the device token's 5 minutes, or a
    /// pushed request's expires_in when that is shorter; the verifier waits 10 minutes.
    @Test func authorizeURLSaysHowLongTheURLIsGoodFor() throws {
        let setup = try Setup()
        let plain = try setup.cli.run(["authorize-url", "--server", setup.server.url] + Self.client)
        #expect(plain.status == 0, "\(plain)")
        #expect(plain.stderr.contains("open the URL in a browser within 5 minutes (the device token in it is good for that long); then `devtrust login --callback URL`"), "\(plain.stderr)")
        #expect(plain.stderr.contains("within 10 minutes of now"))
        let pushed = try setup.cli.run(["authorize-url", "--par", "--server", setup.server.url] + Self.client)
        #expect(pushed.status == 0 && pushed.stderr.contains("open the URL in a browser within 90 s (the pushed request expires then)"), "\(pushed)")
        // --json: {"url"} alone on stdout, the advice still on stderr.
        let json = try setup.cli.run(["authorize-url", "--json", "--server", setup.server.url] + Self.client)
        #expect(json.status == 0 && json.stdout.hasSuffix("}\n") && json.stderr.contains("within 5 minutes"), "\(json)")
        let document = try #require(try JSONParser.parse(json.output).objectValue)
        #expect(document.keys == ["url"] && document["url"]?.stringValue?.hasPrefix(setup.server.url + "/oauth2/authorize?") == true, "\(document)")
    }
}
