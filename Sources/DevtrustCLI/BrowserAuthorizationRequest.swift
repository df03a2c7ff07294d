import DevtrustDevice
import DevtrustEncoding
import DevtrustJOSE
import DevtrustSignIn

/// A browser sign-in's authorization URL (for `authorize-url` and `login --browser`):
/// a fresh `device_token` when this device is registered there, PKCE (S256) and a
/// random state; with `--par`, the request pushed first (RFC 9126) and the URL
/// carrying only `client_id` and `request_uri`.
struct BrowserAuthorizationRequest {
    let url: String
    /// Secret until the code exchange.
    let pkce: PKCE
    let state: String
    /// Sent with the request; the ID token must carry it back.
    let nonce: String
    let redirectURI: String
    let tokenEndpoint: String
    let carriesDeviceToken: Bool
    /// The pushed request's `expires_in`, when it was pushed and the server said.
    let pushedExpiresIn: Int64?
    let pushed: Bool

    static func make(_ context: CommandContext, settings: SignInSettings, store: DeviceStore, server: AuthorizationServer,
                     redirectURI: String) throws -> BrowserAuthorizationRequest {
        guard let authorization = server.authorization, let tokenEndpoint = server.token else {
            throw SignInUnsupportedError("the server advertises no authorization or token endpoint")
        }
        let random = context.environment.random
        let pkce = try PKCE.make(using: random)
        let state = try PKCE.state(using: random)
        let nonce = try PKCE.state(using: random)
        var parameters: [(String, String)] = [
            ("client_id", settings.clientID), ("response_type", "code"), ("redirect_uri", redirectURI),
            ("scope", settings.scope), ("state", state), ("nonce", nonce), ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method),
        ]
        if let acr = settings.acrValues { parameters.append(("acr_values", acr)) }
        // With --discovery, the registration is found by the provider's URLs, not the document's. The token
        // goes in the URL to the authorization endpoint, or in the pushed request to the PAR endpoint.
        let destinations = [authorization] + (settings.par ? [server.pushedAuthorizationRequest].compactMap { $0 } : [])
        let deviceToken = try LoginCommand.deviceToken(context, store: store, server: settings.serverName, provider: server,
                                                       destinations: destinations, settings: settings)
        if let deviceToken { parameters.append(("device_token", deviceToken)) }
        var url = authorization + (authorization.contains("?") ? "&" : "?")
        var pushedExpiresIn: Int64?
        var pushed = false
        if settings.par, let endpoint = server.pushedAuthorizationRequest {
            let request = try settings.http.oauthClient(context).pushAuthorizationRequest(parameters, endpoint: endpoint)
            url += FormEncoding.encode([("client_id", settings.clientID), ("request_uri", request.requestURI)])
            pushedExpiresIn = request.expiresIn
            pushed = true
        } else {
            if settings.par {
                context.warn("the server advertises no pushed_authorization_request_endpoint; the URL carries the request itself")
            }
            url += FormEncoding.encode(parameters)
        }
        return BrowserAuthorizationRequest(url: url, pkce: pkce, state: state, nonce: nonce, redirectURI: redirectURI, tokenEndpoint: tokenEndpoint,
                                           carriesDeviceToken: deviceToken != nil, pushedExpiresIn: pushedExpiresIn, pushed: pushed)
    }

    /// How long the URL is good for: the device token's life (the server drops an older
    /// token without failing the sign-in), and a pushed request's `expires_in`; nil when
    /// neither limits it.
    var openWithinSeconds: Int64? {
        let limits = [carriesDeviceToken ? DeviceTokenMinter.acceptedForSeconds : nil, pushedExpiresIn].compactMap { $0 }
        return limits.min()
    }

    /// "within 5 minutes (the device token in it is good for 5 minutes)", or nil.
    var openWithinText: String? {
        guard let seconds = openWithinSeconds else { return nil }
        let why = pushedExpiresIn == seconds ? "the pushed request expires then" : "the device token in it is good for that long"
        return "within \(Self.duration(seconds)) (\(why))"
    }

    /// "5 minutes", "90 s".
    static func duration(_ seconds: Int64) -> String {
        seconds % 60 == 0 && seconds >= 60 ? "\(seconds / 60) minute\(seconds == 60 ? "" : "s")" : "\(seconds) s"
    }
}
