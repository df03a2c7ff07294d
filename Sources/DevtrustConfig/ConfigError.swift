import DevtrustEncoding
import DevtrustErrors

/// A configuration file that cannot be used: the user's to fix, like a bad option
/// (the command line's usage exit code; the native host tells it apart as `config`).
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Problem: Equatable, Sendable {
        case notFound
        case unreadable(String)
        /// Someone other than the user or root can change the file.
        case untrusted(String)
        case notJSON(String)
        /// `missingRequiredField`, `invalidType`, ... with the field's path.
        case field(JSONFieldError)
    }

    public let file: String
    public let problem: Problem

    public init(file: String, problem: Problem) {
        self.file = file
        self.problem = problem
    }

    public var description: String {
        switch problem {
        case .notFound: return "configuration file \(file) does not exist (given by --config or DEVTRUST_CONFIG)"
        case let .unreadable(reason): return "cannot read configuration file \(file): \(reason)"
        case let .untrusted(reason):
            return "configuration file \(file) \(reason): anyone who can change it chooses what devtrust runs and where it signs in, so devtrust refuses it: it must belong to you or root and be writable only by its owner (chmod go-w \(file))"
        case let .notJSON(reason): return "configuration file \(file) is not valid JSON: \(reason)"
        case let .field(error): return "configuration file \(file): \(error); see docs/configuration.md"
        }
    }
}

extension ConfigError: ClassifiedError {
    public var classification: ErrorClassification { ErrorClassification(.configuration, summary: description) }
}
