// devtrust device sign-in: adds a fresh device token (device_token=...) to top-level
// GET navigations to the authorization endpoints this device is registered with.
// The endpoints and the tokens come from the native messaging host (`devtrust
// native-host`); docs/browser.md says how this works in each browser and why.
"use strict";

const HOST_NAME = "dev.devtrust.host";
const PARAMETER = "device_token";
const CONTINUE_PAGE = "continue.html";

// The timers, together: the browser tests run a copy of this directory with shorter ones,
// each found by its one "const NAME = VALUE;" line (Tests/DevtrustTestSupport/ExtensionTimers.swift);
// a renamed one fails those tests until they know the new name.
// How long a redirect to the continue page stays claimable, and the longest a
// fallback's pass (one URL in one tab, removed once that navigation went through) waits.
const PENDING_MILLISECONDS = 30_000;
const BYPASS_MILLISECONDS = 10_000;
// At most this many token requests per tab within TOKEN_WINDOW_MILLISECONDS: a server
// that takes the token and sends the tab back to the endpoint without it would
// otherwise get a new token on every round, for ever (each round is a new
// navigation in Chromium, so its redirect limit never applies). A normal sign-in
// asks once or twice (WSO2 sends the tab back to the endpoint once after the login).
const TOKENS_PER_TAB = 6;
const TOKEN_WINDOW_MILLISECONDS = 20_000;
// How long the native host has to answer a request.
const HOST_TIMEOUT_MILLISECONDS = 10_000;
const REFRESH_ALARM = "devtrust-refresh-config";
// A new registration reaches the rules within this long (docs/browser.md).
const REFRESH_MINUTES = 1;

const api = globalThis.browser ?? globalThis.chrome;
// Firefox keeps blocking webRequest listeners that may answer later (a Promise):
// there the navigation itself is redirected with the token. Chromium has none
// in Manifest V3, so it redirects through the continue page (declarativeNetRequest).
const usesBlockingWebRequest = typeof globalThis.browser !== "undefined" && typeof browser.runtime.getBrowserInfo === "function";

const ALLOW_RULE_ID = 1;
const FIRST_REDIRECT_RULE_ID = 100;
const FIRST_CARRYING_RULE_ID = 500_000;
const FIRST_BYPASS_RULE_ID = 1_000_000;
// Rule priorities: a pass for one tab's navigation, then a URL that already has
// device_token, then the redirect that carries the endpoint URL (a session rule),
// then the one that does not (a dynamic rule, in place from the browser's start on).
const BYPASS_PRIORITY = 4;
const ALLOW_PRIORITY = 3;
const CARRYING_REDIRECT_PRIORITY = 2;
const PLAIN_REDIRECT_PRIORITY = 1;

// The current configuration: the endpoints as the host gave them (canonical
// origin + path) and the host's revision of that list.
let endpoints = new Set();
let revision = null;
let configLoaded = null;
// Navigations this extension redirected to the continue page, by tab:
// { url, at, target (the promise of where it goes on), taken }.
const pendingByTab = new Map();
// When each tab last asked the host for tokens (times in ms), for TOKENS_PER_TAB.
const tokenRequestsByTab = new Map();
// This browser session's key in the continue page's URL (storage.session; a browser
// start clears it, and the session rules that carry it, together).
let continueKey = null;

function warn(message, error) {
  const reason = error === undefined ? "" : ": " + (error && error.message ? error.message : String(error));
  const text = "devtrust: " + message + reason;
  console.warn(text);
  api.storage.local.set({ lastError: { message: text, at: new Date().toISOString() } }).catch(() => {});
}

function isLoopback(hostname) {
  return hostname === "127.0.0.1" || hostname === "localhost" || hostname === "[::1]";
}

// An endpoint as origin + path, or null for anything this extension never touches.
function canonicalEndpoint(text) {
  let url;
  try { url = new URL(text); } catch { return null; }
  if (url.username || url.password || url.search || url.hash) return null;
  if (!(url.protocol === "https:" || (url.protocol === "http:" && isLoopback(url.hostname)))) return null;
  return url.origin + url.pathname;
}

