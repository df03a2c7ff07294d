import DevtrustEncoding
import DevtrustErrors
import DevtrustHTTP
import DevtrustJOSE
import DevtrustKeys
import DevtrustKeystore

/// A key of the provider's JWK set (`jwks_uri`) that can check ID tokens.
public enum JSONWebKey: Sendable, Equatable {
    case ec(P256PublicKey, kid: String?)
    case rsa(RSAPublicKey, kid: String?)

    var kid: String? {
        switch self {
        case let .ec(_, kid), let .rsa(_, kid): return kid
        }
    }

    /// The keys of a JWK set document that are for signatures and of a kind devtrust checks
    /// (EC P-256, RSA of 2048 bits or more); the others are left out.
    public static func set(_ bytes: [UInt8]) throws -> [JSONWebKey] {
        guard case let .object(document)? = try? JSONParser.parse(bytes), let keys = document["keys"]?.arrayValue else {
            throw OAuthProtocolError("the JWK set is not a JSON object with a keys array")
        }
        return keys.compactMap { element -> JSONWebKey? in
            guard let key = element.objectValue else { return nil }
            if let use = key["use"]?.stringValue, use != "sig" { return nil }
            let kid = key["kid"]?.stringValue
            func bytes(_ name: String) -> [UInt8]? { key[name]?.stringValue.flatMap { try? Base64URL.decode($0) } }
            switch key["kty"]?.stringValue {
            case "EC":
                guard key["crv"]?.stringValue == "P-256", let x = bytes("x"), let y = bytes("y"), x.count == 32, y.count == 32,
                      let point = try? P256PublicKey(x: x, y: y) else { return nil }
                return .ec(point, kid: kid)
            case "RSA":
                guard let n = bytes("n"), let e = bytes("e"), let rsa = try? RSAPublicKey(modulus: n, exponent: e) else { return nil }
                return .rsa(rsa, kid: kid)
            default:
                return nil
            }
        }
    }
}

/// Who an ID token says signed in.
public struct IDTokenIdentity: Sendable, Equatable {
    public let subject: String
    /// `name`, else `preferred_username`, else `email`.
    public let displayName: String?
}

/// Why an ID token was not kept.
public struct IDTokenRejection: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// OpenID Connect Core 3.1.3.7: an ID token is kept only when it is signed
/// (ES256 or RS256) by a key of the provider's JWK set, `iss` is the issuer of
/// the discovery document, `aud` holds the client (and `azp`, when present, is
/// it), `exp` is ahead and `iat` not ahead (60 s leeway), and the `nonce` sent
/// comes back.
public struct IDTokenValidator: Sendable {
    public static let leeway: Int64 = 60

    public let issuer: String
    public let clientID: String
    /// The nonce of the authorization request; nil when none was sent (device code, refresh).
    public let nonce: String?
    public let now: Int64
    public let keys: [JSONWebKey]

    public init(issuer: String, clientID: String, nonce: String?, now: Int64, keys: [JSONWebKey]) {
        self.issuer = issuer
        self.clientID = clientID
        self.nonce = nonce
        self.now = now
        self.keys = keys
    }

    public func validate(_ token: String) throws(IDTokenRejection) -> IDTokenIdentity {
        let jws: ParsedJWS
        do {
            jws = try ParsedJWS(compact: token)
        } catch {
            throw IDTokenRejection("it is not a compact JWS (\(error.message))")
        }
        guard jws.header["crit"] == nil else { throw IDTokenRejection("its header has crit extensions") }
        let alg = jws.header["alg"]?.stringValue
        let kid = jws.header["kid"]?.stringValue
        let candidates = keys.filter { key in
            guard kid == nil || key.kid == nil || key.kid == kid else { return false }
            switch (key, alg) {
            case (.ec, "ES256"), (.rsa, "RS256"): return true
            default: return false
            }
        }
        guard alg == "ES256" || alg == "RS256" else { throw IDTokenRejection("it is signed with \(alg ?? "no alg"), not ES256 or RS256") }
        guard !candidates.isEmpty else { throw IDTokenRejection("the provider's JWK set has no \(alg!) key" + (kid.map { " with kid \($0)" } ?? "")) }
        let verified = candidates.contains { key in
            switch key {
            case let .ec(point, _):
                guard jws.signature.count == 64, let signature = try? ECDSASignature(raw: jws.signature) else { return false }
                return point.isValidSignature(signature, for: SHA256.hash(jws.signingInput))
            case let .rsa(rsa, _):
                return rsa.isValidRS256Signature(jws.signature, for: jws.signingInput)
            }
        }
        guard verified else { throw IDTokenRejection("its signature does not verify with the provider's keys") }
        guard case let .object(claims)? = try? JSONParser.parse(jws.payload) else { throw IDTokenRejection("its claims are not a JSON object") }
        guard claims["iss"]?.stringValue == issuer else {
            throw IDTokenRejection("its issuer is \(claims["iss"]?.stringValue ?? "missing"), not \(issuer)")
        }
        let audiences: [String]
        switch claims["aud"] {
        case let .string(single)?: audiences = [single]
        case let .array(list)?: audiences = list.compactMap(\.stringValue)
        default: audiences = []
        }
        guard audiences.contains(clientID) else { throw IDTokenRejection("its audience does not include the client \(clientID)") }
        if let azp = claims["azp"] {
            guard azp.stringValue == clientID else { throw IDTokenRejection("its azp is not the client \(clientID)") }
        } else if audiences.count > 1 {
            throw IDTokenRejection("it has several audiences and no azp")
        }
        guard let exp = claims["exp"]?.int64Value else { throw IDTokenRejection("it has no exp") }
        guard now < exp + Self.leeway else { throw IDTokenRejection("it expired \(now - exp) s ago") }
        guard let iat = claims["iat"]?.int64Value else { throw IDTokenRejection("it has no iat") }
        guard iat <= now + Self.leeway else { throw IDTokenRejection("it was issued \(iat - now) s in the future") }
        if let nonce {
            guard claims["nonce"]?.stringValue == nonce else { throw IDTokenRejection("its nonce is not the one sent") }
        }
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty else { throw IDTokenRejection("it has no sub") }
        let name = claims["name"]?.stringValue ?? claims["preferred_username"]?.stringValue ?? claims["email"]?.stringValue
        return IDTokenIdentity(subject: subject, displayName: name)
    }

    /// The identity an ID token kept by devtrust names (it was checked when it was kept).
    public static func identity(ofKept token: String) -> IDTokenIdentity? {
        guard let jws = try? ParsedJWS(compact: token), case let .object(claims)? = try? JSONParser.parse(jws.payload),
              let subject = claims["sub"]?.stringValue else { return nil }
        return IDTokenIdentity(subject: subject, displayName: claims["name"]?.stringValue ?? claims["preferred_username"]?.stringValue ?? claims["email"]?.stringValue)
    }
}

extension TokenSet {
    /// Who signed in, from the ID token: only one devtrust checked before it kept it (a file
    /// written by an earlier devtrust, which kept ID tokens unchecked, records no issuer).
    public var keptIdentity: IDTokenIdentity? {
        guard issuer != nil, let idToken else { return nil }
        return IDTokenValidator.identity(ofKept: idToken)
    }
}

extension IDTokenRejection: ClassifiedError {
    /// An ID token that fails its checks: an invalid token, the contract's failure. A failure (exit 1), in its own words.
    public var classification: ErrorClassification { ErrorClassification(.failure, summary: description) }
}
