// The page a Chromium authorization navigation is redirected to. Usually the
// extension takes the tab on to the sign-in before this page is shown; when the
// page comes first, it asks the extension where to go on (the original URL with
// a fresh device token, or without one when the host gives none) and replaces
// itself with that URL. It hands the extension what its own URL carries (the
// session key in its query, the endpoint URL in its fragment: the redirect rule
// put them there), and goes only where the extension answers.
"use strict";

// Shown and taken on at once, it can still be left in the history; come back to
// later, it has nothing to continue: it steps over itself.
function isRevisit() {
  const entry = performance.getEntriesByType("navigation")[0];
  return entry !== undefined && entry.type === "back_forward";
}

window.addEventListener("pageshow", (event) => {
  if (event.persisted) history.back();
});

if (isRevisit()) {
  history.back();
} else {
  const key = new URLSearchParams(location.search).get("key");
  const hash = location.href.indexOf("#");
  const url = hash < 0 ? null : location.href.slice(hash + 1);
  chrome.runtime.sendMessage({ type: "continue", key, url }).then((answer) => {
    if (answer && typeof answer.url === "string") {
      location.replace(answer.url);
    } else if (!(answer && answer.waiting)) {
      document.getElementById("status").textContent = "devtrust: there is no sign-in to continue here.";
    }
  }, (error) => {
    console.warn("devtrust: the extension did not answer: " + error.message);
  });
}
