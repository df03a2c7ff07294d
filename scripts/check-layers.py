#!/usr/bin/python3
"""make test: the package's layers, checked from its own description.

1. Walls. The modules `devtrust token` runs on sit below HTTP: each depends,
   directly or not, only on token-path modules and the C modules listed in
   TOKEN_PATH_C_MODULES (no libcurl, no HTTP layer, no client built on it, no
   other package's product).
2. The subsystems' walls. No module stands on a front end (FRONT_ENDS: only
   the executable and tests do); each module of STANDS_ONLY_ON depends, directly
   or not, on the modules it lists and no others; each of NEVER_ON on none of
   the modules it lists.
3. Exact dependencies. Every target (sources, tests, fuzz targets, the bench,
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

USAGE = "usage: check-layers.py [--describe-json FILE | --self-test]"

# The modules of `devtrust token` (and `device-data`): the system agent and its
# client (`token` through the agent), the application core (the
# device-token service, the signing deadline), keys, JOSE, keystore, the device's
# identity, configuration, posture, URLs and origins, the errors' classification,
# and what they stand on.
TOKEN_PATH = ["DevtrustAgent", "DevtrustCore", "DevtrustDevice", "DevtrustJOSE", "DevtrustKeystore", "DevtrustKeys",
              "DevtrustConfig", "DevtrustPosture", "DevtrustSystem", "DevtrustURL", "DevtrustErrors", "DevtrustEncoding"]
# The C modules the token path may stand on: OpenSSL's libcrypto, tpm2-tss
# (loaded with dlopen), the signing deadline's alarm and the agent's sockets (libc only). Anything
# else below it (a new C shim that links or loads libcurl, a package product)
# is a breach until it is listed here.
TOKEN_PATH_C_MODULES = ["COpenSSL", "CTPM2", "CDeadline", "CAgentSocket", "CFileSystemIdentity"]
# The toolchain's modules the token path may import: libc and Synchronization. Foundation
# costs a token its start-up time, and FoundationNetworking is libcurl below the wall.
TOKEN_PATH_TOOLCHAIN_MODULES = ["Glibc", "Synchronization"]

# The command line: the executable and the tests stand on it, no module does (the
# native host and the system agent take the application's logic from below it).
FRONT_ENDS = ["DevtrustCLI"]
FRONT_END_USERS = ["devtrust"]
# Modules whose whole closure is listed: the terminal toolkit shows and asks, and
# knows nothing of HTTP, keys, keystores or servers.
STANDS_ONLY_ON = {
    "DevtrustTerminal": ["CProcessHardening", "CQRCode", "DevtrustEncoding", "DevtrustErrors"],
}
# Modules that must never reach the ones listed, directly or not.
NEVER_ON = {
    # The sign-in service shows nothing: front ends say what it does, each its own way.
    "DevtrustSignInService": ["DevtrustTerminal"],
    # The native host serves a browser a device token: it registers nothing.
    "DevtrustBrowser": ["DevtrustFlow", "DevtrustDoctor"],
    # Doctor checks and reports: it serves no browser and runs no registration.
    "DevtrustDoctor": ["DevtrustBrowser", "DevtrustFlow"],
}

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


def wall_breaches(package, dependencies):
    """Every module below a token-path module is a token-path module or an allowed C module."""
    allowed = set(TOKEN_PATH) | set(TOKEN_PATH_C_MODULES)
    targets = {target["name"]: target for target in package["targets"]}
    breaches = []
    for name in TOKEN_PATH:
        if name not in targets:
            breaches.append(f"{name}: not a target of the package (update TOKEN_PATH in {sys.argv[0]})")
            continue
        for outsider in sorted(closure(name, dependencies) - allowed):
            breaches.append(f"{name} depends on {outsider}, which is not on the token path: "
                            + " -> ".join(path_to(name, outsider, dependencies)))
        for product in targets[name].get("product_dependencies", []):
            breaches.append(f"{name} depends on the product {product}: the token path uses no other package")
    return breaches


def subsystem_breaches(package, dependencies):
    """No module stands on a front end; STANDS_ONLY_ON's and NEVER_ON's walls hold."""
    targets = {target["name"]: target for target in package["targets"]}
    breaches = []
    for name in sorted(targets):
        if name in FRONT_END_USERS or targets[name].get("type") == "test":
            continue
        for front_end in FRONT_ENDS:
            if front_end != name and front_end in closure(name, dependencies):
                breaches.append(f"{name} depends on the front end {front_end}: "
                                + " -> ".join(path_to(name, front_end, dependencies)))
    for name, allowed in sorted(STANDS_ONLY_ON.items()):
        if name not in targets:
            continue
        for outsider in sorted(closure(name, dependencies) - set(allowed)):
            breaches.append(f"{name} depends on {outsider}, which it must not stand on: "
                            + " -> ".join(path_to(name, outsider, dependencies)))
    for name, forbidden in sorted(NEVER_ON.items()):
        if name not in targets:
            continue
        for outsider in sorted(closure(name, dependencies) & set(forbidden)):
            breaches.append(f"{name} depends on {outsider}, which it must not stand on: "
                            + " -> ".join(path_to(name, outsider, dependencies)))
    return breaches


def unknown_names(package):
    """Every module the walls name is a target: a renamed module must not leave its wall behind."""
    targets = {target["name"] for target in package["targets"]}
    named = set(FRONT_ENDS) | set(FRONT_END_USERS) | set(STANDS_ONLY_ON) | set(NEVER_ON) \
        | {module for modules in list(STANDS_ONLY_ON.values()) + list(NEVER_ON.values()) for module in modules}
    return [f"{name}: not a target of the package (update the walls in {sys.argv[0]})" for name in sorted(named - targets)]


def imported_modules(target, root):
    """The modules a target's Swift sources import, as the compiler reads them
    (`swiftc -emit-imported-modules`: comments, strings, `;`, `@testable`,
    `import struct X.Y`), not as a pattern would."""
    sources = [os.path.join(root, target["path"], source) for source in target.get("sources", []) if source.endswith(".swift")]
    if not sources:
        return set()
    swiftc = os.environ.get("SWIFTC", "swiftc")
    output = subprocess.run([swiftc, "-emit-imported-modules", *sources, "-o", "-"], check=True, capture_output=True, text=True).stdout
    return set(output.split())


# An import declaration: attributes (`@testable`, `@_implementationOnly`, `@preconcurrency`), an
# access level (`public import`, Swift 6), a kind (`import struct X.Y`).
IMPORT_LINE = re.compile(r"^(?:@\w+(?:\(.*?\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s")


def conditional_imports(path):
    """The `import` lines of a Swift source inside an `#if` block: `-emit-imported-modules`
    reads the source without the build's -D flags, so such an import would escape the
    checks (`#if DEBUG` / `import DevtrustHTTP` / `#endif`). Every import is unconditional."""
    found, depth, in_comment = [], 0, False
    with open(path, encoding="utf-8") as source:
        for number, line in enumerate(source, 1):
            text = line.strip()
            if in_comment:
                in_comment = "*/" not in text
                continue
            if text.startswith("/*"):
                in_comment = "*/" not in text
                continue
            if text.startswith("#if"):
                depth += 1
            elif text.startswith("#endif"):
                depth = max(0, depth - 1)
            elif depth and IMPORT_LINE.match(text):
                found.append(f"{path}:{number}: an import inside #if ({text}): import unconditionally")
    return found


def dependency_breaches(package, root):
    module_of = {target["name"]: target.get("c99name", target["name"]) for target in package["targets"]}
    target_of = {module: name for name, module in module_of.items()}
    breaches = []
    for target in sorted(package["targets"], key=lambda target: target["name"]):
        if target.get("module_type") != "SwiftTarget":
            continue
        for source in target.get("sources", []):
            if source.endswith(".swift"):
                breaches.extend(conditional_imports(os.path.join(root, target["path"], source)))
        declared = {module_of.get(name, name) for name in target.get("target_dependencies", [])}
        every_import = imported_modules(target, root)
        if target["name"] in TOKEN_PATH:
            for module in sorted(every_import - set(target_of) - set(TOKEN_PATH_TOOLCHAIN_MODULES)):
                breaches.append(f"{target['name']} is on the token path and imports the toolchain's {module}; "
                                f"it may import only {', '.join(TOKEN_PATH_TOOLCHAIN_MODULES)}")
        imported = {module for module in every_import if module in target_of}
        for module in sorted(imported - declared):
            breaches.append(f"{target['name']} imports {module} but does not declare it")
        for module in sorted(declared - imported):
            breaches.append(f"{target['name']} declares {target_of[module]} but does not import it")
    return breaches


def self_test():
    """The walls against what they must refuse: a C module and a product below the token path;
    a module on a front end; a subsystem beyond its list, or on what it must never reach."""
    package = {"targets": [{"name": name, "target_dependencies": []} for name in TOKEN_PATH]}
    package["targets"][0]["target_dependencies"] = ["CNetworkShim"]
    package["targets"][1]["product_dependencies"] = ["SomeHTTPClient"]
    dependencies = {target["name"]: target["target_dependencies"] for target in package["targets"]}
    if len(wall_breaches(package, dependencies)) != 2:
        print("check-layers: self-test failed: the wall let a C module or a product below the token path", file=sys.stderr)
        return 1
    # Each subsystem's wall, alone: what it allows passes; one step past it, through a module in between, is refused.
    def breaches_of(dependencies):
        package = {"targets": [{"name": name, "target_dependencies": targets, "type": "library"} for name, targets in dependencies.items()]}
        return subsystem_breaches(package, dependencies)

    cases = [({"devtrust": FRONT_ENDS[:1], FRONT_ENDS[0]: []}, 0),
             ({"Between": FRONT_ENDS[:1], FRONT_ENDS[0]: []}, 1)]
    for name, allowed in STANDS_ONLY_ON.items():
        cases.append(({name: list(allowed), **{module: [] for module in allowed}}, 0))
        cases.append(({name: ["Between"], "Between": ["DevtrustHTTP"], "DevtrustHTTP": []}, 2))
    for name, forbidden in NEVER_ON.items():
        for module in forbidden:
            cases.append(({name: ["Between"], "Between": [module], module: []}, 1))
    for dependencies, expected in cases:
        breaches = breaches_of(dependencies)
        if len(breaches) != expected:
            print(f"check-layers: self-test failed: {dependencies} gave {len(breaches)} breaches, not {expected}: {breaches}", file=sys.stderr)
            return 1
    # An import under #if, and one the token path may not make, in sources of a package of one target.
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "Core"))
        with open(os.path.join(root, "Core", "A.swift"), "w") as source:
            source.write("import Glibc\nimport FoundationNetworking\n#if DEBUG\n@testable import DevtrustHTTP\n#endif\n"
                         "#if SOME_FLAG\npublic import DevtrustFlow\n#endif\n")
        package = {"targets": [{"name": TOKEN_PATH[0], "module_type": "SwiftTarget", "path": "Core", "sources": ["A.swift"], "target_dependencies": []}]}
        breaches = dependency_breaches(package, root)
        if len(breaches) != 3 or sum("#if" in breach for breach in breaches) != 2 or not any("FoundationNetworking" in breach for breach in breaches):
            print(f"check-layers: self-test failed: an import under #if and FoundationNetworking on the token path gave {breaches}", file=sys.stderr)
            return 1
    return 0


def main(arguments):
    describe_json = None
    if arguments == ["--self-test"]:
        return self_test()
    if arguments[:1] == ["--describe-json"] and len(arguments) == 2:
        describe_json = arguments[1]
    elif arguments:
        sys.exit(USAGE)
    package = describe(describe_json)
    root = package.get("path", os.getcwd())
    dependencies = {target["name"]: target.get("target_dependencies", []) for target in package["targets"]}
    breaches = wall_breaches(package, dependencies) + unknown_names(package) + subsystem_breaches(package, dependencies) + dependency_breaches(package, root)
    for breach in breaches:
        print(f"check-layers: {breach}", file=sys.stderr)
    if breaches:
        return 1
    swift_targets = [target for target in package["targets"] if target.get("module_type") == "SwiftTarget"]
    print(f"check-layers: {len(TOKEN_PATH)} modules of devtrust token below HTTP; the walls of {len(STANDS_ONLY_ON) + len(NEVER_ON)} subsystems "
          f"and of {len(FRONT_ENDS)} front end; "
          f"{len(swift_targets)} Swift targets import exactly the package modules they declare")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
