import CCurl
import DevtrustEncoding
import Glibc

/// HTTP over libcurl (loaded on first use). Every request's URL is checked as
/// curl parses it (`TransportPolicy`: https, or http to loopback only), and
/// curl connects to exactly that parsed URL; certificates and host names are
/// always verified; `--ca-file` adds a private CA; redirects are not followed;
/// answers are capped in size; loopback is never sent through a proxy, and
/// the user's NO_PROXY entries are kept.
public struct CurlHTTPClient: HTTPClient {
    /// The name libcurl is loaded by (devtrust_curl.h); Debian's libcurl4 installs it.
    public static let libraryName = DEVTRUST_CURL_LIBRARY

    public let options: HTTPOptions

    public init(options: HTTPOptions) {
        self.options = options
    }

    /// Collects the body (up to the cap) and the header lines of one answer,
    /// and tells the wait observer how long the request has been under way.
    private final class Accumulator {
        let limit: Int
        var body: [UInt8] = []
        var headerLines: [String] = []
        var overflowed = false
        let waitObserver: (any HTTPWaitObserver)?
        let interruption: (@Sendable () -> Int32)?
        /// The signal that stopped the transfer, or 0.
        var interruptedBy: Int32 = 0
        let host: String
        private let started = Accumulator.monotonicSeconds()

        init(limit: Int, waitObserver: (any HTTPWaitObserver)?, interruption: (@Sendable () -> Int32)?, host: String) {
            self.limit = limit
            self.waitObserver = waitObserver
            self.interruption = interruption
            self.host = host
        }

        /// Curl's progress callback: false stops the transfer (a signal arrived).
        func progress() -> Bool {
            if let interruption {
                interruptedBy = interruption()
                if interruptedBy != 0 { return false }
            }
            waitObserver?.waiting(for: host, elapsedSeconds: Self.monotonicSeconds() - started)
            return true
        }

        private static func monotonicSeconds() -> Double {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        }
    }

