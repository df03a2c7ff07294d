import DevtrustTestSupport
import Foundation
import Testing

/// scripts/tpm_latency_proxy.py, which `make bench` puts between devtrust and swtpm to model a
/// TPM chip's latency: TPM commands and the control channel pass through it unchanged (tpm2-tools
/// and devtrust work through it), and it names each command it held, as the bench reports them.
/// Its latency table is scaled to zero here: the test checks what passes, not how long it waits.
@Suite(.enabled(if: Swtpm.shouldRun)) struct TPMLatencyProxyTests {
    @Test func commandsPassThroughAndAreNamed() throws {
        let tpm = try Swtpm()
        let scratch = TemporaryDirectory()
        let devtrust = DevtrustBinary.defaultPath
        let script = """
            import os, subprocess, sys
            sys.path.insert(0, sys.argv[1])
            from tpm_latency_proxy import LatencyProxy
            proxy = LatencyProxy(int(sys.argv[2]), scale=0)
            tools = {"PATH": "/usr/bin:/bin", "TPM2TOOLS_TCTI": proxy.tcti, "TSS2_LOG": "all+NONE"}
            random = subprocess.run(["tpm2_getrandom", "--hex", "16"], env=tools, capture_output=True, text=True)
            print("random", random.returncode, len(random.stdout))
            mine = dict(tools, DEVTRUST_TCTI=proxy.tcti, HOME=sys.argv[4], XDG_CACHE_HOME=sys.argv[4] + "/cache", XDG_CONFIG_HOME=sys.argv[4] + "/config")
            made = subprocess.run([sys.argv[3], "--keystore", sys.argv[4] + "/ks", "init", "--backend", "tpm", "-q"], env=mine, capture_output=True, text=True)
            print("init", made.returncode, made.stderr.strip())
            del proxy.commands[:]
            token = subprocess.run([sys.argv[3], "--keystore", sys.argv[4] + "/ks", "token", "--device-id", "x"], env=mine, capture_output=True, text=True)
            print("token", token.returncode, token.stdout.count("."), token.stderr.strip())
            print("commands", ",".join(proxy.commands))
            """
        let result = try ProcessRunner.run("/usr/bin/python3", ["-c", script, Repository.path("scripts"), String(tpm.port), devtrust, scratch.path],
                                           environment: ["PATH": "/usr/bin:/bin"])
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(result.status == 0 && lines.count == 4, "\(result)")
        guard lines.count == 4 else { return }
        #expect(lines[0] == "random 0 32", "\(result)")  // 16 bytes in hex, no newline
        #expect(lines[1].hasPrefix("init 0"), "\(result)")
        #expect(lines[2].hasPrefix("token 0 2"), "\(result)")
        #expect(lines[3] == "commands ReadPublic,Load,Sign,FlushContext", "\(result)")
    }
}
