import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// The binary's output checked end to end by independent tools.
@Suite struct CLIInteropTests {
    /// The decoded challenge bytes, computed without devtrust.
    static func decodeBase64URL(_ text: String) -> Data {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard = standard.trimmingCharacters(in: CharacterSet(charactersIn: "="))
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard)!
    }

    /// The signing oracle, tested against what devtrust did not write: a
    /// generated corpus of JWS-like challenges (Tests/Interop/jws_oracle.py:
    /// lenient base64, Gson/JSON5 syntax, UTF-16, BOMs, duplicate names, dots,
    /// JSON serializations), each of which PyJWT, jwcrypto, José or a reader as
    /// lenient as the server's (lenient_jws.py) accepts as a token once signed
    /// (the control). devtrust signs none that any of them accepts.
    @Test(.enabled(if: ExternalTool.python.shouldRun && ExternalTool.jose.shouldRun))
    func noLenientVerifierAcceptsASignedChallenge() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let oracle = Repository.path("Tests/Interop/jws_oracle.py")
        let seed = "\(UInt32.random(in: 1...UInt32.max))"
        func totals(_ result: ProcessResult) throws -> JSONObject {
            #expect(result.status == 0, "\(result.stderr)")
            return try #require(try JSONParser.parse(result.stdout).objectValue?["totals"]?.objectValue, "\(result.stderr)")
        }

        let keyFile = directory.file("ks/" + (try #require(directory.entries("ks").first { $0.hasPrefix("key-") })))
        let control = try totals(try ExternalTool.python.run([oracle, "control", "--private-key", keyFile, "--seed", seed]))
        let variants = try #require(control["variants"]?.int64Value)
        #expect(variants >= 300 && control["accepted"]?.int64Value == variants,
                "seed \(seed): not every variant is a token once signed, so the corpus tests less than it says: \(control)")

        let collected = try ProcessRunner.run(ExternalTool.python.rawValue, [oracle, "collect", "--seed", seed, "--", cli.path, "sign-challenge"],
                                              environment: cli.environment)
        #expect(collected.status == 0, "\(collected.stderr)")
        let signatures = directory.write("variants.json", collected.stdout)
        let check = try totals(try ExternalTool.python.run([oracle, "check", "--public-key", try cli.run("pubkey").output, "--variants", signatures]))
        print("jws_oracle seed \(seed): \(variants) variants, devtrust signed \(check["signed"]?.int64Value ?? -1), accepted \(check["accepted"]?.int64Value ?? -1)")
        #expect(check["variants"]?.int64Value == variants)
        #expect(check["accepted"]?.int64Value == 0, "seed \(seed): a signed challenge became a token: \(check)")
    }

    @Test(.enabled(if: ExternalTool.openssl.shouldRun))
    func challengeSignaturesVerifyWithOpenSSL() throws {
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init")
        let publicKey = directory.write("pub.pem", try cli.run("pubkey", "--format", "pem").stdout)
        // Challenges that start with "-" must not be taken for options.
        var challenges = ["q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y", "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y=", "AA", "_-8",
                          "-6cskd5xN-w3eIP04zgfHhPnI6iZGvEGAXBPAFeen9k", "--8"]
        for _ in 0..<100 {
            var bytes = [UInt8](repeating: 0, count: 32)
            // Without a dot: a challenge with one may be refused as a possible JWS signing input (ChallengePolicy).
            for index in bytes.indices {
                let byte = UInt8.random(in: 0...255)
                bytes[index] = byte == UInt8(ascii: ".") ? 0 : byte
            }
            challenges.append(Base64URL.encode(bytes))
        }
        for (index, challenge) in challenges.enumerated() {
            // Alternate between an argument and stdin.
            let result = challenge.hasPrefix("--") ? try cli.run("sign-challenge", "--", challenge)
                : index % 2 == 0 ? try cli.run("sign-challenge", challenge) : try cli.run("sign-challenge", "-", stdin: challenge + "\n")
            #expect(result.status == 0, "\(result)")
            let signature = try #require(Data(base64Encoded: result.output), "not standard base64: \(result.output)")
            directory.write("sig", Array(signature))
            directory.write("msg", Array(Self.decodeBase64URL(challenge)))
            let verified = try ExternalTool.openssl.run(["dgst", "-sha256", "-verify", publicKey, "-signature", directory.file("sig"), directory.file("msg")])
            #expect(verified.output == "Verified OK", "\(challenge): \(verified)")
            // devtrust verify agrees, on the DER and on the raw form.
            let ours = try cli.run("verify", "--public-key", publicKey, "--signature", result.output, "--message", directory.file("msg"))
            #expect(ours.status == 0, "\(ours)")
        }
        // The signature is over the decoded bytes, not the base64 text.
        let signature = try cli.run("sign-challenge", "AAAA").output
        directory.write("text", "AAAA")
        #expect(try cli.run("verify", "--public-key", publicKey, "--signature", signature, "--message", directory.file("text")).status == 1)
    }

    @Test(.enabled(if: ExternalTool.python.shouldRun))
    func tokensFromTheBinaryVerifyWithPython() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init")
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", #"{"claims":{"site":"berlin","floor":"2"}}"#)
        var tokens = [JSONValue]()
        for index in 0..<60 {
            let arguments = index % 2 == 0 ? ["token", "--device-id", "dev-\(index)", "--claim", "floor=3"] : ["device-data"]
            let result = try cli.run(arguments)
            #expect(result.status == 0, "\(result)")
            tokens.append(.string(result.output))
        }
        let first = try JSONParser.parse(Base64URL.decode(String(tokens[0].stringValue!.split(separator: ".")[1]))).objectValue!
        // jti, iat, platform, the posture, then the configuration's claims and --claim.
        #expect(Array(first.keys.prefix(3)) == ["jti", "iat", "platform"])
        #expect(Array(first.keys.suffix(2)) == ["site", "floor"])
        #expect(first["keyProtection"] == .string("software") && first["osName"] != nil && first["kernelVersion"] != nil)
        #expect(first["floor"] == .string("3") && first["site"] == .string("berlin"))
        let request: JSONObject = ["spki": .string(try cli.run("pubkey").output), "jws": .array(tokens)]
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        #expect(result.status == 0, "\(result)")
        #expect(try JSONParser.parse(result.stdout).objectValue?["jws"]?.objectValue?["valid"] == .integer(60))
    }

    @Test func rawSignatureFormatAndPEMKeyFiles() throws {
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init")
        let der = try #require(Data(base64Encoded: try cli.run("sign-challenge", "AQID").output))
        let message = directory.write("m", [1, 2, 3])
        let pem = directory.write("pub.pem", try cli.run("pubkey", "--format", "pem").stdout)
        #expect(try cli.run("verify", "--public-key", pem, "--signature", der.base64EncodedString(), "--message", message).status == 0)
        // DER given as raw is refused as invalid (1), never a crash.
        let wrongFormat = try cli.run("verify", "--public-key", pem, "--signature", der.base64EncodedString(), "--message", message, "--signature-format", "raw")
        #expect(wrongFormat.status == 1 && wrongFormat.stderr.contains("64 bytes"))
        let token = try cli.run("token", "--device-id", "x").output
        #expect(try cli.run("verify", "--public-key", pem, "--jwt", "-", stdin: token + "\n").status == 0)
    }
}
