import DevtrustErrors
import DevtrustHTTP
import DevtrustKeystore

/// What a backchannel authentication endpoint answers (OpenID CIBA Core 7.3).
public struct BackchannelAuthentication: Sendable {
    /// Secret: never printed, logged or stored (whoever has it can collect the tokens).
    public let authReqID: String
    public let expiresIn: Int64
    public let interval: Int64?
}

/// What the user is shown when a CIBA request is under way: no secret in it.
public struct BackchannelAuthenticationStarted: Sendable, Equatable {
    /// The binding message sent with the request, which the user's phone shows too.
    public let bindingMessage: String?
    public let expiresIn: Int64
}

public typealias CIBAEvent = PollingSignInEvent<BackchannelAuthenticationStarted>

/// A CIBA request ended without tokens: the server refused (expired or denied).
public enum CIBAFailure: Error, Equatable, Sendable, CustomStringConvertible {
    case expired
    case denied

    public var description: String {
        switch self {
        case .expired: return "the sign-in request expired before it was approved; run the command again and approve it on your device in time"
        case .denied: return "the sign-in was denied on the user's device (access_denied)"
        }
    }
}

extension CIBAFailure: ClassifiedError {
    public var classification: ErrorClassification {
        ErrorClassification(self == .expired ? .approvalExpired : .approvalDenied, summary: description)
    }
}

/// What a CIBA request asks for (OpenID CIBA Core 7.1), as the user gave it.
public struct BackchannelAuthenticationRequest: Sendable, Equatable {
    public let scope: String
    /// Passed through as given: its form is the server's (glewlwyd wants JSON, such as {"username":"demo"}).
    public let loginHint: String
    public let bindingMessage: String?
    /// Seconds; nil: the server's default.
    public let requestedExpiry: Int64?

    public init(scope: String, loginHint: String, bindingMessage: String? = nil, requestedExpiry: Int64? = nil) {
        self.scope = scope
        self.loginHint = loginHint
        self.bindingMessage = bindingMessage
        self.requestedExpiry = requestedExpiry
    }
}

/// CIBA's grant type at the token endpoint (CIBA Core 10.1).
public enum CIBAGrant {
    public static let type = "urn:openid:params:grant-type:ciba"
}

extension OAuthClient {
    /// The backchannel authentication request of a public client (client_id, no secret): the
    /// server asks the user on their own device. Every request goes through `post`.
    public func initiateCIBA(_ request: BackchannelAuthenticationRequest, clientID: String, server: AuthorizationServer) throws -> BackchannelAuthentication {
        let endpoint = try require(server.backchannelAuthentication,
                                   "backchannel authentication endpoint for CIBA (backchannel_authentication_endpoint in discovery; set endpoints.backchannelAuthentication in the profile, or sign in with --device-code)")
        // Checked here, when it is used: a discovery document with an unusable one still serves the other sign-ins.
        guard (try? ServerURL(String(endpoint.split(separator: "?", omittingEmptySubsequences: false).first ?? ""))) != nil else {
            throw OAuthProtocolError("the backchannel authentication endpoint \(endpoint) is not a usable URL (https, or http to this machine); "
                                     + "set endpoints.backchannelAuthentication in the profile, or sign in with --device-code")
        }
        var parameters = [("client_id", clientID), ("scope", request.scope), ("login_hint", request.loginHint)]
        if let message = request.bindingMessage { parameters.append(("binding_message", message)) }
        if let expiry = request.requestedExpiry { parameters.append(("requested_expiry", String(expiry))) }
        let document = try post(endpoint, parameters)
        guard let authReqID = document["auth_req_id"]?.stringValue, !authReqID.isEmpty, let schedule = PollingSchedule(document) else {
            throw OAuthProtocolError("the backchannel authentication answer lacks auth_req_id or expires_in")
        }
        return BackchannelAuthentication(authReqID: authReqID, expiresIn: schedule.expiresIn, interval: schedule.interval)
    }

    /// One poll of the token endpoint for a CIBA request (CIBA Core 10.1, poll mode).
    public func pollCIBA(_ authentication: BackchannelAuthentication, clientID: String, server: AuthorizationServer) throws -> DevicePollResult {
        try pollToken([("grant_type", CIBAGrant.type), ("auth_req_id", authentication.authReqID), ("client_id", clientID)],
                      clientID: clientID, server: server)
    }
}

/// OpenID CIBA poll mode for a public client: the request, then polling by `PollingLoop`'s rules.
/// The `auth_req_id` never leaves this struct but to the server.
public struct CIBASignIn {
    public let polling: PolledSignIn
    public let request: BackchannelAuthenticationRequest

    public init(polling: PolledSignIn, request: BackchannelAuthenticationRequest) {
        self.polling = polling
        self.request = request
    }

    public func run(events: (CIBAEvent) -> Void, tick: (Double, Double) -> Void = { _, _ in }) throws -> TokenSet {
        try polling.run(.ciba, request: { try $0.oauth.initiateCIBA(request, clientID: $0.clientID, server: $0.server) },
                        // The server's expires_in, which may be shorter than the one requested.
                        started: { BackchannelAuthenticationStarted(bindingMessage: request.bindingMessage, expiresIn: $0.expiresIn) },
                        schedule: { ($0.expiresIn, $0.interval) }, expired: CIBAFailure.expired, denied: CIBAFailure.denied,
                        poll: { try $0.oauth.pollCIBA($1, clientID: $0.clientID, server: $0.server) }, events: events, tick: tick)
    }
}
