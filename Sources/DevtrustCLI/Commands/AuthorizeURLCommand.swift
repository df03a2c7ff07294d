import DevtrustDevice
import DevtrustSignIn

/// `authorize-url`: a browser sign-in URL carrying a fresh `device_token`,
/// a PKCE challenge (the verifier waits in the keystore for `login --callback`)
/// and a state; with `--par`, the request is pushed first and the URL carries
/// only its `request_uri`. For a browser on another machine than the one that
/// finishes the sign-in; `login --browser` does both on one.
enum AuthorizeURLCommand {
    static func run(_ context: CommandContext) throws {
        let settings = try SignInSettings(context, command: "authorize-url")
        let store = try context.deviceStore()
        let http = settings.http(context)
        let server = try settings.authorizationServer(http: http, context: context)
        let request = try BrowserAuthorizationRequest.make(context, settings: settings, store: store, server: server,
                                                           redirectURI: settings.redirectURI)
        var pending = PendingAuthorizations.Entry(
            verifier: request.pkce.verifier, clientID: settings.clientID, redirectURI: settings.redirectURI, scope: settings.scope,
            server: settings.serverName, discovery: settings.discovery, tokenEndpoint: request.tokenEndpoint, revocationEndpoint: server.revocation,
            createdAt: context.environment.clock.secondsSinceEpoch(), nonce: request.nonce, issuer: server.issuer, jwks: server.jwks)
        pending.deleteTokenGrant = settings.deleteTokenGrant
        try PendingAuthorizations(store.keystore).add(pending, state: request.state)
        context.output(request.url)
        let finish = "then `devtrust login --callback URL` with the address it is sent back to, within \(BrowserAuthorizationRequest.duration(PendingAuthorizations.lifetime)) of now"
        if let within = request.openWithinText {
            context.info("open the URL in a browser \(within); \(finish)")
        } else {
            context.info("open the URL in a browser; \(finish)")
        }
    }
}