// The endpoint a navigation URL goes to, or null.
function endpointOf(text) {
  let url;
  try { url = new URL(text); } catch { return null; }
  if (url.username || url.password || url.hash) return null;
  const endpoint = url.origin + url.pathname;
  return endpoints.has(endpoint) && text.startsWith(endpoint) ? endpoint : null;
}

// Whether the URL's query has a device_token parameter, its name percent-encoded or
// not, with or without a value (as the host decides: such a URL never gets a token).
function hasDeviceToken(text) {
  try { return new URL(text).searchParams.has(PARAMETER); } catch { return true; }
}

// The URL with device_token appended to its query; everything before it unchanged.
function withToken(text, token) {
  const separator = !text.includes("?") ? "?" : (text.endsWith("?") || text.endsWith("&") ? "" : "&");
  return text + separator + PARAMETER + "=" + encodeURIComponent(token);
}

// One connection to the host, kept while the browser runs: a token then costs a
// message, not a process start (docs/performance.md). A host that ends or is
// missing fails what is waiting (or HOST_TIMEOUT_MILLISECONDS); the next request connects again.
let hostPort = null;
let nextRequestId = 1;
const waitingReplies = new Map();

function hostConnection() {
  if (hostPort) return hostPort;
  const port = api.runtime.connectNative(HOST_NAME);
  port.onMessage.addListener((reply) => {
    const waiting = reply && waitingReplies.get(reply.id);
    if (!waiting) return;
    waitingReplies.delete(reply.id);
    waiting.settle(reply);
  });
  port.onDisconnect.addListener((disconnected) => {
    if (hostPort === port) hostPort = null;
    const reason = (disconnected && disconnected.error) || api.runtime.lastError;
    const error = new Error(reason && reason.message ? reason.message : "the native host ended");
    for (const [id, waiting] of waitingReplies) {
      if (waiting.port === port) {
        waitingReplies.delete(id);
        waiting.settle(null, error);
      }
    }
  });
  hostPort = port;
  return port;
}

function askHost(message) {
  return new Promise((resolve, reject) => {
    const id = nextRequestId++;
    let port;
    try {
      port = hostConnection();
    } catch (error) {
      reject(error);
      return;
    }
    const timer = setTimeout(() => {
      if (hostPort === port) hostPort = null;
      port.disconnect();
      // A port's own disconnect() does not fire its onDisconnect: what else waits on this port
      // fails now too (it can no longer be answered), not when its own timer runs out.
      const error = new Error("the native host did not answer within " + HOST_TIMEOUT_MILLISECONDS / 1000 + " s");
      for (const [other, waiting] of waitingReplies) {
        if (waiting.port === port) {
          waitingReplies.delete(other);
          waiting.settle(null, error);
        }
      }
    }, HOST_TIMEOUT_MILLISECONDS);
    waitingReplies.set(id, {
      port,
      settle(reply, error) {
        clearTimeout(timer);
        if (error) return reject(error);
        if (!reply || typeof reply !== "object") return reject(new Error("the native host answered nothing"));
        if (reply.type === "error") {
          const failure = new Error((reply.error || "error") + (reply.message ? " (" + reply.message + ")" : ""));
          failure.code = reply.error;
          return reject(failure);
        }
        if (reply.type !== message.type) return reject(new Error("the native host answered " + JSON.stringify(reply.type) + " to " + message.type));
        resolve(reply);
      },
    });
    try {
      port.postMessage({ ...message, id });
    } catch (error) {
      waitingReplies.delete(id);
      clearTimeout(timer);
      reject(error);
    }
  });
}

// ---- configuration

function loadConfig() {
  configLoaded ??= refreshConfig("startup");
  return configLoaded;
}

