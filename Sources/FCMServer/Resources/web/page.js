(function () {
"use strict";
const fcm = window.fcm = window.fcm || {};
const handlers = new Map();
const secret = new URLSearchParams(location.search).get("token");
const auth = secret ? { "Authorization": "Bearer " + secret } : {};
const PAGE = 50;
let filter = "";
let cursor = null;
const shown = new Map();

async function api(path, options) {
  const o = options || {};
  const headers = Object.assign({}, auth, o.body ? { "Content-Type": "application/json" } : {});
  const r = await fetch("/api/v1" + path, { method: o.method || "GET", headers, body: o.body });
  if (!r.ok) throw new Error((o.method || "GET") + " " + path + ": HTTP " + r.status);
  return r.status === 204 ? null : r.json();
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
fcm.api = api;
fcm.el = el;
// Other parts of the page follow the one event stream: fcm.on("message.accepted", data => …).
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
function showError(e) { document.getElementById("error").textContent = e ? String(e.message || e) : ""; }
function targetText(m) {
  const t = m.target || {};
  return t.kind === "token" ? t.value : (t.kind || "") + " " + (t.value === undefined ? "" : t.value);
}
function messageRow(m) {
  const tr = document.createElement("tr");
  tr.dataset.id = m.message_id;
  const id = el("td", m.message_id, "mono");
  if (m.v1_name) id.append(el("div", m.v1_name, "v1name"));
  tr.append(el("td", m.accepted_at), id, el("td", targetText(m), "mono"),
            el("td", m.transport + (m.format === "plain" ? " (plain)" : "")));
  const st = el("td");
  const recipients = m.recipients || [];
  if (m.status === "rejected" || recipients.length === 0) st.append(el("div", m.status + (m.error ? ": " + m.error : ""), m.status));
  for (const r of recipients.slice(0, 20)) {
    st.append(el("div", (r.token || "?").slice(0, 24) + " " + r.status + (r.error ? " " + r.error : ""), r.error ? "failed" : r.status));
  }
  const total = typeof m.recipients_total === "number" ? m.recipients_total : recipients.length;
  if (total > 20) st.append(el("div", "… " + (total - 20) + " more"));
  const payload = el("td");
  const shownPayload = { data: m.data, notification: m.notification };
  // An HTTP v1 message's platform blocks, as sent.
  for (const k of ["android", "apns", "webpush", "fcm_options"]) if (m[k]) shownPayload[k] = m[k];
  payload.append(el("pre", JSON.stringify(shownPayload)));
  tr.append(st, payload);
  return tr;
}
function messageQuery() {
  const f = filter.trim();
  const p = new URLSearchParams({ limit: String(PAGE), recipients: "20" });
  if (!f) return { path: "/messages?" + p };
  if (/^(accepted|rejected|delivered|pending|expired|collapsed|dropped)$/.test(f)) p.set("status", f);
  else if (/^(http|http_v1|xmpp)$/.test(f)) p.set("transport", f);
  else if (/^projects\/[^/]+\/messages\//.test(f)) p.set("v1_name", f);
  else if (f.startsWith("/topics/")) p.set("topic", f.slice(8));
  else if (/^0:\d+%/.test(f) || /^\d{6,}$/.test(f)) return { one: "/messages/" + encodeURIComponent(f) };
  else p.set("token", f);
  return { path: "/messages?" + p };
}
function matches(m) {
  const f = filter.trim();
  if (!f) return true;
  if (m.message_id === f || m.status === f || m.transport === f || m.v1_name === f) return true;
  if (f.startsWith("/topics/")) return m.target && m.target.kind === "topic" && ("/topics/" + m.target.value) === f;
  return (m.recipients || []).some(r => r.token === f || r.status === f);
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
  if (!more) { tbody.textContent = ""; shown.clear(); }
  for (const m of items) {
    const tr = messageRow(m);
    shown.set(m.message_id, tr);
    tbody.append(tr);
  }
  cursor = next;
  document.getElementById("older").hidden = !next;
  document.getElementById("count").textContent = "(" + shown.size + (next ? "+" : "") + ")";
}
function liveMessage(m) {
  if (!m || !m.message_id || !matches(m)) return;
  const tbody = document.querySelector("#messages tbody");
  const tr = messageRow(m);
  const old = shown.get(m.message_id);
  if (old) old.replaceWith(tr); else tbody.prepend(tr);
  shown.set(m.message_id, tr);
  document.getElementById("count").textContent = "(" + shown.size + (cursor ? "+" : "") + ")";
}
async function refreshMessage(id) {
  if (!shown.has(id)) return;
  try { liveMessage(await api("/messages/" + encodeURIComponent(id))); } catch (e) { /* gone after a reset */ }
}
async function loadDevices() {
  const tbody = document.querySelector("#devices tbody");
  let page;
  try { page = await api("/devices?limit=200"); } catch (e) { showError(e); return; }
  tbody.textContent = "";
  for (const d of page.items || []) {
    const tr = document.createElement("tr");
    tr.dataset.token = d.token;
    const tok = el("td", d.token.length > 28 ? d.token.slice(0, 28) + "…" : d.token, "mono");
    tok.title = d.token;
    const state = d.state === "registered" ? (d.online ? "online" : "offline") : d.state;
    const inbox = el("button", "inbox");
    inbox.addEventListener("click", () => setFilter(d.token));
    const toggle = el("button", d.online ? "take offline" : "bring online");
    toggle.className = "toggle";
    toggle.addEventListener("click", async () => {
      try { await api("/devices/" + encodeURIComponent(d.token), { method: "PATCH", body: JSON.stringify({ online: !d.online }) }); }
      catch (e) { showError(e); }
      loadDevices();
    });
    const up = el("button", "upstream…");
    up.addEventListener("click", async () => {
      const text = prompt("Upstream data as key=value pairs separated by commas", "hello=world");
      if (text === null) return;
      const data = {};
      for (const pair of text.split(",")) {
        const i = pair.indexOf("=");
        if (i > 0) data[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
      }
      try { await api("/devices/" + encodeURIComponent(d.token) + "/upstream", { method: "POST", body: JSON.stringify({ data }) }); showError(null); }
      catch (e) { showError(e); }
    });
    const actions = el("td");
    actions.append(toggle, " ", up);
    const inboxCell = el("td");
    inboxCell.append(inbox, el("span", d.pending ? " " + d.pending + " pending" : ""));
    tr.append(tok, el("td", d.app), el("td", state, d.online ? "delivered" : "pending"),
              el("td", (d.topics || []).join(", ")), inboxCell, actions);
    tbody.append(tr);
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
function setFilter(v) {
  document.getElementById("filter").value = v;
  filter = v;
  loadMessages(false);
}
function connect() {
  const es = new EventSource("/api/v1/events" + (secret ? "?access_token=" + encodeURIComponent(secret) : ""));
  fcm.stream = es;
  for (const name of handlers.keys()) listen(es, name);
  const live = document.getElementById("live");
  es.onopen = () => { live.textContent = "live"; };
  es.onerror = () => { live.textContent = "reconnecting…"; };
  const parse = e => { try { return JSON.parse(e.data); } catch (x) { return null; } };
  es.addEventListener("message.accepted", e => liveMessage(parse(e)));
  es.addEventListener("message.rejected", e => liveMessage(parse(e)));
  for (const kind of ["message.delivered", "message.expired", "message.collapsed", "message.dropped"]) {
    es.addEventListener(kind, e => { const d = parse(e); if (d && d.message_id) soon("m:" + d.message_id, () => refreshMessage(d.message_id)); soon("devices", loadDevices); });
  }
  es.addEventListener("device.created", () => soon("devices", loadDevices));
  es.addEventListener("device.updated", () => { soon("devices", loadDevices); soon("topics", loadTopics); soon("groups", loadGroups); });
  for (const kind of ["xmpp.connected", "xmpp.closed", "upstream.sent", "upstream.acked"]) {
    es.addEventListener(kind, () => soon("xmpp", loadXmpp));
  }
}
document.getElementById("filter").addEventListener("input", e => { filter = e.target.value; soon("filter", () => loadMessages(false)); });
document.getElementById("older").addEventListener("click", () => loadMessages(true));
loadMessages(false);
loadDevices();
loadTopics();
loadGroups();
loadXmpp();
connect();
})();
