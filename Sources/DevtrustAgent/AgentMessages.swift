import DevtrustEncoding
import DevtrustErrors

/// A claim a client asks the agent to add (`--claim NAME=VALUE`): the agent's policy decides
/// whether it may (`AgentPolicy.allowedClientClaims`), and it never replaces a measured or
/// reserved one.
public struct GivenClaim: Equatable, Sendable {
    public let name: String
    public let value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// What a client asks the agent for: one request per connection. The agent knows who asks from the
/// kernel (`AgentPeer`), never from the request.
public enum AgentRequest: Equatable, Sendable {
    /// The machine key's public key (`pubkey`).
    case publicKey
    /// The key and the caller's own registrations (`status`).
    case status
    /// A device token for one of the caller's registrations (`token`): the one with `server`, the
    /// one whose id is `deviceID`, or the only one.
    case token(server: String?, deviceID: String?, claims: [GivenClaim])
    /// The Device Registration step's answer (`register`): the server's registration id and challenge
    /// as it sent them, the parameters it requires; the agent signs only a challenge its guard allows.
    case registrationStep(server: String, registrationID: String, challenge: String, requiredParams: [String], claims: [GivenClaim])
    /// The flow that `registrationStep` answered reached COMPLETE: record the registration for the caller.
    case registrationComplete(server: String, registrationID: String, flowType: String)

    /// The operation's name on the wire and in the audit.
    public var operation: String {
        switch self {
        case .publicKey: "pubkey"
        case .status: "status"
        case .token: "token"
        case .registrationStep: "registration-step"
        case .registrationComplete: "registration-complete"
        }
    }

    /// The server the request names, for the audit.
    public var server: String? {
        switch self {
        case .publicKey, .status: nil
        case let .token(server, _, _): server
        case let .registrationStep(server, _, _, _, _), let .registrationComplete(server, _, _): server
        }
    }

    /// Bounds on what a request carries (beyond the frame's): each field's length and count.
    static let maximumServerLength = 2048
    static let maximumIDLength = 256
    static let maximumClaims = 64
    static let maximumClaimNameLength = 256
    static let maximumClaimValueLength = 4096
    static let maximumChallengeLength = 512
    static let maximumRequiredParams = 16

    public var json: JSONValue {
        var object: JSONObject = ["v": .integer(AgentWire.version), "op": .string(operation)]
        func claimsValue(_ claims: [GivenClaim]) -> JSONValue {
            .array(claims.map { .array([.string($0.name), .string($0.value)]) })
        }
        switch self {
        case .publicKey, .status:
            break
        case let .token(server, deviceID, claims):
            if let server { object["server"] = .string(server) }
            if let deviceID { object["deviceId"] = .string(deviceID) }
            object["claims"] = claimsValue(claims)
        case let .registrationStep(server, registrationID, challenge, requiredParams, claims):
            object["server"] = .string(server)
            object["registrationId"] = .string(registrationID)
            object["challenge"] = .string(challenge)
            object["requiredParams"] = .array(requiredParams.map(JSONValue.string))
            object["claims"] = claimsValue(claims)
        case let .registrationComplete(server, registrationID, flowType):
            object["server"] = .string(server)
            object["registrationId"] = .string(registrationID)
            object["flowType"] = .string(flowType)
        }
        return .object(object)
    }

