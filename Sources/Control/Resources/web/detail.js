(function () {
"use strict";
// The message detail panel: `#message=ID` opens it (a link, the back button closes it). It shows
// the request, the answer its sender got, the transport, the fault, and each recipient's
// timeline with a preview card (window.fcm.previews.card, when that part is on the page).
const fcm = window.fcm = window.fcm || {};
const el = fcm.el;
const api = fcm.api;
const panel = document.getElementById("detail");
const TRANSPORTS = { http: "legacy HTTP", http_v1: "HTTP v1", xmpp: "XMPP", apns: "APNs (Apple's provider API)", webpush: "Web Push (RFC 8030)" };
const PREVIEWS = 10;
// A topic send can reach many devices: the panel reads the first thousand and pages them.
const RECIPIENTS = 1000;
const RECIPIENT_PAGE = 50;
// Long lists in the request (a multicast's registration_ids) are folded after this many.
const FOLD = 10;
const TABS = ["Summary", "Request", "Answer", "Recipients", "Previews"];
let tab = "Summary";
let openMessageData = null;
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
function section(title, parent) {
  const s = el("section", null, "detail-part");
  s.append(el("h3", title));
  (parent || panel.querySelector(".detail-body") || panel).append(s);
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
  const tokens = (m.recipients || []).map(r => r.token).filter(Boolean);
  if (t.kind === "multicast" || (t.kind !== "topic" && t.kind !== "condition" && t.kind !== "group" && tokens.length > 1)) {
    // A multicast as sent: its registration_ids (folded after FOLD, with the count).
    out.registration_ids = tokens.slice(0, FOLD);
  } else if (t.kind === "topic" || t.kind === "condition") out[t.kind] = t.value; else if (t.kind) out[t.kind] = t.value;
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
    return li;
  };
  step("accepted", m.accepted_at, "accepted");
  if (r.error) { step("failed: " + r.error + (r.fault ? " (fault " + r.fault + ")" : ""), m.accepted_at, "failed"); return ol; }
  // A real client's delivery: written on its connection, then its ack or its rejection (clients.js).
  const client = fcm.clients && fcm.clients.steps(r);
  if (client) {
    for (const s of client) {
      const li = step(s.what, s.at, s.cls);
      if (!s.at) li.lastChild.remove();
      if (s.title) li.title = s.title;
    }
    return ol;
  }
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
  openMessageData = m;
  panel.textContent = "";
  const top = el("div", null, "detail-top");
  const head = el("div", null, "detail-head");
  const title = el("h2", "Message " + m.message_id);
  title.id = "detail-title";
  const close = el("button", "close", "close");
  close.type = "button";
  close.setAttribute("aria-label", "close the message detail (Escape)");
  close.addEventListener("click", closePanel);
  head.append(title, close);
  const tabs = el("div", null, "detail-tabs");
  tabs.setAttribute("role", "tablist");
  const total = typeof m.recipients_total === "number" ? m.recipients_total : (m.recipients || []).length;
  for (const name of TABS) {
    const b = el("button", name === "Recipients" ? "Recipients (" + total + ")" : name);
    b.type = "button";
    b.setAttribute("role", "tab");
    b.dataset.tab = name;
    b.setAttribute("aria-selected", String(name === tab));
    b.addEventListener("click", () => { tab = name; drawTab(); });
    tabs.append(b);
  }
  tabs.addEventListener("keydown", e => {
    if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
    const i = TABS.indexOf(tab) + (e.key === "ArrowRight" ? 1 : TABS.length - 1);
    tab = TABS[i % TABS.length];
    drawTab();
    tabs.querySelector("[data-tab=" + tab + "]").focus();
  });
  top.append(head, tabs);
  const body = el("div", null, "detail-body");
  // Every tab's panel is made at once (the previews start loading); one is shown.
  for (const name of TABS) {
    const p = el("div", null, "tab-panel");
    p.dataset.tab = name;
    p.setAttribute("role", "tabpanel");
    p.setAttribute("aria-label", name);
    p.tabIndex = 0;
    body.append(p);
  }
  panel.append(top, body);
  summaryTab(m, tabPanel("Summary"));
  requestTab(m, tabPanel("Request"));
  answerTab(m, tabPanel("Answer"));
  recipientsTab(m, tabPanel("Recipients"), "all", 0);
  previewsTab(m, tabPanel("Previews"));
  drawTab();
}
function tabPanel(name) { return panel.querySelector('.tab-panel[data-tab="' + name + '"]'); }
// Shows the chosen tab's panel.
function drawTab() {
  const body = panel.querySelector(".detail-body");
  if (!body) return;
  for (const b of panel.querySelectorAll(".detail-tabs button")) {
    b.setAttribute("aria-selected", String(b.dataset.tab === tab));
    b.tabIndex = b.dataset.tab === tab ? 0 : -1;
  }
  for (const p of body.querySelectorAll(".tab-panel")) p.hidden = p.dataset.tab !== tab;
  body.dataset.tab = tab;
  body.scrollTop = 0;
}
function summaryTab(m, body) {
  const s = section("Summary", body);
  const dl = facts(s, [
    ["transport", (TRANSPORTS[m.transport] || m.transport) + (m.format === "plain" ? " (plain text body)" : "")],
    ["status", m.status], ["error", m.error], ["error detail", m.error_detail],
    ["fault that fired", m.fault || "none"], ["sender id", m.sender_id], ["target", fcm.targetText ? fcm.targetText(m) : ""],
    ["accepted at", m.accepted_at], ["v1 name", m.v1_name], ["xmpp message_id", m.xmpp_message_id],
    ["multicast id", m.multicast_id], ["http status", m.http_status]].concat(fcm.pushes.summary(m), [
    ["recipients", Object.entries(m.recipient_counts || {}).map(([k, n]) => n + " " + k).join(" · ")]]));
  fcm.pushes.summaryToken(m, dl);
}
function requestTab(m, req) {
  if (fcm.pushes.request(m, req, pretty)) return;
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
    const sent = asSent(m);
    req.append(el("pre", JSON.stringify(sent, null, 2), "body"));
    const total = typeof m.recipients_total === "number" ? m.recipients_total : (m.recipients || []).length;
    if (sent.registration_ids && total > sent.registration_ids.length) {
      req.append(el("p", "registration_ids folded: the first " + sent.registration_ids.length + " of " + total +
                    " shown; every one is on the Recipients tab", "fold"));
    }
  }
}
function answerTab(m, ans) {
  if (fcm.pushes.answer(m, ans, pretty)) return;
  if (m.answer) {
    facts(ans, [["status", m.answer.status === null ? "no HTTP status (an XMPP ack or nack)" : m.answer.status],
                ["content type", m.answer.content_type]]);
    ans.append(el("pre", pretty(m.answer.body) + (m.answer.body_truncated ? "\n… (cut at 4 KiB)" : ""), "body answer"));
  } else {
    ans.append(el("p", m.error === "ConnectionClosed" ? "none: the connection was closed without an answer" : "not recorded", "muted"));
  }
}
function shownStatus(r) { return r.error ? "failed" : r.status; }
function recipientsTab(m, rec, which, page) {
  rec.textContent = "";
  const rs = m.recipients || [];
  const total = typeof m.recipients_total === "number" ? m.recipients_total : rs.length;
  if (rs.length === 0) { rec.append(el("p", "none reached", "muted")); return; }
  const counts = m.recipient_counts || {};
  const bar = el("div", null, "rc-filter");
  bar.setAttribute("aria-label", "recipients by status");
  for (const [key, n] of [["all", total]].concat(Object.entries(counts))) {
    const b = el("button", key + " " + n);
    b.type = "button";
    b.dataset.status = key;
    b.setAttribute("aria-pressed", String(key === which));
    b.addEventListener("click", () => recipientsTab(m, rec, key, 0));
    bar.append(b);
  }
  rec.append(bar);
  const chosen = rs.filter(r => which === "all" || shownStatus(r) === which);
  const from = page * RECIPIENT_PAGE;
  const slice = chosen.slice(from, from + RECIPIENT_PAGE);
  const pager = el("div", null, "pager rc-pager");
  pager.append(el("span", chosen.length ? (from + 1) + "–" + (from + slice.length) + " of " + chosen.length +
                  (rs.length < total ? " (of the first " + rs.length + ")" : "") : "none"));
  const prev = el("button", "‹"); prev.type = "button"; prev.disabled = page === 0; prev.setAttribute("aria-label", "previous recipients");
  const next = el("button", "›"); next.type = "button"; next.disabled = from + RECIPIENT_PAGE >= chosen.length; next.setAttribute("aria-label", "next recipients");
  prev.addEventListener("click", () => recipientsTab(m, rec, which, page - 1));
  next.addEventListener("click", () => recipientsTab(m, rec, which, page + 1));
  pager.append(prev, next);
  rec.append(pager);
  for (const r of slice) {
    const box = el("div", null, "recipient");
    box.dataset.status = shownStatus(r);
    box.append(el("div", r.token || "?", "mono token"));
    if (r.canonical_token) box.append(el("div", "canonical: " + r.canonical_token, "mono"));
    box.append(timeline(m, r));
    rec.append(box);
  }
}
function previewsTab(m, body) {
  const rs = (m.recipients || []).filter(r => r.token && r.message_id).slice(0, PREVIEWS);
  if (rs.length === 0) { body.append(el("p", "No device got this message: nothing to preview.", "muted")); return; }
  body.append(el("p", "What the first " + rs.length + " recipients' devices show:", "muted"));
  for (const r of rs) {
    const box = el("div", null, "preview-box");
    box.append(el("div", r.token, "mono token"));
    body.append(box);
    preview(box, r);
  }
}
async function show(id) {
  openID = id;
  panel.hidden = false;
  document.body.classList.add("detail-open");
  let m;
  try {
    const text = await api("/messages/" + encodeURIComponent(id) + "?recipient_counts=true&recipients=" + RECIPIENTS, { text: true });
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
  // A live redraw of the open message keeps its tab and where it was scrolled.
  const body = panel.querySelector(".detail-body");
  const keep = panel.dataset.id === id && body ? body.scrollTop : 0;
  if (panel.dataset.id !== id) tab = "Summary";
  render(m);
  const again = panel.querySelector(".detail-body");
  if (again) again.scrollTop = keep;
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
  const url = location.pathname + location.search + "#message=" + encodeURIComponent(id);
  // Moving from one open message to the next (j / k) keeps one history entry: back (or Escape)
  // closes the panel, not steps through every message seen.
  if (hashID() && history.state && history.state.detail) history.replaceState({ detail: id }, "", url);
  else history.pushState({ detail: id }, "", url);
  syncWithURL();
};
window.addEventListener("popstate", syncWithURL);
window.addEventListener("hashchange", syncWithURL);
document.addEventListener("keydown", e => { if (e.key === "Escape" && !panel.hidden) { e.preventDefault(); closePanel(); } });
// Follow the open message as its recipients change (a client's connection that closes holds
// again what it had not acknowledged, with no event of its own: read the open message again).
for (const kind of ["message.delivered", "message.expired", "message.collapsed", "message.dropped", "message.sent", "message.client_rejected",
                    "message.replaced", "message.deleted", "message.undeliverable"]) {
  fcm.on(kind, d => {
    if (d && openID && openRecipients.has(d.message_id)) fcm.soon("detail", () => { if (openID) show(openID); });
  });
}
fcm.on("client.closed", () => { if (openID) fcm.soon("detail", () => { if (openID) show(openID); }); });
syncWithURL();
})();
