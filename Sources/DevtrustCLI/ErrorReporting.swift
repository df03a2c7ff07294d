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

/// An error a child process reported (`BoundedProbes`), carried over as the error classified
/// itself there; or the one its parent makes when the child reported nothing usable.
struct ForwardedError: ClassifiedError, CustomStringConvertible {
    let classification: ErrorClassification

    init(_ classification: ErrorClassification) {
        self.classification = classification
    }

    var description: String { ErrorReport(classification).message }

    /// As the child process sends it.
    var json: JSONValue {
        let hint = classification.hint.map { JSONValue.object(["text": .string($0.text), "joiner": .string($0.joiner), "closing": .string($0.closing)]) }
        return .object(["category": classification.category.json, "summary": .string(classification.summary), "hint": hint ?? .null,
                        "detail": classification.detail.map(JSONValue.string) ?? .null, "quotesServer": .bool(classification.quotesServer)])
    }

    init?(json: JSONValue) {
        guard let object = json.objectValue, let category = object["category"].flatMap(ErrorCategory.init(json:)),
              let summary = object["summary"]?.stringValue, let quotesServer = object["quotesServer"]?.boolValue else { return nil }
        var hint: ErrorHint?
        if let parts = object["hint"]?.objectValue {
            guard let text = parts["text"]?.stringValue, let joiner = parts["joiner"]?.stringValue, let closing = parts["closing"]?.stringValue else { return nil }
            hint = ErrorHint(text, joinedBy: joiner, closing: closing)
        }
        classification = ErrorClassification(category, summary: summary, hint: hint, detail: object["detail"]?.stringValue, quotesServer: quotesServer)
    }
}

extension ErrorCategory {
    /// The category as a child process sends it (`ForwardedError`): its name, and the values it carries.
    var json: JSONValue {
        var object: JSONObject = ["name": .string(name)]
        switch self {
        case let .oauthError(code, description):
            object["code"] = .string(code)
            object["description"] = description.map(JSONValue.string) ?? .null
        case let .interrupted(signal):
            object["signal"] = .integer(Int64(signal))
        default:
            break
        }
        return .object(object)
    }

    init?(json: JSONValue) {
        guard let object = json.objectValue, let name = object["name"]?.stringValue else { return nil }
        switch name {
        case "oauthError":
            guard let code = object["code"]?.stringValue else { return nil }
            self = .oauthError(code: code, description: object["description"]?.stringValue)
        case "interrupted":
            guard let signal = object["signal"]?.int64Value.flatMap({ Int32(exactly: $0) }) else { return nil }
            self = .interrupted(signal: signal)
        default:
            guard let category = Self.withoutValues.first(where: { $0.name == name }) else { return nil }
            self = category
        }
    }

    static let withoutValues: [ErrorCategory] = [.usage, .configuration, .noDeviceKey, .notRegistered, .serverRefused, .approvalExpired, .approvalDenied,
                                                 .unsupported, .network, .protocolViolation, .tpm, .keystore, .failure]

    private var name: String {
        switch self {
        case .usage: "usage"
        case .configuration: "configuration"
        case .noDeviceKey: "noDeviceKey"
        case .notRegistered: "notRegistered"
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
}
