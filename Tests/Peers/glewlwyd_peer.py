#!/usr/bin/python3
"""A real OpenID provider for devtrust's tests: Debian's glewlwyd on loopback.

  glewlwyd_peer.py start --dir DIR [--port PORT]   fresh SQLite state, start, configure; prints the
                                                   endpoints as one JSON object on stdout
  glewlwyd_peer.py approve --dir DIR USER_CODE [--plugin oidc]
                                                   approve a device user code as the user would
  glewlwyd_peer.py approve-ciba --dir DIR [--plugin oidc-dpop] [--binding MSG] [--deny] [--wait S]
                                                   approve (or deny) the user's pending CIBA requests, as
                                                   the user would on their phone; exit 2 when none is pending
  glewlwyd_peer.py introspect --dir DIR TOKEN [--plugin oidc-dpop]
                                                   RFC 7662 introspection by the resource-server client:
                                                   the answer (token_type, cnf.jkt, active) as JSON
  glewlwyd_peer.py stop --dir DIR

Configuration (through glewlwyd's admin API): user demo, a public client
devtrust-cli (code, device_authorization, refresh_token, delete_token) with the
redirect URI http://127.0.0.1:8765/callback, and three OIDC plugins: "oidc"
(device codes 600 s, interval 5 s), "oidc-short" (8 s, 2 s: a code that expires
unapproved) and "oidc-quick" (120 s, 2 s: polls come soon, and an approval has
time on a loaded machine). PKCE is required for public clients; PAR is allowed.
A fourth plugin, "oidc-dpop" (600 s, 2 s), allows DPoP with server nonces
mandatory (a nonce serves 4 proofs, then rotates; iat at most 60 s old and 5 s
ahead) and CIBA in poll mode for public clients (default expiry 600 s, at most
1200 s); it allows introspection to the confidential client devtrust-rs
(client_credentials, scope token-admin). devtrust-cli has the CIBA grant too.
"""
import argparse
import base64
import gzip
import http.cookiejar
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

INIT_SQL = "/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz"
ADMIN = ("admin", "password")
USER = ("demo", "Ch4ng3it!")
CLIENT_ID = "devtrust-cli"
REDIRECT_URI = "http://127.0.0.1:8765/callback"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_config(directory, port):
    base = "http://127.0.0.1:%d" % port
    webapp = os.path.join(directory, "webapp")
    os.makedirs(webapp, exist_ok=True)
    empty = os.path.join(directory, "empty")
    os.makedirs(empty, exist_ok=True)
    with open(os.path.join(webapp, "config.json"), "w") as handle:
        json.dump({"GlewlwydUrl": "./", "ProfileUrl": "profile.html", "AdminUrl": "index.html", "LoginUrl": "login.html"}, handle)
    config = """port=%(port)d
bind_address="127.0.0.1"
external_url="%(base)s"
login_url="login.html"
api_prefix="api"
static_files_path="%(webapp)s/"
allow_origin="*"
log_mode="console"
log_level="WARNING"
cookie_domain="127.0.0.1"
cookie_secure=0
cookie_same_site="empty"
session_expiration=86400
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie,api_key"
profile_session_authentication="cookie"
allow_multiple_user_per_session=true
login_api_enabled=true
plugin_api_run_enabled=""
add_x_frame_option_header_deny=true
max_post_size=16778240
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="/usr/lib/glewlwyd/user"
user_middleware_module_path="%(empty)s"
client_module_path="/usr/lib/glewlwyd/client"
user_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"
plugin_module_path="/usr/lib/glewlwyd/plugin"
hash_algorithm = "SHA512"
database = { type = "sqlite3" path = "%(db)s" };
static_files_mime_types = ( { extension = ".json" mime_type = "application/json" compress = 0 } )
""" % {"port": port, "base": base, "webapp": webapp, "empty": empty, "db": os.path.join(directory, "glewlwyd.db")}
    with open(os.path.join(directory, "glewlwyd.conf"), "w") as handle:
        handle.write(config)
    return base


