@testable import DevtrustBrowser
@testable import DevtrustCLI
import DevtrustCore
import DevtrustEncoding
import DevtrustKeys
import DevtrustTestSupport
import Foundation
import Testing

/// A device with a software key registered with a reference server, at its root
/// and in its tenant acme, and `devtrust native-host` run over framed messages
/// as a browser runs it (the binary, with the caller's arguments only).
struct RegisteredHostDevice {
    let fixture: ReferenceServerFixture<DevtrustBinary>
    var cli: DevtrustBinary { fixture.cli }
    var server: String { fixture.server.url }
    var rootEndpoint: String { server + "/oauth2/authorize" }
    var tenantEndpoint: String { server + "/t/acme/oauth2/authorize" }

    init(tenant: Bool = true, serverArguments: [String] = []) throws {
        fixture = try ReferenceServerFixture(serverArguments, register: true)
        if tenant {
            let registered = try cli.run(["register", "--server", server + "/t/acme", "--non-interactive", "-q"] + ReferenceServer.registrationAnswers)
            guard registered.status == 0 else { throw FixtureError("register in tenant acme failed: \(registered)") }
        }
    }

    /// The registration ids: at the root, in acme.
    func registrationIDs() throws -> (root: String, tenant: String?) {
        let records = try fixture.registrations().compactMap(\.objectValue)
        let id = { (server: String) in records.first { $0["server"]?.stringValue == server }?["registrationId"]?.stringValue }
        guard let root = id(server) else { throw FixtureError("no registration with \(server)") }
        return (root, id(server + "/t/acme"))
    }

    /// The host with `messages` on stdin, then end of input.
    func host(_ messages: [JSONValue], caller: [String] = [NativeMessaging.chromiumCaller], environment extra: [String: String] = [:]) throws -> NativeHostRun {
        try NativeHostRun(cli.path, caller, environment: cli.environment.merging(extra) { $1 }, input: messages.flatMap(NativeMessaging.frame))
    }

    /// The host with these bytes on stdin.
    func host(bytes: [UInt8], caller: [String] = [NativeMessaging.chromiumCaller]) throws -> NativeHostRun {
        try NativeHostRun(cli.path, caller, environment: cli.environment, input: bytes)
    }
}

/// What PyJWT makes of device tokens, against the device's public key.
struct CheckedDeviceToken {
    let header: JSONObject
    let claims: JSONObject

    static func check(_ tokens: [String], publicKey: String) throws -> [CheckedDeviceToken?] {
        let request = JSONValue.object(["spki": .string(publicKey), "tokens": .array(tokens.map(JSONValue.string))])
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/check_device_tokens.py")], stdin: JSONWriter.bytes(request))
        guard result.status == 0, let list = try JSONParser.parse(result.stdout).arrayValue else { throw FixtureError("check_device_tokens.py: \(result)") }
        return list.map { item in
            guard let item = item.objectValue, item["valid"] == .bool(true), let header = item["header"]?.objectValue,
                  let claims = item["claims"]?.objectValue else { return nil }
            return CheckedDeviceToken(header: header, claims: claims)
        }
    }
}

