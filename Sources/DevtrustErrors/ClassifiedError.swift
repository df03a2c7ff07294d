/// An error that says what it is: its category, what failed and what to do next, as values.
/// Every front end renders that its own way, without asking which type the error is: the
/// command line its message, colour, `--json` object and exit code; the browser's native host
/// its wire error code; the sign-in event stream its `error` code.
public protocol ClassifiedError: Error {
    var classification: ErrorClassification { get }
}

/// What an error is, in values.
public struct ErrorClassification: Sendable, Equatable {
    public let category: ErrorCategory
    /// What failed: the message without the hint.
    public let summary: String
    /// What to do next, where the error sets it apart from what failed.
    public let hint: ErrorHint?
    /// Shown with --verbose only: OpenSSL's error queue and the like.
    public let detail: String?
    /// The summary quotes a server's own words (an OAuth error and its description, an issuer):
    /// a front end shows it on one line, so that a line break in them cannot start a line that
    /// looks like one of devtrust's own.
    public let quotesServer: Bool

    public init(_ category: ErrorCategory, summary: String, hint: ErrorHint? = nil, detail: String? = nil, quotesServer: Bool = false) {
        self.category = category
        self.summary = summary
        self.hint = hint
        self.detail = detail
        self.quotesServer = quotesServer
    }

    /// The whole sentence: what failed, then the hint as it joins on.
    public var message: String {
        summary + (hint?.joinedText ?? "")
    }
}

extension ErrorClassification {
    /// What any error is: its own classification, or, for one that says nothing of itself (an
    /// internal error no library turned into one of its own: a bug), a failure named by its text.
    public init(of error: any Error) {
        // The one dynamic cast of error handling: errors reach the front ends untyped.
        if let error = error as? any ClassifiedError {
            self = error.classification
        } else {
            self.init(.failure, summary: "unexpected error: \(error)")
        }
    }
}

/// What to do next, and the words that join it to the summary in the one-sentence message
/// ("there is no device key in /ks" + "; " + "run `devtrust init` first").
public struct ErrorHint: Sendable, Equatable {
    public let text: String
    /// What goes between the summary and the hint: "; ", ": ", ". ", " (".
    public let joiner: String
    /// What follows the hint: ")" after " (", else "".
    public let closing: String

    public init(_ text: String, joinedBy joiner: String, closing: String = "") {
        self.text = text
        self.joiner = joiner
        self.closing = closing
    }

    /// What the message adds to the summary: the hint with its joining words.
    public var joinedText: String { joiner + text + closing }
}

/// What kind of failure an error is. Each case belongs to one of the seven categories of the
/// command line's contract (the marks below), which give its exit code; the cases within a
/// category are what another front end tells apart: the native host's `config` and `no_key`,
/// the event stream's OAuth error codes, `unsupported`, `protocol_error` and `interrupted`.
/// Front ends switch over every case, so that a new one makes each of them decide.
public enum ErrorCategory: Sendable, Equatable {
    // MARK: usage
    /// What was asked cannot be done as asked: an option, a value, a file or URL given, a choice
    /// left to make (which registration, which sign-in).
    case usage
    /// The configuration file is missing, unreadable, untrusted or not valid.
    case configuration

    // MARK: not registered
    /// There is no device key.
    case noDeviceKey
    /// The device is not registered, or not signed in, where the request needs it (or was with another key).
    case notRegistered
    /// Who asks is not allowed to: the system agent's policy does not let this user use the device key.
    case notPermitted

    // MARK: server refused
    /// The server refused: a flow error, a refused refresh, a step devtrust cannot take.
    case serverRefused
    /// The authorization server refused with an OAuth error answer: its `error` code and
    /// `error_description`, as the server sent them.
    case oauthError(code: String, description: String?)
    /// The user's approval never came: the request (a device code, a CIBA request) expired.
    case approvalExpired
    /// The user's approval never came: it was denied.
    case approvalDenied
    /// The server asks for a sign-in step, or offers only a sign-in, that devtrust does not do.
    case unsupported

    // MARK: network
    /// The network or TLS failed, an answer did not come in time or was not usable.
    case network
    /// The server does not answer as its protocol says (OAuth, OpenID Connect, the Flow Execution API).
    case protocolViolation

    // MARK: TPM
    /// The TPM is unreachable, refuses, or does not load the key.
    case tpm

    // MARK: keystore
    /// The keystore is unsafe, corrupt, locked or cannot be written.
    case keystore

    // MARK: failure
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) ended a wait: the front end ends by that signal too.
    case interrupted(signal: Int32)
    /// Anything else: an invalid signature or token, a command's own failure, a bug.
    case failure
}

extension ErrorCategory {
    /// The category's name, as a process that hands an error to another writes it (the agent's
    /// replies, a bounded probe's report): the case's name, without the values it carries.
    public var name: String {
        switch self {
        case .usage: "usage"
        case .configuration: "configuration"
        case .noDeviceKey: "noDeviceKey"
        case .notRegistered: "notRegistered"
        case .notPermitted: "notPermitted"
        case .serverRefused: "serverRefused"
        case .oauthError: "oauthError"
        case .approvalExpired: "approvalExpired"
        case .approvalDenied: "approvalDenied"
        case .unsupported: "unsupported"
        case .network: "network"
        case .protocolViolation: "protocolViolation"
        case .tpm: "tpm"
        case .keystore: "keystore"
        case .interrupted: "interrupted"
        case .failure: "failure"
        }
    }

    /// The categories that carry no values, each known by its `name` alone.
    public static let withoutValues: [ErrorCategory] = [.usage, .configuration, .noDeviceKey, .notRegistered, .notPermitted, .serverRefused,
                                                        .approvalExpired, .approvalDenied, .unsupported, .network, .protocolViolation, .tpm,
                                                        .keystore, .failure]

    /// The category without values that `name` names.
    public init?(name: String) {
        guard let category = Self.withoutValues.first(where: { $0.name == name }) else { return nil }
        self = category
    }
}
