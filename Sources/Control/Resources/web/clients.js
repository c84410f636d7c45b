(function () {
"use strict";
// Real receiving clients (docs/real-clients.md; docs/web-page.md, "Real clients"): the badge and
// connected dot of a real client's device, the Clients list beside the XMPP connections (live,
// with `disconnect`), and a delivery's life on a client's connection as timeline steps. A user
// agent and a rejection's reason come from the client: they are only ever text (textContent and
// title), never markup.
const fcm = window.fcm = window.fcm || {};
const el = fcm.el;
const api = fcm.api;
const str = fcm.str;
// The kinds the control API knows today (`client:any` keeps them all).
const KINDS = ["autopush", "gcm", "fcm"];

function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

// What the client is: Firefox, Chromium, firebase-messaging, or `raw` (a client that is none of
// them, such as a test's own WebSocket), from its kind, user agent and version.
function name(c) {
  const ua = typeof c.user_agent === "string" ? c.user_agent : "";
  const version = typeof c.client_version === "string" ? c.client_version : "";
  if (c.kind === "autopush") return ua.includes("Firefox/") ? "Firefox" : "raw";
  if (c.kind === "gcm") {
    if (version.startsWith("chrome-") || /Chrom(e|ium)\//.test(ua)) return "Chromium";
    // firebase-messaging checks in as Chrome 94 over aiohttp, its version without `chrome-`.
    return /aiohttp|Python\//.test(ua) ? "firebase-messaging" : "raw";
  }
  if (c.kind === "fcm") return "firebase-messaging";
  return "raw";
}
// "3 s ago" (page.js), else the timestamp.
function ago(iso) { return fcm.ago ? fcm.ago(iso) : str(iso); }
// The hover text of a client: what it is, whether it is connected, its user agent and heartbeat.
// A device's `client` has its connection's times itself; an item of /api/v1/clients has them
// under `connection`.
function describe(c) {
  const conn = isObject(c.connection) ? c.connection : c;
  const lines = [name(c) + " (" + str(c.kind) + " " + str(c.id) + ")",
    c.connected ? "connected" + (conn.connected_at ? " since " + str(conn.connected_at) : "") : "not connected",
    "user agent: " + (c.user_agent ? str(c.user_agent) : "none sent")];
  if (c.client_version) lines.push("version: " + str(c.client_version));
  lines.push("last heartbeat: " + (conn.last_heartbeat_at ? str(conn.last_heartbeat_at) : "none yet"));
  return lines.join("\n");
}
// The badge and dot of a client (a device's `client`, or an item of /api/v1/clients): a span
// `.client-badge` holding the name and `.client-dot`; the details on hover.
function badge(c) {
  if (!isObject(c)) return null;
  const b = el("span", null, "client-badge client-" + name(c).toLowerCase().replace(/[^a-z]+/g, "-"));
  b.dataset.kind = str(c.kind);
  const dot = el("span", "●", "client-dot " + (c.connected ? "on" : "off"));
  dot.setAttribute("aria-label", c.connected ? "connected" : "not connected");
  b.append(dot, el("span", name(c), "client-name"));
  b.title = describe(c);
  return b;
}

// A span of time between two timestamps: "41 ms", "2.3 s", "4 min".
function between(from, to) {
  const ms = Date.parse(to) - Date.parse(from);
  if (isNaN(ms)) return null;
  if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1).replace(/\.0$/, "") + " s";
  return Math.round(ms / 60000) + " min";
}
// A rejection's reason, shortened for its line ("the browser could not decrypt it" → "could not
// decrypt"); the whole of it is the step's title.
function shortReason(reason) {
  // A reason's own parenthesis stays in the title: the line keeps one pair.
  return str(reason).replace(/\s*\([^()]*\)$/, "").replace(/^the browser /, "").replace(/ it$/, "");
}
// A delivery's life on a real client's connection (a recipient's or an inbox entry's
// `client_delivery`, with its `status`, `delivered_at`, `settled_at`) as timeline steps after
// "accepted": [{what, at, cls, title}]; `at` null when the step has no time of its own.
function steps(r) {
  const cd = r.client_delivery;
  if (!isObject(cd)) return null;
  const out = [];
  const ack = isObject(cd.ack) ? cd.ack : null;
  const rejection = isObject(cd.rejection) ? cd.rejection : null;
  // `connection_id` is the connection it was last written on: a delivery written again after a
  // reconnect was first sent on an earlier one, and re-sent on that one.
  const resent = typeof cd.sends === "number" && cd.sends > 1;
  let last = (resent ? "re-sent after reconnect on " : "sent on ") + str(cd.connection_id);
  // The ack that took it (100, or none given); a rejecting ack (101, 102) is the rejection's step.
  const taking = ack && (ack.code === 100 || ack.code === null || ack.code === undefined);
  if (ack && (taking || !rejection)) {
    const after = between(cd.first_sent_at, ack.at);
    last += " · acked" + (ack.code !== null && ack.code !== undefined ? " " + ack.code : "") + (after ? " after " + after : "");
  }
  // What the client acknowledges it by: autopush's `version`, MCS's `persistent_id`.
  const ackedBy = cd.kind === "mcs" ? "persistent_id " + str(cd.persistent_id) : "version " + str(cd.version);
  if (resent) {
    out.push({ what: "sent", at: cd.first_sent_at, cls: "sent", title: ackedBy });
    out.push({ what: last, at: null, cls: "resent", title: "written " + cd.sends + " times" });
  } else {
    out.push({ what: last, at: cd.first_sent_at, cls: "sent", title: ackedBy });
  }
  if (rejection) {
    out.push({ what: "rejected " + str(rejection.code) + " (" + shortReason(rejection.reason) + ")", at: rejection.at,
               cls: "failed", title: str(rejection.reason) });
  } else if (r.status === "delivered") {
    out.push({ what: "delivered", at: r.delivered_at || (ack && ack.at), cls: "delivered" });
  } else if (r.status === "sent") {
    out.push({ what: "waiting for the client's ack", at: null, cls: "upcoming" });
  } else if (r.status === "pending") {
    out.push({ what: "pending: the connection closed unacknowledged, held for the next one", at: null, cls: "pending" });
  } else if (r.status) {
    out.push({ what: str(r.status), at: r.settled_at || null, cls: str(r.status) });
  }
  return out;
}
// The steps as one line (an inbox card's footer).
function line(r) {
  const s = steps(r);
  return s ? s.map(x => x.what).join(" → ") : "";
}

// The Clients list (`<ul id="clients">`): every real client with its connection and actions,
// the connected ones first (the API pages them oldest first, a hundred at a time: every page is
// read, up to MOST clients).
let kindFilter = null;
const MOST = 1000;
// Each load numbered: one that a newer load (or filter) overtook draws nothing.
let loads = 0;
async function load() {
  const ul = document.getElementById("clients");
  if (!ul) return;
  const mine = ++loads, kind = kindFilter;
  const items = [];
  let more = false;
  try {
    // The connected ones first (all of them, up to MOST), then the others.
    for (const connected of ["true", "false"]) {
      let cursor = null;
      do {
        const p = new URLSearchParams({ limit: "100", connected });
        if (kind && kind !== "any") p.set("kind", kind);
        if (cursor) p.set("cursor", cursor);
        const page = await api("/clients?" + p);
        if (mine !== loads) return;
        const got = page && Array.isArray(page.items) ? page.items : [];
        const room = MOST - items.length;
        items.push(...got.slice(0, room));
        cursor = page && page.next ? page.next : null;
        // Cut short: this page did not fit, or pages follow once the list is full.
        if (got.length > room || (cursor !== null && items.length >= MOST)) more = true;
      } while (cursor && items.length < MOST);
      if (items.length >= MOST) break;
    }
  } catch (e) { return; }
  ul.textContent = "";
  if (items.length === 0) ul.append(el("li", "none: a browser connecting to /autopush shows here", "muted"));
  // A client that went between the two passes is in both: drawn once.
  const seen = new Set();
  for (const c of items) { if (seen.has(c.id)) continue; seen.add(c.id); ul.append(item(c)); }
  if (more) ul.append(el("li", "the first " + MOST.toLocaleString("en") + " clients only: GET /api/v1/clients lists them all", "muted"));
  if (fcm.offline) fcm.offline.sync();
}
function item(c) {
  const li = el("li", null, "client");
  li.dataset.id = str(c.id);
  const head = el("div", null, "client-head");
  const id = el("span", fcm.short ? fcm.short(str(c.id), 14) : str(c.id), "mono client-id");
  id.title = str(c.id);
  const devices = Array.isArray(c.devices) ? c.devices.length : 0;
  head.append(badge(c), " ", id, el("span", " · " + devices + (devices === 1 ? " device" : " devices"), "muted"));
  li.append(head);
  const conn = isObject(c.connection) ? c.connection : null;
  const facts = el("div", null, "client-conn");
  if (conn) {
    facts.append(el("span", str(conn.id), "mono client-conn-id"), " · ", el("span", str(conn.remote), "mono client-remote"),
                 " · " + (conn.tls ? "tls" : "no tls") + " · unacked " + str(conn.unacked) + " · connected since ");
    const since = el("time", ago(conn.connected_at), "ago");
    since.dateTime = str(conn.connected_at);
    since.title = str(conn.connected_at);
    facts.append(since);
  } else {
    facts.append(el("span", "not connected" + (c.last_connected_at ? " · last connected " + ago(c.last_connected_at) : ""), "muted"));
  }
  li.append(facts);
  const ua = el("div", c.user_agent ? str(c.user_agent) : "no user agent", "client-ua muted");
  ua.title = describe(c);
  li.append(ua);
  if (conn) {
    const actions = el("div", null, "client-actions");
    if (c.kind === "autopush") {
      actions.append(button("disconnect", "client-disconnect", "closes its connection (1000); Firefox reconnects", c, false),
                     " ", button("disconnect with back-off", "client-backoff", "closes it with 4774: Firefox stays away until it restarts", c, true));
    } else {
      // MCS has no back-off close: the client reconnects when it will.
      actions.append(button("disconnect", "client-disconnect", "closes its connection; the client logs in again when it will", c, false));
    }
    li.append(actions);
  }
  return li;
}
function button(text, cls, title, c, backoff) {
  const b = el("button", text, cls);
  b.type = "button";
  b.title = title;
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      await api("/clients/" + encodeURIComponent(str(c.id)) + ":disconnect", { method: "POST", body: backoff ? JSON.stringify({ backoff: true }) : undefined });
      if (fcm.showError) fcm.showError(null);
    } catch (e) { if (fcm.showError) fcm.showError(e); }
    b.disabled = false;
    load();
  });
  return b;
}
function soon() { if (fcm.soon) fcm.soon("clients", load); else load(); }
// The Clients list keeps to the search's `client:` chip (its kind).
function filter(kind) {
  if ((kind || null) === kindFilter) return;
  kindFilter = kind || null;
  load();
}
for (const kind of ["client.connected", "client.closed", "device.created", "device.updated", "message.sent",
                    "message.delivered", "message.client_rejected"]) fcm.on(kind, soon);

fcm.clients = { KINDS, name, badge, describe, steps, line, load, filter };
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", load); else load();
})();
