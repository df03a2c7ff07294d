import DevtrustErrors

/// DER (X.690) that does not decode: wrong tag, bad length, non-minimal form, truncation.
public struct DERError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// A strict reader of DER TLVs: definite minimal lengths only, no trailing data
/// unless asked for. Enough for the small structures devtrust reads (TSS2 key files).
public struct DERReader: Sendable {
    private let bytes: [UInt8]
    private var position: Int
    private let end: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        position = 0
        end = bytes.count
    }

    private init(bytes: [UInt8], range: Range<Int>) {
        self.bytes = bytes
        position = range.lowerBound
        end = range.upperBound
    }

    public var isAtEnd: Bool { position == end }

    public var nextTag: UInt8? { position < end ? bytes[position] : nil }

    /// Reads one element with `tag` and returns its content bytes.
    public mutating func read(tag: UInt8, _ what: String) throws(DERError) -> [UInt8] {
        Array(bytes[try readRange(tag: tag, what)])
    }

    /// Reads a constructed element (SEQUENCE, [n] EXPLICIT) and returns a reader over its content.
    public mutating func readConstructed(tag: UInt8, _ what: String) throws(DERError) -> DERReader {
        DERReader(bytes: bytes, range: try readRange(tag: tag, what))
    }

    /// A non-negative INTEGER that fits in 64 bits, minimally encoded.
    public mutating func readUnsignedInteger(_ what: String) throws(DERError) -> UInt64 {
        let content = try read(tag: 0x02, what)
        guard let first = content.first else { throw DERError("\(what): empty INTEGER") }
        guard first & 0x80 == 0 else { throw DERError("\(what): negative INTEGER") }
        if content.count > 1 && first == 0 && content[1] & 0x80 == 0 { throw DERError("\(what): INTEGER not minimally encoded") }
        let significant = content.drop(while: { $0 == 0 })
        guard significant.count <= 8 else { throw DERError("\(what): INTEGER too large") }
        return significant.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// DER says TRUE is FF, but OpenSSL's ASN1_BOOLEAN (and so tpm2-openssl's
    /// key files) writes 01: any non-zero byte is TRUE, as BER has it.
    public mutating func readBoolean(_ what: String) throws(DERError) -> Bool {
        let content = try read(tag: 0x01, what)
        guard content.count == 1 else { throw DERError("\(what): a BOOLEAN is one byte") }
        return content[0] != 0
    }

    public func expectEnd(_ what: String) throws(DERError) {
        guard isAtEnd else { throw DERError("\(what): \(end - position) unexpected byte(s) at the end") }
    }

    private mutating func readRange(tag: UInt8, _ what: String) throws(DERError) -> Range<Int> {
        guard position < end else { throw DERError("\(what): missing") }
        guard bytes[position] == tag else {
            throw DERError("\(what): expected tag 0x\(Hex.encode([tag])), found 0x\(Hex.encode([bytes[position]]))")
        }
        position += 1
        guard position < end else { throw DERError("\(what): truncated length") }
        let first = bytes[position]
        position += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count >= 1 && count <= 3 else { throw DERError("\(what): unsupported length form") }
            guard position + count <= end else { throw DERError("\(what): truncated length") }
            guard bytes[position] != 0 else { throw DERError("\(what): length not minimally encoded") }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[position])
                position += 1
            }
            guard length >= 0x80 else { throw DERError("\(what): length not minimally encoded") }
        }
        guard length <= end - position else { throw DERError("\(what): length \(length) runs past the end") }
        let range = position..<(position + length)
        position += length
        return range
    }
}

/// Writes DER TLVs.
public enum DERWriter {
    public static func element(tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    public static func unsignedInteger(_ value: UInt64) -> [UInt8] {
        element(tag: 0x02, unsignedIntegerContent(value))
    }

    public static func boolean(_ value: Bool) -> [UInt8] {
        element(tag: 0x01, [value ? 0xFF : 0x00])
    }

    /// The encoding of `value` in one buffer reserved to its size, which never
    /// moves: each content is copied once, into it. What writes a private key,
    /// whose scalar must leave no copy behind (the caller zeroizes the result).
    public static func encode(_ value: DERValue) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(value.encodedCount)
        value.write(to: &out)
        return out
    }

    static func unsignedIntegerContent(_ value: UInt64) -> [UInt8] {
        var bytes = withUnsafeBytes(of: value.bigEndian, Array.init).drop(while: { $0 == 0 })
        if bytes.isEmpty || bytes.first! & 0x80 != 0 { bytes.insert(0, at: bytes.startIndex) }
        return Array(bytes)
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        let bytes = withUnsafeBytes(of: UInt32(count).bigEndian, Array.init).drop(while: { $0 == 0 })
        return [0x80 | UInt8(bytes.count)] + bytes
    }
}

/// A DER element to be written by `DERWriter.encode`: primitive content held
/// by reference (a secret is not copied until it is written), or elements.
public indirect enum DERValue: Sendable {
    case primitive(tag: UInt8, [UInt8])
    case constructed(tag: UInt8, [DERValue])

    public static func unsignedInteger(_ value: UInt64) -> DERValue {
        .primitive(tag: 0x02, DERWriter.unsignedIntegerContent(value))
    }

    var contentCount: Int {
        switch self {
        case let .primitive(_, content): return content.count
        case let .constructed(_, elements): return elements.reduce(0) { $0 + $1.encodedCount }
        }
    }

    var encodedCount: Int { 1 + DERWriter.length(contentCount).count + contentCount }

    func write(to out: inout [UInt8]) {
        switch self {
        case let .primitive(tag, content):
            out.append(tag)
            out += DERWriter.length(content.count)
            out += content
        case let .constructed(tag, elements):
            out.append(tag)
            out += DERWriter.length(contentCount)
            for element in elements { element.write(to: &out) }
        }
    }
}

