// The extension's native-host connection (browser/background.js) in node, with the browser's
// API and its timers replaced by fakes that the script drives: no browser, no host, no waiting.
// Usage: node extension_host_timeout.js BACKGROUND_JS. Prints "ok" and exits 0, or says what failed.
"use strict";
const fs = require("fs");
const vm = require("vm");

const source = fs.readFileSync(process.argv[2], "utf8");
const timeout = Number(/const HOST_TIMEOUT_MILLISECONDS = ([\d_]+);/.exec(source)[1].replace(/_/g, ""));

// Virtual time: setTimeout's callbacks run when the script advances the clock past them.
let now = 0;
let nextTimer = 1;
const timers = new Map();
function setTimeoutFake(callback, delay) {
  const id = nextTimer++;
  timers.set(id, { at: now + (delay || 0), callback });
  return id;
}
function clearTimeoutFake(id) { timers.delete(id); }
async function advanceTo(time) {
  for (;;) {
    await new Promise((resolve) => setImmediate(resolve));
    const due = [...timers.entries()].filter(([, timer]) => timer.at <= time).sort((a, b) => a[1].at - b[1].at)[0];
    if (!due) break;
    timers.delete(due[0]);
    now = due[1].at;
    due[1].callback();
  }
  now = time;
  await new Promise((resolve) => setImmediate(resolve));
}

// The native host: ports that record what was sent and never answer.
const ports = [];
function connectNative(name) {
  const port = {
    name, posted: [], disconnected: false, messageListeners: [], disconnectListeners: [],
    onMessage: { addListener: (listener) => port.messageListeners.push(listener) },
    onDisconnect: { addListener: (listener) => port.disconnectListeners.push(listener) },
    postMessage: (message) => port.posted.push(message),
    // As in the browsers: a port's own disconnect() does not fire its onDisconnect.
    disconnect: () => { port.disconnected = true; },
  };
  ports.push(port);
  return port;
}

// Every other API: an object whose every property is another such object, callable, answering
// a promise of an empty list (rules, storage), so that the extension's start-up runs through.
function stub() {
  const callable = function () { return Promise.resolve([]); };
  return new Proxy(callable, {
    get(target, property) {
      if (property === "then") return undefined;
      if (!(property in target)) target[property] = stub();
      return target[property];
    },
  });
}
const chrome = stub();
chrome.runtime.connectNative = connectNative;
chrome.runtime.lastError = undefined;
const warnings = [];
const context = vm.createContext({
  chrome, console: { warn: (text) => warnings.push(text), log: () => {}, error: () => {} },
  setTimeout: setTimeoutFake, clearTimeout: clearTimeoutFake, URL, Date: class extends Date { static now() { return now; } }, Promise, Map, Set, Error, JSON,
  encodeURIComponent, decodeURIComponent, Array, Object, String, Number, Uint8Array, TextEncoder, TextDecoder, btoa, atob,
  crypto: require("crypto").webcrypto,
});
context.globalThis = context;
vm.runInContext(source, context, { filename: "background.js" });

function fail(message) {
  console.log("FAIL: " + message + (warnings.length ? "\nwarnings: " + warnings.join("\n") : ""));
  process.exit(1);
}

function settled(promise) {
  const state = { done: false, error: null, value: null };
  promise.then((value) => { state.done = true; state.value = value; }, (error) => { state.done = true; state.error = error; });
  return state;
}

(async () => {
  await advanceTo(0);
  if (process.env.DEBUG_EXTENSION) console.log(JSON.stringify({ ports: ports.map((port) => port.posted), warnings }));
  // The start-up config request is the first on the first port; a token request follows later.
  if (ports.length !== 1 || ports[0].posted.length !== 1 || ports[0].posted[0].type !== "config") {
    fail("expected the start-up config request on one port, got " + JSON.stringify(ports.map((port) => port.posted)));
  }
  await advanceTo(timeout * 0.3);
  const token = settled(context.askHost({ type: "token", url: "https://idp.example/oauth2/authorize?client_id=x" }));
  await advanceTo(timeout * 0.3 + 1);
  if (ports.length !== 1 || ports[0].posted.length !== 2) fail("the token request did not go on the open port");
  // The config request's time runs out: the extension disconnects the port. The token request,
  // on the same port, can no longer be answered: it fails then, not at its own timer.
  await advanceTo(timeout + 1);
  if (!ports[0].disconnected) fail("the port was not disconnected when the config request timed out");
  if (!token.done) fail("the token request on the disconnected port still waits, for its own timer (at " + (timeout * 1.3) + " ms)");
  if (!token.error || !/did not answer/.test(token.error.message)) fail("the token request failed with " + (token.error && token.error.message));
  // The next request connects again.
  const again = settled(context.askHost({ type: "token", url: "https://idp.example/oauth2/authorize?client_id=y" }));
  await advanceTo(timeout + 2);
  if (ports.length !== 2 || ports[1].posted.length !== 1) fail("the next request did not connect again: " + ports.length + " ports");
  ports[1].messageListeners.forEach((listener) => listener({ type: "token", id: ports[1].posted[0].id, token: "t" }));
  await advanceTo(timeout + 3);
  if (!again.done || again.error || again.value.token !== "t") fail("the request on the new port did not get its answer");
  console.log("ok");
})().catch((error) => fail(String(error && error.stack)));
