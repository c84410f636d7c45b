// The live overview: counters from GET /api/v1/stats, moved by the event stream, and a chart of
// sends and errors per second over the last ten minutes (inline SVG, redrawn once a second).
// Every value from the server goes on the page as text (textContent / DOM APIs).
(function () {
  "use strict";
  const fcm = window.fcm = window.fcm || {};
  // The SVG namespace: a name, not an address the page loads (the CSP allows no other origin).
  const SVG = "http://www.w3.org/2000/svg";
  // The two windows the chart shows: [seconds, bucket seconds, label].
  const WINDOWS = { "10m": [600, 10, "Last 10 minutes"], "1h": [3600, 60, "Last hour"] };
  let windowName = "10m";
  const api = fcm.api;
  const el = fcm.el;
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }

  // What the server counts (the same rules as GET /api/v1/stats), and what the chart shows.
  const stats = { accepted: 0, rejected: 0, errors: {}, pending: 0, xmpp_connections: 0, devices: 0 };
  // The server's history (GET /api/v1/stats/series): per bucket sends and errors, and when the
  // last bucket ends on the mock's clock. Events move the newest bucket until the next read.
  let series = null;
  let skew = 0; // the mock's clock minus the browser's, from the last read
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
    const chartBox = el("div", null, "ov-chart-box");
    const chart = svg("svg", { viewBox: "0 0 600 100", preserveAspectRatio: "none", role: "img", class: "ov-chart" });
    const sends = svg("g", { class: "ov-sends" });
    const errs = svg("g", { class: "ov-errs" });
    chart.append(sends, errs);
    const axis = el("div", null, "ov-axis");
    axis.setAttribute("aria-hidden", "true");
    const tip = el("div", "", "ov-tip");
    tip.setAttribute("role", "status");
    const windows = el("div", null, "ov-windows");
    windows.setAttribute("role", "group");
    windows.setAttribute("aria-label", "chart window");
    for (const name of Object.keys(WINDOWS)) {
      const b = el("button", name === "10m" ? "10 min" : "1 hour");
      b.type = "button";
      b.dataset.window = name;
      b.setAttribute("aria-pressed", String(name === windowName));
      b.addEventListener("click", () => { windowName = name; for (const x of windows.children) x.setAttribute("aria-pressed", String(x.dataset.window === name)); loadSeries(); });
      windows.append(b);
    }
    chartBox.append(windows, chart, axis, tip);
    const legend = el("p", null, "ov-legend");
    legend.append(el("span", "sends", "ov-key-sends"), " ", el("span", "errors", "ov-key-errors"), " ",
                  el("span", "", "ov-summary"));
    section.append(counters, errors, chartBox, legend);
    ui = { cells, errors, chart, sends, errs, axis, tip, summary: legend.querySelector(".ov-summary") };
    // Values on hover (and on focus of a bar, for the keyboard).
    chart.addEventListener("mousemove", e => {
      const r = chart.getBoundingClientRect();
      if (!series || r.width === 0) return;
      const i = Math.min(series.sends.length - 1, Math.max(0, Math.floor((e.clientX - r.left) / r.width * series.sends.length)));
      ui.tip.textContent = bucketText(i);
    });
    chart.addEventListener("mouseleave", () => { ui.tip.textContent = ""; });
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
      // A button that searches the messages with that error.
      const b = el("button", null, "linkish ov-error");
      b.type = "button";
      b.title = "search: error:" + code;
      b.append(el("span", code, "ov-code"), " ", el("span", String(stats.errors[code]), "ov-count"));
      b.addEventListener("click", () => { if (fcm.addSearch) fcm.addSearch("error:" + code); });
      li.append(b);
      ui.errors.append(li);
    }
  }

  function clock(ms) { return new Date(ms).toISOString().slice(11, 19); }
  function bucketText(i) {
    const from = series.startMs + i * series.bucket * 1000;
    return clock(from) + "–" + clock(from + series.bucket * 1000) + " UTC: " + series.sends[i] + " sends, " + series.errors[i] + " errors";
  }
  // The chart: per bucket a bar of sends (grey) and one of errors (red) in front, scaled to the
  // busiest bucket of the window, each with its values as a tooltip; a time axis below.
  function draw() {
    if (!ui || !series) return;
    const n = series.sends.length;
    const w = 600 / n;
    let peak = 0, totalSends = 0, totalErrors = 0, peakErrors = 0;
    for (let i = 0; i < n; i++) {
      peak = Math.max(peak, series.sends[i], series.errors[i]);
      peakErrors = Math.max(peakErrors, series.errors[i]);
      totalSends += series.sends[i];
      totalErrors += series.errors[i];
    }
    const scale = 96 / Math.max(peak, 1);
    const sends = document.createDocumentFragment(), errs = document.createDocumentFragment();
    for (let i = 0; i < n; i++) {
      const tip = svg("title", {});
      tip.textContent = bucketText(i);
      // A sliver at least, so one send in an hour is seen.
      const h = v => v > 0 ? Math.max(2, v * scale) : 0;
      if (series.sends[i] > 0) { const r = svg("rect", { x: i * w + w * 0.1, width: w * 0.8, y: 100 - h(series.sends[i]), height: h(series.sends[i]) }); r.append(tip); sends.append(r); }
      if (series.errors[i] > 0) { const r = svg("rect", { x: i * w + w * 0.1, width: w * 0.8, y: 100 - h(series.errors[i]), height: h(series.errors[i]) }); r.append(tip.cloneNode(true)); errs.append(r); }
    }
    ui.sends.replaceChildren(sends);
    ui.errs.replaceChildren(errs);
    // The axis: five marks, the times on the mock's clock (UTC) and how long ago.
    ui.axis.textContent = "";
    const [seconds] = WINDOWS[windowName];
    for (let k = 0; k <= 4; k++) {
      const at = series.startMs + seconds * 1000 * k / 4;
      const mark = el("span", k === 4 ? "now" : "−" + Math.round(seconds * (4 - k) / 4 / 60) + " min", "ov-tick");
      mark.title = clock(at) + " UTC";
      ui.axis.append(mark);
    }
    const per = series.bucket + " s";
    const text = WINDOWS[windowName][2] + ": " + totalSends + " sends (peak " + peak + " per " + per + "), " +
                 totalErrors + " errors (peak " + peakErrors + " per " + per + ")";
    ui.chart.setAttribute("aria-label", text);
    ui.summary.textContent = text;
  }

  // A live send, in the newest bucket until the next read of the series puts it right.
  function bump(kind, n) {
    if (!series) return;
    const now = Date.now() + skew;
    const i = Math.floor((now - series.startMs) / (series.bucket * 1000));
    if (i >= series.sends.length) { seriesSoon(); return; }
    if (i < 0) return;
    series[kind][i] += n;
    draw();
  }

  function loadSeries() {
    const [seconds, bucket] = WINDOWS[windowName];
    const asked = Date.now();
    return api("/stats/series?window=" + seconds + "&bucket=" + bucket).then(s => {
      if (!s || !Array.isArray(s.sends) || s.window !== seconds) return;
      const end = Date.parse(s.end);
      skew = end - 1000 - (asked + Date.now()) / 2;
      series = { startMs: Date.parse(s.start), bucket: s.bucket, sends: s.sends.slice(), errors: s.errors.slice() };
      draw();
    }, () => {});
  }
  let seriesTimer = null;
  function seriesSoon() {
    if (seriesTimer) return;
    seriesTimer = setTimeout(() => { seriesTimer = null; loadSeries(); }, 1000);
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
    seriesSoon();
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
    load();
    loadSeries();
    listen();
    // The window moves on: read the history again each bucket (10 s; a minute for the hour).
    setInterval(() => loadSeries(), 10000);
    setInterval(load, 30000);
  }
  fcm.overview = { stats, draw, loadSeries };
  // Start once every script has run (page.js opens the stream and fills the lists).
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
