// The page a Chromium authorization navigation is redirected to. Usually the
// extension takes the tab on to the sign-in before this page is shown; when the
// page comes first, it asks the extension where to go on (the original URL with
// a fresh device token, or without one when the host gives none) and replaces
// itself with that URL, so it leaves no entry in the history. It reads nothing
// from its own URL.
"use strict";

chrome.runtime.sendMessage({ type: "continue" }).then((answer) => {
  if (answer && typeof answer.url === "string") {
    location.replace(answer.url);
  } else if (!(answer && answer.waiting)) {
    document.getElementById("status").textContent = "devtrust: there is no sign-in to continue here.";
  }
}, (error) => {
  console.warn("devtrust: the extension did not answer: " + error.message);
});
