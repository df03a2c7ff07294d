import CQRCode
import DevtrustEncoding
import DevtrustSignIn
import Glibc

/// `login --device-code`: RFC 8628 on a device without a browser. On stderr:
/// the user code in large type, the verification URI, a QR code, a countdown.
/// With --json, one JSON object per status on stdout; none ever carries the
/// device code or a token.
enum DeviceCodeCommand {
    static func run(_ context: CommandContext, _ settings: SignInSettings) throws {
        let store = try context.deviceStore()
        let http = settings.http(context)
        let server = try settings.authorizationServer(http: http, context: context)
        let signIn = DeviceCodeSignIn(oauth: settings.oauth(context), clientID: settings.clientID, scope: settings.scope,
                                      server: server, waiting: SystemWaiting())
        let showQR = !context.arguments.has("no-qr") && context.terminal.errorIsTerminal
        let countdown = context.terminal.errorIsTerminal && !context.quiet
        var lastLine = ""
        let tokens: TokenSet
        do {
            tokens = try signIn.run(events: { event in
                if !lastLine.isEmpty { context.terminal.writeError("\r\u{1B}[K"); lastLine = "" }
                switch event {
                case let .started(authorization, interval):
                    emit(context, ["event": .string("started"), "user_code": .string(authorization.userCode),
                                   "verification_uri": .string(authorization.verificationURI),
                                   "verification_uri_complete": authorization.verificationURIComplete.map { .string($0) } ?? .null,
                                   "expires_in": .integer(authorization.expiresIn), "interval": .integer(interval)])
                    present(context, authorization, qr: showQR)
                case let .polling(count, interval, nextPollAt):
                    emit(context, ["event": .string("polling"), "poll_count": .integer(count), "interval": .integer(interval),
                                   "next_poll_at": .string(Timestamp.format(secondsSinceEpoch: Int64(nextPollAt.rounded(.up))))])
                    context.detail("poll \(count) in \(interval) s")
                case let .slowDown(newInterval):
                    context.detail("the server asked to slow down: polling every \(newInterval) s from now on")
                case let .networkError(message, retryIn):
                    context.warn("\(message); trying again in \(retryIn) s")
                }
            }, tick: { now, deadline in
                guard countdown else { return }
                let left = max(0, Int(deadline - now))
                lastLine = "waiting for approval… \(left / 60):\(left % 60 < 10 ? "0" : "")\(left % 60) left"
                context.terminal.writeError("\r\u{1B}[K" + lastLine)
            })
        } catch let failure as DeviceCodeFailure {
            if !lastLine.isEmpty { context.terminal.writeError("\r\u{1B}[K") }
            emit(context, ["event": .string(failure == .expired ? "expired" : "access_denied")])
            throw failure
        } catch let error as OAuthError {
            if !lastLine.isEmpty { context.terminal.writeError("\r\u{1B}[K") }
            emit(context, ["event": .string("failure"), "error": .string(error.error),
                           "description": error.errorDescription.map { .string($0) } ?? .null])
            throw error
        }
        if !lastLine.isEmpty { context.terminal.writeError("\r\u{1B}[K") }
        let now = context.environment.clock.secondsSinceEpoch()
        emit(context, ["event": .string("success"), "token_type": .string(tokens.tokenType),
                       "expires_in": tokens.expiresAt.map { .integer($0 - now) } ?? .null,
                       "scope": tokens.scope.map { .string($0) } ?? .null])
        try LoginCommand.save(context, store: store, settings: settings, method: "device-code", tokens: tokens)
    }

    static func emit(_ context: CommandContext, _ event: JSONObject) {
        if context.json { context.output(JSONWriter.string(.object(event))) }
    }

    static func present(_ context: CommandContext, _ authorization: DeviceAuthorization, qr: Bool) {
        guard !context.quiet else { return }
        let terminal = context.terminal
        let verificationURI = TerminalText.printable(authorization.verificationURI)
        let userCode = TerminalText.printable(authorization.userCode)
        terminal.writeError("\nTo sign in, open \(verificationURI) on another device and enter the code:\n\n")
        if terminal.errorIsTerminal {
            for line in LargeText.render(authorization.userCode) { terminal.writeError("    " + line + "\n") }
        }
        terminal.writeError("\n    \(userCode)\n\n")
        if let complete = authorization.verificationURIComplete {
            terminal.writeError("or open \(TerminalText.printable(complete))\n")
            if qr {
                if let lines = QRCode.render(complete) {
                    terminal.writeError("or scan:\n\n")
                    for line in lines { terminal.writeError(line + "\n") }
                } else {
                    context.detail("no QR code: libqrencode is not available")
                }
            }
        }
        terminal.writeError("\n")
    }
}

/// A QR code drawn with half blocks: two modules per character row, with the quiet zone.
enum QRCode {
    static func render(_ text: String) -> [String]? {
        var width: Int32 = 0
        var modules: UnsafeMutablePointer<UInt8>?
        var error = [CChar](repeating: 0, count: 256)
        guard devtrust_qrcode_encode(text, &width, &modules, &error, Int32(error.count)) == 0, let modules else { return nil }
        defer { free(modules) }
        let size = Int(width)
        let quiet = 2
        func dark(_ row: Int, _ column: Int) -> Bool {
            guard row >= 0, row < size, column >= 0, column < size else { return false }
            return modules[row * size + column] != 0
        }
        var lines = [String]()
        var row = -quiet
        while row < size + quiet {
            var line = ""
            for column in -quiet..<(size + quiet) {
                // Light modules print as blocks: terminals are mostly dark on light-on-dark.
                switch (dark(row, column), dark(row + 1, column)) {
                case (false, false): line += "█"
                case (false, true): line += "▀"
                case (true, false): line += "▄"
                case (true, true): line += " "
                }
            }
            lines.append(line)
            row += 2
        }
        return lines
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

    static func render(_ text: String) -> [String] {
        var rows = [String](repeating: "", count: 5)
        for character in text.uppercased() {
            let glyph = glyphs[character] ?? ["  ", "  ", "  ", "  ", "  "]
            for index in 0..<5 { rows[index] += glyph[index] + "  " }
        }
        return rows
    }
}
