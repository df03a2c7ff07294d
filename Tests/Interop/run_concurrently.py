#!/usr/bin/python3
"""Starts COUNT copies of a command at once and prints what each printed on stdout, one line each
(in the order they were started), after all ended; exits 1 when any failed, after printing their
stderr. (A shell's `&` and `wait` are not used: under some process supervisors a shell's `wait`
never sees its children end.)

Usage: run_concurrently.py COUNT -- COMMAND [ARGS...]
"""
import subprocess
import sys


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    count, command = int(sys.argv[1]), sys.argv[3:]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(count)]
    failed = False
    outputs = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        outputs.append(out.decode().strip())
        if run.returncode != 0:
            failed = True
            sys.stderr.write("exit %d: %s\n" % (run.returncode, err.decode()))
    for output in outputs:
        print(output)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
