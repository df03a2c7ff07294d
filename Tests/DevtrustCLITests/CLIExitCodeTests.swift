import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Every exit code of ../shared/docs/cli-contract.md that these commands can
/// produce: the message and the code in-process, and the real process's exit
/// status and streams for each command through the binary.
@Suite struct CLIExitCodeTests {
    static let challenge = "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y"

    func devtrust(_ directory: TemporaryDirectory) -> InProcessCLI {
        InProcessCLI(keystore: directory.file("ks"))
    }

    /// Each command end to end through the binary: exit status 0, the artifact alone on stdout.
    @Test func successPathsPrintOnlyTheArtifact() throws {
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let initResult = try cli.run("init", "--backend", "software")
        #expect(initResult.status == 0 && initResult.stdout.isEmpty)
        #expect(initResult.stderr.contains("created a software P-256 device key in \(directory.file("ks"))/key-"))

        let spki = try cli.run("pubkey")
        #expect(spki.status == 0 && spki.stderr.isEmpty)
        #expect(spki.stdout.hasSuffix("\n") && !spki.output.contains("\n") && spki.output.hasPrefix("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"))
        let pem = try cli.run("pubkey", "--format", "pem")
        #expect(pem.stdout.hasPrefix("-----BEGIN PUBLIC KEY-----\n") && pem.stdout.hasSuffix("-----END PUBLIC KEY-----\n"))
        let jwk = try cli.run("pubkey", "--format=jwk")
        #expect(try JSONParser.parse(jwk.output).objectValue?.keys == ["kty", "crv", "x", "y"])
        let thumbprint = try cli.run("pubkey", "--format", "thumbprint")
        #expect(thumbprint.output.count == 43)

        for arguments in [["sign-challenge", Self.challenge], ["device-data", "--claim", "floor=3"],
                          ["token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936"], ["status"], ["--version"], ["--help"], ["help", "token"]] {
            let result = try cli.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            #expect(result.stdout.hasSuffix("\n") && !result.stdout.hasSuffix("\n\n"), "\(arguments)")
            #expect(result.stderr.isEmpty, "\(arguments): \(result.stderr)")
        }
        let token = try cli.run("token", "--device-id", "X").output
        let verify = try cli.run("verify", "--public-key", spki.output, "--jwt", token, "--max-age", "60")
        #expect(verify.status == 0 && verify.stdout.isEmpty && verify.stderr.hasPrefix("valid: "))
        let quiet = try cli.run("-q", "verify", "--public-key", spki.output, "--jwt", token)
        #expect(quiet.status == 0 && quiet.stderr.isEmpty)
    }

    @Test func exitOneInvalidAndFailure() throws {
        let directory = TemporaryDirectory()
        var cli = devtrust(directory)
        try cli.run("init")
        let spki = try cli.run("pubkey").output
        let issued = Int64(Date().timeIntervalSince1970)
        cli.clock = FixedClock(seconds: issued)
        let token = try cli.run("token", "--device-id", "X").output
        var tampered = Array(token)
        tampered[tampered.count - 3] = tampered[tampered.count - 3] == "A" ? "B" : "A"
        let invalid = try cli.run("verify", "--public-key", spki, "--jwt", String(tampered))
        #expect(invalid.status == 1 && invalid.stderr == "devtrust: error: invalid: the signature does not verify with this public key\n")
        let json = try cli.run("verify", "--json", "--public-key", spki, "--jwt", "a.b.c")
        #expect(json.status == 1)
        #expect(try JSONParser.parse(json.output).objectValue?["valid"] == .bool(false))
        // Two seconds after iat the token is 2 s old.
        cli.clock = FixedClock(seconds: issued + 2)
        let stale = try cli.run("verify", "--public-key", spki, "--jwt", token, "--max-age", "1")
        #expect(stale.status == 1 && stale.stderr.contains("old, older than --max-age 1 s"), "\(stale)")
        let other = InProcessCLI(keystore: directory.file("other"))
        try other.run("init")
        let wrongKey = try cli.run("verify", "--public-key", try other.run("pubkey").output, "--jwt", token)
        #expect(wrongKey.status == 1)
        let backendMismatch = try cli.run("init", "--backend", "tpm")
        #expect(backendMismatch.status == 1 && backendMismatch.stderr.contains("--force"))
    }

