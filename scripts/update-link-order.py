#!/usr/bin/python3
"""Regenerates scripts/link-order.txt, the linker's symbol ordering file.

`make build` links the functions listed there first and together, so that
`devtrust token` touches a few hundred contiguous pages of code instead of
pages all over its 9 MB of text: about 2.5 MB less resident memory and
fewer page faults per token (docs/performance.md). The list is the functions
devtrust runs, in first-run order, for its per-request commands, read from
valgrind's callgrind. Names that no longer exist are ignored by the linker;
rerun this after large changes (`make link-order`), and `make bench` shows
when the memory goal slips.

Usage: update-link-order.py RELEASE_BINARY [OUTPUT]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from swtpm_process import running_swtpm

DEVICE_ID = "74070bae-df8c-42bf-8754-5173c237c936"


def callgrind(binary, arguments, environment, directory, label):
    output = os.path.join(directory, "callgrind." + label)
    subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--callgrind-out-file=" + output, binary] + arguments,
                   env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return output


def functions(profile, object_suffix):
    """The functions of one object (the binary) in a callgrind profile, in file order."""
    names, objects, current, found = {}, {}, None, []
    with open(profile) as lines:
        for line in lines:
            line = line.rstrip("\n")
            match = re.match(r"^(c?)ob=\((\d+)\)(?: (.*))?$", line)
            if match:
                called, number, name = match.groups()
                if name:
                    objects[number] = name
                if not called:
                    current = objects.get(number)
                continue
            match = re.match(r"^(c?)fn=\((\d+)\)(?: (.*))?$", line)
            if match:
                called, number, name = match.groups()
                if name:
                    names[number] = name
                name = names.get(number)
                if not called and current and current.endswith(object_suffix) and name and not name.startswith("0x"):
                    found.append(name.split("'")[0])
    return found


def main(arguments):
    if not arguments:
        raise SystemExit(__doc__)
    release = os.path.abspath(arguments[0])
    output = arguments[1] if len(arguments) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "link-order.txt")
    directory = tempfile.mkdtemp(prefix="devtrust-link-order-")
    try:
        binary = os.path.join(directory, "devtrust")
        # callgrind cannot read the DWARF of a static Swift binary; the symbol table is enough.
        subprocess.run(["strip", "--strip-debug", "-o", binary, release], check=True)
        # The keystore, cache and configuration of this run, below `directory`: as root,
        # devtrust's defaults are the machine's (/var/cache/devtrust gets every token's posture).
        environment = {name: value for name, value in os.environ.items() if name not in ("DEVTRUST_KEYSTORE", "DEVTRUST_CONFIG")}
        environment.update(HOME=directory, TSS2_LOG="all+NONE", DEVTRUST_KEYSTORE=os.path.join(directory, "software"),
                           XDG_CACHE_HOME=os.path.join(directory, "cache"), XDG_CONFIG_HOME=os.path.join(directory, "config"))
        os.makedirs(os.path.join(directory, "config", "devtrust"))
        with open(os.path.join(directory, "config", "devtrust", "config.json"), "w") as file:
            file.write("{}\n")  # embedded defaults, not /etc/devtrust/config.json
        software = ["--keystore", os.path.join(directory, "software")]
        subprocess.run([binary] + software + ["init", "--backend", "software"], env=environment, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs = [
            (software + ["token", "--device-id", DEVICE_ID], "token"),
            (software + ["sign-challenge", "q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y"], "sign-challenge"),
            (software + ["device-data"], "device-data"),
            (software + ["pubkey"], "pubkey"),
            (["--version"], "version"),
        ]
        profiles = [callgrind(binary, run, environment, directory, label) for run, label in runs]
        if shutil.which("swtpm"):
            with running_swtpm(directory) as tcti:
                tpm_environment = dict(environment, DEVTRUST_TCTI=tcti)
                tpm = ["--keystore", os.path.join(directory, "tpm")]
                subprocess.run([binary] + tpm + ["init", "--backend", "tpm"], env=tpm_environment, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                profiles.append(callgrind(binary, tpm + ["token", "--device-id", DEVICE_ID], tpm_environment, directory, "tpm-token"))
        ordered = list(dict.fromkeys(name for profile in profiles for name in functions(profile, "/devtrust")))
        with open(output, "w") as file:
            file.write("\n".join(ordered) + "\n")
        print("%d functions from %d runs -> %s" % (len(ordered), len(profiles), output))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
