import CCurl
import Glibc

/// What the transport allows, decided for every request (not only for the URLs
/// a user types): https anywhere, plain http only to loopback, never with a
/// user name or password in the URL; loopback never through a proxy.
public enum TransportPolicy {
    /// The hosts that are never sent through a proxy, whatever NO_PROXY says.
    public static let loopbackNoProxy = ["localhost", "127.0.0.1", "::1"]

    /// `localhost`, an IPv4 address in 127.0.0.0/8 in dotted-decimal form
    /// (no leading zeros: "127.0.0.08" would be looked up in DNS), or `::1`
    /// in any spelling, with or without brackets. Nothing that needs a DNS
    /// answer (`localhost.`, `127.0.0.1.example`) is loopback.
    public static func isLoopback(host: String) -> Bool {
        let host = host.lowercased()
        if host == "localhost" { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 {
            return withUnsafeBytes(of: &ipv4) { $0[0] } == 127
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &ipv6) == 1 else { return false }
        return withUnsafeBytes(of: &ipv6) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
    }

    /// Checks a request's URL as libcurl parsed it (scheme and host as curl
    /// will use them; whether it holds a user name or password).
    public static func check(url: String, scheme: String, host: String, hasUserInfo: Bool) throws(HTTPError) {
        let scheme = scheme.lowercased()
        guard scheme == "https" || scheme == "http" else {
            throw .invalidURL(url, reason: "only https:// URLs are supported")
        }
        guard !hasUserInfo else {
            throw .invalidURL(url, reason: "user names or passwords in the URL are not supported")
        }
        if scheme == "http" && !isLoopback(host: host) {
            throw .insecureURL(url)
        }
    }

    /// CURLOPT_NOPROXY: the loopback names, then the user's NO_PROXY entries
    /// (comma- or space-separated, as curl reads them). `*` (no proxy for any
    /// host) only works as the whole list, so it stays alone.
    public static func noProxyList(userEntries: String?) -> String {
        let user = (userEntries ?? "").split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init)
        if user.contains("*") { return "*" }
        var entries = loopbackNoProxy
        for entry in user where !entries.contains(where: { $0.lowercased() == entry.lowercased() }) {
            entries.append(entry)
        }
        return entries.joined(separator: ",")
    }

    /// Whether a libcurl of this version (0xXXYYZZ) restricts protocols with
    /// CURLOPT_PROTOCOLS_STR (7.85.0 and later) or the older CURLOPT_PROTOCOLS.
    public static func restrictsProtocolsByName(libcurlVersion: UInt32) -> Bool {
        devtrust_curl_protocols_option_is_string(libcurlVersion) != 0
    }

    /// Whether devtrust runs with a libcurl of this version (7.63.0 and later: its URL parser).
    public static func supports(libcurlVersion: UInt32) -> Bool {
        devtrust_curl_version_is_supported(libcurlVersion) != 0
    }

    /// A URL for messages: without user and password, query and fragment,
    /// which may carry codes and tokens (a redirect's Location, say).
    /// "https://u:p@host/cb?code=x#t=y" is "https://[redacted]@host/cb?[redacted]#[redacted]".
    /// Whatever form the URL takes (scheme-relative "//u:p@host", "https:u:p@host"), all
    /// before the last "@" ahead of the query goes, but the scheme: a message may say too
    /// little, never a password.
    /// - Parameter keepingQuery: only the user and password go (for the URL of a request devtrust made).
    public static func redacted(_ url: String, keepingQuery: Bool = false) -> String {
        var result = ""
        var rest = Substring(url)
        let beforeQuery = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) ?? rest.endIndex
        if let at = rest[..<beforeQuery].lastIndex(of: "@") {
            if let colon = rest.firstIndex(of: ":"), colon < at, rest[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }) {
                result += rest[...colon]
                if rest[rest.index(after: colon)...].hasPrefix("//") { result += "//" }
            } else if rest.hasPrefix("//") {
                result += "//"
            }
            result += "[redacted]@"
            rest = rest[rest.index(after: at)...]
        }
        if keepingQuery { return result + rest }
        let pathEnd = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) ?? rest.endIndex
        result += rest[..<pathEnd]
        let tail = rest[pathEnd...]
        if let query = tail.firstIndex(of: "?"), tail.firstIndex(of: "#").map({ query < $0 }) ?? true { result += "?[redacted]" }
        if tail.contains("#") { result += "#[redacted]" }
        return result
    }
}
