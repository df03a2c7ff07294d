import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `devtrust register` against the reference flow server over loopback HTTP:
/// in-process, and end to end through the binary once.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct RegisterTests {
    static let email = "http://wso2.com/claims/emailaddress"
    static let answers = ReferenceServer.registrationAnswers

    /// A device with a software key (unless `softwareKey: false`) and its own reference server; devtrust in-process.
    typealias Setup = ReferenceServerFixture<InProcessCLI>

    @Test func secretsOnTheCommandLineAreWarnedAboutAndAFileIsNot() throws {
        let setup = try Setup()
        let onCommandLine = try setup.register()
        #expect(onCommandLine.status == 0)
        #expect(onCommandLine.stderr.contains("devtrust: warning: --input password, otp: a command line is visible to every user of this machine"), "\(onCommandLine.stderr)")
        let file = setup.directory.write("inputs.json", #"{"http://wso2.com/claims/emailaddress":"alice@example.com","password":"correct horse","otp":"123456"}"#)
        let fromFile = try setup.register(["--replace"], answers: ["--inputs", file])
        #expect(fromFile.status == 0, "\(fromFile)")
        #expect(!fromFile.stderr.contains("a command line is visible"), "\(fromFile.stderr)")
    }

    /// Through the binary: `register` end to end.
    @Test func registersNonInteractivelyAndTheServerAcceptsTokens() throws {
        let setup = try ReferenceServerFixture<DevtrustBinary>()
        let result = try setup.register(["--device-model", "Test Laptop 14", "--json"])
        #expect(result.status == 0, "\(result)")
        let summary = try JSONParser.parse(result.output).objectValue!
        let registrationId = try #require(summary["registrationId"]?.stringValue)
        #expect(summary["server"] == .string(setup.server.url))
        #expect(result.stderr.contains("answering the Device Registration step"))
        // The secrets given never appear.
        #expect(!result.stderr.contains("correct horse") && !result.stdout.contains("correct horse") && !result.stderr.contains("123456"))

        let devices = try setup.server.devices()
        #expect(devices.count == 1)
        #expect(devices.first?["registrationId"] == .string(registrationId))
        #expect(devices.first?["publicKey"] == .string(try setup.cli.run("pubkey").output))
        #expect(devices.first?["deviceModel"] == .string("Test Laptop 14"))
        #expect(devices.first?["user"] == .string("alice@example.com"))

        let records = try setup.registrations()
        #expect(records.count == 1 && records.first?.objectValue?["registrationId"] == .string(registrationId))
        // The token carries the registration id, and the server accepts it exactly once.
        let token = try setup.cli.run("token").output
        let check = try setup.server.get("/api/device-check", headers: ["X-Device-Token": token]).objectValue!
        #expect(check["accepted"] == .bool(true) && check["deviceId"] == .string(registrationId), "\(check)")
        #expect(check["strict"] == .bool(true), "devtrust's token is not canonical: \(check)")
        let replay = try setup.server.get("/api/device-check", headers: ["X-Device-Token": token]).objectValue!
        #expect(replay["accepted"] == .bool(false) && (replay["reason"]?.stringValue ?? "").contains("already used"))
        let fresh = try setup.server.get("/api/device-check?device_token=" + (try setup.cli.run("token").output)).objectValue!
        #expect(fresh["accepted"] == .bool(true))
    }

    /// The reference server reads tokens as the real one does (Nimbus on Gson's
    /// lenient mode): a token with unquoted names, `=>` and junk in its base64
    /// is accepted there, though devtrust never makes one (strict: false).
    @Test func theReferenceServerReadsTokensLeniently() throws {
        let setup = try Setup()
        let result = try setup.register(["--json"])
        let registrationId = try #require(try JSONParser.parse(result.output).objectValue?["registrationId"]?.stringValue, "\(result)")
        let keyFile = try #require(setup.directory.entries("ks").first { $0.hasPrefix("key-") })
        let header = "{alg=>ES256;deviceId=>'\(registrationId)'}"
        let claims = "{jti:lenient-1,iat:\(Int(Date().timeIntervalSince1970))}"
        let sign = """
            import base64, sys
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec, utils
            b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
            key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
            header = b64(sys.argv[2].encode())
            signing_input = header[:4] + b" *" + header[4:] + b"." + b64(sys.argv[3].encode())
            r, s = utils.decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            print((signing_input + b"." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))).decode())
            """
        // Gson-lenient syntax, then an array of [name, value] pairs (Gson's Map adapter reads it as a map).
        for (index, header) in [header, "[[alg,ES256],[deviceId,\(registrationId)]]"].enumerated() {
            let token = try ExternalTool.python.run(["-c", sign, setup.directory.file("ks/" + keyFile), header, claims.replacingOccurrences(of: "lenient-1", with: "lenient-\(index)")])
            #expect(token.status == 0, "\(token)")
            let check = try setup.server.get("/api/device-check", headers: ["X-Device-Token": token.output]).objectValue!
            #expect(check["accepted"] == .bool(true) && check["strict"] == .bool(false) && check["deviceId"] == .string(registrationId), "\(header): \(check)")
        }
    }

    @Test func createsTheKeyFirstWhenThereIsNone() throws {
        let setup = try Setup(softwareKey: false)
        let result = try setup.register()
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("this device has no key yet; creating one first"))
        #expect(result.stderr.contains("using a software key"))
        #expect(try setup.registrations().count == 1)
    }

    @Test func deviceDataWithThePolicyClaims() throws {
        let setup = try Setup(["--require-claim", "floor=3", "--require-claim", "site=berlin"])
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_CONFIG"] = setup.directory.write("config.json", #"{"claims":{"site":"berlin"}}"#)
        let refused = try cli.run(["register", "--server", setup.server.url, "--non-interactive"] + Self.answers)
        #expect(refused.status == 4, "\(refused)")
        #expect(refused.stderr.contains("DR-60004") && refused.stderr.contains("failed: floor"), "\(refused.stderr)")
        #expect(refused.stderr.contains("does not meet the server's device policy"))
        #expect(try setup.registrations().isEmpty)
        #expect(try setup.server.devices().isEmpty)

        let accepted = try cli.run(["register", "--server", setup.server.url, "--non-interactive", "--claim", "floor=3"] + Self.answers)
        #expect(accepted.status == 0, "\(accepted)")
        let claims = try #require(try setup.server.devices().first?["claims"]?.objectValue)
        #expect(claims["platform"] == .string("linux") && claims["floor"] == .string("3") && claims["site"] == .string("berlin"))
        #expect(claims["jti"]?.stringValue?.count == 36 && claims["iat"]?.int64Value != nil)
    }

    @Test func inputsFromAFileOrStdin() throws {
        let setup = try Setup()
        let file = setup.directory.write("inputs.json", #"{"http://wso2.com/claims/emailaddress":"bob@example.com","password":"long enough","otp":"123456"}"#)
        #expect(try setup.register(["--inputs", file], answers: []).status == 0)
        let second = try Setup()
        let piped = try second.register(["--inputs", "-"], answers: [], stdin: #"{"http://wso2.com/claims/emailaddress":"c@example.com","password":"long enough","otp":"123456"}"#)
        #expect(piped.status == 0, "\(piped)")
        let badFile = setup.directory.write("bad.json", #"{"otp":123456}"#)
        let bad = try setup.register(["--inputs", badFile], answers: [])
        #expect(bad.status == 2 && bad.stderr.contains("field \"otp\" must be a string"), "\(bad)")
    }

    @Test func nonInteractiveNamesEveryMissingInput() throws {
        let setup = try Setup()
        let before = setup.manifest()
        let result = try setup.register(answers: [])
        #expect(result.status == 2)
        #expect(result.stderr.contains("missing inputs for the step \"Create your account\": http://wso2.com/claims/emailaddress (Email), password (Password)"), "\(result.stderr)")
        #expect(setup.manifest() == before)
        let otpMissing = try setup.register(answers: ["--input", "\(Self.email)=a@example.com", "--input", "password=long enough"])
        #expect(otpMissing.status == 2 && otpMissing.stderr.contains("missing input for the step"), "\(otpMissing)")
        #expect(otpMissing.stderr.contains("otp (Verification code)"))
    }

    @Test func clientSideValidationExplainsTheRule() throws {
        let setup = try Setup()
        let result = try setup.register(answers: ["--input", "\(Self.email)=a@example.com", "--input", "password=short", "--input", "otp=123456"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--input password: Password must be 8 to 64 characters long"), "\(result.stderr)")
    }

    @Test func aWrongCodeStopsANonInteractiveRun() throws {
        let setup = try Setup()
        let before = setup.manifest()
        let result = try setup.register(answers: ["--input", "\(Self.email)=a@example.com", "--input", "password=long enough", "--input", "otp=999999"])
        #expect(result.status == 4)
        #expect(result.stderr.contains("did not accept the values given for this step: The code is incorrect. Try again."), "\(result.stderr)")
        #expect(setup.manifest() == before)
    }

    /// `--input actionId=ID` answers one step, the first that offers the action: a resend given
    /// so is sent once, without the step's inputs, and the code given is not sent for the new code
    /// (a script cannot know it), so the run stops naming it; before, it resent at every step
    /// until "did not finish after 50 steps". The main action given so still registers.
    @Test func anActionGivenUpFrontAnswersOneStep() throws {
        let setup = try Setup()
        let resend = try setup.register(["--input", "actionId=resend-otp"])
        #expect(resend.status == 2, "\(resend)")
        #expect(resend.stderr.contains("missing input for the step \"Enter the code we sent to a***@example.com\": otp (Verification code)"), "\(resend.stderr)")
        let requests = try setup.server.flowRequests().filter { $0["step"] == .string("otp") }
        #expect(requests == [["step": .string("otp"), "actionId": .string("resend-otp"), "inputs": .array([])]], "\(requests)")
        #expect(try setup.server.outbox().count == 2)
        let verify = try setup.register(["--input", "actionId=verify-otp"])
        #expect(verify.status == 0, "\(verify)")
    }

    @Test func aFlowAbandonedAfterTheDeviceStepRecordsNothing() throws {
        let setup = try Setup(["--terms-step"])
        let before = setup.manifest()
        let declined = try setup.register(["--input", "actionId=decline-terms"])
        #expect(declined.status == 4 && declined.stderr.contains("FE-60010"), "\(declined)")
        #expect(declined.stderr.contains("answering the Device Registration step"))
        #expect(setup.manifest() == before)
        #expect(try setup.server.devices().isEmpty)
        let accepted = try setup.register(["--accept", "accept-terms"])
        #expect(accepted.status == 0, "\(accepted)")
        #expect(try setup.registrations().count == 1)
    }

    /// Off a terminal, terms are never accepted for the user: the choice is given, or the run stops naming the action.
    @Test func termsNeedAnExplicitChoiceWhenNotAtATerminal() throws {
        let setup = try Setup(["--terms-step"])
        let before = setup.manifest()
        let silent = try setup.register()
        #expect(silent.status == 2 && silent.stderr.contains("this step asks to accept (action accept-terms, \"Accept\")"), "\(silent)")
        #expect(silent.stderr.contains("pass --accept accept-terms") && silent.stderr.contains("--input actionId=decline-terms to decline"), "\(silent)")
        #expect(setup.manifest() == before)
        #expect(try setup.server.devices().isEmpty)
        let inputs = setup.directory.write("inputs.json", #"{"http://wso2.com/claims/emailaddress":"alice@example.com","password":"correct horse","otp":"123456","actionId":"accept-terms"}"#)
        let fromInputs = try setup.register(["--inputs", inputs], answers: [])
        #expect(fromInputs.status == 0, "\(fromInputs)")
        #expect(try setup.server.devices().count == 1)
    }

    /// A misspelt --accept is reported: in the refusal when the step's action is another, and as a warning
    /// when the registration went through without it.
    @Test func anAcceptThatNamesNoActionIsReported() throws {
        let terms = try Setup(["--terms-step"])
        let misspelt = try terms.register(["--accept", "accept-term"])
        #expect(misspelt.status == 2, "\(misspelt)")
        #expect(misspelt.stderr.contains("--accept accept-term names no action of this step; pass --accept accept-terms"), "\(misspelt)")
        #expect(try terms.server.devices().isEmpty)
        let extra = try terms.register(["--accept", "accept-terms", "--accept", "share-data", "--accept", "share-data"])
        #expect(extra.status == 0, "\(extra)")
        #expect(extra.stderr.components(separatedBy: "--accept share-data was not used: no step of this flow offered that action (the actions offered: ").count == 2,
                "warned once: \(extra)")
        #expect(extra.stderr.contains("accept-terms, decline-terms"), "\(extra)")
        #expect(!extra.stderr.contains("--accept accept-terms was not used"), "\(extra)")
        let plain = try Setup()
        let unused = try plain.register(["--accept", "accept-terms"])
        #expect(unused.status == 0, "\(unused)")
        #expect(unused.stderr.contains("--accept accept-terms was not used: no step of this flow offered that action"), "\(unused)")
    }

    /// A second registration with the same server needs --replace, and says the server keeps the old device record.
    @Test func registeringAgainNeedsReplaceAndNamesTheOldRecord() throws {
        let setup = try Setup()
        #expect(try setup.register().status == 0)
        let first = try #require(try setup.registrations().first?.objectValue?["registrationId"]?.stringValue)
        let again = try setup.register()
        #expect(again.status == 2 && again.stderr.contains("already registered with \(setup.server.url) as \(first)"), "\(again)")
        #expect(again.stderr.contains("the server keeps the old device record \(first)") && again.stderr.contains("--replace"), "\(again)")
        #expect(try setup.server.devices().count == 1, "refused before any request")
        let replaced = try setup.register(["--replace", "--json"])
        #expect(replaced.status == 0, "\(replaced)")
        #expect(replaced.stderr.contains("devtrust: warning: replaced the registration \(first) with \(setup.server.url): the server keeps that old device record"), "\(replaced)")
        let summary = try JSONParser.parse(replaced.output).objectValue
        #expect(summary?["replaced"] == .string(first))
        let records = try setup.registrations()
        #expect(records.count == 1 && records.first?.objectValue?["registrationId"] != .string(first), "\(records)")
        #expect(try setup.server.devices().count == 2)
    }

    @Test func severalServersSideBySide() throws {
        let first = try Setup()
        let second = try ReferenceServer()
        #expect(try first.register().status == 0)
        let other = try first.cli.run(["register", "--server", second.url, "--non-interactive"] + Self.answers)
        #expect(other.status == 0, "\(other)")
        #expect(try first.registrations().count == 2)
        let status = try JSONParser.parse(try first.cli.run("status", "--json").output).objectValue!
        #expect(status["registrations"]?.arrayValue?.count == 2)
        #expect(try first.cli.run("token").status == 2)
        for server in [first.server, second] {
            let token = try first.cli.run("token", "--server", server.url).output
            #expect(try server.get("/api/device-check", headers: ["X-Device-Token": token]).objectValue?["accepted"] == .bool(true))
        }
        // Registering again with the same server replaces its record (when asked to).
        #expect(try first.register().status == 2)
        #expect(try first.register(["--replace"]).status == 0)
        #expect(try first.registrations().count == 2)
    }

    @Test(arguments: [
        ("DR-60001", "run `devtrust register` again"),
        ("DR-60002", "could not verify the device key's signature"),
        ("DR-60003", "before it knows the user"),
        ("DR-60005", "requires device data"),
        ("DM-60002", "a field of the device step was empty"),
    ])
    func serverErrorsAtTheDeviceStepAreExplained(code: String, hint: String) throws {
        let setup = try Setup(["--fault", "error-after-device", "--error-code", code])
        let before = setup.manifest()
        let result = try setup.register()
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("devtrust: error: the server refused the registration: \(code)"), "\(result.stderr)")
        #expect(result.stderr.contains(hint))
        #expect(setup.manifest() == before)
    }

    @Test func anInvalidInputsErrorIsExplained() throws {
        let setup = try Setup(["--fault", "error-at-first-continue", "--fault-at", "2", "--error-code", "FE-60008"])
        let result = try setup.register()
        #expect(result.status == 4 && result.stderr.contains("FE-60008") && result.stderr.contains("check them (--input NAME=VALUE)"), "\(result)")
    }

    @Test func urlsThatAreRefusedBeforeAnyRequest() throws {
        let setup = try Setup()
        let plain = try setup.cli.run(["register", "--server", "http://example.com/t/acme", "--non-interactive"] + Self.answers)
        #expect(plain.status == 2 && plain.stderr.contains("uses plain http, which devtrust allows only to loopback addresses"), "\(plain)")
        let bogus = try setup.cli.run(["register", "--server", "ftp://example.com", "--non-interactive"])
        #expect(bogus.status == 2 && bogus.stderr.contains("only https:// URLs are supported"))
        let missing = try setup.cli.run(["register", "--non-interactive"])
        #expect(missing.status == 2 && missing.stderr.contains("--server URL is required"))
    }
}
