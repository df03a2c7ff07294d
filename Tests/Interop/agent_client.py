#!/usr/bin/python3
"""A client of the devtrust agent that devtrust did not write: what a hostile local
process can send, byte for byte (Tests/DevtrustCLITests/AgentTests.swift).

Usage: agent_client.py COMMAND SOCKET [ARGS...]
  request SOCKET JSON            one request (a JSON object) framed as the agent reads it; prints
                                 the reply's JSON on stdout
  raw SOCKET HEX                 the bytes as given (hex), then the reply's JSON (or "closed")
  sign-challenge SOCKET CHALLENGE
                                 a Device Registration step with CHALLENGE (base64url) for a server
                                 of the client's choosing: prints the signature when the agent
                                 signed, else its refusal on stderr and exits 1 (jws_oracle.py collect)
  each SOCKET JSON...            each request in turn, one connection each; prints one reply per line
  repeat SOCKET COUNT JSON       the request COUNT times, one after the other as fast as it can;
                                 prints one reply per line
  hold SOCKET COUNT HEX          opens COUNT connections, sends HEX on each (may be empty), prints
                                 "holding COUNT" and keeps them open until it is killed
  flood SOCKET COUNT             keeps COUNT silent connections open until it is killed: each one
                                 the agent closes is opened again, at once when it was dropped at
                                 its deadline, a fifth of a second later when it was refused or
                                 evicted; prints "holding COUNT" once it opened COUNT
Frames: 4 bytes big-endian length, then the JSON.
"""
import json
import select
import signal
import socket
import struct
import sys
import time
import uuid


def frame(document):
    body = json.dumps(document).encode()
    return struct.pack(">I", len(body)) + body


def read_reply(connection):
    header = b""
    while len(header) < 4:
        chunk = connection.recv(4 - len(header))
        if not chunk:
            return "closed"
        header += chunk
    (length,) = struct.unpack(">I", header)
    body = b""
    while len(body) < length:
        chunk = connection.recv(length - len(body))
        if not chunk:
            return "closed"
        body += chunk
    return json.loads(body)


def connect(path):
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(30)
    connection.connect(path)
    return connection


def exchange(path, data):
    connection = connect(path)
    try:
        try:
            connection.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent refused at once and closed: its reply is still there to read
        return read_reply(connection)
    finally:
        connection.close()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    command, path = sys.argv[1], sys.argv[2]
    if command == "request":
        print(json.dumps(exchange(path, frame(json.loads(sys.argv[3])))))
    elif command == "each":
        for text in sys.argv[3:]:
            print(json.dumps(exchange(path, frame(json.loads(text)))), flush=True)
    elif command == "repeat":
        data = frame(json.loads(sys.argv[4]))
        for _ in range(int(sys.argv[3])):
            print(json.dumps(exchange(path, data)))
    elif command == "raw":
        try:
            print(json.dumps(exchange(path, bytes.fromhex(sys.argv[3]))))
        except (BrokenPipeError, ConnectionResetError):
            print(json.dumps("closed"))
    elif command == "sign-challenge":
        reply = exchange(path, frame({"v": 1, "op": "registration-step", "server": "https://attacker.example",
                                      "registrationId": str(uuid.uuid4()), "challenge": sys.argv[3],
                                      "requiredParams": ["publicKey", "signature"]}))
        if isinstance(reply, dict) and "ok" in reply:
            print(reply["ok"]["signature"])
        else:
            print(json.dumps(reply), file=sys.stderr)
            sys.exit(1)
    elif command == "hold":
        count, data = int(sys.argv[3]), bytes.fromhex(sys.argv[4] if len(sys.argv) > 4 else "")
        held = []
        for _ in range(count):
            connection = connect(path)
            if data:
                connection.sendall(data)
            held.append(connection)
        print("holding %d" % count, flush=True)
        while True:
            signal.pause()
    elif command == "flood":
        flood(path, int(sys.argv[3]))
    else:
        sys.exit(__doc__)


def flood(path, count):
    held = set()

    def top_up():
        while len(held) < count:
            try:
                connection = connect(path)
            except OSError:
                return
            connection.setblocking(False)
            held.add(connection)

    top_up()
    print("holding %d" % count, flush=True)
    refused = False
    while True:
        ready, _, _ = select.select(list(held), [], [], 0.5)
        for connection in ready:
            try:
                data = connection.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                refused = True  # a refusal (its end follows)
                continue
            connection.close()
            held.discard(connection)
        # One closed at its deadline is opened again at once; after a refusal, an attacker's pace (not a test's wait).
        if refused:
            time.sleep(0.2)
            refused = False
        top_up()


if __name__ == "__main__":
    main()
