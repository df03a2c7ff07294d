import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `login --browser` on a machine with other users (issue 25), with two real Unix users
/// (useradd, runuser), so that what the attacker can read in /proc and whose connection
/// the listener takes are the kernel's decisions. The victim's browser is a stand-in
/// (Tests/Interop/standin_browser.py, installed as xdg-open) signed in at the reference
/// server as alice; the attacker (Tests/Interop/local_attacker.py) is signed in as mallory.
@Suite(.enabled(if: ReferenceServer.shouldRun && LocalUser.canMake)) struct LocalUsersSignInTests {
    static let alice = "alice@example.com"

    /// The reference server's `sub` for a user (Tests/ReferenceServer/signin.py).
    static func subject(_ user: String) -> String {
        let digest = try? ProcessRunner.run(ExternalTool.python.rawValue, ["-c", "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest()[:12])", user])
        return "user-" + (digest?.output ?? "")
    }

    /// Two users, the victim's devtrust registered at a reference server that approves
    /// browser sign-ins, and a directory both can write for the stand-ins' notes.
    final class Machine {
        let scratch = TemporaryDirectory("local-users")
        let victim: LocalUser
        let attacker: LocalUser
        let server: ReferenceServer
        let binary: String
        let attackerScript: String
        var exchange: String { scratch.file("exchange") }
        var victimHome: String { scratch.file("victim") }

        init(_ serverArguments: [String] = []) throws {
            victim = try LocalUser("victim")
            attacker = try LocalUser("attacker")
            server = try ReferenceServer(["--browser-login", "approve"] + serverArguments)
            // Others may pass through the scratch directory, not list it.
            chmod(scratch.path, 0o711)
            let tools = scratch.file("tools")
            try FileManager.default.createDirectory(atPath: tools, withIntermediateDirectories: true)
            chmod(tools, 0o755)
            binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: tools)
            attackerScript = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/local_attacker.py"), into: tools)
            try FileManager.default.createDirectory(atPath: exchange, withIntermediateDirectories: true)
            chmod(exchange, 0o1777)
            // The victim's own directories (0700) and their browser as xdg-open.
            for directory in ["bin", "ks", "cache", "config", "home"] {
                try FileManager.default.createDirectory(atPath: victimHome + "/" + directory, withIntermediateDirectories: true)
                chmod(victimHome + "/" + directory, 0o700)
            }
            let browser = victimHome + "/bin/xdg-open"
            _ = FileManager.default.createFile(atPath: browser, contents: FileManager.default.contents(atPath: Repository.path("Tests/Interop/standin_browser.py")))
            chmod(browser, 0o755)
            chmod(victimHome, 0o700)
            try victim.own(victimHome)
            let initialized = try victimDevtrust(["init", "--backend", "software", "-q"])
            guard initialized.status == 0 else { throw FixtureError("init as the victim: \(initialized)") }
            // The answers on stdin: a password on a command line is what this suite is about.
            let answers = #"{"http://wso2.com/claims/emailaddress": "alice@example.com", "password": "correct horse", "otp": "123456"}"#
            let registered = try victimDevtrust(["register", "--server", server.url, "--non-interactive", "--inputs", "-", "-q"], stdin: answers)
            guard registered.status == 0 else { throw FixtureError("register as the victim: \(registered)") }
        }

        /// The victim's environment: their keystore, cache and configuration, a desktop, their browser.
        var victimEnvironment: [String: String] {
            ["PATH": victimHome + "/bin:/usr/bin:/bin", "HOME": victimHome + "/home", "DEVTRUST_KEYSTORE": victimHome + "/ks",
             "XDG_CACHE_HOME": victimHome + "/cache", "XDG_CONFIG_HOME": victimHome + "/config", "DISPLAY": ":99",
             "STANDIN_EXCHANGE": exchange, "STANDIN_USER": LocalUsersSignInTests.alice]
        }

        func victimDevtrust(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> ProcessResult {
            try victim.run(binary, arguments, environment: victimEnvironment.merging(environment) { $1 }, stdin: stdin.map { Array($0.utf8) })
        }

        func startVictimDevtrust(_ arguments: [String], environment: [String: String] = [:]) throws -> BackgroundProcess {
            try victim.start(binary, arguments, environment: victimEnvironment.merging(environment) { $1 })
        }

        /// A note a stand-in wrote in the exchange directory, once it is there.
        func note(_ name: String, seconds: Double = 60) -> JSONObject? {
            let deadline = Date().addingTimeInterval(seconds)
            repeat {
                if let bytes = FileManager.default.contents(atPath: exchange + "/" + name),
                   let object = (try? JSONParser.parse(Array(bytes)))?.objectValue { return object }
                usleep(50_000)
            } while Date() < deadline
            return nil
        }

        func stopStandIns() {
            _ = FileManager.default.createFile(atPath: exchange + "/stop", contents: Data("stop\n".utf8))
            chmod(exchange + "/stop", 0o644)
        }

        func victimSignIns() throws -> [JSONObject] {
            try JSONParser.parse(try victimDevtrust(["status", "--json"]).stdout).objectValue?["signIns"]?.arrayValue?.compactMap(\.objectValue) ?? []
        }

        var registrationId: JSONValue? {
            (try? JSONParser.parse(try victimDevtrust(["status", "--json"]).stdout))?.objectValue?["registrations"]?.arrayValue?.first?.objectValue?["registrationId"]
        }

        func records() throws -> [JSONObject] {
            try server.get("/api/signin-records").arrayValue?.compactMap(\.objectValue) ?? []
        }
    }

    /// The attacker scans every process of the victim's for URLs while the victim's browser
    /// starts, and replays what it finds from their own browser (the issue's attack: the URL
    /// on xdg-open's command line held the state, the PKCE challenge and a fresh device token;
    /// with --par, the request_uri). Now the attacker finds only the handoff page's URL, which
    /// refuses them, and the victim signs in as themselves with an accepted device token.
    @Test(arguments: [false, true]) func anotherUserReadingProcFindsNothingToReplay(par: Bool) throws {
        let machine = try Machine()
        let scanner = try machine.attacker.start(ExternalTool.python.rawValue, [machine.attackerScript, "scan", machine.exchange, String(machine.victim.uid)])
        defer { machine.stopStandIns(); _ = scanner.finish() }
        // The victim's browser opens its URL only once the attacker has scanned while it ran.
        let login = try machine.victimDevtrust(["login", "--browser", "--server", machine.server.url, "--client-id", "devtrust-app", "--timeout", "90"]
                                               + (par ? ["--par"] : []),
                                               environment: ["STANDIN_AFTER": machine.exchange + "/attacker-scanned"])
        machine.stopStandIns()
        #expect(scanner.finish() != nil, "the attacker did not stop")
        let report = try #require(machine.note("attacker.json"), "the attacker wrote no report")
        let found = report["found"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let secrets = found.filter { $0["secret"] == .bool(true) }
        #expect(secrets.isEmpty, "another user read a sign-in's secrets from /proc: \(secrets)")
        // The scan did see the victim's processes: the browser's command line, with the handoff page.
        let handoff = found.compactMap { $0["url"]?.stringValue }.filter { $0.hasPrefix("http://127.0.0.1:") && $0.contains("/devtrust-sign-in/") }
        #expect(handoff.count == 1, "\(found)")
        let replays = report["replays"]?.arrayValue?.compactMap(\.objectValue) ?? []
        for replay in replays where replay["replayed"]?.stringValue == handoff.first {
            #expect(replay["status"] == .integer(403) && replay["body"]?.stringValue?.contains("This sign-in belongs to someone else") == true, "\(replay)")
        }
        #expect(!replays.isEmpty, "\(report)")
        // The victim signed in as themselves, with their own code and an accepted device token.
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("from another user of this machine (uid \(machine.attacker.uid))"), "\(login.stderr)")
        let browser = try #require(machine.note("browser.json"))
        #expect(browser["status"] == .integer(200) && browser["body"]?.stringValue?.contains("<h1>Signed in</h1>") == true, "\(browser)")
        let signIn = try #require(try machine.victimSignIns().first)
        #expect(signIn["subject"] == .string(Self.subject(Self.alice)), "the victim's devtrust keeps someone else's session: \(signIn)")
        let browserRecords = try machine.records().filter { $0["path"] == .string("browser") }
        #expect(browserRecords.count == 1 && browserRecords.first?["user"] == .string(Self.alice), "\(browserRecords)")
        let record = try #require(browserRecords.first)
        #expect(record["accepted"] == .bool(true) && record["deviceId"] == machine.registrationId && record["pushed"] == .bool(par), "\(record)")
    }

    /// The attacker learns the state anyway (here: the test hands over the URL the victim's
    /// devtrust printed) and sends their own code to the victim's listener through the server's
    /// redirect, without spending the device token. The listener refuses the connection as
    /// another user's, keeps waiting, and the victim's own browser then signs in.
    @Test func aCallbackFromAnotherUsersConnectionIsRefused() throws {
        let machine = try Machine()
        let login = try machine.startVictimDevtrust(["login", "--browser", "--no-browser", "--server", machine.server.url,
                                                     "--client-id", "devtrust-app", "--timeout", "90"])
        #expect(login.waitFor { _, stderr in stderr.contains("Waiting up to") }, "\(login.stderr)")
        let url = try #require(login.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix(machine.server.url + "/oauth2/authorize?") }, "\(login.stderr)")
        var withoutToken = URLComponents(string: url)!
        withoutToken.queryItems = withoutToken.queryItems?.filter { $0.name != "device_token" }
        let attack = try machine.attacker.run(ExternalTool.python.rawValue, [machine.attackerScript, "replay", withoutToken.string!])
        let attacked = try #require(try JSONParser.parse(attack.stdout).objectValue, "\(attack)")
        // The server sent the attacker's browser to the victim's listener, which refused it.
        #expect(attacked["chain"]?.arrayValue?.first?.objectValue?["status"] == .integer(302), "\(attacked)")
        #expect(attacked["status"] == .integer(403) && attacked["body"]?.stringValue?.contains("This sign-in belongs to someone else") == true,
                "the listener took another user's callback: \(attacked)")
        #expect(login.isRunning, "the sign-in ended on another user's callback: \(login.stderr)")
        // The victim's browser, on the URL with its device token.
        let browser = try machine.victim.run(ExternalTool.python.rawValue, [DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/standin_browser.py"),
                                                                                                            into: machine.scratch.file("tools")), url],
                                             environment: ["STANDIN_EXCHANGE": machine.exchange, "STANDIN_USER": Self.alice])
        #expect(browser.status == 0, "\(browser)")
        let page = try #require(machine.note("browser.json"))
        #expect(page["status"] == .integer(200) && page["body"]?.stringValue?.contains("<h1>Signed in</h1>") == true, "\(page)")
        let result = try #require(login.finish(), "login --browser did not end after the victim's callback")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("refused a connection") && result.stderr.contains("(uid \(machine.attacker.uid))"), "\(result.stderr)")
        let signIn = try #require(try machine.victimSignIns().first)
        #expect(signIn["subject"] == .string(Self.subject(Self.alice)), "\(signIn)")
        let records = try machine.records().filter { $0["path"] == .string("browser") }
        let victims = records.filter { $0["user"] == .string(Self.alice) }
        #expect(victims.count == 1 && victims.first?["accepted"] == .bool(true) && victims.first?["deviceId"] == machine.registrationId, "\(records)")
    }

    /// Another user holds as many idle connections to the listener as they can, reopening
    /// each one it closes, from 4 threads. The victim's browser, which connects first and sends
    /// its request only after 200 more of the flood's connections (as a browser's preconnected
    /// socket does), still gets through and signs in.
    @Test func aFloodOfAnotherUsersConnectionsDoesNotStopTheCallback() throws {
        let machine = try Machine()
        let login = try machine.startVictimDevtrust(["login", "--browser", "--no-browser", "--server", machine.server.url,
                                                     "--client-id", "devtrust-app", "--timeout", "120"])
        #expect(login.waitFor { _, stderr in stderr.contains("Waiting up to") }, "\(login.stderr)")
        let url = try #require(login.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix(machine.server.url + "/oauth2/authorize?") }, "\(login.stderr)")
        let port = try #require(BrowserSignInTests.port(of: url))
        let flood = try machine.attacker.start(ExternalTool.python.rawValue, [machine.attackerScript, "flood", "127.0.0.1", String(port), machine.exchange])
        defer { machine.stopStandIns(); _ = flood.finish() }
        #expect(machine.note("flood-started.json") != nil, "the flood did not start: \(flood.stderr)")
        let browser = try machine.victim.run(ExternalTool.python.rawValue, [DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/standin_browser.py"),
                                                                                                            into: machine.scratch.file("tools")), url],
                                             environment: ["STANDIN_EXCHANGE": machine.exchange, "STANDIN_USER": Self.alice,
                                                           "STANDIN_PRECONNECT_FLOOD": machine.exchange + "/flood-progress.json"])
        let page = try #require(machine.note("browser.json"))
        machine.stopStandIns()
        #expect((page["floodDuring"]?.int64Value ?? 0) >= 200, "the flood did not go on while the browser waited: \(page)")
        #expect(browser.status == 0 && page["status"] == .integer(200) && page["body"]?.stringValue?.contains("<h1>Signed in</h1>") == true, "\(page)")
        let result = try #require(login.finish(), "login --browser did not end")
        #expect(result.status == 0, "\(result)")
        #expect(try machine.victimSignIns().first?["subject"] == .string(Self.subject(Self.alice)))
        _ = flood.finish()
        let counts = machine.note("flood.json", seconds: 30)
        #expect((counts?["opened"]?.int64Value ?? 0) >= 200, "\(String(describing: counts))")
    }
}

