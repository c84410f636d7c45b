(function () {
"use strict";
// Sends that did not come through FCM: Apple's provider API (`transport: "apns"`, docs/apns.md)
// and the Web Push protocol (`transport: "webpush"`, docs/webpush.md). How such a record reads in the message list (its line) and in the detail (Summary, Request,
// Answer); page.js and detail.js ask here first and fall back to FCM's reading. Every value
// becomes text.
const fcm = window.fcm = window.fcm || {};
const el = fcm.el;
const str = fcm.str;
function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

// Apple's request headers, in the order the detail lists them.
const APNS_HEADERS = ["apns-push-type", "apns-topic", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id"];

// The record's `apns` block (null for a refused send: nothing of it was read).
function apnsBlock(m) { return m && m.transport === "apns" && isObject(m.apns) ? m.apns : null; }

// A text, or the localised key standing in for it as the list says it: `loc KEY(arg, arg)`.
function alertText(alert, key, locKey) {
  if (alert[key] !== undefined && alert[key] !== null && alert[key] !== "") return str(alert[key]);
  if (!alert[locKey]) return "";
  const args = alert[locKey.replace(/key$/, "args")];
  return "loc " + str(alert[locKey]) + (Array.isArray(args) && args.length ? "(" + args.map(str).join(", ") + ")" : "");
}
// What an APNs notification says: `title — body` from `aps.alert` (a string is the body; the
// subtitle joins the title), else what kind of push it is. Null when the record has no payload.
function apnsGist(m) {
  const a = apnsBlock(m);
  if (!a) return null;
  if (a.payload === null) return { text: str(m.error_detail || "undeliverable: payload is not a JSON object"), cls: "undeliverable" };
  const payload = isObject(a.payload) ? a.payload : {};
  const aps = isObject(payload.aps) ? payload.aps : {};
  const alert = typeof aps.alert === "string" ? { body: aps.alert } : isObject(aps.alert) ? aps.alert : {};
  const title = [alertText(alert, "title", "title-loc-key"), alertText(alert, "subtitle", "subtitle-loc-key")].filter(Boolean).join(" · ");
  const body = alertText(alert, "body", "loc-key");
  if (title || body) return { text: title && body ? title + " — " + body : title || body, cls: "" };
  const extra = [];
  if (aps.badge !== undefined && aps.badge !== null) extra.push("badge " + str(aps.badge));
  if (aps.sound) extra.push("sound " + str(isObject(aps.sound) ? aps.sound.name : aps.sound));
  if (extra.length) return { text: extra.join(" · "), cls: "" };
  const type = isObject(a.headers) ? a.headers["apns-push-type"] : null;
  if (aps["content-available"] === 1) return { text: "silent (content-available)", cls: "muted" };
  return { text: (type ? type + " push" : "push") + " with no alert", cls: "muted" };
}

// The APNs device token of each device (by its FCM token), read once per device: a record names
// its recipient by the FCM token, the app server knew the device by its APNs one.
const apnsTokens = new Map();
function remember(device) {
  if (device && device.token && device.apns_token) apnsTokens.set(device.token, device.apns_token);
}
async function apnsTokenOf(token) {
  if (!apnsTokens.has(token)) {
    apnsTokens.set(token, fcm.api("/devices/" + encodeURIComponent(token)).then(d => d && d.apns_token || null, () => null));
  }
  const t = await apnsTokens.get(token);
  apnsTokens.set(token, t);
  return t;
}
// The list's target cell of an APNs send: the device's APNs token (shortened, whole on hover),
// filled in once it is known. False for any other send.
function apnsTarget(m, td, n) {
  if (!m || m.transport !== "apns") return false;
  const t = m.target || {};
  const show = apns => { td.textContent = fcm.short(apns, n); td.title = apns; td.dataset.apnsToken = apns; };
  // A refused send to a token no device has keeps the token as it was sent.
  if (t.kind === "apns_token" && t.value) {
    show(t.value);
    td.title = t.value + " (no device has this APNs token)";
    return true;
  }
  const token = t.kind === "token" && t.value ? t.value : (m.recipients && m.recipients[0] && m.recipients[0].token);
  if (!token) {
    td.textContent = "(no device token)";
    td.title = "the request named no device token";
    td.classList.add("muted");
    return true;
  }
  const known = apnsTokens.get(token);
  if (typeof known === "string") { show(known); return true; }
  td.textContent = fcm.short(token, n);
  td.title = token;
  apnsTokenOf(token).then(apns => { if (apns) show(apns); });
  return true;
}

// Summary facts of an APNs send: the device token, the environment, what authorized it.
function apnsSummary(m) {
  const a = apnsBlock(m);
  if (!a) return [];
  const by = a.key_id ? "provider token, key " + str(a.key_id) : a.certificate_id ? "client certificate " + str(a.certificate_id) : "";
  return [["APNs environment", a.environment], ["authorized by", by]];
}
// The device's APNs token, for the Summary (after the FCM token it has on the record).
async function apnsSummaryToken(m, dl) {
  const token = m.target && m.target.kind === "token" ? m.target.value : null;
  if (m.transport !== "apns" || !token) return;
  const apns = await apnsTokenOf(token);
  if (!apns) return;
  // After the record's target (the device's FCM token).
  const target = [...dl.querySelectorAll("dt")].find(dt => dt.textContent === "target");
  const after = target ? target.nextElementSibling : null;
  const pair = [el("dt", "APNs device token"), el("dd", apns, "mono")];
  if (after) after.after(...pair); else dl.prepend(...pair);
}

function facts(parent, pairs) {
  const dl = el("dl", null, "facts");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.append(el("dt", k), el("dd", str(v)));
  }
  parent.append(dl);
  return dl;
}
// `apns-expiration` with its time: seconds since 1970 on the mock's clock.
function expiration(v) {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) return v === "0" ? "0 (deliver now or never)" : v;
  return v + " (" + new Date(n * 1000).toISOString().replace(".000Z", "Z") + ")";
}
// The Request tab of an APNs send: Apple's headers (with the defaults the mock filled in), the
// other headers kept, and the payload. False for any other send.
function apnsRequest(m, box, pretty) {
  if (!m || m.transport !== "apns") return false;
  const a = apnsBlock(m);
  box.append(el("h4", "Apple's headers"));
  if (a && isObject(a.headers)) {
    const h = a.headers;
    facts(box, APNS_HEADERS.map(k => [k, k === "apns-expiration" && h[k] !== undefined ? expiration(str(h[k])) : h[k]]));
  } else {
    box.append(el("p", "not kept: the send was refused before its headers were read into a notification", "muted"));
  }
  if (m.headers && Object.keys(m.headers).length) {
    box.append(el("h4", "other headers"));
    facts(box, Object.entries(m.headers));
  }
  if (a && a.payload === null) {
    // No JSON object: the body as it came, text or base64 (undeliverable).
    box.append(el("h4", "payload as sent (not a JSON object: undeliverable)"));
    box.append(el("pre", typeof a.raw_body === "string" ? a.raw_body : "base64: " + str(a.body_base64), "body"));
  } else if (a && a.payload !== undefined) {
    box.append(el("h4", "payload"));
    box.append(el("pre", JSON.stringify(a.payload, null, 2), "body"));
  } else if (m.raw_body) {
    box.append(el("h4", "payload as sent"));
    box.append(el("pre", pretty(m.raw_body), "body"));
  }
  return true;
}
// The Answer tab of an APNs send: the status, the `apns-id`, and Apple's reason. False for any
// other send.
function apnsAnswer(m, box, pretty) {
  if (!m || m.transport !== "apns") return false;
  const a = apnsBlock(m);
  const ans = m.answer || {};
  let reason = null, timestamp = null;
  try { const b = JSON.parse(ans.body || ""); if (isObject(b)) { reason = b.reason; timestamp = b.timestamp; } } catch (e) { /* no body */ }
  const status = ans.status === undefined || ans.status === null ? m.http_status : ans.status;
  facts(box, [["status", status === 0 ? "none: the connection was closed without an answer" : status],
              ["apns-id", a && isObject(a.headers) ? a.headers["apns-id"] : null],
              ["reason", reason || (status === 200 ? "none: accepted (200 has no body)" : m.error)],
              ["timestamp", timestamp], ["content type", ans.content_type]]);
  if (ans.body) box.append(el("pre", pretty(ans.body), "body answer"));
  return true;
}

// Web Push: the record's `webpush` member (null for a refused push: nothing of it was read).
function webpushBlock(m) { return m && m.transport === "webpush" && isObject(m.webpush) ? m.webpush : null; }
// The plaintext as JSON, when it is a JSON object.
function plainObject(w) {
  if (typeof w.plaintext !== "string") return null;
  try { const o = JSON.parse(w.plaintext); return isObject(o) ? o : null; } catch (e) { return null; }
}
// What a push says: "undecryptable: why", `title — body` when the plaintext is JSON with them,
// else the plaintext's start (on one line). Null when the record has no `webpush` member.
function webpushGist(m) {
  const w = webpushBlock(m);
  if (!w) return null;
  if (w.decrypt_error) return { text: "undecryptable: " + str(w.decrypt_error), cls: "undecryptable" };
  if (w.relayed) return { text: "encrypted for the browser: relayed unread", cls: "muted" };
  const n = isObject(w.notification) ? w.notification : plainObject(w) || {};
  const title = n.title ? str(n.title) : "", body = n.body ? str(n.body) : "";
  if (title || body) return { text: title && body ? title + " — " + body : title || body, cls: "" };
  if (typeof w.plaintext === "string" && w.plaintext !== "") return { text: w.plaintext.replace(/\s+/g, " ").slice(0, 200), cls: "" };
  if (w.plaintext_base64) return { text: "binary plaintext (" + str(w.plaintext_base64).length + " base64url characters)", cls: "muted" };
  return { text: w.content_encoding ? "(empty plaintext)" : "(no body: a push with nothing to decrypt)", cls: "muted" };
}
function webpushSummary(m) {
  const w = webpushBlock(m);
  if (!w) return [];
  const v = isObject(w.vapid) ? w.vapid : null;
  return [["VAPID subject", v ? v.subject : "none: an unsigned push"], ["decrypted", w.relayed ? "no: relayed unread to the browser, which holds the key" : w.decrypt_error ? "no: " + str(w.decrypt_error) : w.content_encoding ? "yes" : "no body"]];
}
// The Request tab of a push: its headers (TTL as kept, Urgency, Topic), VAPID, the encoding, the
// ciphertext's size, the other headers kept, and the plaintext (or why there is none). False for
// any other send.
function webpushRequest(m, box, pretty) {
  if (!m || m.transport !== "webpush") return false;
  const w = webpushBlock(m);
  box.append(el("h4", "push headers"));
  if (w) {
    const h = isObject(w.headers) ? w.headers : {};
    facts(box, [["TTL", h.TTL], ["Urgency", h.Urgency], ["Topic", h.Topic]]);
    const v = isObject(w.vapid) ? w.vapid : null;
    box.append(el("h4", "VAPID"));
    if (v) facts(box, [["subject", v.subject], ["key", v.key], ["scheme", v.scheme]]);
    else box.append(el("p", "none: the push was not signed", "muted"));
    box.append(el("h4", "body"));
    facts(box, [["content encoding", w.content_encoding || "none (no body)"],
                ["ciphertext", typeof w.ciphertext_bytes === "number" ? w.ciphertext_bytes + " bytes" : null]]);
  } else {
    box.append(el("p", "not kept: the push was refused before it was read", "muted"));
  }
  if (m.headers && Object.keys(m.headers).length) {
    box.append(el("h4", "other headers"));
    facts(box, Object.entries(m.headers));
  }
  if (w && w.relayed) {
    // Relayed to a real browser: the mock never reads it; the body as received.
    box.append(el("h4", "plaintext"));
    box.append(el("p", "encrypted for the browser: relayed unread", "muted relayed"));
    if (w.ciphertext_base64) {
      box.append(el("h4", "ciphertext (base64url)"));
      box.append(el("pre", str(w.ciphertext_base64), "body ciphertext"));
    }
  } else if (w && w.decrypt_error) {
    box.append(el("h4", "plaintext"));
    box.append(el("p", "undecryptable: " + str(w.decrypt_error), "undecryptable"));
    // The body as received, to take apart.
    if (w.ciphertext_base64) {
      box.append(el("h4", "ciphertext (base64url)"));
      box.append(el("pre", str(w.ciphertext_base64), "body ciphertext"));
    }
  } else if (w && typeof w.plaintext === "string") {
    box.append(el("h4", "plaintext"));
    box.append(el("pre", plainObject(w) ? pretty(w.plaintext) : w.plaintext, "body plaintext"));
  } else if (w && w.plaintext_base64) {
    box.append(el("h4", "plaintext (not UTF-8: base64url)"));
    box.append(el("pre", str(w.plaintext_base64), "body plaintext"));
  }
  return true;
}

fcm.pushes = {
  gist: m => apnsGist(m) || webpushGist(m),
  target: apnsTarget,
  summary: m => apnsSummary(m).concat(webpushSummary(m)),
  summaryToken: apnsSummaryToken,
  request: (m, box, pretty) => apnsRequest(m, box, pretty) || webpushRequest(m, box, pretty),
  answer: apnsAnswer,
  remember,
};
})();
