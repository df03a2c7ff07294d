import DevtrustTestSupport
import Foundation
import Testing

/// Every fuzz target's seeds and every crash input `make fuzz` ever saved
/// (Fuzz/Crashes) run through the same checks, in the normal build: none may
/// crash or trip an invariant again.
@Suite struct FuzzRegressionTests {
    static let targets = ["FlowResponse", "AppNativeResponse", "DERSignature", "CompactJWS", "TSS2KeyFile", "Configuration", "Keystore", "PrivateKeyFile", "LoopbackRequest"]

    @Test(arguments: targets)
    func seedsAndSavedCrashesRunClean(target: String) throws {
        let replayer = URL(fileURLWithPath: DevtrustBinary.defaultPath).deletingLastPathComponent().appendingPathComponent("Fuzz" + target).path
        let inputs = ["Corpus", "Crashes"].map { Repository.path("Fuzz/\($0)/\(target)") }
        let result = try ProcessRunner.run(replayer, inputs, environment: ["PATH": "/usr/bin:/bin", "SWIFT_BACKTRACE": "enable=no"])
        #expect(result.status == 0, "\(target): \(result)")
        let seeds = try FileManager.default.contentsOfDirectory(atPath: inputs[0]).filter { !$0.hasPrefix(".") }.count
        let crashes = try FileManager.default.contentsOfDirectory(atPath: inputs[1]).filter { !$0.hasPrefix(".") }.count
        #expect(seeds > 0, "no seeds for \(target): run Fuzz/seed-corpora.py")
        #expect(result.stdout.contains("replayed \(seeds + crashes) inputs"), "\(result.stdout)")
    }
}
