import DevtrustEncoding
import DevtrustKeys

/// RFC 7636 PKCE with S256, and the random `state` of a request.
public struct PKCE: Sendable {
    /// Secret until the code exchange: never printed.
    public let verifier: String
    public var challenge: String { Base64URL.encode(SHA256.hash(Array(verifier.utf8)).bytes) }
    public let method = "S256"

    public init(verifier: String) {
        self.verifier = verifier
    }

    /// 32 random bytes: a 43-character verifier.
    public static func make(using random: some RandomSource) throws -> PKCE {
        PKCE(verifier: Base64URL.encode(try random.bytes(count: 32)))
    }

    public static func state(using random: some RandomSource) throws -> String {
        Base64URL.encode(try random.bytes(count: 16))
    }
}