async function refreshConfig(why) {
  let reply;
  try {
    reply = await askHost({ type: "config" });
  } catch (error) {
    // No host at all: touch no navigation until it answers. A host that answered before
    // and fails now (slow, crashed) keeps the endpoints it gave: their navigations still
    // ask it for a token, and go on without one when it gives none.
    if (endpoints.size === 0) {
      warn("cannot read the configuration from the native host " + HOST_NAME + " (" + why + "); no navigation gets a device token", error);
      await applyEndpoints([], null);
    } else {
      warn("cannot read the configuration from the native host " + HOST_NAME + " (" + why + "); keeping the " + endpoints.size + " endpoint(s) it gave before", error);
    }
    return;
  }
  const list = Array.isArray(reply.authorizationEndpoints) ? reply.authorizationEndpoints : [];
  const canonical = [];
  for (const item of list) {
    const endpoint = typeof item === "string" ? canonicalEndpoint(item) : null;
    if (endpoint) canonical.push(endpoint);
    else warn("ignoring an authorization endpoint that is not https (or http to loopback): " + JSON.stringify(item));
  }
  const newRevision = typeof reply.revision === "string" ? reply.revision : JSON.stringify(canonical);
  if (newRevision === revision && canonical.length === endpoints.size) return;
  await applyEndpoints(canonical, newRevision);
}

async function applyEndpoints(list, newRevision) {
  endpoints = new Set(list);
  revision = newRevision;
  await api.storage.session?.set({ endpoints: list, revision: newRevision }).catch(() => {});
  if (!usesBlockingWebRequest) await applyRedirectRules(list);
}

// ---- Chromium: declarativeNetRequest to the continue page

function escapeRegex(text) {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}

// Two redirects of each endpoint's navigations to the continue page. The session rule
// carries the endpoint URL in the continue page's fragment (and this session's key in
// its query), so the page can go on even when the browser reported no redirect to
// this extension: a web application outside the host patterns (plain http to a host
// other than loopback) that answers 302, or the browser's own upgrade of http to
// https. The page's URL is per session (use_dynamic_url), so the rule cannot outlive
// the session: a browser start clears it. The dynamic rule, with a path alone, is in
// place from the start on, before the host gave the endpoints (its pages go on through
// the redirects the browser reported, as before).
async function applyRedirectRules(list) {
  const condition = (endpoint) => ({
    regexFilter: "^" + escapeRegex(endpoint) + "(\\?.*)?$",
    isUrlFilterCaseSensitive: true,
    resourceTypes: ["main_frame"],
    requestMethods: ["get"],
  });
  const rules = list.map((endpoint, index) => ({
    id: FIRST_REDIRECT_RULE_ID + index,
    priority: PLAIN_REDIRECT_PRIORITY,
    action: { type: "redirect", redirect: { extensionPath: "/" + CONTINUE_PAGE } },
    condition: condition(endpoint),
  }));
  const key = await sessionContinueKey();
  const carrying = list.map((endpoint, index) => ({
    id: FIRST_CARRYING_RULE_ID + index,
    priority: CARRYING_REDIRECT_PRIORITY,
    action: { type: "redirect", redirect: { regexSubstitution: api.runtime.getURL(CONTINUE_PAGE) + "?key=" + key + "#\\0" } },
    condition: condition(endpoint),
  }));
  if (rules.length > 0) {
    // A URL whose query already has a device_token parameter goes through untouched (no
    // second token): the name right after the query's "?" or an "&", not text inside
    // another parameter's value (state=x?device_token=...). A URL this misses, such as a
    // name percent-encoded, still gets none: the background checks again (hasDeviceToken).
    rules.push({
      id: ALLOW_RULE_ID,
      priority: ALLOW_PRIORITY,
      action: { type: "allow" },
      condition: { regexFilter: "^[^?#]*\\?([^#]*&)?" + PARAMETER + "=", isUrlFilterCaseSensitive: true, resourceTypes: ["main_frame"] },
    });
  }
  const existing = await api.declarativeNetRequest.getDynamicRules();
  await api.declarativeNetRequest.updateDynamicRules({ removeRuleIds: existing.map((rule) => rule.id), addRules: rules });
  const existingSession = (await api.declarativeNetRequest.getSessionRules()).filter((rule) => rule.id < FIRST_BYPASS_RULE_ID);
  try {
    await api.declarativeNetRequest.updateSessionRules({ removeRuleIds: existingSession.map((rule) => rule.id), addRules: carrying });
  } catch (error) {
    warn("cannot add the redirect rules that carry the endpoint URL; a sign-in through a site outside the host patterns may stop at the continue page", error);
  }
}

