import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// The TPM backend through the real binary, against a private swtpm per test.
@Suite(.enabled(if: Swtpm.shouldRun)) struct TPMCommandTests {
    typealias Setup = SwtpmDeviceFixture

    @Test func initCreatesAPersistentSRKAndRecordsIt() throws {
        let setup = try Setup()
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("made the storage root key persistent at 0x81000001"))
        #expect(result.stderr.contains("created a tpm P-256 device key in the TPM"))
        #expect(try setup.manifest()["tpmPersistentHandles"] == .array([.string("0x81000001")]))
        #expect(try setup.tpm.persistentHandles() == ["0x81000001"])
        #expect(try setup.tpm.transientHandles().isEmpty)
        let keyFile = try String(contentsOfFile: setup.keyFilePath(), encoding: .utf8)
        #expect(keyFile.hasPrefix("-----BEGIN TSS2 PRIVATE KEY-----\n"))
        let status = try setup.status()
        let key = try #require(status["key"]?.objectValue)
        #expect(key["backend"] == .string("tpm") && key["loads"] == .bool(true) && key["tpmParent"] == .string("0x81000001"))
        #expect(status["tpm"]?.objectValue?["manufacturer"] == .string("IBM"))
        #expect(status["tpm"]?.objectValue?["tcti"] == .string(setup.tpm.tcti))
        let text = try setup.cli.run("status").stdout
        #expect(text.contains("key parent: 0x81000001") && text.contains("TPM: IBM, firmware "))

        // A second init keeps the key; --force makes a new one under the same SRK.
        #expect(try setup.cli.run("init").stderr.contains("already exists"))
        let before = try setup.cli.run("pubkey").output
        #expect(try setup.cli.run("init", "--backend", "tpm", "--force").status == 0)
        #expect(try setup.cli.run("pubkey").output != before)
        #expect(try setup.manifest()["tpmPersistentHandles"] == .array([.string("0x81000001")]))
    }

    /// `init --tcti T` records T with the key: later commands use it without
    /// being told, `--tcti` still wins, and `status` exits with the key's code
    /// when the key does not load. A keystore cannot name a TCTI that runs or
    /// loads what it likes.
    @Test func theTCTIGivenToInitIsRecordedWithTheKey() throws {
        let setup = try Setup()
        var plain = setup.cli
        plain.extraEnvironment["DEVTRUST_TCTI"] = ""
        let tcti = setup.tpm.tcti
        let created = try plain.run("init", "--backend", "tpm", "--tcti", tcti)
        #expect(created.status == 0 && created.stderr.contains("in the TPM at \(tcti) (key blob:"), "\(created)")
        #expect(created.stderr.contains("recorded the TCTI \(tcti) with the key"), "\(created)")
        #expect(try setup.manifest()["key"]?.objectValue?["tcti"] == .string(tcti))

        let status = try plain.run("status")
        #expect(status.status == 0 && status.stdout.contains("key TCTI: \(tcti) (recorded with the key at init)")
                && status.stdout.contains("key loads: yes") && status.stdout.contains("at \(tcti)"), "\(status)")
        let token = try plain.run("token", "--device-id", "x")
        #expect(token.status == 0 && token.output.split(separator: ".").count == 3, "\(token)")

        // --tcti wins over the recorded one; the key does not load there, and status says so with exit 6.
        let elsewhere = try plain.run("status", "--tcti", "device:/dev/no-such-tpm")
        #expect(elsewhere.status == 6 && elsewhere.stdout.contains("key loads: no: no TPM at device:/dev/no-such-tpm"), "\(elsewhere)")
        #expect(elsewhere.stdout.contains("this run uses device:/dev/no-such-tpm"), "\(elsewhere)")
        #expect(try plain.run("token", "--device-id", "x", "--tcti", "device:/dev/no-such-tpm").status == 6)

        // The recorded TPM gone: status still prints everything, and exits 6.
        setup.tpm.stop()
        let stopped = try plain.run("status")
        #expect(stopped.status == 6 && stopped.stdout.contains("key loads: no: no TPM at \(tcti)"), "\(stopped)")
        #expect(stopped.stdout.contains("registrations: none") && stopped.stderr.contains("devtrust: error: no TPM at \(tcti)"), "\(stopped)")
        let stoppedJSON = try plain.run("status", "--json")
        #expect(stoppedJSON.status == 6, "\(stoppedJSON)")
        let key = try JSONParser.parse(stoppedJSON.output).objectValue?["key"]?.objectValue
        #expect(key?["loads"] == .bool(false) && key?["tcti"] == .string(tcti) && key?["tctiInUse"] == .bool(true), "\(stoppedJSON)")

        // A hostile keystore: a TCTI that runs a program, writes a file or names a library is refused (exit 7), never loaded.
        for hostile in ["cmd:touch /tmp/devtrust-owned", "pcap:device:/dev/tpmrm0", "/tmp/evil.so", "libtss2-tcti-evil.so.0:x",
                        "device:/tmp/x", "device:/dev/../tmp/x", "swtpm:host=a b"] {
            try HostileLocalInputTests.editManifest(setup.directory.file("ks")) { manifest in
                var key = manifest["key"]?.objectValue ?? [:]
                key["tcti"] = .string(hostile)
                manifest["key"] = .object(key)
            }
            let refused = try plain.run("token", "--device-id", "x")
            #expect(refused.status == 7 && refused.stderr.contains("key.tcti"), "\(hostile): \(refused)")
        }
    }

    @Test(arguments: ["ecc256:aes128cfb", "rsa2048:aes128cfb"])
    func anExistingSRKIsUsedAndNeverRemoved(algorithm: String) throws {
        let setup = try Setup()
        let context = setup.directory.file("srk.ctx")
        #expect(try setup.tpm.tool("tpm2_createprimary", ["-C", "o", "-g", "sha256", "-G", algorithm, "-a", Swtpm.storageRootKeyAttributes, "-c", context]).status == 0)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", context, "0x81000001"]).status == 0)
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 0 && !result.stderr.contains("made the storage root key"), "\(result)")
        #expect(try setup.manifest()["tpmPersistentHandles"] == .array([]))
        #expect(try setup.cli.run("token", "--device-id", "x").status == 0)
        let reset = try setup.cli.run("reset", "--yes")
        #expect(reset.status == 0 && reset.stderr.contains("left the TPM's storage root key at 0x81000001 in place"), "\(reset)")
        #expect(try setup.tpm.persistentHandles() == ["0x81000001"])
    }

    /// 0x81000001 holds something else: devtrust uses the TCG's handle for an
    /// ECC SRK, 0x81000002; when both do, a transient primary.
    @Test func aNonStorageObjectAtTheSRKHandleMeansTheNextHandle() throws {
        let setup = try Setup()
        func occupy(_ handle: String) throws {
            let context = setup.directory.file("signer.ctx")
            #expect(try setup.tpm.tool("tpm2_createprimary", ["-C", "o", "-G", "ecc256:ecdsa-sha256", "-a", "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign", "-c", context]).status == 0)
            #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", context, handle]).status == 0)
            try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        }
        try occupy("0x81000001")
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("the object at 0x81000001 cannot be the device key's parent: it is not a storage key")
                && result.stderr.contains("made the storage root key persistent at 0x81000002"), "\(result)")
        #expect(try setup.status()["key"]?.objectValue?["tpmParent"] == .string("0x81000002"))
        #expect(try setup.cli.run("token", "--device-id", "x").status == 0)

        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000002"]).status == 0)
        try occupy("0x81000002")
        let transient = try setup.cli.run("init", "--backend", "tpm", "--force")
        #expect(transient.status == 0 && transient.stderr.contains("transient"), "\(transient)")
        #expect(try setup.status()["key"]?.objectValue?["tpmParent"] == .string("0x40000001"))
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 0)
        #expect(try setup.cli.run("verify", "--public-key", try setup.cli.run("pubkey").output, "--jwt", token.output).status == 0)
        #expect(try setup.tpm.transientHandles().isEmpty)
        #expect(try setup.tpm.persistentHandles() == ["0x81000001", "0x81000002"])
        // A transient parent is nothing reset could leave behind: it says nothing of one.
        let reset = try setup.cli.run("reset", "--yes")
        #expect(reset.status == 0 && !reset.stderr.contains("left the TPM's storage root key"), "\(reset)")
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun && ExternalTool.python.shouldRun))
    func signaturesAndTokensVerifyWithOpenSSLAndPython() throws {
        let setup = try Setup()
        try setup.cli.run("init", "--backend", "tpm")
        let publicKey = setup.directory.write("pub.pem", try setup.cli.run("pubkey", "--format", "pem").stdout)
        var tokens = [JSONValue]()
        for index in 0..<40 {
            // Random bytes without a dot: a challenge with one may be refused as a possible JWS signing input (ChallengePolicy).
            let challenge = Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) }.map { $0 == UInt8(ascii: ".") ? 0 : $0 })
            let signature = try setup.cli.run("sign-challenge", "--", challenge)
            #expect(signature.status == 0, "\(signature)")
            setup.directory.write("sig", Array(try #require(Data(base64Encoded: signature.output))))
            setup.directory.write("msg", try Base64URL.decode(challenge))
            let verified = try ExternalTool.openssl.run(["dgst", "-sha256", "-verify", publicKey, "-signature", setup.directory.file("sig"), setup.directory.file("msg")])
            #expect(verified.output == "Verified OK")
            tokens.append(.string(try setup.cli.run("token", "--device-id", "device-\(index)").output))
        }
        let request: JSONObject = ["spki": .string(try setup.cli.run("pubkey").output), "jws": .array(tokens)]
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(try JSONParser.parse(result.stdout).objectValue?["jws"]?.objectValue?["valid"] == .integer(40), "\(result)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func tpm2OpenSSLReadsAndSignsWithOurKeyFile() throws {
        let setup = try Setup()
        try setup.cli.run("init", "--backend", "tpm")
        let environment = ["PATH": "/usr/bin:/bin", "TPM2OPENSSL_TCTI": setup.tpm.tcti, "TSS2_LOG": "all+NONE"]
        let keyFile = try setup.keyFilePath()
        let theirs = try ProcessRunner.run("/usr/bin/openssl", ["pkey", "-provider", "tpm2", "-provider", "default", "-in", keyFile, "-pubout"], environment: environment)
        #expect(theirs.status == 0, "\(theirs)")
        #expect(theirs.stdout == (try setup.cli.run("pubkey", "--format", "pem").stdout))

        let message = setup.directory.write("message", "signed by openssl through the TPM")
        let digest = setup.directory.file("digest")
        #expect(try ProcessRunner.run("/usr/bin/openssl", ["dgst", "-sha256", "-binary", "-out", digest, message], environment: environment).status == 0)
        let signature = setup.directory.file("signature")
        let signed = try ProcessRunner.run("/usr/bin/openssl", ["pkeyutl", "-provider", "tpm2", "-provider", "default", "-sign", "-inkey", keyFile, "-in", digest, "-out", signature], environment: environment)
        #expect(signed.status == 0, "\(signed)")
        let der = try #require(setup.directory.read("signature"))
        let verify = try setup.cli.run("verify", "--public-key", try setup.cli.run("pubkey").output, "--signature", Base64.encode(der), "--message", message)
        #expect(verify.status == 0, "\(verify)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun), arguments: [nil, "0x81000001"])
    func keysMadeByTpm2OpenSSLCanBeImported(parent: String?) throws {
        let setup = try Setup()
        if parent != nil { try setup.cli.run("init", "--backend", "tpm") }
        let environment = ["PATH": "/usr/bin:/bin", "TPM2OPENSSL_TCTI": setup.tpm.tcti, "TSS2_LOG": "all+NONE"]
        let file = setup.directory.file("openssl-tpm.pem")
        let generate = ["genpkey", "-provider", "tpm2", "-provider", "default", "-algorithm", "EC", "-pkeyopt", "group:P-256"]
            + (parent.map { ["-pkeyopt", "parent:\($0)"] } ?? []) + ["-out", file]
        #expect(try ProcessRunner.run("/usr/bin/openssl", generate, environment: environment).status == 0)
        let imported = try setup.cli.run("init", "--force", "--import", file)
        #expect(imported.status == 0, "\(imported)")
        #expect(imported.stderr.contains("imported a tpm P-256 device key"))
        #expect(imported.stderr.contains("transient") == (parent == nil))
        let theirs = try ProcessRunner.run("/usr/bin/openssl", ["pkey", "-provider", "tpm2", "-provider", "default", "-in", file, "-pubout"], environment: environment)
        #expect(theirs.stdout == (try setup.cli.run("pubkey", "--format", "pem").stdout))
        let publicKey = setup.directory.write("pub.pem", theirs.stdout)
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(try setup.cli.run("verify", "--public-key", publicKey, "--jwt", token.output).status == 0)
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    @Test func importRefusesWhatItCannotUse() throws {
        let setup = try Setup()
        let garbage = setup.directory.write("garbage.pem", "-----BEGIN TSS2 PRIVATE KEY-----\nMAA=\n-----END TSS2 PRIVATE KEY-----\n")
        let result = try setup.cli.run("init", "--import", garbage)
        #expect(result.status == 6 && result.stderr.contains("not a TSS2 PRIVATE KEY"), "\(result)")
        let text = setup.directory.write("text.pem", "hello")
        #expect(try setup.cli.run("init", "--import", text).status == 2)
        #expect(setup.directory.read("ks/keystore.json") == nil)
    }

    // MARK: errors users meet

    @Test func noTPMAtADeviceIsExitSixAndAutoFallsBack() throws {
        let setup = try Setup()
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = ""
        let missing = try cli.run("init", "--backend", "tpm", "--tcti", "device:/nonexistent/tpmrm0")
        #expect(missing.status == 6)
        #expect(missing.stderr == "devtrust: error: no TPM at device:/nonexistent/tpmrm0 (no such device): this machine has no TPM, or it is disabled in the firmware settings\n")
        #expect(setup.directory.read("ks/keystore.json") == nil)
        // A mistyped TCTI name is named as such, not as a package to install (libtss2-tcti-nosuchtcti0 does not exist).
        let library = try cli.run("init", "--backend", "tpm", "--tcti", "nosuchtcti:x")
        #expect(library.status == 6 && library.stderr == "devtrust: error: no TPM at nosuchtcti:x (unknown TCTI \"nosuchtcti\"): the TCTIs are device, "
                + "tabrmd, swtpm, mssim, cmd and pcap, e.g. --tcti device:/dev/tpmrm0 or --tcti swtpm:host=localhost,port=2321\n", "\(library)")
        let bogus = try cli.run("init", "--backend", "tpm", "--tcti", "bogus")
        #expect(bogus.status == 6 && bogus.stderr.contains("(unknown TCTI \"bogus\")") && !bogus.stderr.contains("install"), "\(bogus)")
        // A TCTI named by its library file: no package is made up from the file name (it once said
        // "install libtss2-tcti-libtss2-tcti-bogus.so0").
        for library in ["libtss2-tcti-bogus.so", setup.directory.file("nowhere/libtss2-tcti-x.so.0")] {
            let file = try cli.run("init", "--backend", "tpm", "--tcti", library)
            #expect(file.status == 6 && file.stderr == "devtrust: error: no TPM at \(library) (no TCTI library \"\(library)\" can be loaded): check the name or path "
                    + "(`ldconfig -p | grep libtss2-tcti` lists those installed), or name a TCTI: device, swtpm, mssim, tabrmd\n", "\(file)")
        }
        let resourceManager = try cli.run("init", "--backend", "tpm", "--tcti", "tabrmd")
        #expect(resourceManager.status == 6 && resourceManager.stderr.contains("no TPM at tabrmd"), "\(resourceManager)")
        // A TPM without the kernel's resource manager: /dev/tpm0 but no /dev/tpmrm0.
        let devices = TemporaryDirectory("dev")
        devices.write("tpm0", "")
        let noManager = try cli.run("init", "--backend", "tpm", "--tcti", "device:\(devices.path)/tpmrm0")
        #expect(noManager.status == 6 && noManager.stderr.contains("has no kernel resource manager; start tpm2-abrmd"), "\(noManager)")
        let auto = try cli.run("init", "--tcti", "device:/nonexistent/tpmrm0")
        #expect(auto.status == 0)
        #expect(auto.stderr.contains("no TPM at device:/nonexistent/tpmrm0 (no such device): this machine has no TPM, or it is disabled in the firmware settings; using a software key"), "\(auto)")
        #expect(auto.stderr.contains("created a software P-256 device key"))
    }

    @Test func theTCTIComesFromOptionThenEnvironment() throws {
        let setup = try Setup()
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = ""
        cli.extraEnvironment["TSS2_TCTI"] = "device:/nonexistent/a"
        cli.extraEnvironment["TPM2TOOLS_TCTI"] = setup.tpm.tcti
        #expect(try cli.run("init", "--backend", "tpm").status == 0)
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent/b"
        #expect(try cli.run("token", "--device-id", "x").stderr.contains("device:/nonexistent/b"))
        #expect(try cli.run("token", "--device-id", "x", "--tcti", setup.tpm.tcti).status == 0)
    }

    @Test func aTPMThatIsGoneIsExitSixAndChangesNothing() throws {
        let setup = try Setup()
        try setup.cli.run("init", "--backend", "tpm")
        let before = try #require(setup.directory.read("ks/keystore.json"))
        setup.tpm.kill()
        for arguments in [["token", "--device-id", "x"], ["sign-challenge", "AQID"], ["device-data"], ["init", "--force", "--backend", "tpm"]] {
            let result = try setup.cli.run(arguments)
            #expect(result.status == 6, "\(arguments): \(result)")
            #expect(result.stderr.contains("no TPM at \(setup.tpm.tcti) (nothing answers)"), "\(result.stderr)")
        }
        #expect(setup.directory.read("ks/keystore.json") == before)
        // pubkey needs no TPM: the public part is in the key file.
        #expect(try setup.cli.run("pubkey").status == 0)
        let status = try setup.status()
        #expect(status["key"]?.objectValue?["loads"] == .bool(false))
        #expect(status["tpm"]?.objectValue?["available"] == .bool(false))
    }

    /// A key that cannot sign is found before the first request: the server
    /// creates no account and sends no OTP for a registration that cannot finish.
    @Test(.enabled(if: ReferenceServer.shouldRun)) func registerChecksTheKeyBeforeTheFirstRequest() throws {
        let setup = try Setup()
        try setup.cli.run("init", "--backend", "tpm")
        let server = try ReferenceServer()
        setup.tpm.kill()
        let result = try setup.cli.run(["register", "--server", server.url, "--non-interactive"] + RegisterTests.answers)
        #expect(result.status == 6 && result.stderr.contains("no TPM at \(setup.tpm.tcti)"), "\(result)")
        #expect(try server.get("/api/outbox") == .array([]), "the flow started: an OTP was sent")
        #expect(try server.devices().isEmpty)
    }

    @Test func aClearedTPMLosesTheKeyAndSaysWhatToDo() throws {
        let setup = try Setup()
        try setup.cli.run("init", "--backend", "tpm")
        #expect(try setup.tpm.tool("tpm2_clear", ["-c", "p"]).status == 0)
        let result = try setup.cli.run("token", "--device-id", "x")
        #expect(result.status == 6)
        #expect(result.stderr.contains("the TPM was cleared") && result.stderr.contains("run `devtrust init --force` and register this device again"), "\(result)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    @Test func anotherMachinesKeystoreDoesNotLoad() throws {
        let first = try Setup()
        try first.cli.run("init", "--backend", "tpm")
        let second = try Setup()
        try second.cli.run("init", "--backend", "tpm")
        // The first machine's keystore, used on the second machine (its own SRK at 0x81000001).
        var moved = first.cli
        moved.extraEnvironment["DEVTRUST_TCTI"] = second.tpm.tcti
        let result = try moved.run("token", "--device-id", "x")
        #expect(result.status == 6)
        #expect(result.stderr.contains("comes from another machine") && result.stderr.contains("run `devtrust init --force`"), "\(result)")
        #expect(try second.tpm.transientHandles().isEmpty)
    }

    @Test func aCorruptedBlobIsRefusedWithoutLeakingHandles() throws {
        let setup = try Setup()
        try setup.cli.run("init", "--backend", "tpm")
        let path = try setup.keyFilePath()
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        var der = try #require(PEM.decode(pem, label: "TSS2 PRIVATE KEY"))
        der[der.count - 10] ^= 0x55 // inside the encrypted private part
        setup.directory.write("ks/" + URL(fileURLWithPath: path).lastPathComponent, PEM.encode(der, label: "TSS2 PRIVATE KEY"))
        let result = try setup.cli.run("token", "--device-id", "x")
        #expect(result.status == 6 && result.stderr.contains("the TPM refuses the device key"), "\(result)")
        #expect(try setup.tpm.transientHandles().isEmpty)
        setup.directory.write("ks/" + URL(fileURLWithPath: path).lastPathComponent, "-----BEGIN TSS2 PRIVATE KEY-----\ngarbage\n-----END TSS2 PRIVATE KEY-----\n")
        let garbage = try setup.cli.run("token", "--device-id", "x")
        #expect(garbage.status == 7 && garbage.stderr.contains("is corrupt"), "\(garbage)")
    }

    @Test func ownerPasswordIsExplained() throws {
        let setup = try Setup()
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 6)
        #expect(result.stderr.contains("the owner hierarchy has a password") && result.stderr.contains("tpm2_evictcontrol"), "\(result)")
        let auto = try setup.cli.run("init")
        #expect(auto.status == 0 && auto.stderr.contains("the owner hierarchy has a password") && auto.stderr.contains("using a software key"), "\(auto)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// An SRK made by tpm2-tools' defaults (not exempt from lockout) and an
    /// owner password: devtrust cannot make a better parent, so it uses that
    /// one, and says it is exposed.
    @Test func anExistingSRKWorksDespiteAnOwnerPassword() throws {
        let setup = try Setup()
        let context = setup.directory.file("srk.ctx")
        try setup.tpm.tool("tpm2_createprimary", ["-C", "o", "-G", "ecc256:aes128cfb", "-c", context])
        try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", context, "0x81000001"])
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 0 && result.stderr.contains("the owner hierarchy has a password") && result.stderr.contains("exposed to lockout"), "\(result)")
        #expect(try setup.cli.run("token", "--device-id", "x").status == 0)
        let key = try setup.status()["key"]?.objectValue
        #expect(key?["lockoutExposed"] == .bool(true) && key?["lockoutAdvice"]?.stringValue?.contains("at 0x81000001, was made without noDA") == true, "\(String(describing: key))")
    }

    /// swtpm killed at random moments during `init --backend tpm`: exit 0 or 6,
    /// never a crash, and the keystore is either untouched or complete.
    @Test func aTPMKilledMidCommandLeavesNoPartialKeystore() throws {
        var outcomes = [Int32: Int]()
        for round in 0..<12 {
            let setup = try Setup()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: setup.cli.path)
            process.arguments = ["init", "--backend", "tpm"]
            process.environment = setup.cli.environment
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32(round) * 1_500)
            setup.tpm.kill()
            process.waitUntilExit()
            outcomes[process.terminationStatus, default: 0] += 1
            #expect([0, 6].contains(process.terminationStatus), "round \(round): exit \(process.terminationStatus)")
            if let manifest = setup.directory.read("ks/keystore.json") {
                let state = try JSONParser.parse(manifest).objectValue!
                #expect(state["key"] == .null || process.terminationStatus == 0, "round \(round): a key was recorded by a failed init")
            }
            #expect(setup.directory.entries("ks").allSatisfy { !$0.hasPrefix(".tmp-") })
        }
        print("TPM killed during init: exit codes \(outcomes)")
    }

    @Test(.enabled(if: getuid() == 0)) func permissionDeniedNamesGroupTss() throws {
        // Run as nobody against a device node only root may open.
        let shared = "/tmp/devtrust-tss-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(shared, 0o755)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        _ = FileManager.default.createFile(atPath: shared + "/tpmrm0", contents: nil, attributes: [.posixPermissions: 0o600])
        mkdir(shared + "/ks", 0o700)
        chown(shared + "/ks", 65534, 65534)
        let binary = DevtrustBinary.copyForOtherUsers(DevtrustBinary.defaultPath, into: shared)
        let result = try ProcessRunner.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", binary,
                                                                "--keystore", shared + "/ks", "init", "--backend", "tpm", "--tcti", "device:\(shared)/tpmrm0"],
                                           environment: ["PATH": "/usr/bin:/bin", "HOME": shared])
        #expect(result.status == 6)
        #expect(result.stderr.contains("(permission denied): add yourself to group tss"), "\(result)")
    }
}

