import DevtrustAgent
import DevtrustConfig
import DevtrustCore
import DevtrustDevice
import DevtrustErrors
import DevtrustKeys
import DevtrustKeystore
import DevtrustTerminal

/// One command's run: the global options, the environment, and output helpers
/// (the command's own options come to it as its `Options` value).
struct CommandContext {
    private(set) var global: GlobalOptions
    let environment: CommandEnvironment
    /// What the TPM backend did on its own during the command; printed after it.
    var tpmNotices = TPMNotices()
    /// The servers' clocks, as their answers tell them.
    let clocks: ServerClocks
    /// The cache directory (posture results, clock measurements), kept out of the keystore:
    /// resolved once per command (its overlap with the keystore takes a few `realpath` calls).
    let cacheDirectory: CacheDirectory?
    /// The line at the bottom of the terminal that the countdown and the network-wait indicator rewrite.
    let statusLine: StatusLine

    init(global: GlobalOptions, environment: CommandEnvironment, tpmNotices: TPMNotices = TPMNotices(), clocks: ServerClocks? = nil) {
        self.global = global
        self.environment = environment
        self.tpmNotices = tpmNotices
        let terminal = environment.terminal
        let cacheDirectory = Self.cacheDirectory(global, environment)
        self.cacheDirectory = cacheDirectory
        self.statusLine = StatusLine(terminal: terminal)
        self.clocks = clocks ?? ServerClocks(
            store: cacheDirectory.map(ClockSkewStore.init),
            reading: environment.bootClock, warn: { TerminalMessages.warning($0, to: terminal, style: TerminalStyle(environment)) })
    }

    var terminal: any Terminal { environment.terminal }
    /// Colour on stderr or none. Asked for only when a line is written, so that a
    /// command that writes nothing on stderr (`devtrust token`) asks nothing of the terminal.
    var style: TerminalStyle { TerminalStyle(environment) }
    var json: Bool { global.json }
    var quiet: Bool { global.quiet }
    var verbose: Bool { global.verbose }

    /// The command's lines for people on stderr, as --quiet and --verbose say.
    var messages: TerminalMessages {
        TerminalMessages(terminal: terminal, variables: environment.variables, quiet: quiet, verbose: verbose)
    }

    /// Prints the command's artifact on stdout, followed by one newline.
    func output(_ text: String) {
        let safe = TerminalText.printable(text)
        terminal.writeOutput(safe.hasSuffix("\n") ? safe : safe + "\n")
    }

    /// A message for people, on stderr (silent with --quiet).
    func info(_ text: String) { messages.info(text) }

    /// What a command did (registered, signed in, deleted), on stderr: in green
    /// on a terminal (`TerminalStyle`); silent with --quiet.
    func success(_ text: String) { messages.success(text) }

    /// A message the server sent for the user; errors in red on a terminal (`TerminalStyle`).
    func serverMessage(_ text: String, isError: Bool) { messages.serverMessage(text, isError: isError) }

    func warn(_ text: String) { messages.warn(text) }

    func detail(_ text: String) { messages.detail(text) }

    /// How this run reaches the device key: the system agent or a keystore (`DeviceKeyAccess`'s rule).
    func deviceAccess(command: String) throws -> DeviceKeyAccess {
        try DeviceKeyAccess.choose(keystore: global.keystore, agent: global.agent, variables: environment.variables,
                                   defaultSocket: environment.defaultAgentSocket, command: command)
    }

    func keystore() throws -> Keystore {
        guard let path = KeystoreLocation.resolve(explicit: global.keystore, environment: environment.variables,
                                                  effectiveUserID: environment.effectiveUserID) else {
            throw UsageError("cannot tell where the keystore is: HOME is not set; pass --keystore DIR or set DEVTRUST_KEYSTORE")
        }
        return Keystore(path: path, ownerID: environment.effectiveUserID)
    }

    static func cacheDirectory(_ global: GlobalOptions, _ environment: CommandEnvironment) -> CacheDirectory? {
        let keystore = KeystoreLocation.resolve(explicit: global.keystore, environment: environment.variables,
                                                effectiveUserID: environment.effectiveUserID)
        return CacheDirectory.resolve(environment: environment.variables, effectiveUserID: environment.effectiveUserID, keystorePath: keystore)
    }

    /// The TPM as `--tcti` and the environment choose it.
    var tpmSelection: TPMSelection {
        TPMSelection(explicit: global.tcti, environment: environment.variables)
    }

    func deviceStore() throws -> DeviceStore {
        var store = DeviceStore(keystore: try keystore(), clock: environment.clock, tpm: tpmSelection, random: environment.random, tpmNotices: tpmNotices)
        store.keyInUse = environment.keyInUse
        return store
    }

    /// Where this run's posture is read: the machine's files, as the effective user, caching in the cache directory.
    var postureSources: PostureSources {
        let variables = environment.variables
        return PostureSources(root: environment.postureRoot, effectiveUserID: environment.effectiveUserID, home: variables["HOME"],
                              xdgConfigHome: variables["XDG_CONFIG_HOME"], cache: cacheDirectory)
    }

    /// The device-token service over this run's keystore, clocks, randomness and posture, with
    /// `configuration`; its warnings on stderr.
    func deviceTokens(_ configuration: Configuration) throws -> DeviceTokenService {
        deviceTokens(configuration, store: try deviceStore())
    }

    /// The same over `store`, a keystore the command has opened already. (Two functions, not an
    /// optional store: `DeviceStore?`'s type metadata would be made at run time on `token`'s path.)
    func deviceTokens(_ configuration: Configuration, store: DeviceStore) -> DeviceTokenService {
        let context = self
        return DeviceTokenService(store: store, configuration: configuration, clock: environment.clock,
                                  random: environment.random, serverClocks: clocks, posture: postureSources, warn: { context.warn($0) })
    }

    func configuration() throws(ConfigError) -> Configuration {
        try ConfigurationLoader(explicitPath: global.config, environment: environment.variables).load()
    }

    /// The same run for another command that this one runs (its global options
    /// kept), whose output stays off stdout: `--json` is the first command's.
    func withoutJSONOutput() -> CommandContext {
        var other = self
        other.global.json = false
        return other
    }

    /// Reads an argument's text, or all of stdin for `-`, without the trailing newline.
    func textArgument(_ value: String, name: String, limit: Int = 1 << 20) throws -> String {
        guard value == "-" else { return value }
        guard let bytes = terminal.readInput(limit: limit) else {
            throw UsageError("\(name) on stdin is larger than \(limit) bytes")
        }
        var text = String(decoding: bytes, as: UTF8.self)
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return text
    }
}
