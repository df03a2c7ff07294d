import DevtrustHTTP
import DevtrustTestSupport
import Foundation
import Testing

/// The transport's own rules, for every request whatever built its URL (a
/// profile's endpoint, a discovery document, a server's link): plain http
/// only to loopback, decided on the URL as libcurl parses it, before anything
/// is sent. Real requests, to listeners on this machine's own addresses.
@Suite(.enabled(if: ExternalTool.python.shouldRun && MachineAddress.shouldRun)) struct TransportTests {
    static let client = CurlHTTPClient(options: HTTPOptions(userAgent: "devtrust-test"))

    /// What sending the request threw (nil when it got an answer).
    static func failure(_ url: String, method: String = "POST") -> HTTPError? {
        do {
            _ = try client.send(HTTPRequest(method: method, url: url, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                            body: Array("grant_type=authorization_code&code=SECRET-CODE-4711&code_verifier=SECRET-VERIFIER".utf8)))
            return nil
        } catch {
            return error
        }
    }

    static func isRefusal(_ error: HTTPError?) -> Bool {
        switch error {
        case .insecureURL?, .invalidURL?: return true
        default: return false
        }
    }

    @Test func plainHTTPToAnotherHostIsRefusedBeforeAnythingIsSent() throws {
        let address = try #require(MachineAddress.nonLoopbackIPv4, "this machine has no address outside loopback")
        let listener = try RecordingListener(host: address)
        let authority = listener.authority
        // The listener is reachable from here: https to it connects (and fails the TLS handshake).
        let control = Self.failure("https://\(authority)/oauth2/token")
        guard case .transport? = control else { Issue.record("https to the listener: \(String(describing: control))"); return }
        #expect(listener.connections().count == 1, "the listener did not record the control connection")

        var hostile = [
            "http://\(authority)/oauth2/token",
            "HTTP://\(authority)/oauth2/token",
            "hTtP://\(authority)/oauth2/token",
            // Userinfo: a check that reads the text before "@" as the host would pass these.
            "http://127.0.0.1@\(authority)/oauth2/token",
            "http://localhost:secret@\(authority)/oauth2/token",
            // The IPv4-mapped IPv6 form of the same address.
            "http://[::ffff:\(address)]:\(listener.port)/oauth2/token",
        ]
        var listener6: RecordingListener?
        if let address6 = MachineAddress.nonLoopbackIPv6, let opened = try? RecordingListener(host: address6) {
            listener6 = opened
            hostile.append("http://\(opened.authority)/oauth2/token")
        }
        for url in hostile {
            let error = Self.failure(url)
            #expect(Self.isRefusal(error), "\(url): \(String(describing: error))")
        }
        #expect(listener.connections().count == 1, "plain http reached \(address): \(listener.connections().dropFirst())")
        #expect(listener6?.connections() ?? [] == [], "plain http reached \(listener6?.host ?? ""): \(listener6?.connections() ?? [])")
    }

    /// Names that only DNS can place (it may say anything) are not loopback,
    /// however they start or end: refused, not looked up.
    @Test(arguments: ["http://127.0.0.1.evil.example/oauth2/token", "http://localhost./oauth2/token", "http://localhost.evil.example/token",
                      "http://127.0.0.08/token", "http://evil.example/token", "http://[::2]/token"])
    func namesThatNeedDNSAreNotLoopback(url: String) {
        let error = Self.failure(url)
        guard case .insecureURL(let refused)? = error else {
            Issue.record("\(url): \(String(describing: error))")
            return
        }
        #expect(refused == url)
        #expect(error?.description.contains("uses plain http, which devtrust allows only to loopback addresses; use https://") == true)
    }

    @Test(arguments: ["ftp://127.0.0.1/file", "file:///etc/passwd", "gopher://127.0.0.1/", "not a url", "https://",
                      "https://user@127.0.0.1:9/", "https://:password@127.0.0.1:9/", "https://" + String(repeating: "u", count: 3000) + "@127.0.0.1:9/"])
    func otherSchemesAndBrokenURLsAreRefused(url: String) {
        let error = Self.failure(url)
        guard case .invalidURL(let refused, _)? = error else {
            Issue.record("\(url): \(String(describing: error))")
            return
        }
        #expect(refused == url)
    }

    @Test func plainHTTPToLoopbackStillWorks() throws {
        var listeners = [try RecordingListener(host: "127.0.0.1"), try RecordingListener(host: "127.0.0.2")]
        if let ipv6 = try? RecordingListener(host: "::1") { listeners.append(ipv6) }
        var urls = listeners.map { "http://\($0.authority)/discovery" }
        urls.append("http://localhost:\(listeners[0].port)/discovery")
        urls.append("HTTP://127.0.0.1:\(listeners[0].port)/discovery")
        for url in urls {
            let response = try Self.client.send(HTTPRequest(method: "GET", url: url))
            #expect(response.status == 200 && response.body == Array("{}".utf8), "\(url)")
        }
        #expect(listeners[0].connections().count == 3 && listeners[1].connections().count == 1)
        #expect(listeners.allSatisfy { $0.connections().allSatisfy { $0.hasPrefix("GET /discovery HTTP/1.1\r\n") } })
    }

    @Test func aRedirectsLocationLosesItsSecretsInTheError() throws {
        let listener = try RedirectingListener(location: "https://user:SECRET-PASSWORD@elsewhere.example/callback?code=SECRET-CODE&state=s#access_token=SECRET-TOKEN")
        let error = Self.failure("http://127.0.0.1:\(listener.port)/oauth2/authorize")
        guard case let .redirected(_, status, location)? = error else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(status == 302)
        #expect(location == "https://[redacted]@elsewhere.example/callback?[redacted]#[redacted]")
        #expect(error!.description.contains("a redirect to https://[redacted]@elsewhere.example/callback?[redacted]#[redacted]; devtrust does not follow redirects"))
        #expect(!error!.description.contains("SECRET"))
    }
}

/// A one-answer HTTP server on loopback that redirects (python's http.server).
final class RedirectingListener: @unchecked Sendable {
    let port: Int
    private let process: ListeningProcess

    init(location: String) throws {
        let script = """
            import http.server, sys
            class H(http.server.BaseHTTPRequestHandler):
                def answer(self):
                    self.send_response(302)
                    self.send_header("Location", sys.argv[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                do_GET = do_POST = answer
                def log_message(self, *a): pass
            s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
            print("listening on", s.server_address[1], flush=True)
            s.serve_forever()
            """
        process = try ListeningProcess(ExternalTool.python.rawValue, ["-c", script, location], what: "the redirecting server")
        guard let port = Int(process.announced) else { throw SwtpmError("the redirecting server announced \(process.firstLine)") }
        self.port = port
    }
}
