(function () {
"use strict";
// The search language (docs/web-page.md, "Search"): `prefix:value` terms, words and "quoted
// phrases", a leading `-` to exclude. Filters are a flat object of the URL query's names (the
// link is the state): single values for the positive prefixes, comma-separated lists for the
// `not_…` ones, words and phrases joined by spaces in `text` / `not_text`. page.js owns the
// filters; this file turns text into them, them into chips, and them into the control API's query.
const fcm = window.fcm = window.fcm || {};

// prefix → URL name (the URL keeps the names the page has always used: `device` for a token,
// `project` for a sender id, `since`/`until` for times).
const PREFIXES = { token: "device", device: "device", topic: "topic", status: "status", error: "error",
                   transport: "transport", app: "app", project: "project", after: "since", before: "until", v1: "v1_name",
                   client: "client" };
const LABELS = { device: "token", topic: "topic", status: "status", error: "error", transport: "transport", app: "app",
                 project: "project", since: "after", until: "before", v1_name: "v1", client: "client", text: "" };
// Names that can be excluded, and the control API's name for each.
const NEGATABLE = ["device", "topic", "status", "error", "transport", "app", "project", "text"];
const API = { device: "token", project: "sender_id", v1_name: "v1_name", client: "client_kind" };
const STATUSES = ["accepted", "rejected", "failed", "delivered", "pending", "sent", "client_rejected", "expired", "collapsed", "replaced", "dropped", "undecryptable", "undeliverable", "deleted"];
const TRANSPORTS = { legacy: "http", http: "http", v1: "http_v1", http_v1: "http_v1", xmpp: "xmpp", apns: "apns", webpush: "webpush" };
// Every name the URL may carry for the message list (`q`: text typed but not yet made chips).
const NAMES = ["q", "project", "device", "topic", "status", "transport", "error", "since", "until", "app", "text", "v1_name", "client"]
  .concat(NEGATABLE.map(n => "not_" + n));

// Names that narrow only the page's other lists, not the messages: none now (`client` narrows the
// messages through `client_kind`, and the Devices and Clients lists: page.js, clients.js).
const PAGE_ONLY = [];

// What only a registration token (or an fid-sized id) looks like: no word is that long.
const TOKEN = /^[A-Za-z0-9_:-]{32,}$/;

// Splits search text into terms: [{neg, prefix, value}], a quoted phrase kept whole.
function lex(text) {
  const out = [];
  const re = /(-?)(?:([a-z_0-9]+):)?(?:"([^"]*)"?|(\S+))/gi;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m[0] === "") { re.lastIndex++; continue; }
    const prefix = m[2] ? m[2].toLowerCase() : null;
    const quoted = m[3] !== undefined;
    let value = quoted ? m[3] : m[4];
    if (prefix && !(prefix in PREFIXES)) {
      // An unknown prefix is a word like any other (a URL typed in the box stays whole), and a
      // registration token (`<fid>:APA91b…`) one: typed whole with its leading "-", the token.
      const word = m[2] + ":" + value;
      if (m[1] === "-" && !quoted && TOKEN.test("-" + word)) { out.push({ neg: false, prefix: null, value: "-" + word, quoted }); continue; }
      out.push({ neg: m[1] === "-", prefix: null, value: word, quoted });
      continue;
    }
    if (value === "") continue;
    // `client:` alone: any real client.
    if (!prefix && !quoted && value.toLowerCase() === "client:") { out.push({ neg: m[1] === "-", prefix: "client", value: "any", quoted }); continue; }
    // A registration token may start with "-": one typed whole is the token (`-token:T` excludes one).
    if (m[1] === "-" && !prefix && !quoted && TOKEN.test("-" + value)) { out.push({ neg: false, prefix, value: "-" + value, quoted }); continue; }
    out.push({ neg: m[1] === "-", prefix, value, quoted });
  }
  return out;
}

// `10m`, `2h`, `30s`, `1d` ago, or a date and time: RFC 3339 UTC (whole seconds).
function when(value) {
  const rel = /^(\d+)\s*(s|m|h|d)$/i.exec(value);
  let t;
  if (rel) t = new Date(Date.now() - Number(rel[1]) * { s: 1e3, m: 6e4, h: 36e5, d: 864e5 }[rel[2].toLowerCase()]);
  else t = new Date(value);
  if (isNaN(t)) throw new Error("after: and before: take 30s, 10m, 2h, 1d (ago) or a date and time, not " + JSON.stringify(value));
  return t.toISOString().replace(/\.\d+Z$/, "Z");
}

