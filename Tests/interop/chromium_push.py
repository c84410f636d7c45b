"""Headless Chromium as a real Web Push receiver over FCM's device side (real-clients.md §3, §5),
for the interop suite's Chromium tests.

`Chromium` follows the recipe of real-clients.md §5: a HOME of its own whose NSS database
($HOME/.pki/nssdb) trusts the mock's CA (certutil), since the MCS connection is TLS; a profile
whose Preferences grant notifications (Chromium checks the profile when a push arrives); and the
command line

    chromium --headless=new --no-sandbox --no-first-run --user-data-dir=$PROFILE
      --gcm-checkin-url=http://127.0.0.1:H/checkin
      --gcm-registration-url=http://127.0.0.1:H/c2dm/register3
      --gcm-mcs-endpoint=https://localhost:M --remote-debugging-port=0 URL

It reads `DevTools listening on ws://...` from Chromium's output and drives it with the DevTools
protocol as JSON over a plain WebSocket (the `websockets` sync client): `Target.attachToTarget`
with `flatten`, then `Runtime.evaluate` with `awaitPromise` on the page. It stops and starts again
on the same profile and HOME, which keep its GCM store (android id, security token, registrations).

The page and its service worker are firefox.py's `PushPage` (firefox_page/): the worker reports
`event.data.text()` of each push to the test. `--no-sandbox` is only given when running as root.
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

import pytest
import requests
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

DEVTOOLS_RE = re.compile(r"DevTools listening on (ws://\S+)")
STARTUP_TIMEOUT_S = float(os.environ.get("CHROMIUM_STARTUP_TIMEOUT", "60"))
STOP_TIMEOUT_S = 15.0
COMMAND_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 5000

# Quiet for the rest: no first-run, no component updates, no background networking reaching
# for the internet (GCM is what the tests want, and it goes to the mock).
BASE_FLAGS = [
    "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-component-update", "--disable-sync", "--no-proxy-server",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    "--enable-logging=stderr", "--v=0",
]


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless Chromium on its own HOME and profile, its GCM pointed at the mock.

    `checkin_url`, `registration_url`: the mock's `/checkin` and `/c2dm/register3` (plain HTTP);
    `mcs_endpoint`: `https://localhost:M`; `ca_pem`: the CA certificate (a path) the HOME's NSS
    database trusts. `start()`, `stop()` and `restart()` keep HOME and the profile; `close()`
    stops Chromium and removes both."""

    def __init__(self, checkin_url, registration_url, mcs_endpoint, ca_pem=None, extra_flags=()):
        self.binary = find_chromium()
        if self.binary is None:
            pytest.fail("Chromium is not installed (make test installs the Debian package "
                        "'chromium')", pytrace=False)
        self.checkin_url = checkin_url
        self.registration_url = registration_url
        self.mcs_endpoint = mcs_endpoint
        self.extra_flags = list(extra_flags)
        self.work = tempfile.mkdtemp(prefix="fcm-mock-chromium-push-")
        self.home = os.path.join(self.work, "home")
        self.profile = os.path.join(self.work, "profile")
        self.log_path = os.path.join(self.work, "chromium.log")
        self.proc = None
        self.ws = None
        self.session = None
        self.next_id = 0
        self.events = []  # console messages and exceptions of the page (for failure messages)
        os.makedirs(os.path.join(self.home, ".pki", "nssdb"))
        os.makedirs(os.path.join(self.profile, "Default"))
        # The permission must be in the profile: a DevTools grant lets subscribe() succeed, but
        # Chromium checks the profile when a push arrives and unsubscribes.
        with open(os.path.join(self.profile, "Default", "Preferences"), "w") as f:
            json.dump({"profile": {"default_content_setting_values": {"notifications": 1}}}, f)
        if ca_pem is not None:
            self.trust_ca(ca_pem)

    # -- the process ------------------------------------------------------------------------
    def trust_ca(self, ca_pem):
        """Makes $HOME/.pki/nssdb and adds `ca_pem` to it as a trusted CA (certutil), as
        Chromium on Linux reads its trust store there."""
        certutil = shutil.which("certutil")
        if certutil is None:
            pytest.fail("certutil is not installed (make test installs the Debian package "
                        "'libnss3-tools')", pytrace=False)
        db = "sql:" + os.path.join(self.home, ".pki", "nssdb")
        for args in (["-N", "-d", db, "--empty-password"],
                     ["-A", "-d", db, "-n", "fcm-mock", "-t", "C,,", "-i", ca_pem]):
            r = subprocess.run([certutil, *args], capture_output=True, text=True, timeout=30,
                               env={**os.environ, "HOME": self.home})
            assert r.returncode == 0, f"certutil {' '.join(args)} failed ({r.returncode}): {r.stderr}"

    def command_line(self, url="about:blank"):
        args = [self.binary, "--headless=new"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run its sandbox as root
        args += ["--no-first-run", "--user-data-dir=" + self.profile, *self.gcm_flags(),
                 "--remote-debugging-port=0", *BASE_FLAGS, *self.extra_flags, url]
        return args

    def gcm_flags(self):
        """docs/real-clients.md's `--gcm-*` flags, with this run's URLs: the page's recipe is
        what runs."""
        from firefox import doc_block
        block = doc_block("sh", "--gcm-checkin-url").replace("\\\n", " ")
        flags = [a for a in shlex.split(block) if a.startswith("--gcm-")]
        wanted = {"--gcm-checkin-url": ("http://127.0.0.1:H/checkin", self.checkin_url),
                  "--gcm-registration-url": ("http://127.0.0.1:H/c2dm/register3", self.registration_url),
                  "--gcm-mcs-endpoint": ("https://localhost:M", self.mcs_endpoint)}
        out = []
        for f in flags:
            name, _, value = f.partition("=")
            assert name in wanted and value == wanted[name][0], f"the recipe's {f!r} is not the one the tests expect"
            out.append(name + "=" + wanted[name][1])
        assert len(out) == 3, f"the recipe names {flags}"
        return out

    def start(self, url="about:blank"):
        """Starts Chromium on the profile and attaches to its first page."""
        assert self.proc is None, "Chromium is already running"
        log = open(self.log_path, "ab")
        offset = log.tell()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHROME")}
        env["HOME"] = self.home
        try:
            self.proc = subprocess.Popen(self.command_line(url), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        finally:
            log.close()
        ws_url = self._wait_devtools_url(offset, time.monotonic() + STARTUP_TIMEOUT_S)
        try:
            self.ws = connect(ws_url, open_timeout=COMMAND_TIMEOUT_S, max_size=None, proxy=None, legacy=True)
        except (OSError, WebSocketException) as e:
            self._fail(f"could not open the DevTools WebSocket at {ws_url}: {e!r}")
        self.next_id = 0
        self.session = None
        targets = self.command("Target.getTargets")["targetInfos"]
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            target = pages[0]["targetId"]
        else:
            target = self.command("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.command("Target.attachToTarget",
                                    {"targetId": target, "flatten": True})["sessionId"]
        self.command("Runtime.enable")
        self.command("Page.enable")
        return self

    def _wait_devtools_url(self, offset, deadline):
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                m = DEVTOOLS_RE.search(f.read().decode("utf-8", "replace"))
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                self._fail(f"Chromium exited with code {self.proc.returncode} before DevTools "
                           f"listened")
            time.sleep(0.05)
        self._fail(f"Chromium printed no 'DevTools listening on ws://...' within "
                   f"{STARTUP_TIMEOUT_S:.0f}s")

    def stop(self):
        """Ends Chromium as a person quits it (`Browser.close`, so its GCM store is written),
        SIGTERM if it does not exit, SIGKILL to its process group as a last resort."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if self.ws is not None:
            try:
                self._send("Browser.close", {}, None, 5, proc)
            except AssertionError:
                pass
            try:
                self.ws.close()
            except (OSError, WebSocketException):
                pass
            self.ws = None
        for sig, wait in ((None, STOP_TIMEOUT_S), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            if sig is not None:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # helpers left in the group once the browser process is gone
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def restart(self, url="about:blank"):
        self.stop()
        return self.start(url)

    def close(self):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # -- diagnostics --------------------------------------------------------------------------
    def log_tail(self, limit=LOG_TAIL_CHARS):
        """The end of Chromium's own output (GCM's log lines among it) and the page's console."""
        try:
            with open(self.log_path, "r", errors="replace") as f:
                out = f.read()[-limit:]
        except OSError:
            out = ""
        console = "\n".join(self.events[-30:])
        return f"--- Chromium output (end) ---\n{out}\n--- page console (CDP) ---\n{console}"

    def _fail(self, message):
        state = "running" if self.running else (
            f"exited with {self.proc.returncode}" if self.proc is not None else "stopped")
        raise AssertionError(f"{message} (Chromium {state}; work dir {self.work})\n"
                             f"{self.log_tail()}")

    # -- DevTools protocol ----------------------------------------------------------------------
    def command(self, method, params=None, timeout=COMMAND_TIMEOUT_S):
        """Sends one CDP command (to the attached page unless it is a `Target.`/`Browser.` one)
        and returns its `result`; an error, a closed socket or no answer within `timeout` fails
        with Chromium's log tail."""
        if self.ws is None:
            self._fail(f"CDP {method}: Chromium is not running")
        session = None if method.startswith(("Target.", "Browser.")) else self.session
        return self._send(method, params or {}, session, timeout, self.proc)

    def _send(self, method, params, session, timeout, proc):
        self.next_id += 1
        want = self.next_id
        msg = {"id": want, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        try:
            self.ws.send(json.dumps(msg))
            deadline = time.monotonic() + timeout
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._fail(f"no answer to CDP {method} within {timeout:.0f}s")
                try:
                    raw = self.ws.recv(timeout=min(remaining, 1.0))
                except TimeoutError:
                    if proc is not None and proc.poll() is not None:
                        self._fail(f"Chromium exited during CDP {method}")
                    continue
                reply = json.loads(raw)
                if "method" in reply:
                    self._note_event(reply)
                    continue
                if reply.get("id") != want:
                    continue
                if "error" in reply:
                    self._fail(f"CDP {method} {json.dumps(params)[:300]} failed: {reply['error']}")
                return reply.get("result", {})
        except (OSError, WebSocketException) as e:
            if method == "Browser.close":
                return {}  # Chromium closes the socket as it quits
            self._fail(f"CDP {method}: the DevTools WebSocket failed: {e!r}")

    def _note_event(self, event):
        p = event.get("params", {})
        if event["method"] == "Runtime.consoleAPICalled":
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.events.append(f"console.{p.get('type')}: {args}")
        elif event["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.events.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
        del self.events[:-100]

    def navigate(self, url, timeout=COMMAND_TIMEOUT_S):
        """Opens `url` in the page and waits until its document is complete."""
        r = self.command("Page.navigate", {"url": url}, timeout)
        if r.get("errorText"):
            self._fail(f"navigating to {url} failed: {r['errorText']}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.command("Runtime.evaluate", {"expression": "document.readyState + ' ' + location.href",
                                                      "returnByValue": True}, timeout)
            value = state.get("result", {}).get("value", "")
            if value.startswith("complete ") and value.split(" ", 1)[1].startswith(url.split("?")[0]):
                return
            time.sleep(0.05)
        self._fail(f"{url} did not finish loading within {timeout:.0f}s")

    def evaluate(self, expression, timeout=COMMAND_TIMEOUT_S):
        """`expression` evaluated in the page (a promise awaited), its value by JSON. A thrown
        exception or a rejected promise fails with its text."""
        r = self.command("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                              "returnByValue": True, "timeout": int(timeout * 1000)},
                         timeout + 5)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            self._fail(f"{expression!r} threw: {d.get('text')} "
                       f"{d.get('exception', {}).get('description', '')}")
        return r.get("result", {}).get("value")


def subscribe(chromium, page, scope, key, timeout=COMMAND_TIMEOUT_S):
    """Opens the page for `scope`, subscribing with the VAPID public key `key` (base64url), and
    returns the subscription's `toJSON()` (`{"endpoint","expirationTime","keys":{"p256dh","auth"}}`)."""
    chromium.navigate(page.url(scope, key))
    sub = chromium.evaluate("window.subscribed", timeout=timeout)
    if not (isinstance(sub, dict) and sub.get("endpoint")):
        chromium._fail(f"subscribe() gave {sub!r}")
    return sub


def rewritten(endpoint, base_url):
    """The endpoint with its origin (`https://jmt17.google.com` on Debian's build) replaced by the
    mock's `http://127.0.0.1:H`, as real-clients.md §5 tells a sender to do."""
    parts = urllib.parse.urlsplit(endpoint)
    base = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit((base.scheme, base.netloc, parts.path, parts.query, ""))


def require_gcm(base_url):
    """Fails at once, with what the server answered, unless the mock serves FCM's device side
    (`POST /checkin` answering an AndroidCheckinResponse to an empty first checkin): without it
    Chromium's subscribe() would only fail after its GCM client gave up retrying."""
    # AndroidCheckinRequest{checkin (4) = {chrome_build (13) = {platform 3, version, channel 1}},
    # version (14) = 3}: a first checkin, as Chromium and firebase-messaging send it.
    build = b"\x08\x03\x12\x0b156.0.0.0.0\x18\x01"
    checkin = b"\x6a" + bytes([len(build)]) + build + b"\x60\x03"
    body = b"\x22" + bytes([len(checkin)]) + checkin + b"\x70\x03"
    try:
        r = requests.post(base_url + "/checkin", data=body, timeout=10,
                          headers={"Content-Type": "application/x-protobuf"})
    except requests.RequestException as e:
        pytest.fail(f"the mock's POST /checkin failed: {e!r}", pytrace=False)
    if r.status_code != 200 or "protobuf" not in r.headers.get("Content-Type", ""):
        pytest.fail(f"the mock serves no GCM checkin (real-clients.md §3.1): POST /checkin answered "
                    f"{r.status_code} {r.headers.get('Content-Type')} {r.content[:200]!r}",
                    pytrace=False)
