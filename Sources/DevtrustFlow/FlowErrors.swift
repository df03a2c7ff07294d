import DevtrustErrors

/// The server answered with an error body (`{code, message, description}`):
/// it refused the flow.
public struct FlowServerError: Error, Equatable, Sendable, CustomStringConvertible {
    public let httpStatus: Int
    public let code: String
    public let message: String
    public let serverDescription: String?

    public init(httpStatus: Int, code: String, message: String, serverDescription: String?) {
        self.httpStatus = httpStatus
        self.code = code
        self.message = message
        self.serverDescription = serverDescription
    }

    public var description: String {
        var text = "the server refused the registration: \(code) \(message)"
        if let serverDescription, !serverDescription.isEmpty { text += ": \(serverDescription)" }
        if let hint { text += "\n  \(hint)" }
        return text
    }

    /// What to do about the codes users meet.
    public var hint: String? {
        switch code {
        case "DR-60001": return "the registration took too long and the server forgot it; run `devtrust register` again"
        case "DR-60002": return "the server could not verify the device key's signature; if `devtrust verify` accepts this device's tokens, report it as a devtrust bug"
        case "DR-60003": return "the server's flow reaches the device step before it knows the user; the administrator must move the Device Registration step after sign-in or sign-up"
        case "DR-60004": return "this device does not meet the server's device policy (the failed fields are listed above); `devtrust attributes --explain` shows what devtrust reports"
        case "DR-60005": return "the server requires device data and did not get it; report it as a devtrust bug"
        case "DM-60002": return "a field of the device step was empty; report it as a devtrust bug"
        case "FE-60008": return "the server rejected the values given; check them (--input NAME=VALUE) and run `devtrust register` again"
        default:
            if code.hasPrefix("FE-") || code.hasPrefix("OTP-") { return "start again with `devtrust register`" }
            return nil
        }
    }
}

/// The server does not answer the protocol: not JSON, wrong types, missing
/// fields, a step that makes no sense: a protocol failure, not a refusal.
public struct FlowProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) { self.message = message }

    public var description: String { "the server does not answer the Flow Execution API: \(message)" }
}

/// A step devtrust cannot take part in: the server asks for what devtrust does not do.
public struct FlowUnsupportedError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// Inputs that are needed and were not given (`--non-interactive`, or no
/// terminal to ask on): the user must supply them, as for a missing option.
public struct MissingFlowInputsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// (name, label) of each missing input.
    public let inputs: [(name: String, label: String?)]
    /// The step's headings, to say which step it is.
    public let stepText: [String]

    public init(inputs: [(name: String, label: String?)], stepText: [String]) {
        self.inputs = inputs
        self.stepText = stepText
    }

    public static func == (lhs: MissingFlowInputsError, rhs: MissingFlowInputsError) -> Bool {
        lhs.inputs.map(\.name) == rhs.inputs.map(\.name) && lhs.stepText == rhs.stepText
    }

    public var description: String {
        let names = inputs.map { input in "\(input.name)" + (input.label.map { " (\($0))" } ?? "") }
        let step = stepText.isEmpty ? "" : " for the step \"\(stepText.joined(separator: " / "))\""
        return "missing input\(inputs.count == 1 ? "" : "s")\(step): \(names.joined(separator: ", ")); give \(inputs.count == 1 ? "it" : "them") with --input NAME=VALUE or --inputs FILE, or run without --non-interactive at a terminal"
    }
}

extension FlowServerError: ClassifiedError {
    /// The server refused; its hint stays in the sentence (on a line of its own), as `--json` has always shown it.
    public var classification: ErrorClassification { ErrorClassification(.serverRefused, summary: description) }
}

extension FlowProtocolError: ClassifiedError {
    /// A server that does not speak the protocol, as an OAuth answer that does not (`OAuthProtocolError`):
    /// the contract's network failure.
    public var classification: ErrorClassification { ErrorClassification(.protocolViolation, summary: description) }
}

extension FlowUnsupportedError: ClassifiedError {
    /// A refusal of sorts: the server asks for what devtrust does not do (not a sign-in's `unsupported`).
    public var classification: ErrorClassification { ErrorClassification(.serverRefused, summary: description) }
}

extension MissingFlowInputsError: ClassifiedError {
    /// Inputs the user must give, as for a missing option.
    public var classification: ErrorClassification { ErrorClassification(.usage, summary: description) }
}
