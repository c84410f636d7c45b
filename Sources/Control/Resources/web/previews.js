// Notification previews: an inbox entry drawn as the device would show it (docs/web-page.md,
// "Notification previews and the device view"), from its `effective` payload
// (docs/effective-payloads.md). Every value becomes text (textContent); icons are inline SVG.
(function () {
  "use strict";
  const fcm = window.fcm = window.fcm || {};
  // The SVG namespace: a name, not an address the page loads (the CSP allows no other origin).
  const SVG = "http://www.w3.org/2000/svg";
  const STATUSES = ["delivered", "pending", "sent", "client_rejected", "expired", "collapsed", "replaced", "dropped", "undecryptable", "undeliverable", "deleted"];

  const el = fcm.el;
  const str = fcm.str;
  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function nonEmpty(o) { return isObject(o) && Object.keys(o).length > 0; }

  // A small inline SVG icon: `shapes` are [tag, attributes] pairs.
  function icon(cls, shapes, fill) {
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("class", "pv-icon " + cls);
    svg.setAttribute("aria-hidden", "true");
    for (const [tag, attrs] of shapes) {
      const s = document.createElementNS(SVG, tag);
      for (const k of Object.keys(attrs)) s.setAttribute(k, attrs[k]);
      svg.append(s);
    }
    if (fill) svg.style.color = fill;
    return svg;
  }
  const BELL = [["path", { d: "M12 22a2 2 0 0 0 2-2h-4a2 2 0 0 0 2 2zm6-6V11a6 6 0 0 0-5-5.9V4a1 1 0 0 0-2 0v1.1A6 6 0 0 0 6 11v5l-2 2v1h16v-1z", fill: "currentColor" }]];
  const PICTURE = [["rect", { x: "3", y: "5", width: "18", height: "14", rx: "2", fill: "none", stroke: "currentColor", "stroke-width": "1.5" }],
    ["circle", { cx: "9", cy: "10", r: "1.8", fill: "currentColor" }],
    ["path", { d: "M4 18l5-5 3 3 3-4 5 6z", fill: "currentColor" }]];
  const SPEAKER = [["path", { d: "M4 9v6h4l5 4V5L8 9zm12.5 3a4.5 4.5 0 0 0-2.5-4v8a4.5 4.5 0 0 0 2.5-4z", fill: "currentColor" }]];
  const GLOBE = [["circle", { cx: "12", cy: "12", r: "9", fill: "none", stroke: "currentColor", "stroke-width": "1.5" }],
    ["path", { d: "M3 12h18M12 3c3 3.5 3 14.5 0 18M12 3c-3 3.5-3 14.5 0 18", fill: "none", stroke: "currentColor", "stroke-width": "1.5" }]];
  const APP = [["rect", { x: "4", y: "4", width: "16", height: "16", rx: "4", fill: "currentColor" }]];

  // As a phone says it: "now", "5m", "2h", else the day.
  function shortAgo(at) {
    const t = Date.parse(at);
    if (isNaN(t)) return at;
    const s = Math.max(0, (Date.now() - t) / 1000);
    if (s < 60) return "now";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 86400) return Math.floor(s / 3600) + "h";
    return at.slice(0, 10);
  }
  function statusBadge(status) {
    const s = str(status) || "unknown";
    return el("span", s, "pv-status pv-status-" + (STATUSES.includes(s) ? s : "other"));
  }
  // Localised text: the key and its arguments, as the app's string table would receive them.
  function locLine(key, args, cls) {
    const line = el("div", null, cls + " pv-loc");
    line.append(el("span", "loc", "pv-loc-tag"), el("span", key, "pv-loc-key"));
    let list = args;
    if (typeof list === "string") { try { list = JSON.parse(list); } catch (e) { list = [list]; } }
    if (list !== undefined && list !== null) {
      const a = el("span", null, "pv-loc-args");
      for (const x of Array.isArray(list) ? list : [list]) a.append(el("span", str(x), "pv-loc-arg"));
      line.append(a);
    }
    return line;
  }
  // A text line, or the localised key standing in for it; null when there is neither.
  function textLine(text, key, args, cls) {
    if (key !== undefined && key !== null && key !== "") return locLine(str(key), args, cls);
    if (text === undefined || text === null || text === "") return null;
    return el("div", str(text), cls);
  }
  function imageArea(url) {
    const box = el("div", null, "pv-image");
    box.append(icon("pv-picture", PICTURE), el("span", str(url), "pv-image-url"));
    box.title = "image (not fetched)";
    return box;
  }
  function dataList(data) {
    const dl = el("dl", null, "pv-data");
    for (const k of Object.keys(data)) dl.append(el("dt", k), el("dd", str(data[k])));
    return dl;
  }
  function shell(platform, kind, info, entry) {
    const c = el("article", null, "pv-card pv-" + platform + " pv-kind-" + kind);
    c.dataset.platform = platform;
    c.dataset.kind = kind;
    if (entry.message_id) c.dataset.messageId = entry.message_id;
    const head = el("div", null, "pv-head");
    c.append(head);
    return { card: c, head };
  }
  function headTail(head, info, entry) {
    if (entry.accepted_at) {
      // The time of day, as a phone shows it; the whole timestamp on hover.
      const at = str(entry.accepted_at);
      const t = el("time", shortAgo(at), "pv-time");
      t.dateTime = at;
      t.title = at;
      head.append(t);
    }
    head.append(statusBadge(info.status || entry.status));
  }

  function androidCard(eff, info, entry) {
    const n = isObject(eff.notification) ? eff.notification : {};
    const color = /^#[0-9a-fA-F]{6}$/.test(str(n.color)) ? n.color : null;
    const { card, head } = shell("android", "notification", info, entry);
    head.append(icon("pv-small-icon", BELL, color), el("span", info.app || "app", "pv-app"));
    const channel = n.channel_id || n.android_channel_id;
    headTail(head, info, entry);
    if (color) card.style.setProperty("--pv-accent", color);
    const title = textLine(n.title, n.title_loc_key, n.title_loc_args, "pv-title");
    const body = textLine(n.body, n.body_loc_key, n.body_loc_args, "pv-body");
    if (title) card.append(title);
    if (body) card.append(body);
    if (n.image) card.append(imageArea(n.image));
    const meta = [];
    if (channel) meta.push("channel " + str(channel));
    if (n.sound) meta.push("sound " + str(n.sound));
    if (n.click_action) meta.push("click " + str(n.click_action));
    if (n.tag) meta.push("tag " + str(n.tag));
    if (meta.length) card.append(el("div", meta.join(" · "), "pv-meta"));
    if (nonEmpty(eff.data)) card.append(dataList(eff.data));
    return card;
  }

  function iosCard(eff, info, entry) {
    const payload = isObject(eff.apns && eff.apns.payload) ? eff.apns.payload : {};
    const aps = isObject(payload.aps) ? payload.aps : {};
    const alert = typeof aps.alert === "string" ? { body: aps.alert } : (isObject(aps.alert) ? aps.alert : {});
    const { card, head } = shell("ios", "notification", info, entry);
    const appName = info.app || "app";
    // The app's icon: its initial on the system's blue (no image is fetched).
    const ios = el("div", (appName.split(".").pop() || "a").slice(0, 1).toUpperCase(), "pv-ios-icon");
    ios.setAttribute("aria-hidden", "true");
    card.insertBefore(ios, head);
    head.append(icon("pv-app-icon", APP), el("span", appName.split(".").pop() || appName, "pv-app"));
    head.title = appName;
    headTail(head, info, entry);
    const title = textLine(alert.title, alert["title-loc-key"], alert["title-loc-args"], "pv-title");
    const subtitle = textLine(alert.subtitle, alert["subtitle-loc-key"], alert["subtitle-loc-args"], "pv-subtitle");
    const body = textLine(alert.body, alert["loc-key"], alert["loc-args"], "pv-body");
    for (const line of [title, subtitle, body]) if (line) card.append(line);
    const image = isObject(payload.fcm_options) ? payload.fcm_options.image : null;
    if (image) card.append(imageArea(image));
    const foot = el("div", null, "pv-meta");
    if (aps.badge !== undefined && aps.badge !== null) foot.append(el("span", str(aps.badge), "pv-badge"));
    if (aps.sound) {
      const s = el("span", null, "pv-sound");
      s.append(icon("pv-speaker", SPEAKER), el("span", str(isObject(aps.sound) ? aps.sound.name : aps.sound)));
      foot.append(s);
    }
    if (aps.category) foot.append(el("span", "category " + str(aps.category)));
    if (foot.childNodes.length) card.append(foot);
    const data = appData(payload);
    if (nonEmpty(data)) card.append(dataList(data));
    return card;
  }
  // The keys an iOS app reads beside `aps` (the FCM helper's fcm_options aside).
  function appData(payload) {
    const data = {};
    for (const k of Object.keys(payload)) if (k !== "aps" && k !== "fcm_options") data[k] = payload[k];
    return data;
  }

  function webCard(eff, info, entry) {
    const w = eff.webpush || {};
    const n = isObject(w.notification) ? w.notification : {};
    const { card, head } = shell("web", "notification", info, entry);
    head.append(icon("pv-globe", GLOBE), el("span", info.app || "web app", "pv-app"));
    headTail(head, info, entry);
    const link = w.fcm_options && w.fcm_options.link;
    let origin = "";
    try { origin = link ? new URL(str(link)).host : ""; } catch (e) { origin = ""; }
    card.append(el("div", (origin || info.app || "web app") + " · via the browser", "pv-origin"));
    const row = el("div", null, "pv-web-row");
    const ic = el("div", null, "pv-web-icon");
    ic.append(icon("pv-picture", PICTURE));
    if (n.icon) ic.title = "icon " + str(n.icon);
    const texts = el("div", null, "pv-web-texts");
    const title = textLine(n.title, null, null, "pv-title");
    const body = textLine(n.body, null, null, "pv-body");
    if (title) texts.append(title);
    if (body) texts.append(body);
    row.append(ic, texts);
    card.append(row);
    if (n.image) card.append(imageArea(n.image));
    if (link) card.append(el("div", "↗ " + str(link), "pv-link"));
    // The notification's action buttons, as the browser draws them (and its own "Settings").
    const acts = el("div", null, "pv-web-actions");
    for (const a of Array.isArray(n.actions) ? n.actions.slice(0, 2) : []) {
      if (a && typeof a === "object") acts.append(el("span", str(a.title || a.action), "pv-web-action"));
    }
    acts.append(el("span", "Settings", "pv-web-action"));
    card.append(acts);
    if (nonEmpty(w.data)) card.append(dataList(w.data));
    return card;
  }

  // A Web Push body the browser would not decrypt: the service worker never sees it; the card
  // says why (the entry's `webpush.decrypt_error`).
  function undecryptableCard(w, info, entry) {
    const { card, head } = shell("web", "undecryptable", info, entry);
    head.append(el("span", "undecryptable", "pv-kind-label"), el("span", info.app || "web app", "pv-app"));
    headTail(head, info, entry);
    card.append(el("div", "the browser could not decrypt this push", "pv-title"), el("div", str(w.decrypt_error), "pv-body"));
    return card;
  }

  // A push relayed to a real browser (autopush): the mock has no key to read it; the card says so
  // with the ciphertext's size (the entry's `webpush.relayed`).
  function relayedCard(w, info, entry) {
    const { card, head } = shell("web", "relayed", info, entry);
    head.append(el("span", "push message", "pv-kind-label"), el("span", info.app || "web app", "pv-app"));
    headTail(head, info, entry);
    const size = typeof w.ciphertext_bytes === "number" ? w.ciphertext_bytes + " bytes" : "";
    card.append(el("div", "encrypted for the browser: relayed unread", "pv-title pv-relayed"),
                el("div", (size ? size + " of " : "") + str(w.content_encoding || "no body") + ", decrypted by the browser alone", "pv-body"));
    return card;
  }

  // An APNs body that is no JSON object: the phone cannot show it; the card says why and shows
  // the body as it came (the entry's `effective.apns.raw_body`, or `body_base64`).
  function undeliverableCard(a, info, entry) {
    const { card, head } = shell("ios", "undeliverable", info, entry);
    head.append(el("span", "undeliverable", "pv-kind-label"), el("span", info.app || "iOS app", "pv-app"));
    headTail(head, info, entry);
    card.append(el("div", str(entry.error_detail || "undeliverable: payload is not a JSON object"), "pv-title"),
                el("div", typeof a.raw_body === "string" ? a.raw_body : "base64: " + str(a.body_base64), "pv-body"));
    return card;
  }

  function dataCard(platform, data, info, entry, label) {
    const { card, head } = shell(platform, "data", info, entry);
    head.append(el("span", label || "data message", "pv-kind-label"), el("span", info.app || platform, "pv-app"));
    headTail(head, info, entry);
    if (nonEmpty(data)) card.append(dataList(data));
    else card.append(el("div", "(no data)", "pv-meta"));
    return card;
  }

  // Whether the platform's payload shows the user anything, and the data it carries otherwise.
  function shown(eff) {
    if (eff.platform === "ios") {
      const p = isObject(eff.apns && eff.apns.payload) ? eff.apns.payload : {};
      const aps = isObject(p.aps) ? p.aps : {};
      const alert = aps.alert;
      const visible = (typeof alert === "string" && alert !== "") || nonEmpty(alert) ||
        (aps.badge !== undefined && aps.badge !== null) || !!aps.sound;
      return { visible, data: appData(p) };
    }
    if (eff.platform === "web") {
      const w = eff.webpush || {};
      return { visible: nonEmpty(w.notification), data: w.data };
    }
    return { visible: nonEmpty(eff.notification), data: eff.data };
  }

  /// The entry (or its bare `effective`) drawn as its device shows it.
  /// info: {platform, app, status}; the entry's own status is used when info has none.
  function card(effectiveOrEntry, info) {
    const given = effectiveOrEntry || {};
    const entry = "effective" in given || "message_id" in given || "message_type" in given ? given : { effective: given };
    const i = Object.assign({}, info || {});
    if (!i.status) i.status = entry.status;
    return withEncrypted(face(entry, i), entry);
  }

  // An FCM registration's delivery (real-clients.md): below its face, the JSON the mock encrypted
  // for the registration's keys (the entry's `client_delivery.plaintext`), as the client decrypts it.
  function withEncrypted(c, entry) {
    const cd = isObject(entry.client_delivery) ? entry.client_delivery : null;
    if (!c || !cd || cd.plaintext === null || cd.plaintext === undefined) return c;
    const box = el("div", null, "pv-encrypted");
    box.append(el("div", "encrypted by the mock (" + str(cd.encryption || "aesgcm") + ") for the registration's keys:", "pv-meta"),
               el("pre", JSON.stringify(cd.plaintext, null, 1), "pv-json"));
    c.append(box);
    return c;
  }

  function face(entry, i) {
    const eff = isObject(entry.effective) ? entry.effective : null;
    const platform = (eff && eff.platform) || i.platform || "android";
    if (entry.message_type === "deleted_messages" || !eff) {
      const c = dataCard(platform, null, i, entry, "deleted messages");
      c.lastChild.textContent = "the device was offline too long: " + str(entry.total_deleted) + " messages deleted";
      return c;
    }
    const w = isObject(entry.webpush) ? entry.webpush : null;
    if (w && w.decrypt_error) return undecryptableCard(w, i, entry);
    if (w && w.relayed) return relayedCard(w, i, entry);
    if (isObject(eff.apns) && eff.apns.payload === null) return undeliverableCard(eff.apns, i, entry);
    const s = shown(eff);
    // A push whose plaintext is no notification: the service worker gets the text.
    if (!s.visible && w && typeof w.plaintext === "string") return dataCard("web", { plaintext: w.plaintext }, i, entry, "push message");
    if (!s.visible) return dataCard(platform, isObject(s.data) ? s.data : entry.data, i, entry);
    if (platform === "ios") return iosCard(eff, i, entry);
    if (platform === "web") return webCard(eff, i, entry);
    return androidCard(eff, i, entry);
  }

  fcm.previews = { card };
})();
