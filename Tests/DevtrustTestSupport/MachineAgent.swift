import Foundation

/// A machine with the system agent (`devtrust agent`), made for one test: a machine keystore with a
/// software key, or a key in the test's swtpm (root's, 0700, in the test's scratch directory), the agent's policy, configuration
/// and cache of the test's own, its socket in a directory others can reach, and the agent as a real
/// process (root's, as the test runner is). Real users (`LocalUser`) reach it through the kernel, so
/// that who asks (SO_PEERCRED) and who may read the key are the kernel's decisions. Nothing of the
/// machine's is named: every path is below `scratch`.
public final class MachineAgent: @unchecked Sendable {
    public let scratch = TemporaryDirectory("machine-agent")
    /// A copy of the devtrust binary (and the helper scripts) that other users can run.
    public let binary: String
    public let agentClient: String
    public var keystore: String { scratch.file("machine/ks") }
    public var socket: String { scratch.file("run/agent.sock") }
    public var policy: String { scratch.file("agent.json") }
    public var configuration: String { scratch.file("machine/config.json") }
    /// The TPM the agent uses (a machine key in a TPM), if any.
    public var agentTCTI: String?
    /// The agent's own environment: its cache, configuration and home, all the test's.
    public var agentEnvironment: [String: String] {
        ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": scratch.file("machine/home"), "XDG_CACHE_HOME": scratch.file("machine/cache"),
         "DEVTRUST_CONFIG": configuration, "XDG_CONFIG_HOME": scratch.file("machine/no-config"), "DEVTRUST_TCTI": agentTCTI ?? "device:/nonexistent"]
    }
    public private(set) var process: BackgroundProcess?

    /// - Parameters:
    ///   - policy: the policy file's contents (`/etc/devtrust/agent.json`'s stand-in).
    ///   - configuration: the agent's configuration (`/etc/devtrust/config.json`'s stand-in).
    ///   - tpm: the TCTI of a TPM (a test's swtpm) to make the machine key in; the agent uses it
    ///     too, unless `agentTCTI` names another way to it (a latency proxy). Nil: a software key.
    public init(policy: String = "{}\n", configuration: String = "{}\n", tpm: String? = nil) throws {
        // Others may pass through the scratch directory, not list it; the machine's part is root's alone.
        chmod(scratch.path, 0o711)
        let tools = scratch.file("tools")
        try FileManager.default.createDirectory(atPath: tools, withIntermediateDirectories: true)
        chmod(tools, 0o755)
        binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: tools)
        agentClient = DevtrustBinary.copyForOtherUsers(Repository.path("Tests/Interop/agent_client.py"), into: tools)
        try FileManager.default.createDirectory(atPath: scratch.file("machine"), withIntermediateDirectories: true)
        chmod(scratch.file("machine"), 0o700)
        scratch.write("agent.json", policy, mode: 0o644)
        scratch.write("machine/config.json", configuration, mode: 0o644)
        agentTCTI = tpm
        let made = try ProcessRunner.run(binary, ["--keystore", keystore, "init", "--backend", tpm == nil ? "software" : "tpm", "-q"],
                                         environment: agentEnvironment)
        guard made.status == 0 else { throw FixtureError("init of the machine keystore: \(made)") }
    }

    deinit {
        process = nil
    }

    /// Starts the agent (`devtrust --keystore KS agent --socket S --policy P`) and waits until it says it listens.
    /// - Parameter launcher: a command that runs the agent's command line given after it, in a
    ///   process of its own making (a mount namespace, fewer capabilities) and then as the agent
    ///   itself (`exec`: the process a test kills is the agent).
    @discardableResult
    public func start(_ extraArguments: [String] = [], launcher: [String] = []) throws -> BackgroundProcess {
        let command = launcher + [binary, "--keystore", keystore, "agent", "--socket", socket, "--policy", policy] + extraArguments
        let agent = try BackgroundProcess(command[0], Array(command.dropFirst()), environment: agentEnvironment)
        process = agent
        guard agent.waitFor({ _, stderr in stderr.contains("devtrust agent: listening on") }) else {
            throw FixtureError("the agent did not start: \(agent.stderr)")
        }
        return agent
    }

    /// The agent's stderr so far: its audit lines.
    public var audit: String { process?.stderr ?? "" }

    /// The machine key's public key (standard base64 SPKI), read by root from the keystore itself.
    public func publicKey() throws -> String {
        let result = try ProcessRunner.run(binary, ["--keystore", keystore, "pubkey"], environment: agentEnvironment)
        guard result.status == 0 else { throw FixtureError("pubkey: \(result)") }
        return result.output
    }

    /// A user of this machine: their own home, cache and configuration (0700, theirs), the agent's socket named.
    public func user(_ label: String, uid: UInt32? = nil) throws -> MachineUser {
        try MachineUser(label, machine: self, uid: uid)
    }

    /// A user whose uid the test gives to another account after removing them (`LocalUser.withReusableUID`).
    public func userWhoseUIDIsGivenAgain(_ label: String) throws -> MachineUser {
        try MachineUser(label, machine: self, reusableUID: true)
    }

    /// Runs `agent_client.py COMMAND SOCKET ARGS...` as root.
    public func rawClient(_ command: String, _ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run(ExternalTool.python.rawValue, [agentClient, command, socket] + arguments, environment: ["PATH": "/usr/bin:/bin"])
    }
}

/// A real Unix user on a `MachineAgent`'s machine, running devtrust through the agent.
public final class MachineUser: @unchecked Sendable {
    public let account: LocalUser
    public let machine: MachineAgent
    public var home: String { machine.scratch.file("users/\(account.name)") }

    init(_ label: String, machine: MachineAgent, uid: UInt32? = nil, reusableUID: Bool = false) throws {
        account = reusableUID ? try LocalUser.withReusableUID(label) : try LocalUser(label, uid: uid)
        self.machine = machine
        for directory in ["home", "cache", "config", "data"] {
            try FileManager.default.createDirectory(atPath: home + "/" + directory, withIntermediateDirectories: true)
        }
        chmod(machine.scratch.file("users"), 0o711)
        chmod(home, 0o700)
        try account.own(home)
    }

    /// Their environment: their own directories, and the agent's socket by DEVTRUST_AGENT.
    public var environment: [String: String] {
        ["PATH": "/usr/bin:/bin", "HOME": home + "/home", "XDG_CACHE_HOME": home + "/cache", "XDG_CONFIG_HOME": home + "/config",
         "XDG_DATA_HOME": home + "/data", "DEVTRUST_AGENT": machine.socket]
    }

    /// `devtrust ARGS` as this user.
    public func devtrust(_ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:]) throws -> ProcessResult {
        try account.run(machine.binary, arguments, environment: environment.merging(extra) { $1 }, stdin: stdin.map { Array($0.utf8) })
    }

    /// `agent_client.py COMMAND SOCKET ARGS...` as this user.
    public func rawClient(_ command: String, _ arguments: [String]) throws -> ProcessResult {
        try account.run(ExternalTool.python.rawValue, [machine.agentClient, command, machine.socket] + arguments, environment: ["PATH": "/usr/bin:/bin"])
    }

    /// `/bin/sh -c SCRIPT` as this user, with their environment.
    public func shell(_ script: String) throws -> ProcessResult {
        try account.run("/bin/sh", ["-c", script], environment: environment.merging(["DEVTRUST": machine.binary]) { $1 })
    }
}
