import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustSignIn
import DevtrustSignInService

/// `authorize-url`: a browser sign-in URL carrying a fresh `device_token`,
/// a PKCE challenge (the verifier waits in the keystore for `login --callback`)
/// and a state; with `--par`, the request is pushed first and the URL carries
/// only its `request_uri`. For a browser on another machine than the one that
/// finishes the sign-in; `login --browser` does both on one.
enum AuthorizeURLCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let server = ValueOption<Self>("server", "URL", .url, "a WSO2-style base URL")
        static let discovery = ValueOption<Self>("discovery", "URL", .url, "an OpenID provider's discovery document")
        static let clientID = ValueOption<Self>("client-id", "ID", .text, "the OAuth client id")
        static let redirectURI = ValueOption<Self>("redirect-uri", "URI", .url, "the client's redirect URI")
        static let scope = ValueOption<Self>("scope", "SCOPES", .text, "space-separated scopes (default openid)")
        static let par = FlagOption<Self>("par", "push the request first (RFC 9126)")
        static let profile = ValueOption<Self>("profile", "NAME", .profile, "a sign-in profile of the configuration")
        static let spec = CommandSpec(name: "authorize-url", summary: "print a browser sign-in URL with a device token and PKCE",
                                      options: [server, discovery, clientID, redirectURI, scope, par, profile],
                                      required: [.oneOf([server], [discovery], [profile])])

        var signIn: SignInSettings.Options

        init(_ values: OptionValues<Self>) {
            signIn = SignInSettings.Options(server: values[Self.server], discovery: values[Self.discovery], clientID: values[Self.clientID],
                                            redirectURI: values[Self.redirectURI], scope: values[Self.scope], par: values[Self.par],
                                            profile: values[Self.profile])
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let settings = try SignInSettings(options.signIn, context, command: "authorize-url")
        // `login --callback` exchanges the code without a proof (the pending sign-in keeps no key binding):
        // a profile that asks for DPoP must not quietly get bearer tokens.
        if settings.dpop {
            throw UsageError("sign-in profile \"\(options.signIn.profile ?? "")\" asks for DPoP-bound tokens (\"dpop\": true), which an authorize-url sign-in "
                             + "(finished with login --callback) cannot give; sign in with login --browser, --device-code, --ciba or app-native login "
                             + "(no method option), or set \"dpop\": false in the profile for bearer tokens", command: "authorize-url")
        }
        let store = try context.deviceStore()
        let http = settings.http.client(context)
        let server = try settings.authorizationServer(http: http, context: context)
        if server.advertisesDPoP && !settings.noDPoP {
            context.warn("the server offers DPoP-bound tokens, but an authorize-url sign-in gets bearer tokens (login --callback sends no DPoP proof); "
                         + "for tokens bound to the device key, sign in with login --browser, --device-code, --ciba or app-native login")
        }
        let request = try BrowserAuthorizationRequest.make(
            target: settings.target, server: server, redirectURI: settings.redirectURI, random: context.environment.random,
            deviceToken: { try settings.deviceToken(context, store: store, provider: server, destinations: $0) },
            pushingClient: { settings.http.oauthClient(context) }, warn: { context.warn($0) })
        var pending = PendingAuthorizations.Entry(
            verifier: request.pkce.verifier, clientID: settings.clientID, redirectURI: settings.redirectURI, scope: settings.scope,
            server: settings.serverName, discovery: settings.discovery, tokenEndpoint: request.tokenEndpoint, revocationEndpoint: server.revocation,
            createdAt: context.environment.clock.secondsSinceEpoch(), nonce: request.nonce, issuer: server.issuer, jwks: server.jwks)
        pending.deleteTokenGrant = settings.deleteTokenGrant
        try PendingAuthorizations(store.keystore).add(pending, state: request.state)
        context.output(context.json ? JSONWriter.string(.object(["url": .string(request.url)])) : request.url)
        let finish = "then `devtrust login --callback URL` with the address it is sent back to, within \(BrowserAuthorizationRequest.duration(PendingAuthorizations.lifetime)) of now"
        if let within = request.openWithinText {
            context.info("open the URL in a browser \(within); \(finish)")
        } else {
            context.info("open the URL in a browser; \(finish)")
        }
    }
}
