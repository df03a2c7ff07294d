import DevtrustCore
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeystore
import DevtrustSignIn

/// `login`: app-native sign-in (default), `--browser` (a loopback redirect),
/// `--device-code` (RFC 8628), `--ciba` (OpenID CIBA, poll mode), or `--callback URL` to finish an `authorize-url`
/// sign-in; stores the tokens.
enum LoginCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let server = ValueOption<Self>("server", "URL", .url, "a WSO2-style base URL ({URL}/oauth2/...)")
        static let discovery = ValueOption<Self>("discovery", "URL", .url, "an OpenID provider's discovery document (with --browser, --device-code or --ciba)")
        static let clientID = ValueOption<Self>("client-id", "ID", .text, "the OAuth client id")
        static let redirectURI = ValueOption<Self>("redirect-uri", "URI", .url, "the client's registered redirect URI (default \(SignInSettings.defaultRedirectURI); "
                                                   + "with --browser \(BrowserLogin.defaultRedirectURI) on a port the system chooses)")
        static let scope = ValueOption<Self>("scope", "SCOPES", .text, "space-separated scopes (default openid)")
        static let authenticator = ValueOption<Self>("authenticator", "NAME", .text, "pick this option of a multi-option step (name or id)")
        static let input = RepeatableOption<Self>("input", "NAME=VALUE", .text, "an authenticator param by name (repeatable)")
        static let inputsFile = ValueOption<Self>("inputs", "FILE|-", .file, "a JSON object of string params")
        static let nonInteractive = FlagOption<Self>("non-interactive", "never prompt")
        static let browser = FlagOption<Self>("browser", "sign in in the browser: listen on 127.0.0.1 for its redirect (RFC 8252), open the URL with xdg-open")
        static let noBrowser = FlagOption<Self>("no-browser", "with --browser: print the URL instead of opening it")
        static let timeout = ValueOption<Self>("timeout", "SECONDS", .text,
                                               "with --browser: how long to wait for the browser (default \(BrowserLogin.defaultTimeout))")
        static let par = FlagOption<Self>("par", "with --browser: push the request first (RFC 9126)")
        static let deviceCode = FlagOption<Self>("device-code", "RFC 8628: show a code to enter on another device, and poll")
        static let noQR = FlagOption<Self>("no-qr", "do not draw the QR code")
        static let ciba = FlagOption<Self>("ciba", "OpenID CIBA: the server asks the user on their own device (a phone); poll until approved")
        static let loginHint = ValueOption<Self>("login-hint", "HINT", .text, "with --ciba: who signs in, passed as given (glewlwyd: '{\"username\":\"NAME\"}')")
        static let bindingMessage = ValueOption<Self>("binding-message", "TEXT", .text,
                                                      "with --ciba: a short message shown here and on the user's device (at most \(CIBALogin.bindingMessageLimit) characters)")
        static let requestedExpiry = ValueOption<Self>("requested-expiry", "SECONDS", .text, "with --ciba: how long the request may wait for approval (default the server's)")
        static let profile = ValueOption<Self>("profile", "NAME", .profile, "a sign-in profile of the configuration")
        static let dpop = FlagOption<Self>("dpop", "ask for DPoP-bound tokens (RFC 9449), proofs signed with the device key (also when the server advertises DPoP)")
        static let noDPoP = FlagOption<Self>("no-dpop", "bearer tokens, even when the server advertises DPoP (for scripts that send Authorization: Bearer)")
        static let callback = ValueOption<Self>("callback", "URL", .url, "finish an authorize-url sign-in with the URL the browser was sent back to")
        static let spec = CommandSpec(
            name: "login", summary: "sign in: app-native with a device token, --browser, --device-code or --ciba; stores the tokens",
            options: [server, discovery, clientID, redirectURI, scope, authenticator, input, inputsFile, nonInteractive,
                      browser, noBrowser, timeout, par, deviceCode, noQR, ciba, loginHint, bindingMessage, requestedExpiry, profile, dpop, noDPoP, callback],
            required: [.oneOf([server], [discovery], [profile], [callback])])

        var signIn: SignInSettings.Options
        var authenticator: String?
        var scriptedInputs: ScriptedInputs.Options
        var nonInteractive: Bool
        var browser: Bool
        var noBrowser: Bool
        var timeout: String?
        var deviceCode: Bool
        var noQR: Bool
        var ciba: Bool
        var loginHint: String?
        var bindingMessage: String?
        var requestedExpiry: String?
        var callback: String?

        init(_ values: OptionValues<Self>) {
            signIn = SignInSettings.Options(server: values[Self.server], discovery: values[Self.discovery], clientID: values[Self.clientID],
                                            redirectURI: values[Self.redirectURI], scope: values[Self.scope], par: values[Self.par],
                                            profile: values[Self.profile], dpop: values[Self.dpop], noDPoP: values[Self.noDPoP])
            authenticator = values[Self.authenticator]
            scriptedInputs = ScriptedInputs.Options(file: values[Self.inputsFile], inputs: values[Self.input])
            nonInteractive = values[Self.nonInteractive]
            browser = values[Self.browser]
            noBrowser = values[Self.noBrowser]
            timeout = values[Self.timeout]
            deviceCode = values[Self.deviceCode]
            noQR = values[Self.noQR]
            ciba = values[Self.ciba]
            loginHint = values[Self.loginHint]
            bindingMessage = values[Self.bindingMessage]
            requestedExpiry = values[Self.requestedExpiry]
            callback = values[Self.callback]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let ways = [(options.browser, Options.browser.spec), (options.deviceCode, Options.deviceCode.spec), (options.ciba, Options.ciba.spec),
                    (options.callback != nil, Options.callback.spec)]
            .filter(\.0).map(\.1.displayName)
        if ways.count > 1 {
            throw UsageError("give one of --browser, --device-code, --ciba and --callback, not " + ways.joined(separator: " and "), command: "login")
        }
        let cibaOnly = [(options.loginHint != nil, Options.loginHint.spec), (options.bindingMessage != nil, Options.bindingMessage.spec),
                        (options.requestedExpiry != nil, Options.requestedExpiry.spec)]
        if !options.ciba, let (_, given) = cibaOnly.first(where: \.0) {
            throw UsageError("\(given.displayName) goes with --ciba", command: "login")
        }
        // What the other sign-ins take is refused with --ciba, as --login-hint is without it.
        let notForCIBA = [(options.signIn.redirectURI != nil, Options.redirectURI.spec), (options.authenticator != nil, Options.authenticator.spec),
                          (!options.scriptedInputs.inputs.isEmpty, Options.input.spec), (options.scriptedInputs.file != nil, Options.inputsFile.spec),
                          (options.nonInteractive, Options.nonInteractive.spec), (options.noQR, Options.noQR.spec)]
        if options.ciba, let (_, given) = notForCIBA.first(where: \.0) {
            throw UsageError("\(given.displayName) does not go with --ciba", command: "login")
        }
        // Bad values are said before the configuration is read or anything goes over the network.
        let cibaRequest = try options.ciba ? CIBALogin.Request(loginHint: options.loginHint, bindingMessage: options.bindingMessage,
                                                                  requestedExpiry: options.requestedExpiry) : nil
        let browserOnly = [(options.noBrowser, Options.noBrowser.spec), (options.timeout != nil, Options.timeout.spec), (options.signIn.par, Options.par.spec)]
        if !options.browser, let (_, given) = browserOnly.first(where: \.0) {
            throw UsageError("\(given.displayName) goes with --browser", command: "login")
        }
        if options.signIn.dpop && options.signIn.noDPoP { throw UsageError("give either --dpop or --no-dpop, not both", command: "login") }
        if let callback = options.callback {
            // The code of an authorize-url sign-in is exchanged as it was asked for, without DPoP.
            if options.signIn.dpop { throw UsageError("--dpop goes with app-native, --browser, --device-code and --ciba sign-ins, not with --callback (its code is exchanged as authorize-url asked for it)", command: "login") }
            return try finishBrowserSignIn(context, callback: callback)
        }
        let settings = try SignInSettings(options.signIn, context, command: "login")
        if options.browser {
            return try BrowserLogin.run(context, settings, timeout: options.timeout, noBrowser: options.noBrowser)
        }
        if options.deviceCode {
            return try DeviceCodeLogin.run(context, settings, drawQR: !options.noQR)
        }
        if let cibaRequest {
            return try CIBALogin.run(context, settings, cibaRequest)
        }
        guard let server = settings.server else {
            throw UsageError("app-native sign-in needs --server URL (a WSO2-style base); --discovery goes with --browser, --device-code or --ciba", command: "login")
        }
        // Bad inputs are said before anything goes over the network.
        let presets = try ScriptedInputs.read(options.scriptedInputs, context, command: "login")
        let store = try context.deviceStore()
        let http = settings.http.client(context)
        let tokenServer = try settings.authorizationServer(http: http, context: context)
        let random = context.environment.random
        let interaction = TerminalSignInInteraction(context: context, presets: presets, authenticator: options.authenticator,
                                                    interactive: !options.nonInteractive && context.terminal.inputIsTerminal)
        let signIn = AppNativeSignIn(
            server: server, http: http, oauth: try settings.oauthClient(context, server: tokenServer), clientID: settings.clientID, redirectURI: settings.redirectURI,
            scope: settings.scope, state: try PKCE.state(using: random), nonce: try PKCE.state(using: random), pkce: try PKCE.make(using: random),
            deviceToken: { try settings.deviceToken(context, store: store, destinations: [server.appending("/oauth2/authorize")]) },
            interaction: interaction)
        context.info("signing in at \(server) as client \(settings.clientID)")
        let tokens = try signIn.run(tokenServer: tokenServer)
        try settings.save(context, store: store, method: "app-native", tokens: tokens)
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
        let oauth = HTTPClientSettings(context, configuration: try context.configuration()).oauthClient(context)
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
        context.success("signed in at \(record.server ?? record.discovery ?? "?") as client \(record.clientId)\(SignInSettings.identityText(tokens)); `devtrust access-token` prints the access token")
    }
}
