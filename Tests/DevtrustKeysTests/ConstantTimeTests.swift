import DevtrustTestSupport
import Foundation
import Testing

/// The C that handles the nonce and the private key in Sources/COpenSSL/shim.h
/// (the safegcd inversion of the nonce, the RFC 6979 derivation) neither
/// branches nor indexes memory on a secret, whatever the compiler makes of
/// it: Tests/Interop/constant_time.c, built by each compiler and level below,
/// marks the secrets undefined and runs under valgrind's memcheck, which
/// reports any conditional jump that depends on them. clang -O3 turned the
/// masks of devtrust_signed62_reduce into jumps before they went through a
/// value barrier. (-march=native is not among them: valgrind cannot run every
/// instruction a recent CPU has; x86-64-v3 is AVX2.)
@Suite(.enabled(if: ExternalTool.valgrind.shouldRun && ExternalTool.cc.shouldRun)) struct ConstantTimeTests {
    static let compilers: [String] = [
        "gcc -O2", "gcc -O3", "gcc -O3 -march=x86-64-v3", "clang -O2", "clang -O3", "clang -O3 -march=x86-64-v3",
    ]

    /// The Swift toolchain's clang (what builds the shim into devtrust), from PATH or beside swift.
    static var clang: String? {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { String($0) + "/clang" }
        return (path + ["/opt/swift/usr/bin/clang", "/usr/bin/clang"]).first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test(arguments: compilers)
    func noBranchDependsOnASecret(compiler: String) throws {
        var words = compiler.split(separator: " ").map(String.init)
        words[0] = words[0] == "gcc" ? ExternalTool.cc.rawValue : try #require(Self.clang, "no clang on PATH or in /opt/swift/usr/bin")
        let directory = TemporaryDirectory()
        let harness = directory.file("constant_time")
        let built = try ProcessRunner.run(words[0], Array(words.dropFirst()) + ["-g", "-I", Repository.path("Sources/COpenSSL"), "-o", harness,
                                                                             Repository.path("Tests/Interop/constant_time.c"), "-lcrypto"])
        try #require(built.status == 0, "\(compiler): \(built)")
        let checked = try ExternalTool.valgrind.run(["-q", "--error-exitcode=3", harness])
        #expect(checked.status == 0, "\(compiler): \(checked)")
        #expect(checked.stdout.contains("24 rounds, 0 wrong"), "\(compiler): \(checked)")
        let control = try ExternalTool.valgrind.run(["-q", "--error-exitcode=3", harness, "control"])
        #expect(control.status == 3 && control.stderr.contains("depends on uninitialised value"), "valgrind did not see the harness's own branch on a secret: \(control)")
    }
}
