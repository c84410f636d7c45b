"""Headless Firefox ESR as a Web Push receiver, and the page it subscribes from, for the interop
suite's Firefox tests (real-clients.md §5).

`Firefox` writes a profile's user.js (its push service pointed at the mock's `/autopush`), starts
`firefox-esr --headless --remote-debugging-port 0`, reads `WebDriver BiDi listening on ws://...`
from its output and drives it with WebDriver BiDi: JSON over a plain WebSocket (the `websockets`
sync client), no geckodriver. It stops and starts again on the same profile, which keeps the
push service's uaid (`dom.push.userAgentID` in prefs.js) and its subscriptions.

`PushPage` is the site: a Python http.server on a thread at `http://localhost:P/` (a secure
context), serving a page that registers a service worker per scope and subscribes it, and taking
the worker's reports of each push it handled. If Firefox is not installed the tests fail: `make
test` installs it.
"""

import base64
import collections
import http.server
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest
from py_vapid import Vapid02
from pywebpush import WebPushException, webpush
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import connect

from webpush_crypto import b64u, raw_public

BIDI_RE = re.compile(r"WebDriver BiDi listening on (ws://\S+)")
STARTUP_TIMEOUT_S = float(os.environ.get("FIREFOX_STARTUP_TIMEOUT", "60"))
STOP_TIMEOUT_S = 15.0
COMMAND_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 4000

# After the recipe's prefs (docs/real-clients.md): quiet for the rest: no update,
# telemetry, safe browsing, captive portal or first-run page reaching for the network.
BASE_PREFS = {
    "dom.push.requestTimeout": 10000,
    "dom.serviceWorkers.enabled": True,
    "dom.serviceWorkers.testing.enabled": True,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.aboutwelcome.enabled": False,
    "app.update.enabled": False,
    "app.update.auto": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.proxy.type": 0,
    "extensions.update.enabled": False,
    "browser.newtabpage.enabled": False,
}


# docs/real-clients.md's recipe is what the tests run: its user.js block (the mock's address
# swapped in), its command line (port 0 instead of 9222, the profile filled in) and its certutil
# lines, each read from the page, so the page and the tests cannot drift apart.
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "real-clients.md")
DOC_SERVER_URL = "ws://127.0.0.1:H/autopush"


def doc_block(lang, containing):
    with open(DOC) as f:
        blocks = re.findall(r"^```" + lang + r"\n(.*?)^```$", f.read(), re.S | re.M)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"docs/real-clients.md has {len(found)} {lang} blocks with {containing!r}"
    return found[0]


def doc_user_js(server_url):
    """The page's user.js, pointed at `server_url`."""
    block = doc_block("js", "dom.push.serverURL")
    assert DOC_SERVER_URL in block, f"the recipe's user.js names {DOC_SERVER_URL}"
    return block.replace(DOC_SERVER_URL, server_url)


def doc_command(binary, profile):
    """The page's command line, with this run's binary and profile and a port Firefox picks."""
    line = doc_block("sh", "firefox-esr --headless").strip()
    args = shlex.split(line.replace('"$PROFILE"', shlex.quote(profile)))
    assert args[0] == "firefox-esr" and "9222" in args, args
    return [binary] + ["0" if a == "9222" else a for a in args[1:]]


def find_firefox():
    for name in ("firefox-esr", "firefox"):
        path = shutil.which(name)
        if path:
            return path
    return None


def pref_line(name, value):
    return f"user_pref({json.dumps(name)}, {json.dumps(value)});\n"


