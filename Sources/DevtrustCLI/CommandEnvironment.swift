import DevtrustAgent
import DevtrustDevice
import DevtrustHTTP
import DevtrustKeys
import DevtrustSignIn
import DevtrustTerminal
import Glibc

/// Everything a command takes from outside: injected so that tests run
/// commands in-process against fixed clocks, randomness and streams.
public struct CommandEnvironment {
    public var variables: [String: String]
    public var terminal: any Terminal
    public var clock: any Clock
    public var random: any RandomSource
    public var effectiveUserID: UInt32
    /// The wall clock, the boot clock and the boot id (for clock-skew corrections).
    public var bootClock: @Sendable () -> BootClockReading = { BootClockReading.system() }
    /// The running devtrust binary's absolute path (what a browser's host manifest names), read when asked.
    public var executablePath: @Sendable () -> String? = { CommandEnvironment.runningExecutable() }
    /// Whether probes that may never end (a TPM that accepts and does not answer, a server) run in
    /// child processes killed at a deadline (`BoundedProbes`): the real, single-threaded process does;
    /// in-process tests, in a multi-threaded test runner where a fork could deadlock, run them inline.
    public var isolatesProbes = false
    /// The HTTP client every request of a command goes through, made from the options
    /// `HTTPClientSettings` computes (CA, timeouts, proxy, the wait observer, the interruption):
    /// curl. The fast tier's tests give an in-process server instead.
    public var httpTransport: @Sendable (HTTPOptions) -> any HTTPClient = { CurlHTTPClient(options: $0) }
    /// The clock and the waits between polls (`login --device-code`, `--ciba`), stopped by the
    /// signal `interruption` reports: real time. The fast tier's tests give virtual time.
    public var waiting: @Sendable (_ interruption: @escaping @Sendable () -> Int32) -> any Waiting = { SystemWaiting(interruption: $0) }
    /// The prefix of every path the posture collectors read: "" for this machine's files. Below any
    /// other root (a test's tree) nothing is run, and the firewall is not read (`FirewallCollector`).
    public var postureRoot = ""
    /// The device key as commands use it once loaded (`DeviceStore.keyInUse`): the key itself.
    /// The fast tier's tests give a key that answers as a TPM in trouble does.
    public var keyInUse: @Sendable (any DeviceKey) -> any DeviceKey = { $0 }
    /// The system agent's socket that commands use when it exists and nothing names a keystore or
    /// an agent (`/run/devtrust/agent.sock` for the real process); nil: none (a test names its own,
    /// so that no test depends on what is in the machine's /run).
    public var defaultAgentSocket: String?

    public init(variables: [String: String], terminal: any Terminal, clock: any Clock = SystemClock(),
                random: any RandomSource = SystemRandom(), effectiveUserID: UInt32 = geteuid(), defaultAgentSocket: String? = nil) {
        self.variables = variables
        self.terminal = terminal
        self.clock = clock
        self.random = random
        self.effectiveUserID = effectiveUserID
        self.defaultAgentSocket = defaultAgentSocket
    }

    /// The environment variables devtrust reads; `process()` looks up only these.
    public static let knownVariables = [
        "DEVTRUST_KEYSTORE", "DEVTRUST_AGENT", "DEVTRUST_CONFIG", "DEVTRUST_TCTI", "TPM2TOOLS_TCTI", "TSS2_TCTI", "DEVTRUST_CA_FILE", "DEVTRUST_HTTP_DEBUG",
        "no_proxy", "NO_PROXY",
        "HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "NO_COLOR", "TERM", "LC_ALL", "LC_CTYPE", "LANG", "DISPLAY", "WAYLAND_DISPLAY",
        "COLUMNS", "LINES",
        // Socket activation (systemd), for `devtrust agent`.
        "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES",
    ]

    /// Where /proc/self/exe leads, or nil.
    public static func runningExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The running process's environment and standard streams.
    public static func process() -> CommandEnvironment {
        var variables = [String: String]()
        for name in knownVariables {
            if let value = getenv(name) { variables[name] = String(cString: value) }
        }
        var environment = CommandEnvironment(variables: variables, terminal: ProcessTerminal(), defaultAgentSocket: AgentSocketLocation.defaultPath)
        environment.isolatesProbes = true
        return environment
    }
}
