import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// `init --force` killed with SIGKILL at random moments: the keystore is
/// always the old state or the new one, and the key it names always loads.
@Suite struct CrashSafetyTests {
    @Test func killedInitLeavesAConsistentKeystore() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["DEVTRUST_CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let directory = TemporaryDirectory()
        let cli = DevtrustBinary(keystore: directory.file("ks"))
        try cli.run("init")
        var fingerprints: Set<String> = [try cli.run("pubkey", "--format", "thumbprint").output]
        var killed = 0
        for _ in 0..<60 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: cli.path)
            process.arguments = ["init", "--force", "-q"]
            process.environment = cli.environment
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32.random(in: 0...12_000, using: &generator))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if process.terminationReason == .uncaughtSignal { killed += 1 }
            let status = try cli.run("status", "--json")
            #expect(status.status == 0, "seed \(seed): \(status)")
            let key = try JSONParser.parse(status.output).objectValue?["key"]?.objectValue
            #expect(key?["loads"] == .bool(true), "seed \(seed): \(status.output)")
            let fingerprint = try cli.run("pubkey", "--format", "thumbprint").output
            #expect(key?["fingerprint"] == .string(fingerprint))
            fingerprints.insert(fingerprint)
        }
        #expect(killed > 0, "no run was killed mid-way (seed \(seed))")
        // The next writer removes whatever the killed ones left behind.
        try cli.run("init", "--force")
        let leftovers = directory.entries("ks").filter { $0.hasPrefix(".tmp-") || $0.hasPrefix("key-") }
        #expect(leftovers.count == 1, "seed \(seed): \(leftovers)")
        print("crash test: seed \(seed), \(killed) of 60 runs killed, \(fingerprints.count) distinct keys committed")
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