class Firefox:
    """One headless Firefox on its own profile, commanded over WebDriver BiDi.

    `server_url` is `dom.push.serverURL` (`ws://127.0.0.1:H/autopush`, or a wss:// one with
    `ca_pem` the CA certificate to trust). `start()`, `stop()` and `restart()` keep the profile;
    `close()` stops Firefox and removes the profile."""

    def __init__(self, server_url, ca_pem=None, prefs=None):
        self.binary = find_firefox()
        if self.binary is None:
            pytest.fail("Firefox is not installed (make test installs the Debian package "
                        "'firefox-esr')", pytrace=False)
        self.server_url = server_url
        self.profile = tempfile.mkdtemp(prefix="fcm-mock-firefox-")
        self.log_path = os.path.join(self.profile, "firefox.log")
        self.proc = None
        self.ws = None
        self.context = None
        self.next_id = 0
        self.events = collections.deque(maxlen=200)  # BiDi events (console and page errors)
        all_prefs = dict(BASE_PREFS)
        all_prefs.update(prefs or {})
        with open(os.path.join(self.profile, "user.js"), "w") as f:
            f.write(doc_user_js(server_url))
            f.writelines(pref_line(k, v) for k, v in all_prefs.items())
        if ca_pem is not None:
            self.trust_ca(ca_pem)

    # -- the process ------------------------------------------------------------------------
    def trust_ca(self, ca_pem):
        """Adds `ca_pem` (a path) to the profile's NSS store as a trusted CA (certutil), as a
        person would import the mock's CA; only before the first start."""
        certutil = shutil.which("certutil")
        if certutil is None:
            pytest.fail("certutil is not installed (make test installs the Debian package "
                        "'libnss3-tools')", pytrace=False)
        script = doc_block("sh", "certutil -A")
        r = subprocess.run(["bash", "-euc", script], capture_output=True, text=True, timeout=30,
                           env={**os.environ, "PROFILE": self.profile, "CA": ca_pem})
        assert r.returncode == 0, f"the recipe's certutil lines failed ({r.returncode}): {r.stderr}"

    def start(self):
        """Starts Firefox on the profile and opens a BiDi session on its first tab."""
        assert self.proc is None, "Firefox is already running"
        log = open(self.log_path, "ab")
        start_offset = log.tell()
        try:
            self.proc = subprocess.Popen(
                doc_command(self.binary, self.profile),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "MOZ_CRASHREPORTER_DISABLE": "1"},
                start_new_session=True)  # its own process group, so a kill takes its children
        finally:
            log.close()
        url = self._wait_bidi_url(start_offset, time.monotonic() + STARTUP_TIMEOUT_S)
        try:
            self.ws = connect(url + "/session", open_timeout=COMMAND_TIMEOUT_S, max_size=None,
                              proxy=None, legacy=True)
        except (OSError, WebSocketException) as e:
            self._fail(f"could not open the BiDi session at {url}/session: {e!r}")
        self.next_id = 0
        self.command("session.new", {"capabilities": {}})
        self.command("session.subscribe", {"events": ["log.entryAdded"]})
        tree = self.command("browsingContext.getTree", {})
        self.context = tree["contexts"][0]["context"]
        return self

    def _wait_bidi_url(self, offset, deadline):
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                m = BIDI_RE.search(f.read().decode("utf-8", "replace"))
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                self._fail(f"Firefox exited with code {self.proc.returncode} before its BiDi "
                           f"server listened")
            time.sleep(0.05)
        self._fail(f"Firefox printed no 'WebDriver BiDi listening on ws://...' within "
                   f"{STARTUP_TIMEOUT_S:.0f}s")

    def stop(self):
        """Ends Firefox the way a person quits it (BiDi `browser.close`, so prefs.js and the
        push database are written), SIGTERM if it does not exit, SIGKILL to its process group
        as a last resort."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if self.ws is not None:
            try:
                self._send("browser.close", {}, timeout=5, proc=proc)
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
        # Content processes left in the group once the parent is gone.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def restart(self):
        self.stop()
        return self.start()

    def close(self):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # -- diagnostics --------------------------------------------------------------------------
    def log_tail(self, limit=LOG_TAIL_CHARS):
        """The end of Firefox's own output, and the page's console lines BiDi reported."""
        try:
            with open(self.log_path, "r", errors="replace") as f:
                out = f.read()[-limit:]
        except OSError:
            out = ""
        console = "\n".join(self._event_line(e) for e in list(self.events)[-30:])
        return f"--- Firefox output (end) ---\n{out}\n--- page console (BiDi) ---\n{console}"

    @staticmethod
    def _event_line(event):
        p = event.get("params", {})
        return f"{p.get('level', '?')} {p.get('source', {}).get('realm', '')}: {p.get('text')}"

    def _fail(self, message):
        state = "running" if self.running else (
            f"exited with {self.proc.returncode}" if self.proc is not None else "stopped")
        raise AssertionError(f"{message} (Firefox {state}; profile {self.profile})\n"
                             f"{self.log_tail()}")

    # -- WebDriver BiDi -----------------------------------------------------------------------
    def command(self, method, params=None, timeout=COMMAND_TIMEOUT_S):
        """Sends one BiDi command and returns its `result`; an error answer, a closed socket or
        no answer within `timeout` fails with Firefox's log tail."""
        if self.ws is None:
            self._fail(f"BiDi {method}: Firefox is not running")
        return self._send(method, params or {}, timeout, self.proc)

    def _send(self, method, params, timeout, proc):
        self.next_id += 1
        want = self.next_id
        try:
            self.ws.send(json.dumps({"id": want, "method": method, "params": params}))
            deadline = time.monotonic() + timeout
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._fail(f"no answer to BiDi {method} within {timeout:.0f}s")
                try:
                    raw = self.ws.recv(timeout=min(remaining, 1.0))
                except TimeoutError:
                    if proc is not None and proc.poll() is not None:
                        self._fail(f"Firefox exited during BiDi {method}")
                    continue
                msg = json.loads(raw)
                if msg.get("type") == "event":
                    self.events.append(msg)
                    continue
                if msg.get("id") != want:
                    continue
                if msg.get("type") == "error":
                    self._fail(f"BiDi {method} {json.dumps(params)[:300]} failed: "
                               f"{msg.get('error')}: {msg.get('message')}")
                return msg.get("result", {})
        except (OSError, WebSocketException) as e:
            if method == "browser.close":
                return {}  # Firefox closes the session as it quits
            self._fail(f"BiDi {method}: the session's WebSocket failed: {e!r}")

    def navigate(self, url, timeout=COMMAND_TIMEOUT_S):
        return self.command("browsingContext.navigate",
                            {"context": self.context, "url": url, "wait": "complete"}, timeout)

    def evaluate(self, expression, timeout=COMMAND_TIMEOUT_S):
        """`expression` evaluated in the tab (a promise is awaited); its value as JSON would
        give it. A thrown exception or a rejected promise fails with its text."""
        r = self.command("script.evaluate", {
            "expression": expression, "awaitPromise": True,
            "target": {"context": self.context},
            "serializationOptions": {"maxObjectDepth": 10}}, timeout)
        if r.get("type") == "exception":
            d = r.get("exceptionDetails", {})
            self._fail(f"{expression!r} threw: {d.get('text')}")
        return bidi_value(r["result"])

    # -- the push service's state ---------------------------------------------------------------
    def uaid(self, timeout=15):
        """`dom.push.userAgentID` from the profile's prefs.js (Firefox writes it there soon after
        its push service's first `hello`, and as it quits)."""
        path = os.path.join(self.profile, "prefs.js")
        deadline = time.monotonic() + timeout
        pattern = re.compile(r'user_pref\("dom\.push\.userAgentID",\s*"([^"]*)"\);')
        while True:
            try:
                with open(path, "r", errors="replace") as f:
                    m = pattern.search(f.read())
                if m and m.group(1):
                    return m.group(1)
            except OSError:
                pass
            if time.monotonic() > deadline:
                self._fail(f"no dom.push.userAgentID in {path} within {timeout}s")
            time.sleep(0.1)


