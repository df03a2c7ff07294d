#!/usr/bin/python3
"""make test: the package's layers, checked from its own description.

1. Walls. The modules `devtrust token` runs on sit below HTTP: each depends,
   directly or not, only on token-path modules and the C modules listed in
   TOKEN_PATH_C_MODULES (no libcurl, no HTTP layer, no client built on it, no
   other package's product).
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

USAGE = "usage: check-layers.py [--describe-json FILE | --self-test]"

# The modules of `devtrust token` (and `device-data`): keys, JOSE, keystore,
# the device's identity, configuration, posture and what they stand on.
TOKEN_PATH = ["DevtrustDevice", "DevtrustJOSE", "DevtrustKeystore", "DevtrustKeys",
              "DevtrustConfig", "DevtrustPosture", "DevtrustSystem", "DevtrustEncoding"]
# The C modules the token path may stand on: OpenSSL's libcrypto and tpm2-tss
# (loaded with dlopen). Anything else below it (a new C shim that links or
# loads libcurl, a package product) is a breach until it is listed here.
TOKEN_PATH_C_MODULES = ["COpenSSL", "CTPM2"]

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


def code_only(text):
    """Swift source with comments (nested block comments too) and string literals
    (single-line, multi-line, raw) blanked, newlines kept, and `;` made a line
    break, read left to right as the compiler reads it: an import hidden in a
    comment or a string is not an import, and one after `;` or after a comment
    that looks like a string is."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif text[i] == '"' or (text[i] == "#" and re.match(r'#+"', text[i:])):
            hashes = len(text[i:]) - len(text[i:].lstrip("#"))
            j = i + hashes
            quote = '"""' if text.startswith('"""', j) else '"'
            close = quote + "#" * hashes
            j += len(quote)
            while j < n and not text.startswith(close, j):
                if text[j] == "\\" and not hashes:
                    j += 1
                if j < n and text[j] == "\n":
                    out.append("\n")
                j += 1
            out.append('""')
            i = j + len(close)
        else:
            out.append("\n" if text[i] == ";" else text[i])
            i += 1
    return "".join(out)


def imported_modules(target, root):
    """The modules a target's Swift sources import."""
    modules = set()
    for source in target.get("sources", []):
        if not source.endswith(".swift"):
            continue
        with open(os.path.join(root, target["path"], source), encoding="utf-8") as file:
            text = file.read()
        modules.update(IMPORT.findall(code_only(text)))
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


def self_test():
    """The reader and the wall against what fooled them once (make test runs this first)."""
    hidden = 'import DevtrustSystem'
    cases = [
        ('// written """like this\n' + hidden + '\n// (""")\n', True),   # quotes in line comments
        ('import Glibc; ' + hidden + '\n', True),                          # two imports on one line
        ('let a = "/*"\n' + hidden + '\nlet b = "*/"\n', True),          # comment markers in strings
        ('let a = "\\"/*"\n' + hidden + '\n', True),                     # an escaped quote
        ('/* outer /* inner */\n' + hidden + '\n*/\n', False),            # nested block comments
        ('let a = """\n' + hidden + '\n"""\n', False),                   # a multi-line string
        ('let a = #"x " ' + hidden + '"#\n', False),                       # a raw string
        ('// ' + hidden + '\n', False),
    ]
    failures = [source for source, imports in cases
                if ("DevtrustSystem" in IMPORT.findall(code_only(source))) != imports]
    package = {"targets": [{"name": name, "target_dependencies": []} for name in TOKEN_PATH]}
    package["targets"][0]["target_dependencies"] = ["CNetworkShim"]
    package["targets"][1]["product_dependencies"] = ["SomeHTTPClient"]
    dependencies = {target["name"]: target["target_dependencies"] for target in package["targets"]}
    if len(wall_breaches(package, dependencies)) != 2:
        failures.append("the wall let a C module or a product below the token path")
    for failure in failures:
        print(f"check-layers: self-test failed: {failure!r}", file=sys.stderr)
    return 1 if failures else 0


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
    breaches = wall_breaches(package, dependencies) + dependency_breaches(package, root)
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
