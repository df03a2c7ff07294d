import DevtrustEncoding
import DevtrustErrors
import DevtrustTerminal

/// An error as the command line prints it: the words of `ErrorReport` (DevtrustTerminal), the
/// `--json` object and the exit code of its category.
extension ErrorReport {
    /// The contract's exit code for the category.
    var exitCode: ExitCode { ExitCode(category) }

    /// The object `--json` prints on stderr: `{"error":{"message","exitCode","hint"}}`,
    /// `hint` null when the error sets none apart; `detail` only with --verbose.
    func json(verbose: Bool) -> JSONValue {
        var error: JSONObject = ["message": .string(summary), "exitCode": .integer(Int64(exitCode.rawValue)), "hint": hint.map { .string($0) } ?? .null]
        if verbose, let detail, !detail.isEmpty { error["detail"] = .string(detail) }
        return .object(["error": .object(error)])
    }

    /// What stderr gets for it: the lines for people (what failed in `style`'s error colour, the hint
    /// after it plain), or with --json the one JSON object on one line, never coloured.
    func text(style: TerminalStyle, verbose: Bool, json: Bool) -> String {
        if json { return JSONWriter.string(self.json(verbose: verbose)) + "\n" }
        let lines = humanLines(verbose: verbose)
        return style.error(lines.failed) + lines.rest
    }
}
