@testable import DevtrustCLI
import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Reading a device-code screen as a person sees it: which rows are the QR
/// code and which the big letters.
enum DeviceCodeScreenReading {
    static let qrCharacters: Set<Character> = ["█", "▀", "▄", " "]

    /// The QR code's rows: the first run of rows that start with its light quiet zone
    /// ("██") and hold only half blocks, all as wide as the first (its top quiet zone, all light).
    static func qrRows(_ rows: [String]) -> [String] {
        guard let top = rows.firstIndex(where: { $0.count >= 21 && $0.allSatisfy { $0 == "█" } }) else { return [] }
        return Array(rows[top...].prefix { $0.count == rows[top].count && $0.hasPrefix("██") && $0.allSatisfy(qrCharacters.contains) })
    }

    /// The rows of the code in big letters: indented four spaces, then blocks and spaces.
    static func bigLetterRows(_ rows: [String]) -> [String] {
        rows.filter { $0.hasPrefix("    ") && $0.contains("█") && $0.allSatisfy { $0 == "█" || $0 == " " } }
    }

    /// What zbarimg (an independent decoder) reads in QR code rows taken off a screen.
    static func decode(_ qrRows: [String]) throws -> String {
        let directory = TemporaryDirectory("qr")
        let image = directory.file("screen.png")
        let drawn = try ExternalTool.python.run([Repository.path("Tests/Interop/halfblock_png.py"), image], stdin: Array(qrRows.joined(separator: "\n").utf8))
        #expect(drawn.status == 0, "\(drawn)")
        let read = try ExternalTool.zbarimg.run(["--nodbus", "--raw", "-q", image])
        #expect(read.status == 0, "zbarimg read no QR code: \(read)")
        return read.output
    }
}

/// The layout alone (DeviceCodeScreen), for many windows; the QR codes are libqrencode's.
@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/libqrencode.so.4") || ExternalTool.isCI))
struct DeviceCodeScreenLayoutTests {
    static let uri = "https://idp.example/device"
    static let complete = "https://idp.example/device?user_code=WDJB-MJHT"

    static func content(complete: String? = complete, qr: Bool = true) throws -> DeviceCodeScreen.Content {
        DeviceCodeScreen.Content(userCode: "WDJB-MJHT", verificationURI: uri, verificationURIComplete: complete,
                                 qrCode: qr ? try complete.map { try QRCode.render($0).get() } : nil)
    }

    static func layout(_ columns: Int, _ rows: Int, content: DeviceCodeScreen.Content? = nil) throws -> DeviceCodeScreen {
        DeviceCodeScreen(try content ?? Self.content(), size: TerminalSize(columns: columns, rows: rows))
    }

    /// Whether a line is one URL alone (which may be wider than the window: it cannot be broken).
    static func isURL(_ line: String) -> Bool { line.contains("://") && !line.contains(" ") }

    @Test(arguments: [(80, 24, true, false), (120, 40, true, true), (50, 20, false, false), (37, 30, true, false), (36, 60, false, false),
                      (60, 40, true, true), (57, 40, true, false), (120, 21, false, true), (120, 22, true, false), (200, 60, true, true)])
    func theWindowDecidesWhatIsDrawnAndEverythingFits(columns: Int, rows: Int, qrCode: Bool, bigLetters: Bool) throws {
        let screen = try Self.layout(columns, rows)
        let texts = screen.lines.map(\.text)
        // The countdown's row included, nothing scrolls away; no line but a URL is wider than the window.
        #expect(DeviceCodeScreen.rows(screen.lines, columns: columns) + 1 <= rows, "\(texts)")
        for line in texts where !Self.isURL(line) {
            #expect(DeviceCodeScreen.width(line) <= columns, "\(columns)×\(rows): \(line)")
        }
        // The URI and the code first.
        let top = texts.drop { $0.isEmpty }
        #expect(top.first?.hasPrefix("To sign in, open") == true, "\(texts)")
        #expect(top.prefix(4).contains { $0.contains(Self.uri) } && top.prefix(4).contains { $0.hasSuffix("code: WDJB-MJHT") || $0 == "WDJB-MJHT" }, "\(texts)")
        #expect(texts.contains { $0.hasSuffix(Self.complete) })
        let qr = DeviceCodeScreenReading.qrRows(texts)
        #expect(qr == (qrCode ? try QRCode.render(Self.complete).get() : []), "\(columns)×\(rows): \(texts)")
        #expect(DeviceCodeScreenReading.bigLetterRows(texts).count == (bigLetters ? 5 : 0), "\(columns)×\(rows): \(texts)")
        #expect(texts.contains { $0.hasPrefix("(enlarge the window") } == !qrCode, "\(texts)")
    }

