/// What one answer's `Date` header said about the clocks.
public struct ClockObservation: Sendable, Equatable {
    /// The request's URL.
    public let url: String
    /// This machine's clock minus the server's, in seconds: positive when this one is ahead.
    public let skewSeconds: Double

    public init(url: String, skewSeconds: Double) {
        self.url = url
        self.skewSeconds = skewSeconds
    }
}

/// Reads the `Date` header of the server's answers (its clock; server
/// contract, section 2) and reports how far this machine's clock is from it.
/// The server's time is taken as the middle of the second its header names,
/// and this machine's as when the answer came: a server stamps `Date` when it
/// answers, after its work on the request, so the middle of the exchange
/// (taken before) put a slow server's clock ahead of where it was, and a DPoP
/// proof for a server that allows no future `iat` could be written a second
/// in its future (seen under load). Taken at the answer, the measurement errs
/// the other way only by the answer's transfer. Only answers the server
/// itself made now count: those to POSTs (flow steps, sign-in, device code,
/// token requests), never a GET's (a CDN or cache keeps the `Date` of when
/// it fetched a discovery document or a key set), nor any answer with `Age`
/// (RFC 9111 5.1: it came from a cache).
public struct ClockWatchingHTTPClient: HTTPClient {
    public let inner: any HTTPClient
    /// Wall-clock seconds since the epoch, with fractions.
    public let now: @Sendable () -> Double
    public let observe: @Sendable (ClockObservation) -> Void

    public init(_ inner: any HTTPClient, now: @escaping @Sendable () -> Double, observe: @escaping @Sendable (ClockObservation) -> Void) {
        self.inner = inner
        self.now = now
        self.observe = observe
    }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let response = try inner.send(request)
        let received = now()
        if request.method == "POST", response.header("Age") == nil, let header = response.header("Date"), let serverTime = HTTPDate.parse(header) {
            observe(ClockObservation(url: request.url, skewSeconds: received - (Double(serverTime) + 0.5)))
        }
        return response
    }
}
