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
    struct Setup {
        let directory = TemporaryDirectory()
        let cli: DevtrustBinary

        init() {
            var cli = DevtrustBinary(keystore: directory.file("ks"))
            cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
            self.cli = cli
        }

        /// A fresh software key's file, made by devtrust in another keystore.
        func softwareKeyFile(_ keystore: String = "other") throws -> PKCS8KeyFile {
            var other = DevtrustBinary(keystore: directory.file(keystore))
            other.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
            #expect(try other.run("init", "--backend", "software", "-q").status == 0)
            let name = try #require(directory.entries(keystore).first { $0.hasPrefix("key-") })
            let pem = try #require(directory.read(keystore + "/" + name))
            return try #require(PKCS8KeyFile(pem: pem))
        }
    }

    @Test(arguments: PKCS8KeyFile.Damage.allCases)
    func aPKCS8FileIsCheckedToTheEndOfEveryElement(damage: PKCS8KeyFile.Damage) throws {
        let setup = Setup()
        let file = try setup.softwareKeyFile()
        let path = setup.directory.write("import.pem", file.pem(damage))
        let result = try setup.cli.run("init", "--import", path)
        if damage == .none {
            #expect(result.status == 0, "\(result)")
            return
        }
        #expect(result.status == 2, "\(damage) was imported: \(result)")
        #expect(result.stderr == "devtrust: error: \(path): not a PKCS#8 P-256 private key: \(damage.refusal); export the key again as unencrypted PKCS#8 (a key OpenSSL reads: openssl pkcs8 -topk8 -nocrypt -in \(path) -out key.pem)\n")
        #expect(setup.directory.read("ks/keystore.json") == nil)
    }

    @Test func aPrivateKeyThatIsNotThePublicKeysIsRefused() throws {
        let setup = Setup()
        var file = try setup.softwareKeyFile()
        file.publicPoint = try setup.softwareKeyFile("another").publicPoint
        let path = setup.directory.write("import.pem", file.pem())
        let result = try setup.cli.run("init", "--import", path)
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("\(path): its private key does not belong to the public key stored with it"), "\(result)")
        #expect(setup.directory.read("ks/keystore.json") == nil)
    }

    @Test(arguments: TSS2KeyFileField.all.map(\.name))
    func tss2KeysWithPoliciesOrSecretsAreNotSupported(name: String) throws {
        let field = try #require(TSS2KeyFileField.named(name))
        let setup = Setup()
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
