import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeystore
@testable import DevtrustSignIn
import Synchronization
import Testing

/// A server that answers every request with one fixed answer, and keeps the requests.
final class FixedAnswerServer: HTTPClient, @unchecked Sendable {
    let status: Int
    let body: String
    let contentType: String
    private let sent = Mutex<[HTTPRequest]>([])

    init(_ status: Int, _ body: String, contentType: String = "application/json") {
        self.status = status
        self.body = body
        self.contentType = contentType
    }

    var requests: [HTTPRequest] { sent.withLock { $0 } }

    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        sent.withLock { $0.append(request) }
        return HTTPResponse(status: status, headers: [("Content-Type", contentType)], body: Array(body.utf8))
    }
}

/// initiateCIBA's reading of the backchannel authentication answer (CIBA Core 7.3), and the
/// expires_in and interval rules it shares with the device authorization answer.
@Suite struct CIBARequestTests {
    static let server = AuthorizationServer(token: "https://idp.example/token", deviceAuthorization: "https://idp.example/device",
                                            backchannelAuthentication: "https://idp.example/ciba")
    static let request = BackchannelAuthenticationRequest(scope: "openid", loginHint: "alice", bindingMessage: "Kiosk 7", requestedExpiry: 300)

    static func initiate(_ answer: String, server: AuthorizationServer = server) throws -> BackchannelAuthentication {
        let http = FixedAnswerServer(200, answer)
        return try OAuthClient(http: http, clock: { 0 }).initiateCIBA(request, clientID: "app", server: server)
    }

