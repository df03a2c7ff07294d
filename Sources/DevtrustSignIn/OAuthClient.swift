import DevtrustEncoding
import DevtrustHTTP

/// What the device authorization endpoint answers (RFC 8628 section 3.2).
public struct DeviceAuthorization: Sendable {
    /// Secret: never printed, logged or stored.
    public let deviceCode: String
    public let userCode: String
    public let verificationURI: String
    public let verificationURIComplete: String?
    public let expiresIn: Int64
    public let interval: Int64?
}

/// What a device-code poll came back with.
public enum DevicePollResult: Sendable {
    case tokens(TokenSet)
    case pending
    case slowDown
    case denied
    case expired
}

/// What the pushed authorization request endpoint answers (RFC 9126 section 2.2).
public struct PushedAuthorizationRequest: Equatable, Sendable {
    public let requestURI: String
    /// Seconds the request_uri is good for; nil when the answer does not say.
    public let expiresIn: Int64?
}

/// Token-endpoint and related requests (form-encoded POSTs) over the HTTP layer.
public struct OAuthClient: Sendable {
    public let http: any HTTPClient
    public let clock: @Sendable () -> Int64

    public init(http: any HTTPClient, clock: @escaping @Sendable () -> Int64) {
        self.http = http
        self.clock = clock
    }

    public func exchangeCode(_ code: String, verifier: String, redirectURI: String, clientID: String,
                             server: AuthorizationServer) throws -> TokenSet {
        let endpoint = try require(server.token, "token endpoint")
        return try tokens(post(endpoint, [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                                          ("client_id", clientID), ("code_verifier", verifier)]), endpoint: endpoint, server: server, previous: nil)
    }

