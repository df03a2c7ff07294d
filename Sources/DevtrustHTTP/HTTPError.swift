import DevtrustErrors
import DevtrustURL

/// Why a request got no usable answer: a network or TLS failure, except
/// `invalidURL` and `insecureURL`, a URL the user gave that devtrust refuses
/// (its `classification`).
public enum HTTPError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Failure: Equatable, Sendable {
        case resolve, connect, timeout, untrustedCertificate, tls, caFile, noResponse, other
        /// The TLS handshake got a plain HTTP answer: an https:// URL with an http port.
        case plainHTTPAnswer
    }

    case invalidURL(String, reason: String)
    /// Plain http to a host that is not loopback.
    case insecureURL(String)
    case libraryUnavailable(String)
    /// A libcurl older than 7.63.0 (its version): devtrust needs its URL parser.
    case libraryTooOld(version: String)
    case transport(url: String, failure: Failure, detail: String)
    case responseTooLarge(url: String, limit: Int)
    /// A 3xx answer: devtrust does not follow redirects. `location` is left
    /// without user, query and fragment (`TransportPolicy.redacted`): they may carry a code or a token.
    case redirected(url: String, status: Int, location: String?)
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) stopped the request (`HTTPOptions.interruption`).
    case interrupted(url: String, signal: Int32)

    public var description: String {
        // A URL in a message never shows a user name or password (a profile's endpoint may hold one).
        func shown(_ url: String) -> String { TransportPolicy.redacted(url, keepingQuery: true) }
        switch self {
        case let .invalidURL(url, reason):
            return "\(shown(url)) is not a usable server URL: \(reason)"
        case let .insecureURL(url):
            return "\(shown(url)) uses plain http, which devtrust allows only to loopback addresses; use https://"
        case let .libraryUnavailable(detail):
            return "cannot load libcurl (\(detail)); install it: apt-get install libcurl4"
        case let .libraryTooOld(version):
            return "libcurl \(version) is too old: devtrust needs libcurl 7.63.0 or later (for its URL parser, which every request's URL is checked with); install a newer libcurl4"
        case let .transport(url, failure, detail):
            switch failure {
            case .resolve: return "cannot resolve the host of \(shown(url)) (\(detail)); check the server URL and DNS"
            case .connect: return "cannot connect to \(shown(url)) (\(detail)); is the server up and reachable?"
            case .timeout: return "\(shown(url)) did not answer in time (\(detail))"
            case .untrustedCertificate: return "the certificate of \(shown(url)) is not trusted (\(detail)); if the server uses a private CA, pass --ca-file FILE (or set DEVTRUST_CA_FILE)"
            case .tls: return "TLS with \(shown(url)) failed (\(detail))"
            case .plainHTTPAnswer:
                return "the server at \(Self.hostAndPort(url)) answered plain HTTP to an HTTPS request: check the URL's scheme and port "
                    + "(devtrust uses http:// only with loopback addresses)"
            case .caFile: return "the CA file cannot be used (\(detail)); check --ca-file / DEVTRUST_CA_FILE"
            case .noResponse: return "\(shown(url)) closed the connection without an answer (\(detail))"
            case .other: return "the request to \(shown(url)) failed (\(detail))"
            }
        case let .responseTooLarge(url, limit):
            return "the answer of \(shown(url)) is larger than \(limit) bytes; devtrust stopped reading it"
        case let .redirected(url, status, location):
            return "\(shown(url)) answered \(status), a redirect" + (location.map { " to \($0)" } ?? "") + "; devtrust does not follow redirects: check the server URL"
        case let .interrupted(url, signal):
            return "the request to \(shown(url)) was stopped by signal \(signal)"
        }
    }

    /// `host:port` of a URL as written, with the scheme's default port (`Origin`) when it names none.
    static func hostAndPort(_ url: String) -> String {
        let reference = URLReference(url)
        let authority = URLAuthority(reference.authority ?? "")
        let written = String(authority.host) + (authority.port.map { ":" + $0 } ?? "")
        guard authority.port == nil else { return written }
        // devtrust sends only https, and http to loopback: any other scheme is taken as https.
        return written + ":" + String(Origin.defaultPort(of: reference.scheme ?? "") ?? 443)
    }
}

extension HTTPError: ClassifiedError {
    /// A network failure, but for a URL the user gave that devtrust refuses (usage) and a request a
    /// signal stopped (interrupted, as every wait a signal ends).
    public var classification: ErrorClassification {
        switch self {
        case .invalidURL, .insecureURL: return ErrorClassification(.usage, summary: description)
        case let .interrupted(_, signal): return ErrorClassification(.interrupted(signal: signal), summary: description)
        case .libraryUnavailable, .libraryTooOld, .transport, .responseTooLarge, .redirected: return ErrorClassification(.network, summary: description)
        }
    }
}
