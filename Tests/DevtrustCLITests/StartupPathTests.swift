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
