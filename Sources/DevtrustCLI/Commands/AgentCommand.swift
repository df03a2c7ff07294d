import DevtrustAgent
import DevtrustConfig
import DevtrustKeystore

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
        let policy = try AgentPolicy.load(path: options.policy ?? AgentPolicy.defaultPath, required: options.policy != nil)
        let settings = AgentService.Settings(keystore: Keystore(path: keystorePath, ownerID: context.environment.effectiveUserID),
                                             configuration: try context.configuration(), policy: policy, cache: context.cacheDirectory,
                                             clock: context.environment.clock, random: context.environment.random, tpm: context.tpmSelection)
        let terminal = context.terminal
        try AgentService.serve(settings, socket: options.socket ?? AgentSocketLocation.defaultPath, environment: variables,
                               say: { terminal.writeError($0 + "\n") })
    }
}
