@testable import DevtrustCLI
import DevtrustEncoding
@testable import DevtrustTerminal
import DevtrustTestSupport
import Foundation
import Testing

/// Reading a device-code screen as a person sees it: which rows are the QR
/// code and which the big letters.
enum DeviceCodeScreenReading {
    static let qrCharacters: Set<Character> = ["█", "▀", "▄", " "]

    /// The QR code's rows: the first run of rows as wide as each other (21 columns or more)
    /// that hold only half blocks, some of them halves ("▀", "▄"; big letters have none).
    /// Its first row is the top of the quiet zone: all "█" drawn for a dark terminal,
    /// all spaces in the QR code's own colours.
    static func qrRows(_ rows: [String]) -> [String] {
        var start = rows.startIndex
        while start < rows.endIndex {
            let width = rows[start].count
            let run = rows[start...].prefix { $0.count == width && $0.allSatisfy(qrCharacters.contains) }
            if width >= 21, run.count >= 2, run.contains(where: { $0.contains("▀") || $0.contains("▄") }) { return Array(run) }
            start += max(run.count, 1)
        }
        return []
    }

    /// The rows of the code in big letters: indented four spaces, then blocks and spaces.
    static func bigLetterRows(_ rows: [String]) -> [String] {
        rows.filter { $0.hasPrefix("    ") && $0.contains("█") && $0.allSatisfy { $0 == "█" || $0 == " " } }
    }

    /// A terminal's own colours: light text on dark, or dark text on light.
    enum Background: String, CaseIterable {
        case dark, light
    }

    /// What a person sees on a screen captured with its colours (`TmuxSession.screen(escapes:trailingSpaces:)`),
    /// drawn in a terminal's own colours (Tests/Interop/halfblock_png.py, nothing added but the terminal's background
    /// around it): what zbarimg (an independent decoder) reads there (nil: nothing), and the QR code's size and the
    /// light margin around it, in modules, as a scanner sees them.
    struct Seen {
        let decoded: String?
        let size: Int?
        let quietZone: Int?
    }

    static func see(_ screen: [String], on background: Background) throws -> Seen {
        let directory = TemporaryDirectory("qr")
        let image = directory.file("screen.png")
        let drawn = try ExternalTool.python.run([Repository.path("Tests/Interop/halfblock_png.py"), "--background", background.rawValue, image],
                                                stdin: Array(screen.joined(separator: "\n").utf8))
        try #require(drawn.status == 0, "\(drawn)")
        let found = try #require(try JSONParser.parse(drawn.output).objectValue, "\(drawn)")
        let read = try ExternalTool.zbarimg.run(["--nodbus", "--raw", "-q", image])
        // zbarimg: 0 read a code, 4 found none.
        #expect(read.status == 0 || read.status == 4, "\(read)")
        return Seen(decoded: read.status == 0 ? read.output : nil, size: found["size"]?.int64Value.map { Int($0) }, quietZone: found["quietZone"]?.int64Value.map { Int($0) })
    }
}

/// The layout alone (DeviceCodeScreen), for many windows; the QR codes are libqrencode's.
@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/libqrencode.so.4") || ExternalTool.isCI))
struct DeviceCodeScreenLayoutTests {
    static let uri = "https://idp.example/device"
    static let complete = "https://idp.example/device?user_code=WDJB-MJHT"

