#!/usr/bin/python3
"""Runs a command on a pseudo-terminal and answers its prompts, like expect.

Usage: pty_session.py STEPS_JSON -- COMMAND [ARG...]
STEPS_JSON is a list of {"expect": REGEX, "send": TEXT}: wait (60 s at most,
time enough on a loaded machine) until REGEX appears in the output after the previous match, then type TEXT.
Prints {"exit": CODE, "transcript": OUTPUT, "timedOut": BOOL} as JSON.
"""
import json
import os
import pty
import re
import select
import sys
import time


def main():
    steps = json.loads(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    transcript = b""
    position = 0
    timed_out = False

    def read_some(timeout):
        nonlocal transcript
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(fd, 4096)
        except OSError:
            return False
        if not data:
            return False
        transcript += data
        return True

    for step in steps:
        pattern = re.compile(step["expect"].encode())
        deadline = time.time() + 60
        while True:
            match = pattern.search(transcript, position)
            if match:
                position = match.end()
                break
            if time.time() > deadline or not read_some(0.2):
                timed_out = True
                break
        if timed_out:
            break
        os.write(fd, step["send"].encode())
    deadline = time.time() + 60
    while time.time() < deadline and read_some(0.5):
        pass
    _, status = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    json.dump({"exit": code, "transcript": transcript.decode("utf-8", "replace"), "timedOut": timed_out}, sys.stdout)


if __name__ == "__main__":
    main()
