// Compose: send a test message from the page, over the legacy HTTP JSON API (with the project's
// own server key) or HTTP v1 (with an access token the control API mints for the project), and
// show the answer exactly as an app server gets it: status, content type, body pretty and raw.
// Every value from the server goes on the page as text (textContent, option text, input value).
(function () {
  "use strict";
  const fcm = window.fcm = window.fcm || {};

  const api = fcm.api;
  const el = fcm.el;
  function field(label, control, cls) {
    const l = el("label", null, cls || "compose-field");
    l.append(el("span", label), control);
    return l;
  }
  function input(id, placeholder) {
    const i = el("input");
    i.id = id;
    i.autocomplete = "off";
    if (placeholder) i.placeholder = placeholder;
    return i;
  }
  function select(id, options) {
    const s = el("select");
    s.id = id;
    for (const [value, text] of options) s.append(new Option(text, value));
    return s;
  }
  function textarea(id, placeholder) {
    const t = el("textarea");
    t.id = id;
    t.rows = 3;
    t.spellcheck = false;
    t.placeholder = placeholder;
    return t;
  }

  // -- the form ---------------------------------------------------------------------------------
  let section = document.getElementById("compose");
  if (!section) {
    section = document.createElement("section");
    section.id = "compose";
    const main = document.querySelector("main") || document.body;
    main.prepend(section);
  }
  section.hidden = true;
  section.setAttribute("aria-label", "compose a test message");
  const toggle = el("button", "compose", "compose-toggle");
  toggle.id = "compose-toggle";
  toggle.type = "button";
  toggle.setAttribute("aria-expanded", "false");
  toggle.setAttribute("aria-controls", "compose");
  const header = document.querySelector("header");
  const live = document.getElementById("live");
  if (header && live && live.parentNode === header) header.insertBefore(toggle, live);
  else (header || document.body).append(toggle);

  const protocol = select("compose-protocol", [["legacy", "legacy HTTP (JSON)"], ["v1", "HTTP v1"]]);
  const project = select("compose-project", []);
  const kind = select("compose-kind", [["token", "device token"], ["topic", "topic"], ["condition", "condition"]]);
  const target = input("compose-target", "registration token");
  target.setAttribute("aria-label", "target");
  const devices = el("datalist");
  devices.id = "compose-devices";
  target.setAttribute("list", devices.id);
  const title = input("compose-title", "notification title");
  const body = input("compose-body", "notification body");
  const dataRows = el("div", null, "compose-kv-list");
  dataRows.id = "compose-data";
  const addData = el("button", "+ data", "compose-add");
  addData.type = "button";
  const platform = {};
  const v1Only = el("div", null, "compose-v1");
  for (const name of ["android", "apns", "webpush"]) {
    platform[name] = textarea("compose-" + name, name + " (JSON object, optional)");
    const f = field(name, platform[name], "compose-field compose-json");
    f.append(el("span", "", "compose-invalid"));
    v1Only.append(f);
  }
  const dry = el("input");
  dry.type = "checkbox";
  dry.id = "compose-dry";
  const dryLabel = el("label", null, "compose-check");
  const dryText = el("span", "dry run");
  dryLabel.append(dry, dryText);
  const auth = input("compose-auth", "blank: the project's own key / a minted access token");
  const send = el("button", "send", "compose-send");
  send.id = "compose-send";
  send.type = "submit";
  const problem = el("div", "", "compose-problem");
  problem.id = "compose-problem";
  problem.setAttribute("role", "alert");
  const answer = el("div", null, "compose-answer");
  answer.id = "compose-answer";
  answer.setAttribute("aria-live", "polite");

  const form = el("form");
  form.noValidate = true;
  const row1 = el("div", null, "compose-row");
  row1.append(field("protocol", protocol), field("project", project), field("target", kind),
              field("", target, "compose-field compose-wide"));
  const row2 = el("div", null, "compose-row");
  row2.append(field("title", title), field("body", body, "compose-field compose-wide"));
  const dataBox = el("div", null, "compose-row compose-data");
  dataBox.append(el("span", "data", "compose-label"), dataRows, addData);
  const row4 = el("div", null, "compose-row");
  row4.append(dryLabel, field("Authorization", auth, "compose-field compose-wide"), send);
  form.append(row1, row2, dataBox, v1Only, row4, problem);
  section.append(el("h2", "Compose a test message"), form, devices, answer);

  function addDataRow(k, v) {
    const row = el("div", null, "compose-kv");
    const key = el("input", null, "compose-k");
    key.placeholder = "key";
    key.value = k || "";
    const value = el("input", null, "compose-v");
    value.placeholder = "value";
    value.value = v || "";
    const remove = el("button", "×", "compose-remove");
    remove.type = "button";
    remove.setAttribute("aria-label", "remove this data pair");
    remove.addEventListener("click", () => row.remove());
    row.append(key, value, remove);
    dataRows.append(row);
    return row;
  }
  addData.addEventListener("click", () => addDataRow().querySelector("input").focus());
  addDataRow();

  function protocolChanged() {
    const v1 = protocol.value === "v1";
    v1Only.hidden = !v1;
    dryText.textContent = v1 ? "validate_only" : "dry_run";
  }
  function kindChanged() {
    target.placeholder = { token: "registration token", topic: "topic name", condition: "'a' in topics && 'b' in topics" }[kind.value];
    if (kind.value === "token") target.setAttribute("list", devices.id); else target.removeAttribute("list");
  }
  protocol.addEventListener("change", protocolChanged);
  kind.addEventListener("change", kindChanged);
  protocolChanged();
  kindChanged();

  // -- projects and their devices -----------------------------------------------------------------
  const projects = new Map();
  async function loadProjects() {
    let page;
    try { page = await api("/projects?limit=1000"); } catch (e) { problem.textContent = String(e.message || e); return; }
    const chosen = project.value;
    projects.clear();
    project.textContent = "";
    for (const p of page.items || []) {
      projects.set(p.sender_id, p);
      project.append(new Option(p.project_id + " (" + p.sender_id + ")", p.sender_id));
    }
    if (projects.has(chosen)) project.value = chosen;
    loadDevices();
  }
  async function loadDevices() {
    const sender = project.value;
    if (!sender) return;
    let page;
    try { page = await api("/devices?state=registered&limit=200&sender_id=" + encodeURIComponent(sender)); } catch (e) { return; }
    devices.textContent = "";
    for (const d of page.items || []) devices.append(new Option(d.app + " · " + d.platform + (d.online ? "" : " · offline"), d.token));
  }
  project.addEventListener("change", loadDevices);
  target.addEventListener("focus", () => { if (kind.value === "token") loadDevices(); });
  toggle.addEventListener("click", () => {
    section.hidden = !section.hidden;
    toggle.setAttribute("aria-expanded", String(!section.hidden));
    if (!section.hidden) { loadProjects(); protocol.focus(); }
  });

  // -- building the request ---------------------------------------------------------------------
  class Invalid extends Error {}
  function data() {
    const d = {};
    for (const row of dataRows.querySelectorAll(".compose-kv")) {
      const k = row.querySelector(".compose-k").value;
      if (k !== "") d[k] = row.querySelector(".compose-v").value;
    }
    return d;
  }
  function notification() {
    const n = {};
    if (title.value !== "") n.title = title.value;
    if (body.value !== "") n.body = body.value;
    return Object.keys(n).length ? n : null;
  }
  // A platform block: blank is absent; anything else must be a JSON object, checked here.
  function platformBlock(name) {
    const box = platform[name];
    const note = box.parentNode.querySelector(".compose-invalid");
    note.textContent = "";
    box.removeAttribute("aria-invalid");
    const text = box.value.trim();
    if (text === "") return undefined;
    let v;
    try { v = JSON.parse(text); } catch (e) { v = e; }
    if (v instanceof Error || v === null || typeof v !== "object" || Array.isArray(v)) {
      note.textContent = v instanceof Error ? "not JSON: " + v.message : "must be a JSON object";
      box.setAttribute("aria-invalid", "true");
      throw new Invalid(name + " is not a JSON object");
    }
    return v;
  }
  function legacyRequest(p) {
    const m = {};
    const t = target.value.trim();
    if (kind.value === "token") m.to = t;
    else if (kind.value === "topic") m.to = "/topics/" + t.replace(/^\/topics\//, "");
    else m.condition = t;
    const d = data();
    if (Object.keys(d).length) m.data = d;
    const n = notification();
    if (n) m.notification = n;
    if (dry.checked) m.dry_run = true;
    const key = (p.server_keys || [])[0];
    if (!auth.value.trim() && !key) throw new Invalid("project " + p.project_id + " has no server key");
    return { path: "/fcm/send", body: m, authorization: auth.value.trim() || "key=" + key };
  }
  async function v1Request(p) {
    const m = {};
    m[kind.value] = target.value.trim();
    const d = data();
    if (Object.keys(d).length) m.data = d;
    const n = notification();
    if (n) m.notification = n;
    for (const name of ["android", "apns", "webpush"]) {
      const b = platformBlock(name);
      if (b !== undefined) m[name] = b;
    }
    const b = { message: m };
    if (dry.checked) b.validate_only = true;
    const path = "/v1/projects/" + encodeURIComponent(p.project_id) + "/messages:send";
    return { path, body: b, authorization: auth.value.trim() || "Bearer " + await accessToken(p) };
  }
  // Access tokens minted for the page, by sender id, reused for most of their hour.
  const tokens = new Map();
  async function accessToken(p, fresh) {
    const known = tokens.get(p.sender_id);
    if (!fresh && known && known.until > Date.now()) return known.token;
    const t = await api("/projects/" + encodeURIComponent(p.sender_id) + "/access-tokens", { method: "POST", body: "{}" });
    tokens.set(p.sender_id, { token: t.access_token, until: Date.now() + (t.expires_in - 60) * 1000 });
    return t.access_token;
  }
  // The credential as shown on the page: its start only.
  function masked(a) {
    const i = a.indexOf(a.startsWith("key=") ? "=" : " ");
    const secretPart = a.slice(i + 1);
    return a.slice(0, i + 1) + secretPart.slice(0, 8) + (secretPart.length > 8 ? "…" : "");
  }

  // -- sending and showing the answer -------------------------------------------------------------
  const reasons = { 200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                    413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable" };
  async function post(req) {
    const headers = { "Content-Type": "application/json", "Authorization": req.authorization };
    return fetch(req.path, { method: "POST", headers, body: JSON.stringify(req.body) });
  }
  // `raw` indented two spaces a level, or null if it is not JSON. It is re-spaced, never parsed
  // into numbers and back: a multicast id above 2^53 keeps every digit, strings keep their escapes.
  function prettyJSON(raw) {
    try { JSON.parse(raw); } catch (e) { return null; }
    let out = "", depth = 0, inString = false, escaped = false;
    const newline = () => "\n" + "  ".repeat(depth);
    for (let i = 0; i < raw.length; i++) {
      const c = raw[i];
      if (inString) {
        out += c;
        if (escaped) escaped = false;
        else if (c === "\\") escaped = true;
        else if (c === '"') inString = false;
        continue;
      }
      if (c === " " || c === "\t" || c === "\n" || c === "\r") continue;
      if (c === '"') { inString = true; out += c; }
      else if (c === "{" || c === "[") {
        let j = i + 1;
        while (j < raw.length && " \t\n\r".includes(raw[j])) j++;
        if (raw[j] === (c === "{" ? "}" : "]")) { out += c + raw[j]; i = j; continue; }
        depth++;
        out += c + newline();
      } else if (c === "}" || c === "]") { depth--; out += newline() + c; }
      else if (c === ",") out += "," + newline();
      else if (c === ":") out += ": ";
      else out += c;
    }
    return out;
  }
  async function show(req, r) {
    const raw = await r.text();
    answer.textContent = "";
    const sent = el("div", null, "compose-sent");
    sent.append(el("h3", "request"), el("pre", "POST " + req.path + "\nAuthorization: " + masked(req.authorization) +
      "\nContent-Type: application/json\n\n" + JSON.stringify(req.body, null, 2), "compose-request"));
    const got = el("div", null, "compose-got");
    const status = el("div", "HTTP " + r.status + " " + (r.statusText || reasons[r.status] || ""),
                      "compose-status " + (r.ok ? "accepted" : "rejected"));
    status.id = "compose-status";
    const type = el("div", "Content-Type: " + (r.headers.get("content-type") || "(none)"), "compose-type");
    type.id = "compose-type";
    got.append(el("h3", "answer"), status, type);
    const retry = r.headers.get("retry-after");
    if (retry !== null) got.append(el("div", "Retry-After: " + retry, "compose-type"));
    const pretty = prettyJSON(raw);
    if (pretty !== null) {
      const p = el("pre", pretty, "compose-pretty");
      p.id = "compose-pretty";
      got.append(el("h4", "body"), p);
    }
    const rawPre = el("pre", raw, "compose-raw");
    rawPre.id = "compose-raw";
    got.append(el("h4", "raw body"), rawPre);
    answer.append(got, sent);
  }
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    problem.textContent = "";
    const p = projects.get(project.value);
    if (!p) { problem.textContent = "choose a project"; return; }
    if (target.value.trim() === "") { problem.textContent = "the target is empty"; target.focus(); return; }
    send.disabled = true;
    try {
      const v1 = protocol.value === "v1";
      const req = v1 ? await v1Request(p) : legacyRequest(p);
      let r = await post(req);
      // A token minted earlier is gone after a reset: mint one again (only the page's own).
      if (v1 && r.status === 401 && !auth.value.trim()) {
        req.authorization = "Bearer " + await accessToken(p, true);
        r = await post(req);
      }
      await show(req, r);
    } catch (err) {
      problem.textContent = String(err.message || err);
    } finally {
      send.disabled = false;
    }
  });
  fcm.compose = { open: () => { if (section.hidden) toggle.click(); } };
})();
