#!/usr/bin/python3
r"""lenient_jws: an ES256 JWS verifier that reads tokens as leniently as the
real server does (Nimbus JOSE+JWT on Gson in lenient mode), for attack tests.

README
======
What it is
    A model of the server's token parsing, written from the public behaviour
    of Nimbus JOSE+JWT (Base64Codec, JOSEObject, JWSHeader) and Gson's
    JsonReader in lenient mode, NOT from devtrust's code. Its job is to say
    "a server like ours would take this as a valid device token", so that an
    attack corpus (see jws_oracle.py beside it) can check that devtrust never
    signs a challenge that becomes such a token. Where the real server's
    behaviour is uncertain, it errs on the side of ACCEPTING (an
    over-approximation): a false alarm costs a refused challenge, a miss costs
    a forged token.

How to use it
    import by path (stdlib + python3-cryptography + python3-json5 only):
        sys.path.insert(0, "Tests/Interop"); import lenient_jws
        header, claims = lenient_jws.verify_lenient(token, public_key)
    token: bytes or str (a str is encoded as UTF-8, as Java's getBytes does).
    public_key: a cryptography EC public key, SPKI DER bytes, standard
    base64 SPKI text (as `devtrust pubkey` prints) or PEM text/bytes.
    Returns (header dict, claims dict or None when the payload is not a JSON
    object); raises LenientJWSError otherwise.
    verify_lenient_json() does the same for the JWS JSON serialization
    (RFC 7515 section 7.2, flattened or general), which some verifiers accept.
    `/usr/bin/python3 lenient_jws.py TOKEN SPKI_B64` prints the result.

What it accepts
    Token shape: the signature is what follows the LAST '.'; the signing input
    is every byte before it, verified exactly as given; the header segment is
    what precedes the FIRST '.', the payload segment what lies between (so
    more than two dots are tolerated; the extra dots are skipped by the
    base64 reader, as PyJWT does).
    Base64 (Nimbus Base64Codec.decode): both alphabets ('+' '/' and '-' '_'),
    every other character or byte is skipped ('=' anywhere, whitespace, junk,
    non-ASCII), a trailing lone digit is dropped, non-zero trailing bits are
    ignored.
    Text: the decoded bytes are read as UTF-8 with malformed sequences
    replaced by U+FFFD (Java's new String(bytes, UTF_8)); a leading BOM is
    skipped (Gson does). No UTF-16/32 detection (that is a Python-only trait,
    covered by PyJWT in the harness).
    JSON: text that is plain JSON (Python's json: NaN and Infinity included)
    is read once; any other text is read by BOTH python3-json5 (JSON5:
    unquoted ES5-identifier names, single quotes, // and /* */ comments,
    trailing commas, hex/+/.5 numbers, \x escapes, backslash-newline
    continuations, Unicode whitespace) and a reader modelled on Gson's
    lenient JsonReader, and a header is accepted when either reading is one
    (they differ on a few inputs). The Gson-lenient reader takes:
      - the ")]}'\n" non-execute prefix, a leading BOM;
      - // and # comments to end of line, /* */ comments, anywhere whitespace
        may appear (also after the value);
      - names and string values unquoted (any run of characters other than
        / \ ; # = { } [ ] : , space tab FF CR LF) or single-quoted;
      - '=' or '=>' between name and value; ';' between members/elements;
      - empty array elements read as null ([1,,2], [1,]);
      - true/false/null in any letter case; raw control characters and
        newlines inside quoted strings; unknown escapes \x read as x;
      - lone surrogate escapes kept as they are;
      - an array of [name, value] pairs read as the map of those pairs
        (Gson's Map adapter takes BEGIN_ARRAY so: [["alg","ES256"]]).
    Duplicate member names: the last one wins (Python's json, json5 and
    jansson do this; Gson's Map adapter would refuse a duplicate top-level
    name: accepting is the deliberate over-approximation).
    Header: a JSON object whose "alg" is the string "ES256". "crit" is not
    checked (over-approximation). "b64": false (RFC 7797) makes the payload
    segment the claims as raw bytes instead of base64.
    Signature: 64 bytes r||s once decoded, checked with python3-cryptography
    (ECDSA P-256 SHA-256) over the exact signing-input bytes.
    Claims: the payload decoded and parsed the same way; a JSON object, or
    None (a JWS whose payload is not an object still verifies).
"""
import base64
import binascii
import json
import re
import sys

