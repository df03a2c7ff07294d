#!/usr/bin/python3
"""make test, make demo, make bench: the run leaves the machine's devtrust alone.

    untouched.py [--label NAME] -- COMMAND [ARG...]
    untouched.py --self-test

Runs COMMAND between two snapshots of the directories devtrust uses by
default: the system's /var/lib/devtrust (keystore), /var/cache/devtrust
(cache) and /etc/devtrust (configuration), and the invoking user's
~/.local/share/devtrust, ~/.cache/devtrust and ~/.config/devtrust (for $HOME,
the real user's home and, under sudo, SUDO_USER's; and $XDG_DATA_HOME,
$XDG_CACHE_HOME, $XDG_CONFIG_HOME's devtrust when they are set). A snapshot
holds every entry of each tree: its name, type, mode, owner, size, mtime,
a SHA-256 of a regular file's bytes, a symlink's target; a tree that is
absent must stay absent. On an administrator's enrolled machine these are
the device's real key, registrations and configuration: a test, the demo or
a benchmark that misses one override of its own directories changes them.

Exits with COMMAND's status when it failed, else 1 when a tree changed
(naming each change: created, removed, changed and how), else 0.
--self-test checks the snapshot and the comparison on scratch trees.
"""
import hashlib
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile

USAGE = "usage: untouched.py [--label NAME] -- COMMAND [ARG...] | --self-test"
SYSTEM = ["/var/lib/devtrust", "/var/cache/devtrust", "/etc/devtrust"]
PER_USER = [".local/share/devtrust", ".cache/devtrust", ".config/devtrust"]
XDG = {"XDG_DATA_HOME": "devtrust", "XDG_CACHE_HOME": "devtrust", "XDG_CONFIG_HOME": "devtrust"}


def homes(environment):
    """The invoking user's home directories: $HOME, the real user's, SUDO_USER's."""
    found = []
    if environment.get("HOME", "").startswith("/"):
        found.append(environment["HOME"])
    users = [os.getuid()]
    if environment.get("SUDO_USER"):
        try:
            users.append(pwd.getpwnam(environment["SUDO_USER"]).pw_uid)
        except KeyError:
            pass
    for uid in users:
        try:
            found.append(pwd.getpwuid(uid).pw_dir)
        except KeyError:
            pass
    return found


def watched(environment):
    """Every directory the run must leave as it was, each once."""
    trees = list(SYSTEM)
    for home in homes(environment):
        trees += [os.path.join(home, relative) for relative in PER_USER]
    for variable, name in XDG.items():
        if environment.get(variable, "").startswith("/"):
            trees.append(os.path.join(environment[variable], name))
    unique = []
    for tree in trees:
        tree = os.path.normpath(tree)
        if tree not in unique:
            unique.append(tree)
    return unique


