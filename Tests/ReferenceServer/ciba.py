"""OpenID CIBA poll mode for the reference server (Core 1.0 sections 7 and 10-11).

POST /oauth2/ciba takes a public client's backchannel authentication request
(client_id, scope with openid, login_hint, binding_message, requested_expiry;
a client_secret is refused) and answers auth_req_id, expires_in and interval.
The token endpoint's grant urn:openid:params:grant-type:ciba polls it by the
same rules as a device code: on chosen polls slow_down, access_denied,
expired_token, a 503 with a JSON error or a closed connection; approval at the
Nth poll. Like glewlwyd, the token answer echoes auth_req_id (a client must not
keep or show it). GET /api/ciba/requests lists each request with its poll times
and its auth_req_id, for the tests.
"""
import secrets
import threading
import time

import signin

GRANT = "urn:openid:params:grant-type:ciba"


def add_ciba_options(parser):
    parser.add_argument("--no-ciba", action="store_true", help="discovery without a backchannel_authentication_endpoint")
    parser.add_argument("--ciba-expires", type=int, default=600, help="expires_in of a request without requested_expiry")
    parser.add_argument("--ciba-interval", type=int, default=5, help="the interval it answers (0: leave it out)")
    parser.add_argument("--ciba-approve-after", type=int, default=0, help="approve the request at the Nth poll")
    for name, what in (("slow-down", "slow_down"), ("deny", "access_denied"), ("expire", "expired_token"),
                       ("unavailable", "HTTP 503 {\"error\":\"temporarily_unavailable\"}"), ("drop", "a closed connection")):
        parser.add_argument("--ciba-%s-on" % name, type=int, action="append", default=[], metavar="N", help="answer the Nth poll with " + what)


class CIBAServer:
    def __init__(self, options, signins):
        self.options = options
        self.signins = signins
        self.lock = threading.Lock()
        self.requests = {}

    def discovery(self, document):
        if not self.options.no_ciba:
            document["backchannel_authentication_endpoint"] = self.signins.base_url() + "/oauth2/ciba"
            document["backchannel_token_delivery_modes_supported"] = ["poll"]
            document.setdefault("grant_types_supported", []).append(GRANT)
        return document

    def authenticate(self, form):
        get = lambda name: form.get(name, [None])[0]
        if self.options.no_ciba:
            raise signin.OAuthFailure(404, "not_found", "no CIBA here")
        if get("client_id") != signin.CLIENT_ID or get("client_secret") is not None:
            raise signin.OAuthFailure(401, "invalid_client", "unknown client, or a secret for a public client")
        if "openid" not in (get("scope") or "").split():
            raise signin.OAuthFailure(400, "invalid_scope", "scope must contain openid")
        if not get("login_hint"):
            raise signin.OAuthFailure(400, "invalid_request", "login_hint is required")
        expires = self.options.ciba_expires
        if get("requested_expiry") is not None:
            expires = int(get("requested_expiry"))
        auth_req_id = secrets.token_urlsafe(32)
        request = {"created": time.time(), "expires_in": expires, "polls": [], "state": "pending", "scope": get("scope"),
                   "loginHint": get("login_hint"), "bindingMessage": get("binding_message"), "requestedExpiry": get("requested_expiry")}
        with self.lock:
            self.requests[auth_req_id] = request
        answer = {"auth_req_id": auth_req_id, "expires_in": expires}
        if self.options.ciba_interval:
            answer["interval"] = self.options.ciba_interval
        return answer

    def poll(self, form):
        auth_req_id = form.get("auth_req_id", [""])[0]
        if form.get("client_id", [None])[0] != signin.CLIENT_ID:
            raise signin.OAuthFailure(401, "invalid_client", "unknown client")
        with self.lock:
            request = self.requests.get(auth_req_id)
        if request is None or request["state"] == "done":
            raise signin.OAuthFailure(400, "invalid_grant", "unknown or used auth_req_id")
        now = time.time()
        request["polls"].append(now)
        count = len(request["polls"])
        options = self.options
        if now - request["created"] > request["expires_in"] or count in options.ciba_expire_on:
            raise signin.OAuthFailure(400, "expired_token", "the request expired")
        if count in options.ciba_drop_on:
            raise signin.DropConnection()
        if count in options.ciba_unavailable_on:
            raise signin.OAuthFailure(503, "temporarily_unavailable", "the server is overloaded; try again later")
        if count in options.ciba_slow_down_on:
            raise signin.OAuthFailure(400, "slow_down", "polling too fast")
        if count in options.ciba_deny_on:
            raise signin.OAuthFailure(403, "access_denied", "the user denied the request")
        if options.ciba_approve_after and count >= options.ciba_approve_after:
            request["state"] = "done"
            answer = self.signins.issue(signin.USER[0], request["scope"])
            answer["auth_req_id"] = auth_req_id
            return answer
        raise signin.OAuthFailure(400, "authorization_pending", "waiting for the user")

    def list(self):
        with self.lock:
            return [dict(request, authReqId=auth_req_id) for auth_req_id, request in self.requests.items()]
