/// A browser extension as a browser names it to a native messaging host: a
/// Chromium extension ID (32 letters a to p, derived from the extension's
/// public key), or a Firefox add-on ID (`name@domain`, or a GUID in braces).
public enum BrowserExtensionID: Hashable, Sendable, CustomStringConvertible {
    case chromium(String)
    case firefox(String)

    /// devtrust's own extension (browser/manifest.json: its `key` fixes the Chromium ID,
    /// `browser_specific_settings.gecko.id` the Firefox one).
    public static let devtrust: [BrowserExtensionID] = [.chromium("gmoaoppoddchekmljfbfbbcndbaiflmf"), .firefox("host@devtrust.dev")]

    public static let expectedForm = "must be a Chromium extension ID (32 letters a to p) or a Firefox add-on ID (name@domain, or {GUID})"

    public init?(_ text: String) {
        if Self.isChromiumID(text) {
            self = .chromium(text)
        } else if Self.isFirefoxID(text) {
            self = .firefox(text)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case let .chromium(id), let .firefox(id): id
        }
    }

    /// The extension's origin as Chromium passes it to the host and lists it in `allowed_origins`.
    public static func chromiumOrigin(_ id: String) -> String { "chrome-extension://\(id)/" }

    static func isChromiumID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "p")).contains($0) }
    }

    /// Firefox's own rule for add-on IDs: at most 80 characters, a GUID in braces or `[a-zA-Z0-9-._]*@[a-zA-Z0-9-._]+`.
    static func isFirefoxID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 80 else { return false }
        if bytes.first == UInt8(ascii: "{") {
            let guid = bytes.dropFirst().dropLast()
            guard bytes.last == UInt8(ascii: "}"), guid.count == 36 else { return false }
            return guid.enumerated().allSatisfy { offset, byte in
                [8, 13, 18, 23].contains(offset) ? byte == UInt8(ascii: "-") : isHexDigit(byte)
            }
        }
        guard let at = bytes.firstIndex(of: UInt8(ascii: "@")), at < bytes.count - 1 else { return false }
        return bytes.enumerated().allSatisfy { offset, byte in offset == at || isNameByte(byte) }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }
}
