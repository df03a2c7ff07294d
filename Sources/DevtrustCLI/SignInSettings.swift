import DevtrustConfig
import DevtrustDevice
import DevtrustErrors
import DevtrustHTTP
import DevtrustSignIn
import DevtrustTerminal

/// What a sign-in command needs, from its options and `--profile` (options win).
struct SignInSettings {
    static let defaultRedirectURI = "http://127.0.0.1:8765/callback"

    /// The options `login` and `authorize-url` share, as the command read them.
    struct Options {
        var server: String?
        var discovery: String?
        var clientID: String?
        var redirectURI: String?
        var scope: String?
        var par: Bool
        var profile: String?
        /// `--dpop`: ask for DPoP-bound tokens even when the server's discovery does not advertise them.
        var dpop = false
        /// `--no-dpop`: bearer tokens, whatever the profile or discovery says.
        var noDPoP = false
    }

    let server: ServerURL?
    let discovery: String?
    let clientID: String
    let scope: String
    let redirectURI: String
    /// The redirect URI the command line or the profile gave (nil: the default).
    let explicitRedirectURI: String?
    let par: Bool
    let acrValues: String?
    let endpointOverrides: [String: String]
    let deleteTokenGrant: Bool
    /// `--dpop` or the profile's `"dpop": true`: DPoP-bound tokens, whatever discovery says.
    let dpop: Bool
    /// `--no-dpop` or the profile's `"dpop": false`: bearer tokens, whatever discovery says.
    let noDPoP: Bool
    let configuration: Configuration
    let http: HTTPClientSettings

    init(_ options: Options, _ context: CommandContext, command: String, needsClient: Bool = true) throws {
        configuration = try context.configuration()
        http = HTTPClientSettings(context, configuration: configuration)
        var profile = SignInProfile()
        if let name = options.profile {
            guard let found = configuration.signInProfiles[name] else {
                let known = configuration.signInProfiles.keys.sorted()
                throw UsageError("no sign-in profile \"\(name)\" in the configuration" + (known.isEmpty ? "" : " (profiles: \(known.joined(separator: ", ")))"), command: command)
            }
            profile = found
        }
        let serverText = options.server ?? (options.discovery == nil ? profile.server : nil)
        discovery = options.discovery ?? (options.server == nil ? profile.discovery : nil)
        guard serverText != nil || discovery != nil else {
            throw UsageError("give --server URL or --discovery URL (or --profile NAME)", command: command)
        }
        if serverText != nil && discovery != nil {
            throw UsageError("give either --server or --discovery, not both", command: command)
        }
        if let serverText { try ServerBaseURL.check(serverText, command: command) }
        server = try serverText.map { try ServerURL($0) }
        if let discovery { _ = try ServerURL(String(discovery.split(separator: "?").first ?? "")) }
        let client = options.clientID ?? profile.clientId
        if needsClient && (client ?? "").isEmpty {
            throw UsageError("--client-id is required (the application's OAuth client id)", command: command)
        }
        clientID = client ?? ""
        scope = options.scope ?? profile.scope ?? "openid"
        explicitRedirectURI = options.redirectURI ?? profile.redirectUri
        redirectURI = explicitRedirectURI ?? Self.defaultRedirectURI
        par = options.par || (profile.par ?? false)
        acrValues = profile.acrValues
        endpointOverrides = profile.endpoints
        deleteTokenGrant = profile.deleteTokenGrant ?? false
        // The command line wins over the profile; nothing said, discovery decides (oauthClient).
        dpop = options.dpop || (!options.noDPoP && profile.dpop == true)
        noDPoP = options.noDPoP || (!options.dpop && profile.dpop == false)
    }

    /// The OAuth client for the sign-in's token requests: DPoP-bound to the device key when `--dpop` or
    /// the profile asks, or when the server's discovery lists ES256 for DPoP. Asked for, a missing key
    /// is an error; only advertised, it is a warning, and the tokens are bearer tokens.
    func oauthClient(_ context: CommandContext, server: AuthorizationServer, stoppedBySignals: Bool = false) throws -> OAuthClient {
        var oauth = http.oauthClient(context, stoppedBySignals: stoppedBySignals)
        guard !noDPoP, dpop || server.advertisesDPoP, let token = server.token else { return oauth }
        do {
            oauth.dpop = try DPoPKey.binding(context, store: try context.deviceStore(), server: token)
            context.detail("DPoP: token requests carry proofs of the device key \(oauth.dpop!.thumbprint)"
                           + (dpop ? "" : " (the server advertises DPoP with ES256)"))
        } catch where !dpop {
            // Any error (no key, a damaged key file): only advertised, DPoP never breaks a sign-in that worked before.
            context.warn("the server offers DPoP-bound tokens, but \(ErrorReport.from(error).summary); signing in for bearer tokens")
        }
        return oauth
    }

    /// The record's key: the server base URL or the discovery URL.
    var serverName: String? { server?.description }

    /// Discovery (the given document, or WSO2's for --server), WSO2's fixed
    /// paths when its document is not there, then the profile's endpoints.
    func authorizationServer(http: any HTTPClient, context: CommandContext) throws -> AuthorizationServer {
        var resolved: AuthorizationServer
        if let discovery {
            resolved = try AuthorizationServer.discover(discovery, http: http)
        } else {
            let server = self.server!
            do {
                // WSO2 does not advertise its device endpoint: its fixed path fills that gap (and
                // only the ones every WSO2 server has); PAR and revocation only when advertised.
                let defaults = AuthorizationServer.wso2(server)
                resolved = try AuthorizationServer.discover(AuthorizationServer.wso2DiscoveryURL(server), http: http)
                    .filling(from: AuthorizationServer(authorization: defaults.authorization, token: defaults.token,
                                                       deviceAuthorization: defaults.deviceAuthorization))
            } catch let error as HTTPError {
                if case .transport = error { throw error }
                context.detail("no discovery document at \(AuthorizationServer.wso2DiscoveryURL(server)) (\(error)); using WSO2's paths")
                resolved = AuthorizationServer.wso2(server)
            } catch is OAuthProtocolError {
                context.detail("no usable discovery document at \(AuthorizationServer.wso2DiscoveryURL(server)); using WSO2's paths")
                resolved = AuthorizationServer.wso2(server)
            }
        }
        let overrides = endpointOverrides
        return AuthorizationServer(
            issuer: resolved.issuer,
            authorization: overrides["authorization"] ?? resolved.authorization,
            token: overrides["token"] ?? resolved.token,
            deviceAuthorization: overrides["deviceAuthorization"] ?? resolved.deviceAuthorization,
            revocation: overrides["revocation"] ?? resolved.revocation,
            pushedAuthorizationRequest: overrides["pushedAuthorizationRequest"] ?? resolved.pushedAuthorizationRequest,
            jwks: resolved.jwks,
            backchannelAuthentication: overrides["backchannelAuthentication"] ?? resolved.backchannelAuthentication)
            .withDPoPSigningAlgorithms(resolved.dpopSigningAlgorithms)
    }
}