    /// Loads libcurl as every request does (its version, every function devtrust calls):
    /// nil when it can be used, else why not (`libraryTooOld` or `libraryUnavailable`).
    public static func loadProblem() -> HTTPError? {
        var loadError = [CChar](repeating: 0, count: 256)
        let loaded = devtrust_curl_load(&loadError, loadError.count)
        guard loaded != 0 else { return nil }
        let detail = String(decoding: loadError.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return loaded == -2 ? .libraryTooOld(version: detail) : .libraryUnavailable(detail)
    }

    /// The loaded libcurl's version ("7.88.1"); "" before it is loaded.
    public static var runtimeVersion: String {
        let number = devtrust_curl_runtime_version()
        return number == 0 ? "" : "\(number >> 16).\((number >> 8) & 0xFF).\(number & 0xFF)"
    }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        if let problem = Self.loadProblem() { throw problem }
        // The URL as curl reads it, checked before anything is sent; the transfer uses this same parse.
        guard let url = devtrust_curl_url() else { throw .libraryUnavailable("curl_url failed") }
        defer { devtrust_curl_url_cleanup(url) }
        let host = try Self.parse(request.url, into: url)
        guard let handle = devtrust_curl_easy_init() else { throw .libraryUnavailable("curl_easy_init failed") }
        defer { devtrust_curl_easy_cleanup(handle) }

        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { devtrust_curl_slist_free_all(headerList) }
        for header in request.headers {
            headerList = devtrust_curl_slist_append(headerList, "\(header.name): \(header.value)")
        }
        // Without this, curl adds "Expect: 100-continue" to larger POSTs.
        headerList = devtrust_curl_slist_append(headerList, "Expect:")
        // "localhost" is plain http's loopback only if it reaches loopback: libcurl before 7.78 asks
        // /etc/hosts and DNS for it, so it is pinned to 127.0.0.1 there (any port).
        var connectTo: UnsafeMutablePointer<curl_slist>?
        defer { devtrust_curl_slist_free_all(connectTo) }
        if host.lowercased() == "localhost" && devtrust_curl_runtime_version() < 0x074E00 {
            connectTo = devtrust_curl_slist_append(nil, "localhost::127.0.0.1:")
        }

        let accumulator = Accumulator(limit: options.maximumResponseBytes, waitObserver: options.waitObserver,
                                      interruption: options.interruption, host: host)
        let context = Unmanaged.passRetained(accumulator)
        defer { context.release() }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        // The body often holds a password, an OTP or a refresh token: curl reads it
        // from this buffer (no copy of its own), which is wiped once the request is done.
        let body = request.method == "POST" ? request.body ?? [] : []
        let bodyBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, body.count), alignment: 1)
        bodyBuffer.copyBytes(from: body)
        defer {
            devtrust_curl_wipe(bodyBuffer.baseAddress, bodyBuffer.count)
            bodyBuffer.deallocate()
        }

        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errorPointer in
            var result = CURLE_OK
            func set(_ code: CURLcode) { if result == CURLE_OK { result = code } }
            set(devtrust_curl_setopt_pointer(handle, CURLOPT_CURLU, UnsafeMutableRawPointer(url)))
            set(devtrust_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
            set(devtrust_curl_restrict_protocols(handle, TransportPolicy.restrictsProtocolsByName(libcurlVersion: devtrust_curl_runtime_version()) ? 1 : 0))
            set(devtrust_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
            set(devtrust_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
            set(devtrust_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
            set(devtrust_curl_setopt_string(handle, CURLOPT_NOPROXY, TransportPolicy.noProxyList(userEntries: options.noProxy)))
            // Plain http goes only to loopback, and never through a proxy (which may not be on this machine).
            if TransportPolicy.isLoopback(host: host) { set(devtrust_curl_setopt_string(handle, CURLOPT_PROXY, "")) }
            if let connectTo { set(devtrust_curl_setopt_pointer(handle, CURLOPT_CONNECT_TO, connectTo)) }
            set(devtrust_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMilliseconds))
            set(devtrust_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, options.totalTimeoutMilliseconds))
            set(devtrust_curl_setopt_off_t(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maximumResponseBytes)))
            set(devtrust_curl_setopt_string(handle, CURLOPT_USERAGENT, options.userAgent))
            set(devtrust_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorPointer.baseAddress))
            if let caFile = options.caFile { set(devtrust_curl_setopt_string(handle, CURLOPT_CAINFO, caFile)) }
            set(devtrust_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList))
            if options.debug { set(devtrust_curl_enable_redacted_debug(handle)) }
            if request.method == "POST" {
                set(devtrust_curl_setopt_long(handle, CURLOPT_POST, 1))
                set(devtrust_curl_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
                set(devtrust_curl_setopt_pointer(handle, CURLOPT_POSTFIELDS, bodyBuffer.baseAddress))
            } else if request.method != "GET" {
                set(devtrust_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method))
            }
            set(devtrust_curl_set_write_callback(handle, { data, size, count, context in
                let accumulator = Unmanaged<Accumulator>.fromOpaque(context!).takeUnretainedValue()
                let length = size * count
                guard accumulator.body.count + length <= accumulator.limit else {
                    accumulator.overflowed = true
                    return 0
                }
                data!.withMemoryRebound(to: UInt8.self, capacity: length) {
                    accumulator.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
                }
                return length
            }, context.toOpaque()))
            set(devtrust_curl_set_header_callback(handle, { data, size, count, context in
                let accumulator = Unmanaged<Accumulator>.fromOpaque(context!).takeUnretainedValue()
                let length = size * count
                let line = data!.withMemoryRebound(to: UInt8.self, capacity: length) {
                    String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                }
                if accumulator.headerLines.count < 200 { accumulator.headerLines.append(line) }
                return length
            }, context.toOpaque()))
            if options.waitObserver != nil || options.interruption != nil {
                set(devtrust_curl_set_progress_callback(handle, { context, _, _, _, _ in
                    Unmanaged<Accumulator>.fromOpaque(context!).takeUnretainedValue().progress() ? 0 : 1
                }, context.toOpaque()))
            }
            guard result == CURLE_OK else { return result }
            let code = devtrust_curl_easy_perform(handle)
            options.waitObserver?.finished()
            return code
        }

        if accumulator.interruptedBy != 0 { throw .interrupted(url: request.url, signal: accumulator.interruptedBy) }
        if accumulator.overflowed || code == CURLE_FILESIZE_EXCEEDED {
            throw .responseTooLarge(url: request.url, limit: options.maximumResponseBytes)
        }
        guard code == CURLE_OK else {
            let detail = String(decoding: errorBuffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fallback = String(cString: devtrust_curl_easy_strerror(code))
            throw .transport(url: request.url, failure: Self.failure(code, detail: detail), detail: detail.isEmpty ? fallback : detail)
        }
        var status = 0
        _ = devtrust_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        let headers = Self.parseHeaders(accumulator.headerLines)
        let response = HTTPResponse(status: status, headers: headers, body: accumulator.body)
        if (300..<400).contains(status) {
            throw .redirected(url: request.url, status: status, location: response.header("Location").map { TransportPolicy.redacted($0) })
        }
        return response
    }

    /// Parses `text` with libcurl's URL parser into `url`, checks it, and returns its host.
    private static func parse(_ text: String, into url: OpaquePointer) throws(HTTPError) -> String {
        let parsed = devtrust_curl_url_set(url, CURLUPART_URL, text)
        guard parsed == CURLUE_OK else {
            let reason: String
            switch parsed {
            case CURLUE_UNSUPPORTED_SCHEME: reason = "only https:// URLs are supported"
            case CURLUE_BAD_PORT_NUMBER: reason = "bad port"
            case _ where devtrust_curl_url_error_is_bad_host(parsed) == 1: reason = "no valid host name"
            default: reason = "libcurl cannot read it (URL error \(parsed.rawValue))"
            }
            throw .invalidURL(text, reason: reason)
        }
        func part(_ which: CURLUPart) -> (code: CURLUcode, value: String) {
            var buffer = [CChar](repeating: 0, count: 2048)
            let code = devtrust_curl_url_get(url, which, &buffer, buffer.count)
            return (code, String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        let scheme = part(CURLUPART_SCHEME), host = part(CURLUPART_HOST)
        guard scheme.code == CURLUE_OK, host.code == CURLUE_OK else { throw .invalidURL(text, reason: "no valid host name") }
        // Only "there is none" counts as none: a part too long to copy is there.
        let hasUserInfo = part(CURLUPART_USER).code != CURLUE_NO_USER || part(CURLUPART_PASSWORD).code != CURLUE_NO_PASSWORD
            || part(CURLUPART_OPTIONS).code != CURLUE_NO_OPTIONS
        try TransportPolicy.check(url: text, scheme: scheme.value, host: host.value, hasUserInfo: hasUserInfo)
        return host.value
    }

    private static func failure(_ code: CURLcode, detail: String) -> HTTPError.Failure {
        // OpenSSL's words when the first bytes back are "HTTP/1.1 400 ...", not a TLS record.
        if code == CURLE_SSL_CONNECT_ERROR && ["wrong version number", "packet length too long", "record layer failure"].contains(where: { detail.includes($0) }) {
            return .plainHTTPAnswer
        }
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: return .resolve
        case CURLE_COULDNT_CONNECT: return .connect
        case CURLE_OPERATION_TIMEDOUT: return .timeout
        case CURLE_PEER_FAILED_VERIFICATION: return .untrustedCertificate
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR: return .tls
        case CURLE_SSL_CACERT_BADFILE: return .caFile
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE: return .noResponse
        default: return .other
        }
    }

    /// Header lines of the final answer (curl reports those of interim 1xx answers too).
    private static func parseHeaders(_ lines: [String]) -> [(name: String, value: String)] {
        var headers = [(name: String, value: String)]()
        for line in lines {
            if line.hasPrefix("HTTP/") { headers.removeAll(); continue }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].drop(while: { $0 == " " || $0 == "\t" })
            headers.append((name, String(value.reversed().drop(while: \.isWhitespace).reversed())))
        }
        return headers
    }
}
