import DevtrustCore
import DevtrustDevice
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignIn

/// The key and nonces a DPoP sign-in uses. The key is the device key (in the TPM where there is
/// one): the authorization server can then tie the tokens to the device it registered. The cost,
/// documented in docs/security.md: every resource server sees the same public key in the proofs.
struct DPoPKey {
    /// A binding of the device key, with the nonces of the cache directory (or of this run, when there is none).
    /// Loading the key and each proof's signature are bounded (`SigningDeadline`): a TPM that never
    /// answers must not hold a sign-in or `$(devtrust access-token)`'s refresh for ever.
    static func binding(_ context: CommandContext, store: DeviceStore, server url: String) throws -> DPoPBinding {
        let deadline = SigningDeadline.command(context, doing: "signing a DPoP proof")
        let device = try deadline.bounding { try store.loadKey() }
        return DPoPBinding(minter: minter(context, key: deadline.bounding(device.key), server: url), nonces: nonces(context))
    }

    /// Proofs in the server's time whenever its clock was measured to differ, however little: servers allow a
    /// proof's iat little or no future (glewlwyd: 0 s), where device tokens have 30 s and are corrected beyond 5 s.
    static func minter(_ context: CommandContext, key: any DeviceKey, server url: String) -> DPoPProofMinter {
        DPoPProofMinter(key: key, clock: context.clocks.clock(for: url, base: context.environment.clock, threshold: 0), random: context.environment.random)
    }

    static func nonces(_ context: CommandContext) -> any DPoPNonceStore {
        context.cacheDirectory.map { DPoPNonceFile(cache: $0) } ?? DPoPNonceMemory()
    }
}
