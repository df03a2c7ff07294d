import DevtrustErrors

/// Failures that commands report themselves (the libraries' errors classify themselves the same way).
enum CLIError: Error {
    /// `verify`: the signature or token is not valid.
    case invalid(String)
    /// A failure with its explanation and what to do.
    case failure(String)
}

extension CLIError: ClassifiedError {
    var classification: ErrorClassification {
        switch self {
        case let .invalid(reason): ErrorClassification(.failure, summary: "invalid: " + reason)
        case let .failure(message): ErrorClassification(.failure, summary: message)
        }
    }
}
