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

public struct HTTPOptions: Sendable {
    public var caFile: String?
    public var connectTimeoutMilliseconds = 10_000
    public var totalTimeoutMilliseconds = 30_000
    public var maximumResponseBytes = 1 << 20
    public var userAgent: String

    public init(caFile: String? = nil, userAgent: String) {
        self.caFile = caFile
        self.userAgent = userAgent
    }
}
