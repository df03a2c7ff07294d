import DevtrustAgent
import DevtrustCLI
import DevtrustEncoding
import DevtrustKeys
import DevtrustTestSupport
import Foundation
import Testing

/// The system agent (issue 28) as a real process, with real Unix users made for each test
/// (useradd, runuser), so that who asks (SO_PEERCRED) and who may read the machine key are the
/// kernel's decisions; the reference server registers users on the one machine key, and tokens are
/// checked by verifiers devtrust did not write (PyJWT, the reference server's lenient reader).
@Suite(.enabled(if: LocalUser.canMake && ReferenceServer.shouldRun)) struct AgentTests {
    /// `register` answers for `email` at the reference server (its fixed OTP), on stdin.
    static func answers(_ email: String) -> String {
        #"{"http://wso2.com/claims/emailaddress": "\#(email)", "password": "correct horse", "otp": "123456"}"#
    }

    /// Registers `user` as `email` at `server` through the agent; their registration id.
    static func register(_ user: MachineUser, as email: String, at server: ReferenceServer) throws -> String {
        let result = try user.devtrust(["register", "--server", server.url, "--non-interactive", "--inputs", "-", "--json"], stdin: answers(email))
        guard result.status == 0, let id = try JSONParser.parse(result.stdout).objectValue?["registrationId"]?.stringValue else {
            throw FixtureError("register as \(user.account.name): \(result)")
        }
        return id
    }

    /// What the reference server makes of a device token at sign-in: accepted, for which device and user.
    static func deviceCheck(_ token: String, at server: ReferenceServer) throws -> JSONObject {
        try server.get("/api/device-check?device_token=" + token).objectValue ?? [:]
    }

    static func payload(_ token: String) throws -> JSONObject {
        let parts = token.split(separator: ".")
        return try JSONParser.parse(Base64URL.decode(String(parts[1]), padding: .optional)).objectValue ?? [:]
    }

    static func header(_ token: String) throws -> JSONObject {
        guard let first = token.split(separator: ".").first else { throw FixtureError("not a JWT: \"\(token.prefix(80))\"") }
        return try JSONParser.parse(Base64URL.decode(String(first), padding: .optional)).objectValue ?? [:]
    }

    /// Two users register the one machine key through the agent: two registration ids for one public
    /// key at the server. Each user's tokens name their own registration, and the server takes them
    /// as that user's device; a user who names the other's registration gets nothing (the agent knows
    /// them by the kernel's uid, never by what they send); `status` shows each only their own.
    /// A policy whose rate limit a test's hundreds of requests never meet.
    static let unlimited = #"{"rateLimit": {"burst": 100000, "perSecond": 100000}}"#

    /// 32 random bytes, base64url: a challenge the agent's guard allows.
    static func randomChallenge() -> String {
        Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
    }

    @Test func eachUserHasTheirOwnRegistrationsOfTheOneMachineKey() throws {
        let machine = try MachineAgent()
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        let aliceID = try Self.register(alice, as: "alice@example.com", at: server)
        let bobID = try Self.register(bob, as: "bob@example.com", at: server)
        #expect(aliceID != bobID)
        let publicKey = try machine.publicKey()
        let devices = try server.devices()
        #expect(devices.count == 2 && devices.allSatisfy { $0["publicKey"]?.stringValue == publicKey }, "\(devices)")

        for (user, id, email) in [(alice, aliceID, "alice@example.com"), (bob, bobID, "bob@example.com")] {
            let token = try user.devtrust(["token"])
            #expect(token.status == 0, "\(token)")
            #expect(try Self.header(token.output)["deviceId"] == .string(id))
            let check = try Self.deviceCheck(token.output, at: server)
            #expect(check["accepted"] == .bool(true) && check["user"] == .string(email), "\(check)")
            let status = try JSONParser.parse(try user.devtrust(["status", "--json"]).stdout).objectValue ?? [:]
            #expect(status["registrations"]?.arrayValue?.compactMap { $0.objectValue?["registrationId"]?.stringValue } == [id], "\(status)")
            #expect(status["key"]?.objectValue?["fingerprint"] != nil && status["agent"]?.objectValue?["socket"] == .string(machine.socket))
            #expect(try user.devtrust(["pubkey"]).output == publicKey)
        }
        // Bob names Alice's registration: the agent refuses, whatever the client sends.
        let stolen = try bob.devtrust(["token", "--device-id", aliceID])
        #expect(stolen.status == 3 && stolen.stdout.isEmpty, "\(stolen)")
        #expect(stolen.stderr.contains("\(aliceID) is not one of your registrations on this machine"), "\(stolen.stderr)")
        let raw = try bob.rawClient("request", [#"{"v":1,"op":"token","deviceId":"\#(aliceID)"}"#])
        #expect(raw.stdout.contains("notRegistered") && !raw.stdout.contains("\"ok\""), "\(raw)")
        // Bob answers a Device Registration step of his own for Alice's id and completes it: the
        // agent signs nothing for it and records nothing, so no token of his ever carries her id.
        let step = try bob.rawClient("request", [#"{"v":1,"op":"registration-step","server":"\#(server.url)","registrationId":"\#(aliceID)","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#])
        #expect(step.stdout.contains("notRegistered") && !step.stdout.contains("signature"), "\(step)")
        let complete = try bob.rawClient("request", [#"{"v":1,"op":"registration-complete","server":"\#(server.url)","registrationId":"\#(aliceID)","flowType":"REGISTRATION"}"#])
        #expect(!complete.stdout.contains("\"ok\""), "\(complete)")
        let stillStolen = try bob.devtrust(["token", "--device-id", aliceID])
        #expect(stillStolen.status == 3 && stillStolen.stdout.isEmpty, "\(stillStolen)")
        // The same under another server's name (a token carries its registration's id, no audience):
        // an id another user holds is theirs at every server.
        // In another spelling of the same UUID too (servers compare UUIDs without regard to case or hyphens).
        for (elsewhere, spelling) in [("https://not-the-server.example", aliceID), (server.url + "/other", aliceID),
                                      ("https://not-the-server.example", aliceID.uppercased()),
                                      ("https://not-the-server.example", aliceID.replacingOccurrences(of: "-", with: ""))] {
            let otherStep = try bob.rawClient("request", [#"{"v":1,"op":"registration-step","server":"\#(elsewhere)","registrationId":"\#(spelling)","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#])
            #expect(otherStep.stdout.contains("notRegistered") && !otherStep.stdout.contains("signature"), "\(elsewhere) \(spelling): \(otherStep)")
            let otherComplete = try bob.rawClient("request", [#"{"v":1,"op":"registration-complete","server":"\#(elsewhere)","registrationId":"\#(spelling)","flowType":"REGISTRATION"}"#])
            #expect(!otherComplete.stdout.contains("\"ok\""), "\(elsewhere) \(spelling): \(otherComplete)")
            let elsewhereStolen = try bob.devtrust(["token", "--device-id", spelling])
            #expect(elsewhereStolen.status == 3 && elsewhereStolen.stdout.isEmpty, "\(elsewhere) \(spelling): \(elsewhereStolen)")
        }
        // Bob with Alice's server: his own registration there, never hers.
        let bobsThere = try bob.devtrust(["token", "--server", server.url])
        #expect(try Self.header(bobsThere.output)["deviceId"] == .string(bobID))

        // The machine keystore records whose each registration is.
        let manifest = try JSONParser.parse(Array(try #require(FileManager.default.contents(atPath: machine.keystore + "/keystore.json")))).objectValue
        let owners = manifest?["registrations"]?.arrayValue?.compactMap { record -> String? in
            guard let object = record.objectValue, let id = object["registrationId"]?.stringValue, let uid = object["uid"]?.int64Value else { return nil }
            return "\(id)=\(uid)"
        }
        #expect(Set(owners ?? []) == ["\(aliceID)=\(alice.account.uid)", "\(bobID)=\(bob.account.uid)"], "\(String(describing: manifest))")
        // One audit line per decision, with the kernel's uid; never a token.
        let audit = machine.audit
        #expect(audit.contains("uid=\(bob.account.uid) ") && audit.contains("op=token") && audit.contains("outcome=\"refused: \(aliceID) is not one of your"))
        #expect(!audit.contains("eyJ"), "\(audit)")
    }

    /// The machine key is the agent's: another user can neither read the key file nor open the
    /// keystore with devtrust; the agent refuses a keystore others could read, and says the fix.
    @Test func onlyTheAgentsUserReadsTheMachineKey() throws {
        let machine = try MachineAgent()
        try machine.start()
        let bob = try machine.user("bob")
        let keyFile = try #require(try FileManager.default.contentsOfDirectory(atPath: machine.keystore).first { $0.hasPrefix("key-") })
        let read = try bob.account.run("/bin/cat", [machine.keystore + "/" + keyFile])
        #expect(read.status != 0 && read.stdout.isEmpty && read.stderr.contains("Permission denied"), "\(read)")
        let direct = try bob.devtrust(["--keystore", machine.keystore, "pubkey"])
        #expect(direct.status == 7 && direct.stdout.isEmpty, "\(direct)")
        // Through the agent Bob gets the public key, and only that.
        let machineKey = try machine.publicKey()
        #expect(try bob.devtrust(["pubkey"]).output == machineKey)

        // A keystore others can read: the agent does not serve it.
        chmod(machine.keystore, 0o755)
        let exposed = try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "agent", "--socket", machine.scratch.file("run/second.sock"),
                                                             "--policy", machine.policy], environment: machine.agentEnvironment)
        #expect(exposed.status == 7 && exposed.stderr.contains("chmod 700"), "\(exposed)")
    }

    /// A client adds no claim the policy does not name, and replaces no measured or reserved one,
    /// whatever it sends (a raw client, not devtrust): the token carries the agent's measurements.
    @Test func aClientCannotForgeAClaim() throws {
        let machine = try MachineAgent(policy: #"{"allowedClientClaims": ["ticket"]}"#)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        _ = try Self.register(alice, as: "alice@example.com", at: server)
        for (name, words) in [("diskEncryption", "diskEncryption is measured by devtrust"), ("keyProtection", "keyProtection is set by devtrust itself"),
                              ("jti", "jti is set by devtrust"), ("platform", "platform is set by devtrust itself"),
                              ("site", "the agent's policy (\(machine.policy)) lets clients add only ticket")] {
            let forged = try alice.rawClient("request", [#"{"v":1,"op":"token","claims":[["\#(name)","true"]]}"#])
            let reply = try JSONParser.parse(forged.stdout).objectValue
            #expect(reply?["ok"] == nil, "\(name): \(forged)")
            let error = reply?["error"]?.objectValue
            #expect(error?["category"] == .string("usage") && error?["summary"]?.stringValue?.contains("--claim \(name): \(words)") == true, "\(forged)")
            // The command line refuses the measured and reserved names before asking (exit 2, naming the claim).
            let cli = try alice.devtrust(["token", "--claim", "\(name)=true"])
            #expect(cli.status == 2 && cli.stderr.contains("--claim \(name)") && cli.stdout.isEmpty, "\(cli)")
        }
        let step = try alice.rawClient("request", [#"{"v":1,"op":"registration-step","server":"https://x.example","registrationId":"r1","challenge":"q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y","requiredParams":["publicKey","signature","deviceData"],"claims":[["lockScreen","true"]]}"#])
        #expect(step.stdout.contains("--claim lockScreen") && !step.stdout.contains("\"ok\""), "\(step)")

        // An allowed name is added; the measured ones are the agent's own.
        let token = try alice.devtrust(["token", "--claim", "ticket=42"])
        #expect(token.status == 0, "\(token)")
        let claims = try Self.payload(token.output)
        let measured = try JSONParser.parse(try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "attributes"],
                                                                 environment: machine.agentEnvironment).stdout).objectValue ?? [:]
        #expect(claims["ticket"] == .string("42") && claims["diskEncryption"] == measured["diskEncryption"] && claims["keyProtection"] == .string("software"),
                "\(claims) \(measured)")
        #expect(try Self.deviceCheck(token.output, at: server)["accepted"] == .bool(true))
    }

    /// The challenge guard holds through the agent: of the generated corpus of challenges that some
    /// verifier would take as a token once signed (Tests/Interop/jws_oracle.py), the agent signs none,
    /// for any client; a random challenge of the contract's shape is signed, and verifies.
    @Test(.enabled(if: ExternalTool.jose.shouldRun)) func aClientChosenChallengeIsNeverSigned() throws {
        // A rate no corpus meets: every variant reaches the guard.
        let machine = try MachineAgent(policy: Self.unlimited)
        try machine.start()
        let alice = try machine.user("alice")
        let oracle = Repository.path("Tests/Interop/jws_oracle.py")
        let seed = "\(UInt32.random(in: 1...UInt32.max))"
        let collected = try ProcessRunner.run(ExternalTool.python.rawValue, [oracle, "collect", "--seed", seed, "--",
                                                                             ExternalTool.python.rawValue, machine.agentClient, "sign-challenge", machine.socket],
                                              environment: ["PATH": "/usr/bin:/bin"])
        #expect(collected.status == 0, "\(collected.stderr)")
        let variants = machine.scratch.write("variants.json", collected.stdout)
        let collectedVariants = try JSONParser.parse(collected.stdout).arrayValue ?? []
        let refusals = collectedVariants.compactMap { $0.objectValue?["refusal"]?.stringValue }
        #expect(refusals.count == collectedVariants.count
                && refusals.allSatisfy { $0.contains("devtrust refuses to sign the server's Device Registration challenge: it could be read as a JWS signing input") },
                "\(Set(refusals.map { String($0.prefix(160)) }))")
        let check = try ExternalTool.python.run([oracle, "check", "--public-key", try machine.publicKey(), "--variants", variants])
        let totals = try #require(try JSONParser.parse(check.stdout).objectValue?["totals"]?.objectValue, "\(check)")
        #expect((totals["variants"]?.int64Value ?? 0) >= 300 && totals["signed"]?.int64Value == 0 && totals["accepted"]?.int64Value == 0,
                "seed \(seed): \(totals)")
        // A challenge of the contract's shape (32 random bytes) is signed, by the machine key, for any user.
        let challenge = Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
        let signed = try alice.rawClient("sign-challenge", [challenge])
        #expect(signed.status == 0, "\(signed)")
        let request: JSONObject = ["spki": .string(try machine.publicKey()),
                                   "der": .array([.object(["message": .string(Base64.encode(try Base64URL.decode(challenge, padding: .optional))),
                                                           "signature": .string(signed.output)])])]
        let verified = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(verified.stdout.contains("\"valid\": 1"), "\(verified)")
        #expect(!machine.audit.contains(challenge) && !machine.audit.contains(signed.output), "the audit shows a challenge or a signature")
    }
}

extension AgentTests {
    /// The agent killed with SIGKILL while it answers a request (its administrator's collector is
    /// running for the token): the client says the agent is down and how to start it (exit 6);
    /// nothing in the keystore is lost or damaged; clients of the dead agent say so too; a new
    /// agent serves the same registrations.
    @Test func anAgentKilledMidRequest() throws {
        // A collector that holds the request while the test's flag is there (and says when it started).
        let scratch = TemporaryDirectory("agent-collector")
        let flag = scratch.file("hold"), started = scratch.file("started")
        let collector = scratch.write("collector.sh", "#!/bin/sh\nif [ -e \(flag) ]; then echo $$ > \(started).tmp; mv \(started).tmp \(started); exec sleep 120; fi\necho '{\"site\": \"lab\"}'\n",
                                      mode: 0o755)
        let machine = try MachineAgent(configuration: #"{"collector": ["\#(collector)"], "collectorTimeoutSeconds": 60, "postureCacheSeconds": 0}"#)
        let agent = try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let before = try Self.files(machine.keystore)

        scratch.write("hold", "")
        let waiting = try alice.account.start(machine.binary, ["token"], environment: alice.environment)
        var collectorPID: Int32?
        defer { if let collectorPID { kill(collectorPID, SIGKILL) } }
        let deadline = Date().addingTimeInterval(60)
        while collectorPID == nil && Date() < deadline {
            collectorPID = scratch.read("started").flatMap { Int32(String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) }
            if collectorPID == nil { usleep(10_000) }
        }
        #expect(collectorPID != nil, "the collector did not start: \(machine.audit)")
        kill(agent.pid, SIGKILL)
        let failed = try #require(waiting.finish())
        #expect(failed.status == 6 && failed.stdout.isEmpty, "\(failed)")
        #expect(failed.stderr.contains("the devtrust agent at \(machine.socket) closed the connection before it answered: the agent is down"), "\(failed.stderr)")
        #expect(failed.stderr.contains("start the agent (run `sudo devtrust agent --socket \(machine.socket)`)"), "\(failed.stderr)")
        // Nobody answers at the socket the dead agent left.
        let down = try alice.devtrust(["token"])
        #expect(down.status == 6 && down.stderr.contains("no devtrust agent answers at \(machine.socket) (the socket is there, but the agent is not running)"),
                "\(down)")
        #expect(try Self.files(machine.keystore) == before, "the keystore changed")

        // The dead agent's collector goes too (it holds what tells Foundation that the agent ended).
        if let collectorPID { kill(collectorPID, SIGKILL) }
        try FileManager.default.removeItem(atPath: flag)
        try machine.start()
        let token = try alice.devtrust(["token"])
        #expect(token.status == 0, "\(token)")
        #expect(try Self.header(token.output)["deviceId"] == .string(id))
        #expect(try Self.deviceCheck(token.output, at: server)["user"] == .string("alice@example.com"))
    }

    /// Every file of a directory, with its bytes.
    static func files(_ directory: String) throws -> [String: Data] {
        var files = [String: Data]()
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            files[name] = FileManager.default.contents(atPath: directory + "/" + name)
        }
        return files
    }

    /// Clients that send junk, announce a huge request, or send nothing and hold their connections
    /// (as many as one user may hold, and one more) do not stop the agent serving others: another
    /// user's token comes within a second. Each gets a refusal that says why, and the silent ones are
    /// dropped at their deadline; the audit says so in a line or two for the user, with a count, not
    /// a line per connection (a user who opens connections in a loop does not flood the journal).
    @Test func junkHugeAndSilentClientsDoNotStopTheAgent() throws {
        let machine = try MachineAgent()
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), mallory = try machine.user("mallory")
        _ = try Self.register(alice, as: "alice@example.com", at: server)

        let most = AgentLimits().connectionsPerUser
        let (runner, words) = mallory.account.command(ExternalTool.python.rawValue, [machine.agentClient, "hold", machine.socket, "\(most)", ""])
        let silent = try BackgroundProcess(runner, words, environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        // Foundation learns that runuser ended only once the holder it started has too: that goes first.
        defer {
            mallory.account.endProcesses()
            _ = silent.finish()
        }
        #expect(silent.waitFor { stdout, _ in stdout.contains("holding \(most)") }, "\(silent.stderr)")
        // The next connection of the same user is refused at once, saying why.
        let over = try mallory.rawClient("request", [#"{"v":1,"op":"pubkey"}"#])
        #expect(over.stdout.contains("has \(most) connections to the agent open, the most one user may hold"), "\(over)")
        for (bytes, words) in [("ffffffff", "a request of 4294967295 bytes, larger than the 65536 a request may be"),
                               ("0000000568656c6c6f", "the request is not JSON"),
                               ("00000000", "an empty frame"),
                               ("000000027b7d7b7d", "bytes after the request")] {
            let junk = try alice.rawClient("raw", [bytes])
            #expect(junk.stdout.contains(words) && junk.stdout.contains("\"usage\""), "\(bytes): \(junk)")
        }
        let start = Date()
        let token = try alice.devtrust(["token"])
        let elapsed = Date().timeIntervalSince(start)
        #expect(token.status == 0, "\(token)")
        #expect(elapsed < 1.0, "a token took \(elapsed) s while others held the agent's connections")
        // The silent connections end at their deadline: said in the audit, counted.
        let mallorys = { (audit: String) in audit.split(separator: "\n").filter { $0.contains("uid=\(mallory.account.uid) ") } }
        let counted = { (audit: String) -> Int in
            mallorys(audit).reduce(0) { total, line in
                if line.contains("outcome=\"dropped: no whole request within") { return total + 1 }
                guard let more = line.range(of: "more since the last line: ") else { return total }
                let parts = line[more.upperBound...].split(separator: ";").filter { $0.contains("dropped: no whole request within") }
                return total + parts.compactMap { Int($0.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") }.reduce(0, +)
            }
        }
        #expect(machine.process!.waitFor { _, stderr in counted(stderr) >= most }, "\(machine.audit)")
        // A line for the first, one for the rest of the interval (and the refusal above, before them).
        #expect(mallorys(machine.audit).count <= 3, "\(machine.audit)")
        #expect(try alice.devtrust(["pubkey"]).status == 0)
    }

    /// 50 `token` calls at once from two users: every token valid (PyJWT, with the machine key),
    /// every jti different, each user's tokens naming their own registration.
    @Test func fiftyConcurrentTokensFromTwoUsers() throws {
        let machine = try MachineAgent()
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        let ids = [try Self.register(alice, as: "alice@example.com", at: server), try Self.register(bob, as: "bob@example.com", at: server)]
        let driver = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/run_concurrently.py"), into: machine.scratch.file("tools"))
        let runs = try [alice, bob].map { user in
            try user.account.start(ExternalTool.python.rawValue, [driver, "25", "--", machine.binary, "token"], environment: user.environment)
        }
        var tokens = [String]()
        var idsOfTokens = [String]()
        for (index, run) in runs.enumerated() {
            let result = try #require(run.finish())
            let lines = result.stdout.split(separator: "\n").map(String.init)
            #expect(result.status == 0 && lines.count == 25 && lines.allSatisfy { $0.hasPrefix("eyJ") }, "\(result)")
            for line in lines {
                tokens.append(line)
                idsOfTokens.append(try Self.header(line)["deviceId"]?.stringValue ?? "")
                #expect(idsOfTokens.last == ids[index])
            }
        }
        #expect(tokens.count == 50)
        let request: JSONObject = ["spki": .string(try machine.publicKey()), "tokens": .array(tokens.map(JSONValue.string))]
        let checked = try ExternalTool.python.run([Repository.path("Tests/Interop/check_device_tokens.py")], stdin: JSONWriter.bytes(.object(request)))
        let results = try JSONParser.parse(checked.stdout).arrayValue ?? []
        #expect(results.count == 50 && results.allSatisfy { $0.objectValue?["valid"] == .bool(true) }, "\(checked)")
        let jtis = Set(results.compactMap { $0.objectValue?["claims"]?.objectValue?["jti"]?.stringValue })
        #expect(jtis.count == 50)
    }

    /// Under systemd's socket activation (`systemd-socket-activate`, as devtrust.socket does): the
    /// agent takes the socket it is passed, started by the first client's connection.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate")))
    func socketActivation() throws {
        let machine = try MachineAgent()
        try FileManager.default.createDirectory(atPath: machine.scratch.file("run"), withIntermediateDirectories: true)
        chmod(machine.scratch.file("run"), 0o755)
        let variables = machine.agentEnvironment.flatMap { ["-E", "\($0.key)=\($0.value)"] }
        // systemd-socket-activate closes every descriptor it did not make: run as a child of as_child.py (which says why).
        let activator = try BackgroundProcess(ExternalTool.python.rawValue,
                                              [Repository.path("Tests/Interop/as_child.py"), "/usr/bin/systemd-socket-activate", "-l", machine.socket]
                                                + variables + ["--", machine.binary, "--keystore", machine.keystore, "agent", "--policy", machine.policy],
                                              environment: machine.agentEnvironment)
        #expect(activator.waitFor { stdout, stderr in stderr.contains("Listening on") && stdout.hasSuffix("\n") }, "\(activator.stderr)")
        let activatedPID = try #require(Int32(activator.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        // devtrust.socket's SocketMode=0666: who may use the agent is its policy's decision.
        chmod(machine.socket, 0o666)
        let alice = try machine.user("alice")
        let publicKey = try alice.devtrust(["pubkey"])
        let machineKey = try machine.publicKey()
        #expect(publicKey.status == 0 && publicKey.output == machineKey, "\(publicKey)\n\(activator.stderr)")
        #expect(activator.stderr.contains("devtrust agent: listening on the socket systemd passed"), "\(activator.stderr)")
        #expect(activator.stderr.contains("uid=\(alice.account.uid) ") && activator.stderr.contains("op=pubkey outcome=\"ok\""), "\(activator.stderr)")
        // The agent ends on SIGTERM (systemd's stop), leaving systemd's socket where it is.
        kill(activatedPID, SIGTERM)
        let ended = try #require(activator.finish())
        #expect(ended.status == 0 && ended.stderr.contains("devtrust agent: stopped"), "\(ended)")
        #expect(FileManager.default.fileExists(atPath: machine.socket))
    }

    /// The policy: a user outside its groups is refused, naming the policy file, and gets nothing
    /// else (exit 3); a user in them is served; a loop meets the rate limit, a person does not.
    @Test func thePolicyDecidesWhoAndHowOften() throws {
        let alice = try LocalUser("alice")
        let machine = try MachineAgent(policy: #"{"allowedGroups": ["\#(alice.name)"], "rateLimit": {"burst": 5, "perSecond": 1}}"#)
        try machine.start()
        let bob = try machine.user("bob")
        let refused = try bob.devtrust(["pubkey"])
        #expect(refused.status == 3 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr == "devtrust: error: the devtrust agent's policy (\(machine.policy)) does not let uid \(bob.account.uid) use this machine's key: it allows members of \(alice.name) only; ask the machine's administrator\n",
                "\(refused.stderr)")
        let status = try bob.devtrust(["status"])
        #expect(status.status == 3 && status.stdout.isEmpty, "\(status)")
        // Alice, a member of her own group, is served; asked in a loop, the agent stops her at the burst.
        let loop = try ProcessRunner.run("/usr/sbin/runuser", ["-u", alice.name, "--", ExternalTool.python.rawValue, machine.agentClient, "repeat", machine.socket,
                                                              "12", #"{"v":1,"op":"pubkey"}"#], environment: ["PATH": "/usr/bin:/bin"])
        let replies = loop.stdout.split(separator: "\n")
        #expect(replies.count == 12 && replies.prefix(5).allSatisfy { $0.contains("\"ok\"") }, "\(loop)")
        #expect(replies.contains { $0.contains("the rate limit of \(machine.policy)") }, "\(loop)")
        #expect(machine.audit.contains("uid=\(alice.uid) ") && machine.audit.contains("outcome=\"refused: rate limit"), "\(machine.audit)")
        #expect(machine.audit.contains("uid=\(bob.account.uid) pid=") && machine.audit.contains("outcome=\"refused: not allowed by the policy\""))
    }
}

extension AgentTests {
    /// One run of the command line in this process, as a user (`uid`) whose own directories are below
    /// `home`, with `defaultAgentSocket` standing in for /run/devtrust/agent.sock (never the machine's).
    static func inProcess(_ arguments: [String], home: TemporaryDirectory, variables: [String: String] = [:], uid: UInt32 = 4242,
                          defaultAgentSocket: String?) -> ProcessResult {
        let terminal = CapturingTerminal()
        var environment = CommandEnvironment(variables: ["HOME": home.file("home"), "XDG_DATA_HOME": home.file("data"), "XDG_CACHE_HOME": home.file("cache"),
                                                         "XDG_CONFIG_HOME": home.file("config")].merging(variables) { $1 },
                                             terminal: terminal, effectiveUserID: uid, defaultAgentSocket: defaultAgentSocket)
        environment.isolatesProbes = false
        let status = DevtrustCommandLine.run(arguments, environment: environment)
        return ProcessResult(status: status, stdout: terminal.output, stderr: terminal.errors)
    }

    /// Which key a command uses: `--keystore`, else `--agent`, else `DEVTRUST_KEYSTORE`, else
    /// `DEVTRUST_AGENT`, else the agent's default socket when it exists, else the user's own keystore.
    @Test func theAgentIsUsedByDefaultOnlyWhenNothingElseIsNamed() throws {
        let machine = try MachineAgent()
        try machine.start()
        let machineKey = try machine.publicKey()
        let home = TemporaryDirectory("agent-client")
        let absent = home.file("no-agent.sock")
        let own = home.file("own-ks")
        #expect(Self.inProcess(["pubkey"], home: home, defaultAgentSocket: machine.socket).stdout == machineKey + "\n")
        let withoutAgent = Self.inProcess(["pubkey"], home: home, defaultAgentSocket: absent)
        #expect(withoutAgent.status == 3 && withoutAgent.stderr.contains("there is no device key in \(home.file("data"))/devtrust"), "\(withoutAgent)")
        let named = Self.inProcess(["pubkey"], home: home, variables: ["DEVTRUST_KEYSTORE": own], defaultAgentSocket: machine.socket)
        #expect(named.status == 3 && named.stderr.contains("there is no device key in \(own)"), "\(named)")
        #expect(Self.inProcess(["--agent", machine.socket, "pubkey"], home: home, variables: ["DEVTRUST_KEYSTORE": own], defaultAgentSocket: absent).stdout
                == machineKey + "\n")
        #expect(Self.inProcess(["pubkey"], home: home, variables: ["DEVTRUST_AGENT": machine.socket], defaultAgentSocket: absent).stdout == machineKey + "\n")
        let both = Self.inProcess(["--keystore", own, "--agent", machine.socket, "pubkey"], home: home, defaultAgentSocket: absent)
        #expect(both.status == 2 && both.stderr.contains("--keystore and --agent name two different places for the device key: give one"), "\(both)")
        let gone = Self.inProcess(["token"], home: home, variables: ["DEVTRUST_AGENT": absent], defaultAgentSocket: nil)
        #expect(gone.status == 6 && gone.stderr.contains("there is no devtrust agent socket at \(absent)"), "\(gone)")
    }

    /// A user with a keystore of their own when the agent appears: `status` says the agent's key is
    /// used, that theirs is not, and how to keep using it or move.
    @Test func aUsersOwnKeystoreIsNamedWhenTheAgentStandsInForIt() throws {
        let machine = try MachineAgent()
        try machine.start()
        let alice = try machine.user("alice")
        let made = try alice.devtrust(["init", "--backend", "software", "-q"])
        #expect(made.status == 0, "\(made)")
        let ownKeystore = alice.home + "/data/devtrust"
        let ownKey = try alice.devtrust(["--keystore", ownKeystore, "pubkey"]).output
        #expect(try alice.devtrust(["pubkey"]).output == (try machine.publicKey()) && ownKey != (try machine.publicKey()))
        let status = try alice.devtrust(["status"])
        #expect(status.status == 0 && status.stdout.contains("agent: \(machine.socket) (the machine's key, in \(machine.keystore))"), "\(status)")
        #expect(status.stdout.contains("note: your own keystore \(ownKeystore) holds a key too"), "\(status)")
        #expect(status.stdout.contains("`devtrust --keystore \(ownKeystore) reset --yes`"))
        let json = try JSONParser.parse(try alice.devtrust(["status", "--json"]).stdout).objectValue
        #expect(json?["ownKeystore"]?.objectValue?["path"] == .string(ownKeystore) && json?["registrations"] == .array([]) && json?["signIns"] == .array([]))
    }

    /// `init` where the system agent answers for the device key: the user's keystore is made as
    /// asked (nothing lost, exit 0: a script's `init` goes on), and a warning says that the commands
    /// that use the key go through the agent, not through that keystore, and how to use it; nothing
    /// is said when a keystore is named, when no agent answers, or when the keystore is the agent's own.
    @Test func initSaysThatTheAgentAnswersForTheDeviceKey() throws {
        let machine = try MachineAgent()
        try machine.start()
        let refusing = try MachineAgent(policy: #"{"allowedGroups": ["root"]}"#)
        try refusing.start()
        let alice = try machine.user("alice")
        let own = alice.home + "/data/devtrust"
        let machineKey = try machine.publicKey(), fingerprint = try Self.thumbprint(machine)
        let made = try alice.devtrust(["init", "--backend", "software"], environment: ["DEVTRUST_AGENT": refusing.socket])
        #expect(made.status == 0 && made.stdout.isEmpty && made.stderr.contains("created a software P-256 device key in \(own)/"), "\(made)")
        // Refused by the policy (alice is not in its groups): her keystore is not used all the same.
        #expect(made.stderr.contains("devtrust: warning: the devtrust agent at \(refusing.socket) answers for this machine's device key, and refused you: "
                                     + "the devtrust agent's policy (\(refusing.policy)) does not let uid \(alice.account.uid) use this machine's key"), "\(made.stderr)")
        #expect(made.stderr.contains("go through it, not through \(own): to use this keystore, name it: `devtrust --keystore \(own) COMMAND` "
                                     + "(or DEVTRUST_KEYSTORE=\(own)); `devtrust --keystore \(own) reset --yes` deletes it\n"), "\(made.stderr)")

        let kept = try alice.devtrust(["init"])
        #expect(kept.status == 0 && kept.stderr.contains("a software device key already exists in \(own)"), "\(kept)")
        #expect(kept.stderr.contains("devtrust: warning: the devtrust agent at \(machine.socket) answers for this machine's device key (software key \(fingerprint), "
                                     + "in \(machine.keystore)); the commands that use the device key (token, register, status, ...) go through it, not through \(own): "
                                     + "to use this keystore, name it: `devtrust --keystore \(own) COMMAND`"), "\(kept.stderr)")
        // As it says: the key is hers when named, and the commands that use a key take the agent's.
        let ownKey = try alice.devtrust(["--keystore", own, "pubkey"])
        #expect(ownKey.status == 0 && !ownKey.output.isEmpty && ownKey.output != machineKey, "\(ownKey)")
        #expect(try alice.devtrust(["pubkey"]).output == machineKey)
        let json = try alice.devtrust(["init", "--json"])
        let summary = try JSONParser.parse(json.stdout).objectValue
        let agent = summary?["agent"]?.objectValue
        #expect(json.status == 0 && summary?["created"] == .bool(false) && agent?["socket"] == .string(machine.socket)
                && agent?["keystore"] == .string(machine.keystore) && agent?["fingerprint"] == .string(fingerprint)
                && agent?["note"]?.stringValue?.contains("`devtrust --keystore \(own) COMMAND`") == true, "\(json)")

        // A keystore named (then no agent is asked), or no agent answering: nothing to say.
        let named = try alice.devtrust(["--keystore", own, "init", "--json"])
        let namedSummary = try JSONParser.parse(named.stdout).objectValue
        #expect(named.status == 0 && !named.stderr.contains("warning") && namedSummary?["agent"] == nil, "\(named)")
        let variable = try alice.devtrust(["init"], environment: ["DEVTRUST_KEYSTORE": own])
        #expect(variable.status == 0 && !variable.stderr.contains("warning"), "\(variable)")
        let gone = try alice.devtrust(["init"], environment: ["DEVTRUST_AGENT": machine.scratch.file("run/nobody.sock")])
        #expect(gone.status == 0 && !gone.stderr.contains("warning"), "\(gone)")
        let asked = Self.auditLines(machine, uid: alice.account.uid).filter { $0.contains("op=status") }
        #expect(asked.count == 2, "\(machine.audit)")

        // An agent whose keystore is this one (a user's agent of their own, over their keystore): nothing to say.
        let theirs = machine.scratch.file("alice-run")
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: true)
        try alice.account.own(theirs)
        let socket = theirs + "/agent.sock"
        let hers = try alice.account.start(machine.binary, ["--keystore", own, "agent", "--socket", socket, "--policy", machine.policy],
                                           environment: alice.environment)
        #expect(hers.waitFor { _, stderr in stderr.contains("devtrust agent: listening on") }, "\(hers.stderr)")
        let ownAgent = try alice.devtrust(["init"], environment: ["DEVTRUST_AGENT": socket])
        #expect(ownAgent.status == 0 && !ownAgent.stderr.contains("warning") && hers.stderr.contains("op=status"), "\(ownAgent) \(hers.stderr)")
        alice.account.endProcesses()
    }

    /// Who may use the machine's key is root's to say: the agent listens only in a directory nobody
    /// else can write to (its socket's name, and the `chmod` that follows a link, are then its own),
    /// and reads its policy only from one (else another policy could be put in its place).
    @Test(.timeLimit(.minutes(1))) func theSocketAndThePolicyAreInDirectoriesOnlyRootWrites() throws {
        let machine = try MachineAgent()
        let bob = try LocalUser("bob")
        func agent(socket: String, policy: String) throws -> ProcessResult {
            try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "agent", "--socket", socket, "--policy", policy],
                                  environment: machine.agentEnvironment)
        }
        let open = machine.scratch.file("open-run")
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true)
        chmod(open, 0o777)
        let anyone = try agent(socket: open + "/agent.sock", policy: machine.policy)
        #expect(anyone.status == 1 && anyone.stderr.contains("the agent's socket directory \(open) is writable by anyone (mode 777)"), "\(anyone)")
        #expect(!FileManager.default.fileExists(atPath: open + "/agent.sock"))
        // Sticky too (as /tmp): another user can take the name first, and answer clients once the agent stops.
        chmod(open, 0o1777)
        let sticky = try agent(socket: open + "/agent.sock", policy: machine.policy)
        #expect(sticky.status == 1 && sticky.stderr.contains("the agent's socket directory \(open) is writable by anyone (mode 1777)"), "\(sticky)")
        chmod(open, 0o777)
        let bobs = machine.scratch.file("bobs-run")
        try FileManager.default.createDirectory(atPath: bobs, withIntermediateDirectories: true)
        try bob.own(bobs)
        let owned = try agent(socket: bobs + "/agent.sock", policy: machine.policy)
        #expect(owned.status == 1 && owned.stderr.contains("the agent's socket directory \(bobs) is owned by uid \(bob.uid)"), "\(owned)")
        let policy = open + "/agent.json"
        let placed = try agent(socket: machine.socket, policy: policy)
        #expect(placed.status != 0 && placed.stderr.contains("the agent's policy \(policy) is in \(open), which others can write to (mode 777)"), "\(placed)")
        #expect(placed.stderr.contains("(chmod go-w \(open))"), "\(placed)")
    }

    /// A client sends nothing to what listens at the agent's socket name unless it runs as root (or
    /// as the caller): another user who took the name (a directory they could write to, or once the
    /// agent stopped) learns no request, and the caller is told so (exit 6), not served their key.
    @Test(.timeLimit(.minutes(1))) func aClientTalksOnlyToAnAgentOfRootsOrItsOwn() throws {
        let machine = try MachineAgent()
        let alice = try machine.user("alice"), mallory = try machine.user("mallory")
        let theirs = machine.scratch.file("mallory-run")
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: true)
        try mallory.account.own(theirs)
        chmod(theirs, 0o755)
        // Mallory's own agent, with her own key, at a name she holds.
        #expect(try mallory.devtrust(["init", "--backend", "software", "-q"]).status == 0)
        let socket = theirs + "/agent.sock"
        let impostor = try mallory.account.start(machine.binary, ["--keystore", mallory.home + "/data/devtrust", "agent", "--socket", socket,
                                                                  "--policy", machine.policy], environment: mallory.environment)
        #expect(impostor.waitFor { _, stderr in stderr.contains("devtrust agent: listening on") }, "\(impostor.stderr)")
        let token = try alice.devtrust(["token"], environment: ["DEVTRUST_AGENT": socket])
        #expect(token.status == 6 && token.stdout.isEmpty, "\(token)")
        #expect(token.stderr.contains("what answers at \(socket) runs as uid \(mallory.account.uid), neither root nor you: it is not the devtrust agent"), "\(token)")
        let register = try alice.devtrust(["pubkey"], environment: ["DEVTRUST_AGENT": socket])
        #expect(register.status == 6 && register.stdout.isEmpty, "\(register)")
        // An agent of the caller's own is theirs to use (a user's test agent, say): the rule is root or you.
        let own = try mallory.devtrust(["pubkey"], environment: ["DEVTRUST_AGENT": socket])
        let hers = try mallory.devtrust(["--keystore", mallory.home + "/data/devtrust", "pubkey"]).output
        #expect(own.status == 0 && own.output == hers, "\(own)")
        // Mallory's agent saw Alice connect (a connection is made before the client can ask the kernel
        // who listens) and close without a request; the one request was Mallory's own.
        let lines = impostor.stderr.split(separator: "\n").filter { $0.hasPrefix("devtrust agent: uid=") }
        let alices = lines.filter { $0.contains("uid=\(alice.account.uid) ") }
        #expect(!alices.isEmpty && alices.allSatisfy { $0.contains(#"op=- outcome="dropped: closed without a request""#) }, "\(impostor.stderr)")
        #expect(lines.filter { $0.contains(#"outcome="ok""#) }.count == 1 && lines.contains { $0.contains("uid=\(mallory.account.uid) ") && $0.contains("op=pubkey") },
                "\(impostor.stderr)")
        // Her agent runs until it is ended (runuser does not pass it a signal).
        mallory.account.endProcesses()
    }

    /// In a user namespace that has no uid for the machine's root (`unshare -r` as a user), the kernel
    /// shows the agent as the overflow uid: the client sends it nothing, as for another user's program,
    /// and says why (the namespace) and what to do, instead of blaming another user.
    @Test(.timeLimit(.minutes(1))) func aClientInAUserNamespaceIsToldWhyTheAgentCannotBeUsed() throws {
        let machine = try MachineAgent()
        try machine.start()
        let alice = try machine.user("alice")
        let overflow = try String(contentsOfFile: "/proc/sys/kernel/overflowuid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let outside = try alice.shell("\"$DEVTRUST\" pubkey")
        #expect(outside.status == 0, "\(outside)")
        let inside = try alice.shell("exec unshare -r \"$DEVTRUST\" pubkey")
        try #require(!inside.stderr.contains("unshare: unshare failed"), "no unprivileged user namespaces here: \(inside)")
        #expect(inside.status == 6 && inside.stdout.isEmpty, "\(inside)")
        #expect(inside.stderr.contains("what answers at \(machine.socket) shows as uid \(overflow) in this user namespace, which has no uid for the machine's root"),
                "\(inside)")
        #expect(inside.stderr.contains("run devtrust outside the user namespace"), "\(inside)")
        // Nothing was asked from inside: the agent saw a connection closed without a request (its
        // refusals are one line per user per 10 s, so this is the only one after the pubkey's).
        let process = try #require(machine.process)
        #expect(process.waitFor { _, stderr in stderr.contains("uid=\(alice.account.uid) pid=") && stderr.contains(#"outcome="dropped: closed without a request""#) },
                "\(machine.audit)")
        #expect(Self.auditLines(machine, uid: alice.account.uid).filter { $0.contains("op=pubkey") }.count == 1, "\(machine.audit)")
    }
}

