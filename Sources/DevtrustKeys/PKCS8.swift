import COpenSSL
import DevtrustEncoding

/// A PKCS#8 P-256 private key, read with the strict DER reader: every element
/// ends where its length says, nothing follows it, and nothing is left unread.
///
///     PrivateKeyInfo ::= SEQUENCE { version INTEGER (0),
///         algorithm SEQUENCE { id-ecPublicKey, prime256v1 }, privateKey OCTET STRING, [0] attributes OPTIONAL }
///     ECPrivateKey ::= SEQUENCE { version INTEGER (1), privateKey OCTET STRING (32 bytes),
///         [0] parameters OPTIONAL (prime256v1), [1] publicKey BIT STRING OPTIONAL }   -- RFC 5915
enum PKCS8 {
    struct P256Parts {
        /// Secret, in [1, n-1]: zeroize after use.
        var privateKey: [UInt8]
        /// The SEC1 encoding of the public point (uncompressed or compressed, as RFC 5915 allows), when the file holds it.
        let publicPoint: [UInt8]?
    }

    /// DER of OBJECT IDENTIFIER 1.2.840.10045.2.1 (id-ecPublicKey) and 1.2.840.10045.3.1.7 (prime256v1).
    static let ecPublicKeyOID: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    static let prime256v1OID: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    /// Keys people try to import, named in the refusal (DER contents of their OIDs).
    private static let otherAlgorithms: [[UInt8]: String] = [
        [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]: "an RSA key",
        [0x2B, 0x65, 0x70]: "an Ed25519 key",
        [0x2B, 0x65, 0x71]: "an Ed448 key",
    ]
    private static let otherCurves: [[UInt8]: String] = [
        [0x2B, 0x81, 0x04, 0x00, 0x22]: "a key on P-384",
        [0x2B, 0x81, 0x04, 0x00, 0x23]: "a key on P-521",
        [0x2B, 0x81, 0x04, 0x00, 0x0A]: "a key on secp256k1",
    ]

    /// The file devtrust writes for a software key, as OpenSSL writes it (the
    /// public key in the ECPrivateKey, no parameters there). One buffer: the
    /// scalar is copied once, into it. Secret: the caller zeroizes it.
    static func der(privateKey: [UInt8], uncompressedPublicPoint point: [UInt8]) -> [UInt8] {
        DERWriter.encode(.constructed(tag: 0x30, [
            .unsignedInteger(0),
            .constructed(tag: 0x30, [.primitive(tag: 0x06, ecPublicKeyOID), .primitive(tag: 0x06, prime256v1OID)]),
            .constructed(tag: 0x04, [
                .constructed(tag: 0x30, [
                    .unsignedInteger(1),
                    .primitive(tag: 0x04, privateKey),
                    .constructed(tag: 0xA1, [.primitive(tag: 0x03, [0] + point)]),
                ]),
            ]),
        ]))
    }

    static func p256(_ der: [UInt8]) throws(KeyFileError) -> P256Parts {
        do {
            var outer = DERReader(der)
            var info = try outer.readConstructed(tag: 0x30, "PrivateKeyInfo")
            try openSSLRewrites { () throws(DERError) in try outer.expectEnd("PrivateKeyInfo") }
            guard try info.readUnsignedInteger("version") == 0 else { throw DERError("PrivateKeyInfo version is not 0") }
            var algorithm = try info.readConstructed(tag: 0x30, "algorithm")
            let algorithmOID = try algorithm.read(tag: 0x06, "algorithm")
            guard algorithmOID == ecPublicKeyOID else {
                throw KeyFileError(message: otherAlgorithms[algorithmOID] ?? "not an EC key", cause: .notP256)
            }
            if algorithm.nextTag == 0x30 {
                throw KeyFileError(message: "its curve is given by explicit parameters, not named", cause: .explicitCurve)
            }
            let curve = algorithm.nextTag == 0x06 ? try algorithm.read(tag: 0x06, "curve") : nil
            guard curve == prime256v1OID else {
                throw KeyFileError(message: curve.flatMap { otherCurves[$0] } ?? "not a key on the P-256 curve (prime256v1, named)", cause: .notP256)
            }
            try algorithm.expectEnd("algorithm")
            var content = try info.read(tag: 0x04, "privateKey")
            // The readers over `content` live only inside ecPrivateKey: once it
            // returns, this wipes the one buffer rather than a copy of it.
            defer { content.zeroize() }
            if info.nextTag == 0xA0 { _ = try info.readConstructed(tag: 0xA0, "attributes") }
            try info.expectEnd("PrivateKeyInfo")
            return try ecPrivateKey(content)
        } catch {
            throw damaged(error)
        }
    }

