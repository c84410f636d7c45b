(function () {
"use strict";
// What every part of the page shares, loaded first: building elements (values only ever become
// text), showing any value as a string, and asking for key=value pairs.
const fcm = window.fcm = window.fcm || {};

// An element with `text` as its text (never parsed as HTML) and `cls` as its class.
fcm.el = function (tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
};

// A string as it is; anything else as JSON; nothing as "".
fcm.str = function (v) {
  return typeof v === "string" ? v : (v === undefined || v === null ? "" : JSON.stringify(v));
};

// Asks for upstream data as `key=value` pairs separated by commas: the object, or null when cancelled.
fcm.askPairs = function () {
  const text = prompt("Upstream data as key=value pairs separated by commas", "hello=world");
  if (text === null) return null;
  const data = {};
  for (const pair of text.split(",")) {
    const i = pair.indexOf("=");
    if (i > 0) data[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  return data;
};
})();
