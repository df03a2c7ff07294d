#!/usr/bin/python3
"""A listener that answers any request one byte every 4 s: each read of a client whose timeout is per read (5 s) gets a byte in time."""
import socket, struct, sys, time, os
path = sys.argv[1]
try: os.unlink(path)
except FileNotFoundError: pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(path); s.listen(4)
while True:
    c, _ = s.accept()
    c.recv(65536)
    body = b'{"ok":{"keystore":"/x","key":null,"registrations":[]}}' + b" " * 200
    for b in struct.pack(">I", len(body)) + body:
        c.sendall(bytes([b])); time.sleep(4)
    c.close()
