import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Broken and hostile servers: every fault ends with exit 4 or 5, one clear
/// error, no crash, and a keystore that is byte for byte what it was.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct RegisterFaultTests {
    struct Fault: Sendable, CustomTestStringConvertible {
        let mode: String
        let at: Int
        let exit: Int32
        let message: String
        var testDescription: String { "\(mode)@\(at)" }

        /// How every server fault must end: its exit code, exactly one error line naming the
        /// problem, nothing on stdout, no terminal control bytes, the keystore byte for byte unchanged.
        func expectCleanFailure(_ result: ProcessResult, keystoreBefore: [UInt8], keystoreAfter: [UInt8]?,
                                sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(result.status == exit, "\(mode): \(result)", sourceLocation: sourceLocation)
            #expect(!result.signaled, sourceLocation: sourceLocation)
            let errors = result.stderr.split(separator: "\n").filter { $0.hasPrefix("devtrust: error: ") }
            #expect(errors.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.contains(message), "\(mode): \(result.stderr)", sourceLocation: sourceLocation)
            #expect(keystoreAfter == keystoreBefore, "\(mode) changed the keystore", sourceLocation: sourceLocation)
            #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
            // Nothing the server sent can drive the terminal.
            #expect(!result.stderr.utf8.contains(0x1B) && !result.stderr.utf8.contains(0x0D),
                    "\(mode): control characters reached stderr", sourceLocation: sourceLocation)
        }
    }

    static let faults: [Fault] = [
        Fault(mode: "garbage-body", at: 1, exit: 5, message: "the answer is not JSON"),
        Fault(mode: "garbage-body", at: 3, exit: 5, message: "the answer is not JSON"),
        Fault(mode: "html-500", at: 1, exit: 5, message: "HTTP 500 (text/html) without an error body"),
        Fault(mode: "huge-body", at: 1, exit: 5, message: "larger than 1048576 bytes"),
        Fault(mode: "never-answer", at: 1, exit: 5, message: "did not answer in time"),
        Fault(mode: "drop-connection", at: 1, exit: 5, message: "without an answer"),
        Fault(mode: "drop-connection", at: 4, exit: 5, message: "without an answer"),
        Fault(mode: "unknown-step-type", at: 1, exit: 4, message: "not supported by devtrust: QUANTUM_PROMPT"),
        Fault(mode: "webauthn", at: 2, exit: 4, message: "not supported by devtrust: WEBAUTHN"),
        Fault(mode: "passkey", at: 1, exit: 4, message: "not supported by devtrust: PASSKEY"),
        Fault(mode: "wrong-json-types", at: 1, exit: 5, message: "field \"flowId\" must be a string, found a number"),
        Fault(mode: "missing-flow-id", at: 2, exit: 5, message: "missing required field \"flowId\""),
        Fault(mode: "missing-status", at: 1, exit: 5, message: "missing required field \"flowStatus\""),
        Fault(mode: "unknown-required-param", at: 1, exit: 4, message: "requires tpmQuote, which devtrust does not provide"),
        Fault(mode: "missing-challenge", at: 1, exit: 5, message: "no additionalData.challenge"),
        Fault(mode: "bad-challenge", at: 1, exit: 5, message: "challenge is not base64url"),
        Fault(mode: "redirect-http", at: 1, exit: 5, message: "answered 302, a redirect to http://evil.example"),
        Fault(mode: "json-500", at: 1, exit: 4, message: "the server refused the registration: FE-65000 Server error"),
        Fault(mode: "empty-200", at: 1, exit: 5, message: "the answer is not JSON"),
        Fault(mode: "complete-without-device", at: 1, exit: 4, message: "completed without a Device Registration step"),
        Fault(mode: "array-body", at: 1, exit: 5, message: "must be an object, found an array"),
        Fault(mode: "deep-json", at: 1, exit: 5, message: "nested deeper than 64 levels"),
        Fault(mode: "redirect-elsewhere", at: 1, exit: 5, message: "a redirect to https://elsewhere.example/"),
        Fault(mode: "slow-body", at: 1, exit: 5, message: "did not answer in time"),
        Fault(mode: "truncated-body", at: 1, exit: 5, message: "closed the connection without an answer"),
        Fault(mode: "truncated-body", at: 3, exit: 5, message: "closed the connection without an answer"),
        Fault(mode: "null-flow-id", at: 1, exit: 5, message: "missing required field \"flowId\""),
        Fault(mode: "invalid-utf8", at: 1, exit: 5, message: "the answer is not JSON (invalid UTF-8 at byte 11)"),
        Fault(mode: "lone-surrogate", at: 1, exit: 5, message: "unpaired surrogate"),
        Fault(mode: "unauthorized-html", at: 1, exit: 5, message: "HTTP 401 (text/html) without an error body"),
        Fault(mode: "too-many-requests", at: 1, exit: 5, message: "HTTP 429 (retry after 3600) without an error body"),
        Fault(mode: "error-after-device", at: 1, exit: 4, message: "DR-60001 Flow context expired"),
        Fault(mode: "error-at-first-continue", at: 1, exit: 4, message: "DR-60001 Flow context expired"),
        Fault(mode: "escape-sequences", at: 2, exit: 4, message: "Flow context expired\\u{1B}]0;owned\\u{7}"),
        Fault(mode: "jws-challenge", at: 1, exit: 5, message: "refuses to sign the server's Device Registration challenge: it could be read as a JWS signing input"),
        Fault(mode: "lenient-jws-challenge", at: 1, exit: 5, message: "it could be read as a JWS signing input (header.payload), so its signature could serve as a device token; nothing was sent. Run the registration again: a new attempt gets a new challenge"),
        Fault(mode: "pairs-jws-challenge", at: 1, exit: 5, message: "it could be read as a JWS signing input (header.payload)"),
        Fault(mode: "short-challenge", at: 1, exit: 5, message: "it is 8 bytes, where the contract sends 32 random bytes"),
    ]

    @Test(arguments: faults)
    func faultEndsCleanlyAndChangesNothing(fault: Fault) throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer(["--fault", fault.mode, "--fault-at", "\(fault.at)"])
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"http":{"requestTimeoutSeconds":2}}"#)
        try cli.run("init", "--backend", "software", "-q")
        let before = try #require(directory.read("ks/keystore.json"))
        let result = try cli.run(["register", "--server", server.url, "--non-interactive"] + RegisterTests.answers)
        fault.expectCleanFailure(result, keystoreBefore: before, keystoreAfter: directory.read("ks/keystore.json"))
        // A hostile server tries every signature it gets as a token, read as leniently as the real server reads them.
        #expect(try server.get("/api/forgeries") == .array([]), "\(fault.mode): a signature became a token")
    }

    @Test func aServerThatIsNotThereIsANetworkError() throws {
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q")
        let result = try cli.run(["register", "--server", "http://127.0.0.1:9", "--non-interactive"] + RegisterTests.answers)
        #expect(result.status == 5 && result.stderr.contains("cannot connect to http://127.0.0.1:9"), "\(result)")
    }

    @Test func faultCountIsWhatTheIssueAsks() {
        // At least 30 distinct server behaviours (33 today), plus no server at all and three TLS failures below.
        #expect(Set(Self.faults.map(\.mode)).count >= 30)
    }
}

