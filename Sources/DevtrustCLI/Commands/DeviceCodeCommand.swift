import CProcessHardening
import CQRCode
import DevtrustEncoding
import DevtrustHTTP
import DevtrustSignIn
import Glibc

/// `login --device-code`: RFC 8628 on a device without a browser. On stderr:
/// the user code and the verification URI, a QR code, the code in large type,
/// a countdown, as the terminal's window leaves room (DeviceCodeScreen).
/// With --json, one JSON object per status on stdout (PollingSignIn); none ever
/// carries the device code or a token.
enum DeviceCodeCommand {
    /// `drawQR`: false with `--no-qr`.
    static func run(_ context: CommandContext, _ settings: SignInSettings, drawQR: Bool) throws {
        try PollingSignIn.run(context) { status in try signIn(context, settings, drawQR: drawQR, status: status) }
    }

    private static func signIn(_ context: CommandContext, _ settings: SignInSettings, drawQR: Bool, status: StatusLine) throws {
        let store = try context.deviceStore()
        let http = settings.http.client(context)
        let server = try settings.authorizationServer(http: http, context: context)
        let waiting = SystemWaiting(interruption: { devtrust_interrupt_signal() })
        let signIn = DeviceCodeSignIn(oauth: try settings.oauthClient(context, server: server, stoppedBySignals: true), clientID: settings.clientID, scope: settings.scope,
                                      server: server, waiting: waiting)
        devtrust_watch_interrupts()
        let showQR = drawQR && context.terminal.errorIsTerminal
        let tokens = try signIn.run(events: { event in
            status.clear()
            if case let .started(authorization, interval) = event {
                PollingSignIn.emit(context, ["event": .string("started"), "user_code": .string(authorization.userCode),
                                             "verification_uri": .string(authorization.verificationURI),
                                             "verification_uri_complete": authorization.verificationURIComplete.map { .string($0) } ?? .null,
                                             "expires_in": .integer(authorization.expiresIn), "interval": .integer(interval)])
                present(context, authorization, qr: showQR)
            }
            PollingSignIn.report(context, event)
        }, tick: PollingSignIn.countdown(context, status: status, waiting: waiting))
        try PollingSignIn.finish(context, status: status, store: store, settings: settings, method: "device-code", tokens: tokens, server: server)
    }

    /// On a terminal, the screen laid out for its window (DeviceCodeScreen), the user code
    /// in bold and the QR code in black on white unless NO_COLOR; elsewhere (a log, a pipe)
    /// plain lines, without big letters. Either way the server's text is made safe by
    /// DeviceCodeScreen.Content.
    static func present(_ context: CommandContext, _ authorization: DeviceAuthorization, qr: Bool) {
        guard !context.quiet else { return }
        let terminal = context.terminal
        var qrCode: [DeviceCodeScreen.Line]?
        if qr, let uri = authorization.verificationURIComplete {
            switch QRCode.render(uri) {
            case .success(let lines): qrCode = lines
            case .failure(let problem): context.detail("no QR code: " + problem.message)
            }
        }
        let content = DeviceCodeScreen.Content(userCode: authorization.userCode, verificationURI: authorization.verificationURI,
                                               verificationURIComplete: authorization.verificationURIComplete, qrCode: qrCode)
        guard terminal.errorIsTerminal else {
            terminal.writeError("\nTo sign in, open \(content.verificationURI) on another device and enter the code:\n\n")
            terminal.writeError("\n    \(content.userCode)\n\n")
            if let complete = content.verificationURIComplete { terminal.writeError("or open \(complete)\n") }
            terminal.writeError("\n")
            return
        }
        let screen = DeviceCodeScreen(content, size: DeviceCodeScreen.size(of: terminal, variables: context.environment.variables))
        let styled = context.style.usesColour
        for line in screen.lines { terminal.writeError((styled ? line.styled : line.text) + "\n") }
    }
}

/// A QR code drawn with half blocks: two modules per character row, with the quiet zone.
enum QRCode {
    /// Why no QR code was drawn, for `-v`.
    struct Problem: Error {
        let message: String
    }

    /// The light margin around the code, in modules: 4, as the QR code specification asks
    /// (2 rows of half blocks above and below).
    static let quietZone = 4
    /// Black on white (the terminal's colours 0 and 7), set explicitly: dark modules on
    /// light whatever the theme. Many scanners do not read a code whose colours are inverted.
    static let colours = "\u{1B}[30;47m"

