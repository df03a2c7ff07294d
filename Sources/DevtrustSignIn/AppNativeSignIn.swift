import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeystore
import DevtrustURL

/// One authenticator of an app-native step (server contract, section 4).
public struct AppNativeAuthenticator: Sendable, Equatable {
    public struct Param: Sendable, Equatable {
        public let name: String
        public let displayName: String?
        public let confidential: Bool
        public let order: Int
    }

    public let id: String
    /// "BasicAuthenticator", "TOTP", ...
    public let name: String
    public let idp: String?
    /// USER_PROMPT, REDIRECTION_PROMPT, INTERNAL_PROMPT, or nil when the server lists the option only.
    public let promptType: String?
    public let params: [Param]
    public let redirectURL: String?
}

public struct AppNativeMessage: Sendable, Equatable {
    public let type: String
    public let message: String
}

/// The user's side of an app-native sign-in.
public protocol AppNativeInteraction: AnyObject {
    /// A multi-option step: which authenticator to use.
    func choose(_ options: [AppNativeAuthenticator], messages: [AppNativeMessage]) throws -> AppNativeAuthenticator
    /// The params of a USER_PROMPT; `failed` after the server refused the last values.
    func values(for authenticator: AppNativeAuthenticator, messages: [AppNativeMessage], failed: Bool) throws -> [(String, String)]
    /// A REDIRECTION_PROMPT: shows the URL, returns the callback's params.
    func callback(redirectURL: String, authenticator: AppNativeAuthenticator) throws -> [(String, String)]
    func note(_ text: String)
}

/// WSO2 app-native authentication: `POST {server}/oauth2/authorize` with
/// `response_mode=direct` (and a fresh device token), the authenticator steps
/// at the `links` the server gives, then the code exchange with PKCE.
public struct AppNativeSignIn {
    public static let maximumSteps = 30

    public let server: ServerURL
    public let http: any HTTPClient
    public let oauth: OAuthClient
    public let clientID: String
    public let redirectURI: String
    public let scope: String
    public let state: String
    /// Sent with the request; the ID token must carry it back (OpenID Connect Core 3.1.2.1).
    public let nonce: String
    public let pkce: PKCE
    /// A new device token for every attempt; nil when the device is not registered there.
    public let deviceToken: () throws -> String?
    public let interaction: any AppNativeInteraction

    public init(server: ServerURL, http: any HTTPClient, oauth: OAuthClient, clientID: String, redirectURI: String, scope: String,
                state: String, nonce: String, pkce: PKCE, deviceToken: @escaping () throws -> String?, interaction: any AppNativeInteraction) {
        self.server = server
        self.http = http
        self.oauth = oauth
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.scope = scope
        self.state = state
        self.nonce = nonce
        self.pkce = pkce
        self.deviceToken = deviceToken
        self.interaction = interaction
    }

    public func run(tokenServer: AuthorizationServer) throws -> TokenSet {
        var step = try authorize()
        // Links are resolved against the URL of the answer that carried them (RFC 3986 section 5).
        var stepURL = authorizeURL
        var failed = false
        for _ in 0..<Self.maximumSteps {
            switch step.status {
            case "SUCCESS_COMPLETED":
                guard let code = step.code, !code.isEmpty else { throw OAuthProtocolError("SUCCESS_COMPLETED without authData.code") }
                guard step.returnedState == state else {
                    throw OAuthProtocolError("the state the server returned does not match the one sent; the answer is not for this sign-in")
                }
                return try oauth.exchangeCode(code, verifier: pkce.verifier, redirectURI: redirectURI, clientID: clientID, server: tokenServer, nonce: nonce)
            case "FAILED_INCOMPLETE", "FAIL_INCOMPLETE":
                failed = true
            case "INCOMPLETE":
                failed = false
            default:
                throw SignInUnsupportedError("the sign-in ended with flowStatus \(step.status)" + messageText(step.messages))
            }
            guard let link = step.link else { throw OAuthProtocolError("the step has no links[] to continue at") }
            let authenticator: AppNativeAuthenticator
            switch step.stepType {
            case "MULTI_OPTIONS_PROMPT":
                authenticator = try interaction.choose(step.authenticators, messages: step.messages)
            case "AUTHENTICATOR_PROMPT":
                guard let only = step.authenticators.first else { throw OAuthProtocolError("an AUTHENTICATOR_PROMPT without authenticators") }
                authenticator = only
            default:
                throw SignInUnsupportedError("not supported by devtrust: the sign-in step \(step.stepType ?? "(none)")")
            }
            var params = [(String, String)]()
            switch authenticator.promptType {
            case "USER_PROMPT":
                params = try interaction.values(for: authenticator, messages: step.messages, failed: failed)
            case "REDIRECTION_PROMPT":
                guard let url = authenticator.redirectURL else { throw OAuthProtocolError("a REDIRECTION_PROMPT without additionalData.redirectUrl") }
                params = try interaction.callback(redirectURL: url, authenticator: authenticator)
            case nil:
                break // an option listed without params: selecting it makes the server say which it needs
            default:
                throw SignInUnsupportedError("not supported by devtrust: a \(authenticator.promptType!) for \(authenticator.name)")
            }
            stepURL = try nextStepURL(link, from: stepURL)
            step = try authenticate(flowId: step.flowId, url: stepURL, authenticator: authenticator, params: params)
        }
        throw OAuthProtocolError("the sign-in did not finish after \(Self.maximumSteps) steps")
    }

