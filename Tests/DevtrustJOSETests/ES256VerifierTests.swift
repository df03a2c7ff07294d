import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import Testing

@Suite struct ES256VerifierTests {
    /// RFC 7515 appendix A.3.
    static let rfc7515Key = try! P256PublicKey(
        x: Base64URL.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"),
        y: Base64URL.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"))
    static let rfc7515JWS = "eyJhbGciOiJFUzI1NiJ9"
        + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"

    @Test func rfc7515AppendixA3Verifies() throws {
        let verified = try ES256Verifier(publicKey: Self.rfc7515Key).verify(compact: Self.rfc7515JWS)
        #expect(verified.header["alg"] == .string("ES256"))
        #expect(verified.claims?["iss"] == .string("joe"))
    }

    @Test func rfc7515AlteredPartsFail() throws {
        let parts = Self.rfc7515JWS.split(separator: ".").map(String.init)
        let verifier = ES256Verifier(publicKey: Self.rfc7515Key)
        for index in 0..<3 {
            // Change one character in each part (keeping it valid base64url).
            let characters = Array(parts[index])
            for position in [0, characters.count / 2, characters.count - 2] {
                var altered = characters
                altered[position] = altered[position] == "A" ? "B" : "A"
                var newParts = parts
                newParts[index] = String(altered)
                #expect(throws: VerificationFailure.self, "part \(index) altered at \(position)") {
                    try verifier.verify(compact: newParts.joined(separator: "."))
                }
            }
        }
        // Another key does not verify it.
        #expect(throws: VerificationFailure.badSignature) {
            try ES256Verifier(publicKey: try SoftwareDeviceKey.generate().publicKey).verify(compact: Self.rfc7515JWS)
        }
    }

    @Test func refusesWhatTheServerRefuses() throws {
        let key = try SoftwareDeviceKey.generate()
        let verifier = ES256Verifier(publicKey: key.publicKey)
        func signed(_ header: String, _ payload: String, signature: [UInt8]? = nil) throws -> String {
            let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
            let raw = try signature ?? key.sign(message: Array(input.utf8)).raw
            return input + "." + Base64URL.encode(raw)
        }
        let claims = #"{"jti":"a","iat":1000}"#
        #expect(throws: VerificationFailure.algorithmNotES256("none")) { try verifier.verify(compact: try signed(#"{"alg":"none"}"#, claims)) }
        #expect(throws: VerificationFailure.algorithmNotES256("HS256")) { try verifier.verify(compact: try signed(#"{"alg":"HS256"}"#, claims)) }
        #expect(throws: VerificationFailure.algorithmNotES256(nil)) { try verifier.verify(compact: try signed(#"{"typ":"JWT"}"#, claims)) }
        #expect(throws: VerificationFailure.unsupportedCriticalHeader) {
            try verifier.verify(compact: try signed(#"{"alg":"ES256","crit":["exp"]}"#, claims))
        }
        // A DER signature inside a JWS: what a naive client sends.
        let input = Base64URL.encode(Array(#"{"alg":"ES256"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let der = try key.sign(message: Array(input.utf8)).der
        #expect(throws: VerificationFailure.signatureLength(der.count)) { try verifier.verify(compact: input + "." + Base64URL.encode(der)) }
        #expect(throws: VerificationFailure.self) { try verifier.verify(compact: input + "." + Base64URL.encode(der) + "==") }
        #expect(throws: VerificationFailure.self) { try verifier.verify(compact: input) }
        #expect(throws: VerificationFailure.self) { try verifier.verify(compact: "") }
        #expect(throws: VerificationFailure.self) { try verifier.verify(compact: "..") }
        #expect(throws: VerificationFailure.self) { try verifier.verify(compact: "a.b.c.d") }
        #expect(throws: VerificationFailure.signatureEncoding(SignatureEncodingError(reason: .outOfRange))) {
            try verifier.verify(compact: try signed(#"{"alg":"ES256"}"#, claims, signature: [UInt8](repeating: 0, count: 64)))
        }
        _ = try verifier.verify(compact: try signed(#"{"alg":"ES256"}"#, claims))
    }

    @Test func freshnessWindow() throws {
        let key = try SoftwareDeviceKey.generate()
        let verifier = ES256Verifier(publicKey: key.publicKey)
        func token(_ payload: String) throws -> String {
            try CompactJWS.sign(header: ["alg": .string("ES256")], payload: try JSONParser.parse(payload).objectValue!, with: key)
        }
        let now: Int64 = 1_800_000_000
        _ = try verifier.verify(compact: try token(#"{"jti":"x","iat":1800000000}"#), freshness: (300, now))
        _ = try verifier.verify(compact: try token(#"{"jti":"x","iat":1799999700}"#), freshness: (300, now))
        _ = try verifier.verify(compact: try token(#"{"jti":"x","iat":1800000030}"#), freshness: (300, now))
        #expect(throws: VerificationFailure.expired(ageSeconds: 301, maxAge: 300)) {
            try verifier.verify(compact: try token(#"{"jti":"x","iat":1799999699}"#), freshness: (300, now))
        }
        #expect(throws: VerificationFailure.issuedInFuture(seconds: 31)) {
            try verifier.verify(compact: try token(#"{"jti":"x","iat":1800000031}"#), freshness: (300, now))
        }
        #expect(throws: VerificationFailure.missingJTI) { try verifier.verify(compact: try token(#"{"iat":1800000000}"#), freshness: (300, now)) }
        #expect(throws: VerificationFailure.missingJTI) { try verifier.verify(compact: try token(#"{"jti":"","iat":1800000000}"#), freshness: (300, now)) }
        #expect(throws: VerificationFailure.missingIAT) { try verifier.verify(compact: try token(#"{"jti":"x","iat":"1800000000"}"#), freshness: (300, now)) }
        #expect(throws: VerificationFailure.missingIAT) { try verifier.verify(compact: try token(#"{"jti":"x","iat":1.8e9}"#), freshness: (300, now)) }
        // Without a freshness check, an old token with a good signature is valid.
        _ = try verifier.verify(compact: try token(#"{"jti":"x","iat":1}"#))
    }
}
