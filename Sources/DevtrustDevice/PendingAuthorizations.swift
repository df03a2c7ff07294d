import DevtrustEncoding
import DevtrustKeystore

/// Browser sign-ins begun with `authorize-url`, waiting for their code: the
/// PKCE verifier (secret) stays in the keystore, keyed by `state`, for ten minutes.
public struct PendingAuthorizations {
    public static let fileName = "pending-authorizations.json"
    public static let lifetime: Int64 = 600

    public struct Entry: Equatable, Sendable {
        public var verifier: String
        public var clientID: String
        public var redirectURI: String
        public var scope: String
        public var server: String?
        public var discovery: String?
        public var tokenEndpoint: String
        public var revocationEndpoint: String?
        public var createdAt: Int64
        /// The request's nonce, and where its ID token is checked (issuer, JWK set).
        public var nonce: String?
        public var issuer: String?
        public var jwks: String?
        /// The profile says the server ends refresh tokens with glewlwyd's delete_token grant.
        public var deleteTokenGrant = false

        public init(verifier: String, clientID: String, redirectURI: String, scope: String, server: String?, discovery: String?,
                    tokenEndpoint: String, revocationEndpoint: String?, createdAt: Int64, nonce: String? = nil, issuer: String? = nil, jwks: String? = nil) {
            self.verifier = verifier
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.scope = scope
            self.server = server
            self.discovery = discovery
            self.tokenEndpoint = tokenEndpoint
            self.revocationEndpoint = revocationEndpoint
            self.createdAt = createdAt
            self.nonce = nonce
            self.issuer = issuer
            self.jwks = jwks
        }
    }

    let keystore: Keystore

    public init(_ keystore: Keystore) { self.keystore = keystore }

    public func add(_ entry: Entry, state: String) throws {
        try keystore.update { _, _ in
            var entries = load(now: entry.createdAt)
            entries[state] = entry
            keystore.writeAuxiliary(Self.fileName, encode(entries))
        }
    }

    /// The entry for `state`, removed so that a code is exchanged once.
    public func take(state: String, now: Int64) -> Entry? {
        try? keystore.update { _, _ in
            var entries = load(now: now)
            let entry = entries.removeValue(forKey: state)
            keystore.writeAuxiliary(Self.fileName, encode(entries))
            return entry
        }
    }

    func load(now: Int64) -> [String: Entry] {
        guard let bytes = keystore.readAuxiliary(Self.fileName), case let .object(document)? = try? JSONParser.parse(bytes) else { return [:] }
        var entries = [String: Entry]()
        for member in document.members {
            guard let object = member.value.objectValue, let verifier = object["verifier"]?.stringValue,
                  let clientID = object["clientId"]?.stringValue, let redirectURI = object["redirectUri"]?.stringValue,
                  let tokenEndpoint = object["tokenEndpoint"]?.stringValue, let createdAt = object["createdAt"]?.int64Value,
                  now - createdAt < Self.lifetime else { continue }
            entries[member.key] = Entry(verifier: verifier, clientID: clientID, redirectURI: redirectURI, scope: object["scope"]?.stringValue ?? "openid",
                                        server: object["server"]?.stringValue, discovery: object["discovery"]?.stringValue,
                                        tokenEndpoint: tokenEndpoint, revocationEndpoint: object["revocationEndpoint"]?.stringValue, createdAt: createdAt,
                                        nonce: object["nonce"]?.stringValue, issuer: object["issuer"]?.stringValue, jwks: object["jwks"]?.stringValue)
            entries[member.key]?.deleteTokenGrant = object["deleteTokenGrant"]?.boolValue ?? false
        }
        return entries
    }

    func encode(_ entries: [String: Entry]) -> [UInt8] {
        var document = JSONObject()
        for state in entries.keys.sorted() {
            let entry = entries[state]!
            var object: JSONObject = ["verifier": .string(entry.verifier), "clientId": .string(entry.clientID),
                                      "redirectUri": .string(entry.redirectURI), "scope": .string(entry.scope),
                                      "tokenEndpoint": .string(entry.tokenEndpoint), "createdAt": .integer(entry.createdAt)]
            if let server = entry.server { object["server"] = .string(server) }
            if let discovery = entry.discovery { object["discovery"] = .string(discovery) }
            if let revocation = entry.revocationEndpoint { object["revocationEndpoint"] = .string(revocation) }
            if let nonce = entry.nonce { object["nonce"] = .string(nonce) }
            if let issuer = entry.issuer { object["issuer"] = .string(issuer) }
            if let jwks = entry.jwks { object["jwks"] = .string(jwks) }
            if entry.deleteTokenGrant { object["deleteTokenGrant"] = .bool(true) }
            document[state] = .object(object)
        }
        return JSONWriter.bytes(.object(document))
    }
}