import json5
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

__all__ = ["LenientJWSError", "lenient_b64decode", "json_readings", "parse_lenient_json",
           "load_public_key", "verify_lenient", "verify_lenient_json"]

_B64_DIGITS = {c: i for i, c in enumerate(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_B64_DIGITS[ord("-")] = 62
_B64_DIGITS[ord("_")] = 63
_NON_EXECUTE_PREFIX = ")]}'\n"
_GSON_WHITESPACE = " \t\n\r"
_GSON_NOT_LITERAL = "/\\;#={}[]:, \t\f\r\n"
_GSON_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", "\n": "\n"}
_GSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SIGNATURE_LENGTH = 64
_MAX_DEPTH = 64


class LenientJWSError(ValueError):
    """The token is not a valid ES256 JWS even when read leniently."""


def lenient_b64decode(data):
    """Decode base64 the way Nimbus's Base64Codec does: both alphabets, skip
    every other byte, drop a trailing lone digit, ignore trailing bits."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    out = bytearray()
    group = 0
    count = 0
    for byte in data:
        digit = _B64_DIGITS.get(byte)
        if digit is None:
            continue
        group = (group << 6) | digit
        count += 1
        if count == 4:
            out += group.to_bytes(3, "big")
            group = count = 0
    if count >= 2:
        group <<= 6 * (4 - count)
        out += group.to_bytes(3, "big")[:count - 1]
    return bytes(out)


class _GsonReader:
    """A recursive-descent reader of one JSON document with the leniencies of
    com.google.gson.stream.JsonReader (lenient mode), listed in the README."""

    def __init__(self, text):
        self.text = text
        self.pos = 0

    def fail(self, message):
        raise LenientJWSError(f"lenient JSON: {message} at {self.pos}")

    def document(self):
        if self.text.startswith("\ufeff"):
            self.pos = 1
        if self.next_nonwhitespace() is None:
            self.fail("empty document")
        self.pos -= 1
        if self.text.startswith(_NON_EXECUTE_PREFIX, self.pos):
            self.pos += len(_NON_EXECUTE_PREFIX)
        value = self.value(self.next_nonwhitespace(), 0)
        if self.next_nonwhitespace() is not None:
            self.fail("document not fully consumed")
        return value

    def next_nonwhitespace(self):
        """Skip whitespace and comments; return the next character (consumed)
        or None at the end."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            self.pos += 1
            if char in _GSON_WHITESPACE:
                continue
            if char == "/" and self.pos < len(text) and text[self.pos] in "/*":
                if text[self.pos] == "*":
                    end = text.find("*/", self.pos + 1)
                    if end < 0:
                        self.fail("unterminated comment")
                    self.pos = end + 2
                else:
                    self.skip_to_end_of_line()
                continue
            if char == "#":
                self.skip_to_end_of_line()
                continue
            return char
        return None

    def skip_to_end_of_line(self):
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char in "\r\n":
                return

    def value(self, char, depth):
        if char is None:
            self.fail("expected a value")
        if depth > _MAX_DEPTH:
            self.fail("nesting too deep")
        if char == "{":
            return self.object(depth + 1)
        if char == "[":
            return self.array(depth + 1)
        if char in "\"'":
            return self.quoted(char)
        self.pos -= 1
        return self.literal()

    def object(self, depth):
        result = {}
        char = self.next_nonwhitespace()
        if char == "}":
            return result
        while True:
            if char in ("\"", "'"):
                name = self.quoted(char)
            elif char is not None and char not in _GSON_NOT_LITERAL:
                self.pos -= 1
                name = self.unquoted()
            else:
                self.fail("expected a name")
            char = self.next_nonwhitespace()
            if char == "=":
                if self.text.startswith(">", self.pos):
                    self.pos += 1
            elif char != ":":
                self.fail("expected ':'")
            result[name] = self.value(self.next_nonwhitespace(), depth)
            char = self.next_nonwhitespace()
            if char == "}":
                return result
            if char not in (",", ";"):
                self.fail("unterminated object")
            char = self.next_nonwhitespace()

    def array(self, depth):
        result = []
        char = self.next_nonwhitespace()
        if char == "]":
            return result
        while True:
            if char in (",", ";", "]"):
                result.append(None)  # Gson: an empty element is null
                self.pos -= 1
            else:
                result.append(self.value(char, depth))
            char = self.next_nonwhitespace()
            if char == "]":
                return result
            if char not in (",", ";"):
                self.fail("unterminated array")
            char = self.next_nonwhitespace()

    def quoted(self, quote):
        text = self.text
        out = []
        while True:
            if self.pos >= len(text):
                self.fail("unterminated string")
            char = text[self.pos]
            self.pos += 1
            if char == quote:
                return "".join(out)
            if char != "\\":
                out.append(char)
                continue
            if self.pos >= len(text):
                self.fail("unterminated escape")
            escape = text[self.pos]
            self.pos += 1
            if escape == "u":
                digits = text[self.pos:self.pos + 4]
                if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    self.fail("bad \\u escape")
                out.append(chr(int(digits, 16)))
                self.pos += 4
            else:
                out.append(_GSON_ESCAPES.get(escape, escape))

    def unquoted(self):
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _GSON_NOT_LITERAL:
            self.pos += 1
        if self.pos == start:
            self.fail("expected a literal")
        return self.text[start:self.pos]

    def literal(self):
        word = self.unquoted()
        lowered = word.lower()
        if lowered in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[lowered]
        if _GSON_NUMBER.fullmatch(word):
            return json.loads(word)
        return word  # an unquoted string (Gson reads NaN, 0x1F, ES256 so)


def json_readings(text):
    """Every lenient reading of text (str, or bytes read as UTF-8 with
    replacement): the standard reading when the text is plain JSON (json5
    and Gson read plain JSON the same way), otherwise the json5 reading and
    the Gson-lenient reading, whichever succeed (they differ on a few
    inputs, e.g. backslash-newline inside a string). Raises LenientJWSError
    when no reader takes it."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    readings = []
    try:
        readings.append(json5.loads(text))
    except Exception:  # json5 raises ValueError and others on bad input
        pass
    try:
        readings.append(_GsonReader(text).document())
    except (LenientJWSError, RecursionError) as error:
        if not readings:
            raise LenientJWSError(str(error)) from None
    return readings


def parse_lenient_json(text):
    """The first lenient reading of text (see json_readings)."""
    return json_readings(text)[0]


def load_public_key(public_key):
    """A P-256 public key from a key object, SPKI DER, SPKI base64 or PEM."""
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        key = public_key
    else:
        data = public_key.encode("ascii") if isinstance(public_key, str) else bytes(public_key)
        if data.lstrip().startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(data)
        else:
            if not data.startswith(b"\x30"):
                data = base64.b64decode(data, validate=True)
            key = serialization.load_der_public_key(data)
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise LenientJWSError("not a P-256 public key")
    return key


def as_gson_map(value):
    """What Gson's Map adapter makes of a reading: an object as it is, or an
    array of [name, value] pairs as the map of those pairs (its BEGIN_ARRAY
    branch; Nimbus parses headers and claims into a Map through Gson)."""
    if isinstance(value, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in value):
        return {str(name): item for name, item in value}
    return value


def _header(readings):
    """The first reading that is a header with alg ES256."""
    readings = [as_gson_map(reading) for reading in readings]
    for header in readings:
        if isinstance(header, dict) and header.get("alg") == "ES256":
            return header
    header = readings[0]
    if not isinstance(header, dict):
        raise LenientJWSError("header is not a JSON object")
    raise LenientJWSError(f"alg is {header.get('alg')!r}, not ES256")


def _verify_signature(key, signature_segment, signing_input):
    raw = lenient_b64decode(signature_segment)
    if len(raw) != _SIGNATURE_LENGTH:
        raise LenientJWSError(f"signature is {len(raw)} bytes, not {_SIGNATURE_LENGTH}")
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise LenientJWSError("bad signature") from None


def _claims(header, payload_segment):
    if header.get("b64", True) is False:
        raw = _as_bytes(payload_segment)
    else:
        raw = lenient_b64decode(payload_segment)
    try:
        readings = json_readings(raw)
    except LenientJWSError:
        return None
    return next((claims for claims in map(as_gson_map, readings) if isinstance(claims, dict)), None)


def _as_bytes(token):
    if isinstance(token, str):
        try:
            return token.encode("utf-8")
        except UnicodeEncodeError:
            raise LenientJWSError("token is not encodable as UTF-8") from None
    if isinstance(token, (bytes, bytearray, memoryview)):
        return bytes(token)
    raise LenientJWSError(f"token is a {type(token).__name__}")


def verify_lenient(token, public_key):
    """Verify a compact ES256 JWS read leniently; return (header, claims)."""
    data = _as_bytes(token)
    key = load_public_key(public_key)
    last = data.rfind(b".")
    first = data.find(b".")
    if last < 0 or first == last:
        raise LenientJWSError("not a compact JWS (needs header.payload.signature)")
    signing_input = data[:last]
    header = _header(json_readings(lenient_b64decode(data[:first])))
    _verify_signature(key, data[last + 1:], signing_input)
    return header, _claims(header, data[first + 1:last])


def verify_lenient_json(token, public_key):
    """Verify a JWS JSON serialization (flattened or general) read leniently:
    "alg" may sit in the protected or the unprotected "header"; the signing
    input is protected + '.' + payload as given. Returns (merged header,
    claims) for the first signature that verifies."""
    key = load_public_key(public_key)
    document = parse_lenient_json(_as_bytes(token))
    if not isinstance(document, dict) or not isinstance(document.get("payload"), str):
        raise LenientJWSError("not a JWS JSON serialization")
    entries = document.get("signatures", [document])
    if not isinstance(entries, list):
        raise LenientJWSError("signatures is not an array")
    errors = []
    for entry in entries:
        try:
            if not isinstance(entry, dict) or not isinstance(entry.get("signature"), str):
                raise LenientJWSError("no signature")
            protected = entry.get("protected", "")
            unprotected = entry.get("header", {})
            if not isinstance(protected, str) or not isinstance(unprotected, dict):
                raise LenientJWSError("bad protected or header member")
            readings = [{}]
            if protected:
                readings = [r for r in json_readings(lenient_b64decode(protected)) if isinstance(r, dict)]
                if not readings:
                    raise LenientJWSError("protected header is not an object")
            header = _header([{**unprotected, **r} for r in readings])
            signing_input = _as_bytes(protected + "." + document["payload"])
            _verify_signature(key, entry["signature"], signing_input)
            return header, _claims(header, document["payload"])
        except LenientJWSError as error:
            errors.append(str(error))
    raise LenientJWSError("; ".join(errors) or "no signatures")


def main(argv):
    if len(argv) != 3:
        print("usage: lenient_jws.py TOKEN|- SPKI_B64", file=sys.stderr)
        return 2
    token = sys.stdin.buffer.read().strip() if argv[1] == "-" else argv[1]
    verify = verify_lenient_json if _as_bytes(token).lstrip()[:1] == b"{" else verify_lenient
    try:
        header, claims = verify(token, argv[2])
    except (LenientJWSError, ValueError, binascii.Error) as error:
        print(json.dumps({"valid": False, "error": str(error)}))
        return 1
    print(json.dumps({"valid": True, "header": header, "claims": claims}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
