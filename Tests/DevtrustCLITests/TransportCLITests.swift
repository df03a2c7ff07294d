import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Endpoints devtrust did not check when it read them (a sign-in profile's,
/// a stored sign-in's) on plain http to another host: the transport refuses
/// them, and a listener at that address (this machine's own, outside
/// loopback) receives nothing: no code, no PKCE verifier, no refresh token.
@Suite(.enabled(if: ReferenceServer.shouldRun && MachineAddress.shouldRun)) struct PlainHTTPEndpointTests {
    struct Remote {
        let listener: RecordingListener
        var tokenEndpoint: String { "http://\(listener.authority)/oauth2/token" }

        init() throws {
            let address = try #require(MachineAddress.nonLoopbackIPv4, "this machine has no address outside loopback")
            listener = try RecordingListener(host: address)
            // The listener is reachable from here: whatever devtrust sends to it, it records.
            let probe = try ProcessRunner.run("/usr/bin/curl", ["-s", "--noproxy", "*", "--max-time", "5", "http://\(listener.authority)/probe"])
            #expect(probe.stdout == "{}" && listener.connections().count == 1, "the listener is not reachable: \(probe)")
        }

        /// What devtrust sent it (the probe left out).
        var received: [String] { Array(listener.connections().dropFirst()) }
    }

    static func expectRefusal(_ result: ProcessResult, of url: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 2, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains("devtrust: error: \(url) uses plain http, which devtrust allows only to loopback addresses; use https://"),
                "\(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test func aProfilesPlainHTTPTokenEndpointGetsNoCode() throws {
        let remote = try Remote()
        var setup = try SignInTests.Setup(register: true)
        let profile: JSONValue = .object(["signIn": .object(["profiles": .object(["acme": .object([
            "server": .string(setup.server.url), "clientId": .string("devtrust-app"),
            "endpoints": .object(["token": .string(remote.tokenEndpoint)]),
        ])])])])
        setup.cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("config.json", JSONWriter.bytes(profile))
        let result = try setup.cli.run(["login", "--profile", "acme", "--non-interactive"] + SignInTests.basicAnswers)
        Self.expectRefusal(result, of: remote.tokenEndpoint)
        #expect(remote.received == [], "the code went out in cleartext: \(remote.received)")
        // The sign-in itself ran (the device token was accepted): only the exchange was refused.
        #expect(try setup.signInRecords().first?["accepted"] == .bool(true))
        #expect(!setup.directory.entries("ks").contains { $0.hasPrefix("signin-") })
    }

    @Test func aProfilesPlainHTTPDeviceEndpointGetsNothing() throws {
        let remote = try Remote()
        var setup = try SignInTests.Setup(register: false)
        let endpoint = "http://\(remote.listener.authority)/oauth2/device_authorize"
        let profile: JSONValue = .object(["signIn": .object(["profiles": .object(["kiosk": .object([
            "server": .string(setup.server.url), "clientId": .string("devtrust-app"),
            "endpoints": .object(["deviceAuthorization": .string(endpoint)]),
        ])])])])
        setup.cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("config.json", JSONWriter.bytes(profile))
        let result = try setup.cli.run("login", "--device-code", "--profile", "kiosk", "--no-qr")
        Self.expectRefusal(result, of: endpoint)
        #expect(remote.received == [], "\(remote.received)")
    }

    /// A stored sign-in whose token endpoint is plain http (written by a devtrust
    /// that did not check it, or edited): the refresh token stays home.
    @Test func aStoredPlainHTTPTokenEndpointGetsNoRefreshToken() throws {
        let remote = try Remote()
        let setup = try SignInTests.Setup(register: false)
        #expect(try setup.login().status == 0)
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        var tokens = try JSONParser.parse(try #require(setup.directory.read("ks/" + tokenFile))).objectValue!
        tokens["tokenEndpoint"] = .string(remote.tokenEndpoint)
        tokens["expiresAt"] = .integer(Int64(Date().timeIntervalSince1970) + 10)
        setup.directory.write("ks/" + tokenFile, JSONWriter.bytes(.object(tokens)))
        let result = try setup.cli.run("access-token")
        Self.expectRefusal(result, of: remote.tokenEndpoint)
        #expect(remote.received == [], "the refresh token went out in cleartext: \(remote.received)")
    }
}

/// NO_PROXY is the user's: devtrust keeps its entries and adds loopback, which
/// never goes through a proxy (any 127.x.y.z included). A recording proxy on
/// loopback answers 502 to whatever reaches it.
@Suite(.enabled(if: ReferenceServer.shouldRun && MachineAddress.shouldRun)) struct ProxyTests {
    @Test(arguments: ["NO_PROXY", "no_proxy"])
    func hostsInNoProxyAndLoopbackGoDirect(variable: String) throws {
        let address = try #require(MachineAddress.nonLoopbackIPv4, "this machine has no address outside loopback")
        let authority = try TestCertificateAuthority(names: "IP:\(address)")
        let remote = try ReferenceServer(["--host", address, "--tls-cert", authority.serverCertificate, "--tls-key", authority.serverKey])
        let local = try ReferenceServer(["--host", "127.0.0.2"])
        let proxy = try RecordingListener(host: "127.0.0.1", mode: .proxy)
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        cli.extraEnvironment["DEVTRUST_CA_FILE"] = authority.caCertificate
        cli.extraEnvironment["https_proxy"] = "http://127.0.0.1:\(proxy.port)"
        cli.extraEnvironment["http_proxy"] = "http://127.0.0.1:\(proxy.port)"
        cli.extraEnvironment[variable] = "idp.internal.example, \(address)"
        #expect(try cli.run("init", "--backend", "software", "-q").status == 0)
        // A host the user did not list goes through the proxy: the proxy is in use.
        let proxied = try cli.run(["register", "--server", "https://idp.elsewhere.example", "--non-interactive"] + RegisterTests.answers)
        #expect(proxied.status == 5, "\(proxied)")
        #expect(proxy.connections().count == 1 && proxy.connections().first?.hasPrefix("CONNECT idp.elsewhere.example:443 ") == true,
                "\(proxy.connections())")
        // The host in NO_PROXY, and loopback (127.0.0.2 too), go direct.
        for server in [remote, local] {
            let registered = try cli.run(["register", "--server", server.url, "--non-interactive"] + RegisterTests.answers)
            #expect(registered.status == 0, "\(server.url): \(registered)")
        }
        #expect(proxy.connections().count == 1, "went through the proxy: \(proxy.connections().dropFirst())")
        #expect(try remote.devices(caFile: authority.caCertificate).count == 1)
        #expect(try local.devices().count == 1)
    }
}

/// DEVTRUST_HTTP_DEBUG=1 prints curl's account of each request, without the
/// device token and without what a redirect's Location carries.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct HTTPDebugRedactionTests {
    @Test func theDeviceTokenHeaderIsRedacted() throws {
        var setup = try SignInTests.Setup(register: true)
        setup.cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        let result = try setup.login()
        #expect(result.status == 0, "\(result)")
        // The header was sent, and the server accepted the token in it.
        #expect(try setup.signInRecords().first?["deviceToken"] == .bool(true) && setup.signInRecords().first?["accepted"] == .bool(true))
        #expect(result.stderr.contains("devtrust: http: > X-Device-Token: [redacted]\n"), "\(result.stderr)")
        // No part of a device token: its header (the same in every token of this
        // registration) nor any other JSON in base64url.
        let header = try #require(try setup.cli.run("token").output.split(separator: ".").first)
        #expect(header.count > 20 && !result.stderr.contains(header))
        #expect(!result.stderr.contains("eyJ"), "\(result.stderr)")
    }

    @Test(arguments: [("redirect-with-code", "https://elsewhere.example/callback?[redacted]"),
                      ("redirect-with-token", "https://[redacted]@elsewhere.example/callback#[redacted]")])
    func aRedirectsLocationIsPrintedWithoutItsSecrets(fault: String, shown: String) throws {
        var setup = try SignInTests.Setup(["--fault", fault, "--fault-on", "signin", "--fault-at", "1"], register: false)
        setup.cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        let result = try setup.login()
        #expect(result.status == 5, "\(result)")
        #expect(result.stderr.contains("/oauth2/authorize answered 302, a redirect to \(shown); devtrust does not follow redirects"), "\(result.stderr)")
        #expect(result.stderr.contains("devtrust: http: < Location: \(shown)\n"), "\(result.stderr)")
        #expect(!result.stderr.contains("SECRET"), "\(result.stderr)")
    }
}

