import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// Fault injection: `init --force`, `register` and `token` killed with SIGKILL
/// at random moments, 1000 times in all. After every kill the keystore must be
/// the old state or the new one: a manifest that parses and validates, naming
/// a complete key file that loads with the recorded fingerprint, registrations
/// only with the key they were made with, every other file whole. Leftover
/// temporary and orphaned files are allowed until the next writer, which must
/// remove them. `DEVTRUST_CRASH_SEED=N` replays a run.
/// `make test` runs a quarter of the loop (each run a new seed); `make test-long` sets
/// `DEVTRUST_CRASH_LOOP=full` for the whole of it (after make test in CI; README).
@Suite struct CrashSafetyTests {
    static let seed = UInt64(ProcessInfo.processInfo.environment["DEVTRUST_CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max)
    static let fullLoop = ProcessInfo.processInfo.environment["DEVTRUST_CRASH_LOOP"] == "full"

    /// The rounds of a loop whose full size is `full`.
    static func rounds(_ full: Int) -> Range<Int> { 0..<(fullLoop ? full : full / 4) }

    @Test func killedInitNeverLeavesAPartialKeystore() throws {
        var harness = try CrashHarness(seed: Self.seed, label: "init")
        for _ in Self.rounds(400) {
            try harness.inject(["init", "--force", "-q"])
        }
        try harness.finish()
    }

    @Test(.enabled(if: ReferenceServer.shouldRun)) func killedRegisterNeverLeavesARegistrationWithoutItsKey() throws {
        let server = try ReferenceServer()
        var harness = try CrashHarness(seed: Self.seed &+ 1, label: "register")
        let register = ["register", "--server", server.url, "--non-interactive", "-q"] + RegisterTests.answers
        for round in Self.rounds(300) {
            // Now and then a new key first: registrations must go with the key they were made with.
            if round % 10 == 9 { try harness.runToCompletion(["init", "--force", "-q"]) }
            try harness.inject(register)
        }
        try harness.finish()
    }

    /// The checker itself: each kind of damage a crash could cause is caught.
    @Test func theCheckerCatchesEachKindOfDamage() throws {
        var harness = try CrashHarness(seed: 1, label: "checker")
        let manifest = try #require(harness.directory.read("ks/keystore.json"))
        let keyFile = try #require(harness.directory.entries("ks").first { $0.hasPrefix("key-") })
        let key = try #require(harness.directory.read("ks/" + keyFile))
        let damages: [(String, () -> Void)] = [
            ("a truncated manifest", { harness.directory.write("ks/keystore.json", Array(manifest.prefix(manifest.count / 2))) }),
            ("a truncated key file", { harness.directory.write("ks/" + keyFile, Array(key.prefix(key.count / 2))) }),
            ("a missing key file", { unlink(harness.directory.file("ks/" + keyFile)) }),
            ("a registration with another key", {
                var document = (try? JSONParser.parse(manifest).objectValue) ?? [:]
                document["registrations"] = .array([.object(["registrationId": .string("x"), "server": .string("https://a.example"),
                                                             "flowType": .string("REGISTRATION"), "keyFingerprint": .string("another"),
                                                             "registeredAt": .string("2026-11-30T00:00:00Z")])])
                harness.directory.write("ks/keystore.json", JSONWriter.bytes(.object(document)))
            }),
            ("a partial posture cache", {
                try? FileManager.default.createDirectory(atPath: harness.cli.cacheDirectory, withIntermediateDirectories: true)
                FileManager.default.createFile(atPath: harness.cli.cacheDirectory + "/posture.json", contents: Data("{\"firewall\":{\"at\":17".utf8))
            }),
            ("a posture cache in the keystore", { harness.directory.write("ks/posture-cache.json", "{}") }),
        ]
        for (damage, apply) in damages {
            apply()
            let before = harness.corruptions.count
            _ = try harness.check()
            #expect(harness.corruptions.count > before, "not caught: \(damage)")
            harness.directory.write("ks/keystore.json", manifest)
            harness.directory.write("ks/" + keyFile, key)
            unlink(harness.directory.file("ks/posture-cache.json"))
            unlink(harness.cli.cacheDirectory + "/posture.json")
        }
        harness.corruptions.removeAll()
        _ = try harness.check()
        #expect(harness.corruptions.isEmpty, "\(harness.corruptions)")
    }

    @Test func killedTokenNeverLeavesAPartialFile() throws {
        var harness = try CrashHarness(seed: Self.seed &+ 2, label: "token")
        for _ in Self.rounds(300) {
            try harness.inject(["token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936"])
        }
        try harness.finish()
    }
}

/// Runs commands against one keystore, kills them at random points, and checks the keystore after each.
struct CrashHarness {
    let seed: UInt64
    let label: String
    let directory = TemporaryDirectory()
    let snapshots = TemporaryDirectory("keystore-snapshots")
    var cli: DevtrustBinary
    var generator: SplitMix64
    var injected = 0
    /// Keystore checks so far (after each injection and each full run): names the snapshots.
    var checks = 0
    var killed = 0
    var leftovers = 0
    /// Every broken invariant, with the injection it followed.
    var corruptions = [String]()
    var fingerprints = Set<String>()
    var typicalDuration: UInt32 = 0

    init(seed: UInt64, label: String) throws {
        self.seed = seed
        self.label = label
        generator = SplitMix64(seed: seed)
        cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent/tpmrm0"
        try cli.run("init", "--backend", "software", "-q")
        fingerprints.insert(try check())
    }

    mutating func runToCompletion(_ arguments: [String]) throws {
        let result = try cli.run(arguments)
        #expect(result.status == 0, "\(label) seed \(seed): \(result)")
        fingerprints.insert(try check())
    }

    /// Starts the command, kills it after a random delay within its usual run time, checks the keystore.
    mutating func inject(_ arguments: [String]) throws {
        if typicalDuration == 0 {
            // Learn how long the command takes when left alone.
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try cli.run(arguments)
            typicalDuration = UInt32(max(1, (DispatchTime.now().uptimeNanoseconds - start) / 1000))
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli.path)
        process.arguments = arguments
        process.environment = cli.environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        usleep(UInt32.random(in: 0...(typicalDuration + typicalDuration / 5), using: &generator))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        injected += 1
        // Keep the kill points spread over the command's run on a machine whose
        // speed changes: shorten the window after a run that finished first.
        if process.terminationReason == .uncaughtSignal {
            killed += 1
            typicalDuration = typicalDuration + typicalDuration / 20
        } else {
            typicalDuration = max(100, typicalDuration - typicalDuration / 10)
        }
        fingerprints.insert(try check())
    }

    /// The keystore invariants; returns the committed key's fingerprint.
    mutating func check() throws -> String {
        let context = "\(label) injection \(injected), seed \(seed)"
        var problems = [String]()
        defer { corruptions += problems.map { "\(context): \($0)" } }
        guard let manifestBytes = directory.read("ks/keystore.json") else {
            problems.append("keystore.json is missing")
            return ""
        }
        checks += 1
        _ = FileManager.default.createFile(atPath: snapshots.file("\(checks).json"), contents: Data(manifestBytes))
        guard let manifest = try? JSONParser.parse(manifestBytes).objectValue, let key = manifest["key"]?.objectValue,
              let keyFile = key["file"]?.stringValue, let fingerprint = key["fingerprint"]?.stringValue else {
            problems.append("keystore.json does not parse or has no key record")
            return ""
        }
        // The key file the manifest names is complete: it loads, with the recorded fingerprint.
        let loaded = try cli.run("pubkey", "--format", "thumbprint")
        if loaded.status != 0 || loaded.output != fingerprint { problems.append("the key does not load as recorded: \(loaded)") }
        for registration in manifest["registrations"]?.arrayValue ?? [] where registration.objectValue?["keyFingerprint"] != .string(fingerprint) {
            problems.append("a registration made with another key: \(registration)")
        }
        var named: Set<String> = [keyFile, "keystore.json", ".lock"]
        for signIn in manifest["signIns"]?.arrayValue ?? [] {
            if let file = signIn.objectValue?["file"]?.stringValue { named.insert(file) }
        }
        for name in directory.entries("ks") where !named.contains(name) {
            if name.hasPrefix(".tmp-") || name.hasPrefix("key-") || name.hasPrefix("signin-") {
                leftovers += 1 // a killed writer's; the next writer deletes it
            } else if name == "pending-authorizations.json" {
                if (try? JSONParser.parse(directory.read("ks/" + name) ?? [])) == nil { problems.append("\(name) is not whole") }
            } else {
                problems.append("unexpected file \(name)")
            }
        }
        // The posture cache lives in the cache directory, and is whole there too.
        if let cache = FileManager.default.contents(atPath: cli.cacheDirectory + "/posture.json"), (try? JSONParser.parse(Array(cache))) == nil {
            problems.append("the posture cache is not whole")
        }
        for name in named where name != ".lock" && !FileManager.default.fileExists(atPath: directory.file("ks/" + name)) {
            problems.append("\(name) is named but missing")
        }
        return fingerprint
    }

    /// The next writer cleans up; every manifest seen validates against the schema.
    mutating func finish() throws {
        let result = try cli.run("init", "--force", "-q")
        #expect(result.status == 0, "\(result)")
        let stray = directory.entries("ks").filter { $0.hasPrefix(".tmp-") || $0.hasPrefix("key-") }
        #expect(stray.count == 1, "\(label) seed \(seed): the next writer left \(stray)")
        if ExternalTool.python.shouldRun {
            let files = snapshots.entries().map { snapshots.file($0) }
            let validated = try ExternalTool.python.run([Repository.path("Tests/Interop/validate_keystore.py"), Repository.path("keystore/schema")] + files)
            #expect(validated.status == 0, "\(label) seed \(seed): \(validated.stdout.split(separator: "\n").filter { !$0.hasPrefix("ok ") }.prefix(5))")
        }
        #expect(corruptions.isEmpty, "\(corruptions.prefix(5))")
        #expect(killed > injected / 5, "\(label): only \(killed) of \(injected) runs were killed mid-way (seed \(seed))")
        print("crash injection \(label): seed \(seed), \(injected) injections, \(killed) killed mid-way, \(corruptions.count) corruptions, \(leftovers) leftover files seen (all removed by the next writer), \(fingerprints.count) distinct keys committed")
    }
}

struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
