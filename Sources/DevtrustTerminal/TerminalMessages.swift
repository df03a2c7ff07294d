/// A command's lines for people, on stderr (its artifact goes to stdout): made printable
/// (`TerminalText`), in colour where `TerminalStyle` allows, silent with `quiet` (but for
/// warnings), and `detail` only with `verbose`.
package struct TerminalMessages {
    package let terminal: any Terminal
    /// The variables colour depends on (NO_COLOR, TERM).
    package let variables: [String: String]
    package let quiet: Bool
    package let verbose: Bool

    package init(terminal: any Terminal, variables: [String: String], quiet: Bool, verbose: Bool) {
        self.terminal = terminal
        self.variables = variables
        self.quiet = quiet
        self.verbose = verbose
    }

    /// Colour on stderr or none. Asked for only when a line is written, so that a
    /// command that writes nothing on stderr (`devtrust token`) asks nothing of the terminal.
    package var style: TerminalStyle { TerminalStyle(errorIsTerminal: terminal.errorIsTerminal, variables: variables) }

    /// A message for people (silent with --quiet).
    package func info(_ text: String) {
        if !quiet { terminal.writeError(TerminalText.printable(text) + "\n") }
    }

    /// What a command did (registered, signed in, deleted): in green on a terminal; silent with --quiet.
    package func success(_ text: String) {
        if !quiet { terminal.writeError(style.success(TerminalText.printable(text)) + "\n") }
    }

    /// A message the server sent for the user; errors in red on a terminal.
    package func serverMessage(_ text: String, isError: Bool) {
        guard !quiet else { return }
        let safe = TerminalText.printable((isError ? "error: " : "") + text)
        terminal.writeError((isError ? style.error(safe) : safe) + "\n")
    }

    /// `devtrust: warning: ...`, in yellow on a terminal; said even with --quiet.
    package func warn(_ text: String) {
        Self.warning(text, to: terminal, style: style)
    }

    package static func warning(_ text: String, to terminal: any Terminal, style: TerminalStyle) {
        terminal.writeError(style.warning("devtrust: warning: " + TerminalText.printable(text)) + "\n")
    }

    /// A step said with --verbose (and not --quiet).
    package func detail(_ text: String) {
        if verbose && !quiet { terminal.writeError(TerminalText.printable(text) + "\n") }
    }
}
