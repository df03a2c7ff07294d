import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Every TPM claim devtrust makes is true, and other software sharing the TPM
/// can neither fake it nor break it. Each test plays the attack or the
/// accident first (with tpm2-tools, or an active interposer on the TPM bus)
/// and fails on a devtrust that does not defend against it.
@Suite(.enabled(if: Swtpm.shouldRun)) struct TPMTrustTests {
    typealias Setup = SwtpmDeviceFixture

    /// A P-256 signing key made with tpm2-tools under the SRK at 0x81000001,
    /// as a TSS2 PRIVATE KEY file devtrust can import. `imported` brings in a
    /// private key made outside the TPM (tpm2_import); otherwise the TPM makes it
    /// with `attributes`.
    static func foreignKey(_ setup: Setup, imported: Bool = false,
                           attributes: String = "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign") throws -> String {
        let d = setup.directory
        let (pub, priv, file) = (d.file("foreign.pub"), d.file("foreign.priv"), d.file("foreign.tss2"))
        try setup.tpm.ensureStorageRootKey(d)
        if imported {
            let pem = d.file("outside.pem")
            #expect(try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", pem]).status == 0)
            let made = try setup.tpm.tool("tpm2_import", ["-C", "0x81000001", "-G", "ecc", "-i", pem, "-u", pub, "-r", priv])
            #expect(made.status == 0, "\(made)")
        } else {
            let made = try setup.tpm.tool("tpm2_create", ["-C", "0x81000001", "-G", "ecc256:ecdsa-sha256", "-a", attributes, "-u", pub, "-r", priv])
            #expect(made.status == 0, "\(made)")
        }
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        let encoded = try setup.tpm.tool("tpm2_encodeobject", ["-C", "0x81000001", "-u", pub, "-r", priv, "-p", "-o", file])
        #expect(encoded.status == 0, "\(encoded)")
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        return file
    }

    /// Puts the TPM in dictionary-attack lockout the way any process that can
    /// reach it could: two wrong passwords on a DA-protected key of its own.
    /// Returns the result of a right password afterwards (refused: the lockout is real).
    static func lockOut(_ setup: Setup) throws -> ProcessResult {
        let d = setup.directory
        #expect(try setup.tpm.tool("tpm2_dictionarylockout", ["-s", "-n", "1", "-t", "600", "-l", "600"]).status == 0)
        let (pub, priv, ctx) = (d.file("da.pub"), d.file("da.priv"), d.file("da.ctx"))
        #expect(try setup.tpm.tool("tpm2_create", ["-C", "0x81000001", "-G", "ecc256", "-p", "secret", "-u", pub, "-r", priv]).status == 0)
        #expect(try setup.tpm.tool("tpm2_load", ["-C", "0x81000001", "-u", pub, "-r", priv, "-c", ctx]).status == 0)
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        let message = d.write("m", "x")
        for _ in 0..<2 {
            try setup.tpm.tool("tpm2_sign", ["-c", ctx, "-p", "wrong", "-g", "sha256", "-o", d.file("s"), message])
            try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        }
        let right = try setup.tpm.tool("tpm2_sign", ["-c", ctx, "-p", "secret", "-g", "sha256", "-o", d.file("s"), message])
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        return right
    }

    /// Runs shell commands with tpm2-tools at the test's TPM, in the test's directory.
    static func runTools(_ command: String, _ setup: Setup) throws -> ProcessResult {
        let tools = ["PATH": "/usr/bin:/bin", "TPM2TOOLS_TCTI": setup.tpm.tcti, "TSS2_LOG": "all+NONE"]
        return try ProcessRunner.run("/bin/sh", ["-c", command], environment: tools, currentDirectory: setup.directory.path)
    }

    /// Runs the tpm2-tools commands a message of devtrust's gives (in the test's
    /// directory), then expects a token with nothing to warn about.
    static func follow(_ command: String, _ setup: Setup, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try runTools(command + " >/dev/null", setup)
        #expect(result.status == 0, "\(command): \(result)", sourceLocation: sourceLocation)
        // No flush here: the command must leave the TPM's slots free itself.
        let after = try setup.cli.run("token", "--device-id", "x")
        #expect(after.status == 0 && after.stderr.isEmpty, "\(after)", sourceLocation: sourceLocation)
    }

    // MARK: adopted keys

    @Test func aKeyImportedIntoTheTPMIsRefused() throws {
        let setup = try Setup()
        let file = try Self.foreignKey(setup, imported: true)
        let result = try setup.cli.run("init", "--import", file)
        #expect(result.status == 6, "\(result)")
        #expect(result.stderr.contains("sensitiveDataOrigin is clear") && result.stderr.contains("tpm2_import")
                && result.stderr.contains("devtrust init --backend tpm"), "\(result.stderr)")
        #expect(setup.directory.read("ks/keystore.json") == nil)
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// Generated in the TPM, but duplicable (fixedTPM and fixedParent clear: the
    /// TPM allows only both or neither under a fixedTPM parent).
    @Test func aKeyThatCanBeDuplicatedIsRefused() throws {
        let setup = try Setup()
        let file = try Self.foreignKey(setup, attributes: "sensitivedataorigin|userwithauth|sign")
        let result = try setup.cli.run("init", "--import", file)
        #expect(result.status == 6 && result.stderr.contains("it can be duplicated to another TPM (fixedTPM is clear)"), "\(result)")
        #expect(setup.directory.read("ks/keystore.json") == nil)
    }

    // MARK: dictionary-attack lockout

    @Test func aLockoutCannotStopTheDeviceKey() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        let control = try Self.lockOut(setup)
        #expect(control.status != 0 && control.stderr.contains("DA lockout mode"), "the TPM is not in lockout: \(control)")
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 0, "\(token)")
        let key = try setup.status()["key"]?.objectValue
        #expect(key?["lockoutExposed"] == .bool(false) && key?["loads"] == .bool(true), "\(String(describing: key))")
        #expect(!(try setup.cli.run("status").stdout.contains("lockout")))
    }

    /// A key made without noDA (an earlier devtrust's, or imported): status
    /// says it is exposed and how to re-create it, and lockout stops it.
    @Test func aKeyWithoutNoDAIsExposedAndStatusSaysSo() throws {
        let setup = try Setup()
        let file = try Self.foreignKey(setup)
        #expect(try setup.cli.run("init", "--import", file).status == 0)
        let key = try setup.status()["key"]?.objectValue
        #expect(key?["lockoutExposed"] == .bool(true), "\(String(describing: key))")
        #expect(key?["lockoutAdvice"]?.stringValue?.contains("devtrust init --force --backend tpm") == true)
        #expect(try setup.cli.run("status").stdout.contains("key lockout: exposed: the key was made without noDA"))
        _ = try Self.lockOut(setup)
        let result = try setup.cli.run("token", "--device-id", "x")
        #expect(result.status == 6 && result.stderr.contains("dictionary-attack lockout"), "\(result)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// An SRK made with tpm2-tools' defaults sits at 0x81000001: it is not
    /// exempt from lockout, and loading a key under it needs its authorization,
    /// so lockout would stop the key as surely as a DA-protected key. devtrust
    /// makes its keys under an exempt SRK at 0x81000002 instead.
    @Test func aStorageRootKeyExposedToLockoutIsPassedOver() throws {
        let setup = try Setup()
        try setup.tpm.persistPrimary(["-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb"], at: "0x81000001", in: setup.directory)
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 0 && result.stderr.contains("not exempt from dictionary-attack lockout")
                && result.stderr.contains("made the storage root key persistent at 0x81000002"), "\(result)")
        _ = try Self.lockOut(setup)
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 0, "\(token)")
        #expect(try setup.status()["key"]?.objectValue?["lockoutExposed"] == .bool(false))
    }

    /// A key wrongly labelled emptyAuth (tpm2_encodeobject -p writes TRUE
    /// whatever the key's password): the refusal is called what it is, not a
    /// forged answer.
    @Test func aKeyWithAnUndeclaredPasswordIsAnAuthorizationFailure() throws {
        let setup = try Setup()
        let d = setup.directory
        try setup.tpm.ensureStorageRootKey(d)
        let (pub, priv, file) = (d.file("pw.pub"), d.file("pw.priv"), d.file("pw.tss2"))
        #expect(try setup.tpm.tool("tpm2_create", ["-C", "0x81000001", "-G", "ecc256:ecdsa-sha256", "-p", "secret",
                                                   "-a", "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign|noda", "-u", pub, "-r", priv]).status == 0)
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        #expect(try setup.tpm.tool("tpm2_encodeobject", ["-C", "0x81000001", "-u", pub, "-r", priv, "-p", "-o", file]).status == 0)
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        try setup.tpm.tool("tpm2_flushcontext", ["-l"]) // tpm2_create's own HMAC session
        let result = try setup.cli.run("init", "--import", file)
        #expect(result.status == 6 && result.stderr.contains("refused the authorization") && !result.stderr.contains("integrity check"), "\(result)")
        #expect(setup.directory.read("ks/keystore.json") == nil)
        #expect(try setup.tpm.transientHandles() == [] && setup.tpm.loadedSessions() == [])
    }

    /// Another program put a storage key with a password, not exempt from
    /// lockout (tpm2-tools' defaults), where the device key's parent was. Each
    /// authorization devtrust tried against it would count towards lockout for
    /// the whole TPM; devtrust identifies the parent by name first and never does.
    @Test func aPasswordProtectedKeyAtTheParentsHandleIsNeverAuthorized() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        #expect(try setup.tpm.tool("tpm2_dictionarylockout", ["-s", "-n", "3", "-t", "600", "-l", "600"]).status == 0)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        try setup.tpm.persistPrimary(["-C", "o", "-p", "pw"], at: "0x81000001", in: setup.directory)
        for _ in 0..<4 {
            let token = try setup.cli.run("token", "--device-id", "x")
            #expect(token.status == 0 && token.stderr.contains("another program replaced it"), "\(token)")
        }
        #expect(try setup.cli.run("sign-challenge", "AQIDBAUGBwgJCgsMDQ4PEA").status == 0)
        #expect(try setup.tpm.lockoutCounter() == 0, "devtrust's attempts counted towards lockout")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// Storage keys at 0x81000001 that devtrust cannot rely on are passed over
    /// for its own SRK at 0x81000002: a child of another key (it could not be
    /// made again if evicted), and one with a password (exempt from lockout, so
    /// trying it costs nothing).
    @Test(arguments: ["child", "password"])
    func aStorageKeyDevtrustCannotRelyOnIsPassedOver(kind: String) throws {
        let setup = try Setup()
        let d = setup.directory
        let (parent, pub, priv, child) = (d.file("p.ctx"), d.file("c.pub"), d.file("c.priv"), d.file("c.ctx"))
        if kind == "child" {
            #expect(try setup.tpm.tool("tpm2_createprimary", ["-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a", Swtpm.storageRootKeyAttributes, "-c", parent]).status == 0)
            try setup.tpm.tool("tpm2_flushcontext", ["-t"])
            #expect(try setup.tpm.tool("tpm2_create", ["-C", parent, "-G", "ecc256:aes128cfb", "-a", Swtpm.storageRootKeyAttributes, "-u", pub, "-r", priv]).status == 0)
            try setup.tpm.tool("tpm2_flushcontext", ["-t"])
            #expect(try setup.tpm.tool("tpm2_load", ["-C", parent, "-u", pub, "-r", priv, "-c", child]).status == 0)
            try setup.tpm.tool("tpm2_flushcontext", ["-t"])
            #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", child, "0x81000001"]).status == 0)
        } else {
            #expect(try setup.tpm.tool("tpm2_createprimary", ["-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a", Swtpm.storageRootKeyAttributes, "-p", "pw", "-c", parent]).status == 0)
            #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", parent, "0x81000001"]).status == 0)
        }
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        try setup.tpm.tool("tpm2_flushcontext", ["-l"])
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 0 && result.stderr.contains("made the storage root key persistent at 0x81000002"), "\(result)")
        #expect(result.stderr.contains(kind == "child" ? "not a primary key devtrust could make again" : "has a password"), "\(result.stderr)")
        #expect(try setup.status()["key"]?.objectValue?["tpmParent"] == .string("0x81000002"))
        #expect(try setup.cli.run("token", "--device-id", "x").status == 0)
        #expect(try setup.tpm.lockoutCounter() == 0)
    }

    /// The parent is gone and the owner hierarchy has a password: devtrust
    /// says where the key must go back (its own handle) and how, and that
    /// `token` then works, not "run init". Its own SRK (made at 0x81000002
    /// here), and a TCG-style one (unique zero-filled) whose template devtrust
    /// could not tell apart from the empty one without trying.
    @Test(arguments: ["devtrust", "tcg"])
    func aParentGoneBehindAnOwnerPasswordGetsTheRightCommand(srk: String) throws {
        let setup = try Setup()
        let handle: String
        if srk == "devtrust" {
            try setup.tpm.persistPrimary(["-C", "o", "-G", "ecc256:ecdsa-sha256", "-a", "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign"], at: "0x81000001", in: setup.directory)
            handle = "0x81000002"
        } else {
            try Self.persistTCGStorageRootKey(setup)
            handle = "0x81000001"
        }
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        #expect(try setup.status()["key"]?.objectValue?["tpmParent"] == .string(handle))
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-P", "s3cret", "-c", handle]).status == 0)
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 6 && token.stderr.contains("is gone from \(handle)") && token.stderr.contains("-P PASSWORD")
                && token.stderr.contains("parent.ctx \(handle)") && !token.stderr.contains("run `devtrust init"), "\(token)")
        // Doing what it says brings the key back.
        let command = try #require(token.stderr.components(separatedBy: "whoever knows the password can run: ").dropFirst().first?.components(separatedBy: "; `devtrust token`").first)
        try Self.follow(command.replacingOccurrences(of: "PASSWORD", with: "s3cret"), setup)
    }

    /// An SRK from a TCG-style template (unique zero-filled, not empty) at
    /// `handle`: ECC P-256 by default, P-192 (`ecc192`), or RSA 2048 (`rsa2048`).
    static func persistTCGStorageRootKey(_ setup: Setup, key: String = "ecc256", at handle: String = "0x81000001") throws {
        // tpm2-tools reads -u as the TPMU_PUBLIC_ID: little-endian sizes, each ECC coordinate's buffer 128 bytes.
        let coordinate = key == "ecc192" ? "printf '\\030\\000'; head -c 128 /dev/zero" : "printf '\\040\\000'; head -c 128 /dev/zero"
        let unique = key == "rsa2048" ? "printf '\\000\\001'; head -c 256 /dev/zero" : coordinate + "; " + coordinate
        let zeroUnique = "{ \(unique); } > tcg.bin && tpm2_createprimary -C o -g sha256 -G \(key):aes128cfb -a '\(Swtpm.storageRootKeyAttributes)' -u tcg.bin -c tcg.ctx && tpm2_evictcontrol -C o -c tcg.ctx \(handle)"
        #expect(try runTools(zeroUnique + " >/dev/null", setup).status == 0)
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
    }

    /// With an owner password devtrust cannot make its own SRK: it goes on
    /// looking (a usable SRK at 0x81000002 is used); when nothing usable is
    /// left it names the free handle and the exact command; a password on the
    /// one storage key left is said as such (and plain `init` falls back to a
    /// software key, as for any TPM it cannot use), not as tampering.
    @Test(arguments: ["usable at 0x81000002", "noDA with a password", "exposed with a password"])
    func anOwnerPasswordLeavesDevtrustLookingAndThenSaysWhatToDo(layout: String) throws {
        let setup = try Setup()
        switch layout {
        case "usable at 0x81000002":
            try setup.tpm.persistPrimary(["-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a", Swtpm.storageRootKeyAttributes], at: "0x81000002", in: setup.directory)
        case "noDA with a password":
            try setup.tpm.persistPrimary(["-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a", Swtpm.storageRootKeyAttributes, "-p", "pw"], at: "0x81000001", in: setup.directory)
        default:
            try setup.tpm.persistPrimary(["-C", "o", "-p", "pw"], at: "0x81000001", in: setup.directory)
        }
        try setup.tpm.tool("tpm2_flushcontext", ["-l"])
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let result = try setup.cli.run("init", "--backend", "tpm")
        switch layout {
        case "usable at 0x81000002":
            #expect(result.status == 0, "\(result)")
            #expect(try setup.status()["key"]?.objectValue?["tpmParent"] == .string("0x81000002"))
        case "noDA with a password":
            #expect(result.status == 6 && result.stderr.contains("the storage key at 0x81000001 has a password")
                    && result.stderr.contains("-P PASSWORD") && result.stderr.contains("srk.ctx 0x81000002"), "\(result)")
        default:
            #expect(result.status == 6 && result.stderr.contains("the storage key at 0x81000001 has a password (devtrust uses none)")
                    && result.stderr.contains("srk.ctx 0x81000002") && !result.stderr.contains("interferes"), "\(result)")
            let auto = try setup.cli.run("init")
            #expect(auto.status == 0 && auto.stderr.contains("using a software key"), "\(auto)")
        }
        #expect(try setup.tpm.transientHandles().isEmpty && setup.tpm.loadedSessions().isEmpty)
    }

    /// Two storage keys exposed to lockout, the first with a password, and an
    /// owner password: devtrust's one try at the first counts towards lockout;
    /// it tries nothing more while the counter is above zero, however often
    /// `init` runs (plain `init` falling back to a software key each time).
    @Test func devtrustRisksOneLockoutTryAtMost() throws {
        let setup = try Setup()
        #expect(try setup.tpm.tool("tpm2_dictionarylockout", ["-s", "-n", "3", "-t", "600", "-l", "600"]).status == 0)
        try setup.tpm.persistPrimary(["-C", "o", "-p", "pw"], at: "0x81000001", in: setup.directory)
        try setup.tpm.persistPrimary(["-C", "o", "-G", "ecc256:aes128cfb", "-a", "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt"], at: "0x81000002", in: setup.directory)
        try setup.tpm.tool("tpm2_flushcontext", ["-l"])
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let result = try setup.cli.run("init", "--backend", "tpm")
        #expect(result.status == 6 && result.stderr.contains("the storage key at 0x81000001 has a password")
                && result.stderr.contains("devtrust did not try 0x81000002") && result.stderr.contains("lockout counter is 1"), "\(result)")
        for _ in 0..<3 {
            let auto = try setup.cli.run("init", "--force")
            #expect(auto.status == 0 && auto.stderr.contains("using a software key"), "\(auto)")
        }
        #expect(try setup.tpm.lockoutCounter() == 1)
        #expect(try setup.tpm.transientHandles().isEmpty && setup.tpm.loadedSessions().isEmpty)
    }

    /// The TPM was cleared behind an owner password: the command devtrust
    /// gives finds that neither template makes the recorded key, says so, and
    /// makes nothing persistent (rather than another key devtrust would then
    /// call "another program's").
    @Test func theOwnerPasswordCommandSaysWhenTheKeyIsLost() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        #expect(try setup.tpm.tool("tpm2_clear", ["-c", "p"]).status == 0)
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let token = try setup.cli.run("token", "--device-id", "x")
        let command = try #require(token.stderr.components(separatedBy: "whoever knows the password can run: ").dropFirst().first?.components(separatedBy: "; `devtrust token`").first, "\(token)")
        let result = try Self.runTools(command.replacingOccurrences(of: "PASSWORD", with: "s3cret"), setup)
        #expect(result.status != 0 && result.stderr.contains("neither template gives the recorded storage root key"), "\(result)")
        #expect(try setup.tpm.persistentHandles().isEmpty)
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// `init --force` after the SRK changed under the old key's pin: expected
    /// when the TPM was cleared, suspicious otherwise; devtrust says so.
    @Test func aNewKeyUnderAnotherStorageRootKeyIsPointedOut() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        #expect(try setup.tpm.tool("tpm2_clear", ["-c", "p"]).status == 0)
        let again = try setup.cli.run("init", "--backend", "tpm", "--force")
        #expect(again.status == 0 && again.stderr.contains("is not the one the previous key was made under"), "\(again)")
        // An interposer answering for the pinned SRK: the new key goes elsewhere, and devtrust says why.
        let attacker = try TPMInterposer(setup.tpm, mode: "swap-srk")
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = attacker.tcti
        let forced = try cli.run("init", "--backend", "tpm", "--force")
        #expect(forced.status == 0 && forced.stderr.contains("is not the one the previous key was made under"), "\(forced)")
    }

    // MARK: the shared storage root key

    /// Two keystores on one TPM share its SRK: resetting one must not take the
    /// other's key with it.
    @Test func resetLeavesTheSharedStorageRootKey() throws {
        let first = try Setup()
        var second = first.cli
        second = DevtrustBinary(keystore: first.directory.file("ks-b"))
        second.extraEnvironment["DEVTRUST_TCTI"] = first.tpm.tcti
        #expect(try first.cli.run("init", "--backend", "tpm").status == 0)
        #expect(try second.run("init", "--backend", "tpm").status == 0)
        let reset = try first.cli.run("reset", "--yes")
        #expect(reset.status == 0 && reset.stderr.contains("left the TPM's storage root key at 0x81000001 in place"), "\(reset)")
        #expect(try first.tpm.persistentHandles() == ["0x81000001"])
        let token = try second.run("token", "--device-id", "x")
        #expect(token.status == 0 && token.stderr.isEmpty, "\(token)")
    }

    /// Someone evicts the SRK (an older devtrust's reset did): the TPM derives
    /// the same key from its seed, so devtrust recreates it, and says so.
    @Test func aMissingStorageRootKeyIsRecreated() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        let name = try setup.tpm.tool("tpm2_readpublic", ["-c", "0x81000001"]).stdout.split(separator: "\n").first { $0.hasPrefix("name:") }
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        #expect(try setup.tpm.persistentHandles().isEmpty)
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 0, "\(token)")
        #expect(token.stderr.contains("devtrust recreated it (the TPM derives the same key from its seed) and made it persistent again"), "\(token.stderr)")
        #expect(try setup.tpm.persistentHandles() == ["0x81000001"])
        #expect(try setup.tpm.tool("tpm2_readpublic", ["-c", "0x81000001"]).stdout.split(separator: "\n").first { $0.hasPrefix("name:") } == name)
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        let again = try setup.cli.run("token", "--device-id", "x")
        #expect(again.status == 0 && again.stderr.isEmpty, "\(again)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// Another program puts its own storage key at 0x81000001: the device key
    /// is not lost, and devtrust says what happened instead of "init --force".
    @Test func aReplacedStorageRootKeyIsNotALostKey() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        let before = try setup.cli.run("pubkey").output
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        try setup.tpm.persistPrimary(["-C", "o", "-g", "sha256", "-G", "rsa2048:aes128cfb"], at: "0x81000001", in: setup.directory)
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 0, "\(token)")
        #expect(token.stderr.contains("is not the storage root key the device key was made under") && token.stderr.contains("The device key is not lost")
                && !token.stderr.contains("init --force"), "\(token.stderr)")
        let key = try setup.status()["key"]?.objectValue
        #expect(key?["loads"] == .bool(true), "\(String(describing: key))")
        #expect(try setup.cli.run("pubkey").output == before)
        #expect(try setup.tpm.transientHandles().isEmpty)

        // The program's key goes elsewhere, the command the warning gives puts the SRK back: no more warnings.
        let command = try #require(token.stderr.components(separatedBy: "the key is back at 0x81000001: ").dropFirst().first?.components(separatedBy: "\n").first)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        try Self.follow(command, setup)
    }

    /// The recorded SRK need not be devtrust's own: one another program made
    /// (an RSA or a P-224 SRK, exempt from lockout) and someone evicted is made
    /// again from its recorded template, not declared lost; after a clear it is.
    @Test(arguments: ["rsa2048", "ecc224"])
    func anotherProgramsStorageRootKeyIsRecreatedFromItsTemplate(key: String) throws {
        let setup = try Setup()
        try setup.tpm.persistPrimary(["-C", "o", "-g", "sha256", "-G", key + ":aes128cfb", "-a", Swtpm.storageRootKeyAttributes], at: "0x81000001", in: setup.directory)
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        let name = try setup.tpm.tool("tpm2_readpublic", ["-c", "0x81000001"]).stdout.split(separator: "\n").first { $0.hasPrefix("name:") }
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 0 && token.stderr.contains("devtrust recreated it"), "\(token)")
        #expect(try setup.tpm.tool("tpm2_readpublic", ["-c", "0x81000001"]).stdout.split(separator: "\n").first { $0.hasPrefix("name:") } == name)
        try setup.tpm.tool("tpm2_flushcontext", ["-t"])
        #expect(try setup.tpm.transientHandles().isEmpty)
        // Cleared: the template gives another key now. Lost, said with the doubt a template not devtrust's leaves.
        #expect(try setup.tpm.tool("tpm2_clear", ["-c", "p"]).status == 0)
        let lost = try setup.cli.run("token", "--device-id", "x")
        #expect(lost.status == 6 && lost.stderr.contains("the key is lost: run `devtrust init --force`")
                && lost.stderr.contains("was not made from devtrust's template"), "\(lost)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// An SRK made from a TCG-style template (its unique field zero-filled, not
    /// empty; ECC P-256 and P-192, RSA), or on a curve besides devtrust's
    /// (P-224, SM2, made with tpm2-tools), that another program replaced: the
    /// command devtrust gives makes that same key again, not devtrust's own P-256 one.
    @Test(arguments: ["ecc", "rsa", "p192", "p224", "sm2"])
    func aTCGStyleStorageRootKeyIsPutBackByTheGivenCommand(algorithm: String) throws {
        let setup = try Setup()
        let expected: String
        switch algorithm {
        case "p224", "sm2":
            let key = (algorithm == "sm2" ? "ecc_sm2" : "ecc224") + ":aes128cfb"
            expected = "-G " + key
            try setup.tpm.persistPrimary(["-C", "o", "-g", "sha256", "-G", key, "-a", Swtpm.storageRootKeyAttributes], at: "0x81000001", in: setup.directory)
        default:
            expected = "-u unique.bin"
            try Self.persistTCGStorageRootKey(setup, key: ["ecc": "ecc256", "rsa": "rsa2048", "p192": "ecc192"][algorithm]!)
        }
        let made = try setup.cli.run("init", "--backend", "tpm")
        #expect(made.status == 0, "\(made)")
        #expect(try setup.status()["key"]?.objectValue?["tpmParent"] == .string("0x81000001"))
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        try setup.tpm.persistPrimary(["-C", "o", "-G", "rsa2048"], at: "0x81000001", in: setup.directory)
        let token = try setup.cli.run("token", "--device-id", "x")
        let command = try #require(token.stderr.components(separatedBy: "the key is back at 0x81000001: ").dropFirst().first?.components(separatedBy: "\n").first, "\(token)")
        #expect(command.contains(expected), "\(command)")
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        try Self.follow(command, setup)
    }

    /// An RSA storage key whose template spells out the exponent (65537, where
    /// tpm2-tools writes 0 for the default), made with a raw CreatePrimary:
    /// tpm2-tools cannot make that template again, so `init` does not choose it
    /// (devtrust could not say how to put it back), and for a key adopted under
    /// it devtrust gives no command that would make another key.
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func aStorageKeyTpm2ToolsCannotMakeAgainGetsNoWrongCommand() throws {
        let setup = try Setup()
        let make = """
            import socket, struct, sys
            def command(code, handles, params, sessions=True):
                password = struct.pack(">IHBH", 0x40000009, 0, 0, 0)
                body = b"".join(struct.pack(">I", h) for h in handles) + (struct.pack(">I", len(password)) + password if sessions else b"") + params
                with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as connection:
                    connection.sendall(struct.pack(">HII", 0x8002 if sessions else 0x8001, 10 + len(body), code) + body)
                    answer = b""
                    while len(answer) < 10 or len(answer) < struct.unpack(">I", answer[2:6])[0]:
                        answer += connection.recv(4096)
                assert struct.unpack(">I", answer[6:10])[0] == 0, hex(struct.unpack(">I", answer[6:10])[0])
                return answer
            template = struct.pack(">HHIH", 0x0001, 0x000B, 0x30472, 0) + struct.pack(">HHHHHIH", 0x0006, 128, 0x0043, 0x0010, 2048, 65537, 0)
            made = command(0x131, [0x40000001], struct.pack(">HHH", 4, 0, 0) + struct.pack(">H", len(template)) + template + struct.pack(">HI", 0, 0))
            primary = struct.unpack(">I", made[10:14])[0]
            command(0x120, [0x40000001, primary], struct.pack(">I", 0x81000001))
            command(0x165, [], struct.pack(">I", primary), sessions=False)
            """
        let made = try ExternalTool.python.run(["-c", make, "\(setup.tpm.port)"])
        #expect(made.status == 0, "\(made)")
        let created = try setup.cli.run("init", "--backend", "tpm")
        #expect(created.status == 0 && created.stderr.contains("one tpm2-tools cannot make again")
                && created.stderr.contains("made the storage root key persistent at 0x81000002"), "\(created)")
        let file = try Self.foreignKey(setup, attributes: "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign|noda")
        #expect(try setup.cli.run("init", "--force", "--import", file).status == 0)
        #expect(try setup.status()["key"]?.objectValue?["tpmParent"] == .string("0x81000001"))
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        try setup.tpm.persistPrimary(["-C", "o", "-G", "rsa2048"], at: "0x81000001", in: setup.directory)
        let replaced = try setup.cli.run("token", "--device-id", "x")
        #expect(replaced.status == 0 && replaced.stderr.contains("another program replaced it") && replaced.stderr.contains("tpm2-tools cannot: it is an unusual one")
                && !replaced.stderr.contains("tpm2_createprimary"), "\(replaced)")
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-P", "s3cret", "-c", "0x81000001"]).status == 0)
        let gone = try setup.cli.run("token", "--device-id", "x")
        #expect(gone.status == 6 && gone.stderr.contains("is gone from 0x81000001") && gone.stderr.contains("tpm2-tools cannot: it is an unusual one")
                && !gone.stderr.contains("tpm2_createprimary"), "\(gone)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// A P-256 key made by tpm2-openssl without a parent: its file names the
    /// owner hierarchy (its parent is made from the SRK template for each use).
    static func ownerHierarchyKey(_ setup: Setup) throws -> String {
        let environment = ["PATH": "/usr/bin:/bin", "TPM2OPENSSL_TCTI": setup.tpm.tcti, "TSS2_LOG": "all+NONE"]
        let file = setup.directory.file("openssl-tpm.pem")
        let generate = ["genpkey", "-provider", "tpm2", "-provider", "default", "-algorithm", "EC", "-pkeyopt", "group:P-256", "-out", file]
        #expect(try ProcessRunner.run("/usr/bin/openssl", generate, environment: environment).status == 0)
        return file
    }

    /// A key whose file names the owner hierarchy, and then the owner
    /// hierarchy gets a password: devtrust cannot make the parent any more,
    /// says how to make it persistent, and then finds it there by its name,
    /// for `token` and for importing the key again. A TCG-style SRK at
    /// 0x81000001 has the same template but another name: it is not taken for
    /// the parent, and the command goes to 0x81000002.
    @Test(.enabled(if: ExternalTool.openssl.shouldRun), arguments: ["nothing", "a TCG-style SRK"])
    func aKeyUnderTheOwnerHierarchyOutlivesAnOwnerPassword(at81000001: String) throws {
        let setup = try Setup()
        let file = try Self.ownerHierarchyKey(setup)
        #expect(try setup.cli.run("init", "--import", file).status == 0)
        let handle = at81000001 == "nothing" ? "0x81000001" : "0x81000002"
        if at81000001 != "nothing" { try Self.persistTCGStorageRootKey(setup) }
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let token = try setup.cli.run("token", "--device-id", "x")
        let command = try #require(token.stderr.components(separatedBy: "persistent at \(handle): ").dropFirst().first?.components(separatedBy: "; devtrust then finds").first, "\(token)")
        // The advice is the command, not "run init" (the command itself says init --force only when the TPM was cleared).
        #expect(token.status == 6 && token.stderr.contains("the key file names the owner hierarchy") && token.stderr.contains("parent.ctx \(handle)")
                && !token.stderr.replacingOccurrences(of: command, with: "").contains("devtrust init"), "\(token)")
        #expect(try setup.tpm.transientHandles().isEmpty)
        try Self.follow(command.replacingOccurrences(of: "PASSWORD", with: "s3cret"), setup)
        let again = try setup.cli.run("init", "--force", "--import", file)
        #expect(again.status == 0 && again.stderr.contains("persistent copy of the key's parent at \(handle)"), "\(again)")
        #expect(try setup.cli.run("token", "--device-id", "x").status == 0)
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// The same after a TPM clear: the key is lost, and the command devtrust
    /// gives says so and makes nothing persistent, instead of a storage root
    /// key that devtrust would then call "another".
    @Test(.enabled(if: ExternalTool.openssl.shouldRun)) func aKeyUnderTheOwnerHierarchyIsLostWithAClearedTPM() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--import", try Self.ownerHierarchyKey(setup)).status == 0)
        #expect(try setup.tpm.tool("tpm2_clear", ["-c", "p"]).status == 0)
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let token = try setup.cli.run("token", "--device-id", "x")
        let command = try #require(token.stderr.components(separatedBy: "persistent at 0x81000001: ").dropFirst().first?.components(separatedBy: "; devtrust then finds").first, "\(token)")
        let result = try Self.runTools(command.replacingOccurrences(of: "PASSWORD", with: "s3cret"), setup)
        #expect(result.status != 0 && result.stderr.contains("the device key is lost"), "\(result)")
        #expect(try setup.tpm.persistentHandles().isEmpty && setup.tpm.transientHandles().isEmpty)
    }

    /// Importing a key that names the owner hierarchy behind an owner password:
    /// devtrust finds its parent among the persistent keys made from the SRK
    /// template (another with that template, a TCG-style SRK, does not load
    /// it), and never authorizes against a key exposed to lockout.
    @Test(.enabled(if: ExternalTool.openssl.shouldRun), arguments: ["a TCG-style SRK", "a key with a password"])
    func importingAKeyUnderTheOwnerHierarchyFindsItsPersistentParent(at81000001: String) throws {
        let setup = try Setup()
        let file = try Self.ownerHierarchyKey(setup)
        #expect(try setup.tpm.tool("tpm2_dictionarylockout", ["-s", "-n", "3", "-t", "600", "-l", "600"]).status == 0)
        if at81000001 == "a TCG-style SRK" {
            try Self.persistTCGStorageRootKey(setup)
        } else {
            try setup.tpm.persistPrimary(["-C", "o", "-p", "pw"], at: "0x81000001", in: setup.directory)
            try setup.tpm.tool("tpm2_flushcontext", ["-l"])
        }
        try setup.tpm.persistPrimary(["-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a", Swtpm.storageRootKeyAttributes], at: "0x81000002", in: setup.directory)
        #expect(try setup.tpm.tool("tpm2_changeauth", ["-c", "owner", "s3cret"]).status == 0)
        let imported = try setup.cli.run("init", "--import", file)
        #expect(imported.status == 0 && imported.stderr.contains("persistent copy of the key's parent at 0x81000002"), "\(imported)")
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 0 && token.stderr.isEmpty, "\(token)")
        #expect(try setup.tpm.lockoutCounter() == 0)
        #expect(try setup.tpm.transientHandles().isEmpty && setup.tpm.loadedSessions().isEmpty)
    }

    /// The TPM answers "retry" (busy) while devtrust makes the parent again:
    /// a message that says to run the command again, not "the key is lost".
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func aBusyTPMIsNotALostKey() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        let busy = try TPMInterposer(setup.tpm, mode: "refuse", arguments: ["--refuse", "0x131:0x922"])
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = busy.tcti
        let token = try cli.run("token", "--device-id", "x")
        #expect(!busy.events(named: "refused").isEmpty, "the interposer refused nothing: \(busy.events())")
        #expect(token.status == 6 && token.stderr.contains("run the command again") && !token.stderr.contains("lost"), "\(token)")
        #expect(try setup.cli.run("token", "--device-id", "x").status == 0)
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// The storage hierarchy is disabled (firmware, or tpm2_hierarchycontrol):
    /// its keys cannot be used until it is enabled again, but nothing is lost,
    /// and "run init --force" would destroy a key that works after a reboot.
    @Test(arguments: ["in place", "evicted"])
    func aDisabledStorageHierarchyIsNotALostKey(parent: String) throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        if parent == "evicted" { #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0) }
        #expect(try setup.tpm.tool("tpm2_hierarchycontrol", ["-C", "p", "shEnable", "clear"]).status == 0)
        let token = try setup.cli.run("token", "--device-id", "x")
        #expect(token.status == 6 && token.stderr.contains("storage (owner) hierarchy is disabled") && !token.stderr.contains("init --force"), "\(token)")
        #expect(try setup.tpm.transientHandles().isEmpty)
        #expect(try setup.tpm.tool("tpm2_hierarchycontrol", ["-C", "p", "shEnable", "set"]).status == 0)
        let enabled = try setup.cli.run("token", "--device-id", "x")
        #expect(enabled.status == 0, "\(enabled)")
        // Replacing the key now (backend auto) falls back to software, and says what that gives up.
        #expect(try setup.tpm.tool("tpm2_hierarchycontrol", ["-C", "p", "shEnable", "clear"]).status == 0)
        let replaced = try setup.cli.run("init", "--force")
        #expect(replaced.status == 0 && replaced.stderr.contains("using a software key")
                && replaced.stderr.contains("the key this replaces was in the TPM"), "\(replaced)")
    }

    /// Another program leaves the TPM's three session slots loaded (a TPM
    /// without a resource manager): the message says sessions, and how to free
    /// them (`-l`), not objects (`-t`, which would not help); following it works.
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func sessionSlotsLeftFullAreNamedAsSuch() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        // Three unsalted HMAC sessions started by another program and never flushed (raw TPM2_StartAuthSession).
        let fill = """
            import os, socket, struct, sys
            body = struct.pack(">II", 0x40000007, 0x40000007) + struct.pack(">H", 16) + os.urandom(16) + struct.pack(">H", 0) + bytes([0]) + struct.pack(">HH", 0x0010, 0x000B)
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as connection:
                    connection.sendall(struct.pack(">HII", 0x8001, 10 + len(body), 0x176) + body)
                    assert struct.unpack(">I", connection.recv(4096)[6:10])[0] == 0
            """
        #expect(try ExternalTool.python.run(["-c", fill, "\(setup.tpm.port)"]).status == 0)
        #expect(try setup.tpm.loadedSessions().count == 3)
        let key = try setup.status()["key"]?.objectValue
        let problem = key?["problem"]?.stringValue ?? ""
        #expect(key?["loads"] == .bool(false) && problem.contains("no free session slot") && problem.contains("tpm2_flushcontext -l"), "\(String(describing: key))")
        try setup.tpm.tool("tpm2_flushcontext", ["-l"])
        #expect(try setup.status()["key"]?.objectValue?["loads"] == .bool(true))
    }

    // MARK: an active attacker on the TPM bus

    /// A refused authorization is the owner password's only for commands the
    /// owner hierarchy authorizes: a refused Sign (the key's own, on
    /// `token`'s password session) is not, a refused EvictControl is. The
    /// refusals come from an interposer (error answers carry no HMAC).
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func aRefusedAuthorizationIsTheOwnersOnlyForOwnerCommands() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        let signing = try TPMInterposer(setup.tpm, mode: "refuse", arguments: ["--refuse", "0x15d:0x9a2"])
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = signing.tcti
        let token = try cli.run("token", "--device-id", "x")
        #expect(!signing.events(named: "refused").isEmpty, "the interposer refused nothing: \(signing.events())")
        #expect(token.status == 6 && token.stderr.contains("refused the authorization for signing (Sign)")
                && !token.stderr.contains("owner hierarchy has a password"), "\(token)")
        #expect(try setup.tpm.transientHandles().isEmpty)

        let fresh = try Setup()
        let persisting = try TPMInterposer(fresh.tpm, mode: "refuse", arguments: ["--refuse", "0x120:0x9a2"])
        var freshCLI = fresh.cli
        freshCLI.extraEnvironment["DEVTRUST_TCTI"] = persisting.tcti
        let created = try freshCLI.run("init", "--backend", "tpm")
        #expect(!persisting.events(named: "refused").isEmpty, "the interposer refused nothing: \(persisting.events())")
        #expect(created.status == 0 && created.stderr.contains("no persistent storage root key: the TPM refused making the storage root key persistent at 0x81000001 (EvictControl): the owner hierarchy has a password")
                && created.stderr.contains("transient storage root key"), "\(created)")
        #expect(try fresh.tpm.transientHandles().isEmpty && fresh.tpm.persistentHandles().isEmpty)
    }

    /// devtrust puts an evicted SRK back, and another program persists its
    /// own key at that handle first: devtrust signs through a copy of its SRK
    /// and says so, instead of failing with the TPM's raw refusal.
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func losingTheRaceToPutTheParentBackIsNotAFailure() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        #expect(try setup.tpm.tool("tpm2_evictcontrol", ["-C", "o", "-c", "0x81000001"]).status == 0)
        let racer = try TPMInterposer(setup.tpm, mode: "persist-first")
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = racer.tcti
        let token = try cli.run("token", "--device-id", "x")
        let race = racer.events(named: "persisted-first")
        #expect(race.count == 1 && race.first?["evict_rc"] == .string("0x0"), "the other program did not win: \(racer.events())")
        #expect(token.status == 0 && token.stderr.contains("another program replaced it"), "\(token)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }

    /// An interposer (or a rogue TCTI) answers `init`'s Create with its own
    /// public key and later signs with the matching private key: the device
    /// would be registered with a key that lives outside the TPM. The answer is
    /// authenticated by a session salted to the SRK, so init refuses it.
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func anInterposerCannotGiveInitItsOwnKey() throws {
        let setup = try Setup()
        // Control: through an interposer that changes nothing, init works.
        let passing = try TPMInterposer(setup.tpm, mode: "pass")
        var honest = DevtrustBinary(keystore: setup.directory.file("ks-control"))
        honest.extraEnvironment["DEVTRUST_TCTI"] = passing.tcti
        #expect(try honest.run("init", "--backend", "tpm").status == 0)

        let attacker = try TPMInterposer(setup.tpm, mode: "swap-key")
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = attacker.tcti
        let result = try cli.run("init", "--backend", "tpm")
        #expect(!attacker.events(named: "create-swapped").isEmpty, "the interposer did not attack: \(attacker.events())")
        #expect(result.status == 6, "\(result)")
        #expect(result.stderr.contains("failed its integrity check") && result.stderr.contains("creating the device key"), "\(result.stderr)")
        let manifest = setup.directory.read("ks/keystore.json").flatMap { try? JSONParser.parse($0).objectValue }
        #expect(manifest?["key"] == nil || manifest?["key"] == .null, "a key was recorded: \(String(describing: manifest))")
        #expect(try cli.run("pubkey").output != attacker.attackerPublicKey)
        // ESAPI refuses every call after such an answer: what devtrust loaded is flushed on a fresh connection.
        #expect(try setup.tpm.transientHandles().isEmpty && setup.tpm.loadedSessions().isEmpty)
        // `init` (backend auto) and `register` without a key do not fall back to a software key on such an answer.
        let auto = try cli.run("init")
        #expect(auto.status == 6 && auto.stderr.contains("failed its integrity check") && !auto.stderr.contains("using a software key"), "\(auto)")
        #expect(setup.directory.read("ks/keystore.json").flatMap { try? JSONParser.parse($0).objectValue?["key"] } ?? .null == .null)
        #expect(try honest.run("init", "--backend", "tpm", "--force").status == 0)
    }

    /// After init, an interposer answers for the SRK with a key of its own, so
    /// that a client salting its sessions to what the TPM says would hand it
    /// the session key. devtrust salts to the SRK recorded at init instead.
    @Test(.enabled(if: ExternalTool.python.shouldRun)) func anInterposerAnsweringForTheSRKGetsNoSessionKey() throws {
        let setup = try Setup()
        #expect(try setup.cli.run("init", "--backend", "tpm").status == 0)
        let attacker = try TPMInterposer(setup.tpm, mode: "swap-srk")
        // Control: a client that trusts the TPM's answer (tpm2-tools) salts to the attacker's key.
        let tools = ["PATH": "/usr/bin:/bin", "TPM2TOOLS_TCTI": attacker.tcti, "TSS2_LOG": "all+NONE"]
        _ = try ProcessRunner.run("/usr/bin/tpm2_startauthsession", ["--hmac-session", "-c", "0x81000001", "-S", setup.directory.file("s.ctx")], environment: tools)
        #expect(!attacker.events(named: "salt-recovered").isEmpty, "the control did not leak a session key: \(attacker.events())")
        try setup.tpm.tool("tpm2_flushcontext", ["-s"])
        try setup.tpm.tool("tpm2_flushcontext", ["-l"])

        let recovered = attacker.events(named: "salt-recovered").count
        var cli = setup.cli
        cli.extraEnvironment["DEVTRUST_TCTI"] = attacker.tcti
        let status = try cli.run("status", "--json")
        #expect(!attacker.events(named: "srk-swapped").isEmpty, "the interposer did not attack: \(attacker.events())")
        #expect(attacker.events(named: "salt-recovered").count == recovered, "devtrust salted a session to the attacker's key")
        let key = try JSONParser.parse(status.output).objectValue?["key"]?.objectValue
        #expect(key?["loads"] == .bool(true), "\(status)")
        // The self-test's answers were authenticated: its Sign ran in an HMAC
        // session (0x02xxxxxx), not on the password session (0x40000009).
        let signs = attacker.events(named: "command").filter { $0["name"] == .string("Sign") }
        #expect(!signs.isEmpty && signs.allSatisfy { ($0["sessions"]?.arrayValue?.first?.stringValue ?? "").hasPrefix("0x2") },
                "the self-test did not sign in a salted session: \(signs)")
        #expect(try setup.tpm.transientHandles().isEmpty)
    }
}

