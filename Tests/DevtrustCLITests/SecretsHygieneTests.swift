import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Every command, run with --verbose, the TSS's debug log (TSS2_LOG=all+debug)
/// and curl's (DEVTRUST_HTTP_DEBUG=1): the private key (PEM, DER, the scalar
/// in hex and base64), the passwords and OTPs given, device codes, PKCE
/// verifiers, access and refresh tokens appear in no output stream and in no
/// file written outside the keystore (`access-token`'s stdout is the one
/// place a token is meant to appear).
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct SecretsHygieneTests {
    @Test func noSecretInAnyStreamOrFileOfAVerboseRun() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "2", "--mfa", "totp"], otp: "731946")
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        cli.extraEnvironment["TSS2_LOG"] = "all+debug"
        cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        cli.extraEnvironment["HOME"] = directory.file("home")
        cli.extraEnvironment["TMPDIR"] = directory.file("tmp")
        mkdir(directory.file("home"), 0o700)
        mkdir(directory.file("tmp"), 0o700)
        let sharedTemporaryBefore = Set((try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? [])
        var streams = [String]()
        func run(_ arguments: [String], stdin: String? = nil) throws {
            let result = try cli.run(["-v"] + arguments, stdin: stdin.map { Array($0.utf8) })
            #expect(result.status == 0, "\(arguments): \(result)")
            streams += [result.stdout, result.stderr]
        }
        let password = "pw-Quixotic-7731"
        try run(["init"])
        let keyForms = try Self.privateKeyForms(directory)
        try run(["pubkey"])
        try run(["pubkey", "--format", "jwk"])
        try run(["sign-challenge", "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y"])
        try run(["device-data", "--claim", "floor=3"])
        try run(["register", "--server", server.url, "--non-interactive", "--input", "http://wso2.com/claims/emailaddress=carol@example.com",
                 "--input", "password=\(password)", "--input", "otp=731946"])
        let token = try cli.run("-v", "token")
        #expect(token.status == 0 && token.stderr.contains("registration: "), "\(token)")
        streams += [token.stdout, token.stderr]
        try run(["verify", "--public-key", try cli.run("pubkey").output, "--jwt", token.output])
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
        #expect(accessToken.status == 0)
        streams.append(accessToken.stderr)
        let deviceCodes = (try server.get("/api/device/polls").arrayValue ?? []).compactMap { $0.objectValue?["deviceCode"]?.stringValue }
        let pending = try JSONParser.parse(try #require(directory.read("ks/pending-authorizations.json"))).objectValue!
        let verifiers = pending.members.compactMap { $0.value.objectValue?["verifier"]?.stringValue }
        try run(["logout"])
        try run(["init", "--force"])
        try run(["reset", "--yes"])
        // The TPM commands, with the TSS logging everything it sends and receives.
        var tpm: Swtpm?
        if Swtpm.shouldRun {
            tpm = try Swtpm()
            cli.extraEnvironment["DEVTRUST_TCTI"] = tpm!.tcti
            try run(["init", "--backend", "tpm"])
            try run(["sign-challenge", "AQID"])
            try run(["token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936"])
            try run(["status"])
            try run(["reset", "--yes"])
        }

        let secrets = [password, "correct horse", "731946"] + appNativeTokens + deviceTokens + deviceCodes + verifiers + keyForms
        #expect(secrets.count >= 15 && !deviceCodes.isEmpty && !verifiers.isEmpty && keyForms.count >= 8)
        // The debug logs did run: the checks below are over real output.
        #expect(streams.contains { $0.contains("devtrust: http: > POST /oauth2/token") })
        if tpm != nil { #expect(streams.contains { $0.contains("tcti") }, "the TSS debug log is empty") }

        // Files written outside the keystore: HOME, TMPDIR, and anything new in /tmp
        // but the scratch of the tests running alongside (which hold test passwords).
        var files = Self.files(under: directory.file("home")) + Self.files(under: directory.file("tmp"))
        let sharedTemporaryAfter = Set((try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? [])
        files += sharedTemporaryAfter.subtracting(sharedTemporaryBefore).filter { !$0.hasPrefix(TemporaryDirectory.namePrefix) }
            .flatMap { Self.files(under: "/tmp/" + $0) }
        let contents = files.compactMap { FileManager.default.contents(atPath: $0).map { String(decoding: $0, as: UTF8.self) } }
        for secret in secrets {
            for stream in streams + contents {
                #expect(!stream.contains(secret), "a secret reached the output or a file: \(secret.prefix(6))…")
            }
        }
    }

    /// DPoP: the proofs devtrust sent to the token endpoint and the tokens bound with them appear in no
    /// stream of a verbose run with curl's debug log (the `DPoP` and `Authorization: DPoP` headers are
    /// redacted there); `dpop-proof`'s proof is on its stdout only, and `access-token`'s token on its.
    @Test func noDPoPProofOrTokenInAnyStreamOfAVerboseRun() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce", "--dpop-nonce-uses", "2", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        var streams = [String]()
        var secrets = [String]()
        func run(_ arguments: [String], secretOutput: Bool = false) throws {
            let result = try cli.run(["-v"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            streams.append(result.stderr)
            if secretOutput { secrets.append(result.output) } else { streams.append(result.stdout) }
        }
        try run(["init", "--backend", "software"])
        try run(["login", "--device-code", "--dpop", "--server", server.url, "--client-id", "devtrust-app", "--json"])
        secrets += try Self.storedTokens(directory)
        try run(["access-token", "--refresh"], secretOutput: true)
        secrets += try Self.storedTokens(directory)
        try run(["dpop-proof", "--method", "GET", "--url", server.url + "/resource"], secretOutput: true)
        try run(["--json", "dpop-proof", "--method", "POST", "--url", server.url + "/resource", "--nonce", "n-1"], secretOutput: true)
        try run(["status"])
        try run(["logout"])
        let sent = try server.get("/api/dpop-proofs").arrayValue?.compactMap(\.stringValue) ?? []
        #expect(sent.count >= 3, "the server saw no proofs: \(sent)")
        secrets += sent
        // The debug log did run, and named the header it left out.
        #expect(streams.contains { $0.contains("POST /oauth2/token") } && streams.contains { $0.lowercased().contains("dpop: [redacted]") }, "\(streams)")
        for secret in secrets {
            // A proof's signature, a token's tail: no 20-character part of a secret appears either.
            for stream in streams {
                #expect(!stream.contains(secret) && !stream.contains(String(secret.suffix(20))), "a secret reached the output: \(secret.prefix(6))…")
            }
        }
    }

    /// A CIBA auth_req_id lets whoever holds it collect the user's tokens once approved: it
    /// appears in no stream (curl's debug log, --json events, -v, error messages) and in no
    /// file, the keystore included, though the server echoes it with the tokens as glewlwyd does,
    /// and repeats it in a page (a warning on every retry) and in an error_description (the
    /// failure event and the error). The one place it stays is the claim of the signed ID token
    /// kept, once the server has redeemed it (and refuses it from then on).
    @Test func noAuthReqIdInAnyStreamOrFileOfACIBASignIn() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_HTTP_DEBUG"] = "1"
        cli.extraEnvironment["HOME"] = directory.file("home")
        cli.extraEnvironment["TMPDIR"] = directory.file("tmp")
        mkdir(directory.file("home"), 0o700)
        mkdir(directory.file("tmp"), 0o700)
        var streams = [String]()
        var authReqIDs = [String]()
        // Approved (with the echo), denied, expired, a failing poll whose error is reported, and a server
        // that repeats the id in a page and then in an invalid_grant's error_description.
        for (options, status) in [(["--ciba-approve-after", "2", "--ciba-unavailable-on", "1"], Int32(0)), (["--ciba-deny-on", "1"], 4),
                                  (["--ciba-expire-on", "1"], 4), (["--ciba-page-on", "1", "--ciba-invalid-on", "2"], 4)] {
            let server = try ReferenceServer(["--ciba-interval", "1"] + options)
            let result = try cli.run("-v", "login", "--ciba", "--server", server.url, "--client-id", "devtrust-app", "--login-hint", "alice@example.com",
                                     "--binding-message", "hygiene", "--json")
            #expect(result.status == status, "\(options): \(result)")
            streams += [result.stdout, result.stderr]
            authReqIDs += try server.get("/api/ciba/requests").arrayValue?.compactMap { $0.objectValue?["authReqId"]?.stringValue } ?? []
        }
        for arguments in [["status", "--json"], ["-v", "access-token", "--json"]] {
            let result = try cli.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            streams += [result.stdout, result.stderr]
        }
        #expect(authReqIDs.count == 4 && authReqIDs.allSatisfy { $0.count >= 40 }, "\(authReqIDs)")
        #expect(streams.contains { $0.contains("devtrust: http: > POST /oauth2/ciba") } && streams.contains { $0.contains("HTTP 503") })
        // The server did repeat it, in the warning and in the failure event and the error: shown as a placeholder.
        #expect(streams.contains { $0.contains("without an OAuth error body: \"unknown auth_req_id [auth_req_id] (request id [auth_req_id])") }
                && streams.contains { $0.contains(#""description":"auth_req_id [auth_req_id] is unknown, or a newer request replaced it""#) }
                && streams.contains { $0.contains(#""message":"the server refused: invalid_grant (auth_req_id [auth_req_id] is unknown"#) },
                "\(streams)")
        let signInFile = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        let storedBytes = try #require(directory.read("ks/" + signInFile))
        let stored = try #require(try JSONParser.parse(storedBytes).objectValue)
        let idToken = try #require(stored["idToken"]?.stringValue)
        let claims = try JSONParser.parse(try Base64.decode(idToken.split(separator: ".")[1], alphabet: .url)).objectValue
        #expect(claims?["urn:openid:params:jwt:claim:auth_req_id"] == .string(authReqIDs[0]), "\(String(describing: claims))")
        let files = Self.files(under: directory.file("ks")) + Self.files(under: directory.file("home")) + Self.files(under: directory.file("tmp"))
        #expect(files.contains { $0.contains("signin-") })
        let contents = files.compactMap { FileManager.default.contents(atPath: $0).map { String(decoding: $0, as: UTF8.self) } }
        for secret in authReqIDs {
            for text in streams + contents {
                #expect(!text.contains(secret), "an auth_req_id reached the output or a file: \(secret.prefix(6))…")
            }
        }
    }

    /// The software key as PEM body lines, DER in base64, and the private scalar in hex and base64(url).
    static func privateKeyForms(_ directory: TemporaryDirectory) throws -> [String] {
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("key-") })
        let pem = String(decoding: try #require(directory.read("ks/" + file)), as: UTF8.self)
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        let der = try #require(PEM.decode(pem, label: "PRIVATE KEY"))
        let start = try #require((0..<der.count - 34).first { der[$0] == 0x04 && der[$0 + 1] == 0x20 }) + 2
        let scalar = Array(der[start..<start + 32])
        return body + [Base64.encode(der), Hex.encode(scalar), Hex.encode(scalar).uppercased(), Base64.encode(scalar), Base64URL.encode(scalar)]
    }

    static func storedTokens(_ directory: TemporaryDirectory) throws -> [String] {
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        let tokens = try JSONParser.parse(try #require(directory.read("ks/" + file))).objectValue!
        return ["accessToken", "refreshToken"].compactMap { tokens[$0]?.stringValue }
    }

    static func files(under path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        return (FileManager.default.enumerator(atPath: path)?.allObjects as? [String] ?? []).map { path + "/" + $0 }
            .filter { FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && !isDirectory.boolValue }
    }
}
