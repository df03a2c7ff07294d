"""The reference server's side of the browser extension tests
(Tests/DevtrustCLITests/BrowserExtensionTests.swift): what it records of each
authorization navigation, and the start page that drives a headless browser.

The start page, GET /test/start?..., served by the registered server:
  gate=URL     first opens URL&state=gate-N in one window, again a second after
               gate-N arrived without a token (10 s when it did not arrive),
               until URL's server has recorded gate-N with a device_token (the
               extension has its configuration; its /api/authorize-records
               allows any origin); gives up after 150 s; repeatable, in order,
               each reported as "gate I: passed at N" or "gate I: no token"
  wait=MS      or first waits MS milliseconds (a browser without the host)
  until=WHAT   then waits until WHAT was reported (the test's GET /test/report?what=WHAT:
               ReferenceServer.report), so the test can have it go on once it is ready
  setcookies=1 first sets this origin's cookies (GET /test/set-cookies)
  open=URL     then opens each URL in a window of its own, in order (repeatable)
  attack=ID    then tries to reach extension ID as a web page can: runtime
               messages, its continue page opened with a crafted URL (the
               target in its fragment, in its query, and after a made-up key)
  target=URL   a crafted URL to hand that page (repeatable)
  popup=URL    opens /test/blank in a window, navigates it to URL (of this
               server, with a state), waits for it to arrive, and reports
               where the window is as its opener sees it: "popup: at URL"
  tab=STEP     then takes one window through each STEP in turn (repeatable):
               a URL (navigated to), "reload", "back", "wait:MS", or
               "until:WHAT" (as until=WHAT, then on at once); after a
               URL of this origin's /oauth2/ or a reload, it waits (up to 40 s;
               after a back, 5 s) for one more authorization request on this origin
  post=URL     submits a form (method POST, one field client_id=web-app) to URL
  frame=URL    also loads URL in an iframe, and
  xhr=URL      fetches URL (a registered endpoint: neither is a top-level navigation)
and reports each step to GET /test/report?what=..., the last one "done".
"""
import time
from urllib.parse import parse_qs


def authorize_record(query, check, headers, method="GET", body=b""):
    """One request to /oauth2/authorize as it arrived: the method, the raw query, the
    device_token (None when absent; a POST's counted in its body too), the state, the
    arrival time (ms since the epoch), the check, the names of the cookies it carried,
    its Referer and Sec-Fetch-Site (None when absent)."""
    fields = parse_qs(query, keep_blank_values=True)
    if method == "POST":
        for name, values in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items():
            fields.setdefault(name, []).extend(values)
    cookies = sorted(part.split("=", 1)[0].strip() for part in (headers.get("Cookie") or "").split(";") if part.strip())
    return {
        "method": method,
        "cookies": cookies,
        "referer": headers.get("Referer"),
        "secFetchSite": headers.get("Sec-Fetch-Site"),
        "query": query,
        "deviceToken": fields.get("device_token", [None])[0],
        "deviceTokenCount": len(fields.get("device_token", [])),
        "state": fields.get("state", [None])[0],
        "receivedAt": time.time() * 1000,
        "deviceCheck": check,
    }



def without_device_token(query):
    """The raw query less its device_token parameters, the rest as it was."""
    return "&".join(part for part in query.split("&") if part.split("=", 1)[0] != "device_token")


