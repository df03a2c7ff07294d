/// Where a device key lives.
public enum KeyBackend: String, Sendable, CaseIterable {
    /// A P-256 key in a PKCS#8 file, used through OpenSSL.
    case software
    /// A P-256 key created inside a TPM 2.0; only its wrapped blob is on disk.
    case tpm
}

/// The device's P-256 signing key, whatever holds it.
///
/// Backends live side by side in parallel files (`SoftwareDeviceKey`, ...),
/// each behind this one API: the public key as SPKI and a signature over a
/// SHA-256 digest. Everything above (JWS, challenge signatures) is shared.
public protocol DeviceKey: Sendable {
    var backend: KeyBackend { get }
    var publicKey: P256PublicKey { get }
    func sign(digest: SHA256Digest) throws -> ECDSASignature
}

extension DeviceKey {
    /// ECDSA with SHA-256 over `message`.
    public func sign(message: some Collection<UInt8>) throws -> ECDSASignature {
        try sign(digest: SHA256.hash(message))
    }

    /// The RFC 7638 thumbprint of the public key.
    public var fingerprint: String { publicKey.thumbprint }
}

/// A key file that does not hold what it should.
public struct KeyFileError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String

    public init(message: String) { self.message = message }

    public var description: String { message }
}
