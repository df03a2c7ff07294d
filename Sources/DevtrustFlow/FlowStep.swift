import DevtrustEncoding

/// One answer of the Flow Execution API (server contract, section 1).
public struct FlowStep: Sendable {
    public enum Status: String, Sendable {
        case incomplete = "INCOMPLETE"
        case complete = "COMPLETE"
    }

    public let flowId: String
    public let flowType: String?
    public let status: Status
    /// VIEW, REDIRECTION, INTERNAL_PROMPT, WEBAUTHN, PASSKEY, or something new.
    public let type: String?
    public let components: [FlowComponent]
    public let redirectURL: String?
    public let requiredParams: [String]
    public let additionalData: [String: String]
    public let messages: [FlowMessage]

    /// Every INPUT of the step, in order, from the whole component tree.
    public var inputs: [FlowComponent] { components.flatMap { $0.all(ofType: "INPUT") } }
    /// Every BUTTON of the step, in order.
    public var buttons: [FlowComponent] { components.flatMap { $0.all(ofType: "BUTTON") } }
}

public struct FlowComponent: Sendable {
    public let id: String?
    public let type: String
    public let variant: String?
    /// The input's name in `inputs` (INPUT).
    public let identifier: String?
    public let label: String?
    public let placeholder: String?
    public let required: Bool
    /// Display text (TYPOGRAPHY, RICH_TEXT, BUTTON).
    public let text: String?
    /// What a BUTTON sends back as `actionId`.
    public let actionId: String?
    public let validations: [FlowValidation]
    public let children: [FlowComponent]

    func all(ofType wanted: String) -> [FlowComponent] {
        (type == wanted ? [self] : []) + children.flatMap { $0.all(ofType: wanted) }
    }

    /// Whether the value should be read without echo.
    public var isSecret: Bool { ["PASSWORD", "OTP"].contains(variant?.uppercased() ?? "") }
}

public struct FlowMessage: Sendable, Equatable {
    /// ERROR, INFO, WARNING, ...
    public let type: String
    public let message: String
}

/// A client-side check the server asks for (`config.validations`).
public struct FlowValidation: Sendable, Equatable {
    public let name: String
    public let conditions: [String: String]

    /// Why `value` fails the rule, or nil when it passes (or the rule is unknown to devtrust).
    public func problem(with value: String) -> String? {
        let length = value.count
        let minimum = conditions["min.length"].flatMap(Int.init), maximum = conditions["max.length"].flatMap(Int.init)
        guard length >= minimum ?? 0, length <= maximum ?? .max else {
            // The rule as the prompt says it: `6 characters`, `8 to 64 characters`, `at least 8 characters`.
            switch (minimum, maximum) {
            case let (minimum?, maximum?) where minimum == maximum: return "must be \(minimum) characters long"
            case let (minimum?, maximum?): return "must be \(minimum) to \(maximum) characters long"
            case let (minimum?, nil): return "must be at least \(minimum) characters long"
            case let (nil, maximum?): return "must be at most \(maximum) characters long"
            case (nil, nil): return nil
            }
        }
        if let pattern = conditions["regex"] ?? conditions["pattern"], !RegularExpressionMatcher.matches(pattern, value) {
            return "must match the pattern \(pattern)"
        }
        return nil
    }

    /// The rule in words, for the prompt.
    public var explanation: String? {
        switch (conditions["min.length"], conditions["max.length"]) {
        case let (minimum?, maximum?) where minimum == maximum: return "\(minimum) characters"
        case let (minimum?, maximum?): return "\(minimum) to \(maximum) characters"
        case let (minimum?, nil): return "at least \(minimum) characters"
        case let (nil, maximum?): return "at most \(maximum) characters"
        default: return (conditions["regex"] ?? conditions["pattern"]).map { "matching \($0)" }
        }
    }
}