def require_autopush(url, ca_pem=None):
    """Fails at once, with what the server answered, unless `url` upgrades to an autopush
    WebSocket: without it Firefox's subscribe() would only time out (AbortError) after
    dom.push.requestTimeout."""
    ssl_context = None
    if url.startswith("wss://"):
        ssl_context = ssl.create_default_context(cafile=ca_pem)
    try:
        ws = connect(url, subprotocols=["push-notification"], open_timeout=10, close_timeout=2,
                     proxy=None, ssl=ssl_context, legacy=True)
    except InvalidStatus as e:
        why = (f"the upgrade was answered {e.response.status_code} "
               f"{bytes(e.response.body[:200])!r}")
    except (OSError, WebSocketException, TimeoutError) as e:
        why = repr(e)
    else:
        ws.close()
        return
    pytest.fail(f"the mock serves no autopush WebSocket at {url}: {why}", pytrace=False)


def bidi_value(remote):
    """A BiDi RemoteValue as plain Python (objects with string keys, arrays, primitives)."""
    kind = remote.get("type")
    if kind in ("undefined", "null"):
        return None
    if kind in ("string", "boolean"):
        return remote["value"]
    if kind == "number":
        v = remote["value"]
        return v if not isinstance(v, str) else float(v.replace("Infinity", "inf"))
    if kind == "array":
        return [bidi_value(v) for v in remote.get("value", [])]
    if kind == "object":
        return {(k if isinstance(k, str) else str(bidi_value(k))): bidi_value(v)
                for k, v in remote.get("value", [])}
    return remote  # anything else (a node, a function) as BiDi described it


# -- the site ------------------------------------------------------------------------------------

PAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "firefox_page")


