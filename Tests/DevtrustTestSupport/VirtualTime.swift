import DevtrustKeys
import DevtrustSignIn
import Synchronization

/// Time that moves only when devtrust waits or a test says so: the clock devtrust reads (`Clock`),
/// its waits between polls (`Waiting`: a wait ends at once, the time at its deadline), and what an
/// in-process server reads as its own clock (`FakeIdentityServer`). No test that uses it sleeps.
public final class VirtualTime: Clock, Waiting, Sendable {
    private let state: Mutex<(seconds: Double, waits: [Double])>

    /// - Parameter seconds: the wall clock at the start, in seconds since the epoch. The default is
    ///   mid-second: a `Date` header (whole seconds) of a server with the same clock then measures
    ///   no difference (its time is taken as the middle of the second it names).
    public init(seconds: Double = 1_750_000_000.5) {
        state = Mutex((seconds, []))
    }

    /// Seconds since the epoch, with fractions.
    public var seconds: Double { state.withLock { $0.seconds } }

    /// How long each wait devtrust made lasted, in order.
    public var waits: [Double] { state.withLock { $0.waits } }

    /// Moves the time on by `seconds` (work that takes time: a user who comes back later).
    public func advance(by seconds: Double) {
        state.withLock { $0.seconds += seconds }
    }

    public func secondsSinceEpoch() -> Int64 { Int64(seconds.rounded(.down)) }

    // Waiting: one clock serves as the monotonic one and the wall clock (no one sets it).
    public func now() -> Double { seconds }

    public func wallClock() -> Double { seconds }

    /// Ends at `deadline` at once, having told `tick` each whole second on the way, as the real waits do.
    public func wait(until deadline: Double, tick: (Double) -> Void) throws {
        let start = seconds
        guard deadline > start else { return }
        var moment = start
        while moment < deadline {
            tick(moment)
            moment = min(moment + 1, deadline)
        }
        state.withLock {
            $0.waits.append(deadline - start)
            $0.seconds = deadline
        }
    }
}
