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
        /// 0x04 || x || y, when the file holds it.
        let publicPoint: [UInt8]?
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
        guard try algorithm.read(tag: 0x06, "algorithm") == ecPublicKeyOID else { throw DERError("not an EC key") }
        guard algorithm.nextTag == 0x06, try algorithm.read(tag: 0x06, "curve") == prime256v1OID else {
            throw DERError("not a key on the P-256 curve (prime256v1, named)")
        }
        try algorithm.expectEnd("algorithm")
        var content = try info.read(tag: 0x04, "privateKey")
        // The readers over `content` live only inside ecPrivateKey: once it
        // returns, this wipes the one buffer rather than a copy of it.
        defer { content.zeroize() }
        if info.nextTag == 0xA0 { _ = try info.readConstructed(tag: 0xA0, "attributes") }
        try info.expectEnd("PrivateKeyInfo")
        return try ecPrivateKey(content)
    }

    private static func ecPrivateKey(_ der: [UInt8]) throws(DERError) -> P256Parts {
        var outer = DERReader(der)
        var sequence = try outer.readConstructed(tag: 0x30, "ECPrivateKey")
        try outer.expectEnd("ECPrivateKey")
        guard try sequence.readUnsignedInteger("ECPrivateKey version") == 1 else { throw DERError("ECPrivateKey version is not 1") }
        var scalar = try sequence.read(tag: 0x04, "private key")
        do throws(DERError) {
            guard scalar.count == 32 else { throw DERError("the private key is \(scalar.count) bytes, not 32") }
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
                guard bits.count == 66, bits[0] == 0, bits[1] == 0x04 else {
                    throw DERError("the public key is not an uncompressed P-256 point")
                }
                publicPoint = Array(bits.dropFirst())
            }
            try sequence.expectEnd("ECPrivateKey")
            return P256Parts(privateKey: scalar, publicPoint: publicPoint)
        } catch {
            scalar.zeroize()
            throw error
        }
    }
}
