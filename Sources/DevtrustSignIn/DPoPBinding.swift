import DevtrustEncoding
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeystore
import DevtrustURL
import Synchronization

/// Where the latest DPoP nonce of each server is kept (RFC 9449 section 8), keyed by the
/// token endpoint's origin: a nonce learnt in one command is sent by the next.
public protocol DPoPNonceStore: Sendable {
    func nonce(for url: String) -> String?
    func remember(_ nonce: String, for url: String)
}

extension DPoPNonceStore {
    /// The key of a URL's nonce: the origin (`scheme://host[:port]`) of its `htu`, by the one
    /// origin rule (`Origin`); text that has none is its own key.
    public static func origin(of url: String) -> String {
        Origin.text(of: DPoPProofMinter.targetURI(url))
    }
}

/// Nonces in the cache directory (`dpop-nonces.json`, replaced atomically). A nonce is no
/// secret, and a file that cannot be read is no nonce: the server asks for one again.
public struct DPoPNonceFile: DPoPNonceStore {
    public static let fileName = "dpop-nonces.json"
    static let maximumServers = 64
    public let cache: CacheDirectory

    public init(cache: CacheDirectory) {
        self.cache = cache
    }

    func nonces() -> JSONObject {
        guard let bytes = cache.read(Self.fileName), case let .object(document)? = try? JSONParser.parse(bytes) else { return JSONObject() }
        return document
    }

    /// A nonce in the file that is not a valid one (a file written by hand, say) is none.
    public func nonce(for url: String) -> String? {
        nonces()[Self.origin(of: url)]?.stringValue.flatMap { DPoPProofMinter.isValidNonce($0) ? $0 : nil }
    }

    /// Best effort: a cache directory that cannot be written keeps nothing, and the server asks again.
    public func remember(_ nonce: String, for url: String) {
        guard DPoPProofMinter.isValidNonce(nonce) else { return }
        let origin = Self.origin(of: url)
        let kept = nonces()
        if kept[origin]?.stringValue == nonce { return }
        var document = JSONObject()
        for member in kept.members where member.key != origin && member.value.stringValue != nil && document.members.count < Self.maximumServers - 1 {
            document[member.key] = member.value
        }
        document[origin] = .string(nonce)
        cache.write(Self.fileName, JSONWriter.bytes(.object(document)))
    }
}

/// Nonces for one run only: where there is no cache directory.
public final class DPoPNonceMemory: DPoPNonceStore {
    private let nonces = Mutex<[String: String]>([:])

    public init() {}

    public func nonce(for url: String) -> String? {
        let origin = Self.origin(of: url)
        return nonces.withLock { $0[origin] }
    }

    public func remember(_ nonce: String, for url: String) {
        guard DPoPProofMinter.isValidNonce(nonce) else { return }
        let origin = Self.origin(of: url)
        nonces.withLock { $0[origin] = nonce }
    }
}

/// What makes an OAuthClient's token requests DPoP requests: the proof key (the key in hand, or
/// the system agent's) and the nonces.
public struct DPoPBinding: Sendable {
    public let minter: any DPoPProofSigning
    public let nonces: any DPoPNonceStore

    public init(minter: any DPoPProofSigning, nonces: any DPoPNonceStore) {
        self.minter = minter
        self.nonces = nonces
    }

    /// The key's RFC 7638 thumbprint: what the server puts in a bound token's `cnf.jkt`.
    public var thumbprint: String { minter.thumbprint }

    /// The `DPoP` header's value for a request: with `nonce` when given (the one the server's answer just
    /// asked for), else with the server's latest nonce when one is known.
    func proof(method: String, url: String, nonce: String? = nil) throws -> String {
        try minter.proof(method: method, url: url, nonce: nonce ?? nonces.nonce(for: url), accessToken: nil)
    }
}
