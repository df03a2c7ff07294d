#!/usr/bin/python3
"""make test: the package's layers, checked from its own description.

1. Walls. The modules `devtrust token` runs on sit below HTTP: none of them
   depends, directly or through another module, on libcurl (CCurl), on the
   HTTP layer or on the clients built on it (sign-in, registration flows).
2. Exact dependencies. Every target (sources, tests, fuzz targets, the bench,
   test support) imports each module of the package it uses and declares
   every such module it imports, no more. SwiftPM's own check
   (--explicit-target-dependency-import-check) lets a target import anything
   its dependencies depend on; this one holds each target to its own list.

The description comes from `$SWIFT package describe --type json` (swift by
default) in the current directory, or from FILE. Exits 1, naming each breach,
when a check fails.
"""
import json
import os
import re
import subprocess
import sys

USAGE = "usage: check-layers.py [--describe-json FILE]"

# The modules of `devtrust token` (and `device-data`): keys, JOSE, keystore,
# the device's identity, configuration, posture and what they stand on.
TOKEN_PATH = ["DevtrustDevice", "DevtrustJOSE", "DevtrustKeystore", "DevtrustKeys",
              "DevtrustConfig", "DevtrustPosture", "DevtrustSystem", "DevtrustEncoding"]
ABOVE_THE_WALL = ["CCurl", "DevtrustHTTP", "DevtrustSignIn", "DevtrustFlow", "DevtrustCLI"]

# `import X`, `@testable import X`, `public import X`, `import struct X.Y`.
IMPORT = re.compile(r"^[ \t]*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?"
                    r"import\s+(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


def describe(path):
    if path:
        with open(path) as file:
            return json.load(file)
    swift = os.environ.get("SWIFT", "swift")
    output = subprocess.run([swift, "package", "describe", "--type", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def closure(name, dependencies):
    """Every target `name` depends on, directly or not."""
    seen, pending = set(), list(dependencies.get(name, []))
    while pending:
        target = pending.pop()
        if target not in seen:
            seen.add(target)
            pending.extend(dependencies.get(target, []))
    return seen


def path_to(start, goal, dependencies):
    """One dependency chain from `start` to `goal`, for the message."""
    chains = [[start]]
    while chains:
        chain = chains.pop(0)
        for target in dependencies.get(chain[-1], []):
            if target == goal:
                return chain + [target]
            if target not in chain:
                chains.append(chain + [target])
    return [start, goal]


def wall_breaches(dependencies):
    breaches = []
    for target in TOKEN_PATH:
        if target not in dependencies:
            breaches.append(f"{target}: not a target of the package (update TOKEN_PATH in {sys.argv[0]})")
            continue
        below = closure(target, dependencies)
        for forbidden in ABOVE_THE_WALL:
            if forbidden in below:
                breaches.append(f"{target} depends on {forbidden}: " + " -> ".join(path_to(target, forbidden, dependencies)))
    return breaches


def imported_modules(target, root):
    """The modules a target's Swift sources import."""
    modules = set()
    for source in target.get("sources", []):
        if not source.endswith(".swift"):
            continue
        with open(os.path.join(root, target["path"], source), encoding="utf-8") as file:
            text = file.read()
        # Imports inside block comments or string literals (test scripts) are not imports.
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
        text = re.sub(r'"""[\s\S]*?"""', "", text)
        modules.update(IMPORT.findall(text))
    return modules


def dependency_breaches(package, root):
    module_of = {target["name"]: target.get("c99name", target["name"]) for target in package["targets"]}
    target_of = {module: name for name, module in module_of.items()}
    breaches = []
    for target in sorted(package["targets"], key=lambda target: target["name"]):
        if target.get("module_type") != "SwiftTarget":
            continue
        declared = {module_of.get(name, name) for name in target.get("target_dependencies", [])}
        imported = {module for module in imported_modules(target, root) if module in target_of}
        for module in sorted(imported - declared):
            breaches.append(f"{target['name']} imports {module} but does not declare it")
        for module in sorted(declared - imported):
            breaches.append(f"{target['name']} declares {target_of[module]} but does not import it")
    return breaches


def main(arguments):
    describe_json = None
    if arguments[:1] == ["--describe-json"] and len(arguments) == 2:
        describe_json = arguments[1]
    elif arguments:
        sys.exit(USAGE)
    package = describe(describe_json)
    root = package.get("path", os.getcwd())
    dependencies = {target["name"]: target.get("target_dependencies", []) for target in package["targets"]}
    breaches = wall_breaches(dependencies) + dependency_breaches(package, root)
    for breach in breaches:
        print(f"check-layers: {breach}", file=sys.stderr)
    if breaches:
        return 1
    swift_targets = [target for target in package["targets"] if target.get("module_type") == "SwiftTarget"]
    print(f"check-layers: {len(TOKEN_PATH)} modules of devtrust token below HTTP; "
          f"{len(swift_targets)} Swift targets import exactly the package modules they declare")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
