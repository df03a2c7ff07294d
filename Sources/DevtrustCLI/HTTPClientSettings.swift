import CProcessHardening
import DevtrustConfig
import DevtrustHTTP
import DevtrustSignIn
import DevtrustSignInService
import DevtrustTerminal

/// How every command's HTTP client is set up: the CA to trust (`--ca-file`,
/// else DEVTRUST_CA_FILE), the configuration's timeouts, DEVTRUST_HTTP_DEBUG,
/// and curl's no_proxy (then NO_PROXY; the transport adds loopback to it).
struct HTTPClientSettings {
    var options: HTTPOptions

    init(caFile explicitCAFile: String?, http: Configuration.HTTPSettings, environment: [String: String]) {
        let caFile = explicitCAFile ?? environment["DEVTRUST_CA_FILE"]
        var options = HTTPOptions(caFile: caFile?.isEmpty == false ? caFile : nil, userAgent: "devtrust/\(CommandSpecs.version)")
        options.connectTimeoutMilliseconds = http.connectTimeoutSeconds * 1000
        options.totalTimeoutMilliseconds = http.requestTimeoutSeconds * 1000
        options.debug = environment["DEVTRUST_HTTP_DEBUG"].map { !$0.isEmpty && $0 != "0" } ?? false
        options.noProxy = environment["no_proxy"] ?? environment["NO_PROXY"]
        self.options = options
    }

    /// Settings of these options (a configuration's, shortened: the native host's discovery).
    init(options: HTTPOptions) {
        self.options = options
    }

    init(_ context: CommandContext, configuration: Configuration) {
        self.init(caFile: context.global.caFile, http: configuration.http, environment: context.environment.variables)
    }

    /// A client whose answers' Date headers measure the servers' clocks (`context.clocks`).
    /// A request that waits a second or more shows so on a terminal (`NetworkWaitIndicator`).
    /// `stoppedBySignals`: for a command that watches for signals (`devtrust_watch_interrupts`)
    /// and ends by them: a request under way stops with `HTTPError.interrupted` when one arrives.
    func client(_ context: CommandContext, stoppedBySignals: Bool = false) -> any HTTPClient {
        var options = options
        if stoppedBySignals { options.interruption = { devtrust_interrupt_signal() } }
        let client = context.clocks.watch(transport(context, options: options))
        guard context.verbose && !context.quiet else { return client }
        return VerboseHTTPClient(inner: client, say: { context.detail($0) })
    }

    /// The environment's transport (curl; a test's in-process server) with `options` (these
    /// settings' own, or changed: shorter timeouts, say) and the network-wait indicator that every
    /// command's requests have. Not the clock measurements of `client(_:)`. One request at a time:
    /// the indicator draws on the command's one status line.
    func transport(_ context: CommandContext, options: HTTPOptions) -> any HTTPClient {
        var options = options
        options.waitObserver = NetworkWaitObserver(indicator: waitIndicator(context))
        return context.environment.httpTransport(options)
    }

    /// The network-wait indicator of `context`'s status line, for waits that are not one
    /// curl request in this process (probes run in child processes): call
    /// `waiting(for:elapsedSeconds:)` about once a second while waiting, then `finished()`.
    /// It draws only where `NetworkWaitIndicator.make` says, and decides so when first
    /// past its threshold.
    func waitIndicator(_ context: CommandContext) -> NetworkWaitIndicator {
        NetworkWaitIndicator.make(context, httpDebug: options.debug)
    }

    /// An OAuth client over `client(_:stoppedBySignals:)`, whose ID-token checks read the time at the server (its measured clock).
    func oauthClient(_ context: CommandContext, stoppedBySignals: Bool = false) -> OAuthClient {
        let clock = context.environment.clock
        let clocks = context.clocks
        return OAuthClient(http: client(context, stoppedBySignals: stoppedBySignals), clock: { clock.secondsSinceEpoch() },
                           serverTime: { clocks.clock(for: $0, base: clock).secondsSinceEpoch() })
    }
}
