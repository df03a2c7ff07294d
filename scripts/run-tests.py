#!/usr/bin/python3
"""Runs the built test suites in several test processes at once.

Usage: run-tests.py [--jobs N] [--tier all|fast] [--swift SWIFT] [--log-dir DIR] [SUITE ...]
(SUITE: regular expressions; only the suites they find in Target.Suite run)

Most tests wait (on servers, browsers, swtpm, terminals), and a test process runs
only as many tests at once as the machine has cores (Swift Testing's tests run on
the cooperative thread pool, and these tests block it). So the suites are shared
out to N test processes (the test binary with --filter '^Target\\.Suite/'), the
longest first, after the durations of the last run (.build/test-durations.tsv).
A suite stays in one process, `.serialized` suites serialized, but for those of
SPLIT: their tests are shared out too, at most so many at once.

--tier fast runs the suites listed in Tests/fast-tier.txt, with
.build/fast_tier_guard.so (from Tests/Interop/fast_tier_guard.c) preloaded: a test that starts a process, opens
a network socket or sleeps fails there (see `make check`).

Each suite's output goes to DIR/SUITE.log; a failed suite's is printed whole.
Exits 1 when a suite fails, or when the tests run differ from `swift test list`, or,
with CI=true (where every tool a test needs is installed), when any test was skipped.
Skipped tests are listed at the end either way.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DURATIONS = os.path.join(REPOSITORY, ".build", "test-durations.tsv")
# Durations measured here, for a fresh clone's first run (refresh: copy DURATIONS over it).
SEED_DURATIONS = os.path.join(REPOSITORY, "Tests", "test-durations.tsv")
FAST_TIER = os.path.join(REPOSITORY, "Tests", "fast-tier.txt")
GUARD = os.path.join(REPOSITORY, ".build", "fast_tier_guard.so")
# Serialized suites whose tests may run in separate processes, at most this many at once:
# the real-browser tests, one browser per test (BrowserExtensionTests says why one at a
# time within a process), would otherwise be the whole run's last 5 minutes alone.
SPLIT = {"DevtrustCLITests.BrowserExtensionTests": 2}
RUN_LINE = re.compile(r"Test run with (\d+) tests? (?:in \d+ suites? )?(passed|failed)")
# Swift Testing counts a skipped test as run ("tests started or skipped"): its skip lines say which.
SKIP_LINE = re.compile(r"^\S+ (?:Test|Suite) (.+?) skipped(?:[.:]|$)", re.MULTILINE)


def guard_self_test():
    """The guard refuses each kind of call, in programs we did not write: else the fast tier
    would pass whatever its tests do (a guard not loaded, or a libc that calls around it)."""
    python = "/usr/bin/python3"
    probes = {"starting a process": ["/bin/sh", "-c", "/bin/true"],
              "system()": [python, "-c", "import os; os.system('true')"],
              "a socket": [python, "-c", "import socket; socket.socket()"],
              "a socket pair": [python, "-c", "import socket; socket.socketpair()"],
              "a host name look-up": [python, "-c", "import socket; socket.getaddrinfo('localhost', 80)"],
              "a sleep": [python, "-c", "import time; time.sleep(0.01)"],
              "a wait in select": [python, "-c", "import select; select.select([], [], [], 0.01)"],
              "a wait in poll": [python, "-c", "import select; select.poll().poll(10)"]}
    # Every C call the guard refuses (Tests/Interop/fast_tier_probe_c.c), and the Swift ways to
    # wait (Tests/Interop/fast_tier_probe.swift), both built by `make check`; each probe's "plain"
    # does what the tier allows, which must run through.
    swift_probe = os.path.join(REPOSITORY, ".build", "fast_tier_probe")
    c_probe = os.path.join(REPOSITORY, ".build", "fast_tier_probe_c")
    for probe in (swift_probe, c_probe):
        if not os.access(probe, os.X_OK):
            sys.exit(f"run-tests.py: {probe} is missing: `make check` builds it")
        plain = subprocess.run([probe, "plain"], capture_output=True, text=True)
        if plain.returncode != 0:
            sys.exit(f"run-tests.py: {probe} does not run (rebuild it: `make check`):\n{plain.stderr}")
        guarded = subprocess.run([probe, "plain"], env=dict(os.environ, LD_PRELOAD=GUARD), capture_output=True, text=True)
        if guarded.returncode != 0:
            sys.exit(f"run-tests.py: {GUARD} refused what the fast tier allows ({probe} plain):\n{guarded.stderr}")
    for mode in ["task-sleep", "task-sleep-tolerance", "semaphore-timeout", "group-timeout", "work-item-timeout", "timer-source",
                 "condition-timeout", "run-loop", "async-after", "thread-sleep"]:
        probes["Swift's " + mode] = [swift_probe, mode]
    for mode in ["sleep", "usleep", "nanosleep", "clock_nanosleep", "poll", "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait",
                 "epoll_pwait2", "pthread_cond_timedwait", "pthread_cond_clockwait", "sem_timedwait", "sem_clockwait", "sigtimedwait",
                 "fork", "_Fork", "vfork", "clone", "posix_spawn", "posix_spawnp", "execve", "execv", "execvp", "execvpe", "execl",
                 "execlp", "execle", "fexecve", "execveat", "system", "popen", "socket", "socket-unix", "socketpair", "getaddrinfo",
                 "gethostbyname", "gethostbyname2", "gethostbyname_r", "gethostbyname2_r", "gethostbyaddr", "getnameinfo"]:
        probes["C's " + mode] = [c_probe, mode]
    for what, command in probes.items():
        probe = subprocess.run(command, env=dict(os.environ, LD_PRELOAD=GUARD), capture_output=True, text=True)
        if probe.returncode == 0 or "fast tier:" not in probe.stderr:
            sys.exit(f"run-tests.py: {GUARD} let {' '.join(command)} through ({what}); "
                     "rebuild it from Tests/Interop/fast_tier_guard.c with `make check`")


def suites_of(listed):
    """Target.Suite -> its tests, from `swift test list` lines (Target.Suite/test(...))."""
    suites = {}
    for line in listed:
        suite, _, test = line.partition("/")
        if test:
            suites.setdefault(suite, []).append(line)
    return suites


def units_of(suites):
    """What one test process runs: (name, filter, tests expected, group), a whole suite, or
    one test of a SPLIT suite (its group is the suite, whose cap SPLIT gives)."""
    units = []
    for suite, tests in suites.items():
        if suite in SPLIT:
            for test in tests:
                function = test.partition("/")[2].partition("(")[0]
                units.append((suite + "/" + function, "^" + re.escape(suite + "/" + function) + r"\(", 1, suite))
        else:
            units.append((suite, "^" + re.escape(suite) + "/", len(tests), None))
    return units


def read_durations():
    """The seed's durations, then this checkout's last run's over them."""
    durations = {}
    for path in (SEED_DURATIONS, DURATIONS):
        try:
            with open(path) as recorded:
                for line in recorded:
                    name, _, seconds = line.rstrip("\n").partition("\t")
                    try:
                        durations[name] = float(seconds)
                    except ValueError:
                        pass
        except FileNotFoundError:
            pass
    return durations


