@testable import DevtrustCLI
import DevtrustDevice
import DevtrustEncoding
import DevtrustErrors
import DevtrustKeystore
@testable import DevtrustKeys
@testable import DevtrustTerminal
import DevtrustTestSupport
import Foundation
import Glibc
import Testing

/// `--json` on every command that prints an artifact, and errors under `--json`
/// (../shared/docs/cli-contract.md): stdout is one JSON document and a newline,
/// read by an independent parser (Debian's python3 `json`); an error is one JSON
/// object, the last line of stderr, with the exit code unchanged.
@Suite struct JSONOutputTests {
    /// The one JSON document `text` holds, as python3's `json` reads it (it refuses
    /// trailing data), written back canonically for devtrust's parser to take apart.
    static func independentlyParsed(_ text: String) throws -> JSONObject {
        let script = "import json, sys; document = json.loads(sys.stdin.read()); assert isinstance(document, dict); print(json.dumps(document))"
        let parsed = try ExternalTool.python.run(["-c", script], stdin: Array(text.utf8))
        guard parsed.status == 0, let object = try JSONParser.parse(parsed.output).objectValue else {
            throw FixtureError("python3 refused \(text.debugDescription): \(parsed.stderr)")
        }
        return object
    }

    /// stdout of a successful `--json` run: one line, one JSON object.
    static func document(_ result: ProcessResult) throws -> JSONObject {
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.hasSuffix("}\n") && result.stdout.split(separator: "\n", omittingEmptySubsequences: false).count == 2, "\(result.stdout)")
        return try independentlyParsed(result.stdout)
    }

    /// The error object of a failed `--json` run: the last line of stderr, one JSON object
    /// whose exitCode is the process's; nothing on stdout.
    static func errorObject(_ result: ProcessResult, stdoutEmpty: Bool = true) throws -> JSONObject {
        #expect(!stdoutEmpty || result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasSuffix("}}\n"), "\(result.stderr)")
        let lastLine = String(result.stderr.dropLast().split(separator: "\n", omittingEmptySubsequences: false).last ?? "")
        let document = try independentlyParsed(lastLine)
        #expect(document.keys == ["error"], "\(document)")
        let error = try #require(document["error"]?.objectValue)
        #expect(error.keys == ["message", "exitCode", "hint"], "\(error)")
        #expect(error["exitCode"] == .integer(Int64(result.status)) && result.status != 0, "\(result)")
        #expect(error["message"]?.stringValue?.isEmpty == false, "\(error)")
        return error
    }

    static func verified(spki: String, jws: [String] = [], der: [(message: [UInt8], signature: String)] = []) throws -> JSONObject {
        let request: JSONObject = ["spki": .string(spki), "jws": .array(jws.map { .string($0) }),
                                   "der": .array(der.map { .object(["message": .string(Base64.encode($0.message)), "signature": .string($0.signature)]) })]
        let verified = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        return try #require(try JSONParser.parse(verified.stdout).objectValue, "\(verified)")
    }

    /// Each artifact command through the binary, `--json` before or after the command; the
    /// token, the deviceData JWT and the signature checked by python3-cryptography.
    @Test(.enabled(if: ExternalTool.python.shouldRun))
    func everyArtifactCommandPrintsOneObject() throws {
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        #expect(try cli.run("init", "--backend", "software", "-q").status == 0)
        let spki = try cli.run("pubkey").output
        let fingerprint = try cli.run("pubkey", "--format", "thumbprint").output

        for arguments in [["--json", "pubkey"], ["pubkey", "--json"]] {
            let document = try Self.document(try cli.run(arguments))
            #expect(document == ["publicKey": .string(spki), "fingerprint": .string(fingerprint)], "\(arguments): \(document)")
        }
        let pem = try Self.document(try cli.run("pubkey", "--format", "pem", "--json"))
        #expect(pem["publicKey"] == .string(try cli.run("pubkey", "--format", "pem").stdout) && pem["fingerprint"] == .string(fingerprint), "\(pem)")
        let jwk = try Self.document(try cli.run("pubkey", "--format=jwk", "--json"))
        #expect(jwk["publicKey"] == (try JSONParser.parse(try cli.run("pubkey", "--format", "jwk").output)) && jwk["fingerprint"] == .string(fingerprint), "\(jwk)")
        #expect(try Self.document(try cli.run("--json", "pubkey", "--format", "thumbprint")) == ["fingerprint": .string(fingerprint)])

        let challenge = CLIExitCodeTests.challenge
        let signed = try Self.document(try cli.run("--json", "sign-challenge", challenge))
        #expect(signed.keys == ["signature"], "\(signed)")
        let signature = try #require(signed["signature"]?.stringValue)
        let piped = try Self.document(try cli.run("sign-challenge", "-", "--json", stdin: challenge + "\n"))
        let pipedSignature = try #require(piped["signature"]?.stringValue)

        let deviceData = try Self.document(try cli.run("device-data", "--json", "--claim", "site=berlin"))
        #expect(deviceData.keys == ["deviceData"], "\(deviceData)")
        let deviceDataJWT = try #require(deviceData["deviceData"]?.stringValue)
        let token = try Self.document(try cli.run("--json", "token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936"))
        #expect(token.keys == ["token"], "\(token)")
        let deviceToken = try #require(token["token"]?.stringValue)
        let header = try JSONParser.parse(try Base64URL.decode(String(deviceToken.split(separator: ".")[0]))).objectValue
        #expect(header?["deviceId"] == .string("74070bae-df8c-42bf-8754-5173c237c936"))

        let message = try Base64URL.decode(challenge, padding: .optional)
        let verified = try Self.verified(spki: spki, jws: [deviceDataJWT, deviceToken],
                                         der: [(message, signature), (message, pipedSignature)])
        #expect(verified["jws"]?.objectValue?["valid"] == .integer(2) && verified["der"]?.objectValue?["valid"] == .integer(2), "\(verified)")

        for arguments in [["--version", "--json"], ["--json", "--version"]] {
            #expect(try Self.document(try cli.run(arguments)) == ["version": .string(CommandSpecs.version)], "\(arguments)")
        }
        // Without --json, the artifact alone, as before.
        #expect(try cli.run("--version").stdout == "devtrust \(CommandSpecs.version)\n")
        #expect(try cli.run("token", "--device-id", "d").output.split(separator: ".").count == 3)
    }

    /// `access-token --json` through the binary: the access token the plain command prints,
    /// its type and expiry, never the refresh token or the ID token.
    @Test(.enabled(if: ReferenceServer.shouldRun))
    func accessTokenJSONCarriesNoRefreshToken() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>(register: true)
        #expect(try setup.login().status == 0)
        let document = try Self.document(try setup.cli.run("access-token", "--json"))
        #expect(document.keys == ["accessToken", "tokenType", "expiresAt", "expiryAssumed", "scope"], "\(document)")
        #expect(document["accessToken"] == .string(try setup.cli.run("access-token").output))
        #expect(document["tokenType"]?.stringValue?.lowercased() == "bearer" && document["expiryAssumed"] == .bool(false), "\(document)")
        let expiresAt = try #require(document["expiresAt"]?.stringValue)
        #expect(expiresAt.hasSuffix("Z") && expiresAt > Timestamp.format(secondsSinceEpoch: Int64(Date().timeIntervalSince1970)), "\(expiresAt)")
        let keystore = setup.directory.file("ks")
        let tokenFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("signin-") })
        let stored = try #require(TokenSet(bytes: Array(try Data(contentsOf: URL(fileURLWithPath: keystore + "/" + tokenFile)))))
        let refreshToken = try #require(stored.refreshToken)
        let printed = try setup.cli.run("access-token", "--json").stdout
        #expect(!printed.contains(refreshToken) && !(stored.idToken.map(printed.contains) ?? false))
    }

    /// One error of each exit code the binary can reach, under `--json`: the object on
    /// stderr, and the same words (what failed, then the hint) as the text a person reads.
    @Test(.enabled(if: ExternalTool.python.shouldRun))
    func errorsAreOneObjectWithTheExitCode() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent/tpmrm0"
        let keystore = directory.file("ks")

        // 3: no key; the hint is what to do.
        for arguments in [["--json", "pubkey"], ["token", "--device-id", "x", "--json"], ["sign-challenge", "--json", CLIExitCodeTests.challenge], ["device-data", "--json"]] {
            let error = try Self.errorObject(try cli.run(arguments))
            #expect(error["message"] == .string("there is no device key in \(keystore)") && error["hint"] == .string("run `devtrust init` first"), "\(arguments): \(error)")
        }
        #expect(try cli.run("pubkey").stderr == "devtrust: error: there is no device key in \(keystore); run `devtrust init` first\n")
        try cli.run("init", "--backend", "software", "-q")

        // 2: refused by the parser, --json anywhere; and by a command, with its help as the hint.
        for arguments in [["--json", "pubkey", "--frob"], ["pubkey", "--frob", "--json"], ["--json", "frobnicate"], ["--json"]] {
            let error = try Self.errorObject(try cli.run(arguments))
            #expect(error["exitCode"] == .integer(2), "\(arguments): \(error)")
        }
        let unknown = try Self.errorObject(try cli.run("pubkey", "--json", "--frob"))
        #expect(unknown["message"] == .string("unknown option --frob") && unknown["hint"] == .string("see `devtrust help pubkey`"), "\(unknown)")
        #expect(try cli.run("pubkey", "--frob").stderr == "devtrust: error: unknown option --frob (see `devtrust help pubkey`)\n")
        let badFormat = try Self.errorObject(try cli.run("pubkey", "--format", "der", "--json"))
        #expect(badFormat["message"] == .string("--format must be spki, pem, jwk or thumbprint, not \"der\"") && badFormat["hint"] == .string("see `devtrust help pubkey`"))
        // `--json` as an option's value asks for nothing.
        let valued = try cli.run("token", "--device-id", "--json", "--frob")
        #expect(valued.status == 2 && valued.stderr.hasPrefix("devtrust: error: unknown option --frob"), "\(valued)")
        #expect(try cli.run("token", "--json", "--", "--frob").stderr.hasPrefix("{\"error\":"))

        // 1: verify's invalid token: the verdict on stdout, the error object on stderr.
        let spki = try cli.run("pubkey").output
        let invalid = try cli.run("verify", "--json", "--public-key", spki, "--jwt", "a.b.c")
        #expect(try Self.independentlyParsed(invalid.stdout)["valid"] == .bool(false))
        let invalidError = try Self.errorObject(invalid, stdoutEmpty: false)
        #expect(invalidError["exitCode"] == .integer(1) && invalidError["message"]?.stringValue?.hasPrefix("invalid: ") == true && invalidError["hint"] == .null)

        // 4: the server refused (an error the browser was sent back with).
        let refused = try Self.errorObject(try cli.run("login", "--json", "--callback", "http://127.0.0.1:8765/callback?error=access_denied&error_description=no"))
        #expect(refused["exitCode"] == .integer(4) && refused["message"]?.stringValue?.includes("access_denied") == true, "\(refused)")

        // 5: nothing answers.
        let closed = try Self.errorObject(try cli.run("register", "--json", "--server", "http://127.0.0.1:9", "--non-interactive"))
        #expect(closed["exitCode"] == .integer(5), "\(closed)")

        // 6: no TPM; the TPM's own hint is set apart from what failed.
        let fresh = DevtrustBinary(keystore: directory.file("no-tpm"))
        let noTPM = try fresh.run("init", "--json", "--backend", "tpm", "--tcti", "device:/nonexistent/tpmrm0")
        let tpmError = try Self.errorObject(noTPM)
        #expect(tpmError["exitCode"] == .integer(6), "\(tpmError)")
        #expect(tpmError["message"] == .string("no TPM at device:/nonexistent/tpmrm0 (no such device)"), "\(tpmError)")
        #expect(tpmError["hint"] == .string("this machine has no TPM, or it is disabled in the firmware settings"), "\(tpmError)")

        // 7: a keystore others can read; any warnings come before the object.
        chmod(keystore, 0o750)
        let exposed = try Self.errorObject(try cli.run("token", "--json", "--device-id", "x"))
        #expect(exposed["message"] == .string("\(keystore) is accessible by other users (mode 750); devtrust refuses to use it")
                && exposed["hint"] == .string("Run: chmod 700 \(keystore)"), "\(exposed)")
        chmod(keystore, 0o700)
    }

    /// In-process: every error's message is what failed, then the hint; the words are the
    /// same, only set apart (ErrorReportTests holds the messages themselves).
    @Test func theHintIsTheEndOfTheMessage() {
        for errorCase in ErrorReportTests.cases {
            let report = ErrorReport.from(errorCase.error)
            guard let hint = report.hint else {
                #expect(report.summary == report.message, "\(errorCase.name)")
                continue
            }
            #expect(!hint.isEmpty && report.message.hasPrefix(report.summary) && report.summary.count < report.message.count, "\(errorCase.name)")
            #expect(report.message.hasSuffix(hint) || report.message.hasSuffix(hint + ")"), "\(errorCase.name): \(report.message)")
        }
        let withHints = ErrorReportTests.cases.filter { ErrorReport.from($0.error).hint != nil }.map(\.name)
        for name in ["usage error of a command", "keystore permissions", "keystore corrupt", "keystore locked", "no device key", "not registered",
                     "ambiguous registration", "not signed in", "refresh failed, may pass"] {
            #expect(withHints.contains(name), "\(name)")
        }
        let noKey = ErrorReport.from(DeviceError.noDeviceKey(keystore: "/ks"))
        #expect(noKey.summary == "there is no device key in /ks" && noKey.hint == "run `devtrust init` first")
        let tpm = ErrorReport.from(TPMError.unreachable(tcti: "device:/dev/tpmrm0", reason: "no such device", hint: "enable it"))
        #expect(tpm.message == "\(TPMError.unreachable(tcti: "device:/dev/tpmrm0", reason: "no such device", hint: "enable it"))")
        #expect(tpm.summary == "no TPM at device:/dev/tpmrm0 (no such device)" && tpm.hint == "enable it")
        #expect(ErrorReport.from(TPMError.unreachable(tcti: "t", reason: "r", hint: nil)).hint == nil)
        #expect(ErrorReport.from(UsageError("no command given; run `devtrust --help` for the list")).hint == nil)
    }

    /// In-process: the JSON object is one line whatever the message holds; --verbose adds `detail`.
    @Test func theErrorObjectIsOneLine() throws {
        let report = ErrorReport.from(KeystoreError.corrupt(path: "/ks/keystore.json", detail: "line 1\nline 2\u{1B}[2J"))
        let line = JSONWriter.string(report.json(verbose: false))
        #expect(!line.contains("\n") && !line.contains("\u{1B}"))
        let error = try #require(try JSONParser.parse(line).objectValue?["error"]?.objectValue)
        #expect(error["message"] == .string("/ks/keystore.json is corrupt: line 1\nline 2\u{1B}[2J"))
        #expect(error["hint"] == .string("`devtrust reset --yes` moves the keystore aside (and says where); then run `devtrust init` (and register again)."))
        let openSSL = ErrorReport.from(OpenSSLError(operation: "EVP_DigestSign", detail: "error:1C800066"))
        #expect(try JSONParser.parse(JSONWriter.string(openSSL.json(verbose: true))).objectValue?["error"]?.objectValue?["detail"] == .string("error:1C800066"))
        #expect(try JSONParser.parse(JSONWriter.string(openSSL.json(verbose: false))).objectValue?["error"]?.objectValue?["detail"] == nil)
    }
}
