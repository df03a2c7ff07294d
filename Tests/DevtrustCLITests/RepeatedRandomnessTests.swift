import DevtrustEncoding
import DevtrustTestSupport
import Testing

/// Two runs of a VM restored from one snapshot can draw the same random bytes.
/// Modelled by a preloaded getrandom that always returns the same bytes
/// (Tests/Interop/stuck_getrandom.c): if devtrust's ECDSA nonce came from the
/// random bytes alone, two challenges signed by two such runs would share it,
/// and the private key would follow from the two signatures
/// (Tests/Interop/recover_nonce_reuse.py). With the nonce derived from the key
/// and the digest too (RFC 6979, hedged), it does not.
@Suite(.enabled(if: ExternalTool.python.shouldRun && ExternalTool.cc.shouldRun)) struct RepeatedRandomnessTests {
    @Test func twoRunsDrawingTheSameRandomBytesDoNotGiveTheKeyAway() throws {
        let directory = TemporaryDirectory()
        let library = directory.file("stuck_getrandom.so")
        let built = try ExternalTool.cc.run(["-shared", "-fPIC", "-o", library, Repository.path("Tests/Interop/stuck_getrandom.c")])
        #expect(built.status == 0, "\(built)")
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        #expect(try cli.run("init", "--backend", "software", "-q").status == 0)
        var restored = cli
        restored.extraEnvironment["LD_PRELOAD"] = library

        let messages = ["the first challenge, 32 bytes!!!", "the second challenge, 32 bytes!!"].map { Array($0.utf8) }
        let challenges = messages.map { Base64URL.encode($0) }
        let signatures = try challenges.map { challenge in
            let result = try restored.run("sign-challenge", challenge)
            #expect(result.status == 0, "\(result)")
            return result.output
        }
        // The preloaded library is in effect: the same challenge and the same
        // random bytes give the same signature, which real randomness does not.
        #expect(try restored.run("sign-challenge", challenges[0]).output == signatures[0])
        #expect(try cli.run("sign-challenge", challenges[0]).output != (try cli.run("sign-challenge", challenges[0]).output))

        let request: JSONObject = [
            "spki": .string(try cli.run("pubkey").output),
            "signatures": .array(zip(messages, signatures).map { message, signature in
                .object(["message": .string(Base64.encode(message)), "signature": .string(signature)])
            }),
        ]
        let attack = try ExternalTool.python.run([Repository.path("Tests/Interop/recover_nonce_reuse.py")], stdin: JSONWriter.bytes(.object(request)))
        let report = try #require(try JSONParser.parse(attack.stdout).objectValue, "\(attack)")
        #expect(report["valid"] == .integer(2), "\(attack)")
        #expect(report["sharedR"] == .bool(false), "the two signatures share a nonce")
        #expect(report["recovered"] == .null, "the private key was recovered from two signatures: \(report["recovered"] ?? .null)")
    }
}
