import DevtrustKeys
import Synchronization

struct FixedClock: Clock {
    let seconds: Int64
    func secondsSinceEpoch() -> Int64 { seconds }
}

/// Deterministic bytes for tests that need a known jti.
final class CountingRandom: RandomSource {
    private let counter = Mutex<UInt8>(0)

    func bytes(count: Int) throws -> [UInt8] {
        counter.withLock { value in
            (0..<count).map { _ in value &+= 1; return value }
        }
    }
}