    /// The size the "enlarge" line asks for is enough: laid out at that size, the QR code is drawn.
    @Test(arguments: [(50, 20), (36, 60), (120, 21), (30, 10), (80, 12)])
    func theSizeAskedForShowsTheQRCode(columns: Int, rows: Int) throws {
        let texts = try Self.layout(columns, rows).lines.map(\.text)
        let asked = try #require(texts.joined(separator: " ").firstMatch(of: #/enlarge the window to (\d+)×(\d+) to see a QR code/#), "\(texts)")
        let (wider, taller) = (Int(asked.1)!, Int(asked.2)!)
        #expect(!DeviceCodeScreenReading.qrRows(try Self.layout(wider, taller).lines.map(\.text)).isEmpty, "\(wider)×\(taller)")
        #expect(DeviceCodeScreenReading.qrRows(try Self.layout(wider, taller - 1).lines.map(\.text)).isEmpty, "\(wider)×\(taller - 1)")
    }

    @Test func inAWindowTooSmallForAllTheCodeAndTheURIStay() throws {
        // 30 columns: the sentence takes four rows; with the countdown's, five: nothing else fits.
        let screen = try Self.layout(30, 5)
        #expect(screen.lines.map(\.text) == ["To sign in, open", "https://idp.example/device on", "another device", "and enter the code: WDJB-MJHT"])
    }

    @Test func aURLWiderThanTheWindowHasALineOfItsOwnAndItsRowsAreCounted() throws {
        let long = "https://idp.example/device?user_code=WDJB-MJHT&session=" + String(repeating: "0123456789", count: 12)
        let screen = try Self.layout(80, 60, content: Self.content(complete: long))
        let texts = screen.lines.map(\.text)
        #expect(texts.contains(long) && texts.contains("or open"), "\(texts)")
        let qrColumns = try QRCode.render(long).get()[0].count
        // The URL takes three rows; the QR code is drawn when it fits.
        #expect(DeviceCodeScreen.rows([DeviceCodeScreen.Line(text: long, emphasised: long)], columns: 80) == 3)
        #expect(DeviceCodeScreen.rows(screen.lines, columns: 80) + 1 <= 60)
        #expect(DeviceCodeScreenReading.qrRows(texts).count == (qrColumns <= 80 ? (qrColumns + 1) / 2 : 0), "\(texts)")
    }

