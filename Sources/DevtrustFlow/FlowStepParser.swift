import DevtrustEncoding
import DevtrustHTTP

/// Reads the server's answers strictly: anything that is not the documented
/// shape is a FlowProtocolError naming the field, never a guess or a crash.
public enum FlowStepParser {
    public static func parse(_ body: [UInt8]) throws -> FlowStep {
        let document: JSONValue
        do {
            document = try JSONParser.parse(body)
        } catch {
            throw FlowProtocolError("the answer is not JSON (\(error)): \(HTTPResponse.preview(body))")
        }
        do {
            let reader = try JSONObjectReader(document, path: "")
            let flowId = try reader.string("flowId")
            guard !flowId.isEmpty else { throw FlowProtocolError("flowId is empty") }
            let statusText = try reader.string("flowStatus")
            guard let status = FlowStep.Status(rawValue: statusText) else {
                throw FlowProtocolError("unknown flowStatus \"\(statusText)\"")
            }
            let type = try reader.optionalString("type")
            if status == .incomplete && type == nil { throw FlowProtocolError("an INCOMPLETE step has no type") }
            let data = try reader.optionalObject("data")
            return FlowStep(
                flowId: flowId,
                flowType: try reader.optionalString("flowType"),
                status: status,
                type: type,
                components: try data.map { try components($0, "components") } ?? [],
                redirectURL: try data?.optionalString("redirectURL") ?? data?.optionalString("url"),
                requiredParams: try data.map { try strings($0, "requiredParams") } ?? [],
                additionalData: try data.map { try stringMap($0, "additionalData") } ?? [:],
                messages: try data.map { try messages($0) } ?? [])
        } catch let error as JSONFieldError {
            throw FlowProtocolError(error.description)
        }
    }

    /// The body of an error answer, when it is the documented `{code, message, description}`.
    static func serverError(_ body: [UInt8], status: Int) -> FlowServerError? {
        guard case let .object(object)? = try? JSONParser.parse(body),
              let code = object["code"]?.stringValue, !code.isEmpty else { return nil }
        return FlowServerError(httpStatus: status, code: code, message: object["message"]?.stringValue ?? "",
                               serverDescription: object["description"]?.stringValue)
    }

    private static func components(_ reader: JSONObjectReader, _ key: String, depth: Int = 0) throws -> [FlowComponent] {
        guard let value = reader.object[key], value != .null else { return [] }
        guard case let .array(elements) = value else {
            throw JSONFieldError(path: reader.fieldPath(key), kind: .invalidType(expected: "an array", found: value.kindDescription))
        }
        guard depth < 16 else { throw FlowProtocolError("components nested deeper than 16 levels") }
        return try elements.enumerated().map { index, element in
            let item = try JSONObjectReader(element, path: reader.fieldPath(key) + "[\(index)]")
            let config = try item.optionalObject("config")
            var validations = [FlowValidation]()
            if let config, let list = config.object["validations"], list != .null {
                guard case let .array(rules) = list else {
                    throw JSONFieldError(path: config.fieldPath("validations"), kind: .invalidType(expected: "an array", found: list.kindDescription))
                }
                for (ruleIndex, rule) in rules.enumerated() {
                    let ruleReader = try JSONObjectReader(rule, path: config.fieldPath("validations") + "[\(ruleIndex)]")
                    var conditions = [String: String]()
                    if let list = ruleReader.object["conditions"]?.arrayValue {
                        for condition in list {
                            guard let key = condition.objectValue?["key"]?.stringValue, let value = condition.objectValue?["value"]?.stringValue else { continue }
                            conditions[key] = value
                        }
                    }
                    validations.append(FlowValidation(name: try ruleReader.optionalString("name") ?? "", conditions: conditions))
                }
            }
            return FlowComponent(
                id: try item.optionalString("id"),
                type: try item.string("type"),
                variant: try item.optionalString("variant"),
                identifier: try config?.optionalString("identifier"),
                label: try config?.optionalString("label"),
                placeholder: try config?.optionalString("placeholder"),
                required: try config?.optionalBool("required") ?? false,
                text: try config?.optionalString("text"),
                actionId: try item.optionalString("actionId") ?? (try item.string("type") == "BUTTON" ? item.optionalString("id") : nil),
                validations: validations,
                children: try components(item, "components", depth: depth + 1))
        }
    }

    private static func strings(_ reader: JSONObjectReader, _ key: String) throws -> [String] {
        guard let value = reader.object[key], value != .null else { return [] }
        guard case let .array(elements) = value else {
            throw JSONFieldError(path: reader.fieldPath(key), kind: .invalidType(expected: "an array", found: value.kindDescription))
        }
        return try elements.enumerated().map { index, element in
            guard case let .string(text) = element else {
                throw JSONFieldError(path: reader.fieldPath(key) + "[\(index)]", kind: .invalidType(expected: "a string", found: element.kindDescription))
            }
            return text
        }
    }

    private static func stringMap(_ reader: JSONObjectReader, _ key: String) throws -> [String: String] {
        var map = [String: String]()
        for (name, value) in try reader.optionalStringMap(key) { map[name] = value }
        return map
    }

    private static func messages(_ reader: JSONObjectReader) throws -> [FlowMessage] {
        guard let value = reader.object["messages"], value != .null else { return [] }
        guard case let .array(elements) = value else {
            throw JSONFieldError(path: reader.fieldPath("messages"), kind: .invalidType(expected: "an array", found: value.kindDescription))
        }
        // A message may come with only its i18nKey (the text is the UI's to look up): the key is shown then.
        return try elements.enumerated().compactMap { index, element in
            let item = try JSONObjectReader(element, path: reader.fieldPath("messages") + "[\(index)]")
            guard let text = try item.optionalString("message") ?? item.optionalString("i18nKey") else { return nil }
            return FlowMessage(type: try item.optionalString("type") ?? "INFO", message: text)
        }
    }
}
