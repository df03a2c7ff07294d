/// Compact JSON output: no spaces, members in order, `/` not escaped,
/// non-ASCII written as UTF-8; only `"`, `\` and control characters escaped.
public enum JSONWriter {
    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(256)
        write(value, to: &out)
        return out
    }

    public static func string(_ value: JSONValue) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    /// Indented output for people (`--json` results, keystore files), still with ordered members.
    public static func pretty(_ value: JSONValue) -> String {
        var out = [UInt8]()
        writePretty(value, indent: 0, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    public static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case let .bool(flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case let .number(text): out.append(contentsOf: text.utf8)
        case let .string(text): writeString(text, to: &out)
        case let .array(elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(object):
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func writePretty(_ value: JSONValue, indent: Int, to out: inout [UInt8]) {
        func newline(_ level: Int) {
            out.append(0x0A)
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: level * 2))
        }
        switch value {
        case let .array(elements) where !elements.isEmpty:
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                writePretty(element, indent: indent + 1, to: &out)
            }
            newline(indent)
            out.append(UInt8(ascii: "]"))
        case let .object(object) where !object.isEmpty:
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                writeString(member.key, to: &out)
                out.append(contentsOf: ": ".utf8)
                writePretty(member.value, indent: indent + 1, to: &out)
            }
            newline(indent)
            out.append(UInt8(ascii: "}"))
        default:
            write(value, to: &out)
        }
    }

    private static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x22: out.append(contentsOf: "\\\"".utf8)
            case 0x5C: out.append(contentsOf: "\\\\".utf8)
            case 0x0A: out.append(contentsOf: "\\n".utf8)
            case 0x0D: out.append(contentsOf: "\\r".utf8)
            case 0x09: out.append(contentsOf: "\\t".utf8)
            case 0x08: out.append(contentsOf: "\\b".utf8)
            case 0x0C: out.append(contentsOf: "\\f".utf8)
            // Control characters, and those a terminal acts on or that reorder text (C1
            // controls, bidirectional marks, line separators), as \u escapes: JSON that
            // reaches a terminal cannot drive it, and stays JSON.
            case 0x00..<0x20, 0x7F...0x9F, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                out.append(contentsOf: "\\u".utf8)
                let hex = Hex.encode([UInt8(scalar.value >> 8), UInt8(scalar.value & 0xFF)])
                out.append(contentsOf: hex.utf8)
            case 0..<0x80:
                out.append(UInt8(scalar.value))
            default:
                out.append(contentsOf: String(scalar).utf8)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
