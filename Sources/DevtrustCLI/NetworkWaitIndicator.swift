import DevtrustEncoding
import DevtrustHTTP

/// A request that has waited a second or more for its answer shows, on the
/// command's status line, a spinner, the host and the seconds waited
/// (`⠋ waiting for idp.example.com… 3 s`); the line is cleared as soon as the
/// request is over, before anything else is written. Nothing is drawn while
/// another part of the command owns the status line (the device code's
/// countdown). A command runs on one thread, and curl calls this from within
/// the request: no lock is needed.
final class NetworkWaitIndicator: HTTPWaitObserver, @unchecked Sendable {
    /// How long a request waits before the indicator shows.
    static let threshold = 1.0
    /// Host names past this many characters are cut, so that the line fits an
    /// 80-column terminal (a wrapped line cannot be rewritten in place).
    static let longestHost = 48

    /// The shortest time between two drawings: curl calls more often while data flows.
    static let redrawInterval = 0.1

    let statusLine: StatusLine
    let glyphs: Glyphs
    /// Drawings of the request under way (each turns the spinner one frame), and when the last one was.
    private var drawings = 0
    private var lastDrawing = 0.0

    /// The spinner's frames and the ellipsis: Unicode when the locale's
    /// character set is UTF-8, ASCII otherwise.
    struct Glyphs: Equatable {
        let frames: [String]
        let ellipsis: String

        static let unicode = Glyphs(frames: ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"], ellipsis: "…")
        static let ascii = Glyphs(frames: ["|", "/", "-", "\\"], ellipsis: "...")

        /// As the C library reads the locale: LC_ALL, else LC_CTYPE, else LANG (the first one set and not empty).
        static func forLocale(_ variables: [String: String]) -> Glyphs {
            let name = ["LC_ALL", "LC_CTYPE", "LANG"].first { variables[$0]?.isEmpty == false }
            let lowercased = name.flatMap { variables[$0] }?.lowercased() ?? ""
            return lowercased.includes("utf-8") || lowercased.includes("utf8") ? .unicode : .ascii
        }
    }

    init(statusLine: StatusLine, glyphs: Glyphs) {
        self.statusLine = statusLine
        self.glyphs = glyphs
    }

    /// The indicator for a command's requests, or nil where it would not be
    /// seen or would get in the way: stderr not a terminal, or one that cannot
    /// rewrite a line (TERM unset or "dumb"); --quiet; or DEVTRUST_HTTP_DEBUG,
    /// whose lines curl writes to stderr while the request is under way.
    static func make(_ context: CommandContext, httpDebug: Bool) -> NetworkWaitIndicator? {
        let terminalType = context.environment.variables["TERM"] ?? ""
        guard context.terminal.errorIsTerminal, !context.quiet, !httpDebug, !terminalType.isEmpty, terminalType != "dumb" else { return nil }
        return NetworkWaitIndicator(statusLine: context.statusLine, glyphs: .forLocale(context.environment.variables))
    }

    func line(host: String, elapsedSeconds: Double, frame: Int) -> String {
        let safeHost = TerminalText.printable(host)
        // The ellipsis after the host marks the cut too.
        let shownHost = safeHost.prefix(Self.longestHost)
        return "\(glyphs.frames[frame % glyphs.frames.count]) waiting for \(shownHost)\(glyphs.ellipsis) \(Int(elapsedSeconds)) s"
    }

    func waiting(for host: String, elapsedSeconds: Double) {
        guard elapsedSeconds >= Self.threshold, statusLine.owner == nil || statusLine.owner == .networkWait,
              drawings == 0 || elapsedSeconds - lastDrawing >= Self.redrawInterval else { return }
        statusLine.show(line(host: host, elapsedSeconds: elapsedSeconds, frame: drawings), as: .networkWait)
        drawings += 1
        lastDrawing = elapsedSeconds
    }

    func finished() {
        if statusLine.owner == .networkWait { statusLine.clear() }
        drawings = 0
    }
}