// This browser session's continue key, made once (random, 128 bits).
async function sessionContinueKey() {
  if (continueKey) return continueKey;
  const stored = await api.storage.session.get("continueKey").catch(() => ({}));
  if (typeof stored.continueKey === "string") {
    continueKey = stored.continueKey;
  } else {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    continueKey = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
    await api.storage.session.set({ continueKey }).catch(() => {});
  }
  return continueKey;
}

// The continue page's URLs: with use_dynamic_url, redirects go to a per-session
// origin (runtime.getURL's), while the page's messages name the extension's own.
function isContinuePage(text) {
  const pages = [api.runtime.getURL(CONTINUE_PAGE), new URL("/" + CONTINUE_PAGE, globalThis.location.origin).href];
  return typeof text === "string" && pages.some((page) => text === page || text.startsWith(page + "#") || text.startsWith(page + "?"));
}

// The method a request has after an HTTP redirect with this status (the Fetch standard's).
function methodAfterRedirect(method, statusCode) {
  if (statusCode === 303 && method !== "HEAD") return "GET";
  if ((statusCode === 301 || statusCode === 302) && method === "POST") return "GET";
  return method;
}

// A navigation this extension redirected to the continue page: the browser reports
// the redirect of that tab's navigation to it (webRequest.onBeforeRedirect). The
// token is asked for at once, while the continue page loads; whichever comes
// first, the token or the page, takes the tab on to the URL (once).
//
// A navigation that reaches the endpoint through a server's redirect (a web
// application's /login answering 302) is redirected to the continue page too, but
// Chromium reports only the server's redirect, not its own to the continue page.
// So a server's redirect to an endpoint URL that the rules send to the continue page
// (a GET without device_token) is noted as well, without a token: the continue
// page, when it comes, asks for one. Nothing navigates on such a note alone, since
// only the continue page's request shows that the rule did redirect.
function onBeforeRedirect(details) {
  if (details.type !== "main_frame" || details.tabId < 0) return;
  const tabId = details.tabId;
  for (const [tab, old] of pendingByTab) if (Date.now() - old.at > PENDING_MILLISECONDS) pendingByTab.delete(tab);
  if (isContinuePage(details.redirectUrl)) {
    const noted = pendingByTab.get(tabId);
    const pending = noted && noted.url === details.url && !noted.taken ? noted : { url: details.url, at: Date.now(), taken: false };
    pending.target ??= destination(tabId, details.url);
    pendingByTab.set(tabId, pending);
    pending.target.then((url) => {
      if (pending.taken || pendingByTab.get(tabId) !== pending) return;
      pending.taken = true;
      // Before the continue page is shown: that page then never enters the history.
      api.tabs.update(tabId, { url }).catch((error) => warn("could not take the tab on to the sign-in", error));
    });
  } else if (methodAfterRedirect(details.method, details.statusCode) === "GET" && endpointOf(details.redirectUrl)
             && !hasDeviceToken(details.redirectUrl) && bypassByTab.get(tabId)?.url !== details.redirectUrl) {
    pendingByTab.set(tabId, { url: details.redirectUrl, at: Date.now(), taken: false, target: null });
  }
}

// Whether this tab may ask for another token now (TOKENS_PER_TAB); counts the request.
function mayAskForToken(tabId, url) {
  const now = Date.now();
  const recent = (tokenRequestsByTab.get(tabId) ?? []).filter((at) => now - at < TOKEN_WINDOW_MILLISECONDS);
  if (recent.length >= TOKENS_PER_TAB) {
    tokenRequestsByTab.set(tabId, recent);
    warn("this tab asked for " + recent.length + " device tokens within " + TOKEN_WINDOW_MILLISECONDS / 1000
         + " s (a server that sends it back to its sign-in again and again?); " + new URL(url).origin
         + " gets no token now; the next one after a pause does");
    return false;
  }
  recent.push(now);
  tokenRequestsByTab.set(tabId, recent);
  for (const [tab, times] of tokenRequestsByTab) if (times.every((at) => now - at >= TOKEN_WINDOW_MILLISECONDS)) tokenRequestsByTab.delete(tab);
  return true;
}

