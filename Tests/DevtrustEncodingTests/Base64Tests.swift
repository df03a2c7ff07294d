import DevtrustEncoding
import Testing

@Suite struct Base64Tests {
    // RFC 4648 section 10.
    static let vectors: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test(arguments: vectors)
    func rfc4648Vectors(plain: String, encoded: String) throws {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(try Base64.decode(encoded, padding: .required) == Array(plain.utf8))
        let unpadded = String(encoded.prefix(while: { $0 != "=" }))
        #expect(Base64URL.encode(Array(plain.utf8)) == unpadded)
        #expect(try Base64URL.decode(unpadded) == Array(plain.utf8))
    }

    @Test func alphabetsDiffer() throws {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64.encode(bytes) == "+/+/")
        #expect(Base64URL.encode(bytes) == "-_-_")
        #expect(throws: Base64DecodingError.self) { try Base64.decode("-_-_") }
        #expect(throws: Base64DecodingError.self) { try Base64URL.decode("+/+/") }
    }

    @Test func challengeFromTheContractDecodesPaddedAndUnpadded() throws {
        let challenge = "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y"
        let unpadded = try Base64URL.decode(challenge, padding: .optional)
        let padded = try Base64URL.decode(challenge + "=", padding: .optional)
        #expect(unpadded.count == 32)
        #expect(unpadded == padded)
        #expect(Base64URL.encode(unpadded) == challenge)
    }

    @Test(arguments: [
        ("Zm9v YmFy", "invalid character"), ("Zm9v\nYmFy", "invalid character"), ("Zg=", "padding"),
        ("Zg===", "padding"), ("Z", "length"), ("Zh==", "trailing bits"), ("Zm9=", "trailing bits"),
        ("Zg==Zg==", "invalid character"), ("=Zg=", "padding"), ("Zé==", "invalid character"),
    ])
    func rejectsNonCanonicalInput(text: String, what: String) {
        #expect(throws: Base64DecodingError.self, "\(text) should fail: \(what)") {
            try Base64.decode(text, padding: .optional)
        }
    }

    @Test func paddingRules() throws {
        #expect(throws: Base64DecodingError(reason: .invalidPadding)) { try Base64.decode("Zg", padding: .required) }
        #expect(throws: Base64DecodingError(reason: .invalidPadding)) { try Base64URL.decode("Zg==", padding: .forbidden) }
        #expect(try Base64.decode("Zg", padding: .optional) == [0x66])
    }

    @Test func errorNamesTheCharacterAndOffset() {
        do {
            _ = try Base64URL.decode("abc+def", padding: .optional)
            Issue.record("accepted a '+' in base64url")
        } catch {
            #expect(error.description == "character '+' at offset 3 is not in the alphabet")
        }
    }

    @Test func roundTripsEveryLengthAndByte() throws {
        var bytes = [UInt8]()
        for length in 0..<300 {
            #expect(try Base64.decode(Base64.encode(bytes), padding: .required) == bytes)
            #expect(try Base64URL.decode(Base64URL.encode(bytes)) == bytes)
            bytes.append(UInt8(truncatingIfNeeded: length &* 37 &+ 11))
        }
    }

    @Test func hexRoundTrip() {
        #expect(Hex.encode([0x00, 0xAB, 0xFF]) == "00abff")
        #expect(Hex.decode("00ABff") == [0x00, 0xAB, 0xFF])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
    }
}
