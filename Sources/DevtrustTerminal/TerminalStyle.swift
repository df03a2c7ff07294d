/// How devtrust's own lines look on stderr: in colour on a terminal, plain
/// anywhere else. Colour is on when stderr is a terminal, NO_COLOR is unset or
/// empty (no-color.org: set and non-empty turns it off) and TERM names a
/// terminal that has escapes (`hasEscapes`). stdout (tokens, JSON) and `--json` error objects are never styled.
/// Text is made printable (`TerminalText`) before it is styled, so these are
/// the only escapes that reach the terminal.
package struct TerminalStyle: Equatable {
    package let usesColour: Bool

    package init(usesColour: Bool) {
        self.usesColour = usesColour
    }

    package init(errorIsTerminal: Bool, variables: [String: String]) {
        self.init(usesColour: errorIsTerminal && Self.coloursTerminals(variables))
    }

    /// Whether a terminal gets colour: NO_COLOR unset or empty, and TERM one with escapes. From
    /// the variables alone: for words made before it is known where they go (`SigningDeadline.command`).
    package static func coloursTerminals(_ variables: [String: String]) -> Bool {
        let noColour = variables["NO_COLOR"].map { !$0.isEmpty } ?? false
        return !noColour && hasEscapes(variables)
    }

    /// Whether TERM names a terminal that knows ANSI escapes (colour, clearing a line):
    /// set and not "dumb". An unset TERM says nothing of the terminal: as git does, it counts as dumb.
    package static func hasEscapes(_ variables: [String: String]) -> Bool {
        let terminalType = variables["TERM"] ?? ""
        return !terminalType.isEmpty && terminalType != "dumb"
    }

    package static let plain = TerminalStyle(usesColour: false)

    /// What failed: the final error line, the server's error messages.
    package func error(_ text: String) -> String { paint("31", text) }
    /// `devtrust: warning:` lines.
    package func warning(_ text: String) -> String { paint("33", text) }
    /// What a command did: registered, signed in, deleted.
    package func success(_ text: String) -> String { paint("32", text) }
    /// What the user must read or type (the device code's user code).
    package func emphasis(_ text: String) -> String { paint("1", text) }

    private func paint(_ parameters: String, _ text: String) -> String {
        usesColour && !text.isEmpty ? "\u{1B}[" + parameters + "m" + text + "\u{1B}[0m" : text
    }
}
