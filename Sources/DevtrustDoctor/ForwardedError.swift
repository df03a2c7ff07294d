import DevtrustEncoding
import DevtrustErrors
import DevtrustTerminal

/// An error a child process reported (`BoundedProbes`), carried over as the error classified
/// itself there; or the one its parent makes when the child reported nothing usable.
package struct ForwardedError: ClassifiedError, CustomStringConvertible {
    package let classification: ErrorClassification

    package init(_ classification: ErrorClassification) {
        self.classification = classification
    }

    package var description: String { ErrorReport(classification).message }

    /// As the child process sends it.
    package var json: JSONValue {
        let hint = classification.hint.map { JSONValue.object(["text": .string($0.text), "joiner": .string($0.joiner), "closing": .string($0.closing)]) }
        return .object(["category": classification.category.json, "summary": .string(classification.summary), "hint": hint ?? .null,
                        "detail": classification.detail.map(JSONValue.string) ?? .null, "quotesServer": .bool(classification.quotesServer)])
    }

    package init?(json: JSONValue) {
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
    package var json: JSONValue {
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

    package init?(json: JSONValue) {
        guard let object = json.objectValue, let name = object["name"]?.stringValue else { return nil }
        switch name {
        case "oauthError":
            guard let code = object["code"]?.stringValue else { return nil }
            self = .oauthError(code: code, description: object["description"]?.stringValue)
        case "interrupted":
            guard let signal = object["signal"]?.int64Value.flatMap({ Int32(exactly: $0) }) else { return nil }
            self = .interrupted(signal: signal)
        default:
            guard let category = ErrorCategory(name: name) else { return nil }
            self = category
        }
    }
}
