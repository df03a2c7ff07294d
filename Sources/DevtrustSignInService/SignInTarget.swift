import DevtrustConfig
import DevtrustDevice
import DevtrustErrors
import DevtrustHTTP
import DevtrustKeystore
import DevtrustSignIn

/// Where and as whom a sign-in goes (`login`, `authorize-url`, and what `doctor` checks of each
/// sign-in profile): the server or discovery document, the client, scope, redirect URI and the
/// rest, from what the user gave and a sign-in profile of the configuration (what was given wins).
package struct SignInTarget {
    package static let defaultRedirectURI = "http://127.0.0.1:8765/callback"

    /// What the user gave (the options `login` and `authorize-url` share), before the profile fills the rest.
    package struct Options {
        package var server: String?
        package var discovery: String?
        package var clientID: String?
        package var redirectURI: String?
        package var scope: String?
        package var par: Bool
        package var profile: String?
        /// `--dpop`: ask for DPoP-bound tokens even when the server's discovery does not advertise them.
        package var dpop = false
        /// `--no-dpop`: bearer tokens, whatever the profile or discovery says.
        package var noDPoP = false

        package init(server: String?, discovery: String?, clientID: String?, redirectURI: String?, scope: String?, par: Bool,
                     profile: String?, dpop: Bool = false, noDPoP: Bool = false) {
            self.server = server
            self.discovery = discovery
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.scope = scope
            self.par = par
            self.profile = profile
            self.dpop = dpop
            self.noDPoP = noDPoP
        }
    }

    package let server: ServerURL?
    package let discovery: String?
    package let clientID: String
    package let scope: String
    package let redirectURI: String
    /// The redirect URI the command line or the profile gave (nil: the default).
    package let explicitRedirectURI: String?
    package let par: Bool
    package let acrValues: String?
    package let endpointOverrides: [String: String]
    package let deleteTokenGrant: Bool
    /// `--dpop` or the profile's `"dpop": true`: DPoP-bound tokens, whatever discovery says.
    package let dpop: Bool
    /// `--no-dpop` or the profile's `"dpop": false`: bearer tokens, whatever discovery says.
    package let noDPoP: Bool

    /// - Parameters:
    ///   - command: the command whose help a usage error points at.
    ///   - needsClient: false where no client id is needed yet (`doctor`'s check of a profile).
    package init(_ options: Options, configuration: Configuration, command: String, needsClient: Bool = true) throws {
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
        // The command line wins over the profile; nothing said, discovery decides (`wantsDPoP`).
        dpop = options.dpop || (!options.noDPoP && profile.dpop == true)
        noDPoP = options.noDPoP || (!options.dpop && profile.dpop == false)
    }

    /// The record's key: the server base URL or the discovery URL.
    package var serverName: String? { server?.description }

    /// Whether the sign-in's token requests are DPoP-bound to the device key: when `--dpop` or the
    /// profile asks, or when the server's discovery lists ES256 for DPoP (and neither says no).
    package func wantsDPoP(_ server: AuthorizationServer) -> Bool {
        !noDPoP && (dpop || server.advertisesDPoP) && server.token != nil
    }

    /// Discovery (the given document, or WSO2's for --server), WSO2's fixed
    /// paths when its document is not there, then the profile's endpoints.
    /// `note`: what was found instead of a discovery document (said with --verbose).
    package func authorizationServer(http: any HTTPClient, note: (String) -> Void) throws -> AuthorizationServer {
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
                note("no discovery document at \(AuthorizationServer.wso2DiscoveryURL(server)) (\(error)); using WSO2's paths")
                resolved = AuthorizationServer.wso2(server)
            } catch is OAuthProtocolError {
                note("no usable discovery document at \(AuthorizationServer.wso2DiscoveryURL(server)); using WSO2's paths")
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

    /// Which registration a sign-in's device token is for: the server's (a base URL), or a
    /// provider's known by its discovery document (its authorization endpoint, where the token
    /// goes, and its issuer); nil when neither names one.
    package static func registrationChoice(server: String?, provider: AuthorizationServer?) -> RegistrationChoice? {
        if let server {
            .server(server)
        } else if let destination = provider?.authorization {
            .provider(destination: destination, providerURLs: [provider?.issuer].compactMap { $0 })
        } else {
            nil
        }
    }

    /// Stores the sign-in's tokens in `store`; before that, `warn` gets what the tokens say against the
    /// request: a note on their ID token, and bearer tokens where DPoP-bound ones were asked for.
    /// `method`: how it was signed in (`app-native`, `browser`, `device-code`, `ciba`); `issuer`: the
    /// discovery document's, recorded as the server of a `--discovery` sign-in.
    package func save(_ tokens: TokenSet, method: String, issuer: String? = nil, in store: DeviceStore,
                      warn: (String) -> Void) throws -> (record: SignInRecord, tokens: TokenSet) {
        if let note = tokens.idTokenNote { warn(note) }
        if dpop && !tokens.isDPoPBound {
            warn("the server answered token_type \(tokens.tokenType), not DPoP: these tokens are not bound to the device key")
        }
        var tokens = tokens
        tokens.deleteTokenGrant = deleteTokenGrant
        let record = try store.saveSignIn(server: serverName ?? issuer, discovery: discovery, clientId: clientID,
                                          scope: tokens.scope ?? scope, method: method, tokens: tokens)
        return (record, tokens)
    }

    /// The discovery document's issuer, when it is a URL devtrust would use and so record
    /// (https, or http to loopback; no query, fragment or control characters).
    package static func recordableIssuer(_ issuer: String?) -> String? {
        guard let issuer, !issuer.isEmpty, issuer.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }),
              (try? ServerURL(issuer)) != nil else { return nil }
        return issuer
    }
}