    /// The process's exit status is the code of its error, with the message on stderr
    /// and nothing on stdout: one error of each kind through the binary.
    @Test func theProcessExitsWithItsErrorsCode() throws {
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        let noKey = try cli.run("pubkey")
        #expect(noKey.status == 3 && noKey.stdout.isEmpty && noKey.stderr == "devtrust: error: there is no device key in \(directory.file("ks")); run `devtrust init` first\n", "\(noKey)")
        try cli.run("init")
        let usage = try cli.run("pubkey", "--frob")
        #expect(usage.status == 2 && usage.stdout.isEmpty && usage.stderr.hasPrefix("devtrust: error: unknown option --frob"), "\(usage)")
        let invalid = try cli.run("verify", "--public-key", try cli.run("pubkey").output, "--jwt", "a.b.c")
        #expect(invalid.status == 1 && invalid.stdout.isEmpty && invalid.stderr.hasPrefix("devtrust: error: invalid: "), "\(invalid)")
        chmod(directory.file("ks"), 0o750)
        let keystore = try cli.run("token", "--device-id", "x")
        #expect(keystore.status == 7 && keystore.stdout.isEmpty && keystore.stderr.contains("chmod 700"), "\(keystore)")
        #expect(!noKey.signaled && !usage.signaled && !invalid.signaled && !keystore.signaled)
    }

    @Test(arguments: [
        (["frobnicate"], "unknown command \"frobnicate\""),
        (["pubkey", "--frob"], "unknown option --frob"),
        (["token", "--device-id"], "option --device-id needs a value"),
        (["--keystore"], "option --keystore needs a value"),
        (["pubkey", "--format", "der"], "--format must be spki, pem, jwk or thumbprint"),
        (["init", "--backend", "hsm"], "--backend must be auto, tpm or software"),
        (["sign-challenge", "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y+"], "the challenge is not base64url"),
        (["sign-challenge", "ab/c"], "the challenge is not base64url"),
        (["sign-challenge", "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y=="], "the challenge is not base64url"),
        (["sign-challenge", ""], "the challenge is empty"),
        (["sign-challenge", "a", "b"], "unexpected argument \"b\""),
        (["token", "--claim", "lockScreen"], "--claim takes NAME=VALUE"),
        (["token", "--claim", "jti=1"], "jti is set by devtrust"),
        (["device-data", "--claim", "attestationToken=x"], "attestationToken is for Play Integrity"),
        // A given claim never replaces a measured or reserved one (issue 28): the claim is named.
        (["token", "--claim", "diskEncryption=true"], "--claim diskEncryption: diskEncryption is measured by devtrust"),
        (["device-data", "--claim", "firewall=true"], "--claim firewall: firewall is measured by devtrust"),
        (["token", "--claim", "keyProtection=tpm"], "--claim keyProtection: keyProtection is set by devtrust itself"),
        (["token", "--claim", "platform=windows"], "--claim platform: platform is set by devtrust itself"),
        (["register", "--server", "https://idp.example", "--claim", "lockScreen=true"], "--claim lockScreen: lockScreen is measured by devtrust"),
        (["token", "--device-id", ""], "--device-id must be 1 to 256 printable characters"),
        (["verify", "--jwt", "a.b.c"], "--public-key is required"),
        (["verify", "--public-key", "MFkw"], "give either --jwt, or --signature with --message"),
        (["verify", "--public-key", "MFkw", "--jwt", "a", "--signature", "b"], "give either --jwt"),
        (["verify", "--public-key", "MFkw", "--signature", "b"], "--signature and --message go together"),
        (["verify", "--public-key", "notbase64!", "--jwt", "a.b.c"], "--public-key is neither"),
        (["verify", "--public-key", "MFkw", "--jwt", "a.b.c"], "--public-key: not a DER SubjectPublicKeyInfo"),
        (["verify", "--public-key", "MFkw", "--jwt", "a.b.c", "--max-age", "soon"], "--max-age takes a positive number"),
        (["token", "--version=1"], "option --version takes no value"),
        (["--config", "/nonexistent/devtrust.json", "token", "--device-id", "x"], "configuration file /nonexistent/devtrust.json does not exist"),
        (["reset"], "confirm with --yes"),
        (["token", "--device-id", "a", "--device-id", "b"], "option --device-id is given more than once"),
        (["--claim", "a=b", "token"], "option --claim must come after the command it belongs to"),
    ])
    func exitTwoUsage(arguments: [String], message: String) throws {
        let directory = TemporaryDirectory()
        let cli = devtrust(directory)
        try cli.run("init")
        let result = try cli.run(arguments)
        #expect(result.status == 2, "\(arguments): \(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("devtrust: error: ") && result.stderr.contains(message), "\(result.stderr)")
    }

