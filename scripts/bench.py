#!/usr/bin/python3
"""make bench: devtrust against the reference tools, each pair in one run.

Commands are timed alternately, run by run, so that both see the same state
of this noisy machine; medians are compared. The goals (docs/performance.md,
thresholds in scripts/bench-thresholds.json):

  1. `devtrust token`, software key  <= jose jws sig (ES256, same claim size)
  2. `devtrust token`, TPM key       <= openssl pkeyutl -provider tpm2 -sign,
     on swtpm with a persistent SRK, and exactly ReadPublic (the parent,
     identified by name before it is authorized), Load, Sign, FlushContext
  3. in-process mint rate            >= 0.8 x openssl speed ecdsap256 sign rate
  4. peak RSS of `devtrust token`    <= 8 MiB (/usr/bin/time)
  5. `devtrust dpop-proof`, software key <= 0.75 x jose jws sig (the same
     header and claims), for a DPoP sign-in made at the reference server
  6. `devtrust token` through the system agent (`devtrust agent`, issue 28),
     software key, the socket round trip included <= jose jws sig
  7. `devtrust token` through the system agent, TPM key, on swtpm behind
     scripts/tpm_latency_proxy.py (a chip's time per command) <= 1.15 x the
     modelled Sign alone, and exactly one ReadPublic and one Sign per token
     (the key stays loaded; the ReadPublic checks it is still the object at its handle)

Exits 1 when a goal is missed. Usage:
  bench.py --binary RELEASE_DEVTRUST --bench RELEASE_DEVTRUST_BENCH --thresholds FILE
           [--runs N] [--json FILE]
"""
import base64
import collections
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from swtpm_process import running_swtpm
from tpm_latency_proxy import LatencyProxy

DEVICE_ID = "74070bae-df8c-42bf-8754-5173c237c936"
TPM_COMMANDS = {"00000131": "CreatePrimary", "00000157": "Load", "0000015d": "Sign", "00000165": "FlushContext",
                "00000173": "ReadPublic", "00000176": "StartAuthSession", "0000017a": "GetCapability"}


def timed(command, environment):
    start = time.perf_counter_ns()
    completed = subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter_ns() - start) / 1e6
    if completed.returncode != 0:
        raise SystemExit("bench: command failed (exit %d): %s\n%s" % (completed.returncode, " ".join(command), completed.stderr.decode(errors="replace")))
    return elapsed


def alternate(commands, environment, runs, warmup=20):
    """Median wall time (ms) of each command, run in turn, `runs` times each;
    the order flips every round, so that neither always follows the other."""
    samples = [[] for _ in commands]
    for index in range(warmup + runs):
        order = list(enumerate(commands))
        for position, command in (order if index % 2 == 0 else reversed(order)):
            elapsed = timed(command, environment)
            if index >= warmup:
                samples[position].append(elapsed)
    return [statistics.median(values) for values in samples]


