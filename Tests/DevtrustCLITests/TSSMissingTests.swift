import DevtrustTestSupport
import Foundation
import Testing

/// devtrust loads tpm2-tss only when it needs the TPM, so a machine without it
/// still gets a software key, and `--backend tpm` says what to install. The
/// library is hidden in a private mount namespace (needs root and unshare).
enum HiddenTSS {
    static let library = "/usr/lib/x86_64-linux-gnu/libtss2-esys.so.0.0.0"

    static var isPossible: Bool {
        getuid() == 0 && FileManager.default.fileExists(atPath: library)
            && (try? ProcessRunner.run("/usr/bin/unshare", ["-m", "/bin/true"]).status) == 0
    }
}

@Suite(.enabled(if: HiddenTSS.isPossible)) struct TSSMissingTests {
    /// Runs devtrust with libtss2-esys replaced by an empty file, with a keystore, cache and
    /// configuration of its own (as root, the defaults are the machine's /var/lib, /var/cache
    /// and /etc/devtrust: `token` would write /var/cache/devtrust/posture.json).
    static func withoutTSS(_ directory: TemporaryDirectory, _ arguments: [String]) throws -> ProcessResult {
        let command = "mount --bind /dev/null \(HiddenTSS.library) && exec \"$0\" \"$@\""
        return try ProcessRunner.run("/usr/bin/unshare", ["-m", "/bin/sh", "-c", command, DevtrustBinary.defaultPath,
                                                          "--keystore", directory.file("ks")] + arguments,
                                     environment: DevtrustBinary(keystore: directory.file("ks")).environment)
    }

    @Test func tpmBackendFailsWithWhatToInstall() throws {
        let directory = TemporaryDirectory()
        let result = try Self.withoutTSS(directory, ["init", "--backend", "tpm"])
        #expect(result.status == 6, "\(result)")
        #expect(result.stderr.contains("the TPM software stack (tpm2-tss) cannot be loaded (") && result.stderr.contains("libtss2-esys.so.0"), "\(result)")
        #expect(result.stderr.contains("install the packages libtss2-esys-3.0.2-0, libtss2-tctildr0, libtss2-mu0 and libtss2-rc0"))
        #expect(directory.entries().isEmpty || directory.entries("ks").filter { $0.hasPrefix("key-") }.isEmpty)
    }

    @Test func autoBackendFallsBackToASoftwareKeyThatWorks() throws {
        let directory = TemporaryDirectory()
        let initialized = try Self.withoutTSS(directory, ["init"])
        #expect(initialized.status == 0, "\(initialized)")
        #expect(initialized.stderr.contains("cannot be loaded") && initialized.stderr.contains("using a software key"), "\(initialized)")
        let token = try Self.withoutTSS(directory, ["token", "--device-id", "x"])
        #expect(token.status == 0 && token.stdout.split(separator: ".").count == 3, "\(token)")
    }
}
