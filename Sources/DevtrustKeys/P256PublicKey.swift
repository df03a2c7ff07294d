import COpenSSL
import DevtrustEncoding
import DevtrustErrors

public struct PublicKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public init(message: String) { self.message = message }

    public var description: String { message }
}

/// A P-256 public key: the affine point (x, y), validated to be on the curve.
public struct P256PublicKey: Equatable, Hashable, Sendable {
    public let x: [UInt8]
    public let y: [UInt8]

    /// DER of SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING } up to the point.
    private static let spkiPrefix: [UInt8] = Hex.decodeConstant(
        "3059301306072a8648ce3d020106082a8648ce3d030107034200")

    /// A DER SubjectPublicKeyInfo for an EC key on P-256 (uncompressed or compressed point).
    public init(spki: [UInt8]) throws(PublicKeyError) {
        OpenSSLLibrary.ensureInitialized()
        let parsed: (key: OpaquePointer, consumed: Int)? = spki.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard buffer.count > 0, let key = d2i_PUBKEY(nil, &cursor, buffer.count), let end = cursor else { return nil }
            return (key, end - buffer.baseAddress!)
        }
        guard let parsed else {
            OpenSSLLibrary.clearErrors()
            throw PublicKeyError(message: "not a DER SubjectPublicKeyInfo with a valid public key")
        }
        let key = EVPKey(taking: parsed.key)
        guard parsed.consumed == spki.count else {
            throw PublicKeyError(message: "\(spki.count - parsed.consumed) unexpected byte(s) after the SubjectPublicKeyInfo")
        }
        try self.init(key)
    }

    /// The point from a JWK's `x` and `y` (32 bytes each).
    public init(x: [UInt8], y: [UInt8]) throws(PublicKeyError) {
        guard x.count == 32, y.count == 32 else {
            throw PublicKeyError(message: "P-256 coordinates are 32 bytes each (got \(x.count) and \(y.count))")
        }
        try self.init(spki: Self.spkiPrefix + [0x04] + x + y)
    }

    /// A point that is not checked to be on the curve: only for a point whose
    /// fingerprint the caller checks against a record made from a checked one.
    init(unvalidatedX x: [UInt8], y: [UInt8]) {
        self.x = x
        self.y = y
    }

    init(_ key: EVPKey) throws(PublicKeyError) {
        guard key.isP256 else { throw PublicKeyError(message: "the key is not an EC key on the P-256 curve") }
        guard let point = try? key.uncompressedPublicPoint() else {
            OpenSSLLibrary.clearErrors()
            throw PublicKeyError(message: "cannot read the public point")
        }
        x = Array(point[1..<33])
        y = Array(point[33..<65])
    }

    /// Standard DER SubjectPublicKeyInfo with the uncompressed point.
    public var spki: [UInt8] { Self.spkiPrefix + [0x04] + x + y }

    /// What registration sends as `publicKey`: standard base64 of the SPKI.
    public var spkiBase64: String { Base64.encode(spki) }

    public var pem: String { PEM.encode(spki, label: "PUBLIC KEY") }

    /// A public JWK: `{"kty":"EC","crv":"P-256","x":...,"y":...}`.
    public var jwk: JSONObject {
        ["kty": .string("EC"), "crv": .string("P-256"), "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y))]
    }

    /// RFC 7638 JWK thumbprint (SHA-256, base64url): the key's fingerprint everywhere in devtrust.
    public var thumbprint: String {
        // RFC 7638 section 3.2: the required members in lexicographic order, no whitespace.
        let canonical: JSONObject = [
            "crv": .string("P-256"), "kty": .string("EC"),
            "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y)),
        ]
        return Base64URL.encode(SHA256.hash(JSONWriter.bytes(.object(canonical))).bytes)
    }

    /// Parses `-----BEGIN PUBLIC KEY-----` PEM text.
    public init(pem text: String) throws(PublicKeyError) {
        guard let der = PEM.decode(text, label: "PUBLIC KEY") else {
            throw PublicKeyError(message: "no valid -----BEGIN PUBLIC KEY----- block")
        }
        try self.init(spki: der)
    }

    /// Verifies an ECDSA signature over a SHA-256 digest.
    public func isValidSignature(_ signature: ECDSASignature, for digest: SHA256Digest) -> Bool {
        OpenSSLLibrary.ensureInitialized()
        let spki = self.spki
        let key: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key else { OpenSSLLibrary.clearErrors(); return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { OpenSSLLibrary.clearErrors(); return false }
        defer { EVP_PKEY_CTX_free(context) }
        let der = signature.der
        let result = EVP_PKEY_verify_init(context) == 1
            && EVP_PKEY_verify(context, der, der.count, digest.bytes, digest.bytes.count) == 1
        OpenSSLLibrary.clearErrors()
        return result
    }
}

extension PublicKeyError: ClassifiedError {
    /// A public key that is not a P-256 point in the form expected. A failure (exit 1), in its own words.
    public var classification: ErrorClassification { ErrorClassification(.failure, summary: description) }
}
