#!/usr/bin/python3
"""Runs a command as this process's child, prints its pid on stdout, and exits as it did
(128 + N when signal N ended it).

Usage: as_child.py COMMAND [ARGS...]

For programs that close every descriptor they did not make, such as systemd-socket-activate:
Foundation's Process takes the end of a descriptor it gave its child for the child's end, and then
waits for that child, and for no other, until it does end (swift-corelibs-foundation). Run as
this script's child, the program closes nothing of Foundation's.
"""
import subprocess
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    child = subprocess.Popen(sys.argv[1:])
    print(child.pid, flush=True)
    status = child.wait()
    sys.exit(128 - status if status < 0 else status)


if __name__ == "__main__":
    main()
