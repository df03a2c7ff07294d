import DevtrustAgent
import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustHTTP
import DevtrustKeystore
import DevtrustSignIn
import DevtrustSignInService
import DevtrustTerminal

/// A sign-in command's `SignInTarget` (DevtrustSignInService: what the options and `--profile`
/// resolve to), with the configuration and the HTTP settings this run reads, and what the
/// command line says of it: DPoP's binding, the device token's absence, the sign-in saved.
@dynamicMemberLookup
struct SignInSettings {
    typealias Options = SignInTarget.Options
    static let defaultRedirectURI = SignInTarget.defaultRedirectURI

    let target: SignInTarget
    let configuration: Configuration
    let http: HTTPClientSettings
    /// The command it is for (`login`, `authorize-url`): whose help a usage error points at.
    let command: String

    init(_ options: Options, _ context: CommandContext, command: String) throws {
        self.command = command
        configuration = try context.configuration()
        http = HTTPClientSettings(context, configuration: configuration)
        target = try SignInTarget(options, configuration: configuration, command: command)
    }

    subscript<Value>(dynamicMember keyPath: KeyPath<SignInTarget, Value>) -> Value {
        target[keyPath: keyPath]
    }

    /// The OAuth client for the sign-in's token requests: DPoP-bound to the device key when
    /// `SignInTarget.wantsDPoP`. Asked for, a missing key is an error; only advertised, it is a
    /// warning, and the tokens are bearer tokens.
    func oauthClient(_ context: CommandContext, server: AuthorizationServer, stoppedBySignals: Bool = false) throws -> OAuthClient {
        var oauth = http.oauthClient(context, stoppedBySignals: stoppedBySignals)
        guard target.wantsDPoP(server), let token = server.token else { return oauth }
        do {
            let binding = try context.dpopBinding(server: token, command: command)
            oauth.dpop = binding.binding
            context.detail("DPoP: token requests carry proofs of the \(binding.key) \(binding.binding.thumbprint)"
                           + (target.dpop ? "" : " (the server advertises DPoP with ES256)"))
        } catch where !target.dpop {
            // Any error (no key, a damaged key file): only advertised, DPoP never breaks a sign-in that worked before.
            context.warn("the server offers DPoP-bound tokens, but \(ErrorReport.from(error).summary); signing in for bearer tokens")
        }
        return oauth
    }

    /// `SignInTarget.authorizationServer`, what it found instead of a discovery document said with -v.
    func authorizationServer(http client: any HTTPClient, context: CommandContext) throws -> AuthorizationServer {
        try target.authorizationServer(http: client, note: { context.detail($0) })
    }

    /// A fresh device token for the server (a base URL), or for a provider known by its discovery
    /// document (its authorization endpoint, where the token goes, and its issuer); nil, with a
    /// warning, when the device is not registered there, or when a URL the token goes to
    /// (`destinations`) is not on the registration's origin: a device token is good at the server
    /// it was registered with, and goes nowhere else.
    func deviceToken(_ context: CommandContext, store: DeviceStore, provider: AuthorizationServer? = nil, destinations: [String]) throws -> String? {
        let choice = SignInTarget.registrationChoice(server: target.serverName, provider: provider)
        if case let .agent(agent) = try context.deviceAccess(command: command) {
            // Your registration of the machine key, chosen by the agent as below; the sign-in itself stays yours.
            guard let choice else {
                context.warn(Self.withoutTokenWarning(DeviceError.notRegistered(server: nil)))
                return nil
            }
            switch try agent.signInToken(choice, destinations: destinations) {
            case let .token(token):
                return token
            case let .noMachineKey(missing):
                context.warn("\(missing.classification.summary), so the sign-in carries no device token (\(missing.classification.hint?.text ?? ""))")
                return nil
            case let .withoutToken(reason, message):
                context.warn(reason == "tokenGoesElsewhere" ? "\(message), so this sign-in carries none" : "\(message); signing in without a device token")
                return nil
            }
        }
        switch try context.deviceTokens(configuration, store: store).signInDeviceToken(for: choice, sendingTo: destinations) {
        case let .token(minted):
            return minted.token
        case let .withoutToken(because: error):
            context.warn(Self.withoutTokenWarning(error))
            return nil
        }
    }

    /// Why a sign-in goes without a device token, in the warning's words.
    private static func withoutTokenWarning(_ error: DeviceError) -> String {
        switch error {
        case .noDeviceKey: "this device has no key, so the sign-in carries no device token (run `devtrust init` and `devtrust register`)"
        case .tokenGoesElsewhere: "\(error), so this sign-in carries none"
        default: "\(error); signing in without a device token"
        }
    }

    /// Stores the tokens (`SignInTarget.save`) and says so. `issuer`: the discovery document's,
    /// recorded as the server of a `--discovery` sign-in.
    func save(_ context: CommandContext, store: DeviceStore, method: String, tokens: TokenSet, issuer: String? = nil) throws {
        let (record, tokens) = try target.save(tokens, method: method, issuer: issuer, in: store, warn: { context.warn($0) })
        let lifetime = tokens.expiryAssumed
            ? " (the server gave no lifetime for the access token: devtrust refreshes it after \(TokenSet.assumedLifetime) s, or with `access-token --refresh`)"
            : tokens.expiresAt.map { " (access token valid for \($0 - context.environment.clock.secondsSinceEpoch()) s)" } ?? ""
        let bound = tokens.dpopJkt.map { ", DPoP-bound to the device key \($0)" } ?? ""
        context.success("signed in at \(record.server ?? record.discovery ?? "?") as client \(record.clientId)\(Self.identityText(tokens))\(bound)\(lifetime); `devtrust access-token` prints the access token")
    }

    /// ", user NAME (sub SUB)" from the kept (checked) ID token, or nothing.
    static func identityText(_ tokens: TokenSet) -> String {
        guard let identity = tokens.keptIdentity else { return "" }
        return ", user " + (identity.displayName.map { "\($0) (sub \(identity.subject))" } ?? "sub \(identity.subject)")
    }
}

extension CommandContext {
    /// The device key as this run binds DPoP proofs to it (its clocks, randomness and nonce cache).
    var dpopKey: DPoPKey {
        DPoPKey(clocks: clocks, clock: environment.clock, random: environment.random, cache: cacheDirectory)
    }

    /// The DPoP binding of a sign-in's token requests to `server`'s token endpoint: the device key of
    /// your own keystore, or the machine key through the system agent (which writes every proof);
    /// `key`: which, in words.
    func dpopBinding(server url: String, command: String) throws -> (binding: DPoPBinding, key: String) {
        switch try deviceAccess(command: command) {
        case let .agent(agent):
            return (dpopKey.binding(try AgentDPoPProofs(agent: agent)), "machine key (through the devtrust agent at \(agent.socket))")
        case .keystore:
            return (try dpopKey.binding(store: try deviceStore(), server: url, deadline: .command(self, doing: "signing a DPoP proof")), "device key")
        }
    }

    /// The binding for refreshing a sign-in bound to `jkt`, with `store`'s key or the agent's: an error
    /// when that key is no longer the one the tokens are bound to.
    func dpopBinding(boundTo jkt: String, tokenEndpoint: String, store: DeviceStore, command: String) throws -> DPoPBinding {
        switch try deviceAccess(command: command) {
        case let .agent(agent):
            return dpopKey.binding(AgentDPoPProofs(agent: agent, boundTo: jkt))
        case .keystore:
            return try dpopKey.binding(store: store, boundTo: jkt, tokenEndpoint: tokenEndpoint, deadline: .command(self, doing: "signing a DPoP proof"))
        }
    }
}
