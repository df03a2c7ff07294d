import CProcessHardening
import DevtrustAgent
import DevtrustBrowser
import DevtrustConfig
import DevtrustErrors
import DevtrustKeystore

/// `native-host ORIGIN | MANIFEST EXTENSION_ID`: the native messaging host that
/// Chromium and Firefox start for devtrust's extension (`devtrust browser
/// install` registers it). It speaks the browsers' protocol on stdin and stdout
/// (NativeHost), never prompts, and ends when the browser closes stdin.
enum NativeHostCommand: DevtrustCommand {
    struct Options: CommandOptions {
        static let spec = CommandSpec(name: "native-host", summary: "the native messaging host that browsers start for devtrust's extension",
                                      positionalUsage: "ORIGIN | MANIFEST EXTENSION_ID", maximumPositionals: 2, options: [])

        /// What the browser passed: Chromium the extension's origin, Firefox the manifest's path and the add-on's ID.
        var callerArguments: [String]

        init(_ values: OptionValues<Self>) {
            callerArguments = values.positionals
        }
    }

    static func run(_ context: CommandContext, _ options: Options) throws {
        guard let caller = NativeHostCaller(arguments: options.callerArguments) else {
            throw UsageError("native-host is started by a browser, with the extension's origin (chrome-extension://ID/) or, from Firefox, "
                             + "the host manifest's path and the add-on's ID; `devtrust browser install` sets that up", command: Options.spec.name)
        }
        guard !context.terminal.inputIsTerminal else {
            throw UsageError("native-host reads the browsers' native messaging protocol on stdin, not a terminal; "
                             + "a browser starts it (`devtrust browser install` sets that up)", command: Options.spec.name)
        }
        // The browser may stop reading at any time: a reply to nobody is not a reason to die of SIGPIPE.
        devtrust_ignore_broken_pipes()
        switch NativeHost(services: services(context), caller: caller, channel: NativeMessagingChannel(terminal: context.terminal)).serve() {
        case .finished:
            break
        case .refused:
            throw CLIError.failure("native-host stopped after a message it could not serve (answered with an error, and said above)")
        case .outputClosed:
            throw CLIError.failure("native-host stopped: its standard output is closed, so the browser no longer reads its replies")
        }
    }

    /// What the host takes from this run: the configuration (read for every message), the device: the
    /// device-token service over the run's keystore, clocks, randomness and posture, or the system
    /// agent (your registrations of the machine key, its posture); the run's HTTP settings (its
    /// clients measure the servers' clocks), the cache, the clock, and stderr for its log.
    static func services(_ context: CommandContext) -> NativeHostServices {
        // What the agent said of your key and registrations, kept between this host's messages.
        let remembered = RememberedState<AgentState>()
        return NativeHostServices(
            configuration: { () throws(ConfigError) in try context.configuration() },
            device: { configuration in
                switch try context.deviceAccess(command: Options.spec.name) {
                case let .agent(agent): agentDevice(agent, remembered: remembered)
                case .keystore: NativeHostDevice(try context.deviceTokens(configuration))
                }
            },
            httpOptions: { HTTPClientSettings(context, configuration: $0).options },
            httpClient: { HTTPClientSettings(options: $0).client(context) },
            cache: context.cacheDirectory, clock: context.environment.clock, log: { context.warn($0) },
            deadlineExitStatus: ExitCode.failure.rawValue)
    }

    /// What the agent's status says: the key and your registrations, and the machine keystore (for
    /// the error that it holds no key).
    struct AgentState {
        let state: KeystoreState
        let keystore: String
    }

    /// The machine key through the system agent: the registrations it shows you (yours), a token for
    /// one of them named by its id (the agent serves only yours, deciding so for each token), signed
    /// within the host's deadline. A token request takes the registrations the agent showed within
    /// the last `RememberedState.lifetimeMilliseconds` (one request to the agent a token, not two);
    /// `config` asks the agent again, and so does a token request the remembered state cannot serve
    /// (no registration for the URL, one the agent no longer has for you).
    static func agentDevice(_ agent: AgentClient, remembered: RememberedState<AgentState>) -> NativeHostDevice {
        let fetch = { () throws -> AgentState in
            let (state, keystore) = try agent.ownState()
            return AgentState(state: state, keystore: keystore)
        }
        return NativeHostDevice(state: {
            try remembered.fresh(fetch).state
        }, recentState: {
            let recent = try remembered.recent(fetch)
            return (recent.value.state, recent.remembered)
        }, noKey: {
            AgentNoMachineKey(socket: agent.socket, keystore: (try? remembered.recent(fetch).value.keystore) ?? "?")
        }, deviceToken: { registration, deadline in
            do {
                return try deadline.bounding { try agent.token(server: registration.server, deviceID: registration.registrationId, claims: []) }
            } catch {
                remembered.forget()
                throw error
            }
        })
    }
}
