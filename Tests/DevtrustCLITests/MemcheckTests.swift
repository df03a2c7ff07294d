import DevtrustTestSupport
import Foundation
import Testing

/// The keystore commands under valgrind's memcheck: no read of memory that was
/// never written, in this build and in the release build (DevtrustBinary.builds).
/// Reading a directory entry's name by copying the whole 256-byte `d_name`
/// read past the entry's record; the release build's vectorised search for the
/// NUL then branched on those bytes (and could read past the end of readdir's
/// buffer). memcheck reads debug information no newer than DWARF 4, so the
/// binary runs as a copy without it.
@Suite(.enabled(if: ExternalTool.valgrind.shouldRun)) struct MemcheckTests {
    @Test(arguments: DevtrustBinary.builds)
    func keystoreCommandsReadOnlyWhatWasWritten(binary: String) throws {
        try #require(DevtrustBinary.isCurrent(binary), "\(binary) is missing or older than the sources: make build")
        let directory = TemporaryDirectory()
        let stripped = directory.file("devtrust")
        let strip = try ProcessRunner.run("/usr/bin/strip", ["--strip-debug", "-o", stripped, binary])
        try #require(strip.status == 0, "\(strip)")
        let cli = DevtrustBinary(keystore: directory.file("ks"), path: stripped)
        let commands = [["init", "--backend", "software"], ["token", "--device-id", "memcheck"], ["status"], ["pubkey"],
                        ["init", "--backend", "software", "--force"], ["reset", "--yes"]]
        for command in commands {
            let result = try ProcessRunner.run(ExternalTool.valgrind.rawValue,
                                               ["-q", "--error-exitcode=99", stripped, "--keystore", cli.keystore] + command,
                                               environment: cli.environment.merging(["DEVTRUST_TCTI": "device:/nonexistent"]) { $1 })
            #expect(result.status == 0, "\(command.joined(separator: " ")): \(result)")
            #expect(!result.stderr.contains("=="), "memcheck reported on \(command.joined(separator: " ")): \(result.stderr)")
        }
    }
}