class PushPage:
    """The test site at `http://localhost:P/`: `index.html` and `sw.js` from firefox_page/, and
    `POST /report`, where the service worker reports each push it handled (`{"scope","text"}`).

    `url(scope, key)` is the page that registers the worker for `/s/{scope}/` (a scope of its
    own per test, so each test has its own subscription and device) and subscribes with the
    VAPID public key `key` (base64url) when given."""

    def __init__(self):
        self.reports = []
        self.cond = threading.Condition()
        page = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = urllib.parse.urlsplit(self.path).path
                files = {"/": ("index.html", "text/html; charset=utf-8"),
                         "/sw.js": ("sw.js", "text/javascript; charset=utf-8")}
                if path not in files:
                    self.send_error(404)
                    return
                name, ctype = files[path]
                with open(os.path.join(PAGE_DIR, name), "rb") as f:
                    body = f.read()
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                if urllib.parse.urlsplit(self.path).path != "/report":
                    self.send_error(404)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(204)
                self.end_headers()
                with page.cond:
                    page.reports.append(json.loads(body))
                    page.cond.notify_all()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.origin = f"http://localhost:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, scope, key=None):
        query = {"scope": scope}
        if key is not None:
            query["key"] = key
        return f"{self.origin}/?{urllib.parse.urlencode(query)}"

    def scope_url(self, scope):
        return f"{self.origin}/s/{scope}/"

    def reports_for(self, scope):
        with self.cond:
            return [r["text"] for r in self.reports if r.get("scope") == self.scope_url(scope)]

    def wait_report(self, scope, text, timeout=15, firefox=None):
        """Waits until the worker of `scope` reported a push whose text is `text`."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                seen = [r["text"] for r in self.reports if r.get("scope") == self.scope_url(scope)]
                if text in seen:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(remaining)
        where = f"\n{firefox.log_tail()}" if firefox is not None else ""
        raise AssertionError(f"the service worker of scope {scope!r} did not report {text!r} "
                             f"within {timeout}s (it reported {seen}){where}")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def subscribe(firefox, page, scope, key=None, timeout=COMMAND_TIMEOUT_S):
    """Opens the page for `scope` and returns its subscription's `toJSON()`
    (`{"endpoint","expirationTime","keys":{"p256dh","auth"}}`)."""
    firefox.navigate(page.url(scope, key))
    sub = firefox.evaluate("window.subscribed", timeout=timeout)
    assert isinstance(sub, dict) and sub.get("endpoint"), f"subscribe() gave {sub!r}"
    return sub


def unb64u(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- the mock's side -----------------------------------------------------------------------------

def endpoint_id(endpoint):
    """The last segment of a push endpoint (`/wp/{id}`): what `?web_push_id=` finds."""
    return urllib.parse.urlsplit(endpoint).path.rsplit("/", 1)[1]


def device_for(mock, endpoint):
    """The one device whose subscription is `endpoint` (`?web_push_id=`)."""
    items = mock.api("GET", "/api/v1/devices", params={"web_push_id": endpoint_id(endpoint)})["items"]
    assert len(items) == 1, f"wanted one device for {endpoint}, found {items}"
    return items[0]


def location_id(resp):
    """The message id in a push's 201 `Location` (`{origin}/m/{id}`, the id percent-encoded)."""
    loc = resp.headers.get("Location", "")
    assert "/m/" in loc, f"no /m/ Location in the push's answer: {resp.status_code} {dict(resp.headers)}"
    return urllib.parse.unquote(loc.rsplit("/m/", 1)[1])


def wait_entry(mock, token, message_id, status, timeout=15, firefox=None):
    """Long-polls `token`'s inbox (`?status=…&wait=…&min=…`) until `message_id` is there with
    `status`; fails with where the message is instead."""
    deadline = time.monotonic() + timeout
    min_count = 1
    while True:
        left = deadline - time.monotonic()
        items = mock.inbox(token, wait=max(1, min(10, int(left))), min_count=min_count, status=status)
        for entry in items:
            if entry["message_id"] == message_id:
                return entry
        if time.monotonic() >= deadline:
            break
        min_count = len(items) + 1
    now = [e for e in mock.inbox(token) if e["message_id"] == message_id]
    where = f"\n{firefox.log_tail()}" if firefox is not None else ""
    raise AssertionError(f"message {message_id} of device {token} not {status!r} within "
                         f"{timeout}s; it is: {json.dumps(now)[:3000]}\nmock stderr (end):\n"
                         f"{mock.stderr_tail(2000)}{where}")


def wait_device(mock, token, predicate, what, timeout=15):
    """Polls the device until `predicate(device)` holds."""
    deadline = time.monotonic() + timeout
    while True:
        dev = mock.device(token)
        if predicate(dev):
            return dev
        if time.monotonic() >= deadline:
            raise AssertionError(f"device {token} not {what} within {timeout}s: {json.dumps(dev)}")
        time.sleep(0.1)


