import DevtrustEncoding
import DevtrustURL

/// A loopback redirect URI of a native app (RFC 8252 section 7.3):
/// `http://127.0.0.1[:PORT]/PATH`, `http://[::1][:PORT]/PATH` or, when a
/// server's registration insists on it, `http://localhost[:PORT]/PATH`.
/// Without a port (or with port 0) the listener takes one the system chooses;
/// with a port, exactly that one (servers that compare redirect URIs exactly).
public struct LoopbackRedirect: Equatable, Sendable {
    public enum Host: Equatable, Sendable {
        case ipv4, ipv6, localhost

        /// How the host is written in the URI and in the browser's Host header.
        public var text: String {
            switch self {
            case .ipv4: return "127.0.0.1"
            case .ipv6: return "[::1]"
            case .localhost: return "localhost"
            }
        }
    }

    public let host: Host
    /// nil or 0: a port the system chooses.
    public let port: UInt16?
    /// The path the browser is sent back to ("/callback"); "/" when the URI has none.
    public let path: String
    /// A query the registered URI carries (kept in the redirect URI as it is).
    public let query: String?

    /// nil when the text is not an http URI to a loopback address (https, another
    /// host, user information, a fragment, a port that is not a number).
    public init?(_ text: String) {
        guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else { return nil }
        let reference = URLReference(text)
        guard reference.scheme?.lowercased() == "http", let authority = reference.authority, reference.fragment == nil,
              !authority.contains("@") else { return nil }
        let hostText: Substring
        let portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            hostText = authority[...close]
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
            portText = rest.isEmpty ? nil : rest.dropFirst()
        } else if let colon = authority.lastIndex(of: ":") {
            hostText = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            hostText = Substring(authority)
            portText = nil
        }
        switch hostText.lowercased() {
        case "127.0.0.1": host = .ipv4
        case "[::1]": host = .ipv6
        case "localhost": host = .localhost
        default: return nil
        }
        if let portText, !portText.isEmpty {
            guard portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let number = UInt16(portText) else { return nil }
            port = number == 0 ? nil : number
        } else {
            port = nil
        }
        path = reference.path.isEmpty ? "/" : reference.path
        query = reference.query
    }

    /// The redirect URI with the port the listener holds.
    public func uri(port: UInt16) -> String {
        "http://\(host.text):\(port)\(path)" + (query.map { "?" + $0 } ?? "")
    }
}