/// A TLS front speaking HTTP/2 (nghttpx, Debian's nghttp2-proxy) before the reference server,
/// as most real servers and proxies are: curl then shows request headers in its own info lines.
final class HTTP2Front: @unchecked Sendable {
    static var shouldRun: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/nghttpx") || ExternalTool.isCI }
    let url: String
    private var process: Process?
    private let directory = TemporaryDirectory("h2front")

    init(backend: String, certificates: TestCertificateAuthority) throws {
        let backendAuthority = String(backend.dropFirst("http://".count)).replacingOccurrences(of: ":", with: ",")
        // nghttpx binds a port found free a moment before: when another program took it in
        // between, nghttpx exits and another port is tried.
        for _ in 0..<5 {
            let port = try ProcessRunner.run(ExternalTool.python.rawValue, ["-c", "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"]).output
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/nghttpx")
            process.arguments = ["--frontend=127.0.0.1,\(port)", "--backend=\(backendAuthority)", "--workers=1", "--no-ocsp",
                                 "--errorlog-file=\(directory.file("error.log"))", "--accesslog-file=/dev/null", "--pid-file=\(directory.file("pid"))",
                                 certificates.serverKey, certificates.serverCertificate]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let url = "https://127.0.0.1:\(port)"
            // Until it answers through to the backend, or ends; generous for a loaded machine.
            let deadline = Date().addingTimeInterval(60)
            while process.isRunning && Date() < deadline {
                if (try? ProcessRunner.run("/usr/bin/curl", ["-sk", "--max-time", "5", "-o", "/dev/null", url + "/api/devices"]).status) == 0, process.isRunning {
                    self.process = process
                    self.url = url
                    return
                }
                usleep(50_000)
            }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        throw SwtpmError("nghttpx did not start: \(String(decoding: directory.read("error.log") ?? [], as: UTF8.self))")
    }

    deinit {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun && HTTP2Front.shouldRun)) struct HTTP2DebugRedactionTests {
    /// curl shows HTTP/2 request headers again as info lines ("h2h3 [x-device-token: ...]"):
    /// no secret may pass there either.
    @Test func overHTTP2NoSecretReachesTheDebugOutput() throws {
        let certificates = try TestCertificateAuthority()
        let server = try ReferenceServer()
        let front = try HTTP2Front(backend: server.url, certificates: certificates)
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        cli.extraEnvironment["DEVTRUST_CA_FILE"] = certificates.caCertificate
        try cli.run("init", "--backend", "software", "-q")
        #expect(try cli.run(["register", "--server", front.url, "--non-interactive", "-q"] + RegisterTests.answers).status == 0)
        cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        let login = try cli.run(["login", "--server", front.url, "--client-id", "devtrust-app", "--non-interactive"] + SignInTests.basicAnswers)
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("HTTP/2") || login.stderr.contains("h2"), "not HTTP/2: \(login.stderr)")
        let records = try server.get("/api/signin-records").arrayValue?.compactMap(\.objectValue) ?? []
        #expect(records.first?["accepted"] == .bool(true), "\(records)")
        #expect(!login.stderr.contains("eyJ"), "a token or its header: \(login.stderr)")
        #expect(!login.stderr.contains("correct horse") && !login.stderr.contains("correct+horse"))
        #expect(login.stderr.lowercased().contains("x-device-token: [redacted]"), "\(login.stderr)")
        let accessToken = try cli.run("access-token").output
        #expect(accessToken.count > 20 && !login.stderr.contains(accessToken))
    }

