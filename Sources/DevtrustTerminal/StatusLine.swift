/// The one line at the bottom of a terminal that a command rewrites in place
/// (the device code's countdown, the network-wait indicator): shared by
/// everything in one command, so that one does not draw over another's.
/// Whoever shows it clears it before anything else is written to stderr.
package final class StatusLine {
    package let terminal: any Terminal
    /// Whether the line now shows something (and who drew it).
    package private(set) var owner: Owner?
    /// The owner's line for when a request has waited so many seconds (the countdown
    /// counts on and says the server is slow), or nil: the owner has none.
    private var ownerLineWhileWaiting: ((Int) -> String)?

    package enum Owner: Equatable {
        case countdown
        case networkWait
    }

    package init(terminal: any Terminal) {
        self.terminal = terminal
    }

    /// Whether a command draws a status line at all: stderr is a terminal that can
    /// rewrite a line (`TerminalStyle.hasEscapes`: TERM set, not "dumb"), and neither
    /// --quiet nor --json (a program reads, maybe through a pty: ssh -t, docker run -t,
    /// expect, where a rewritten line would share its line with the output it parses).
    package static func isWanted(terminal: any Terminal, variables: [String: String], quiet: Bool, json: Bool) -> Bool {
        !quiet && !json && terminal.errorIsTerminal && TerminalStyle.hasEscapes(variables)
    }

    /// Draws `line` in place of what the line showed. Not while devtrust is a background
    /// job: `\r` and clearing the line would erase what the user is typing at the shell.
    package func show(_ line: String, as owner: Owner, whileWaiting: ((Int) -> String)? = nil) {
        guard terminal.errorIsForeground else { return }
        terminal.writeError("\r\u{1B}[K" + line)
        self.owner = owner
        ownerLineWhileWaiting = whileWaiting
    }

    /// The owner's line, redrawn to say that a request has waited `seconds`; false when the
    /// owner has no such line (the line is left as it is).
    @discardableResult
    package func showWait(seconds: Int) -> Bool {
        guard let owner, let ownerLineWhileWaiting else { return false }
        show(ownerLineWhileWaiting(seconds), as: owner, whileWaiting: ownerLineWhileWaiting)
        return true
    }

    package func clear() {
        guard owner != nil else { return }
        terminal.writeError("\r\u{1B}[K")
        owner = nil
        ownerLineWhileWaiting = nil
    }
}
