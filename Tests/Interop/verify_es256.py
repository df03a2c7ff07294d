#!/usr/bin/python3
"""Independent verifier for devtrust's signatures, using python3-cryptography.

Reads one JSON document on stdin:
  {"spki": "<standard base64 DER SubjectPublicKeyInfo>",
   "der":  [{"message": "<base64>", "signature": "<base64 DER>"}, ...],
   "jws":  ["<compact ES256 JWS>", ...]}
and prints {"der": {"valid": N, "invalid": [indexes]}, "jws": {...}}.
A JWS is valid only with header alg ES256, a 64-byte raw r||s signature,
and a signature over "header.payload" that verifies with the key.
"""
import base64
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(text):
    if "=" in text:
        raise ValueError("padding in JWS part")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_der(key, item):
    try:
        key.verify(base64.b64decode(item["signature"], validate=True),
                   base64.b64decode(item["message"], validate=True),
                   ec.ECDSA(hashes.SHA256()))
        return True
    except (InvalidSignature, ValueError):
        return False


def verify_jws(key, token):
    try:
        header_b64, payload_b64, signature_b64 = token.split(".")
        header = json.loads(b64url(header_b64))
        json.loads(b64url(payload_b64))
        if header.get("alg") != "ES256":
            return False
        raw = b64url(signature_b64)
        if len(raw) != 64:
            return False
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        key.verify(der, (header_b64 + "." + payload_b64).encode("ascii"), ec.ECDSA(hashes.SHA256()))
        return True
    except (InvalidSignature, ValueError):
        return False


def main():
    request = json.load(sys.stdin)
    key = serialization.load_der_public_key(base64.b64decode(request["spki"], validate=True))
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise SystemExit("not a P-256 key")
    result = {}
    for kind, check in (("der", verify_der), ("jws", verify_jws)):
        items = request.get(kind, [])
        invalid = [index for index, item in enumerate(items) if not check(key, item)]
        result[kind] = {"valid": len(items) - len(invalid), "invalid": invalid}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
