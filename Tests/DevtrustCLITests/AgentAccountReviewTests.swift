import DevtrustAgent
import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// An outside review's attacks on the accounts, the former registrations and the client in a user
/// namespace (issue 28): each failed on the code it reviewed (84babf7), as its comment says.
extension AgentTests {
    /// DeviceStore.maximumFormerRegistrations (this target does not import DevtrustDevice).
    static let formerBound = 512

    /// Raw registration steps and completions of `ids` at `server`, as `user`, in one client process.
    static func claimedAll(_ ids: [String], by user: MachineUser, at server: String) throws -> [String] {
        let requests = ids.flatMap { id in
            [#"{"v":1,"op":"registration-step","server":"\#(server)","registrationId":"\#(id)","challenge":"\#(Self.randomChallenge())","requiredParams":["publicKey","signature"]}"#,
             #"{"v":1,"op":"registration-complete","server":"\#(server)","registrationId":"\#(id)","flowType":"REGISTRATION"}"#]
        }
        let result = try user.rawClient("each", requests)
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// A uid that `userdel` freed and `useradd` gave to a new account: the departed account's forgotten
    /// ids count, for the eviction of `formerRegistrations`, as the new account's (the count is by uid),
    /// so the new account's own register-and-replace loop pushes them out first and then records the
    /// departed user's id: its tokens name her device, and the server takes them as hers.
    /// The old agent (84babf7) counted by uid: Bob's 513 registrations at a server of his own evict Alice's former id.
    @Test(.timeLimit(.minutes(5))) func aReusedUidCannotPushTheDepartedUsersFormerIdsOut() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.userWhoseUIDIsGivenAgain("alice")
        let aliceID = try Self.register(alice, as: "alice@example.com", at: server)
        let uid = alice.account.uid
        let environment = machine.agentEnvironment.merging(["DEVTRUST_AGENT": machine.socket]) { $1 }
        // What docs/deployment.md says to do when a user leaves.
        let forgotten = try ProcessRunner.run(machine.binary, ["reset", "--uid", "\(uid)", "--yes"], environment: environment)
        #expect(forgotten.status == 0, "\(forgotten)")
        alice.account.remove()
        let bob = try machine.user("bob", uid: uid)
        #expect(!(try Self.claimed(aliceID, by: bob, at: server.url)).recorded)

        let replies = try Self.claimedAll((0...Self.formerBound).map { "b0b-\($0)" }, by: bob, at: "https://bob.example")
        #expect(replies.filter { $0.contains("\"registration\"") }.count == Self.formerBound + 1)
        let formers = try Self.manifest(machine.keystore)["formerRegistrations"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(formers.contains { $0["registrationId"] == .string(aliceID) }, "Alice's former id was evicted by Bob's loop")

        let claim = try Self.claimed(aliceID, by: bob, at: server.url)
        #expect(!claim.signed && !claim.recorded, "\(claim.result)")
        let stolen = try bob.devtrust(["token", "--device-id", aliceID])
        #expect(stolen.status == 3 && stolen.stdout.isEmpty, "\(stolen)")
        if stolen.status == 0 {
            // What the server makes of Bob's token.
            Issue.record("the reference server on Bob's token: \(try Self.deviceCheck(stolen.output, at: server))")
        }
    }

    /// A registration recorded with a uid and no account (an agent before f0e2369 wrote these; the
    /// keystore format still takes them) that root forgets with `reset --uid` before the uid is given
    /// again, as the docs say: the reset says their ids stay theirs,
    /// but the former record has no account, so the next account with the uid records it.
    /// The old agent (84babf7) let Bob record it.
    @Test func aLegacyRecordsIdStaysItsUsersAfterRootForgetsIt() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        try machine.start()
        let server = try ReferenceServer()
        let alice = try machine.userWhoseUIDIsGivenAgain("alice")
        let aliceID = try Self.register(alice, as: "alice@example.com", at: server)
        let uid = alice.account.uid
        // As the agent before accounts recorded it: the uid alone.
        let path = machine.keystore + "/keystore.json"
        var manifest = try Self.manifest(machine.keystore)
        manifest["registrations"] = .array((manifest["registrations"]?.arrayValue ?? []).map { record in
            var object = record.objectValue ?? [:]
            object["account"] = nil
            return .object(object)
        })
        try Data(JSONWriter.bytes(.object(manifest))).write(to: URL(fileURLWithPath: path))
        let environment = machine.agentEnvironment.merging(["DEVTRUST_AGENT": machine.socket]) { $1 }
        let forgotten = try ProcessRunner.run(machine.binary, ["reset", "--uid", "\(uid)", "--yes"], environment: environment)
        #expect(forgotten.status == 0 && forgotten.stderr.contains("their ids stay theirs (the agent records them for no other account"), "\(forgotten)")
        alice.account.remove()
        let bob = try machine.user("bob", uid: uid)
        let claim = try Self.claimed(aliceID, by: bob, at: server.url)
        #expect(!claim.signed && !claim.recorded, "\(claim.result)")
    }

    /// In a user namespace without a uid map (`unshare -U`; or a container's process whose uid is the
    /// overflow uid), the caller's own euid is the overflow uid, and so is any listener the namespace
    /// does not map: `server.uid == geteuid()` holds for another user's program, and the client sends
    /// it the request and prints its answer. Outside the namespace the same is refused (exit 6).
    /// The old client (84babf7) sent it the request and printed its "token", exit 0.
    @Test(.timeLimit(.minutes(1))) func aClientWithoutAUidMapSendsNothingToAnotherUsersProgram() throws {
        let machine = try MachineAgent()
        let alice = try machine.user("alice"), mallory = try machine.user("mallory")
        let impostor = try Impostor.start(as: mallory, machine: machine)
        defer { impostor.stop() }
        let socket = impostor.socket
        let outside = try alice.shell("\"$DEVTRUST\" --agent \(socket) token")
        #expect(outside.status == 6 && outside.stderr.contains("it is not the devtrust agent"), "\(outside)")
        let inside = try alice.shell("exec unshare -U \"$DEVTRUST\" --agent \(socket) token")
        try #require(!inside.stderr.contains("unshare failed"), "no unprivileged user namespaces here: \(inside)")
        #expect(inside.status == 6 && inside.stdout.isEmpty, "\(inside)")
        #expect(!impostor.received.contains("got:"), "another user's program received: \(impostor.received)")
    }
}

/// A second outside review's attacks, each of which the code it reviewed (d7358cd) failed.
extension AgentTests {
    /// Root's own registration in the machine keystore, made directly (`devtrust --keystore
    /// /var/lib/devtrust register`, as docs/deployment.md's provisioning script does before the agent
    /// is enabled), has no `uid` (it is the keystore owner's, root's). Root forgets it through the
    /// agent (`reset --uid 0`): its id is remembered as any other. (d7358cd kept no former record of
    /// a record without a uid, while `reset --uid` said their ids stayed theirs: another user then
    /// recorded root's id through the agent, and the server took her tokens as root's device.)
    @Test func rootsOwnForgottenRegistrationStaysRoots() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        let server = try ReferenceServer()
        // Root registers the machine keystore directly, before the agent runs.
        let direct = try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "register", "--server", server.url, "--non-interactive",
                                                            "--inputs", "-", "--json"],
                                           environment: machine.agentEnvironment, stdin: Array(Self.answers("root@example.com").utf8))
        let rootID = try #require(try JSONParser.parse(direct.stdout).objectValue?["registrationId"]?.stringValue, "\(direct)")
        #expect(try Self.manifest(machine.keystore)["registrations"]?.arrayValue?.first?.objectValue?["uid"] == nil)
        try machine.start()
        let environment = machine.agentEnvironment.merging(["DEVTRUST_AGENT": machine.socket]) { $1 }
        let forgotten = try ProcessRunner.run(machine.binary, ["reset", "--uid", "0", "--yes"], environment: environment)
        #expect(forgotten.status == 0 && forgotten.stderr.contains("their ids stay theirs"), "\(forgotten)")
        let formers = try Self.manifest(machine.keystore)["formerRegistrations"]?.arrayValue ?? []
        #expect(formers.contains { $0.objectValue?["registrationId"] == .string(rootID) }, "no former record of root's id: \(formers)")

        let mallory = try machine.user("mallory")
        let claim = try Self.claimed(rootID, by: mallory, at: server.url)
        #expect(!claim.signed && !claim.recorded, "Mallory recorded root's forgotten id: \(claim.result)")
        let stolen = try mallory.devtrust(["token", "--device-id", rootID])
        #expect(stolen.status != 0, "\(stolen)")
        if stolen.status == 0 {
            Issue.record("the reference server on Mallory's token: \(try Self.deviceCheck(stolen.output, at: server))")
        }
    }

    /// A client that cannot read /proc/self/uid_map does not take that for the machine's own user
    /// namespace (d7358cd did, "the old rule, root or the caller"). A client that runs as the overflow uid of a user
    /// namespace (as under `unshare -U`) where that file cannot be read (a sandbox that masks it;
    /// here a /proc of symlinks to the real one, without uid_map) then takes another user's
    /// listener, which the kernel shows as the overflow uid too, for its own: it sends the request
    /// and printed the impostor's "token", exit 0. With the map readable the same was refused (exit 6).
    @Test(.timeLimit(.minutes(1))) func aClientThatCannotReadItsUidMapSendsNothingToAnotherUsersProgram() throws {
        let machine = try MachineAgent()
        let alice = try machine.user("alice"), mallory = try machine.user("mallory")
        let hide = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/hidden_proc_userns.py"), into: machine.scratch.file("tools"))
        let impostor = try Impostor.start(as: mallory, machine: machine)
        defer { impostor.stop() }
        let socket = impostor.socket
        let readable = try alice.shell("exec unshare -U \"$DEVTRUST\" --agent \(socket) token")
        try #require(!readable.stderr.contains("unshare failed"), "no unprivileged user namespaces here: \(readable)")
        #expect(readable.status == 6 && readable.stdout.isEmpty, "\(readable)")
        let hidden = try alice.shell("exec \(ExternalTool.python.rawValue) \(hide) \(alice.home)/data \"$DEVTRUST\" --agent \(socket) token")
        #expect(hidden.status == 6 && hidden.stdout.isEmpty, "\(hidden)")
        #expect(!impostor.received.contains("got:"), "another user's program received: \(impostor.received)")
    }

    /// InitCommand: `AgentStandsIn.seconds` is how long init waits for the agent's answer, in all: the
    /// client's timeout bounds the whole exchange. (In d7358cd it bounded each read, SO_RCVTIMEO: a
    /// listener that sends its reply a byte every 4 s, here the user's own program at the socket the
    /// user names, held `init` for as long as the reply was long, about 17 minutes.)
    @Test(.timeLimit(.minutes(2))) func initWaitsForTheAgentAtMostItsSeconds() throws {
        let machine = try MachineAgent()
        let alice = try machine.user("alice")
        let listener = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/trickle_listener.py"), into: machine.scratch.file("tools"))
        let socket = alice.home + "/data/agent.sock"
        let program = try alice.account.start(ExternalTool.python.rawValue, [listener, socket], environment: ["PATH": "/usr/bin:/bin"])
        defer { alice.account.endProcesses(); _ = program }
        try #require(program.waitFor(seconds: 10) { _, _ in FileManager.default.fileExists(atPath: socket) })
        let started = Date()
        let initRun = try alice.account.start(machine.binary, ["--agent", socket, "init", "--backend", "software"], environment: alice.environment)
        let ended = initRun.waitFor(seconds: 40) { _, _ in initRun.hasEnded }
        #expect(ended, "init still waits after \(Int(Date().timeIntervalSince(started))) s (AgentStandsIn.seconds is 5)")
        alice.account.endProcesses()
    }

    /// Root registers the machine keystore directly (before the agent runs) and then again with
    /// --replace: the replaced id, still root's device at the server, is remembered, and another user
    /// cannot record it through the agent. (A third review: 18bff04 guessed from the keystore's
    /// content that it was nobody else's, remembered nothing, and Mallory's tokens were root's device.)
    @Test func rootsReplacedDirectRegistrationStaysRoots() throws {
        let machine = try MachineAgent(policy: Self.unlimited)
        let server = try ReferenceServer()
        func direct(_ extra: [String]) throws -> String {
            let run = try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "register", "--server", server.url, "--non-interactive",
                                                             "--inputs", "-", "--json"] + extra,
                                            environment: machine.agentEnvironment, stdin: Array(Self.answers("root@example.com").utf8))
            return try #require(try JSONParser.parse(run.stdout).objectValue?["registrationId"]?.stringValue, "\(run)")
        }
        let oldID = try direct([])
        let newID = try direct(["--replace"])
        #expect(oldID != newID)
        let formers = try Self.manifest(machine.keystore)["formerRegistrations"]?.arrayValue ?? []
        #expect(formers.contains { $0.objectValue?["registrationId"] == .string(oldID) }, "root's replaced id is not remembered: \(formers)")
        try machine.start()
        let mallory = try machine.user("mallory")
        let claim = try Self.claimed(oldID, by: mallory, at: server.url)
        #expect(!claim.signed && !claim.recorded, "Mallory recorded root's replaced id: \(claim.result)")
        let stolen = try mallory.devtrust(["token", "--device-id", oldID])
        #expect(stolen.status != 0, "\(stolen)")
        if stolen.status == 0 {
            Issue.record("the reference server on Mallory's token: \(try Self.deviceCheck(stolen.output, at: server))")
        }
    }
}

/// Another user's program at a socket name of theirs (Tests/Interop/impostor_agent.py): it logs each
/// request it receives, and answers with a token of its own.
struct Impostor {
    let user: MachineUser
    let socket: String
    let log: String
    let program: BackgroundProcess

    /// Started as `user`, listening once this returns.
    static func start(as user: MachineUser, machine: MachineAgent) throws -> Impostor {
        let script = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/impostor_agent.py"), into: machine.scratch.file("tools"))
        let socket = user.home + "/agent.sock", log = user.home + "/received"
        chmod(user.home, 0o711)
        let program = try BackgroundProcess("/usr/sbin/runuser", ["-u", user.account.name, "--", ExternalTool.python.rawValue, script, socket, log],
                                            environment: ["PATH": "/usr/bin:/bin"])
        guard program.waitFor(seconds: 10, { _, _ in FileManager.default.fileExists(atPath: socket) }) else {
            user.account.endProcesses()
            throw FixtureError("the impostor did not listen at \(socket): \(program.stderr)")
        }
        return Impostor(user: user, socket: socket, log: log, program: program)
    }

    /// What it received.
    var received: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Ends it (runuser passes it no signal).
    func stop() {
        user.account.endProcesses()
    }
}