/// HTTPS with a private CA: trusted with --ca-file or DEVTRUST_CA_FILE, refused otherwise.
@Suite(.enabled(if: ReferenceServer.shouldRun && ExternalTool.openssl.shouldRun)) struct RegisterTLSTests {
    @Test func aPrivateCAIsTrustedOnlyWhenNamed() throws {
        let authority = try TestCertificateAuthority()
        let server = try ReferenceServer(["--tls-cert", authority.serverCertificate, "--tls-key", authority.serverKey])
        #expect(server.url.hasPrefix("https://127.0.0.1:"))
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q")
        let before = directory.read("ks/keystore.json")

        let untrusted = try cli.run(["register", "--server", server.url, "--non-interactive"] + RegisterTests.answers)
        #expect(untrusted.status == 5, "\(untrusted)")
        #expect(untrusted.stderr.contains("is not trusted") && untrusted.stderr.contains("pass --ca-file FILE"), "\(untrusted.stderr)")
        #expect(directory.read("ks/keystore.json") == before)

        let trusted = try cli.run(["register", "--server", server.url, "--ca-file", authority.caCertificate, "--non-interactive"] + RegisterTests.answers)
        #expect(trusted.status == 0, "\(trusted)")
        #expect(try server.devices(caFile: authority.caCertificate).count == 1)

        cli.extraEnvironment["DEVTRUST_CA_FILE"] = authority.caCertificate
        let fromEnvironment = try cli.run(["register", "--server", server.url, "--replace", "--non-interactive"] + RegisterTests.answers)
        #expect(fromEnvironment.status == 0, "\(fromEnvironment)")

        let missingFile = try cli.run(["register", "--server", server.url, "--replace", "--ca-file", directory.file("nope.pem"), "--non-interactive"] + RegisterTests.answers)
        #expect(missingFile.status == 5 && missingFile.stderr.contains("the CA file cannot be used"), "\(missingFile)")
    }

    @Test func anExpiredCertificateIsRefused() throws {
        let authority = try TestCertificateAuthority(validDays: -1)
        let server = try ReferenceServer(["--tls-cert", authority.serverCertificate, "--tls-key", authority.serverKey])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q")
        let before = directory.read("ks/keystore.json")
        let result = try cli.run(["register", "--server", server.url, "--ca-file", authority.caCertificate, "--non-interactive"] + RegisterTests.answers)
        #expect(result.status == 5, "\(result)")
        #expect(result.stderr.contains("is not trusted") && result.stderr.contains("expired"), "\(result.stderr)")
        #expect(directory.read("ks/keystore.json") == before)
    }

    @Test func aCertificateForAnotherHostIsRefused() throws {
        let authority = try TestCertificateAuthority(names: "DNS:example.com")
        let server = try ReferenceServer(["--tls-cert", authority.serverCertificate, "--tls-key", authority.serverKey])
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init", "-q")
        let result = try cli.run(["register", "--server", server.url, "--ca-file", authority.caCertificate, "--non-interactive"] + RegisterTests.answers)
        #expect(result.status == 5, "\(result)")
        #expect(result.stderr.contains("is not trusted") || result.stderr.contains("TLS with"), "\(result.stderr)")
    }
}
