import DevtrustEncoding
import DevtrustTestSupport
import Testing

/// `init --import` checks a key file made elsewhere more than the keystore's
/// own: the whole PKCS#8 structure to the end of every element, the private
/// key in [1, n-1] and belonging to the public key stored with it; TSS2 keys
/// with fields devtrust cannot honour (policies, secrets) are refused as not
/// supported. A refused import is exit 2 (PKCS#8) or 6 (TSS2, as every TPM
/// key problem), says what is wrong, and writes nothing.
@Suite struct KeyImportTests {
    /// An empty keystore path, devtrust in-process (key files are read, not loaded into a TPM).
    typealias Setup = DeviceFixture<InProcessCLI>

    /// Each refusal says what is wrong and what would make the file importable:
    /// `openssl pkcs8 -topk8 -nocrypt` only where it writes something devtrust
    /// then imports (the test runs the command it gives, path quoted for the
    /// shell, and imports the result), not where it gives the same error back.
    @Test(arguments: PKCS8KeyFile.Damage.allCases)
    func aPKCS8FileIsCheckedToTheEndOfEveryElement(damage: PKCS8KeyFile.Damage) throws {
        let setup = try Setup(softwareKey: false)
        let file = try setup.softwareKeyFile()
        let path = setup.directory.write("it's a key.pem", file.pem(damage))
        let result = try setup.cli.run("init", "--import", path)
        if damage.isValid {
            #expect(result.status == 0, "\(result)")
            #expect(try setup.cli.run("pubkey").output == (try InProcessCLI(keystore: setup.directory.file("other")).run("pubkey").output))
            return
        }
        #expect(result.status == 2, "\(damage) was imported: \(result)")
        let refusal = "devtrust: error: \(path): not a PKCS#8 P-256 private key: \(damage.refusal); "
        #expect(result.stderr.hasPrefix(refusal), "\(result)")
        #expect(setup.directory.read("ks/keystore.json") == nil)
        if damage.openSSLRewritesIt {
            try Self.expectTheAdviceWorks(result.stderr, setup)
        } else {
            #expect(result.stderr == refusal + "the file is damaged, or its writer does not follow PKCS#8 and RFC 5915: export the key again\n")
        }
    }

