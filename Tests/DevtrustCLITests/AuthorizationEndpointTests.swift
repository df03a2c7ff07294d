@testable import DevtrustBrowser
@testable import DevtrustCLI
import Testing

/// AuthorizationEndpoint's checks one by one. Through the host (NativeHostTests) the exact
/// comparison with a known endpoint refuses these URLs anyway; each check here is defence in
/// depth, so each is tested by the refusal it alone gives.
struct AuthorizationEndpointTests {
    static func refusal(_ url: String) -> String? {
        do {
            _ = try AuthorizationEndpoint(navigation: url)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func eachDefenceRefusesWithItsOwnReason() {
        let cases = [
            ("https://alice@idp.example/oauth2/authorize", "the URL carries a user name or password"),
            ("https://alice:secret@idp.example/oauth2/authorize", "the URL carries a user name or password"),
            ("https://idp.example\\oauth2/authorize", "the URL has a backslash in its host"),
            ("https://idp.example\\@evil.example/oauth2/authorize", "the URL carries a user name or password"),
            ("https://idp%2eexample/oauth2/authorize", "the URL's host is malformed"),
            ("https://idp.example!/oauth2/authorize", "the URL's host is malformed"),
            ("https://[::1%25eth0]/oauth2/authorize", "the URL's host is malformed"),
            ("https://[::g]/oauth2/authorize", "the URL's host is malformed"),
            ("https://idp.example/x/../oauth2/authorize", "the URL's path has dot segments"),
            ("https://idp.example/oauth2/./authorize", "the URL's path has dot segments"),
            ("https://idp.example/oauth2/%2E%2e/authorize", "the URL's path has dot segments"),
            ("https://idp.example/oauth2/%2e?x", "the URL's path has dot segments"),
            ("https://idp.example/oauth2/authorize#", "the URL has a fragment"),
            ("https://idp.example/oauth2/authorize?#", "the URL has a fragment"),
            ("https://idp.example:0443/oauth2/authorize", "the URL's port is not written as a number from 1 to 65535"),
            ("https://idp.example:65536/oauth2/authorize", "the URL's port is not written as a number from 1 to 65535"),
            ("http://idp.example/oauth2/authorize", "the URL is plain http to idp.example, which is not a loopback address"),
        ]
        for (url, reason) in cases {
            #expect(Self.refusal(url) == reason, "\(url)")
        }
        // Dot-like segments that are not dot segments are a path like any other.
        for url in ["https://idp.example/.../authorize", "https://idp.example/.well-known/x", "https://idp.example/a./b"] {
            #expect(Self.refusal(url) == nil, "\(url)")
        }
    }

    /// What browsers normalise is one endpoint: the scheme's and host's case, and a default port
    /// (443 for https, 80 for http), which is left out when written.
    @Test func defaultPortsAndCaseAreOneEndpoint() throws {
        let plain = try AuthorizationEndpoint(endpoint: "https://idp.example/oauth2/authorize")
        for url in ["https://idp.example:443/oauth2/authorize?client_id=a", "HTTPS://IdP.Example:443/oauth2/authorize", "https://IDP.EXAMPLE/oauth2/authorize"] {
            let endpoint = try AuthorizationEndpoint(navigation: url)
            #expect(endpoint == plain && endpoint.description == "https://idp.example/oauth2/authorize", "\(url)")
        }
        #expect(try AuthorizationEndpoint(navigation: "https://idp.example:8443/oauth2/authorize") != plain)
        #expect(try AuthorizationEndpoint(navigation: "https://idp.example:80/oauth2/authorize").description == "https://idp.example:80/oauth2/authorize")
        let loopback = try AuthorizationEndpoint(navigation: "http://127.0.0.1:80/oauth2/authorize")
        #expect(loopback == (try AuthorizationEndpoint(endpoint: "http://127.0.0.1/oauth2/authorize")) && loopback.port == nil)
        #expect(try AuthorizationEndpoint(navigation: "http://127.0.0.1:443/oauth2/authorize").port == 443)
    }
}
