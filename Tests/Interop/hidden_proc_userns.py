#!/usr/bin/python3
"""Runs a command as the overflow uid (65534) of a new user namespace, as `unshare -U` does (there
with no map at all; here the caller is mapped to 65534, which SO_PEERCRED and geteuid show alike),
in a mount namespace whose /proc/self has every entry of the real one but uid_map (a sandbox that
masks it, or a /proc the caller's program cannot read): AgentClient.isInitialUserNamespace then
cannot read the map. SCRATCH: a directory the caller can write (the real proc is bound there).
Usage: hidden_proc_userns.py SCRATCH CMD ARGS..."""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
scratch, command = sys.argv[1], sys.argv[2:]
uid, gid = os.geteuid(), os.getegid()
real = os.path.join(scratch, "realproc")
os.makedirs(real, exist_ok=True)
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
    sys.exit("unshare: " + os.strerror(ctypes.get_errno()))
def write(path, text):
    with open(path, "w") as f: f.write(text)
write("/proc/self/uid_map", "65534 %d 1\n" % uid)
write("/proc/self/setgroups", "deny")
write("/proc/self/gid_map", "65534 %d 1\n" % gid)
# Still holding the namespace's capabilities (no exec yet).
libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
if libc.mount(b"/proc", real.encode(), None, MS_BIND | MS_REC, None) != 0:
    sys.exit("bind /proc: " + os.strerror(ctypes.get_errno()))
if libc.mount(b"none", b"/proc", b"tmpfs", 0, None) != 0:
    sys.exit("mount tmpfs on /proc: " + os.strerror(ctypes.get_errno()))
os.mkdir("/proc/me")
for entry in os.listdir(os.path.join(real, "self")):
    if entry not in ("uid_map", "gid_map"):
        os.symlink(os.path.join(real, "self", entry), os.path.join("/proc/me", entry))
os.symlink("me", "/proc/self")
os.symlink(os.path.join(real, "sys"), "/proc/sys")
os.execv(command[0], command)
