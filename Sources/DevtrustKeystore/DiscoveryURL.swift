import DevtrustURL

/// OpenID Connect discovery URLs, which sign-ins are made with and stored under.
public enum DiscoveryURL {
    /// The issuer whose configuration a discovery URL names: OpenID Connect's
    /// `{issuer}/.well-known/openid-configuration` (and RFC 8414's
    /// `{origin}/.well-known/oauth-authorization-server{path}`, either name in
    /// either place); nil for any other URL. The issuer keeps the URL's spelling.
    public static func issuer(of url: String) -> String? {
        let reference = URLReference(url)
        guard let scheme = reference.scheme, let authority = reference.authority, reference.query == nil, reference.fragment == nil else { return nil }
        let origin = scheme + "://" + authority
        let path = Substring(reference.path)
        for name in ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"] {
            if path.hasSuffix(name) { return origin + path.dropLast(name.count) }
            if path.hasPrefix(name + "/") { return origin + path.dropFirst(name.count) }
        }
        return nil
    }
}
