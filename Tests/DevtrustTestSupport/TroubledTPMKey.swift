import DevtrustKeys

/// A device key that answers as a key in a TPM in trouble does, for the fast tier: its public key
/// is the loaded key's, and every signature fails with `failure`, the error the TPM backend
/// (`TPMDeviceKey`) throws for that answer: `TPMError.lockout` (dictionary-attack lockout),
/// `.busy` (TPM_RC_RETRY), `.unreachable` (no TPM answers at the TCTI), `.connectionLost`. What the
/// TPM really answers, and what devtrust makes of a real TPM's codes, `make test` checks with
/// swtpm and the TPM interposer (TPMCommandTests, TPMTrustTests).
public struct TroubledTPMKey: DeviceKey {
    public let key: any DeviceKey
    public let failure: TPMError

    public init(_ key: any DeviceKey, failing failure: TPMError) {
        self.key = key
        self.failure = failure
    }

    public var backend: KeyBackend { .tpm }
    public var publicKey: P256PublicKey { key.publicKey }

    public func sign(digest: SHA256Digest) throws -> ECDSASignature {
        throw failure
    }
}
