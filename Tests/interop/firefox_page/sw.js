"use strict";
// Reports every push to the test (POST /report {"scope","text"}); the test waits for it there.
// A text starting with "throw" makes the handler throw once the report is under way (Firefox
// then nacks the push with code 301); one starting with "notify" shows a notification.
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", event => event.waitUntil(self.clients.claim()));

self.addEventListener("push", event => {
  const text = event.data ? event.data.text() : null;
  const report = fetch("/report", {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({scope: self.registration.scope, text}),
  });
  event.waitUntil(report);
  if (text !== null && text.startsWith("throw")) {
    throw new Error("the test asked this push handler to throw");
  }
  if (text !== null && text.startsWith("notify")) {
    event.waitUntil(self.registration.showNotification("fcm-mock interop", {body: text}));
  }
});
