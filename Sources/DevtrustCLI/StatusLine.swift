/// The one line at the bottom of a terminal that a command rewrites in place
/// (the device code's countdown, the network-wait indicator): shared by
/// everything in one command, so that one does not draw over another's.
/// Whoever shows it clears it before anything else is written to stderr.
final class StatusLine {
    private let terminal: any Terminal
    /// Whether the line now shows something (and who drew it).
    private(set) var owner: Owner?

    enum Owner: Equatable {
        case countdown
        case networkWait
    }

    init(terminal: any Terminal) {
        self.terminal = terminal
    }

    func show(_ line: String, as owner: Owner) {
        terminal.writeError("\r\u{1B}[K" + line)
        self.owner = owner
    }

    func clear() {
        guard owner != nil else { return }
        terminal.writeError("\r\u{1B}[K")
        owner = nil
    }
}
