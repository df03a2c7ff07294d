#!/usr/bin/python3
"""Writes the fuzzers' seed corpora (Fuzz/Corpus/<Target>/) from what the
tests use: the reference server's answers to a registration and to app-native
sign-ins (recorded through a proxy while the debug `devtrust` talks to it,
including the server's fault modes), the signature vectors, the keystore
fixtures, the configuration examples of docs/configuration.md, RFC 7515's
ES256 example, and keys made by devtrust and openssl.

Usage: Fuzz/seed-corpora.py [DEVTRUST]   (default .build/debug/devtrust)
"""
import base64
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "Corpus")
EMAIL = "http://wso2.com/claims/emailaddress"
REGISTER_ANSWERS = ["--input", EMAIL + "=alice@example.com", "--input", "password=correct horse", "--input", "otp=123456"]


def save(target, data):
    if isinstance(data, str):
        data = data.encode()
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, hashlib.sha1(data).hexdigest()[:16]), "wb") as file:
        file.write(data)


class Recorder:
    """A loopback proxy in front of the reference server that keeps every answer body."""

    def __init__(self, upstream):
        recorder = self
        self.bodies = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {name: value for name, value in self.headers.items() if name.lower() not in ("host", "content-length", "connection")}
                request = urllib.request.Request(upstream + self.path, data=body, headers=headers, method=self.command)
                try:
                    with urllib.request.urlopen(request, timeout=10) as answer:
                        status, answer_headers, payload = answer.status, answer.getheaders(), answer.read()
                except urllib.error.HTTPError as error:
                    status, answer_headers, payload = error.code, error.headers.items(), error.read()
                except Exception:
                    self.close_connection = True
                    return
                recorder.bodies.append((self.path.split("?")[0], payload))
                self.send_response(status)
                for name, value in answer_headers:
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                        self.send_header(name, value.replace(upstream, "http://127.0.0.1:%d" % recorder.port))
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.replace(upstream.encode(), b"http://127.0.0.1:%d" % recorder.port))

            do_GET = do_POST = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def reference_server(directory, arguments):
    process = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "Tests/ReferenceServer/reference_server.py"), "--port", "0",
                                "--db", os.path.join(directory, "server-%d.sqlite" % len(os.listdir(directory))), "--otp", "123456"] + arguments,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        raise SystemExit("the reference server did not start: " + line)
    return process, line[len("listening on "):]


