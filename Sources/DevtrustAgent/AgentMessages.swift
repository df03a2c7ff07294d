import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustJOSE
import DevtrustURL

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
    /// `sign-challenge`: a signature over the challenge's bytes (base64url, as the user gave it); the
    /// agent signs only a challenge its guard allows (`ChallengePolicy`).
    case signChallenge(challenge: String)
    /// `device-data`: a deviceData JWT of the agent's collectors, with the claims its policy lets a client add.
    case deviceData(claims: [GivenClaim])
    /// A DPoP proof (`dpop-proof`, and a DPoP-bound sign-in's token requests): the agent writes the
    /// header and the claims; the client gives only the request's method and URL, the server's nonce
    /// and the access token's hash (`ath`), each validated.
    case dpopProof(method: String, url: String, nonce: String?, accessTokenHash: String?)
    /// The device token a sign-in carries (`login`, `authorize-url`): for the caller's registration
    /// that `choice` names (a server, or a provider's authorization endpoint), when every URL it goes
    /// to (`destinations`) is on that registration's origin; else why the sign-in goes without one.
    case signInToken(choice: RegistrationChoice, destinations: [String])
    /// `reset` as a user: forget the caller's registrations (never the key, never another's); and
    /// root's `reset --uid UID`: forget the registrations of `uid`, whichever account made them (a
    /// departed user's, before their uid is given to another). Only root names a uid.
    case forgetRegistrations(uid: UInt32?)

    /// The operation's name on the wire and in the audit.
    public var operation: String {
        switch self {
        case .publicKey: "pubkey"
        case .status: "status"
        case .token: "token"
        case .registrationStep: "registration-step"
        case .registrationComplete: "registration-complete"
        case .signChallenge: "sign-challenge"
        case .deviceData: "device-data"
        case .dpopProof: "dpop-proof"
        case .signInToken: "sign-in-token"
        case .forgetRegistrations: "forget-registrations"
        }
    }

    /// The server the request names, for the audit.
    public var server: String? {
        switch self {
        case .publicKey, .status, .signChallenge, .deviceData, .forgetRegistrations: nil
        case let .token(server, _, _): server
        case let .registrationStep(server, _, _, _, _), let .registrationComplete(server, _, _): server
        // The origin only: a resource's path and query are the user's business, not the audit's.
        case let .dpopProof(_, url, _, _): Origin(DPoPProofMinter.targetURI(url))?.description
        case let .signInToken(choice, _):
            switch choice {
            case let .server(server): server
            case let .provider(destination, _): Origin(destination)?.description
            case .deviceID, .chosen: nil
            }
        }
    }

    /// Bounds on what a request carries (beyond the frame's): each field's length and count. A
    /// registration's server, id and flow type are kept in the machine keystore for every user
    /// (`DeviceStore.maximumRegistrations` of them at most): short ASCII, which its JSON writes as
    /// it is, so that the largest keystore.json they allow stays far below what a keystore reads
    /// (`Keystore.maximumManifestBytes`; `AgentWireTests.theLargestMachineKeystoreIsReadable`).
    /// A server: an http(s) base URL (`serverURLProblem`), or the name `token --server` gives.
    public static let maximumServerLength = 512
    /// A registration id (`registrationId`, `deviceId`): what servers send (WSO2: a UUID, 36).
    public static let maximumIDLength = 128
    /// A flow type (`REGISTRATION`).
    public static let maximumFlowTypeLength = 64
    static let maximumClaims = 64
    static let maximumClaimNameLength = 256
    static let maximumClaimValueLength = 4096
    static let maximumChallengeLength = 512
    static let maximumRequiredParams = 16
    /// `sign-challenge`'s challenge (base64url): far more than any challenge protocol sends.
    public static let maximumSignedChallengeLength = 16_384
    /// A URL a DPoP proof is for, or a sign-in's device token goes to.
    public static let maximumURLLength = 8192
    /// A sign-in's destinations and a provider's URLs.
    static let maximumURLs = 8
    /// `ath`: base64url of a SHA-256 hash, without padding.
    static let accessTokenHashLength = 43

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
        case let .signChallenge(challenge):
            object["challenge"] = .string(challenge)
        case let .deviceData(claims):
            object["claims"] = claimsValue(claims)
        case let .dpopProof(method, url, nonce, accessTokenHash):
            object["method"] = .string(method)
            object["url"] = .string(url)
            if let nonce { object["nonce"] = .string(nonce) }
            if let accessTokenHash { object["ath"] = .string(accessTokenHash) }
        case let .signInToken(choice, destinations):
            switch choice {
            case let .server(server):
                if let server { object["server"] = .string(server) }
            case let .provider(destination, providerURLs):
                object["destination"] = .string(destination)
                object["providerUrls"] = .array(providerURLs.map(JSONValue.string))
            case .deviceID, .chosen:
                // Not sent: `signInToken` names a registration by its server or its provider only.
                break
            }
            object["destinations"] = .array(destinations.map(JSONValue.string))
        case let .forgetRegistrations(uid):
            if let uid { object["uid"] = .integer(Int64(uid)) }
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
                self = .token(server: try Self.optionalServerName(reader, "server"), deviceID: try Self.optionalIdentifier(reader, "deviceId"),
                              claims: try Self.claims(reader))
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
                self = .registrationStep(server: try Self.serverURL(reader, "server"), registrationID: try Self.identifier(reader, "registrationId"),
                                         challenge: try text("challenge", limit: Self.maximumChallengeLength),
                                         requiredParams: required, claims: try Self.claims(reader))
            case "registration-complete":
                try reader.rejectUnknownFields(known: ["v", "op", "server", "registrationId", "flowType"])
                self = .registrationComplete(server: try Self.serverURL(reader, "server"), registrationID: try Self.identifier(reader, "registrationId"),
                                             flowType: try Self.identifier(reader, "flowType", limit: Self.maximumFlowTypeLength))
            case "sign-challenge":
                try reader.rejectUnknownFields(known: ["v", "op", "challenge"])
                self = .signChallenge(challenge: try text("challenge", limit: Self.maximumSignedChallengeLength))
            case "device-data":
                try reader.rejectUnknownFields(known: ["v", "op", "claims"])
                self = .deviceData(claims: try Self.claims(reader))
            case "dpop-proof":
                try reader.rejectUnknownFields(known: ["v", "op", "method", "url", "nonce", "ath"])
                self = try Self.dpopProof(reader, url: try text("url", limit: Self.maximumURLLength))
            case "sign-in-token":
                try reader.rejectUnknownFields(known: ["v", "op", "server", "destination", "providerUrls", "destinations"])
                let server = try Self.optionalServerName(reader, "server")
                let destination = try optionalText("destination", limit: Self.maximumURLLength)
                let choice: RegistrationChoice
                switch (server, destination) {
                case let (server?, nil):
                    guard reader.object["providerUrls"] == nil else {
                        throw JSONFieldError(path: "providerUrls", kind: .invalidValue("goes with \"destination\", not \"server\""))
                    }
                    choice = .server(server)
                case let (nil, destination?):
                    choice = .provider(destination: destination, providerURLs: try Self.urls(reader, "providerUrls"))
                default:
                    throw JSONFieldError(path: "server", kind: .invalidValue("give \"server\" or \"destination\", one of them"))
                }
                self = .signInToken(choice: choice, destinations: try Self.urls(reader, "destinations"))
            case "forget-registrations":
                try reader.rejectUnknownFields(known: ["v", "op", "uid"])
                var uid: UInt32?
                if let value = reader.object["uid"] {
                    guard let number = value.int64Value, let named = UInt32(exactly: number) else {
                        throw JSONFieldError(path: "uid", kind: .invalidValue("must be a uid, 0 to 4294967295"))
                    }
                    uid = named
                }
                self = .forgetRegistrations(uid: uid)
            default:
                throw JSONFieldError(path: "op", kind: .invalidValue("no operation \"\(String(operation.prefix(64)))\""))
            }
        } catch {
            if case .invalidValue = error.kind { throw AgentProtocolError("\(error)", refusedValue: true) }
            throw AgentProtocolError("\(error)")
        }
    }

    /// A server the agent records a registration with (`registration-step`, `registration-complete`):
    /// an http(s) base URL, as `serverURLProblem` says.
    private static func serverURL(_ reader: JSONObjectReader, _ key: String) throws(JSONFieldError) -> String {
        let server = try reader.string(key)
        if let problem = serverURLProblem(server) { throw JSONFieldError(path: key, kind: .invalidValue(problem)) }
        return server
    }

    /// A server a registration is chosen by (`token`, `sign-in-token`): its URL, or its host, or host
    /// and path (`token --server NAME`); printable ASCII of at most `maximumServerLength` bytes.
    private static func optionalServerName(_ reader: JSONObjectReader, _ key: String) throws(JSONFieldError) -> String? {
        guard let server = try reader.optionalString(key) else { return nil }
        guard (1...maximumServerLength).contains(server.utf8.count), server.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw JSONFieldError(path: key, kind: .invalidValue("must be a server's URL or name: 1 to \(maximumServerLength) bytes of printable ASCII without spaces"))
        }
        return server
    }

    /// A registration id or a flow type, as the agent keeps it: `identifierProblem`.
    private static func identifier(_ reader: JSONObjectReader, _ key: String, limit: Int = maximumIDLength) throws(JSONFieldError) -> String {
        let value = try reader.string(key)
        if let problem = identifierProblem(value, limit: limit) { throw JSONFieldError(path: key, kind: .invalidValue(problem)) }
        return value
    }

    private static func optionalIdentifier(_ reader: JSONObjectReader, _ key: String) throws(JSONFieldError) -> String? {
        guard reader.object[key] != nil else { return nil }
        return try identifier(reader, key)
    }

    /// Why `server` is no server base URL the agent records a registration with, or nil: at most
    /// `maximumServerLength` bytes of printable ASCII without spaces, quotes or backslashes (what
    /// the keystore's JSON writes as it is); an http or https URL with a host (`Origin`'s rules) and
    /// no user name, query or fragment. devtrust sends the base URL `register --server` normalised
    /// (`ServerURL`), which is such a URL whenever it is short enough; a host that is not ASCII goes
    /// in its IDNA form (xn--).
    public static func serverURLProblem(_ server: String) -> String? {
        guard (1...maximumServerLength).contains(server.utf8.count) else {
            return "must be a server base URL of at most \(maximumServerLength) bytes (this one has \(server.utf8.count))"
        }
        guard server.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
            return "must be a server base URL in printable ASCII, without spaces, quotes or backslashes (a host in its xn-- form)"
        }
        let reference = URLReference(server)
        guard let scheme = reference.scheme.map(Origin.normalizedScheme), scheme == "https" || scheme == "http",
              let authority = reference.authority, Origin(scheme: scheme, authority: authority) != nil else {
            return "must be an https:// (or http://) server base URL with a host"
        }
        guard URLAuthority(authority).userInfo == nil else { return "must not carry a user name" }
        guard reference.query == nil, reference.fragment == nil else { return "must be a server base URL, without a query or fragment" }
        return nil
    }

    /// The characters of a registration id or flow type the agent keeps: RFC 3986's unreserved ones.
    static let identifierCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)

    /// Why `value` is no registration id (or flow type) the agent keeps, or nil: 1 to `limit` ASCII
    /// letters, digits, and `-`, `.`, `_`, `~` (RFC 3986's unreserved characters: a UUID, as WSO2
    /// sends, and the flow type `REGISTRATION` are such).
    public static func identifierProblem(_ value: String, limit: Int = maximumIDLength) -> String? {
        guard (1...limit).contains(value.utf8.count), value.utf8.allSatisfy(identifierCharacters.contains) else {
            return "must be 1 to \(limit) ASCII letters, digits, '-', '.', '_' or '~'"
        }
        return nil
    }

    /// Printable text of at most `limit` characters (no control characters: it may reach the audit and a keystore).
    private static func check(_ value: String, path: String, limit: Int) throws(JSONFieldError) {
        guard !value.isEmpty, value.utf8.count <= limit, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw JSONFieldError(path: path, kind: .invalidValue("must be 1 to \(limit) bytes of printable text"))
        }
    }

    /// `dpop-proof`'s fields, each as a proof may carry it: the method an RFC 9110 token in upper case
    /// (as servers write it), the URL one with an origin (the proof's `htu` is cut from it), the nonce
    /// as RFC 9449 section 8 allows it, `ath` a SHA-256 hash in base64url. Nothing else: the header and
    /// the claims' names are the agent's.
    private static func dpopProof(_ reader: JSONObjectReader, url: String) throws(JSONFieldError) -> AgentRequest {
        let method = try reader.string("method")
        let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        guard (1...16).contains(method.utf8.count), method.utf8.allSatisfy(tokenCharacters.contains) else {
            throw JSONFieldError(path: "method", kind: .invalidValue("must be an HTTP method in upper case, such as GET or POST"))
        }
        if let problem = dpopURLProblem(url) { throw JSONFieldError(path: "url", kind: .invalidValue(problem)) }
        let nonce = try reader.optionalString("nonce")
        if let nonce, !DPoPProofMinter.isValidNonce(nonce) {
            throw JSONFieldError(path: "nonce", kind: .invalidValue("must be 1 to \(DPoPProofMinter.maximumNonceLength) characters of printable ASCII other than space, \" and \\"))
        }
        let hash = try reader.optionalString("ath")
        if let hash {
            guard hash.utf8.count == accessTokenHashLength, let bytes = try? Base64URL.decode(hash, padding: .forbidden), bytes.count == 32 else {
                throw JSONFieldError(path: "ath", kind: .invalidValue("must be a SHA-256 hash in base64url (\(accessTokenHashLength) characters)"))
            }
        }
        return .dpopProof(method: method, url: url, nonce: nonce, accessTokenHash: hash)
    }

    /// Why `url` is no URL a DPoP proof may name, or nil: it has an http or https origin and no user
    /// name, and is printable ASCII (the proof's `htu` is made from it, as `DPoPProofMinter.targetURI` says).
    public static func dpopURLProblem(_ url: String) -> String? {
        guard url.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
            return "must be printable ASCII without spaces, quotes or backslashes"
        }
        let reference = URLReference(url)
        guard let scheme = reference.scheme.map(Origin.normalizedScheme), scheme == "https" || scheme == "http",
              let authority = reference.authority, Origin(scheme: scheme, authority: authority) != nil else {
            return "must be an https:// (or http://) URL with a host"
        }
        guard URLAuthority(authority).userInfo == nil else { return "must not carry a user name" }
        return nil
    }

    /// At most `maximumURLs` URLs of at most `maximumURLLength`, printable.
    private static func urls(_ reader: JSONObjectReader, _ key: String) throws(JSONFieldError) -> [String] {
        guard reader.object[key] != nil else { return [] }
        let list = try reader.array(key)
        guard list.count <= maximumURLs else { throw JSONFieldError(path: key, kind: .invalidValue("at most \(maximumURLs)")) }
        var urls = [String]()
        for (index, element) in list.enumerated() {
            guard let url = element.stringValue else {
                throw JSONFieldError(path: "\(key)[\(index)]", kind: .invalidType(expected: "a string", found: element.kindDescription))
            }
            try check(url, path: "\(key)[\(index)]", limit: maximumURLLength)
            urls.append(url)
        }
        return urls
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
    /// A request the agent read, with a field whose value it does not take (a server that is no
    /// URL, an id of characters it does not keep, a text too long), rather than one it cannot read.
    public let refusedValue: Bool

    public init(_ message: String, refusedValue: Bool = false) {
        self.message = message
        self.refusedValue = refusedValue
    }

    public var description: String { message }
}

extension AgentProtocolError: ClassifiedError {
    public var classification: ErrorClassification {
        guard refusedValue else {
            return ErrorClassification(.usage, summary: "the devtrust agent could not read the request: \(message)",
                                       hint: ErrorHint("is this client a devtrust of the agent's version?", joinedBy: "; "))
        }
        return ErrorClassification(.usage, summary: "the devtrust agent refused the request: \(message)",
                                   hint: ErrorHint("what it takes is in docs/usage.md, \"The system agent\"", joinedBy: "; "))
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