    /// Keys of other kinds, other formats and unreadable blocks: each named,
    /// with the command that converts it where one does (which the test runs).
    @Test(arguments: ["rsa", "p384", "ed25519", "sec1", "sec1 in key.pem", "encrypted", "explicit", "badBase64"])
    func otherKeysAreNamedAndConvertedWhereTheyCanBe(kind: String) throws {
        let setup = try Setup(softwareKey: false)
        // key.pem: the advice must not write over the file it converts (openssl opens its output first).
        let name = kind == "sec1 in key.pem" ? "key.pem" : "it's a key.pem"
        let path = setup.directory.file(name)
        let p256 = setup.directory.file("p256.pem")
        let openssl: [String]
        switch kind {
        case "rsa": openssl = ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", path]
        case "p384": openssl = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", path]
        case "ed25519": openssl = ["genpkey", "-algorithm", "ED25519", "-out", path]
        case "sec1", "sec1 in key.pem": openssl = ["ec", "-in", p256, "-out", path]
        case "encrypted": openssl = ["pkcs8", "-topk8", "-in", p256, "-passout", "pass:correct horse", "-out", path]
        default: openssl = ["pkey", "-in", p256, "-out", path]
        }
        #expect(try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p256]).status == 0)
        if kind == "explicit" {
            #expect(try ProcessRunner.run("/bin/sh", ["-c", "openssl ec -in p256.pem -param_enc explicit | openssl pkcs8 -topk8 -nocrypt -out \"$1\"", "sh", path],
                                          currentDirectory: setup.directory.path).status == 0)
        } else {
            #expect(try ExternalTool.openssl.run(openssl).status == 0)
        }
        if kind == "badBase64" {
            var lines = String(decoding: try #require(setup.directory.read("it's a key.pem")), as: UTF8.self).split(separator: "\n").map(String.init)
            lines[2] = "!" + lines[2].dropFirst()
            setup.directory.write("it's a key.pem", lines.joined(separator: "\n") + "\n")
        }
        let result = try setup.cli.run("init", "--import", path)
        #expect(result.status == 2, "\(result)")
        #expect(setup.directory.read("ks/keystore.json") == nil)
        let notP256 = "; devtrust's device keys are P-256 (ES256): import a P-256 key, or let devtrust init make one\n"
        switch kind {
        case "rsa": #expect(result.stderr == "devtrust: error: \(path): not a PKCS#8 P-256 private key: an RSA key" + notP256)
        case "p384": #expect(result.stderr == "devtrust: error: \(path): not a PKCS#8 P-256 private key: a key on P-384" + notP256)
        case "ed25519": #expect(result.stderr == "devtrust: error: \(path): not a PKCS#8 P-256 private key: an Ed25519 key" + notP256)
        case "sec1", "sec1 in key.pem":
            #expect(result.stderr.hasPrefix("devtrust: error: \(path) is an EC PRIVATE KEY (SEC1) file; devtrust imports PKCS#8: "), "\(result)")
            let original = setup.directory.read(name)
            try Self.expectTheAdviceWorks(result.stderr, setup, converting: name)
            #expect(setup.directory.read(name) == original, "the advice wrote over the key it converts")
        case "explicit":
            #expect(result.stderr.hasPrefix("devtrust: error: \(path): not a PKCS#8 P-256 private key: its curve is given by explicit parameters"), "\(result)")
            try Self.expectTheAdviceWorks(result.stderr, setup, from: "openssl ec -in ")
        case "encrypted":
            #expect(result.stderr.hasPrefix("devtrust: error: \(path) is an encrypted PKCS#8 key; devtrust imports it unencrypted"), "\(result)")
            try Self.expectTheAdviceWorks(result.stderr, setup, adding: " -passin 'pass:correct horse'")
        default:
            #expect(result.stderr == "devtrust: error: \(path): the -----BEGIN PRIVATE KEY----- block is not base64 (line 2 of its body); "
                    + "the file is damaged, or its writer does not follow PKCS#8 and RFC 5915: export the key again\n")
        }
    }

    /// Runs the command a refusal gives, through the shell, then imports
    /// what it wrote: the file it names after "then import", beside the source.
    static func expectTheAdviceWorks(_ stderr: String, _ setup: Setup, converting source: String = "it's a key.pem",
                                     from commandStart: String = "openssl pkcs8 -topk8 -nocrypt -in ", adding extra: String = "",
                                     sourceLocation: SourceLocation = #_sourceLocation) throws {
        let start = try #require(stderr.range(of: commandStart), "no command in \(stderr)", sourceLocation: sourceLocation)
        let converted = source.dropLast(4) + ".pkcs8.pem"
        let outName = shellQuoted(setup.directory.file(String(converted)))
        let end = try #require(stderr.range(of: "-out " + outName, range: start.upperBound..<stderr.endIndex), "\(outName) not in \(stderr)", sourceLocation: sourceLocation)
        let command = String(stderr[start.lowerBound..<end.upperBound]) + extra
        let result = try ProcessRunner.run("/bin/sh", ["-c", command], currentDirectory: setup.directory.path)
        #expect(result.status == 0, "\(command): \(result)", sourceLocation: sourceLocation)
        #expect(stderr.contains("then import " + outName), "\(stderr)", sourceLocation: sourceLocation)
        let imported = try setup.cli.run("init", "--import", setup.directory.file(String(converted)))
        #expect(imported.status == 0, "after \(command): \(imported)", sourceLocation: sourceLocation)
    }

    /// A PKCS#8 file is a software key even when a comment mentions the TSS2
    /// label, or it holds a TSS2 block too (the old code took either for a
    /// TPM key, exit 6, and made a String of the file).
    @Test(arguments: ["comment", "tss2 block"])
    func aPKCS8FileIsASoftwareKeyWhateverElseItHolds(extra: String) throws {
        let setup = try Setup(softwareKey: false)
        let file = try setup.softwareKeyFile()
        let prefix = extra == "comment" ? "# exported for devtrust; not a -----BEGIN TSS2 PRIVATE KEY----- file\n"
            : try #require(TSS2KeyFileField.named("description")).pem()
        let path = setup.directory.write("mixed.pem", prefix + file.pem())
        let result = try setup.cli.run("init", "--import", path)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("imported a software P-256 device key"), "\(result)")
    }

    @Test func aPrivateKeyThatIsNotThePublicKeysIsRefused() throws {
        let setup = try Setup(softwareKey: false)
        var file = try setup.softwareKeyFile()
        file.publicPoint = try setup.softwareKeyFile("another").publicPoint
        let path = setup.directory.write("import.pem", file.pem())
        let result = try setup.cli.run("init", "--import", path)
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("\(path): its private key does not belong to the public key stored with it"), "\(result)")
        #expect(setup.directory.read("ks/keystore.json") == nil)
    }

    /// Through the binary: a TSS2 key file is checked by the TPM backend, which loads tpm2-tss.
    @Test(arguments: TSS2KeyFileField.all.map(\.name))
    func tss2KeysWithPoliciesOrSecretsAreNotSupported(name: String) throws {
        let field = try #require(TSS2KeyFileField.named(name))
        let setup = try DeviceFixture<DevtrustBinary>(softwareKey: false)
        let path = setup.directory.write("import.pem", try field.pem())
        let result = try setup.cli.run("init", "--import", path)
        #expect(result.status == 6, "\(result)")
        if let refusal = field.refusal {
            #expect(result.stderr.contains(refusal), "\(result)")
        } else {
            // Read past the field: only the missing TPM stops it.
            #expect(result.stderr.contains("no TPM at device:/nonexistent"), "\(result)")
        }
        #expect(setup.directory.read("ks/keystore.json") == nil)
    }
}

extension DeviceFixture {
    /// A fresh software key's file, made by devtrust in another keystore of the fixture's directory.
    func softwareKeyFile(_ keystore: String = "other") throws -> PKCS8KeyFile {
        var other = InProcessCLI(keystore: directory.file(keystore))
        other.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        #expect(try other.run("init", "--backend", "software", "-q").status == 0)
        let name = try #require(directory.entries(keystore).first { $0.hasPrefix("key-") })
        let pem = try #require(directory.read(keystore + "/" + name))
        return try #require(PKCS8KeyFile(pem: pem))
    }
}