class Session:
    """HTTP with a cookie jar and no redirect following."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), self.NoRedirect())

    def call(self, method, url, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self.opener.open(request, timeout=10) as response:
                return response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.read(), error.headers


def plugin(name, key, cert, api, expires, interval, extra=None):
    document = {"module": "oidc", "name": name, "display_name": "devtrust test " + name, "enabled": True, "parameters": {
        "iss": api + "/" + name, "oauth-as-iss-id": True, "jwt-type": "ecdsa", "jwt-key-size": "256", "key": key, "cert": cert,
        "jwks-show": True, "access-token-duration": 3600, "refresh-token-duration": 1209600, "code-duration": 600,
        "refresh-token-rolling": True, "refresh-token-one-use": "never", "allow-non-oidc": True,
        "auth-type-code-enabled": True, "auth-type-token-enabled": False, "auth-type-id-token-enabled": False,
        "auth-type-none-enabled": False, "auth-type-password-enabled": False, "auth-type-client-enabled": False,
        "auth-type-refresh-enabled": True, "auth-type-device-enabled": True,
        "device-authorization-expiration": expires, "device-authorization-interval": interval,
        "pkce-allowed": True, "pkce-method-plain-allowed": False, "pkce-required-public-client": True,
        "introspection-revocation-allowed": False,
        "oauth-par-allowed": True, "oauth-par-required": False, "oauth-par-request_uri-prefix": "urn:ietf:params:oauth:request_uri:",
        "oauth-par-duration": 90, "oauth-dpop-allowed": False, "oauth-ciba-allowed": False,
        "allowed-scope": ["openid", "profile", "email", "offline_access"],
        "name-claim": "on-demand", "name-claim-scope": ["profile"], "email-claim": "on-demand", "email-claim-scope": ["email"],
        "scope-claim": "no", "subject-type": "public", "request-parameter-allow": True, "session-management-allowed": False}}
    document["parameters"].update(extra or {})
    return document


CIBA_GRANT = "urn:openid:params:grant-type:ciba"
RS_CLIENT = ("devtrust-rs", "rs-secret-not-for-prod")
# DPoP with mandatory nonces and CIBA (poll) for public clients; the keys are glewlwyd's
# (see /work/shared/peers/glewlwyd/README.md, "Plugin instance oidc-dpop").
DPOP_CIBA = {
    "auth-type-client-enabled": True,
    "introspection-revocation-allowed": True, "introspection-revocation-allow-target-client": True,
    "introspection-revocation-auth-scope": ["token-admin"],
    "oauth-dpop-allowed": True, "oauth-dpop-iat-duration": 60, "oauth-dpop-iat-gap-duration": 5,
    "oauth-dpop-nonce-mandatory": True, "oauth-dpop-nonce-counter": 3,
    "oauth-ciba-allowed": True, "oauth-ciba-mode-poll-allowed": True, "oauth-ciba-mode-ping-allowed": False,
    "oauth-ciba-mode-push-allowed": False, "oauth-ciba-default-expiry": 600, "oauth-ciba-maximum-expiry": 1200,
    "oauth-ciba-user-code-allowed": False, "oauth-ciba-email-allowed": False,
    "oauth-fapi-ciba-confidential-client": False, "oauth-fapi-ciba-push-forbidden": True,
}


def launch(directory, port):
    """glewlwyd on a fresh database, answering on port: (process, base); None when it
    exited before it answered (the port taken, say)."""
    database = os.path.join(directory, "glewlwyd.db")
    if os.path.exists(database):
        os.remove(database)
    with gzip.open(INIT_SQL, "rt") as script, sqlite3.connect(database) as connection:
        connection.executescript(script.read())
    base = write_config(directory, port)
    log = open(os.path.join(directory, "glewlwyd.log"), "w")
    process = subprocess.Popen(["glewlwyd", "--config-file=" + os.path.join(directory, "glewlwyd.conf")],
                               stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    with open(os.path.join(directory, "glewlwyd.pid"), "w") as handle:
        handle.write(str(process.pid))
    session = Session()
    # Generous: a loaded machine can take many seconds to start it.
    deadline = time.time() + 60
    while time.time() < deadline:
        if process.poll() is not None:
            return None
        try:
            if session.call("GET", base + "/config")[0] == 200 and process.poll() is None:
                return process, base
        except OSError:
            pass
        time.sleep(0.05)
    stop(directory)
    raise SystemExit("glewlwyd did not answer on " + base)


def start(directory, port):
    os.makedirs(directory, exist_ok=True)
    stop(directory)
    # A port found free is bound by glewlwyd a moment later: when another program took it
    # in between, glewlwyd exits, and another port is tried.
    for _ in range(1 if port else 5):
        launched = launch(directory, port or free_port())
        if launched:
            break
    else:
        raise SystemExit("glewlwyd exited: " + open(os.path.join(directory, "glewlwyd.log")).read())
    process, base = launched
    session = Session()
    api = base + "/api"

    def admin(method, path, body=None):
        status, payload, _ = session.call(method, api + path, body)
        if status // 100 != 2:
            raise SystemExit("%s %s: HTTP %d %s" % (method, path, status, payload[:200]))
        return payload

    admin("POST", "/auth/", {"username": ADMIN[0], "password": ADMIN[1]})
    for scope in ("profile", "email", "offline_access", "token-admin"):
        admin("POST", "/scope/", {"name": scope, "display_name": scope, "description": scope, "password_required": False, "scheme": {}})
    admin("POST", "/user/", {"username": USER[0], "password": USER[1], "name": "Demo User", "email": "demo@example.test", "enabled": True,
                            "scope": ["openid", "profile", "email", "offline_access"]})
    private = ec.generate_private_key(ec.SECP256R1())
    key = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()).decode()
    cert = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    admin("POST", "/mod/plugin/", plugin("oidc", key, cert, api, 600, 5))
    admin("POST", "/mod/plugin/", plugin("oidc-short", key, cert, api, 8, 2))
    admin("POST", "/mod/plugin/", plugin("oidc-quick", key, cert, api, 120, 2))
    admin("POST", "/mod/plugin/", plugin("oidc-dpop", key, cert, api, 600, 2, DPOP_CIBA))
    # The CIBA grant needs its full URN and a delivery mode; without the mode every poll is unauthorized_client.
    admin("POST", "/client/", {"client_id": CLIENT_ID, "name": "devtrust (public)", "confidential": False, "enabled": True,
                               "authorization_type": ["code", "device_authorization", "refresh_token", "delete_token", CIBA_GRANT],
                               "backchannel_token_delivery_mode": "poll", "redirect_uri": [REDIRECT_URI], "scope": []})
    admin("POST", "/client/", {"client_id": RS_CLIENT[0], "name": "resource server (confidential)", "confidential": True, "enabled": True,
                               "client_secret": RS_CLIENT[1], "token_endpoint_auth_method": ["client_secret_basic", "client_secret_post"],
                               "authorization_type": ["client_credentials"], "scope": ["token-admin"], "redirect_uri": []})
    document = json.loads(session.call("GET", api + "/oidc/.well-known/openid-configuration")[1])
    info = {"base": base, "api": api, "discovery": api + "/oidc/.well-known/openid-configuration",
            "shortDiscovery": api + "/oidc-short/.well-known/openid-configuration",
            "quickDiscovery": api + "/oidc-quick/.well-known/openid-configuration",
            "dpopDiscovery": api + "/oidc-dpop/.well-known/openid-configuration", "clientId": CLIENT_ID, "redirectUri": REDIRECT_URI,
            "user": USER[0], "pid": process.pid, "document": document}
    with open(os.path.join(directory, "peer.json"), "w") as handle:
        json.dump(info, handle)
    json.dump(info, sys.stdout)


def user_session(directory):
    """The API's base and a session of the demo user, as their browser or phone would have."""
    api = json.load(open(os.path.join(directory, "peer.json")))["api"]
    session = Session()
    status, _, _ = session.call("POST", api + "/auth/", {"username": USER[0], "password": USER[1]})
    if status != 200:
        raise SystemExit("login as %s failed: HTTP %d" % (USER[0], status))
    return api, session


