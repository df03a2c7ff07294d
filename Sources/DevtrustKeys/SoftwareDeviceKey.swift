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
        guard var der = PEM.decode(pem, label: "PRIVATE KEY") else {
            throw KeyFileError(message: "not a PKCS#8 PEM private key (no -----BEGIN PRIVATE KEY----- block of base64)")
        }
        defer { der.zeroize() }
        var parts: PKCS8.P256Parts
        do {
            parts = try PKCS8.p256(der)
        } catch {
            throw KeyFileError(message: "not a PKCS#8 P-256 private key: \(error.message)")
        }
        defer { parts.privateKey.zeroize() }
        let key = parts.publicPoint.map { devtrust_p256_key(parts.privateKey, $0) } ?? devtrust_p256_key(parts.privateKey, nil)
        guard let key else {
            OpenSSLLibrary.clearErrors()
            throw KeyFileError(message: "the public key in the PKCS#8 file is not a point on P-256")
        }
        return ECKey(taking: key)
    }

    /// Whether the private key belongs to the public key (a point multiplication, ~0.1 ms).
    public var isConsistent: Bool {
        let consistent = devtrust_p256_check(key.pointer) == 1
        OpenSSLLibrary.clearErrors()
        return consistent
    }

    /// The private key as PKCS#8 PEM. Secret: the caller writes it and zeroizes it.
    public func pkcs8PEM() throws -> [UInt8] {
        guard let evp = devtrust_evp_of_ec_key(key.pointer) else { throw OpenSSLError.capture("EVP_PKEY_set1_EC_KEY") }
        defer { EVP_PKEY_free(evp) }
        guard let bio = BIO_new(BIO_s_secmem()) else { throw OpenSSLError.capture("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, evp, nil, nil, 0, nil, nil) == 1 else {
            throw OpenSSLError.capture("PEM_write_bio_PrivateKey")
        }
        var data: UnsafeMutablePointer<CChar>?
        let length = devtrust_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw OpenSSLError.capture("BIO_get_mem_data") }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
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
