@testable import DevtrustCLI
import DevtrustEncoding
@testable import DevtrustTerminal
import DevtrustTestSupport
import Foundation
import Testing

/// Colour on a terminal and the network-wait indicator (issue 15): through the
/// binary on a pseudo-terminal, where the terminal matters; the rules behind
/// them in-process (with no tool needed: only the pty tests need python).
@Suite struct ColourAndProgressTests {
    static let onAPty = ExternalTool.python.shouldRun

    static let escape = "\u{1B}"
    static let red = "\u{1B}[31m", yellow = "\u{1B}[33m", green = "\u{1B}[32m", reset = "\u{1B}[0m"
    static let clearLine = "\r\u{1B}[K"

    /// devtrust on a pseudo-terminal (Tests/Interop/pty_session.py), TERM=xterm unless `environment`
    /// says otherwise; stdout or stderr go to a file instead when asked. (Python, in the C locale,
    /// sets LC_CTYPE=C.UTF-8 for its children: LC_ALL=C keeps a locale that is not UTF-8.)
    static func onTerminal(_ cli: DevtrustBinary, _ arguments: [String], environment extra: [String: String] = [:],
                           unsetting unset: [String] = [], size: String? = nil, steps: String = "[]",
                           stdoutTo: String? = nil, stderrTo: String? = nil) throws -> (exit: Int32, transcript: String) {
        var environment = cli.environment
        environment["TERM"] = "xterm"
        environment.merge(extra) { $1 }
        for name in unset { environment[name] = nil }
        let redirections = (stdoutTo.map { " >'\($0)'" } ?? "") + (stderrTo.map { " 2>'\($0)'" } ?? "")
        let command = redirections.isEmpty ? [cli.path] : ["/bin/sh", "-c", "exec \"$0\" \"$@\"" + redirections, cli.path]
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, [Repository.path("Tests/Interop/pty_session.py")] + (size.map { ["--size", $0] } ?? []) + [steps, "--"] + command + arguments,
                                           environment: environment)
        let report = try JSONParser.parse(result.stdout).objectValue!
        #expect(report["timedOut"] == .bool(false), "\(result)")
        return (Int32(report["exit"]!.int64Value!), report["transcript"]!.stringValue!)
    }

    func device(_ directory: TemporaryDirectory) -> DevtrustBinary {
        DevtrustBinary(keystore: directory.file("ks"))
    }

    // MARK: colour

    /// What failed in red on a terminal, the hint after it plain; nothing else on the line.
    @Test(.enabled(if: onAPty)) func anErrorIsRedOnATerminal() throws {
        let cli = device(TemporaryDirectory())
        let session = try Self.onTerminal(cli, ["pubkey"])
        #expect(session.exit == 3)
        #expect(session.transcript == Self.red + "devtrust: error: there is no device key in \(cli.keystore)" + Self.reset + "; run `devtrust init` first\r\n",
                "\(session.transcript.debugDescription)")
    }

    /// NO_COLOR set and not empty, TERM=dumb, or stderr not a terminal: the same line, plain.
    /// An empty NO_COLOR does not count (no-color.org).
    @Test(.enabled(if: onAPty)) func noColourWithNoColorADumbTerminalOrStderrNotATerminal() throws {
        let directory = TemporaryDirectory()
        let cli = device(directory)
        let plain = "devtrust: error: there is no device key in \(cli.keystore); run `devtrust init` first"
        for environment in [["NO_COLOR": "1"], ["TERM": "dumb"]] {
            let session = try Self.onTerminal(cli, ["pubkey"], environment: environment)
            #expect(session.exit == 3 && session.transcript == plain + "\r\n", "\(environment): \(session.transcript.debugDescription)")
        }
        let emptyNoColor = try Self.onTerminal(cli, ["pubkey"], environment: ["NO_COLOR": ""])
        #expect(emptyNoColor.transcript.hasPrefix(Self.red + "devtrust: error: "), "\(emptyNoColor.transcript.debugDescription)")

        // stdin and stdout on the terminal, stderr to a file.
        let redirected = try Self.onTerminal(cli, ["pubkey"], stderrTo: directory.file("stderr"))
        #expect(redirected.exit == 3 && redirected.transcript.isEmpty, "\(redirected.transcript.debugDescription)")
        #expect(String(decoding: directory.read("stderr") ?? [], as: UTF8.self) == plain + "\n")
    }

    /// --json errors are for programs: never coloured, even on a terminal.
    @Test(.enabled(if: onAPty)) func aJSONErrorHasNoEscapesOnATerminal() throws {
        let cli = device(TemporaryDirectory())
        let session = try Self.onTerminal(cli, ["pubkey", "--json"])
        #expect(session.exit == 3 && session.transcript.hasPrefix("{\"error\":") && !session.transcript.contains(Self.escape),
                "\(session.transcript.debugDescription)")
    }

    /// What a command did is green on a terminal; stdout, where the artifact goes, never has an escape.
    @Test(.enabled(if: onAPty)) func successIsGreenAndStdoutStaysPlain() throws {
        let directory = TemporaryDirectory()
        let cli = device(directory)
        let session = try Self.onTerminal(cli, ["init", "--backend", "software", "--json"], stdoutTo: directory.file("stdout"))
        #expect(session.exit == 0, "\(session.transcript.debugDescription)")
        #expect(session.transcript.hasPrefix(Self.green + "created a software P-256 device key in \(cli.keystore)/")
                && session.transcript.hasSuffix(Self.reset + "\r\n"), "\(session.transcript.debugDescription)")
        let stdout = String(decoding: directory.read("stdout") ?? [], as: UTF8.self)
        #expect(stdout.hasPrefix("{\"created\":true,") && !stdout.contains(Self.escape), "\(stdout.debugDescription)")

        // The artifact on the terminal itself: still plain (stdout is never styled).
        let pubkey = try Self.onTerminal(cli, ["pubkey"])
        #expect(pubkey.exit == 0 && !pubkey.transcript.isEmpty && !pubkey.transcript.contains(Self.escape), "\(pubkey.transcript.debugDescription)")
    }

    // MARK: the network-wait indicator

    /// The seconds each drawing of the indicator showed, in order.
    static func waitedSeconds(_ transcript: String, host: String = "127.0.0.1", ellipsis: String) -> [Int] {
        transcript.components(separatedBy: "waiting for \(host)\(ellipsis) ").dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }
    }

    /// `register` against a server that answers its first request 3 s late, on a terminal: a yellow
    /// warning, then the indicator counting the seconds, rewritten in place and cleared before
    /// the next line; the success line green.
    @Test(.enabled(if: onAPty && ReferenceServer.shouldRun)) func aSlowAnswerShowsTheIndicatorUntilItComes() throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer(["--delay-seconds", "3"])
        let cli = device(directory)
        try cli.run("init", "-q", "--backend", "software")
        let session = try Self.onTerminal(cli, ["register", "--server", server.url, "--non-interactive"] + ReferenceServer.registrationAnswers,
                                          environment: ["LANG": "C.UTF-8"])
        let transcript = session.transcript
        #expect(session.exit == 0, "\(transcript.debugDescription)")
        #expect(transcript.hasPrefix(Self.yellow + "devtrust: warning: --input password, otp: a command line is visible"), "\(transcript.debugDescription)")
        // Drawn from the first second on, each drawing over the one before, the seconds counting up.
        let seconds = Self.waitedSeconds(transcript, ellipsis: "…")
        #expect(!seconds.isEmpty && seconds.first! >= 1 && seconds == seconds.sorted() && seconds.last! >= 2, "\(transcript.debugDescription)")
        let first = try #require(transcript.range(of: "waiting for 127.0.0.1… "))
        let announced = try #require(transcript.range(of: "(flow REGISTRATION)\r\n"))
        #expect(announced.upperBound <= first.lowerBound)
        #expect(transcript[announced.upperBound...].hasPrefix(Self.clearLine), "drawn at the start of its own line")
        let spinner = transcript[transcript.index(announced.upperBound, offsetBy: Self.clearLine.count)...].prefix(1)
        #expect(NetworkWaitIndicator.Glyphs.unicode.frames.contains(String(spinner)), "\(spinner)")
        // Cleared as the answer came, before the next line, which starts at the left margin.
        let last = try #require(transcript.range(of: "waiting for 127.0.0.1… ", options: .backwards))
        let next = try #require(transcript.range(of: "Create your account"))
        let between = transcript[last.upperBound..<next.lowerBound]
        #expect(between.hasSuffix(Self.clearLine) && !between.contains("\n"), "\(between.debugDescription)")
        // Only the slow request showed it.
        #expect(!transcript[next.lowerBound...].contains("waiting for"), "\(transcript.debugDescription)")
        #expect(transcript.contains("\r\n" + Self.green + "registered: this device is "), "\(transcript.debugDescription)")
    }

    /// NO_COLOR turns colour off, not the indicator (it is no colour); in a locale that is not
    /// UTF-8 the indicator is ASCII. Escapes left: only the ones that rewrite the line.
    @Test(.enabled(if: onAPty && ReferenceServer.shouldRun)) func underNoColorTheIndicatorStaysAndNothingIsColoured() throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer(["--delay-seconds", "2.5"])
        let cli = device(directory)
        try cli.run("init", "-q", "--backend", "software")
        let session = try Self.onTerminal(cli, ["register", "--server", server.url, "--non-interactive"] + ReferenceServer.registrationAnswers,
                                          environment: ["NO_COLOR": "1", "LC_ALL": "C"])
        let transcript = session.transcript
        #expect(session.exit == 0, "\(transcript.debugDescription)")
        #expect(!Self.waitedSeconds(transcript, ellipsis: "...").isEmpty && !transcript.contains("…"), "\(transcript.debugDescription)")
        #expect(transcript.replacingOccurrences(of: Self.clearLine, with: "").contains(Self.escape) == false, "\(transcript.debugDescription)")
        #expect(transcript.contains("\r\ndevtrust: warning: --input password") || transcript.hasPrefix("devtrust: warning: --input password"))
        #expect(transcript.contains("\r\nregistered: this device is "), "\(transcript.debugDescription)")
    }

    /// Nothing is drawn where no one would see it, or where it would get in the way:
    /// stderr not a terminal, --quiet, a terminal that cannot rewrite a line.
    @Test(.enabled(if: onAPty && ReferenceServer.shouldRun)) func noIndicatorOffATerminalWithQuietOrOnADumbTerminal() throws {
        let directory = TemporaryDirectory()
        let cli = device(directory)
        try cli.run("init", "-q", "--backend", "software")
        // Each run against its own server, whose first answer comes 1.5 s late.
        func register(_ extra: [String] = [], environment: [String: String], stderrTo: String? = nil) throws -> (exit: Int32, transcript: String) {
            let server = try ReferenceServer(["--delay-seconds", "1.5"])
            let session = try Self.onTerminal(cli, ["register", "--server", server.url, "--non-interactive", "--replace"] + ReferenceServer.registrationAnswers + extra,
                                              environment: environment, stderrTo: stderrTo)
            #expect(try server.devices().count == 1)
            return session
        }
        let redirected = try register(environment: ["LANG": "C.UTF-8"], stderrTo: directory.file("stderr"))
        let stderr = String(decoding: directory.read("stderr") ?? [], as: UTF8.self)
        #expect(redirected.exit == 0 && redirected.transcript.isEmpty, "\(redirected.transcript.debugDescription)")
        #expect(stderr.contains("registered: this device is ") && !stderr.contains("waiting for") && !stderr.contains(Self.escape), "\(stderr.debugDescription)")

        // --quiet keeps the warnings (in colour), nothing else.
        let quiet = try register(["--quiet"], environment: ["LANG": "C.UTF-8"])
        #expect(quiet.exit == 0 && quiet.transcript.hasPrefix(Self.yellow + "devtrust: warning: ") && !quiet.transcript.contains("waiting for"),
                "\(quiet.transcript.debugDescription)")

        let dumb = try register(environment: ["LANG": "C.UTF-8", "TERM": "dumb"])
        #expect(dumb.exit == 0 && dumb.transcript.contains("registered: this device is ") && !dumb.transcript.contains("waiting for")
                && !dumb.transcript.contains(Self.escape), "\(dumb.transcript.debugDescription)")
    }

    // MARK: the rules, in-process

    @Test(arguments: [
        (true, ["TERM": "xterm"], true), (false, ["TERM": "xterm"], false),
        (true, ["TERM": "xterm", "NO_COLOR": "1"], false), (true, ["TERM": "xterm", "NO_COLOR": ""], true), (true, ["TERM": "xterm", "NO_COLOR": "0"], false),
        (true, ["TERM": "dumb"], false), (true, ["TERM": "xterm-256color"], true),
        // TERM unset says nothing of the terminal: as git does, devtrust takes it for a dumb one.
        (true, [String: String](), false), (true, ["TERM": ""], false),
    ])
    func colourNeedsATerminalNoNO_COLORAndATERMWithEscapes(errorIsTerminal: Bool, variables: [String: String], colour: Bool) {
        let style = TerminalStyle(errorIsTerminal: errorIsTerminal, variables: variables)
        #expect(style.usesColour == colour)
        #expect(style.error("x") == (colour ? "\u{1B}[31mx\u{1B}[0m" : "x"))
        #expect(style.warning("x") == (colour ? "\u{1B}[33mx\u{1B}[0m" : "x"))
        #expect(style.success("x") == (colour ? "\u{1B}[32mx\u{1B}[0m" : "x"))
        #expect(style.emphasis("x") == (colour ? "\u{1B}[1mx\u{1B}[0m" : "x"))
    }

    /// Server text is made printable first, then styled: its escapes show as text, only devtrust's own reach the terminal.
    @Test func aServersEscapesAreShownNotObeyedInsideColour() throws {
        let terminal = CapturingTerminal(errorIsTerminal: true)
        let directory = TemporaryDirectory()
        let context = CommandContext(global: GlobalOptions(OptionValues(try CommandSpecs.parser.parse(["status"]))),
                                     environment: InProcessCLI.ownEnvironment(["TERM": "xterm"], in: directory, terminal: terminal))
        context.serverMessage("bad\u{1B}[2Jcode", isError: true)
        context.warn("odd\u{1B}]0;title\u{07}")
        #expect(terminal.errors == "\u{1B}[31merror: bad\\u{1B}[2Jcode\u{1B}[0m\n\u{1B}[33mdevtrust: warning: odd\\u{1B}]0;title\\u{7}\u{1B}[0m\n")
    }

    @Test(arguments: [
        ([String: String](), false), (["LANG": "C.UTF-8"], true), (["LANG": "en_US.utf8"], true), (["LANG": "C"], false),
        (["LC_ALL": "C", "LANG": "C.UTF-8"], false), (["LC_CTYPE": "de_DE.UTF-8", "LANG": "C"], true), (["LC_ALL": "", "LANG": "C.UTF-8"], true),
    ])
    func theIndicatorIsUnicodeInAUTF8Locale(variables: [String: String], unicode: Bool) {
        #expect(NetworkWaitIndicator.Glyphs.forLocale(variables) == (unicode ? .unicode : .ascii))
    }

    /// Nothing before a second; then one line rewritten in place (at most ten times a second),
    /// the spinner turning; cleared once the request is over.
    @Test func theIndicatorShowsAfterASecondAndIsClearedAtTheEnd() {
        let terminal = CapturingTerminal(errorIsTerminal: true)
        let indicator = NetworkWaitIndicator(statusLine: StatusLine(terminal: terminal), glyphs: .ascii)
        for elapsed in [0.0, 0.5, 0.999] { indicator.waiting(for: "idp.example.com", elapsedSeconds: elapsed) }
        #expect(terminal.errors.isEmpty)
        for elapsed in [1.0, 1.05, 1.2, 2.7] { indicator.waiting(for: "idp.example.com", elapsedSeconds: elapsed) }
        indicator.finished()
        #expect(terminal.errors == "\r\u{1B}[K| waiting for idp.example.com... 1 s\r\u{1B}[K/ waiting for idp.example.com... 1 s"
                + "\r\u{1B}[K- waiting for idp.example.com... 2 s\r\u{1B}[K")
        // A request that was quick: nothing drawn, nothing cleared.
        indicator.waiting(for: "idp.example.com", elapsedSeconds: 0.2)
        indicator.finished()
        #expect(terminal.errors.hasSuffix("2 s\r\u{1B}[K"))
    }

    /// While the device code's countdown shows, the indicator leaves the line to it.
    @Test func theIndicatorLeavesTheCountdownAlone() {
        let terminal = CapturingTerminal(errorIsTerminal: true)
        let statusLine = StatusLine(terminal: terminal)
        let indicator = NetworkWaitIndicator(statusLine: statusLine, glyphs: .unicode)
        statusLine.show("waiting for approval… 4:59 left", as: .countdown)
        indicator.waiting(for: "idp.example.com", elapsedSeconds: 3)
        indicator.finished()
        #expect(terminal.errors == "\r\u{1B}[Kwaiting for approval… 4:59 left" && statusLine.owner == .countdown)
    }

    /// A host too long for the line is cut (the ellipsis marks it), so that the line does not wrap (a wrapped line cannot be rewritten).
    @Test func aLongHostIsCut() {
        let indicator = NetworkWaitIndicator(statusLine: StatusLine(terminal: CapturingTerminal()), glyphs: .unicode)
        let host = String(repeating: "a", count: 60) + ".example"
        let line = indicator.line(host: host, elapsedSeconds: 12.5, frame: 1)
        #expect(line == "⠙ waiting for " + String(repeating: "a", count: NetworkWaitIndicator.longestHost) + "… 12 s")
    }
}
