// devtrust device sign-in: adds a fresh device token (device_token=...) to top-level
// GET navigations to the authorization endpoints this device is registered with.
// The endpoints and the tokens come from the native messaging host (`devtrust
// native-host`); docs/browser.md says how this works in each browser and why.
"use strict";

const HOST_NAME = "dev.devtrust.host";
const PARAMETER = "device_token";
const CONTINUE_PAGE = "continue.html";
// How long a redirect to the continue page stays claimable, and a fallback's pass.
const PENDING_MILLISECONDS = 30_000;
const BYPASS_MILLISECONDS = 10_000;
const REFRESH_ALARM = "devtrust-refresh-config";
const REFRESH_MINUTES = 5;

const api = globalThis.browser ?? globalThis.chrome;
// Firefox keeps blocking webRequest listeners that may answer later (a Promise):
// there the navigation itself is redirected with the token. Chromium has none
// in Manifest V3, so it redirects through the continue page (declarativeNetRequest).
const usesBlockingWebRequest = typeof globalThis.browser !== "undefined" && typeof browser.runtime.getBrowserInfo === "function";

const ALLOW_RULE_ID = 1;
const FIRST_REDIRECT_RULE_ID = 100;
const FIRST_BYPASS_RULE_ID = 1_000_000;

// The current configuration: the endpoints as the host gave them (canonical
// origin + path) and the host's revision of that list.
let endpoints = new Set();
let revision = null;
let configLoaded = null;
// Redirects to the continue page this extension made, by tab: { url, at }.
const pendingByTab = new Map();

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

function hasDeviceToken(text) {
  try { return new URL(text).searchParams.has(PARAMETER); } catch { return true; }
}

// The URL with device_token appended to its query; everything before it unchanged.
function withToken(text, token) {
  const separator = !text.includes("?") ? "?" : (text.endsWith("?") || text.endsWith("&") ? "" : "&");
  return text + separator + PARAMETER + "=" + encodeURIComponent(token);
}

async function askHost(message) {
  const reply = await api.runtime.sendNativeMessage(HOST_NAME, message);
  if (!reply || typeof reply !== "object") throw new Error("the native host answered nothing");
  if (reply.type === "error") {
    const error = new Error((reply.error || "error") + (reply.message ? " (" + reply.message + ")" : ""));
    error.code = reply.error;
    throw error;
  }
  if (reply.type !== message.type) throw new Error("the native host answered " + JSON.stringify(reply.type) + " to " + message.type);
  return reply;
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
    // No host, or a broken one: touch no navigation at all until it answers.
    warn("cannot read the configuration from the native host " + HOST_NAME + " (" + why + "); no navigation gets a device token", error);
    await applyEndpoints([], null);
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

async function applyRedirectRules(list) {
  const rules = list.map((endpoint, index) => ({
    id: FIRST_REDIRECT_RULE_ID + index,
    priority: 1,
    action: { type: "redirect", redirect: { extensionPath: "/" + CONTINUE_PAGE } },
    condition: {
      regexFilter: "^" + escapeRegex(endpoint) + "(\\?.*)?$",
      isUrlFilterCaseSensitive: true,
      resourceTypes: ["main_frame"],
      requestMethods: ["get"],
    },
  }));
  if (rules.length > 0) {
    // A URL that already carries a device token goes through untouched (no second token).
    rules.push({
      id: ALLOW_RULE_ID,
      priority: 2,
      action: { type: "allow" },
      condition: { regexFilter: "[?&]" + PARAMETER + "([=&]|$)", isUrlFilterCaseSensitive: true, resourceTypes: ["main_frame"] },
    });
  }
  const existing = await api.declarativeNetRequest.getDynamicRules();
  await api.declarativeNetRequest.updateDynamicRules({ removeRuleIds: existing.map((rule) => rule.id), addRules: rules });
}

// The continue page's URLs: with use_dynamic_url, redirects go to a per-session
// origin (runtime.getURL's), while the page's messages name the extension's own.
function isContinuePage(text) {
  const pages = [api.runtime.getURL(CONTINUE_PAGE), new URL("/" + CONTINUE_PAGE, globalThis.location.origin).href];
  return typeof text === "string" && pages.some((page) => text === page || text.startsWith(page + "#") || text.startsWith(page + "?"));
}

// The proof that a continue page was opened by this extension's own redirect:
// the browser reports the redirect of that tab's navigation to it.
function onBeforeRedirect(details) {
  if (details.type !== "main_frame" || details.tabId < 0) return;
  if (!isContinuePage(details.redirectUrl)) return;
  pendingByTab.set(details.tabId, { url: details.url, at: Date.now() });
}

// A tab-scoped pass for one navigation that goes on without a token.
async function allowOnce(tabId) {
  const id = FIRST_BYPASS_RULE_ID + tabId;
  await api.declarativeNetRequest.updateSessionRules({
    removeRuleIds: [id],
    addRules: [{ id, priority: 3, action: { type: "allow" }, condition: { tabIds: [tabId], resourceTypes: ["main_frame"] } }],
  });
  setTimeout(() => api.declarativeNetRequest.updateSessionRules({ removeRuleIds: [id] }).catch(() => {}), BYPASS_MILLISECONDS);
}

// The continue page asks where to go. It gets the URL of the navigation this
// extension redirected in its tab, with a fresh token when the host gives one,
// or without one; a page that was not opened by that redirect gets nothing.
async function continueNavigation(sender) {
  const tabId = sender.tab?.id;
  const pending = tabId === undefined ? undefined : pendingByTab.get(tabId);
  if (tabId !== undefined) pendingByTab.delete(tabId);
  if (!isContinuePage(sender.url) || !pending || Date.now() - pending.at > PENDING_MILLISECONDS) {
    warn("a continue page asked for a token without a navigation this extension redirected; refused");
    return { refused: true };
  }
  try {
    const url = await tokenURL(pending.url);
    if (url !== null) return { url };
  } catch (error) {
    warn("no device token for " + new URL(pending.url).origin + "; the sign-in goes on without one", error);
  }
  await allowOnce(tabId);
  return { url: pending.url };
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
function onBeforeRequest(details) {
  if (details.method !== "GET" || details.type !== "main_frame") return undefined;
  if (!endpointOf(details.url) || hasDeviceToken(details.url)) return undefined;
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
  api.webRequest.onBeforeRequest.addListener(onBeforeRequest, { urls: HOST_PATTERNS, types: ["main_frame"] }, ["blocking"]);
} else {
  api.webRequest.onBeforeRedirect.addListener(onBeforeRedirect, { urls: HOST_PATTERNS, types: ["main_frame"] });
  api.runtime.onMessage.addListener((message, sender, sendResponse) => {
    if (message?.type !== "continue") return false;
    continueNavigation(sender).then(sendResponse, (error) => {
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
