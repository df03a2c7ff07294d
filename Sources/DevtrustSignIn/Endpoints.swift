import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeystore

/// The endpoints of an authorization server: from discovery, WSO2's
/// conventions, or the configuration.
public struct AuthorizationServer: Equatable, Sendable {
    public var issuer: String?
    public var authorization: String?
    public var token: String?
    public var deviceAuthorization: String?
    public var revocation: String?
    public var pushedAuthorizationRequest: String?
    /// The JWK set that signs ID tokens (`jwks_uri`).
    public var jwks: String?
    /// OpenID CIBA Core's `backchannel_authentication_endpoint`.
    public var backchannelAuthentication: String?
    /// `dpop_signing_alg_values_supported` (RFC 9449 section 5.1): the server takes DPoP proofs with these.
    public var dpopSigningAlgorithms: [String] = []

    /// Whether the server advertises DPoP with ES256, the device key's algorithm.
    public var advertisesDPoP: Bool { dpopSigningAlgorithms.contains("ES256") }

    public init(issuer: String? = nil, authorization: String? = nil, token: String? = nil, deviceAuthorization: String? = nil,
                revocation: String? = nil, pushedAuthorizationRequest: String? = nil, jwks: String? = nil,
                backchannelAuthentication: String? = nil) {
        self.issuer = issuer
        self.authorization = authorization
        self.token = token
        self.deviceAuthorization = deviceAuthorization
        self.revocation = revocation
        self.pushedAuthorizationRequest = pushedAuthorizationRequest
        self.jwks = jwks
        self.backchannelAuthentication = backchannelAuthentication
    }

    /// WSO2 Identity Server's fixed paths below a base URL.
    public static func wso2(_ server: ServerURL) -> AuthorizationServer {
        AuthorizationServer(
            authorization: server.appending("/oauth2/authorize"), token: server.appending("/oauth2/token"),
            deviceAuthorization: server.appending("/oauth2/device_authorize"), revocation: server.appending("/oauth2/revoke"),
            pushedAuthorizationRequest: server.appending("/oauth2/par"))
    }

    /// WSO2 publishes its discovery document below the token endpoint.
    public static func wso2DiscoveryURL(_ server: ServerURL) -> String {
        server.appending("/oauth2/token/.well-known/openid-configuration")
    }

    /// Values from `other` where this has none.
    public func filling(from other: AuthorizationServer) -> AuthorizationServer {
        AuthorizationServer(
            issuer: issuer ?? other.issuer, authorization: authorization ?? other.authorization, token: token ?? other.token,
            deviceAuthorization: deviceAuthorization ?? other.deviceAuthorization, revocation: revocation ?? other.revocation,
            pushedAuthorizationRequest: pushedAuthorizationRequest ?? other.pushedAuthorizationRequest, jwks: jwks ?? other.jwks,
            backchannelAuthentication: backchannelAuthentication ?? other.backchannelAuthentication)
        .withDPoPSigningAlgorithms(dpopSigningAlgorithms.isEmpty ? other.dpopSigningAlgorithms : dpopSigningAlgorithms)
    }

    public func withDPoPSigningAlgorithms(_ algorithms: [String]) -> AuthorizationServer {
        var server = self
        server.dpopSigningAlgorithms = algorithms
        return server
    }

    /// Fetches and reads an OpenID Provider configuration document.
    public static func discover(_ url: String, http: any HTTPClient) throws -> AuthorizationServer {
        _ = try ServerURL(url.split(separator: "?").first.map(String.init) ?? url)
        let response = try http.send(HTTPRequest(method: "GET", url: url, headers: [("Accept", "application/json")]))
        guard response.status == 200 else {
            throw OAuthProtocolError("the discovery document \(url) answered HTTP \(response.status)")
        }
        guard case let .object(document)? = try? JSONParser.parse(response.body) else {
            throw OAuthProtocolError("the discovery document \(url) is not a JSON object")
        }
        func endpoint(_ name: String) throws -> String? {
            guard let value = document[name], value != .null else { return nil }
            guard case let .string(text) = value, (try? ServerURL(String(text.split(separator: "?").first ?? ""))) != nil else {
                throw OAuthProtocolError("\(name) in \(url) is not a usable URL")
            }
            return text
        }
        // OpenID Connect Discovery 4.3 (RFC 8414 3.3): the document is the issuer's own, at the URL its issuer gives.
        // An issuer may end in "/" (Discovery 4.1 drops it before adding the well-known name).
        guard let issuer = document["issuer"]?.stringValue, let derived = DiscoveryURL.issuer(of: url), issuer == derived || issuer == derived + "/" else {
            throw OAuthProtocolError("the discovery document \(url) names the issuer \(document["issuer"]?.stringValue ?? "(none)"), but an issuer's document is at {issuer}/.well-known/openid-configuration (OpenID Connect Discovery 4.3; or RFC 8414's {origin}/.well-known/openid-configuration{path}): check the URL")
        }
        var server = AuthorizationServer(
            issuer: issuer, authorization: try endpoint("authorization_endpoint"),
            token: try endpoint("token_endpoint"), deviceAuthorization: try endpoint("device_authorization_endpoint"),
            revocation: try endpoint("revocation_endpoint"), pushedAuthorizationRequest: try endpoint("pushed_authorization_request_endpoint"),
            jwks: try endpoint("jwks_uri"),
            // Checked when a CIBA sign-in uses it (initiateCIBA): an unusable one must not break the other sign-ins.
            backchannelAuthentication: document["backchannel_authentication_endpoint"]?.stringValue)
        server.dpopSigningAlgorithms = document["dpop_signing_alg_values_supported"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return server
    }
}
