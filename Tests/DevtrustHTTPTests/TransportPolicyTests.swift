import CCurl
import DevtrustHTTP
import DevtrustTestSupport
import Foundation
import Testing

/// The decisions on their own: which hosts are loopback, the NO_PROXY list,
/// which protocol option a libcurl version has, what a redacted URL keeps.
@Suite struct TransportPolicyTests {
    @Test func loopbackIsDecidedWithoutDNS() {
        for host in ["localhost", "LocalHost", "127.0.0.1", "127.0.0.2", "127.255.255.254", "127.1.2.3", "[::1]", "::1", "[0:0:0:0:0:0:0:1]", "[0::1]"] {
            #expect(TransportPolicy.isLoopback(host: host), "\(host)")
        }
        for host in ["localhost.", "a.localhost", "localhost.evil.example", "127.0.0.1.evil.example", "127.0.0.08", "127.000.000.001", "127.1",
                     "0177.0.0.1", "0x7f.0.0.1", "2130706433", "128.0.0.1", "126.255.255.255", "0.0.0.0", "[::]", "[::2]", "[::ffff:10.0.0.1]",
                     "evil.example", "", "[::1", "::1]", "[[::1]]", "192.0.2.1"] {
            #expect(!TransportPolicy.isLoopback(host: host), "\(host)")
        }
        // ServerURL (URLs users give) and the transport decide alike.
        #expect(throws: HTTPError.insecureURL("http://127.000.000.001/")) { try ServerURL("http://127.000.000.001/") }
        #expect((try? ServerURL("http://[0:0:0:0:0:0:0:1]:8080"))?.isLoopback == true)
    }

    @Test func noProxyKeepsLoopbackAndAddsTheUsersEntries() {
        #expect(TransportPolicy.noProxyList(userEntries: nil) == "localhost,127.0.0.1,::1")
        #expect(TransportPolicy.noProxyList(userEntries: "") == "localhost,127.0.0.1,::1")
        #expect(TransportPolicy.noProxyList(userEntries: ".corp.example, idp.internal,10.0.0.0/8") == "localhost,127.0.0.1,::1,.corp.example,idp.internal,10.0.0.0/8")
        #expect(TransportPolicy.noProxyList(userEntries: "LOCALHOST,127.0.0.1,,idp") == "localhost,127.0.0.1,::1,idp")
        // "*" means every host, but only as the whole list.
        #expect(TransportPolicy.noProxyList(userEntries: "idp,*") == "*")
    }

    @Test func theProtocolOptionFollowsTheRuntimeLibcurl() {
        // RHEL 9 (7.76.1) and Ubuntu 22.04 (7.81.0) have only CURLOPT_PROTOCOLS; 7.85.0 added CURLOPT_PROTOCOLS_STR.
        for (version, byName) in [(0x074C01, false), (0x075100, false), (0x075400, false), (0x075500, true), (0x075801, true), (0x080B00, true)] {
            #expect(TransportPolicy.restrictsProtocolsByName(libcurlVersion: UInt32(version)) == byName, "\(String(version, radix: 16))")
        }
        // curl_url and CURLOPT_CURLU: 7.63.0. RHEL 8's 7.61.1 is refused when it loads.
        for (version, supported) in [(0x073D01, false), (0x073E00, false), (0x073F00, true), (0x074C01, true), (0x075100, true)] {
            #expect(TransportPolicy.supports(libcurlVersion: UInt32(version)) == supported, "\(String(version, radix: 16))")
        }
    }

    @Test func redactedURLsKeepWhereButNotWhat() {
        let cases = [
            ("https://idp.example/callback?code=SECRET&state=s", "https://idp.example/callback?[redacted]"),
            ("https://idp.example/callback#access_token=SECRET", "https://idp.example/callback#[redacted]"),
            ("https://u:SECRET@idp.example:8443/a?b#c", "https://[redacted]@idp.example:8443/a?[redacted]#[redacted]"),
            ("https://idp.example/a#frag?notquery", "https://idp.example/a#[redacted]"),
            ("/relative?code=SECRET", "/relative?[redacted]"),
            ("https://idp.example/path/only", "https://idp.example/path/only"),
            ("https://idp.example/p?next=https://u:p@x/", "https://idp.example/p?[redacted]"),
        ]
        for (url, redacted) in cases {
            #expect(TransportPolicy.redacted(url) == redacted)
            #expect(TransportPolicy.redacted(redacted) == redacted, "redacting twice changes \(redacted)")
        }
    }

    /// The fallback for libcurl before 7.85 really restricts protocols: with
    /// this machine's libcurl, each way of setting it makes curl refuse a
    /// file:// URL that it reads without the restriction.
    @Test func bothWaysOfRestrictingProtocolsWorkWithThisLibcurl() throws {
        var loadError = [CChar](repeating: 0, count: 256)
        #expect(devtrust_curl_load(&loadError, loadError.count) == 0)
        let version = devtrust_curl_runtime_version()
        #expect(TransportPolicy.supports(libcurlVersion: version))
        let directory = TemporaryDirectory()
        let file = directory.write("readable", "not for devtrust")
        func perform(restriction: Int32?) -> CURLcode {
            let handle = devtrust_curl_easy_init()!
            defer { devtrust_curl_easy_cleanup(handle) }
            #expect(devtrust_curl_setopt_string(handle, CURLOPT_URL, "file://" + file) == CURLE_OK)
            #expect(devtrust_curl_set_write_callback(handle, { _, size, count, _ in size * count }, nil) == CURLE_OK)
            if let restriction { #expect(devtrust_curl_restrict_protocols(handle, restriction) == CURLE_OK, "restriction \(restriction)") }
            return devtrust_curl_easy_perform(handle)
        }
        #expect(perform(restriction: nil) == CURLE_OK, "this libcurl cannot read file:// URLs: the test proves nothing")
        #expect(perform(restriction: 0) == CURLE_UNSUPPORTED_PROTOCOL, "CURLOPT_PROTOCOLS (the bit mask)")
        if TransportPolicy.restrictsProtocolsByName(libcurlVersion: version) {
            #expect(perform(restriction: 1) == CURLE_UNSUPPORTED_PROTOCOL, "CURLOPT_PROTOCOLS_STR")
        }
    }

    /// Messages never repeat a password of a URL, whatever its form.
    @Test func messagesShowNoPassword() {
        for url in ["http://user:SECRET@192.0.2.2/token", "https://client:SECRET@idp.example/token?x=1", "//u:SECRET@h/cb", "https:u:SECRET@host/x"] {
            for error in [HTTPError.invalidURL(url, reason: "r"), .insecureURL(url), .transport(url: url, failure: .connect, detail: "d"),
                          .redirected(url: "https://a/b", status: 302, location: TransportPolicy.redacted(url))] {
                #expect(!error.description.contains("SECRET"), "\(error.description)")
            }
        }
        #expect(TransportPolicy.redacted("https://client:SECRET@idp.example/token?x=1", keepingQuery: true) == "https://[redacted]@idp.example/token?x=1")
        #expect(TransportPolicy.redacted("//u:p@h/cb?code=1") == "//[redacted]@h/cb?[redacted]")
        #expect(TransportPolicy.redacted("https:u:p@host/x") == "https:[redacted]@host/x")
    }
}
