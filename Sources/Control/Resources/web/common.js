(function () {
"use strict";
// What every part of the page shares, loaded first: the control API, the one event stream's
// handlers, building elements (values only ever become text), showing any value as a string,
// and asking for key=value pairs.
const fcm = window.fcm = window.fcm || {};
const handlers = new Map();
// The control token (`/?token=SECRET`): a bearer token for the API, `access_token` on the stream.
const secret = new URLSearchParams(location.search).get("token");
const auth = secret ? { "Authorization": "Bearer " + secret } : {};

// The control API: `path` under /api/v1; the decoded answer (`text: true`: the body as text, for
// 64-bit ids such as multicast_id that do not survive a double); an Error naming what failed,
// with the HTTP status as its `status`.
fcm.api = async function (path, options) {
  const o = options || {};
  const headers = Object.assign({}, auth, o.body ? { "Content-Type": "application/json" } : {});
  let r;
  try {
    r = await fetch("/api/v1" + path, { method: o.method || "GET", headers, body: o.body });
  } catch (x) {
    // No answer at all (the server stopped): a sentence, and the page's offline state.
    if (fcm.offline) fcm.offline.set(true);
    const e = new Error("The server is unreachable: " + (o.method || "GET") + " " + path.split("?")[0] + " was not sent. The page retries on its own.");
    e.offline = true;
    throw e;
  }
  if (!r.ok) {
    let why = "";
    try { const b = await r.json(); why = b && b.error && b.error.message ? ": " + b.error.message : ""; } catch (x) { /* not JSON */ }
    const e = new Error((o.method || "GET") + " " + path + ": HTTP " + r.status + why);
    e.status = r.status;
    throw e;
  }
  return r.status === 204 ? null : o.text ? r.text() : r.json();
};

// Every part follows the one event stream page.js opens: fcm.on("message.accepted", data => …).
fcm.on = function (name, handler) {
  if (!handlers.has(name)) { handlers.set(name, []); if (fcm.stream) listen(fcm.stream, name); }
  handlers.get(name).push(handler);
};
function listen(es, name) {
  es.addEventListener(name, e => {
    let d = null;
    try { d = JSON.parse(e.data); } catch (x) { return; }
    for (const h of handlers.get(name) || []) { try { h(d, e); } catch (x) { console.error(x); } }
  });
}
// The event stream, opened once (by page.js); the handlers registered so far start listening.
fcm.openStream = function () {
  const es = new EventSource("/api/v1/events" + (secret ? "?access_token=" + encodeURIComponent(secret) : ""));
  fcm.stream = es;
  for (const name of handlers.keys()) listen(es, name);
  return es;
};
// A page the browser keeps for its back button (the back/forward cache) keeps its connections:
// each open stream holds one of the six a browser gives one host, so the seventh page opened in
// the tab would wait for ever. The stream closes when the page is left; a page brought back
// from that cache loads again (its lists missed every event meanwhile).
window.addEventListener("pagehide", () => { if (fcm.stream) fcm.stream.close(); });
window.addEventListener("pageshow", e => { if (e.persisted) location.reload(); });

// An element with `text` as its text (never parsed as HTML) and `cls` as its class.
fcm.el = function (tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
};

// A string as it is; anything else as JSON; nothing as "".
fcm.str = function (v) {
  return typeof v === "string" ? v : (v === undefined || v === null ? "" : JSON.stringify(v));
};

// Asks for upstream data as `key=value` pairs separated by commas: the object, or null when cancelled.
fcm.askPairs = function () {
  const text = prompt("Upstream data as key=value pairs separated by commas", "hello=world");
  if (text === null) return null;
  const data = {};
  for (const pair of text.split(",")) {
    const i = pair.indexOf("=");
    if (i > 0) data[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  return data;
};
})();