    /// The rows of the code. Each row's `styled` text is in `colours`, dark modules the
    /// foreground. Its plain `text`, for where devtrust sets no colours (NO_COLOR,
    /// TERM=dumb), has to assume the terminal's: light text on a dark background, the
    /// usual default, so light modules are the foreground there (on a light theme
    /// that code is inverted).
    static func render(_ text: String) -> Result<[DeviceCodeScreen.Line], Problem> {
        var width: Int32 = 0
        var modules: UnsafeMutablePointer<UInt8>?
        var error = [CChar](repeating: 0, count: 256)
        let status = devtrust_qrcode_encode(text, &width, &modules, &error, Int32(error.count))
        let reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard status == 0, let modules else {
            return .failure(Problem(message: status == -1 ? "libqrencode is not available (\(reason))" : reason))
        }
        defer { free(modules) }
        let size = Int(width)
        let quiet = Self.quietZone
        func dark(_ row: Int, _ column: Int) -> Bool {
            guard row >= 0, row < size, column >= 0, column < size else { return false }
            return modules[row * size + column] != 0
        }
        var lines = [DeviceCodeScreen.Line]()
        var row = -quiet
        while row < size + quiet {
            var lightForeground = "", darkForeground = ""
            for column in -quiet..<(size + quiet) {
                switch (dark(row, column), dark(row + 1, column)) {
                case (false, false): lightForeground += "█"; darkForeground += " "
                case (false, true): lightForeground += "▀"; darkForeground += "▄"
                case (true, false): lightForeground += "▄"; darkForeground += "▀"
                case (true, true): lightForeground += " "; darkForeground += "█"
                }
            }
            lines.append(DeviceCodeScreen.Line(text: lightForeground, styled: Self.colours + darkForeground + "\u{1B}[0m"))
            row += 2
        }
        return .success(lines)
    }
}

/// The user code in large letters (5 rows of blocks), readable across a room.
enum LargeText {
    static let glyphs: [Character: [String]] = [
        "A": [" ██ ", "█  █", "████", "█  █", "█  █"], "B": ["███ ", "█  █", "███ ", "█  █", "███ "],
        "C": [" ███", "█   ", "█   ", "█   ", " ███"], "D": ["███ ", "█  █", "█  █", "█  █", "███ "],
        "E": ["████", "█   ", "███ ", "█   ", "████"], "F": ["████", "█   ", "███ ", "█   ", "█   "],
        "G": [" ███", "█   ", "█ ██", "█  █", " ███"], "H": ["█  █", "█  █", "████", "█  █", "█  █"],
        "I": ["███", " █ ", " █ ", " █ ", "███"], "J": ["  ██", "   █", "   █", "█  █", " ██ "],
        "K": ["█  █", "█ █ ", "██  ", "█ █ ", "█  █"], "L": ["█   ", "█   ", "█   ", "█   ", "████"],
        "M": ["█   █", "██ ██", "█ █ █", "█   █", "█   █"], "N": ["█   █", "██  █", "█ █ █", "█  ██", "█   █"],
        "O": [" ██ ", "█  █", "█  █", "█  █", " ██ "], "P": ["███ ", "█  █", "███ ", "█   ", "█   "],
        "Q": [" ██ ", "█  █", "█  █", "█ ██", " ███"], "R": ["███ ", "█  █", "███ ", "█ █ ", "█  █"],
        "S": [" ███", "█   ", " ██ ", "   █", "███ "], "T": ["█████", "  █  ", "  █  ", "  █  ", "  █  "],
        "U": ["█  █", "█  █", "█  █", "█  █", " ██ "], "V": ["█   █", "█   █", "█   █", " █ █ ", "  █  "],
        "W": ["█   █", "█   █", "█ █ █", "██ ██", "█   █"], "X": ["█   █", " █ █ ", "  █  ", " █ █ ", "█   █"],
        "Y": ["█   █", " █ █ ", "  █  ", "  █  ", "  █  "], "Z": ["████", "   █", "  █ ", " █  ", "████"],
        "0": [" ██ ", "█ ██", "██ █", "█  █", " ██ "], "1": [" █ ", "██ ", " █ ", " █ ", "███"],
        "2": ["███ ", "   █", " ██ ", "█   ", "████"], "3": ["███ ", "   █", " ██ ", "   █", "███ "],
        "4": ["█  █", "█  █", "████", "   █", "   █"], "5": ["████", "█   ", "███ ", "   █", "███ "],
        "6": [" ██ ", "█   ", "███ ", "█  █", " ██ "], "7": ["████", "   █", "  █ ", " █  ", " █  "],
        "8": [" ██ ", "█  █", " ██ ", "█  █", " ██ "], "9": [" ██ ", "█  █", " ███", "   █", " ██ "],
        "-": ["   ", "   ", "███", "   ", "   "],
    ]

    /// Nil unless every character has a glyph, and has it as itself (uppercasing
    /// does not make two of one, as ß becomes SS): big letters with gaps or extra
    /// letters would show another code.
    static func render(_ text: String) -> [String]? {
        let letters = text.uppercased()
        guard !letters.isEmpty, letters.count == text.count, letters.allSatisfy({ glyphs[$0] != nil }) else { return nil }
        var rows = [String](repeating: "", count: 5)
        for character in letters {
            let glyph = glyphs[character]!
            for index in 0..<5 { rows[index] += glyph[index] + "  " }
        }
        return rows
    }
}
