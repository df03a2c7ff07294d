import DevtrustErrors

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
    /// What would make a refused file importable, so that the advice given is one that works.
    public enum Cause: Equatable, Sendable {
        /// Damaged, or not valid for its format: only a new export can help.
        case damaged
        /// A valid key, but not on P-256 (RSA, P-384, ...): devtrust's keys are P-256.
        case notP256
        /// OpenSSL reads it and writes it again as the strict PKCS#8 devtrust reads
        /// (bytes after an element, a scalar shorter than 32 bytes).
        case openSSLRewrites
        /// A P-256 key whose curve is spelled out as parameters rather than named.
        case explicitCurve
    }

    public let message: String
    public let cause: Cause

    public init(message: String, cause: Cause = .damaged) {
        self.message = message
        self.cause = cause
    }

    public var description: String { message }
}

extension KeyFileError: ClassifiedError {
    /// A file the user named that cannot be used: a usage error.
    public var classification: ErrorClassification { ErrorClassification(.usage, summary: message) }
}

extension DeviceKey {
    /// Signs a throwaway digest and verifies the signature with the public
    /// key: the key can sign right now (the TPM answers, the key loads) and
    /// signs as its public key says. Commands that would otherwise discover a
    /// broken key half-way through a server's flow (an account created, an OTP
    /// sent) call this before their first request.
    public func checkCanSign(random: any RandomSource) throws {
        let digest = SHA256.hash(Array("devtrust key check ".utf8) + (try random.bytes(count: 16)))
        let signature = try sign(digest: digest)
        guard publicKey.isValidSignature(signature, for: digest) else { throw KeySelfTestFailure(backend: backend) }
    }
}

/// The key signed, but the signature does not verify with its public key.
public struct KeySelfTestFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public let backend: KeyBackend

    public var description: String {
        switch backend {
        case .tpm: return "the TPM's signature does not verify with the device key's public key: the TPM (or something between devtrust and the TPM) is not the one the key was made in; nothing was sent. Check the TCTI (--tcti), or run `devtrust init --force` and register again"
        case .software: return "the device key's signature does not verify with its public key: the key file is damaged; nothing was sent. Run `devtrust init --force` and register again"
        }
    }
}

extension KeySelfTestFailure: ClassifiedError {
    /// The TPM's failure for a TPM key; for a software key, its file's: the keystore's.
    public var classification: ErrorClassification {
        ErrorClassification(backend == .tpm ? .tpm : .keystore, summary: description)
    }
}