    /// A terminal that does not say its size: nothing that might not fit (QR code, big
    /// letters), text wrapped to 80 columns, and a line saying how to have the QR code.
    @Test func anUnknownSizeGivesTheConservativeScreen() throws {
        let texts = DeviceCodeScreen(try Self.content(), size: nil).lines.map(\.text)
        #expect(texts == ["", "To sign in, open https://idp.example/device on another device",
                          "and enter the code: WDJB-MJHT", "or open https://idp.example/device?user_code=WDJB-MJHT",
                          "(no QR code: the terminal does not say its size; set COLUMNS and LINES)"], "\(texts)")
    }

    @Test func withoutAQRCodeToDrawNoLineIsAboutIt() throws {
        let texts = try Self.layout(50, 20, content: Self.content(qr: false)).lines.map(\.text)
        #expect(!texts.contains { $0.contains("QR") } && DeviceCodeScreenReading.qrRows(texts).isEmpty, "\(texts)")
        let noComplete = try Self.layout(120, 40, content: Self.content(complete: nil)).lines.map(\.text)
        #expect(!noComplete.contains { $0.contains("or open") || $0.contains("QR") }, "\(noComplete)")
    }

    @Test func onlyTheUserCodeIsEmphasised() throws {
        let lines = try Self.layout(80, 24).lines
        let emphasised = lines.filter { $0.emphasised != $0.text }
        #expect(emphasised.map(\.emphasised) == ["and enter the code: \u{1B}[1mWDJB-MJHT\u{1B}[22m"], "\(emphasised)")
    }

    /// Never as wide as the window: a line that fills it leaves the cursor past its
    /// end, and `\r` would then rewrite the next row instead of the countdown.
    @Test func theCountdownIsNarrowerThanTheWindow() {
        for columns in 1...100 {
            let line = DeviceCodeScreen.countdown(secondsLeft: 599, columns: columns)
            #expect(DeviceCodeScreen.width(line) < columns, "\(columns): \(line)")
            #expect(line.isEmpty == (columns <= 4), "\(columns): \(line)")
        }
        #expect(DeviceCodeScreen.countdown(secondsLeft: 599, columns: 32) == "waiting for approval… 9:59 left")
        #expect(DeviceCodeScreen.countdown(secondsLeft: 599, columns: 31) == "9:59 left")
        #expect(DeviceCodeScreen.countdown(secondsLeft: 65, columns: 6) == "1:05")
        #expect(DeviceCodeScreen.countdown(secondsLeft: -3, columns: nil) == "waiting for approval… 0:00 left")
    }

    @Test func theWindowSizeComesFromTheTerminalThenCOLUMNSAndLINES() {
        let sized = CapturingTerminal(errorIsTerminal: true, errorSize: TerminalSize(columns: 100, rows: 30))
        let unsized = CapturingTerminal(errorIsTerminal: true)
        let notATerminal = CapturingTerminal(errorIsTerminal: false)
        let variables = ["COLUMNS": "90", "LINES": "25"]
        #expect(DeviceCodeScreen.size(of: sized, variables: variables) == TerminalSize(columns: 100, rows: 30))
        #expect(DeviceCodeScreen.size(of: unsized, variables: variables) == TerminalSize(columns: 90, rows: 25))
        #expect(DeviceCodeScreen.size(of: unsized, variables: [:]) == nil)
        #expect(DeviceCodeScreen.size(of: unsized, variables: ["COLUMNS": "90"]) == nil)
        #expect(DeviceCodeScreen.size(of: unsized, variables: ["COLUMNS": "0", "LINES": "0"]) == nil)
        #expect(DeviceCodeScreen.size(of: notATerminal, variables: variables) == nil)
        #expect(TerminalSize(columns: 0, rows: 0) == nil && TerminalSize(columns: 80, rows: 0) == nil)
    }

    @Test func wideCharactersTakeTwoColumns() {
        #expect(DeviceCodeScreen.width("WDJB-MJHT") == 9)
        #expect(DeviceCodeScreen.width("코드-한글") == 9)
        #expect(DeviceCodeScreen.width("e\u{301}") == 1)
        #expect(DeviceCodeScreen.width("waiting for approval… 9:59 left") == 31)
    }
}

/// The device-code screen in a real terminal emulator (tmux) against the reference
/// server: read off the screen as a person sees it, at the sizes of common windows.
@Suite(.enabled(if: TmuxSession.shouldRun && ReferenceServer.shouldRun && ExternalTool.zbarimg.shouldRun))
struct DeviceCodeTerminalTests {
    /// `login --device-code` in a tmux window, its screen drawn and the countdown running.
    struct Run {
        let server: ReferenceServer
        let directory = TemporaryDirectory()
        let session: TmuxSession
        let userCode: String
        var verificationURI: String { server.url + "/device" }
        var verificationURIComplete: String { server.url + "/device?user_code=" + userCode }

