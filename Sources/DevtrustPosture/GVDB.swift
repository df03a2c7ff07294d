/// A reader for GVDB files, the format of dconf databases (~/.config/dconf/user,
/// /etc/dconf/db/*): a header, then a hash table whose items name their parent
/// item, so full keys are the concatenation along the parent chain. Values of
/// type 'v' are serialized GVariant variants: the value, a 0 byte, its type string.
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

    private(set) var values: [String: Value] = [:]

    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 24, Array(bytes[0..<8]) == Array("GVariant".utf8) else { return nil }
        func u32(_ offset: Int) -> UInt32? {
            guard offset >= 0, offset + 4 <= bytes.count else { return nil }
            return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
        }
        func u16(_ offset: Int) -> UInt16? {
            guard offset >= 0, offset + 2 <= bytes.count else { return nil }
            return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
        }
        guard let rootStart = u32(16).map(Int.init), let rootEnd = u32(20).map(Int.init),
              rootStart < rootEnd, rootEnd <= bytes.count, rootEnd - rootStart >= 8,
              let bloomField = u32(rootStart), let bucketCount = u32(rootStart + 4) else { return nil }
        let bloomWords = Int(bloomField & 0x07FF_FFFF)
        let itemsStart = rootStart + 8 + 4 * bloomWords + 4 * Int(bucketCount)
        guard bloomWords < 1 << 16, bucketCount < 1 << 16, itemsStart <= rootEnd else { return nil }
        let itemCount = (rootEnd - itemsStart) / 24

        struct Item {
            let parent: UInt32
            let key: String
            let type: UInt8
            let value: Range<Int>
        }
        var items = [Item]()
        for index in 0..<itemCount {
            let base = itemsStart + 24 * index
            guard let parent = u32(base + 4), let keyStart = u32(base + 8).map(Int.init), let keySize = u16(base + 12).map(Int.init),
                  let valueStart = u32(base + 16).map(Int.init), let valueEnd = u32(base + 20).map(Int.init),
                  keyStart + keySize <= bytes.count else { return nil }
            let key = String(decoding: bytes[keyStart..<(keyStart + keySize)], as: UTF8.self)
            let value = valueStart <= valueEnd && valueEnd <= bytes.count ? valueStart..<valueEnd : 0..<0
            items.append(Item(parent: parent, key: key, type: bytes[base + 14], value: value))
        }
        for item in items where item.type == UInt8(ascii: "v") {
            var key = item.key
            var parent = item.parent
            var depth = 0
            while parent != UInt32.max {
                guard Int(parent) < items.count, depth < 64 else { return nil }
                key = items[Int(parent)].key + key
                parent = items[Int(parent)].parent
                depth += 1
            }
            if let value = Self.decodeVariant(Array(bytes[item.value])) { values[key] = value }
        }
    }

    /// A serialized variant: value bytes, 0, type string.
    static func decodeVariant(_ bytes: [UInt8]) -> Value? {
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