def describe(path):
    """What is at path, not following a symlink; None when nothing is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return {"error": error.strerror}
    entry = {"type": stat.S_IFMT(info.st_mode), "mode": stat.S_IMODE(info.st_mode), "owner": (info.st_uid, info.st_gid),
             "size": info.st_size, "mtime": info.st_mtime_ns}
    if stat.S_ISLNK(info.st_mode):
        entry["target"] = os.readlink(path)
    elif stat.S_ISREG(info.st_mode):
        # O_NOFOLLOW | O_NONBLOCK: what is opened is the file that was looked at, and never blocks.
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(descriptor, "rb") as file:
                entry["sha256"] = hashlib.file_digest(file, "sha256").hexdigest()
        except OSError as error:
            entry["sha256"] = "unreadable: " + (error.strerror or str(error))
    return entry


def snapshot(trees):
    """{tree: None when absent, else {relative path: entry}} (the tree itself under ".")."""
    taken = {}
    for tree in trees:
        top = describe(tree)
        if top is None:
            taken[tree] = None
            continue
        entries = {".": top}
        # A tree that is a symlink is recorded as one, and what it leads to is walked too.
        base = os.path.realpath(tree) if top.get("type") == stat.S_IFLNK else tree
        if os.path.isdir(base):
            for directory, subdirectories, files in os.walk(base, onerror=lambda error: None):
                for name in subdirectories + files:
                    path = os.path.join(directory, name)
                    entries[os.path.relpath(path, base)] = describe(path)
        taken[tree] = entries
    return taken


def difference(old, new):
    """Each entry the run changed, one line each."""
    def shown(entry):
        if "error" in entry:
            return "unreadable (%s)" % entry["error"]
        kind = {stat.S_IFDIR: "directory", stat.S_IFREG: "file", stat.S_IFLNK: "symlink"}.get(entry["type"], "special file")
        return "%s %04o, %d bytes" % (kind, entry["mode"], entry["size"])

    def how(before, after):
        said = []
        for key, name in [("type", "type"), ("mode", "mode"), ("owner", "owner"), ("size", "size"),
                          ("sha256", "content"), ("target", "target"), ("mtime", "mtime"), ("error", "error")]:
            if before.get(key) != after.get(key):
                if key == "mode":
                    said.append("mode %04o -> %04o" % (before.get("mode", 0), after.get("mode", 0)))
                elif key in ("size", "owner", "target"):
                    said.append("%s %s -> %s" % (name, before.get(key), after.get(key)))
                else:
                    said.append(name)
        return ", ".join(said)

    changes = []
    for tree in sorted(set(old) | set(new)):
        before, after = old.get(tree), new.get(tree)
        if before is None and after is None:
            continue
        if before is None:
            listed = sorted(name for name in after if name != ".")
            changes.append("%s: created (it was absent)%s" % (tree, (", with " + ", ".join(listed)) if listed else ""))
            continue
        if after is None:
            changes.append("%s: removed" % tree)
            continue
        for name in sorted(set(before) | set(after)):
            path = tree if name == "." else os.path.join(tree, name)
            if name not in before:
                changes.append("%s: created (%s)" % (path, shown(after[name])))
            elif name not in after:
                changes.append("%s: removed" % path)
            elif before[name] != after[name]:
                changes.append("%s: changed (%s)" % (path, how(before[name], after[name])))
    return changes


def run(label, command):
    trees = watched(os.environ)
    before = snapshot(trees)
    # Said first, and nothing after a run that passed: the command's own closing lines stay last.
    print("%s must leave these as they are: %s" % (label, ", ".join(trees)), flush=True)
    # Ctrl-C reaches the command (the terminal's process group); the comparison still runs after it.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = subprocess.call(command, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    finally:
        signal.signal(signal.SIGINT, previous)
    if status < 0:
        status = 128 - status
    changes = difference(before, snapshot(trees))
    if changes:
        print("%s changed the machine's devtrust directories (every test, the demo and the benchmarks must name "
              "their own keystore, cache and configuration; see docs/usage.md):" % label, file=sys.stderr)
        for change in changes:
            print("  " + change, file=sys.stderr)
        return status if status != 0 else 1
    return status


def self_test():
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="untouched-self-test.") as scratch:
        home = os.path.join(scratch, "home")
        trees = watched({"HOME": home, "XDG_CACHE_HOME": os.path.join(scratch, "xdg-cache")})
        expect(trees[:3] == SYSTEM, "the system's directories are watched: %s" % trees)
        for relative in PER_USER:
            expect(os.path.join(home, relative) in trees, "%s is watched: %s" % (relative, trees))
        expect(os.path.join(scratch, "xdg-cache", "devtrust") in trees, "XDG_CACHE_HOME's devtrust is watched: %s" % trees)

        keystore, cache, config = (os.path.join(scratch, name) for name in ("keystore", "cache", "config"))
        os.makedirs(keystore, mode=0o700)
        with open(os.path.join(keystore, "device-key.pem"), "wb") as file:
            file.write(b"key")
        os.symlink("device-key.pem", os.path.join(keystore, "link"))
        os.mkfifo(os.path.join(keystore, "fifo"))
        os.makedirs(config)
        scratch_trees = [keystore, cache, config]
        first = snapshot(scratch_trees)
        expect(difference(first, snapshot(scratch_trees)) == [], "an untouched snapshot is the same again")

        def after(change):
            old = snapshot(scratch_trees)
            change()
            return difference(old, snapshot(scratch_trees))

        def write(path, data, mtime=None):
            with open(path, "wb") as file:
                file.write(data)
            if mtime is not None:
                os.utime(path, ns=(mtime, mtime))

        changes = after(lambda: (os.makedirs(cache), write(os.path.join(cache, "clock.json"), b"{}")))
        expect(changes == ["%s: created (it was absent), with clock.json" % cache], "a created tree: %s" % changes)
        key = os.path.join(keystore, "device-key.pem")
        mtime = os.lstat(key).st_mtime_ns
        changes = after(lambda: write(key, b"KEY", mtime))
        expect(changes == ["%s: changed (content)" % key], "the same size and mtime, other bytes: %s" % changes)
        os.chmod(key, 0o600)
        changes = after(lambda: os.chmod(key, 0o640))
        expect(changes == ["%s: changed (mode 0600 -> 0640)" % key], "a mode: %s" % changes)
        changes = after(lambda: write(os.path.join(config, "config.json"), b"{}"))
        expect(any(change.startswith(os.path.join(config, "config.json") + ": created (file") for change in changes)
               and any(change.startswith(config + ": changed (mtime") for change in changes), "a new file: %s" % changes)
        changes = after(lambda: os.remove(os.path.join(config, "config.json")))
        expect(os.path.join(config, "config.json") + ": removed" in changes, "a removed file: %s" % changes)
        changes = after(lambda: (os.remove(os.path.join(keystore, "link")), os.symlink("fifo", os.path.join(keystore, "link"))))
        expect(any("link: changed" in change and "target" in change for change in changes), "a symlink's target: %s" % changes)
        changes = after(lambda: subprocess.call(["rm", "-rf", cache]))
        expect(changes == ["%s: removed" % cache], "a removed tree: %s" % changes)

        # The wrapper: the command's failure wins; else a change fails the run; else 0.
        environment = dict(os.environ, HOME=home)
        command = [sys.executable, os.path.abspath(__file__), "--label", "self-test", "--"]
        planted = os.path.join(home, ".cache", "devtrust")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "env": environment}
        result = subprocess.run(command + ["true"], **quiet)
        expect(result.returncode == 0, "a run that writes nothing passes: %s" % result)
        result = subprocess.run(command + ["sh", "-c", 'mkdir -p "$1" && echo "{}" > "$1/posture.json"', "sh", planted], **quiet)
        expect(result.returncode == 1 and (planted + ": created (it was absent), with posture.json").encode() in result.stderr,
               "a run that writes ~/.cache/devtrust fails, naming it: %s" % result)
        result = subprocess.run(command + ["sh", "-c", 'echo "{ }" > "$1/posture.json"; exit 3', "sh", planted], **quiet)
        expect(result.returncode == 3 and (planted + "/posture.json: changed").encode() in result.stderr,
               "a failed run keeps its status and still names the change: %s" % result)
    for failure in failures:
        print("untouched.py self-test: FAILED: " + failure, file=sys.stderr)
    if not failures:
        print("untouched.py self-test: passed")
    return 1 if failures else 0


def main(arguments):
    if arguments == ["--self-test"]:
        return self_test()
    label = "the run"
    if len(arguments) >= 2 and arguments[0] == "--label":
        label, arguments = arguments[1], arguments[2:]
    if len(arguments) < 2 or arguments[0] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    return run(label, arguments[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