/// The commands beyond `pubkey`, `token`, `status` and `register` through the agent, as real users
/// (issue 28's "Clients"): `sign-challenge`, `device-data`, `dpop-proof` and a DPoP sign-in's proofs,
/// `login`'s and `authorize-url`'s device token, `native-host`, `reset`, `doctor`; each checked with
/// verifiers devtrust did not write (PyJWT, jwcrypto, the reference server) against the agent's key.
extension AgentTests {
    /// The machine key's RFC 7638 thumbprint, read by root from the keystore itself.
    static func thumbprint(_ machine: MachineAgent) throws -> String {
        let result = try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "pubkey", "--format", "thumbprint"], environment: machine.agentEnvironment)
        guard result.status == 0 else { throw FixtureError("pubkey --format thumbprint: \(result)") }
        return result.output
    }

    /// The keystore.json of a keystore, as root reads it.
    static func manifest(_ keystore: String) throws -> JSONObject {
        try JSONParser.parse(Array(try #require(FileManager.default.contents(atPath: keystore + "/keystore.json")))).objectValue ?? [:]
    }

    /// `devtrust --agent S sign-challenge` as a user: of the corpus of challenges some verifier would
    /// take as a token once signed (Tests/Interop/jws_oracle.py), the agent signs none, and the refusal
    /// is the agent's guard (the command line only checks that the text is base64url); a challenge of
    /// the contract's shape is signed, by the key `pubkey` prints, and verifies.
    @Test(.enabled(if: ExternalTool.jose.shouldRun)) func signChallengeThroughTheAgentSignsNoChosenChallenge() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        try machine.start()
        let alice = try machine.user("alice")
        let oracle = Repository.path("Tests/Interop/jws_oracle.py")
        let seed = "\(UInt32.random(in: 1...UInt32.max))"
        let (runner, words) = alice.account.command(machine.binary, ["--agent", machine.socket, "sign-challenge"], environment: alice.environment)
        let collected = try ProcessRunner.run(ExternalTool.python.rawValue, [oracle, "collect", "--seed", seed, "--", runner] + words,
                                              environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        #expect(collected.status == 0, "\(collected.stderr)")
        let variants = machine.scratch.write("variants.json", collected.stdout)
        let collectedVariants = try JSONParser.parse(collected.stdout).arrayValue ?? []
        let refusals = collectedVariants.compactMap { $0.objectValue?["refusal"]?.stringValue }
        // The guard refused each, in the agent (its refusal, in the own keystore's words), not a failure of another kind.
        #expect(refusals.count == collectedVariants.count
                && refusals.allSatisfy { $0.contains("devtrust refuses to sign this challenge: it could be read as a JWS signing input") },
                "\(Set(refusals.map { String($0.prefix(160)) }))")
        let publicKey = try alice.devtrust(["pubkey"]).output
        #expect(publicKey == (try machine.publicKey()))
        let check = try ExternalTool.python.run([oracle, "check", "--public-key", publicKey, "--variants", variants])
        let totals = try #require(try JSONParser.parse(check.stdout).objectValue?["totals"]?.objectValue, "\(check)")
        #expect((totals["variants"]?.int64Value ?? 0) >= 300 && totals["signed"]?.int64Value == 0 && totals["accepted"]?.int64Value == 0,
                "seed \(seed): \(totals)")
        #expect(machine.audit.contains("uid=\(alice.account.uid) ") && machine.audit.contains("op=sign-challenge outcome=\"refused: devtrust refuses to sign"))

        let challenge = Self.randomChallenge()
        let signed = try alice.devtrust(["sign-challenge", challenge])
        #expect(signed.status == 0, "\(signed)")
        let request: JSONObject = ["spki": .string(publicKey),
                                   "der": .array([.object(["message": .string(Base64.encode(try Base64URL.decode(challenge, padding: .optional))),
                                                           "signature": .string(signed.output)])])]
        let verified = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(verified.stdout.contains("\"valid\": 1"), "\(verified)")
        // --json as with a keystore of one's own.
        let json = try alice.devtrust(["--json", "sign-challenge", Self.randomChallenge()])
        let signature = try JSONParser.parse(json.stdout).objectValue?["signature"]?.stringValue
        #expect(json.status == 0 && signature != nil, "\(json)")
        // Not base64url: refused on this side, as with a keystore of one's own.
        let junk = try alice.devtrust(["sign-challenge", "not base64!"])
        #expect(junk.status == 2 && junk.stderr.contains("the challenge is not base64url"), "\(junk)")
        #expect(!machine.audit.contains(challenge) && !machine.audit.contains(signed.output), "the audit shows a challenge or a signature")
    }

    /// `device-data` through the agent: the agent's collectors (a user's --claim refused for a measured
    /// name, added only for one its policy allows), signed by the machine key (PyJWT).
    @Test func deviceDataThroughTheAgentIsTheMachinesMeasurement() throws {
        let machine = try MachineAgent(policy: #"{"allowedClientClaims": ["ticket"]}"#)
        try machine.start()
        let alice = try machine.user("alice")
        let data = try alice.devtrust(["device-data", "--claim", "ticket=7"])
        #expect(data.status == 0, "\(data)")
        let checked = try #require(try CheckedDeviceToken.check([data.output], publicKey: try machine.publicKey()).first ?? nil, "\(data.output)")
        let measured = try JSONParser.parse(try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "attributes"],
                                                                 environment: machine.agentEnvironment).stdout).objectValue ?? [:]
        #expect(checked.claims["ticket"] == .string("7") && checked.claims["keyProtection"] == .string("software")
                && checked.claims["diskEncryption"] == measured["diskEncryption"] && checked.claims["jti"] != nil, "\(checked.claims)")
        #expect(checked.header["deviceId"] == nil, "\(checked.header)")
        let forged = try alice.devtrust(["device-data", "--claim", "diskEncryption=true"])
        #expect(forged.status == 2 && forged.stdout.isEmpty && forged.stderr.contains("--claim diskEncryption"), "\(forged)")
        let unlisted = try alice.devtrust(["device-data", "--claim", "site=lab"])
        #expect(unlisted.status == 2 && unlisted.stderr.contains("lets clients add only ticket"), "\(unlisted)")
        let json = try alice.devtrust(["--json", "device-data"])
        #expect((try JSONParser.parse(json.stdout).objectValue?["deviceData"]?.stringValue)?.hasPrefix("eyJ") == true, "\(json)")
        #expect(machine.audit.contains("op=device-data jti=") && !machine.audit.contains("eyJ"))
    }

    /// A DPoP-bound app-native sign-in through the agent: its device token is the user's registration
    /// of the machine key (the server takes it as theirs), its proofs are the machine key's (the agent
    /// writes them), the tokens bound to that key; the sign-in is kept in the user's own keystore,
    /// never in the machine's. A refresh and `dpop-proof` prove the same key; the resource takes it.
    @Test func aDPoPSignInThroughTheAgent() throws {
        let machine = try MachineAgent()
        try machine.start()
        let server = try ReferenceServer(["--dpop"])
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let jkt = try Self.thumbprint(machine)
        let login = try alice.devtrust(["login", "--server", server.url, "--client-id", "devtrust-app", "--non-interactive", "--dpop"] + ReferenceServer.signInAnswers)
        #expect(login.status == 0 && login.stderr.contains("DPoP-bound to the device key \(jkt)"), "\(login)")
        let records = try server.get("/api/signin-records").arrayValue?.compactMap(\.objectValue) ?? []
        #expect(records.last?["accepted"] == .bool(true) && records.last?["deviceId"] == .string(id) && records.last?["user"] == .string("alice@example.com"),
                "\(records)")
        // Hers, in her keystore; none in the machine's.
        #expect(try Self.manifest(alice.home + "/data/devtrust")["signIns"]?.arrayValue?.count == 1)
        #expect(try Self.manifest(machine.keystore)["signIns"] == .array([]))

        let refreshed = try alice.devtrust(["access-token", "--refresh"])
        #expect(refreshed.status == 0, "\(refreshed)")
        let tokenEndpoint = server.url + "/oauth2/token"
        let tokenProofs = try (server.get("/api/dpop-proofs").arrayValue ?? []).compactMap(\.stringValue)
        #expect(tokenProofs.count >= 2, "\(tokenProofs)")
        for proof in tokenProofs {
            _ = try DPoPCheck.verify(proof, method: "POST", url: tokenEndpoint, jkt: jkt)
        }
        let resource = server.url + "/resource"
        let proof = try alice.devtrust(["dpop-proof", "--method", "GET", "--url", resource + "?q=1"])
        #expect(proof.status == 0, "\(proof)")
        let checked = try DPoPCheck.verify(proof.output, method: "GET", url: resource, accessToken: refreshed.output, jkt: jkt)
        #expect(Set((checked?["header"]?.objectValue ?? [:]).members.map(\.key)) == ["typ", "alg", "jwk"], "\(String(describing: checked))")
        let answer = try DPoPCheck.curl(resource, headers: ["Authorization: DPoP \(refreshed.output)", "DPoP: \(proof.output)"])
        #expect(answer.status == "200" && answer.body.contains(jkt), "\(answer)")
        let json = try JSONParser.parse(try alice.devtrust(["--json", "dpop-proof", "--method", "POST", "--url", resource, "--nonce", "n-1"]).stdout).objectValue
        #expect(json?["jkt"] == .string(jkt))
        _ = try DPoPCheck.verify(json?["proof"]?.stringValue ?? "", method: "POST", url: resource, accessToken: refreshed.output, nonce: "n-1", jkt: jkt)
        #expect(machine.audit.contains("uid=\(alice.account.uid) ") && machine.audit.contains("op=dpop-proof server=\"\(server.url)\" jti="))
        #expect(machine.audit.contains("op=sign-in-token server=\"\(server.url)\" jti="))
        #expect(!machine.audit.contains("eyJ") && !machine.audit.contains("/resource"), "\(machine.audit)")
    }

    /// `authorize-url`'s device token and the native host's come from the agent: each user's own
    /// registration of the machine key (the server takes them as that user's), PyJWT verifies them
    /// with the machine key; a user with no registration gets none.
    @Test func authorizeURLAndTheNativeHostThroughTheAgent() throws {
        let machine = try MachineAgent()
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let url = try alice.devtrust(["authorize-url", "--server", server.url, "--client-id", "devtrust-app", "--redirect-uri", "https://app.example/callback"])
        #expect(url.status == 0, "\(url)")
        let query = URLComponents(string: url.output)?.queryItems ?? []
        let deviceToken = try #require(query.first { $0.name == "device_token" }?.value, "\(url.output)")
        let check = try Self.deviceCheck(deviceToken, at: server)
        #expect(check["accepted"] == .bool(true) && check["deviceId"] == .string(id) && check["user"] == .string("alice@example.com"), "\(check)")
        let bobsURL = try bob.devtrust(["authorize-url", "--server", server.url, "--client-id", "devtrust-app", "--redirect-uri", "https://app.example/callback"])
        #expect(bobsURL.status == 0 && !bobsURL.output.contains("device_token"), "\(bobsURL)")
        #expect(bobsURL.stderr.contains("signing in without a device token"), "\(bobsURL.stderr)")

        let navigation = server.url + "/oauth2/authorize?client_id=devtrust-app&response_type=code"
        let messages = [NativeHostTests.config, NativeHostTests.token(navigation, id: 1)].flatMap(NativeMessaging.frame)
        func host(_ user: MachineUser) throws -> NativeHostRun {
            let (runner, words) = user.account.command(machine.binary, [NativeMessaging.chromiumCaller], environment: user.environment)
            return try NativeHostRun(runner, words, environment: ["PATH": "/usr/bin:/bin"], input: messages)
        }
        let hers = try host(alice)
        #expect(hers.status == 0 && hers.replies.count == 2, "\(hers)")
        #expect(hers.replies.first??["authorizationEndpoints"] == .array([.string(server.url + "/oauth2/authorize")]), "\(hers)")
        let token = try #require(hers.replies.last??["token"]?.stringValue, "\(hers)")
        let verified = try #require(try CheckedDeviceToken.check([token], publicKey: try machine.publicKey()).first ?? nil)
        #expect(verified.header["deviceId"] == .string(id))
        #expect(try Self.deviceCheck(token, at: server)["user"] == .string("alice@example.com"))
        let his = try host(bob)
        #expect(his.replies.last??["error"] == .string("not_registered"), "\(his)")
        #expect(machine.audit.contains("uid=\(alice.account.uid) ") && machine.audit.contains("op=token server=\"\(server.url)\" jti="))
    }

    /// The native host through the agent asks it once a token (before: its status, then the token),
    /// taking the registrations the agent showed it last; and it serves no registration longer than
    /// the agent does: the agent decides for every token that the registration is still the caller's,
    /// so after `reset` the next request gets none, and after a new `register` the new registration's.
    /// Counted from the agent's audit (one line a request, written before its reply).
    @Test func theNativeHostAsksTheAgentOnceAToken() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let (runner, words) = alice.account.command(machine.binary, [NativeMessaging.chromiumCaller], environment: alice.environment)
        let host = try NativeHostSession(runner, words, environment: ["PATH": "/usr/bin:/bin"])
        defer { host.closeInput() }
        let navigation = server.url + "/oauth2/authorize?client_id=devtrust-app&response_type=code"
        /// Alice's requests to the agent so far, by operation.
        func requests() -> [String: Int] {
            var counts = [String: Int]()
            for line in Self.auditLines(machine, uid: alice.account.uid) {
                guard let op = line.split(separator: " ").first(where: { $0.hasPrefix("op=") }) else { continue }
                counts[String(op.dropFirst(3)), default: 0] += 1
            }
            return counts
        }
        func token(_ number: Int) -> JSONObject? {
            host.send(NativeMessaging.frame(NativeHostTests.token(navigation, id: number)))
            return host.receive()
        }
        let before = requests()
        host.send(NativeMessaging.frame(NativeHostTests.config))
        #expect(host.receive()?["authorizationEndpoints"] == .array([.string(server.url + "/oauth2/authorize")]))
        var tokens = [String]()
        for number in 1...5 {
            let reply = token(number)
            tokens.append(reply?["token"]?.stringValue ?? "")
            #expect(reply?["id"] == .integer(Int64(number)), "\(String(describing: reply)) \(host.stderr)")
        }
        let after = requests()
        // config: one status; each token: one token request, and no status.
        #expect(after["status", default: 0] - before["status", default: 0] == 1 && after["token", default: 0] - before["token", default: 0] == 5,
                "before \(before), after \(after): \(machine.audit)")
        let verified = try CheckedDeviceToken.check(tokens, publicKey: try machine.publicKey())
        #expect(verified.count == 5 && verified.allSatisfy { $0?.header["deviceId"] == .string(id) }, "\(tokens)")

        // Alice forgets her registration: the next token request gets none (the agent refuses the one
        // the host remembered; asked again, it shows none), and the host says why.
        #expect(try alice.devtrust(["reset", "--yes"]).status == 0)
        let forgotten = token(6)
        #expect(forgotten?["token"] == nil && forgotten?["error"] == .string("not_registered"), "\(String(describing: forgotten))")
        // Registered again (a new id): the next token is the new registration's.
        let newID = try Self.register(alice, as: "alice@example.com", at: server)
        #expect(newID != id)
        let renewed = token(7)
        let renewedToken = try #require(renewed?["token"]?.stringValue, "\(String(describing: renewed)) \(host.stderr)")
        #expect(try Self.header(renewedToken)["deviceId"] == .string(newID))
        #expect(try Self.deviceCheck(renewedToken, at: server)["accepted"] == .bool(true))
    }

    /// `reset` as a user: their sign-ins revoked and deleted (their own keystore), then the agent
    /// forgets their registrations, and only theirs: another user's registrations and the machine key
    /// stay. A client cannot name whose registrations go (the kernel says whose), nor reset the machine.
    @Test func resetForgetsOnlyTheCallersRegistrations() throws {
        let machine = try MachineAgent()
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        _ = try Self.register(alice, as: "alice@example.com", at: server)
        let bobID = try Self.register(bob, as: "bob@example.com", at: server)
        let machineKey = try machine.publicKey()
        let login = try alice.devtrust(["login", "--server", server.url, "--client-id", "devtrust-app", "--non-interactive"] + ReferenceServer.signInAnswers)
        #expect(login.status == 0, "\(login)")

        // Alice asks the agent to forget Bob's: only root names a uid.
        let named = try alice.rawClient("request", [#"{"v":1,"op":"forget-registrations","uid":\#(bob.account.uid)}"#])
        #expect(named.stdout.contains("notPermitted") && named.stdout.contains("only root has the devtrust agent forget another uid's registrations")
                && !named.stdout.contains("\"ok\""), "\(named)")
        let namedByCommand = try alice.devtrust(["reset", "--uid", "\(bob.account.uid)", "--yes"])
        #expect(namedByCommand.status == 3 && namedByCommand.stderr.contains("only root has the devtrust agent forget another uid's registrations"), "\(namedByCommand)")

        // Off a terminal, nothing goes without --yes.
        let unconfirmed = try alice.devtrust(["reset"])
        #expect(unconfirmed.status == 2 && unconfirmed.stderr.contains("reset forgets your registrations; confirm with --yes when not at a terminal"),
                "\(unconfirmed)")
        let reset = try alice.devtrust(["reset", "--yes"])
        #expect(reset.status == 0, "\(reset)")
        #expect(reset.stderr.contains("revoked the") && reset.stderr.contains("deleted 1 sign-in(s) from \(alice.home)/data/devtrust"), "\(reset.stderr)")
        #expect(reset.stderr.contains("the devtrust agent at \(machine.socket) forgot your 1 registration(s) (with \(server.url)); "
                                      + "the machine's key and other users' registrations stay"), "\(reset.stderr)")
        let status = try JSONParser.parse(try alice.devtrust(["status", "--json"]).stdout).objectValue
        #expect(status?["registrations"] == .array([]) && status?["signIns"] == .array([]), "\(String(describing: status))")
        let gone = try alice.devtrust(["token"])
        #expect(gone.status == 3 && gone.stdout.isEmpty, "\(gone)")
        let again = try alice.devtrust(["reset", "--yes"])
        #expect(again.status == 0 && again.stderr.contains("nothing to reset: you have no registrations at the devtrust agent"), "\(again)")

        // Bob's registration and the machine key are where they were.
        let bobs = try bob.devtrust(["token"])
        #expect(bobs.status == 0, "\(bobs)")
        #expect(try Self.header(bobs.output)["deviceId"] == .string(bobID))
        #expect(try Self.deviceCheck(bobs.output, at: server)["user"] == .string("bob@example.com"))
        #expect(try machine.publicKey() == machineKey && (try bob.devtrust(["pubkey"]).output) == machineKey)
        let owners = try Self.manifest(machine.keystore)["registrations"]?.arrayValue?.compactMap { $0.objectValue?["uid"]?.int64Value }
        #expect(owners == [Int64(bob.account.uid)], "\(String(describing: owners))")
        // The machine keystore is reset only by root naming it: a user cannot even open it.
        let machineReset = try alice.devtrust(["--keystore", machine.keystore, "reset", "--yes"])
        #expect(machineReset.status == 7, "\(machineReset)")
        #expect(try machine.publicKey() == machineKey)
        #expect(machine.audit.contains("uid=\(alice.account.uid) ") && machine.audit.contains("op=forget-registrations outcome=\"ok: forgot 1 registration(s)\""))
    }

    /// The agent's audit lines about requests of `uid`.
    static func auditLines(_ machine: MachineAgent, uid: UInt32) -> [Substring] {
        machine.audit.split(separator: "\n").filter { $0.hasPrefix("devtrust agent: uid=\(uid) ") }
    }

    /// Bob answers and completes a Device Registration step of his own for `id` (raw requests, as a
    /// client that passes any id through): whether the agent signed or recorded anything for it.
    static func claimed(_ id: String, by bob: MachineUser, at server: String) throws -> (signed: Bool, recorded: Bool, result: String) {
        let step = try bob.rawClient("request", [#"{"v":1,"op":"registration-step","server":"\#(server)","registrationId":"\#(id)","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#])
        let complete = try bob.rawClient("request", [#"{"v":1,"op":"registration-complete","server":"\#(server)","registrationId":"\#(id)","flowType":"REGISTRATION"}"#])
        return (step.stdout.contains("\"signature\""), complete.stdout.contains("\"ok\""), "\(step)\n\(complete)")
    }

    /// A registration forgotten (its user's `reset`, or replaced by registering again) stays its user's
    /// while the key is the same: the server still has the id as that user's device, so the agent
    /// answers and records it for nobody else; its own user may have it again. (The old agent checked
    /// only the registrations it held: Bob recorded Alice's id once she had reset, and his tokens
    /// named it.)
    @Test func aForgottenRegistrationsIdStaysItsUsers() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        let aliceID = try Self.register(alice, as: "alice@example.com", at: server)
        let bobID = try Self.register(bob, as: "bob@example.com", at: server)
        let reset = try alice.devtrust(["reset", "--yes"])
        #expect(reset.status == 0, "\(reset)")

        for (place, spelling) in [(server.url, aliceID), ("https://not-the-server.example", aliceID.uppercased())] {
            let claim = try Self.claimed(spelling, by: bob, at: place)
            #expect(!claim.signed && !claim.recorded, "\(place) \(spelling): \(claim.result)")
            let stolen = try bob.devtrust(["token", "--device-id", spelling])
            #expect(stolen.status == 3 && stolen.stdout.isEmpty, "\(stolen)")
        }
        // Bob registers again with his server: his old id is replaced, and stays his.
        let replaced = try bob.devtrust(["register", "--server", server.url, "--replace", "--non-interactive", "--inputs", "-", "--json"],
                                        stdin: Self.answers("bob@example.com"))
        #expect(replaced.status == 0, "\(replaced)")
        let aliceClaim = try Self.claimed(bobID, by: alice, at: "https://elsewhere.example")
        #expect(!aliceClaim.signed && !aliceClaim.recorded, "\(aliceClaim.result)")
        // Alice may have her own id again.
        let own = try Self.claimed(aliceID, by: alice, at: server.url)
        #expect(own.signed && own.recorded, "\(own.result)")
        let hers = try alice.devtrust(["token", "--device-id", aliceID])
        #expect(hers.status == 0, "\(hers)")
        #expect(try Self.header(hers.output)["deviceId"] == .string(aliceID))

        // The machine keystore keeps whose the forgotten ids were: Bob's replaced one (Alice's is hers again).
        let formers = try Self.manifest(machine.keystore)["formerRegistrations"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(formers == [["registrationId": .string(bobID), "uid": .integer(Int64(bob.account.uid)), "account": .string(bob.account.name)]],
                "\(formers)")
        #expect(Self.auditLines(machine, uid: bob.account.uid).contains { $0.contains("op=registration-step") && $0.contains("is not one of your registrations") },
                "\(machine.audit)")
    }

    /// `userdel` frees a uid and `useradd` gives it to a new account: the new account gets none of the
    /// departed user's registrations (each records the account that made it), cannot record their
    /// ids, and cannot have the agent forget them; root can (`reset --uid`), and the ids stay the
    /// departed user's. (The old agent knew users by uid alone: the new account's tokens named the
    /// departed user's device, and the server took them as that user's.)
    @Test func aUidGivenToANewAccountGetsNoneOfTheDepartedUsers() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.userWhoseUIDIsGivenAgain("alice")
        let aliceID = try Self.register(alice, as: "alice@example.com", at: server)
        let uid = alice.account.uid, aliceName = alice.account.name
        #expect(try alice.devtrust(["token"]).status == 0)
        let records = try Self.manifest(machine.keystore)["registrations"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(records.map { $0["account"] } == [.string(aliceName)], "\(records)")

        alice.account.remove()
        let bob = try machine.user("bob", uid: uid)
        #expect(bob.account.uid == uid)
        let token = try bob.devtrust(["token"])
        #expect(token.status == 3 && token.stdout.isEmpty, "\(token)")
        let named = try bob.devtrust(["token", "--device-id", aliceID])
        #expect(named.status == 3 && named.stdout.isEmpty, "\(named)")
        let status = try JSONParser.parse(try bob.devtrust(["status", "--json"]).stdout).objectValue
        #expect(status?["registrations"] == .array([]), "\(String(describing: status))")
        let claim = try Self.claimed(aliceID, by: bob, at: server.url)
        #expect(!claim.signed && !claim.recorded, "\(claim.result)")
        // His own reset forgets only his (none); naming the uid is root's.
        let own = try bob.devtrust(["reset", "--yes"])
        #expect(own.status == 0 && own.stderr.contains("nothing to reset"), "\(own)")
        let byUID = try bob.devtrust(["reset", "--uid", "\(uid)", "--yes"])
        #expect(byUID.status == 3, "\(byUID)")
        #expect(try Self.manifest(machine.keystore)["registrations"]?.arrayValue?.count == 1)

        // Root forgets the departed user's registrations by uid, through the agent.
        let environment = machine.agentEnvironment.merging(["DEVTRUST_AGENT": machine.socket]) { $1 }
        let unconfirmed = try ProcessRunner.run(machine.binary, ["reset", "--uid", "\(uid)"], environment: environment)
        #expect(unconfirmed.status == 2 && unconfirmed.stderr.contains("confirm with --yes"), "\(unconfirmed)")
        let wrong = try ProcessRunner.run(machine.binary, ["reset", "--uid", aliceName, "--yes"], environment: environment)
        #expect(wrong.status == 2 && wrong.stderr.contains("--uid takes a uid, a number"), "\(wrong)")
        let forgotten = try ProcessRunner.run(machine.binary, ["reset", "--uid", "\(uid)", "--yes"], environment: environment)
        #expect(forgotten.status == 0 && forgotten.stderr.contains("the devtrust agent at \(machine.socket) forgot 1 registration(s) of uid \(uid) (account \(aliceName)): \(aliceID) with \(server.url); their ids stay theirs (the agent records them for no other account"),
                "\(forgotten)")
        let manifest = try Self.manifest(machine.keystore)
        #expect(manifest["registrations"] == .array([]), "\(manifest)")
        #expect(manifest["formerRegistrations"] == .array([.object(["registrationId": .string(aliceID), "uid": .integer(Int64(uid)), "account": .string(aliceName)])]))
        #expect(Self.auditLines(machine, uid: 0).contains { $0.hasSuffix("op=forget-registrations outcome=\"ok: forgot 1 registration(s) of uid \(uid)\"") },
                "\(machine.audit)")
        // Asked again, there is nothing left to forget: said so, exit 0.
        let twice = try ProcessRunner.run(machine.binary, ["reset", "--uid", "\(uid)", "--yes"], environment: environment)
        #expect(twice.status == 0 && twice.stderr.contains("nothing to forget: uid \(uid) has no registrations in the devtrust agent at \(machine.socket)"), "\(twice)")
        // Her id stays hers; Bob registers a device of his own.
        let again = try Self.claimed(aliceID, by: bob, at: server.url)
        #expect(!again.signed && !again.recorded, "\(again.result)")
        let bobID = try Self.register(bob, as: "bob@example.com", at: server)
        let bobs = try bob.devtrust(["token"])
        #expect(bobs.status == 0, "\(bobs)")
        #expect(try Self.header(bobs.output)["deviceId"] == .string(bobID))
        #expect(try Self.deviceCheck(bobs.output, at: server)["user"] == .string("bob@example.com"))
        // Root forgets Bob's in the machine keystore itself, named (as with the agent stopped): his id stays his too.
        let direct = try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "reset", "--uid", "\(uid)", "--yes"], environment: machine.agentEnvironment)
        #expect(direct.status == 0 && direct.stderr.contains("\(machine.keystore) forgot 1 registration(s) of uid \(uid) (account \(bob.account.name)): \(bobID) with \(server.url)"),
                "\(direct)")
        #expect(try Self.manifest(machine.keystore)["formerRegistrations"]?.arrayValue?.last == .object(["registrationId": .string(bobID), "uid": .integer(Int64(uid)),
                                                                                                          "account": .string(bob.account.name)]))
        #expect(try bob.devtrust(["token"]).status == 3)
    }

    /// A client gives a DPoP proof only its method, URL, nonce and access token's hash: a header, a
    /// claim, a key or a time of its own is refused, as is a field a proof could not carry; the proof
    /// the agent writes has its header and claims and no others (jwcrypto, PyJWT).
    @Test func aClientCannotWriteADPoPProofsHeaderOrClaims() throws {
        let machine = try MachineAgent()
        try machine.start()
        let alice = try machine.user("alice")
        let base = #""v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/a""#
        let refused: [(String, String)] = [
            (#"{\#(base),"header":{"typ":"JWT","alg":"ES256"}}"#, "unknown field \\\"header\\\""),
            (#"{\#(base),"claims":[["sub","alice"]]}"#, "unknown field \\\"claims\\\""),
            (#"{\#(base),"typ":"JWT"}"#, "unknown field \\\"typ\\\""),
            (#"{\#(base),"jwk":{"kty":"EC"}}"#, "unknown field \\\"jwk\\\""),
            (#"{\#(base),"iat":4102444800}"#, "unknown field \\\"iat\\\""),
            (#"{\#(base),"jti":"mine"}"#, "unknown field \\\"jti\\\""),
            (#"{"v":1,"op":"dpop-proof","method":"get","url":"https://r.example/a"}"#, "must be an HTTP method in upper case"),
            (#"{"v":1,"op":"dpop-proof","method":"GET\",\"sub\":\"x","url":"https://r.example/a"}"#, "must be an HTTP method"),
            (#"{"v":1,"op":"dpop-proof","method":"GET","url":"https://r.example/a\",\"sub\":\"x"}"#, "must be printable ASCII without spaces, quotes"),
            (#"{"v":1,"op":"dpop-proof","method":"GET","url":"eyJhbGciOiJub25lIn0.e30"}"#, "must be an https:// (or http://) URL"),
            (#"{\#(base),"nonce":"a\"b"}"#, "field \\\"nonce\\\": must be 1 to 4096 characters"),
            (#"{\#(base),"ath":"e30.e30"}"#, "field \\\"ath\\\": must be a SHA-256 hash"),
        ]
        let replies = try alice.rawClient("each", refused.map(\.0)).stdout.split(separator: "\n").map(String.init)
        #expect(replies.count == refused.count, "\(replies)")
        for ((request, words), reply) in zip(refused, replies) {
            #expect(reply.contains(words) && reply.contains("\"usage\"") && !reply.contains("\"ok\""), "\(request): \(reply)")
        }
        // What a proof carries, and nothing else: ath is the hash of the token "at".
        let ath = "sda5G2fCr6XjIpiNlGJjjTVN34oe9526mH-BXCK0uu4"
        let reply = try JSONParser.parse(try alice.rawClient("request", [#"{"v":1,"op":"dpop-proof","method":"PATCH","url":"HTTPS://R.example:443/a/b?x=1#f","nonce":"n!1","ath":"\#(ath)"}"#]).stdout)
        let proof = try #require(reply.objectValue?["ok"]?.objectValue?["proof"]?.stringValue, "\(reply)")
        let checked = try DPoPCheck.verify(proof, method: "PATCH", url: "https://r.example/a/b", accessToken: "at", nonce: "n!1", jkt: try Self.thumbprint(machine))
        #expect(Set((checked?["header"]?.objectValue ?? [:]).members.map(\.key)) == ["typ", "alg", "jwk"], "\(String(describing: checked))")
        #expect(checked?["header"]?.objectValue?["typ"] == .string("dpop+jwt"))
        #expect(Set((checked?["claims"]?.objectValue ?? [:]).members.map(\.key)) == ["jti", "htm", "htu", "iat", "nonce", "ath"], "\(String(describing: checked))")
        #expect(!machine.audit.contains(proof) && !machine.audit.contains("/a/b"), "\(machine.audit)")
    }

    /// `doctor` through the agent: the agent's check; a user with a key of their own is told that the
    /// agent stands in for it and how to move (as `status` says it); a user without one is not told
    /// to make one.
    @Test func doctorSaysWhenTheAgentStandsInForAUsersOwnKey() throws {
        let machine = try MachineAgent()
        try machine.start()
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        #expect(try alice.devtrust(["init", "--backend", "software", "-q"], environment: ["DEVTRUST_TCTI": "device:/nonexistent"]).status == 0)
        let ownKeystore = alice.home + "/data/devtrust"
        func checks(_ user: MachineUser) throws -> [String: JSONObject] {
            let doctor = try user.devtrust(["doctor", "--json"], environment: ["DEVTRUST_TCTI": "device:/nonexistent"])
            var checks = [String: JSONObject]()
            for case let .object(check) in try JSONParser.parse(doctor.stdout).objectValue?["checks"]?.arrayValue ?? [] {
                if let id = check["id"]?.stringValue { checks[id] = check }
            }
            return checks
        }
        let hers = try checks(alice)
        let agent = try #require(hers["agent"], "\(hers.keys)")
        #expect(agent["verdict"] == .string("warn") && agent["detail"]?.stringValue?.contains("the devtrust agent at \(machine.socket) answers for the device key") == true
                && agent["detail"]?.stringValue?.contains("your own keystore \(ownKeystore) holds a key too") == true, "\(agent)")
        #expect(agent["fix"]?.stringValue?.contains("`devtrust --keystore \(ownKeystore) reset --yes`") == true, "\(agent)")
        #expect(hers["key.signs"]?["verdict"] == .string("pass"), "\(String(describing: hers["key.signs"]))")
        let his = try checks(bob)
        #expect(his["agent"]?["verdict"] == .string("pass"), "\(String(describing: his["agent"]))")
        #expect(his["key.signs"]?["verdict"] == .string("skip") && his["key.signs"]?["detail"]?.stringValue?.contains("the devtrust agent's machine key is used") == true,
                "\(String(describing: his["key.signs"]))")
    }

    /// What the agent says when it cannot do what was asked names the next step that works through it:
    /// a completion it answered no step for (register again; the server's record stays), and a user
    /// with as many registrations as it keeps (`status` lists them, `reset` forgets them), refused
    /// before anything is signed.
    @Test func theAgentsRefusalsNameTheRightNextStep() throws {
        let machine = try MachineAgent(policy: #"{"rateLimit": {"burst": 1000, "perSecond": 100}}"#)
        try machine.start()
        let alice = try machine.user("alice")
        let complete = try JSONParser.parse(try alice.rawClient("request", [#"{"v":1,"op":"registration-complete","server":"https://x.example","registrationId":"r-0","flowType":"REGISTRATION"}"#]).stdout)
        let error = complete.objectValue?["error"]?.objectValue
        #expect(error?["summary"]?.stringValue == "https://x.example completed the registration r-0, but the devtrust agent answered no Device Registration step r-0 "
                + "for you (it restarted since, or the step was answered over an hour ago), so it recorded nothing", "\(complete)")
        #expect(error?["hint"]?.objectValue?["text"]?.stringValue == "run `devtrust register --server https://x.example` again; the server keeps the device record r-0: "
                + "remove it at the server (the user's or an administrator's device list)", "\(complete)")

        let limit = 32
        var requests = [String]()
        for index in 0..<limit {
            requests.append(#"{"v":1,"op":"registration-step","server":"https://s\#(index).example","registrationId":"r-\#(index)","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#)
            requests.append(#"{"v":1,"op":"registration-complete","server":"https://s\#(index).example","registrationId":"r-\#(index)","flowType":"REGISTRATION"}"#)
        }
        let made = try alice.rawClient("each", requests).stdout.split(separator: "\n")
        #expect(made.count == 2 * limit && made.allSatisfy { $0.contains("\"ok\"") }, "\(made.filter { !$0.contains("\"ok\"") })")
        let over = try JSONParser.parse(try alice.rawClient("request", [#"{"v":1,"op":"registration-step","server":"https://more.example","registrationId":"r-more","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#]).stdout)
        let refusal = over.objectValue?["error"]?.objectValue
        #expect(refusal?["summary"]?.stringValue == "the devtrust agent keeps at most \(limit) registrations for one user of this machine, and you have that many", "\(over)")
        #expect(refusal?["hint"]?.objectValue?["text"]?.stringValue?.hasPrefix("nothing was signed or registered: `devtrust status` lists yours; `devtrust reset` forgets them all") == true,
                "\(over)")
        #expect(over.objectValue?["ok"] == nil)
        // The steps it names work: status lists them, reset forgets them.
        let status = try JSONParser.parse(try alice.devtrust(["status", "--json"]).stdout).objectValue
        #expect(status?["registrations"]?.arrayValue?.count == limit)
        let reset = try alice.devtrust(["reset", "--yes"])
        #expect(reset.status == 0 && reset.stderr.contains("forgot your \(limit) registration(s)"), "\(reset)")
    }
}

/// The agent with its machine key in a TPM (the test's swtpm) behind scripts/tpm_latency_proxy.py,
/// which holds each command for the time the test gives it (a chip's Sign is 200-600 ms) and logs
/// each command as it arrives; and the agent under users who flood it with connections.
extension AgentTests {
    /// A machine whose key is in `tpm`, made directly there; the agent reaches the TPM through `proxy`.
    static func tpmMachine(_ tpm: Swtpm, through proxy: TPMLatencyProxy) throws -> MachineAgent {
        let machine = try MachineAgent(tpm: tpm.tcti)
        machine.agentTCTI = proxy.tcti
        return machine
    }

    /// PyJWT's verdict on each token with the machine key: its claims, or nil when it does not verify.
    static func verified(_ tokens: [String], by machine: MachineAgent) throws -> [JSONObject?] {
        let request: JSONObject = ["spki": .string(try machine.publicKey()), "tokens": .array(tokens.map(JSONValue.string))]
        let checked = try ExternalTool.python.run([Repository.path("Tests/Interop/check_device_tokens.py")], stdin: JSONWriter.bytes(.object(request)))
        return (try JSONParser.parse(checked.stdout).arrayValue ?? []).map { result in
            result.objectValue?["valid"] == .bool(true) ? result.objectValue?["claims"]?.objectValue : nil
        }
    }

    /// While the TPM takes 4 s over one user's Sign, the agent goes on serving the rest: a junk and a
    /// huge request are refused at once, silent connections are held, a second user's token is taken
    /// in and signed next. Each token names its own user's registration, and each is one Sign: the
    /// key stays loaded.
    @Test(.enabled(if: Swtpm.shouldRun)) func aSlowTPMSignHoldsNoOtherClient() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), bob = try machine.user("bob"), mallory = try machine.user("mallory")
        let aliceID = try Self.register(alice, as: "alice@example.com", at: server)
        let bobID = try Self.register(bob, as: "bob@example.com", at: server)
        let (runner, words) = mallory.account.command(ExternalTool.python.rawValue, [machine.agentClient, "hold", machine.socket, "8", ""])
        let silent = try BackgroundProcess(runner, words, environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        defer {
            mallory.account.endProcesses()
            _ = silent.finish()
        }
        #expect(silent.waitFor { stdout, _ in stdout.contains("holding 8") }, "\(silent.stderr)")

        proxy.delays = ["Sign": 4000]
        let sent = proxy.commands.count
        let slow = try alice.account.start(machine.binary, ["token"], environment: alice.environment)
        // Its key checked at its handle (ReadPublic), then the Sign, held.
        #expect(proxy.waitForCommands(sent + 2) && proxy.commands.last == "Sign", "\(proxy.commands)")
        let held = Date()
        let next = try bob.account.start(machine.binary, ["token"], environment: bob.environment)
        for (bytes, words) in [("0000000568656c6c6f", "the request is not JSON"), ("ffffffff", "larger than the 65536 a request may be")] {
            let junk = try mallory.rawClient("raw", [bytes])
            let answered = Date().timeIntervalSince(held)
            #expect(junk.stdout.contains(words), "\(junk)")
            // Answered while the Sign is still held (the state, not a time): the old agent answered after it.
            #expect(!slow.hasEnded, "refused \(answered) s into a Sign of 4 s, after the token")
        }
        let first = try #require(slow.finish()), second = try #require(next.finish())
        #expect(first.status == 0 && second.status == 0, "\(first) \(second)\n\(machine.audit)")
        #expect(try Self.header(first.output)["deviceId"] == .string(aliceID) && Self.header(second.output)["deviceId"] == .string(bobID))
        #expect(try Self.deviceCheck(first.output, at: server)["user"] == .string("alice@example.com"))
        #expect(try Self.deviceCheck(second.output, at: server)["user"] == .string("bob@example.com"))
        #expect(Array(proxy.commands.dropFirst(sent)) == ["ReadPublic", "Sign", "ReadPublic", "Sign"], "\(proxy.commands)")
    }

    /// Two users' loops: Alice asks for 8 tokens at once, Bob for 2 while hers wait. The worker takes
    /// the users in turn, one request each, so Bob's come between Alice's, not after all of hers.
    @Test(.enabled(if: Swtpm.shouldRun)) func twoUsersLoopsAreServedInTurn() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        let ids = [alice.account.uid: try Self.register(alice, as: "alice@example.com", at: server),
                   bob.account.uid: try Self.register(bob, as: "bob@example.com", at: server)]
        let driver = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/run_concurrently.py"), into: machine.scratch.file("tools"))

        proxy.delays = ["Sign": 700]
        let sent = proxy.commands.count
        let alices = try alice.account.start(ExternalTool.python.rawValue, [driver, "8", "--", machine.binary, "token"], environment: alice.environment)
        // Her second Sign (each is a ReadPublic, then the Sign): all 8 of her requests are in (they started together), 6 wait.
        #expect(proxy.waitForCommands(sent + 4), "\(proxy.commands)")
        let bobs = try bob.account.start(ExternalTool.python.rawValue, [driver, "2", "--", machine.binary, "token"], environment: bob.environment)
        let hers = try #require(alices.finish(seconds: 120)), his = try #require(bobs.finish(seconds: 120))
        #expect(hers.status == 0 && his.status == 0, "\(hers) \(his)")

        // The order the agent signed in, from its audit: after Bob's two, Alice still had tokens to come.
        let order = machine.audit.split(separator: "\n").filter { $0.contains("op=token ") && $0.contains("outcome=\"ok\"") }
            .compactMap { line in [alice.account.uid, bob.account.uid].first { line.contains("uid=\($0) ") } }
        #expect(order.count == 10, "\(machine.audit)")
        let lastOfBob = try #require(order.lastIndex(of: bob.account.uid))
        #expect(order[(lastOfBob + 1)...].filter { $0 == alice.account.uid }.count >= 2, "served in the order \(order)")
        let tokens = (hers.stdout + his.stdout).split(separator: "\n").map(String.init)
        let claims = try Self.verified(tokens, by: machine)
        #expect(claims.count == 10 && claims.allSatisfy { $0 != nil }, "\(tokens)")
        for (token, user) in zip(tokens, Array(repeating: alice.account.uid, count: 8) + [bob.account.uid, bob.account.uid]) {
            #expect(try Self.header(token)["deviceId"] == ids[user].map(JSONValue.string))
        }
        #expect(Array(proxy.commands.dropFirst(sent)) == Array(repeating: ["ReadPublic", "Sign"], count: 10).flatMap { $0 }, "\(proxy.commands)")
    }

    /// The machine key stays loaded in the TPM: each token is one Sign, after the ReadPublic that
    /// checks the key is still the object at its handle, and one transient object is the agent's.
    /// When another program flushes it, or swtpm restarts (its transient objects gone, the connection
    /// broken), the agent loads it again, once, and signs with the same key; when the agent stops,
    /// the key leaves the TPM.
    @Test(.enabled(if: Swtpm.shouldRun)) func theMachineKeyStaysLoadedInTheTPM() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        let agent = try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        #expect(try tpm.transientHandles().count == 1)

        var tokens = [String]()
        let sent = proxy.commands.count
        for _ in 0..<5 {
            let token = try alice.devtrust(["token"])
            #expect(token.status == 0, "\(token)")
            tokens.append(token.output)
        }
        #expect(Array(proxy.commands.dropFirst(sent)) == Array(repeating: ["ReadPublic", "Sign"], count: 5).flatMap { $0 }, "\(proxy.commands)")

        // Another program flushes every transient object: the check finds the handle empty, the TPM's
        // transient objects hold no copy of the key, and it is loaded again (its parent identified), once.
        let flushed = try tpm.tool("tpm2_flushcontext", ["-t"])
        #expect(try flushed.status == 0 && tpm.transientHandles().isEmpty, "\(flushed)")
        let beforeFlushed = proxy.commands.count
        let afterFlush = try alice.devtrust(["token"])
        #expect(afterFlush.status == 0, "\(afterFlush)\n\(machine.audit)")
        tokens.append(afterFlush.output)
        #expect(Array(proxy.commands.dropFirst(beforeFlushed)) == ["ReadPublic", "GetCapability", "ReadPublic", "Load", "ReadPublic", "Sign"], "\(proxy.commands)")

        // swtpm restarts: the connection breaks and the key is gone; loaded again, once.
        try tpm.restart()
        let beforeRestart = proxy.commands.count
        let afterRestart = try alice.devtrust(["token"])
        #expect(afterRestart.status == 0, "\(afterRestart)\n\(machine.audit)")
        tokens.append(afterRestart.output)
        let reloading = Array(proxy.commands.dropFirst(beforeRestart))
        #expect(reloading.filter { $0 == "Load" }.count == 1 && reloading.last == "Sign" && !reloading.contains("CreatePrimary"), "\(reloading)")
        #expect(try tpm.transientHandles().count == 1)
        let again = proxy.commands.count
        let next = try alice.devtrust(["token"])
        tokens.append(next.output)
        #expect(Array(proxy.commands.dropFirst(again)) == ["ReadPublic", "Sign"], "\(proxy.commands)")

        // Every token verifies with the machine key and names Alice's registration.
        let claims = try Self.verified(tokens, by: machine)
        #expect(claims.count == 8 && claims.allSatisfy { $0 != nil }, "\(tokens)")
        #expect(try tokens.allSatisfy { try Self.header($0)["deviceId"] == .string(id) })
        #expect(try Self.deviceCheck(afterRestart.output, at: server)["user"] == .string("alice@example.com"))

        // Stopped, the agent leaves nothing in the TPM (swtpm has 3 transient slots and no resource manager).
        kill(agent.pid, SIGTERM)
        let ended = try #require(agent.finish())
        #expect(ended.status == 0 && ended.stderr.contains("devtrust agent: stopped"), "\(ended)")
        #expect(try tpm.transientHandles().isEmpty)
    }

    /// How many sockets process `pid` holds (the agent: its listener and its connections).
    static func sockets(of pid: Int32) -> Int {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return descriptors.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)"))?.hasPrefix("socket:") == true }.count
    }

    /// Users who each hold as many connections as the agent lets one user hold, opening a new one
    /// for each it closes, until it holds as many as it does in all: a user who has none yet (and
    /// root) still gets in, at once, in place of a connection of one who holds the most.
    @Test func noSetOfUsersLocksAnotherOut() throws {
        let machine = try MachineAgent()
        let agent = try machine.start()
        let machineKey = try machine.publicKey()
        let limits = AgentLimits()
        let attackers = try (0..<(limits.connections / limits.connectionsPerUser)).map { try machine.user("flood\($0)") }
        let floods = try attackers.map { attacker in
            try attacker.account.start(ExternalTool.python.rawValue, [machine.agentClient, "flood", machine.socket, "\(2 * limits.connectionsPerUser)"],
                                       environment: ["PATH": "/usr/bin:/bin"])
        }
        defer {
            for (attacker, flood) in zip(attackers, floods) {
                attacker.account.endProcesses()
                _ = flood.finish()
            }
        }
        for flood in floods { #expect(flood.waitFor { stdout, _ in stdout.contains("holding") }, "\(flood.stderr)") }
        let carol = try machine.user("carol")
        let full = { agent.waitFor { _, _ in Self.sockets(of: agent.pid) > limits.connections } }

        #expect(full(), "the agent holds \(Self.sockets(of: agent.pid)) sockets")
        let start = Date()
        let key = try carol.devtrust(["pubkey"])
        let elapsed = Date().timeIntervalSince(start)
        // Served (the old caps refused her at once); how soon is in the message, not a condition.
        #expect(key.status == 0 && key.output == machineKey, "\(key) after \(elapsed) s")
        #expect(full(), "the agent holds \(Self.sockets(of: agent.pid)) sockets")
        let root = try machine.rawClient("request", [#"{"v":1,"op":"pubkey"}"#])
        #expect(root.stdout.contains("\"ok\""), "\(root)")
        // A connection closed for theirs is audited with its user's (counted in their next line). (The
        // floods' connections are dropped at their deadline and opened again: one of the two may
        // have come at such a moment, and found room without taking another's.)
        #expect(agent.waitFor { _, stderr in stderr.contains("to make room for uid \(carol.account.uid)'s") || stderr.contains("to make room for uid 0's") },
                "\(machine.audit)")
    }
}

/// The machine keystore's bounds (issue 28's review, finding 2: a few uids made it unreadable, and
/// the agent would not start again): what a registration carries, how many the machine keeps.
extension AgentTests {
    /// The review's proof of concept (poc-fill-keystore.py) as 5 real users: each asks for 32
    /// registrations whose server (1,992 bytes) and id are mostly U+0085, which keystore.json writes
    /// as \u0085. The old agent recorded them all: 1 MiB of keystore.json after 5 uids, and every
    /// request of every user, and a restarted agent, failed with exit 7. Now each step and completion
    /// is refused, naming its field, before anything is signed or recorded; the keystore is as it
    /// was, Alice's token is accepted, and the agent starts again.
    @Test func aFewUsersCannotMakeTheMachineKeystoreUnreadable() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        let agent = try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let before = try Self.files(machine.keystore)

        let pad = String(repeating: "\u{85}", count: 1000)
        // Five uids: each user lives to the end of the test (userdel frees a uid, and useradd gives it to the next).
        var fillers = [MachineUser]()
        for index in 0..<5 {
            let user = try machine.user("fill\(index)")
            fillers.append(user)
            var requests = [String]()
            for number in 0..<32 {
                let server = "s\(user.account.uid)-\(number)" + pad.dropLast(8)
                let id = "\(user.account.uid)\(number)" + String(repeating: "\u{85}", count: 120)
                let step: JSONObject = ["v": .integer(1), "op": .string("registration-step"), "server": .string(server), "registrationId": .string(id),
                                        "challenge": .string(Self.randomChallenge()), "requiredParams": .array([.string("publicKey"), .string("signature")])]
                let complete: JSONObject = ["v": .integer(1), "op": .string("registration-complete"), "server": .string(server), "registrationId": .string(id),
                                            "flowType": .string("REGISTRATION")]
                requests += [JSONWriter.string(.object(step)), JSONWriter.string(.object(complete))]
            }
            let replies = try user.rawClient("each", requests).stdout.split(separator: "\n")
            #expect(replies.count == 64, "\(replies.prefix(2))")
            for reply in replies {
                let error = try JSONParser.parse(Array(reply.utf8)).objectValue?["error"]?.objectValue
                #expect(error?["category"] == .string("usage")
                        && error?["summary"]?.stringValue?.hasPrefix("the devtrust agent refused the request: field \"server\": must be a server base URL of at most 512 bytes") == true,
                        "\(reply.prefix(300))")
            }
        }
        #expect(try Self.files(machine.keystore) == before, "the keystore changed")
        let token = try alice.devtrust(["token"])
        #expect(token.status == 0, "\(token.stderr)")
        #expect(try Self.deviceCheck(token.output, at: server)["user"] == .string("alice@example.com"))
        // The audit said each refusal in a line of its own size, not 12 KB of escapes.
        #expect(machine.audit.split(separator: "\n").allSatisfy { $0.utf8.count < 2048 }, "\(machine.audit.utf8.count) bytes of audit")

        kill(agent.pid, SIGTERM)
        #expect(agent.finish()?.status == 0)
        try machine.start()
        let again = try alice.devtrust(["token"])
        #expect(again.status == 0, "\(again)")
        #expect(try Self.header(again.output)["deviceId"] == .string(id))
    }

    /// The machine keystore keeps 512 registrations, all users' together. Filled (by other users who
    /// registered before, 510 with the longest server, 512 bytes, and id, 128, the agent takes; then
    /// Alice's through the reference server and Dave's through a raw client), keystore.json stays
    /// under half of what a keystore reads. One more is refused at its Device Registration step
    /// (Carol's `register` through the reference server: exit 1, saying so, nothing signed), nothing
    /// is lost, and a user registering again with their server replaces theirs. The old agent had
    /// no such cap: Carol was registered, and more after her.
    @Test func theMachineKeepsAtMost512Registrations() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        let limit = 512
        // The registrations users made before (the agent writes keystore.json as it is, pretty; this is compact: the same records).
        var manifest = try Self.manifest(machine.keystore)
        let fingerprint = try #require(manifest["key"]?.objectValue?["fingerprint"]?.stringValue)
        manifest["registrations"] = .array((0..<(limit - 2)).map { index in
            let server = "https://s\(index % 32).example/" + String(repeating: "p", count: 512 - "https://s\(index % 32).example/".utf8.count)
            let id = "\(index)-" + String(repeating: "i", count: 128 - "\(index)-".utf8.count)
            return .object(["registrationId": .string(id), "server": .string(server), "flowType": .string("REGISTRATION"), "keyFingerprint": .string(fingerprint),
                            "registeredAt": .string("2026-11-30T00:00:00Z"), "uid": .integer(2_000_000 + Int64(index / 32))])
        })
        let seeded = machine.scratch.write("machine/ks/keystore.json", JSONWriter.bytes(.object(manifest)), mode: 0o600)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice"), dave = try machine.user("dave")
        _ = try Self.register(alice, as: "alice@example.com", at: server)
        let daves = try dave.rawClient("each", [#"{"v":1,"op":"registration-step","server":"https://dave.example","registrationId":"r-dave","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#,
                                                #"{"v":1,"op":"registration-complete","server":"https://dave.example","registrationId":"r-dave","flowType":"REGISTRATION"}"#])
        #expect(daves.stdout.split(separator: "\n").count == 2 && daves.stdout.split(separator: "\n").allSatisfy { $0.contains("\"ok\"") }, "\(daves)")
        let full = try #require(FileManager.default.contents(atPath: seeded))
        #expect(try Self.manifest(machine.keystore)["registrations"]?.arrayValue?.count == limit)
        #expect(full.count < 1_048_576 / 2, "\(full.count) bytes")

        // One more: refused before anything is signed, saying why and what to do.
        let carol = try machine.user("carol")
        let refused = try carol.devtrust(["register", "--server", server.url, "--non-interactive", "--inputs", "-"], stdin: Self.answers("carol@example.com"))
        #expect(refused.status == 1 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr.contains("devtrust: error: the devtrust agent keeps at most \(limit) registrations for all the users of this machine together, "
                                        + "and holds that many; nothing was signed or registered: ask the machine's administrator"), "\(refused.stderr)")
        let raw = try carol.rawClient("request", [#"{"v":1,"op":"registration-step","server":"https://more.example","registrationId":"r-more","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#])
        #expect(raw.stdout.contains("for all the users of this machine together") && !raw.stdout.contains("signature"), "\(raw)")
        #expect(FileManager.default.contents(atPath: seeded) == full, "the keystore changed")
        #expect(try server.devices().count == 1)
        // Nothing lost: Alice's token is accepted; she registers again with her server, which replaces hers.
        let token = try alice.devtrust(["token"])
        #expect(token.status == 0, "\(token)")
        #expect(try Self.deviceCheck(token.output, at: server)["user"] == .string("alice@example.com"))
        let replaced = try alice.devtrust(["register", "--server", server.url, "--replace", "--non-interactive", "--inputs", "-", "--json"],
                                          stdin: Self.answers("alice@example.com"))
        #expect(replaced.status == 0, "\(replaced)")
        #expect(try Self.manifest(machine.keystore)["registrations"]?.arrayValue?.count == limit)
        let newToken = try alice.devtrust(["token"])
        #expect(try Self.deviceCheck(newToken.output, at: server)["user"] == .string("alice@example.com"))
    }
}

/// Who the agent serves: root and uids with an account (issue 28's review, finding 4: a uid without
/// one, such as a user namespace's subordinate uids from /etc/subuid, 65536 a user, each had limits
/// of its own: 20 of them got 1,203 signatures in 2 s where one uid gets 60).
extension AgentTests {
    /// A uid with no entry in the user database (none is made for it: `setpriv --reuid` as root
    /// stands in for newuidmap).
    static func uidWithoutAccount() -> UInt32 {
        while true {
            let uid = UInt32.random(in: 3_000_000_000...3_100_000_000)
            if getpwuid(uid) == nil { return uid }
        }
    }

    /// `executable ARGS` as `uid` (its own gid, no groups) with only `environment`, from /.
    static func asUID(_ uid: UInt32, _ executable: String, _ arguments: [String], environment: [String: String] = [:]) -> (String, [String]) {
        let variables = (["PATH": "/usr/bin:/bin"].merging(environment) { $1 }).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return ("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/env", "-i", "-C", "/"] + variables + [executable] + arguments)
    }

    /// A uid without an account is refused as the policy refuses (exit 3), saying that it has none,
    /// and gets nothing: 10 of them asking for 61 signatures each (the review's poc-many-uids.sh) get
    /// none, and are not counted against anyone's rate; a real user is served as before, and so is root.
    @Test func onlyRootAndUsersWithAnAccountAreServed() throws {
        let machine = try MachineAgent(policy: #"{"rateLimit": {"burst": 60, "perSecond": 1}}"#)
        try machine.start()
        let alice = try machine.user("alice")
        let nobody = Self.uidWithoutAccount()
        let (runner, words) = Self.asUID(nobody, machine.binary, ["pubkey"], environment: ["HOME": "/nonexistent", "DEVTRUST_AGENT": machine.socket])
        let refused = try ProcessRunner.run(runner, words)
        #expect(refused.status == 3 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr == "devtrust: error: the devtrust agent's policy (\(machine.policy)) does not let uid \(nobody) use this machine's key: it serves only "
                + "root and users with an account on this machine, and uid \(nobody) has none (no entry in the user database); ask the machine's administrator\n",
                "\(refused.stderr)")

        let challenge = Self.randomChallenge()
        let request = #"{"v":1,"op":"sign-challenge","challenge":"\#(challenge)"}"#
        let uids = (0..<10).map { _ in Self.uidWithoutAccount() }
        let floods = try uids.map { uid in
            let (runner, words) = Self.asUID(uid, ExternalTool.python.rawValue, [machine.agentClient, "repeat", machine.socket, "61", request])
            return try BackgroundProcess(runner, words, environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        }
        let replies = floods.compactMap { $0.finish() }.flatMap { $0.stdout.split(separator: "\n") }
        #expect(replies.count == 10 * 61, "\(replies.count) replies")
        #expect(replies.filter { $0.contains("\"signature\"") }.count == 0 && replies.allSatisfy { $0.contains("\"notPermitted\"") && $0.contains("has none") },
                "\(Set(replies.map { String($0.prefix(200)) }))")
        #expect(machine.audit.contains("uid=\(uids[0]) ") && machine.audit.contains("outcome=\"refused: no account on this machine\""), "\(machine.audit.suffix(500))")
        // A line for each uid's first refusal, the rest counted into its next (one 10 s later, if the run is that slow), not a line a request.
        #expect(uids.allSatisfy { uid in (1...2).contains(machine.audit.split(separator: "\n").filter { $0.contains("uid=\(uid) ") }.count) },
                "\(machine.audit.suffix(800))")

        // Alice's whole burst is hers: 59 signatures and a public key.
        let signed = try alice.rawClient("repeat", ["59", request])
        #expect(signed.stdout.split(separator: "\n").filter { $0.contains("\"signature\"") }.count == 59, "\(signed.stdout.prefix(300))")
        #expect(try alice.devtrust(["pubkey"]).status == 0)
        #expect(try machine.rawClient("request", [#"{"v":1,"op":"pubkey"}"#]).stdout.contains("\"ok\""))
    }

    /// The review's measurement: with a TPM that signs in 1 s, uids without an account that each
    /// ask for signatures held a real user's sign-challenge until it was refused as busy (the old
    /// agent signed for each in turn: 30 uids, 30 s). Now they are refused without the TPM, and
    /// Alice's signature comes in about one Sign.
    @Test(.enabled(if: Swtpm.shouldRun)) func uidsWithoutAnAccountDoNotHoldARealUsersSignature() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        try machine.start()
        let alice = try machine.user("alice")
        #expect(try alice.devtrust(["pubkey"]).status == 0)
        proxy.delays = ["Sign": 1000]
        let signs = proxy.commands.filter { $0 == "Sign" }.count
        let request = #"{"v":1,"op":"sign-challenge","challenge":"\#(Self.randomChallenge())"}"#
        let uids = (0..<30).map { _ in Self.uidWithoutAccount() }
        let floods = try uids.map { uid in
            let (runner, words) = Self.asUID(uid, ExternalTool.python.rawValue, [machine.agentClient, "repeat", machine.socket, "3", request])
            return try BackgroundProcess(runner, words, environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        }
        defer { for flood in floods { _ = flood.finish() } }
        // Once the agent has decided for one of them, the others' requests are in, or coming.
        #expect(machine.process!.waitFor { _, stderr in uids.contains { stderr.contains("uid=\($0) ") } }, "\(machine.audit.suffix(500))")
        let start = Date()
        let signed = try alice.rawClient("request", [request])
        let elapsed = Date().timeIntervalSince(start)
        // Signed, not refused as busy (the old agent made her wait behind them all, 20 s, then refused).
        #expect(signed.stdout.contains("\"signature\""), "\(signed) after \(elapsed) s")
        let replies = floods.compactMap { $0.finish() }.flatMap { $0.stdout.split(separator: "\n") }
        #expect(replies.count == 90 && !replies.contains { $0.contains("\"signature\"") }, "\(Set(replies.map { String($0.prefix(160)) }))")
        #expect(proxy.commands.filter { $0 == "Sign" }.count == signs + 1, "\(proxy.commands.suffix(10))")
    }
}

/// The agent's machine key in a TPM that has no resource manager (swtpm; /dev/tpm0, which the
/// packaged unit allows): other programs see its transient object, can flush it and load theirs on
/// its handle, and what a killed agent loaded stays loaded.
extension AgentTests {
    /// The name and qualified name tpm2_readpublic gives the object at `handle`.
    static func objectNames(at handle: String, in tpm: Swtpm) throws -> String {
        let read = try tpm.tool("tpm2_readpublic", ["-c", handle])
        let fields = Dictionary(read.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }, uniquingKeysWith: { first, _ in first })
        guard read.status == 0, let name = fields["name"], let qualified = fields["qualified name"] else {
            throw FixtureError("tpm2_readpublic -c \(handle): \(read)")
        }
        return name + "/" + qualified
    }

    /// The TPM's transient objects: their names and qualified names, by handle.
    static func transientObjects(in tpm: Swtpm) throws -> [String: String] {
        var objects = [String: String]()
        for handle in try tpm.transientHandles() { objects[handle] = try objectNames(at: handle, in: tpm) }
        return objects
    }

    /// Another program's `tool ARGUMENTS` (a tpm2-tools command that loads one object), run until the
    /// object lands on `handle` (the TPM gives an object the first free handle): the objects that
    /// landed elsewhere are flushed. Whether one landed there.
    static func load(at handle: String, in tpm: Swtpm, _ tool: String, _ arguments: [String]) throws -> Bool {
        var elsewhere = [String]()
        defer { for filler in elsewhere { _ = try? tpm.tool("tpm2_flushcontext", [filler]) } }
        for _ in 0..<3 {
            let before = Set(try tpm.transientHandles())
            let loaded = try tpm.tool(tool, arguments)
            let new = Set(try tpm.transientHandles()).subtracting(before)
            guard loaded.status == 0, new.count == 1, let landed = new.first else { throw FixtureError("\(tool): \(loaded), new objects \(new)") }
            if landed == handle { return true }
            elsewhere.append(landed)
        }
        return false
    }

    /// Another program flushes the machine key from a TPM without a resource manager and loads its own
    /// signing key, which lands on the handle the agent's key had; later it loads the machine key's
    /// public part alone (LoadExternal: the key's very name, no private part) on the handle the agent
    /// loaded the key at again. The agent signs with neither: before it signs it checks the object at
    /// its handle (its name, then its qualified name: under which parent it is), lets go of a handle
    /// that holds another object without flushing it (it is not the agent's), loads the machine key
    /// again and signs with it, once.
    @Test(.enabled(if: Swtpm.shouldRun)) func anotherProgramsObjectAtTheKeysHandleIsNeverSignedWith() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        let agent = try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let keyHandle = try #require(try tpm.transientHandles().first)
        let machineKey = try Self.objectNames(at: keyHandle, in: tpm)
        #expect(try Self.transientObjects(in: tpm) == [keyHandle: machineKey])
        let work = TemporaryDirectory("other-program")
        let publicPart = try tpm.tool("tpm2_readpublic", ["-c", keyHandle, "-o", work.file("machine-key.pub")])
        #expect(publicPart.status == 0, "\(publicPart)")
        var tokens = [String]()

        // Another program flushes every transient object and makes an unrestricted signing key, at the agent's handle.
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]).status == 0)
        #expect(try Self.load(at: keyHandle, in: tpm, "tpm2_createprimary", ["-C", "o", "-G", "ecc256", "-a", "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign",
                                                                             "-c", work.file("other.ctx")]))
        let other = try Self.objectNames(at: keyHandle, in: tpm)
        #expect(try Self.transientObjects(in: tpm) == [keyHandle: other] && other != machineKey)
        var sent = proxy.commands.count
        let afterSwap = try alice.devtrust(["token"])
        try #require(afterSwap.status == 0, "\(afterSwap)\n\(machine.audit)")
        tokens.append(afterSwap.output)
        var commands = Array(proxy.commands.dropFirst(sent))
        #expect(commands.filter { $0 == "Sign" } == ["Sign"] && commands.filter { $0 == "Load" } == ["Load"] && commands.last == "Sign", "\(commands)")
        // Theirs is where it was, untouched; the machine key is loaded beside it.
        var objects = try Self.transientObjects(in: tpm)
        #expect(objects.count == 2 && objects[keyHandle] == other, "\(objects)")
        let reloadedHandle = try #require(objects.first { $0.value == machineKey }?.key, "\(objects)")
        sent = proxy.commands.count
        let steady = try alice.devtrust(["token"])
        try #require(steady.status == 0, "\(steady)")
        tokens.append(steady.output)
        #expect(Array(proxy.commands.dropFirst(sent)) == ["ReadPublic", "Sign"], "\(proxy.commands)")

        // It flushes everything again and loads the machine key's public part alone at the agent's
        // handle: the key's name, another qualified name (under no parent), and it cannot sign.
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]).status == 0)
        #expect(try Self.load(at: reloadedHandle, in: tpm, "tpm2_loadexternal", ["-C", "o", "-u", work.file("machine-key.pub"), "-c", work.file("external.ctx")]))
        let copy = try Self.objectNames(at: reloadedHandle, in: tpm)
        #expect(copy.hasPrefix(machineKey.prefix(while: { $0 != "/" }) + "/") && copy != machineKey, "\(copy) \(machineKey)")
        sent = proxy.commands.count
        let afterCopy = try alice.devtrust(["token"])
        try #require(afterCopy.status == 0, "\(afterCopy)\n\(machine.audit)")
        tokens.append(afterCopy.output)
        commands = Array(proxy.commands.dropFirst(sent))
        #expect(commands.filter { $0 == "Sign" } == ["Sign"] && commands.filter { $0 == "Load" } == ["Load"] && commands.last == "Sign", "\(commands)")
        objects = try Self.transientObjects(in: tpm)
        #expect(objects.count == 2 && objects[reloadedHandle] == copy && objects.values.contains(machineKey), "\(objects)")

        // Every token is the machine key's, for Alice's registration.
        let claims = try Self.verified(tokens, by: machine)
        #expect(claims.count == 3 && claims.allSatisfy { $0 != nil }, "\(tokens)")
        #expect(try tokens.allSatisfy { try Self.header($0)["deviceId"] == .string(id) })
        #expect(try Self.deviceCheck(afterCopy.output, at: server)["user"] == .string("alice@example.com"))

        // Stopped, the agent flushes its own key and nothing else.
        kill(agent.pid, SIGTERM)
        let ended = try #require(agent.finish())
        #expect(ended.status == 0, "\(ended)")
        #expect(try Self.transientObjects(in: tpm) == [reloadedHandle: copy])
    }

    /// `value`'s bytes, most significant first (as TPM commands carry numbers).
    static func bigEndian<Value: FixedWidthInteger>(_ value: Value) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian, Array.init)
    }

    /// A raw TPM command: TPM_ST_NO_SESSIONS, or TPM_ST_SESSIONS with the empty password session
    /// (TPM_RS_PW) when `authorized` (a command that authorizes its one handle).
    static func tpmCommand(_ code: UInt32, handles: [UInt32] = [], authorized: Bool = false, _ parameters: [UInt8]) -> [UInt8] {
        var body = handles.flatMap { bigEndian($0) }
        if authorized { body += bigEndian(UInt32(9)) + bigEndian(UInt32(0x4000_0009)) + [0, 0, 0, 0, 0] }
        body += parameters
        return bigEndian(UInt16(authorized ? 0x8002 : 0x8001)) + bigEndian(UInt32(10 + body.count)) + bigEndian(code) + body
    }

    /// Another program's raw TPM command, which must succeed: the response after its header.
    static func tpmAnswer(_ command: [UInt8], in tpm: Swtpm) throws -> [UInt8] {
        let response = try tpm.send(command)
        let code = response[6..<10].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard code == 0 else { throw FixtureError("the TPM answered 0x\(String(code, radix: 16)) to \(command)") }
        return Array(response.dropFirst(10))
    }

    /// TPM2_FlushContext of `handle`, sent raw: tpm2_flushcontext reads the public area of what it
    /// flushes first, and a sequence has none.
    static func flush(_ handle: UInt32, in tpm: Swtpm) throws {
        _ = try tpmAnswer(tpmCommand(0x165, bigEndian(handle)), in: tpm)
    }

    /// Another program's SHA-256 hash sequence with an empty password (TPM2_HashSequenceStart, sent
    /// raw: tpm2-tools has no tool that leaves one loaded), started until it lands on `handle` (the
    /// TPM gives it the first free handle, as an object): the sequences that landed elsewhere are
    /// flushed. Its handle, nil when none landed there.
    static func hashSequence(at handle: String, in tpm: Swtpm) throws -> UInt32? {
        let wanted = UInt32(handle.dropFirst(2), radix: 16)
        var elsewhere = [UInt32]()
        defer { for filler in elsewhere { try? flush(filler, in: tpm) } }
        for _ in 0..<3 {
            // TPM2B_AUTH (empty), TPM_ALG_SHA256; the response carries the sequence's handle.
            let started = try tpmAnswer(tpmCommand(0x186, [0, 0] + bigEndian(UInt16(0x000B))), in: tpm)
            let landed = started.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if landed == wanted { return landed }
            elsewhere.append(landed)
        }
        return nil
    }

    /// Hashes `data` in the sequence at `handle` (TPM2_SequenceUpdate).
    static func sequenceUpdate(_ handle: UInt32, _ data: [UInt8], in tpm: Swtpm) throws {
        _ = try tpmAnswer(tpmCommand(0x15C, handles: [handle], authorized: true, bigEndian(UInt16(data.count)) + data), in: tpm)
    }

    /// The machine key loaded again beside another program's object at `theirs`, which is still there.
    static func expectKeyReloaded(beside theirs: String, key machineKey: String, in tpm: Swtpm) throws {
        let handles = try tpm.transientHandles()
        let reloadedHandle = try #require(handles.first { $0 != theirs }, "\(handles)")
        #expect(handles.count == 2 && handles.contains(theirs), "\(handles)")
        #expect(try objectNames(at: reloadedHandle, in: tpm) == machineKey)
    }

    /// Stopped, the agent flushes its own key and nothing else: another program's sequence at
    /// `handle`, untouched, hashes on and ends with the digest of both parts.
    static func expectStopLeavesTheSequence(_ agent: BackgroundProcess, _ sequence: UInt32, at handle: String,
                                            parts: (first: [UInt8], second: [UInt8]), in tpm: Swtpm) throws {
        kill(agent.pid, SIGTERM)
        let ended = try #require(agent.finish())
        #expect(ended.status == 0, "\(ended)")
        #expect(try tpm.transientHandles() == [handle])
        #expect(try sequenceComplete(sequence, parts.second, in: tpm) == SHA256.hash(parts.first + parts.second).bytes)
        #expect(try tpm.transientHandles().isEmpty)
    }

    /// Ends the sequence at `handle` with `data` (TPM2_SequenceComplete, which flushes it, with
    /// TPM_RH_NULL for its ticket): its digest.
    static func sequenceComplete(_ handle: UInt32, _ data: [UInt8], in tpm: Swtpm) throws -> [UInt8] {
        let answer = try tpmAnswer(tpmCommand(0x13E, handles: [handle], authorized: true, bigEndian(UInt16(data.count)) + data + bigEndian(UInt32(0x4000_0007))), in: tpm)
        // parameterSize (4), then the TPM2B_DIGEST.
        guard answer.count >= 6 else { throw FixtureError("SequenceComplete: \(answer)") }
        let size = Int(answer[4]) << 8 | Int(answer[5])
        guard answer.count >= 6 + size else { throw FixtureError("SequenceComplete: \(answer)") }
        return Array(answer[6..<(6 + size)])
    }

    /// A TPM warning on the check right after a Load (TPM_RC_MEMORY: the TPM did not run the
    /// ReadPublic) says nothing of the object at the handle: the key the agent has just loaded is
    /// flushed, not left holding one of the TPM's 3 slots, and that signature fails. (A second review
    /// read that the agent let go of it unflushed: a slot taken for nothing at each such warning.)
    @Test(.enabled(if: Swtpm.shouldRun)) func aWarningAfterALoadLeavesNoKeyLoaded() throws {
        let tpm = try Swtpm()
        let machine = try MachineAgent(tpm: tpm.tcti)
        // ReadPublic (0x173) answered TPM_RC_MEMORY (0x904) once after each Load (0x157).
        let interposer = try TPMInterposer(tpm, mode: "refuse", arguments: ["--refuse", "0x173:0x904", "--refuse-after", "0x157"])
        machine.agentTCTI = interposer.tcti
        try machine.start()
        let alice = try machine.user("alice")
        #expect(try tpm.transientHandles().isEmpty)
        let refused = try alice.rawClient("sign-challenge", [Self.randomChallenge()])
        #expect(refused.status != 0 && !refused.stdout.contains("signature"), "\(refused)")
        #expect(interposer.events(named: "refused").count == 1, "\(interposer.events())")
        #expect(try tpm.transientHandles().isEmpty, "the key loaded before the refused check is still in the TPM")
        // Each Load's check is refused here: a second signature fails alike, and nothing piles up.
        let again = try alice.rawClient("sign-challenge", [Self.randomChallenge()])
        #expect(again.status != 0 && interposer.events(named: "refused").count == 2, "\(again)")
        #expect(try tpm.transientHandles().isEmpty, "keys loaded before refused checks are still in the TPM")
    }

    /// An empty handle on that check (TPM_RC_REFERENCE_H0, a warning by its format) is not a warning:
    /// another program flushed the key, and the handle may be its object's by now, so the agent lets
    /// go of it unflushed. Here the interposer only says so, and the key is still there: the retry
    /// takes it back (its names, found among the TPM's objects) and signs, with no second Load; one
    /// key stays loaded. (Flushed as a warning, the key went, and the retry's Load met the same answer:
    /// the signature failed.)
    @Test(.enabled(if: Swtpm.shouldRun)) func anEmptyHandleAfterALoadIsNotFlushed() throws {
        let tpm = try Swtpm()
        let machine = try MachineAgent(tpm: tpm.tcti)
        let interposer = try TPMInterposer(tpm, mode: "refuse", arguments: ["--refuse", "0x173:0x910", "--refuse-after", "0x157"])
        machine.agentTCTI = interposer.tcti
        try machine.start()
        let alice = try machine.user("alice")
        let challenge = Self.randomChallenge()
        let signed = try alice.rawClient("sign-challenge", [challenge])
        #expect(signed.status == 0 && interposer.events(named: "refused").count == 1, "\(signed) \(interposer.events())")
        let request: JSONObject = ["spki": .string(try machine.publicKey()),
                                   "der": .array([.object(["message": .string(Base64.encode(try Base64URL.decode(challenge, padding: .optional))),
                                                           "signature": .string(signed.output)])])]
        let verified = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(verified.stdout.contains("\"valid\": 1"), "\(verified)")
        #expect(try tpm.transientHandles().count == 1)
    }

    /// Another program flushes the machine key from a TPM without a resource manager and starts a
    /// hash sequence (TPM2_HashSequenceStart), which lands on the handle the agent's key had. A
    /// sequence has no public area to read: the agent's check before signing (ReadPublic) is refused
    /// ("improper use of a sequence handle", TPM_RC_SEQUENCE), neither the key nor an empty handle.
    /// That too is another object at the handle: the agent lets go of it without flushing it, loads
    /// the machine key again, once, and signs with it; the sequence goes on hashing where it was.
    /// The old agent failed the token (exit 6), and every token after it while the sequence was
    /// there.
    @Test(.enabled(if: Swtpm.shouldRun)) func anotherProgramsSequenceAtTheKeysHandleIsNeverSignedWith() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        let agent = try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let keyHandle = try #require(try tpm.transientHandles().first)
        let machineKey = try Self.objectNames(at: keyHandle, in: tpm)
        #expect(try Self.transientObjects(in: tpm) == [keyHandle: machineKey])
        var tokens = [String]()

        // Another program flushes every transient object and starts a hash sequence at the agent's
        // handle, and hashes a first part in it.
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]).status == 0)
        let sequence = try #require(try Self.hashSequence(at: keyHandle, in: tpm))
        let firstPart = Array("another program's ".utf8), secondPart = Array("hash".utf8)
        try Self.sequenceUpdate(sequence, firstPart, in: tpm)
        #expect(try tpm.transientHandles() == [keyHandle])
        let unreadable = try tpm.tool("tpm2_readpublic", ["-c", keyHandle])
        #expect(unreadable.status != 0 && unreadable.stderr.contains("improper use of a sequence handle"), "\(unreadable)")

        var sent = proxy.commands.count
        let afterSwap = try alice.devtrust(["token"])
        try #require(afterSwap.status == 0, "\(afterSwap)\n\(machine.audit)")
        tokens.append(afterSwap.output)
        let commands = Array(proxy.commands.dropFirst(sent))
        // The check (refused), then one Load and one Sign, the machine key's.
        #expect(commands.first == "ReadPublic" && commands.filter { $0 == "Sign" } == ["Sign"] && commands.filter { $0 == "Load" } == ["Load"]
                && commands.last == "Sign", "\(commands)")
        // The sequence is where it was; the machine key is loaded beside it.
        try Self.expectKeyReloaded(beside: keyHandle, key: machineKey, in: tpm)
        sent = proxy.commands.count
        let steady = try alice.devtrust(["token"])
        try #require(steady.status == 0, "\(steady)")
        tokens.append(steady.output)
        #expect(Array(proxy.commands.dropFirst(sent)) == ["ReadPublic", "Sign"], "\(proxy.commands)")

        // Every token is the machine key's, for Alice's registration.
        let claims = try Self.verified(tokens, by: machine)
        #expect(claims.count == 2 && claims.allSatisfy { $0 != nil }, "\(tokens)")
        #expect(try tokens.allSatisfy { try Self.header($0)["deviceId"] == .string(id) })
        #expect(try Self.deviceCheck(afterSwap.output, at: server)["user"] == .string("alice@example.com"))

        try Self.expectStopLeavesTheSequence(agent, sequence, at: keyHandle, parts: (firstPart, secondPart), in: tpm)
    }

    /// The same for the names the agent reads right after it loads the key: another program flushes
    /// the key the agent has just loaded, before the agent's ReadPublic of it reaches the TPM (the
    /// latency proxy holds that ReadPublic), and starts a hash sequence that lands on its handle.
    /// The agent lets go of that handle without flushing it, loads the key again, once, and signs
    /// with it. The old agent failed the token (exit 6).
    @Test(.enabled(if: Swtpm.shouldRun)) func aSequenceAtTheHandleOfTheKeyJustLoadedIsNeverSignedWith() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        var agent = try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let machineKey = try Self.objectNames(at: try #require(try tpm.transientHandles().first), in: tpm)
        // Stopped, the agent flushes its key; started again, it loads the key for its first signature.
        kill(agent.pid, SIGTERM)
        #expect(agent.finish()?.status == 0)
        #expect(try tpm.transientHandles().isEmpty)
        agent = try machine.start()

        proxy.delays = ["Load": 1000]
        let sent = proxy.commands.count
        let token = try alice.account.start(machine.binary, ["token"], environment: alice.environment)
        // The Load arrived (held a second): the ReadPublic of the key after it is held 3 s, while
        // another program flushes the key and starts its sequence at the key's handle.
        #expect(proxy.waitFor { $0.dropFirst(sent).contains("Load") }, "\(proxy.commands)")
        proxy.delays = ["ReadPublic": 3000]
        #expect(proxy.waitFor { Array($0.dropFirst(sent).drop { $0 != "Load" }.prefix(2)) == ["Load", "ReadPublic"] }, "\(proxy.commands)")
        proxy.delays = [:]
        let loadedHandle = try #require(try tpm.transientHandles().first)
        #expect(try Self.objectNames(at: loadedHandle, in: tpm) == machineKey)
        #expect(try tpm.tool("tpm2_flushcontext", [loadedHandle]).status == 0)
        let sequence = try #require(try Self.hashSequence(at: loadedHandle, in: tpm))
        let firstPart = Array("another program's ".utf8), secondPart = Array("hash".utf8)
        try Self.sequenceUpdate(sequence, firstPart, in: tpm)
        #expect(!token.hasEnded && proxy.commands.last == "ReadPublic", "swapped too late: \(proxy.commands.dropFirst(sent))")

        let result = try #require(token.finish())
        try #require(result.status == 0, "\(result)\n\(machine.audit)")
        // After the refused ReadPublic: one Load and one Sign, the machine key's.
        let commands = Array(proxy.commands.dropFirst(sent).drop { $0 != "Load" }.dropFirst(2))
        #expect(commands.filter { $0 == "Sign" } == ["Sign"] && commands.filter { $0 == "Load" } == ["Load"] && commands.last == "Sign", "\(commands)")
        try Self.expectKeyReloaded(beside: loadedHandle, key: machineKey, in: tpm)
        let claims = try Self.verified([result.output], by: machine)
        #expect(claims.count == 1 && claims.allSatisfy { $0 != nil }, "\(result.output)")
        #expect(try Self.header(result.output)["deviceId"] == .string(id))
        #expect(try Self.deviceCheck(result.output, at: server)["user"] == .string("alice@example.com"))

        try Self.expectStopLeavesTheSequence(agent, sequence, at: loadedHandle, parts: (firstPart, secondPart), in: tpm)
    }

    /// A TPM without a resource manager keeps what a killed process loaded. The agent killed with
    /// `kill -9` twice (Restart=on-failure starts it again each time) takes back the machine key it
    /// finds loaded, without a Load: one copy of the key stays in the TPM, never a second. A copy that
    /// another process left (as an earlier devtrust's crashes left them; here root's tpm2_load of the
    /// key file) is flushed, even with the TPM's slots all taken; another program's object is left alone.
    @Test(.enabled(if: Swtpm.shouldRun)) func aKilledAgentLeavesNoSecondCopyOfTheKeyInTheTPM() throws {
        let tpm = try Swtpm()
        let proxy = try TPMLatencyProxy(tpm)
        let machine = try Self.tpmMachine(tpm, through: proxy)
        var agent = try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.user("alice")
        let id = try Self.register(alice, as: "alice@example.com", at: server)
        let keyHandle = try #require(try tpm.transientHandles().first)
        let machineKey = try Self.objectNames(at: keyHandle, in: tpm)
        #expect(try Self.transientObjects(in: tpm) == [keyHandle: machineKey])
        var tokens = [String]()

        for _ in 0..<2 {
            kill(agent.pid, SIGKILL)
            _ = agent.finish()
            #expect(try Self.transientObjects(in: tpm) == [keyHandle: machineKey])
            agent = try machine.start()
            let sent = proxy.commands.count
            let token = try alice.devtrust(["token"])
            try #require(token.status == 0, "\(token)\n\(machine.audit)")
            tokens.append(token.output)
            let commands = Array(proxy.commands.dropFirst(sent))
            #expect(!commands.contains("Load") && commands.last == "Sign", "\(commands)")
            #expect(try Self.transientObjects(in: tpm) == [keyHandle: machineKey])
        }

        // Killed again; meanwhile another program loads its own key, and a second copy of the machine
        // key is left loaded: the TPM's three slots are taken.
        kill(agent.pid, SIGKILL)
        _ = agent.finish()
        let work = TemporaryDirectory("other-program")
        let keyFile = try #require(try FileManager.default.contentsOfDirectory(atPath: machine.keystore).first { $0.hasPrefix("key-") && $0.hasSuffix(".pem") })
        let loaded = try tpm.tool("tpm2_load", ["-r", machine.keystore + "/" + keyFile, "-c", work.file("copy.ctx")])
        #expect(loaded.status == 0, "\(loaded)")
        let made = try tpm.tool("tpm2_createprimary", ["-C", "o", "-G", "ecc256", "-a", "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign",
                                                        "-c", work.file("other.ctx")])
        #expect(made.status == 0, "\(made)")
        var objects = try Self.transientObjects(in: tpm)
        let others = objects.filter { $0.value != machineKey }
        #expect(objects.count == 3 && others.count == 1 && objects.values.filter { $0 == machineKey }.count == 2, "\(objects)")

        agent = try machine.start()
        let full = try alice.devtrust(["token"])
        try #require(full.status == 0, "\(full)\n\(machine.audit)")
        tokens.append(full.output)
        objects = try Self.transientObjects(in: tpm)
        #expect(objects.count == 2 && objects.values.filter { $0 == machineKey }.count == 1 && objects.filter { $0.value != machineKey } == others, "\(objects)")

        let claims = try Self.verified(tokens, by: machine)
        #expect(claims.count == 3 && claims.allSatisfy { $0 != nil }, "\(tokens)")
        #expect(try tokens.allSatisfy { try Self.header($0)["deviceId"] == .string(id) })
        #expect(try Self.deviceCheck(full.output, at: server)["user"] == .string("alice@example.com"))

        kill(agent.pid, SIGTERM)
        _ = agent.finish()
        #expect(try Self.transientObjects(in: tpm) == others)
    }
}

