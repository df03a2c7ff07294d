import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Passwords, codes and tokens never reach stdout or stderr, even with --verbose
/// (`access-token`'s stdout is the one place a token is meant to appear).
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct SecretsHygieneTests {
    @Test func noSecretInAnyStreamOfAVerboseRun() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "2", "--mfa", "totp"], otp: "731946")
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        var streams = [String]()
        func run(_ arguments: [String]) throws {
            let result = try cli.run(["-v"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            streams += [result.stdout, result.stderr]
        }
        let password = "pw-Quixotic-7731"
        try run(["init"])
        try run(["register", "--server", server.url, "--non-interactive", "--input", "http://wso2.com/claims/emailaddress=carol@example.com",
                 "--input", "password=\(password)", "--input", "otp=731946"])
        try run(["login", "--server", server.url, "--client-id", "devtrust-app", "--non-interactive", "--authenticator", "BasicAuthenticator",
                 "--input", "username=alice@example.com", "--input", "password=correct horse", "--input", "token=731946"])
        let appNativeTokens = try Self.storedTokens(directory)
        try run(["login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json", "--scope", "openid"])
        let deviceTokens = try Self.storedTokens(directory)
        try run(["authorize-url", "--server", server.url, "--client-id", "devtrust-app"])
        try run(["status"])
        try run(["status", "--json"])
        try run(["attributes", "--explain"])
        let accessToken = try cli.run("-v", "access-token")
        streams.append(accessToken.stderr)

        let deviceCodes = (try server.get("/api/device/polls").arrayValue ?? []).compactMap { $0.objectValue?["deviceCode"]?.stringValue }
        let pending = try JSONParser.parse(try #require(directory.read("ks/pending-authorizations.json"))).objectValue!
        let verifiers = pending.members.compactMap { $0.value.objectValue?["verifier"]?.stringValue }
        let secrets = [password, "correct horse", "731946"] + appNativeTokens + deviceTokens + deviceCodes + verifiers
        #expect(secrets.count >= 9 && !deviceCodes.isEmpty && !verifiers.isEmpty)
        for secret in secrets {
            for stream in streams {
                #expect(!stream.contains(secret), "a secret reached the output: \(secret.prefix(6))…")
            }
        }
    }

    static func storedTokens(_ directory: TemporaryDirectory) throws -> [String] {
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        let tokens = try JSONParser.parse(try #require(directory.read("ks/" + file))).objectValue!
        return ["accessToken", "refreshToken"].compactMap { tokens[$0]?.stringValue }
    }
}
