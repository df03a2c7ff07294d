/// A URI reference split into its five parts (RFC 3986, appendix B), and
/// resolved against a base URI (section 5.2). Servers give links as absolute
/// URLs, absolute paths (`/oauth2/authn`), relative paths or network paths
/// (`//host/path`); each means the URL that resolution gives, and only that
/// URL is checked (same origin, https) and used.
public struct URLReference: Equatable, Sendable {
    public var scheme: String?
    public var authority: String?
    public var path: String
    public var query: String?
    public var fragment: String?

    public init(scheme: String? = nil, authority: String? = nil, path: String, query: String? = nil, fragment: String? = nil) {
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.query = query
        self.fragment = fragment
    }

    /// Splits as the regular expression of appendix B does: every string is a reference.
    public init(_ text: String) {
        var rest = Substring(text)
        if let fragmentStart = rest.firstIndex(of: "#") {
            fragment = String(rest[rest.index(after: fragmentStart)...])
            rest = rest[..<fragmentStart]
        }
        if let queryStart = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: queryStart)...])
            rest = rest[..<queryStart]
        }
        // A scheme is what comes before the first ":", if no "/" comes earlier and it is not empty.
        if let colon = rest.firstIndex(of: ":"), colon != rest.startIndex, !rest[..<colon].contains("/") {
            scheme = String(rest[..<colon])
            rest = rest[rest.index(after: colon)...]
        }
        if rest.hasPrefix("//") {
            let afterSlashes = rest.index(rest.startIndex, offsetBy: 2)
            let authorityEnd = rest[afterSlashes...].firstIndex(of: "/") ?? rest.endIndex
            authority = String(rest[afterSlashes..<authorityEnd])
            rest = rest[authorityEnd...]
        }
        path = String(rest)
    }

    /// Section 5.3: the parts joined again.
    public var text: String {
        var result = ""
        if let scheme { result += scheme + ":" }
        if let authority { result += "//" + authority }
        result += path
        if let query { result += "?" + query }
        if let fragment { result += "#" + fragment }
        return result
    }

    /// Section 5.2.2 (strict): the target URI of `self` seen from `base`.
    public func resolved(against base: URLReference) -> URLReference {
        if scheme != nil {
            return URLReference(scheme: scheme, authority: authority, path: Self.removingDotSegments(path), query: query, fragment: fragment)
        }
        var target = URLReference(scheme: base.scheme, path: "", fragment: fragment)
        if authority != nil {
            target.authority = authority
            target.path = Self.removingDotSegments(path)
            target.query = query
            return target
        }
        target.authority = base.authority
        if path.isEmpty {
            target.path = base.path
            target.query = query ?? base.query
        } else {
            target.query = query
            if path.hasPrefix("/") {
                target.path = Self.removingDotSegments(path)
            } else {
                // Section 5.2.3: merge with the base's path up to its last "/".
                let merged: String
                if base.authority != nil && base.path.isEmpty {
                    merged = "/" + path
                } else if let lastSlash = base.path.lastIndex(of: "/") {
                    merged = base.path[...lastSlash] + path
                } else {
                    merged = path
                }
                target.path = Self.removingDotSegments(merged)
            }
        }
        return target
    }

    /// Resolves `reference` against the absolute URL `base` (the URL of the answer that carried it).
    public static func resolve(_ reference: String, against base: String) -> String {
        URLReference(reference).resolved(against: URLReference(base)).text
    }

    /// Section 5.2.4.
    static func removingDotSegments(_ path: String) -> String {
        var input = Substring(path)
        var output = [Substring]()
        while !input.isEmpty {
            if input.hasPrefix("../") {
                input = input.dropFirst(3)
            } else if input.hasPrefix("./") {
                input = input.dropFirst(2)
            } else if input.hasPrefix("/./") {
                input = input.dropFirst(2)
            } else if input == "/." {
                input = "/"
            } else if input.hasPrefix("/../") {
                input = input.dropFirst(3)
                if !output.isEmpty { output.removeLast() }
            } else if input == "/.." {
                input = "/"
                if !output.isEmpty { output.removeLast() }
            } else if input == "." || input == ".." {
                input = ""
            } else {
                // The first segment, with its leading "/" if any, up to the next "/".
                let searchStart = input.hasPrefix("/") ? input.index(after: input.startIndex) : input.startIndex
                let end = input[searchStart...].firstIndex(of: "/") ?? input.endIndex
                output.append(input[..<end])
                input = input[end...]
            }
        }
        return output.joined()
    }
}
