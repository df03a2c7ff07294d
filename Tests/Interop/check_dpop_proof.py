#!/usr/bin/python3
"""Checks a DPoP proof (RFC 9449) independently of devtrust: jwcrypto verifies the
signature with the header's jwk and computes its RFC 7638 thumbprint, PyJWT verifies it
again, hashlib computes ath. Prints {"jkt": ..., "header": ..., "claims": ...}; exit 1
with the reason on stderr when a check fails.

  check_dpop_proof.py PROOF METHOD URL [--access-token AT] [--nonce N] [--jkt JKT]
"""
import argparse
import base64
import hashlib
import json
import sys
import time
import uuid

import jwt
from jwcrypto import jwk, jws


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("proof")
    parser.add_argument("method")
    parser.add_argument("url")
    parser.add_argument("--access-token")
    parser.add_argument("--nonce")
    parser.add_argument("--jkt")
    options = parser.parse_args()
    failures = []
    header = jwt.get_unverified_header(options.proof)
    if header.get("typ") != "dpop+jwt":
        failures.append("typ %r" % header.get("typ"))
    if header.get("alg") != "ES256":
        failures.append("alg %r" % header.get("alg"))
    public = header.get("jwk") or {}
    if set(public) != {"kty", "crv", "x", "y"} or public.get("kty") != "EC" or public.get("crv") != "P-256":
        failures.append("jwk is not exactly a public P-256 key: %r" % sorted(public))
    key = jwk.JWK(**public)
    token = jws.JWS()
    token.deserialize(options.proof)
    token.verify(key, alg="ES256")
    claims = jwt.decode(options.proof, key=jwt.algorithms.ECAlgorithm.from_jwk(json.dumps(public)), algorithms=["ES256"],
                        options={"verify_aud": False, "require": ["jti", "iat"]},
                        # A proof is in the server's time when its clock was measured to differ, by
                        # a second or more (HTTP dates have whole seconds): iat is checked below, +-30 s.
                        leeway=30)
    if claims.get("htm") != options.method:
        failures.append("htm %r" % claims.get("htm"))
    expected_htu = options.url.split("#")[0].split("?")[0]
    if claims.get("htu") != expected_htu:
        failures.append("htu %r, not %r" % (claims.get("htu"), expected_htu))
    if not isinstance(claims.get("iat"), int) or abs(claims["iat"] - time.time()) > 30:
        failures.append("iat %r" % claims.get("iat"))
    try:
        uuid.UUID(claims.get("jti", ""))
    except ValueError:
        failures.append("jti %r is not a UUID" % claims.get("jti"))
    if options.access_token is not None:
        if claims.get("ath") != b64url(hashlib.sha256(options.access_token.encode("ascii")).digest()):
            failures.append("ath %r is not the access token's SHA-256" % claims.get("ath"))
    elif "ath" in claims:
        failures.append("ath without an access token")
    if claims.get("nonce") != options.nonce:
        failures.append("nonce %r, not %r" % (claims.get("nonce"), options.nonce))
    thumbprint = key.thumbprint()
    if options.jkt is not None and thumbprint != options.jkt:
        failures.append("jwk thumbprint %s, not %s" % (thumbprint, options.jkt))
    extra = set(claims) - {"jti", "htm", "htu", "iat", "ath", "nonce"}
    if extra:
        failures.append("unexpected claims %r" % sorted(extra))
    if failures:
        sys.exit("; ".join(failures))
    print(json.dumps({"jkt": thumbprint, "header": header, "claims": claims}))


if __name__ == "__main__":
    main()