class EventStream:
    """`GET /api/v1/events` (text/event-stream) read on a thread from when it is opened:
    `wait(name, predicate)` returns the first matching event's data."""

    def __init__(self, mock):
        self.events = []
        self.cond = threading.Condition()
        self.resp = mock.http.get(mock.base_url + "/api/v1/events", stream=True, timeout=(5, None),
                                  headers={"Accept": "text/event-stream"})
        assert self.resp.status_code == 200, f"GET /api/v1/events -> {self.resp.status_code}: {self.resp.text[:500]}"
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        name, data = None, []
        try:
            for raw in self.resp.iter_lines(chunk_size=1, decode_unicode=False):
                line = raw.decode("utf-8", "replace")
                if line == "":
                    if name is not None or data:
                        text = "\n".join(data)
                        try:
                            value = json.loads(text)
                        except ValueError:
                            value = text
                        with self.cond:
                            self.events.append((name or "message", value))
                            self.cond.notify_all()
                    name, data = None, []
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
        except Exception:  # closed by close(), or the server went away
            pass

    def wait(self, name, predicate=lambda data: True, timeout=15):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for n, data in self.events:
                    if n == name and predicate(data):
                        return data
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(n, json.dumps(d)[:200]) for n, d in self.events[-20:]]
                    raise AssertionError(f"no {name} event as wanted within {timeout}s; the last "
                                         f"events: {seen}")
                self.cond.wait(left)

    def close(self):
        # The reader thread blocks in a read of the stream: shutting the socket down ends it at
        # once (closing the response alone waits for the server's next bytes, a keep-alive
        # comment up to 15 s later).
        try:
            self.resp.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass
        self.resp.close()
        self.thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- a subscription in Firefox, and pushes to it ---------------------------------------------------

VAPID_SUB = "mailto:interop@example.com"


def new_vapid():
    v = Vapid02()
    v.generate_keys()
    return v


def vapid_key(v):
    """A py-vapid key's public half as `applicationServerKey` (base64url, unpadded)."""
    return b64u(raw_public(v.public_key))


class Subscribed:
    """One scope's subscription in Firefox: the page's `toJSON()`, its VAPID key and its device."""

    def __init__(self, mock, firefox, page, session, scope, vapid):
        self.mock, self.firefox, self.page, self.session = mock, firefox, page, session
        self.scope, self.vapid = scope, vapid
        self.sub = subscribe(firefox, page, scope, vapid_key(vapid))
        self.device = device_for(mock, self.sub["endpoint"])
        self.token = self.device["token"]

    def push(self, text, vapid=None, subscription=None, **kwargs):
        """pywebpush's call; the 201 answer (a failure raises WebPushException)."""
        kwargs.setdefault("ttl", 600)
        return webpush(subscription or self.sub, data=text, vapid_private_key=vapid or self.vapid,
                       vapid_claims={"sub": VAPID_SUB}, requests_session=self.session, timeout=20,
                       **kwargs)

    def refused(self, text, **kwargs):
        with pytest.raises(WebPushException) as failed:
            self.push(text, **kwargs)
        assert failed.value.response is not None, failed.value
        return failed.value.response

    def delivered(self, text, **kwargs):
        """Pushes `text`, waits for the worker's report and for the entry to be `delivered`."""
        resp = self.push(text, **kwargs)
        assert resp.status_code == 201, (resp.status_code, resp.text)
        message_id = location_id(resp)
        self.page.wait_report(self.scope, text, firefox=self.firefox)
        return wait_entry(self.mock, self.token, message_id, "delivered", firefox=self.firefox)

    def reports(self):
        return self.page.reports_for(self.scope)


def assert_delivered_by_ack(entry, message_id=None):
    """A relayed push Firefox acknowledged with code 100 (real-clients.md §2.4, §4.2)."""
    cd = entry["client_delivery"]
    assert entry["status"] == "delivered", entry
    assert cd["kind"] == "autopush", cd
    assert cd["ack"]["by"] == "ack" and cd["ack"]["code"] == 100, cd
    assert cd["rejection"] is None, cd
    if message_id is not None:
        assert cd["version"] == message_id, cd
    assert entry["delivered_at"], entry
    wp = entry["webpush"]
    assert wp["relayed"] is True, wp
    assert wp["plaintext"] is None and wp["decrypt_error"] is None, wp
    assert wp["ciphertext_base64"], wp
