"""Strict DPoP (RFC 9449) for devtrust's reference server: what glewlwyd does not check.

Every proof is checked in full: typ dpop+jwt, alg ES256, a public P-256 jwk and nothing
private in it, the signature, htm, htu (the URL the server knows, without query and
fragment, compared exactly), iat within the window, jti never seen before, the server's
current nonce when it demands nonces, and at a resource ath = base64url(SHA-256(token))
and the proof key's RFC 7638 thumbprint = the token's cnf.jkt.
"""
import base64
import hashlib
import json
import secrets
import threading

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

IAT_MAX_AGE = 60
IAT_MAX_AHEAD = 5


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    if not isinstance(text, str) or "=" in text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text):
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(jwk):
    canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


def access_token_hash(token):
    return b64url(hashlib.sha256(token.encode()).digest())


class ProofRefused(Exception):
    """A proof the server refuses: `error` is invalid_dpop_proof or use_dpop_nonce."""

    def __init__(self, error, reason):
        super().__init__(reason)
        self.error, self.reason = error, reason


class DPoPVerifier:
    def __init__(self, now, demand_nonce=False, nonce_uses=4, nonce_form="normal", iat_ahead=IAT_MAX_AHEAD):
        self.now = now
        self.iat_ahead = iat_ahead
        self.demand_nonce = demand_nonce
        self.nonce_uses = nonce_uses
        self.nonce_form = nonce_form
        self.lock = threading.Lock()
        self.seen_jti = set()
        self.nonce = self.new_nonce()
        self.nonce_served = 0
        self.refusals = []
        # Every proof received, for the tests that look for them where they must not be.
        self.proofs = []

    def new_nonce(self):
        """A nonce of the --dpop-nonce-form: normal (16 characters), long (3000: valid, but longer than most),
        invalid (an escape sequence and a non-ASCII letter, which RFC 9449's NQCHAR excludes), or never
        (normal, but no proof's nonce is ever accepted: a broken server)."""
        if self.nonce_form == "long":
            return secrets.token_urlsafe(2250)
        if self.nonce_form == "invalid":
            return "\x1b[31m" + secrets.token_urlsafe(12) + "\u00e9"
        return secrets.token_urlsafe(12)

    def current_nonce(self):
        with self.lock:
            return self.nonce

    def verify(self, proof, method, url, access_token=None):
        """The proof's jkt, or ProofRefused. `url` is the one the server knows itself by."""
        if proof:
            with self.lock:
                self.proofs.append(proof)
        try:
            return self.check(proof, method, url, access_token)
        except ProofRefused as refusal:
            with self.lock:
                self.refusals.append(refusal.reason)
            raise

    def check(self, proof, method, url, access_token):
        if not proof:
            raise ProofRefused("invalid_dpop_proof", "no DPoP header")
        parts = proof.split(".")
        if len(parts) != 3:
            raise ProofRefused("invalid_dpop_proof", "not a compact JWS")
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except ValueError as error:
            raise ProofRefused("invalid_dpop_proof", "unreadable: %s" % error)
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise ProofRefused("invalid_dpop_proof", "header or claims not an object")
        if header.get("typ") != "dpop+jwt":
            raise ProofRefused("invalid_dpop_proof", "typ is %r, not dpop+jwt" % header.get("typ"))
        if header.get("alg") != "ES256":
            raise ProofRefused("invalid_dpop_proof", "alg is %r, not ES256" % header.get("alg"))
        jwk = header.get("jwk")
        if not isinstance(jwk, dict) or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
            raise ProofRefused("invalid_dpop_proof", "jwk is not a P-256 public key")
        if "d" in jwk:
            raise ProofRefused("invalid_dpop_proof", "jwk holds a private key")
        try:
            x, y = b64url_decode(jwk["x"]), b64url_decode(jwk["y"])
            if len(x) != 32 or len(y) != 32 or len(signature) != 64:
                raise ValueError("wrong sizes")
            key = ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"), ec.SECP256R1()).public_key()
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            key.verify(der, (parts[0] + "." + parts[1]).encode(), ec.ECDSA(hashes.SHA256()))
        except (KeyError, ValueError, InvalidSignature) as error:
            raise ProofRefused("invalid_dpop_proof", "bad key or signature (%s)" % (error or "signature"))
        if claims.get("htm") != method:
            raise ProofRefused("invalid_dpop_proof", "htm is %r, not %s" % (claims.get("htm"), method))
        if claims.get("htu") != url.split("?")[0].split("#")[0]:
            raise ProofRefused("invalid_dpop_proof", "htu is %r, not %s" % (claims.get("htu"), url))
        iat = claims.get("iat")
        now = self.now()
        if not isinstance(iat, int) or isinstance(iat, bool) or iat < now - IAT_MAX_AGE or iat > now + self.iat_ahead:
            raise ProofRefused("invalid_dpop_proof", "iat %r is outside the window" % iat)
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti:
            raise ProofRefused("invalid_dpop_proof", "no jti")
        if access_token is not None:
            if "ath" not in claims:
                raise ProofRefused("invalid_dpop_proof", "no ath")
            if claims["ath"] != access_token_hash(access_token):
                raise ProofRefused("invalid_dpop_proof", "ath is not the access token's hash")
        with self.lock:
            if jti in self.seen_jti:
                raise ProofRefused("invalid_dpop_proof", "jti replayed")
            if self.demand_nonce and self.nonce_form == "never":
                self.nonce = self.new_nonce()
                raise ProofRefused("use_dpop_nonce", "no nonce is accepted (--dpop-nonce-form never)")
            if self.demand_nonce and claims.get("nonce") != self.nonce:
                raise ProofRefused("use_dpop_nonce", "nonce %r is not the current one" % claims.get("nonce"))
            self.seen_jti.add(jti)
            if self.demand_nonce:
                self.nonce_served += 1
                if self.nonce_served >= self.nonce_uses:
                    self.nonce, self.nonce_served = self.new_nonce(), 0
        return thumbprint(jwk)
