import COpenSSL
import DevtrustEncoding

/// A P-256 key held by OpenSSL, stored as an unencrypted PKCS#8 PEM file
/// (`-----BEGIN PRIVATE KEY-----`, readable by `openssl pkey`).
public struct SoftwareDeviceKey: DeviceKey {
    private let key: ECKey
    /// Fresh bytes mixed into each signature's RFC 6979 nonce (see devtrust_p256_sign).
    private let random: any RandomSource
    public let publicKey: P256PublicKey

    public var backend: KeyBackend { .software }

    private init(key: ECKey, random: any RandomSource) throws {
        guard let point = key.uncompressedPublicPoint() else {
            throw KeyFileError(message: "the key is not a P-256 EC key")
        }
        self.key = key
        self.random = random
        // The point is on the curve: OpenSSL checked it when the key was made.
        publicKey = P256PublicKey(unvalidatedX: Array(point[1..<33]), y: Array(point[33..<65]))
    }

    private init(evp: EVPKey, random: any RandomSource) throws {
        guard evp.isP256, let key = devtrust_ec_key_of(evp.pointer) else {
            OpenSSLLibrary.clearErrors()
            throw KeyFileError(message: "the key is not a P-256 EC key")
        }
        try self.init(key: ECKey(taking: key), random: random)
    }

    /// A fresh key from OpenSSL's key generator (and its DRBG).
    public static func generate(random: any RandomSource = SystemRandom()) throws -> SoftwareDeviceKey {
        OpenSSLLibrary.ensureInitialized()
        guard let context = devtrust_ec_keygen_context() else { throw OpenSSLError.capture("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
              EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_generate(context, &generated) == 1,
              let generated else {
            throw OpenSSLError.capture("generating a P-256 key")
        }
        return try SoftwareDeviceKey(evp: EVPKey(taking: generated), random: random)
    }

    /// Reads a PKCS#8 PEM P-256 private key (PKCS8.p256: strict DER, the
    /// private key in [1, n-1]). Whether the public point in the file belongs
    /// to it is `isConsistent`, for a key from elsewhere; the keystore checks
    /// its own file by fingerprint. The caller owns `pem` and should zeroize it.
    public init(pkcs8PEM pem: [UInt8], random: any RandomSource = SystemRandom()) throws {
        OpenSSLLibrary.ensureInitialized()
        try self.init(key: try Self.decode(pem), random: random)
    }

    private static func decode(_ pem: [UInt8]) throws(KeyFileError) -> ECKey {
        // Bound straight from the decoder: a second reference to the buffer
        // would make zeroize() wipe a copy of it and free the original uncleaned.
        guard var der = try privateKeyBlock(pem) else {
            throw KeyFileError(message: "not a PKCS#8 PEM private key (no -----BEGIN PRIVATE KEY----- block)")
        }
        defer { der.zeroize() }
        var parts: PKCS8.P256Parts
        do {
            parts = try PKCS8.p256(der)
        } catch {
            throw KeyFileError(message: "not a PKCS#8 P-256 private key: \(error.message)", cause: error.cause)
        }
        defer { parts.privateKey.zeroize() }
        let key = parts.publicPoint.map { devtrust_p256_key(parts.privateKey, $0, $0.count) } ?? devtrust_p256_key(parts.privateKey, nil, 0)
        guard let key else {
            OpenSSLLibrary.clearErrors()
            throw KeyFileError(message: "the public key in the PKCS#8 file is not a point on P-256")
        }
        return ECKey(taking: key)
    }

    private static func privateKeyBlock(_ pem: [UInt8]) throws(KeyFileError) -> [UInt8]? {
        do {
            return try PEM.block(pem, label: "PRIVATE KEY")
        } catch {
            throw KeyFileError(message: error.description, cause: .damaged)
        }
    }

    /// Whether the private key belongs to the public key (a point multiplication, ~0.1 ms).
    public var isConsistent: Bool {
        let consistent = devtrust_p256_check(key.pointer) == 1
        OpenSSLLibrary.clearErrors()
        return consistent
    }

    /// The private key as PKCS#8 PEM. Secret: the caller writes it and zeroizes it.
    /// Written by devtrust, not OpenSSL's encoder, which leaves a copy of the
    /// scalar in a freed, uncleaned buffer (i2d_ECPrivateKey's octet string).
    public func pkcs8PEM() throws -> [UInt8] {
        var scalar = [UInt8](repeating: 0, count: 32)
        defer { scalar.zeroize() }
        guard let privateKey = EC_KEY_get0_private_key(key.pointer), BN_bn2binpad(privateKey, &scalar, 32) == 32 else {
            throw OpenSSLError.capture("BN_bn2binpad")
        }
        var der = PKCS8.der(privateKey: scalar, uncompressedPublicPoint: [0x04] + publicKey.x + publicKey.y)
        defer { der.zeroize() }
        return PEM.encode(bytes: der, label: "PRIVATE KEY")
    }

    public func sign(digest: SHA256Digest) throws -> ECDSASignature {
        var r = [UInt8](repeating: 0, count: 32)
        var s = [UInt8](repeating: 0, count: 32)
        var additional = try random.bytes(count: 32)
        defer { additional.zeroize() }
        guard devtrust_p256_sign(key.pointer, digest.bytes, additional, additional.count, &r, &s) == 1 else {
            throw OpenSSLError.capture("ECDSA_do_sign_ex")
        }
        return try ECDSASignature(r: r, s: s)
    }
}

/// Owns an `EC_KEY` and frees it with the last reference.
final class ECKey: @unchecked Sendable {
    // Not modified after creation; ECDSA signing reads it from any thread.
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EC_KEY_free(pointer)
    }

    /// 0x04 || x || y, or nil when the key is not on P-256.
    func uncompressedPublicPoint() -> [UInt8]? {
        var point = [UInt8](repeating: 0, count: 65)
        guard devtrust_p256_public_point(pointer, &point) == 1 else {
            OpenSSLLibrary.clearErrors()
            return nil
        }
        return point
    }
}
