import DevtrustAgent
import DevtrustConfig
import DevtrustDevice
import DevtrustKeystore
import Glibc

/// `agent`: the system agent, in the foreground (the front end of `DevtrustAgent`): serves the
/// machine keystore on a Unix socket (its own, or the one systemd passes), with the policy, until
/// SIGTERM; an audit line per decision on stderr.
enum AgentCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let socket = ValueOption<Self>("socket", "PATH", .file, "listen here (default /run/devtrust/agent.sock; systemd's socket when it passes one)")
        static let policy = ValueOption<Self>("policy", "FILE", .file, "the agent's policy (default /etc/devtrust/agent.json, when it exists)")
        static let spec = CommandSpec(name: "agent", summary: "serve the machine's key to local users (the system agent, in the foreground)",
                                      options: [socket, policy])

        var socket: String?
        var policy: String?

        init(_ values: OptionValues<Self>) {
            socket = values[Self.socket]
            policy = values[Self.policy]
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        let variables = context.environment.variables
        let keystorePath = [context.global.keystore, variables["DEVTRUST_KEYSTORE"]].compactMap { $0 }.first { !$0.isEmpty } ?? KeystoreLocation.systemDirectory
        let keystore = Keystore(path: keystorePath, ownerID: context.environment.effectiveUserID)
        let policy = try AgentPolicy.load(path: options.policy ?? AgentPolicy.defaultPath, required: options.policy != nil)
        let configuration = try context.configuration()
        // The machine keystore is the agent's: refused as any keystore is when others can read it.
        let state = try keystore.load()
        let terminal = context.terminal
        let say = { (line: String) in terminal.writeError(line + "\n") }
        if state?.key == nil {
            say("devtrust agent: warning: there is no device key in \(keystorePath) yet: `devtrust init --keystore \(keystorePath)` (as the agent's user) makes one; until then clients are told so")
        }
        let listener: AgentListener
        if let activated = try AgentListener.activated(environment: variables) {
            listener = activated
        } else {
            listener = try AgentListener.bind(path: options.socket ?? AgentSocketLocation.defaultPath)
        }
        defer { listener.close() }
        let termination = AgentServer.terminationPipe()
        guard termination >= 0 else { throw AgentListenerError.io(path: "a pipe", operation: "make", errno: errno) }
        let service = AgentService(
            settings: AgentService.Settings(keystore: keystore, configuration: configuration, policy: policy, cache: context.cacheDirectory,
                                            clock: context.environment.clock, random: context.environment.random, tpm: context.tpmSelection),
            audit: { say($0.line) }, warn: { say("devtrust agent: warning: " + $0) })
        let server = AgentServer(listener: listener.descriptor, termination: termination, audit: { say($0.line) }, handle: service.handle)
        say("devtrust agent: listening on \(listener.description) for \(keystorePath) (policy: \(policy.source ?? "none, the defaults"))")
        server.run()
        say("devtrust agent: stopped")
    }
}