    @Test func sendsThePublicClientsRequest() throws {
        let http = FixedAnswerServer(200, #"{"auth_req_id":"id-1","expires_in":120,"interval":2}"#)
        let answer = try OAuthClient(http: http, clock: { 0 }).initiateCIBA(Self.request, clientID: "app", server: Self.server)
        #expect(answer.authReqID == "id-1" && answer.expiresIn == 120 && answer.interval == 2)
        let sent = try #require(http.requests.first)
        #expect(sent.method == "POST" && sent.url == "https://idp.example/ciba")
        #expect(String(decoding: sent.body ?? [], as: UTF8.self) == "client_id=app&scope=openid&login_hint=alice&binding_message=Kiosk%207&requested_expiry=300")
    }

    /// (expires_in, interval) as the server wrote them, and as devtrust takes them.
    @Test(arguments: [
        (#""expires_in":600,"interval":5"#, 600, 5),
        // A day at most; the interval within the life.
        (#""expires_in":1000000000000,"interval":3"#, 86_400, 3),
        (#""expires_in":9223372036854775807,"interval":9223372036854775807"#, 86_400, 86_400),
        (#""expires_in":60,"interval":600"#, 60, 60),
        // 0, negative or not a number: the 5 s default.
        (#""expires_in":60,"interval":0"#, 60, nil),
        (#""expires_in":60,"interval":-3"#, 60, nil),
        (#""expires_in":60,"interval":"soon""#, 60, nil),
        (#""expires_in":60,"interval":true"#, 60, nil),
        (#""expires_in":60"#, 60, nil),
        // Numbers as strings, and with a fraction, as some servers write them.
        (#""expires_in":"600","interval":"3""#, 600, 3),
        (#""expires_in":8.0,"interval":2.0"#, 8, 2),
        (#""expires_in":1e3,"interval":"2.5""#, 1000, 2),
    ] as [(String, Int64, Int64?)])
    func readsExpiresInAndInterval(members: String, expiresIn: Int64, interval: Int64?) throws {
        let answer = try Self.initiate(#"{"auth_req_id":"id-1","# + members + "}")
        #expect(answer.expiresIn == expiresIn && answer.interval == interval, "\(members): \(answer.expiresIn) \(String(describing: answer.interval))")
        // The device authorization answer is read by the same rules.
        let device = FixedAnswerServer(200, #"{"device_code":"dc","user_code":"U","verification_uri":"https://idp.example/d","#
                                       + members + "}")
        let authorization = try OAuthClient(http: device, clock: { 0 }).authorizeDevice(clientID: "app", scope: "openid", server: Self.server)
        #expect(authorization.expiresIn == expiresIn && authorization.interval == interval, "\(members)")
    }

    @Test(arguments: [#"{"expires_in":60}"#, #"{"auth_req_id":"","expires_in":60}"#, #"{"auth_req_id":7,"expires_in":60}"#,
                      #"{"auth_req_id":"id-1"}"#, #"{"auth_req_id":"id-1","expires_in":0}"#, #"{"auth_req_id":"id-1","expires_in":-5}"#,
                      #"{"auth_req_id":"id-1","expires_in":"never"}"#, #"{"auth_req_id":"id-1","expires_in":null}"#])
    func anAnswerWithoutAnIDOrALifeIsAProtocolError(answer: String) {
        #expect(throws: OAuthProtocolError("the backchannel authentication answer lacks auth_req_id or expires_in")) { try Self.initiate(answer) }
    }

    /// An unusable endpoint is said when CIBA uses it, and nothing is sent to it.
    @Test(arguments: ["http://idp.example/ciba", "ftp://idp.example/ciba", "not a url"])
    func anUnusableEndpointIsRefusedBeforeAnythingIsSent(endpoint: String) {
        var server = Self.server
        server.backchannelAuthentication = endpoint
        let http = FixedAnswerServer(200, #"{"auth_req_id":"id-1","expires_in":60}"#)
        #expect(throws: OAuthProtocolError.self) {
            try OAuthClient(http: http, clock: { 0 }).initiateCIBA(Self.request, clientID: "app", server: server)
        }
        #expect(http.requests.isEmpty)
    }
}

/// Text the server shows (an error_description, an error page) never carries the secret the
/// request sent: an auth_req_id, a device code, a refresh token.
@Suite struct ServerTextSecretTests {
    static let server = AuthorizationServer(token: "https://idp.example/token")
    static let secret = "AIDSECRET-0123456789abcdefghijklmnopqrstuvwxyz/+="

    static func poll(_ http: FixedAnswerServer) throws -> DevicePollResult {
        try OAuthClient(http: http, clock: { 0 }).pollCIBA(BackchannelAuthentication(authReqID: secret, expiresIn: 60, interval: nil),
                                                            clientID: "app", server: server)
    }

    @Test func anErrorDescriptionAndAnErrorThatQuoteTheIDShowAPlaceholder() throws {
        let http = FixedAnswerServer(400, #"{"error":"bad \#(Self.secret)","error_description":"unknown auth_req_id \#(Self.secret)"}"#)
        do {
            _ = try Self.poll(http)
            Issue.record("no error")
        } catch let error as OAuthError {
            #expect(error.error == "bad [auth_req_id]" && error.errorDescription == "unknown auth_req_id [auth_req_id]", "\(error)")
        }
    }

    /// The page is cut to a preview after the secret is replaced: not even its first characters show.
    @Test(arguments: ["unknown auth_req_id \(secret)", String(repeating: "x", count: 70) + secret,
                      "echo: grant_type=x&auth_req_id=" + FormEncoding.escape(secret), #"{"note":"\#(secret.replacingSlashes())"}"#])
    func aPageThatRepeatsTheIDShowsAPlaceholder(page: String) throws {
        do {
            _ = try Self.poll(FixedAnswerServer(400, page, contentType: "text/plain"))
            Issue.record("no error")
        } catch let error as OAuthProtocolError {
            #expect(error.mayPass && !error.message.contains("AIDSECRET") && !error.message.contains("0123456789"), "\(error)")
        }
    }

    @Test func aFailingServerThatQuotesTheDeviceCodeShowsAPlaceholder() throws {
        let http = FixedAnswerServer(503, #"{"error":"temporarily_unavailable","error_description":"device_code secret-device-code-42 is busy"}"#)
        let authorization = DeviceAuthorization(deviceCode: "secret-device-code-42", userCode: "U", verificationURI: "https://idp.example/d",
                                                verificationURIComplete: nil, expiresIn: 60, interval: nil)
        let result = try OAuthClient(http: http, clock: { 0 }).pollDevice(authorization, clientID: "app", server: Self.server)
        guard case let .unavailable(message) = result else { Issue.record("\(result)"); return }
        #expect(message.contains("device_code [device_code] is busy") && !message.contains("secret-device-code-42"), "\(message)")
    }

    @Test func aRefusedRefreshThatQuotesTheRefreshTokenShowsAPlaceholder() {
        let http = FixedAnswerServer(400, #"{"error":"invalid_grant","error_description":"refresh token rt-SECRET-77 was revoked"}"#)
        let tokens = TokenSet(accessToken: "at", tokenType: "Bearer", refreshToken: "rt-SECRET-77", idToken: nil, scope: nil, expiresAt: 0,
                              tokenEndpoint: "https://idp.example/token", revocationEndpoint: nil, expiryAssumed: false)
        #expect(throws: OAuthError(error: "invalid_grant", errorDescription: "refresh token [refresh_token] was revoked", httpStatus: 400,
                                   grantType: "refresh_token")) {
            try OAuthClient(http: http, clock: { 0 }).refresh(tokens, clientID: "app")
        }
    }
}

extension String {
    /// JSON's escaped slash, as some servers write "/" in a string.
    fileprivate func replacingSlashes() -> String {
        String(unicodeScalars.flatMap { $0 == "/" ? ["\\", "/"] : [Character($0)] })
    }
}
