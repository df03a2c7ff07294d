/// What was asked cannot be done as asked (an option, a value, a file given, a choice left to
/// make): the message says what is wrong, and `command` names the command whose help says how
/// (`devtrust help COMMAND`). Thrown by the command line's parser and commands, and by the
/// modules below it that take what the user gave: a prompt's answer, a sign-in profile, a
/// browser's host manifest's place.
public struct UsageError: Error, Sendable {
    public let message: String
    /// The command whose usage to point at, if any.
    public let command: String?

    public init(_ message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }
}

extension UsageError: ClassifiedError {
    /// The pointer to the command's help is the hint, in parentheses after what is wrong.
    public var classification: ErrorClassification {
        ErrorClassification(.usage, summary: message, hint: command.map { ErrorHint("see `devtrust help \($0)`", joinedBy: " (", closing: ")") })
    }
}
