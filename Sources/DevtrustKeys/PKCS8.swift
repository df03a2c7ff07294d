import DevtrustEncoding

/// The parts of a PKCS#8 P-256 private key, read with the strict DER reader:
///
///     PrivateKeyInfo ::= SEQUENCE { version INTEGER (0),
///         algorithm SEQUENCE { id-ecPublicKey, prime256v1 }, privateKey OCTET STRING, [0] attributes OPTIONAL }
///     ECPrivateKey ::= SEQUENCE { version INTEGER (1), privateKey OCTET STRING (32 bytes),
///         [0] parameters OPTIONAL, [1] publicKey BIT STRING OPTIONAL }
enum PKCS8 {
    struct P256Parts {
        /// Secret: zeroize after use.
        var privateKey: [UInt8]
        /// 0x04 || x || y.
        let publicPoint: [UInt8]
    }

    /// DER of OBJECT IDENTIFIER 1.2.840.10045.2.1 (id-ecPublicKey) and 1.2.840.10045.3.1.7 (prime256v1).
    static let ecPublicKeyOID: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    static let prime256v1OID: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    static func p256(_ der: [UInt8]) throws(DERError) -> P256Parts {
        var outer = DERReader(der)
        var info = try outer.readConstructed(tag: 0x30, "PrivateKeyInfo")
        try outer.expectEnd("PrivateKeyInfo")
        guard try info.readUnsignedInteger("version") == 0 else { throw DERError("PrivateKeyInfo version is not 0") }
        var algorithm = try info.readConstructed(tag: 0x30, "algorithm")
        guard try algorithm.read(tag: 0x06, "algorithm") == ecPublicKeyOID, try algorithm.read(tag: 0x06, "curve") == prime256v1OID else {
            throw DERError("not an EC key on prime256v1")
        }
        var content = try info.read(tag: 0x04, "privateKey")
        defer { content.zeroize() }
        var ecKey = DERReader(content)
        var sequence = try ecKey.readConstructed(tag: 0x30, "ECPrivateKey")
        guard try sequence.readUnsignedInteger("ECPrivateKey version") == 1 else { throw DERError("ECPrivateKey version is not 1") }
        var scalar = try sequence.read(tag: 0x04, "private scalar")
        guard scalar.count == 32 else {
            scalar.zeroize()
            throw DERError("the private scalar is not 32 bytes")
        }
        if sequence.nextTag == 0xA0 { _ = try sequence.readConstructed(tag: 0xA0, "parameters") }
        guard sequence.nextTag == 0xA1 else {
            scalar.zeroize()
            throw DERError("no public key in the ECPrivateKey")
        }
        var publicKey = try sequence.readConstructed(tag: 0xA1, "publicKey")
        let bits = try publicKey.read(tag: 0x03, "publicKey BIT STRING")
        guard bits.count == 66, bits[0] == 0, bits[1] == 0x04 else {
            scalar.zeroize()
            throw DERError("the public key is not an uncompressed P-256 point")
        }
        return P256Parts(privateKey: scalar, publicPoint: Array(bits.dropFirst()))
    }
}