/// What `devtrust token` asks of the TPM, read from the TCTI's own debug log.
@Suite(.enabled(if: Swtpm.shouldRun)) struct TPMCommandCountTests {
    static let names: [String: String] = ["00000131": "CreatePrimary", "00000157": "Load", "0000015d": "Sign",
                                          "00000165": "FlushContext", "00000173": "ReadPublic"]

    static func commands(of cli: DevtrustBinary, _ arguments: [String]) throws -> [String] {
        var traced = cli
        traced.extraEnvironment["TSS2_LOG"] = "tcti+debug"
        let result = try traced.run(arguments)
        #expect(result.status == 0, "\(result.stdout)")
        // Each command is logged as a hex dump whose first line holds the header: tag, size, command code.
        let lines = result.stderr.split(separator: "\n").map(String.init)
        return lines.indices.compactMap { index -> String? in
            guard lines[index].contains("socket_xmit_buf() Writing"), index + 1 < lines.count else { return nil }
            let hex = lines[index + 1].split(separator: " ").dropFirst().first.map(String.init) ?? ""
            let code = String(hex.dropFirst(12).prefix(8))
            return names[code] ?? code
        }
    }

    /// One ReadPublic identifies the parent by its name before any
    /// authorization is sent to it (TPMTrustTests.aPasswordProtectedKeyAtTheParentsHandleIsNeverAuthorized),
    /// then one Load, one Sign, one FlushContext.
    @Test func aTokenIsOneReadPublicOneLoadOneSignOneFlush() throws {
        let tpm = try Swtpm()
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = tpm.tcti
        try cli.run("init", "--backend", "tpm")
        #expect(try Self.commands(of: cli, ["token", "--device-id", "x"]) == ["ReadPublic", "Load", "Sign", "FlushContext"])
        #expect(try Self.commands(of: cli, ["sign-challenge", "AQID"]) == ["ReadPublic", "Load", "Sign", "FlushContext"])
        #expect(try Self.commands(of: cli, ["pubkey"]).isEmpty)
    }
}

