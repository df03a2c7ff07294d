import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustSignIn

/// A browser sign-in's authorization URL (for `authorize-url` and `login --browser`):
/// a fresh `device_token` when this device is registered there, PKCE (S256) and a
/// random state; with `--par`, the request pushed first (RFC 9126) and the URL
/// carrying only `client_id` and `request_uri`.
package struct BrowserAuthorizationRequest {
    package let url: String
    /// Secret until the code exchange.
    package let pkce: PKCE
    package let state: String
    /// Sent with the request; the ID token must carry it back.
    package let nonce: String
    package let redirectURI: String
    package let tokenEndpoint: String
    package let carriesDeviceToken: Bool
    /// The pushed request's `expires_in`, when it was pushed and the server said.
    package let pushedExpiresIn: Int64?
    package let pushed: Bool

    /// - Parameters:
    ///   - deviceToken: the device token for a request whose token goes to these URLs (the
    ///     authorization endpoint, and the PAR endpoint with `--par`), or nil: none (said by the caller).
    ///   - pushingClient: the OAuth client that pushes the request, asked for only when it is pushed.
    ///   - warn: what the sign-in goes on without (no PAR endpoint advertised).
    package static func make(target: SignInTarget, server: AuthorizationServer, redirectURI: String, random: any RandomSource,
                             deviceToken: (_ destinations: [String]) throws -> String?, pushingClient: () -> OAuthClient,
                             warn: (String) -> Void) throws -> BrowserAuthorizationRequest {
        guard let authorization = server.authorization, let tokenEndpoint = server.token else {
            throw SignInUnsupportedError("the server advertises no authorization or token endpoint")
        }
        let pkce = try PKCE.make(using: random)
        let state = try PKCE.state(using: random)
        let nonce = try PKCE.state(using: random)
        var parameters: [(String, String)] = [
            ("client_id", target.clientID), ("response_type", "code"), ("redirect_uri", redirectURI),
            ("scope", target.scope), ("state", state), ("nonce", nonce), ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method),
        ]
        if let acr = target.acrValues { parameters.append(("acr_values", acr)) }
        // With --discovery, the registration is found by the provider's URLs, not the document's. The token
        // goes in the URL to the authorization endpoint, or in the pushed request to the PAR endpoint.
        let destinations = [authorization] + (target.par ? [server.pushedAuthorizationRequest].compactMap { $0 } : [])
        let deviceToken = try deviceToken(destinations)
        if let deviceToken { parameters.append(("device_token", deviceToken)) }
        var url = authorization + (authorization.contains("?") ? "&" : "?")
        var pushedExpiresIn: Int64?
        var pushed = false
        if target.par, let endpoint = server.pushedAuthorizationRequest {
            let request = try pushingClient().pushAuthorizationRequest(parameters, endpoint: endpoint)
            url += FormEncoding.encode([("client_id", target.clientID), ("request_uri", request.requestURI)])
            pushedExpiresIn = request.expiresIn
            pushed = true
        } else {
            if target.par {
                warn("the server advertises no pushed_authorization_request_endpoint; the URL carries the request itself")
            }
            url += FormEncoding.encode(parameters)
        }
        return BrowserAuthorizationRequest(url: url, pkce: pkce, state: state, nonce: nonce, redirectURI: redirectURI, tokenEndpoint: tokenEndpoint,
                                           carriesDeviceToken: deviceToken != nil, pushedExpiresIn: pushedExpiresIn, pushed: pushed)
    }

    /// How long the URL is good for: the device token's life (the server drops an older
    /// token without failing the sign-in), and a pushed request's `expires_in`; nil when
    /// neither limits it.
    package var openWithinSeconds: Int64? {
        let limits = [carriesDeviceToken ? DeviceTokenMinter.acceptedForSeconds : nil, pushedExpiresIn].compactMap { $0 }
        return limits.min()
    }

    /// "within 5 minutes (the device token in it is good for 5 minutes)", or nil.
    package var openWithinText: String? {
        guard let seconds = openWithinSeconds else { return nil }
        let why = pushedExpiresIn == seconds ? "the pushed request expires then" : "the device token in it is good for that long"
        return "within \(Self.duration(seconds)) (\(why))"
    }

    /// "5 minutes", "90 s".
    package static func duration(_ seconds: Int64) -> String {
        seconds % 60 == 0 && seconds >= 60 ? "\(seconds / 60) minute\(seconds == 60 ? "" : "s")" : "\(seconds) s"
    }
}
