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

    /// A binding of another key's proofs (the system agent's), with the nonces of the cache directory.
    package func binding(_ proofs: any DPoPProofSigning) -> DPoPBinding {
        DPoPBinding(minter: proofs, nonces: nonces())
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
        return try proof(signIns: store, state: device.state, method: method, url: url, nonce: given, server: server, discovery: discovery) { jkt in
            guard device.key.fingerprint == jkt else { throw DeviceError.dpopKeyChanged(boundTo: jkt, deviceKey: device.key.fingerprint) }
            return minter(key: device.key, server: url)
        }
    }

    /// The same with the proofs of a key that is not in `signIns`, the keystore of the sign-ins
    /// (`proofs`: for the thumbprint the sign-in's tokens are bound to; the system agent's proofs,
    /// which it checks against its key). `state`: `signIns`' state, when read already.
    package func proof(signIns store: DeviceStore, state: KeystoreState? = nil, method: String, url: String, nonce given: String?, server: String?,
                       discovery: String?, proofs: (_ boundTo: String) throws -> any DPoPProofSigning) throws -> (proof: String, jkt: String) {
        let record = try store.signIn(server: server, discovery: discovery, in: state)
        let tokens = try store.tokens(of: record)
        guard let jkt = tokens.dpopJkt else { throw DeviceError.notDPoPBound(server: record.server ?? record.discovery ?? "the server") }
        let signer = try proofs(jkt)
        let nonces = nonces()
        if let given { nonces.remember(given, for: url) }
        let nonce = given ?? nonces.nonce(for: url)
        let proof = try signer.proof(method: method, url: url, nonce: nonce, accessToken: tokens.accessToken)
        return (proof, jkt)
    }
}