    /// A refresh: the answer's refresh token replaces the old one when it rotates.
    public func refresh(_ tokens: TokenSet, clientID: String) throws -> TokenSet {
        guard let refreshToken = tokens.refreshToken else {
            throw OAuthError(error: "invalid_grant", errorDescription: "there is no refresh token", httpStatus: 0)
        }
        let server = AuthorizationServer(token: tokens.tokenEndpoint, revocation: tokens.revocationEndpoint)
        return try self.tokens(post(tokens.tokenEndpoint, [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", clientID)]),
                               endpoint: tokens.tokenEndpoint, server: server, previous: tokens)
    }

    public func authorizeDevice(clientID: String, scope: String, server: AuthorizationServer) throws -> DeviceAuthorization {
        let endpoint = try require(server.deviceAuthorization, "device authorization endpoint (set endpoints.deviceAuthorization in the configuration)")
        let document = try post(endpoint, [("client_id", clientID), ("scope", scope)])
        guard let deviceCode = document["device_code"]?.stringValue, !deviceCode.isEmpty,
              let userCode = document["user_code"]?.stringValue, !userCode.isEmpty,
              let verificationURI = (document["verification_uri"] ?? document["verification_url"])?.stringValue,
              let expiresIn = document["expires_in"]?.int64Value, expiresIn > 0 else {
            throw OAuthProtocolError("the device authorization answer lacks device_code, user_code, verification_uri or expires_in")
        }
        return DeviceAuthorization(deviceCode: deviceCode, userCode: userCode, verificationURI: verificationURI,
                                   verificationURIComplete: document["verification_uri_complete"]?.stringValue,
                                   expiresIn: expiresIn, interval: document["interval"]?.int64Value.flatMap { $0 > 0 ? $0 : nil })
    }

    public func pollDevice(_ authorization: DeviceAuthorization, clientID: String, server: AuthorizationServer) throws -> DevicePollResult {
        let endpoint = try require(server.token, "token endpoint")
        do {
            let document = try post(endpoint, [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                                               ("device_code", authorization.deviceCode), ("client_id", clientID)])
            return .tokens(try tokens(document, endpoint: endpoint, server: server, previous: nil))
        } catch let error as OAuthError {
            switch error.error {
            case "authorization_pending": return .pending
            case "slow_down": return .slowDown
            case "access_denied": return .denied
            case "expired_token": return .expired
            default: throw error
            }
        }
    }

    /// RFC 7009 revocation; false when the server has no endpoint or refuses it.
    public func revoke(_ token: String, hint: String, clientID: String, endpoint: String?) -> Bool {
        guard let endpoint else { return false }
        return (try? post(endpoint, [("token", token), ("token_type_hint", hint), ("client_id", clientID)], allowEmpty: true)) != nil
    }

    /// glewlwyd's non-standard `grant_type=delete_token`: how its public clients
    /// end a refresh token when RFC 7009 revocation is not open to them.
    public func deleteRefreshToken(_ refreshToken: String, clientID: String, tokenEndpoint: String) -> Bool {
        (try? post(tokenEndpoint, [("grant_type", "delete_token"), ("client_id", clientID), ("refresh_token", refreshToken)], allowEmpty: true)) != nil
    }

    /// RFC 9126 pushed authorization request: the request_uri to put in the URL, and
    /// how long it is good for (`expires_in`, when the server says).
    public func pushAuthorizationRequest(_ parameters: [(String, String)], endpoint: String) throws -> PushedAuthorizationRequest {
        let document = try post(endpoint, parameters, expectedStatus: [200, 201])
        guard let requestURI = document["request_uri"]?.stringValue, !requestURI.isEmpty else {
            throw OAuthProtocolError("the pushed authorization answer has no request_uri")
        }
        let expiresIn = document["expires_in"]?.int64Value ?? document["expires_in"]?.stringValue.flatMap { Int64($0) }
        return PushedAuthorizationRequest(requestURI: requestURI, expiresIn: expiresIn.flatMap { $0 > 0 ? $0 : nil })
    }

    func require(_ endpoint: String?, _ what: String) throws -> String {
        guard let endpoint else { throw SignInUnsupportedError("the server advertises no \(what)") }
        return endpoint
    }

    func post(_ url: String, _ parameters: [(String, String)], expectedStatus: Set<Int> = [200], allowEmpty: Bool = false) throws -> JSONObject {
        let response = try http.send(HTTPRequest(method: "POST", url: url, headers: [
            ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
        ], body: Array(FormEncoding.encode(parameters).utf8)))
        let document = try? JSONParser.parse(response.body)
        if !expectedStatus.contains(response.status) {
            if case let .object(object)? = document, let error = object["error"]?.stringValue {
                throw OAuthError(error: error, errorDescription: object["error_description"]?.stringValue, httpStatus: response.status)
            }
            // Some servers (glewlwyd) answer a bad refresh token with an empty 400.
            if response.status == 400 || response.status == 401 {
                throw OAuthError(error: "invalid_grant", errorDescription: "HTTP \(response.status) without an error body", httpStatus: response.status,
                                 bodyless: true)
            }
            throw OAuthProtocolError("\(url) answered HTTP \(response.status)")
        }
        if allowEmpty && response.body.isEmpty { return JSONObject() }
        guard case let .object(object)? = document else { throw OAuthProtocolError("\(url) did not answer a JSON object") }
        return object
    }

    func tokens(_ document: JSONObject, endpoint: String, server: AuthorizationServer, previous: TokenSet?) throws -> TokenSet {
        guard let accessToken = document["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw OAuthProtocolError("the token answer has no access_token")
        }
        let expiresIn = document["expires_in"]?.int64Value ?? document["expires_in"]?.stringValue.flatMap { Int64($0) }
        return TokenSet(
            accessToken: accessToken,
            tokenType: document["token_type"]?.stringValue ?? "Bearer",
            refreshToken: document["refresh_token"]?.stringValue ?? previous?.refreshToken,
            idToken: document["id_token"]?.stringValue ?? previous?.idToken,
            scope: document["scope"]?.stringValue ?? previous?.scope,
            expiresAt: clock() + (expiresIn ?? TokenSet.assumedLifetime),
            tokenEndpoint: endpoint,
            revocationEndpoint: server.revocation ?? previous?.revocationEndpoint,
            expiryAssumed: expiresIn == nil)
    }
}
