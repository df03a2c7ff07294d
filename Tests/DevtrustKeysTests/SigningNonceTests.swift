import COpenSSL
import DevtrustEncoding
import DevtrustKeys
import Testing

/// A random source stuck on one value: a VM snapshot restored twice, or a
/// broken generator.
struct StuckRandom: RandomSource {
    var byte: UInt8 = 0x5A

    func bytes(count: Int) throws -> [UInt8] { [UInt8](repeating: byte, count: count) }
}

/// The software key's ECDSA nonces: RFC 6979 from the key and the digest,
/// hedged with fresh random bytes (devtrust_p256_sign in Sources/COpenSSL/shim.h).
@Suite struct SigningNonceTests {
    /// RFC 6979 appendix A.2.5: ECDSA, 256 bits (prime field), with SHA-256.
    static let rfc6979PrivateKey = "C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721"
    static let rfc6979PublicPoint = "04" + "60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6"
        + "7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299"
    static let rfc6979Vectors: [(message: String, k: String, r: String, s: String)] = [
        ("sample", "A6E3C57DD01ABE90086538398355DD4C3B17AA873382B0F24D6129493D8AAD60",
         "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716",
         "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"),
        ("test", "D16B6AE827F17175E040871A1C7EC3500192C4C92677336EC2537ACAEE0008E0",
         "F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367",
         "019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083"),
    ]

    @Test(arguments: rfc6979Vectors.map(\.message))
    func withoutRandomBytesTheNonceAndSignatureAreRFC6979s(message: String) throws {
        let vector = try #require(Self.rfc6979Vectors.first { $0.message == message })
        let privateKey = try #require(Hex.decode(Self.rfc6979PrivateKey))
        let digest = SHA256.hash(Array(message.utf8)).bytes
        var k = [UInt8](repeating: 0, count: 32)
        devtrust_rfc6979_p256_nonce(privateKey, digest, nil, 0, &k)
        #expect(Hex.encode(k).uppercased() == vector.k)

        let publicPoint = try #require(Hex.decode(Self.rfc6979PublicPoint))
        let key = try #require(devtrust_p256_key(privateKey, publicPoint, publicPoint.count))
        defer { EC_KEY_free(key) }
        var r = [UInt8](repeating: 0, count: 32), s = [UInt8](repeating: 0, count: 32)
        #expect(devtrust_p256_sign(key, digest, nil, 0, &r, &s) == 1)
        #expect(Hex.encode(r).uppercased() == vector.r)
        #expect(Hex.encode(s).uppercased() == vector.s)
    }

    @Test func aStuckRandomSourceStillGivesEveryDigestItsOwnNonce() throws {
        let key = try SoftwareDeviceKey.generate(random: StuckRandom())
        let digests = (0..<50).map { SHA256.hash(Array("challenge \($0)".utf8)) }
        let signatures = try digests.map { try key.sign(digest: $0) }
        for (signature, digest) in zip(signatures, digests) {
            #expect(key.publicKey.isValidSignature(signature, for: digest))
        }
        #expect(Set(signatures.map(\.r)).count == digests.count, "two digests shared a nonce: the key follows from their signatures")
        // The same digest and the same random bytes: the same nonce (RFC 6979 is deterministic) ...
        #expect(try key.sign(digest: digests[0]) == signatures[0])
        // ... and other random bytes change it: they are mixed in.
        let reloaded = try SoftwareDeviceKey(pkcs8PEM: try key.pkcs8PEM(), random: StuckRandom(byte: 0xA5))
        #expect(try reloaded.sign(digest: digests[0]).r != signatures[0].r)
    }

    @Test func noncesNeverRepeatForOneDigest() throws {
        let key = try SoftwareDeviceKey.generate()
        let digest = SHA256.hash(Array("the same message".utf8))
        var seen = Set<[UInt8]>()
        for _ in 0..<2000 {
            let signature = try key.sign(digest: digest)
            #expect(key.publicKey.isValidSignature(signature, for: digest))
            seen.insert(signature.r)
        }
        #expect(seen.count == 2000)
    }

    /// Signing draws its fresh bytes from the injected source and leaves
    /// OpenSSL's own generator (and its method) as OpenSSL made it.
    @Test func openSSLsRandomGeneratorIsNotReplaced() throws {
        let key = try SoftwareDeviceKey.generate()
        _ = try key.sign(message: Array("hello".utf8))
        let method = UnsafeRawPointer(RAND_get_rand_method()), openSSLs = UnsafeRawPointer(RAND_OpenSSL())
        #expect(method == openSSLs)
    }

    /// The nonce's inverse (safegcd, constant time) against OpenSSL's BN_mod_inverse.
    @Test func theNonceInverseAgreesWithOpenSSL() throws {
        let order = try #require(Hex.decode("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551"))
        func minus(_ value: UInt8) -> [UInt8] { var bytes = order; bytes[31] -= value; return bytes }
        var values: [[UInt8]] = [
            [UInt8](repeating: 0, count: 31) + [1], [UInt8](repeating: 0, count: 31) + [2], minus(1), minus(2),
            [0x80] + [UInt8](repeating: 0, count: 31), [UInt8](repeating: 0, count: 16) + [UInt8](repeating: 0xFF, count: 16),
            [UInt8](repeating: 0xFF, count: 4) + [UInt8](repeating: 0, count: 28),
        ]
        let random = SystemRandom()
        while values.count < 20_000 {
            let candidate = try random.bytes(count: 32)
            if candidate.lexicographicallyPrecedes(order) && candidate.contains(where: { $0 != 0 }) { values.append(candidate) }
        }
        let context = try #require(BN_CTX_new())
        defer { BN_CTX_free(context) }
        let modulus = BN_bin2bn(order, 32, nil), value = BN_new(), expected = BN_new()
        defer { BN_free(modulus); BN_free(value); BN_free(expected) }
        var mismatches = [String]()
        for bytes in values {
            var inverse = [UInt8](repeating: 0, count: 32), reference = [UInt8](repeating: 0, count: 32)
            devtrust_p256_invert_mod_order(bytes, &inverse)
            BN_bin2bn(bytes, 32, value)
            #expect(BN_mod_inverse(expected, value, modulus, context) != nil)
            BN_bn2binpad(expected, &reference, 32)
            if inverse != reference { mismatches.append(Hex.encode(bytes)) }
        }
        #expect(mismatches.isEmpty, "wrong inverses of \(mismatches.prefix(5))")
    }
}
