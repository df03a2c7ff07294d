import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// What commands print, in-process: `--json` documents, `--quiet` and
/// `--verbose`, tokens from a fixed clock and fixed randomness (checked by an
/// independent verifier), colour and NO_COLOR, and prompts at a terminal or not.
@Suite struct OutputModeTests {
    typealias Device = DeviceFixture<InProcessCLI>

    @Test func initJSONDescribesTheKeyAndQuietSaysNothing() throws {
        let device = try Device(softwareKey: false)
        let created = try device.cli.run("init", "--backend", "software", "--json", "-q")
        #expect(created.status == 0 && created.stderr.isEmpty, "\(created)")
        #expect(created.stdout.hasSuffix("}\n") && created.stdout.split(separator: "\n").count == 1)
        let document = try #require(try JSONParser.parse(created.output).objectValue)
        #expect(document.keys == ["created", "backend", "fingerprint", "keystore", "notes"])
        #expect(document["created"] == .bool(true) && document["backend"] == .string("software") && document["notes"] == .array([]))
        #expect(document["keystore"] == .string(device.cli.keystore))
        let fingerprint = try #require(document["fingerprint"]?.stringValue)
        #expect(try device.status()["key"]?.objectValue?["fingerprint"] == .string(fingerprint))

        let kept = try device.cli.run("init", "--json")
        #expect(kept.status == 0 && kept.stderr.contains("already exists"), "\(kept)")
        let again = try #require(try JSONParser.parse(kept.output).objectValue)
        #expect(again["created"] == .bool(false) && again["fingerprint"] == .string(fingerprint))
        // Without --json the artifact-free commands print nothing on stdout.
        #expect(try device.cli.run("init").stdout.isEmpty)
    }

    @Test func statusJSONWithoutAndWithAKey() throws {
        let device = try Device(softwareKey: false)
        let empty = try device.status()
        #expect(empty["key"] == .null && empty["registrations"] == .array([]) && empty["signIns"] == .array([]), "\(empty)")
        #expect(empty["keystore"] == .string(device.cli.keystore))
        try device.cli.run("init", "-q")
        let key = try #require(try device.status()["key"]?.objectValue)
        #expect(key["backend"] == .string("software") && key["algorithm"] == .string("ES256") && key["loads"] == .bool(true), "\(key)")
        #expect(key["fingerprint"]?.stringValue?.isEmpty == false && key["createdAt"]?.stringValue?.hasSuffix("Z") == true)
        let text = try device.cli.run("status")
        #expect(text.status == 0 && text.stdout.hasPrefix("keystore: \(device.cli.keystore)\nkey: software P-256, fingerprint "), "\(text.stdout)")
    }

    @Test func verifyJSONForAValidAndAnInvalidToken() throws {
        var device = try Device()
        let spki = try device.cli.run("pubkey").output
        device.cli.clock = FixedClock(seconds: 1_796_012_032)
        device.cli.random = CountingRandom()
        let token = try device.cli.run("token", "--device-id", "d").output
        let valid = try device.cli.run("verify", "--json", "--public-key", spki, "--jwt", token, "--max-age", "60")
        #expect(valid.status == 0 && valid.stderr.hasPrefix("valid: "), "\(valid)")
        let document = try #require(try JSONParser.parse(valid.output).objectValue)
        #expect(document.keys == ["valid", "header", "claims", "keyFingerprint"], "\(document.keys)")
        #expect(document["valid"] == .bool(true) && document["header"]?.objectValue?["deviceId"] == .string("d"))
        #expect(document["claims"]?.objectValue?["iat"] == .integer(1_796_012_032))
        #expect(document["keyFingerprint"] == .string(try device.cli.run("pubkey", "--format", "thumbprint").output))
        let quiet = try device.cli.run("verify", "--json", "-q", "--public-key", spki, "--jwt", token)
        #expect(quiet.status == 0 && quiet.stderr.isEmpty && quiet.stdout == valid.stdout)

        let invalid = try device.cli.run("verify", "--json", "--public-key", spki, "--jwt", token.dropLast(2) + "AA")
        #expect(invalid.status == 1, "\(invalid)")
        let refusal = try #require(try JSONParser.parse(invalid.output).objectValue)
        #expect(refusal["valid"] == .bool(false) && refusal["reason"]?.stringValue?.isEmpty == false, "\(refusal)")
        // Under --json the error is an object too (JSONOutputTests); without, the reason in words.
        let error: JSONValue = .object(["message": .string("invalid: " + refusal["reason"]!.stringValue!), "exitCode": .integer(1), "hint": .null])
        #expect(invalid.stderr == JSONWriter.string(.object(["error": error])) + "\n", "\(invalid.stderr)")
        let text = try device.cli.run("verify", "--public-key", spki, "--jwt", token.dropLast(2) + "AA")
        #expect(text.status == 1 && text.stdout.isEmpty && text.stderr == "devtrust: error: invalid: \(refusal["reason"]!.stringValue!)\n", "\(text)")
    }

