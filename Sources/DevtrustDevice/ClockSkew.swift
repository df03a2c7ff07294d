import DevtrustEncoding
import DevtrustKeys
import DevtrustKeystore
import DevtrustURL
import Glibc

/// How far this machine's clock is from a server's, as last measured from its
/// `Date` headers, and whether device tokens for it should correct `iat`.
///
/// The server accepts a token for 5 minutes after its `iat` and refuses one
/// more than 30 s ahead of its own clock, silently: the sign-in goes on
/// without device data (server contract, section 2). devtrust warns when the
/// difference is beyond that, and, like the AWS SDKs for their request
/// signatures, writes its tokens for that server with the server's time.
/// A stored correction is used only while it still describes this machine's
/// clock: measured in this boot, less than an hour ago, and with the wall
/// clock neither set nor slewed by more than 2 s since (the wall clock minus
/// the raw monotonic clock, which NTP neither sets nor slews, is what it was;
/// a suspend also ends it). Once this machine's clock is fixed, the old
/// correction is dropped, so it cannot push `iat` into the server's future.
/// A change of the server's own clock is seen only at the next answer from
/// it (register, login, a refresh), or when the hour is up.
public struct ClockSkewRecord: Sendable, Equatable {
    /// This machine's clock minus the server's, whole seconds (positive: ahead).
    public var skewSeconds: Int64
    /// When it was measured, by this machine's clock.
    public var measuredAt: Int64
    /// The boot it was measured in, the raw monotonic clock then, and the wall clock minus it.
    public var bootID: String
    public var rawAt: Double
    public var wallMinusRaw: Double

    public init(skewSeconds: Int64, measuredAt: Int64, bootID: String, rawAt: Double, wallMinusRaw: Double) {
        self.skewSeconds = skewSeconds
        self.measuredAt = measuredAt
        self.bootID = bootID
        self.rawAt = rawAt
        self.wallMinusRaw = wallMinusRaw
    }
}

public enum ClockSkew {
    /// The server refuses device tokens more than this far in its future...
    public static let toleratedAhead: Int64 = 30
    /// ...and drops those older than this.
    public static let toleratedBehind: Int64 = 300
    /// Smaller differences are within what a `Date` header (whole seconds) can tell, and harmless.
    public static let correctionThreshold: Int64 = 5
    /// Beyond a day, the clock is too wrong to trust a correction of it.
    public static let maximumCorrection: Int64 = 86_400
    /// How long a stored measurement is used (the server's clock may be fixed meanwhile).
    public static let maximumAge = 3600.0
    /// How far the wall clock may have moved against the boot clock before a correction is dropped.
    public static let clockMovedTolerance = 2.0

    /// Whether tokens minted now would be refused (or drop out within a minute) at a server this far off.
    public static func exceedsTolerance(_ skew: Int64) -> Bool {
        skew > toleratedAhead || -skew > toleratedBehind
    }

    /// The seconds to take off this machine's time for tokens to `server`, or nil for none.
    /// `threshold`: smaller differences are not corrected (device tokens: `correctionThreshold`; DPoP proofs: 0).
    public static func correction(_ record: ClockSkewRecord?, now reading: BootClockReading, threshold: Int64 = correctionThreshold) -> Int64? {
        guard let record, let bootID = reading.bootID, bootID == record.bootID,
              abs(reading.wallMinusRaw - record.wallMinusRaw) <= clockMovedTolerance,
              (0...maximumAge).contains(reading.raw - record.rawAt),
              abs(record.skewSeconds) > threshold, abs(record.skewSeconds) <= maximumCorrection else { return nil }
        return record.skewSeconds
    }
}

/// The wall clock, the raw monotonic clock and the boot's id, read together.
public struct BootClockReading: Sendable {
    public let wall: Double
    public let raw: Double
    public let bootID: String?
    public var wallMinusRaw: Double { wall - raw }

    public init(wall: Double, raw: Double, bootID: String?) {
        self.wall = wall
        self.raw = raw
        self.bootID = bootID
    }

    /// This machine's: CLOCK_REALTIME; CLOCK_MONOTONIC_RAW, which is never set and never
    /// slewed (CLOCK_MONOTONIC and CLOCK_BOOTTIME are slewed with the wall clock), and stops
    /// in suspend; /proc's boot id.
    public static func system() -> BootClockReading {
        var wall = timespec()
        var raw = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        clock_gettime(CLOCK_MONOTONIC_RAW, &raw)
        let wallSeconds = Double(wall.tv_sec) + Double(wall.tv_nsec) / 1e9
        let rawSeconds = Double(raw.tv_sec) + Double(raw.tv_nsec) / 1e9
        var bootID: String?
        if let file = fopen("/proc/sys/kernel/random/boot_id", "re") {
            var buffer = [CChar](repeating: 0, count: 64)
            if fgets(&buffer, Int32(buffer.count), file) != nil {
                bootID = String(decoding: buffer.prefix(while: { $0 != 0 && $0 != 10 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            fclose(file)
        }
        return BootClockReading(wall: wallSeconds, raw: rawSeconds, bootID: bootID)
    }
}

/// The last measurement per server origin, in the cache directory (`clock.json`).
public struct ClockSkewStore: Sendable {
    public static let fileName = "clock.json"
    public let cache: CacheDirectory

    public init(cache: CacheDirectory) {
        self.cache = cache
    }

    public func records() -> [String: ClockSkewRecord] {
        guard let bytes = cache.read(Self.fileName), case let .object(document)? = try? JSONParser.parse(bytes) else { return [:] }
        var records = [String: ClockSkewRecord]()
        for member in document.members {
            guard let object = member.value.objectValue, let skew = object["skewSeconds"]?.int64Value,
                  let measuredAt = object["measuredAt"]?.int64Value, let bootID = object["bootId"]?.stringValue,
                  let rawAt = object["rawAt"]?.doubleValue, let wallMinusRaw = object["wallMinusRaw"]?.doubleValue else { continue }
            records[member.key] = ClockSkewRecord(skewSeconds: skew, measuredAt: measuredAt, bootID: bootID, rawAt: rawAt, wallMinusRaw: wallMinusRaw)
        }
        return records
    }

    /// The record of `url`'s server: kept under its origin (`Origin.text(of:)`).
    public func record(for url: String) -> ClockSkewRecord? {
        records()[Origin.text(of: url)]
    }

    public func save(_ record: ClockSkewRecord, for url: String) {
        var all = records()
        all[Origin.text(of: url)] = record
        var document = JSONObject()
        for origin in all.keys.sorted() {
            let entry = all[origin]!
            document[origin] = .object(["skewSeconds": .integer(entry.skewSeconds), "measuredAt": .integer(entry.measuredAt),
                                        "bootId": .string(entry.bootID), "rawAt": .number(String(entry.rawAt)),
                                        "wallMinusRaw": .number(String(entry.wallMinusRaw))])
        }
        cache.write(Self.fileName, JSONWriter.bytes(.object(document)))
    }
}

/// A clock set to a server's time: this machine's minus the measured skew.
public struct SkewCorrectedClock: Clock {
    public let base: any Clock
    /// Looked up at each reading: a measurement made during the run applies at once.
    public let skew: @Sendable () -> Int64?

    public init(base: any Clock, skew: @escaping @Sendable () -> Int64?) {
        self.base = base
        self.skew = skew
    }

    public func secondsSinceEpoch() -> Int64 {
        base.secondsSinceEpoch() - (skew() ?? 0)
    }
}