        init(columns: Int, rows: Int, environment: [String: String] = [:]) throws {
            server = try ReferenceServer(["--device-interval", "1"])
            var cli = DevtrustBinary(keystore: directory.file("ks"))
            cli.extraEnvironment = environment
            session = try TmuxSession(columns: columns, rows: rows, command: [cli.path, "login", "--device-code", "--server", server.url, "--client-id", "devtrust-app"],
                                      environment: cli.environment)
            let session = self.session
            guard try session.waitForScreen({ _ in session.output.contains("\r\u{1B}[K") }) != nil else {
                throw TmuxError("no countdown within 60 s; output: \(session.output)")
            }
            let grants = try server.get("/api/device/polls").arrayValue ?? []
            guard let code = grants.first?.objectValue?["userCode"]?.stringValue else { throw TmuxError("the server has no device grant: \(grants)") }
            userCode = code
        }

        /// The lines devtrust printed before the countdown, without their escape sequences
        /// (the pty's line discipline turned each newline into CR LF).
        var printedLines: [String] {
            let output = session.output.replacingOccurrences(of: "\r\n", with: "\n")
            let screen = output.components(separatedBy: "\r\u{1B}[K").first ?? ""
            var lines = screen.replacing(#/\x1B\[[0-9;]*m/#, with: "").components(separatedBy: "\n")
            if lines.last == "" { lines.removeLast() }
            return lines
        }

        func approve() throws {
            _ = try ProcessRunner.run("/usr/bin/curl", ["-s", "-X", "POST", "--data", #"{"user_code":"\#(userCode)"}"#, server.url + "/api/device/approve"])
        }
    }

    static func isCountdown(_ row: String) -> Bool { row.wholeMatch(of: #/(waiting for approval… )?\d+:\d\d( left)?/#) != nil }

    /// What every window shows: each printed line on rows of its own (only a URL wider than the
    /// window wraps), nothing scrolled away, the countdown on the next row, narrower than the
    /// window, changing in place while nothing else moves; and, where drawn, a QR code that an
    /// independent decoder reads as verification_uri_complete.
    @discardableResult
    static func checkScreen(_ run: Run, columns: Int, rows: Int, qrCode: Bool, bigLetters: Bool) throws -> [String] {
        let printed = run.printedLines
        let expectedRows = printed.flatMap { line -> [String] in
            guard line.count > columns else { return [line] }
            #expect(line.contains("://") && !line.contains(" "), "a line wider than \(columns) columns that is not a URL: \(line)")
            return stride(from: 0, to: line.count, by: columns).map { String(line.dropFirst($0).prefix(columns)) }
        }
        let first = try run.session.screen()
        #expect(first.count == rows)
        #expect(Array(first.prefix(expectedRows.count)) == expectedRows, "screen:\n\(first.joined(separator: "\n"))\nprinted:\n\(printed.joined(separator: "\n"))")
        let countdownRow = expectedRows.count
        try #require(countdownRow < rows, "the screen took \(countdownRow + 1) rows of \(rows)")
        #expect(isCountdown(first[countdownRow]) && first[countdownRow].count < columns, "countdown: \(first[countdownRow])")
        #expect(first[(countdownRow + 1)...].allSatisfy { $0.isEmpty }, "\(first)")

        // (Rows joined: a URL wider than the window continues on the next row.)
        #expect(first.joined().contains(run.userCode), "the user code is not on the screen: \(first)")
        #expect(first.joined().contains(run.verificationURI), "the verification URI is not on the screen: \(first)")
        let qr = DeviceCodeScreenReading.qrRows(first)
        #expect(qr.isEmpty == !qrCode, "\(first)")
        if qrCode {
            #expect(try DeviceCodeScreenReading.decode(qr) == run.verificationURIComplete)
        } else {
            #expect(first.contains { $0.hasPrefix("(enlarge the window to") }, "\(first)")
        }
        #expect(DeviceCodeScreenReading.bigLetterRows(first).count == (bigLetters ? 5 : 0), "\(first)")

        // A second later: the countdown row has changed, and only it.
        let second = try #require(try run.session.waitForScreen(timeout: 10) { $0.count > countdownRow && $0[countdownRow] != first[countdownRow] },
                                  "the countdown did not change in place")
        let moved = second.indices.filter { second[$0] != first[$0] }
        #expect(moved == [countdownRow], "rows that changed: \(moved)\nbefore:\n\(first.joined(separator: "\n"))\nafter:\n\(second.joined(separator: "\n"))")
        #expect(isCountdown(second[countdownRow]) && second[countdownRow].count < columns, "countdown: \(second[countdownRow])")
        return first
    }

    static func checkSignsIn(_ run: Run) throws {
        try run.approve()
        let ended = try run.session.waitForScreen { _ in run.session.exitStatus() != nil }
        #expect(run.session.exitStatus() == 0, "screen: \(ended ?? []); output: \(run.session.output)")
        #expect(run.session.output.contains("signed in at "), "\(run.session.output)")
    }

    @Test func at80x24TheCodeTheURIAndTheQRCodeFitWithoutBigLetters() throws {
        let run = try Run(columns: 80, rows: 24)
        try Self.checkScreen(run, columns: 80, rows: 24, qrCode: true, bigLetters: false)
        try Self.checkSignsIn(run)
    }

    @Test func at120x40TheCodeIsAlsoInBigLettersAndInBold() throws {
        let run = try Run(columns: 120, rows: 40)
        let screen = try Self.checkScreen(run, columns: 120, rows: 40, qrCode: true, bigLetters: true)
        // The big letters spell the code.
        #expect(DeviceCodeScreenReading.bigLetterRows(screen) == LargeText.render(run.userCode).map { "    " + String($0.reversed().drop { $0 == " " }.reversed()) })
        let escapes = try run.session.screen(escapes: true)
        #expect(escapes.contains { $0.contains("\u{1B}[1m" + run.userCode) }, "the code is not bold: \(escapes)")
        try Self.checkSignsIn(run)
    }

    @Test func at50x20NeitherTheQRCodeNorBigLettersAndNoBoldWithNO_COLOR() throws {
        let run = try Run(columns: 50, rows: 20, environment: ["NO_COLOR": "1"])
        try Self.checkScreen(run, columns: 50, rows: 20, qrCode: false, bigLetters: false)
        #expect(!run.session.output.contains("\u{1B}[1m"))
        #expect(!(try run.session.screen(escapes: true)).contains { $0.contains("\u{1B}[1m") })
        try Self.checkSignsIn(run)
    }

    /// 28 columns: the URIs wrap (they cannot be broken), the sentence is wrapped to the
    /// window, and the countdown is shortened so that it still rewrites its own row.
    @Test func at28x14TheCountdownIsShortenedAndStillUpdatesInPlace() throws {
        let run = try Run(columns: 28, rows: 14)
        let screen = try Self.checkScreen(run, columns: 28, rows: 14, qrCode: false, bigLetters: false)
        #expect(screen.contains { $0.wholeMatch(of: #/\d+:\d\d left/#) != nil }, "\(screen)")
    }
}

/// Off a terminal (a log, a pipe), the device-code lines are as they always were: no big
/// letters, no QR code, no countdown, no escape sequences.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct DeviceCodePlainOutputTests {
    @Test func stderrNotATerminalGetsThePlainLines() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "1"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let result = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app")
        #expect(result.status == 0, "\(result)")
        let code = try #require(try server.get("/api/device/polls").arrayValue?.first?.objectValue?["userCode"]?.stringValue)
        let expected = "\nTo sign in, open \(server.url)/device on another device and enter the code:\n\n\n    \(code)\n\n"
            + "or open \(server.url)/device?user_code=\(code)\n\n"
        #expect(result.stderr.hasPrefix(expected), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{1B}") && !result.stderr.contains("\r") && !result.stderr.contains("█"), "\(result.stderr)")
    }
}
