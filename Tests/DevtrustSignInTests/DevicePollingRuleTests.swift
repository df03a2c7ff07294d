import DevtrustEncoding
import DevtrustHTTP
import DevtrustSignIn
import Synchronization
import Testing

/// A token endpoint that answers from a script, and a clock that only moves when waited on.
final class ScriptedServer: HTTPClient, Waiting, @unchecked Sendable {
    enum Answer {
        case json(Int, String)
        case networkFailure
    }

    private let state = Mutex<(answers: [Answer], time: Double, polls: [Double], waits: [Double])>(([], 1_000_000, [], []))
    let authorization: String

    init(expiresIn: Int, interval: Int?, answers: [Answer]) {
        let intervalField = interval.map { ",\"interval\":\($0)" } ?? ""
        authorization = #"{"device_code":"secret-device-code","user_code":"ABCD-EFGH","verification_uri":"https://idp/device","expires_in":\#(expiresIn)\#(intervalField)}"#
        state.withLock { $0.answers = answers }
    }

    var polls: [Double] { state.withLock { $0.polls } }

    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        if request.url.hasSuffix("/device") {
            return HTTPResponse(status: 200, headers: [], body: Array(authorization.utf8))
        }
        let answer: Answer = state.withLock { current in
            current.polls.append(current.time)
            return current.answers.isEmpty ? .json(400, #"{"error":"authorization_pending"}"#) : current.answers.removeFirst()
        }
        switch answer {
        case let .json(status, body): return HTTPResponse(status: status, headers: [], body: Array(body.utf8))
        case .networkFailure: throw .transport(url: request.url, failure: .connect, detail: "connection refused")
        }
    }

    func now() -> Double { state.withLock { $0.time } }

    func wait(until deadline: Double, tick: (Double) -> Void) {
        state.withLock { current in
            current.waits.append(deadline - current.time)
            current.time = max(current.time, deadline)
        }
    }
}

@Suite struct DevicePollingRuleTests {
    static let pending = ScriptedServer.Answer.json(400, #"{"error":"authorization_pending"}"#)
    static let slowDown = ScriptedServer.Answer.json(400, #"{"error":"slow_down"}"#)
    static let success = ScriptedServer.Answer.json(200, #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt"}"#)

    static func run(_ server: ScriptedServer) throws -> (TokenSet?, [Double], Error?) {
        let oauth = OAuthClient(http: server, clock: { Int64(server.now()) })
        let signIn = DeviceCodeSignIn(oauth: oauth, clientID: "c", scope: "openid",
                                      server: AuthorizationServer(token: "https://idp/token", deviceAuthorization: "https://idp/device"), waiting: server)
        let start = server.now()
        do {
            let tokens = try signIn.run(events: { _ in })
            return (tokens, server.polls.map { $0 - start }, nil)
        } catch {
            return (nil, server.polls.map { $0 - start }, error)
        }
    }

    @Test func waitsTheIntervalAndSlowDownAddsFiveForEveryLaterPoll() throws {
        let server = ScriptedServer(expiresIn: 600, interval: 3, answers: [Self.pending, Self.slowDown, Self.pending, Self.slowDown, Self.pending, Self.success])
        let (tokens, polls, _) = try Self.run(server)
        #expect(tokens?.accessToken == "at")
        // 3, then 3, slow_down -> 8, 8, slow_down -> 13, 13.
        #expect(zip(polls, [0] + polls).map { $0 - $1 } == [3, 3, 8, 8, 13, 13])
    }

    @Test func defaultsToFiveSecondsWithoutAnInterval() throws {
        let server = ScriptedServer(expiresIn: 600, interval: nil, answers: [Self.pending, Self.success])
        let (_, polls, _) = try Self.run(server)
        #expect(polls == [5, 10])
    }

    @Test func stopsAtExpiresInEvenIfTheServerNeverSaysSo() throws {
        let server = ScriptedServer(expiresIn: 20, interval: 5, answers: [])
        let (tokens, polls, error) = try Self.run(server)
        #expect(tokens == nil && (error as? DeviceCodeFailure) == .expired)
        #expect(polls == [5, 10, 15])
    }

    @Test func networkErrorsBackOffExponentiallyAndPollingGoesOn() throws {
        let server = ScriptedServer(expiresIn: 600, interval: 5, answers: [.networkFailure, .networkFailure, .networkFailure, .networkFailure, .networkFailure, Self.pending, Self.success])
        let (tokens, polls, _) = try Self.run(server)
        #expect(tokens != nil)
        // Five failures: waits 5, then 5, 10, 20, 40, 60 (doubling); after the pending answer, the interval again.
        #expect(zip(polls, [0] + polls).map { $0 - $1 } == [5, 5, 10, 20, 40, 60, 5])
    }

    @Test func backoffIsCappedAtSixtySeconds() throws {
        let server = ScriptedServer(expiresIn: 3600, interval: 5, answers: Array(repeating: .networkFailure, count: 8) + [Self.success])
        let (_, polls, _) = try Self.run(server)
        #expect(zip(polls, [0] + polls).map { $0 - $1 } == [5, 5, 10, 20, 40, 60, 60, 60, 60])
    }

    @Test func deniedAndExpiredEndIt() throws {
        let denied = ScriptedServer(expiresIn: 600, interval: 1, answers: [Self.pending, .json(400, #"{"error":"access_denied"}"#)])
        #expect((try Self.run(denied).2 as? DeviceCodeFailure) == .denied)
        let expired = ScriptedServer(expiresIn: 600, interval: 1, answers: [.json(400, #"{"error":"expired_token"}"#)])
        #expect((try Self.run(expired).2 as? DeviceCodeFailure) == .expired)
        let other = ScriptedServer(expiresIn: 600, interval: 1, answers: [.json(400, #"{"error":"invalid_client","error_description":"unknown client"}"#)])
        #expect((try Self.run(other).2 as? OAuthError)?.errorDescription == "unknown client")
    }
}

@Suite struct FormEncodingTests {
    @Test func encodesAndDecodes() {
        #expect(FormEncoding.encode([("a b", "c&d=e/é")]) == "a%20b=c%26d%3De%2F%C3%A9")
        #expect(FormEncoding.queryParameters("https://app/cb?code=abc%2F1&state=x+y#frag") == ["code": "abc/1", "state": "x y"])
    }

    @Test func pkceChallengeIsTheRFC7636Example() {
        // RFC 7636 appendix B.
        #expect(PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }
}