def output_of(command, environment):
    completed = subprocess.run(command, env=environment, capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit("bench: command failed (exit %d): %s\n%s" % (completed.returncode, " ".join(command), completed.stderr))
    return completed.stdout, completed.stderr


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Report:
    def __init__(self):
        self.lines, self.results, self.missed = [], {}, []

    def goal(self, key, text, passed, **values):
        self.results[key] = dict(values, passed=passed)
        self.lines.append("%s  %s" % ("PASS" if passed else "MISS", text))
        if not passed:
            self.missed.append(key)


def own_directories(inherited, directory):
    """The environment of every command run here: the keystore, cache and configuration
    below `directory` (removed at the end). As root, devtrust's defaults are the machine's
    /var/lib/devtrust, /var/cache/devtrust (the posture cache every token writes) and
    /etc/devtrust; a variable inherited from the caller (DEVTRUST_CONFIG, XDG_CACHE_HOME)
    would name the caller's. The configuration is empty: embedded defaults."""
    environment = {name: value for name, value in inherited.items() if name not in ("DEVTRUST_KEYSTORE", "DEVTRUST_CONFIG")}
    config = os.path.join(directory, "config")
    os.makedirs(os.path.join(config, "devtrust"), mode=0o700)
    with open(os.path.join(config, "devtrust", "config.json"), "w") as file:
        file.write("{}\n")
    environment.update(HOME=directory, PATH="/usr/bin:/bin", DEVTRUST_KEYSTORE=os.path.join(directory, "keystore"),
                       XDG_CACHE_HOME=os.path.join(directory, "cache"), XDG_CONFIG_HOME=config,
                       XDG_DATA_HOME=os.path.join(directory, "data"))
    return environment


def jose_signing_the_same(jws, directory, name, environment):
    """The `jose jws sig` command that signs what `jws` (compact) carries, its claims under its
    protected header, with a P-256 JWK of its own: the reference each ratio is taken against."""
    header, payload, _ = jws.strip().split(".")
    claims = os.path.join(directory, name + "-claims.json")
    with open(claims, "wb") as file:
        file.write(b64url_decode(payload))
    jwk = os.path.join(directory, name + "-key.jwk")
    output_of(["jose", "jwk", "gen", "-i", '{"alg":"ES256"}', "-o", jwk], environment)
    template = json.dumps({"protected": json.loads(b64url_decode(header))})
    return ["jose", "jws", "sig", "-I", claims, "-k", jwk, "-s", template, "-c", "-o", "/dev/null"]


def goal_against_jose(report, goal, what, ours, jose, environment, runs, limit, note):
    """Times `ours` and `jose` alternately and reports the goal: `what` at most `limit` times jose's time."""
    devtrust_ms, jose_ms = alternate([ours, jose], environment, runs)
    ratio = devtrust_ms / jose_ms
    report.goal(goal, "%s %.2f ms vs jose jws sig %.2f ms: ratio %.2f (goal <= %.2f; %s)" % (what, devtrust_ms, jose_ms, ratio, limit, note),
                ratio <= limit, devtrust_ms=round(devtrust_ms, 3), reference_ms=round(jose_ms, 3), ratio=round(ratio, 3))


def software_token(args, directory, environment, thresholds, report):
    keystore = os.path.join(directory, "software")
    output_of([args.binary, "--keystore", keystore, "init", "--backend", "software"], environment)
    token, _ = output_of([args.binary, "--keystore", keystore, "token", "--device-id", DEVICE_ID], environment)
    jose = jose_signing_the_same(token, directory, "token", environment)
    ours = [args.binary, "--keystore", keystore, "token", "--device-id", DEVICE_ID]
    goal_against_jose(report, "software_token", "software token", ours, jose, environment, args.runs, thresholds["software_token_vs_jose_max_ratio"],
                      "%d-byte claims" % len(b64url_decode(token.strip().split(".")[1])))
    return keystore


def record_registration(keystore):
    """Writes a registration of this uid into a machine keystore's manifest, as the agent would
    record one at the end of `register`, so that `token` through the agent has one to name."""
    manifest = os.path.join(keystore, "keystore.json")
    with open(manifest) as file:
        state = json.load(file)
    state["registrations"] = [{"registrationId": DEVICE_ID, "server": "https://bench.invalid", "flowType": "REGISTRATION",
                               "keyFingerprint": state["key"]["fingerprint"], "registeredAt": "2026-01-01T00:00:00Z", "uid": os.getuid()}]
    with open(manifest + ".new", "w") as file:
        json.dump(state, file, indent=2)
    os.chmod(manifest + ".new", 0o600)
    os.rename(manifest + ".new", manifest)


@contextlib.contextmanager
def running_agent(args, directory, name, keystore, environment):
    """`devtrust agent` over `keystore`, its socket and log below `directory`; yields the socket.
    Its policy's rate is raised: a bench loop is what the default refuses."""
    policy = os.path.join(directory, name + "-agent.json")
    with open(policy, "w") as file:
        file.write('{"rateLimit": {"burst": 100000, "perSecond": 100000}}\n')
    os.chmod(policy, 0o644)
    socket_path = os.path.join(directory, name + "-run", "agent.sock")
    log = open(os.path.join(directory, name + "-agent.log"), "w")
    agent = subprocess.Popen([args.binary, "--keystore", keystore, "agent", "--socket", socket_path, "--policy", policy], env=environment,
                             stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(socket_path) and agent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        yield socket_path
    finally:
        agent.terminate()
        agent.wait()
        log.close()


def software_token_through_agent(args, directory, environment, thresholds, report):
    """`devtrust --agent SOCKET token` against jose signing the same claims: the client's process,
    the socket round trip and the agent's posture, claims and signature (issue 28). The machine
    keystore gets a registration for this user written into its manifest (as the agent would
    record one)."""
    keystore = os.path.join(directory, "agent-keystore")
    output_of([args.binary, "--keystore", keystore, "init", "--backend", "software"], environment)
    record_registration(keystore)
    with running_agent(args, directory, "software", keystore, environment) as socket_path:
        ours = [args.binary, "--agent", socket_path, "token"]
        token, _ = output_of(ours, environment)
        jose = jose_signing_the_same(token, directory, "agent", environment)
        goal_against_jose(report, "software_token_via_agent", "software token through the agent", ours, jose, environment, args.runs,
                          thresholds["software_token_via_agent_vs_jose_max_ratio"], "the socket round trip included")


def dpop_proof(args, directory, environment, thresholds, report):
    """`dpop-proof` for a DPoP-bound sign-in (made at the reference server, which is stopped
    before the timing: the command sends nothing) against jose signing the same proof."""
    keystore = os.path.join(directory, "dpop")
    dpop_environment = dict(environment, XDG_CACHE_HOME=os.path.join(directory, "dpop-cache"), DEVTRUST_TCTI="device:/nonexistent")
    server_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "ReferenceServer", "reference_server.py")
    server = subprocess.Popen(["/usr/bin/python3", server_script, "--port", "0", "--db", os.path.join(directory, "server.sqlite"), "--dpop",
                               "--device-interval", "1", "--device-approve-after", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = server.stdout.readline().strip().rsplit(" ", 1)[-1]
        output_of([args.binary, "--keystore", keystore, "init", "--backend", "software"], dpop_environment)
        output_of([args.binary, "--keystore", keystore, "login", "--device-code", "--server", url, "--client-id", "devtrust-app", "--json"],
                  dpop_environment)
    finally:
        server.kill()
        server.wait()
    ours = [args.binary, "--keystore", keystore, "dpop-proof", "--method", "GET", "--url", url + "/resource"]
    proof, _ = output_of(ours, dpop_environment)
    jose = jose_signing_the_same(proof, directory, "dpop", environment)
    goal_against_jose(report, "dpop_proof", "dpop-proof", ours, jose, dpop_environment, args.runs, thresholds["dpop_proof_vs_jose_max_ratio"],
                      "software key, the same header and claims")


def tpm_token(args, directory, environment, thresholds, report):
    if not shutil.which("swtpm"):
        report.goal("tpm_token", "TPM token: swtpm is not installed", False)
        return
    with running_swtpm(directory) as tcti:
        tpm_environment = dict(environment, DEVTRUST_TCTI=tcti, TPM2OPENSSL_TCTI=tcti, TSS2_LOG="all+NONE")
        keystore = os.path.join(directory, "tpm")
        _, notes = output_of([args.binary, "--keystore", keystore, "init", "--backend", "tpm"], tpm_environment)
        persistent = "0x81000001" in notes
        key_file = [os.path.join(keystore, name) for name in os.listdir(keystore) if name.startswith("key-")][0]
        # The commands of one token, from the TCTI's own debug log.
        _, log = output_of([args.binary, "--keystore", keystore, "token", "--device-id", DEVICE_ID], dict(tpm_environment, TSS2_LOG="tcti+debug"))
        lines = log.splitlines()
        commands = []
        for index, line in enumerate(lines):
            if "socket_xmit_buf() Writing" in line and index + 1 < len(lines):
                fields = lines[index + 1].split()
                code = fields[1][12:20] if len(fields) > 1 else ""
                commands.append(TPM_COMMANDS.get(code, code))
        digest = os.path.join(directory, "digest")
        with open(digest, "wb") as file:
            file.write(os.urandom(32))
        openssl = ["openssl", "pkeyutl", "-provider", "tpm2", "-provider", "default", "-sign", "-inkey", key_file, "-in", digest, "-out", "/dev/null"]
        ours = [args.binary, "--keystore", keystore, "token", "--device-id", DEVICE_ID]
        devtrust_ms, openssl_ms = alternate([ours, openssl], tpm_environment, max(50, args.runs // 3), warmup=5)
        ratio = devtrust_ms / openssl_ms
        limit = thresholds["tpm_token_vs_openssl_pkeyutl_max_ratio"]
        expected = thresholds["tpm_commands_per_token"]
        report.goal("tpm_token", "TPM token %.2f ms vs openssl pkeyutl -provider tpm2 %.2f ms: ratio %.2f (goal <= %.2f; swtpm, SRK %s)"
                    % (devtrust_ms, openssl_ms, ratio, limit, "persistent at 0x81000001" if persistent else "NOT persistent"),
                    ratio <= limit and persistent, devtrust_ms=round(devtrust_ms, 3), reference_ms=round(openssl_ms, 3), ratio=round(ratio, 3))
        report.goal("tpm_commands", "TPM commands per token: %s (goal %s)" % (", ".join(commands), ", ".join(expected)),
                    commands == expected, commands=commands)
        # What an authenticated signature would cost (issue 12): the self-test's
        # salted HMAC session (StartAuthSession, Load, ReadPublic, Sign, two
        # FlushContext) against the token's password session, in one process.
        sessions, _ = output_of([args.bench, "tpm-sessions", keystore, "200"], tpm_environment)
        report.lines.append("TPM signature in process: %s; `devtrust token` keeps the password session" % sessions.strip())
        report.results["tpm_sessions"] = sessions.strip()
        modelled_tpm_token(args, directory, tcti, keystore, tpm_environment, thresholds, report)


def modelled_tpm_token(args, directory, tcti, keystore, environment, thresholds, report):
    """`devtrust token` on a TPM with a chip's latency (scripts/tpm_latency_proxy.py in front of
    swtpm), against the modelled Sign alone: what a per-request token costs on a laptop, directly
    (it loads the key for each token) and through the system agent (issue 28), which keeps the key
    loaded in the TPM, so that a token costs one Sign (after a ReadPublic that checks the object at
    the key's handle)."""
    proxy = LatencyProxy(int(tcti.rsplit("=", 1)[1]))
    runs = 9
    try:
        modelled = dict(environment, DEVTRUST_TCTI=proxy.tcti, TPM2OPENSSL_TCTI=proxy.tcti)
        proxy.commands.clear()
        samples = [timed([args.binary, "--keystore", keystore, "token", "--device-id", DEVICE_ID], modelled) for _ in range(runs)]
        commands = proxy.commands[:len(proxy.commands) // runs]
        # The same TPM key as a machine key: the agent's keystore, with this user's registration.
        record_registration(keystore)
        with running_agent(args, directory, "tpm", keystore, modelled) as socket_path:
            through_agent = [args.binary, "--agent", socket_path, "token"]
            # The first token loads the key (its parent's ReadPublic, Load); the rest find it loaded.
            for _ in range(2):
                timed(through_agent, modelled)
            proxy.commands.clear()
            agent_samples = [timed(through_agent, modelled) for _ in range(runs)]
            agent_commands = list(proxy.commands)
    finally:
        proxy.close()
    token_ms, sign_ms = statistics.median(samples), proxy.delay_ms("Sign")
    modelled_ms = sum(proxy.delay_ms(name) for name in commands)
    report.lines.append("TPM token with a chip's latency (scripts/tpm_latency_proxy.py), directly: %.0f ms, %.2fx the modelled Sign alone (%.0f ms); "
                        "the table's time for its commands (%s) is %.0f ms" % (token_ms, token_ms / sign_ms, sign_ms, ", ".join(commands), modelled_ms))
    report.results["tpm_token_modelled"] = dict(token_ms=round(token_ms, 1), sign_ms=sign_ms, ratio=round(token_ms / sign_ms, 3),
                                                commands=commands, modelled_commands_ms=modelled_ms)
    agent_ms = statistics.median(agent_samples)
    ratio, limit = agent_ms / sign_ms, thresholds["tpm_token_via_agent_vs_modelled_sign_max_ratio"]
    expected = thresholds["tpm_commands_per_token_via_agent"]
    report.goal("tpm_token_via_agent", "TPM token through the agent with a chip's latency: %.0f ms, %.2fx the modelled Sign alone (%.0f ms) (goal <= %.2f; directly %.0f ms, %.2fx)"
                % (agent_ms, ratio, sign_ms, limit, token_ms, token_ms / sign_ms),
                ratio <= limit, devtrust_ms=round(agent_ms, 1), sign_ms=sign_ms, ratio=round(ratio, 3), direct_ms=round(token_ms, 1))
    counted = collections.Counter(agent_commands)
    report.goal("tpm_commands_via_agent", "TPM commands through the agent: %s in %d tokens (goal %s each)"
                % (", ".join("%d %s" % (counted[name], name) for name in dict.fromkeys(agent_commands)) or "none", runs, ", ".join(expected)),
                agent_commands == expected * runs, commands=agent_commands, tokens=runs)


def mint_rate(args, environment, thresholds, report):
    ours, reference = [], []
    for _ in range(3):
        out, _ = output_of([args.bench, "mint", "3"], environment)
        ours.append(float(re.search(r"(\d+) per second", out).group(1)))
        out, _ = output_of(["openssl", "speed", "-seconds", "3", "ecdsap256"], environment)
        reference.append(float(re.search(r"nistp256\)\s+\S+s\s+\S+s\s+([\d.]+)", out).group(1)))
    ours_rate, reference_rate = statistics.median(ours), statistics.median(reference)
    ratio = ours_rate / reference_rate
    limit = thresholds["mint_rate_vs_openssl_speed_min_ratio"]
    report.goal("mint_rate", "in-process mint %.0f tokens/s vs openssl speed ecdsap256 %.0f signs/s: ratio %.2f (goal >= %.2f; medians of 3 alternating 3 s rounds)"
                % (ours_rate, reference_rate, ratio, limit), ratio >= limit,
                devtrust_per_second=round(ours_rate), reference_per_second=round(reference_rate), ratio=round(ratio, 3))


def peak_rss(args, keystore, environment, thresholds, report):
    peaks = []
    for _ in range(20):
        _, err = output_of(["/usr/bin/time", "-f", "%M", args.binary, "--keystore", keystore, "token", "--device-id", DEVICE_ID], environment)
        peaks.append(int(err.strip().splitlines()[-1]))
    limit = thresholds["token_peak_rss_max_kib"]
    report.goal("peak_rss", "peak RSS of devtrust token %d KiB (max of 20 runs; median %d) (goal <= %d KiB)"
                % (max(peaks), statistics.median(peaks), limit), max(peaks) <= limit, max_kib=max(peaks), median_kib=statistics.median(peaks))


def phases(args, keystore, environment, report):
    """Where a token's time goes, process by process: each step adds to the one before."""
    steps = [
        ("process floor (/bin/true)", ["/bin/true"]),
        ("+ exec, dynamic loading, Swift runtime (devtrust --version)", [args.binary, "--version"]),
        ("+ keystore read, key decode, public key (devtrust pubkey)", [args.binary, "--keystore", keystore, "pubkey"]),
        ("+ posture, claims, sign, encode, write (devtrust token)", [args.binary, "--keystore", keystore, "token", "--device-id", DEVICE_ID]),
    ]
    medians = alternate([command for _, command in steps], environment, max(100, args.runs // 3))
    report.lines.append("")
    report.lines.append("phases (medians of alternating runs):")
    previous = 0.0
    for (name, _), median in zip(steps, medians):
        report.lines.append("  %6.2f ms  %+6.2f ms  %s" % (median, median - previous, name))
        previous = median
    report.results["phases_ms"] = {name: round(median, 3) for (name, _), median in zip(steps, medians)}


def main(argv):
    args = type("Arguments", (), {"runs": 300, "json": None, "binary": None, "bench": None, "thresholds": None})()
    while argv:
        option = argv.pop(0)
        if option in ("--binary", "--bench", "--thresholds", "--json"):
            setattr(args, option[2:], argv.pop(0))
        elif option == "--runs":
            args.runs = int(argv.pop(0))
        else:
            raise SystemExit(__doc__)
    if not (args.binary and args.bench and args.thresholds):
        raise SystemExit(__doc__)
    args.binary, args.bench = os.path.abspath(args.binary), os.path.abspath(args.bench)
    with open(args.thresholds) as file:
        thresholds = json.load(file)
    directory = tempfile.mkdtemp(prefix="devtrust-bench-")
    environment = own_directories(os.environ, directory)
    report = Report()
    try:
        header = "devtrust bench %s: %d cores, load %s, %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(),
                                                              " ".join(open("/proc/loadavg").read().split()[:3]), os.uname().release)
        print(header, flush=True)
        keystore = software_token(args, directory, environment, thresholds, report)
        software_token_through_agent(args, directory, environment, thresholds, report)
        dpop_proof(args, directory, environment, thresholds, report)
        tpm_token(args, directory, environment, thresholds, report)
        mint_rate(args, environment, thresholds, report)
        peak_rss(args, keystore, environment, thresholds, report)
        phases(args, keystore, environment, report)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print("\n".join(report.lines))
    report.results["machine"] = header
    if args.json:
        with open(args.json, "w") as file:
            json.dump(report.results, file, indent=2)
    if report.missed:
        print("bench: goals missed: " + ", ".join(report.missed))
        return 1
    print("bench: every goal met")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