    /// A proxy's password (curl names the proxy variable it uses), a scheme-relative Location
    /// with a password, a folded header, a C1 control: none reaches the terminal.
    @Test func proxiesFoldedHeadersAndOddLocationsAreRedacted() throws {
        var setup = try SignInTests.Setup(["--fault", "redirect-scheme-relative", "--fault-on", "signin", "--fault-at", "1"], register: false)
        setup.cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        let redirected = try setup.login()
        #expect(redirected.status == 5, "\(redirected)")
        #expect(redirected.stderr.contains("a redirect to //[redacted]@elsewhere.example/cb;"), "\(redirected.stderr)")
        #expect(redirected.stderr.contains("devtrust: http: < (a folded header line, not shown)"), "\(redirected.stderr)")
        #expect(!redirected.stderr.contains("SECRET") && !redirected.stderr.unicodeScalars.contains { $0.value == 0x9B }, "\(redirected.stderr)")

        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        cli.extraEnvironment["https_proxy"] = "http://proxyuser:PROXY-SECRET-4711@127.0.0.1:9"
        let proxied = try cli.run("login", "--device-code", "--server", "https://idp.example", "--client-id", "c")
        #expect(proxied.status == 5, "\(proxied)")
        #expect(proxied.stderr.contains("[redacted]@127.0.0.1:9") && !proxied.stderr.contains("PROXY-SECRET"), "\(proxied.stderr)")
    }
}