    private static func ecPrivateKey(_ der: [UInt8]) throws(KeyFileError) -> P256Parts {
        var scalar = [UInt8]()
        do {
            var outer = DERReader(der)
            var sequence = try outer.readConstructed(tag: 0x30, "ECPrivateKey")
            try openSSLRewrites { () throws(DERError) in try outer.expectEnd("ECPrivateKey") }
            guard try sequence.readUnsignedInteger("ECPrivateKey version") == 1 else { throw DERError("ECPrivateKey version is not 1") }
            scalar = try sequence.read(tag: 0x04, "private key")
            // OpenSSL reads a shorter scalar (leading zeros left out), or one with a
            // leading zero byte more, and writes it in 32 bytes.
            guard scalar.count == 32 else {
                let rewritable = scalar.count < 32 || (scalar.count == 33 && scalar[0] == 0)
                throw KeyFileError(message: "the private key is \(scalar.count) bytes, not 32", cause: rewritable ? .openSSLRewrites : .damaged)
            }
            guard devtrust_p256_scalar_in_range(scalar) == 1 else {
                throw DERError("the private key is zero or not below the order of the P-256 group")
            }
            if sequence.nextTag == 0xA0 {
                var parameters = try sequence.readConstructed(tag: 0xA0, "parameters")
                guard try parameters.read(tag: 0x06, "parameters") == prime256v1OID else {
                    throw DERError("the ECPrivateKey parameters name another curve than P-256")
                }
                try parameters.expectEnd("parameters")
            }
            var publicPoint: [UInt8]?
            if sequence.nextTag == 0xA1 {
                var publicKey = try sequence.readConstructed(tag: 0xA1, "publicKey")
                let bits = try publicKey.read(tag: 0x03, "publicKey BIT STRING")
                try publicKey.expectEnd("publicKey")
                // SEC1 allows the point uncompressed (04), compressed (02, 03) or hybrid (06, 07): OpenSSL reads each.
                let full = bits.count == 66 && [0x04, 0x06, 0x07].contains(bits[1]), compressed = bits.count == 34 && (bits[1] == 0x02 || bits[1] == 0x03)
                guard bits.first == 0, full || compressed else {
                    throw DERError("the public key is not a P-256 point (SEC1: uncompressed, compressed or hybrid)")
                }
                publicPoint = Array(bits.dropFirst())
            }
            try sequence.expectEnd("ECPrivateKey")
            return P256Parts(privateKey: scalar, publicPoint: publicPoint)
        } catch {
            scalar.zeroize()
            throw damaged(error)
        }
    }

    /// Trailing bytes: OpenSSL reads the key and leaves them out when it writes it again.
    private static func openSSLRewrites(_ check: () throws(DERError) -> Void) throws(KeyFileError) {
        do {
            try check()
        } catch {
            throw KeyFileError(message: error.message, cause: .openSSLRewrites)
        }
    }

    /// A DER error is damage; a refusal that already says why passes through.
    private static func damaged(_ error: any Error) -> KeyFileError {
        if let refusal = error as? KeyFileError { return refusal }
        return KeyFileError(message: (error as? DERError)?.message ?? "\(error)", cause: .damaged)
    }
}
