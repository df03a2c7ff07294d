import DevtrustEncoding
import DevtrustErrors
import DevtrustKeys

/// Why a JWS is not a valid ES256 token for a key.
public enum VerificationFailure: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(String)
    case algorithmNotES256(String?)
    case unsupportedCriticalHeader
    case signatureLength(Int)
    case signatureEncoding(SignatureEncodingError)
    case badSignature
    case claimsNotJSONObject
    case missingJTI
    case missingIAT
    case issuedInFuture(seconds: Int64)
    case expired(ageSeconds: Int64, maxAge: Int64)

    public var description: String {
        switch self {
        case let .malformed(message): return "malformed JWS: \(message)"
        case let .algorithmNotES256(alg?): return "header alg is \"\(alg)\", not \"ES256\""
        case .algorithmNotES256(nil): return "header alg is missing or not a string (must be \"ES256\")"
        case .unsupportedCriticalHeader: return "header has \"crit\" extensions, which this verifier does not understand"
        case let .signatureLength(count): return "an ES256 signature is 64 bytes (raw r||s), this one is \(count) (a DER signature inside a JWS is wrong)"
        case let .signatureEncoding(error): return "bad signature value: \(error)"
        case .badSignature: return "the signature does not verify with this public key"
        case .claimsNotJSONObject: return "the payload is not a JSON object"
        case .missingJTI: return "claim jti is missing or not a non-empty string"
        case .missingIAT: return "claim iat is missing or not an integer"
        case let .issuedInFuture(seconds): return "iat is \(seconds) s in the future (more than the allowed \(ES256Verifier.allowedFutureSkew) s): check the clocks"
        case let .expired(age, maxAge): return "iat is \(age) s old, older than --max-age \(maxAge) s"
        }
    }
}

extension VerificationFailure: ClassifiedError {
    /// `verify`'s answer for a token or signature that is not valid: a failure (exit 1 is "invalid").
    public var classification: ErrorClassification { ErrorClassification(.failure, summary: "invalid: \(description)") }
}

public struct VerifiedJWS: Sendable {
    public let header: JSONObject
    /// The payload parsed as JSON when it is a JSON object.
    public let claims: JSONObject?
}

/// Verifies ES256 compact JWS the way the identity server does: alg ES256,
/// 64-byte raw signature, and, for a freshness check, jti and the iat window.
public struct ES256Verifier: Sendable {
    /// The server refuses tokens more than 30 s in the future.
    public static let allowedFutureSkew: Int64 = 30

    public let publicKey: P256PublicKey

    public init(publicKey: P256PublicKey) {
        self.publicKey = publicKey
    }

    /// - Parameter freshness: when set, also require `jti` and an `iat` no
    ///   older than `maxAge` seconds and at most 30 s ahead of `now`.
    public func verify(compact: String, freshness: (maxAge: Int64, now: Int64)? = nil) throws(VerificationFailure) -> VerifiedJWS {
        let jws: ParsedJWS
        do {
            jws = try ParsedJWS(compact: compact)
        } catch {
            throw .malformed(error.message)
        }
        guard case let .string(alg)? = jws.header["alg"] else { throw .algorithmNotES256(nil) }
        guard alg == "ES256" else { throw .algorithmNotES256(alg) }
        guard jws.header["crit"] == nil else { throw .unsupportedCriticalHeader }
        guard jws.signature.count == 64 else { throw .signatureLength(jws.signature.count) }
        let signature: ECDSASignature
        do {
            signature = try ECDSASignature(raw: jws.signature)
        } catch {
            throw .signatureEncoding(error)
        }
        guard publicKey.isValidSignature(signature, for: SHA256.hash(jws.signingInput)) else { throw .badSignature }

        let claims = try? jws.claims()
        if let freshness {
            guard let claims else { throw .claimsNotJSONObject }
            guard let jti = claims["jti"]?.stringValue, !jti.isEmpty else { throw .missingJTI }
            guard let iat = claims["iat"]?.int64Value else { throw .missingIAT }
            let age = freshness.now &- iat
            if age < -Self.allowedFutureSkew { throw .issuedInFuture(seconds: -age) }
            if age > freshness.maxAge { throw .expired(ageSeconds: age, maxAge: freshness.maxAge) }
        }
        return VerifiedJWS(header: jws.header, claims: claims)
    }
}