    @Test func aChallengeThatIsATokensSigningInputIsNotSigned() throws {
        let directory = TemporaryDirectory()
        let cli = devtrust(directory)
        try cli.run("init")
        let signingInput = Base64URL.encode(Array(#"{"alg":"ES256","typ":"JWT","deviceId":"d"}"#.utf8)) + "." + Base64URL.encode(Array(#"{"jti":"j","iat":1}"#.utf8))
        let result = try cli.run("sign-challenge", Base64URL.encode(Array(signingInput.utf8)))
        #expect(result.status == 2 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("devtrust refuses to sign this challenge: it could be read as a JWS signing input"))
    }

    @Test func exitTwoForABadConfigurationFile() throws {
        let directory = TemporaryDirectory()
        var cli = devtrust(directory)
        try cli.run("init")
        let config = directory.write("config.json", #"{"claims":{"lockScreen":true}}"#)
        cli.extraEnvironment["DEVTRUST_CONFIG"] = config
        let result = try cli.run("token", "--device-id", "x")
        #expect(result.status == 2)
        #expect(result.stderr == "devtrust: error: configuration file \(config): field \"claims.lockScreen\" must be a string, found a boolean (true); see docs/configuration.md\n")
    }

    @Test func exitThreeNoKeyOrNotRegistered() throws {
        let directory = TemporaryDirectory()
        let cli = devtrust(directory)
        for arguments in [["pubkey"], ["sign-challenge", Self.challenge], ["device-data"], ["token", "--device-id", "x"]] {
            let result = try cli.run(arguments)
            #expect(result.status == 3, "\(arguments): \(result)")
            #expect(result.stderr == "devtrust: error: there is no device key in \(directory.file("ks")); run `devtrust init` first\n")
        }
        try cli.run("init")
        let unregistered = try cli.run("token")
        #expect(unregistered.status == 3)
        #expect(unregistered.stderr.contains("not registered with any server; run `devtrust register --server URL`, or pass --device-id"))
    }

    @Test func tokensUseTheRegistrationRecord() throws {
        let directory = TemporaryDirectory()
        let keystore = copyKeystoreFixture("v1/software-registered", into: directory)
        let cli = InProcessCLI(keystore: keystore)
        let ambiguous = try cli.run("token")
        #expect(ambiguous.status == 2 && ambiguous.stderr.contains("choose one with --server"))
        let token = try cli.run("token", "--server", "api.asgardeo.io")
        #expect(token.status == 0)
        let header = try JSONParser.parse(Base64URL.decode(String(token.output.split(separator: ".")[0])))
        #expect(header.objectValue?["deviceId"] == .string("74070bae-df8c-42bf-8754-5173c237c936"))
        let other = try cli.run("token", "--server", "https://localhost:9443/")
        #expect(other.status == 0)
        let missing = try cli.run("token", "--server", "https://example.org")
        #expect(missing.status == 3 && missing.stderr.contains("not registered with https://example.org"))
    }

    @Test func exitSevenKeystoreProblems() throws {
        let directory = TemporaryDirectory()
        let cli = devtrust(directory)
        try cli.run("init")
        let keystore = directory.file("ks")
        chmod(keystore, 0o750)
        let exposed = try cli.run("token", "--device-id", "x")
        #expect(exposed.status == 7)
        #expect(exposed.stderr.contains("mode 750") && exposed.stderr.contains("Run: chmod 700 \(keystore)"))
        chmod(keystore, 0o700)

        let keyFile = try #require(directory.entries("ks").first { $0.hasPrefix("key-") })
        chmod(keystore + "/" + keyFile, 0o644)
        let exposedKey = try cli.run("sign-challenge", Self.challenge)
        #expect(exposedKey.status == 7 && exposedKey.stderr.contains("chmod 600 \(keystore)/\(keyFile)"))
        chmod(keystore + "/" + keyFile, 0o600)

        let manifest = try #require(directory.read("ks/keystore.json"))
        directory.write("ks/keystore.json", #"{"version":99,"key":null,"registrations":[]}"#)
        let newer = try cli.run("status")
        #expect(newer.status == 7 && newer.stderr.contains("keystore version 99, newer than this devtrust supports (2); upgrade devtrust"), "\(newer)")
        directory.write("ks/keystore.json", "{\"version\":1,")
        let corrupt = try cli.run("pubkey")
        #expect(corrupt.status == 7 && corrupt.stderr.contains("is corrupt: not valid JSON"))
        directory.write("ks/keystore.json", manifest)
        directory.write("ks/" + keyFile, "-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
        let badKey = try cli.run("token", "--device-id", "x")
        #expect(badKey.status == 7 && badKey.stderr.contains("the -----BEGIN PRIVATE KEY----- block is not base64 (line 1 of its body)"), "\(badKey)")
        // status says everything it can, then exits with the key's code (7: the keystore's key file).
        let status = try cli.run("status", "--json")
        #expect(status.status == 7 && status.stderr.contains("not base64"), "\(status)")
        #expect(try JSONParser.parse(status.output).objectValue?["key"]?.objectValue?["loads"] == .bool(false))
        let text = try cli.run("status")
        #expect(text.status == 7 && text.stdout.contains("key loads: no: ") && text.stdout.contains("registrations: "), "\(text)")
    }

    @Test func resetNeedsConfirmationAndForgetsEverything() throws {
        let directory = TemporaryDirectory()
        let keystore = copyKeystoreFixture("v1/software-registered", into: directory)
        let cli = InProcessCLI(keystore: keystore)
        let refused = try cli.run("reset")
        #expect(refused.status == 2)
        let reset = try cli.run("reset", "--yes")
        #expect(reset.status == 0 && reset.stderr.contains("deleted the device key and 2 registration(s)"))
        let status = try JSONParser.parse(try cli.run("status", "--json").output).objectValue!
        #expect(status["key"] == .null && status["registrations"] == .array([]) && status["signIns"] == .array([]))
        #expect(try cli.run("pubkey").status == 3)
        #expect(try cli.run("reset", "--yes").stderr.contains("nothing to reset"))
    }

    /// A keystore.json that cannot be read: `reset --yes` moves the keystore aside
    /// (timestamped, 0700) and says where; a new key can then be made in its place.
    @Test func resetMovesADamagedKeystoreAside() throws {
        let directory = TemporaryDirectory()
        let keystore = copyKeystoreFixture("v1/software-registered", into: directory)
        let cli = DevtrustBinary(keystore: keystore)
        let keyFile = try #require(try FileManager.default.contentsOfDirectory(atPath: keystore).first { $0.hasPrefix("key-") })
        try Data("{\"version\":2,\"key\":".utf8).write(to: URL(fileURLWithPath: keystore + "/keystore.json"))
        chmod(keystore + "/keystore.json", 0o600)
        #expect(try cli.run("init", "--force").status == 7)
        let refused = try cli.run("reset")
        #expect(refused.status == 2 && refused.stderr.contains("`reset --yes` moves it aside"), "\(refused)")
        // Said by the directory's real path (the temporary directory's name has a "//" in it).
        let realKeystore = Self.realPath(keystore)
        let aside = try Self.resetMovesAside(cli, realKeystore: realKeystore)
        #expect(aside.range(of: #"\.damaged-\d{8}T\d{6}Z$"#, options: .regularExpression) != nil, "\(aside)")
        var info = stat()
        #expect(stat(aside, &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(FileManager.default.fileExists(atPath: aside + "/" + keyFile) && !FileManager.default.fileExists(atPath: keystore))
        #expect(try cli.run("init", "--backend", "software").status == 0)
        #expect(try cli.run("status").status == 0)
    }

    /// Runs `reset --yes` on a damaged keystore: it succeeds and says it moved the keystore,
    /// by its real path, aside; the place it went.
    static func resetMovesAside(_ cli: DevtrustBinary, realKeystore: String) throws -> String {
        let reset = try cli.run("reset", "--yes")
        #expect(reset.status == 0, "\(reset)")
        let prefix = "moved the damaged keystore aside to "
        let line = try #require(reset.stderr.split(separator: "\n").first { $0.hasPrefix(prefix + realKeystore + ".damaged-") }, "\(reset)")
        return String(line.dropFirst(prefix.count).prefix { $0 != " " })
    }

    static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The keystore named through a link, or with "." and ".." in its path: the data itself moves
    /// aside (not the link), the move is said with where it went, and a new key can be made through
    /// the same name. (An outside review: the link was renamed and the data stayed; "ks/../ks"
    /// moved the keystore, then failed to chmod the target it had spelt through "ks/..".)
    @Test(arguments: ["link", "dot-dot", "dot"])
    func aDamagedKeystoreNamedIndirectlyIsMovedItself(_ naming: String) throws {
        let directory = TemporaryDirectory()
        let real = copyKeystoreFixture("v1/software-registered", into: directory)
        let keyFile = try #require(try FileManager.default.contentsOfDirectory(atPath: real).first { $0.hasPrefix("key-") })
        try Data("{\"version\":2,\"key\":".utf8).write(to: URL(fileURLWithPath: real + "/keystore.json"))
        chmod(real + "/keystore.json", 0o600)
        let name: String
        switch naming {
        case "link":
            name = directory.file("link")
            try FileManager.default.createSymbolicLink(atPath: name, withDestinationPath: real)
        case "dot-dot":
            name = real + "/../" + (real as NSString).lastPathComponent
        default:
            name = real + "/."
        }
        let cli = DevtrustBinary(keystore: name)
        let realKeystore = Self.realPath(real)
        let aside = try Self.resetMovesAside(cli, realKeystore: realKeystore)
        var info = stat()
        #expect(lstat(aside, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && info.st_mode & 0o777 == 0o700, "\(aside)")
        #expect(FileManager.default.fileExists(atPath: aside + "/" + keyFile))
        #expect(try cli.run("init", "--backend", "software").status == 0)
        #expect(try cli.run("status").status == 0)
        if naming == "link" {
            #expect(lstat(name, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "the link is still a link")
        }
    }
}
