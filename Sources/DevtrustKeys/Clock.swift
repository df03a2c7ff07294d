import Glibc

/// The current time in whole seconds since the epoch; tests inject a fixed one.
public protocol Clock: Sendable {
    func secondsSinceEpoch() -> Int64
}

public struct SystemClock: Clock {
    public init() {}

    public func secondsSinceEpoch() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }
}
