import DevtrustErrors

/// An error in the words people read, from its classification (`ErrorClassification`): what
/// failed, the hint after it, the detail `--verbose` adds. The command line prints them (with its
/// exit code and `--json` object: `DevtrustCLI`'s ErrorReporting.swift); the native host and the
/// sign-in event stream send the same words and derive their own codes from `category`.
package struct ErrorReport: Sendable, Equatable {
    package let category: ErrorCategory
    /// The whole text the user reads: what failed, then (when there is one) the hint.
    package let message: String
    /// What failed: `message` without the hint (`--json` prints the two apart).
    package let summary: String
    /// The rest of `message` after `summary`: the hint with what joins it on, or "".
    package let hintPart: String
    /// What to do next, where the error sets it apart from what failed; `message` ends with it
    /// (but for the closing parenthesis of a usage error's pointer to help).
    package let hint: String?
    /// Shown with --verbose: OpenSSL's error queue and the like.
    package let detail: String?

    package init(_ classification: ErrorClassification) {
        category = classification.category
        // The server's words on one line: a line break in them must not start a line of devtrust's own.
        summary = classification.quotesServer ? TerminalText.oneLine(classification.summary) : classification.summary
        hint = classification.hint?.text
        hintPart = classification.hint?.joinedText ?? ""
        message = summary + hintPart
        detail = classification.detail
    }

    package static func from(_ error: any Error) -> ErrorReport {
        ErrorReport(ErrorClassification(of: error))
    }

    /// The lines for people in two parts, each printable: what failed (`devtrust: error: ...`,
    /// the part a style colours), and the rest (the hint, a detail line with verbose).
    package func humanLines(verbose: Bool) -> (failed: String, rest: String) {
        var rest = TerminalText.printable(hintPart) + "\n"
        if verbose, let detail, !detail.isEmpty {
            rest += "devtrust: detail: \(TerminalText.printable(detail))\n"
        }
        return ("devtrust: error: " + TerminalText.printable(summary), rest)
    }
}
