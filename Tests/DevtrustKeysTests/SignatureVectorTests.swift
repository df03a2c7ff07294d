import DevtrustEncoding
import DevtrustKeys
import DevtrustTestSupport
import Foundation
import Testing

/// The committed vectors in Vectors/ecdsa-signature-encodings.json.
struct EncodingVector: Sendable, CustomTestStringConvertible {
    let name: String
    let der: [UInt8]
    let raw: [UInt8]?
    let outcome: String

    var testDescription: String { name }

    static let all: [EncodingVector] = {
        let path = Repository.path("Tests/DevtrustKeysTests/Vectors/ecdsa-signature-encodings.json")
        let document = try! JSONParser.parse(Array(FileManager.default.contents(atPath: path)!))
        return document.objectValue!["vectors"]!.arrayValue!.map { entry in
            let object = entry.objectValue!
            return EncodingVector(
                name: object["name"]!.stringValue!,
                der: Hex.decode(object["der"]!.stringValue!)!,
                raw: object["raw"]?.stringValue.flatMap { Hex.decode($0) },
                outcome: object["outcome"]!.stringValue!)
        }
    }()
}

@Suite struct SignatureVectorTests {
    /// RFC 6979 A.2.5, the P-256 key.
    static let rfc6979Key = try! P256PublicKey(
        x: Hex.decode("60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6")!,
        y: Hex.decode("7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299")!)

    static let rfc6979Signatures: [(message: String, r: String, s: String)] = [
        ("sample", "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716",
         "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"),
        ("test", "F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367",
         "019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083"),
    ]

    @Test func vectorFileCoversEveryOutcome() {
        let outcomes = Set(EncodingVector.all.map(\.outcome))
        #expect(outcomes == ["valid", "malformedDER", "trailingBytes", "outOfRange"])
        #expect(EncodingVector.all.count >= 30)
    }

    @Test(arguments: EncodingVector.all)
    func decodesOrRejectsAsCommitted(vector: EncodingVector) throws {
        switch vector.outcome {
        case "valid":
            let fromDER = try ECDSASignature(der: vector.der)
            #expect(fromDER.raw == vector.raw)
            let fromRaw = try ECDSASignature(raw: try #require(vector.raw))
            #expect(fromRaw.der == vector.der, "our DER differs from python-cryptography's")
        default:
            do {
                let accepted = try ECDSASignature(der: vector.der)
                Issue.record("accepted \(vector.name): r=\(Hex.encode(accepted.r)) s=\(Hex.encode(accepted.s))")
            } catch {
                switch (vector.outcome, error.reason) {
                case ("malformedDER", .malformedDER), ("trailingBytes", .trailingBytes), ("outOfRange", .outOfRange): break
                default: Issue.record("\(vector.name): expected \(vector.outcome), got \(error)")
                }
            }
        }
    }

    @Test(arguments: rfc6979Signatures.map { $0.message })
    func rfc6979SignaturesVerifyThroughOurDER(message: String) throws {
        let vector = try #require(Self.rfc6979Signatures.first { $0.message == message })
        let signature = try ECDSASignature(r: Hex.decode(vector.r)!, s: Hex.decode(vector.s)!)
        let digest = SHA256.hash(Array(message.utf8))
        #expect(Self.rfc6979Key.isValidSignature(signature, for: digest))
        // raw <-> DER round-trips byte for byte.
        #expect(try ECDSASignature(der: signature.der).raw == signature.raw)
        #expect(try ECDSASignature(raw: signature.raw).der == signature.der)
        // The other message does not verify.
        #expect(!Self.rfc6979Key.isValidSignature(signature, for: SHA256.hash(Array((message + ".").utf8))))
    }

    @Test(arguments: rfc6979Signatures.map { $0.message })
    func everyFlippedBitFails(message: String) throws {
        let vector = try #require(Self.rfc6979Signatures.first { $0.message == message })
        let raw = Hex.decode(vector.r)! + Hex.decode(vector.s)!
        let digest = SHA256.hash(Array(message.utf8))
        for bit in 0..<(raw.count * 8) {
            var flipped = raw
            flipped[bit / 8] ^= 1 << (bit % 8)
            if let signature = try? ECDSASignature(raw: flipped) {
                #expect(!Self.rfc6979Key.isValidSignature(signature, for: digest), "bit \(bit) flipped still verifies")
            }
        }
        let der = try ECDSASignature(raw: raw).der
        for bit in 0..<(der.count * 8) {
            var flipped = der
            flipped[bit / 8] ^= 1 << (bit % 8)
            if let signature = try? ECDSASignature(der: flipped) {
                #expect(!Self.rfc6979Key.isValidSignature(signature, for: digest), "DER bit \(bit) flipped still verifies")
            }
        }
    }

    @Test func rawSignatureMustBe64Bytes() {
        #expect(throws: SignatureEncodingError(reason: .wrongRawLength(63))) { try ECDSASignature(raw: [UInt8](repeating: 1, count: 63)) }
        #expect(throws: SignatureEncodingError(reason: .wrongRawLength(72))) { try ECDSASignature(raw: [UInt8](repeating: 1, count: 72)) }
    }

    @Test func shortAndPaddedIntegersNormalise() throws {
        // A TPM hands back r and s zero-padded (or, from other stacks, stripped).
        let short = try ECDSASignature(r: [0x01], s: [0x00, 0x00, 0x7F])
        #expect(short.raw == [UInt8](repeating: 0, count: 31) + [0x01] + [UInt8](repeating: 0, count: 31) + [0x7F])
        #expect(short.der == [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x7F])
    }
}
