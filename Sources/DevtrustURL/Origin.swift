/// The origin of a URL (RFC 6454): its scheme, host and port, written one way:
/// scheme and host in lower case (RFC 3986 section 6.2.2.1), the scheme's default
/// port left out (section 6.2.3), no user name or password. devtrust's one rule for
/// "the same server": clock records, registration matching, DPoP `htu` and nonces,
/// the native host's authorization endpoints and server base URLs all normalise
/// through it. Validation (what devtrust may send to, what a browser wrote) is the
/// callers' (`ServerURL`, `AuthorizationEndpoint`); this type only normalises.
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    /// Lower case.
    public let scheme: String
    /// Lower case; an IPv6 address in brackets (`[::1]`).
    public let host: String
    /// Nil for the scheme's default port, or when none is written.
    public let port: Int?

    /// The one normalisation, of parts already split: lower case, and a port equal to the scheme's
    /// default (443 for https, 80 for http) dropped. A scheme without a default port ("" for a server
    /// named without one) keeps every port.
    public init(scheme: some StringProtocol, host: some StringProtocol, port: Int?) {
        self.scheme = Self.normalizedScheme(scheme)
        self.host = host.lowercased()
        self.port = port == Self.defaultPort(of: self.scheme) ? nil : port
    }

    /// The origin of an authority's text (`[userinfo@]host[:port]`) under `scheme`: nil when the
    /// host is empty or the port is not a number from 0 to 65535 (an empty port is the default one).
    public init?(scheme: some StringProtocol, authority: some StringProtocol) {
        let parts = URLAuthority(authority)
        guard !parts.host.isEmpty else { return nil }
        var port: Int?
        if let portText = parts.port, !portText.isEmpty {
            guard portText.utf8.count <= 5, portText.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let number = Int(portText), number <= 65535 else { return nil }
            port = number
        }
        self.init(scheme: scheme, host: parts.host, port: port)
    }

    /// The origin of a URL's text (`scheme://authority...`, RFC 3986's split: `URLReference`);
    /// nil when it has no scheme and authority, or its authority has no origin (see above).
    public init?(_ url: String) {
        let reference = URLReference(url)
        guard let scheme = reference.scheme, let authority = reference.authority else { return nil }
        self.init(scheme: scheme, authority: authority)
    }

    /// `scheme://host[:port]`.
    public var description: String { scheme + "://" + authority }

    /// `host[:port]`: the server after its scheme.
    public var authority: String { host + (port.map { ":\($0)" } ?? "") }

    /// A scheme written one way: lower case.
    public static func normalizedScheme(_ scheme: some StringProtocol) -> String { scheme.lowercased() }

    /// The port a scheme's URLs use when they name none: 443 for https, 80 for http; nil for others.
    public static func defaultPort(of scheme: String) -> Int? {
        switch normalizedScheme(scheme) {
        case "https": 443
        case "http": 80
        default: nil
        }
    }

    /// The text records are kept under for a server's URL (`clock.json`, doctor's `clock.<origin>`
    /// checks): its origin, or, for text that has none ("not a url"), the text as it is, so that
    /// even a record of a broken URL is kept apart from every other.
    public static func text(of url: String) -> String {
        Origin(url)?.description ?? url
    }
}

/// An authority's parts as written (RFC 3986 section 3.2): user information up to the last
/// "@", the host (an IPv6 address with its brackets), and the port after the host's ":".
/// Nothing is normalised here (`Origin` does that); an authority that is malformed splits as
/// well as it can (an unclosed "[" leaves the whole rest as the host).
public struct URLAuthority: Sendable {
    public let userInfo: Substring?
    public let host: Substring
    /// What follows the host's ":" (possibly empty), or nil when there is no ":".
    public let port: Substring?
    /// Text after a bracketed host that is not ":port" (`[::1]x`): a malformed authority.
    public let afterBracketedHost: Substring?

    public init(_ authority: some StringProtocol) {
        var rest = Substring(authority)
        var userInfo: Substring?
        var port: Substring?
        var afterBracketedHost: Substring?
        if let at = rest.lastIndex(of: "@") {
            userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
        }
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = rest[...close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                port = after.dropFirst()
            } else if !after.isEmpty {
                afterBracketedHost = after
            }
        } else if !rest.hasPrefix("["), let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            port = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        self.userInfo = userInfo
        self.port = port
        self.afterBracketedHost = afterBracketedHost
    }
}
