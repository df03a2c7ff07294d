import DevtrustEncoding
import DevtrustErrors

/// What devtrust agrees to sign as a "challenge". The signature over a
/// challenge is ECDSA over SHA-256 of its bytes, exactly what an ES256 JWS
/// signs over its signing input: a challenge that some verifier reads as
/// `header.payload` turns the answer into a device token of the sender's
/// choosing (for another server, say). devtrust signs no such challenge.
///
/// The decision is made on the raw bytes, by syntax, and fails closed: it
/// does not ask whether devtrust's own strict decoders read a header (verifiers
/// in use are far more lenient: Nimbus reads JSON through Gson's lenient mode,
/// Python's base64 skips junk and its JSON reader detects UTF-16), but whether
/// *any* reasonable reading could find one. docs/security.md lists the readings.
public enum ChallengePolicy {
    /// `sign-challenge`'s challenge as the bytes to sign: base64url (padded or not), not empty, and
    /// one the guard allows (`refusal`); else the usage error that says which. The one check for the
    /// command line's own keystore and for the system agent, which applies it itself.
    public static func signableChallenge(_ text: String) throws(UsageError) -> [UInt8] {
        let bytes = try decodedChallenge(text)
        if let refusal = refusal(bytes) {
            throw UsageError("devtrust refuses to sign this challenge: \(refusal)", command: "sign-challenge")
        }
        return bytes
    }

    /// `sign-challenge`'s challenge as bytes, when it is base64url (padded or not) and not empty:
    /// its syntax only, not whether it may be signed.
    public static func decodedChallenge(_ text: String) throws(UsageError) -> [UInt8] {
        let bytes: [UInt8]
        do {
            bytes = try Base64URL.decode(text, padding: .optional)
        } catch {
            throw UsageError("the challenge is not base64url (padded or not): \(error)", command: "sign-challenge")
        }
        guard !bytes.isEmpty else { throw UsageError("the challenge is empty", command: "sign-challenge") }
        return bytes
    }

    /// Why `challenge` must not be signed, or nil when it may.
    public static func refusal(_ challenge: [UInt8]) -> String? {
        couldBeJWSSigningInput(challenge)
            ? "it could be read as a JWS signing input (header.payload), so its signature could serve as a device token" : nil
    }

    /// The Device Registration challenge of the server contract: 32 random
    /// bytes; 16 to 64 are accepted, nothing that could be a signing input.
    /// A random 32-byte challenge is refused far less than once in 10,000
    /// (measured by ChallengePolicyTests).
    public static func registrationRefusal(_ challenge: [UInt8]) -> String? {
        if let refusal = refusal(challenge) { return refusal }
        guard (16...64).contains(challenge.count) else { return "it is \(challenge.count) bytes, where the contract sends 32 random bytes" }
        return nil
    }

    static let dot = UInt8(ascii: ".")

    /// Every JWS signing input, compact or JSON serialization, is
    /// `protected "." payload` (RFC 7515 section 5.1), and a verifier takes the
    /// protected header from the bytes before a dot (the first one, or any one
    /// for a verifier that splits loosely). So a challenge without a dot is
    /// safe; with one, it is refused when, for some dot and some lenient base64
    /// reading of the bytes before it (`LenientBase64`),
    /// - the decoded bytes hold `{` and later `}`, or `[` and later `]`: a
    ///   JSON object in UTF-8, UTF-16 or UTF-32, whatever surrounds it (a BOM,
    ///   comments, Gson's `)]}'` prefix), or an array, which Gson reads as a
    ///   map when it is one of `[name, value]` pairs (Nimbus parses headers
    ///   into a Map through Gson), or
    /// - they are empty and the challenge could be JSON strings: a JWS JSON
    ///   serialization with a protected header that decodes to nothing and
    ///   `alg` in the unprotected header signs `protected "." payload`, both
    ///   taken from JSON strings.
    static func couldBeJWSSigningInput(_ bytes: [UInt8]) -> Bool {
        guard let lastDot = bytes.lastIndex(of: dot) else { return false }
        let couldBeJSONStrings = UTF8Bytes.isWellFormed(bytes)
        var readings = LenientBase64.allReadings
        for (index, byte) in bytes.enumerated() {
            if byte == dot, couldBeJSONStrings, readings.contains(where: { !$0.emittedAnyByte }) { return true }
            for reading in readings.indices {
                readings[reading].consume(byte)
                // A header ending at the last dot holds what every shorter one holds.
                if readings[reading].sawContainer && index < lastDot { return true }
            }
        }
        return false
    }
}

