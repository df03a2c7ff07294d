import DevtrustEncoding
import DevtrustHTTP
import DevtrustKeystore
import DevtrustSignIn
import Synchronization
import Testing

/// A token endpoint that answers from a script, and clocks that only move when waited on:
/// a monotonic one, and a wall clock that someone may set (`wallClockJump`, at the end of the first wait).
final class ScriptedServer: HTTPClient, Waiting, @unchecked Sendable {
    enum Answer {
        case json(Int, String)
        case networkFailure
    }

    private let state = Mutex<(answers: [Answer], time: Double, wallOffset: Double, polls: [Double], waits: [Double])>(([], 1_000_000, 1_700_000_000, [], []))
    let authorization: String
    let wallClockJump: Double

    init(expiresIn: Int, interval: Int?, answers: [Answer], wallClockJump: Double = 0) {
        let intervalField = interval.map { ",\"interval\":\($0)" } ?? ""
        authorization = #"{"device_code":"secret-device-code","user_code":"ABCD-EFGH","verification_uri":"https://idp/device","expires_in":\#(expiresIn)\#(intervalField)}"#
        self.wallClockJump = wallClockJump
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

    func wallClock() -> Double { state.withLock { $0.time + $0.wallOffset } }

    func wait(until deadline: Double, tick: (Double) -> Void) {
        state.withLock { current in
            current.waits.append(deadline - current.time)
            current.time = max(current.time, deadline)
            if current.waits.count == 1 { current.wallOffset += wallClockJump }
        }
    }
}

@Suite struct DevicePollingRuleTests {
    static let pending = ScriptedServer.Answer.json(400, #"{"error":"authorization_pending"}"#)
    static let slowDown = ScriptedServer.Answer.json(400, #"{"error":"slow_down"}"#)
    static let success = ScriptedServer.Answer.json(200, #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt"}"#)

    static func run(_ server: ScriptedServer, events: (DeviceCodeEvent) -> Void = { _ in }) throws -> (TokenSet?, [Double], Error?) {
        let oauth = OAuthClient(http: server, clock: { Int64(server.wallClock()) })
        let signIn = DeviceCodeSignIn(oauth: oauth, clientID: "c", scope: "openid",
                                      server: AuthorizationServer(token: "https://idp/token", deviceAuthorization: "https://idp/device"), waiting: server)
        let start = server.now()
        do {
            let tokens = try signIn.run(events: events)
            return (tokens, server.polls.map { $0 - start }, nil)
        } catch {
            return (nil, server.polls.map { $0 - start }, error)
        }
    }

    static func gaps(_ polls: [Double]) -> [Double] { zip(polls, [0] + polls).map { $0 - $1 } }

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

    @Test func backoffNeverPollsSoonerThanTheIntervalAndGrowsPastSixtySecondsWhenTheIntervalIsLonger() throws {
        // The server asks for 90 s: four network errors in a row wait 90, 180, 360, 720 s (never 60).
        let long = ScriptedServer(expiresIn: 7200, interval: 90, answers: Array(repeating: .networkFailure, count: 4) + [Self.success])
        let (tokens, polls, _) = try Self.run(long)
        #expect(tokens != nil)
        #expect(Self.gaps(polls) == [90, 90, 180, 360, 720])
        // The current interval counts: 58 s, slow_down makes it 63 s, and the back-off starts there.
        let slowed = ScriptedServer(expiresIn: 7200, interval: 58, answers: [Self.slowDown, .networkFailure, .networkFailure, .networkFailure, Self.success])
        let (_, slowedPolls, _) = try Self.run(slowed)
        #expect(Self.gaps(slowedPolls) == [58, 63, 63, 126, 252])
        // An interval under 60 s still stops growing at 60 s, and never goes below the interval.
        let medium = ScriptedServer(expiresIn: 7200, interval: 40, answers: [.networkFailure, .networkFailure, .networkFailure, Self.success])
        #expect(Self.gaps(try Self.run(medium).1) == [40, 40, 60, 60])
    }

    @Test func backoffRuleForEveryIntervalAndRun() {
        for interval: Int64 in [1, 5, 30, 59, 60, 61, 90, 600] {
            var wait: Int64 = 0
            var previous: Int64 = 0
            for run in 1...12 {
                wait = PollingLoop.backoff(after: wait, interval: interval)
                #expect(wait >= interval, "interval \(interval), error \(run): \(wait)")
                if interval > 60 {
                    #expect(wait == interval << (run - 1), "interval \(interval), error \(run): \(wait)")
                } else {
                    #expect(wait == min(max(interval << (run - 1), interval), 60), "interval \(interval), error \(run): \(wait)")
                    #expect(wait >= previous)
                }
                previous = wait
            }
        }
    }

    @Test func aServerFailureWithAJSONErrorIsTransientLikeOneWithout() throws {
        let jsonFailures = ScriptedServer(expiresIn: 600, interval: 5, answers: [
            .json(503, #"{"error":"temporarily_unavailable"}"#), .json(500, #"{"error":"server_error","error_description":"database down"}"#),
            .json(429, #"{"error":"too_many_requests"}"#), Self.pending, Self.success])
        var messages = [String]()
        let (tokens, polls, error) = try Self.run(jsonFailures) { event in
            if case let .networkError(message, _) = event { messages.append(message) }
        }
        #expect(tokens?.accessToken == "at", "\(String(describing: error))")
        #expect(Self.gaps(polls) == [5, 5, 10, 20, 5])
        #expect(messages.count == 3 && messages[0].includes("HTTP 503") && messages[1].includes("database down"), "\(messages)")
        // The same statuses without JSON: the same polls.
        let plainFailures = ScriptedServer(expiresIn: 600, interval: 5, answers: [
            .json(503, "<html>Service Unavailable</html>"), .json(500, ""), .json(429, "slow down"), Self.pending, Self.success])
        #expect(Self.gaps(try Self.run(plainFailures).1) == [5, 5, 10, 20, 5])
        // A 4xx refusal still ends it.
        let refused = ScriptedServer(expiresIn: 600, interval: 5, answers: [.json(400, #"{"error":"invalid_grant"}"#)])
        #expect((try Self.run(refused).2 as? OAuthError)?.error == "invalid_grant")
    }

    @Test func theDeadlineRunsOnTheMonotonicClockNotTheWallClock() throws {
        // The wall clock is set an hour forward before the first poll: polling goes on, and ends with tokens.
        let forward = ScriptedServer(expiresIn: 20, interval: 5, answers: [Self.pending, Self.pending, Self.success], wallClockJump: 3600)
        let (tokens, polls, error) = try Self.run(forward)
        #expect(tokens?.accessToken == "at", "\(String(describing: error))")
        #expect(polls == [5, 10, 15])
        // Set an hour back: the sign-in still stops at expires_in (three polls in 20 s).
        let backward = ScriptedServer(expiresIn: 20, interval: 5, answers: [], wallClockJump: -3600)
        let (none, backwardPolls, expired) = try Self.run(backward)
        #expect(none == nil && (expired as? DeviceCodeFailure) == .expired)
        #expect(backwardPolls == [5, 10, 15])
        // next_poll_at is shown in wall-clock time.
        var shown = [Double]()
        let display = ScriptedServer(expiresIn: 20, interval: 5, answers: [Self.pending, Self.success], wallClockJump: 3600)
        _ = try Self.run(display) { event in
            if case let .polling(_, _, _, nextPollAt) = event { shown.append(nextPollAt) }
        }
        let startWall: Double = 1_701_000_000
        #expect(shown == [startWall + 5, startWall + 3600 + 10])
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