/// The agent reads a client's desktop settings (`lockScreen`) with the client's file-system identity
/// (setfsuid, setfsgid: CAP_SETUID and CAP_SETGID, which devtrust.service keeps). Where it cannot take
/// it, it reads nothing of theirs with its own rights: the claim is not measured.
extension AgentTests {
    /// Whether this run can give an agent a /usr/bin of its own with gnome-shell in it (an overlay in
    /// a mount namespace of its own: root, unshare, overlayfs; the machine's /usr/bin is untouched),
    /// and take capabilities from it (setpriv).
    static let canGiveTheAgentADesktop: Bool = {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return false }
        let scratch = TemporaryDirectory("overlay-probe")
        _ = scratch.write("bin/gnome-shell", "", mode: 0o755)
        let probe = "mount -t overlay overlay -o lowerdir=\(scratch.file("bin")):/usr/bin /usr/bin && test -e /usr/bin/gnome-shell"
        return (try? ProcessRunner.run("/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/sh", "-c", probe]).status) == 0
    }()

    /// What starts `machine`'s agent in a mount namespace whose /usr/bin has gnome-shell (GNOME
    /// installed, to the lock-screen collector), as root, without the capabilities `dropping` names
    /// (setpriv's words: `-setuid,-setgid`), taken from its effective, permitted, inheritable and
    /// bounding sets, so that setfsuid or setfsgid to another user fails. Everything else it keeps
    /// (CAP_DAC_OVERRIDE too: as root it could read any user's files).
    static func desktopLauncher(_ machine: MachineAgent, dropping: String?) -> [String] {
        _ = machine.scratch.write("desktop/bin/gnome-shell", "", mode: 0o755)
        let drop = dropping.map { "/usr/bin/setpriv --inh-caps=\($0) --bounding-set=\($0) " } ?? ""
        let script = "mount -t overlay overlay -o lowerdir=\(machine.scratch.file("desktop/bin")):/usr/bin /usr/bin && exec \(drop)\"$0\" \"$@\""
        return ["/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script]
    }

    /// The capabilities in effect for `pid` (/proc/PID/status, CapEff).
    static func effectiveCapabilities(_ pid: Int32) -> UInt64? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }) else { return nil }
        return UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
    }

    /// `lockScreen` in `user`'s deviceData through the agent at `socket` (nil: not measured).
    static func lockScreen(_ user: MachineUser, agent socket: String) throws -> JSONValue? {
        let deviceData = try user.devtrust(["device-data"], environment: ["DEVTRUST_AGENT": socket])
        guard deviceData.status == 0 else { throw FixtureError("device-data: \(deviceData)") }
        return try Self.payload(deviceData.output)["lockScreen"]
    }

    /// Alice's dconf database (her screen does not lock) is hers, 0600, in her home. An agent with the
    /// capabilities reads it as her: `false`. One without CAP_SETUID or CAP_SETGID (or both) cannot
    /// become her for the read; it could read the file as root (it keeps CAP_DAC_OVERRIDE), and does
    /// not: `lockScreen` is not measured (absent). Its thread is root's again (where one of the two
    /// ids was taken, it is given back), so the agent goes on serving her and others from the
    /// machine keystore, which only root reads.
    @Test(.enabled(if: canGiveTheAgentADesktop)) func anAgentThatCannotTakeAClientsIdentityReadsNothingOfTheirsAsRoot() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        let alice = try machine.user("alice"), bob = try machine.user("bob")
        try alice.account.setHome(alice.home + "/home")
        let lockOff = Array(FileManager.default.contents(atPath: Repository.path("Tests/DevtrustPostureTests/Fixtures/dconf/lock-off.gvdb"))!)
        try FileManager.default.createDirectory(atPath: alice.home + "/home/.config/dconf", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: alice.home + "/home/.config/dconf/user", contents: Data(lockOff), attributes: [.posixPermissions: 0o600]))
        try alice.account.own(alice.home + "/home")

        let setUID: UInt64 = 1 << 7, setGID: UInt64 = 1 << 6, dacOverride: UInt64 = 1 << 1
        let withCapabilities = try machine.start(launcher: Self.desktopLauncher(machine, dropping: nil))
        #expect(Self.effectiveCapabilities(withCapabilities.pid).map { $0 & (setUID | setGID) == setUID | setGID } == true)
        // As alice: her own setting.
        #expect(try Self.lockScreen(alice, agent: machine.socket) == .string("false"))

        for (dropping, dropped) in [("-setuid,-setgid", setUID | setGID), ("-setuid", setUID), ("-setgid", setGID)] {
            let capless = try MachineAgent(policy: Self.unlimited)
            let agent = try capless.start(launcher: Self.desktopLauncher(capless, dropping: dropping))
            let caps = try #require(Self.effectiveCapabilities(agent.pid))
            #expect(caps & (setUID | setGID) == (setUID | setGID) & ~dropped && caps & dacOverride != 0, "\(dropping): CapEff \(String(caps, radix: 16))")
            // Not as alice: nothing, where root's rights would have read the same file.
            #expect(try Self.lockScreen(alice, agent: capless.socket) == nil, "\(dropping)")
            // And again, and for others: the agent is whole, and serves.
            #expect(try Self.lockScreen(alice, agent: capless.socket) == nil, "\(dropping)")
            let bobs = try bob.devtrust(["pubkey"], environment: ["DEVTRUST_AGENT": capless.socket]), machineKey = try capless.publicKey()
            #expect(bobs.status == 0 && bobs.output == machineKey, "\(dropping): \(bobs)")
            let served = Self.auditLines(capless, uid: alice.account.uid).filter { $0.contains(#"op=device-data jti="#) && $0.hasSuffix(#"outcome="ok""#) }
            #expect(agent.isRunning && served.count == 2, "\(dropping): \(capless.audit)")
        }
    }
}