/// The base64 readings that JWS verifiers in use apply to a header: either
/// alphabet or both, padding anywhere, characters outside the alphabet
/// skipped or starting a new quantum, non-canonical trailing bits ignored.
/// A decoder that stops at the first character it does not know yields a
/// prefix of what these yield, so it is covered too.
enum LenientBase64 {
    enum Alphabet: CaseIterable {
        /// `+/` and `-_` both (Nimbus, Python's urlsafe_b64decode).
        case union
        /// `+/` only; `-_` are junk.
        case standard
        /// `-_` only; `+/` are junk.
        case url

        func value(of byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): return UInt32(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): return UInt32(byte - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): return self == .url ? nil : 62
            case UInt8(ascii: "/"): return self == .url ? nil : 63
            case UInt8(ascii: "-"): return self == .standard ? nil : 62
            case UInt8(ascii: "_"): return self == .standard ? nil : 63
            default: return nil
            }
        }
    }

    enum JunkHandling: CaseIterable {
        /// Everything outside the alphabet, `=` included, is skipped.
        case skip
        /// `=` ends a quantum (concatenated padded blocks); other junk is skipped.
        case restartAfterPadding
        /// Any byte outside the alphabet ends a quantum (line- or word-wise decoders).
        case restartAfterAnyOther
    }

    /// Every combination of alphabet and junk handling.
    static var allReadings: [Reading] {
        Alphabet.allCases.flatMap { alphabet in JunkHandling.allCases.map { Reading(alphabet: alphabet, junk: $0) } }
    }

    /// One decoder reading bytes one at a time, remembering only what the
    /// challenge policy asks: whether it produced a byte, and a JSON
    /// container's opening and, later, closing bracket (`{` `}` or `[` `]`).
    struct Reading {
        let alphabet: Alphabet
        let junk: JunkHandling
        private var accumulator: UInt32 = 0
        private var bits = 0
        private var sawOpeningBrace = false
        private var sawOpeningBracket = false
        private(set) var emittedAnyByte = false
        private(set) var sawContainer = false

        init(alphabet: Alphabet, junk: JunkHandling) {
            self.alphabet = alphabet
            self.junk = junk
        }

        mutating func consume(_ byte: UInt8) {
            guard let value = alphabet.value(of: byte) else {
                if junk == .restartAfterAnyOther || (junk == .restartAfterPadding && byte == UInt8(ascii: "=")) { bits = 0 }
                return
            }
            accumulator = (accumulator << 6 | value) & 0xFFF
            bits += 6
            guard bits >= 8 else { return }
            bits -= 8
            emittedAnyByte = true
            switch UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)) {
            case UInt8(ascii: "{"): sawOpeningBrace = true
            case UInt8(ascii: "["): sawOpeningBracket = true
            case UInt8(ascii: "}") where sawOpeningBrace: sawContainer = true
            case UInt8(ascii: "]") where sawOpeningBracket: sawContainer = true
            default: break
            }
        }
    }
}

enum UTF8Bytes {
    /// Whether `bytes` are UTF-8 (and so could be a JSON string's text),
    /// counting encoded surrogates (WTF-8) as well-formed, since some writers
    /// produce them for lone `\uD800` escapes.
    static func isWellFormed(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while index < bytes.count {
            let length = sequenceLength(bytes, at: index)
            guard length > 0 else { return false }
            index += length
        }
        return true
    }

    /// The length of the well-formed UTF-8 sequence at `index`, or 0.
    private static func sequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let length: Int
        var lowest: UInt8 = 0x80, highest: UInt8 = 0xBF
        switch bytes[index] {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lowest = 0xA0
        case 0xE1...0xEF: length = 3
        case 0xF0: length = 4; lowest = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; highest = 0x8F
        default: return 0
        }
        guard bytes.count - index >= length else { return 0 }
        for offset in 1..<length {
            let (low, high) = offset == 1 ? (lowest, highest) : (UInt8(0x80), UInt8(0xBF))
            guard (low...high).contains(bytes[index + offset]) else { return 0 }
        }
        return length
    }
}
