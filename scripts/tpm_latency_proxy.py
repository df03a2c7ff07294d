#!/usr/bin/python3
"""A hardware TPM's latency in front of swtpm: a loopback proxy for the swtpm TCTI.

swtpm answers a command in well under a millisecond; a TPM chip takes 100-600 ms to
sign, and a Load costs about as much again. `make bench` puts this proxy between
devtrust and swtpm so that the cost of each TPM command a token needs shows, as it
would on a laptop: the proxy reads each command, waits the time LATENCY_MS gives its
command code, then passes it on; answers come back at once. The control channel
(server port + 1, which the TCTI also uses) is relayed as it is.

The table (milliseconds) and where its numbers come from (docs/performance.md):
  Sign 200           Chrome's field study of ECDSA P-256 TPM signatures: 200 ms at the
                     median, 600 ms at the 95th percentile, as reported in "TPM performance"
                     (stiankri.substack.com/p/tpm-performance), whose own benchmark found
                     single-digit signatures per second on most TPMs it measured
  Load 200           at least a Sign: the chip decrypts and checks the key's private
                     blob under its parent (issue 28: "a Load costs more again");
                     Himmelblau issue 1717 measured reloading a key (with its parents)
                     at about 1.6 s against reusing the loaded one
  CreatePrimary 250  systemd-tpm2-setup's own log: "created primary key on TPM in
                     251ms" (systemd issue 40485)
  StartAuthSession 50, ReadPublic 5, FlushContext 5, GetCapability 5, others 5:
                     small commands that do no private-key operation: the bus transfer
                     (an SPI or LPC TPM moves a few hundred bytes in about 1-5 ms); an
                     assumption, not a measurement

Usage: tpm_latency_proxy.py SWTPM_PORT [--scale X] [--delay NAME=MS ...] [--delays-file FILE] [--log FILE]
  prints the TCTI to use, runs until killed; --scale multiplies the table, --delay sets one
  command's time (after the scale), --delays-file names a JSON object of such times read again
  for each command (when it exists: a test changes them while the proxy runs), --log appends
  each command's name to FILE as it arrives (a test counts the commands a program sends)
"""

import contextlib
import json
import socket
import struct
import sys
import threading
import time

LATENCY_MS = {"Sign": 200, "Load": 200, "CreatePrimary": 250, "StartAuthSession": 50,
              "ReadPublic": 5, "FlushContext": 5, "GetCapability": 5}
OTHER_MS = 5
COMMAND_NAMES = {0x131: "CreatePrimary", 0x157: "Load", 0x15D: "Sign", 0x165: "FlushContext",
                 0x173: "ReadPublic", 0x176: "StartAuthSession", 0x17A: "GetCapability",
                 0x153: "Create", 0x120: "EvictControl", 0x161: "ContextLoad", 0x162: "ContextSave",
                 0x144: "Startup", 0x17B: "GetRandom"}
MAX_MESSAGE = 1 << 16


def command_name(code):
    return COMMAND_NAMES.get(code, "0x%08x" % code)


def receive_exactly(connection, count):
    data = bytearray()
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def receive_message(connection):
    """One TPM command or answer: tag (2), size (4), code (4), then size - 10 bytes."""
    header = receive_exactly(connection, 10)
    if header is None:
        return None
    size = struct.unpack(">I", header[2:6])[0]
    if not 10 <= size <= MAX_MESSAGE:
        raise ValueError("a TPM message of %d bytes" % size)
    rest = receive_exactly(connection, size - 10)
    return None if rest is None else header + rest


class LatencyProxy:
    """Listens on a free loopback port pair (P, P+1) in front of swtpm's (port, port+1)."""

    def __init__(self, swtpm_port, scale=1.0, latency=None, fixed=None, log=None, delays_file=None):
        self.swtpm_port = swtpm_port
        self.scale = scale
        self.latency = dict(LATENCY_MS if latency is None else latency)
        self.fixed = dict(fixed or {})   # milliseconds for some commands, not scaled
        self.commands = []   # the names of the commands passed on, in order
        self._log = log
        self._delays_file = delays_file
        self._lock = threading.Lock()
        self.port, self._listeners = self._listen_pair()
        for listener, upstream, delays in ((self._listeners[0], swtpm_port, True), (self._listeners[1], swtpm_port + 1, False)):
            threading.Thread(target=self._accept, args=(listener, upstream, delays), daemon=True).start()

    @property
    def tcti(self):
        return "swtpm:host=127.0.0.1,port=%d" % self.port

    def delay_ms(self, name):
        if self._delays_file:
            try:
                with open(self._delays_file) as file:
                    given = json.load(file)
                if name in given:
                    return float(given[name])
            except (OSError, ValueError):
                pass
        if name in self.fixed:
            return self.fixed[name]
        return self.latency.get(name, OTHER_MS) * self.scale

    @staticmethod
    def _listen_pair():
        while True:
            first = socket.socket()
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            second = socket.socket()
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                first.close()
                second.close()
                continue
            first.listen(16)
            second.listen(16)
            return port, (first, second)

    def _accept(self, listener, upstream_port, delays):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            target = self._serve_commands if delays else self._relay
            threading.Thread(target=target, args=(client, upstream_port), daemon=True).start()

    def _serve_commands(self, client, upstream_port):
        # swtpm serves one connection at a time: the connection to it is opened once the command is
        # due, so that other programs (which reach swtpm directly) can use the TPM while a command
        # of this client's is held (a test's other program acts between two of devtrust's commands).
        upstream = None
        with contextlib.closing(client):
            try:
                while True:
                    command = receive_message(client)
                    if command is None:
                        return
                    name = command_name(struct.unpack(">I", command[6:10])[0])
                    with self._lock:
                        self.commands.append(name)
                        if self._log:
                            with open(self._log, "a") as log:
                                log.write(name + "\n")
                    # The modelled chip's time: a sleep is the point here (this is the bench's TPM, not a test's wait).
                    time.sleep(self.delay_ms(name) / 1000)
                    if upstream is None:
                        upstream = socket.create_connection(("127.0.0.1", upstream_port))
                    upstream.sendall(command)
                    answer = receive_message(upstream)
                    if answer is None:
                        return
                    client.sendall(answer)
            except (OSError, ValueError):
                return
            finally:
                if upstream is not None:
                    upstream.close()

    def _relay(self, client, upstream_port):
        upstream = socket.create_connection(("127.0.0.1", upstream_port))

        def pump(source, sink):
            try:
                while True:
                    data = source.recv(4096)
                    if not data:
                        break
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)

    def close(self):
        for listener in self._listeners:
            listener.close()


def main():
    arguments = sys.argv[1:]
    if not arguments or not arguments[0].isdigit():
        sys.exit(__doc__)
    port, scale, fixed, log, delays_file = int(arguments.pop(0)), 1.0, {}, None, None
    while arguments:
        option = arguments.pop(0)
        if option == "--scale" and arguments:
            scale = float(arguments.pop(0))
        elif option == "--delay" and arguments and "=" in arguments[0]:
            name, milliseconds = arguments.pop(0).split("=", 1)
            fixed[name] = float(milliseconds)
        elif option == "--log" and arguments:
            log = arguments.pop(0)
        elif option == "--delays-file" and arguments:
            delays_file = arguments.pop(0)
        else:
            sys.exit(__doc__)
    proxy = LatencyProxy(port, scale=scale, fixed=fixed, log=log, delays_file=delays_file)
    print(proxy.tcti, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
