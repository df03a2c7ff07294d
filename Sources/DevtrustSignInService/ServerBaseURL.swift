import DevtrustErrors
import DevtrustURL

/// `--server` takes a server's base URL; an endpoint's URL pasted from the
/// server's documentation or a browser is refused with the base to use, so
/// that no request goes to `…/flow/execute/api/server/v1/flow/execute`.
package enum ServerBaseURL {
    /// Where the APIs devtrust calls begin below a base URL.
    package static let apiRoots = ["/api/server/v1", "/oauth2"]

    package static func check(_ text: String, option: String = "--server", command: String) throws(UsageError) {
        guard let base = base(of: text) else { return }
        throw UsageError("\(option) \(text) is an API endpoint, not the server's base URL: use \(option) \(base)", command: command)
    }

    /// The base URL before an API root in `text`'s path, or nil when its path has none.
    package static func base(of text: String) -> String? {
        let reference = URLReference(text)
        guard let scheme = reference.scheme, let authority = reference.authority else { return nil }
        let path = Substring(reference.path)
        var index = path.startIndex
        while index < path.endIndex {
            let rest = path[index...]
            for root in apiRoots where rest.hasPrefix(root) {
                let after = rest.dropFirst(root.count)
                if after.isEmpty || after.hasPrefix("/") {
                    return scheme + "://" + authority + path[..<index]
                }
            }
            guard let next = path[path.index(after: index)...].firstIndex(of: "/") else { break }
            index = next
        }
        return nil
    }
}
