import DevtrustSignIn
import Testing

/// The loopback redirect of `login --browser` (RFC 8252 section 7.3): which redirect
/// URIs it takes, how it reads a request head, and which requests end the wait.
struct LoopbackRedirectTests {
    @Test func loopbackRedirectURIs() {
        let ephemeral = LoopbackRedirect("http://127.0.0.1/callback")
        #expect(ephemeral?.host == .ipv4 && ephemeral?.port == nil && ephemeral?.path == "/callback")
        #expect(ephemeral?.uri(port: 41234) == "http://127.0.0.1:41234/callback")
        #expect(LoopbackRedirect("http://127.0.0.1:0/callback")?.port == nil)
        let fixed = LoopbackRedirect("http://127.0.0.1:8765/callback")
        #expect(fixed?.port == 8765 && fixed?.uri(port: 8765) == "http://127.0.0.1:8765/callback")
        #expect(LoopbackRedirect("http://[::1]:9000/cb")?.host == .ipv6)
        #expect(LoopbackRedirect("http://[::1]:9000/cb")?.uri(port: 9000) == "http://[::1]:9000/cb")
        #expect(LoopbackRedirect("http://localhost:8085/")?.host == .localhost)
        #expect(LoopbackRedirect("http://127.0.0.1:8765")?.path == "/")
        #expect(LoopbackRedirect("http://127.0.0.1:8765/cb?app=1")?.uri(port: 8765) == "http://127.0.0.1:8765/cb?app=1")
        for refused in ["https://127.0.0.1/callback", "http://app.example/callback", "http://127.0.0.2/callback", "http://evil@127.0.0.1/cb",
                        "http://127.0.0.1:99999/cb", "http://127.0.0.1:-1/cb", "http://127.0.0.1:80x/cb", "http://127.0.0.1/cb#frag",
                        "http://127.0.0.1.evil.example/cb", "http://[::1]x/cb", "http://127.0.0.1/cb\u{1B}[2J", "127.0.0.1:8765/callback",
                        "file:///etc/passwd"] {
            #expect(LoopbackRedirect(refused) == nil, "\(refused)")
        }
    }

    static func head(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func requestHeadsAreReadStrictly() {
        let limit = 16_384
        #expect(LoopbackRequest.read(Self.head("GET /callback?a=1 HTTP/1.1\r\nHost: 127.0.0.1:5000\r\n\r\n"), limit: limit)
                == .request(LoopbackRequest(method: "GET", target: "/callback?a=1", host: "127.0.0.1:5000")))
        #expect(LoopbackRequest.read(Self.head("\r\nGET / HTTP/1.0\nHost:  h:1 \n\n"), limit: limit)
                == .request(LoopbackRequest(method: "GET", target: "/", host: "h:1")))
        #expect(LoopbackRequest.read(Self.head("GET /callback HTTP/1.1\r\nHost: a"), limit: limit) == .incomplete)
        #expect(LoopbackRequest.read(Self.head("GET /callback HTTP/1.1\r\nX: " + String(repeating: "a", count: limit)), limit: limit) == .tooLarge)
        #expect(LoopbackRequest.read(Self.head("GET /callback HTTP/1.1\r\nX: " + String(repeating: "a", count: limit) + "\r\n\r\n"), limit: limit) == .tooLarge)
        for malformed in ["GET  /callback HTTP/1.1\r\n\r\n", "GET http://127.0.0.1/callback HTTP/1.1\r\n\r\n", "get /callback HTTP/1.1\r\n\r\n",
                          "GET /callback HTTP/2\r\n\r\n", "GET /callback\r\n\r\n", "GET /callback HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                          "GET /callback HTTP/1.1\r\nno colon\r\n\r\n", "GET /callback HTTP/1.1\r\nHost : a\r\n\r\n"] {
            #expect(LoopbackRequest.read(Self.head(malformed), limit: limit) == .malformed, "\(malformed)")
        }
        #expect(LoopbackRequest.read([0x47, 0x45, 0x54, 0x20, 0x2F, 0xFF, 0x20, 0x0D, 0x0A, 0x0D, 0x0A], limit: limit) == .malformed)
    }

    static func decide(_ target: String, method: String = "GET", host: String? = "127.0.0.1:5000") -> LoopbackRequest.Decision {
        LoopbackRequest(method: method, target: target, host: host).decision(path: "/callback", host: "127.0.0.1:5000", state: "s3cr3t-state")
    }

    @Test func onlyAGetOfTheRedirectPathWithThisStateEndsTheWait() {
        #expect(Self.decide("/callback?code=c0de&state=s3cr3t-state") == .end(.code("c0de")))
        #expect(Self.decide("/callback?state=s3cr3t-state&code=a%2Bb+c") == .end(.code("a+b c")))
        #expect(Self.decide("/callback?error=access_denied&error_description=no%1B%5B2J&state=s3cr3t-state")
                == .end(.error("access_denied", description: "no\u{1B}[2J")))
        #expect(Self.decide("/favicon.ico") == .ignore(.notFound))
        #expect(Self.decide("/callback/../callback?code=c&state=s3cr3t-state") == .ignore(.notFound))
        #expect(Self.decide("/Callback?code=c&state=s3cr3t-state") == .ignore(.notFound))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", method: "POST") == .ignore(.wrongMethod))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", method: "HEAD") == .ignore(.wrongMethod))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", host: "evil.example:5000") == .ignore(.wrongHost))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state", host: nil) == .ignore(.wrongHost))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-statE") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c&state=s3cr3t-stat") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c&state=") == .ignore(.wrongState))
        // A repeated parameter is not read either way.
        #expect(Self.decide("/callback?code=c&state=s3cr3t-state&state=other") == .ignore(.wrongState))
        #expect(Self.decide("/callback?code=c&code=d&state=s3cr3t-state") == .ignore(.wrongState))
        #expect(Self.decide("/callback?state=s3cr3t-state") == .ignore(.incomplete))
        #expect(Self.decide("/callback?state=s3cr3t-state&code=") == .ignore(.incomplete))
        #expect(Self.decide("/callback?state=s3cr3t-state&code=%FF") == .ignore(.incomplete))
    }
}
