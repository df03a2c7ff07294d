import DevtrustEncoding

/// A request that has waited a second or more for its answer shows, on the
/// command's status line, a spinner, the host and the seconds waited
/// (`⠋ waiting for idp.example.com… 3 s`); the line is cleared as soon as the
/// request is over, before anything else is written. curl calls back about
/// once a second while nothing arrives, so the spinner turns with the seconds:
/// an elapsed-time counter more than an animation. While the device code's
/// countdown owns the status line, the countdown counts on and says the
/// server is slow instead. A command runs on one thread, and curl calls this
/// from within the request: no lock is needed.
package final class NetworkWaitIndicator: @unchecked Sendable {
    /// How long a request waits before the indicator shows.
    package static let threshold = 1.0
    /// Host names past this many columns are cut when the terminal does not say
    /// its width, so that the line fits an 80-column terminal.
    package static let longestHost = 48
    /// A host is shown cut to no fewer columns than this (unless it is shorter): a shorter stub says nothing.
    package static let shortestCutHost = 10

    /// The shortest time between two drawings: curl calls more often while data flows.
    package static let redrawInterval = 0.1

    package let statusLine: StatusLine
    package let glyphs: Glyphs
    /// COLUMNS, for a terminal that does not say its width (`DeviceCodeScreen.size`).
    private let variables: [String: String]
    /// Whether to draw at all (`make`), asked when a request has first waited past the
    /// threshold: a command whose requests are quick, or that sends none, asks nothing
    /// of the terminal.
    private let isWanted: () -> Bool
    private lazy var wanted = isWanted()
    /// Drawings of the request under way (each turns the spinner one frame), and when the last one was.
    private var drawings = 0
    private var lastDrawing = 0.0

    /// The spinner's frames and the ellipsis: Unicode when the locale's
    /// character set is UTF-8 and the terminal has the glyphs, ASCII otherwise.
    package struct Glyphs: Equatable {
        package let frames: [String]
        package let ellipsis: String

        package init(frames: [String], ellipsis: String) {
            self.frames = frames
            self.ellipsis = ellipsis
        }

        package static let unicode = Glyphs(frames: ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"], ellipsis: "…")
        package static let ascii = Glyphs(frames: ["|", "/", "-", "\\"], ellipsis: "...")

        /// As the C library reads the locale: LC_ALL, else LC_CTYPE, else LANG (the first one set and not empty).
        package static func forLocale(_ variables: [String: String]) -> Glyphs {
            let name = ["LC_ALL", "LC_CTYPE", "LANG"].first { variables[$0]?.isEmpty == false }
            let lowercased = name.flatMap { variables[$0] }?.lowercased() ?? ""
            return lowercased.includes("utf-8") || lowercased.includes("utf8") ? .unicode : .ascii
        }

        /// As the locale says, but ASCII on the Linux console (TERM=linux), whose fonts have no braille.
        package static func forTerminal(_ variables: [String: String]) -> Glyphs {
            variables["TERM"] == "linux" ? .ascii : forLocale(variables)
        }
    }

    package init(statusLine: StatusLine, glyphs: Glyphs, variables: [String: String] = [:], isWanted: @escaping () -> Bool = { true }) {
        self.statusLine = statusLine
        self.glyphs = glyphs
        self.variables = variables
        self.isWanted = isWanted
    }

    /// The line, narrower than a window `columns` wide (a line as wide as the window
    /// wraps, and `\r` then rewrites only its last row): the host cut to fit (the ellipsis
    /// after it marks the cut too), else without the host, else the seconds alone; nil
    /// when not even those fit. With no width known, the host is cut at `longestHost`.
    package func line(host: String, elapsedSeconds: Double, frame: Int, columns: Int? = nil) -> String? {
        let spinner = glyphs.frames[frame % glyphs.frames.count]
        let seconds = "\(Int(elapsedSeconds)) s"
        let safeHost = TerminalText.printable(host)
        let widest = columns.map { $0 - 1 } ?? Int.max
        let hostRoom = min(columns == nil ? Self.longestHost : Int.max,
                           widest - DeviceCodeScreen.width("\(spinner) waiting for \(glyphs.ellipsis) \(seconds)"))
        if hostRoom >= min(Self.shortestCutHost, DeviceCodeScreen.width(safeHost)) {
            return "\(spinner) waiting for \(Self.prefix(safeHost, columns: hostRoom))\(glyphs.ellipsis) \(seconds)"
        }
        return ["\(spinner) waiting\(glyphs.ellipsis) \(seconds)", "\(spinner) \(seconds)"].first { DeviceCodeScreen.width($0) <= widest }
    }

    /// As many characters of `text` as fit in `columns` (wide characters take two).
    package static func prefix(_ text: String, columns: Int) -> String {
        var result = "", used = 0
        for character in text {
            let width = DeviceCodeScreen.width(String(character))
            guard used + width <= columns else { break }
            result.append(character)
            used += width
        }
        return result
    }

    package func waiting(for host: String, elapsedSeconds: Double) {
        guard elapsedSeconds >= Self.threshold, drawings == 0 || elapsedSeconds - lastDrawing >= Self.redrawInterval, wanted else { return }
        switch statusLine.owner {
        case .countdown:
            // The countdown keeps its line, counts on while the poll waits, and says the server is slow.
            guard statusLine.showWait(seconds: Int(elapsedSeconds)) else { return }
        case nil, .networkWait:
            // Asked at every drawing: the window can be resized while the request waits.
            let columns = DeviceCodeScreen.size(of: statusLine.terminal, variables: variables)?.columns
            guard let text = line(host: host, elapsedSeconds: elapsedSeconds, frame: drawings, columns: columns) else { return }
            statusLine.show(text, as: .networkWait)
        }
        drawings += 1
        lastDrawing = elapsedSeconds
    }

    package func finished() {
        if statusLine.owner == .networkWait { statusLine.clear() }
        drawings = 0
    }
}
