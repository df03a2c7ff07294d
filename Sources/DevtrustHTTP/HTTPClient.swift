public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?

    public init(method: String, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

public struct HTTPResponse: Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The last value of a header (names compare case-insensitively).
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.last(where: { $0.name.lowercased() == wanted })?.value
    }
}

/// One HTTP exchange. The real one is `CurlHTTPClient`; the layer is this small
/// so that every protocol client (registration, sign-in) shares it.
public protocol HTTPClient: Sendable {
    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse
}

/// Follows a request while it waits for its answer, for whoever shows the
/// user that something is under way. Called on the thread that sends the request.
public protocol HTTPWaitObserver: Sendable {
    /// The request to `host` has been under way for `elapsedSeconds`: said
    /// repeatedly while it lasts (about once a second, or more often).
    func waiting(for host: String, elapsedSeconds: Double)
    /// The request is over, answered or failed: said once for every transfer
    /// curl started, before `send` returns or throws.
    func finished()
}

public struct HTTPOptions: Sendable {
    public var caFile: String?
    public var connectTimeoutMilliseconds = 10_000
    public var totalTimeoutMilliseconds = 30_000
    public var maximumResponseBytes = 1 << 20
    public var userAgent: String
    /// curl's account of each request on stderr, secrets left out (DEVTRUST_HTTP_DEBUG=1).
    public var debug = false
    /// The user's NO_PROXY (`no_proxy`, else `NO_PROXY`, as curl reads them):
    /// hosts reached without the proxy, in addition to loopback, which never is.
    public var noProxy: String?
    /// Told how long each request has been waiting for its answer (a command's
    /// progress display); nil for none.
    public var waitObserver: (any HTTPWaitObserver)?
    /// The signal that arrived while the command watches for them (Ctrl-C, SIGTERM,
    /// SIGHUP), 0 for none; nil: signals do not stop a request. A transfer under way
    /// stops within about a second of one, with `HTTPError.interrupted`.
    public var interruption: (@Sendable () -> Int32)?

    public init(caFile: String? = nil, userAgent: String) {
        self.caFile = caFile
        self.userAgent = userAgent
    }
}

extension HTTPResponse {
    /// "HTTP 500 (text/html)": for error messages about an answer that is not what was expected.
    public var statusSummary: String {
        var details = [String]()
        if let type = header("Content-Type") { details.append(type) }
        if status == 429 || status == 503, let retry = header("Retry-After") { details.append("retry after \(retry)") }
        return "HTTP \(status)" + (details.isEmpty ? "" : " (" + details.joined(separator: "; ") + ")")
    }

    /// The first 80 bytes of the body, on one line, without control characters.
    public var bodyPreview: String { Self.preview(body) }

    /// The same for any bytes received (a body read before a response exists).
    public static func preview(_ body: [UInt8]) -> String {
        if body.isEmpty { return "(empty)" }
        let text = String(decoding: body.prefix(80), as: UTF8.self)
            .map { $0.isNewline || $0 == "\t" ? " " : $0 }
            .filter { !$0.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) } }
        return "\"" + String(text) + (body.count > 80 ? "…" : "") + "\""
    }
}