    /// Reads a request's JSON, strictly: every field known, typed and within its bounds.
    public init(json bytes: [UInt8]) throws(AgentProtocolError) {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes, maximumDepth: 4)
        } catch {
            throw AgentProtocolError("the request is not JSON (\(error))")
        }
        do throws(JSONFieldError) {
            let reader = try JSONObjectReader(document, path: "")
            guard try reader.int("v") == AgentWire.version else {
                throw JSONFieldError(path: "v", kind: .invalidValue("this agent speaks version \(AgentWire.version) of the protocol"))
            }
            let operation = try reader.string("op")
            func text(_ key: String, limit: Int) throws(JSONFieldError) -> String {
                let value = try reader.string(key)
                try Self.check(value, path: key, limit: limit)
                return value
            }
            func optionalText(_ key: String, limit: Int) throws(JSONFieldError) -> String? {
                guard let value = try reader.optionalString(key) else { return nil }
                try Self.check(value, path: key, limit: limit)
                return value
            }
            switch operation {
            case "pubkey":
                try reader.rejectUnknownFields(known: ["v", "op"])
                self = .publicKey
            case "status":
                try reader.rejectUnknownFields(known: ["v", "op"])
                self = .status
            case "token":
                try reader.rejectUnknownFields(known: ["v", "op", "server", "deviceId", "claims"])
                self = .token(server: try optionalText("server", limit: Self.maximumServerLength),
                              deviceID: try optionalText("deviceId", limit: Self.maximumIDLength), claims: try Self.claims(reader))
            case "registration-step":
                try reader.rejectUnknownFields(known: ["v", "op", "server", "registrationId", "challenge", "requiredParams", "claims"])
                let parameters = try reader.array("requiredParams")
                guard parameters.count <= Self.maximumRequiredParams else {
                    throw JSONFieldError(path: "requiredParams", kind: .invalidValue("at most \(Self.maximumRequiredParams)"))
                }
                var required = [String]()
                for (index, parameter) in parameters.enumerated() {
                    guard let name = parameter.stringValue else {
                        throw JSONFieldError(path: "requiredParams[\(index)]", kind: .invalidType(expected: "a string", found: parameter.kindDescription))
                    }
                    try Self.check(name, path: "requiredParams[\(index)]", limit: 64)
                    required.append(name)
                }
                self = .registrationStep(server: try text("server", limit: Self.maximumServerLength),
                                         registrationID: try text("registrationId", limit: Self.maximumIDLength),
                                         challenge: try text("challenge", limit: Self.maximumChallengeLength),
                                         requiredParams: required, claims: try Self.claims(reader))
            case "registration-complete":
                try reader.rejectUnknownFields(known: ["v", "op", "server", "registrationId", "flowType"])
                self = .registrationComplete(server: try text("server", limit: Self.maximumServerLength),
                                             registrationID: try text("registrationId", limit: Self.maximumIDLength),
                                             flowType: try text("flowType", limit: 64))
            default:
                throw JSONFieldError(path: "op", kind: .invalidValue("no operation \"\(String(operation.prefix(64)))\""))
            }
        } catch {
            throw AgentProtocolError("\(error)")
        }
    }

    /// Printable text of at most `limit` characters (no control characters: it may reach the audit and a keystore).
    private static func check(_ value: String, path: String, limit: Int) throws(JSONFieldError) {
        guard !value.isEmpty, value.utf8.count <= limit, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw JSONFieldError(path: path, kind: .invalidValue("must be 1 to \(limit) bytes of printable text"))
        }
    }

    private static func claims(_ reader: JSONObjectReader) throws(JSONFieldError) -> [GivenClaim] {
        guard reader.object["claims"] != nil else { return [] }
        let list = try reader.array("claims")
        guard list.count <= maximumClaims else { throw JSONFieldError(path: "claims", kind: .invalidValue("at most \(maximumClaims) claims")) }
        var claims = [GivenClaim]()
        for (index, element) in list.enumerated() {
            guard let pair = element.arrayValue, pair.count == 2, let name = pair[0].stringValue, let value = pair[1].stringValue,
                  !name.isEmpty, name.utf8.count <= maximumClaimNameLength, value.utf8.count <= maximumClaimValueLength else {
                throw JSONFieldError(path: "claims[\(index)]", kind: .invalidValue("must be [NAME, VALUE], two strings within bounds"))
            }
            claims.append(GivenClaim(name: name, value: value))
        }
        return claims
    }
}

/// A request the agent cannot read: junk, a frame too large or empty, a field out of bounds. Its
/// refusal goes back to the client (a usage error: the client sent what cannot be done).
public struct AgentProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

extension AgentProtocolError: ClassifiedError {
    public var classification: ErrorClassification {
        ErrorClassification(.usage, summary: "the devtrust agent could not read the request: \(message)",
                            hint: ErrorHint("is this client a devtrust of the agent's version?", joinedBy: "; "))
    }
}

/// The agent's answer: an object of results, or the error it refused with, classified as the
/// error is on the agent's side (the client's exit code is its category's).
public enum AgentReply: Equatable, Sendable {
    case success(JSONObject)
    case failure(ErrorClassification)

    public var json: JSONValue {
        switch self {
        case let .success(object):
            return .object(["ok": .object(object)])
        case let .failure(classification):
            // Categories that carry values never come from the agent; they go as a failure.
            let name = ErrorCategory(name: classification.category.name) == nil ? ErrorCategory.failure.name : classification.category.name
            var error: JSONObject = ["category": .string(name), "summary": .string(classification.summary)]
            if let hint = classification.hint {
                error["hint"] = .object(["text": .string(hint.text), "joiner": .string(hint.joiner), "closing": .string(hint.closing)])
            }
            return .object(["error": .object(error)])
        }
    }

    /// Reads a reply; nil when it is not one.
    public init?(json bytes: [UInt8]) {
        guard let document = try? JSONParser.parse(bytes, maximumDepth: 16), let object = document.objectValue, object.count == 1 else { return nil }
        if let result = object["ok"]?.objectValue {
            self = .success(result)
            return
        }
        guard let error = object["error"]?.objectValue, let name = error["category"]?.stringValue, let category = ErrorCategory(name: name),
              let summary = error["summary"]?.stringValue else { return nil }
        var hint: ErrorHint?
        if let parts = error["hint"]?.objectValue {
            guard let text = parts["text"]?.stringValue, let joiner = parts["joiner"]?.stringValue, let closing = parts["closing"]?.stringValue else { return nil }
            hint = ErrorHint(text, joinedBy: joiner, closing: closing)
        }
        self = .failure(ErrorClassification(category, summary: summary, hint: hint))
    }
}

/// An error the agent answered with: classified as it was there.
public struct AgentRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    public let classification: ErrorClassification

    public init(_ classification: ErrorClassification) {
        self.classification = classification
    }

    public var description: String { classification.message }
}

extension AgentRefusal: ClassifiedError {}
