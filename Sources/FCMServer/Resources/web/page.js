(function () {
"use strict";
// The page's core: the control API, the one event stream, the message list with its filters,
// devices, topics, groups and XMPP connections. Other scripts reach it through window.fcm.
const fcm = window.fcm = window.fcm || {};
const PAGE = 50;
// The filters the URL query carries (`token` is the control token, so a device is `device`).
const FILTERS = ["q", "project", "device", "topic", "status", "transport", "error", "since", "until"];
let filters = {};
let cursor = null;
const shown = new Map();
// A recipient's message id → its record's (delivery events name the recipient's).
const owner = new Map();

const api = fcm.api;
const el = fcm.el;
function showError(e) { document.getElementById("error").textContent = e ? String(e.message || e) : ""; }
fcm.showError = showError;
function targetText(m) {
  const t = m.target || {};
  return t.kind === "token" ? t.value : (t.kind || "") + " " + (t.value === undefined || t.value === null ? "" : t.value);
}
fcm.targetText = targetText;
function cell(label, text, cls) {
  const td = el("td", text, cls);
  td.dataset.label = label;
  return td;
}
function messageRow(m) {
  for (const r of m.recipients || []) if (r.message_id) owner.set(r.message_id, m.message_id);
  const tr = document.createElement("tr");
  tr.dataset.id = m.message_id;
  tr.tabIndex = 0;
  tr.className = "message";
  tr.setAttribute("aria-label", "message " + m.message_id + ", " + m.status);
  const id = cell("message id", m.message_id, "mono");
  if (m.v1_name) id.append(el("div", m.v1_name, "v1name"));
  tr.append(cell("accepted", m.accepted_at), id, cell("target", targetText(m), "mono"),
            cell("via", m.transport + (m.format === "plain" ? " (plain)" : "")));
  const st = cell("status");
  const recipients = m.recipients || [];
  if (m.status === "rejected" || recipients.length === 0) st.append(el("div", m.status + (m.error ? ": " + m.error : ""), m.status));
  for (const r of recipients.slice(0, 20)) {
    st.append(el("div", (r.token || "?").slice(0, 24) + " " + r.status + (r.error ? " " + r.error : ""), r.error ? "failed" : r.status));
  }
  const total = typeof m.recipients_total === "number" ? m.recipients_total : recipients.length;
  if (total > 20) st.append(el("div", "… " + (total - 20) + " more"));
  const payload = cell("payload");
  const shownPayload = { data: m.data, notification: m.notification };
  // An HTTP v1 message's platform blocks, as sent.
  for (const k of ["android", "apns", "webpush", "fcm_options"]) if (m[k]) shownPayload[k] = m[k];
  payload.append(el("pre", JSON.stringify(shownPayload)));
  tr.append(st, payload);
  return tr;
}
// The free-text box: a status, transport, v1 name, topic, message id or else a token.
function freeText(f, p) {
  if (!f) return null;
  if (/^(accepted|rejected|failed|delivered|pending|expired|collapsed|dropped)$/.test(f)) p.set("status", f);
  else if (/^(http|http_v1|xmpp)$/.test(f)) p.set("transport", f);
  else if (/^projects\/[^/]+\/messages\//.test(f)) p.set("v1_name", f);
  else if (f.startsWith("/topics/")) p.set("topic", f.slice(8));
  else if (/^0:\d+%/.test(f) || /^\d{6,}$/.test(f)) return "/messages/" + encodeURIComponent(f);
  else p.set("token", f);
  return null;
}
function messageQuery() {
  const f = filters;
  const p = new URLSearchParams({ limit: String(PAGE), recipients: "20" });
  const one = freeText((f.q || "").trim(), p);
  if (one) return { one };
  if (f.project) p.set("sender_id", f.project);
  if (f.device) p.set("token", f.device);
  if (f.topic) p.set("topic", f.topic.replace(/^\/topics\//, ""));
  for (const k of ["status", "transport", "error", "since", "until"]) if (f[k]) p.set(k, f[k]);
  return { path: "/messages?" + p };
}
// Whether a live message belongs in the filtered list (the server decides on reload).
function matches(m) {
  const f = filters;
  const rs = m.recipients || [];
  const q = (f.q || "").trim();
  if (q && !(m.message_id === q || m.status === q || m.transport === q || m.v1_name === q ||
             (q.startsWith("/topics/") && m.target && m.target.kind === "topic" && ("/topics/" + m.target.value) === q) ||
             rs.some(r => r.token === q || r.status === q))) return false;
  if (f.project && m.sender_id !== f.project) return false;
  if (f.device && !rs.some(r => r.token === f.device)) return false;
  if (f.topic && !(m.target && m.target.kind === "topic" && String(m.target.value).toLowerCase() === "/topics/" + f.topic.replace(/^\/topics\//, "").toLowerCase())) return false;
  if (f.transport && m.transport !== f.transport) return false;
  if (f.status && !(m.status === f.status || rs.some(r => r.status === f.status || (f.status === "failed" && r.error)))) return false;
  if (f.error && !(m.error === f.error || rs.some(r => r.error === f.error))) return false;
  const at = Date.parse(m.accepted_at);
  if (f.since && at < Date.parse(f.since)) return false;
  if (f.until && at > Date.parse(f.until)) return false;
  return true;
}
async function loadMessages(more) {
  const tbody = document.querySelector("#messages tbody");
  const q = messageQuery();
  let items = [], next = null;
  try {
    if (q.one) {
      try { items = [await api(q.one)]; } catch (e) { items = []; }
    } else {
      const page = await api(q.path + (more && cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
      items = page.items || [];
      next = page.next || null;
    }
    showError(null);
  } catch (e) { showError(e); return; }
  if (!more) { tbody.textContent = ""; shown.clear(); owner.clear(); }
  for (const m of items) {
    const tr = messageRow(m);
    shown.set(m.message_id, tr);
    tbody.append(tr);
  }
  cursor = next;
  document.getElementById("older").hidden = !next;
  updateCount();
}
function updateCount() {
  document.getElementById("count").textContent = "(" + shown.size + (cursor ? "+" : "") + ")";
  document.getElementById("messages").dataset.loaded = "true";
}
function liveMessage(m) {
  if (!m || !m.message_id || !matches(m)) return;
  const tbody = document.querySelector("#messages tbody");
  const tr = messageRow(m);
  const old = shown.get(m.message_id);
  if (old) old.replaceWith(tr); else tbody.prepend(tr);
  shown.set(m.message_id, tr);
  updateCount();
}
async function refreshMessage(recipientID) {
  const id = owner.get(recipientID) || recipientID;
  if (!shown.has(id)) return;
  try { liveMessage(await api("/messages/" + encodeURIComponent(id))); } catch (e) { /* gone after a reset */ }
}
function openRow(tr) {
  if (tr && tr.dataset.id && fcm.openMessage) fcm.openMessage(tr.dataset.id, tr);
}
async function loadDevices() {
  const tbody = document.querySelector("#devices tbody");
  let page;
  try { page = await api("/devices?limit=200"); } catch (e) { showError(e); return; }
  // The table is drawn again on every device event: focus stays on the same row or button.
  const focus = document.activeElement;
  const focusRow = focus && focus.closest ? focus.closest("#devices tbody tr[data-token]") : null;
  const keep = focusRow && { token: focusRow.dataset.token, button: [...focusRow.querySelectorAll("button")].indexOf(focus) };
  tbody.textContent = "";
  for (const d of page.items || []) {
    const tr = document.createElement("tr");
    tr.dataset.token = d.token;
    // In the tab order: Enter or Space opens the device view (device.js), as a click does.
    tr.tabIndex = 0;
    tr.className = "device";
    const tok = cell("token", d.token.length > 28 ? d.token.slice(0, 28) + "…" : d.token, "mono");
    tok.title = d.token;
    const state = d.state === "registered" ? (d.online ? "online" : "offline") : d.state;
    const inbox = el("button", "inbox");
    inbox.type = "button";
    inbox.addEventListener("click", () => setFilters({ device: d.token }));
    const toggle = el("button", d.online ? "take offline" : "bring online", "toggle");
    toggle.type = "button";
    toggle.addEventListener("click", async () => {
      try { await api("/devices/" + encodeURIComponent(d.token), { method: "PATCH", body: JSON.stringify({ online: !d.online }) }); }
      catch (e) { showError(e); }
      loadDevices();
    });
    const up = el("button", "upstream…");
    up.type = "button";
    up.addEventListener("click", async () => {
      const data = fcm.askPairs();
      if (data === null) return;
      try { await api("/devices/" + encodeURIComponent(d.token) + "/upstream", { method: "POST", body: JSON.stringify({ data }) }); showError(null); }
      catch (e) { showError(e); }
    });
    const actions = cell("actions");
    actions.append(toggle, " ", up);
    const inboxCell = cell("inbox");
    inboxCell.append(inbox, el("span", d.pending ? " " + d.pending + " pending" : ""));
    tr.append(tok, cell("app", d.app), cell("state", state, d.online ? "delivered" : "pending"),
              cell("topics", (d.topics || []).join(", ")), inboxCell, actions);
    tbody.append(tr);
    if (keep && keep.token === d.token) (tr.querySelectorAll("button")[keep.button] || tr).focus();
  }
}
async function loadList(id, path, render) {
  const ul = document.getElementById(id);
  let page;
  try { page = await api(path); } catch (e) { return; }
  ul.textContent = "";
  const items = page.items || [];
  if (items.length === 0) ul.append(el("li", "none"));
  for (const x of items) ul.append(el("li", render(x)));
}
const loadTopics = () => loadList("topics", "/topics?limit=1000", t => "/topics/" + t.name + " (" + t.count + ")");
const loadGroups = () => loadList("groups", "/groups?limit=1000", g => g.notification_key_name + " (" + (g.members || []).length + " members, sender " + g.sender_id + ")");
const loadXmpp = () => loadList("xmpp", "/xmpp/connections?limit=1000", c => c.id + " sender " + c.sender_id + (c.tls ? " tls" : "") + ", unacked " + c.unacked + (c.draining ? ", draining" : ""));

const pending = new Map();
function soon(name, fn) {
  if (pending.has(name)) return;
  pending.set(name, setTimeout(() => { pending.delete(name); fn(); }, 150));
}
fcm.soon = soon;

// Filters live in the URL query, so a filtered list is a link and a reload keeps it.
function readFilters() {
  const p = new URLSearchParams(location.search);
  const f = {};
  for (const k of FILTERS) { const v = p.get(k); if (v) f[k] = v; }
  return f;
}
function writeURL() {
  const p = new URLSearchParams(location.search);
  for (const k of FILTERS) { if (filters[k]) p.set(k, filters[k]); else p.delete(k); }
  const s = p.toString();
  history.replaceState(history.state, "", location.pathname + (s ? "?" + s : "") + location.hash);
}
// A datetime-local value (local time) as RFC 3339 UTC, and back.
function toISO(local) { const t = new Date(local); return isNaN(t) ? "" : t.toISOString().replace(".000Z", "Z"); }
function toLocal(iso) {
  const t = new Date(iso);
  if (isNaN(t)) return "";
  const z = n => String(n).padStart(2, "0");
  return t.getFullYear() + "-" + z(t.getMonth() + 1) + "-" + z(t.getDate()) + "T" + z(t.getHours()) + ":" + z(t.getMinutes()) + ":" + z(t.getSeconds());
}
function showFilters() {
  document.getElementById("filter").value = filters.q || "";
  for (const input of document.querySelectorAll("#filters [name]")) {
    const v = filters[input.name] || "";
    input.value = input.type === "datetime-local" ? (v ? toLocal(v) : "") : v;
  }
  const n = FILTERS.filter(k => k !== "q" && filters[k]).length;
  document.getElementById("filters-toggle").textContent = "filters" + (n ? " (" + n + ")" : "");
}
function setFilters(f) {
  filters = Object.assign({}, f);
  for (const k of Object.keys(filters)) if (!filters[k]) delete filters[k];
  writeURL();
  showFilters();
  loadMessages(false);
}
fcm.setFilters = setFilters;
fcm.filters = () => Object.assign({}, filters);
function connect() {
  const es = fcm.openStream();
  const live = document.getElementById("live");
  es.onopen = () => { live.textContent = "live"; };
  es.onerror = () => { live.textContent = "reconnecting…"; };
  const parse = e => { try { return JSON.parse(e.data); } catch (x) { return null; } };
  es.addEventListener("message.accepted", e => liveMessage(parse(e)));
  es.addEventListener("message.rejected", e => liveMessage(parse(e)));
  for (const kind of ["message.delivered", "message.expired", "message.collapsed", "message.dropped"]) {
    es.addEventListener(kind, e => { const d = parse(e); if (d && d.message_id) soon("m:" + (owner.get(d.message_id) || d.message_id), () => refreshMessage(d.message_id)); soon("devices", loadDevices); });
  }
  es.addEventListener("device.created", () => soon("devices", loadDevices));
  es.addEventListener("device.updated", () => { soon("devices", loadDevices); soon("topics", loadTopics); soon("groups", loadGroups); });
  for (const kind of ["xmpp.connected", "xmpp.closed", "upstream.sent", "upstream.acked"]) {
    es.addEventListener(kind, () => soon("xmpp", loadXmpp));
  }
}
document.getElementById("filter").addEventListener("input", e => {
  filters.q = e.target.value;
  if (!filters.q) delete filters.q;
  writeURL();
  soon("filter", () => loadMessages(false));
});
document.getElementById("filters").addEventListener("input", e => {
  const input = e.target;
  if (!input.name) return;
  const v = input.type === "datetime-local" ? (input.value ? toISO(input.value) : "") : input.value.trim();
  if (v) filters[input.name] = v; else delete filters[input.name];
  writeURL();
  showFilters();
  soon("filter", () => loadMessages(false));
});
document.getElementById("filters-clear").addEventListener("click", () => setFilters({}));
document.getElementById("filters-toggle").addEventListener("click", e => {
  const box = document.getElementById("filters");
  box.hidden = !box.hidden;
  e.target.setAttribute("aria-expanded", String(!box.hidden));
});
document.getElementById("older").addEventListener("click", () => loadMessages(true));
const tbody = document.querySelector("#messages tbody");
tbody.addEventListener("click", e => openRow(e.target.closest("tr.message")));
tbody.addEventListener("keydown", e => {
  const tr = e.target.closest("tr.message");
  if (!tr) return;
  if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openRow(tr); }
  else if (e.key === "ArrowDown" && tr.nextElementSibling) { e.preventDefault(); tr.nextElementSibling.focus(); }
  else if (e.key === "ArrowUp" && tr.previousElementSibling) { e.preventDefault(); tr.previousElementSibling.focus(); }
});
filters = readFilters();
if (FILTERS.some(k => k !== "q" && filters[k])) document.getElementById("filters").hidden = false;
showFilters();
loadMessages(false);
loadDevices();
loadTopics();
loadGroups();
loadXmpp();
connect();
})();
