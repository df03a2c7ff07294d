#!/usr/bin/python3
"""Checks device tokens with PyJWT (python3-jwt), apart from devtrust's own code.

Reads one JSON document on stdin:
  {"spki": "<standard base64 DER SubjectPublicKeyInfo>", "tokens": ["<compact JWS>", ...]}
and prints a list with, for each token, {"valid": true, "header": {...}, "claims": {...}}
or {"valid": false, "reason": "..."}. Valid means: PyJWT verifies the signature with
the key, for the ES256 algorithm only, and the header says alg ES256.
"""
import base64
import json
import sys

import jwt
from cryptography.hazmat.primitives import serialization


def check(key, token):
    try:
        header = jwt.get_unverified_header(token)
        if header.get("alg") != "ES256":
            return {"valid": False, "reason": "alg is %r" % header.get("alg")}
        # iat and exp are the test's to judge: PyJWT checks only the signature here.
        claims = jwt.decode(token, key, algorithms=["ES256"], options={"verify_exp": False, "verify_iat": False, "verify_aud": False})
        return {"valid": True, "header": header, "claims": claims}
    except jwt.PyJWTError as error:
        return {"valid": False, "reason": "%s: %s" % (type(error).__name__, error)}


def main():
    request = json.load(sys.stdin)
    key = serialization.load_der_public_key(base64.b64decode(request["spki"], validate=True))
    json.dump([check(key, token) for token in request["tokens"]], sys.stdout)


if __name__ == "__main__":
    main()
