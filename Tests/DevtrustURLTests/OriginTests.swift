import DevtrustURL
import Testing

/// The one origin rule: lower case, no default port, no user name; and the split it stands on.
struct OriginTests {
    @Test func anOriginIsWrittenOneWay() throws {
        for url in ["https://idp.example", "HTTPS://IdP.Example:443/t/acme/?x#y", "https://user:pw@idp.example/", "https://idp.example:/x",
                    "https://idp.example?q", "https://idp.example#f"] {
            #expect(Origin(url)?.description == "https://idp.example", "\(url)")
        }
        #expect(Origin("https://idp.example:8443/x")?.description == "https://idp.example:8443")
        #expect(Origin("https://idp.example:80/x")?.port == 80)
        #expect(Origin("http://127.0.0.1:80/x")?.description == "http://127.0.0.1")
        #expect(Origin("http://127.0.0.1:443/x")?.description == "http://127.0.0.1:443")
        #expect(Origin("https://[::1]:9443/x")?.host == "[::1]" && Origin("https://[::1]:9443/x")?.port == 9443)
        #expect(Origin("https://[::1]/x")?.authority == "[::1]")
        #expect(Origin("ftp://Host:21/")?.description == "ftp://host:21")
        #expect(Origin(scheme: "", authority: "LocalHost:9443")?.authority == "localhost:9443")
        #expect(Origin(scheme: "HTTPS", host: "IDP", port: 443) == Origin(scheme: "https", host: "idp", port: nil))
    }

    @Test func textWithoutAnOriginHasNone() {
        for url in ["not a url", "idp.example/t/acme", "localhost:9443", "https://", "https:///path", "https://host:abc/", "https://host:65536",
                    "mailto:someone@idp.example", "/oauth2/authorize"] {
            #expect(Origin(url) == nil, "\(url)")
            #expect(Origin.text(of: url) == url, "\(url)")
        }
        #expect(Origin.text(of: "HTTPS://Host:443/t/acme") == "https://host")
    }

    @Test func theDefaultPortsAreHTTPSAndHTTPs() {
        #expect(Origin.defaultPort(of: "https") == 443 && Origin.defaultPort(of: "HTTP") == 80 && Origin.defaultPort(of: "ftp") == nil)
    }

    @Test func anAuthoritySplitsAsWritten() {
        let plain = URLAuthority("User:Pw@Host:8443")
        #expect(plain.userInfo == "User:Pw" && plain.host == "Host" && plain.port == "8443" && plain.afterBracketedHost == nil)
        let ipv6 = URLAuthority("[::1]:80")
        #expect(ipv6.host == "[::1]" && ipv6.port == "80")
        let junk = URLAuthority("[::1]x")
        #expect(junk.host == "[::1]" && junk.port == nil && junk.afterBracketedHost == "x")
        let unclosed = URLAuthority("[::1")
        #expect(unclosed.host == "[::1" && unclosed.port == nil)
        #expect(URLAuthority("a@b@host").userInfo == "a@b" && URLAuthority("host:").port == "")
    }
}