    static func content(userCode: String = "WDJB-MJHT", complete: String? = complete, qr: Bool = true) throws -> DeviceCodeScreen.Content {
        DeviceCodeScreen.Content(userCode: userCode, verificationURI: uri, verificationURIComplete: complete,
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
        #expect(qr == (qrCode ? try QRCode.render(Self.complete).get().map(\.text) : []), "\(columns)×\(rows): \(texts)")
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

    /// In windows of every height up to 45 rows, nothing scrolls away: the notice about the QR
    /// code, the big letters and the blank line are left out where they would not fit.
    @Test func inNoWindowDoesTheScreenScroll() throws {
        let content = try Self.content()
        for columns in [1, 10, 20, 28, 36, 37, 50, 57, 60, 80, 100, 120, 200] {
            for rows in 1...45 {
                let screen = DeviceCodeScreen(content, size: TerminalSize(columns: columns, rows: rows))
                let texts = screen.lines.map(\.text)
                // Only what cannot be left out (the sentence with the code and the URIs) may not fit.
                let onlyTheEssentials = texts.allSatisfy { !$0.isEmpty && !$0.hasPrefix("(") }
                    && DeviceCodeScreenReading.qrRows(texts).isEmpty && DeviceCodeScreenReading.bigLetterRows(texts).isEmpty
                #expect(DeviceCodeScreen.rows(screen.lines, columns: columns) + 1 <= rows || onlyTheEssentials, "\(columns)×\(rows): \(texts)")
            }
        }
    }

    /// 80×4: the sentence (two rows), the complete URI and the countdown fill the window:
    /// no room for the line saying what size would show the QR code.
    @Test func theNoticeAboutTheQRCodeIsLeftOutWhenItDoesNotFit() throws {
        #expect(try Self.layout(80, 4).lines.map(\.text) == ["To sign in, open https://idp.example/device on another device",
                                                             "and enter the code: WDJB-MJHT", "or open https://idp.example/device?user_code=WDJB-MJHT"])
        #expect(try Self.layout(80, 5).lines.map(\.text).last?.hasPrefix("(enlarge the window to") == true)
    }

    /// Big letters only when every character has one, as itself: not for a code in Hangul
    /// (only the dash would show), emoji (nothing), or ß (uppercased, two letters).
    @Test func bigLettersOnlyWhenEveryCharacterHasOne() throws {
        #expect(LargeText.render("WDJB-MJHT")?.count == 5 && LargeText.render("wdjb-mjht") == LargeText.render("WDJB-MJHT"))
        for code in ["코드-한글", "🚀🚀-🚀🚀", "STRAßE", "WDJB MJHT", "WDJB\\u{1B}", ""] {
            #expect(LargeText.render(code) == nil, "\(code)")
            let texts = try Self.layout(200, 60, content: Self.content(userCode: code)).lines.map(\.text)
            #expect(DeviceCodeScreenReading.bigLetterRows(texts).isEmpty, "\(code): \(texts)")
        }
    }

