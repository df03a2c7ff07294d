#!/usr/bin/python3
"""The attack on a repeated ECDSA nonce, with python3-cryptography.

Reads one JSON document on stdin:
  {"spki": "<base64 DER SubjectPublicKeyInfo>",
   "signatures": [{"message": "<base64>", "signature": "<base64 DER>"}, ...]}
and prints {"valid": N, "sharedR": bool, "recovered": "<hex private scalar>" or null}.
Two signatures (r, s1) and (r, s2) with one nonce k over digests z1 and z2 give
k = (z1 - z2) / (s1 - s2) and the private key x = (s1 k - z1) / r (mod n);
the recovered x counts only when x G is the public key.
"""
import base64
import hashlib
import itertools
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def main():
    request = json.load(sys.stdin)
    public_key = serialization.load_der_public_key(base64.b64decode(request["spki"]))
    signed = []
    valid = 0
    for item in request["signatures"]:
        message, signature = base64.b64decode(item["message"]), base64.b64decode(item["signature"])
        try:
            public_key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
            valid += 1
        except InvalidSignature:
            pass
        r, s = decode_dss_signature(signature)
        signed.append((int.from_bytes(hashlib.sha256(message).digest(), "big"), r, s))
    shared, recovered = False, None
    for (z1, r1, s1), (z2, r2, s2) in itertools.combinations(signed, 2):
        if r1 != r2 or z1 == z2:
            continue
        shared = True
        for s2_signed in (s2, N - s2):  # a verifier accepts s and n - s alike
            if (s1 - s2_signed) % N == 0:
                continue
            k = (z1 - z2) * pow(s1 - s2_signed, -1, N) % N
            x = (s1 * k - z1) * pow(r1, -1, N) % N
            if 0 < x < N and ec.derive_private_key(x, ec.SECP256R1()).public_key().public_numbers() == public_key.public_numbers():
                recovered = "%064x" % x
    print(json.dumps({"valid": valid, "sharedR": shared, "recovered": recovered}))


if __name__ == "__main__":
    main()
