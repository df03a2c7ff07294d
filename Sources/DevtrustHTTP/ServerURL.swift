import DevtrustURL

/// A server base URL that devtrust may talk to: https anywhere, plain http
/// only to a loopback address (tests and local demos). What is refused is this
/// type's; how the scheme, host and port are written is `Origin`'s.
public struct ServerURL: Equatable, Hashable, Sendable, CustomStringConvertible {
    /// scheme://host[:port], for same-origin checks (the default port counts as absent).
    public let origin: Origin
    /// The port as written (443 stays in `description` when given; `origin` leaves it out).
    public let port: Int?
    /// The path without a trailing slash ("" for the root).
    public let path: String

    public var scheme: String { origin.scheme }
    /// Lowercased host, with brackets for IPv6 (`[::1]`).
    public var host: String { origin.host }

    public init(_ text: String) throws(HTTPError) {
        guard let schemeEnd = text.firstIndex(of: ":"), text[schemeEnd...].hasPrefix("://") else {
            throw .invalidURL(text, reason: "it needs a scheme, e.g. https://")
        }
        let scheme = Origin.normalizedScheme(text[..<schemeEnd])
        guard scheme == "https" || scheme == "http" else {
            throw .invalidURL(text, reason: "only https:// URLs are supported")
        }
        let rest = text[text.index(schemeEnd, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains("@") else { throw .invalidURL(text, reason: "user names or passwords in the URL are not supported") }
        guard !rest[authorityEnd...].contains("?"), !rest[authorityEnd...].contains("#") else {
            throw .invalidURL(text, reason: "a server base URL has no query or fragment")
        }
        let parts = URLAuthority(authority)
        if parts.host.hasPrefix("[") && !parts.host.hasSuffix("]") { throw .invalidURL(text, reason: "unterminated IPv6 address") }
        if parts.afterBracketedHost != nil { throw .invalidURL(text, reason: "bad port") }
        let port = parts.port.map { Int($0) ?? -1 }
        if let port, !(1...65535).contains(port) { throw .invalidURL(text, reason: "bad port") }
        guard !parts.host.isEmpty, parts.host.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw .invalidURL(text, reason: "no valid host name")
        }
        origin = Origin(scheme: scheme, host: parts.host, port: port)
        self.port = port
        var path = String(rest[authorityEnd...])
        while path.hasSuffix("/") { path.removeLast() }
        guard path.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\\" }) else {
            throw .invalidURL(text, reason: "the path must be URL-encoded ASCII")
        }
        self.path = path
        if scheme == "http" && !isLoopback {
            throw .insecureURL(text)
        }
    }

    /// 127.0.0.0/8, ::1 and localhost: the only hosts plain http may reach
    /// (the transport checks every request again: `TransportPolicy`).
    public var isLoopback: Bool { TransportPolicy.isLoopback(host: host) }

    /// The base URL, normalised: `https://host[:port]/path` without a trailing slash.
    public var description: String {
        "\(scheme)://\(host)" + (port.map { ":\($0)" } ?? "") + path
    }

    /// The URL of `relative` (which starts with "/") below this base.
    public func appending(_ relative: String) -> String {
        description + relative
    }
}
