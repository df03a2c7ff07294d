import DevtrustEncoding

/// The tokens of a sign-in, as its token file (`signin-<id>.json`) holds them.
/// Secret: stored only in the keystore (0600) and printed only by `devtrust access-token`.
public struct TokenSet: Equatable, Sendable {
    public var accessToken: String
    public var tokenType: String
    public var refreshToken: String?
    public var idToken: String?
    public var scope: String?
    /// Seconds since the epoch. When the server gave no lifetime (no `expires_in`),
    /// `assumedLifetime` after the tokens came, and `expiryAssumed` says so;
    /// nil in token files of earlier devtrust versions that had none.
    public var expiresAt: Int64?
    public var expiryAssumed: Bool

    /// How long an access token without `expires_in` is used before it is refreshed.
    public static let assumedLifetime: Int64 = 600
    /// Where to refresh and revoke, kept so that later commands need no discovery.
    public var tokenEndpoint: String
    public var revocationEndpoint: String?
    /// The issuer and JWK set that checked the ID token (and check the ones refreshes bring).
    public var issuer: String?
    public var jwksURI: String?
    /// The sign-in's profile says the server ends refresh tokens with glewlwyd's `delete_token` grant.
    public var deleteTokenGrant = false
    /// The RFC 7638 thumbprint of the key the tokens are bound to (RFC 9449 DPoP: the server's
    /// `token_type` was DPoP); nil for bearer tokens. Refreshes and resource requests need proofs of that key.
    public var dpopJkt: String?
    /// Why the server's ID token was not kept (not stored: said once, at sign-in).
    public var idTokenNote: String?

    public init(accessToken: String, tokenType: String, refreshToken: String?, idToken: String?, scope: String?, expiresAt: Int64?,
                tokenEndpoint: String, revocationEndpoint: String?, expiryAssumed: Bool = false) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.scope = scope
        self.expiresAt = expiresAt
        self.expiryAssumed = expiryAssumed
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
    }

    public var bytes: [UInt8] {
        var object: JSONObject = ["accessToken": .string(accessToken), "tokenType": .string(tokenType)]
        if let refreshToken { object["refreshToken"] = .string(refreshToken) }
        if let idToken { object["idToken"] = .string(idToken) }
        if let scope { object["scope"] = .string(scope) }
        if let expiresAt { object["expiresAt"] = .integer(expiresAt) }
        if expiryAssumed { object["expiresAtAssumed"] = .bool(true) }
        object["tokenEndpoint"] = .string(tokenEndpoint)
        if let revocationEndpoint { object["revocationEndpoint"] = .string(revocationEndpoint) }
        if let issuer { object["issuer"] = .string(issuer) }
        if let jwksURI { object["jwksUri"] = .string(jwksURI) }
        if deleteTokenGrant { object["deleteTokenGrant"] = .bool(true) }
        if let dpopJkt { object["dpopJkt"] = .string(dpopJkt) }
        return JSONWriter.bytes(.object(object))
    }

    public init?(bytes: [UInt8]) {
        guard case let .object(object)? = try? JSONParser.parse(bytes),
              let accessToken = object["accessToken"]?.stringValue, let tokenType = object["tokenType"]?.stringValue,
              let tokenEndpoint = object["tokenEndpoint"]?.stringValue else { return nil }
        self.init(accessToken: accessToken, tokenType: tokenType, refreshToken: object["refreshToken"]?.stringValue,
                  idToken: object["idToken"]?.stringValue, scope: object["scope"]?.stringValue, expiresAt: object["expiresAt"]?.int64Value,
                  tokenEndpoint: tokenEndpoint, revocationEndpoint: object["revocationEndpoint"]?.stringValue,
                  expiryAssumed: object["expiresAtAssumed"]?.boolValue ?? false)
        issuer = object["issuer"]?.stringValue
        jwksURI = object["jwksUri"]?.stringValue
        deleteTokenGrant = object["deleteTokenGrant"]?.boolValue ?? false
        dpopJkt = object["dpopJkt"]?.stringValue
    }

    /// Whether the access token is DPoP-bound: sent as `Authorization: DPoP`, with a proof of the key.
    public var isDPoPBound: Bool { dpopJkt != nil }

    /// Whether to refresh before use: when the access token has less than `margin` seconds
    /// left, by the server's word or by the assumed lifetime, or has no known expiry at all.
    /// Without a refresh token, an access token of unknown lifetime is used as it is
    /// (there is nothing else to use; the resource's 401 will tell).
    public func needsRefresh(at now: Int64, margin: Int64) -> Bool {
        guard let expiresAt else { return refreshToken != nil }
        if expiryAssumed && refreshToken == nil { return false }
        return expiresAt - now <= margin
    }
}
