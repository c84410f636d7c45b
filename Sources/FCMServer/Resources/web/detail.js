(function () {
"use strict";
// The message detail panel: `#message=ID` opens it (a link, the back button closes it). It shows
// the request, the answer its sender got, the transport, the fault, and each recipient's
// timeline with a preview card (window.fcm.previews.card, when that part is on the page).
const fcm = window.fcm = window.fcm || {};
const el = fcm.el;
const api = fcm.api;
const panel = document.getElementById("detail");
const TRANSPORTS = { http: "legacy HTTP", http_v1: "HTTP v1", xmpp: "XMPP" };
const PREVIEWS = 10;
// A topic send can reach many devices: the panel shows the first ones and says how many more.
const RECIPIENTS = 200;
let openID = null;
// The open message's recipient message ids: delivery events name those.
let openRecipients = new Set();
let returnFocus = null;

function hashID() {
  const m = /^#message=(.+)$/.exec(location.hash);
  if (!m) return null;
  try { return decodeURIComponent(m[1]); } catch (e) { return null; }
}
// JSON text indented when it parses, else as it is. The text is re-indented, not re-serialized:
// numbers stay as sent (a multicast_id is beyond what a double holds exactly).
function pretty(text) {
  try { JSON.parse(text); } catch (e) { return text; }
  let out = "", depth = 0, inString = false;
  const nl = () => "\n" + "  ".repeat(depth);
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === "\\") { out += text[++i]; } else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') { inString = true; out += c; }
    else if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      let j = i + 1;
      while (/\s/.test(text[j] || "")) j++;
      if (text[j] === close) { out += c + close; i = j; } else { depth++; out += c + nl(); }
    }
    else if (c === "}" || c === "]") { depth--; out += nl() + c; }
    else if (c === ",") out += "," + nl();
    else if (c === ":") out += ": ";
    else if (!/\s/.test(c)) out += c;
  }
  return out;
}
function section(title) {
  const s = el("section", null, "detail-part");
  s.append(el("h3", title));
  panel.append(s);
  return s;
}
function facts(parent, pairs) {
  const dl = el("dl", null, "facts");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.append(el("dt", k), el("dd", typeof v === "object" ? JSON.stringify(v) : v));
  }
  parent.append(dl);
  return dl;
}
// The message as the mock took it in (its parsed fields), for sends whose body was not kept.
function asSent(m) {
  const out = {};
  const t = m.target || {};
  if (t.kind === "topic" || t.kind === "condition") out[t.kind] = t.value; else if (t.kind) out[t.kind] = t.value;
  for (const k of ["data", "notification", "android", "apns", "webpush", "fcm_options"]) if (m[k]) out[k] = m[k];
  if (m.options) out.options = m.options;
  return out;
}
function timeline(m, r) {
  const ol = el("ol", null, "timeline");
  const step = (what, at, cls) => {
    const li = el("li", null, cls || what);
    li.append(el("span", what, "what"), el("time", at || "time not recorded"));
    ol.append(li);
  };
  step("accepted", m.accepted_at, "accepted");
  if (r.error) { step("failed: " + r.error + (r.fault ? " (fault " + r.fault + ")" : ""), m.accepted_at, "failed"); return ol; }
  const ttl = m.options && typeof m.options.time_to_live === "number" ? m.options.time_to_live : null;
  const expiresAt = ttl !== null ? new Date(Date.parse(m.accepted_at) + ttl * 1000).toISOString() : null;
  if (r.status === "pending") { step("pending", m.accepted_at); step("expires", expiresAt, "upcoming"); return ol; }
  if (r.status === "delivered") {
    if (r.delivered_at && r.delivered_at !== m.accepted_at) step("pending", m.accepted_at);
    step("delivered", r.delivered_at);
  } else {
    step("pending", m.accepted_at);
    // Expired at its TTL's end; collapsed and dropped when the storage rules settled it.
    step(r.status, r.status === "expired" ? expiresAt : r.settled_at || null);
  }
  return ol;
}
// The recipient's inbox entry (its `effective` payload) and device, for a preview card. The entry
// is read by its message id, however many the device's inbox holds; 404: pruned, or the device
// is gone.
async function preview(box, r) {
  const card = fcm.previews && fcm.previews.card;
  if (!card || !r.token || !r.message_id) return;
  try {
    const tok = encodeURIComponent(r.token);
    const [device, entry] = await Promise.all([api("/devices/" + tok),
      api("/devices/" + tok + "/messages/" + encodeURIComponent(r.message_id)).catch(e => {
        if (e.status === 404) return null;
        throw e;
      })]);
    if (!entry) { box.append(el("p", "not in the device's inbox any more", "muted")); return; }
    const node = card(entry, { platform: device.platform, app: device.app, status: entry.status });
    if (node instanceof Node) box.append(node);
  } catch (e) {
    box.append(el("p", "no preview: " + (e.message || e), "muted"));
  }
}
function render(m) {
  panel.textContent = "";
  const head = el("div", null, "detail-head");
  const title = el("h2", "Message " + m.message_id);
  title.id = "detail-title";
  const close = el("button", "close", "close");
  close.type = "button";
  close.setAttribute("aria-label", "close the message detail (Escape)");
  close.addEventListener("click", closePanel);
  head.append(title, close);
  panel.append(head);

  facts(section("Summary"), [
    ["transport", (TRANSPORTS[m.transport] || m.transport) + (m.format === "plain" ? " (plain text body)" : "")],
    ["status", m.status], ["error", m.error], ["error detail", m.error_detail],
    ["fault that fired", m.fault || "none"], ["sender id", m.sender_id], ["target", fcm.targetText ? fcm.targetText(m) : ""],
    ["accepted at", m.accepted_at], ["v1 name", m.v1_name], ["xmpp message_id", m.xmpp_message_id],
    ["multicast id", m.multicast_id], ["http status", m.http_status]]);

  const req = section("Request");
  if (m.headers && Object.keys(m.headers).length) {
    req.append(el("h4", "headers"));
    facts(req, Object.entries(m.headers));
  }
  if (m.raw_body) {
    req.append(el("h4", m.format === "plain" ? "body as sent (plain text)" : "body as sent"));
    req.append(el("pre", m.format === "plain" ? m.raw_body : pretty(m.raw_body), "body"));
  }
  if (m.status !== "rejected" || !m.raw_body) {
    req.append(el("h4", "message as the mock read it"));
    req.append(el("pre", JSON.stringify(asSent(m), null, 2), "body"));
  }

  const ans = section("Answer");
  if (m.answer) {
    facts(ans, [["status", m.answer.status === null ? "no HTTP status (an XMPP ack or nack)" : m.answer.status],
                ["content type", m.answer.content_type]]);
    ans.append(el("pre", pretty(m.answer.body) + (m.answer.body_truncated ? "\n… (cut at 4 KiB)" : ""), "body answer"));
  } else {
    ans.append(el("p", m.error === "ConnectionClosed" ? "none: the connection was closed without an answer" : "not recorded", "muted"));
  }

  const rec = section("Recipients");
  const rs = m.recipients || [];
  if (rs.length === 0) rec.append(el("p", "none reached", "muted"));
  const total = typeof m.recipients_total === "number" ? m.recipients_total : rs.length;
  rs.forEach((r, i) => {
    const box = el("div", null, "recipient");
    box.append(el("div", r.token || "?", "mono token"));
    if (r.canonical_token) box.append(el("div", "canonical: " + r.canonical_token, "mono"));
    box.append(timeline(m, r));
    rec.append(box);
    if (i < PREVIEWS) preview(box, r);
  });
  if (total > rs.length) rec.append(el("p", "… " + (total - rs.length) + " more recipients", "muted"));
}
async function show(id) {
  openID = id;
  panel.hidden = false;
  document.body.classList.add("detail-open");
  let m;
  try {
    const text = await api("/messages/" + encodeURIComponent(id) + "?recipients=" + RECIPIENTS, { text: true });
    m = JSON.parse(text);
    // The multicast id as sent: JSON.parse rounds integers beyond 2^53.
    const exact = /"multicast_id":(\d+)/.exec(text);
    if (exact) m.multicast_id = exact[1];
  } catch (e) {
    if (openID !== id) return;
    panel.textContent = "";
    const close = el("button", "close", "close");
    close.type = "button";
    close.addEventListener("click", closePanel);
    panel.append(el("h2", "Message " + id), el("p", String(e.message || e), "failed"), close);
    return;
  }
  if (openID !== id) return;
  openRecipients = new Set((m.recipients || []).map(r => r.message_id).filter(Boolean));
  openRecipients.add(m.message_id);
  render(m);
  panel.dataset.id = id;
  markRow(id);
}
// The open message's row in the list is marked (for the eye and for screen readers).
function markRow(id) {
  for (const tr of document.querySelectorAll("#messages tr[aria-current]")) tr.removeAttribute("aria-current");
  if (!id) return;
  for (const tr of document.querySelectorAll("#messages tr.message")) if (tr.dataset.id === id) tr.setAttribute("aria-current", "true");
}
function syncWithURL() {
  const id = hashID();
  if (id) { if (id !== openID) show(id).then(() => panel.focus()); }
  else hide();
}
function hide() {
  openID = null;
  panel.hidden = true;
  panel.textContent = "";
  delete panel.dataset.id;
  markRow(null);
  document.body.classList.remove("detail-open");
  if (returnFocus && document.contains(returnFocus)) returnFocus.focus();
  returnFocus = null;
}
function closePanel() {
  // Opened from the list: going back closes it and leaves history as it was.
  if (history.state && history.state.detail) history.back();
  else { history.replaceState(null, "", location.pathname + location.search); hide(); }
}
fcm.openMessage = function (id, from) {
  returnFocus = from || document.activeElement;
  if (hashID() === id) return;
  history.pushState({ detail: id }, "", location.pathname + location.search + "#message=" + encodeURIComponent(id));
  syncWithURL();
};
window.addEventListener("popstate", syncWithURL);
window.addEventListener("hashchange", syncWithURL);
document.addEventListener("keydown", e => { if (e.key === "Escape" && !panel.hidden) { e.preventDefault(); closePanel(); } });
// Follow the open message as its recipients change.
for (const kind of ["message.delivered", "message.expired", "message.collapsed", "message.dropped"]) {
  fcm.on(kind, d => {
    if (d && openID && openRecipients.has(d.message_id)) fcm.soon("detail", () => { if (openID) show(openID); });
  });
}
syncWithURL();
})();
