/// A field of a JSON document that is missing, of the wrong type, or not allowed.
public struct JSONFieldError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable {
        case missingRequiredField
        case invalidType(expected: String, found: String)
        case invalidValue(String)
        case unknownField(known: [String])
    }

    /// Where in the document: `registrations[0].server`.
    public let path: String
    public let kind: Kind

    public init(path: String, kind: Kind) {
        self.path = path
        self.kind = kind
    }

    public var description: String {
        switch kind {
        case .missingRequiredField: return "missing required field \"\(path)\""
        case let .invalidType(expected, found): return "field \"\(path)\" must be \(expected), found \(found)"
        case let .invalidValue(message): return "field \"\(path)\": \(message)"
        case let .unknownField(known):
            return "unknown field \"\(path)\"" + (known.isEmpty ? "" : " (known fields: \(known.joined(separator: ", ")))")
        }
    }
}

/// Reads typed fields out of a JSON object, naming the exact path on error.
public struct JSONObjectReader: Sendable {
    public let object: JSONObject
    public let path: String

    public init(_ object: JSONObject, path: String = "") {
        self.object = object
        self.path = path
    }

    /// Reads `value` as an object, or fails naming `path`.
    public init(_ value: JSONValue, path: String) throws(JSONFieldError) {
        guard case let .object(object) = value else {
            throw JSONFieldError(path: path.isEmpty ? "(top level)" : path, kind: .invalidType(expected: "an object", found: value.kindDescription))
        }
        self.init(object, path: path)
    }

    public func fieldPath(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    public func value(_ key: String) throws(JSONFieldError) -> JSONValue {
        guard let value = object[key], value != .null else { throw JSONFieldError(path: fieldPath(key), kind: .missingRequiredField) }
        return value
    }

    public func string(_ key: String) throws(JSONFieldError) -> String {
        try typed(key, try value(key), "a string") { $0.stringValue }
    }

    public func optionalString(_ key: String) throws(JSONFieldError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        return try typed(key, value, "a string") { $0.stringValue }
    }

    public func int(_ key: String) throws(JSONFieldError) -> Int64 {
        try typed(key, try value(key), "an integer") { $0.int64Value }
    }

    public func optionalBool(_ key: String) throws(JSONFieldError) -> Bool? {
        guard let value = object[key], value != .null else { return nil }
        return try typed(key, value, "true or false") { $0.boolValue }
    }

    public func array(_ key: String) throws(JSONFieldError) -> [JSONValue] {
        try typed(key, try value(key), "an array") { $0.arrayValue }
    }

    public func optionalObject(_ key: String) throws(JSONFieldError) -> JSONObjectReader? {
        guard let value = object[key], value != .null else { return nil }
        return JSONObjectReader(try typed(key, value, "an object") { $0.objectValue }, path: fieldPath(key))
    }

    /// An object whose every member is a string, in order.
    public func optionalStringMap(_ key: String) throws(JSONFieldError) -> [(String, String)] {
        guard let reader = try optionalObject(key) else { return [] }
        var pairs = [(String, String)]()
        for member in reader.object.members {
            guard case let .string(text) = member.value else {
                throw JSONFieldError(path: reader.fieldPath(member.key), kind: .invalidType(expected: "a string", found: Self.describe(member.value)))
            }
            pairs.append((member.key, text))
        }
        return pairs
    }

    /// Fails on the first member not in `known` (catches typos in hand-written files).
    public func rejectUnknownFields(known: [String]) throws(JSONFieldError) {
        if let unknown = object.keys.first(where: { !known.contains($0) }) {
            throw JSONFieldError(path: fieldPath(unknown), kind: .unknownField(known: known))
        }
    }

    private func typed<T>(_ key: String, _ value: JSONValue, _ expected: String, _ extract: (JSONValue) -> T?) throws(JSONFieldError) -> T {
        guard let result = extract(value) else {
            throw JSONFieldError(path: fieldPath(key), kind: .invalidType(expected: expected, found: Self.describe(value)))
        }
        return result
    }

    /// "a boolean (true)", "a number (12)": what was found, short.
    static func describe(_ value: JSONValue) -> String {
        switch value {
        case let .bool(flag): return "a boolean (\(flag))"
        case let .number(text): return "a number (\(text.prefix(20)))"
        case let .string(text): return "a string (\"\(text.prefix(20))\")"
        default: return value.kindDescription
        }
    }
}
