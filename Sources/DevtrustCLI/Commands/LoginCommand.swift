import DevtrustDevice
import DevtrustEncoding
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeystore
import DevtrustSignIn

/// `login`: app-native sign-in (default), `--browser` (a loopback redirect),
/// `--device-code` (RFC 8628), or `--callback URL` to finish an `authorize-url`
/// sign-in; stores the tokens.
enum LoginCommand {
    static func run(_ context: CommandContext) throws {
        let arguments = context.arguments
        let ways = ["browser", "device-code"].filter(arguments.has) + (arguments.value("callback") != nil ? ["callback"] : [])
        if ways.count > 1 {
            throw UsageError("give one of --browser, --device-code and --callback, not " + ways.map { "--" + $0 }.joined(separator: " and "), command: "login")
        }
        if !arguments.has("browser"), let browserOnly = ["no-browser", "timeout", "par"].first(where: { arguments.has($0) || arguments.value($0) != nil }) {
            throw UsageError("--\(browserOnly) goes with --browser", command: "login")
        }
        if let callback = arguments.value("callback") {
            return try finishBrowserSignIn(context, callback: callback)
        }
        let settings = try SignInSettings(context, command: "login")
        if arguments.has("browser") {
            return try BrowserLoginCommand.run(context, settings)
        }
        if arguments.has("device-code") {
            return try DeviceCodeCommand.run(context, settings)
        }
        guard let server = settings.server else {
            throw UsageError("app-native sign-in needs --server URL (a WSO2-style base); --discovery goes with --device-code", command: "login")
        }
        // Bad inputs are said before anything goes over the network.
        let presets = try ScriptedInputs.read(context, command: "login")
        let store = try context.deviceStore()
        let http = settings.http(context)
        let tokenServer = try settings.authorizationServer(http: http, context: context)
        let random = context.environment.random
        let interaction = TerminalSignInInteraction(context: context, presets: presets, authenticator: context.arguments.value("authenticator"),
                                                    interactive: !context.arguments.has("non-interactive") && context.terminal.inputIsTerminal)
        let signIn = AppNativeSignIn(
            server: server, http: http, oauth: settings.oauth(context), clientID: settings.clientID, redirectURI: settings.redirectURI,
            scope: settings.scope, state: try PKCE.state(using: random), nonce: try PKCE.state(using: random), pkce: try PKCE.make(using: random),
            deviceToken: { try deviceToken(context, store: store, server: server.description, destinations: [server.appending("/oauth2/authorize")],
                                           settings: settings) },
            interaction: interaction)
        context.info("signing in at \(server) as client \(settings.clientID)")
        let tokens = try signIn.run(tokenServer: tokenServer)
        try save(context, store: store, settings: settings, method: "app-native", tokens: tokens)
    }

    /// A fresh device token for the server (a base URL), or for a provider known by its discovery
    /// document (its authorization endpoint, where the token goes, and its issuer); nil, with a
    /// warning, when the device is not registered there, or when a URL the token goes to
    /// (`destinations`) is not on the registration's origin: a device token is good at the server
    /// it was registered with, and goes nowhere else.
    static func deviceToken(_ context: CommandContext, store: DeviceStore, server: String?, provider: AuthorizationServer? = nil,
                            destinations: [String], settings: SignInSettings) throws -> String? {
        let state = try store.state()
        guard state.key != nil else {
            context.warn("this device has no key, so the sign-in carries no device token (run `devtrust init` and `devtrust register`)")
            return nil
        }
        let registration: RegistrationRecord
        do {
            if let server {
                registration = try RegistrationSelector.select(from: state, server: server)
            } else if let destination = provider?.authorization {
                registration = try RegistrationSelector.select(from: state, destination: destination, providerURLs: [provider?.issuer].compactMap { $0 })
            } else {
                throw DeviceError.notRegistered(server: nil)
            }
        } catch {
            context.warn("\(error); signing in without a device token")
            return nil
        }
        let home = ClockSkew.origin(of: registration.server)
        if let elsewhere = destinations.first(where: { ClockSkew.origin(of: $0) != home }) {
            context.warn("the request goes to \(ClockSkew.origin(of: elsewhere)), not to \(home) where this device is registered; a device token goes only to its own server, so this sign-in carries none")
            return nil
        }
        let device = try store.loadKey()
        let attributes = TokenCommands.deviceAttributes(context, settings.configuration, claims: [],
                                                        backend: device.record.backend.rawValue)
        return try DeviceTokenMinter(key: device.key, clock: context.clocks.clock(for: registration.server, base: context.environment.clock),
                                     random: context.environment.random)
            .deviceToken(deviceId: registration.registrationId, attributes: attributes)
    }

