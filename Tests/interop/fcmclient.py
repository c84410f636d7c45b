"""firebase-messaging 0.4.5 (PyPI) as a real FCM receiver of the mock (real-clients.md §3, §5),
for the interop suite's firebase-messaging tests.

The client runs in a child Python process (this file run as a script), so that the recipe's
`SSL_CERT_FILE=$CA` and the patched module constants are that process's own, and so that a stuck
client can always be stopped (SIGTERM, then SIGKILL) without hanging the test run. The child
follows real-clients.md §5 exactly:

    fr.GCM_CHECKIN_URL, fr.GCM_REGISTER_URL = f"{MOCK}/checkin", f"{MOCK}/c2dm/register3"
    fr.FCM_INSTALLATION = fr.FCM_REGISTRATION = f"{MOCK}/v1/"
    fpc.MCS_HOST, fpc.MCS_PORT = "localhost", M
    client = FcmPushClient(on_notification, cfg, credentials=..., credentials_updated_callback=save,
                           received_persistent_ids=...)
    token = await client.checkin_or_register(); await client.start()

and reports to the test, one JSON object a line on its stdout: `{"event":"token","token",
"credentials"}`, `{"event":"credentials","credentials"}`, `{"event":"started"}` (the MCS login
succeeded), `{"event":"notification","payload","persistent_id"}`, `{"event":"error","error"}`,
`{"event":"stopped","state"}`. firebase-messaging's own log (DEBUG) goes to a file, shown when a
test fails. `FcmClient` is the test's side: start, wait for notifications, stop, restart with the
saved credentials and the persistent ids received so far.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_CHARS = 5000


class FcmClient:
    """One firebase-messaging receiver registered with the mock's project `project_id`.

    `base_url` is the mock's `http://127.0.0.1:H`, `mcs_port` its MCS port (reached as
    `localhost`, the name its certificate has), `ca_pem` the CA file (`tls_ca`)."""

    def __init__(self, base_url, mcs_port, ca_pem, project_id, sender_id,
                 app_id=None, api_key="any-api-key", vapid_key=None, https_port=None):
        self.base_url = base_url
        self.mcs_port = mcs_port
        # Given: the page's "Unmodified" block instead, Google's names sent to this HTTPS port.
        self.https_port = https_port
        self.ca_pem = ca_pem
        self.config = {"project_id": project_id, "messaging_sender_id": sender_id,
                       "app_id": app_id or f"1:{sender_id}:web:0123456789abcdef",
                       "api_key": api_key}
        if vapid_key is not None:
            self.config["vapid_key"] = vapid_key
        self.work = tempfile.mkdtemp(prefix="fcm-mock-firebase-messaging-")
        self.log_path = os.path.join(self.work, "client.log")
        self.credentials = None
        self.token = None
        self.proc = None
        self.reader = None
        self.cond = threading.Condition()
        self.events = []  # this run's events
        self.notifications = []  # (payload, persistent_id), every run
        self.runs = 0

    # -- the process ------------------------------------------------------------------------
    def start(self, timeout=START_TIMEOUT_S, wait_started=True):
        """Starts the client (with the saved credentials and the persistent ids received so far
        after a first run), waits for its token and, unless told not to, for its MCS login.
        Returns the token."""
        assert self.proc is None, "firebase-messaging is already running"
        self.runs += 1
        spec = {"mock": self.base_url, "mcs_port": self.mcs_port, "https_port": self.https_port, "config": self.config,
                "credentials": self.credentials,
                "received_persistent_ids": [pid for _, pid in self.notifications] or None}
        spec_path = os.path.join(self.work, f"run{self.runs}.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        env = {**os.environ, "SSL_CERT_FILE": self.ca_pem, "PYTHONUNBUFFERED": "1"}
        env.pop("SSL_CERT_DIR", None)
        with self.cond:
            self.events = []
        log = open(self.log_path, "ab")
        log.write(f"==== run {self.runs} ====\n".encode())
        log.flush()
        try:
            self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), spec_path],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, env=env, start_new_session=True)
        finally:
            log.close()
        self.reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self.reader.start()
        event = self.wait_event(lambda e: e["event"] == "token", timeout, "a token")
        self.token = event["token"]
        self.credentials = event["credentials"]
        if wait_started:
            self.wait_event(lambda e: e["event"] == "started", timeout, "an MCS login")
        return self.token

    def _read(self, proc):
        for raw in proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                event = {"event": "output", "text": raw.decode("utf-8", "replace")}
            with self.cond:
                if event["event"] == "notification":
                    self.notifications.append((event["payload"], event["persistent_id"]))
                elif event["event"] == "credentials":
                    self.credentials = event["credentials"]
                self.events.append(event)
                self.cond.notify_all()
        with self.cond:
            self.events.append({"event": "exited"})
            self.cond.notify_all()

    def stop(self):
        """Asks the client to stop (`FcmPushClient.stop()`), then SIGTERM, then SIGKILL."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            proc.stdin.write(b"stop\n")
            proc.stdin.close()
        except OSError:
            pass
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
        if self.reader is not None:
            self.reader.join(timeout=5)
        proc.stdout.close()

    def restart(self, timeout=START_TIMEOUT_S):
        self.stop()
        return self.start(timeout)

    def close(self):
        self.stop()

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # -- waiting ----------------------------------------------------------------------------
    def wait_event(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.events:
                    if predicate(e):
                        return e
                if any(e["event"] in ("exited", "error") for e in self.events):
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
        self._fail(f"firebase-messaging gave no {what} within {timeout:.0f}s")

    def wait_notification(self, predicate, timeout=15, what="the notification"):
        """The first (payload, persistent_id) received (in any run) that `predicate` accepts."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for payload, pid in self.notifications:
                    if predicate(payload, pid):
                        return payload, pid
                left = deadline - time.monotonic()
                if left <= 0 or any(e["event"] == "exited" for e in self.events):
                    break
                self.cond.wait(min(left, 1.0))
        self._fail(f"firebase-messaging did not receive {what} within {timeout}s; it received "
                   f"{json.dumps(self.notifications)[:2000]}")

    def by_message_id(self, message_id, timeout=15):
        """The payload whose `fcmMessageId` is `message_id`, and its persistent id."""
        return self.wait_notification(lambda p, pid: p.get("fcmMessageId") == message_id,
                                      timeout, f"message {message_id}")

    def received(self, message_id):
        """How many times a payload with `fcmMessageId` `message_id` arrived."""
        with self.cond:
            return sum(1 for p, _ in self.notifications if p.get("fcmMessageId") == message_id)

    # -- diagnostics --------------------------------------------------------------------------
    def log_tail(self, limit=LOG_TAIL_CHARS):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                out = f.read()[-limit:]
        except OSError:
            out = ""
        with self.cond:
            events = json.dumps([{k: v for k, v in e.items() if k != "credentials"}
                                 for e in self.events[-20:]])[-2000:]
        return f"--- firebase-messaging log (end) ---\n{out}\n--- its events ---\n{events}"

    def _fail(self, message):
        state = "running" if self.running else "stopped"
        raise AssertionError(f"{message} (client {state})\n{self.log_tail()}")


# -- the child process ---------------------------------------------------------------------------

def _child(spec_path):
    import asyncio
    import logging

    with open(spec_path) as f:
        spec = json.load(f)
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    out_lock = threading.Lock()

    def doc_block(marker, line, replacement):
        import pathlib
        import re as _re
        doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "real-clients.md"
        blocks = [b for b in _re.findall(r"^```python\n(.*?)^```$", doc.read_text(), _re.S | _re.M) if marker in b]
        assert len(blocks) == 1, f"docs/real-clients.md has {len(blocks)} blocks with {marker!r}"
        assert line in blocks[0], f"the recipe names {line!r}"
        return blocks[0].replace(line, replacement)

    def doc_recipe(mock, mcs_port, https_port):
        if https_port is not None:
            # "Unmodified": Google's names resolved to the mock's ports.
            return doc_block("mtalk.google.com", "S, M = 8443, 5228", f"S, M = {int(https_port)}, {int(mcs_port)}")
        return doc_block("fpc.MCS_HOST", 'MOCK, M = "http://127.0.0.1:8080", 5228', f"MOCK, M = {mock!r}, {int(mcs_port)}")

    def emit(**event):
        with out_lock:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    from firebase_messaging import FcmPushClient, FcmRegisterConfig

    # docs/real-clients.md's block, as written but for this run's two values: the page's
    # recipe is what points the client at the mock.
    exec(doc_recipe(spec["mock"], spec["mcs_port"], spec.get("https_port")), {})
    cfg = FcmRegisterConfig(**spec["config"])

    def on_notification(payload, persistent_id, ctx):
        emit(event="notification", payload=payload, persistent_id=persistent_id)

    def save(credentials):
        emit(event="credentials", credentials=credentials)

    async def main():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def watch_stdin():
            sys.stdin.readline()  # "stop", or EOF when the test process is gone
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=watch_stdin, daemon=True).start()
        client = FcmPushClient(on_notification, cfg, credentials=spec["credentials"],
                               credentials_updated_callback=save,
                               received_persistent_ids=spec["received_persistent_ids"])
        try:
            token = await client.checkin_or_register()
        except Exception as e:  # registration refused: the test shows why
            emit(event="error", error=f"checkin_or_register failed: {e!r}")
            return
        emit(event="token", token=token, credentials=client.credentials)
        await client.start()
        announced = False
        while not stop.is_set():
            if client.is_started() and not announced:
                emit(event="started")
                announced = True
            try:
                await asyncio.wait_for(stop.wait(), 0.05)
            except asyncio.TimeoutError:
                pass
        await client.stop()
        emit(event="stopped", state=str(client.run_state))

    asyncio.run(main())


if __name__ == "__main__":
    _child(sys.argv[1])


# -- a raw GCM/MCS client, for what no real client sends ---------------------------------------------

def pb_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_int(field, n):
    return pb_varint(field << 3) + pb_varint(n)


def pb_bytes(field, value):
    if isinstance(value, str):
        value = value.encode()
    return pb_varint((field << 3) | 2) + pb_varint(len(value)) + value


def pb_fixed64(field, n):
    return pb_varint((field << 3) | 1) + n.to_bytes(8, "little")


def pb_fields(data):
    """A protobuf message as {field: [values]} (varints as int, fixed64 as int, bytes as bytes)."""
    out, i = {}, 0

    def varint():
        nonlocal i
        n = shift = 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n
    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            value = varint()
        elif wire == 1:
            value = int.from_bytes(data[i:i + 8], "little")
            i += 8
        elif wire == 2:
            n = varint()
            value = data[i:i + n]
            i += n
        elif wire == 5:
            value = int.from_bytes(data[i:i + 4], "little")
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
        out.setdefault(field, []).append(value)
    return out


def raw_checkin(base_url, chrome_version="156.0.0.0"):
    """A first checkin as Chromium sends it; (android_id, security_token)."""
    import requests
    build = pb_int(1, 3) + pb_bytes(2, chrome_version) + pb_int(3, 5)
    checkin = pb_int(12, 3) + pb_bytes(13, build)
    body = pb_int(2, 0) + pb_bytes(4, checkin) + pb_fixed64(13, 0) + pb_int(14, 3)
    r = requests.post(base_url + "/checkin", data=body, timeout=10,
                      headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 200, (r.status_code, r.content[:300])
    f = pb_fields(r.content)
    return f[7][0], f[8][0]


def raw_register(base_url, android_id, security_token, **form):
    import requests
    r = requests.post(base_url + "/c2dm/register3", data={**form, "device": str(android_id)},
                      timeout=10, headers={"Authorization": f"AidLogin {android_id}:{security_token}"})
    assert r.status_code == 200 and r.text.startswith("token="), (r.status_code, r.text)
    return r.text[len("token="):]


def login_request(android_id, security_token, received=(), client_id="raw-mcs-1", auth_service=2):
    """A LoginRequest as Chromium writes it (`auth_service` None: the field left out)."""
    body = (pb_bytes(1, client_id) + pb_bytes(2, "mcs.android.com") + pb_bytes(3, str(android_id))
            + pb_bytes(4, str(android_id)) + pb_bytes(5, str(security_token))
            + pb_bytes(6, f"android-{int(android_id):x}"))
    for pid in received:
        body += pb_bytes(10, pid)
    body += pb_int(12, 0) + pb_int(14, 1)
    if auth_service is not None:
        body += pb_int(16, auth_service)
    return body + pb_int(17, 1)


def raw_login(mock, android_id, security_token):
    """A RawMcs logged in as `android_id` (its LoginResponse read and checked: no error)."""
    conn = RawMcs(mock.mcs_port, mock.ca)
    conn.send_packet(2, login_request(android_id, security_token), version=True)  # LoginRequest
    tag, body = conn.packet()
    assert tag == 3 and 3 not in pb_fields(body), (tag, pb_fields(body))  # LoginResponse, no error
    return conn


class RawMcs:
    """A TLS connection to the mock's MCS port that writes what it is told and reads packets."""

    def __init__(self, port, ca_pem, host="localhost", timeout=10):
        import socket
        import ssl
        ctx = ssl.create_default_context(cafile=ca_pem)
        sock = socket.create_connection((host, port), timeout=timeout)
        self.sock = ctx.wrap_socket(sock, server_hostname=host)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.version_seen = False
        self.raw = []  # every packet read: (tag, body bytes)

    def send(self, data):
        self.sock.sendall(data)

    def send_packet(self, tag, body, version=False):
        self.send((b"\x29" if version else b"") + bytes([tag]) + pb_varint(len(body)) + body)

    def _fill(self, deadline):
        import ssl
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionError, ssl.SSLError):
            chunk = b""
        if not chunk:
            raise EOFError
        self.buf += chunk

    def packet(self, timeout=10):
        """The next (tag, body); EOFError when the server closed, TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            b, i = self.buf, 0
            if not self.version_seen and len(b) >= 1:
                i = 1
            if len(b) > i:
                tag, j, size, shift = b[i], i + 1, 0, 0
                while j < len(b):
                    c = b[j]
                    j += 1
                    size |= (c & 0x7F) << shift
                    shift += 7
                    if not c & 0x80:
                        if len(b) >= j + size:
                            if not self.version_seen:
                                assert b[0] == 41, f"server version byte {b[0]}"
                                self.version_seen = True
                            self.buf = b[j + size:]
                            self.raw.append((tag, b[j:j + size]))
                            return tag, b[j:j + size]
                        break
            self._fill(deadline)

    def closed_within(self, timeout=5):
        """Reads until the server closes; the bytes it wrote before (b"" when nothing).
        TimeoutError if it stays open."""
        import ssl
        deadline = time.monotonic() + timeout
        got = self.buf
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the server kept the connection open {timeout}s (it wrote {got!r})")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            except (ConnectionError, ssl.SSLError, OSError):
                return got
            if not chunk:
                return got
            got += chunk

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
