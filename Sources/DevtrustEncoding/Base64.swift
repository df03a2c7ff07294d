/// Base64 (RFC 4648 section 4) and base64url (section 5), strict on input.
///
/// Decoding rejects characters of the other alphabet, whitespace, misplaced or
/// wrong padding and non-zero trailing bits, so each byte string has exactly
/// one accepted text form per padding rule.
public enum Base64Alphabet: Sendable {
    case standard
    case url

    fileprivate var table: [UInt8] {
        switch self {
        case .standard: return Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        case .url: return Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        }
    }
}

public enum Base64Padding: Sendable {
    /// `=` padding must be present when the length is not a multiple of 4.
    case required
    /// Padded and unpadded forms are both accepted.
    case optional
    /// No `=` may appear (JWS compact serialization).
    case forbidden
}

public struct Base64DecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        case invalidCharacter(Character, offset: Int)
        case invalidLength
        case invalidPadding
        case nonZeroTrailingBits
    }

    public let reason: Reason

    public init(reason: Reason) { self.reason = reason }

    public var description: String {
        switch reason {
        case let .invalidCharacter(character, offset):
            let shown = character.unicodeScalars.allSatisfy { $0.value >= 0x21 && $0.value < 0x7F }
                ? "'\(character)'" : "U+" + String(character.unicodeScalars.first!.value, radix: 16, uppercase: true)
            return "character \(shown) at offset \(offset) is not in the alphabet"
        case .invalidLength: return "the length is not valid for base64"
        case .invalidPadding: return "the '=' padding is wrong"
        case .nonZeroTrailingBits: return "the last character has non-zero unused bits (not a canonical encoding)"
        }
    }
}

public enum Base64 {
    public static func encode(_ bytes: some Collection<UInt8>, alphabet: Base64Alphabet = .standard, padded: Bool = true) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        append(bytes, alphabet: alphabet, padded: padded, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the encoding to `out`, which the caller reserved (a PEM
    /// private key's buffer: nothing else holds the text).
    public static func append(_ bytes: some Collection<UInt8>, alphabet: Base64Alphabet = .standard, padded: Bool = true, to out: inout [UInt8]) {
        let table = alphabet.table
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = iterator.next()
            out.append(table[Int(b0 >> 2)])
            out.append(table[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 {
                out.append(table[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)])
            } else if padded {
                out.append(UInt8(ascii: "="))
            }
            if let b2 {
                out.append(table[Int(b2 & 0x3F)])
            } else if padded {
                out.append(UInt8(ascii: "="))
            }
        }
    }

    public static func decode(_ text: some StringProtocol, alphabet: Base64Alphabet = .standard, padding: Base64Padding = .optional) throws(Base64DecodingError) -> [UInt8] {
        var input = Array(text.utf8)
        defer { input.zeroize() }
        return try decode(bytes: input, alphabet: alphabet, padding: padding)
    }

    /// The same over bytes, leaving no copy of them: what decodes a PEM private key.
    /// On failure the partial output is wiped.
    public static func decode(bytes input: [UInt8], alphabet: Base64Alphabet = .standard, padding: Base64Padding = .optional) throws(Base64DecodingError) -> [UInt8] {
        var reverse = [UInt8](repeating: 0xFF, count: 256)
        for (index, symbol) in alphabet.table.enumerated() { reverse[Int(symbol)] = UInt8(index) }

        var dataLength = input.count
        while dataLength > 0 && input[dataLength - 1] == UInt8(ascii: "=") { dataLength -= 1 }
        let padCount = input.count - dataLength
        if padCount > 0 {
            if padding == .forbidden || input.count % 4 != 0 || padCount > 2 || dataLength % 4 + padCount != 4 {
                throw Base64DecodingError(reason: .invalidPadding)
            }
        } else if dataLength % 4 != 0 && padding == .required {
            throw Base64DecodingError(reason: .invalidPadding)
        }
        if dataLength % 4 == 1 { throw Base64DecodingError(reason: .invalidLength) }

        // Reserved in full, so that the output never moves (and leaves no copy behind).
        var out = [UInt8]()
        out.reserveCapacity(dataLength * 3 / 4 + 1)
        var accumulator: UInt32 = 0
        var bits = 0
        for offset in 0..<dataLength {
            let value = reverse[Int(input[offset])]
            if value == 0xFF {
                out.zeroize()
                throw Base64DecodingError(reason: .invalidCharacter(character(atUTF8Offset: offset, in: input), offset: offset))
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        if accumulator != 0 {
            out.zeroize()
            throw Base64DecodingError(reason: .nonZeroTrailingBits)
        }
        return out
    }

    private static func character(atUTF8Offset offset: Int, in bytes: [UInt8]) -> Character {
        let tail = String(decoding: bytes[offset...], as: UTF8.self)
        return tail.first ?? "?"
    }
}

/// base64url without padding, as JOSE uses it everywhere.
public enum Base64URL {
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64.encode(bytes, alphabet: .url, padded: false)
    }

    public static func decode(_ text: some StringProtocol, padding: Base64Padding = .forbidden) throws(Base64DecodingError) -> [UInt8] {
        try Base64.decode(text, alphabet: .url, padding: padding)
    }
}