extension Swtpm {
    /// tpm2_createprimary with `arguments` (an owner-hierarchy primary), made persistent at `handle`.
    func persistPrimary(_ arguments: [String], at handle: String, in directory: TemporaryDirectory,
                        sourceLocation: SourceLocation = #_sourceLocation) throws {
        let context = directory.file("primary-\(handle).ctx")
        #expect(try tool("tpm2_createprimary", arguments + ["-c", context]).status == 0, sourceLocation: sourceLocation)
        #expect(try tool("tpm2_evictcontrol", ["-C", "o", "-c", context, handle]).status == 0, sourceLocation: sourceLocation)
        try tool("tpm2_flushcontext", ["-t"])
    }

    /// TPM2_PT_LOCKOUT_COUNTER: failed authorizations counted towards lockout.
    func lockoutCounter() throws -> Int? {
        let line = try tool("tpm2_getcap", ["properties-variable"]).stdout.split(separator: "\n").first { $0.contains("TPM2_PT_LOCKOUT_COUNTER") }
        return line.flatMap { Int($0.split(separator: "0x").last ?? "", radix: 16) }
    }

    /// The standard ECC SRK at 0x81000001, made with tpm2-tools unless there is one.
    func ensureStorageRootKey(_ directory: TemporaryDirectory) throws {
        guard try !persistentHandles().contains("0x81000001") else { return }
        let context = directory.file("srk.ctx")
        #expect(try tool("tpm2_createprimary", ["-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a", Swtpm.storageRootKeyAttributes, "-c", context]).status == 0)
        #expect(try tool("tpm2_evictcontrol", ["-C", "o", "-c", context, "0x81000001"]).status == 0)
        try tool("tpm2_flushcontext", ["-t"])
    }
}
