import DevtrustHTTP
import Foundation
import Synchronization
import Testing

/// What an answer's `Date` header says of the clocks, with the time the server took over the request.
struct ClockWatchingTests {
    /// A server whose clock is exactly 3 s behind this machine's, and that stamps `Date` after
    /// `working` seconds on the request, `transfer` before the answer is read here.
    final class SlowServer: HTTPClient, @unchecked Sendable {
        let clock = Mutex(1_796_650_000.0)
        let working: Double, transfer: Double
        init(startingAt start: Double, working: Double, transfer: Double) {
            clock.withLock { $0 = start }
            self.working = working
            self.transfer = transfer
        }
        func now() -> Double { clock.withLock { $0 } }
        func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
            let stamped = clock.withLock { time in
                time += working
                defer { time += transfer }
                return time - 3
            }
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let date = formatter.string(from: Date(timeIntervalSince1970: stamped.rounded(.down)))
            return HTTPResponse(status: 200, headers: [("Date", date)], body: [])
        }
    }

    /// The skew is measured as 3 s (rounded) however long the server works before it answers, and
    /// wherever in its second it stamps: never less, which would write a DPoP proof into the future
    /// of a server that allows none. (Taken from the middle of the exchange, a server that worked
    /// 1.05 s and stamped early in its second measured 2 s: seen as a refused proof under load.)
    @Test func aSlowServersClockIsNotTakenForAhead() throws {
        for working in [0.0, 0.3, 1.05, 2.5, 6.0] {
            for start in stride(from: 0.0, to: 1.0, by: 0.125) {
                let server = SlowServer(startingAt: 1_796_650_000 + start, working: working, transfer: 0.01)
                let observed = Mutex<Double?>(nil)
                let client = ClockWatchingHTTPClient(server, now: { server.now() }, observe: { observation in observed.withLock { $0 = observation.skewSeconds } })
                _ = try client.send(HTTPRequest(method: "POST", url: "https://idp.example/token"))
                let skew = try #require(observed.withLock { $0 })
                #expect(Int64(skew.rounded()) == 3 || Int64(skew.rounded()) == 4, "working \(working) s from .\(start): \(skew)")
                #expect(skew >= 2.5, "working \(working) s from .\(start): \(skew)")
            }
        }
    }
}
