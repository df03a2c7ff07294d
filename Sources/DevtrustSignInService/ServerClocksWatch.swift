import DevtrustCore
import DevtrustHTTP

/// The HTTP half of the servers' clocks (`ServerClocks`, below HTTP): every answer's
/// `Date` header measures its server's clock.
extension ServerClocks {
    /// The client, reading the `Date` header of every answer.
    package func watch(_ client: any HTTPClient) -> any HTTPClient {
        ClockWatchingHTTPClient(client, now: { [self] in wallClock() }, observe: { [self] in observe(skewSeconds: $0.skewSeconds, at: $0.url) })
    }
}
