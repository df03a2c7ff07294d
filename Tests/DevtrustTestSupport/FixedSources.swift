import DevtrustKeys
import Synchronization

/// A clock that always reads the same second.
public struct FixedClock: Clock {
    public let seconds: Int64

    public init(seconds: Int64) {
        self.seconds = seconds
    }

    public func secondsSinceEpoch() -> Int64 { seconds }
}

/// Deterministic bytes for tests that need a known jti: 1, 2, 3, ... (wrapping).
public final class CountingRandom: RandomSource {
    private let counter = Mutex<UInt8>(0)

    public init() {}

    public func bytes(count: Int) throws -> [UInt8] {
        counter.withLock { value in
            (0..<count).map { _ in value &+= 1; return value }
        }
    }
}