// Where a redirected navigation goes on to: its URL with a fresh token, or, when the
// host gives none, the same URL through a tab-scoped pass (no redirect again).
async function destination(tabId, url) {
  if (!mayAskForToken(tabId, url)) {
    await allowOnce(tabId, url, false);
    return url;
  }
  try {
    const target = await tokenURL(url);
    if (target !== null) return target;
  } catch (error) {
    warn("no device token for " + new URL(url).origin + "; the sign-in goes on without one", error);
  }
  await allowOnce(tabId, url);
  return url;
}

// Passes for navigations that go on without a token, by tab: { id, url }.
const bypassByTab = new Map();

// A pass for one navigation that goes on without a token: that URL, in that tab, once.
// It is removed when that navigation's request is seen (webRequest.onBeforeRequest,
// which the browser reports after the rules have decided), or after
// BYPASS_MILLISECONDS, so the tab's next sign-in asks the host again. A tab over
// TOKENS_PER_TAB keeps its pass for the whole BYPASS_MILLISECONDS (once = false):
// a server that sends it back to the same URL again and again then does so within
// one navigation, which the browser's redirect limit ends.
async function allowOnce(tabId, url, once = true) {
  const id = FIRST_BYPASS_RULE_ID + tabId;
  const condition = { tabIds: [tabId], resourceTypes: ["main_frame"], regexFilter: "^" + escapeRegex(url) + "$", isUrlFilterCaseSensitive: true };
  try {
    await api.declarativeNetRequest.updateSessionRules({ removeRuleIds: [id], addRules: [{ id, priority: BYPASS_PRIORITY, action: { type: "allow" }, condition }] });
  } catch {
    // A URL too long for a rule's regular expression: the whole tab, for that one navigation.
    delete condition.regexFilter;
    await api.declarativeNetRequest.updateSessionRules({ removeRuleIds: [id], addRules: [{ id, priority: BYPASS_PRIORITY, action: { type: "allow" }, condition }] });
  }
  const bypass = { id, url, once };
  bypassByTab.set(tabId, bypass);
  setTimeout(() => removeBypass(tabId, bypass), BYPASS_MILLISECONDS);
}

function removeBypass(tabId, bypass) {
  if (bypassByTab.get(tabId) !== bypass) return;
  bypassByTab.delete(tabId);
  api.declarativeNetRequest.updateSessionRules({ removeRuleIds: [bypass.id] }).catch(() => {});
}

function onBeforeRequest(details) {
  const bypass = bypassByTab.get(details.tabId);
  if (bypass && bypass.once && details.url === bypass.url) removeBypass(details.tabId, bypass);
}

// The continue page, shown before the token came, asks where to go, giving what its
// own URL carries: this session's key and the endpoint URL (the session rule put them
// there). It gets the URL of the navigation this extension redirected in its tab
// (with the token, or without one when the host gives none): the one the browser
// reported (a note in pendingByTab), or else the one it carries, when its key is this
// session's and the URL an endpoint URL without device_token (only the rule's redirect
// opens such a page: docs/security.md). Any other page gets nothing. When the tab was
// already taken on, the page waits.
async function continueNavigation(sender, message) {
  await loadConfig();
  const tabId = sender.tab?.id;
  let pending = tabId === undefined ? undefined : pendingByTab.get(tabId);
  // The tab's note is used up here, kept or discarded: a stale one left behind would still let
  // onBeforeRedirect's handler navigate the tab after this page has (two tokens).
  if (tabId !== undefined) pendingByTab.delete(tabId);
  if (pending && (Date.now() - pending.at > PENDING_MILLISECONDS || (typeof message.url === "string" && message.url !== pending.url))) {
    pending = undefined;
  }
  if (!isContinuePage(sender.url) || tabId === undefined) {
    warn("a page that is not this extension's continue page in a tab asked for a token; refused");
    return { refused: true };
  }
  if (!pending) {
    const key = await sessionContinueKey();
    const carried = typeof message.url === "string" && typeof message.key === "string" && message.key === key
      && endpointOf(message.url) && !hasDeviceToken(message.url);
    if (!carried) {
      warn("a continue page asked for a token without a navigation this extension redirected; refused");
      return { refused: true };
    }
    pending = { url: message.url, at: Date.now(), taken: false, target: null };
  }
  if (pending.taken) return { waiting: true };
  pending.taken = true;
  // A note from a server's redirect has no token yet (onBeforeRedirect).
  pending.target ??= destination(tabId, pending.url);
  return { url: await pending.target };
}