def approve(directory, user_code, plugin_name):
    api, session = user_session(directory)
    code = urllib.parse.quote(user_code)
    status, _, headers = session.call("GET", "%s/%s/device?code=%s" % (api, plugin_name, code))
    location = headers.get("Location", "")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(location).query)
    client_id = query.get("client_id", [None])[0]
    if not client_id:
        raise SystemExit("code rejected: %s" % location)
    scope = query.get("scope", ["openid"])[0]
    status, _, _ = session.call("PUT", "%s/auth/grant/%s" % (api, urllib.parse.quote(client_id)), {"scope": scope})
    if status != 200:
        raise SystemExit("consent failed: HTTP %d" % status)
    status, _, headers = session.call("GET", "%s/%s/device?code=%s&g_continue" % (api, plugin_name, code))
    location = headers.get("Location", "")
    print(location)
    if "prompt=deviceComplete" not in location:
        raise SystemExit(3)


def approve_ciba(directory, plugin_name, binding, deny, wait):
    """Approves (or denies) the pending CIBA requests of the demo user, as approve-ciba.sh of the
    recipe does: the user's session, the pending list, consent, then the connect (or cancel) link."""
    api, session = user_session(directory)
    deadline = time.time() + wait
    while True:
        status, body, _ = session.call("GET", "%s/%s/ciba_user_list" % (api, plugin_name))
        if status != 200:
            raise SystemExit("ciba_user_list: HTTP %d %s" % (status, body[:200]))
        requests = [r for r in json.loads(body) if binding is None or r.get("binding_message") == binding]
        if requests or time.time() >= deadline:
            break
        time.sleep(0.2)
    if not requests:
        print("no pending CIBA request", file=sys.stderr)
        raise SystemExit(2)
    for request in requests:
        if deny:
            status, _, headers = session.call("GET", request["cancel_uri"])
            expected = "cancelled"
        else:
            scope = " ".join(request.get("scopes") or ["openid"])
            status, _, _ = session.call("PUT", "%s/auth/grant/%s" % (api, urllib.parse.quote(request["client_id"])), {"scope": scope})
            if status != 200:
                raise SystemExit("consent failed: HTTP %d" % status)
            status, _, headers = session.call("GET", request["connect_uri"] + "&g_continue")
            expected = "complete"
        location = headers.get("Location", "")
        print(json.dumps({"binding_message": request.get("binding_message"), "scopes": request.get("scopes"), "location": location}))
        if "ciba_message=" + expected not in location:
            raise SystemExit(3)


