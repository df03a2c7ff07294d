import DevtrustConfig
import DevtrustHTTP
import DevtrustSignIn

/// How every command's HTTP client is set up: the CA to trust (`--ca-file`,
/// else DEVTRUST_CA_FILE), the configuration's timeouts, DEVTRUST_HTTP_DEBUG,
/// and curl's no_proxy (then NO_PROXY; the transport adds loopback to it).
struct HTTPClientSettings {
    let options: HTTPOptions

    init(caFile explicitCAFile: String?, http: Configuration.HTTPSettings, environment: [String: String]) {
        let caFile = explicitCAFile ?? environment["DEVTRUST_CA_FILE"]
        var options = HTTPOptions(caFile: caFile?.isEmpty == false ? caFile : nil, userAgent: "devtrust/\(CommandSpecs.version)")
        options.connectTimeoutMilliseconds = http.connectTimeoutSeconds * 1000
        options.totalTimeoutMilliseconds = http.requestTimeoutSeconds * 1000
        options.debug = environment["DEVTRUST_HTTP_DEBUG"].map { !$0.isEmpty && $0 != "0" } ?? false
        options.noProxy = environment["no_proxy"] ?? environment["NO_PROXY"]
        self.options = options
    }

    init(_ context: CommandContext, configuration: Configuration) {
        self.init(caFile: context.global.caFile, http: configuration.http, environment: context.environment.variables)
    }

    /// A client whose answers' Date headers measure the servers' clocks (`context.clocks`).
    /// A request that waits a second or more shows so on a terminal (`NetworkWaitIndicator`).
    func client(_ context: CommandContext) -> any HTTPClient {
        var options = options
        options.waitObserver = NetworkWaitIndicator.make(context, httpDebug: options.debug)
        let client = context.clocks.watch(CurlHTTPClient(options: options))
        guard context.verbose && !context.quiet else { return client }
        return VerboseHTTPClient(inner: client, say: { context.detail($0) })
    }

    /// An OAuth client over `client(_:)`, whose ID-token checks read the time at the server (its measured clock).
    func oauthClient(_ context: CommandContext) -> OAuthClient {
        let clock = context.environment.clock
        let clocks = context.clocks
        return OAuthClient(http: client(context), clock: { clock.secondsSinceEpoch() },
                           serverTime: { clocks.clock(for: $0, base: clock).secondsSinceEpoch() })
    }
}
