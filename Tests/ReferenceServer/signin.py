"""The sign-in side of devtrust's reference server (server contract sections 3, 4, 4b).

App-native authentication (POST /oauth2/authorize with response_mode=direct,
then /oauth2/authn), which verifies the device token exactly as the server does
(deviceId of a stored device, ES256 raw signature with its key, jti replay,
iat window) and records the outcome per flow without failing the request; a
BasicAuthenticator and an email OTP option (multi-option step: the username,
then the code it mails to the outbox, a new one on resendCode), an optional
TOTP second step; a token endpoint with PKCE S256 and rotating refresh tokens;
RFC 8628 device authorization with the exact polling rules (and, on chosen
polls, a 503 with a JSON error or a connection closed without an answer); PAR;
revocation; discovery at /oauth2/token/.well-known/openid-configuration (the
issuer {base}/oauth2/token, or --issuer).
"""
import base64
import hashlib
import json
import re
import secrets
import threading
import time
import uuid
from urllib.parse import parse_qs, urlencode

import dpop
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

BASIC_ID = base64.b64encode(b"BasicAuthenticator:LOCAL").decode()
EMAIL_OTP_ID = base64.b64encode(b"email-otp-authenticator:LOCAL").decode()
TOTP_ID = base64.b64encode(b"totp:LOCAL").decode()
FEDERATED_ID = base64.b64encode(b"GoogleOIDCAuthenticator:Google").decode()
MAGIC_LINK_ID = base64.b64encode(b"MagicLinkAuthenticator:LOCAL").decode()
FEDERATED_STATE = "federated-state-42"
CLIENT_ID = "devtrust-app"
REDIRECT_URIS = ("http://127.0.0.1:8765/callback", "https://app.example/callback")
USER = ("alice@example.com", "correct horse")
# RFC 8252 section 7.3: a loopback redirect URI matches whatever its port.
LOOPBACK_REDIRECT = re.compile(r"^http://(127\.0\.0\.1|\[::1\]|localhost)(:[0-9]{1,5})?/[^?#]*$")
# --browser-login deny: the server's words, with terminal escape sequences a client must not pass on.
DENIED_DESCRIPTION = "The user denied the request\u001b]0;owned\u0007\u001b[2J"


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def int_b64url(value, length=None):
    data = value.to_bytes(length or (value.bit_length() + 7) // 8, "big")
    return b64url(data)


class IDTokenSigner:
    """Signs ID tokens as an OpenID provider does (ES256 or RS256, --id-token-alg), with
    the keys its JWK set publishes; --id-token-fault makes one wrong in a chosen way."""

    def __init__(self, options):
        self.options = options
        self.ec_key = ec.generate_private_key(ec.SECP256R1())
        # small-rsa-key: a 1024-bit key, which a client must not trust.
        self.rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024 if options.id_token_fault == "small-rsa-key" else 2048)

    def jwks(self):
        ec_numbers = self.ec_key.public_key().public_numbers()
        rsa_numbers = self.rsa_key.public_key().public_numbers()
        return {"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "ec-1", "use": "sig", "alg": "ES256",
             "x": int_b64url(ec_numbers.x, 32), "y": int_b64url(ec_numbers.y, 32)},
            {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": int_b64url(rsa_numbers.n), "e": int_b64url(rsa_numbers.e)},
        ]}

    def sign(self, issuer, user, nonce, now, refreshing=False, extra_claims=None):
        fault = self.options.id_token_fault
        alg = "RS256" if fault == "small-rsa-key" else self.options.id_token_alg
        claims = {"iss": issuer, "sub": "user-" + hashlib.sha256(user.encode()).hexdigest()[:12], "aud": CLIENT_ID,
                  "exp": int(now) + 3600, "iat": int(now), "name": "Alice Example" if user == USER[0] else user, "preferred_username": user}
        claims.update(extra_claims or {})
        if nonce is not None:
            claims["nonce"] = nonce
        if fault == "other-sub-on-refresh" and refreshing:
            claims["sub"] = "user-mallory"
        if fault == "wrong-iss":
            claims["iss"] = issuer + "/other"
        elif fault == "wrong-aud":
            claims["aud"] = "another-client"
        elif fault == "multi-aud-no-azp":
            claims["aud"] = [CLIENT_ID, "another-client"]
        elif fault == "multi-aud-azp":
            claims["aud"] = [CLIENT_ID, "another-client"]
            claims["azp"] = CLIENT_ID
        elif fault == "expired":
            claims["exp"] = int(now) - 120
            claims["iat"] = int(now) - 3720
        elif fault == "future-iat":
            claims["iat"] = int(now) + 600
        elif fault == "wrong-nonce" and nonce is not None:
            claims["nonce"] = "not-the-nonce"
        elif fault == "no-nonce":
            claims.pop("nonce", None)
        header = {"alg": alg, "typ": "JWT", "kid": "ec-1" if alg == "ES256" else "rsa-1"}
        if fault == "unknown-kid":
            header["kid"] = "retired-key"
        if fault == "alg-none":
            header = {"alg": "none", "typ": "JWT"}
        if fault == "hs256":
            header = {"alg": "HS256", "typ": "JWT", "kid": header["kid"]}
        signing_input = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())).encode()
        if fault == "alg-none":
            return signing_input.decode() + "."
        if fault == "hs256":
            # The classic confusion: an HMAC keyed with the public key's bytes.
            secret = self.rsa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            mac = hmac.HMAC(secret, hashes.SHA256())
            mac.update(signing_input)
            return signing_input.decode() + "." + b64url(mac.finalize())
        if alg == "ES256":
            r, s = decode_dss_signature(self.ec_key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        else:
            signature = self.rsa_key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        if fault == "bad-signature":
            signature = bytes([signature[0] ^ 1]) + signature[1:]
        return signing_input.decode() + "." + b64url(signature)


class OAuthFailure(Exception):
    def __init__(self, status, error, description, headers=None):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description
        self.headers = headers or {}


class DropConnection(Exception):
    """Close the connection without an answer (a network failure, as the client sees it)."""


class NotFoundPage(Exception):
    """Answer 404 with an HTML page, as a misrouted request gets."""


def add_device_code_options(parser):
    """Options of the device-code side beyond --device-expires/--device-interval/... (own function: easy merges)."""
    parser.add_argument("--dpop", action="store_true",
                        help="DPoP (RFC 9449), checked strictly: advertised in discovery, proofs at the token endpoint bind the tokens "
                             "(token_type DPoP, cnf.jkt), a bound refresh token needs a proof of its key, /resource checks ath and the key")
    parser.add_argument("--dpop-nonce", action="store_true", help="with --dpop: demand the server's nonce in every proof (use_dpop_nonce)")
    parser.add_argument("--dpop-nonce-uses", type=int, default=4, help="with --dpop-nonce: a nonce serves this many proofs, then rotates")
    parser.add_argument("--dpop-iat-ahead", type=int, default=dpop.IAT_MAX_AHEAD,
                        help="with --dpop: how many seconds in the server's future a proof's iat may be (glewlwyd's default is 0)")
    parser.add_argument("--dpop-nonce-form", choices=["normal", "long", "invalid", "never"], default="normal",
                        help="with --dpop-nonce: the nonces' form (dpop.DPoPVerifier.new_nonce); never: no nonce is accepted")
    parser.add_argument("--issuer", help="the discovery document's issuer (default: {base}/oauth2/token)")
    parser.add_argument("--device-unavailable-on", type=int, action="append", default=[], metavar="N",
                        help="answer the Nth device-code poll with HTTP 503 {\"error\":\"temporarily_unavailable\"}")
    parser.add_argument("--device-not-found-on", type=int, action="append", default=[], metavar="N",
                        help="answer the Nth device-code poll with a 404 HTML page")
    parser.add_argument("--device-drop-on", type=int, action="append", default=[], metavar="N",
                        help="close the connection of the Nth device-code poll without an answer")
    parser.add_argument("--device-user-code", metavar="TEXT",
                        help="the user_code of every device authorization, exactly as given (default: four random consonants, a dash, four more, such as WDJB-MJHT)")
    parser.add_argument("--device-verification-uri", metavar="TEXT",
                        help="the verification_uri, exactly as given (default: {base}/device)")
    parser.add_argument("--device-verification-uri-complete", metavar="TEXT",
                        help="the verification_uri_complete, exactly as given (default: the verification URI with ?user_code=)")


class SignInServer:
    def __init__(self, options, flow_server, base_url):
        self.options = options
        self.flow_server = flow_server
        self.base_url = base_url
        self.lock = threading.Lock()
        self.flows = {}
        self.codes = {}
        self.refresh_tokens = {}
        self.access_tokens = {}
        self.records = []
        self.device_grants = {}
        self.par_requests = {}
        self.stats = {"refresh": 0, "token": 0, "revoked": 0, "refreshFaults": 0, "deleteTokenGrants": 0}
        self.id_tokens = IDTokenSigner(options)
        # The server's clock (reference_server.py sets its --clock-offset one).
        self.now = time.time
        self.request_state = threading.local()
        self.dpop = dpop.DPoPVerifier(lambda: int(self.now()), options.dpop_nonce, options.dpop_nonce_uses,
                                         options.dpop_nonce_form, options.dpop_iat_ahead) if options.dpop else None

    # -- discovery -------------------------------------------------------------

    def issuer(self):
        """{base}/oauth2/token, as WSO2's; --issuer PATH puts it at {base}PATH (its document is then
        at RFC 8414's {base}/.well-known/openid-configuration{PATH} too)."""
        issuer = self.options.issuer
        if not issuer:
            return self.base_url() + "/oauth2/token"
        return self.base_url() + issuer if issuer.startswith("/") else issuer

    def discovery(self):
        base = self.base_url()
        document = {
            "issuer": self.issuer(),
            "authorization_endpoint": base + "/oauth2/authorize",
            "token_endpoint": base + "/oauth2/token",
            "revocation_endpoint": base + "/oauth2/revoke",
            "device_authorization_endpoint": base + "/oauth2/device_authorize",
            "pushed_authorization_request_endpoint": base + "/oauth2/par",
            "jwks_uri": base + "/oauth2/jwks",
            "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        }
        if self.options.no_par:
            del document["pushed_authorization_request_endpoint"]
        if self.options.no_revocation:
            del document["revocation_endpoint"]
        if self.options.par_endpoint:
            document["pushed_authorization_request_endpoint"] = self.options.par_endpoint
        if self.dpop:
            document["dpop_signing_alg_values_supported"] = ["ES256"]
        return document

    # -- app-native authentication --------------------------------------------

    def authorize(self, form, headers, tenant=""):
        get = lambda name: form.get(name, [None])[0]
        if get("client_id") != CLIENT_ID:
            return 400, {"code": "ABA-60001", "message": "Invalid client", "description": "unknown client_id %r" % get("client_id"), "traceId": None}
        if get("redirect_uri") not in REDIRECT_URIS or get("response_type") != "code":
            return 400, {"code": "ABA-60002", "message": "Invalid request", "description": "bad redirect_uri or response_type", "traceId": None}
        if get("response_mode") != "direct" or get("code_challenge_method") != "S256" or not get("code_challenge"):
            return 400, {"code": "ABA-60003", "message": "Invalid request", "description": "app-native sign-in needs response_mode=direct and PKCE S256", "traceId": None}
        flow_id = str(uuid.uuid4())
        token = get("device_token") or headers.get("X-Device-Token")
        record = {"flowId": flow_id, "deviceToken": token is not None}
        record.update(self.flow_server.device_check(token))
        with self.lock:
            self.records.append(record)
            self.flows[flow_id] = {"request": {k: get(k) for k in ("redirect_uri", "scope", "state", "code_challenge", "nonce")},
                                   "step": "first", "user": None, "failures": 0, "tenant": tenant}
        flow = self.flows[flow_id]
        return 200, self.first_step(flow_id, flow)

    def first_step(self, flow_id, flow, messages=None, failed=False):
        basic = {"authenticatorId": BASIC_ID, "authenticator": "Username & Password", "idp": "LOCAL",
                 "metadata": {"promptType": "USER_PROMPT", "params": [
                     {"param": "username", "type": "STRING", "order": 0, "i18nKey": "username.param", "displayName": "Username", "confidential": False},
                     {"param": "password", "type": "STRING", "order": 1, "i18nKey": "password.param", "displayName": "Password", "isConfidential": True}]},
                 "requiredParams": ["username", "password"]}
        email = {"authenticatorId": EMAIL_OTP_ID, "authenticator": "Email OTP", "idp": "LOCAL"}
        federated = {"authenticatorId": FEDERATED_ID, "authenticator": "Google", "idp": "Google",
                     "metadata": {"promptType": "REDIRECTION_PROMPT", "params": [],
                                  "additionalData": {"redirectUrl": "https://accounts.google.example/o/oauth2/auth?state=" + FEDERATED_STATE}},
                     "requiredParams": ["code", "state"]}
        if self.options.authenticators == "basic":
            next_step = {"stepType": "AUTHENTICATOR_PROMPT", "authenticators": [basic]}
        elif self.options.authenticators == "lookalike":
            # Two options that start alike: a name's start must not pick one of them.
            magic = {"authenticatorId": MAGIC_LINK_ID, "authenticator": "Email Magic Link", "idp": "LOCAL"}
            next_step = {"stepType": "MULTI_OPTIONS_PROMPT", "authenticators": [basic, email, magic]}
        elif self.options.authenticators == "federated":
            next_step = {"stepType": "MULTI_OPTIONS_PROMPT", "authenticators": [basic, federated]}
        else:
            next_step = {"stepType": "MULTI_OPTIONS_PROMPT", "authenticators": [basic, email]}
        return self.answer(flow_id, next_step, messages, failed)

    def answer(self, flow_id, next_step, messages=None, failed=False):
        if messages:
            next_step["messages"] = messages
        status = self.options.fail_spelling if failed else "INCOMPLETE"
        return {"flowId": flow_id, "flowStatus": status, "flowType": "AUTHENTICATION", "nextStep": next_step,
                "links": [{"name": "authentication", "href": self.authn_link(flow_id), "method": "POST"}]}

    def authn_link(self, flow_id):
        """The next step's link in the form --link-form names. The API description gives
        an absolute path ("/oauth2/authn", "/t/{org}/oauth2/authn" in a tenant); servers
        also send absolute URLs; the relative and network-path forms are RFC 3986 references too."""
        with self.lock:
            tenant = self.flows.get(flow_id, {}).get("tenant", "")
        path = tenant + "/oauth2/authn"
        form = self.options.link_form
        if form == "absolute":
            return self.base_url() + path
        if form == "network-path":
            return "//" + self.base_url().split("://", 1)[1] + path
        if form == "relative":
            return "authn"
        return path

    def authn(self, body, tenant=""):
        if not isinstance(body, dict) or not isinstance(body.get("selectedAuthenticator"), dict):
            return 400, {"code": "ABA-60004", "message": "Invalid request", "description": "selectedAuthenticator is required", "traceId": None}
        flow_id = body.get("flowId")
        with self.lock:
            flow = self.flows.get(flow_id)
        # A flow lives in its tenant: a step sent to another tenant's path finds no flow.
        if flow is not None and flow["tenant"] != tenant:
            flow = None
        if flow is None:
            return 400, {"code": "ABA-60005", "message": "Invalid flow", "description": "unknown or finished flowId", "traceId": None}
        selected = body["selectedAuthenticator"]
        params = selected.get("params") or {}
        if not all(isinstance(v, str) for v in params.values()):
            return 400, {"code": "ABA-60006", "message": "Invalid params", "description": "params must be strings", "traceId": None}
        authenticator = selected.get("authenticatorId")
        failure = [{"type": "ERROR", "messageId": "ABA-60101", "message": "Authentication failed: check the values and try again."}]
        if authenticator == EMAIL_OTP_ID and flow["step"] == "first":
            if not params:
                flow["step"] = "email-otp-username"
                return 200, self.answer(flow_id, self.email_otp_step(["username"]))
        if authenticator == EMAIL_OTP_ID and flow["step"] == "email-otp-username":
            if params.get("username") != USER[0]:
                return 200, self.answer(flow_id, self.email_otp_step(["username"]), failure, failed=True)
            flow["step"] = "email-otp"
            self.send_email_otp(flow)
            return 200, self.answer(flow_id, self.email_otp_step(["OTPCode"]), [self.otp_sent_message()])
        if authenticator == EMAIL_OTP_ID and flow["step"] == "email-otp":
            return 200, self.on_email_otp(flow_id, flow, params, failure)
        if authenticator == BASIC_ID and flow["step"] == "first":
            if (params.get("username"), params.get("password")) == USER:
                return 200, self.after_first_factor(flow_id, flow, USER[0])
            flow["failures"] += 1
            return 200, self.first_step(flow_id, flow, failure, failed=True)
        if authenticator == FEDERATED_ID and flow["step"] == "first":
            if params.get("state") == FEDERATED_STATE and params.get("code"):
                return 200, self.after_first_factor(flow_id, flow, USER[0])
            return 200, self.first_step(flow_id, flow, failure, failed=True)
        if authenticator == TOTP_ID and flow["step"] == "totp":
            if params.get("token") == self.options.otp:
                return 200, self.success(flow_id, flow)
            return 200, self.answer(flow_id, self.totp_step(), failure, failed=True)
        return 400, {"code": "ABA-60007", "message": "Invalid authenticator", "description": "authenticator %r is not expected now" % authenticator, "traceId": None}

    # Email OTP as WSO2's email-otp-authenticator runs it in the app-native API: the username
    # first (identifier first), then the code it mailed (the outbox); `resendCode: "true"`
    # without a code mails a new one, and a code sent with it is refused, as that server does.
    EMAIL_OTP_PARAMS = {
        "username": {"param": "username", "type": "STRING", "order": 0, "displayName": "Username", "confidential": False},
        "OTPCode": {"param": "OTPCode", "type": "STRING", "order": 1, "displayName": "Code", "confidential": True},
    }

    def email_otp_step(self, names):
        return {"stepType": "AUTHENTICATOR_PROMPT", "authenticators": [
            {"authenticatorId": EMAIL_OTP_ID, "authenticator": "Email OTP", "idp": "LOCAL",
             "metadata": {"promptType": "USER_PROMPT", "params": [self.EMAIL_OTP_PARAMS[name] for name in names]},
             "requiredParams": names}]}

    def send_email_otp(self, flow):
        flow["otp"] = self.options.otp or "%06d" % secrets.randbelow(1000000)
        self.flow_server.store.send_otp(USER[0], flow["otp"])

    @staticmethod
    def otp_sent_message(again=False):
        return {"type": "INFO", "messageId": "EmailOTPSent", "message": "We sent a %scode to a***@example.com." % ("new " if again else "")}

    def on_email_otp(self, flow_id, flow, params, failure):
        code, resend = params.get("OTPCode"), params.get("resendCode") == "true"
        if resend and not code:
            self.send_email_otp(flow)
            return self.answer(flow_id, self.email_otp_step(["OTPCode"]), [self.otp_sent_message(again=True)])
        if resend or not code:
            refusal = [{"type": "ERROR", "messageId": "ETP-65004" if resend else "ETP-65003",
                        "message": "A code and a resend were sent together." if resend else "The code is empty."}]
            return self.answer(flow_id, self.email_otp_step(["OTPCode"]), refusal, failed=True)
        if code != flow["otp"]:
            return self.answer(flow_id, self.email_otp_step(["OTPCode"]), failure, failed=True)
        return self.after_first_factor(flow_id, flow, USER[0])

    def totp_step(self):
        return {"stepType": "AUTHENTICATOR_PROMPT", "authenticators": [
            {"authenticatorId": TOTP_ID, "authenticator": "TOTP", "idp": "LOCAL",
             "metadata": {"promptType": "USER_PROMPT", "params": [
                 {"param": "token", "type": "STRING", "order": 0, "displayName": "Authenticator app code", "isConfidential": True}]},
             "requiredParams": ["token"]}]}

    def after_first_factor(self, flow_id, flow, user):
        flow["user"] = user
        if self.options.mfa == "totp":
            flow["step"] = "totp"
            return self.answer(flow_id, self.totp_step())
        return self.success(flow_id, flow)

    def success(self, flow_id, flow):
        code = secrets.token_urlsafe(24)
        with self.lock:
            self.codes[code] = {"user": flow["user"], "request": flow["request"], "flowId": flow_id, "at": time.time()}
            self.flows.pop(flow_id, None)
        return {"flowId": flow_id, "flowStatus": "SUCCESS_COMPLETED",
                "authData": {"code": code, "state": flow["request"]["state"], "session_state": secrets.token_hex(8)}}

    # -- token endpoint ----------------------------------------------------------

    def nonce_headers(self):
        """What every answer of a server that demands nonces carries: the current one."""
        return {"DPoP-Nonce": self.dpop.current_nonce()} if self.dpop and self.dpop.demand_nonce else {}

    def proof_key(self, proof):
        """The jkt of the token request's DPoP proof (None without one, or without --dpop); a bad proof is refused."""
        if not self.dpop or proof is None:
            return None
        try:
            return self.dpop.verify(proof, "POST", self.base_url() + "/oauth2/token")
        except dpop.ProofRefused as refusal:
            raise OAuthFailure(400, refusal.error, refusal.reason, self.nonce_headers())

    def token(self, form, proof=None):
        get = lambda name: form.get(name, [None])[0]
        grant = get("grant_type")
        if get("client_id") != CLIENT_ID:
            raise OAuthFailure(401, "invalid_client", "unknown client")
        jkt = self.proof_key(proof)
        if grant == "refresh_token" and self.dpop:
            # RFC 9449 section 5: a refresh token bound to a key is refreshed only with a proof of that key.
            with self.lock:
                bound = (self.refresh_tokens.get(get("refresh_token") or "") or {}).get("jkt")
            if bound and jkt != bound:
                raise OAuthFailure(400, "invalid_dpop_proof", "the refresh token is bound to another key" if jkt else "the refresh token is DPoP-bound: a proof is needed")
        # The token request's key, for issue() on this request's thread.
        self.request_state.jkt = jkt
        if grant == "authorization_code":
            with self.lock:
                entry = self.codes.pop(get("code") or "", None)
            if entry is None:
                raise OAuthFailure(400, "invalid_grant", "unknown or used code")
            verifier = get("code_verifier") or ""
            if b64url(hashlib.sha256(verifier.encode()).digest()) != entry["request"]["code_challenge"]:
                raise OAuthFailure(400, "invalid_grant", "PKCE verification failed")
            if get("redirect_uri") != entry["request"]["redirect_uri"]:
                raise OAuthFailure(400, "invalid_grant", "redirect_uri does not match")
            return self.issue(entry["user"], entry["request"]["scope"] or "openid", entry["request"].get("nonce"))
        if grant == "refresh_token":
            with self.lock:
                self.stats["refresh"] += 1
                entry = self.refresh_tokens.pop(get("refresh_token") or "", None)
            if entry is None:
                raise OAuthFailure(400, "invalid_grant", "unknown, used or revoked refresh token")
            if self.options.refresh_delay:
                time.sleep(self.options.refresh_delay)
            return self.issue(entry["user"], entry["scope"], refreshing=True)
        if grant == "urn:ietf:params:oauth:grant-type:device_code":
            return self.poll_device(get("device_code") or "")
        if grant == "delete_token":
            with self.lock:
                self.stats["deleteTokenGrants"] += 1
        raise OAuthFailure(400, "unsupported_grant_type", "grant %r" % grant)

    def take_refresh_fault(self):
        """True for the refreshes that --refresh-fault makes fail (the first --refresh-fault-count)."""
        with self.lock:
            if not self.options.refresh_fault or self.stats["refreshFaults"] >= self.options.refresh_fault_count:
                return False
            self.stats["refreshFaults"] += 1
            return True

    def issue(self, user, scope, nonce=None, refreshing=False, claims=None):
        """claims: more for the ID token (a CIBA one carries the auth_req_id)."""
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        jkt = getattr(self.request_state, "jkt", None)
        with self.lock:
            self.stats["token"] += 1
            self.access_tokens[access] = {"user": user, "scope": scope, "jkt": jkt}
            self.refresh_tokens[refresh] = {"user": user, "scope": scope, "jkt": jkt}
        answer = {"access_token": access, "token_type": "DPoP" if jkt else "Bearer", "expires_in": self.options.access_token_ttl,
                  "refresh_token": refresh, "scope": scope,
                  "id_token": self.id_tokens.sign(self.issuer(), user, nonce, self.now(), refreshing, claims)}
        # Servers that leave out what RFC 6749 only recommends.
        if self.options.no_expires_in:
            del answer["expires_in"]
        if self.options.no_refresh_token:
            del answer["refresh_token"]
        return answer

    def resource(self, method, authorization, proof):
        """/resource: who the access token is for. A DPoP-bound token needs `Authorization: DPoP` and a proof
        of its key with ath; a bearer token passes as Bearer. (status, body, headers)."""
        scheme, _, token = (authorization or "").partition(" ")
        with self.lock:
            entry = self.access_tokens.get(token)
        if entry is None:
            return 401, {"error": "invalid_token"}, {"WWW-Authenticate": 'Bearer error="invalid_token"'}
        if not entry.get("jkt"):
            if scheme.lower() != "bearer":
                return 401, {"error": "invalid_token", "error_description": "a bearer token goes as Bearer"}, {"WWW-Authenticate": 'Bearer error="invalid_token"'}
            return 200, {"sub": entry["user"], "scope": entry["scope"], "jkt": None}, {}
        if scheme != "DPoP":
            return 401, {"error": "invalid_token", "error_description": "a DPoP-bound token goes as DPoP"}, {"WWW-Authenticate": 'DPoP error="invalid_token"'}
        try:
            jkt = self.dpop.verify(proof, method, self.base_url() + "/resource", access_token=token)
        except dpop.ProofRefused as refusal:
            return 401, {"error": refusal.error, "error_description": refusal.reason}, dict(
                self.nonce_headers(), **{"WWW-Authenticate": 'DPoP error="%s", algs="ES256"' % refusal.error})
        if jkt != entry["jkt"]:
            with self.lock:
                self.dpop.refusals.append("the proof key is not the token's cnf.jkt")
            return 401, {"error": "invalid_dpop_proof", "error_description": "the proof key is not the token's"}, {
                "WWW-Authenticate": 'DPoP error="invalid_dpop_proof"'}
        return 200, {"sub": entry["user"], "scope": entry["scope"], "jkt": jkt}, self.nonce_headers()

    def revoke(self, form):
        token = form.get("token", [""])[0]
        with self.lock:
            hit = self.access_tokens.pop(token, None) or self.refresh_tokens.pop(token, None)
            if hit:
                self.stats["revoked"] += 1
        return {}

    # -- device authorization (RFC 8628) ---------------------------------------

    def device_authorize(self, form):
        if form.get("client_id", [None])[0] != CLIENT_ID:
            raise OAuthFailure(401, "invalid_client", "unknown client")
        device_code = secrets.token_urlsafe(32)
        user_code = self.options.device_user_code or ("".join(secrets.choice("BCDFGHJKLMNPQRSTVWXZ") for _ in range(4)) + "-"
                                                      + "".join(secrets.choice("BCDFGHJKLMNPQRSTVWXZ") for _ in range(4)))
        grant = {"user_code": user_code, "created": time.time(), "expires_in": self.options.device_expires,
                 "interval": self.options.device_interval, "state": "pending", "polls": [], "scope": form.get("scope", ["openid"])[0]}
        with self.lock:
            self.device_grants[device_code] = grant
        base = self.base_url()
        verification_uri = self.options.device_verification_uri or base + "/device"
        return {"device_code": device_code, "user_code": user_code, "verification_uri": verification_uri,
                "verification_uri_complete": self.options.device_verification_uri_complete or base + "/device?user_code=" + user_code,
                "expires_in": self.options.device_expires, "interval": self.options.device_interval}

    def poll_device(self, device_code):
        with self.lock:
            grant = self.device_grants.get(device_code)
        if grant is None or grant["state"] == "done":
            raise OAuthFailure(400, "invalid_grant", "unknown or used device_code")
        now = time.time()
        grant["polls"].append(now)
        count = len(grant["polls"])
        if now - grant["created"] > grant["expires_in"]:
            raise OAuthFailure(400, "expired_token", "the device code expired")
        if count in self.options.device_drop_on:
            raise DropConnection()
        if count in self.options.device_not_found_on:
            raise NotFoundPage()
        if count in self.options.device_unavailable_on:
            raise OAuthFailure(503, "temporarily_unavailable", "the server is overloaded; try again later")
        if count in self.options.device_slow_down_on:
            raise OAuthFailure(400, "slow_down", "polling too fast")
        if grant["state"] == "denied":
            raise OAuthFailure(400, "access_denied", "the user denied the request")
        if grant["state"] == "approved" or (self.options.device_approve_after and count >= self.options.device_approve_after):
            grant["state"] = "done"
            return self.issue(USER[0], grant["scope"])
        raise OAuthFailure(400, "authorization_pending", "waiting for the user")

    def decide(self, user_code, decision):
        with self.lock:
            for grant in self.device_grants.values():
                if grant["user_code"] == user_code:
                    grant["state"] = decision
                    return True
        return False

    def device_polls(self):
        with self.lock:
            return [{"userCode": g["user_code"], "deviceCode": code, "polls": g["polls"], "created": g["created"], "state": g["state"]}
                    for code, g in self.device_grants.items()]

    # -- browser sign-in (--browser-login) ---------------------------------------

    def browser_authorize(self, request, pushed, check, user=None):
        """GET /oauth2/authorize as a real server answers it once the user has signed in
        in the browser: a 302 to the request's redirect_uri with a code bound to its PKCE
        challenge and the state (--browser-login approve), or with error=access_denied
        (deny). The device token is checked and recorded as on the app-native path. `user`: who
        the browser is signed in as (its session: the `reference-user` cookie), alice by default.
        Returns (status, location or None, error document or None)."""
        get = lambda name: request.get(name)
        redirect = get("redirect_uri") or ""
        if get("client_id") != CLIENT_ID or not (redirect in REDIRECT_URIS or LOOPBACK_REDIRECT.match(redirect)):
            # Never redirect to a URI that is not the client's.
            return 400, None, {"error": "invalid_request", "error_description": "unknown client_id or redirect_uri"}
        record = {"flowId": str(uuid.uuid4()), "deviceToken": get("device_token") is not None, "path": "browser",
                  "redirectUri": redirect, "pushed": pushed}
        record.update(check)
        if get("response_type") != "code" or get("code_challenge_method") != "S256" or not get("code_challenge"):
            answer = {"error": "invalid_request", "error_description": "the browser path needs response_type=code and PKCE S256"}
        elif self.options.browser_login == "deny":
            answer = {"error": "access_denied", "error_description": DENIED_DESCRIPTION}
        else:
            code = secrets.token_urlsafe(24)
            with self.lock:
                self.codes[code] = {"user": user or USER[0], "request": {k: get(k) for k in ("redirect_uri", "scope", "state", "code_challenge", "nonce")},
                                    "flowId": record["flowId"], "at": time.time()}
            record["code"] = code
            record["user"] = user or USER[0]
            answer = {"code": code}
        if get("state") is not None:
            answer["state"] = get("state")
        with self.lock:
            self.records.append(record)
        return 302, redirect + ("&" if "?" in redirect else "?") + urlencode(answer), None

    # -- PAR -------------------------------------------------------------------

    def par(self, form):
        if form.get("client_id", [None])[0] != CLIENT_ID:
            raise OAuthFailure(401, "invalid_client", "unknown client")
        request_uri = "urn:ietf:params:oauth:request_uri:" + secrets.token_urlsafe(16)
        with self.lock:
            self.par_requests[request_uri] = {k: v[0] for k, v in form.items()}
        return {"request_uri": request_uri, "expires_in": 90}

    def pushed(self, request_uri):
        with self.lock:
            return self.par_requests.get(request_uri)


def parse_form(raw):
    return parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
