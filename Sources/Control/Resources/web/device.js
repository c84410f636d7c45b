// The device view (docs/web-page.md, "Notification previews and the device view"): one device's
// inbox as a phone would show it (window.fcm.previews.card, previews.js), newest first, live; its
// actions through the control API; and "create a device" (always on the page, below the lists).
// Opened by #device=TOKEN, by a click on a row of the devices table (or Enter or Space on a focused
// row), or by window.fcm.openDevice(token).
(function () {
  "use strict";
  const fcm = window.fcm = window.fcm || {};
  const el = fcm.el;
  const str = fcm.str;
  const card = (entry, info) => fcm.previews.card(entry, info);
  const NEWEST = 100;  // cards drawn
  let current = null;  // the open device's token
  let device = null;   // its object, as last read
  let reloadTimer = null;

  const call = fcm.api;
  const enc = encodeURIComponent;

  function view() {
    let v = document.getElementById("device-view");
    if (!v) {
      v = el("div");
      v.id = "device-view";
      (document.querySelector("main") || document.body).append(v);
    }
    if (!v.querySelector(".pv-view")) build(v);
    return v;
  }
  function build(v) {
    const box = el("section", null, "pv-view");
    const head = el("div", null, "pv-view-head");
    const title = el("h2", "Device");
    const close = el("button", "close", "pv-close");
    close.type = "button";
    close.hidden = true;
    close.setAttribute("aria-label", "close the device (Escape)");
    close.addEventListener("click", closeDevice);
    head.append(title, close);
    const hint = el("p", "Click a row of the devices table (or focus it and press Enter) to see that device's inbox here.",
      "pv-hint muted");
    const info = el("div", null, "pv-device-info");
    const actions = el("div", null, "pv-actions");
    const err = el("div", null, "pv-error");
    err.setAttribute("role", "alert");
    const phone = el("div", null, "pv-phone");
    const screen = el("div", null, "pv-screen");
    screen.setAttribute("aria-live", "polite");
    phone.append(el("div", null, "pv-notch"), screen);
    const body = el("div", null, "pv-device");
    body.hidden = true;
    body.append(info, actions, phone);
    box.append(head, hint, err, body, createForm());
    v.append(box);
  }
  function part(cls) { return view().querySelector("." + cls); }
  function showError(e) { part("pv-error").textContent = e ? String(e.message || e) : ""; }

  function button(text, cls, run) {
    const b = el("button", text, cls);
    b.type = "button";
    b.addEventListener("click", async () => {
      try { await run(); showError(null); } catch (e) { showError(e); }
    });
    return b;
  }
  function drawDevice() {
    const info = part("pv-device-info");
    const actions = part("pv-actions");
    info.textContent = "";
    actions.textContent = "";
    if (!device) return;
    const state = device.state === "registered" ? (device.online ? "online" : "offline") : device.state;
    const token = el("div", device.token, "pv-token");
    token.title = "fid " + str(device.fid);
    const topics = Array.isArray(device.topics) ? device.topics : [];
    const subs = el("div", null, "pv-subs");
    subs.append(el("span", topics.length ? "subscribed to " : "no topic subscriptions", "pv-meta"));
    for (const t of topics) {
      // A topic: a button that searches the messages sent to it.
      const b = el("button", "/topics/" + t, "linkish pv-topic");
      b.type = "button";
      b.addEventListener("click", () => { if (fcm.addSearch) fcm.addSearch("topic:" + t); });
      subs.append(b, " ");
    }
    const search = el("button", "search its messages", "linkish pv-search");
    search.type = "button";
    search.addEventListener("click", () => { if (fcm.addSearch) fcm.addSearch("token:" + device.token); });
    info.append(token, el("div", [device.app, device.platform, "sender " + device.sender_id].join(" · "), "pv-meta"));
    if (device.apns_token) {
      // An iOS device's other address: the APNs token an app server sends to over Apple's API.
      const apns = el("div", null, "pv-apns");
      apns.append(el("span", "APNs " + str(device.apns_environment || ""), "pv-meta"), el("span", str(device.apns_token), "pv-token pv-apns-token"));
      info.append(apns);
    }
    const client = device.client && typeof device.client === "object" ? device.client : null;
    if (client && fcm.clients) {
      // A real client's device: its badge and dot, its client, and what it said it is (as text).
      const line = el("div", null, "pv-client");
      line.append(fcm.clients.badge(client), " ", el("span", str(client.kind) + " " + str(client.id), "pv-meta mono"));
      if (client.channel_id) line.append(el("span", " · channel " + str(client.channel_id), "pv-meta"));
      const ua = el("div", "user agent: " + (client.user_agent ? str(client.user_agent) : "none sent"), "pv-meta pv-client-ua");
      ua.title = fcm.clients.describe(client);
      const beat = el("div", "last heartbeat: " + (client.last_heartbeat_at ? str(client.last_heartbeat_at) : "none yet") +
        (client.unregister_code !== null && client.unregister_code !== undefined ? " · unregistered with code " + str(client.unregister_code) : ""), "pv-meta pv-client-beat");
      info.append(line, ua, beat);
    }
    info.append(el("div", state + (device.pending ? " · " + device.pending + " pending" : ""), "pv-state pv-state-" + state), subs, search);
    const t = enc(device.token);
    actions.append(
      button(device.online ? "take offline" : "bring online", "pv-online", async () => {
        await call("/devices/" + t, { method: "PATCH", body: JSON.stringify({ online: !device.online }) });
        await reload();
      }),
      button("unregister", "pv-unregister", async () => {
        await call("/devices/" + t + ":unregister", { method: "POST" });
        await reload();
      }),
      button("refresh token", "pv-refresh", async () => {
        const d = await call("/devices/" + t + ":refresh", { method: "POST" });
        openDevice(d.token);
      }),
      button("send upstream…", "pv-upstream", async () => {
        const data = fcm.askPairs();
        if (data === null) return;
        await call("/devices/" + t + "/upstream", { method: "POST", body: JSON.stringify({ data }) });
      }));
  }
  // The newest entries of the inbox, newest first: one request however long the inbox is.
  async function newestEntries(token) {
    const page = await call("/devices/" + enc(token) + "/messages?order=newest&limit=" + NEWEST);
    return page.items || [];
  }
  async function reload() {
    const token = current;
    if (!token) return;
    let d, entries;
    try {
      d = await call("/devices/" + enc(token));
      entries = await newestEntries(token);
    } catch (e) { if (token === current) showError(e); return; }
    if (token !== current) return;
    device = d;
    drawDevice();
    const screen = part("pv-screen");
    screen.textContent = "";
    part("pv-phone").classList.toggle("pv-frame-desktop", d.platform === "web");
    if (entries.length === 0) screen.append(el("div", "no messages yet", "pv-empty"));
    for (const entry of entries) {
      screen.append(card(entry, { platform: d.platform, app: d.app, status: entry.status }));
      // A real client's delivery under its card: sent on ws3 · acked 100 after 41 ms (clients.js).
      const said = fcm.clients ? fcm.clients.line(entry) : "";
      if (said) screen.append(el("div", said, "pv-delivery"));
    }
  }
  function reloadSoon() {
    if (reloadTimer) return;
    reloadTimer = setTimeout(() => { reloadTimer = null; reload(); }, 150);
  }

  // Live: any event naming the open device redraws it.
  function concerns(data) {
    if (!current || !data) return false;
    if (data.token === current || data.canonical_token === current) return true;
    return Array.isArray(data.recipients) && data.recipients.some(r => r.token === current);
  }
  const KINDS = ["message.accepted", "message.delivered", "message.expired", "message.collapsed",
    "message.dropped", "device.updated", "message.sent", "message.client_rejected"];
  function onEvent(data) {
    if (concerns(data)) reloadSoon();
  }
  // A real client connecting or going (the data is the client, or {client, …}): its devices' dots.
  function onClient(data) {
    const c = data && data.client && typeof data.client === "object" ? data.client : data;
    if (current && c && (Array.isArray(c.devices) && c.devices.includes(current) || device && device.client && device.client.id === c.id)) reloadSoon();
  }
  let subscribed = false;
  function listen() {
    if (!subscribed) {
      for (const k of KINDS) fcm.on(k, onEvent);
      for (const k of ["client.connected", "client.closed"]) fcm.on(k, onClient);
    }
    subscribed = true;
  }

  function hashToken() {
    for (const p of location.hash.replace(/^#/, "").split("&")) {
      if (p.startsWith("device=")) { try { return decodeURIComponent(p.slice(7)); } catch (e) { return null; } }
    }
    return null;
  }
  /// Opens the device view on `token` (and puts it in the URL: #device=TOKEN).
  function openDevice(token) {
    if (!token) return;
    const v = view();
    if (hashToken() !== token) history.replaceState(null, "", "#device=" + enc(token));
    if (current !== token) {
      current = token;
      device = null;
      drawDevice();
      part("pv-screen").textContent = "";
    }
    shown(true);
    listen();
    reload();
    // A pane of its own, on the screen whatever was scrolled: no section far down the page.
    v.classList.add("pv-open");
    v.scrollTop = 0;
    const title = v.querySelector(".pv-view-head h2");
    title.tabIndex = -1;
    title.textContent = "Device";
    title.focus({ preventScroll: true });
  }
  // The open device's part of the view, or the hint saying how to open one; the create form
  // is there either way.
  function shown(open) {
    part("pv-device").hidden = !open;
    part("pv-close").hidden = !open;
    part("pv-hint").hidden = open;
  }
  function closeDevice() {
    current = null;
    device = null;
    view().classList.remove("pv-open");
    shown(false);
    showError(null);
    if (hashToken() !== null) history.replaceState(null, "", location.pathname + location.search);
  }

  // "create a device": project, then one of its apps, then the platform (the app's by default).
  function createForm() {
    const form = el("form");
    const details = el("details", null, "pv-create");
    details.append(el("summary", "create a device"));
    const project = el("select"); project.name = "project";
    const app = el("select"); app.name = "app";
    const platform = el("select"); platform.name = "platform";
    for (const p of ["android", "ios", "web"]) platform.append(new Option(p, p));
    const online = el("input"); online.type = "checkbox"; online.checked = true; online.name = "online";
    const submit = el("button", "create"); submit.type = "submit";
    const label = (text, input) => { const l = el("label", text + " "); l.append(input); return l; };
    let projects = [];
    const fillApps = () => {
      app.textContent = "";
      const p = projects.find(x => x.sender_id === project.value);
      for (const a of (p && p.apps) || []) app.append(new Option(a.app + " (" + a.platform + ")", a.app));
      fillPlatform();
    };
    const fillPlatform = () => {
      const p = projects.find(x => x.sender_id === project.value);
      const a = ((p && p.apps) || []).find(x => x.app === app.value);
      if (a) platform.value = a.platform;
    };
    project.addEventListener("change", fillApps);
    app.addEventListener("change", fillPlatform);
    details.addEventListener("toggle", async () => {
      if (!details.open) return;
      try {
        projects = (await call("/projects?limit=1000")).items || [];
        const keep = project.value;
        project.textContent = "";
        for (const p of projects) project.append(new Option(p.project_id + " (" + p.sender_id + ")", p.sender_id));
        if (keep && projects.some(p => p.sender_id === keep)) project.value = keep;
        fillApps();
      } catch (e) { showError(e); }
    });
    form.addEventListener("submit", async ev => {
      ev.preventDefault();
      try {
        const d = await call("/devices", { method: "POST", body: JSON.stringify({
          sender_id: project.value, app: app.value, platform: platform.value, online: online.checked }) });
        showError(null);
        openDevice(d.token);
      } catch (e) { showError(e); }
    });
    form.append(label("project", project), label("app", app), label("platform", platform), label("online", online), submit);
    details.append(form);
    return details;
  }

  function init() {
    view();
    const t = hashToken();
    if (t) openDevice(t);
    window.addEventListener("hashchange", () => {
      const h = hashToken();
      if (h && h !== current) openDevice(h);
    });
    // A click on a row of the devices table (not on its buttons) opens that device; so do
    // Enter and Space on a focused row (rows are in the tab order).
    document.addEventListener("click", ev => {
      const target = ev.target;
      if (!(target instanceof Element) || target.closest("button, a, input, select, label")) return;
      const row = target.closest("#devices tbody tr[data-token]");
      if (row) openDevice(row.dataset.token);
    });
    document.addEventListener("keydown", ev => {
      // Escape closes the pane (the message detail, on top of it, closes first).
      if (ev.key === "Escape" && current && document.getElementById("detail").hidden && !ev.defaultPrevented) {
        ev.preventDefault();
        closeDevice();
        return;
      }
      if (ev.key !== "Enter" && ev.key !== " ") return;
      const row = ev.target;
      if (!(row instanceof Element) || !row.matches("#devices tbody tr[data-token]")) return;
      ev.preventDefault();
      openDevice(row.dataset.token);
    });
  }
  fcm.openDevice = openDevice;
  // Start once every script has run (page.js opens the stream and fills the devices table).
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