/// devtrust with an older libcurl: Tests/Interop/older_libcurl.c is the real
/// libcurl reporting another version and, below 7.85, refusing
/// CURLOPT_PROTOCOLS_STR as those versions do; below 7.62 without the URL
/// API (curl_url), as those versions are.
@Suite(.enabled(if: ReferenceServer.shouldRun && ExternalTool.cc.shouldRun)) struct OlderLibcurlTests {
    static let realLibcurl = ["/usr/lib/x86_64-linux-gnu/libcurl.so.4", "/usr/lib/aarch64-linux-gnu/libcurl.so.4", "/usr/lib64/libcurl.so.4",
                              "/usr/lib/libcurl.so.4"].first { FileManager.default.fileExists(atPath: $0) }

    struct Setup {
        let directory = TemporaryDirectory()
        let server: ReferenceServer
        var cli: DevtrustBinary

        init(version: String) throws {
            let real = try #require(OlderLibcurlTests.realLibcurl, "no libcurl.so.4 found")
            mkdir(directory.file("lib"), 0o700)
            let hasURLAPI = !version.split(separator: ".").compactMap { Int($0) }.lexicographicallyPrecedes([7, 62])
            let built = try ExternalTool.cc.run(["-shared", "-fPIC", "-DREAL_LIBCURL=\"\(real)\""] + (hasURLAPI ? [] : ["-DWITHOUT_URL_API"])
                                                + ["-o", directory.file("lib/libcurl.so.4"), Repository.path("Tests/Interop/older_libcurl.c"), "-ldl"])
            try #require(built.status == 0, "\(built)")
            server = try ReferenceServer()
            cli = DevtrustBinary(keystore: directory.file("ks"))
            cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
            cli.extraEnvironment["LD_LIBRARY_PATH"] = directory.file("lib")
            cli.extraEnvironment["OLDER_LIBCURL_VERSION"] = version
            cli.extraEnvironment["OLDER_LIBCURL_LOG"] = directory.file("libcurl.log")
            #expect(try cli.run("init", "--backend", "software", "-q").status == 0)
        }

        var log: [String] {
            ((try? String(contentsOfFile: directory.file("libcurl.log"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
    }

    @Test(arguments: ["7.76.1", "7.81.0"])
    func requestsWorkWithTheProtocolsBitMask(version: String) throws {
        let setup = try Setup(version: version)
        let result = try setup.cli.run(["register", "--server", setup.server.url, "--non-interactive"] + RegisterTests.answers)
        #expect(result.status == 0, "\(result)")
        #expect(try setup.server.devices().count == 1)
        // Every request restricted protocols to http and https (CURLPROTO_HTTP | CURLPROTO_HTTPS), never by name.
        #expect(!setup.log.isEmpty && setup.log.allSatisfy { $0 == "CURLOPT_PROTOCOLS 3" }, "\(setup.log)")
    }

    @Test func aNewerLibcurlIsAskedByName() throws {
        let setup = try Setup(version: "7.85.0")
        let result = try setup.cli.run(["register", "--server", setup.server.url, "--non-interactive"] + RegisterTests.answers)
        #expect(result.status == 0, "\(result)")
        #expect(!setup.log.isEmpty && setup.log.allSatisfy { $0 == "CURLOPT_PROTOCOLS_STR" }, "\(setup.log)")
    }

    @Test func aLibcurlTooOldIsNamedWithWhatIsNeeded() throws {
        let setup = try Setup(version: "7.61.1")
        let result = try setup.cli.run(["register", "--server", setup.server.url, "--non-interactive"] + RegisterTests.answers)
        #expect(result.status == 5, "\(result)")
        #expect(result.stderr.contains("devtrust: error: libcurl 7.61.1 is too old: devtrust needs libcurl 7.63.0 or later"), "\(result.stderr)")
        #expect(result.stderr.contains("install a newer libcurl4"))
        #expect(try setup.server.devices().isEmpty)
    }
}