def ordered(units, durations):
    """Longest first; a unit no recorded duration names (a new suite) last."""
    def weight(unit):
        return durations.get(unit[0], 0)
    return sorted(units, key=weight, reverse=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("DEVTRUST_TEST_JOBS", "4")))
    parser.add_argument("--tier", choices=["all", "fast"], default="all")
    parser.add_argument("--swift", default=os.environ.get("SWIFT", "swift"))
    parser.add_argument("--log-dir")
    parser.add_argument("only", nargs="*", metavar="SUITE")
    options = parser.parse_args()
    if options.jobs < 1:
        sys.exit("run-tests.py: --jobs must be at least 1")

    listing = subprocess.run([options.swift, "test", "list", "--skip-build"], cwd=REPOSITORY,
                             capture_output=True, text=True)
    if listing.returncode != 0:
        sys.exit("run-tests.py: `swift test list --skip-build` failed (build the tests first: "
                 "swift build --build-tests):\n" + listing.stderr)
    suites = suites_of(listing.stdout.splitlines())
    # The test binary itself, not `swift test`: the fast tier's guard must not see swift-test start it.
    bin_path = subprocess.run([options.swift, "build", "--show-bin-path"], cwd=REPOSITORY,
                              capture_output=True, text=True).stdout.strip()
    test_binary = os.path.join(bin_path, "devtrustPackageTests.xctest")
    if not os.access(test_binary, os.X_OK):
        sys.exit("run-tests.py: " + test_binary + " is missing: build the tests first (swift build --build-tests)")
    environment = dict(os.environ)
    if options.tier == "fast":
        with open(FAST_TIER) as listed:
            chosen = [line.strip() for line in listed if line.strip() and not line.startswith("#")]
        unknown = [name for name in chosen if name not in suites]
        if unknown:
            sys.exit("run-tests.py: Tests/fast-tier.txt names suites that do not exist: " + ", ".join(unknown))
        suites = {name: suites[name] for name in chosen}
        if not os.path.exists(GUARD):
            sys.exit("run-tests.py: " + GUARD + " is missing: run `make check`, which builds it")
        guard_self_test()
        environment["LD_PRELOAD"] = GUARD
        # A refused call aborts the test process; Swift's backtracer would start a process of its own.
        environment["SWIFT_BACKTRACE"] = "enable=no"

    # SUITE patterns choose among the tier's suites.
    if options.only:
        suites = {name: tests for name, tests in suites.items() if any(re.search(pattern, name) for pattern in options.only)}
        if not suites:
            sys.exit("run-tests.py: no suite matches " + " ".join(options.only))
    log_dir = options.log_dir or tempfile.mkdtemp(prefix="devtrust-tests.")
    os.makedirs(log_dir, exist_ok=True)
    durations = read_durations()
    queue = ordered(units_of(suites), durations)
    unit_count = len(queue)
    running = {}
    lock = threading.Lock()
    results = {}
    skipped = []
    started = time.monotonic()
    total = sum(len(tests) for tests in suites.values())
    print(f"== {total} tests in {len(suites)} suites, {options.jobs} test processes; logs in {log_dir}", flush=True)

    ready = threading.Condition(lock)

    def take():
        """The next unit whose group is under its cap, waiting while only capped ones are left."""
        with ready:
            while queue:
                for index, unit in enumerate(queue):
                    group = unit[3]
                    if group is None or running.get(group, 0) < SPLIT[group]:
                        if group is not None:
                            running[group] = running.get(group, 0) + 1
                        return queue.pop(index)
                ready.wait()
            return None

    def worker():
        while True:
            unit = take()
            if unit is None:
                return
            suite, test_filter, expected, group = unit
            log_path = os.path.join(log_dir, suite.replace("/", "-") + ".log")
            begun = time.monotonic()
            with open(log_path, "w") as log:
                run = subprocess.run([test_binary, "--testing-library", "swift-testing", "--filter", test_filter],
                                     cwd=REPOSITORY, env=environment, stdout=log, stderr=subprocess.STDOUT)
            if group is not None:
                with ready:
                    running[group] -= 1
                    ready.notify_all()
            seconds = time.monotonic() - begun
            with open(log_path, errors="replace") as log:
                text = log.read()
            summary = RUN_LINE.findall(text)
            skips = [suite.partition("/")[0] + "/" + name for name in SKIP_LINE.findall(text)]
            ran = int(summary[-1][0]) if summary else 0
            passed = run.returncode == 0 and bool(summary) and summary[-1][1] == "passed"
            if passed and ran != expected:
                passed = False
                text += f"\nrun-tests.py: ran {ran} tests of {suite}; `swift test list` has {expected}\n"
            with lock:
                results[suite] = (passed, ran, seconds)
                skipped.extend(skips)
                mark = "✔" if passed else "✘"
                print(f"{mark} {suite}: {ran} tests in {seconds:.1f} s"
                      f" ({len(results)}/{unit_count}, {time.monotonic() - started:.0f} s)", flush=True)
                if not passed:
                    print(text, flush=True)

    threads = [threading.Thread(target=worker) for _ in range(options.jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    if options.tier == "all":
        durations.update({suite: seconds for suite, (_, _, seconds) in results.items()})
        os.makedirs(os.path.dirname(DURATIONS), exist_ok=True)
        with open(DURATIONS, "w") as recorded:
            for suite, seconds in sorted(durations.items()):
                recorded.write(f"{suite}\t{seconds:.1f}\n")

    failed = sorted(suite for suite, (passed, *_) in results.items() if not passed)
    ran = sum(count for _, count, _ in results.values())
    elapsed = time.monotonic() - started
    slowest = sorted(results.items(), key=lambda item: item[1][2], reverse=True)[:8]
    print("== slowest: " + ", ".join(f"{suite.split('.', 1)[-1]} {seconds:.0f} s" for suite, (_, _, seconds) in slowest))
    if skipped:
        print(f"== {len(skipped)} skipped: " + ", ".join(sorted(skipped)))
    if failed:
        print(f"✘ {len(failed)} of {unit_count} test runs failed after {elapsed:.0f} s: " + ", ".join(failed))
        sys.exit(1)
    if ran != total:
        print(f"✘ ran {ran} tests; `swift test list` has {total}")
        sys.exit(1)
    if skipped:
        if os.environ.get("CI") == "true":
            print("✘ tests were skipped on CI, where every tool the tests need is installed: each must run")
            sys.exit(1)
    print(f"✔ {ran - len(skipped)} tests in {len(suites)} suites passed after {elapsed:.0f} s"
          + (f", {len(skipped)} skipped" if skipped else ""))


if __name__ == "__main__":
    main()