    /// A fixed clock and fixed randomness make the token's claims known in advance; the
    /// signature is checked by python3-cryptography (Tests/Interop/verify_es256.py).
    @Test(.enabled(if: ExternalTool.python.shouldRun))
    func aTokenFromAFixedClockAndRandomness() throws {
        var device = try Device()
        device.cli.clock = FixedClock(seconds: 1_796_012_032)
        device.cli.random = CountingRandom()
        let result = try device.cli.run("token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936", "--claim", "site=berlin")
        #expect(result.status == 0 && result.stderr.isEmpty, "\(result)")
        let parts = result.output.split(separator: ".").map(String.init)
        #expect(String(decoding: try Base64URL.decode(parts[0]), as: UTF8.self) == #"{"alg":"ES256","typ":"JWT","deviceId":"74070bae-df8c-42bf-8754-5173c237c936"}"#)
        let claims = try #require(try JSONParser.parse(try Base64URL.decode(parts[1])).objectValue)
        // Bytes 1...16 with the UUID version and variant bits set.
        #expect(claims["jti"] == .string("01020304-0506-4708-890a-0b0c0d0e0f10") && claims["iat"] == .integer(1_796_012_032), "\(claims)")
        #expect(Array(claims.keys.prefix(3)) == ["jti", "iat", "platform"] && claims.keys.last == "site")
        let request: JSONObject = ["spki": .string(try device.cli.run("pubkey").output), "jws": .array([.string(result.output)])]
        let verified = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(try JSONParser.parse(verified.stdout).objectValue?["jws"]?.objectValue?["valid"] == .integer(1), "\(verified)")
    }

    /// --quiet silences what is for people, never the artifact or the error.
    @Test func quietKeepsTheArtifactAndTheError() throws {
        let device = try Device(softwareKey: false)
        let noKey = try device.cli.run("-q", "pubkey")
        #expect(noKey.status == 3 && noKey.stderr.hasPrefix("devtrust: error: there is no device key in "), "\(noKey)")
        #expect(try device.cli.run("init", "--quiet").stderr.isEmpty)
        let pubkey = try device.cli.run("pubkey", "-q")
        #expect(pubkey.status == 0 && !pubkey.output.isEmpty && pubkey.stderr.isEmpty)
        let reset = try device.cli.run("reset", "--yes", "-q")
        #expect(reset.status == 0 && reset.stderr.isEmpty, "\(reset)")
        #expect(try device.cli.run("reset", "--yes").stderr.contains("nothing to reset"))
    }

