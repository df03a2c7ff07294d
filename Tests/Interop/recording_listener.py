#!/usr/bin/python3
"""A TCP listener that records what reaches it, for the transport tests.

--mode server: answers every HTTP request with 200 and `{}` (a server devtrust
must never reach in cleartext). --mode proxy: answers 502 to every request
(CONNECT host:port, or an absolute-form GET/POST), so that whatever a client
sends through it is recorded and goes no further.

Each connection appends one JSON line to --log: {"peer", "head"}, where head is
what the client sent first (up to 4 KiB: request line, headers and the start
of the body; TLS bytes come out as escapes). Prints "listening on PORT" when ready.
"""
import argparse
import json
import socket
import socketserver
import threading


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--mode", choices=["server", "proxy"], default="server")
    parser.add_argument("--log", required=True)
    options = parser.parse_args()
    lock = threading.Lock()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.settimeout(2)
            data = b""
            try:
                while len(data) < 4096:
                    chunk = self.request.recv(4096 - len(data))
                    if not chunk:
                        break
                    data += chunk
                    head, _, body = data.partition(b"\r\n\r\n")
                    if _:
                        length = 0
                        for line in head.split(b"\r\n")[1:]:
                            name, _, value = line.partition(b":")
                            if name.strip().lower() == b"content-length":
                                length = int(value.strip() or 0)
                        if len(body) >= length:
                            break
            except (socket.timeout, OSError, ValueError):
                pass
            with lock, open(options.log, "a") as log:
                log.write(json.dumps({"peer": self.client_address[0], "head": data.decode("latin-1")}) + "\n")
            if options.mode == "proxy":
                answer = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            else:
                answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
            try:
                self.request.sendall(answer)
            except OSError:
                pass

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
        address_family = socket.AF_INET6 if ":" in options.host else socket.AF_INET

    server = Server((options.host, 0), Handler)
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
