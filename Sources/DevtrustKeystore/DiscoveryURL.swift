/// OpenID Connect discovery URLs, which sign-ins are made with and stored under.
public enum DiscoveryURL {
    /// The issuer whose configuration a discovery URL names: OpenID Connect's
    /// `{issuer}/.well-known/openid-configuration` (and RFC 8414's
    /// `{origin}/.well-known/oauth-authorization-server{path}`, either name in
    /// either place); nil for any other URL.
    public static func issuer(of url: String) -> String? {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://"), !url.contains("?"), !url.contains("#") else { return nil }
        let afterScheme = url[url.index(colon, offsetBy: 3)...]
        let pathStart = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let origin = String(url[..<pathStart])
        let path = Substring(afterScheme[pathStart...])
        for name in ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"] {
            if path.hasSuffix(name) { return origin + path.dropLast(name.count) }
            if path.hasPrefix(name + "/") { return origin + path.dropFirst(name.count) }
        }
        return nil
    }
}
