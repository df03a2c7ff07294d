#!/usr/bin/python3
"""A SOCKS5 forwarder as `ssh -D` runs one (no authentication, CONNECT only, on 127.0.0.1,
reachable by every user of the machine), run by the victim of LocalUsersSignInTests: its
outgoing connections are the victim's. Writes its port to $1 (a file), serves until killed."""
import os
import socket
import struct
import sys
import threading


def pipe(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client):
    try:
        greeting = client.recv(2)
        client.recv(greeting[1])
        client.sendall(b"\x05\x00")
        version, command, _, kind = client.recv(4)
        if kind == 1:
            host = socket.inet_ntoa(client.recv(4))
        elif kind == 3:
            host = client.recv(client.recv(1)[0]).decode()
        else:
            return client.close()
        port = struct.unpack("!H", client.recv(2))[0]
        upstream = socket.create_connection((host, port), timeout=10)
        client.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack("!H", 0))
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        pipe(upstream, client)
    except OSError:
        client.close()


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
with open(sys.argv[1] + ".tmp", "w") as file:
    file.write(str(listener.getsockname()[1]))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
os.chmod(sys.argv[1], 0o644)
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
