#!/usr/bin/python3
"""A stand-in for a user's browser, installed as `xdg-open` for a test (LocalUsersSignInTests).

Started by devtrust with the URL to open, as a browser is: it stays alive while
it "starts" (a real browser takes seconds, and its command line, like this
one's, is readable by every user in /proc), then opens the URL as a browser
signed in as STANDIN_USER at the reference server would (the `reference-user`
cookie), following redirects, and writes what happened to
$STANDIN_EXCHANGE/browser.json.

STANDIN_EXCHANGE  a directory both users can write (required)
STANDIN_USER      the reference server's user this browser is signed in as
STANDIN_AFTER     a file to wait for (at most 60 s) before opening the URL:
                  the attacker's "I have scanned" mark
STANDIN_PRECONNECT_FLOOD
                  a flood's progress file ({"opened": N}): the browser asks the
                  server without following its redirect, connects to where it
                  points (as browsers preconnect), and sends its request there
                  only once the flood has opened 200 more connections
"""
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def write(path, document):
    temporary = path + ".tmp"
    with open(temporary, "w") as file:
        json.dump(document, file)
    os.replace(temporary, path)


class Recorder(urllib.request.HTTPRedirectHandler):
    def __init__(self, chain):
        self.chain = chain

    def redirect_request(self, request, fp, code, message, headers, new_url):
        self.chain.append({"url": request.full_url, "status": code})
        return super().redirect_request(request, fp, code, message, headers, new_url)


def opened(progress):
    try:
        with open(progress) as file:
            return json.load(file)["opened"]
    except (OSError, ValueError, KeyError):
        return 0


def preconnected(url, user, progress):
    """The server's redirect, then the request to where it points on a connection opened
    before a flood's next 200 connections."""
    class NoFollow(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *arguments):
            return None
    opener = urllib.request.build_opener(NoFollow())
    try:
        opener.open(urllib.request.Request(url, headers={"Cookie": "reference-user=" + user}), timeout=30)
        return {"status": 0, "error": "the server did not redirect"}
    except urllib.error.HTTPError as error:
        location = error.headers.get("Location")
    target = urllib.parse.urlsplit(location)
    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
    connection.connect()
    before = opened(progress)
    deadline = time.monotonic() + 30
    while opened(progress) < before + 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        connection.request("GET", target.path + "?" + target.query)
        answer = connection.getresponse()
        return {"status": answer.status, "url": location, "body": answer.read().decode("utf-8", "replace"),
                "floodDuring": opened(progress) - before}
    except Exception as error:
        return {"status": 0, "error": repr(error), "floodDuring": opened(progress) - before}


def main():
    exchange = os.environ["STANDIN_EXCHANGE"]
    url = sys.argv[1]
    write(os.path.join(exchange, "browser-started.json"), {"pid": os.getpid(), "uid": os.getuid()})
    after = os.environ.get("STANDIN_AFTER")
    if after:
        deadline = time.monotonic() + 60
        while not os.path.exists(after) and time.monotonic() < deadline:
            time.sleep(0.05)
    chain = []
    opener = urllib.request.build_opener(Recorder(chain))
    user = os.environ.get("STANDIN_USER")
    progress = os.environ.get("STANDIN_PRECONNECT_FLOOD")
    if progress:
        result = preconnected(url, user, progress)
        result["opened"] = url
        write(os.path.join(exchange, "browser.json"), result)
        return
    request = urllib.request.Request(url, headers={"Cookie": "reference-user=" + user} if user else {})
    try:
        with opener.open(request, timeout=30) as answer:
            result = {"status": answer.status, "url": answer.geturl(), "body": answer.read().decode("utf-8", "replace")}
    except urllib.error.HTTPError as error:
        result = {"status": error.code, "url": error.geturl(), "body": error.read().decode("utf-8", "replace")}
    except Exception as error:  # the page could not be reached: said, not raised
        result = {"status": 0, "error": repr(error)}
    result["opened"] = url
    result["chain"] = chain
    write(os.path.join(exchange, "browser.json"), result)


main()
