import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// 50 `devtrust token` processes started while a `register` and an
/// `init --force` run on the same keystore: every token is minted, verifies
/// (python3-cryptography) with the key that was current when it was minted,
/// no jti repeats, and no lock or temporary file is left behind.
@Suite(.enabled(if: ReferenceServer.shouldRun && ExternalTool.python.shouldRun)) struct ConcurrencyTests {
    /// A process started now, with the moments it started and ended.
    final class Run: @unchecked Sendable {
        let process = Process()
        let output = Pipe()
        let errors = Pipe()
        let started: UInt64
        private let lock = NSLock()
        private var endedAt: UInt64?

        init(_ cli: DevtrustBinary, _ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: cli.path)
            process.arguments = arguments
            process.environment = cli.environment
            process.standardOutput = output
            process.standardError = errors
            started = DispatchTime.now().uptimeNanoseconds
            process.terminationHandler = { [lock] _ in
                let now = DispatchTime.now().uptimeNanoseconds
                lock.lock()
                self.endedAt = now
                lock.unlock()
            }
            try process.run()
        }

        /// Waits; returns (status, stdout, stderr).
        func finish() -> (Int32, String, String) {
            let out = output.fileHandleForReading.readDataToEndOfFile()
            let err = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
                    String(decoding: err, as: UTF8.self))
        }

        var ended: UInt64 {
            lock.lock()
            defer { lock.unlock() }
            return endedAt ?? UInt64.max
        }
    }

    @Test func fiftyTokensWhileRegisterAndInitForceRun() throws {
        let server = try ReferenceServer()
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent/tpmrm0"
        try cli.run("init", "--backend", "software", "-q")
        let register = ["register", "--server", server.url, "--non-interactive", "-q"] + RegisterTests.answers
        #expect(try cli.run(register).status == 0)
        let oldKey = try cli.run("pubkey").output

        // Registering again with the same server, as it replaces the first registration.
        let registering = try Run(cli, register + ["--replace"])
        var tokens = [Run]()
        var initializing: Run?
        for index in 0..<50 {
            if index == 10 { initializing = try Run(cli, ["init", "--force", "-q"]) }
            tokens.append(try Run(cli, ["token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936"]))
            usleep(1500)
        }
        let initialized = try #require(initializing)
        let (initStatus, _, initErrors) = initialized.finish()
        #expect(initStatus == 0, "init --force: \(initErrors)")
        let (registerStatus, _, registerErrors) = registering.finish()
        let results = tokens.map { $0.finish() }
        let newKey = try cli.run("pubkey").output
        #expect(newKey != oldKey)

        // Every token was minted.
        for (index, result) in results.enumerated() {
            #expect(result.0 == 0 && result.1.split(separator: ".").count == 3, "token \(index): \(result.2)")
        }
        // Each verifies with the key current when it was minted: the old key for
        // tokens done before init started, the new one for tokens started after
        // init ended, one of the two in between.
        let compact = results.map { $0.1 }
        let validOld = try Self.verified(compact, spki: oldKey)
        let validNew = try Self.verified(compact, spki: newKey)
        var counts = (old: 0, new: 0)
        for (index, token) in tokens.enumerated() {
            #expect(validOld.contains(index) != validNew.contains(index), "token \(index) verifies with \(validOld.contains(index) ? "both keys" : "neither key")")
            if validOld.contains(index) { counts.old += 1 } else { counts.new += 1 }
            if token.ended < initialized.started { #expect(validOld.contains(index), "token \(index) ended before init started") }
            if token.started > initialized.ended { #expect(validNew.contains(index), "token \(index) started after init ended") }
        }
        // No jti repeats.
        let identifiers = try compact.map { token -> String in
            let payload = try Base64URL.decode(token.split(separator: ".")[1])
            return try #require(try JSONParser.parse(payload).objectValue?["jti"]?.stringValue)
        }
        #expect(Set(identifiers).count == identifiers.count)

        // The register either recorded its registration with the key it was made
        // with (before init replaced it, then dropped by init) or failed saying why.
        let manifestBytes = try #require(directory.read("ks/keystore.json"))
        let manifest = try #require(try JSONParser.parse(manifestBytes).objectValue)
        let fingerprint = manifest["key"]?.objectValue?["fingerprint"]
        for registration in manifest["registrations"]?.arrayValue ?? [] {
            #expect(registration.objectValue?["keyFingerprint"] == fingerprint, "a registration recorded with another key")
        }
        if registerStatus != 0 { #expect(registerErrors.contains("the device key was replaced while the registration ran"), "\(registerErrors)") }

        // Nothing left behind: no temporary file, no extra key file, and the lock is free.
        let entries = directory.entries("ks")
        #expect(!entries.contains { $0.hasPrefix(".tmp-") } && entries.filter { $0.hasPrefix("key-") }.count == 1, "\(entries)")
        let lock = try ProcessRunner.run("/usr/bin/flock", ["--nonblock", "--exclusive", directory.file("ks/.lock"), "/bin/true"])
        #expect(lock.status == 0, "the keystore lock is still held: \(lock)")
        print("concurrency: 50 tokens during register (exit \(registerStatus)\(registerStatus == 0 ? "" : ": " + registerErrors.trimmingCharacters(in: .whitespacesAndNewlines))) and init --force: \(counts.old) with the old key, \(counts.new) with the new one, \(Set(identifiers).count) distinct jti")
    }

    /// The indexes of the tokens that verify with `spki`.
    static func verified(_ tokens: [String], spki: String) throws -> Set<Int> {
        let request: JSONObject = ["spki": .string(spki), "der": .array([]), "jws": .array(tokens.map { .string($0) })]
        let result = try ExternalTool.python.run([Repository.path("Tests/Interop/verify_es256.py")], stdin: JSONWriter.bytes(.object(request)))
        let invalid = try JSONParser.parse(result.stdout).objectValue?["jws"]?.objectValue?["invalid"]?.arrayValue ?? []
        let invalidIndexes = Set(invalid.compactMap { $0.int64Value.map(Int.init) })
        return Set(tokens.indices).subtracting(invalidIndexes)
    }
}
