import DevtrustConfig
import DevtrustCore
import DevtrustHTTP
import DevtrustKeys
import DevtrustKeystore

/// What the native messaging host takes from the front end that runs it (the command line's
/// `native-host` today): the configuration, read again for every message so that an
/// administrator's change applies to the next one; the core's device-token service over the
/// device's keystore, with a message's configuration; HTTP for the sign-in profiles' discovery
/// documents; the cache directory and the clock; where its log lines go (stderr, which the
/// browser keeps as the host's log).
package struct NativeHostServices {
    package var configuration: () throws(ConfigError) -> Configuration
    package var deviceTokens: (Configuration) throws -> DeviceTokenService
    /// The HTTP options of a configuration (CA file, timeouts, proxy), before the host shortens them.
    package var httpOptions: (Configuration) -> HTTPOptions
    /// A client with those options (measuring the servers' clocks, as every client of the front end does).
    package var httpClient: (HTTPOptions) -> any HTTPClient
    /// Where discovery documents are kept between messages and between hosts (nil: not kept).
    package var cache: CacheDirectory?
    package var clock: any Clock
    package var log: (String) -> Void
    /// The process's exit status when a signing deadline passes, after its reply (`SigningDeadline.nativeHost`).
    package var deadlineExitStatus: Int32

    package init(configuration: @escaping () throws(ConfigError) -> Configuration, deviceTokens: @escaping (Configuration) throws -> DeviceTokenService,
                 httpOptions: @escaping (Configuration) -> HTTPOptions, httpClient: @escaping (HTTPOptions) -> any HTTPClient,
                 cache: CacheDirectory?, clock: any Clock, log: @escaping (String) -> Void, deadlineExitStatus: Int32) {
        self.configuration = configuration
        self.deviceTokens = deviceTokens
        self.httpOptions = httpOptions
        self.httpClient = httpClient
        self.cache = cache
        self.clock = clock
        self.log = log
        self.deadlineExitStatus = deadlineExitStatus
    }
}
