import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustTestSupport
import Testing

@Suite struct DeviceTokenMinterTests {
    /// The minting says the jti it put in (the system agent's audit names it): the token's, byte for byte.
    @Test func theMintingSaysTheJTIItPutIn() throws {
        let key = try SoftwareDeviceKey.generate()
        let minter = DeviceTokenMinter(key: key, clock: FixedClock(seconds: 1_796_012_032), random: CountingRandom())
        let proofs = DPoPProofMinter(key: key, clock: FixedClock(seconds: 1_796_012_032))
        for minted in [try minter.mintedDeviceToken(deviceId: "d", attributes: DeviceAttributes()), try minter.mintedDeviceData(attributes: DeviceAttributes()),
                       try proofs.mintedProof(method: "POST", url: "https://idp.example/token", nonce: nil, accessTokenHash: nil)] {
            let payload = try JSONParser.parse(Base64URL.decode(String(minted.token.split(separator: ".")[1]))).objectValue
            #expect(payload?["jti"] == .string(minted.jti) && minted.jti.count == 36, "\(minted)")
        }
    }

    @Test func tokenHasTheExactHeaderAndFlatClaims() throws {
        let key = try SoftwareDeviceKey.generate()
        let minter = DeviceTokenMinter(key: key, clock: FixedClock(seconds: 1_796_012_032), random: CountingRandom())
        var attributes = DeviceAttributes()
        attributes.set("lockScreen", "true")
        attributes.set("url", "https://example.com/a")
        let token = try minter.deviceToken(deviceId: "74070bae-df8c-42bf-8754-5173c237c936", attributes: attributes)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        #expect(String(decoding: try Base64URL.decode(parts[0]), as: UTF8.self)
            == #"{"alg":"ES256","typ":"JWT","deviceId":"74070bae-df8c-42bf-8754-5173c237c936"}"#)
        // Bytes 1...16 from CountingRandom with the version and variant bits set.
        #expect(String(decoding: try Base64URL.decode(parts[1]), as: UTF8.self)
            == #"{"jti":"01020304-0506-4708-890a-0b0c0d0e0f10","iat":1796012032,"platform":"linux","lockScreen":"true","url":"https://example.com/a"}"#)
        #expect(try Base64URL.decode(parts[2]).count == 64)
        let verified = try ES256Verifier(publicKey: key.publicKey).verify(compact: token, freshness: (300, 1_796_012_032))
        #expect(verified.header["deviceId"] == .string("74070bae-df8c-42bf-8754-5173c237c936"))
    }

    @Test func deviceDataHasNoDeviceId() throws {
        let key = try SoftwareDeviceKey.generate()
        let token = try DeviceTokenMinter(key: key).deviceData(attributes: DeviceAttributes())
        let header = try Base64URL.decode(String(token.split(separator: ".")[0]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","typ":"JWT"}"#)
    }

    @Test func everyTokenHasAFreshUUIDv4JTI() throws {
        let key = try SoftwareDeviceKey.generate()
        let minter = DeviceTokenMinter(key: key)
        var seen = Set<String>()
        for _ in 0..<500 {
            let token = try minter.deviceToken(deviceId: "d", attributes: DeviceAttributes())
            let claims = try ParsedJWS(compact: token).claims()
            let jti = try #require(claims["jti"]?.stringValue)
            let characters = Array(jti)
            #expect(characters.count == 36 && characters[14] == "4" && "89ab".contains(characters[19]), "\(jti) is not a UUID v4")
            #expect(jti == jti.lowercased())
            seen.insert(jti)
        }
        #expect(seen.count == 500)
    }

    @Test func reservedClaimsCannotBeOverridden() throws {
        var attributes = DeviceAttributes()
        attributes.set("jti", "fixed")
        attributes.set("iat", "0")
        attributes.set("platform", "kiosk-linux")
        let token = try DeviceTokenMinter(key: try SoftwareDeviceKey.generate(), clock: FixedClock(seconds: 42)).deviceData(attributes: attributes)
        let claims = try ParsedJWS(compact: token).claims()
        #expect(claims["jti"] != .string("fixed"))
        #expect(claims["iat"] == .integer(42))
        #expect(claims["platform"] == .string("kiosk-linux"))
        #expect(claims.keys == ["jti", "iat", "platform"])
    }

    /// The minter itself never sends attestationToken, whatever path set it in the attributes
    /// (the configuration, --claim and collectors refuse it too, but the token path must hold alone).
    @Test func theMinterNeverSendsAnAttestationToken() throws {
        var attributes = DeviceAttributes()
        attributes.set("attestationToken", "forged")
        let minter = DeviceTokenMinter(key: try SoftwareDeviceKey.generate(), clock: FixedClock(seconds: 42))
        for token in [try minter.deviceData(attributes: attributes), try minter.deviceToken(deviceId: "d", attributes: attributes)] {
            let claims = try ParsedJWS(compact: token).claims()
            #expect(claims["attestationToken"] == nil && claims.keys == ["jti", "iat", "platform"], "\(claims)")
        }
    }
}
