import DevtrustTestSupport
import Foundation
import Testing

/// `devtrust token` runs per request: the HTTP stack (libcurl and its
/// dependencies) and ICU must never be loaded on its path, nor the TPM
/// software stack when the key is a software key.
@Suite struct StartupPathTests {
    static func loadedLibraries(_ cli: DevtrustBinary, _ arguments: [String]) throws -> [String] {
        var traced = cli
        traced.extraEnvironment["LD_DEBUG"] = "libs"
        let result = try traced.run(arguments)
        #expect(result.status == 0, "\(result.stdout)")
        return result.stderr.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "calling init: ") else { return nil }
            return String(line[range.upperBound...])
        }
    }

    @Test func softwareTokenLoadsNeitherLibcurlNorICUNorTheTSS() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let libraries = try Self.loadedLibraries(cli, ["token", "--device-id", "x"])
        #expect(libraries.contains { $0.contains("libc.so") }, "the trace shows no libraries: \(libraries)")
        #expect(!libraries.contains { $0.contains("curl") || $0.contains("icu") || $0.contains("Foundation") || $0.contains("tss2") || $0.contains("qrencode") }, "\(libraries)")
    }

    /// `token` and `device-data` write nothing on stderr, so they ask nothing of it: the signing
    /// deadline's error is made both ways it may look (plain, coloured), and which one goes out is
    /// decided only if the deadline passes. A colour-capable TERM is set, so both are made.
    @Test(.enabled(if: ExternalTool.strace.shouldRun)) func softwareTokenAsksNothingOfTheTerminalOnStderr() throws {
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        cli.extraEnvironment["TERM"] = "xterm-256color"
        try cli.run("init", "--backend", "software", "-q")
        for arguments in [["token", "--device-id", "x"], ["device-data"]] {
            let trace = directory.file("trace")
            let traced = try ProcessRunner.run(ExternalTool.strace.rawValue, ["-f", "-e", "trace=ioctl", "-o", trace, cli.path] + arguments,
                                               environment: cli.environment)
            #expect(traced.status == 0 && traced.stdout.count > 20, "\(arguments): \(traced)")
            let calls = String(decoding: directory.read("trace") ?? [], as: UTF8.self)
            #expect(!calls.contains("ioctl(2,"), "\(arguments): \(calls)")
        }
    }

    /// `dpop-proof` is on the same path: a proof for a stored DPoP sign-in loads no HTTP stack.
    @Test(.enabled(if: ReferenceServer.shouldRun)) func dpopProofLoadsNeitherLibcurlNorICUNorTheTSS() throws {
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "1"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        let login = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 0 && login.stdout.contains(#""token_type":"DPoP""#), "\(login)")
        let libraries = try Self.loadedLibraries(cli, ["dpop-proof", "--method", "GET", "--url", server.url + "/resource"])
        #expect(libraries.contains { $0.contains("libc.so") }, "the trace shows no libraries: \(libraries)")
        #expect(!libraries.contains { $0.contains("curl") || $0.contains("icu") || $0.contains("Foundation") || $0.contains("tss2") || $0.contains("qrencode") }, "\(libraries)")
    }

    @Test(.enabled(if: Swtpm.shouldRun)) func tpmTokenLoadsTheTSSButNotLibcurl() throws {
        let tpm = try Swtpm()
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = tpm.tcti
        try cli.run("init", "--backend", "tpm", "-q")
        let libraries = try Self.loadedLibraries(cli, ["token", "--device-id", "x"])
        #expect(libraries.contains { $0.contains("libtss2-esys") } && libraries.contains { $0.contains("libtss2-tcti-swtpm") }, "\(libraries)")
        #expect(!libraries.contains { $0.contains("curl") || $0.contains("icu") }, "\(libraries)")
    }
}