/// PEM armour: `-----BEGIN LABEL-----`, base64 in 64-column lines, `-----END LABEL-----`.
public enum PEM {
    public static func encode(_ der: [UInt8], label: String) -> String {
        String(decoding: encode(bytes: der, label: label), as: UTF8.self)
    }

    /// The same as bytes, in one buffer that never moves and no String: what
    /// writes a private key (the caller zeroizes the result).
    public static func encode(bytes der: [UInt8], label: String) -> [UInt8] {
        let begin = Array("-----BEGIN \(label)-----\n".utf8), end = Array("-----END \(label)-----\n".utf8)
        let body = (der.count + 2) / 3 * 4
        var out = [UInt8]()
        out.reserveCapacity(begin.count + body + (body + 63) / 64 + end.count)
        out += begin
        // 48 bytes make a line of 64 characters.
        var start = 0
        while start < der.count {
            Base64.append(der[start..<min(start + 48, der.count)], to: &out)
            out.append(0x0A)
            start += 48
        }
        out += end
        return out
    }

    /// The DER inside the first `label` block; nil when there is none or it is not base64.
    public static func decode(_ text: String, label: String) -> [UInt8]? {
        decode(Array(text.utf8), label: label)
    }

    public static func decode(_ bytes: [UInt8], label: String) -> [UInt8]? {
        try? block(bytes, label: label)
    }

    /// The labels of the BEGIN lines, in order (a line that is only `-----BEGIN X-----`,
    /// as `block` reads them): which blocks a file holds, without reading their bodies.
    public static func labels(_ bytes: [UInt8]) -> [String] {
        let prefix = Array("-----BEGIN ".utf8), suffix = Array("-----".utf8)
        return bytes.split(separator: 0x0A, omittingEmptySubsequences: true).compactMap { line in
            let content = trimmed(line)
            guard content.count >= prefix.count + suffix.count, content.starts(with: prefix), content.reversed().starts(with: suffix.reversed()) else {
                return nil
            }
            return String(decoding: content.dropFirst(prefix.count).dropLast(suffix.count), as: UTF8.self)
        }
    }

    /// The DER inside the first `label` block, nil when there is none; throws
    /// when the block has no END line or its body is not base64. Works on
    /// bytes: this runs on every `devtrust token`, and Character-level String
    /// processing costs more than the rest of the parse.
    public static func block(_ bytes: [UInt8], label: String) throws(PEMError) -> [UInt8]? {
        let begin = Array("-----BEGIN \(label)-----".utf8)
        let end = Array("-----END \(label)-----".utf8)
        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: true)
        guard let beginLine = lines.firstIndex(where: { trimmed($0).elementsEqual(begin) }) else { return nil }
        // The body of a private key: one buffer that never moves, wiped before returning.
        var body = [UInt8]()
        body.reserveCapacity(bytes.count)
        defer { body.zeroize() }
        for line in lines[(beginLine + 1)...] {
            let content = trimmed(line)
            if content.elementsEqual(end) {
                do {
                    return try Base64.decode(bytes: body, padding: .required)
                } catch {
                    // Which line, not which character: the text is a key's.
                    let offset = if case let .invalidCharacter(_, offset) = error.reason { offset } else { body.count - 1 }
                    var lineEnd = 0
                    let line = lines[(beginLine + 1)...].firstIndex { lineEnd += trimmed($0).count; return offset < lineEnd } ?? beginLine + 1
                    // Counted in the file's lines, blank ones too.
                    let newlines = { (slice: ArraySlice<UInt8>) in bytes[..<slice.startIndex].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) } }
                    throw PEMError(label: label, reason: .notBase64(line: newlines(lines[line]) - newlines(lines[beginLine])))
                }
            }
            body += content
        }
        throw PEMError(label: label, reason: .noEndLine)
    }

    private static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var line = line
        while let first = line.first, first == 0x20 || first == 0x09 || first == 0x0D { line.removeFirst() }
        while let last = line.last, last == 0x20 || last == 0x09 || last == 0x0D { line.removeLast() }
        return line
    }
}

/// A PEM block that is there but cannot be read.
public struct PEMError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// Line `line` of the body (1 is the one after BEGIN) is not base64 (or the padding or length is wrong).
        case notBase64(line: Int)
        case noEndLine
    }

    public let label: String
    public let reason: Reason

    public init(label: String, reason: Reason) {
        self.label = label
        self.reason = reason
    }

    public var description: String {
        switch reason {
        case let .notBase64(line): return "the -----BEGIN \(label)----- block is not base64 (line \(line) of its body)"
        case .noEndLine: return "the -----BEGIN \(label)----- block has no -----END \(label)----- line"
        }
    }
}

extension DERError: ClassifiedError {
    /// DER that does not parse. A failure (exit 1), in its own words.
    public var classification: ErrorClassification { ErrorClassification(.failure, summary: description) }
}
