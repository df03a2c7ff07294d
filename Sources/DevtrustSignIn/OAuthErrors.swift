import DevtrustErrors

/// The authorization server refused (an OAuth error answer).
public struct OAuthError: Error, Equatable, Sendable, CustomStringConvertible {
    public let error: String
    public let errorDescription: String?
    public let httpStatus: Int
    /// A 401 without an OAuth error body: it may come from a proxy or gateway in
    /// front of the server, not from the server.
    public let bodyless: Bool
    /// The grant_type of the token request refused (nil for other requests): what `invalid_grant` is about.
    public let grantType: String?

    public init(error: String, errorDescription: String?, httpStatus: Int, bodyless: Bool = false, grantType: String? = nil) {
        self.error = error
        self.errorDescription = errorDescription
        self.httpStatus = httpStatus
        self.bodyless = bodyless
        self.grantType = grantType
    }

    /// Only `invalid_grant` in the token endpoint's own error body (or a grant with
    /// nothing to refresh) says the grant is dead; an outage, a proxy's answer or any
    /// other error is not a revocation.
    public var meansGrantIsDead: Bool {
        error == "invalid_grant" && !bodyless && httpStatus < 500
    }

    /// A failure that may pass (a 5xx, a bodyless answer): worth running the command again.
    public var mayPass: Bool { bodyless || httpStatus >= 500 }

    public var description: String {
        "the server refused: \(error)" + (errorDescription.map { " (\($0))" } ?? "") + (hint.map { "; \($0)" } ?? "")
    }

    var hint: String? {
        switch error {
        case "invalid_grant" where grantType == CIBAGrant.type:
            // glewlwyd, for one: a second request for the same user replaces the first.
            return "the sign-in request was replaced by a newer one for the same user, or is no longer valid: run the command again"
        case "invalid_grant": return "the grant (code or refresh token) is no longer valid: sign in again"
        case "invalid_client", "unauthorized_client": return "check --client-id and that the client is allowed this grant"
        case "invalid_scope": return "check --scope"
        case "access_denied": return "the user or the server denied the request"
        case "expired_token": return "the code expired before it was approved: run the command again"
        case "unknown_user_id": return "the server knows no user by --login-hint: check it, in the form the server wants"
        default: return nil
        }
    }
}

/// The server does not speak OAuth/OIDC as expected: a protocol failure, not a refusal.
public struct OAuthProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    /// Worth asking again (device-code polling does): an error status without an OAuth body,
    /// as a failing server (5xx, 429) or a proxy or firewall in front of it answers. Not for
    /// 404, 405 or 410 (the endpoint is not there) or a success without what it must hold.
    public let mayPass: Bool

    public init(_ message: String, mayPass: Bool = false) {
        self.message = message
        self.mayPass = mayPass
    }

    public var description: String { "the server does not answer as an OAuth server should: \(message)" }
}

/// A sign-in step devtrust cannot take: the server asks for what devtrust does not do.
public struct SignInUnsupportedError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

extension OAuthError: ClassifiedError {
    /// The server's refusal, with its code and description for the front ends that pass them on.
    /// The hint stays in the sentence, as `--json` has always shown it; the server's words in it are
    /// shown on one line.
    public var classification: ErrorClassification {
        ErrorClassification(.oauthError(code: error, description: errorDescription), summary: description, quotesServer: true)
    }
}

extension OAuthProtocolError: ClassifiedError {
    /// Its message may quote the server (an issuer, an endpoint): shown on one line.
    public var classification: ErrorClassification { ErrorClassification(.protocolViolation, summary: description, quotesServer: true) }
}

extension SignInUnsupportedError: ClassifiedError {
    public var classification: ErrorClassification { ErrorClassification(.unsupported, summary: description) }
}
