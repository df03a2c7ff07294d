import DevtrustEncoding
@testable import DevtrustKeys
import DevtrustTestSupport
import Testing

@Suite struct SoftwareDeviceKeyTests {
    @Test func pkcs8RoundTripKeepsTheKey() throws {
        let key = try SoftwareDeviceKey.generate()
        let pem = try key.pkcs8PEM()
        #expect(String(decoding: pem, as: UTF8.self).hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let reloaded = try SoftwareDeviceKey(pkcs8PEM: pem)
        #expect(reloaded.publicKey == key.publicKey)
        let signature = try reloaded.sign(message: Array("hello".utf8))
        #expect(key.publicKey.isValidSignature(signature, for: SHA256.hash(Array("hello".utf8))))
        #expect(!key.publicKey.isValidSignature(signature, for: SHA256.hash(Array("hellO".utf8))))
    }

    @Test func freshKeysDiffer() throws {
        let fingerprints = try (0..<20).map { _ in try SoftwareDeviceKey.generate().fingerprint }
        #expect(Set(fingerprints).count == 20)
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func opensslReadsOurKeyFileAndAgreesOnThePublicKey() throws {
        let directory = TemporaryDirectory()
        let key = try SoftwareDeviceKey.generate()
        let path = directory.write("key.pem", try key.pkcs8PEM())
        let result = try ExternalTool.openssl.run(["pkey", "-in", path, "-pubout"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == key.publicKey.pem)
        #expect(try P256PublicKey(pem: result.stdout) == key.publicKey)
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func opensslKeysLoadAndOtherCurvesOrTypesAreRefused() throws {
        let directory = TemporaryDirectory()
        let p256 = directory.file("p256.pem")
        #expect(try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p256]).status == 0)
        let loaded = try SoftwareDeviceKey(pkcs8PEM: try #require(directory.read("p256.pem")))
        let opensslPublic = try ExternalTool.openssl.run(["pkey", "-in", p256, "-pubout"])
        #expect(loaded.publicKey.pem == opensslPublic.stdout)

        for (name, arguments) in [
            ("p384.pem", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]),
            ("rsa.pem", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"]),
            ("ed25519.pem", ["genpkey", "-algorithm", "ED25519"]),
        ] {
            #expect(try ExternalTool.openssl.run(arguments + ["-out", directory.file(name)]).status == 0)
            #expect(throws: (any Error).self, "\(name) was accepted as a P-256 device key") {
                try SoftwareDeviceKey(pkcs8PEM: directory.read(name)!)
            }
        }
    }

    @Test(arguments: ["", "garbage", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                      "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"])
    func garbageIsAKeyFileError(text: String) {
        #expect(throws: KeyFileError.self) { try SoftwareDeviceKey(pkcs8PEM: Array(text.utf8)) }
    }
}

@Suite struct P256PublicKeyTests {
    static let rfc7515Key = try! P256PublicKey(
        x: Base64URL.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"),
        y: Base64URL.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"))

    @Test func spkiRoundTripAndPEM() throws {
        let key = Self.rfc7515Key
        #expect(key.spki.count == 91)
        #expect(try P256PublicKey(spki: key.spki) == key)
        #expect(try P256PublicKey(pem: key.pem) == key)
        #expect(try P256PublicKey(spki: Base64.decode(key.spkiBase64)) == key)
        #expect(key.pem.hasPrefix("-----BEGIN PUBLIC KEY-----\n") && key.pem.hasSuffix("-----END PUBLIC KEY-----\n"))
    }

    @Test func jwkMembers() {
        let jwk = Self.rfc7515Key.jwk
        #expect(JSONWriter.string(.object(jwk)) == #"{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#)
    }

    @Test(.enabled(if: ExternalTool.jose.shouldRun))
    func thumbprintMatchesJose() throws {
        for key in [Self.rfc7515Key, try SoftwareDeviceKey.generate().publicKey, try SoftwareDeviceKey.generate().publicKey] {
            let jwk = JSONWriter.string(.object(key.jwk))
            let result = try ExternalTool.jose.run(["jwk", "thp", "-i", "-", "-a", "S256"], stdin: Array(jwk.utf8))
            #expect(result.status == 0, "\(result)")
            #expect(result.output == key.thumbprint)
        }
    }

    @Test func rejectsPointsOffTheCurveAndOtherKeys() throws {
        var y = Self.rfc7515Key.y
        y[31] ^= 1
        #expect(throws: PublicKeyError.self) { try P256PublicKey(x: Self.rfc7515Key.x, y: y) }
        #expect(throws: PublicKeyError.self) { try P256PublicKey(spki: Self.rfc7515Key.spki + [0]) }
        #expect(throws: PublicKeyError.self) { try P256PublicKey(spki: Array(Self.rfc7515Key.spki.dropLast())) }
        #expect(throws: PublicKeyError.self) { try P256PublicKey(spki: []) }
        #expect(throws: PublicKeyError.self) { try P256PublicKey(x: [1, 2], y: [3]) }
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func refusesValidKeysOfOtherCurvesAndTypes() throws {
        let directory = TemporaryDirectory()
        for (name, arguments) in [
            ("p384", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]),
            ("secp256k1", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp256k1"]),
            ("ed25519", ["-algorithm", "ED25519"]),
        ] {
            let keyPath = directory.file(name + ".pem"), publicPath = directory.file(name + ".der")
            #expect(try ExternalTool.openssl.run(["genpkey"] + arguments + ["-out", keyPath]).status == 0)
            #expect(try ExternalTool.openssl.run(["pkey", "-in", keyPath, "-pubout", "-outform", "DER", "-out", publicPath]).status == 0)
            let spki = try #require(directory.read(name + ".der"))
            #expect(throws: PublicKeyError(message: "the key is not an EC key on the P-256 curve"), "\(name)") {
                try P256PublicKey(spki: spki)
            }
        }
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func acceptsACompressedPointSPKI() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("k.pem")
        #expect(try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]).status == 0)
        let compressed = directory.file("c.der")
        #expect(try ExternalTool.openssl.run(["ec", "-in", path, "-pubout", "-conv_form", "compressed", "-outform", "DER", "-out", compressed]).status == 0)
        let bytes = try #require(directory.read("c.der"))
        #expect(bytes.count == 59)
        let key = try P256PublicKey(spki: bytes)
        let uncompressed = try ExternalTool.openssl.run(["pkey", "-in", path, "-pubout"])
        #expect(key.pem == uncompressed.stdout)
    }
}

/// The PKCS#8 reader (PKCS8.p256): strict DER, the private key in [1, n-1].
@Suite struct PKCS8ReaderTests {
    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func opensslsKeysReadTheSameAsOpenSSLReadsThem() throws {
        let directory = TemporaryDirectory()
        for index in 0..<20 {
            let path = directory.file("k\(index).pem")
            #expect(try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]).status == 0)
            let key = try SoftwareDeviceKey(pkcs8PEM: try #require(directory.read("k\(index).pem")))
            #expect(key.isConsistent)
            let expected = try ExternalTool.openssl.run(["pkey", "-in", path, "-pubout"]).stdout
            #expect(key.publicKey.pem == expected)
        }
    }

    @Test func aDamagedPrivateScalarIsCaughtByTheConsistencyCheck() throws {
        let key = try SoftwareDeviceKey.generate()
        var file = try #require(PKCS8KeyFile(pem: try key.pkcs8PEM()))
        file.scalar[10] ^= 0xFF
        let damaged = try SoftwareDeviceKey(pkcs8PEM: Array(file.pem().utf8))
        #expect(damaged.publicKey == key.publicKey)
        #expect(!damaged.isConsistent)
        #expect(key.isConsistent)
    }

    @Test func keysWithoutAPublicPointLoadWithTheOneTheirScalarGives() throws {
        let key = try SoftwareDeviceKey.generate()
        var file = try #require(PKCS8KeyFile(pem: try key.pkcs8PEM()))
        file.publicPoint = nil
        let loaded = try SoftwareDeviceKey(pkcs8PEM: Array(file.pem().utf8))
        #expect(loaded.publicKey == key.publicKey)
        #expect(loaded.isConsistent)
    }

    /// Bytes after any element, parameters of another curve, a private key
    /// out of [1, n-1] or of the wrong size: refused, with what is wrong.
    @Test(arguments: PKCS8KeyFile.Damage.allCases.filter { !$0.isValid })
    func everyElementIsCheckedToItsEnd(damage: PKCS8KeyFile.Damage) throws {
        let file = try #require(PKCS8KeyFile(pem: try SoftwareDeviceKey.generate().pkcs8PEM()))
        #expect(throws: Never.self) { try SoftwareDeviceKey(pkcs8PEM: Array(file.pem().utf8)) }
        let refusal = KeyFileError(message: "not a PKCS#8 P-256 private key: " + damage.refusal,
                                   cause: damage.openSSLRewritesIt ? .openSSLRewrites : .damaged)
        #expect(throws: refusal) { try SoftwareDeviceKey(pkcs8PEM: Array(file.pem(damage).utf8)) }
    }

    /// RFC 5915 lets the public key be a compressed point (the old reader took it; issue 12's refused it).
    @Test func aCompressedPublicPointIsRead() throws {
        let key = try SoftwareDeviceKey.generate()
        let file = try #require(PKCS8KeyFile(pem: try key.pkcs8PEM()))
        let loaded = try SoftwareDeviceKey(pkcs8PEM: Array(file.pem(.compressedPublicKey).utf8))
        #expect(loaded.publicKey == key.publicKey)
        #expect(loaded.isConsistent)
        #expect(try loaded.pkcs8PEM() == key.pkcs8PEM())
    }

    /// devtrust writes the key file itself (OpenSSL's encoder leaves a copy of
    /// the scalar in freed memory, KeyCommandMemoryTests): byte for byte what OpenSSL writes.
    @Test(.enabled(if: ExternalTool.openssl.shouldRun)) func theKeyFileIsWhatOpenSSLWrites() throws {
        let directory = TemporaryDirectory()
        for index in 0..<8 {
            let pem = try SoftwareDeviceKey.generate().pkcs8PEM()
            let path = directory.write("key-\(index).pem", pem)
            let rewritten = try ExternalTool.openssl.run(["pkcs8", "-topk8", "-nocrypt", "-in", path])
            #expect(rewritten.status == 0 && Array(rewritten.stdout.utf8) == pem, "\(rewritten)")
        }
    }
}