@Suite(.enabled(if: ReferenceServer.shouldRun)) struct NativeHostTests {
    static let config: JSONValue = .object(["type": .string("config")])

    static func token(_ url: String, id: Int? = nil) -> JSONValue {
        var request: JSONObject = ["type": .string("token"), "url": .string(url)]
        if let id { request["id"] = .integer(id) }
        return .object(request)
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// A host manifest for devtrust's host, as `browser install` writes it, whose path Firefox passes.
    static func firefoxManifest(in directory: TemporaryDirectory) -> String {
        directory.write("native-messaging-hosts/dev.devtrust.host.json",
                        #"{"name":"dev.devtrust.host","path":"/usr/bin/devtrust","type":"stdio","allowed_extensions":["host@devtrust.dev"]}"#)
    }

    @Test func configListsExactlyTheRegisteredEndpointsAndEchoesTheID() throws {
        let device = try RegisteredHostDevice()
        let run = try device.host([.object(["type": .string("config"), "id": .string("request-1")]), .object(["type": .string("config"), "id": .integer(7)])])
        #expect(run.status == 0 && !run.signaled && run.rest.isEmpty && run.replies.count == 2, "\(run)")
        let endpoints = [device.rootEndpoint, device.tenantEndpoint].sorted()
        let reply = try #require(run.replies.first ?? nil)
        #expect(reply["type"] == .string("config") && reply["version"] == .integer(1) && reply["id"] == .string("request-1"), "\(run)")
        #expect(reply["authorizationEndpoints"] == .array(endpoints.map(JSONValue.string)), "\(run)")
        let revision = Hex.encode(SHA256.hash(Array(endpoints.joined(separator: "\n").utf8)).bytes)
        #expect(reply["revision"] == .string(revision), "\(run)")
        #expect(run.replies[1]?["id"] == .integer(7) && run.replies[1]?["revision"] == .string(revision), "\(run)")
        // The same answer when Firefox starts the host.
        let firefox = try device.host([Self.config], caller: NativeMessaging.firefoxCaller(manifest: Self.firefoxManifest(in: device.fixture.directory)))
        #expect(firefox.status == 0 && firefox.replies.first??["authorizationEndpoints"] == reply["authorizationEndpoints"], "\(firefox)")
    }

    /// No key, or a key that is not registered: an empty list (and a revision of it), not an error.
    @Test func configIsEmptyForADeviceThatIsNotRegistered() throws {
        let emptyRevision = Hex.encode(SHA256.hash([UInt8]()).bytes)
        for softwareKey in [false, true] {
            let device = try DeviceFixture<DevtrustBinary>(softwareKey: softwareKey)
            let run = try NativeHostRun(device.cli.path, [NativeMessaging.chromiumCaller], environment: device.cli.environment,
                                        input: NativeMessaging.frame(Self.config))
            #expect(run.status == 0 && run.replies.count == 1, "\(run)")
            #expect(run.replies.first??["authorizationEndpoints"] == .array([]) && run.replies.first??["revision"] == .string(emptyRevision), "\(run)")
        }
    }

    /// Tokens for the registered endpoints, checked by PyJWT against the device's key and by the
    /// server that registered it: ES256, the registration's deviceId, a new jti and the current iat each time.
    @Test func tokensForARegisteredEndpointAreFreshAndVerifyIndependently() throws {
        let device = try RegisteredHostDevice()
        let ids = try device.registrationIDs()
        let urls = [device.rootEndpoint + "?client_id=web&response_type=code&state=s1", device.rootEndpoint + "?client_id=web&state=s2",
                    device.tenantEndpoint + "?client_id=web", device.rootEndpoint]
        let before = Self.now()
        let run = try device.host(urls.enumerated().map { Self.token($1, id: $0) })
        let after = Self.now()
        #expect(run.status == 0 && run.replies.count == urls.count, "\(run)")
        let tokens = run.replies.compactMap { $0?["token"]?.stringValue }
        try #require(tokens.count == urls.count, "\(run)")
        for (index, reply) in run.replies.enumerated() {
            #expect(reply?["type"] == .string("token") && reply?["id"] == .integer(index), "\(run)")
        }
        let checked = try CheckedDeviceToken.check(tokens, publicKey: try device.cli.run("pubkey").output)
        let expectedIDs = [ids.root, ids.root, ids.tenant, ids.root]
        for (token, expectedID) in zip(checked, expectedIDs) {
            let token = try #require(token, "PyJWT refused a token: \(tokens)")
            #expect(token.header["alg"] == .string("ES256") && token.header["deviceId"] == expectedID.map(JSONValue.string), "\(token.header)")
            let iat = try #require(token.claims["iat"]?.int64Value)
            #expect(iat >= before - 1 && iat <= after + 1, "iat \(iat), run between \(before) and \(after)")
            #expect(token.claims["keyProtection"] == .string("software") && token.claims["platform"] == .string("linux"), "\(token.claims)")
        }
        let jtis = checked.compactMap { $0?.claims["jti"]?.stringValue }
        #expect(jtis.count == tokens.count && Set(jtis).count == jtis.count, "\(jtis)")
        // The server that registered the device accepts each, for its device (each jti once).
        for (token, expectedID) in zip(tokens, expectedIDs) {
            let check = try device.fixture.deviceCheck(token)
            #expect(check["accepted"] == .bool(true) && check["strict"] == .bool(true) && check["deviceId"] == expectedID.map(JSONValue.string), "\(check)")
        }
        // Another run, another jti.
        let again = try device.host([Self.token(device.rootEndpoint)])
        let nextToken = try #require(again.replies.first??["token"]?.stringValue, "\(again)")
        let next = try #require(try CheckedDeviceToken.check([nextToken], publicKey: try device.cli.run("pubkey").output).first ?? nil)
        #expect(next.claims["jti"].flatMap(\.stringValue).map { !jtis.contains($0) } == true)
    }

    /// Exactly the endpoint: scheme, host, port and path. What browsers normalise anyway (the
    /// scheme's and host's case, a default port) is the same endpoint; anything else is another.
    @Test func tokensAreRefusedForAnyOtherURL() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let server = device.server
        let port = String(server.split(separator: ":").last!)
        let hostPort = "127.0.0.1:" + port
        let refused = [
            "http://127.0.0.1:1/oauth2/authorize",                              // another origin: port
            "http://127.0.0.2:\(port)/oauth2/authorize",                        // another origin: host
            "http://localhost:\(port)/oauth2/authorize",                        // the same machine by another name
            "https://\(hostPort)/oauth2/authorize",                             // another scheme
            "ftp://\(hostPort)/oauth2/authorize",
            "chrome-extension://gmoaoppoddchekmljfbfbbcndbaiflmf/oauth2/authorize",
            "http://\(hostPort)/oauth2/authorize/",                             // other paths
            "http://\(hostPort)/oauth2/authorizex",
            "http://\(hostPort)/OAuth2/authorize",
            "http://\(hostPort)/oauth2/token",
            "http://\(hostPort)/t/acme/oauth2/authorize",                       // a tenant this device is not registered in
            "http://\(hostPort)/x/../oauth2/authorize",
            "http://\(hostPort)/oauth2/./authorize",
            "http://\(hostPort)/oauth2/%2e/authorize",
            "http://\(hostPort)//oauth2/authorize",
            "http://\(hostPort)/oauth2%2Fauthorize",
            "http://alice@\(hostPort)/oauth2/authorize",                         // userinfo
            "http://alice:secret@\(hostPort)/oauth2/authorize",
            "http://\(hostPort)@127.0.0.2:\(port)/oauth2/authorize",
            "http://127.0.0.1:0\(port)0/oauth2/authorize",                      // port twists
            "http://127.0.0.1:0\(port)/oauth2/authorize",
            "http://127.0.0.1:+\(port)/oauth2/authorize",
            "http://127.0.0.1:\(port):\(port)/oauth2/authorize",
            "http://127.0.0.1:/oauth2/authorize",
            "http://127.0.0.1/oauth2/authorize",
            "http://\(hostPort)/oauth2/authorize#fragment",                      // a fragment
            "http://\(hostPort)/oauth2/authorize?x=1#https://\(hostPort)/oauth2/authorize",
            "http://\(hostPort)\\@evil.example/oauth2/authorize",
            "http://\(hostPort)/oauth2/authorize extra",
            "http://\(hostPort)/oauth2/authorize?client_id=a&device_token=eyJ",    // a token already: never a second
            "http://\(hostPort)/oauth2/authorize?device%5Ftoken",
            " http://\(hostPort)/oauth2/authorize",
            "http://\(hostPort)",
            "//\(hostPort)/oauth2/authorize",
            "/oauth2/authorize",
            "",
        ]
        let accepted = ["HTTP://\(hostPort)/oauth2/authorize?client_id=a", "http://127.0.0.1:\(port)/oauth2/authorize?", "http://127.0.0.1:\(port)/oauth2/authorize?client_id=a&device_tokens=x"]
        let run = try device.host((refused + accepted).map { Self.token($0) } + [.object(["type": .string("token"), "url": .integer(1)])])
        #expect(run.status == 0 && run.replies.count == refused.count + accepted.count + 1, "\(run)")
        for (url, reply) in zip(refused, run.replies) {
            #expect(reply?["type"] == .string("error") && reply?["error"] == .string("not_allowed") && reply?["token"] == nil, "\(url): \(String(describing: reply))")
        }
        for (url, reply) in zip(accepted, run.replies.dropFirst(refused.count)) {
            #expect(reply?["type"] == .string("token"), "\(url): \(String(describing: reply))")
        }
        #expect(run.replies.last??["error"] == .string("bad_request"), "\(run)")
        // Each refusal is said in the host's log (the browser's), without the query.
        #expect(run.stderr.contains("not_allowed") && !run.stderr.contains("x=1"), "\(run.stderr)")
    }

    /// The caller is the extension the browser names: devtrust's, or one the configuration adds.
    @Test func onlyTheAllowedExtensionsAreServed() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let request = [Self.token(device.rootEndpoint), Self.config]
        let manifest = Self.firefoxManifest(in: device.fixture.directory)
        for caller in [["chrome-extension://abcdefghijklmnopabcdefghijklmnop/"], [manifest, "evil@example.org"],
                       [manifest, "{01234567-89ab-cdef-0123-456789abcdef}"], ["chrome-extension://abcdefghijklmnopabcdefghijklmnop/", "--parent-window=0"]] {
            let run = try device.host(request, caller: caller)
            #expect(run.status == 1 && !run.signaled && run.replies.count == 1, "\(caller): \(run)")
            #expect(run.replies.first??["error"] == .string("not_allowed") && run.stderr.contains("not_allowed"), "\(caller): \(run)")
        }
        // Not a browser's arguments at all: a usage error, before any input is read.
        for caller in [[], ["chrome-extension://gmoaoppoddchekmljfbfbbcndbaiflmf"], ["https://example.org/"], ["chrome-extension://host@devtrust.dev/"],
                       [manifest, "gmoaoppoddchekmljfbfbbcndbaiflmf"], ["/usr/lib/mozilla/native-messaging-hosts/absent.json", "host@devtrust.dev"]] {
            let run = try NativeHostRun(device.cli.path, ["native-host"] + caller, environment: device.cli.environment, input: NativeMessaging.frame(Self.config))
            #expect(run.status == 2 && run.replies.isEmpty && run.stderr.contains("started by a browser"), "\(caller): \(run)")
        }
        // The configuration's extension IDs are served too.
        let config = device.fixture.directory.write("config.json", #"{"browser":{"extensionIds":["abcdefghijklmnopabcdefghijklmnop","sso@acme.example"]}}"#)
        for caller in [["chrome-extension://abcdefghijklmnopabcdefghijklmnop/"], [manifest, "sso@acme.example"]] {
            let run = try device.host(request, caller: caller, environment: ["DEVTRUST_CONFIG": config])
            #expect(run.status == 0 && run.replies.first??["type"] == .string("token") && run.replies.last??["type"] == .string("config"), "\(caller): \(run)")
        }
        // `devtrust native-host ORIGIN` is the same host as the browser's launch of the binary.
        let explicit = try NativeHostRun(device.cli.path, ["native-host", NativeMessaging.chromiumCaller], environment: device.cli.environment,
                                         input: NativeMessaging.frame(Self.token(device.rootEndpoint)))
        #expect(explicit.status == 0 && explicit.replies.first??["type"] == .string("token"), "\(explicit)")
    }

    /// Started from a terminal by mistake, the host says what it is for instead of waiting for frames.
    @Test func fromATerminalTheHostRefusesInsteadOfWaiting() throws {
        let device = try DeviceFixture<DevtrustBinary>(softwareKey: false)
        let session = try PseudoTerminal.run(device.cli, [NativeMessaging.chromiumCaller], steps: [])
        #expect(!session.timedOut && session.exit == 2 && session.transcript.contains("not a terminal"), "\(session.transcript)")
    }

    /// connectNative: requests and replies on one connection, each reply before the next request
    /// is sent, and the host gone once the browser closes its stdin.
    @Test func aSessionAnswersEachRequestAndEndsWhenStdinCloses() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let session = try NativeHostSession(device.cli.path, [NativeMessaging.chromiumCaller], environment: device.cli.environment)
        session.send(NativeMessaging.frame(Self.config))
        let config = session.receive()
        #expect(config?["authorizationEndpoints"] == .array([.string(device.rootEndpoint)]), "\(String(describing: config)) \(session.stderr)")
        var jtis = Set<String>()
        for index in 0..<3 {
            session.send(NativeMessaging.frame(Self.token(device.rootEndpoint, id: index)))
            let reply = session.receive()
            #expect(reply?["id"] == .integer(index), "\(String(describing: reply))")
            if let token = reply?["token"]?.stringValue, let payload = token.split(separator: ".").dropFirst().first,
               let claims = (try? Base64URL.decode(payload)).flatMap({ try? JSONParser.parse($0).objectValue }) {
                jtis.insert(claims["jti"]?.stringValue ?? "")
            }
        }
        #expect(jtis.count == 3 && !jtis.contains(""), "\(jtis)")
        // A registration made while the connection is open is in the next config (the extension's refresh).
        let registered = try device.cli.run(["register", "--server", device.server + "/t/acme", "--non-interactive", "-q"] + ReferenceServer.registrationAnswers)
        #expect(registered.status == 0, "\(registered)")
        session.send(NativeMessaging.frame(Self.config))
        #expect(session.receive()?["authorizationEndpoints"] == .array([.string(device.rootEndpoint), .string(device.tenantEndpoint)]))
        session.closeInput()
        let ended = session.finish()
        #expect(ended?.status == 0 && ended?.signaled == false, "\(String(describing: ended)) \(session.stderr)")
    }

    /// The host's token, like `devtrust token`, stays below HTTP: without sign-in profiles
    /// to discover, neither libcurl nor ICU nor (for a software key) the TSS is loaded.
    @Test func aTokenLoadsNeitherLibcurlNorICUNorTheTSS() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let run = try device.host([Self.config, Self.token(device.rootEndpoint)], environment: ["LD_DEBUG": "libs"])
        #expect(run.status == 0 && run.replies.last??["type"] == .string("token"), "\(run)")
        let libraries = run.stderr.split(separator: "\n").compactMap { line in line.range(of: "calling init: ").map { String(line[$0.upperBound...]) } }
        #expect(libraries.contains { $0.contains("libc.so") }, "the trace shows no libraries: \(run.stderr)")
        #expect(!libraries.contains { $0.contains("curl") || $0.contains("icu") || $0.contains("Foundation") || $0.contains("tss2") }, "\(libraries)")
    }

    /// Errors with the key are errors of their own kind, for the extension to log.
    @Test func withoutAKeyOrARegistrationTheTokenErrorSaysWhich() throws {
        let url = "https://idp.example/oauth2/authorize"
        for (softwareKey, error) in [(false, "no_key"), (true, "not_registered")] {
            let device = try DeviceFixture<DevtrustBinary>(softwareKey: softwareKey)
            let run = try NativeHostRun(device.cli.path, [NativeMessaging.chromiumCaller], environment: device.cli.environment,
                                        input: NativeMessaging.frame(Self.token(url)))
            #expect(run.status == 0 && run.replies.first??["error"] == .string(error) && run.replies.first??["message"]?.stringValue?.isEmpty == false, "\(run)")
        }
        // A configuration that cannot be used: said to devtrust's extension, and the host goes on.
        let device = try RegisteredHostDevice(tenant: false)
        let broken = device.fixture.directory.write("broken.json", #"{"platform":"#)
        let unconfigured = try device.host([Self.token(device.rootEndpoint), Self.config], environment: ["DEVTRUST_CONFIG": broken])
        #expect(unconfigured.status == 0 && unconfigured.replies.count == 2, "\(unconfigured)")
        #expect(unconfigured.replies.allSatisfy { $0?["error"] == .string("config") && $0?["message"]?.stringValue?.contains(broken) == true }, "\(unconfigured)")
        // A keystore that is unsafe to use: a keystore error, not a token.
        chmod(device.cli.keystore, 0o777)
        defer { chmod(device.cli.keystore, 0o700) }
        let run = try device.host([Self.token(device.rootEndpoint), Self.config])
        #expect(run.replies.allSatisfy { $0?["error"] == .string("keystore") }, "\(run)")
    }

    /// Frames a browser would never send, and input that stops anywhere: an error reply (where
    /// the host can still write one) and an exit of its own, never a crash or a hang.
    @Test func badInputEndsWithAnErrorReplyNeverACrash() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let config = NativeMessaging.frame(Self.config)
        let maximum = NativeMessagingChannel.maximumIncomingBytes
        let largest = Array(#"{"type":"config","pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: maximum - 26) + Array(#""}"#.utf8)
        // (input, replies before the last, the last reply's error or nil for none, exit status)
        let cases: [(String, [UInt8], Int, String?, Int32)] = [
            ("nothing", [], 0, nil, 0),
            ("end inside the length", [7, 0], 0, "bad_request", 1),
            ("end after a message, inside the next length", config + [7], 1, "bad_request", 1),
            ("end inside the message", NativeMessaging.length(100) + Array(#"{"type":"#.utf8), 0, "bad_request", 1),
            ("length 2^32 - 1", NativeMessaging.length(UInt32.max) + [0x7B], 0, "bad_request", 1),
            ("1 MiB and a byte", NativeMessaging.length(UInt32(maximum + 1)) + [UInt8](repeating: 0x20, count: 16), 0, "bad_request", 1),
            ("empty message", NativeMessaging.length(0), 0, "bad_request", 1),
            ("invalid UTF-8", NativeMessaging.frame(bytes: [0x7B, 0x22, 0xC3, 0x28, 0x22, 0x3A, 0x31, 0x7D]), 0, "bad_request", 1),
            ("a lone surrogate", NativeMessaging.frame(#"{"type":"\ud800"}"#), 0, "bad_request", 1),
            ("an array", NativeMessaging.frame("[]"), 0, "bad_request", 1),
            ("a string", NativeMessaging.frame(#""config""#), 0, "bad_request", 1),
            ("null", NativeMessaging.frame("null"), 0, "bad_request", 1),
            ("trailing data", NativeMessaging.frame(#"{"type":"config"} {}"#), 0, "bad_request", 1),
            ("deep nesting", NativeMessaging.frame(String(repeating: "[", count: 100_000)), 0, "bad_request", 1),
            ("deep nesting in an object", NativeMessaging.frame(#"{"type":"config","x":"# + String(repeating: "{\"a\":", count: 5_000) + "1" + String(repeating: "}", count: 5_000) + "}"), 0, "bad_request", 1),
            ("a duplicate key", NativeMessaging.frame(#"{"type":"config","type":"token"}"#), 0, "bad_request", 1),
            ("a 1 MiB message is read", NativeMessaging.frame(bytes: largest) + config, 2, nil, 0),
            // Well-formed JSON with the wrong contents: an error reply, and the host goes on.
            ("no type", NativeMessaging.frame("{}") + config, 2, nil, 0),
            ("unknown type", NativeMessaging.frame(#"{"type":"sign","data":"x"}"#) + config, 2, nil, 0),
            ("type not a string", NativeMessaging.frame(#"{"type":["config"]}"#) + config, 2, nil, 0),
            ("token without url", NativeMessaging.frame(#"{"type":"token"}"#) + config, 2, nil, 0),
            ("an id too long to echo", NativeMessaging.frame(#"{"type":"config","id":""# + String(repeating: "i", count: 300) + #""}"#) + config, 2, nil, 0),
            ("an id that is an object", NativeMessaging.frame(#"{"type":"config","id":{}}"#) + config, 2, nil, 0),
        ]
        for (name, input, before, lastError, status) in cases {
            let run = try device.host(bytes: input)
            #expect(!run.signaled && !run.timedOut && run.status == status && run.rest.isEmpty, "\(name): \(run)")
            #expect(run.replies.allSatisfy { $0 != nil }, "\(name): \(run)")
            #expect(run.replies.count == before + (lastError == nil ? 0 : 1), "\(name): \(run)")
            if let lastError {
                #expect(run.replies.last??["type"] == .string("error") && run.replies.last??["error"] == .string(lastError), "\(name): \(run)")
            }
            if status == 0 && before > 1 {
                #expect(run.replies.last??["type"] == .string("config"), "\(name): \(run)")
            }
            if name.hasPrefix("no type") || name.hasPrefix("unknown") || name.hasPrefix("type not") || name.hasPrefix("token without") || name.hasPrefix("an id") {
                #expect(run.replies.first??["error"] == .string("bad_request") && run.replies.last??["type"] == .string("config"), "\(name): \(run)")
            }
        }
    }

    /// Random frames from a seeded generator (the seed is printed on failure): whatever the
    /// input, every reply is a whole message holding a JSON object, and the host ends by itself.
    @Test func randomFramesNeverCrashTheHost() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let pieces: [[UInt8]] = [
            NativeMessaging.frame(Self.config), NativeMessaging.frame(Self.token(device.rootEndpoint)), NativeMessaging.frame(Self.token("https://x/")),
            NativeMessaging.frame("{}"), NativeMessaging.frame("[[[[[[[["), NativeMessaging.frame(bytes: [0xFF, 0xFE]), NativeMessaging.length(UInt32.max),
            NativeMessaging.length(3), [0x7B], Array(#""type":"config"}"#.utf8), [0, 0], NativeMessaging.frame(#"{"type":"token","url":"\u0000"}"#),
        ]
        for round in 0..<24 {
            var input = [UInt8]()
            for _ in 0..<(1 + random.next() % 5) {
                if random.next() % 4 == 0 {
                    input += (0..<(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                } else {
                    input += pieces[Int(random.next() % UInt64(pieces.count))]
                }
            }
            let run = try device.host(bytes: input)
            #expect(!run.signaled && !run.timedOut && (run.status == 0 || run.status == 1), "seed \(seed), round \(round), input \(input): \(run)")
            #expect(run.rest.isEmpty && run.replies.allSatisfy { $0?["type"] != nil }, "seed \(seed), round \(round), input \(input): \(run)")
        }
    }

    /// Many more random inputs, in-process (the same command line, with a capturing terminal):
    /// the framing and the request checks, against a device with a key and no registration.
    @Test func randomInputInProcessAlwaysGetsWholeReplies() throws {
        let device = try DeviceFixture<InProcessCLI>()
        let variables = device.cli.environment.filter { CommandEnvironment.knownVariables.contains($0.key) }
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let words: [[UInt8]] = [Array(#"{"type":"#.utf8), Array(#""config""#.utf8), Array(#""token""#.utf8), Array(#","url":"#.utf8),
                                Array(#""https://idp/oauth2/authorize""#.utf8), Array(#","id":"#.utf8), Array("}".utf8), Array("[".utf8),
                                Array("\"\\ud800\"".utf8), [0xC0, 0x80], [0]]
        var seen = [String: Int]()
        for round in 0..<400 {
            var input = [UInt8]()
            for _ in 0..<(1 + random.next() % 4) {
                var body = [UInt8]()
                switch random.next() % 4 {
                case 0: body = Array(#"{"type":"config","id":\#(random.next() % 100)}"#.utf8)
                case 1: body = Array(#"{"type":"token","url":"https://idp\#(random.next() % 2 == 0 ? "" : "\\u0000")/oauth2/authorize"}"#.utf8)
                default: for _ in 0..<(random.next() % 8) { body += words[Int(random.next() % UInt64(words.count))] }
                }
                switch random.next() % 5 {
                case 0: input += NativeMessaging.length(UInt32(truncatingIfNeeded: random.next())) + body
                case 1: input += NativeMessaging.frame(bytes: body).prefix(Int(random.next() % UInt64(body.count + 5)))
                default: input += NativeMessaging.frame(bytes: body)
                }
            }
            let terminal = CapturingTerminal(stdin: input)
            let status = DevtrustCommandLine.run([NativeMessaging.chromiumCaller], environment: CommandEnvironment(variables: variables, terminal: terminal))
            let (replies, rest) = NativeMessaging.messages(in: terminal.outputBytes)
            let context = "seed \(seed), round \(round), input \(input)"
            #expect(status == 0 || status == 1, "\(context): exit \(status), \(terminal.errors)")
            #expect(rest.isEmpty && terminal.output.isEmpty, "\(context)")
            for reply in replies {
                let object = try? JSONParser.parse(reply).objectValue
                #expect(object?["type"] == .string("error") || object?["type"] == .string("config"), "\(context): \(String(decoding: reply, as: UTF8.self))")
                seen[object?["error"]?.stringValue ?? object?["type"]?.stringValue ?? "?", default: 0] += 1
            }
        }
        // The rounds reach past the framing: requests answered, refused and ended.
        #expect(["config", "bad_request", "not_registered"].allSatisfy { seen[$0, default: 0] > 0 }, "seed \(seed): \(seen)")
    }

    /// The TPM backend, once: the host signs with the key in the TPM whose TCTI was recorded with it.
    @Test(.enabled(if: Swtpm.shouldRun)) func aTPMKeySignsTheHostsTokens() throws {
        let setup = try SwtpmDeviceFixture()
        let server = try ReferenceServer()
        // The TCTI recorded with the key, not one in the browser's environment.
        #expect(try setup.cli.run("init", "--backend", "tpm", "--tcti", setup.tpm.tcti, "-q").status == 0)
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = ""
        let registered = try cli.run(["register", "--server", server.url, "--non-interactive", "-q"] + ReferenceServer.registrationAnswers)
        #expect(registered.status == 0, "\(registered)")
        let run = try NativeHostRun(cli.path, [NativeMessaging.chromiumCaller], environment: cli.environment,
                                    input: [Self.token(server.url + "/oauth2/authorize"), Self.token(server.url + "/oauth2/authorize")].flatMap(NativeMessaging.frame))
        let tokens = run.replies.compactMap { $0?["token"]?.stringValue }
        #expect(run.status == 0 && tokens.count == 2, "\(run)")
        let checked = try CheckedDeviceToken.check(tokens, publicKey: try cli.run("pubkey").output)
        #expect(checked.allSatisfy { $0?.claims["keyProtection"] == .string("tpm") }, "\(checked.map { $0?.claims })")
        #expect(Set(checked.compactMap { $0?.claims["jti"]?.stringValue }).count == 2)
    }

    /// Sign-in profiles add their authorization endpoints: a configured one, or the discovery
    /// document's, when the device is registered with that server; others are left out, and a
    /// discovery that fails costs only that profile.
    @Test func signInProfilesAddTheirEndpoints() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let server = device.server
        let config = device.fixture.directory.write("config.json", """
        {"signIn":{"profiles":{
          "custom":{"discovery":"\(server)/oauth2/token/.well-known/openid-configuration","clientId":"web","endpoints":{"authorization":"\(server)/custom/authorize"}},
          "discovered":{"discovery":"\(server)/oauth2/token/.well-known/openid-configuration","clientId":"web"},
          "elsewhere":{"server":"https://idp.example","clientId":"web"},
          "unreachable":{"discovery":"http://127.0.0.1:1/.well-known/openid-configuration","clientId":"web"}}}}
        """)
        let run = try device.host([Self.config, Self.token(server + "/custom/authorize?client_id=web")], environment: ["DEVTRUST_CONFIG": config])
        #expect(run.status == 0 && run.replies.count == 2, "\(run)")
        #expect(run.replies.first??["authorizationEndpoints"] == .array([.string(server + "/custom/authorize"), .string(device.rootEndpoint)]), "\(run)")
        let token = try #require(run.replies.last??["token"]?.stringValue, "\(run)")
        #expect(try device.fixture.deviceCheck(token)["deviceId"] == .string(try device.registrationIDs().root))
        // A discovery document on an origin this device is not registered with is not even fetched.
        #expect(!run.stderr.contains("sign-in profile unreachable"), "\(run.stderr)")
    }

    /// A profile of a registered server whose configured endpoint is on another origin gets no token
    /// there (the device is registered with the server, not with wherever its configuration points).
    @Test func aProfilesEndpointOnAnotherOriginIsLeftOut() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let config = device.fixture.directory.write("config.json", """
        {"signIn":{"profiles":{"evil":{"server":"\(device.server)","clientId":"web","endpoints":{"authorization":"https://evil.example/authorize"}},
          "own":{"server":"\(device.server)","clientId":"web","endpoints":{"authorization":"\(device.server)/own/authorize"}}}}}
        """)
        let run = try device.host([Self.config, Self.token("https://evil.example/authorize?client_id=web"), Self.token(device.server + "/own/authorize")],
                                  environment: ["DEVTRUST_CONFIG": config])
        #expect(run.status == 0 && run.replies.count == 3, "\(run)")
        #expect(run.replies[0]?["authorizationEndpoints"] == .array([.string(device.rootEndpoint), .string(device.server + "/own/authorize")]), "\(run)")
        #expect(run.replies[1]?["error"] == .string("not_allowed") && run.replies[1]?["token"] == nil, "\(run)")
        #expect(run.replies[2]?["type"] == .string("token"), "\(run)")
    }

    /// Discovery documents of a registered server that does not answer: one reply spends at most
    /// the host's budget (5 s) on all of them together, each a share, so a server that answers still
    /// gets its turn; what was learnt is cached (a failure for a minute), and a token takes the cache's
    /// answer without a request (no libcurl loaded).
    @Test func discoveryIsBoundedPerReplyAndCached() throws {
        let device = try RegisteredHostDevice(tenant: false)
        // A second server the device is registered with, then gone, its port held by a listener that never answers.
        let gone = try ReferenceServer()
        let registered = try device.cli.run(["register", "--server", gone.url, "--non-interactive", "-q"] + ReferenceServer.registrationAnswers)
        try #require(registered.status == 0, "\(registered)")
        let port = try #require(UInt16(gone.url.split(separator: ":").last ?? ""))
        gone.stop()
        let silent = try SilentListener(port: port)
        let dead = (0..<4).map { "\"dead\($0)\":{\"discovery\":\"\(gone.url)/p\($0)/.well-known/openid-configuration\",\"clientId\":\"web\"}" }
        let config = device.fixture.directory.write("config.json", """
        {"signIn":{"profiles":{\(dead.joined(separator: ",")),
          "live":{"discovery":"\(device.server)/oauth2/token/.well-known/openid-configuration","clientId":"web"}}}}
        """)
        let environment = ["DEVTRUST_CONFIG": config]
        let goneEndpoint = gone.url + "/oauth2/authorize"
        let elsewhere = Self.token(device.server + "/elsewhere/authorize")

        var started = Date()
        let first = try device.host([Self.config], environment: environment)
        let firstSeconds = Date().timeIntervalSince(started)
        #expect(first.status == 0 && first.replies.first??["authorizationEndpoints"] == .array([goneEndpoint, device.rootEndpoint].sorted().map(JSONValue.string)), "\(first)")
        #expect(firstSeconds < 8, "the config reply took \(firstSeconds) s: \(first.stderr)")
        #expect((0..<4).allSatisfy { first.stderr.contains("sign-in profile dead\($0):") } && !first.stderr.contains("sign-in profile live"), "\(first.stderr)")
        #expect(silent.connections() >= 1)

        // Cached: neither the failures nor the live document are fetched again.
        started = Date()
        let second = try device.host([Self.config, elsewhere], environment: environment.merging(["LD_DEBUG": "libs"]) { $1 })
        let secondSeconds = Date().timeIntervalSince(started)
        #expect(second.status == 0 && second.replies.last??["error"] == .string("not_allowed"), "\(second)")
        #expect(secondSeconds < 3, "the cached replies took \(secondSeconds) s")
        let libraries = second.stderr.split(separator: "\n").compactMap { line in line.range(of: "calling init: ").map { String(line[$0.upperBound...]) } }
        #expect(libraries.contains { $0.contains("libc.so") } && !libraries.contains { $0.contains("curl") }, "\(libraries)")

        // A token for a URL nothing explains, with nothing cached: bounded by the same budget.
        try FileManager.default.removeItem(atPath: device.cli.environment["XDG_CACHE_HOME"]! + "/devtrust/browser-discovery.json")
        started = Date()
        let token = try device.host([elsewhere], environment: environment)
        let tokenSeconds = Date().timeIntervalSince(started)
        #expect(token.status == 0 && token.replies.first??["error"] == .string("not_allowed") && tokenSeconds < 8, "\(tokenSeconds) s: \(token)")
    }

    /// A request of the largest size the host reads, whose URL fills it: the reply repeats a bounded part
    /// of it (a browser refuses a reply over 1 MiB), and the host goes on.
    @Test func aMaximalRequestGetsABoundedReply() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let head = #"{"type":"token","id":1,"url":""# + device.server + "/"
        let tail = #""}"#
        let path = String(repeating: "a", count: NativeMessagingChannel.maximumIncomingBytes - head.utf8.count - tail.utf8.count)
        let request = Array((head + path + tail).utf8)
        try #require(request.count == NativeMessagingChannel.maximumIncomingBytes)
        let run = try device.host(bytes: NativeMessaging.frame(bytes: request) + NativeMessaging.frame(Self.config))
        #expect(run.status == 0 && run.replies.count == 2 && run.rest.isEmpty, "\(run.description.prefix(2000))")
        let message = try #require(run.replies.first??["message"]?.stringValue)
        #expect(run.replies.first??["error"] == .string("not_allowed") && run.replies.first??["id"] == .integer(1))
        #expect(message.count <= NativeHost.maximumMessageCharacters + 1 && message.contains("bytes)"), "\(message.prefix(2000))")
        #expect(run.stderr.utf8.count < 10_000, "\(run.stderr.prefix(2000))")
        #expect(run.replies.last??["type"] == .string("config"))
    }

    /// The limit on a request: 1 MiB is read (badInputEndsWithAnErrorReplyNeverACrash), 1 MiB and a byte
    /// is refused, by its length, whole body given or not.
    @Test func aMessageOverOneMiBIsRefusedByItsLength() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let maximum = NativeMessagingChannel.maximumIncomingBytes
        let body = Array(#"{"type":"config","pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: maximum + 1 - 26) + Array(#""}"#.utf8)
        try #require(body.count == maximum + 1)
        for input in [NativeMessaging.frame(bytes: body), NativeMessaging.frame(bytes: body) + NativeMessaging.frame(Self.config)] {
            let run = try device.host(bytes: input)
            #expect(run.status == 1 && run.replies.count == 1 && run.replies.first??["error"] == .string("bad_request"), "\(run.description.prefix(2000))")
            #expect(run.replies.first??["message"] == .string("a message of \(maximum + 1) bytes; the host reads at most \(maximum)"), "\(run.description.prefix(2000))")
        }
    }

    /// A closed standard output (the browser gone) is said as that, not as an error answered.
    @Test func aClosedOutputIsSaidAsSuch() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let input = device.fixture.directory.write("frames", String(decoding: NativeMessaging.frame(Self.config), as: UTF8.self))
        let run = try ProcessRunner.run("/bin/sh", ["-c", #"exec "$0" "$1" <"$2" >&-"#, device.cli.path, NativeMessaging.chromiumCaller, input],
                                        environment: device.cli.environment)
        #expect(run.status == 1 && run.stderr.contains("standard output is closed") && !run.stderr.contains("said above"), "\(run)")
    }

    /// Command lines that are not a browser's are devtrust's, whatever their shape: a .json path and a word is no Firefox launch
    /// unless the file is devtrust's host manifest and the word an add-on ID.
    @Test func onlyABrowsersExactArgumentsStartTheHost() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let other = device.fixture.directory.write("other.json", #"{"name":"org.example.other"}"#)
        let manifest = Self.firefoxManifest(in: device.fixture.directory)
        for arguments in [["/tmp/whatever.json", "status"], [manifest, "status"], ["chrome-extension://host@devtrust.dev/"],
                          [NativeMessaging.chromiumCaller, "--parent-window=x"], [NativeMessaging.chromiumCaller, "status"]] {
            for input in [[UInt8](), NativeMessaging.frame(Self.config)] {
                let run = try NativeHostRun(device.cli.path, arguments, environment: device.cli.environment, input: input, seconds: 20)
                #expect(run.status == 2 && !run.timedOut && run.replies.isEmpty && run.stderr.contains("unknown command"), "\(arguments): \(run)")
            }
        }
        for arguments in [[manifest, "host@devtrust.dev"], [NativeMessaging.chromiumCaller, "--parent-window=0"]] {
            let run = try NativeHostRun(device.cli.path, arguments, environment: device.cli.environment, input: NativeMessaging.frame(Self.config))
            #expect(run.status == 0 && run.replies.first??["type"] == .string("config"), "\(arguments): \(run)")
        }
        // Firefox's shape with a file that is not devtrust's manifest: said so, not read as a command.
        let refused = try NativeHostRun(device.cli.path, [other, "host@devtrust.dev"], environment: device.cli.environment, input: NativeMessaging.frame(Self.config))
        #expect(refused.status == 2 && refused.replies.isEmpty && refused.stderr.contains("which is not devtrust's host manifest (it names another host)")
                && refused.stderr.contains("devtrust browser install --firefox"), "\(refused)")
    }

    /// Issue 25: the path of a Firefox-shaped command line is read before anything else. A FIFO
    /// there hung devtrust (`timeout 5` gave 124); a directory, a device or a link to a FIFO is no
    /// manifest either. Each now ends at once, exit 2, saying what the file is. A link to a real
    /// manifest (home-manager, stow) still starts the host.
    @Test func aManifestPathThatIsNoRegularFileEndsAtOnce() throws {
        let device = try RegisteredHostDevice(tenant: false)
        let directory = device.fixture.directory
        let manifest = Self.firefoxManifest(in: directory)
        let fifo = directory.file("fifo.json")
        #expect(mkfifo(fifo, 0o600) == 0)
        let linkToFIFO = directory.file("link-to-fifo.json")
        #expect(symlink(fifo, linkToFIFO) == 0)
        let deviceNode = directory.file("null.json")
        #expect(symlink("/dev/null", deviceNode) == 0)
        let folder = directory.file("folder.json")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let link = directory.file("link.json")
        #expect(symlink(manifest, link) == 0)
        let linked = try NativeHostRun(device.cli.path, [link, "host@devtrust.dev"], environment: device.cli.environment, input: NativeMessaging.frame(Self.config))
        #expect(linked.status == 0 && linked.replies.first??["type"] == .string("config"), "\(linked)")
        for (path, reason) in [(fifo, "not a regular file"), (linkToFIFO, "not a regular file"), (deviceNode, "not a regular file"),
                               (folder, "not a regular file")] {
            let run = try ProcessRunner.run("/usr/bin/timeout", ["-s", "KILL", "5", DevtrustBinary.defaultPath, path, "host@devtrust.dev"],
                                            environment: DevtrustBinary(keystore: directory.file("ks")).environment)
            #expect(run.status == 2 && run.stderr.contains("with \(path), which is not devtrust's host manifest (\(reason))"), "\(path): \(run)")
        }
    }

    /// Neither a FIFO nor a device named there is ever opened (inotify's OPEN, which a look at
    /// the file without opening it, O_PATH, does not make): opening a device can act (a tape
    /// rewinds), and a FIFO's writer would be let through. A control open shows the watch works.
    @Test(.enabled(if: ExternalTool.inotifywait.shouldRun)) func aManifestPathsFIFOOrDeviceIsNeverOpened() throws {
        let directory = TemporaryDirectory("manifest-opens")
        let fifo = directory.file("fifo.json")
        #expect(mkfifo(fifo, 0o600) == 0)
        let device = directory.file("null.json")
        // /dev/null's numbers (major 1, minor 3; makedev is a macro Swift cannot call).
        #expect(mknod(device, S_IFCHR | 0o600, dev_t(1 << 8 | 3)) == 0, "mknod: \(String(cString: strerror(errno)))")
        let linkToDevice = directory.file("link.json")
        #expect(symlink(device, linkToDevice) == 0)
        let watch = try BackgroundProcess(ExternalTool.inotifywait.rawValue, ["-m", "-e", "open", fifo, device], environment: ["PATH": "/usr/bin:/bin"])
        #expect(watch.waitFor { _, stderr in stderr.contains("Watches established") }, "\(watch.stderr)")
        for path in [fifo, device, linkToDevice] {
            let run = try ProcessRunner.run("/usr/bin/timeout", ["-s", "KILL", "5", DevtrustBinary.defaultPath, path, "host@devtrust.dev"],
                                            environment: DevtrustBinary(keystore: directory.file("ks")).environment)
            #expect(run.status == 2 && run.stderr.contains("(not a regular file)"), "\(path): \(run)")
        }
        // The control: an open of the device, which the watch must report.
        let control = open(device, O_RDONLY)
        close(control)
        #expect(watch.waitFor { stdout, _ in stdout.contains("null.json OPEN") }, "the watch saw nothing: \(watch.stdout)")
        let opens = watch.stdout.split(separator: "\n").filter { $0.contains("OPEN") }
        #expect(opens.count == 1, "devtrust opened what it must not: \(opens)")
    }

    /// A TPM that stops answering (swtpm stopped by SIGSTOP): the token request is answered with a
    /// tpm error after the host's bound, and the host ends, instead of holding the navigation forever.
    @Test(.enabled(if: Swtpm.shouldRun && ReferenceServer.shouldRun)) func aTPMThatStopsAnsweringIsAnsweredInBoundedTime() throws {
        let setup = try SwtpmDeviceFixture()
        let server = try ReferenceServer()
        #expect(try setup.cli.run("init", "--backend", "tpm", "-q").status == 0)
        let registered = try setup.cli.run(["register", "--server", server.url, "--non-interactive", "-q"] + ReferenceServer.registrationAnswers)
        try #require(registered.status == 0, "\(registered)")
        setup.tpm.signal(SIGSTOP)
        defer { setup.tpm.signal(SIGCONT) }
        let started = Date()
        let run = try NativeHostRun(setup.cli.path, [NativeMessaging.chromiumCaller], environment: setup.cli.environment,
                                    input: [Self.token(server.url + "/oauth2/authorize", id: 3), Self.config].flatMap(NativeMessaging.frame), seconds: 40)
        let seconds = Date().timeIntervalSince(started)
        #expect(!run.timedOut && run.status == 1 && run.replies.count == 1 && run.rest.isEmpty, "\(run)")
        #expect(run.replies.first??["error"] == .string("tpm") && run.replies.first??["id"] == .integer(3)
                && run.replies.first??["message"] == .string("the TPM did not answer in \(SigningDeadline.nativeHostSeconds) s"), "\(run)")
        #expect(seconds >= Double(SigningDeadline.nativeHostSeconds) - 1 && seconds < Double(SigningDeadline.nativeHostSeconds) + 10, "\(seconds) s")
    }
}

/// A TCP port on 127.0.0.1 whose connections the kernel accepts (the backlog) and nobody answers.
final class SilentListener {
    private let descriptor: Int32

    init(port: UInt16) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw FixtureError("cannot listen on 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
    }

    deinit {
        held.forEach { close($0) }
        close(descriptor)
    }

    /// How many connections wait in the backlog (accepted here, then held open until the listener goes).
    private var held = [Int32]()
    func connections() -> Int {
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
        while true {
            let connection = accept(descriptor, nil, nil)
            if connection < 0 { break }
            held.append(connection)
        }
        return held.count
    }
}

/// What the native host keeps of the system agent's answer between messages (`RememberedState`):
/// for at most its lifetime on a clock that does not go back, and not once forgotten.
@Suite struct RememberedStateTests {
    @Test func keptForItsLifetimeOnly() throws {
        final class Clock: @unchecked Sendable { var now: Int64 = 1_000 }
        let clock = Clock()
        let remembered = RememberedState<Int>(lifetimeMilliseconds: 30_000, now: { clock.now })
        var asked = 0
        let fetch = { () -> Int in
            asked += 1
            return asked
        }
        #expect(remembered.recent(fetch) == (1, false))
        clock.now += 29_999
        #expect(remembered.recent(fetch) == (1, true) && asked == 1)
        clock.now += 1
        #expect(remembered.recent(fetch) == (2, false) && asked == 2)
        #expect(remembered.fresh(fetch) == 3 && remembered.recent(fetch) == (3, true))
        remembered.forget()
        #expect(remembered.recent(fetch) == (4, false))
        // A fetch that fails keeps nothing.
        struct Failed: Error {}
        #expect(throws: Failed.self) { try remembered.fresh { throw Failed() } }
        #expect(remembered.recent(fetch) == (5, false))
    }
}