@Suite(.enabled(if: Swtpm.shouldRun)) struct TPMResetTests {
    /// reset touches nothing in the TPM (the storage root key is shared), so it
    /// needs no TPM, and the TPM keeps its SRK when it answers again.
    @Test func resetNeedsNoTPMAndLeavesTheStorageRootKey() throws {
        let directory = TemporaryDirectory()
        let state = TemporaryDirectory("swtpm-state")
        var tpm: Swtpm? = try Swtpm(state: state)
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = tpm!.tcti
        try cli.run("init", "--backend", "tpm")
        tpm!.stop()
        let offline = try cli.run("reset", "--yes")
        #expect(offline.status == 0 && !offline.stderr.contains("warning"), "\(offline)")
        let manifest = try JSONParser.parse(try #require(directory.read("ks/keystore.json"))).objectValue!
        #expect(manifest["key"] == .null && manifest["tpmPersistentHandles"] == .array([]))
        #expect(directory.entries("ks").filter { $0.hasPrefix("key-") }.isEmpty)

        tpm = try Swtpm(state: state) // the machine boots again, same TPM
        #expect(try tpm!.persistentHandles() == ["0x81000001"])
        cli.extraEnvironment["DEVTRUST_TCTI"] = tpm!.tcti
        #expect(try cli.run("reset", "--yes").stderr.contains("nothing to reset"))
    }
}
