import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Broken and hostile servers during an app-native sign-in: every fault ends
/// with exit 4 or 5 and one clear error, records no sign-in (the keystore is
/// byte for byte what it was), never lets the server drive the terminal, and
/// never sends the password anywhere but the server devtrust signs in at.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct LoginFaultTests {
    static let faults: [RegisterFaultTests.Fault] = [
        .init(mode: "garbage-body", at: 1, exit: 5, message: "the app-native answer (HTTP 200) is not JSON (invalid literal at byte 0)"),
        .init(mode: "html-500", at: 1, exit: 5, message: "HTTP 500 (text/html) without an error body"),
        .init(mode: "huge-body", at: 1, exit: 5, message: "larger than 1048576 bytes"),
        .init(mode: "drop-connection", at: 2, exit: 5, message: "closed the connection without an answer"),
        .init(mode: "truncated-body", at: 2, exit: 5, message: "closed the connection without an answer"),
        .init(mode: "missing-status", at: 1, exit: 5, message: "HTTP 200 without flowStatus"),
        .init(mode: "wrong-json-types", at: 2, exit: 5, message: "flowStatus is not a string"),
        .init(mode: "array-body", at: 1, exit: 5, message: "is an array, not a JSON object"),
        .init(mode: "deep-json", at: 1, exit: 5, message: "nested deeper than 64 levels"),
        .init(mode: "empty-200", at: 1, exit: 5, message: "is not JSON (unexpected end of input at byte 0)"),
        .init(mode: "invalid-utf8", at: 1, exit: 5, message: "invalid UTF-8 at byte 11"),
        .init(mode: "redirect-elsewhere", at: 1, exit: 5, message: "a redirect to https://elsewhere.example/oauth2/authorize"),
        .init(mode: "too-many-requests", at: 2, exit: 5, message: "HTTP 429 (retry after 3600) without an error body"),
        .init(mode: "links-elsewhere", at: 1, exit: 5, message: "sent the next step to https://evil.example, not to http://127.0.0.1:"),
        .init(mode: "links-plain-http", at: 1, exit: 5, message: "uses plain http, which devtrust allows only to loopback addresses"),
        // Links are RFC 3986 references: each is resolved first, then must be on this server's origin.
        .init(mode: "links-network-path-elsewhere", at: 1, exit: 5, message: "(//evil.example/oauth2/authn) cannot be used: http://evil.example/oauth2/authn uses plain http"),
        .init(mode: "links-userinfo", at: 1, exit: 5, message: "cannot be used: http://[redacted]@evil.example/oauth2/authn is not a usable server URL: user names or passwords"),
        .init(mode: "links-backslash", at: 1, exit: 5, message: "cannot be used: http://127.0.0.1:"),
        .init(mode: "links-scheme-relative-http", at: 1, exit: 5, message: "(http:evil.example/oauth2/authn) cannot be used: http:evil.example/oauth2/authn is not a usable server URL: it has no scheme or host"),
        .init(mode: "unknown-prompt", at: 1, exit: 4, message: "not supported by devtrust: a QUANTUM_PROMPT"),
        .init(mode: "escape-sequences", at: 2, exit: 4, message: "DR-60001 (Flow context expired\\u{1B}]0;owned\\u{7}"),
        .init(mode: "json-500", at: 1, exit: 4, message: "the server refused: FE-65000 (Server error: unexpected failure)"),
    ]

    @Test(arguments: faults)
    func faultEndsCleanlyAndRecordsNothing(fault: RegisterFaultTests.Fault) throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer(["--fault", fault.mode, "--fault-on", "signin", "--fault-at", "\(fault.at)"])
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"http":{"requestTimeoutSeconds":2}}"#)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        #expect(try cli.run(["register", "--server", server.url, "--non-interactive", "-q"] + RegisterTests.answers).status == 0)
        let before = try #require(directory.read("ks/keystore.json"))
        let result = try cli.run(["login", "--server", server.url, "--client-id", "devtrust-app", "--non-interactive"] + SignInTests.basicAnswers)
        fault.expectCleanFailure(result, keystoreBefore: before, keystoreAfter: directory.read("ks/keystore.json"))
        #expect(!directory.entries("ks").contains { $0.hasPrefix("signin-") })
        #expect(!result.stderr.contains("correct horse"))
    }

    @Test func aServerThatDoesNotAnswerOnceIsAskedAgainWithAFreshDeviceToken() throws {
        let directory = TemporaryDirectory()
        let server = try ReferenceServer(["--fault", "never-answer", "--fault-on", "signin", "--fault-at", "1"])
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"http":{"requestTimeoutSeconds":2}}"#)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        #expect(try cli.run(["register", "--server", server.url, "--non-interactive", "-q"] + RegisterTests.answers).status == 0)
        let result = try cli.run(["login", "--server", server.url, "--client-id", "devtrust-app", "--non-interactive"] + SignInTests.basicAnswers)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("did not answer in time") && result.stderr.contains("trying again with a new device token"), "\(result.stderr)")
        // The first request hangs before the server reads it; the retry, with its own device token, is accepted.
        let records = try server.get("/api/signin-records").arrayValue ?? []
        #expect(records.count == 1, "\(records)")
        #expect(records.first?.objectValue?["deviceToken"] == .bool(true) && records.first?.objectValue?["accepted"] == .bool(true), "\(records)")
    }
}
