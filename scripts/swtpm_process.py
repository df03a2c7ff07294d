"""A throwaway swtpm on loopback for the scripts (bench, link order).

The TCTI talks to the control channel at the server port + 1, so the two
ports are picked as a free pair.
"""

import contextlib
import os
import signal
import socket
import subprocess
import time


def free_port_pair():
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port >= 65000:
            continue
        with socket.socket() as control:
            try:
                control.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue


@contextlib.contextmanager
def running_swtpm(directory):
    """Starts swtpm with its state in directory/swtpm; yields its TCTI string."""
    port = free_port_pair()
    state = os.path.join(directory, "swtpm")
    os.mkdir(state)
    swtpm = subprocess.Popen(["swtpm", "socket", "--tpm2", "--server", "type=tcp,bindaddr=127.0.0.1,port=%d" % port,
                              "--ctrl", "type=tcp,bindaddr=127.0.0.1,port=%d" % (port + 1), "--tpmstate", "dir=" + state,
                              "--flags", "not-need-init,startup-clear"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port + 1), timeout=1).close()
                break
            except OSError:
                if swtpm.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("swtpm did not start (exit %s)" % swtpm.poll())
                time.sleep(0.05)
        yield "swtpm:host=127.0.0.1,port=%d" % port
    finally:
        os.killpg(swtpm.pid, signal.SIGKILL)
        swtpm.wait()
