/// The device-code screen on a terminal, laid out for its window so that
/// nothing important scrolls away and no line wraps: the sentence with the
/// verification URI and the user code first; the code in big letters when
/// there is room; the complete URI; its QR code when the whole QR code fits
/// (else one line saying why there is none); and a row left free for the
/// countdown. URLs are never broken: one wider than the window has a line of
/// its own (a terminal still finds it) and the rows it wraps to are counted.
package struct DeviceCodeScreen {
    /// One printed line: its text, and the same styled (the user code in bold, the
    /// QR code in its own colours), printed where colour is allowed.
    package struct Line: Equatable {
        package let text: String
        package let styled: String

        package init(text: String, styled: String) {
            self.text = text
            self.styled = styled
        }
    }

    /// What the screen shows. The server's text is made safe here, once: each field
    /// on one line, controls, newlines and tabs shown as escapes (TerminalText.oneLine).
    package struct Content {
        package let userCode: String
        package let verificationURI: String
        package let verificationURIComplete: String?
        /// The QR code of the complete URI (QRCode.render), or nil when none is to be drawn.
        package let qrCode: [Line]?

        /// The user code and the URIs as the server sent them.
        package init(userCode: String, verificationURI: String, verificationURIComplete: String?, qrCode: [Line]?) {
            self.userCode = TerminalText.oneLine(userCode)
            self.verificationURI = TerminalText.oneLine(verificationURI)
            self.verificationURIComplete = verificationURIComplete.map(TerminalText.oneLine)
            self.qrCode = qrCode
        }
    }

    /// The width text is wrapped to when the terminal does not say its size.
    package static let assumedColumns = 80
    /// Blank lines around the big letters.
    private static let bigLetterMargin = 1

    /// The lines to print, each followed by a newline; the countdown comes on the row after them.
    package let lines: [Line]

    /// - Parameter size: the window, or nil when unknown: then the text is wrapped
    ///   to `assumedColumns` and neither the QR code nor big letters are drawn,
    ///   since neither may fit.
    package init(_ content: Content, size: TerminalSize?) {
        let columns = size?.columns ?? Self.assumedColumns
        let rowsLeft = (size?.rows ?? Int.max) - 1 // the countdown's row
        func rows(_ lines: [Line]) -> Int { Self.rows(lines, columns: columns) }

        let header = Self.header(content, columns: columns)
        var complete = Self.completeURI(content, columns: columns)
        // The code and the URI first: the rest only in the rows they leave.
        if rows(header + complete) > rowsLeft { complete = [] }

        var qrCode = [Line]()
        var noQRCode = [Line]()
        if let qr = content.qrCode, !complete.isEmpty {
            let qrColumns = qr.map { Self.width($0.text) }.max() ?? 0
            if let size, qrColumns <= size.columns, rows(header + complete) + qr.count <= rowsLeft {
                qrCode = qr
            } else {
                let reason: String
                if size == nil {
                    reason = "(no QR code: the terminal does not say its size; set COLUMNS and LINES)"
                } else {
                    let wider = max(columns, qrColumns)
                    let needed = Self.rows(Self.header(content, columns: wider) + Self.completeURI(content, columns: wider), columns: wider) + qr.count + 1
                    reason = "(enlarge the window to \(wider)×\(needed) to see a QR code)"
                }
                noQRCode = Self.wrap(Self.words(reason), columns: columns)
                if rows(header + complete + noQRCode) > rowsLeft { noQRCode = [] }
            }
        }

        var bigLetters = [Line]()
        if size != nil, let rendered = LargeText.render(content.userCode) {
            let blank = [Line](repeating: Line(text: "", styled: ""), count: Self.bigLetterMargin)
            let letters = rendered.map { row -> Line in
                let text = "    " + String(row.reversed().drop(while: { $0 == " " }).reversed())
                return Line(text: text, styled: text)
            }
            let block = blank + letters + blank
            if letters.allSatisfy({ Self.width($0.text) <= columns }), rows(header + block + complete + qrCode + noQRCode) <= rowsLeft {
                bigLetters = block
            }
        }

        var screen = header + bigLetters + complete + qrCode + noQRCode
        // A blank line between the command typed and the screen, when there is a row for it.
        if rows(screen) < rowsLeft { screen.insert(Line(text: "", styled: ""), at: 0) }
        lines = screen
    }

    /// "To sign in, open URI on another device and enter the code: CODE", on one
    /// line when it fits, else the two halves each wrapped to the window.
    private static func header(_ content: Content, columns: Int) -> [Line] {
        let open = words("To sign in, open") + [Word(content.verificationURI)] + words("on another device")
        let enter = words("and enter the code:") + [Word(content.userCode, emphasised: true)]
        let whole = wrap(open + enter, columns: columns)
        return whole.count == 1 ? whole : wrap(open, columns: columns) + wrap(enter, columns: columns)
    }

    private static func completeURI(_ content: Content, columns: Int) -> [Line] {
        content.verificationURIComplete.map { wrap(words("or open") + [Word($0)], columns: columns) } ?? []
    }

    /// The rows `lines` take in a window `columns` wide (a line wider than that wraps).
    package static func rows(_ lines: [Line], columns: Int) -> Int {
        lines.reduce(0) { $0 + max(1, (width($1.text) + columns - 1) / columns) }
    }

    /// The countdown, in the longest form narrower than the window: a line as wide
    /// as the window (or wider) leaves the cursor on the next row, and `\r` then
    /// rewrites that row instead of the countdown.
    /// `serverWait`: how long a poll has waited for its answer, when it has (a second or more):
    /// said after the time left, so that a slow server is not taken for a frozen countdown.
    package static func countdown(secondsLeft: Int, columns: Int?, serverWait: Int? = nil) -> String {
        let left = max(0, secondsLeft)
        let time = "\(left / 60):\(left % 60 < 10 ? "0" : "")\(left % 60)"
        let waitForms = serverWait.map { ["waiting for approval… \(time) left · server slow to answer, \($0) s",
                                          "\(time) left · server slow to answer, \($0) s", "\(time) left · \($0) s"] } ?? []
        let forms = waitForms + ["waiting for approval… \(time) left", "\(time) left", time]
        guard let columns else { return forms[0] }
        return forms.first { width($0) < columns } ?? ""
    }

    /// The window of the terminal on stderr; where it does not say (a pty nobody sized
    /// reports 0 x 0), COLUMNS and LINES when both are set; nil when not a terminal.
    package static func size(of terminal: any Terminal, variables: [String: String]) -> TerminalSize? {
        guard terminal.errorIsTerminal else { return nil }
        if let size = terminal.errorSize { return size }
        guard let columns = variables["COLUMNS"].flatMap({ Int($0) }), let rows = variables["LINES"].flatMap({ Int($0) }) else { return nil }
        return TerminalSize(columns: columns, rows: rows)
    }

    // MARK: text

    private struct Word {
        package let text: String
        package let emphasised: Bool

        package init(_ text: String, emphasised: Bool = false) {
            self.text = text
            self.emphasised = emphasised
        }
    }

    private static func words(_ sentence: String) -> [Word] {
        sentence.split(separator: " ").map { Word(String($0)) }
    }

    /// As many words on each line as fit; a word wider than the window (a URL) stays whole, on a line of its own.
    private static func wrap(_ words: [Word], columns: Int) -> [Line] {
        var lines = [Line]()
        var current = [Word]()
        var currentWidth = 0
        func flush() {
            guard !current.isEmpty else { return }
            lines.append(Line(text: current.map(\.text).joined(separator: " "),
                              styled: current.map { $0.emphasised ? "\u{1B}[1m" + $0.text + "\u{1B}[22m" : $0.text }.joined(separator: " ")))
            current = []
            currentWidth = 0
        }
        for word in words {
            let wordWidth = width(word.text)
            if !current.isEmpty && currentWidth + 1 + wordWidth > columns { flush() }
            currentWidth += (current.isEmpty ? 0 : 1) + wordWidth
            current.append(word)
        }
        flush()
        return lines
    }

    /// The columns `text` takes on a terminal: East Asian wide characters and emoji
    /// take two; combining marks none (they join the character before them). Where
    /// terminals differ (a lone regional indicator, an emoji selector after a
    /// character that is usually narrow), two: a line counted too wide still fits.
    package static func width(_ text: String) -> Int {
        text.reduce(0) { $0 + width(of: $1) }
    }

    private static func width(of character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        // U+FE0F asks for the emoji form of the character before it (❤️), two columns wide.
        if scalars.contains("\u{FE0F}") { return 2 }
        switch first.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6,
             0x1F1E6...0x1F1FF, // regional indicators: a pair is a flag
             0x1F300...0x1FAFF, // emoji and pictographs
             0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }
}
