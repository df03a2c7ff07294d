import DevtrustHTTP
import DevtrustURL

/// An authorization endpoint as the native messaging host compares it: its origin
/// (`Origin`: scheme and host in lower case, a default port left out) and its path,
/// written `https://host[:port]/path`. A navigation gets a device token only when its
/// URL, less the query, is exactly such an endpoint; nothing else of the URL is
/// normalised, so a path spelt another way is another endpoint.
package struct AuthorizationEndpoint: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Why a URL is not an endpoint the host serves (the `not_allowed` reply says it).
    package struct Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        package let description: String
    }

    package let origin: Origin
    /// As written, never empty ("/" for the root).
    package let path: String

    package var scheme: String { origin.scheme }
    /// Lower case; an IPv6 address in brackets.
    package var host: String { origin.host }
    /// Nil for the scheme's default port.
    package var port: Int? { origin.port }

    package var description: String {
        origin.description + path
    }

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.description < rhs.description }

    /// The endpoint a navigation to `url` goes to: its scheme, host, port and
    /// path (the query is the request's, and may be anything). Refused: anything
    /// but https (and http to a loopback address), a user name or password, a
    /// fragment, a port not written as a browser writes it, dot segments, and characters
    /// a browser would have percent-encoded.
    package init(navigation url: String) throws(Refusal) {
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw Refusal(description: "the URL has characters a browser percent-encodes (spaces, controls, non-ASCII)")
        }
        guard !url.utf8.contains(UInt8(ascii: "#")) else { throw Refusal(description: "the URL has a fragment") }
        let withoutQuery = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        try self.init(parsing: String(withoutQuery), whole: url)
    }

    /// An endpoint the device knows of (a registration's, a profile's, a discovery
    /// document's): the same rules, and no query.
    package init(endpoint: String) throws(Refusal) {
        guard endpoint.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), !endpoint.contains("#"), !endpoint.contains("?") else {
            throw Refusal(description: "\(endpoint) is not a plain http(s) URL without query or fragment")
        }
        try self.init(parsing: endpoint, whole: endpoint)
    }

    /// `text`: scheme://authority/path, no query or fragment.
    private init(parsing text: String, whole url: String) throws(Refusal) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            throw Refusal(description: "the URL is not an http(s) URL")
        }
        let scheme = Origin.normalizedScheme(text[..<colon])
        guard scheme == "https" || scheme == "http" else {
            throw Refusal(description: "the URL's scheme is \(scheme), not https")
        }
        let rest = text[text.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains("@") else { throw Refusal(description: "the URL carries a user name or password") }
        guard !authority.contains("\\") else { throw Refusal(description: "the URL has a backslash in its host") }
        let parts = URLAuthority(authority)
        if parts.host.hasPrefix("[") && !parts.host.hasSuffix("]") { throw Refusal(description: "the URL's IPv6 address is not closed") }
        if parts.afterBracketedHost != nil { throw Refusal(description: "the URL's host is malformed") }
        let hostPart = parts.host
        let portText = parts.port
        guard !hostPart.isEmpty else { throw Refusal(description: "the URL has no host") }
        let hostBytes = hostPart.hasPrefix("[") ? hostPart.utf8.dropFirst().dropLast() : hostPart.utf8[...]
        guard hostBytes.allSatisfy({ Self.isHostByte($0, bracketed: hostPart.hasPrefix("[")) }) else {
            throw Refusal(description: "the URL's host is malformed")
        }
        var port: Int?
        if let portText {
            // As a browser writes it: digits, no leading zero.
            guard !portText.isEmpty, portText.count <= 5, !portText.hasPrefix("0"), portText.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let number = Int(portText), (1...65535).contains(number) else {
                throw Refusal(description: "the URL's port is not written as a number from 1 to 65535")
            }
            port = number
        }
        let origin = Origin(scheme: scheme, host: hostPart, port: port)
        let host = origin.host
        if scheme == "http" && !TransportPolicy.isLoopback(host: host) {
            throw Refusal(description: "the URL is plain http to \(host), which is not a loopback address")
        }
        let path = rest[authorityEnd...].isEmpty ? "/" : String(rest[authorityEnd...])
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !segments.contains(where: Self.isDotSegment) else {
            throw Refusal(description: "the URL's path has dot segments")
        }
        self.origin = origin
        self.path = path
    }

    /// A name's letters, digits, "-", "." and "_"; an IPv6 address's hex digits, ":" and ".".
    private static func isHostByte(_ byte: UInt8, bracketed: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: "."):
            true
        case UInt8(ascii: ":"):
            bracketed
        case UInt8(ascii: "g")...UInt8(ascii: "z"), UInt8(ascii: "G")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            !bracketed
        default:
            false
        }
    }

    /// "." or "..", a dot also as `%2e` (which browsers resolve as one).
    private static func isDotSegment(_ segment: Substring) -> Bool {
        var rest = segment.lowercased()[...]
        var dots = 0
        while !rest.isEmpty {
            if rest.hasPrefix(".") {
                rest = rest.dropFirst()
            } else if rest.hasPrefix("%2e") {
                rest = rest.dropFirst(3)
            } else {
                return false
            }
            dots += 1
        }
        return dots == 1 || dots == 2
    }
}
