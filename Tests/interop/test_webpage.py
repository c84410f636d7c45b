"""The web page at / in a real browser: headless Chromium from Debian, driven over the DevTools
protocol (--remote-debugging-pipe: JSON messages separated by NUL bytes on fds 3 and 4).

A message sent over HTTP must appear on the already-open page without a reload; payload strings
must render as text; the device buttons must change the device through the control API.
If Chromium is not installed the test fails: `make test` installs it.
"""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from mocksupport import KEY_A


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page, commanded over the DevTools pipe."""

    def __init__(self):
        binary = find_chromium()
        if binary is None:
            pytest.fail("Chromium is not installed (make test installs the Debian package 'chromium')",
                        pytrace=False)
        self.profile = tempfile.mkdtemp(prefix="fcm-mock-chromium-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def wire_fds():
            # Move both ends above 4 first, so neither dup2 overwrites the other.
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--no-proxy-server",
             "--user-data-dir=" + self.profile, "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds, pass_fds=(3, 4, to_child_r, from_child_w))
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None
        target = self.command("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.command("Page.enable")
        self.command("Runtime.enable")

    def command(self, method, params=None, timeout=20):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise AssertionError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            chunk = os.read(self.from_child, 1 << 16)
            if not chunk:
                raise AssertionError(f"Chromium closed the DevTools pipe during {method}")
            self.buffer += chunk
        raise AssertionError(f"no answer to {method} within {timeout}s")

    def eval(self, expression):
        r = self.command("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise AssertionError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout=15, what=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.eval(expression):
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what or expression}")

    def close(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            os.close(self.to_child)
            os.close(self.from_child)
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture
def browser():
    b = Browser()
    yield b
    b.close()


def test_page_shows_a_new_message_live_and_escapes_payloads(mock, browser):
    token = mock.create_device()
    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    browser.wait_for("document.getElementById('live') && document.getElementById('live').textContent === 'live'",
                     what="the event stream to connect")
    browser.wait_for(f"!!document.querySelector('#devices tr[data-token=\"{token}\"]')", what="the device list")
    # Markers that would not survive a reload, and an alert that must never fire.
    browser.eval("window.__sameDocument = true; window.__alerted = false; window.alert = () => { window.__alerted = true; }; 1")

    marker = "live-" + uuid.uuid4().hex[:12]
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    r = mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + KEY_A},
                      json={"to": token, "data": {"marker": marker, "html": hostile}}, timeout=10)
    assert r.status_code == 200 and r.json()["success"] == 1, r.text
    message_id = r.json()["results"][0]["message_id"]

    browser.wait_for(f"document.querySelector('#messages tbody').innerText.includes('{marker}')",
                     what="the message to appear without a reload")
    assert browser.eval("window.__sameDocument === true"), "the page was reloaded"
    row_text = browser.eval(f"document.querySelector('#messages tr[data-id=\"{message_id}\"]').innerText")
    assert message_id in row_text and token[:24] in row_text and "delivered" in row_text, row_text
    # The hostile string is text on the page, not markup.
    assert hostile in row_text, row_text
    assert browser.eval("document.querySelectorAll('#messages script, #messages img').length") == 0
    time.sleep(0.3)
    assert browser.eval("window.__alerted") is False

    # The filter box narrows the list (server-side query by token).
    other = mock.create_device()
    mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + KEY_A},
                  json={"to": other, "data": {"n": "other"}}, timeout=10).raise_for_status()
    browser.eval(f"const f = document.getElementById('filter'); f.value = '{token}'; "
                 "f.dispatchEvent(new Event('input')); 1")
    browser.wait_for("[...document.querySelectorAll('#messages tbody tr')].length === 1",
                     what="the filter to leave one message")
    assert browser.eval(f"document.querySelector('#messages tbody tr').dataset.id") == message_id

    # The upstream button sends an upstream message as the device (the prompt answered by the test).
    browser.eval("window.prompt = () => 'greeting=hi, n=2'; 1")
    browser.eval(f"[...document.querySelectorAll('#devices tr[data-token=\"{token}\"] button')]"
                 ".find(b => b.textContent === 'upstream…').click(); 1")
    deadline = time.monotonic() + 10
    while not mock.upstream(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    ups = mock.upstream(token)
    assert len(ups) == 1 and ups[0]["data"] == {"greeting": "hi", "n": "2"}, ups

    # The offline button changes the device for real.
    assert mock.device(token)["online"] is True
    browser.eval(f"document.querySelector('#devices tr[data-token=\"{token}\"] button.toggle').click(); 1")
    deadline = time.monotonic() + 10
    while mock.device(token)["online"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mock.device(token)["online"] is False
    browser.wait_for(f"document.querySelector('#devices tr[data-token=\"{token}\"] button.toggle').textContent === 'bring online'",
                     what="the device row to show the device offline")
