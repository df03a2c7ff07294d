import COpenSSL
import DevtrustEncoding

/// An RSA public key (modulus and exponent, as a JWK gives them), for
/// checking RS256 signatures (RSASSA-PKCS1-v1_5 with SHA-256) of a server's
/// ID tokens. devtrust never makes RSA keys.
public struct RSAPublicKey: Equatable, Sendable {
    /// Big-endian, without leading zero bytes.
    public let modulus: [UInt8]
    public let exponent: [UInt8]

    public static let minimumBits = 2048

    public init(modulus: [UInt8], exponent: [UInt8]) throws(PublicKeyError) {
        let n = Array(modulus.drop(while: { $0 == 0 }))
        let e = Array(exponent.drop(while: { $0 == 0 }))
        let bits = n.isEmpty ? 0 : (n.count - 1) * 8 + (8 - n[0].leadingZeroBitCount)
        guard bits >= Self.minimumBits, n.count <= 2048 else {
            throw PublicKeyError(message: "an RSA modulus of \(bits) bits (at least \(Self.minimumBits) are needed)")
        }
        guard !e.isEmpty, e.count <= 8, e.last! & 1 == 1, e != [1] else { throw PublicKeyError(message: "not a valid RSA public exponent") }
        self.modulus = n
        self.exponent = e
    }

    /// SubjectPublicKeyInfo: rsaEncryption (1.2.840.113549.1.1.1) with RSAPublicKey { n, e }.
    public var spki: [UInt8] {
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            DERWriter.element(tag: 0x02, bytes.first! & 0x80 != 0 ? [0] + bytes : bytes)
        }
        let algorithm = DERWriter.element(tag: 0x30, DERWriter.element(tag: 0x06, [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]) + [0x05, 0x00])
        let key = DERWriter.element(tag: 0x30, integer(modulus) + integer(exponent))
        return DERWriter.element(tag: 0x30, algorithm + DERWriter.element(tag: 0x03, [0] + key))
    }

    /// Whether `signature` is an RS256 signature of `message`.
    public func isValidRS256Signature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == modulus.count else { return false }
        OpenSSLLibrary.ensureInitialized()
        defer { OpenSSLLibrary.clearErrors() }
        let spki = self.spki
        let key: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}
