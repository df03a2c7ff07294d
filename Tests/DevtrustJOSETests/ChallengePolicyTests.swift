import DevtrustEncoding
@testable import DevtrustJOSE
import DevtrustKeys
import Testing

/// The challenge a device signs can never double as a token, however leniently
/// a verifier reads it. Each case below is a way in that lenient verifiers
/// (PyJWT, jwcrypto, José, Nimbus through Gson) accept and devtrust's own
/// strict decoders do not: the old policy signed them. The differential test
/// against those verifiers themselves is CLIInteropTests.noLenientVerifierAcceptsASignedChallenge.
@Suite struct ChallengePolicyTests {
    static let claims = Base64URL.encode(Array(#"{"jti":"j","iat":1}"#.utf8))

    static func signingInput(headerBytes: [UInt8]) -> [UInt8] {
        Array((Base64URL.encode(headerBytes) + "." + claims).utf8)
    }

    static func signingInput(_ header: String) -> [UInt8] { signingInput(headerBytes: Array(header.utf8)) }

    static func utf16LE(_ text: String) -> [UInt8] { text.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } }

    /// A header whose base64url form has a `-` or `_`, so that its standard form differs.
    static var headerWithURLSafeCharacters: String {
        (0...).lazy.map { #"{"alg":"ES256","kid":"\#(String(repeating: "?", count: $0))~"}"# }
            .first { Base64URL.encode(Array($0.utf8)).contains { $0 == "-" || $0 == "_" } }!
    }

    @Test(arguments: [
        ("canonical", signingInput(#"{"alg":"ES256","typ":"JWT","deviceId":"d"}"#)),
        ("a whole token", signingInput(#"{"alg":"ES256"}"#) + Array(".c2ln".utf8)),
        ("an empty payload", Array((Base64URL.encode(Array(#"{"alg":"ES256"}"#.utf8)) + ".").utf8)),
        ("duplicate member names", signingInput(#"{"alg":"none","alg":"ES256"}"#)),
        ("a UTF-8 BOM", signingInput(headerBytes: [0xEF, 0xBB, 0xBF] + Array(#"{"alg":"ES256"}"#.utf8))),
        ("UTF-16 JSON", signingInput(headerBytes: [0xFF, 0xFE] + utf16LE(#"{"alg":"ES256"}"#))),
        ("UTF-16 JSON without a BOM", signingInput(headerBytes: utf16LE(#"{"alg":"ES256"}"#))),
        ("a lone surrogate", signingInput(#"{"alg":"ES256","kid":"\ud800"}"#)),
        ("NaN", signingInput(#"{"alg":"ES256","x":NaN}"#)),
        ("unquoted names", signingInput(#"{alg:"ES256"}"#)),
        ("single quotes", signingInput(#"{'alg':'ES256'}"#)),
        ("a comment", signingInput(#"{/* c */"alg":"ES256"}"#)),
        ("a trailing comma", signingInput(#"{"alg":"ES256",}"#)),
        ("Gson's non-execute prefix", signingInput(")]}'\n" + #"{"alg":"ES256"}"#)),
        ("an empty protected header (JSON serialization, alg unprotected)", Array(("." + claims).utf8)),
        ("an array of pairs (Gson reads it as a map)", signingInput(#"[["alg","ES256"],["deviceId","d"]]"#)),
        ("an array of pairs, lenient", signingInput("[[alg,ES256]]")),
    ] as [(String, [UInt8])])
    func aLenientlyReadableSigningInputIsRefused(_ name: String, _ challenge: [UInt8]) {
        #expect(ChallengePolicy.refusal(challenge) != nil, "\(name): \(Base64URL.encode(challenge))")
    }

    @Test func base64ThatOnlyALenientDecoderReadsIsRefused() {
        let header = Self.headerWithURLSafeCharacters
        let urlSafe = Base64URL.encode(Array(header.utf8))
        let standard = Base64.encode(Array(header.utf8))
        #expect(urlSafe.contains { $0 == "-" || $0 == "_" })
        var variants: [(String, String)] = [
            ("standard alphabet, padded", standard),
            ("standard alphabet", String(standard.prefix { $0 != "=" })),
            ("whitespace inside", String(urlSafe.prefix(6)) + " \n\t" + String(urlSafe.dropFirst(6))),
            ("junk inside", String(urlSafe.prefix(6)) + "*!\u{7F}" + String(urlSafe.dropFirst(6))),
            ("padding inside", String(urlSafe.prefix(4)) + "==" + String(urlSafe.dropFirst(4))),
            ("concatenated padded blocks", Base64.encode(Array("{".utf8)) + Base64.encode(Array(#""alg":"ES256"}"#.utf8))),
        ]
        // Non-canonical trailing bits: a header of 3k+1 bytes ends in a character with 4 spare bits.
        let odd = Base64URL.encode(Array(#"{"alg":"ES256"} "#.utf8))
        let last = odd.last!, bumped: Character = last == "A" ? "B" : "A"
        variants.append(("non-canonical trailing bits", String(odd.dropLast()) + String(bumped)))
        for (name, text) in variants {
            #expect((try? Base64URL.decode(text, padding: .optional)).flatMap { try? JSONParser.parse($0) } == nil,
                    "\(name): devtrust's own decoders read it, so it does not test leniency")
            #expect(ChallengePolicy.refusal(Array((text + "." + Self.claims).utf8)) != nil, "\(name): \(text)")
        }
    }

    @Test func whatNoReadingTakesForAHeaderIsSigned() {
        #expect(ChallengePolicy.refusal(Array("abc.def".utf8)) == nil)          // no JSON object
        #expect(ChallengePolicy.refusal(Array("bm90IGpzb24.e30".utf8)) == nil)  // "not json".{}
        #expect(ChallengePolicy.refusal(Array("no dot at all {}".utf8)) == nil)
        #expect(ChallengePolicy.refusal([0x2E, 0xFF, 0xFE]) == nil)              // after the dot: not UTF-8
        #expect(ChallengePolicy.registrationRefusal([UInt8](repeating: 1, count: 8)) != nil)
        #expect(ChallengePolicy.registrationRefusal([UInt8](repeating: 1, count: 65)) != nil)
    }

    /// The issue's bound: at most 0.1 % of random 32-byte challenges refused,
    /// over at least 10,000. Measured over 200,000 from the kernel's CSPRNG.
    @Test func randomChallengesAreAlmostNeverRefused() throws {
        let samples = 200_000
        let random = SystemRandom()
        let pool = try random.bytes(count: samples * 32)
        var refused = 0
        for start in stride(from: 0, to: pool.count, by: 32) where ChallengePolicy.registrationRefusal(Array(pool[start..<start + 32])) != nil {
            refused += 1
        }
        print("ChallengePolicy: \(refused) of \(samples) random 32-byte challenges refused")
        #expect(refused * 1000 <= samples, "\(refused) of \(samples) refused: more than 0.1 %")
    }
}
