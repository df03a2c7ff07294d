import DevtrustCore
import DevtrustDevice
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore
import DevtrustSignIn

/// The key and nonces a DPoP sign-in uses. The key is the device key (in the TPM where there is
/// one): the authorization server can then tie the tokens to the device it registered. The cost,
/// documented in docs/security.md: every resource server sees the same public key in the proofs.
package struct DPoPKey {
    /// The servers' clocks: proofs are written in the server's time.
    package let clocks: ServerClocks
    /// This machine's clock, before any server's correction.
    package let clock: any Clock
    package let random: any RandomSource
    /// Where the servers' nonces are kept (nil: in memory, for this run).
    package let cache: CacheDirectory?

    package init(clocks: ServerClocks, clock: any Clock, random: any RandomSource, cache: CacheDirectory?) {
        self.clocks = clocks
        self.clock = clock
        self.random = random
        self.cache = cache
    }

    /// A binding of the device key, with the nonces of the cache directory (or of this run, when there is none).
    /// Loading the key and each proof's signature are bounded (`deadline`): a TPM that never
    /// answers must not hold a sign-in or `$(devtrust access-token)`'s refresh for ever.
    package func binding(store: DeviceStore, server url: String, deadline: SigningDeadline) throws -> DPoPBinding {
        let device = try deadline.bounding { try store.loadKey() }
        return DPoPBinding(minter: minter(key: deadline.bounding(device.key), server: url), nonces: nonces())
    }

    /// The binding for refreshing a sign-in bound to `jkt`: an error when the device key is no
    /// longer that key (RFC 9449 section 5: a bound refresh token is refreshed only with a proof of its key).
    package func binding(store: DeviceStore, boundTo jkt: String, tokenEndpoint: String, deadline: SigningDeadline) throws -> DPoPBinding {
        let binding = try binding(store: store, server: tokenEndpoint, deadline: deadline)
        guard binding.thumbprint == jkt else { throw DeviceError.dpopKeyChanged(boundTo: jkt, deviceKey: binding.thumbprint) }
        return binding
    }

    /// Proofs in the server's time whenever its clock was measured to differ, however little: servers allow a
    /// proof's iat little or no future (glewlwyd: 0 s), where device tokens have 30 s and are corrected beyond 5 s.
    package func minter(key: any DeviceKey, server url: String) -> DPoPProofMinter {
        DPoPProofMinter(key: key, clock: clocks.clock(for: url, base: clock, threshold: 0), random: random)
    }

    package func nonces() -> any DPoPNonceStore {
        cache.map { DPoPNonceFile(cache: $0) } ?? DPoPNonceMemory()
    }

    /// A proof for a `method` request to a resource at `url` with the stored sign-in's access token
    /// (`ath` is its hash; the sign-in as `server` or `discovery` names it), and the key's thumbprint:
    /// `dpop-proof`. No HTTP, no refresh. Without `nonce`, the latest one devtrust was given at the
    /// URL's origin (a server that is both authorization and resource server, as glewlwyd, shares
    /// them); none when it gave none. A nonce given is kept for the next proof at that origin: a
    /// resource's nonce rotates, and a script that hands each new one over once needs it again.
    package func proof(store: DeviceStore, method: String, url: String, nonce given: String?, server: String?,
                       discovery: String?) throws -> (proof: String, jkt: String) {
        // One read of the keystore for the key and the sign-in: this is the per-request path.
        let device = try store.loadKey()
        let record = try store.signIn(server: server, discovery: discovery, in: device.state)
        let tokens = try store.tokens(of: record)
        guard let jkt = tokens.dpopJkt else { throw DeviceError.notDPoPBound(server: record.server ?? record.discovery ?? "the server") }
        guard device.key.fingerprint == jkt else { throw DeviceError.dpopKeyChanged(boundTo: jkt, deviceKey: device.key.fingerprint) }
        let nonces = nonces()
        if let given { nonces.remember(given, for: url) }
        let nonce = given ?? nonces.nonce(for: url)
        let proof = try minter(key: device.key, server: url).proof(method: method, url: url, nonce: nonce, accessToken: tokens.accessToken)
        return (proof, jkt)
    }
}