def introspect(directory, token, plugin_name):
    """RFC 7662 introspection by the resource-server client (client_credentials, scope token-admin)."""
    info = json.load(open(os.path.join(directory, "peer.json")))
    api = info["api"]
    credentials = ("%s:%s" % RS_CLIENT).encode()
    basic = "Basic " + base64.b64encode(credentials).decode()

    def form(url, fields, authorization):
        request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(), method="POST")
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        request.add_header("Authorization", authorization)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    status, body = form("%s/%s/token" % (api, plugin_name), {"grant_type": "client_credentials", "scope": "token-admin"}, basic)
    if status != 200:
        raise SystemExit("client_credentials: HTTP %d %s" % (status, body[:200]))
    bearer = json.loads(body)["access_token"]
    status, body = form("%s/%s/introspect" % (api, plugin_name), {"token": token}, "Bearer " + bearer)
    if status != 200:
        raise SystemExit("introspect: HTTP %d %s" % (status, body[:200]))
    sys.stdout.write(body.decode() + "\n")


def stop(directory):
    path = os.path.join(directory, "glewlwyd.pid")
    if not os.path.exists(path):
        return
    try:
        pid = int(open(path).read())
        os.kill(pid, signal.SIGKILL)
    except (ValueError, ProcessLookupError):
        pass
    os.remove(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "approve", "approve-ciba", "introspect", "stop"])
    parser.add_argument("user_code", nargs="?", help="approve: the user code; introspect: the token")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--plugin", default=None, help="oidc for approve, oidc-dpop for approve-ciba and introspect")
    parser.add_argument("--binding", default=None, help="approve-ciba: only the request with this binding message")
    parser.add_argument("--deny", action="store_true", help="approve-ciba: deny instead")
    parser.add_argument("--wait", type=float, default=0, help="approve-ciba: seconds to wait for a pending request")
    options = parser.parse_intermixed_args()
    if options.command == "start":
        start(options.dir, options.port)
    elif options.command == "approve":
        approve(options.dir, options.user_code, options.plugin or "oidc")
    elif options.command == "approve-ciba":
        approve_ciba(options.dir, options.plugin or "oidc-dpop", options.binding, options.deny, options.wait)
    elif options.command == "introspect":
        introspect(options.dir, options.user_code, options.plugin or "oidc-dpop")
    else:
        stop(options.dir)


if __name__ == "__main__":
    main()
