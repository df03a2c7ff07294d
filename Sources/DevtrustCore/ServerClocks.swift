import DevtrustDevice
import DevtrustKeys
import DevtrustKeystore
import DevtrustURL

/// The servers' clocks during one run (server contract, section 2): every
/// answer's `Date` header is compared with this machine's clock (the front end
/// reports each comparison: `observe`); a difference beyond what the server
/// tolerates is said once per server, in words that name the clock and the fix;
/// the last measurement per server is kept in the cache directory (`status`
/// shows it); and device tokens for a server are written in its time
/// (`ClockSkew` says when a stored measurement still applies).
/// A class, not a value: the HTTP client that measures and the minter that corrects
/// share one run's measurements. A command runs on one thread: the state needs no lock.
public final class ServerClocks: @unchecked Sendable {
    private let store: ClockSkewStore?
    private let reading: @Sendable () -> BootClockReading
    private let warn: (String) -> Void
    /// Measured in this run, by server origin.
    private var measured = [String: Int64]()
    private var warned = Set<String>()

    /// `reading`: this machine's clocks (injected: tests set them); `warn`: where the warning goes.
    public init(store: ClockSkewStore?, reading: @escaping @Sendable () -> BootClockReading, warn: @escaping (String) -> Void) {
        self.store = store
        self.reading = reading
        self.warn = warn
    }

    /// This machine's wall clock, seconds since the epoch with fractions: what a `Date` header is compared with.
    public func wallClock() -> Double {
        reading().wall
    }

    /// An answer from `url` showed this machine's clock `skewSeconds` ahead of the server's (behind when negative).
    public func observe(skewSeconds: Double, at url: String) {
        let origin = Origin.text(of: url)
        let skew = Int64(skewSeconds.rounded())
        measured[origin] = skew
        let now = reading()
        if let bootID = now.bootID {
            store?.save(ClockSkewRecord(skewSeconds: skew, measuredAt: Int64(now.wall), bootID: bootID, rawAt: now.raw, wallMinusRaw: now.wallMinusRaw),
                        for: origin)
        }
        guard ClockSkew.exceedsTolerance(skew), !warned.contains(origin) else { return }
        warned.insert(origin)
        let corrected = abs(skew) <= ClockSkew.maximumCorrection
            ? " devtrust writes its device tokens for \(origin) in the server's time while the difference lasts, but other software will fail too."
            : ""
        let effect = skew > 0
            ? "\(skew) s ahead of \(origin)'s (its Date header): the server refuses device tokens more than \(ClockSkew.toleratedAhead) s in its future"
            : "\(-skew) s behind \(origin)'s (its Date header): the server drops device tokens older than \(ClockSkew.toleratedBehind / 60) minutes"
        warn("this machine's clock is \(effect), and then signs in without device data.\(corrected) Set the clock right: `timedatectl set-ntp true` (NTP), then check `timedatectl status`")
    }

    /// Seconds to take off this machine's time for tokens to `server`: this run's measurement, or a stored one that still applies.
    /// `threshold`: smaller differences are not corrected.
    public func correction(for server: String, threshold: Int64 = ClockSkew.correctionThreshold) -> Int64? {
        let origin = Origin.text(of: server)
        if let skew = measured[origin] {
            return abs(skew) > threshold && abs(skew) <= ClockSkew.maximumCorrection ? skew : nil
        }
        guard let record = store?.record(for: origin) else { return nil }
        return ClockSkew.correction(record, now: reading(), threshold: threshold)
    }

    /// The last measurement per server origin.
    public func records() -> [String: ClockSkewRecord] {
        store?.records() ?? [:]
    }

    /// A clock in `server`'s time, for the tokens sent to it.
    public func clock(for server: String, base: any Clock, threshold: Int64 = ClockSkew.correctionThreshold) -> any Clock {
        SkewCorrectedClock(base: base, skew: { [self] in correction(for: server, threshold: threshold) })
    }
}
