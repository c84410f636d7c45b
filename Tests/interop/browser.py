"""Headless Chromium from Debian, driven over the DevTools protocol (--remote-debugging-pipe:
JSON messages separated by NUL bytes on fds 3 and 4), for the web page's tests. If Chromium is
not installed the tests fail: `make test` installs it.
"""

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest


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

    def visible(self, selector):
        """Whether the first element matching `selector` is drawn: it has a box (nothing around
        it is display:none), a size, and is not visibility:hidden."""
        return self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e || e.getClientRects().length === 0) return false;
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility === 'visible'; }})()""")

    def click(self, selector):
        """A real mouse click (Input.dispatchMouseEvent) in the middle of the first element
        matching `selector`, scrolled into view first, once it stays where it is for 100 ms (the
        page's lists load around it and move it). Fails when the element is not drawn or
        something else is on top of that point, as a person could not click it either. An element
        not there yet (a list still loading) is waited for, as long."""
        where, deadline = None, time.monotonic() + 5
        while True:
            now = self._click_point(selector)
            if time.monotonic() > deadline or (isinstance(now, list) and now == where) or (not isinstance(now, list) and now != "no such element"):
                break
            where = now
            time.sleep(0.1)
        where = now
        if not isinstance(where, list):
            raise AssertionError(f"cannot click {selector}: {where}")
        x, y = where
        self.command("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.command("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def _click_point(self, selector):
        """Where a click on `selector` lands, or why it cannot."""
        return self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return 'no such element';
            e.scrollIntoView({{block: 'center', inline: 'center'}});
            const r = e.getBoundingClientRect();
            if (e.getClientRects().length === 0 || r.width === 0 || r.height === 0) return 'not displayed';
            const x = r.left + r.width / 2, y = r.top + r.height / 2;
            const hit = document.elementFromPoint(x, y);
            if (!hit || !(hit === e || e.contains(hit))) return 'covered by ' + (hit ? hit.outerHTML.slice(0, 120) : 'nothing');
            return [x, y]; }})()""")

    KEYS = {"Enter": ("Enter", 13, "\r"), " ": ("Space", 32, " "), "Tab": ("Tab", 9, None),
            "Escape": ("Escape", 27, None), "ArrowDown": ("ArrowDown", 40, None), "ArrowUp": ("ArrowUp", 38, None)}

    def press(self, key):
        """A real key press (Input.dispatchKeyEvent, down then up) on the focused element:
        `Enter`, `" "`, `Tab`, `Escape`, `ArrowDown` or `ArrowUp`."""
        code, vk, text = self.KEYS[key]
        down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk}
        if text is not None:
            down["text"] = text
        self.command("Input.dispatchKeyEvent", down)
        self.command("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk})

    def close(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            os.close(self.to_child)
            os.close(self.from_child)
            shutil.rmtree(self.profile, ignore_errors=True)

    def screenshot(self, name):
        """The page as .build/interop-screenshots/NAME.png; its path."""
        folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".build", "interop-screenshots")
        os.makedirs(folder, exist_ok=True)
        shot = self.command("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path = os.path.normpath(os.path.join(folder, name + ".png"))
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return path

    def screenshot_if_failed(self, request):
        """After a test (a fixture's teardown): when its call failed, the page as
        .build/interop-screenshots/TEST.png, its path printed."""
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            try:
                print("screenshot:", self.screenshot(request.node.name))
            except Exception as e:  # the browser may be what failed
                print(f"no screenshot ({e})")