    /// `issuer`: the discovery document's, recorded as the server of a `--discovery` sign-in.
    static func save(_ context: CommandContext, store: DeviceStore, settings: SignInSettings, method: String, tokens: TokenSet,
                     issuer: String? = nil) throws {
        if let note = tokens.idTokenNote { context.warn(note) }
        var tokens = tokens
        tokens.deleteTokenGrant = settings.deleteTokenGrant
        let record = try store.saveSignIn(server: settings.serverName ?? issuer, discovery: settings.discovery, clientId: settings.clientID,
                                          scope: tokens.scope ?? settings.scope, method: method, tokens: tokens)
        let lifetime = tokens.expiryAssumed
            ? " (the server gave no lifetime for the access token: devtrust refreshes it after \(TokenSet.assumedLifetime) s, or with `access-token --refresh`)"
            : tokens.expiresAt.map { " (access token valid for \($0 - context.environment.clock.secondsSinceEpoch()) s)" } ?? ""
        context.info("signed in at \(record.server ?? record.discovery ?? "?") as client \(record.clientId)\(identityText(tokens))\(lifetime); `devtrust access-token` prints the access token")
    }

    /// ", user NAME (sub SUB)" from the kept (checked) ID token, or nothing.
    static func identityText(_ tokens: TokenSet) -> String {
        guard let identity = tokens.keptIdentity else { return "" }
        return ", user " + (identity.displayName.map { "\($0) (sub \(identity.subject))" } ?? "sub \(identity.subject)")
    }

    /// `login --callback URL`: the code from a browser sign-in begun with `authorize-url`.
    static func finishBrowserSignIn(_ context: CommandContext, callback: String) throws {
        let parameters = FormEncoding.queryParameters(callback)
        if let error = parameters["error"] {
            throw OAuthError(error: error, errorDescription: parameters["error_description"], httpStatus: 0)
        }
        guard let code = parameters["code"], let state = parameters["state"] else {
            throw UsageError("--callback needs the URL the browser was sent back to, with its code and state", command: "login")
        }
        // The configuration before the pending sign-in is taken: a broken one must not use it up.
        let oauth = CurlHTTPClientFactory.oauth(context, http: try CurlHTTPClientFactory.make(context))
        let store = try context.deviceStore()
        guard let pending = PendingAuthorizations(store.keystore).take(state: state, now: context.environment.clock.secondsSinceEpoch()) else {
            throw UsageError("no pending sign-in has state \(state) (it expired after 10 minutes, or was used); run `devtrust authorize-url` again", command: "login")
        }
        var tokens = try oauth.exchangeCode(code, verifier: pending.verifier, redirectURI: pending.redirectURI, clientID: pending.clientID,
                                            server: AuthorizationServer(issuer: pending.issuer, token: pending.tokenEndpoint, revocation: pending.revocationEndpoint,
                                                                        jwks: pending.jwks),
                                            nonce: pending.nonce)
        if let note = tokens.idTokenNote { context.warn(note) }
        tokens.deleteTokenGrant = pending.deleteTokenGrant
        let record = try store.saveSignIn(server: pending.server, discovery: pending.discovery, clientId: pending.clientID,
                                          scope: tokens.scope ?? pending.scope, method: "authorization-code", tokens: tokens)
        context.info("signed in at \(record.server ?? record.discovery ?? "?") as client \(record.clientId)\(identityText(tokens)); `devtrust access-token` prints the access token")
    }
}

/// An HTTP client with the options the context gives (CA file, timeouts).
enum CurlHTTPClientFactory {
    /// A broken configuration file is an error here too (exit 2), as for every other command.
    static func make(_ context: CommandContext) throws -> any HTTPClient {
        let configuration = try context.configuration()
        return context.clocks.watch(CurlHTTPClient(options: RegisterCommand.httpOptions(context, configuration)))
    }

    /// An OAuth client whose ID-token checks read the time at the server (its measured clock).
    static func oauth(_ context: CommandContext, http: any HTTPClient) -> OAuthClient {
        let clock = context.environment.clock
        let clocks = context.clocks
        return OAuthClient(http: http, clock: { clock.secondsSinceEpoch() },
                           serverTime: { clocks.clock(for: $0, base: clock).secondsSinceEpoch() })
    }
}
