(function () {
"use strict";
// The page's core: the control API, the one event stream, the message list with its filters,
// devices, topics, groups and XMPP connections. Other scripts reach it through window.fcm.
const fcm = window.fcm = window.fcm || {};
const PAGE = 50;
// The filters the URL query carries (`token` is the control token, so a device is `device`).
const FILTERS = fcm.search.NAMES;
let filters = {};
// The cursors of the pages shown so far: the one that loaded page N is cursors[N] (null for the first).
let cursors = [null];
let pageIndex = 0;
let nextCursor = null;
let total = null, capped = false;
const shown = new Map();
// A recipient's message id → its record's (delivery events name the recipient's).
const owner = new Map();

const api = fcm.api;
const el = fcm.el;
function showError(e) { document.getElementById("error").textContent = e ? String(e.message || e) : ""; }
fcm.showError = showError;
// The body as sent, parsed (a refused send keeps it): where its target is when no recipient has one.
function sentBody(m) {
  if (typeof m.raw_body !== "string" || m.format === "plain") return null;
  try { const b = JSON.parse(m.raw_body); return b && typeof b === "object" ? b : null; } catch (e) { return null; }
}
function targetText(m) {
  const t = m.target || {};
  if (t.kind === "token" && t.value) return t.value;
  if (t.kind === "topic" || t.kind === "condition") return String(t.value === undefined || t.value === null ? "" : t.value);
  if (t.kind && t.kind !== "token" && t.value !== undefined && t.value !== null) return t.kind + " " + t.value;
  const b = sentBody(m);
  if (b) {
    const v1 = b.message && typeof b.message === "object" ? b.message : null;
    const to = v1 ? (v1.token || (v1.topic ? "/topics/" + v1.topic : v1.condition)) : (b.to || b.condition);
    if (typeof to === "string" && to) return to;
    if (Array.isArray(b.registration_ids)) return b.registration_ids.length + " tokens";
  }
  return (m.recipients && m.recipients[0] && m.recipients[0].token) || "(no target)";
}
fcm.targetText = targetText;
// A long value shortened in the middle (the whole of it on hover).
function short(text, n) {
  const s = String(text);
  return s.length <= n ? s : s.slice(0, Math.ceil(n * 0.6)) + "…" + s.slice(-Math.floor(n * 0.4));
}
fcm.short = short;
// "3 s ago", "5 min ago", "2 h ago", else the date.
function ago(iso) {
  const t = Date.parse(iso);
  if (isNaN(t)) return String(iso || "");
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return new Date(t).toISOString().slice(0, 10);
}
fcm.ago = ago;
function timeEl(iso) {
  const t = el("time", ago(iso), "ago");
  t.dateTime = iso || "";
  t.title = iso || "";
  return t;
}
const TRANSPORT = { http: "legacy", http_v1: "v1", xmpp: "xmpp", apns: "APNs", webpush: "Web Push" };
// What the message says: `title — body`, or its data keys for a data message.
function gist(m) {
  const pushed = fcm.pushes.gist(m);
  if (pushed) return pushed;
  const n = m.notification && typeof m.notification === "object" ? m.notification : {};
  const a = m.android && m.android.notification || {};
  const title = n.title || a.title || "", body = n.body || a.body || "";
  if (title || body) return { text: title && body ? title + " — " + body : title || body, cls: "" };
  const keys = m.data && typeof m.data === "object" ? Object.keys(m.data) : [];
  if (keys.length) return { text: "data: " + keys.join(", "), cls: "muted" };
  if (m.status === "rejected") return { text: m.error_detail || "", cls: "muted" };
  return { text: "(empty)", cls: "muted" };
}
// The recipients summed up: "118 delivered · 12 pending · 2 failed".
const ORDER = ["delivered", "sent", "pending", "failed", "client_rejected", "undecryptable", "undeliverable", "expired", "collapsed", "replaced", "dropped", "deleted"];
function recipientSummary(m) {
  let counts = m.recipient_counts;
  if (!counts) {
    counts = {};
    for (const r of m.recipients || []) { const k = r.error ? "failed" : r.status; counts[k] = (counts[k] || 0) + 1; }
  }
  const keys = Object.keys(counts).sort((a, b) => (ORDER.indexOf(a) + 99) % 99 - (ORDER.indexOf(b) + 99) % 99);
  return keys.map(k => ({ status: k, n: counts[k] }));
}
function mark(m, parts) {
  if (m.status === "rejected") return ["✕", "bad", "rejected"];
  if (parts.some(p => p.status === "failed")) return ["!", "bad", "some recipients failed"];
  if (parts.some(p => p.status === "undecryptable")) return ["!", "bad", "would not decrypt"];
  if (parts.some(p => p.status === "undeliverable")) return ["!", "bad", "undeliverable"];
  if (parts.some(p => p.status === "client_rejected")) return ["!", "bad", "a client rejected it"];
  if (parts.some(p => p.status === "pending")) return ["◷", "warn", "pending"];
  if (parts.some(p => p.status === "sent")) return ["◷", "warn", "sent, not acknowledged yet"];
  if (parts.some(p => p.status === "expired" || p.status === "dropped")) return ["!", "bad", "not delivered"];
  return ["✓", "good", "accepted"];
}
function cell(label, text, cls) {
  const td = el("td", text, cls);
  td.dataset.label = label;
  return td;
}
function messageRow(m) {
  for (const r of m.recipients || []) if (r.message_id) owner.set(r.message_id, m.message_id);
  const tr = document.createElement("tr");
  tr.dataset.id = m.message_id;
  // Written to a real client and not acknowledged: a connection that closes holds it again.
  if (recipientSummary(m).some(p => p.status === "sent")) tr.dataset.sent = "true";
  tr.tabIndex = 0;
  tr.className = "message";
  const parts = recipientSummary(m);
  const [glyph, tone, said] = mark(m, parts);
  tr.setAttribute("aria-label", "message " + m.message_id + ", " + said);
  const st = cell("status", null, "mark");
  const g = el("span", glyph, "glyph " + tone);
  g.title = said;
  st.append(g);
  const when = cell("when", null, "when");
  when.append(timeEl(m.accepted_at));
  const to = cell("target", null, "target mono");
  if (!fcm.pushes.target(m, to, 40)) {
    const target = targetText(m);
    to.textContent = short(target, 40);
    to.title = target;
  }
  const what = gist(m);
  const gcell = cell("message", what.text, "what " + what.cls);
  gcell.title = what.text;
  const rc = cell("recipients", null, "recip");
  if (m.status === "rejected") {
    // Refused: the error's name says it all (with the count when several recipients failed).
    const failed = parts.reduce((n, p) => n + (p.status === "failed" ? p.n : 0), 0);
    rc.append(el("span", (m.error || "rejected") + (failed > 1 ? " · " + failed + " failed" : ""), "rejected"));
  } else if (parts.length === 0) rc.append(el("span", "no recipient", "muted"));
  if (m.status !== "rejected") parts.forEach((p, i) => {
    if (i) rc.append(" · ");
    rc.append(el("span", p.n + " " + p.status, p.status));
  });
  rc.title = rc.textContent;
  tr.append(st, when, cell("via", TRANSPORT[m.transport] || m.transport, "via"), to, gcell, rc);
  return tr;
}
// A message id typed in the box: that one record.
function oneID(f) {
  const q = (f.q || "").trim();
  return /^0:\d+%/.test(q) || /^\d{6,}$/.test(q) ? "/messages/" + encodeURIComponent(q) + "?recipient_counts=true" : null;
}
function messageQuery() {
  const one = oneID(filters);
  if (one) return { one };
  const p = new URLSearchParams({ limit: String(PAGE), recipients: "1", recipient_counts: "true", total: "true" });
  fcm.search.params(filters, p);
  return { path: "/messages?" + p };
}
// Whether a live message belongs in the filtered list: only when nothing filters it (the server
// decides otherwise: the list reloads soon).
function unfiltered() { return !FILTERS.some(k => filters[k]); }
let loading = 0;
let loadingTimer = null;
async function loadMessages(page) {
  const tbody = document.querySelector("#messages tbody");
  const q = messageQuery();
  const ticket = ++loading;
  const index = page === undefined ? 0 : page;
  if (index === 0) cursors = [null];
  // This load answers for the filters as they are now: a load still waiting to start is moot.
  cancelSoon("filter");
  setState("loading");
  let items = [], next = null, n = null, cap = false;
  try {
    if (q.one) {
      try { items = [await api(q.one)]; } catch (e) { if (!e.offline) items = []; else throw e; }
      n = items.length;
    } else {
      const c = cursors[index];
      const answer = await api(q.path + (c ? "&cursor=" + encodeURIComponent(c) : ""));
      items = answer.items || [];
      next = answer.next || null;
      n = typeof answer.total === "number" ? answer.total : null;
      cap = !!answer.total_capped;
    }
    showError(null);
  } catch (e) { if (ticket === loading) { setState(null); showError(e); } return; }
  if (ticket !== loading) return;
  tbody.textContent = ""; shown.clear(); owner.clear();
  for (const m of items) {
    const tr = messageRow(m);
    shown.set(m.message_id, tr);
    tbody.append(tr);
  }
  pageIndex = index;
  nextCursor = next;
  if (next) cursors[index + 1] = next;
  total = n; capped = cap;
  updateCount();
}
function setState(kind) {
  const box = document.getElementById("messages-state");
  const section = document.getElementById("messages-section");
  section.setAttribute("aria-busy", String(kind === "loading"));
  clearTimeout(loadingTimer);
  if (kind === "loading") {
    // Said only when the answer takes a while: a quick one does not flash the words.
    const ticket = loading;
    loadingTimer = setTimeout(() => { if (ticket === loading && !shown.size) { box.textContent = "Loading messages…"; box.className = "list-state loading"; } }, 250);
    return;
  }
  box.textContent = "";
  box.className = "list-state";
  if (kind === "fresh") {
    box.className = "list-state empty";
    box.append(el("p", "No messages yet — send one."));
    const b = el("button", "compose a message", "state-compose");
    b.type = "button";
    b.addEventListener("click", () => { const t = document.getElementById("compose-toggle"); if (t) { if (t.getAttribute("aria-expanded") !== "true") t.click(); document.getElementById("compose").scrollIntoView({ block: "nearest" }); } });
    box.append(b, el("p", "or send to /fcm/send, /v1/projects/…/messages:send or over XMPP: it shows here at once.", "muted"));
  } else if (kind === "nomatch") {
    box.className = "list-state empty";
    const p = el("p", "No messages match ");
    p.append(el("code", fcm.search.describe(filters) || filters.q || ""));
    const b = el("button", "clear the search", "state-clear");
    b.type = "button";
    b.addEventListener("click", () => setFilters({}));
    box.append(p, b);
  }
}
function updateCount() {
  const n = shown.size;
  const first = pageIndex * PAGE;
  const known = total !== null ? total : first + n + (nextCursor ? 1 : 0);
  const of = total === null ? "" : " of " + known.toLocaleString("en") + (capped ? "+" : "");
  document.getElementById("range").textContent = n ? (first + 1).toLocaleString("en") + "–" + (first + n).toLocaleString("en") + of : "0" + of;
  document.getElementById("count").textContent = total === null ? "" : "(" + known.toLocaleString("en") + (capped ? "+" : "") + ")";
  document.getElementById("older").disabled = !nextCursor;
  document.getElementById("newer").disabled = pageIndex === 0;
  document.getElementById("messages").dataset.loaded = "true";
  setState(n ? null : (unfiltered() ? "fresh" : "nomatch"));
}
function liveMessage(m) {
  if (!m || !m.message_id) return;
  const old = shown.get(m.message_id);
  if (!old && (!unfiltered() || pageIndex !== 0)) {
    // Filtered, or on an older page: the server decides where it goes.
    if (pageIndex === 0) soon("filter", () => loadMessages(0));
    return;
  }
  const tbody = document.querySelector("#messages tbody");
  const tr = messageRow(m);
  if (old) old.replaceWith(tr); else { tbody.prepend(tr); if (total !== null) total++; }
  if (document.activeElement === old) tr.focus();
  if (old && old.getAttribute("aria-current")) tr.setAttribute("aria-current", "true");
  shown.set(m.message_id, tr);
  // The page holds fifty: the oldest goes to the next page.
  while (shown.size > PAGE) {
    const last = tbody.lastElementChild;
    shown.delete(last.dataset.id);
    last.remove();
    nextCursor = nextCursor || "more";
  }
  if (nextCursor === "more") soon("cursor", () => loadMessages(0));
  updateCount();
}
async function refreshMessage(recipientID) {
  const id = owner.get(recipientID) || recipientID;
  if (!shown.has(id)) return;
  try { liveMessage(await api("/messages/" + encodeURIComponent(id) + "?recipients=1&recipient_counts=true")); } catch (e) { /* gone after a reset */ }
}
function openRow(tr) {
  if (tr && tr.dataset.id && fcm.openMessage) fcm.openMessage(tr.dataset.id, tr);
}
// Devices, fifty a page, searched on the server (`q`: token, fid, app or sender id), counted.
const DEVICE_PAGE = 50;
let deviceCursors = [null], devicePage = 0, deviceNext = null;
async function loadDevices(page) {
  const tbody = document.querySelector("#devices tbody");
  const index = page === undefined ? devicePage : page;
  const p = new URLSearchParams({ limit: String(DEVICE_PAGE), total: "true" });
  const q = document.getElementById("device-search").value.trim();
  if (q) p.set("q", q);
  // The search's `client:` chip: real clients' devices (`any`: every real client's).
  if (filters.client) p.set("client_kind", filters.client);
  if (deviceCursors[index]) p.set("cursor", deviceCursors[index]);
  let answer;
  try { answer = await api("/devices?" + p); } catch (e) { showError(e); return; }
  devicePage = index;
  deviceNext = answer.next || null;
  if (deviceNext) deviceCursors[index + 1] = deviceNext;
  const items = answer.items || [];
  const first = index * DEVICE_PAGE;
  document.getElementById("device-range").textContent = items.length
    ? (first + 1).toLocaleString("en") + "–" + (first + items.length).toLocaleString("en") + " of " + Number(answer.total).toLocaleString("en")
    : "0 of " + Number(answer.total || 0).toLocaleString("en");
  document.getElementById("devices-older").disabled = !deviceNext;
  document.getElementById("devices-newer").disabled = index === 0;
  const state = document.getElementById("devices-state");
  state.textContent = items.length ? "" : (q ? "No devices match " + JSON.stringify(q) + "." :
    filters.client ? "No real client's device yet: a browser that subscribes through the mock shows here." :
    "No devices yet: create one below, or send to a new token.");
  // The table is drawn again on every device event: focus stays on the same row or button.
  const focus = document.activeElement;
  const focusRow = focus && focus.closest ? focus.closest("#devices tbody tr[data-token]") : null;
  const keep = focusRow && { token: focusRow.dataset.token, button: [...focusRow.querySelectorAll("button")].indexOf(focus) };
  tbody.textContent = "";
  for (const d of items) {
    fcm.pushes.remember(d);
    const tr = document.createElement("tr");
    tr.dataset.token = d.token;
    // In the tab order: Enter or Space opens the device view (device.js), as a click does.
    tr.tabIndex = 0;
    tr.className = "device";
    const tok = cell("token", short(d.token, 24), "mono target");
    tok.title = d.token;
    const state = d.state === "registered" ? (d.online ? "online" : "offline") : d.state;
    const inbox = el("button", "messages");
    inbox.type = "button";
    inbox.title = "search the messages sent to this device";
    inbox.addEventListener("click", () => setFilters(Object.assign({}, filters, { device: d.token, q: "" })));
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
    const actions = cell("actions", null, "actions");
    actions.append(toggle, " ", up);
    const inboxCell = cell("inbox", null, "inbox");
    inboxCell.append(inbox, el("span", d.pending ? " " + d.pending + " pending" : "", "pending"));
    const topics = (d.topics || []).join(", ");
    const tc = cell("topics", topics, "topics");
    tc.title = topics;
    const app = cell("app", null, "app");
    // A real client's device: its badge and connected dot (clients.js), the details on hover.
    const badge = fcm.clients && fcm.clients.badge(d.client);
    if (badge) app.append(badge, " ");
    app.append(String(d.app === undefined || d.app === null ? "" : d.app));
    app.title = badge ? badge.title : String(d.app || "");
    tr.append(tok, app, cell("state", state, d.online ? "delivered" : "pending"), tc, inboxCell, actions);
    tbody.append(tr);
    if (keep && keep.token === d.token) (tr.querySelectorAll("button")[keep.button] || tr).focus();
  }
  fcm.offline.sync();
}
async function loadList(id, path, render) {
  const ul = document.getElementById(id);
  let page;
  try { page = await api(path); } catch (e) { return; }
  ul.textContent = "";
  const items = page.items || [];
  if (items.length === 0) ul.append(el("li", "none", "muted"));
  for (const x of items) {
    const li = el("li");
    const r = render(x);
    if (r instanceof Node) li.append(r); else li.textContent = r;
    ul.append(li);
  }
}
// A topic: a button that searches its messages.
const loadTopics = () => loadList("topics", "/topics?limit=1000", t => {
  const b = el("button", "/topics/" + t.name + " (" + t.count + ")", "linkish");
  b.type = "button";
  b.title = "search the messages sent to /topics/" + t.name;
  b.addEventListener("click", () => setFilters(Object.assign({}, filters, { topic: t.name, q: "" })));
  return b;
});
const loadGroups = () => loadList("groups", "/groups?limit=1000", g => g.notification_key_name + " (" + (g.members || []).length + " members, sender " + g.sender_id + ")");
const loadXmpp = () => loadList("xmpp", "/xmpp/connections?limit=1000", c => c.id + " sender " + c.sender_id + (c.tls ? " tls" : "") + ", unacked " + c.unacked + (c.draining ? ", draining" : ""));

const pending = new Map();
function soon(name, fn) {
  if (pending.has(name)) return;
  pending.set(name, setTimeout(() => { pending.delete(name); fn(); }, 150));
}
fcm.soon = soon;
function cancelSoon(name) {
  clearTimeout(pending.get(name));
  pending.delete(name);
}

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
  const box = document.getElementById("filter");
  if (document.activeElement !== box) box.value = filters.q || "";
  for (const input of document.querySelectorAll("#filters [name]")) {
    const v = filters[input.name] || "";
    input.value = input.type === "datetime-local" ? (v ? toLocal(v) : "") : v;
  }
  const n = ["project", "device", "topic", "status", "transport", "error", "since", "until"].filter(k => filters[k]).length;
  document.getElementById("filters-toggle").textContent = "filters" + (n ? " (" + n + ")" : "");
  // Every active filter as a chip; × takes it away.
  const ul = document.getElementById("chips");
  ul.textContent = "";
  for (const c of fcm.search.chips(filters)) {
    const li = el("li", null, "chip" + (c.name.startsWith("not_") ? " chip-not" : ""));
    li.dataset.name = c.name;
    const label = el("span", short(c.label, 48), "chip-label");
    label.title = c.label;
    const x = el("button", "×", "chip-remove");
    x.type = "button";
    x.setAttribute("aria-label", "remove " + c.label);
    x.addEventListener("click", () => { setFilters(fcm.search.without(filters, c.name, c.item)); document.getElementById("filter").focus(); });
    li.append(label, x);
    ul.append(li);
  }
}
function setFilters(f) {
  const client = filters.client;
  filters = Object.assign({}, f);
  for (const k of Object.keys(filters)) if (!filters[k]) delete filters[k];
  if (filters.client !== client) {
    deviceCursors = [null];
    loadDevices(0);
    if (fcm.clients) fcm.clients.filter(filters.client);
  }
  writeURL();
  showFilters();
  loadMessages(0);
}
fcm.setFilters = setFilters;
fcm.filters = () => Object.assign({}, filters);
// Adds search terms (`error:NotRegistered`) as chips: what the overview's error codes and the
// devices' and topics' buttons call.
fcm.addSearch = function (text) {
  try { setFilters(fcm.search.apply(filters, text)); showError(null); } catch (e) { showError(e); }
};

// Unreachable server: a banner, the lists marked stale, the actions disabled (with a sentence
// on each), until the event stream opens again.
fcm.offline = {
  down: false,
  set(down) {
    if (this.down === down) return;
    this.down = down;
    document.getElementById("offline").hidden = !down;
    document.body.classList.toggle("stale", down);
    this.sync();
    if (!down) { showError(null); loadMessages(pageIndex === 0 ? 0 : pageIndex); loadDevices(); loadTopics(); loadGroups(); loadXmpp(); if (fcm.clients) fcm.clients.load(); }
  },
  // Buttons that act on the server, disabled while it is unreachable (the page's own controls stay).
  sync() {
    for (const b of document.querySelectorAll("main button, #detail button, #compose button, #device-view button, #overview button")) {
      if (b.classList.contains("close") || b.classList.contains("pv-close") || b.closest(".pager") || b.closest(".detail-tabs")) continue;
      if (this.down && !b.disabled) { b.disabled = true; b.dataset.offline = "true"; b.title = "the server is unreachable"; }
      else if (!this.down && b.dataset.offline) { b.disabled = false; delete b.dataset.offline; b.removeAttribute("title"); }
    }
  },
};
function connect() {
  const es = fcm.openStream();
  const live = document.getElementById("live");
  let opened = false;
  es.onopen = () => {
    live.textContent = "live";
    if (opened) fcm.offline.set(false);
    opened = true;
    fcm.offline.set(false);
  };
  es.onerror = () => {
    live.textContent = "reconnecting…";
    if (es.readyState !== EventSource.CLOSED) {
      // The stream is retried by the browser; meanwhile, one cheap call says whether the server is there.
      fetch("/api/v1/health").then(() => {}, () => fcm.offline.set(true));
      return;
    }
    // Refused with an error (the server's 64 event readers are open, or it is stopping), which a
    // browser never retries: a server that still answers is not unreachable, the page says why
    // it is not live, and it tries the stream again itself.
    fetch("/api/v1/health").then(r => r.json()).then(h => {
      live.textContent = "not live: " + h.event_readers + " event streams open on the server; retrying every 10 s";
    }).catch(() => fcm.offline.set(true));
    setTimeout(connect, 10000);
  };
  const parse = e => { try { return JSON.parse(e.data); } catch (x) { return null; } };
  es.addEventListener("message.accepted", e => liveMessage(parse(e)));
  es.addEventListener("message.rejected", e => liveMessage(parse(e)));
  for (const kind of ["message.delivered", "message.expired", "message.collapsed", "message.dropped", "message.sent", "message.client_rejected",
                      "message.replaced", "message.deleted", "message.undeliverable"]) {
    es.addEventListener(kind, e => { const d = parse(e); if (d && d.message_id) soon("m:" + (owner.get(d.message_id) || d.message_id), () => refreshMessage(d.message_id)); soon("devices", loadDevices); });
  }
  es.addEventListener("device.created", () => soon("devices", loadDevices));
  // A real client connecting or going: its devices' dots; what it had not acknowledged when
  // its connection closed is held again (no event of its own): those rows are read again.
  for (const kind of ["client.connected", "client.closed"]) es.addEventListener(kind, () => soon("devices", loadDevices));
  es.addEventListener("client.closed", () => {
    for (const [id, tr] of shown) if (tr.dataset.sent === "true") soon("m:" + id, () => refreshMessage(id));
  });
  es.addEventListener("device.updated", () => { soon("devices", loadDevices); soon("topics", loadTopics); soon("groups", loadGroups); });
  for (const kind of ["xmpp.connected", "xmpp.closed", "upstream.sent", "upstream.acked"]) {
    es.addEventListener(kind, () => soon("xmpp", loadXmpp));
  }
}
const box = document.getElementById("filter");
box.addEventListener("input", e => {
  filters.q = e.target.value;
  if (!filters.q) delete filters.q;
  writeURL();
  soon("filter", () => loadMessages(0));
});
box.addEventListener("keydown", e => {
  if (e.key === "Enter") {
    e.preventDefault();
    const text = box.value.trim();
    if (!text) return;
    if (oneID({ q: text })) { loadMessages(0); return; }
    try {
      const f = fcm.search.apply(fcm.search.without(filters, "q"), text);
      delete f.q;
      box.value = "";
      setFilters(f);
      showError(null);
    } catch (x) { showError(x); }
  } else if (e.key === "Backspace" && box.value === "" && fcm.search.chips(filters).length) {
    // Backspace in an empty box takes the last chip away.
    const all = fcm.search.chips(filters);
    const c = all[all.length - 1];
    setFilters(fcm.search.without(filters, c.name, c.item));
  } else if (e.key === "Escape" && box.value) {
    e.stopPropagation();
    box.value = "";
    delete filters.q;
    writeURL();
    loadMessages(0);
  }
});
document.getElementById("filters").addEventListener("input", e => {
  const input = e.target;
  if (!input.name) return;
  const v = input.type === "datetime-local" ? (input.value ? toISO(input.value) : "") : input.value.trim();
  if (v) filters[input.name] = v; else delete filters[input.name];
  writeURL();
  showFilters();
  soon("filter", () => loadMessages(0));
});
document.getElementById("filters-clear").addEventListener("click", () => setFilters({}));
document.getElementById("filters-toggle").addEventListener("click", e => {
  const panel = document.getElementById("filters");
  panel.hidden = !panel.hidden;
  e.target.setAttribute("aria-expanded", String(!panel.hidden));
});
const help = document.getElementById("search-help");
const helpToggle = document.getElementById("search-help-toggle");
function toggleHelp(open) {
  help.hidden = !open;
  helpToggle.setAttribute("aria-expanded", String(open));
}
helpToggle.addEventListener("click", () => toggleHelp(help.hidden));
document.getElementById("older").addEventListener("click", () => loadMessages(pageIndex + 1));
document.getElementById("newer").addEventListener("click", () => loadMessages(Math.max(0, pageIndex - 1)));
document.getElementById("devices-older").addEventListener("click", () => loadDevices(devicePage + 1));
document.getElementById("devices-newer").addEventListener("click", () => loadDevices(Math.max(0, devicePage - 1)));
document.getElementById("device-search").addEventListener("input", () => { deviceCursors = [null]; soon("devices", () => loadDevices(0)); });
const tbody = document.querySelector("#messages tbody");
tbody.addEventListener("click", e => openRow(e.target.closest("tr.message")));
// j / k (and the arrow keys on a row) move between rows; with the detail open, it follows.
function move(by) {
  const rows = [...tbody.querySelectorAll("tr.message")];
  if (!rows.length) return;
  const at = document.activeElement && document.activeElement.closest ? document.activeElement.closest("tr.message") : null;
  const current = at || tbody.querySelector("tr[aria-current=true]");
  const i = current ? rows.indexOf(current) : -1;
  const next = rows[Math.min(rows.length - 1, Math.max(0, i + by))];
  next.focus();
  next.scrollIntoView({ block: "nearest" });
  if (!document.getElementById("detail").hidden) openRow(next);
}
tbody.addEventListener("keydown", e => {
  const tr = e.target.closest("tr.message");
  if (!tr) return;
  if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openRow(tr); }
  else if (e.key === "ArrowDown" && tr.nextElementSibling) { e.preventDefault(); tr.nextElementSibling.focus(); }
  else if (e.key === "ArrowUp" && tr.previousElementSibling) { e.preventDefault(); tr.previousElementSibling.focus(); }
});
function typing(t) {
  return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
}
document.addEventListener("keydown", e => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "Escape" && !help.hidden) { toggleHelp(false); helpToggle.focus(); return; }
  if (typing(e.target)) return;
  if (e.key === "/") { e.preventDefault(); box.focus(); box.select(); }
  else if (e.key === "?") { e.preventDefault(); toggleHelp(help.hidden); if (!help.hidden) help.scrollIntoView({ block: "nearest" }); }
  else if (e.key === "j") { e.preventDefault(); move(1); }
  else if (e.key === "k") { e.preventDefault(); move(-1); }
});
// Relative times stay true.
setInterval(() => { for (const t of document.querySelectorAll("time.ago")) t.textContent = ago(t.dateTime); }, 5000);
filters = readFilters();
if (["project", "device", "topic", "status", "transport", "error", "since", "until"].some(k => filters[k]) && !filters.app && !filters.text) {
  // A link with the fields' filters opens them, as before.
  document.getElementById("filters").hidden = false;
}
showFilters();
if (fcm.clients && filters.client) fcm.clients.filter(filters.client);
loadMessages(0);
loadDevices(0);
loadTopics();
loadGroups();
loadXmpp();
connect();
})();