// One term as [URL name, value], or throws a sentence saying what is wrong with it.
function resolve(term) {
  const v = term.value;
  if (!term.prefix) {
    // What can only be one thing: a topic path, a v1 name, a registration token.
    if (!term.quoted && !term.neg) {
      if (v.startsWith("/topics/") && v.length > 8) return ["topic", v.slice(8)];
      if (/^projects\/[^/]+\/messages\//.test(v)) return ["v1_name", v];
    }
    if (!term.quoted && TOKEN.test(v)) return ["device", v];
    return ["text", term.quoted ? '"' + v + '"' : v];
  }
  const name = PREFIXES[term.prefix];
  if (name === "status" && !STATUSES.includes(v.toLowerCase())) throw new Error("status: takes " + STATUSES.join(", "));
  if (name === "status") return [name, v.toLowerCase()];
  if (name === "transport") {
    const t = TRANSPORTS[v.toLowerCase()];
    if (!t) throw new Error("transport: takes legacy (http), v1 (http_v1), xmpp, apns or webpush");
    return [name, t];
  }
  if (name === "since" || name === "until") return [name, when(v)];
  if (name === "client") {
    // The kinds of real clients (clients.js), or `any`.
    const kinds = (fcm.clients && fcm.clients.KINDS) || ["autopush"];
    const k = v.toLowerCase();
    if (k !== "any" && !kinds.includes(k)) throw new Error("client: takes any (or nothing), or a kind: " + kinds.join(", "));
    return [name, k];
  }
  if (name === "topic") return [name, v.replace(/^\/topics\//, "")];
  return [name, v];
}

// A list value (`a,b`) as its items; words and phrases of a text as theirs.
function items(name, value) {
  if (!value) return [];
  if (name === "text" || name === "not_text") return value.match(/"[^"]*"|\S+/g) || [];
  return value.split(",").filter(Boolean);
}
function join(name, list) {
  return list.join(name === "text" || name === "not_text" ? " " : ",");
}

// `filters` with the terms of `text` added: a positive prefix replaces its value, words and
// exclusions add to theirs. Throws a sentence for a term it cannot take.
function apply(filters, text) {
  const f = Object.assign({}, filters);
  for (const term of lex(text)) {
    let [name, value] = resolve(term);
    if (term.neg && !NEGATABLE.includes(name)) {
      // Said, not taken the other way round.
      throw new Error("-" + (LABELS[name] || name) + ": cannot be excluded (these can: " +
                      NEGATABLE.map(n => "-" + (LABELS[n] || "word")).join(", ") + ")");
    }
    if (term.neg) name = "not_" + name;
    if (name === "text" || name.startsWith("not_")) {
      const list = items(name, f[name]);
      if (!list.includes(value)) list.push(value);
      f[name] = join(name, list);
    } else {
      f[name] = value;
    }
  }
  return f;
}

// The chips of `filters`: [{name, item, label}] in a steady order.
function chips(filters) {
  const out = [];
  for (const name of NAMES) {
    if (name === "q" || !filters[name]) continue;
    const neg = name.startsWith("not_");
    const base = neg ? name.slice(4) : name;
    for (const item of items(name, filters[name])) {
      let shown = item;
      if (base === "since" || base === "until") shown = item.replace("T", " ").replace("Z", " UTC");
      const prefix = LABELS[base];
      out.push({ name, item, label: (neg ? "-" : "") + (prefix ? prefix + ":" : "") + shown });
    }
  }
  return out;
}
// `filters` without one chip's item.
function without(filters, name, item) {
  const f = Object.assign({}, filters);
  const list = items(name, f[name]).filter(x => x !== item);
  if (list.length && (name === "text" || name.startsWith("not_"))) f[name] = join(name, list); else delete f[name];
  return f;
}

// The control API's query for `filters` (with the text typed but not yet made chips).
function params(filters, p) {
  let f = filters;
  if (f.q) { try { f = apply(without(f, "q"), f.q); } catch (e) { /* shown when Enter is pressed */ } }
  for (const name of NAMES) {
    if (name === "q" || !f[name] || PAGE_ONLY.includes(name)) continue;
    const neg = name.startsWith("not_");
    const base = neg ? name.slice(4) : name;
    const apiName = (neg ? "not_" : "") + (API[base] || base);
    p.set(apiName, f[name]);
  }
  return p;
}

// The filters as search text (for "No messages match …").
function describe(filters) { return chips(filters).map(c => c.label).join(" "); }

fcm.search = { NAMES, lex, apply, chips, without, params, describe, when };
})();
