/// A reader for GVDB files, the format of dconf databases (~/.config/dconf/user,
/// /etc/dconf/db/*): a header, then a hash table whose items name their parent
/// item, so full keys are the concatenation along the parent chain. Values of
/// type 'v' are serialized GVariant variants: the value, a 0 byte, its type string.
///
/// Keys are looked up as dconf looks them up (gvdb-reader.c): the key's hash picks a
/// bucket, the bloom filter may rule it out, and only the items of that bucket with the
/// same hash are compared, segment by segment along their parent chain. Nothing is
/// enumerated: the user's database is theirs to write, and the system agent reads it
/// for every token, so a crafted file costs a lookup no more than its one bucket.
///
/// Only little-endian files and the value types devtrust reads (b, u, i, s)
/// are understood; anything malformed yields nil, never a crash.
struct GVDBFile {
    enum Value: Equatable {
        case bool(Bool)
        case uint32(UInt32)
        case int32(Int32)
        case string(String)
        case other(type: String)
    }

    /// A parent chain longer than this is malformed (dconf's keys are paths of a few segments).
    static let maximumDepth = 64
    /// Items of one hash a lookup compares by name (dconf's keys collide rarely).
    static let maximumCollisions = 16

    private let bytes: [UInt8]
    private let bloomShift: UInt32
    private let bloomStart: Int
    private let bloomWords: Int
    private let bucketsStart: Int
    private let bucketCount: Int
    private let itemsStart: Int
    private let itemCount: Int

    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 24, Array(bytes[0..<8]) == Array("GVariant".utf8) else { return nil }
        self.bytes = bytes
        guard let rootStart = Self.u32(bytes, 16).map(Int.init), let rootEnd = Self.u32(bytes, 20).map(Int.init),
              rootStart < rootEnd, rootEnd <= bytes.count, rootEnd - rootStart >= 8,
              let bloomField = Self.u32(bytes, rootStart), let buckets = Self.u32(bytes, rootStart + 4) else { return nil }
        bloomShift = bloomField >> 27
        bloomWords = Int(bloomField & 0x07FF_FFFF)
        bloomStart = rootStart + 8
        bucketsStart = bloomStart + 4 * bloomWords
        bucketCount = Int(buckets)
        itemsStart = bucketsStart + 4 * bucketCount
        guard bloomWords < 1 << 16, bucketCount < 1 << 16, itemsStart <= rootEnd else { return nil }
        itemCount = (rootEnd - itemsStart) / 24
    }

    private static func u32(_ bytes: [UInt8], _ offset: Int) -> UInt32? {
        guard offset >= 0, offset + 4 <= bytes.count else { return nil }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }

    private func u32(_ offset: Int) -> UInt32? { Self.u32(bytes, offset) }

    private func u16(_ offset: Int) -> Int? {
        guard offset >= 0, offset + 2 <= bytes.count else { return nil }
        return Int(bytes[offset]) | Int(bytes[offset + 1]) << 8
    }

    /// GVDB's hash: djb2 over the key's bytes taken as signed chars.
    static func hash(_ key: [UInt8]) -> UInt32 {
        var value: UInt32 = 5381
        for byte in key { value = value &* 33 &+ UInt32(bitPattern: Int32(Int8(bitPattern: byte))) }
        return value
    }

    /// The value of `key` (a full path, "/org/gnome/..."), nil when the file has none or it is not
    /// a value (a directory item) or it is malformed.
    func value(_ key: String) -> Value? {
        let name = Array(key.utf8)
        let hash = Self.hash(name)
        guard bucketCount > 0, itemCount > 0, bloomAllows(hash) else { return nil }
        let bucket = Int(hash % UInt32(bucketCount))
        guard var index = u32(bucketsStart + 4 * bucket).map(Int.init) else { return nil }
        var last = itemCount
        if bucket != bucketCount - 1, let next = u32(bucketsStart + 4 * (bucket + 1)).map(Int.init), next <= itemCount { last = next }
        // Items of the key's own hash are compared along their parents; a real database has one, two at
        // a collision: past a few, the file is crafted (each comparison walks up to 64 parents), and no
        // more are looked at.
        var sameHash = 0
        while index < last {
            let base = itemsStart + 24 * index
            if u32(base) == hash {
                sameHash += 1
                guard sameHash <= Self.maximumCollisions else { return nil }
            }
            if u32(base) == hash, names(item: index, name[...]) {
                guard bytes[base + 14] == UInt8(ascii: "v"), let start = u32(base + 16).map(Int.init), let end = u32(base + 20).map(Int.init),
                      start <= end, end <= bytes.count else { return nil }
                return Self.decodeVariant(bytes[start..<end])
            }
            index += 1
        }
        return nil
    }

    private func bloomAllows(_ hash: UInt32) -> Bool {
        guard bloomWords > 0 else { return true }
        let word = Int((hash / 32) % UInt32(bloomWords))
        var mask: UInt32 = 1 << (hash & 31)
        mask |= 1 << ((hash >> bloomShift) & 31)
        guard let bits = u32(bloomStart + 4 * word) else { return false }
        return bits & mask == mask
    }

    /// Whether item `index`'s full key, its own segment after its parents', is `name`: compared from
    /// the end, one segment per item, so the cost is the key's length (plus the depth bound).
    private func names(item index: Int, _ name: ArraySlice<UInt8>) -> Bool {
        var item = index
        var remaining = name
        for _ in 0..<Self.maximumDepth {
            let base = itemsStart + 24 * item
            guard item < itemCount, let parent = u32(base + 4), let keyStart = u32(base + 8).map(Int.init), let keySize = u16(base + 12),
                  keyStart + keySize <= bytes.count, keySize <= remaining.count else { return false }
            guard bytes[keyStart..<(keyStart + keySize)].elementsEqual(remaining.suffix(keySize)) else { return false }
            remaining = remaining.dropLast(keySize)
            if parent == UInt32.max { return remaining.isEmpty }
            item = Int(parent)
        }
        return false
    }

    /// A serialized variant: value bytes, 0, type string.
    static func decodeVariant(_ bytes: ArraySlice<UInt8>) -> Value? {
        guard let separator = bytes.lastIndex(of: 0) else { return nil }
        let type = String(decoding: bytes[(separator + 1)...], as: UTF8.self)
        let data = Array(bytes[..<separator])
        switch type {
        case "b": return data.count == 1 ? .bool(data[0] != 0) : nil
        case "u", "i":
            guard data.count == 4 else { return nil }
            let value = UInt32(data[0]) | UInt32(data[1]) << 8 | UInt32(data[2]) << 16 | UInt32(data[3]) << 24
            return type == "u" ? .uint32(value) : .int32(Int32(bitPattern: value))
        case "s":
            guard data.last == 0 else { return nil }
            return .string(String(decoding: data.dropLast(), as: UTF8.self))
        default: return .other(type: type)
        }
    }
}
