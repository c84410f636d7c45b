// The live overview: counters from GET /api/v1/stats, moved by the event stream, and a chart of
// sends and errors per second over the last ten minutes (inline SVG, redrawn once a second).
// Every value from the server goes on the page as text (textContent / DOM APIs).
(function () {
  "use strict";
  const fcm = window.fcm = window.fcm || {};
  // The SVG namespace: a name, not an address the page loads (the CSP allows no other origin).
  const SVG = "http://www.w3.org/2000/svg";
  const SECONDS = 600;
  const api = fcm.api;
  const el = fcm.el;
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }

  // What the server counts (the same rules as GET /api/v1/stats), and what the chart shows.
  const stats = { accepted: 0, rejected: 0, errors: {}, pending: 0, xmpp_connections: 0, devices: 0 };
  const buckets = new Map(); // second → { sends, errors }
  let ui = null;

  function build() {
    let section = document.getElementById("overview");
    if (!section) {
      section = document.createElement("section");
      section.id = "overview";
      const main = document.querySelector("main") || document.body;
      main.insertBefore(section, main.firstChild);
    }
    section.textContent = "";
    section.append(el("h2", "Overview"));
    const counters = el("dl", null, "ov-counters");
    const cells = {};
    for (const [key, label] of [["accepted", "accepted"], ["rejected", "rejected"], ["pending", "pending"],
                                ["xmpp_connections", "XMPP connections"], ["devices", "devices"]]) {
      const box = el("div", null, "ov-counter");
      box.dataset.counter = key;
      const dd = el("dd", "…");
      box.append(el("dt", label), dd);
      counters.append(box);
      cells[key] = dd;
    }
    const errors = el("ul", null, "ov-errors");
    errors.setAttribute("aria-label", "errors by code");
    const chart = svg("svg", { viewBox: "0 0 " + SECONDS + " 100", preserveAspectRatio: "none", role: "img", class: "ov-chart" });
    const sends = svg("g", { class: "ov-sends" });
    const errs = svg("g", { class: "ov-errs" });
    chart.append(sends, errs);
    const legend = el("p", null, "ov-legend");
    legend.append(el("span", "sends/s", "ov-key-sends"), " ", el("span", "errors/s", "ov-key-errors"), " ",
                  el("span", "", "ov-summary"));
    section.append(counters, errors, chart, legend);
    ui = { cells, errors, chart, sends, errs, summary: legend.querySelector(".ov-summary") };
  }

  function render() {
    if (!ui) return;
    for (const key in ui.cells) ui.cells[key].textContent = String(stats[key]);
    ui.errors.textContent = "";
    const codes = Object.keys(stats.errors).sort();
    if (codes.length === 0) ui.errors.append(el("li", "no errors", "ov-none"));
    for (const code of codes) {
      const li = el("li", null, "failed");
      li.dataset.code = code;
      li.append(el("span", code, "ov-code"), " ", el("span", String(stats.errors[code]), "ov-count"));
      ui.errors.append(li);
    }
  }

  // The chart: one bar per second with a send (grey) and one per second with an error (red) on
  // top, scaled to the busiest second of the window.
  function draw() {
    if (!ui) return;
    const now = Math.floor(Date.now() / 1000);
    for (const s of buckets.keys()) if (s <= now - SECONDS) buckets.delete(s);
    let peak = 0, totalSends = 0, totalErrors = 0, peakErrors = 0;
    for (const b of buckets.values()) {
      peak = Math.max(peak, b.sends, b.errors);
      peakErrors = Math.max(peakErrors, b.errors);
      totalSends += b.sends;
      totalErrors += b.errors;
    }
    const scale = 96 / Math.max(peak, 1);
    const sends = document.createDocumentFragment(), errs = document.createDocumentFragment();
    for (const [s, b] of buckets) {
      const x = SECONDS - 1 - (now - s);
      if (b.sends > 0) sends.append(svg("rect", { x, width: 1, y: 100 - b.sends * scale, height: b.sends * scale }));
      if (b.errors > 0) errs.append(svg("rect", { x, width: 1, y: 100 - b.errors * scale, height: b.errors * scale }));
    }
    ui.sends.replaceChildren(sends);
    ui.errs.replaceChildren(errs);
    const text = "Last 10 minutes: " + totalSends + " sends (peak " + peak + " per second), " +
                 totalErrors + " errors (peak " + peakErrors + " per second)";
    ui.chart.setAttribute("aria-label", text);
    ui.summary.textContent = text;
  }

  function bump(kind, n) {
    const s = Math.floor(Date.now() / 1000);
    const b = buckets.get(s) || { sends: 0, errors: 0 };
    b[kind] += n;
    buckets.set(s, b);
  }

  // A message event: counted as the server counts it (recipients' errors, or the error of a send
  // refused before it had a recipient).
  function onMessage(m) {
    if (!m || (m.status !== "accepted" && m.status !== "rejected")) return;
    stats[m.status] += 1;
    const recipients = Array.isArray(m.recipients) ? m.recipients : [];
    const codes = recipients.map(r => r && r.error).filter(e => typeof e === "string");
    if (recipients.length === 0 && typeof m.error === "string") codes.push(m.error);
    for (const c of codes) stats.errors[c] = (stats.errors[c] || 0) + 1;
    bump("sends", 1);
    if (codes.length) bump("errors", codes.length);
    render();
    resyncSoon();
  }

  function apply(s) {
    if (!s || !s.messages) return;
    stats.accepted = s.messages.accepted;
    stats.rejected = s.messages.rejected;
    stats.errors = Object.assign({}, s.errors || {});
    stats.pending = s.pending;
    stats.xmpp_connections = s.xmpp_connections;
    stats.devices = s.devices;
    render();
  }
  function load() { return api("/stats").then(apply, () => {}); }
  // Pending deliveries, connections and devices move with events the page need not count: one
  // cheap read of the counters after each burst puts every number right.
  let resyncTimer = null;
  function resyncSoon() {
    if (resyncTimer) return;
    resyncTimer = setTimeout(() => { resyncTimer = null; load(); }, 1000);
  }

  function listen() {
    fcm.on("message.accepted", onMessage);
    fcm.on("message.rejected", onMessage);
    for (const k of ["message.delivered", "message.expired", "message.collapsed", "message.dropped",
                     "device.created", "device.updated", "xmpp.connected", "xmpp.closed"]) fcm.on(k, resyncSoon);
  }

  function start() {
    build();
    render();
    draw();
    load();
    listen();
    setInterval(draw, 1000);
    setInterval(load, 30000);
  }
  fcm.overview = { stats, draw };
  // Start once every script has run (page.js opens the stream and fills the lists).
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
