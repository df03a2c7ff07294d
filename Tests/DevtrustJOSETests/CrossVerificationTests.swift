import DevtrustEncoding
import DevtrustJOSE
import DevtrustKeys
import DevtrustTestSupport
import Foundation
import Testing

/// Thousands of fresh signatures and tokens checked by independent verifiers:
/// the openssl CLI (DER), python3-cryptography (DER and raw r||s JWS) and jose.
@Suite(.serialized) struct CrossVerificationTests {
    static let signatureCount = 2000
    static let tokenCount = 2000

    struct Batch {
        let key: SoftwareDeviceKey
        var challenges: [[UInt8]] = []
        var signatures: [ECDSASignature] = []
        var tokens: [String] = []
    }

    static func makeBatch() throws -> Batch {
        var batch = Batch(key: try SoftwareDeviceKey.generate())
        let random = SystemRandom()
        for _ in 0..<signatureCount {
            let challenge = try random.bytes(count: 32)
            batch.challenges.append(challenge)
            batch.signatures.append(try batch.key.sign(message: challenge))
        }
        let minter = DeviceTokenMinter(key: batch.key)
        var attributes = DeviceAttributes()
        attributes.set("lockScreen", "true")
        for index in 0..<tokenCount {
            batch.tokens.append(try minter.deviceToken(deviceId: "device-\(index)", attributes: attributes))
        }
        return batch
    }

    /// Signatures whose r or s has a leading zero byte: the cases that break
    /// encoders which do not strip or pad (about 1 in 128 signatures).
    static func shortIntegerCount(_ signatures: [ECDSASignature]) -> Int {
        signatures.filter { $0.r[0] == 0 || $0.s[0] == 0 }.count
    }

    @Test(.enabled(if: ExternalTool.python.shouldRun))
    func pythonCryptographyVerifiesEverySignatureAndToken() throws {
        #expect(ExternalTool.python.isInstalled, "/usr/bin/python3 with python3-cryptography is required (apt-get install python3-cryptography)")
        let batch = try Self.makeBatch()
        var der = batch.signatures.enumerated().map { index, signature -> JSONValue in
            .object(["message": .string(Base64.encode(batch.challenges[index])), "signature": .string(Base64.encode(signature.der))])
        }
        var jws = batch.tokens.map { JSONValue.string($0) }
        // Negative controls: the verifier must be able to say no.
        der.append(.object(["message": .string(Base64.encode([1, 2, 3])), "signature": .string(Base64.encode(batch.signatures[0].der))]))
        var tampered = Array(batch.tokens[0])
        tampered[tampered.count - 5] = tampered[tampered.count - 5] == "A" ? "B" : "A"
        jws.append(.string(String(tampered)))
        let request: JSONObject = ["spki": .string(batch.key.publicKey.spkiBase64), "der": .array(der), "jws": .array(jws)]
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(result.status == 0, "\(result.stderr)")
        let report = try JSONParser.parse(result.stdout).objectValue!
        #expect(report["der"]?.objectValue?["valid"] == .integer(Self.signatureCount))
        #expect(report["der"]?.objectValue?["invalid"] == .array([.integer(Self.signatureCount)]))
        #expect(report["jws"]?.objectValue?["valid"] == .integer(Self.tokenCount))
        #expect(report["jws"]?.objectValue?["invalid"] == .array([.integer(Self.tokenCount)]))
        let tokenSignatures = try batch.tokens.map { try ECDSASignature(raw: ParsedJWS(compact: $0).signature) }
        let short = Self.shortIntegerCount(batch.signatures + tokenSignatures)
        #expect(short > 0, "no signature with a short r or s among \(Self.signatureCount + Self.tokenCount): the edge cases were not exercised")
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func opensslCLIVerifiesDERChallengeSignatures() async throws {
        #expect(ExternalTool.openssl.isInstalled, "the openssl CLI is required")
        let batch = try Self.makeBatch()
        let directory = TemporaryDirectory()
        let publicKey = directory.write("public.pem", batch.key.publicKey.pem)
        for index in 0..<Self.signatureCount {
            directory.write("m\(index)", batch.challenges[index])
            directory.write("s\(index)", batch.signatures[index].der)
        }
        // A wrong signature for a negative control.
        directory.write("m-bad", [9, 9, 9])
        let failures = try await withThrowingTaskGroup(of: [Int].self) { group in
            let workers = max(2, ProcessInfo.processInfo.activeProcessorCount)
            for worker in 0..<workers {
                group.addTask {
                    var failed = [Int]()
                    for index in stride(from: worker, to: Self.signatureCount, by: workers) {
                        let result = try ExternalTool.openssl.run(["dgst", "-sha256", "-verify", publicKey, "-signature", directory.file("s\(index)"), directory.file("m\(index)")])
                        if result.status != 0 || result.output != "Verified OK" { failed.append(index) }
                    }
                    return failed
                }
            }
            return try await group.reduce(into: [Int]()) { $0 += $1 }
        }
        #expect(failures.isEmpty, "openssl rejected signatures \(failures.prefix(10))")
        let control = try ExternalTool.openssl.run(["dgst", "-sha256", "-verify", publicKey, "-signature", directory.file("s0"), directory.file("m-bad")])
        #expect(control.status == 1 && control.output == "Verification failure")
    }

    @Test(.enabled(if: ExternalTool.jose.shouldRun))
    func joseVerifiesTokens() throws {
        #expect(ExternalTool.jose.isInstalled, "jose is required (apt-get install jose)")
        let key = try SoftwareDeviceKey.generate()
        let directory = TemporaryDirectory()
        let jwk = directory.write("key.jwk", JSONWriter.string(.object(key.publicKey.jwk)))
        let minter = DeviceTokenMinter(key: key)
        for index in 0..<200 {
            let token = try minter.deviceToken(deviceId: "device-\(index)", attributes: DeviceAttributes())
            let result = try ExternalTool.jose.run(["jws", "ver", "-i", "-", "-k", jwk], stdin: Array(token.utf8))
            #expect(result.status == 0, "jose rejected \(token): \(result.stderr)")
        }
        let bad = try minter.deviceToken(deviceId: "x", attributes: DeviceAttributes()).dropLast(2) + "AA"
        #expect(try ExternalTool.jose.run(["jws", "ver", "-i", "-", "-k", jwk], stdin: Array(bad.utf8)).status != 0)
    }
}
