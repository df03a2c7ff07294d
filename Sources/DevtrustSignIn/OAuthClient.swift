import DevtrustEncoding
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeystore

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
    /// The server failed (5xx, or 429) with a JSON error: as transient as the same status
    /// without one (an OAuthProtocolError); poll again after a back-off.
    case unavailable(String)
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

    /// The time at a server (this machine's, corrected by a measured skew): what an ID token's
    /// exp and iat are read against. This machine's clock when not given.
    public let serverTime: @Sendable (String) -> Int64

    /// Set: every token request (one with a `grant_type`: code, device code, CIBA, refresh) carries a
    /// DPoP proof of this key (RFC 9449), and the tokens come back bound to it.
    public var dpop: DPoPBinding?

    public init(http: any HTTPClient, clock: @escaping @Sendable () -> Int64, serverTime: (@Sendable (String) -> Int64)? = nil) {
        self.http = http
        self.clock = clock
        self.serverTime = serverTime ?? { _ in clock() }
    }

    /// - Parameter nonce: the authorization request's, which the ID token must carry back.
    public func exchangeCode(_ code: String, verifier: String, redirectURI: String, clientID: String,
                             server: AuthorizationServer, nonce: String? = nil) throws -> TokenSet {
        let endpoint = try require(server.token, "token endpoint")
        let parameters = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("client_id", clientID),
                          ("code_verifier", verifier)]
        return try tokens(post(endpoint, parameters), endpoint: endpoint, server: server, previous: nil, clientID: clientID, nonce: nonce,
                          secrets: RequestSecrets(parameters))
    }

    /// A refresh: the answer's refresh token replaces the old one when it rotates.
    public func refresh(_ tokens: TokenSet, clientID: String) throws -> TokenSet {
        guard let refreshToken = tokens.refreshToken else {
            throw OAuthError(error: "invalid_grant", errorDescription: "there is no refresh token", httpStatus: 0)
        }
        let server = AuthorizationServer(issuer: tokens.issuer, token: tokens.tokenEndpoint, revocation: tokens.revocationEndpoint, jwks: tokens.jwksURI)
        let parameters = [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", clientID)]
        return try self.tokens(post(tokens.tokenEndpoint, parameters), endpoint: tokens.tokenEndpoint, server: server, previous: tokens,
                               clientID: clientID, nonce: nil, secrets: RequestSecrets(parameters))
    }

    public func authorizeDevice(clientID: String, scope: String, server: AuthorizationServer) throws -> DeviceAuthorization {
        let endpoint = try require(server.deviceAuthorization, "device authorization endpoint (set endpoints.deviceAuthorization in the configuration)")
        let document = try post(endpoint, [("client_id", clientID), ("scope", scope)])
        guard let deviceCode = document["device_code"]?.stringValue, !deviceCode.isEmpty,
              let userCode = document["user_code"]?.stringValue, !userCode.isEmpty,
              let verificationURI = (document["verification_uri"] ?? document["verification_url"])?.stringValue,
              let schedule = PollingSchedule(document) else {
            throw OAuthProtocolError("the device authorization answer lacks device_code, user_code, verification_uri or expires_in")
        }
        return DeviceAuthorization(deviceCode: deviceCode, userCode: userCode, verificationURI: verificationURI,
                                   verificationURIComplete: document["verification_uri_complete"]?.stringValue,
                                   expiresIn: schedule.expiresIn, interval: schedule.interval)
    }

    public func pollDevice(_ authorization: DeviceAuthorization, clientID: String, server: AuthorizationServer) throws -> DevicePollResult {
        try pollToken([("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", authorization.deviceCode),
                       ("client_id", clientID)], clientID: clientID, server: server)
    }

    /// One poll of the token endpoint for a grant the user approves elsewhere (device code, CIBA):
    /// the answers RFC 8628 section 3.5 and CIBA Core 11 share.
    func pollToken(_ parameters: [(String, String)], clientID: String, server: AuthorizationServer) throws -> DevicePollResult {
        let endpoint = try require(server.token, "token endpoint")
        do {
            let document = try post(endpoint, parameters)
            return .tokens(try tokens(document, endpoint: endpoint, server: server, previous: nil, clientID: clientID, nonce: nil,
                                      secrets: RequestSecrets(parameters)))
        } catch let error as OAuthError {
            // A failing server is no refusal, whatever its body says (temporarily_unavailable, server_error, ...).
            if (500...599).contains(error.httpStatus) {
                return .unavailable("\(endpoint) answered HTTP \(error.httpStatus) (\(error.error)" + (error.errorDescription.map { ": \($0)" } ?? "") + ")")
            }
            switch error.error {
            case "authorization_pending": return .pending
            case "slow_down": return .slowDown
            case "access_denied": return .denied
            case "expired_token": return .expired
            default:
                if error.httpStatus == 429 { return .unavailable("\(endpoint) answered HTTP 429 (\(error.error))") }
                throw error
            }
        }
    }

    /// What became of a revocation.
    public enum Revocation: Sendable, Equatable {
        case revoked
        /// The server advertises no way to revoke.
        case notOffered
        /// It answered, and said no.
        case refused(String)
        /// It did not answer as a server should (network, TLS, a broken answer).
        case unreachable(String)
    }

    /// RFC 7009 revocation.
    public func revoke(_ token: String, hint: String, clientID: String, endpoint: String?) -> Revocation {
        guard let endpoint else { return .notOffered }
        return outcome { try post(endpoint, [("token", token), ("token_type_hint", hint), ("client_id", clientID)], ignoreBody: true) }
    }

    /// glewlwyd's non-standard `grant_type=delete_token`: how its public clients end a refresh
    /// token when RFC 7009 revocation is not open to them. Only for a sign-in whose profile says
    /// the server has it (`deleteTokenGrant`): another server would only see an odd grant.
    public func deleteRefreshToken(_ refreshToken: String, clientID: String, tokenEndpoint: String) -> Revocation {
        outcome { try post(tokenEndpoint, [("grant_type", "delete_token"), ("client_id", clientID), ("refresh_token", refreshToken)], ignoreBody: true) }
    }

    private func outcome(_ request: () throws -> JSONObject) -> Revocation {
        do {
            _ = try request()
            return .revoked
        } catch let error as OAuthError where !error.mayPass {
            return .refused(error.description)
        } catch {
            return .unreachable("\(error)")
        }
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

    /// - Parameter allowEmpty: an empty body is an empty object; `ignoreBody`: any body is (RFC 7009: the revocation answer's body is ignored).
    func post(_ url: String, _ parameters: [(String, String)], expectedStatus: Set<Int> = [200], allowEmpty: Bool = false,
              ignoreBody: Bool = false) throws -> JSONObject {
        let response = try send(url, parameters)
        let document = try? JSONParser.parse(response.body)
        if !expectedStatus.contains(response.status) {
            // Whatever the server says is shown: without the secrets this request carried.
            let secrets = RequestSecrets(parameters)
            if case let .object(object)? = document, let error = object["error"]?.stringValue {
                throw OAuthError(error: secrets.hiding(in: error), errorDescription: object["error_description"]?.stringValue.map(secrets.hiding(in:)),
                                 httpStatus: response.status, grantType: parameters.first { $0.0 == "grant_type" }?.1)
            }
            // Some servers (glewlwyd) answer a bad refresh token with an empty 400: a refusal. A 401 without
            // an OAuth body is what a proxy or gateway in front of the server answers: not the server's word.
            if response.status == 400 && response.body.isEmpty {
                throw OAuthError(error: "invalid_grant", errorDescription: "HTTP 400 with an empty body", httpStatus: 400)
            }
            if response.status == 401 {
                throw OAuthError(error: "unauthorized", errorDescription: "HTTP 401 without an OAuth error body, as a proxy or gateway answers",
                                 httpStatus: 401, bodyless: true)
            }
            // A page (a proxy's or a firewall's 400, say) is not the server's OAuth answer: it may pass.
            throw OAuthProtocolError("\(url) answered \(response.statusSummary) without an OAuth error body: "
                                     + HTTPResponse.preview(secrets.hiding(in: response.body)),
                                     mayPass: ![404, 405, 410].contains(response.status))
        }
        if ignoreBody || (allowEmpty && response.body.isEmpty) { return JSONObject() }
        guard case let .object(object)? = document else { throw OAuthProtocolError("\(url) did not answer a JSON object") }
        return object
    }

    /// The POST itself. A token request (RFC 6749 3.2: it has a `grant_type`) carries a DPoP proof when the
    /// client is bound; a server that answers `use_dpop_nonce` with a `DPoP-Nonce` gets the request once
    /// more with a new proof of that nonce (RFC 9449 section 8), taken from the answer itself: keeping it
    /// for later requests is best effort (a cache directory that cannot be written keeps nothing).
    private func send(_ url: String, _ parameters: [(String, String)]) throws -> HTTPResponse {
        let body = Array(FormEncoding.encode(parameters).utf8)
        let headers: [(name: String, value: String)] = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        guard let dpop, parameters.contains(where: { $0.0 == "grant_type" }) else {
            return try http.send(HTTPRequest(method: "POST", url: url, headers: headers, body: body))
        }
        var askedNonce: String?
        while true {
            let proof = try dpop.proof(method: "POST", url: url, nonce: askedNonce)
            let response = try http.send(HTTPRequest(method: "POST", url: url, headers: headers + [(name: "DPoP", value: proof)], body: body))
            let asksForNonce = (response.status == 400 || response.status == 401) && Self.asksForNonce(response)
            guard let nonce = response.header("DPoP-Nonce"), !nonce.isEmpty else { return response }
            guard DPoPProofMinter.isValidNonce(nonce) else {
                // Not kept, not sent; an answer that needs it cannot be met.
                guard asksForNonce else { return response }
                throw OAuthProtocolError("\(url) asks for a DPoP nonce, but its DPoP-Nonce header is not a valid nonce (RFC 9449 section 8: "
                                         + "1 to \(DPoPProofMinter.maximumNonceLength) characters of printable ASCII other than space, \" and \\); "
                                         + "tell the server's administrators")
            }
            dpop.nonces.remember(nonce, for: url)
            guard asksForNonce else { return response }
            if askedNonce != nil {
                throw OAuthProtocolError("\(url) asked for a DPoP nonce again after a proof carrying the nonce it had just given: "
                                         + "the server does not accept its own nonces; try again later, or tell the server's administrators")
            }
            askedNonce = nonce
        }
    }

    /// `use_dpop_nonce` in the JSON error body or in `WWW-Authenticate` (RFC 9449 sections 8 and 9).
    static func asksForNonce(_ response: HTTPResponse) -> Bool {
        if case let .object(object)? = try? JSONParser.parse(response.body), object["error"]?.stringValue == "use_dpop_nonce" { return true }
        return response.header("WWW-Authenticate")?.includes("use_dpop_nonce") ?? false
    }

    /// - Parameter secrets: the request's, hidden from the note on an ID token that is not kept (its claims are the server's text).
    func tokens(_ document: JSONObject, endpoint: String, server: AuthorizationServer, previous: TokenSet?, clientID: String,
                nonce: String?, secrets: RequestSecrets) throws -> TokenSet {
        guard let accessToken = document["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw OAuthProtocolError("the token answer has no access_token")
        }
        // At most ten years: a larger lifetime is a server's mistake, and must not overflow.
        let expiresIn = (document["expires_in"]?.int64Value ?? document["expires_in"]?.stringValue.flatMap { Int64($0) })
            .map { min(max($0, 0), 315_360_000) }
        var tokens = TokenSet(
            accessToken: accessToken,
            tokenType: document["token_type"]?.stringValue ?? "Bearer",
            refreshToken: document["refresh_token"]?.stringValue ?? previous?.refreshToken,
            idToken: previous?.keptIdentity != nil ? previous?.idToken : nil,
            scope: document["scope"]?.stringValue ?? previous?.scope,
            expiresAt: clock() + (expiresIn ?? TokenSet.assumedLifetime),
            tokenEndpoint: endpoint,
            revocationEndpoint: server.revocation ?? previous?.revocationEndpoint,
            expiryAssumed: expiresIn == nil)
        tokens.issuer = server.issuer ?? previous?.issuer
        tokens.jwksURI = server.jwks ?? previous?.jwksURI
        tokens.deleteTokenGrant = previous?.deleteTokenGrant ?? false
        // Bound only when the server says so: a server that ignores the proof gives a bearer token.
        if let dpop, tokens.tokenType.lowercased() == "dpop" { tokens.dpopJkt = dpop.thumbprint }
        if let idToken = document["id_token"]?.stringValue {
            // Kept only when it checks out; a refresh's new one that does not leaves the one kept before.
            do {
                let identity = try validate(idToken, issuer: tokens.issuer, jwks: tokens.jwksURI, clientID: clientID, nonce: nonce)
                // OpenID Connect Core 12.2: a refresh's ID token is for the same user.
                if let kept = previous?.keptIdentity, kept.subject != identity.subject {
                    throw IDTokenRejection("its sub \(identity.subject) is not the signed-in user's (\(kept.subject))")
                }
                tokens.idToken = idToken
            } catch {
                tokens.idTokenNote = "devtrust keeps no ID token from \(endpoint): " + secrets.hiding(in: "\(error)")
            }
        }
        return tokens
    }

    /// OpenID Connect Core 3.1.3.7 against the provider's discovery issuer and JWK set.
    func validate(_ idToken: String, issuer: String?, jwks: String?, clientID: String, nonce: String?) throws -> IDTokenIdentity {
        guard let issuer, let jwks else {
            throw IDTokenRejection("the server's discovery document gives no issuer and jwks_uri to check it against")
        }
        let response = try http.send(HTTPRequest(method: "GET", url: jwks, headers: [("Accept", "application/json")]))
        guard response.status == 200 else { throw IDTokenRejection("its JWK set \(jwks) answered HTTP \(response.status)") }
        let keys = try JSONWebKey.set(response.body)
        return try IDTokenValidator(issuer: issuer, clientID: clientID, nonce: nonce, now: serverTime(issuer), keys: keys).validate(idToken)
    }
}
