import DevtrustEncoding
import DevtrustTestSupport
import Testing

/// `login --device-code` (RFC 8628) in the fast tier: in-process, against `FakeIdentityServer`, on
/// virtual time: every wait between polls ends at once, and the server, which refuses a poll that
/// comes sooner than its interval, records when each came. The same against the reference server
/// and glewlwyd in real time: DeviceCodeTests, DeviceCodeRFC8628Tests (`make test`).
@Suite struct FakeDeviceCodeTests {
    static func server(_ polls: [FakeIdentityServer.Poll], interval: Int64? = 5, expiresIn: Int64 = 600,
                       clockOffset: Double = 0) -> FakeIdentityServer.Settings {
        var settings = FakeIdentityServer.Settings()
        settings.polls = polls
        settings.deviceInterval = interval
        settings.deviceExpiresIn = expiresIn
        settings.clockOffset = clockOffset
        return settings
    }

    static func names(_ events: [JSONObject]) -> [String] { events.compactMap { $0["event"]?.stringValue } }

    @Test func anApprovedCodeSignsInAfterPollingAtTheInterval() throws {
        let setup = try FakeServerSetup(Self.server([.pending, .pending, .approve]))
        let (result, events) = try setup.deviceCodeLogin()
        #expect(result.status == 0, "\(result)")
        #expect(Self.names(events) == ["started", "polling", "polling", "polling", "success"], "\(events)")
        let started = try #require(events.first)
        #expect(started["user_code"] == .string("WDJB-MJHT") && started["verification_uri"] == .string(setup.url + "/device"), "\(started)")
        #expect(started["expires_in"] == .integer(600) && started["interval"] == .integer(5))
        // Each poll 5 s after the one before (the server's clock), none too soon, and that was all the waiting.
        #expect(setup.server.pollTimes == [[5, 10, 15]] && setup.server.pollsTooSoon == 0, "\(setup.server.pollTimes)")
        #expect(setup.time.waits == [5, 5, 5])
        #expect(events.last?["token_type"] == .string("Bearer") && events.last?["expires_in"] == .integer(3600), "\(events)")
        // Off a terminal: the code and where to enter it in plain lines; the device code never.
        #expect(result.stderr.contains("To sign in, open \(setup.url)/device on another device and enter the code:") && result.stderr.contains("    WDJB-MJHT"), "\(result.stderr)")
        let deviceCode = try #require(setup.server.deviceCodes.first)
        #expect(!result.stdout.contains(deviceCode) && !result.stderr.contains(deviceCode))
        // The ID token checked against the server's JWK set names the user; the tokens are stored.
        #expect(result.stderr.contains("signed in at \(setup.url) as client devtrust-app, user Alice Example (sub user-alice)"), "\(result.stderr)")
        let accessToken = try setup.run("access-token")
        #expect(accessToken.status == 0 && setup.server.isValidAccessToken(accessToken.output), "\(accessToken)")
    }

    /// slow_down adds 5 s to this and every later interval (RFC 8628 3.5).
    @Test func slowDownAddsFiveSecondsToEveryLaterPoll() throws {
        let setup = try FakeServerSetup(Self.server([.pending, .slowDown, .pending, .approve]))
        let (result, events) = try setup.deviceCodeLogin()
        #expect(result.status == 0, "\(result)")
        #expect(setup.server.pollTimes == [[5, 10, 20, 30]] && setup.server.pollsTooSoon == 0, "\(setup.server.pollTimes)")
        #expect(events.filter { $0["event"] == .string("polling") }.map { $0["interval"] } == [.integer(5), .integer(5), .integer(10), .integer(10)])
    }

    @Test func withoutAnIntervalItPollsEveryFiveSeconds() throws {
        let setup = try FakeServerSetup(Self.server([.pending, .approve], interval: nil))
        let (result, events) = try setup.deviceCodeLogin()
        #expect(result.status == 0 && events.first?["interval"] == .integer(5), "\(result)")
        #expect(setup.server.pollTimes == [[5, 10]] && setup.server.pollsTooSoon == 0)
    }

