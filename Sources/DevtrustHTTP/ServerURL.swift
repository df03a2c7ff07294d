/// A server base URL that devtrust may talk to: https anywhere, plain http
/// only to a loopback address (tests and local demos).
public struct ServerURL: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let scheme: String
    /// Lowercased host, with brackets for IPv6 (`[::1]`).
    public let host: String
    public let port: Int?
    /// The path without a trailing slash ("" for the root).
    public let path: String

    public init(_ text: String) throws(HTTPError) {
        guard let schemeEnd = text.firstIndex(of: ":"), text[schemeEnd...].hasPrefix("://") else {
            throw .invalidURL(text, reason: "it needs a scheme, e.g. https://")
        }
        scheme = text[..<schemeEnd].lowercased()
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
        var hostPart = Substring(authority)
        var port: Int?
        if hostPart.hasPrefix("[") {
            guard let close = hostPart.firstIndex(of: "]") else { throw .invalidURL(text, reason: "unterminated IPv6 address") }
            let after = hostPart[hostPart.index(after: close)...]
            if after.hasPrefix(":") { port = Int(after.dropFirst()) ?? -1 } else if !after.isEmpty { throw .invalidURL(text, reason: "bad port") }
            hostPart = hostPart[...close]
        } else if let colon = hostPart.lastIndex(of: ":") {
            port = Int(hostPart[hostPart.index(after: colon)...]) ?? -1
            hostPart = hostPart[..<colon]
        }
        if let port, !(1...65535).contains(port) { throw .invalidURL(text, reason: "bad port") }
        guard !hostPart.isEmpty, hostPart.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw .invalidURL(text, reason: "no valid host name")
        }
        host = hostPart.lowercased()
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

    /// scheme://host[:port], for same-origin checks (the default port counts as absent).
    public var origin: String {
        let defaultPort = scheme == "https" ? 443 : 80
        return scheme + "://" + host + (port.map { $0 == defaultPort ? "" : ":\($0)" } ?? "")
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
