#!/usr/bin/python3
"""Runs a command in a pseudo-terminal and, at each prompt it shows (a line
ending in ":" or "]"), searches the process's memory (/proc/PID/mem, every
readable mapping) for byte strings, then answers the prompt with Enter.

Usage: memory_scan.py PROMPTS COMMAND... -- NEEDLE...
       memory_scan.py stderr COMMAND... -- NEEDLE...
The second form is for a command that asks nothing: its stderr is a pipe
already full, so the command stops at the first thing it reports (as behind
a slow reader); the scan runs there, then the pipe is drained.

A NEEDLE is NAME=HEX (the whole byte string, reported once per mapping that
holds it) or NAME~W=HEX: any W or more consecutive bytes of it, at any offset
(what is left of a freed buffer whose start the allocator overwrote, a few
bytes a register spill left on a stack), reported once per run found, with its
length: {"mapping": "[heap]", "length": 16}.
A NEEDLE @PATH (a glob, read when the scan runs, so that it can name a key
devtrust has just written) is a software key's PKCS#8 PEM file, which gives
four: "scalar" and "scalar-reversed" (the private key, and its bytes in the
order a BIGNUM holds them on a little-endian machine), any 8 bytes of them;
"pem-text" and "pem-base64", the base64 characters that encode the scalar in
the file's text (with its line break) and joined as a PEM decoder joins them,
any 12 of them. The scalar is read by python3-cryptography, not devtrust.
Prints one JSON object: {"prompts": [{"text": "...", "found": {"NAME": [...]}}, ...]};
"found" is null when the process's memory cannot be read at all.
"""
import base64
import fcntl
import glob
import json
import os
import pty
import re
import select
import subprocess
import sys
import time


def key_needles(pattern):
    """The needles of a software key's PKCS#8 PEM file (see above)."""
    from cryptography.hazmat.primitives import serialization
    paths = glob.glob(pattern)
    if len(paths) != 1:
        raise SystemExit("memory_scan.py: %s names %d files" % (pattern, len(paths)))
    text = open(paths[0], "rb").read()
    scalar = serialization.load_pem_private_key(text, None).private_numbers().private_value.to_bytes(32, "big")
    lines, offset, body, places = text.split(b"\n"), 0, b"", []
    inside = False
    for line in lines:
        content = line.strip(b" \t\r")
        if content == b"-----BEGIN PRIVATE KEY-----":
            inside = True
        elif content == b"-----END PRIVATE KEY-----":
            inside = False
        elif inside:
            start = offset + line.index(content) if content else offset
            body += content
            places += range(start, start + len(content))
        offset += len(line) + 1
    der = base64.b64decode(body)
    at = der.find(b"\x04\x20" + scalar) + 2
    # The base64 characters holding bits of the scalar (6 bits each).
    first, last = 8 * at // 6, (8 * (at + 32) - 1) // 6
    return {
        "scalar": (scalar, 8), "scalar-reversed": (scalar[::-1], 8),
        "pem-text": (text[places[first]:places[last] + 1], 12), "pem-base64": (body[first:last + 1], 12),
    }


def runs(data, secret, window):
    """{address in data: length} of every run of >= window bytes of secret.
    Every such run holds one of the secret's blocks of ceil(window / 2) bytes
    at a multiple of that size, so those blocks are searched, then extended."""
    block = (window + 1) // 2
    found = {}
    for start in range(0, len(secret) - block + 1, block):
        at = data.find(secret[start:start + block])
        while at >= 0:
            before = 0
            while before < start and at - before > 0 and data[at - before - 1] == secret[start - before - 1]:
                before += 1
            after = block
            while start + after < len(secret) and at + after < len(data) and data[at + after] == secret[start + after]:
                after += 1
            if before + after >= window:
                found[at - before] = max(found.get(at - before, 0), before + after)
            at = data.find(secret[start:start + block], at + 1)
    return found


def scan(pid, needles):
    """{"NAME": [mappings]}; None when this process may not read the other's memory."""
    found = {}
    for label, (needle, window) in list(needles.items()):
        if label.startswith("@"):
            del needles[label]
            needles.update(key_needles(label[1:]))
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
            for label, (needle, window) in needles.items():
                if window is None:
                    if needle in data:
                        found.setdefault(label, []).append(name or "anonymous")
                    continue
                for _, length in sorted(runs(data, needle, window).items()):
                    found.setdefault(label, []).append({"mapping": name or "anonymous", "length": length})
    return found


WRITE_SYSCALL = {"x86_64": 1, "aarch64": 64}.get(os.uname().machine)
READ_SYSCALL = {"x86_64": 0, "aarch64": 63}.get(os.uname().machine)


def blocked_reading_terminal(pid):
    """Whether the process sleeps in read(2) on its terminal; None when this
    kernel does not say (no /proc/PID/syscall)."""
    try:
        with open("/proc/%d/syscall" % pid) as syscall:
            fields = syscall.read().split()
    except OSError:
        return None
    if len(fields) < 2 or fields[0] != str(READ_SYSCALL):
        return False
    try:
        return os.readlink("/proc/%d/fd/%d" % (pid, int(fields[1], 16))).startswith("/dev/pts/")
    except (OSError, ValueError):
        return False


def wait_until_reading_terminal(pid):
    """Until the process has shown its prompt and sleeps reading the answer (a
    fixed pause would scan a process still on its way there on a loaded machine)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        state = blocked_reading_terminal(pid)
        if state is None:
            time.sleep(0.2)
            return
        if state:
            return
        time.sleep(0.01)


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
    command, needles = arguments[1:split], {}
    for item in arguments[split + 1:]:
        if item.startswith("@"):
            needles[item] = (None, None)
            continue
        label, value = item.split("=", 1)
        label, _, window = label.partition("~")
        needles[label] = (bytes.fromhex(value), int(window) if window else None)
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
            wait_until_reading_terminal(pid)
            report.append({"text": text.splitlines()[-1], "found": scan(pid, needles)})
            buffered = b""
            os.write(descriptor, b"\r")
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    print(json.dumps({"prompts": report}))


if __name__ == "__main__":
    main(sys.argv[1:])
