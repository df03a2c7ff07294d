#!/usr/bin/python3
"""What devtrust's browser extension adds to an authorization navigation in
headless Chromium (docs/performance.md, "The browser extension").

One run: a reference server, a device registered with it (software key), the
native host installed with `devtrust browser install`, and two headless
Chromiums driven over the DevTools protocol (--remote-debugging-pipe): one with
the extension, one without. They navigate to the same authorization URL in
turn, --rounds times each, a round every 3.5 s (the extension gives a tab at
most 6 tokens within 20 s); a navigation's time is from the Page.navigate
command to the server's receipt of the authorization request (its own
clock, the same machine's). Prints both medians and the difference; exits 1
when the difference is over --budget ms, or when a navigation with the
extension arrived without a token.

  scripts/browser-latency.py --binary .build/release/devtrust [--rounds 15] [--budget 100]
"""
import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The extension's bound on tokens per tab (browser/background.js: TOKENS_PER_TAB within
# TOKEN_WINDOW_MILLISECONDS), and the pace of the rounds that keeps one tab under it.
TOKEN_WINDOW_SECONDS = 20.0
PACE_SECONDS = 3.5


class Chromium:
    """A headless Chromium driven over --remote-debugging-pipe (NUL-separated JSON on fds 3 and 4)."""

    def __init__(self, directory, environment, extension):
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def wire():
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        arguments = ["/usr/bin/chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--no-default-browser-check", "--user-data-dir=" + directory, "--remote-debugging-pipe",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-pings",
                     "--proxy-server=http://127.0.0.1:9"]
        if extension:
            arguments.append("--load-extension=" + os.path.join(ROOT, "browser"))
        arguments.append("about:blank")
        self.process = subprocess.Popen(arguments, env=environment, preexec_fn=wire, close_fds=False, start_new_session=True,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        self.call("Page.enable", session=self.session)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.next_id

    def receive(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.time()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.from_browser, 65536)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None, seconds=60):
        number = self.send(method, params, session)
        deadline = time.time() + seconds
        while True:
            message = self.receive(deadline)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError("%s: %s" % (method, message["error"]))
                return message["result"]
            self.events.append(message)

    def wait_for_event(self, method, seconds=60):
        deadline = time.time() + seconds
        while True:
            for index, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(index)
            self.events.append(self.receive(deadline))

    def navigate(self, url, seconds=30):
        """Navigates the page and waits until the URL (with whatever the extension added) has
        loaded, past the extension's continue page; the time (s since the epoch) just before
        the command went out."""
        self.events.clear()
        started = time.time()
        self.call("Page.navigate", {"url": url}, session=self.session, seconds=seconds)
        while True:
            frame = self.wait_for_event("Page.frameNavigated", seconds)["params"]["frame"]
            if "parentId" not in frame and frame["url"].startswith(url):
                break
        self.wait_for_event("Page.loadEventFired", seconds)
        return started

    def stop(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build/release/devtrust"))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--budget", type=float, default=100.0, help="the most the extension may add (median, ms)")
    options = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="devtrust-browser-latency-")
    home = os.path.join(scratch, "home")
    environment = {"PATH": "/usr/bin:/bin", "HOME": home, "DEVTRUST_KEYSTORE": os.path.join(scratch, "ks"),
                   "XDG_CONFIG_HOME": os.path.join(scratch, "config"), "XDG_CACHE_HOME": os.path.join(scratch, "cache"),
                   "DEVTRUST_TCTI": "device:/nonexistent"}
    server = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "Tests/ReferenceServer/reference_server.py"), "--port", "0",
                               "--db", os.path.join(scratch, "server.sqlite"), "--otp", "123456"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    browsers = []
    try:
        url = server.stdout.readline().strip().removeprefix("listening on ")

        def devtrust(*arguments):
            subprocess.run([options.binary, *arguments], env=environment, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        devtrust("init", "--backend", "software", "-q")
        devtrust("register", "--server", url, "--non-interactive", "-q", "--input", "http://wso2.com/claims/emailaddress=alice@example.com",
                 "--input", "password=correct horse", "--input", "otp=123456")
        with_extension_directory = os.path.join(home, ".config/chromium")
        devtrust("browser", "install", "--chromium", "--chromium-dir", with_extension_directory)

        with_extension = Chromium(with_extension_directory, environment, extension=True)
        browsers.append(with_extension)
        without = Chromium(os.path.join(scratch, "plain"), environment, extension=False)
        browsers.append(without)

        endpoint = url + "/oauth2/authorize?response_type=code&client_id=web-app&scope=openid&state="
        # The extension has its rules once a navigation arrives with a token. The first
        # navigation of a Chromium that is loading an unpacked extension sometimes stays
        # pending for good (156, headless): that one is left behind for the next.
        for attempt in range(60):
            try:
                with_extension.navigate(endpoint + "warmup-%d" % attempt, seconds=5)
            except TimeoutError:
                continue
            if any(r["state"] == "warmup-%d" % attempt and r["deviceToken"] for r in get_json(url + "/api/authorize-records")):
                break
        else:
            sys.exit("the extension never added a token: %s" % get_json(url + "/api/authorize-records")[-3:])
        without.navigate(endpoint + "warmup-plain")

        # The extension gives a tab at most 6 tokens within 20 s (docs/browser.md); past
        # that a navigation goes on without one. The rounds start on a clean window, and
        # one every PACE_SECONDS keeps them under the bound (at most 5 in any 20 s before).
        time.sleep(TOKEN_WINDOW_SECONDS)
        started = {}
        for round_number in range(options.rounds):
            if round_number > 0:
                time.sleep(max(0.0, started["with-%d" % (round_number - 1)] + PACE_SECONDS - time.time()))
            for name, browser in (("with", with_extension), ("without", without)):
                state = "%s-%d" % (name, round_number)
                started[state] = browser.navigate(endpoint + state)
        records = {r["state"]: r for r in get_json(url + "/api/authorize-records")}
        times = {"with": [], "without": []}
        for state, start in started.items():
            record = records[state]
            times[state.split("-")[0]].append(record["receivedAt"] - start * 1000)
            if state.startswith("with-") and not record["deviceToken"]:
                sys.exit("a navigation with the extension arrived without a token: %s" % state)
        medians = {name: statistics.median(values) for name, values in times.items()}
        added = medians["with"] - medians["without"]
        print("navigations: %d with the extension, %d without, alternating" % (len(times["with"]), len(times["without"])))
        for name in ("with", "without"):
            print("  %-7s median %.1f ms (min %.1f, max %.1f)" % (name, medians[name], min(times[name]), max(times[name])))
        print("added by the extension (median): %.1f ms; budget %.0f ms" % (added, options.budget))
        return 0 if added <= options.budget else 1
    finally:
        for browser in browsers:
            browser.stop()
        server.kill()
        server.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
