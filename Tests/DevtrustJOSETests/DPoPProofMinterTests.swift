import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustTestSupport
import Testing

@Suite struct DPoPProofMinterTests {
    @Test func aProofHasTheExactHeaderAndClaims() throws {
        let key = try SoftwareDeviceKey.generate()
        let minter = DPoPProofMinter(key: key, clock: FixedClock(seconds: 1_796_012_032), random: CountingRandom())
        let proof = try minter.proof(method: "POST", url: "https://idp.example/oauth2/token?x=1#y", nonce: "n-1")
        let parts = proof.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let jwk = JSONWriter.string(.object(key.publicKey.jwk))
        #expect(String(decoding: try Base64URL.decode(parts[0]), as: UTF8.self) == #"{"typ":"dpop+jwt","alg":"ES256","jwk":"# + jwk + "}")
        #expect(String(decoding: try Base64URL.decode(parts[1]), as: UTF8.self)
            == #"{"jti":"01020304-0506-4708-890a-0b0c0d0e0f10","htm":"POST","htu":"https://idp.example/oauth2/token","iat":1796012032,"nonce":"n-1"}"#)
        _ = try ES256Verifier(publicKey: key.publicKey).verify(compact: proof, freshness: (300, 1_796_012_032))
        #expect(minter.thumbprint == key.publicKey.thumbprint)
    }

    /// RFC 9449 section 7.1's example: the access token and its `ath`.
    @Test func athIsTheRFCsHashOfTheAccessToken() throws {
        #expect(DPoPProofMinter.accessTokenHash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU") == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
        let key = try SoftwareDeviceKey.generate()
        let proof = try DPoPProofMinter(key: key).proof(method: "GET", url: "https://resource.example.org/protectedresource",
                                                        accessToken: "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")
        let claims = try ParsedJWS(compact: proof).claims()
        #expect(claims["ath"] == .string("fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo") && claims["nonce"] == nil)
    }

    @Test func htuLosesOnlyTheQueryAndFragment() {
        #expect(DPoPProofMinter.targetURI("https://a.example/p/q?x=1") == "https://a.example/p/q")
        #expect(DPoPProofMinter.targetURI("https://a.example/p#f?x") == "https://a.example/p")
        #expect(DPoPProofMinter.targetURI("https://a.example:8443/P/") == "https://a.example:8443/P/")
    }
}
