#!/usr/bin/python3
"""Another user's program at the agent's socket name (AgentTests): it logs each request it gets,
and answers with a token of its own, as an impostor would."""
import json, os, socket, struct, sys
path, log = sys.argv[1], sys.argv[2]
try: os.unlink(path)
except FileNotFoundError: pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(path); os.chmod(path, 0o777); s.listen(8)
while True:
    c, _ = s.accept()
    try:
        n = struct.unpack(">I", c.recv(4))[0]; body = b""
        while len(body) < n: body += c.recv(n - len(body))
        with open(log, "a") as f: f.write("got: " + body.decode() + "\n")
        reply = json.dumps({"ok": {"token": "eyJhbGciOiJub25lIn0.eyJmb3JnZWQiOnRydWV9.", "publicKey": "FAKE", "backend": "software", "fingerprint": "F" * 43}}).encode()
        c.sendall(struct.pack(">I", len(reply)) + reply)
    except Exception as e:
        with open(log, "a") as f: f.write("error %r\n" % e)
    c.close()
