#!/usr/bin/python3
"""Runs a command in a pseudo-terminal and, at each prompt it shows (a line
ending in ":" or "]"), searches the process's memory (/proc/PID/mem, every
readable mapping) for byte strings, then answers the prompt with Enter.

Usage: memory_scan.py PROMPTS COMMAND... -- NAME=HEX...
       memory_scan.py stderr COMMAND... -- NAME=HEX...
The second form is for a command that asks nothing: its stderr is a pipe
already full, so the command stops at the first thing it reports (as behind
a slow reader); the scan runs there, then the pipe is drained.
Prints one JSON object: {"prompts": [{"text": "...", "found": {"NAME": ["[heap]", ...]}}, ...]};
"found" is null when the process's memory cannot be read at all.
"""
import fcntl
import json
import os
import pty
import re
import select
import subprocess
import sys
import time


def scan(pid, needles):
    """{"NAME": [mappings]}; None when this process may not read the other's memory."""
    found = {}
    try:
        maps, memory = open("/proc/%d/maps" % pid), open("/proc/%d/mem" % pid, "rb", 0)
        memory.seek(0)
        maps.read(1)
        maps.seek(0)
    except PermissionError:
        return None
    with maps, memory:
        for line in maps:
            match = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)", line)
            start, end, permissions, name = int(match.group(1), 16), int(match.group(2), 16), match.group(3), match.group(4)
            if "r" not in permissions or name.startswith("[v"):
                continue
            try:
                memory.seek(start)
                data = memory.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            for label, needle in needles.items():
                if needle in data:
                    found.setdefault(label, []).append(name or "anonymous")
    return found


WRITE_SYSCALL = {"x86_64": 1, "aarch64": 64}.get(os.uname().machine)


def blocked_writing_stderr(pid):
    """Whether the process sleeps in write(2, ...): by its wait channel, or by
    the system call it is in where the kernel does not name wait channels."""
    try:
        with open("/proc/%d/wchan" % pid) as wchan:
            if "pipe_write" in wchan.read():
                return True
        with open("/proc/%d/syscall" % pid) as syscall:
            fields = syscall.read().split()
        return len(fields) > 1 and fields[0] == str(WRITE_SYSCALL) and int(fields[1], 16) == 2
    except (OSError, ValueError):
        return False


def scan_at_stalled_stderr(command, needles):
    """The scan while the command is blocked writing to its stderr."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETFL, os.O_NONBLOCK)
    filler = b"." * 4096
    try:
        while True:
            os.write(writer, filler)
    except BlockingIOError:
        pass
    fcntl.fcntl(writer, fcntl.F_SETFL, 0)
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=writer)
    os.close(writer)
    report, deadline = [], time.time() + 60
    while time.time() < deadline and process.poll() is None:
        if blocked_writing_stderr(process.pid):
            report.append({"text": "stderr", "found": scan(process.pid, needles)})
            break
        time.sleep(0.05)
    drained = b""
    while True:
        chunk = os.read(reader, 65536)
        if not chunk:
            break
        drained += chunk
    process.wait()
    if report:
        lines = drained.lstrip(b".").decode(errors="replace").strip().splitlines()
        report[0]["text"] = lines[0] if lines else ""
    return report


def main(arguments):
    split = arguments.index("--")
    command, needles = arguments[1:split], dict(item.split("=", 1) for item in arguments[split + 1:])
    needles = {label: bytes.fromhex(value) for label, value in needles.items()}
    if arguments[0] == "stderr":
        print(json.dumps({"prompts": scan_at_stalled_stderr(command, needles)}))
        return
    wanted = int(arguments[0])
    pid, descriptor = pty.fork()
    if pid == 0:
        os.execv(command[0], command)
    report, buffered, deadline = [], b"", time.time() + 60
    while time.time() < deadline and len(report) < wanted:
        ready, _, _ = select.select([descriptor], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(descriptor, 4096)
        except OSError:
            break
        if not chunk:
            break
        buffered += chunk
        text = buffered.decode(errors="replace").rstrip()
        if text.endswith(":") or text.endswith("]"):
            time.sleep(0.2)  # the process is now blocked reading the answer
            report.append({"text": text.splitlines()[-1], "found": scan(pid, needles)})
            buffered = b""
            os.write(descriptor, b"\r")
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    print(json.dumps({"prompts": report}))


if __name__ == "__main__":
    main(sys.argv[1:])
