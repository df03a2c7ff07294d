/// application/x-www-form-urlencoded and URL query encoding (RFC 3986 unreserved kept).
public enum FormEncoding {
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    public static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(Character(Unicode.Scalar(byte)))
            default:
                let hex = Array("0123456789ABCDEF")
                out.append("%")
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }

    /// The query parameters of a URL (or a bare query string), percent-decoded.
    public static func queryParameters(_ text: String) -> [String: String] {
        let afterQuestion = text.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let query = (afterQuestion.count == 2 ? afterQuestion[1] : afterQuestion[0]).split(separator: "#").first ?? ""
        var parameters = [String: String]()
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = unescape(parts[0]), let value = unescape(parts[1]) else { continue }
            parameters[name] = value
        }
        return parameters
    }

    public static func unescape(_ text: Substring) -> String? {
        var bytes = [UInt8]()
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                      let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