def record(devtrust, directory, server_arguments, commands):
    """Runs devtrust commands through the recorder; returns the answer bodies."""
    process, upstream = reference_server(directory, server_arguments)
    recorder = Recorder(upstream)
    keystore = tempfile.mkdtemp(dir=directory)
    environment = dict(os.environ, HOME=directory, DEVTRUST_TCTI="device:/nonexistent", TSS2_LOG="all+NONE")
    try:
        subprocess.run([devtrust, "--keystore", keystore, "init", "--backend", "software", "-q"], env=environment, check=True)
        for command in commands:
            arguments = [argument.replace("SERVER", "http://127.0.0.1:%d" % recorder.port) for argument in command]
            subprocess.run([devtrust, "--keystore", keystore] + arguments, env=environment, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
    finally:
        recorder.stop()
        process.kill()
        process.wait()
    return recorder.bodies


def loopback_request_seeds():
    """LoopbackRequest: the request heads curl and (when installed) chromium send to a
    loopback redirect, hostile heads, and redirect URIs."""
    import socket
    heads = []
    for client in (["curl", "-s", "--max-time", "3"], ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom"]):
        if not shutil.which(client[0]):
            continue
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.settimeout(20)
        port = listener.getsockname()[1]
        profile = tempfile.mkdtemp(prefix="devtrust-seeds-browser-")
        extra = ["--user-data-dir=" + profile] if client[0] == "chromium" else []
        process = subprocess.Popen(client + extra + ["http://127.0.0.1:%d/callback?code=c0de&state=s3cr3t-state" % port],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            connection, _ = listener.accept()
            connection.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(4096)
                if not chunk:
                    break
                data += chunk
            heads.append(data)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            connection.close()
        except OSError:
            pass
        finally:
            process.kill()
            process.wait()
            listener.close()
            shutil.rmtree(profile, ignore_errors=True)
    heads += [
        b"GET /callback?code=c0de&state=s3cr3t-state HTTP/1.1\r\nHost: 127.0.0.1:5000\r\n\r\n",
        b"GET /callback?error=access_denied&error_description=no%1B%5B2J&state=s3cr3t-state HTTP/1.1\r\nHost: 127.0.0.1:5000\r\n\r\n",
        b"GET /callback?code=a&code=b&state=s3cr3t-state&state=x HTTP/1.0\nHost: 127.0.0.1:5000\n\n",
        b"POST /callback?code=c0de&state=s3cr3t-state HTTP/1.1\r\nHost: 127.0.0.1:5000\r\nContent-Length: 0\r\n\r\n",
        b"GET /favicon.ico HTTP/1.1\r\nHost: evil.example:5000\r\n\r\n",
        b"\r\n\r\nGET http://127.0.0.1:5000/callback HTTP/1.1\r\nHost: 127.0.0.1:5000\r\nHost: x\r\n\r\n",
        b"GET /callback?code=%FF%FE&state=s3cr3t-state HTTP/1.1\r\nHost: 127.0.0.1:5000\r\n\r\n",
        b"GET /callback HTTP/1.1\r\nX-Padding: " + b"a" * 4200 + b"\r\n\r\n",
    ]
    for head in heads:
        save("LoopbackRequest", head)
    for uri in ("http://127.0.0.1/callback", "http://127.0.0.1:8765/callback", "http://[::1]:9000/cb?app=1", "http://localhost:0/",
                "https://app.example/callback", "http://evil@127.0.0.1/cb", "http://127.0.0.1:99999/cb"):
        save("LoopbackRequest", uri)


def main(arguments):
    devtrust = os.path.abspath(arguments[0] if arguments else os.path.join(ROOT, ".build/debug/devtrust"))
    shutil.rmtree(CORPUS, ignore_errors=True)
    directory = tempfile.mkdtemp(prefix="devtrust-seeds-")
    try:
        register = ["register", "--server", "SERVER", "--non-interactive"] + REGISTER_ANSWERS
        login = ["login", "--server", "SERVER", "--client-id", "devtrust-app", "--non-interactive",
                 "--authenticator", "BasicAuthenticator", "--input", "username=alice@example.com", "--input", "password=correct horse"]
        runs = [([], [register, login]), (["--device-policy", "--terms-step"], [register]), (["--redirect-step"], [register]),
                (["--authenticators", "basic", "--mfa", "totp"], [register, login]), (["--authenticators", "federated"], [register, login])]
        runs += [(["--fault", fault], [register]) for fault in (
            "garbage-body", "html-500", "unknown-step-type", "webauthn", "passkey", "wrong-json-types", "missing-flow-id", "missing-status",
            "unknown-required-param", "missing-challenge", "bad-challenge", "json-500", "empty-200", "complete-without-device",
            "error-after-device", "error-at-first-continue", "array-body")]
        for server_arguments, commands in runs:
            try:
                bodies = record(devtrust, directory, server_arguments, commands)
            except SystemExit:
                continue  # a fault mode this server does not know
            for path, body in bodies:
                if path.endswith("/flow/execute"):
                    save("FlowResponse", body)
                elif path in ("/oauth2/authorize", "/oauth2/authn"):
                    save("AppNativeResponse", body)

        vectors = json.load(open(os.path.join(ROOT, "Tests/DevtrustKeysTests/Vectors/ecdsa-signature-encodings.json")))["vectors"]
        for vector in vectors:
            save("DERSignature", bytes.fromhex(vector["der"]))
            if vector.get("raw"):
                save("DERSignature", bytes.fromhex(vector["raw"]))

        # RFC 7515 A.3 (ES256): verifies with the fuzz target's key.
        save("CompactJWS", "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
                           "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q")
        keystore = os.path.join(directory, "jws")
        environment = dict(os.environ, HOME=directory, DEVTRUST_TCTI="device:/nonexistent")
        subprocess.run([devtrust, "--keystore", keystore, "init", "--backend", "software", "-q"], env=environment, check=True)
        for command in (["token", "--device-id", "74070bae-df8c-42bf-8754-5173c237c936"], ["device-data", "--claim", "lockScreen=true"]):
            save("CompactJWS", subprocess.run([devtrust, "--keystore", keystore] + command, env=environment, capture_output=True, text=True, check=True).stdout.strip())

        for version in ("v1", "v2"):
            base = os.path.join(ROOT, "keystore/fixtures", version)
            for fixture in sorted(os.listdir(base)):
                for name in sorted(os.listdir(os.path.join(base, fixture))):
                    path = os.path.join(base, fixture, name)
                    if not os.path.isfile(path):
                        continue
                    data = open(path, "rb").read()
                    if name == "keystore.json":
                        save("Keystore", data)
                    elif b"TSS2 PRIVATE KEY" in data:
                        save("TSS2KeyFile", data)
                        save("TSS2KeyFile", base64.b64decode(b"".join(line for line in data.splitlines() if not line.startswith(b"-----"))))
                    elif b"BEGIN PRIVATE KEY" in data:
                        save("PrivateKeyFile", data)
        for arguments in (["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
                          ["-algorithm", "ED25519"]):
            save("PrivateKeyFile", subprocess.run(["openssl", "genpkey"] + arguments, capture_output=True, check=True).stdout)

        text = open(os.path.join(ROOT, "docs/configuration.md")).read()
        for block in re.findall(r"```json\n(.*?)```", text, re.S):
            save("Configuration", block)
        tests = open(os.path.join(ROOT, "Tests/DevtrustConfigTests/ConfigurationTests.swift")).read()
        for literal in re.findall(r'#"(\{.*?\})"#', tests):
            save("Configuration", literal)
        save("Configuration", "{}")
        loopback_request_seeds()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for target in sorted(os.listdir(CORPUS)):
        print("%-20s %3d seeds" % (target, len(os.listdir(os.path.join(CORPUS, target)))))


if __name__ == "__main__":
    main(sys.argv[1:])