    /// NO_COLOR and a stderr that is not a terminal both turn the server's error messages plain.
    @Test(.enabled(if: ReferenceServer.shouldRun), arguments: [(true, false), (true, true), (false, false)])
    func serverErrorsAreRedOnlyOnATerminalWithoutNoColor(errorIsTerminal: Bool, noColor: Bool) throws {
        var setup = try ReferenceServerFixture<InProcessCLI>()
        setup.cli.errorIsTerminal = errorIsTerminal
        // A terminal with escapes: TERM unset counts as dumb (TerminalStyle.hasEscapes).
        setup.cli.extraEnvironment["TERM"] = "xterm"
        if noColor { setup.cli.extraEnvironment["NO_COLOR"] = "1" }
        let wrongCode = ["--input", "\(RegisterTests.email)=a@example.com", "--input", "password=long enough", "--input", "otp=999999"]
        let result = try setup.register(answers: wrongCode)
        #expect(result.status == 4, "\(result)")
        let red = "\u{1B}[31merror: The code is incorrect. Try again.\u{1B}[0m\n"
        if errorIsTerminal && !noColor {
            #expect(result.stderr.contains(red), "\(result.stderr)")
        } else {
            #expect(result.stderr.contains("\nerror: The code is incorrect. Try again.\n") && !result.stderr.contains("\u{1B}"), "\(result.stderr)")
        }
    }

    /// At a terminal, `register` asks for each input: plain ones with readLine, passwords and codes
    /// without echo; a value the form refuses is asked for again, and so is a code the server refuses.
    /// A step's inputs come before its actions (issue 26).
    @Test(.enabled(if: ReferenceServer.shouldRun))
    func registerAtATerminalPromptsForEachInputAndHidesSecrets() throws {
        var setup = try ReferenceServerFixture<InProcessCLI>()
        setup.cli.inputIsTerminal = true
        setup.cli.errorIsTerminal = true
        setup.cli.extraEnvironment["TERM"] = "xterm"
        let typed = ["alice@example.com", "short", "correct horse", "r", "000000", "", "", "123456"]
        let session = setup.cli.session(["register", "--server", setup.server.url], stdin: Array((typed.joined(separator: "\n") + "\n").utf8))
        #expect(session.result.status == 0, "\(session.result)")
        let email = CapturingTerminal.Prompt(text: "Email (required): ", isSecret: false)
        let password = CapturingTerminal.Prompt(text: "Password (required, 8 to 64 characters): ", isSecret: true)
        // The list after Enter at the code may take the code: read without echo.
        let choice = CapturingTerminal.Prompt(text: "[1] Verify  [2] Resend code  (Enter for 1; typing hidden): ", isSecret: true)
        let code = CapturingTerminal.Prompt(text: "Verification code (required, 6 characters; r for Resend code): ", isSecret: true)
        // The code first (r resends); Enter at it lists the actions, and Enter there asks for the code again.
        #expect(session.prompts == [email, password, password, code, code, code, choice, code], "\(session.prompts)")
        let stderr = session.result.stderr
        #expect(stderr.contains("devtrust: warning: Password must be 8 to 64 characters long") && stderr.contains("We sent a new code"), "\(stderr)")
        #expect(stderr.contains("\u{1B}[31merror: The code is incorrect. Try again.\u{1B}[0m"))
        #expect(!stderr.contains("correct horse") && !stderr.contains("000000") && !stderr.contains("123456") && session.result.stdout.isEmpty)
        #expect(try setup.server.devices().count == 1)
    }

    /// Without a terminal on stdin nothing is asked: what is missing is named (exit 2).
    @Test(.enabled(if: ReferenceServer.shouldRun))
    func registerWithoutATerminalAsksNothing() throws {
        let setup = try ReferenceServerFixture<InProcessCLI>()
        let session = setup.cli.session(["register", "--server", setup.server.url], stdin: Array("alice@example.com\n".utf8))
        #expect(session.result.status == 2 && session.prompts.isEmpty, "\(session.result) \(session.prompts)")
        #expect(session.result.stderr.contains("missing input") && session.result.stderr.contains(RegisterTests.email), "\(session.result.stderr)")
        #expect(setup.manifest().map { try? JSONParser.parse($0).objectValue?["registrations"] } == .some(.some(.array([]))))
    }