GO_PAGE = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>go</title></head><body>
<script>location.href = new URLSearchParams(location.search).get("to");</script>
</body></html>
"""

START_PAGE = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>devtrust extension test</title></head>
<body><pre id="log"></pre>
<script>
"use strict";
const params = new URLSearchParams(location.search);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
function report(what) {
  document.getElementById("log").textContent += what + "\\n";
  return fetch("/test/report?what=" + encodeURIComponent(what)).catch(() => {});
}
function withState(url, state) {
  return url + (url.includes("?") ? "&" : "?") + "state=" + state;
}
async function recorded(origin, state) {
  const records = await (await fetch(origin + "/api/authorize-records")).json();
  return records.find((record) => record.state === state);
}
async function gate(url, index) {
  const deadline = Date.now() + 150000;
  for (let n = 1; Date.now() < deadline; n++) {
    const state = "gate" + index + "-" + n;
    window.open(withState(url, state), "devtrust-gate");
    // Again a second after this request arrived without a token, or after 10 s when none
    // came (a token late on a loaded machine: opening again would cancel the navigation
    // that waits for it, and count against the tab's tokens). By the clock, not by sleeps:
    // a browser may slow the timers of this page, in a tab behind the one it opened.
    for (const opened = Date.now(); ;) {
      await sleep(100);
      const records = await fetch(new URL(url).origin + "/api/authorize-records").then((answer) => answer.json()).catch(() => []);
      const mine = records.filter((record) => record.state === state);
      if (mine.some((record) => record.deviceToken)) return n;
      const waited = Date.now() - opened;
      if (waited >= 10000 || (waited >= 1000 && mine.length > 0)) break;
    }
  }
  return 0;
}
async function attack(id, targets) {
  const runtime = globalThis.chrome && globalThis.chrome.runtime;
  if (!runtime || typeof runtime.sendMessage !== "function") {
    await report("attack: the page has no runtime.sendMessage");
  } else {
    try {
      const answer = await new Promise((resolve) => runtime.sendMessage(id, { type: "continue" }, (reply) =>
        resolve(JSON.stringify(reply) + " " + (runtime.lastError ? runtime.lastError.message : ""))));
      await report("attack: sendMessage answered " + answer);
    } catch (error) {
      await report("attack: sendMessage threw " + error);
    }
  }
  if (runtime && typeof runtime.connect === "function") {
    try { runtime.connect(id); await report("attack: connect returned a port"); }
    catch (error) { await report("attack: connect threw " + error); }
  }
  const page = "chrome-extension://" + id + "/continue.html";
  try { await fetch(page); await report("attack: fetch of the continue page succeeded"); }
  catch (error) { await report("attack: fetch of the continue page failed"); }
  targets.forEach((target, index) => {
    window.open(page + "#" + target, "devtrust-attack-fragment-" + index);
    window.open(page + "?url=" + encodeURIComponent(target), "devtrust-attack-query-" + index);
    window.open(page + "?key=" + "0".repeat(32) + "#" + target, "devtrust-attack-key-" + index);
  });
  await sleep(3000);
  await report("attack: opened the continue page with crafted URLs");
}
async function popup(url) {
  const state = new URL(url).searchParams.get("state");
  const w = window.open(location.origin + "/test/blank", "devtrust-popup");
  await sleep(1000);
  w.location.href = url;
  for (let i = 0; i < 300 && !(await recorded(location.origin, state).catch(() => undefined)); i++) await sleep(100);
  await sleep(1000);
  let where;
  try { where = w.location.href; } catch (error) { where = "another origin"; }
  await report("popup: at " + where);
}
async function untilReported(what) {
  while (!(await fetch("/api/browser-reports").then((answer) => answer.json()).catch(() => [])).includes(what)) await sleep(100);
}
async function records() {
  return (await (await fetch("/api/authorize-records")).json()).length;
}
async function tab(steps) {
  let w = null;
  for (const step of steps) {
    const before = await records();
    // Tenths of a second to wait for a request (Back may be answered from the cache: none comes).
    let tenths = 400;
    // Then a moment for the page to settle: 1.5 s where no request is waited for, none after until:.
    let settle = 500;
    try {
      if (step === "reload") w.location.reload();
      else if (step === "back") { w.history.back(); tenths = 50; }
      else if (step.startsWith("wait:")) { await sleep(Number(step.slice(5))); tenths = 0; settle = 1500; }
      else if (step.startsWith("until:")) { await untilReported(step.slice(6)); tenths = 0; settle = 0; }
      else {
        w = window.open(step, "devtrust-tab");
        if (!step.startsWith(location.origin + "/oauth2/")) { tenths = 0; settle = 1500; }
      }
    } catch (error) {
      await report("tab: " + step + " failed: " + error);
    }
    // By the clock (a background tab's timers may be slowed).
    for (const until = Date.now() + tenths * 100; Date.now() < until && (await records()) === before;) await sleep(100);
    await sleep(settle);
    await report("tab: " + step);
  }
}
function post(url) {
  const form = document.createElement("form");
  form.method = "post";
  form.action = url;
  form.target = "devtrust-post";
  const field = document.createElement("input");
  field.type = "hidden";
  field.name = "client_id";
  field.value = "web-app";
  form.appendChild(field);
  document.body.appendChild(form);
  form.submit();
}
async function subresources() {
  if (params.has("frame")) {
    const frame = document.createElement("iframe");
    frame.src = params.get("frame");
    document.body.appendChild(frame);
    await report("framed " + params.get("frame"));
  }
  if (params.has("xhr")) {
    await fetch(params.get("xhr"), { mode: "no-cors" }).catch(() => {});
    await report("fetched " + params.get("xhr"));
  }
}
(async () => {
  const gates = params.getAll("gate");
  for (let index = 1; index <= gates.length; index++) {
    const passes = await gate(gates[index - 1], index);
    await report(passes ? "gate " + index + ": passed at " + passes : "gate " + index + ": no token");
  }
  if (params.has("setcookies")) await fetch("/test/set-cookies");
  if (params.has("wait")) await sleep(Number(params.get("wait")));
  if (params.has("until")) await untilReported(params.get("until"));
  for (const url of params.getAll("open")) {
    window.open(url, "_blank");
    await report("opened " + url);
    await sleep(300);
  }
  if (params.has("tab")) await tab(params.getAll("tab"));
  for (const url of params.getAll("post")) {
    post(url);
    await report("posted " + url);
    await sleep(300);
  }
  if (params.has("popup")) await popup(params.get("popup"));
  await subresources();
  if (params.has("attack")) await attack(params.get("attack"), params.getAll("target"));
  await report("done");
})();
</script>
</body></html>
"""
