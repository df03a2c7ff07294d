import DevtrustEncoding
import DevtrustKeys

/// RFC 9562 version 4 UUIDs from a CSPRNG, lowercase: every token's `jti`.
public enum UUIDv4 {
    public static func make(using random: some RandomSource) throws -> String {
        var bytes = try random.bytes(count: 16)
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Hex.encode(bytes)
        let groups = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            hex.utf8.dropFirst(range.lowerBound).prefix(range.count)
        }
        return groups.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "-")
    }
}
