#!/usr/bin/python3
"""Compares the wall time of two commands, alternating them run by run so that
both see the same machine state (this machine is noisy; back-to-back batches
are not comparable).

Usage: bench-compare.py [--runs N] [--warmup N] [--env NAME=VALUE]... -- CMD_A... --vs CMD_B...
Prints the median, p10 and p90 of each and the ratio of medians (A / B), and
with --json one JSON object.
"""
import json
import os
import statistics
import subprocess
import sys
import time


def run_once(command, environment):
    start = time.perf_counter_ns()
    completed = subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter_ns() - start
    if completed.returncode != 0:
        raise SystemExit("command failed (exit %d): %s" % (completed.returncode, " ".join(command)))
    return elapsed / 1e6


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main(arguments):
    runs, warmup, as_json, environment = 300, 20, False, dict(os.environ)
    while arguments and arguments[0] != "--":
        option = arguments.pop(0)
        if option == "--runs":
            runs = int(arguments.pop(0))
        elif option == "--warmup":
            warmup = int(arguments.pop(0))
        elif option == "--json":
            as_json = True
        elif option == "--env":
            name, _, value = arguments.pop(0).partition("=")
            environment[name] = value
        else:
            raise SystemExit("unknown option " + option)
    if not arguments or "--vs" not in arguments:
        raise SystemExit(__doc__)
    split = arguments.index("--vs")
    first, second = arguments[1:split], arguments[split + 1:]
    for _ in range(warmup):
        run_once(first, environment)
        run_once(second, environment)
    times = {0: [], 1: []}
    for index in range(runs):
        # Alternate which goes first, so neither always follows the other.
        order = (0, 1) if index % 2 == 0 else (1, 0)
        for which in order:
            times[which].append(run_once(first if which == 0 else second, environment))
    result = {
        "runs": runs,
        "cores": os.cpu_count(),
        "load": os.getloadavg()[0],
        "a": {"command": " ".join(first), "median_ms": statistics.median(times[0]),
              "p10_ms": percentile(times[0], 0.1), "p90_ms": percentile(times[0], 0.9)},
        "b": {"command": " ".join(second), "median_ms": statistics.median(times[1]),
              "p10_ms": percentile(times[1], 0.1), "p90_ms": percentile(times[1], 0.9)},
    }
    result["ratio"] = result["a"]["median_ms"] / result["b"]["median_ms"]
    if as_json:
        print(json.dumps(result))
        return
    for key in ("a", "b"):
        entry = result[key]
        print("%s: median %.2f ms (p10 %.2f, p90 %.2f)  %s" % (key.upper(), entry["median_ms"], entry["p10_ms"], entry["p90_ms"], entry["command"]))
    print("ratio A/B of medians: %.3f  (%d alternating runs each, %d cores, load %.2f)" % (result["ratio"], runs, result["cores"], result["load"]))


if __name__ == "__main__":
    main(sys.argv[1:])
