import Glibc

/// The current time in whole seconds since the epoch; tests inject a fixed one.
public protocol Clock: Sendable {
    func secondsSinceEpoch() -> Int64
}

/// The monotonic clock (CLOCK_MONOTONIC), which neither NTP nor an administrator sets: for deadlines
/// and ages within one process.
public enum MonotonicClock {
    public static func milliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

public struct SystemClock: Clock {
    public init() {}

    public func secondsSinceEpoch() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }
}
