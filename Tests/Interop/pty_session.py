#!/usr/bin/python3
"""Runs a command on a pseudo-terminal and answers its prompts, like expect.

Usage: pty_session.py [--size COLUMNSxROWS] STEPS_JSON -- COMMAND [ARG...]
--size sets the terminal's window size (a new pty has 0 x 0, which says nothing).
STEPS_JSON is a list of {"expect": REGEX, "send": TEXT}: wait (60 s at most,
time enough on a loaded machine) until REGEX appears in the output after the previous match, then type TEXT.
Prints {"exit": CODE, "transcript": OUTPUT, "timedOut": BOOL} as JSON. When a step timed
out, a command still running 60 s later (waiting at a prompt no step answers) is killed
(exit 128 + 9) so that the caller gets its report instead of waiting for ever.
"""
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time


def main():
    arguments = sys.argv[1:]
    size = None
    if arguments[0] == "--size":
        size = [int(number) for number in arguments[1].split("x")]
        arguments = arguments[2:]
    steps = json.loads(arguments[0])
    command = arguments[arguments.index("--") + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        if size:
            # Set by the child on its own terminal, before the command can ask.
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
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
    ended = False
    while time.time() < deadline and not ended:
        ended = not read_some(0.5)
    if timed_out and not ended:
        # A step's text never came and the command still runs: it waits for an answer no step gives.
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    json.dump({"exit": code, "transcript": transcript.decode("utf-8", "replace"), "timedOut": timed_out}, sys.stdout)


if __name__ == "__main__":
    main()