    /// A lost connection and a 503 back off (the interval, then doubled) and polling goes on; each is said on stderr.
    @Test func networkFailuresBackOffAndPollingGoesOn() throws {
        let setup = try FakeServerSetup(Self.server([.noAnswer, .unavailable, .approve]))
        let (result, _) = try setup.deviceCodeLogin()
        #expect(result.status == 0, "\(result)")
        #expect(setup.server.pollTimes == [[5, 10, 20]] && setup.server.pollsTooSoon == 0, "\(setup.server.pollTimes)")
        #expect(result.stderr.contains("closed the connection without an answer (Empty reply from server); trying again in 5 s"), "\(result.stderr)")
        #expect(result.stderr.contains("temporarily_unavailable") && result.stderr.contains("trying again in 10 s"), "\(result.stderr)")
    }

    @Test func aDeniedRequestExitsFourAndStoresNothing() throws {
        let setup = try FakeServerSetup(Self.server([.pending, .deny]))
        let (result, events) = try setup.deviceCodeLogin()
        #expect(result.status == 4 && result.stderr.contains("denied"), "\(result)")
        #expect(Self.names(events).suffix(2) == ["access_denied", "failure"] && events.last?["error"] == .string("access_denied"), "\(events)")
        let error = try #require(try JSONParser.parse(String(result.stderr.split(separator: "\n").last ?? "")).objectValue?["error"]?.objectValue)
        #expect(error["exitCode"] == .integer(4) && error["message"] == events.last?["description"], "\(error)")
        #expect(try setup.run("access-token").status == 3)
    }

    @Test func anExpiredCodeExitsFour() throws {
        let setup = try FakeServerSetup(Self.server([.pending, .expire]))
        let (result, events) = try setup.deviceCodeLogin()
        #expect(result.status == 4, "\(result)")
        #expect(Self.names(events).suffix(2) == ["expired", "failure"] && events.last?["error"] == .string("expired_token"), "\(events)")
    }

    /// The server never says expired: devtrust stops at expires_in (its own deadline) and polls no more.
    @Test func itStopsAtExpiresInWhenTheServerNeverSaysSo() throws {
        let setup = try FakeServerSetup(Self.server([], expiresIn: 20))
        let start = setup.time.seconds
        let (result, events) = try setup.deviceCodeLogin()
        #expect(result.status == 4 && events.last?["error"] == .string("expired_token"), "\(result)")
        #expect(setup.server.pollTimes == [[5, 10, 15]], "\(setup.server.pollTimes)")
        #expect(setup.time.seconds - start == 20, "waited \(setup.time.seconds - start) s")
    }

    /// The device code and token answers tell the server's clock too: said, and kept with the sign-in.
    @Test func theServersClockIsReadFromItsAnswers() throws {
        let setup = try FakeServerSetup(Self.server([.approve], clockOffset: -100))
        let (result, _) = try setup.deviceCodeLogin()
        #expect(result.status == 0 && result.stderr.contains("this machine's clock is 100 s ahead of https://idp.example.test's"), "\(result)")
        let signIn = try #require(try setup.status()["signIns"]?.arrayValue?.first?.objectValue)
        #expect(signIn["clockSkewSeconds"] == .integer(100), "\(signIn)")
    }

    @Test func anUnknownClientIsRefusedWithExitFour() throws {
        let setup = try FakeServerSetup()
        let result = try setup.run("login", "--device-code", "--server", setup.url, "--client-id", "someone-else", "--json")
        #expect(result.status == 4 && result.stderr.contains("invalid_client"), "\(result)")
        #expect(result.stdout.split(separator: "\n").count == 1 && result.stdout.contains(#""error":"invalid_client""#), "\(result.stdout)")
    }

    /// Before the code is shown: one failure event, exit 5.
    @Test func aServerThatIsDownExitsFive() throws {
        let setup = try FakeServerSetup()
        setup.server.goOffline()
        let (result, events) = try setup.deviceCodeLogin()
        #expect(result.status == 5 && result.stderr.contains("cannot connect to \(setup.url)/oauth2/token/.well-known/openid-configuration"), "\(result)")
        #expect(Self.names(events) == ["failure"] && events.first?["error"] == .string("network_error"), "\(events)")
    }
}
