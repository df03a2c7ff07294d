/// Failures that commands report themselves (module errors are mapped in
/// ErrorReporting, the one place that chooses messages and exit codes).
enum CLIError: Error {
    /// `verify`: the signature or token is not valid.
    case invalid(String)
    /// A failure with its explanation and what to do.
    case failure(String)
}
