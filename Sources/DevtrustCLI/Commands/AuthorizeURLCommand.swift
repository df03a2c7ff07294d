import DevtrustDevice
import DevtrustSignIn

/// `authorize-url`: a browser sign-in URL carrying a fresh `device_token`,
/// a PKCE challenge (the verifier waits in the keystore for `login --callback`)
/// and a state; with `--par`, the request is pushed first and the URL carries
/// only its `request_uri`.
enum AuthorizeURLCommand {
    static func run(_ context: CommandContext) throws {
        let settings = try SignInSettings(context, command: "authorize-url")
        let store = try context.deviceStore()
        let http = settings.http(context)
        let server = try settings.authorizationServer(http: http, context: context)
        guard let authorization = server.authorization, let tokenEndpoint = server.token else {
            throw SignInUnsupportedError("the server advertises no authorization or token endpoint")
        }
        let random = context.environment.random
        let pkce = try PKCE.make(using: random)
        let state = try PKCE.state(using: random)
        let nonce = try PKCE.state(using: random)
        var parameters: [(String, String)] = [
            ("client_id", settings.clientID), ("response_type", "code"), ("redirect_uri", settings.redirectURI),
            ("scope", settings.scope), ("state", state), ("nonce", nonce), ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method),
        ]
        if let acr = settings.acrValues { parameters.append(("acr_values", acr)) }
        // With --discovery, the registration is found by the provider's URLs, not the document's.
        // The token goes in the URL to the authorization endpoint, or in the pushed request to the PAR endpoint.
        let destinations = [authorization] + (settings.par ? [server.pushedAuthorizationRequest].compactMap { $0 } : [])
        if let token = try LoginCommand.deviceToken(context, store: store, server: settings.serverName, provider: server,
                                                    destinations: destinations, settings: settings) {
            parameters.append(("device_token", token))
        }
        var url = authorization + (authorization.contains("?") ? "&" : "?")
        if settings.par {
            if let endpoint = server.pushedAuthorizationRequest {
                let requestURI = try settings.oauth(context).pushAuthorizationRequest(parameters, endpoint: endpoint)
                url += FormEncoding.encode([("client_id", settings.clientID), ("request_uri", requestURI)])
            } else {
                context.warn("the server advertises no pushed_authorization_request_endpoint; the URL carries the request itself")
                url += FormEncoding.encode(parameters)
            }
        } else {
            url += FormEncoding.encode(parameters)
        }
        var pending = PendingAuthorizations.Entry(
            verifier: pkce.verifier, clientID: settings.clientID, redirectURI: settings.redirectURI, scope: settings.scope,
            server: settings.serverName, discovery: settings.discovery, tokenEndpoint: tokenEndpoint, revocationEndpoint: server.revocation,
            createdAt: context.environment.clock.secondsSinceEpoch(), nonce: nonce, issuer: server.issuer, jwks: server.jwks)
        pending.deleteTokenGrant = settings.deleteTokenGrant
        try PendingAuthorizations(store.keystore).add(pending, state: state)
        context.output(url)
        context.info("open the URL in a browser; then `devtrust login --callback URL` with the address it is sent back to (within 10 minutes)")
    }
}