extension LocalUsersSignInTests {
    /// What the owner check cannot tell apart: a forwarder of the victim's that every local user
    /// can reach (`ssh -D`; here Tests/Interop/user_forwarder.py, SOCKS5) makes its connections
    /// the victim's. The attacker asks for the handoff page through it first, and gets the URL
    /// (documented in docs/security.md). The page sends one browser on: when the victim's browser
    /// then asks for it too, devtrust ends the sign-in, says why, and stores nothing, so that the
    /// attacker's callback, sent through the forwarder after that, finds no listener.
    @Test func aSecondRequestForTheHandoffThroughAForwarderEndsTheSignIn() throws {
        let machine = try Machine()
        let forwarderScript = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/user_forwarder.py"), into: machine.scratch.file("tools"))
        let forwarder = try machine.victim.start(ExternalTool.python.rawValue, [forwarderScript, machine.exchange + "/forwarder-port"])
        defer {
            machine.victim.endProcesses()
            _ = forwarder.finish()
        }
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: machine.exchange + "/forwarder-port") && Date() < deadline { usleep(20_000) }
        let attacker = try machine.attacker.start(ExternalTool.python.rawValue, [machine.attackerScript, "through-forwarder", machine.exchange,
                                                                                   String(machine.victim.uid)])
        defer { _ = attacker.finish() }
        let login = try machine.victimDevtrust(["login", "--browser", "--server", machine.server.url, "--client-id", "devtrust-app", "--timeout", "90"],
                                               environment: ["STANDIN_AFTER": machine.exchange + "/attacker-scanned"])
        #expect(attacker.finish() != nil)
        let report = try #require(machine.note("attacker.json"))
        // The documented limit: through the victim's own forwarder, the page answered as to the victim.
        #expect(report["handoffStatus"] == .integer(303), "\(report)")
        // The victim's browser came second: the sign-in ended, with the reason, and nothing was stored.
        let browser = try #require(machine.note("browser.json"))
        #expect(browser["status"] == .integer(409) && browser["body"]?.stringValue?.contains("This sign-in page was already opened") == true, "\(browser)")
        #expect(login.status == 1 && login.stderr.contains("was asked for a second time") && login.stderr.contains("ssh -D"), "\(login)")
        #expect(try machine.victimSignIns().isEmpty)
        // Mallory's callback, sent after that, reached no listener.
        let callback = report["mallorysCallback"]?.objectValue
        #expect(callback?["status"] != .integer(200), "\(report)")
    }
}
