@testable import DevtrustCLI
import DevtrustEncoding
import DevtrustHTTP
@testable import DevtrustTerminal
import DevtrustTestSupport
import Foundation
import Testing

/// What the status line (network-wait indicator, device-code countdown) draws, and
/// when it stays off the terminal: a background job, a narrow window, --json, TERM
/// unset or dumb, DEVTRUST_HTTP_DEBUG; Ctrl-C during a request; the countdown during
/// a slow poll. Through the binary on a pty or in tmux where the terminal matters.
@Suite struct TerminalDrawingTests {
    static let onAPty = ExternalTool.python.shouldRun
    static let clearLine = ColourAndProgressTests.clearLine
    static let red = ColourAndProgressTests.red, yellow = ColourAndProgressTests.yellow

    /// A proxy that accepts connections and never answers: a dead network. It listens and
    /// never accepts; the kernel completes the handshakes, and curl's CONNECT waits.
    final class SilentProxy {
        let port: Int
        private let descriptor: Int32

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.descriptor = descriptor
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, length) == 0 && listen(descriptor, 16) == 0 && getsockname(descriptor, $0, &length) == 0
                }
            }
            guard bound else { throw TmuxError("cannot listen on 127.0.0.1") }
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        deinit { close(descriptor) }
    }

    /// A device with a software key whose https requests go to `proxy` and give up after `timeout` seconds.
    static func deviceBehind(_ proxy: SilentProxy, timeout: Int, _ directory: TemporaryDirectory) throws -> DevtrustBinary {
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        directory.write("config.json", #"{"http":{"requestTimeoutSeconds":\#(timeout)}}"#)
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.file("config.json")
        cli.extraEnvironment["https_proxy"] = "http://127.0.0.1:\(proxy.port)"
        try cli.run("init", "-q", "--backend", "software")
        return cli
    }

    static func register(_ host: String) -> [String] {
        ["register", "--server", "https://\(host)", "--non-interactive"] + ReferenceServer.registrationAnswers
    }

    // MARK: F1: a background job

    /// `register &` at an interactive shell, waiting on a dead network: what the user types at
    /// the shell meanwhile stays on the screen (the indicator draws only for the foreground job).
    @Test(.enabled(if: TmuxSession.shouldRun && ExternalTool.bash.shouldRun))
    func aBackgroundJobDoesNotDrawOverWhatTheUserTypes() throws {
        let directory = TemporaryDirectory()
        let proxy = try SilentProxy()
        let cli = try Self.deviceBehind(proxy, timeout: 6, directory)
        let script = directory.file("register.sh")
        directory.write("register.sh", "exec " + ([cli.path] + Self.register("idp.example.com")).map { "'" + $0 + "'" }.joined(separator: " ") + "\n")
        var environment = cli.environment
        environment["LANG"] = "C.UTF-8"
        environment["PS1"] = "$ "
        let shell = try TmuxSession(columns: 100, rows: 20, command: [ExternalTool.bash.rawValue, "--norc", "--noprofile", "-i"], environment: environment)
        _ = try #require(try shell.waitForScreen { $0.contains("$") })
        try shell.type("sh \(script) &\n")
        _ = try #require(try shell.waitForScreen { $0.contains { $0.hasPrefix("[1] ") } }, "\(shell.output.debugDescription)")
        usleep(300_000)
        try shell.type("echo typed-ahead")
        // The indicator would have drawn from 1 s on; the request gives up at 6 s.
        sleep(4)
        let screen = try shell.screen()
        #expect(screen.last { !$0.isEmpty }?.hasSuffix("echo typed-ahead") == true, "\(screen)")
        #expect(!shell.output.contains("waiting for"), "\(shell.output.debugDescription)")
    }

    // MARK: F2: a narrow window

    /// A 60-column window and a host too long for it: one row, rewritten in place, narrower
    /// than the window (a wrapped line leaves a stale row at every redraw).
    @Test(.enabled(if: TmuxSession.shouldRun)) func theIndicatorFitsANarrowWindow() throws {
        let directory = TemporaryDirectory()
        let proxy = try SilentProxy()
        let cli = try Self.deviceBehind(proxy, timeout: 6, directory)
        let host = "idp-" + String(repeating: "a", count: 40) + ".example.com"
        var environment = cli.environment
        environment["LANG"] = "C.UTF-8"
        let session = try TmuxSession(columns: 60, rows: 20, command: [cli.path] + Self.register(host), environment: environment)
        let screen = try #require(try session.waitForScreen(timeout: 20) { $0.contains { $0.contains("… 4 s") } }, "\(session.output.debugDescription)")
        let rows = screen.filter { $0.contains("waiting for") }
        #expect(rows.count == 1 && screen.filter { $0.contains(" s") && $0.contains("…") }.count == 1, "\(screen)")
        #expect(rows.allSatisfy { DeviceCodeScreen.width($0) < 60 && $0.contains("waiting for idp-aaaa") }, "\(rows)")
    }

    /// The line is cut to the window's width less one column, counting display width.
    @Test func theLineIsCutToTheWindow() {
        let indicator = NetworkWaitIndicator(statusLine: StatusLine(terminal: CapturingTerminal()), glyphs: .unicode)
        let host = "idp-" + String(repeating: "a", count: 60) + ".example.com"
        for columns in [20, 30, 40, 60, 80, 200] {
            let line = indicator.line(host: host, elapsedSeconds: 12, frame: 0, columns: columns)
            #expect(line.map { DeviceCodeScreen.width($0) < columns } == true, "\(columns): \(line ?? "nil")")
        }
        #expect(indicator.line(host: host, elapsedSeconds: 12, frame: 0, columns: 60) == "⠋ waiting for idp-" + String(repeating: "a", count: 35) + "… 12 s")
        #expect(indicator.line(host: host, elapsedSeconds: 12, frame: 0, columns: 200) == "⠋ waiting for \(host)… 12 s")
        // Too narrow for a useful part of the host: without it, then the seconds alone, then nothing.
        #expect(indicator.line(host: host, elapsedSeconds: 12, frame: 0, columns: 20) == "⠋ waiting… 12 s")
        #expect(indicator.line(host: host, elapsedSeconds: 12, frame: 0, columns: 10) == "⠋ 12 s")
        #expect(indicator.line(host: host, elapsedSeconds: 12, frame: 0, columns: 6) == nil)
        // Wide characters take two columns.
        let wide = String(repeating: "코", count: 30)
        let line = indicator.line(host: wide, elapsedSeconds: 3, frame: 0, columns: 40)
        #expect(line == "⠋ waiting for " + String(repeating: "코", count: 10) + "… 3 s", "\(line ?? "nil")")
    }

    // MARK: F3: rules a test now holds

    /// The host reaches the terminal only through TerminalText.printable.
    @Test func aHostsControlCharactersAreShownNotObeyed() {
        let indicator = NetworkWaitIndicator(statusLine: StatusLine(terminal: CapturingTerminal()), glyphs: .ascii)
        #expect(indicator.line(host: "idp\u{1B}[2J.example", elapsedSeconds: 2, frame: 0) == "| waiting for idp\\u{1B}[2J.example... 2 s")
    }

    /// DEVTRUST_HTTP_DEBUG: curl writes its lines while the request waits; no indicator among them.
    @Test(.enabled(if: onAPty)) func noIndicatorWithHTTPDebug() throws {
        let directory = TemporaryDirectory()
        let proxy = try SilentProxy()
        let cli = try Self.deviceBehind(proxy, timeout: 3, directory)
        let session = try ColourAndProgressTests.onTerminal(cli, Self.register("idp.example.com"), environment: ["LANG": "C.UTF-8", "DEVTRUST_HTTP_DEBUG": "1"])
        #expect(session.exit == 5 && session.transcript.contains("CONNECT idp.example.com:443"), "\(session.transcript.debugDescription)")
        #expect(!session.transcript.contains("waiting for"), "\(session.transcript.debugDescription)")
    }

    /// TERM unset says nothing of the terminal: no indicator and no colour (as for TERM=dumb).
    @Test(.enabled(if: onAPty)) func termUnsetIsADumbTerminal() throws {
        let directory = TemporaryDirectory()
        let proxy = try SilentProxy()
        let cli = try Self.deviceBehind(proxy, timeout: 3, directory)
        let session = try ColourAndProgressTests.onTerminal(cli, Self.register("idp.example.com"), environment: ["LANG": "C.UTF-8"], unsetting: ["TERM"])
        #expect(session.exit == 5 && session.transcript.contains("devtrust: error: "), "\(session.transcript.debugDescription)")
        #expect(!session.transcript.contains("waiting for") && !session.transcript.contains("\u{1B}"), "\(session.transcript.debugDescription)")
    }

    /// The indicator is cleared before the error line, which starts at the left margin, in red.
    @Test(.enabled(if: onAPty)) func theIndicatorIsClearedBeforeAnError() throws {
        let directory = TemporaryDirectory()
        let proxy = try SilentProxy()
        let cli = try Self.deviceBehind(proxy, timeout: 3, directory)
        let session = try ColourAndProgressTests.onTerminal(cli, Self.register("idp.example.com"), environment: ["LANG": "C.UTF-8"])
        let transcript = session.transcript
        #expect(session.exit == 5, "\(transcript.debugDescription)")
        let last = try #require(transcript.range(of: "waiting for idp.example.com… ", options: .backwards), "\(transcript.debugDescription)")
        let error = try #require(transcript.range(of: Self.red + "devtrust: error: https://idp.example.com/"), "\(transcript.debugDescription)")
        let between = transcript[last.upperBound..<error.lowerBound]
        #expect(between.hasSuffix(Self.clearLine) && !between.contains("\n"), "\(between.debugDescription)")
    }

    /// A usage error (found before any command runs) and the clock warning honour NO_COLOR like every other line.
    @Test(.enabled(if: onAPty)) func aUsageErrorHonoursNO_COLOR() throws {
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let coloured = try ColourAndProgressTests.onTerminal(cli, ["pubkey", "--no-such-option"])
        #expect(coloured.exit == 2 && coloured.transcript.hasPrefix(Self.red + "devtrust: error: "), "\(coloured.transcript.debugDescription)")
        let plain = try ColourAndProgressTests.onTerminal(cli, ["pubkey", "--no-such-option"], environment: ["NO_COLOR": "1"])
        #expect(plain.exit == 2 && plain.transcript.hasPrefix("devtrust: error: ") && !plain.transcript.contains("\u{1B}"), "\(plain.transcript.debugDescription)")
    }

    @Test(.enabled(if: onAPty && ReferenceServer.shouldRun)) func theClockWarningHonoursNO_COLOR() throws {
        let server = try ReferenceServer(["--clock-offset", "3600"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q", "--backend", "software")
        let arguments = ["register", "--server", server.url, "--non-interactive", "--replace"] + ReferenceServer.registrationAnswers
        let coloured = try ColourAndProgressTests.onTerminal(cli, arguments)
        #expect(coloured.transcript.contains(Self.yellow + "devtrust: warning: this machine's clock is "), "\(coloured.transcript.debugDescription)")
        let plain = try ColourAndProgressTests.onTerminal(cli, arguments, environment: ["NO_COLOR": "1"])
        #expect(plain.transcript.contains("devtrust: warning: this machine's clock is ") && !plain.transcript.contains("\u{1B}[3"),
                "\(plain.transcript.debugDescription)")
    }

    // MARK: F4: the countdown during a slow poll; a client for doctor

    /// A poll that waits: the countdown keeps counting down and says the server is slow, on its
    /// own line (the indicator does not draw a line of its own over it). Before the code, the
    /// device-authorization request shows the indicator.
    @Test(.enabled(if: onAPty && ReferenceServer.shouldRun)) func aSlowPollKeepsTheCountdownGoing() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "2", "--delay-seconds", "3.5", "--delay-answers", "2"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let session = try ColourAndProgressTests.onTerminal(cli, ["login", "--device-code", "--server", server.url, "--client-id", "devtrust-app"],
                                                             environment: ["LANG": "C.UTF-8"], size: "100x40")
        let transcript = session.transcript
        #expect(session.exit == 0 && transcript.contains("signed in at"), "\(transcript.debugDescription)")
        let screen = try #require(transcript.range(of: "To sign in, open "), "\(transcript.debugDescription)")
        #expect(transcript[..<screen.lowerBound].contains("waiting for 127.0.0.1… 2 s"), "\(transcript.debugDescription)")
        let afterScreen = String(transcript[screen.upperBound...])
        #expect(!afterScreen.contains("waiting for 127.0.0.1"), "\(afterScreen.debugDescription)")
        // "waiting for approval… 9:57 left · server slow to answer, 2 s": the time left changes with the seconds waited.
        let drawings = afterScreen.matches(of: #/(\d+):(\d\d) left · server slow to answer, (\d+) s/#).map {
            (left: Int($0.output.1)! * 60 + Int($0.output.2)!, waited: Int($0.output.3)!)
        }
        #expect(drawings.count >= 2 && drawings.map(\.waited).contains(2), "\(afterScreen.debugDescription)")
        #expect(Set(drawings.map(\.left)).count >= 2 && drawings.map(\.left) == drawings.map(\.left).sorted(by: >), "\(drawings)")
    }

    /// The client for other options (`transport`, the environment's: curl here): with the indicator on the command's status line.
    @Test(.enabled(if: ReferenceServer.shouldRun)) func theCurlClientForOtherOptionsShowsTheIndicator() throws {
        let server = try ReferenceServer(["--delay-seconds", "1.8"])
        let terminal = CapturingTerminal(errorIsTerminal: true)
        let directory = TemporaryDirectory()
        let context = CommandContext(global: GlobalOptions(OptionValues(try CommandSpecs.parser.parse(["status"]))),
                                     environment: InProcessCLI.ownEnvironment(["TERM": "xterm", "LANG": "C.UTF-8"], in: directory, terminal: terminal))
        let settings = HTTPClientSettings(caFile: nil, http: .init(), environment: [:])
        var options = settings.options
        options.totalTimeoutMilliseconds = 10_000
        let client = settings.transport(context, options: options)
        _ = try? client.send(HTTPRequest(method: "POST", url: server.url + "/oauth2/token", body: Array("grant_type=none".utf8)))
        #expect(terminal.errors.hasPrefix(Self.clearLine + "⠋ waiting for 127.0.0.1… 1 s") && terminal.errors.hasSuffix(Self.clearLine),
                "\(terminal.errors.debugDescription)")
    }

    // MARK: F5: --json

    /// Under --json a program reads, maybe through a pty: no line is drawn, and the error
    /// object is a line of its own.
    @Test(.enabled(if: onAPty)) func noIndicatorUnderJSON() throws {
        let directory = TemporaryDirectory()
        let proxy = try SilentProxy()
        let cli = try Self.deviceBehind(proxy, timeout: 3, directory)
        let session = try ColourAndProgressTests.onTerminal(cli, Self.register("idp.example.com") + ["--json"], environment: ["LANG": "C.UTF-8"])
        #expect(session.exit == 5 && !session.transcript.contains("waiting for"), "\(session.transcript.debugDescription)")
        let lines = session.transcript.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(lines.last?.hasPrefix("{\"error\":{") == true && lines.last?.contains("\u{1B}") == false, "\(lines)")
        #expect(lines.allSatisfy { !$0.contains("\r") }, "\(lines)")
    }

    // MARK: F6: nothing asked of the terminal without a wait

    /// `access-token` with a token still valid sends no request and asks nothing of stderr.
    @Test(.enabled(if: ExternalTool.strace.shouldRun && ReferenceServer.shouldRun)) func aCommandThatSendsNoRequestAsksNothingOfTheTerminal() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>(register: true)
        let login = try setup.cli.run(["login", "--server", setup.server.url, "--client-id", "devtrust-app", "--non-interactive", "-q"] + ReferenceServer.signInAnswers)
        #expect(login.status == 0, "\(login)")
        let trace = setup.directory.file("trace")
        let traced = try ProcessRunner.run(ExternalTool.strace.rawValue, ["-f", "-e", "trace=ioctl", "-o", trace, setup.cli.path, "access-token"],
                                           environment: setup.cli.environment)
        #expect(traced.status == 0 && traced.stdout.count > 20, "\(traced)")
        let calls = String(decoding: setup.directory.read("trace") ?? [], as: UTF8.self)
        #expect(!calls.contains("ioctl(2,"), "\(calls)")
    }

    // MARK: F7: Ctrl-C during a request

    /// Ctrl-C while the device-authorization request waits: the request stops, no code is
    /// shown, the command says so and ends by SIGINT.
    @Test(.enabled(if: onAPty && ReferenceServer.shouldRun)) func ctrlCStopsTheDeviceAuthorizationRequest() throws {
        let server = try ReferenceServer(["--delay-seconds", "8"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let started = Date()
        let session = try ColourAndProgressTests.onTerminal(cli, ["login", "--device-code", "--server", server.url, "--client-id", "devtrust-app"],
                                                             environment: ["LANG": "C.UTF-8"], size: "100x40",
                                                             steps: #"[{"expect":"waiting for 127\\.0\\.0\\.1… 1 s","send":"\u0003"}]"#)
        let transcript = session.transcript
        #expect(session.exit == 128 + SIGINT, "\(transcript.debugDescription)")
        #expect(Date().timeIntervalSince(started) < 6, "the request went on after Ctrl-C")
        #expect(!transcript.contains("To sign in") && transcript.contains("interrupted by SIGINT while asking the server for a code"),
                "\(transcript.debugDescription)")
    }

    // MARK: F8

    /// TERM=dumb: no line rewritten at all, the countdown neither.
    @Test(.enabled(if: onAPty && ReferenceServer.shouldRun)) func aDumbTerminalGetsNoCountdown() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "2"])
        let cli = DevtrustBinary(keystore: TemporaryDirectory().file("ks"))
        let session = try ColourAndProgressTests.onTerminal(cli, ["login", "--device-code", "--server", server.url, "--client-id", "devtrust-app"],
                                                             environment: ["LANG": "C.UTF-8", "TERM": "dumb"], size: "100x40")
        let transcript = session.transcript
        #expect(session.exit == 0 && transcript.contains("signed in at"), "\(transcript.debugDescription)")
        #expect(!transcript.replacingOccurrences(of: "\r\n", with: "").contains("\r") && !transcript.contains("\u{1B}") && !transcript.contains(" left"),
                "\(transcript.debugDescription)")
    }

    /// The Linux console's fonts have no braille: ASCII there, whatever the locale.
    @Test func theLinuxConsoleGetsASCII() {
        #expect(NetworkWaitIndicator.Glyphs.forTerminal(["TERM": "linux", "LANG": "C.UTF-8"]) == .ascii)
        #expect(NetworkWaitIndicator.Glyphs.forTerminal(["TERM": "xterm", "LANG": "C.UTF-8"]) == .unicode)
        #expect(NetworkWaitIndicator.Glyphs.forTerminal(["TERM": "xterm", "LANG": "C"]) == .ascii)
    }
}
