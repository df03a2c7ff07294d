import DevtrustEncoding
import DevtrustKeys
import DevtrustURL

/// What makes the DPoP proofs of one key: the key in hand (`DPoPProofMinter`), or the system agent,
/// which writes every proof of the machine key itself from the request's method and URL, the
/// server's nonce and the access token's hash (DevtrustAgent's `AgentDPoPProofs`).
public protocol DPoPProofSigning: Sendable {
    /// The RFC 7638 thumbprint of the proof key: what a bound token's `cnf.jkt` holds.
    var thumbprint: String { get }
    /// A proof for one request; `accessToken`: the token a resource request carries (`ath` is its hash).
    func proof(method: String, url: String, nonce: String?, accessToken: String?) throws -> String
}

/// RFC 9449 DPoP proofs: ES256 JWTs with header `typ` `dpop+jwt` and the key's public `jwk`,
/// and claims `jti`, `htm`, `htu`, `iat` (plus `nonce` when the server gave one, and `ath`
/// when the proof goes with an access token to a resource).
public struct DPoPProofMinter: DPoPProofSigning {
    public let key: any DeviceKey
    public let clock: any Clock
    public let random: any RandomSource

    public init(key: any DeviceKey, clock: any Clock = SystemClock(), random: any RandomSource = SystemRandom()) {
        self.key = key
        self.clock = clock
        self.random = random
    }

    /// The RFC 7638 thumbprint of the proof key: what a bound token's `cnf.jkt` holds.
    public var thumbprint: String { key.publicKey.thumbprint }

    /// A proof for one request.
    /// - Parameter accessToken: the token the request carries (a resource request): its hash goes in `ath`.
    public func proof(method: String, url: String, nonce: String? = nil, accessToken: String? = nil) throws -> String {
        try proof(method: method, url: url, nonce: nonce, accessTokenHash: accessToken.map(Self.accessTokenHash))
    }

    /// The same with the access token's hash (`ath`) as given: what the system agent is sent, never the token.
    public func proof(method: String, url: String, nonce: String?, accessTokenHash: String?) throws -> String {
        try mintedProof(method: method, url: url, nonce: nonce, accessTokenHash: accessTokenHash).token
    }

    /// The same, with its `jti` (the system agent's audit names it).
    public func mintedProof(method: String, url: String, nonce: String?, accessTokenHash: String?) throws -> MintedJWT {
        let header: JSONObject = ["typ": .string("dpop+jwt"), "alg": .string("ES256"), "jwk": .object(key.publicKey.jwk)]
        let jti = try UUIDv4.make(using: random)
        var claims: JSONObject = [
            "jti": .string(jti),
            "htm": .string(method),
            "htu": .string(Self.targetURI(url)),
            "iat": .integer(clock.secondsSinceEpoch()),
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if let accessTokenHash { claims["ath"] = .string(accessTokenHash) }
        return MintedJWT(token: try CompactJWS.sign(header: header, payload: claims, with: key), jti: jti)
    }

    /// `htu`: the URL without its query and fragment (RFC 9449 section 4.2), its scheme, host and port
    /// written as `Origin` writes them (RFC 3986 sections 6.2.2 and 6.2.3: lower case, no default port),
    /// and "/" for an empty path: servers compare it with their own URL, which is in that form, byte for
    /// byte. The path and its percent-encoding stay as given: a server may tell `/a%2Fb` from `/a/b`.
    /// A user name (devtrust refuses such URLs anyway) is kept as written; a URL with no origin is
    /// only cut at its query.
    public static func targetURI(_ url: String) -> String {
        var reference = URLReference(url)
        reference.query = nil
        reference.fragment = nil
        guard let scheme = reference.scheme, let authority = reference.authority, let origin = Origin(scheme: scheme, authority: authority) else {
            return reference.text
        }
        let userInfo = URLAuthority(authority).userInfo.map { $0 + "@" } ?? ""
        return origin.scheme + "://" + userInfo + origin.authority + (reference.path.isEmpty ? "/" : reference.path)
    }

    /// The longest nonce devtrust sends or keeps: far more than a server's nonce needs, short of a header line's limit.
    public static let maximumNonceLength = 4096

    /// RFC 9449 section 8's rule for a nonce, applied to a server's `DPoP-Nonce` as to `--nonce`:
    /// `1*NQCHAR` (`%x21 / %x23-5B / %x5D-7E`: printable ASCII without space, `"` and `\`), at most
    /// `maximumNonceLength` bytes. Anything else is neither kept nor put in a proof.
    public static func isValidNonce(_ nonce: String) -> Bool {
        let bytes = nonce.utf8
        return (1...maximumNonceLength).contains(bytes.count)
            && bytes.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// `ath`: base64url(SHA-256(ASCII of the access token)).
    public static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(SHA256.hash(accessToken.utf8).bytes)
    }
}