// ---- both browsers

// The navigation URL with a fresh token, or null when it gets none.
async function tokenURL(url) {
  await loadConfig();
  if (!endpointOf(url) || hasDeviceToken(url)) return null;
  let reply;
  try {
    reply = await askHost({ type: "token", url });
  } catch (error) {
    if (error.code === "not_allowed" || error.code === "not_registered") refreshConfig("the host refused a token").catch(() => {});
    throw error;
  }
  if (typeof reply.token !== "string" || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(reply.token)) {
    throw new Error("the native host's token is not a compact JWS");
  }
  const target = withToken(url, reply.token);
  // Only ever the endpoint URL it was asked for, plus the token.
  if (endpointOf(target) !== endpointOf(url)) throw new Error("the URL with the token is not the endpoint's");
  return target;
}

// Firefox: the navigation itself waits for the token and is redirected with it.
function onBeforeRequestBlocking(details) {
  if (details.method !== "GET" || details.type !== "main_frame") return undefined;
  if (!endpointOf(details.url) || hasDeviceToken(details.url)) return undefined;
  if (!mayAskForToken(details.tabId, details.url)) return undefined;
  return tokenURL(details.url).then(
    (url) => (url === null ? {} : { redirectUrl: url }),
    (error) => {
      warn("no device token for " + new URL(details.url).origin + "; the sign-in goes on without one", error);
      return {};
    });
}

const HOST_PATTERNS = ["https://*/*", "http://127.0.0.1/*", "http://localhost/*", "http://[::1]/*"];

if (usesBlockingWebRequest) {
  // Firefox checks every main-frame request against the endpoints itself; only
  // a match waits for the host.
  api.webRequest.onBeforeRequest.addListener(onBeforeRequestBlocking, { urls: HOST_PATTERNS, types: ["main_frame"] }, ["blocking"]);
} else {
  api.webRequest.onBeforeRedirect.addListener(onBeforeRedirect, { urls: HOST_PATTERNS, types: ["main_frame"] });
  api.webRequest.onBeforeRequest.addListener(onBeforeRequest, { urls: HOST_PATTERNS, types: ["main_frame"] });
  api.runtime.onMessage.addListener((message, sender, sendResponse) => {
    if (message?.type !== "continue") return false;
    continueNavigation(sender, message).then(sendResponse, (error) => {
      warn("the continue page could not be answered", error);
      sendResponse({ refused: true });
    });
    return true;
  });
}

// A background woken for an event: the endpoints come back from storage.session (the
// rules are still in place); the host is asked when nothing is stored (a browser
// start or an install clears it).
configLoaded = (async () => {
  const stored = await api.storage.session.get(["endpoints", "revision"]).catch(() => ({}));
  if (Array.isArray(stored.endpoints)) {
    endpoints = new Set(stored.endpoints);
    revision = stored.revision ?? null;
  } else {
    await refreshConfig("start");
  }
})();

api.alarms.create(REFRESH_ALARM, { periodInMinutes: REFRESH_MINUTES });
api.alarms.onAlarm.addListener((alarm) => {
  if (alarm.name === REFRESH_ALARM) configLoaded = refreshConfig("periodic check");
});