    private func messageText(_ messages: [AppNativeMessage]) -> String {
        messages.isEmpty ? "" : ": " + messages.map(\.message).joined(separator: " ")
    }

    private var authorizeURL: String { server.appending("/oauth2/authorize") }

    /// The first request, retried on network failures, each time with a new device token.
    private func authorize() throws -> AppNativeStep {
        let form = FormEncoding.encode([
            ("client_id", clientID), ("response_type", "code"), ("redirect_uri", redirectURI), ("scope", scope),
            ("state", state), ("nonce", nonce), ("response_mode", "direct"), ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method),
        ])
        var attempt = 0
        while true {
            attempt += 1
            var headers: [(name: String, value: String)] = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
            if let token = try deviceToken() { headers.append(("X-Device-Token", token)) }
            do {
                return try AppNativeStep(response: try http.send(HTTPRequest(method: "POST", url: authorizeURL, headers: headers, body: Array(form.utf8))))
            } catch let error as HTTPError {
                guard attempt < 3, case let .transport(_, failure, _) = error, [.connect, .timeout, .noResponse].contains(failure) else { throw error }
                interaction.note("the server did not answer (\(error)); trying again with a new device token")
            }
        }
    }

    /// Where the next step goes: the server's link (absolute, an absolute path such as
    /// `/oauth2/authn` or `/t/{org}/oauth2/authn`, or relative) resolved against the URL
    /// of the answer that carried it. The steps carry credentials: the result must be
    /// on the origin devtrust signs in at.
    func nextStepURL(_ link: String, from answerURL: String) throws -> String {
        var resolved = URLReference(URLReference.resolve(link, against: answerURL))
        resolved.fragment = nil
        let target: ServerURL
        do {
            guard let scheme = resolved.scheme, let authority = resolved.authority else {
                throw HTTPError.invalidURL(resolved.text, reason: "it has no scheme or host")
            }
            target = try ServerURL(scheme + "://" + authority + resolved.path)
        } catch {
            throw OAuthProtocolError("the server's link for the next step (\(link)) cannot be used: \(error)")
        }
        guard target.origin == server.origin else {
            throw OAuthProtocolError("the server sent the next step to \(target.origin), not to \(server.origin): devtrust sends credentials only to the server it signs in at")
        }
        return resolved.text
    }

    private func authenticate(flowId: String, url: String, authenticator: AppNativeAuthenticator, params: [(String, String)]) throws -> AppNativeStep {
        var selected: JSONObject = ["authenticatorId": .string(authenticator.id)]
        if !params.isEmpty {
            var values = JSONObject()
            for (name, value) in params { values[name] = .string(value) }
            selected["params"] = .object(values)
        }
        let body: JSONObject = ["flowId": .string(flowId), "selectedAuthenticator": .object(selected)]
        return try AppNativeStep(response: try http.send(HTTPRequest(method: "POST", url: url, headers: [
            ("Content-Type", "application/json"), ("Accept", "application/json"),
        ], body: JSONWriter.bytes(.object(body)))))
    }
}