    /// The screen takes the server's text as it came and shows each field on one line.
    @Test func theServersTextIsMadeSafeWhereTheScreenTakesIt() {
        let content = DeviceCodeScreen.Content(userCode: "WDJB\n\tMJHT\u{1B}[31m", verificationURI: "https://idp.example/\r\u{202E}",
                                               verificationURIComplete: "https://idp.example/?x\u{2028}or open https://evil.example/", qrCode: nil)
        #expect(content.userCode == "WDJB\\u{A}\\u{9}MJHT\\u{1B}[31m")
        #expect(content.verificationURI == "https://idp.example/\\u{D}\\u{202E}")
        #expect(content.verificationURIComplete == "https://idp.example/?x\\u{2028}or open https://evil.example/")
        let texts = DeviceCodeScreen(content, size: TerminalSize(columns: 120, rows: 40)).lines.map(\.text)
        #expect(!texts.joined().contains { $0.unicodeScalars.contains { TerminalText.isUnsafe($0) || $0 == "\n" || $0 == "\t" } }, "\(texts)")
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
        let qrColumns = try QRCode.render(long).get()[0].text.count
        // The URL takes three rows; the QR code is drawn when it fits.
        #expect(DeviceCodeScreen.rows([DeviceCodeScreen.Line(text: long, styled: long)], columns: 80) == 3)
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

    /// Styled: the user code in bold, and the QR code in black on white, dark modules
    /// the foreground (its plain rows assume light text on dark: light modules the foreground).
    @Test func onlyTheUserCodeAndTheQRCodeAreStyled() throws {
        let lines = try Self.layout(80, 24).lines
        let qr = try QRCode.render(Self.complete).get()
        let styled = lines.filter { $0.styled != $0.text && !qr.contains($0) }
        #expect(styled.map(\.styled) == ["and enter the code: \u{1B}[1mWDJB-MJHT\u{1B}[22m"], "\(styled)")
        #expect(lines.filter(qr.contains) == qr)
        let inverse: [Character: Character] = ["█": " ", " ": "█", "▀": "▄", "▄": "▀"]
        for row in qr {
            #expect(row.styled == "\u{1B}[30;47m" + String(row.text.map { inverse[$0]! }) + "\u{1B}[0m", "\(row)")
        }
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
        // No window is larger than 1000×1000; COLUMNS=Int.max overflowed the layout's arithmetic.
        let huge = ["COLUMNS": "9223372036854775807", "LINES": "9223372036854775807"]
        #expect(DeviceCodeScreen.size(of: unsized, variables: huge) == TerminalSize(columns: 1000, rows: 1000))
        #expect(TerminalSize(columns: Int.max, rows: 65535) == TerminalSize(columns: 1000, rows: 1000))
        let screen = DeviceCodeScreen(try! Self.content(), size: DeviceCodeScreen.size(of: unsized, variables: huge))
        #expect(!DeviceCodeScreenReading.qrRows(screen.lines.map(\.text)).isEmpty)
        #expect(DeviceCodeScreen.countdown(secondsLeft: 599, columns: Int.max) == "waiting for approval… 9:59 left")
    }

    @Test func wideCharactersTakeTwoColumns() {
        #expect(DeviceCodeScreen.width("WDJB-MJHT") == 9)
        #expect(DeviceCodeScreen.width("코드-한글") == 9)
        #expect(DeviceCodeScreen.width("e\u{301}") == 1)
        #expect(DeviceCodeScreen.width("waiting for approval… 9:59 left") == 31)
        // Emoji: pictographs (U+1F300–1FAFF), a flag (a pair of regional indicators), and a
        // character made an emoji by U+FE0F; without it, ❤ and ✓ are one column.
        #expect(DeviceCodeScreen.width("🚀") == 2 && DeviceCodeScreen.width("🫠") == 2 && DeviceCodeScreen.width("😀") == 2)
        #expect(DeviceCodeScreen.width("🇫🇷") == 2 && DeviceCodeScreen.width("🇫🇷🇩🇪") == 4)
        #expect(DeviceCodeScreen.width("❤️") == 2 && DeviceCodeScreen.width("❤") == 1 && DeviceCodeScreen.width("✓") == 1)
        #expect(DeviceCodeScreen.width("A🚀B") == 4)
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
        /// Whether devtrust may style its lines (no NO_COLOR).
        let styled: Bool
        var verificationURI: String { server.url + "/device" }
        var verificationURIComplete: String { server.url + "/device?user_code=" + userCode }

        /// - Parameter serverOptions: more reference_server.py options (`--device-user-code TEXT`, ...).
        init(columns: Int, rows: Int, environment: [String: String] = [:], serverOptions: [String] = []) throws {
            styled = environment["NO_COLOR"] == nil
            server = try ReferenceServer(["--device-interval", "1"] + serverOptions)
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
        /// (the pty's line discipline turned each newline into CR LF) and, as on the captured
        /// screen, without trailing spaces.
        var printedLines: [String] {
            let output = session.output.replacingOccurrences(of: "\r\n", with: "\n")
            let screen = output.components(separatedBy: "\r\u{1B}[K").first ?? ""
            var lines = screen.replacing(#/\x1B\[[0-9;]*m/#, with: "").components(separatedBy: "\n")
                .map { String($0.reversed().drop { $0 == " " }.reversed()) }
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
    /// independent decoder reads as verification_uri_complete in the screen as a person sees it,
    /// with a quiet zone of 4 modules: on a terminal with a dark background and on one with a
    /// light background where devtrust sets the QR code's colours, on a dark one where it may not
    /// (NO_COLOR: the plain QR code assumes light text on dark).
    @discardableResult
    static func checkScreen(_ run: Run, columns: Int, rows: Int, qrCode: Bool, bigLetters: Bool) throws -> [String] {
        let printed = run.printedLines
        let expectedRows = printed.flatMap { line -> [String] in
            guard line.count > columns else { return [line] }
            #expect(line.contains("://") && !line.contains(" "), "a line wider than \(columns) columns that is not a URL: \(line)")
            return stride(from: 0, to: line.count, by: columns).map { String(line.dropFirst($0).prefix(columns)) }
        }
        let countdownRow = expectedRows.count
        // A screen whose countdown is drawn (not one captured while the status line is redrawn,
        // cleared and not yet written); if none comes, the screen as it is, for the checks to say why.
        let first = try run.session.waitForScreen(timeout: 10) { $0.count > countdownRow && isCountdown($0[countdownRow]) } ?? run.session.screen()
        #expect(first.count == rows)
        #expect(Array(first.prefix(expectedRows.count)) == expectedRows, "screen:\n\(first.joined(separator: "\n"))\nprinted:\n\(printed.joined(separator: "\n"))")
        try #require(countdownRow < rows, "the screen took \(countdownRow + 1) rows of \(rows)")
        #expect(isCountdown(first[countdownRow]) && first[countdownRow].count < columns, "countdown: \(first[countdownRow])")
        #expect(first[(countdownRow + 1)...].allSatisfy { $0.isEmpty }, "\(first)")

        // (Rows joined: a URL wider than the window continues on the next row.)
        #expect(first.joined().contains(run.userCode), "the user code is not on the screen: \(first)")
        #expect(first.joined().contains(run.verificationURI), "the verification URI is not on the screen: \(first)")
        let coloured = try run.session.screen(escapes: true, trailingSpaces: true)
        for background in run.styled ? DeviceCodeScreenReading.Background.allCases : [.dark] {
            let seen = try DeviceCodeScreenReading.see(coloured, on: background)
            #expect(seen.decoded == (qrCode ? run.verificationURIComplete : nil), "on a \(background) background:\n\(first.joined(separator: "\n"))")
            if qrCode { #expect((seen.quietZone ?? 0) >= 4, "on a \(background) background: \(seen)") }
        }
        if !qrCode { #expect(first.contains { $0.hasPrefix("(enlarge the window to") }, "\(first)") }
        #expect(DeviceCodeScreenReading.bigLetterRows(first).count == (bigLetters ? 5 : 0), "\(first)")

        // A second later: the countdown row has changed, and only it.
        // Waited for as a countdown again: a capture between the row's clearing and its new text
        // (the terminal applies a redraw's bytes as they come) shows it empty.
        let second = try #require(try run.session.waitForScreen(timeout: 10) {
            $0.count > countdownRow && $0[countdownRow] != first[countdownRow] && isCountdown($0[countdownRow])
        }, "the countdown did not change in place")
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

    /// The server's random code, and codes whose big letters once fooled the QR reader's finder
    /// search (rows with two runs of 7 dark cells, as in the letters T and F).
    @Test(arguments: [nil, "THRG-MZPT", "ZNJR-FMFT"])
    func at120x40TheCodeIsAlsoInBigLettersAndInBold(userCode: String?) throws {
        let run = try Run(columns: 120, rows: 40, serverOptions: userCode.map { ["--device-user-code", $0] } ?? [])
        let screen = try Self.checkScreen(run, columns: 120, rows: 40, qrCode: true, bigLetters: true)
        // The big letters spell the code.
        #expect(DeviceCodeScreenReading.bigLetterRows(screen) == (try #require(LargeText.render(run.userCode))).map { "    " + String($0.reversed().drop { $0 == " " }.reversed()) })
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

    /// NO_COLOR: the QR code in the terminal's own colours, drawn for a dark background.
    @Test func at80x24WithNO_COLORThePlainQRCodeIsReadOnADarkBackground() throws {
        let run = try Run(columns: 80, rows: 24, environment: ["NO_COLOR": "1"])
        try Self.checkScreen(run, columns: 80, rows: 24, qrCode: true, bigLetters: false)
        #expect(!run.session.output.contains("\u{1B}[30;47m"))
    }

    /// Text the server sends for one line (the user code, the URIs) stays on one line: newlines
    /// and tabs show as escapes, so they neither push the sentence with the URI and the code off
    /// the screen nor print a line that looks like devtrust's own.
    @Test func newlinesAndTabsFromTheServerShowAsEscapes() throws {
        let userCode = "WDJB-MJHT" + String(repeating: "\n", count: 8) + "\tx"
        let complete = "https://idp.example/device?user_code=X\nor open https://evil.example/"
        let run = try Run(columns: 80, rows: 24, serverOptions: ["--device-user-code", userCode, "--device-verification-uri-complete", complete])
        let screen = try run.session.screen()
        let shown = "WDJB-MJHT" + String(repeating: "\\u{A}", count: 8) + "\\u{9}x"
        #expect(Array(screen.prefix(4)) == ["", "To sign in, open \(run.verificationURI) on another device", "and enter the code: " + shown,
                                            "or open https://idp.example/device?user_code=X\\u{A}or open https://evil.example/"], "\(screen)")
        #expect(screen[4].hasPrefix("(enlarge the window to") && Self.isCountdown(screen[5]), "\(screen)")
        #expect(!run.session.output.contains("\t") && !run.session.output.contains("MJHT\r\n"), "\(run.session.output)")
    }

    /// Escape sequences, carriage returns and direction overrides from the server, in the user
    /// code and both URIs, show as escapes on the screen and never reach the terminal.
    @Test func controlCharactersFromTheServerShowAsEscapes() throws {
        let userCode = "WDJB\u{1B}[31m-MJHT\r\u{202E}X"
        let uri = "https://idp.example/device\u{1B}]0;owned\u{7}"
        let complete = "https://idp.example/device?user_code=\u{202E}WDJB\u{1B}[2J\r"
        let run = try Run(columns: 100, rows: 30, serverOptions: ["--device-user-code", userCode, "--device-verification-uri", uri,
                                                                  "--device-verification-uri-complete", complete])
        let screen = try run.session.screen().joined(separator: "\n")
        for shown in ["WDJB\\u{1B}[31m-MJHT\\u{D}\\u{202E}X", "https://idp.example/device\\u{1B}]0;owned\\u{7}",
                      "https://idp.example/device?user_code=\\u{202E}WDJB\\u{1B}[2J\\u{D}"] {
            #expect(screen.contains(shown), "\(shown) is not on the screen:\n\(screen)")
            #expect(run.session.output.contains(shown), "\(shown) was not written")
        }
        for raw in ["\u{1B}[31m", "\u{1B}]0;", "\u{7}", "\u{202E}", "\u{1B}[2J", "MJHT\r"] {
            #expect(!run.session.output.contains(raw), "\(raw.debugDescription) reached the terminal: \(run.session.output.debugDescription)")
        }
        #expect(!(try run.session.screen(escapes: true)).joined().contains("\u{1B}[31m"))
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

    @Test func theServersTextIsShownOnOneLineWithEscapes() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-expires", "1", "--device-user-code", "WDJB\u{1B}[31m-MJHT\n\tX",
                                          "--device-verification-uri", "https://idp.example/device\r\u{202E}",
                                          "--device-verification-uri-complete", "https://idp.example/device?user_code=X\nor open https://evil.example/"])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let result = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app")
        let expected = "\nTo sign in, open https://idp.example/device\\u{D}\\u{202E} on another device and enter the code:\n\n\n    WDJB\\u{1B}[31m-MJHT\\u{A}\\u{9}X\n\n"
            + "or open https://idp.example/device?user_code=X\\u{A}or open https://evil.example/\n\n"
        #expect(result.stderr.hasPrefix(expected), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{1B}") && !result.stderr.contains("\r") && !result.stderr.contains("\t"), "\(result.stderr)")
    }
}
