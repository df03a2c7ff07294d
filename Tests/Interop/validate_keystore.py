#!/usr/bin/python3
"""Validates keystore.json files against keystore/schema (python3-jsonschema).

Usage: validate_keystore.py SCHEMA_DIR FILE...
Prints one line per file ("ok FILE" or "invalid FILE: reason"); exit 1 if any is invalid.
"""
import json
import os
import sys

import jsonschema


def main():
    schema_dir, files = sys.argv[1], sys.argv[2:]
    store = {}
    for name in os.listdir(schema_dir):
        with open(os.path.join(schema_dir, name)) as handle:
            schema = json.load(handle)
        store[schema["$id"]] = schema
    failed = False
    for path in files:
        with open(path) as handle:
            document = json.load(handle)
        version = document.get("version")
        schema_id = "https://devtrust.invalid/schema/keystore.v%s.schema.json" % version
        if schema_id not in store:
            print("invalid %s: no schema for version %r" % (path, version))
            failed = True
            continue
        schema = store[schema_id]
        resolver = jsonschema.RefResolver.from_schema(schema, store=store)
        validator = jsonschema.Draft202012Validator(schema, resolver=resolver,
                                                    format_checker=jsonschema.FormatChecker())
        errors = sorted(validator.iter_errors(document), key=lambda error: list(error.path))
        if errors:
            failed = True
            print("invalid %s: %s at %s" % (path, errors[0].message, "/".join(map(str, errors[0].path))))
        else:
            print("ok %s" % path)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
