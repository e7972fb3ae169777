// Every error the page meets (a script that fails, a file that does not
// load, a promise nobody caught), kept in window.netawareErrors: the
// browser tests read it, and people see it in the console anyway. Loaded
// first, before the page's own script, so that it sees that script fail.
"use strict";
window.netawareErrors = [];
window.addEventListener("error", (event) => {
  const target = event.target;
  const what = event.message || (target && (target.src || target.href)) || String(event);
  window.netawareErrors.push(String(what));
}, true);
window.addEventListener("unhandledrejection", (event) => {
  const reason = event.reason;
  window.netawareErrors.push("unhandled: " + ((reason && reason.message) || String(reason)));
});
