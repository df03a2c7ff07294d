import DevtrustEncoding
import DevtrustErrors

/// An error as the command line words it, from its classification (`ErrorClassification`): what
/// the user reads, the `--json` object and the exit code. The native host and the sign-in event
/// stream take its words and derive their own codes from its `category`.
struct ErrorReport: Sendable, Equatable {
    let category: ErrorCategory
    /// The whole text the user reads: what failed, then (when there is one) the hint.
    let message: String
    /// What failed: `message` without the hint (`--json` prints the two apart).
    let summary: String
    /// The rest of `message` after `summary`: the hint with what joins it on, or "".
    let hintPart: String
    /// What to do next, where the error sets it apart from what failed; `message` ends with it
    /// (but for the closing parenthesis of a usage error's pointer to help).
    let hint: String?
    /// Shown with --verbose: OpenSSL's error queue and the like.
    let detail: String?

    /// The contract's exit code for the category.
    var exitCode: ExitCode { ExitCode(category) }

    init(_ classification: ErrorClassification) {
        category = classification.category
        // The server's words on one line: a line break in them must not start a line of devtrust's own.
        summary = classification.quotesServer ? TerminalText.oneLine(classification.summary) : classification.summary
        hint = classification.hint?.text
        hintPart = classification.hint?.joinedText ?? ""
        message = summary + hintPart
        detail = classification.detail
    }

    static func from(_ error: any Error) -> ErrorReport {
        ErrorReport(ErrorClassification(of: error))
    }

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

    /// The lines for people in two parts, each printable: what failed (`devtrust: error: ...`,
    /// the part a style colours), and the rest (the hint, a detail line with verbose).
    func humanLines(verbose: Bool) -> (failed: String, rest: String) {
        var rest = TerminalText.printable(hintPart) + "\n"
        if verbose, let detail, !detail.isEmpty {
            rest += "devtrust: detail: \(TerminalText.printable(detail))\n"
        }
        return ("devtrust: error: " + TerminalText.printable(summary), rest)
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
