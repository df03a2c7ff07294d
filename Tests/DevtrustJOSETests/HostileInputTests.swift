import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import Testing

/// `verify` must never crash: random mutations of valid tokens either fail
/// with a VerificationFailure or are the unmodified token.
@Suite struct HostileInputTests {
    @Test func mutatedTokensNeverCrashAndNeverVerify() throws {
        let key = try SoftwareDeviceKey.generate()
        let verifier = ES256Verifier(publicKey: key.publicKey)
        let minter = DeviceTokenMinter(key: key)
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCxyz019-_.=+/{}\"\\ \u{0}é".utf8)
        var rejected = 0
        for round in 0..<5000 {
            let original = Array(try minter.deviceToken(deviceId: "d\(round % 7)", attributes: DeviceAttributes()).utf8)
            var mutated = original
            for _ in 0...Int.random(in: 0...3, using: &generator) {
                switch Int.random(in: 0...3, using: &generator) {
                case 0 where !mutated.isEmpty:
                    mutated[Int.random(in: 0..<mutated.count, using: &generator)] ^= UInt8(1 << Int.random(in: 0...7, using: &generator))
                case 1 where !mutated.isEmpty:
                    mutated.removeSubrange(Int.random(in: 0..<mutated.count, using: &generator)..<mutated.count)
                case 2:
                    mutated.insert(alphabet.randomElement(using: &generator)!, at: Int.random(in: 0...mutated.count, using: &generator))
                default:
                    if !mutated.isEmpty { mutated.remove(at: Int.random(in: 0..<mutated.count, using: &generator)) }
                }
            }
            let text = String(decoding: mutated, as: UTF8.self)
            do {
                _ = try verifier.verify(compact: text, freshness: (300, SystemClock().secondsSinceEpoch()))
                #expect(Array(text.utf8) == original, "a mutated token verified: \(text)")
            } catch {
                rejected += 1
            }
        }
        #expect(rejected > 4500)
    }

    @Test func arbitraryBytesAsDERAndJSONNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20000 {
            let length = Int.random(in: 0...80, using: &generator)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if length > 2 && Bool.random(using: &generator) { bytes[0] = 0x30; bytes[1] = UInt8(length - 2) }
            _ = try? ECDSASignature(der: bytes)
            _ = try? P256PublicKey(spki: bytes)
            _ = try? JSONParser.parse(bytes)
            _ = try? Base64URL.decode(String(decoding: bytes, as: UTF8.self))
        }
    }
}