    /// `reset` at a terminal asks; only y or yes deletes.
    @Test(arguments: ["n", "", "yes"])
    func resetAtATerminalAsksFirst(answer: String) throws {
        var device = try Device()
        device.cli.inputIsTerminal = true
        let session = device.cli.session(["reset"], stdin: Array((answer + "\n").utf8))
        #expect(session.prompts == [CapturingTerminal.Prompt(
            text: "Delete the software device key and 0 registration(s) in \(device.cli.keystore)? The device will have to be registered again. [y/N] ",
            isSecret: false)])
        if answer == "yes" {
            #expect(session.result.status == 0 && session.result.stderr.hasSuffix("deleted the device key from \(device.cli.keystore)\n"), "\(session.result)")
            #expect(try device.cli.run("pubkey").status == 3)
        } else {
            // Declining is an answer, not an error.
            #expect(session.result.status == 0 && session.result.stderr.hasSuffix("reset cancelled: nothing deleted\n"), "\(session.result)")
            #expect(try device.cli.run("pubkey").status == 0)
        }
    }

    /// The prompt names what goes: the key, each registration's server, each sign-in (revoked first).
    @Test func resetsPromptListsTheRegistrationsAndSignIns() throws {
        let directory = TemporaryDirectory()
        var cli = InProcessCLI(keystore: copyKeystoreFixture("v2/software-signed-in", into: directory))
        cli.inputIsTerminal = true
        let session = cli.session(["reset"], stdin: Array("n\n".utf8))
        #expect(session.prompts.map(\.text) == [
            "Delete the software device key, 2 registration(s) (with https://api.asgardeo.io/t/acme, https://localhost:9443) and "
            + "1 sign-in(s) (at https://api.asgardeo.io/t/acme; revoked there first) in \(cli.keystore)? The device will have to be registered again. [y/N] "])
        #expect(session.result.status == 0 && session.result.stderr.hasSuffix("reset cancelled: nothing deleted\n"), "\(session.result)")
    }

    /// `sign-challenge` without a challenge reads stdin, unless stdin is a terminal (nothing is piped in).
    @Test func signChallengeReadsStdinUnlessItIsATerminal() throws {
        var device = try Device()
        let piped = try device.cli.run(["sign-challenge"], stdin: Array("AQID\n".utf8))
        #expect(piped.status == 0 && Data(base64Encoded: piped.output) != nil, "\(piped)")
        device.cli.inputIsTerminal = true
        let atTerminal = try device.cli.run(["sign-challenge"], stdin: Array("AQID\n".utf8))
        #expect(atTerminal.status == 2 && atTerminal.stdout.isEmpty, "\(atTerminal)")
        #expect(atTerminal.stderr == "devtrust: error: give the challenge as an argument, or pipe it in with `-` (see `devtrust help sign-challenge`)\n", "\(atTerminal.stderr)")
    }

    /// --verbose says more (what a refresh does), unless --quiet.
    @Test(.enabled(if: ReferenceServer.shouldRun))
    func verboseSaysMoreUnlessQuiet() throws {
        let setup = try ReferenceServerFixture<InProcessCLI>(register: true)
        #expect(try setup.login().status == 0)
        let plain = try setup.cli.run("access-token", "--refresh")
        #expect(plain.status == 0 && !plain.stderr.contains("refreshing the access token"), "\(plain)")
        let verbose = try setup.cli.run("access-token", "--refresh", "-v")
        #expect(verbose.status == 0 && verbose.stderr.contains("refreshing the access token\n"), "\(verbose)")
        let both = try setup.cli.run("access-token", "--refresh", "--verbose", "--quiet")
        #expect(both.status == 0 && both.stderr.isEmpty, "\(both)")
        #expect(!verbose.output.isEmpty && verbose.output != plain.output)
    }
}
