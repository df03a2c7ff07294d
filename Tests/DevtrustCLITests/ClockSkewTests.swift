import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// A server whose clock differs from this machine's: its `Date` headers say
/// so, devtrust warns in words that name the clock, records the difference
/// (`status`), and writes device tokens in the server's time while the
/// measurement still describes this machine's clock.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct ClockSkewTests {
    /// A device with a software key and its own reference server; devtrust in-process (the clocks
    /// read are the same in any process).
    typealias Setup = ReferenceServerFixture<InProcessCLI>

    /// A device with a software key and a reference server whose clock is `offset` seconds off this one's.
    static func setup<CLI>(offset: Int, _ makeCLI: (String) -> CLI) throws -> ReferenceServerFixture<CLI> {
        try ReferenceServerFixture(makeCLI, serverArguments: ["--clock-offset", String(offset), "--device-policy"])
    }

    static func setup(offset: Int) throws -> Setup {
        try setup(offset: offset) { InProcessCLI(keystore: $0) }
    }

    /// The server's clock 100 s behind this one: tokens with this machine's iat are 100 s in
    /// its future, which it refuses (deviceData at registration, device tokens at sign-in).
    /// Through the binary: the measurement is kept between processes.
    @Test func aServerBehindThisClockGetsTokensInItsTime() throws {
        let setup = try Self.setup(offset: -100) { DevtrustBinary(keystore: $0) }
        let registered = try setup.register()
        #expect(registered.status == 0, "\(registered)")
        #expect(registered.stderr.contains("this machine's clock is 100 s ahead of \(setup.server.url)'s (its Date header)")
                || registered.stderr.contains("this machine's clock is 101 s ahead") || registered.stderr.contains("this machine's clock is 99 s ahead"),
                "\(registered.stderr)")
        #expect(registered.stderr.contains("timedatectl set-ntp true") && registered.stderr.contains("more than 30 s in its future"))
        #expect(registered.stderr.components(separatedBy: "this machine's clock is").count == 2, "warned more than once: \(registered.stderr)")

        let status = try setup.status()
        let skew = try #require(status["registrations"]?.arrayValue?.first?.objectValue?["clockSkewSeconds"]?.int64Value)
        #expect((99...101).contains(skew), "measured \(skew) s for a server 100 s behind")
        let clocks = try #require(status["clocks"]?.arrayValue?.first?.objectValue)
        #expect(clocks["server"] == .string(setup.server.url) && clocks["exceedsTolerance"] == .bool(true) && clocks["correctsTokens"] == .bool(true))
        let text = try setup.cli.run("status").output
        #expect(text.contains("\(setup.server.url): +\(skew) s, measured ") && text.contains("device tokens for it are written in its time"), "\(text)")

        // A token minted later, in another run, still in the server's time: accepted.
        // The wall clock read before and after the run brackets the one devtrust read (a time read
        // after the checks below would drift from it on a loaded machine); 1 s for the measured skew.
        let before = Self.wallClockSeconds()
        let token = try setup.cli.run("token")
        let after = Self.wallClockSeconds()
        #expect(token.status == 0)
        let check = try setup.deviceCheck(token.output)
        #expect(check["accepted"] == .bool(true), "\(check)")
        let claims = try JSONParser.parse(Base64URL.decode(String(token.output.split(separator: ".")[1]))).objectValue!
        let iat = try #require(claims["iat"]?.int64Value)
        #expect((before - skew - 1)...(after - skew + 1) ~= iat, "iat \(iat), minted between \(before) and \(after) with a skew of \(skew) s")

        // App-native sign-in: its device token is accepted too.
        let login = try setup.cli.run(["login", "--server", setup.server.url, "--client-id", "devtrust-app", "--non-interactive"] + SignInTests.basicAnswers)
        #expect(login.status == 0, "\(login)")
        let records = try setup.server.get("/api/signin-records").arrayValue?.compactMap(\.objectValue) ?? []
        #expect(records.first?["accepted"] == .bool(true), "\(records)")
    }

    /// The server's clock 400 s ahead: tokens are 400 s old when they arrive, which it drops.
    @Test func aServerAheadOfThisClockIsSaidAndCorrectedFor() throws {
        let setup = try Self.setup(offset: 400)
        let registered = try setup.register()
        #expect(registered.status == 0, "\(registered)")
        #expect(registered.stderr.contains("s behind \(setup.server.url)'s (its Date header): the server drops device tokens older than 5 minutes"),
                "\(registered.stderr)")
        let token = try setup.cli.run("token").output
        #expect(try setup.deviceCheck(token)["accepted"] == .bool(true))
    }

    /// Device code and token requests read the Date header too.
    @Test func deviceCodeAndTokenAnswersAreRead() throws {
        let server = try ReferenceServer(["--clock-offset", "-100", "--device-interval", "1", "--device-approve-after", "1"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        let login = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("s ahead of \(server.url)'s (its Date header)"), "\(login.stderr)")
        let skew = try JSONParser.parse(try cli.run("status", "--json").output).objectValue?["signIns"]?.arrayValue?.first?.objectValue?["clockSkewSeconds"]?.int64Value
        #expect(skew.map { (99...101).contains($0) } == true, "\(String(describing: skew))")
        let refreshed = try cli.run("access-token", "--refresh")
        #expect(refreshed.status == 0 && refreshed.stderr.contains("s ahead of \(server.url)'s"), "\(refreshed)")
    }

    /// A CDN's answer to a GET keeps the Date of when it was fetched (and says its Age): it says
    /// nothing about the server's clock now.
    @Test func cachedAnswersDoNotTellTheClock() throws {
        let setup = try Setup(["--cached-gets", "1800"], register: true)
        let login = try setup.login()
        #expect(login.status == 0 && !login.stderr.contains("clock"), "\(login)")
        let skew = try setup.status()["clocks"]?.arrayValue?.first?.objectValue?["clockSkewSeconds"]?.int64Value
        #expect(skew.map { abs($0) <= 1 } == true, "\(String(describing: skew))")
        let records = try setup.signInRecords()
        #expect(records.first?["accepted"] == .bool(true), "\(records)")
    }

    /// Within what the server accepts: nothing to say, and no correction.
    @Test func aSmallDifferenceIsNotWarnedAbout() throws {
        let setup = try Self.setup(offset: 3)
        let registered = try setup.register()
        #expect(registered.status == 0 && !registered.stderr.contains("clock"), "\(registered)")
        let status = try setup.status()
        #expect(status["clocks"]?.arrayValue?.first?.objectValue?["correctsTokens"] == .bool(false))
        let before = Self.wallClockSeconds()
        let token = try setup.cli.run("token").output
        let after = Self.wallClockSeconds()
        let claims = try JSONParser.parse(Base64URL.decode(String(token.split(separator: ".")[1]))).objectValue!
        #expect(before...after ~= claims["iat"]!.int64Value!, "iat \(claims["iat"]!), minted between \(before) and \(after)")
    }

    /// This machine's wall clock in whole seconds, as devtrust reads it for iat.
    static func wallClockSeconds() -> Int64 { Int64(Date().timeIntervalSince1970.rounded(.down)) }

    /// Once this machine's clock is set or slewed (the wall clock moved against the raw monotonic
    /// clock), the machine restarted, or an hour passed (the server's clock may have been fixed),
    /// the old measurement is not used: tokens carry this clock's iat.
    @Test(arguments: ["clock set", "another boot", "an hour ago"])
    func aStaleCorrectionIsDropped(_ change: String) throws {
        let setup = try Self.setup(offset: -100)
        #expect(try setup.register().status == 0)
        let clockFile = setup.cli.cacheDirectory + "/clock.json"
        var document = try JSONParser.parse(Array(try #require(FileManager.default.contents(atPath: clockFile)))).objectValue!
        var record = try #require(document[setup.server.url]?.objectValue)
        switch change {
        case "clock set":
            // As if the clock had been 100 s ahead of where it is now: it was set back since.
            record["wallMinusRaw"] = .number(String(record["wallMinusRaw"]!.doubleValue! + 100))
        case "an hour ago":
            // Measured 3601 s ago by both clocks: nothing moved, only time passed.
            record["rawAt"] = .number(String(record["rawAt"]!.doubleValue! - 3601))
            record["measuredAt"] = .integer(record["measuredAt"]!.int64Value! - 3601)
        default:
            record["bootId"] = .string("00000000-0000-4000-8000-000000000000")
        }
        document[setup.server.url] = .object(record)
        FileManager.default.createFile(atPath: clockFile, contents: Data(JSONWriter.bytes(.object(document))), attributes: [.posixPermissions: 0o600])
        let before = Self.wallClockSeconds()
        let token = try setup.cli.run("token").output
        let after = Self.wallClockSeconds()
        let claims = try JSONParser.parse(Base64URL.decode(String(token.split(separator: ".")[1]))).objectValue!
        #expect(before...after ~= claims["iat"]!.int64Value!, "\(change): the stale correction was used")
        #expect(try setup.status()["clocks"]?.arrayValue?.first?.objectValue?["correctsTokens"] == .bool(false))
    }
}
