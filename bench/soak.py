#!/usr/bin/env python3
"""fcm-mock soak benchmark (`make soak`): a long mixed load on a file store, watched over time.

    python3 bench/soak.py [--mock BIN] [--seconds N] [--reset-load]

The binary is --mock, else $FCM_MOCK_BIN, else .build/release/fcm-mock. Python 3 standard library
only; loopback only. Every loop is bounded in time.

Soak (the default; issue 16's mix): a file store in a temporary folder, 44 fixture devices over two
projects, and for SOAK_SECONDS (default 600), all at once:
  - legacy sends at 1,200/s on a fixed schedule over 4 keep-alive HTTP/1.1 connections (single
    tokens, `registration_ids` of 20 tokens, topics);
  - HTTP v1 sends (20/s) with access tokens from the control API;
  - XMPP app servers (raw sockets, SASL PLAIN) that log in, send bursts, read every ack or nack,
    and leave cleanly (</stream:stream>) or abruptly (close, sometimes with messages in flight);
  - event-stream readers that come and go (and one that stays);
  - inbox long polls (`?wait=5&min=N`) on devices nothing else sends to;
  - devices toggled offline and back (PATCH);
  - one `POST /api/v1/reset` half-way, timed.
Every 10 s it samples /proc/PID (VmRSS, open descriptors, threads) and the store's files, and
prints a row; a separate process asks GET /api/v1/health every 100 ms throughout. The summary
compares RSS at the end of the warm-up (the first minute; a quarter of a run shorter than 4
minutes) with the highest RSS after it.

--reset-load (issue 16, item 4): preloads ~175,000 multicasts of 4 tokens (700,000 deliveries) as
fast as 32 connections go, then keeps 1,200 sends/s arriving for SOAK_SECONDS (default 30), with
one POST /api/v1/reset half-way.

Targets (exit 1 when one is missed, naming it; 2 when it could not measure): RSS after the warm-up
at most 10% above its level at the end of it; no non-2xx answers, transport errors, wrong answers
or unanswered XMPP messages but the designed ones (a v1 token revoked by the reset, messages
abandoned by a deliberate abrupt close); the reset and the longest health stall around it
≤ 100 ms each; exit code 0 after SIGTERM. The report is also left in .build/soak/report.md;
SOAK_KEEP=1 keeps the run's folder (store, server log, health samples).
"""

import argparse
import array
import base64
import html
import http.client
import json
import os
import random
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench  # noqa: E402  (the benchmark's process and token helpers)
from bench import BenchError, Server, bench_token  # noqa: E402

LEGACY_RATE = 1200          # legacy sends per second
LEGACY_CONNECTIONS = 4
V1_RATE = 20
XMPP_WORKERS = 4            # app-server loops, two per project
EVENT_READERS = 2           # readers that come and go (plus one for the whole run)
SAMPLE_S = 10.0
HEALTH_INTERVAL_S = 0.1
BACKLOG_S = 1.0             # a paced slot later than this is skipped (and counted)
REQUEST_TIMEOUT_S = 15.0
TARGET_RSS_RATIO = 1.10
TARGET_RESET_MS = 100.0
TARGET_STALL_MS = 100.0
PRELOAD_MULTICASTS = 175_000
PRELOAD_SIZE = 4
STALL_MARGIN_S = 0.5        # health probes this close to the reset count as "around it"

# The legacy mix: (kind, weight). About 2 deliveries per send.
LEGACY_MIX = (("single", 0.95), ("multicast", 0.03), ("topic", 0.02))

_stop = threading.Event()


def log(msg):
    print(f"soak: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# fixture: two projects, 20 load devices and 2 poll devices each


class Project:
    def __init__(self, n):
        self.sender = f"10000000000{n}"
        self.project_id = f"soak-{'ab'[n - 1]}"
        self.key = f"AAAAsoak:server-key-{n}"
        self.topic = f"soak-news-{n}"
        base = (n - 1) * 22
        self.load = [bench_token(base + i) for i in range(20)]
        self.poll = [bench_token(base + 20 + i) for i in range(2)]
        self.app = f"com.example.soak{n}"

    def fixture(self):
        devices = [{"token": t, "sender_id": self.sender, "app": self.app, "platform": "android",
                    "online": True} for t in self.load[:18] + self.poll]
        devices += [{"token": t, "sender_id": self.sender, "app": self.app + ".ios", "platform": "ios",
                     "online": True} for t in self.load[18:]]
        return {"sender_id": self.sender, "project_id": self.project_id, "server_keys": [self.key],
                "apps": [{"app": self.app, "platform": "android"},
                         {"app": self.app + ".ios", "platform": "ios", "apns_credential": "valid"}]}, devices


PROJECTS = [Project(1), Project(2)]


def write_fixture(path):
    projects, devices, subs = [], [], {}
    for p in PROJECTS:
        proj, devs = p.fixture()
        projects.append(proj)
        devices += devs
        subs[p.topic] = list(p.load)
    with open(path, "w") as f:
        json.dump({"projects": projects, "devices": devices, "subscriptions": subs}, f)


# ---------------------------------------------------------------------------------------------
# what happened: counters, errors (must stay 0) and designed outcomes (allowed), with examples


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.errors = {}      # (category, what) -> n; categories: non2xx, transport, wrong, unanswered
        self.designed = {}    # what -> n
        self.examples = {}    # (category, what) -> [detail, ...]

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def get(self, key):
        with self.lock:
            return self.counts.get(key, 0)

    def error(self, category, what, detail="", n=1):
        with self.lock:
            k = (category, what)
            self.errors[k] = self.errors.get(k, 0) + n
            ex = self.examples.setdefault(k, [])
            if detail and len(ex) < 3:
                ex.append(str(detail)[:200])

    def allow(self, what, n=1):
        with self.lock:
            self.designed[what] = self.designed.get(what, 0) + n

    def error_total(self, category=None):
        with self.lock:
            return sum(v for (c, _), v in self.errors.items() if category in (None, c))


T = Tally()


class ResetEpoch:
    """Odd while a reset runs; anything that spans a change of it may see the reset's effects."""

    def __init__(self):
        self.value = 0

    def around(self, before):
        return before % 2 == 1 or self.value != before


EPOCH = ResetEpoch()


# ---------------------------------------------------------------------------------------------
# HTTP


CL_RE = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.I)


def parse_response(buf):
    """(status, body, bytes used) of the first whole response in buf (Content-Length framed), or
    None when more bytes are needed."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    m = CL_RE.search(buf, 0, end + 2)
    total = end + 4 + (int(m.group(1)) if m else 0)
    if len(buf) < total:
        return None
    return int(buf[9:12]), bytes(buf[end + 4:total]), total


class Api:
    """One keep-alive connection for control calls and low-rate sends."""

    def __init__(self, port, timeout=REQUEST_TIMEOUT_S):
        self.port, self.timeout, self.conn = port, timeout, None

    def begin(self, method, path, body=None, headers=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def finish(self):
        try:
            r = self.conn.getresponse()
            return r.status, r.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def call(self, method, path, body=None, headers=None):
        self.begin(method, path, body, headers)
        return self.finish()

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def expect(what, status, data, ok=(200,)):
    """Counts a non-2xx answer (or one outside `ok`) as an error; True when it was fine."""
    if status in ok:
        return True
    T.error("non2xx", f"{what} {status}", data[:200])
    return False


def legacy_request(key, payload):
    body = json.dumps(payload, separators=(",", ":")).encode()
    return (f"POST /fcm/send HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: key={key}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def legacy_pool():
    """Request bytes by kind, formatted once: sends differ in target and data, not per request."""
    pool = {"single": [], "multicast": [], "topic": []}
    for p in PROJECTS:
        for v in range(4):
            data = {"score": f"{v}x1", "kind": "soak"}
            extra = {"collapse_key": "score"} if v == 1 else {"time_to_live": 600} if v == 2 else {}
            for t in p.load:
                pool["single"].append(legacy_request(p.key, {"to": t, "data": data, **extra}))
            pool["multicast"].append(legacy_request(p.key, {"registration_ids": p.load, "data": data,
                                                            **extra}))
            note = {"notification": {"title": "Soak", "body": f"update {v}"}} if v == 3 else {}
            pool["topic"].append(legacy_request(p.key, {"to": f"/topics/{p.topic}", "data": data,
                                                        **note}))
    return pool


def check_legacy(kind, status, body):
    if status != 200:
        return "status"
    if kind == "topic":
        return None if body.startswith(b'{"message_id":') else "wrong"
    return None if b'"failure":0' in body else "wrong"


class HttpLoad(threading.Thread):
    """HTTP/1.1 keep-alive load on `conns` connections in one thread (selectors), one request in
    flight per connection: `rate` requests per second on a fixed schedule (slots later than
    BACKLOG_S are skipped and counted), or as fast as the connections go when rate is None, until
    `total` requests or the stop, then waits for the answers still due."""

    def __init__(self, name, port, conns, pick, rate=None, total=None, stop=_stop):
        super().__init__(name=name, daemon=True)
        self.port, self.nconns, self.pick, self.rate, self.total, self.stop = \
            port, conns, pick, rate, total, stop
        self.done = 0          # answered (read by the sampler)
        self.issued = 0
        self.skipped = 0
        self.lat_ms = array.array("d")
        self.slow = []         # (start, ms) of answers slower than 50 ms
        self.by_kind = {}

    def _open(self, sel):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = {"sock": s, "buf": bytearray(), "kind": None, "t0": 0.0}
        sel.register(s, selectors.EVENT_READ, c)
        return c

    def _reopen(self, sel, c, what):
        if c["kind"] is not None:
            T.error("transport", f"{self.name}: {what}")
            self.done += 1
        try:
            sel.unregister(c["sock"])
        except (KeyError, ValueError):
            pass
        c["sock"].close()
        for _ in range(50):  # 5 s: the server is gone when it takes no connection for that long
            if self.stop.is_set():
                break
            try:
                return self._open(sel)
            except OSError as e:
                T.error("transport", f"{self.name}: connect", e)
                time.sleep(0.1)
        return None

    def run(self):
        sel = selectors.DefaultSelector()
        try:
            conns = [self._open(sel) for _ in range(self.nconns)]
        except OSError as e:
            T.error("transport", f"{self.name}: connect", e)
            return
        free = list(conns)
        t_start = time.monotonic()
        while True:
            now = time.monotonic()
            # After the stop (or the last request) nothing new is sent; answers still come in.
            ending = self.stop.is_set() or (self.total is not None and self.issued >= self.total)
            if ending:
                if len(free) == len(conns):
                    break
                target = self.issued
            elif self.rate is None:
                target = self.issued + len(free)
            else:
                target = int((now - t_start) * self.rate)
                late = target - self.issued - int(self.rate * BACKLOG_S)
                if late > 0:
                    self.skipped += late
                    self.issued += late
            if self.total is not None:
                target = min(target, self.total)
            while free and self.issued < target:
                c = free.pop()
                kind, req = self.pick()
                c["kind"], c["t0"] = kind, time.monotonic()
                try:
                    c["sock"].sendall(req)
                except OSError as e:
                    T.error("transport", f"{self.name}: send", e)
                    c["kind"] = None
                    nc = self._reopen(sel, c, "send")
                    if nc is None:
                        return
                    conns[conns.index(c)] = nc
                    free.append(nc)
                self.issued += 1
            if self.rate is not None and not ending and self.issued >= target:
                timeout = max(0.0, min(0.05, t_start + (self.issued + 1) / self.rate - time.monotonic()))
            else:
                timeout = 0.05
            for key, _ in sel.select(timeout):
                c = key.data
                try:
                    chunk = c["sock"].recv(65536)
                except OSError as e:
                    chunk, err = b"", e
                else:
                    err = "closed by the server"
                if not chunk:
                    nc = self._reopen(sel, c, f"read: {err}")
                    if nc is None:
                        return
                    if c in free:
                        free.remove(c)
                    conns[conns.index(c)] = nc
                    free.append(nc)
                    continue
                c["buf"] += chunk
                got = parse_response(c["buf"])
                if got is None:
                    continue
                status, body, used = got
                del c["buf"][:used]
                if c["kind"] is None:
                    T.error("wrong", f"{self.name}: an answer nobody asked for", body[:100])
                    continue
                self._answered(c, status, body)
                free.append(c)
            now = time.monotonic()
            for c in list(conns):
                if c["kind"] is not None and now - c["t0"] > REQUEST_TIMEOUT_S:
                    nc = self._reopen(sel, c, f"no answer within {REQUEST_TIMEOUT_S:.0f} s")
                    if nc is None:
                        return
                    conns[conns.index(c)] = nc
                    free.append(nc)
        for c in conns:
            c["sock"].close()
        sel.close()

    def _answered(self, c, status, body):
        ms = (time.monotonic() - c["t0"]) * 1000.0
        kind, c["kind"] = c["kind"], None
        self.lat_ms.append(ms)
        if ms > 50.0:
            self.slow.append((c["t0"], ms))
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        self.done += 1
        problem = check_legacy(kind, status, body)
        if problem == "status":
            T.error("non2xx", f"legacy {kind} send {status}", body[:200])
        elif problem:
            T.error("wrong", f"legacy {kind} send: 200 without every recipient delivered", body[:200])


def legacy_picker(pool):
    rng = random.Random(16)
    kinds = [k for k, _ in LEGACY_MIX]
    weights = [w for _, w in LEGACY_MIX]

    def pick():
        kind = rng.choices(kinds, weights)[0]
        return kind, rng.choice(pool[kind])
    return pick


# ---------------------------------------------------------------------------------------------
# the health probe: its own process, so the load's threads never delay its clock


def health_probe_main(port, out_path, interval):
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    req = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    sock = None
    with open(out_path, "w", buffering=1) as out:
        next_t = time.monotonic()
        while not stopping:
            t0 = time.monotonic()
            status = 0
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.sendall(req)
                buf = bytearray()
                while True:
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise OSError("closed")
                    buf += chunk
                    got = parse_response(buf)
                    if got:
                        status = got[0]
                        break
            except OSError:
                if sock is not None:
                    sock.close()
                sock = None
            out.write(f"{t0:.6f} {(time.monotonic() - t0) * 1000.0:.3f} {status}\n")
            next_t = max(next_t + interval, time.monotonic())
            time.sleep(max(0.0, next_t - time.monotonic()))
    return 0


class HealthLog:
    """Reads the probe's lines (start, ms, status) as they come."""

    def __init__(self, path):
        self.path, self.offset, self.rows = path, 0, []

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        new = []
        for line in data[:cut].splitlines():
            t, ms, st = line.split()
            new.append((float(t), float(ms), int(st)))
        self.rows += new
        return new


# ---------------------------------------------------------------------------------------------
# XMPP: a minimal client with the mock's exchange (Sources/FCMTesting/XMPPTestClient.swift)


STREAM_HEADER = (b'<stream:stream to="fcm.googleapis.com" version="1.0" xmlns="jabber:client" '
                 b'xmlns:stream="http://etherx.jabber.org/streams">')
GCM_RE = re.compile(rb'<(?:data:)?gcm xmlns(?::data)?="google:mobile:data">(.*?)</(?:data:)?gcm>', re.S)


class XmppError(Exception):
    pass


class XmppClient:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def wait_for(self, find, timeout=10.0):
        """Reads until find(buf) gives an end index; returns buf[:end] and keeps the rest."""
        deadline = time.monotonic() + timeout
        while True:
            end = find(self.buf)
            if end >= 0:
                head, self.buf = self.buf[:end], self.buf[end:]
                return head
            left = deadline - time.monotonic()
            if left <= 0:
                raise XmppError(f"no answer within {timeout:.0f} s (have {self.buf[-120:]!r})")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise XmppError(f"closed by the server (have {self.buf[-120:]!r})")
            self.buf += chunk

    @staticmethod
    def after(marker):
        def find(buf):
            i = buf.find(marker)
            return -1 if i < 0 else i + len(marker)
        return find

    def login(self, sender, key, resource):
        self.send(STREAM_HEADER)
        self.wait_for(self.after(b"</stream:features>"))
        plain = b"\0" + f"{sender}@fcm.googleapis.com".encode() + b"\0" + key.encode()
        self.send(b'<auth mechanism="PLAIN" xmlns="urn:ietf:params:xml:ns:xmpp-sasl">'
                  + base64.b64encode(plain) + b"</auth>")

        def sasl(buf):
            if b"<failure" in buf:
                raise XmppError(f"SASL failed: {buf[:200]!r}")
            i = buf.find(b"<success")
            j = buf.find(b">", i) if i >= 0 else -1
            return -1 if j < 0 else j + 1
        self.wait_for(sasl)
        self.send(STREAM_HEADER)
        self.wait_for(self.after(b"</stream:features>"))
        self.send(b'<iq type="set" id="bind-1"><bind xmlns="urn:ietf:params:xml:ns:xmpp-bind"><resource>'
                  + resource.encode() + b"</resource></bind></iq>")
        self.wait_for(self.after(b"</iq>"))
        self.send(b'<iq type="set" id="sess-1"><session xmlns="urn:ietf:params:xml:ns:xmpp-session"/></iq>')

        def session(buf):
            i = buf.find(b'id="sess-1"')
            if i < 0:
                return -1
            j = buf.find(b"/>", i)
            k = buf.find(b"</iq>", i)
            ends = [x + n for x, n in ((j, 2), (k, 5)) if x >= 0]
            return min(ends) if ends else -1
        self.wait_for(session)

    def next_gcm(self, timeout):
        """The JSON of the next <message> from the server."""
        stanza = self.wait_for(self.after(b"</message>"), timeout)
        m = GCM_RE.search(stanza)
        if not m:
            raise XmppError(f"a message without a gcm payload: {stanza[-200:]!r}")
        return json.loads(html.unescape(m.group(1).decode()))

    def close_cleanly(self):
        self.send(b"</stream:stream>")
        self.wait_for(self.after(b"</stream:stream>"), 5)
        self.sock.settimeout(5)
        while self.sock.recv(4096):
            pass
        self.sock.close()

    def drop(self, reset):
        if reset:  # a RST instead of a FIN, as a crashed client's kernel would send
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.sock.close()


def xmpp_worker(port, project, n):
    rng = random.Random(100 + n)
    session = 0
    while not _stop.is_set():
        session += 1
        T.add("xmpp sessions")
        outstanding = set()
        try:
            x = XmppClient(port)
        except OSError as e:
            T.error("transport", "XMPP connect", e)
            time.sleep(0.5)
            continue
        try:
            x.login(project.sender, project.key, f"soak{n}")
            T.add("xmpp logins")
            leave = rng.choices(["clean", "abrupt", "abandon"], [0.5, 0.35, 0.15])[0]
            for burst in range(rng.randint(1, 3)):
                msgs = []
                for i in range(rng.randint(3, 20)):
                    mid = f"x{n}-{session}-{burst}-{i}"
                    to = f"/topics/{project.topic}" if rng.random() < 0.2 else rng.choice(project.load)
                    body = json.dumps({"to": to, "message_id": mid, "data": {"n": str(i)}})
                    msgs.append(b'<message id=""><gcm xmlns="google:mobile:data">'
                                + html.escape(body, quote=False).encode() + b"</gcm></message>")
                    outstanding.add(mid)
                x.send(b"".join(msgs))
                T.add("xmpp sent", len(msgs))
                if leave == "abandon" and burst == 0:
                    break
                while outstanding:
                    m = x.next_gcm(10)
                    mid = m.get("message_id")
                    if m.get("message_type") == "ack" and mid in outstanding:
                        outstanding.discard(mid)
                        T.add("xmpp acked")
                    elif m.get("message_type") == "nack" and mid in outstanding:
                        outstanding.discard(mid)
                        T.add("xmpp nacked")
                        T.add(f"xmpp nack {m.get('error')}")
                    else:
                        T.error("wrong", "XMPP: an unexpected message", m)
                if rng.random() < 0.3:
                    x.send(b" ")  # a whitespace keepalive between bursts
                    _stop.wait(rng.uniform(0.2, 1.5))
            if leave == "clean":
                x.close_cleanly()
                T.add("xmpp clean closes")
            else:
                if outstanding:
                    T.allow("XMPP messages abandoned by a deliberate abrupt close", len(outstanding))
                    outstanding.clear()
                x.drop(reset=rng.random() < 0.5)
                T.add("xmpp abrupt closes")
        except (OSError, XmppError, ValueError) as e:
            if outstanding:
                T.error("unanswered", "XMPP messages neither acked nor nacked", e, len(outstanding))
            if isinstance(e, OSError):
                T.error("transport", "XMPP session", e)
            elif not outstanding:
                T.error("wrong", "XMPP session", e)
            x.drop(reset=False)
        _stop.wait(rng.uniform(0.1, 1.0))


# ---------------------------------------------------------------------------------------------
# the other clients


def v1_worker(port):
    api = Api(port)
    rng = random.Random(7)
    tokens = {}  # project id -> (access token, epoch when issued)

    def token_for(p):
        if p.project_id not in tokens:
            epoch = EPOCH.value
            st, data = api.call("POST", f"/api/v1/projects/{p.project_id}/access-tokens")
            if not expect("POST access-tokens", st, data, (201,)):
                return None
            tokens[p.project_id] = (json.loads(data)["access_token"], epoch)
        return tokens[p.project_id]

    n = 0
    start = time.monotonic()
    while not _stop.is_set():
        n += 1
        p = PROJECTS[n % 2]
        try:
            got = token_for(p)
            if got is None:
                _stop.wait(1.0)
                continue
            bearer, issued = got
            target = ({"topic": p.topic} if rng.random() < 0.1 else {"token": rng.choice(p.load)})
            body = json.dumps({"message": {**target, "data": {"n": str(n)},
                                           "android": {"priority": "high"}}}).encode()
            st, data = api.call("POST", f"/v1/projects/{p.project_id}/messages:send", body,
                                {"Content-Type": "application/json", "Authorization": f"Bearer {bearer}"})
            T.add("v1 sends")
            if st == 401 and EPOCH.around(issued):
                T.allow("v1 401: the access token was revoked by the reset")
                tokens.pop(p.project_id, None)
            elif expect("v1 send", st, data) and b'"name":"projects/' not in data:
                T.error("wrong", "v1 send: 200 without a name", data)
        except (OSError, http.client.HTTPException) as e:
            T.error("transport", "v1 send", e)
        _stop.wait(max(0.0, start + n / V1_RATE - time.monotonic()))
    api.close()


def events_reader(port, seed, persistent):
    rng = random.Random(seed)
    req = b"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    while not _stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError as e:
            T.error("transport", "events connect", e)
            _stop.wait(1)
            continue
        try:
            s.sendall(req)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(65536)
                if not chunk:
                    raise OSError("closed before the headers")
                head += chunk
            if not head.startswith(b"HTTP/1.1 200") or b"text/event-stream" not in head:
                T.error("non2xx", "GET /api/v1/events", head[:200])
                s.close()
                _stop.wait(1)
                continue
            T.add("event readers opened")
            until = time.monotonic() + (1e9 if persistent else rng.uniform(1.0, 8.0))
            s.settimeout(1.0)
            while not _stop.is_set() and time.monotonic() < until:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    T.error("transport", "event stream ended by the server (it drops a reader 4 MiB "
                        "behind: was this client starved of CPU?)")
                    break
                T.add("event bytes", len(chunk))
                T.add("events", chunk.count(b"\nevent: "))
        except OSError as e:
            T.error("transport", "event stream", e)
        s.close()  # readers leave without a word, as browsers do
        if not persistent:
            _stop.wait(rng.uniform(0.5, 3.0))


def poller(port, project, token, seed):
    """Long polls on a device only this loop sends to: `min` one more than it holds, met by a
    send 0.05-1 s later, or (one cycle in five) left to run out after 5 s."""
    rng = random.Random(seed)
    waiter, sender = Api(port, timeout=20), Api(port)
    inbox = f"/api/v1/devices/{token}/messages?limit=1000"
    have, have_epoch = None, 0  # what the inbox holds, and the reset epoch it was read in
    n = 0
    while not _stop.is_set():
        try:
            if have is None or have >= 900:
                have_epoch = EPOCH.value
                if have is not None:  # a long run: start the device afresh rather than page
                    st, data = sender.call("DELETE", f"/api/v1/devices/{token}")
                    expect("DELETE device", st, data, (204,))
                    dev = {"token": token, "sender_id": project.sender, "app": project.app,
                           "platform": "android", "online": True}
                    st, data = sender.call("POST", "/api/v1/devices", json.dumps(dev).encode(),
                                           {"Content-Type": "application/json"})
                    expect("POST device", st, data, (201,))
                st, data = sender.call("GET", inbox)
                if not expect("GET inbox", st, data):
                    _stop.wait(1)
                    continue
                have = len(json.loads(data)["items"])
            n += 1
            t0 = time.monotonic()
            waiter.begin("GET", f"{inbox}&wait=5&min={have + 1}")
            mid, sent = None, rng.random() < 0.8
            if sent:
                _stop.wait(rng.uniform(0.05, 1.0))
                st, data = sender.call("POST", "/fcm/send", json.dumps(
                    {"to": token, "data": {"poll": str(n)}}).encode(),
                    {"Content-Type": "application/json", "Authorization": f"key={project.key}"})
                if expect("poll's legacy send", st, data):
                    mid = json.loads(data)["results"][0].get("message_id")
            st, data = waiter.finish()
            took = time.monotonic() - t0
            T.add("long polls")
            if not expect("GET inbox?wait", st, data):
                have = None
                continue
            items = json.loads(data)["items"]
            if EPOCH.around(have_epoch):
                T.allow("long polls across the reset (inbox emptied)")
                have = None
                continue
            if sent and mid is None:  # the send failed (counted): nothing to expect
                have = None
                continue
            if sent:
                if len(items) != have + 1 or items[-1].get("message_id") != mid:
                    T.error("wrong", "long poll without the message sent meanwhile",
                            f"had {have}, got {len(items)}, last {items[-1].get('message_id') if items else None}, sent {mid}")
                else:
                    T.add("long polls met")
            elif len(items) != have or took < 4.9:
                T.error("wrong", "long poll that should have waited 5 s",
                        f"had {have}, got {len(items)} after {took:.2f} s")
            else:
                T.add("long polls run out (as asked)")
            have = len(items)
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            T.error("transport" if isinstance(e, (OSError, http.client.HTTPException)) else "wrong",
                    "long poll", e)
            waiter.close()
            have = None
            _stop.wait(0.5)
    waiter.close()
    sender.close()


def toggler(port):
    """Up to four load devices offline at a time, each for 1-6 s."""
    api = Api(port)
    rng = random.Random(3)
    offline = {}
    tokens = [t for p in PROJECTS for t in p.load]

    def patch(token, online):
        try:
            st, data = api.call("PATCH", f"/api/v1/devices/{token}",
                                json.dumps({"online": online}).encode(), {"Content-Type": "application/json"})
            T.add("devices toggled")
            expect("PATCH device", st, data)
        except (OSError, http.client.HTTPException) as e:
            T.error("transport", "PATCH device", e)

    while not _stop.is_set():
        now = time.monotonic()
        for t, back in list(offline.items()):
            if now >= back:
                patch(t, True)
                del offline[t]
        if len(offline) < 4:
            t = rng.choice([t for t in tokens if t not in offline])
            patch(t, False)
            offline[t] = now + rng.uniform(1.0, 6.0)
        _stop.wait(rng.uniform(0.3, 1.0))
    for t in offline:
        patch(t, True)
    api.close()


# ---------------------------------------------------------------------------------------------
# sampling


def proc_sample(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "Threads"):
                fields[k] = int(v.split()[0])
    return {"rss_mb": fields["VmRSS"] / 1024.0, "anon_mb": fields.get("RssAnon", 0) / 1024.0,
            "threads": fields["Threads"],
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def store_mb(db_path):
    return sum(os.path.getsize(db_path + s) for s in ("", "-wal", "-shm")
               if os.path.exists(db_path + s)) / 1e6


def percentile(values, p):
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def do_reset(port):
    """POST /api/v1/reset on a fresh connection: (start, ms)."""
    EPOCH.value += 1
    api = Api(port, timeout=60)
    t0 = time.monotonic()
    try:
        st, data = api.call("POST", "/api/v1/reset")
        expect("POST /api/v1/reset", st, data, (204,))
    except (OSError, http.client.HTTPException) as e:
        T.error("transport", "POST /api/v1/reset", e)
    ms = (time.monotonic() - t0) * 1000.0
    EPOCH.value += 1
    api.close()
    return t0, ms


# ---------------------------------------------------------------------------------------------
# the run


def preload(port, total):
    """`total` multicasts of PRELOAD_SIZE tokens, as fast as 32 connections go."""
    rng = random.Random(4)
    bodies = [legacy_request(p.key, {"registration_ids": rng.sample(p.load, PRELOAD_SIZE),
                                     "data": {"fill": str(i)}})
              for p in PROJECTS for i in range(32)]
    load = HttpLoad("preload", port, 32, lambda: ("multicast", rng.choice(bodies)),
                    total=total, stop=threading.Event())
    t0 = time.monotonic()
    load.start()
    while load.is_alive():
        load.join(10)
        log(f"preload: {load.done:,} of {total:,} multicasts")
    secs = time.monotonic() - t0
    return load.done, secs


def stats_messages(port):
    try:
        st, data = Api(port).call("GET", "/api/v1/stats")
        return json.loads(data)["messages"]["accepted"] if st == 200 else None
    except (OSError, http.client.HTTPException, ValueError, KeyError):
        return None


class Run:
    """One run: the server, its clients, the samples, and the report's lines."""

    def __init__(self, args, mock_bin, run_dir):
        self.args, self.mock_bin, self.run_dir = args, mock_bin, run_dir
        self.lines = []
        self.samples = []
        self.res = {}

    def out(self, line=""):
        self.lines.append(line)
        print(line, flush=True)

    def start(self):
        fixture = os.path.join(self.run_dir, "fixture.json")
        write_fixture(fixture)
        self.db = os.path.join(self.run_dir, "fcm-mock.sqlite")
        self.srv = Server("fcm-mock", [self.mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                                       "--db", self.db, "--fixtures", fixture],
                          os.path.join(self.run_dir, "server.log"), 60)
        self.pid = self.srv.proc.pid
        hpath = os.path.join(self.run_dir, "health.txt")
        self.probe = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--health-probe",
                                       str(self.srv.port), hpath, str(HEALTH_INTERVAL_S)])
        bench._children.append(self.probe)
        self.health = HealthLog(hpath)

    def clients(self):
        port, threads = self.srv.port, []
        self.legacy = HttpLoad("legacy", port, LEGACY_CONNECTIONS, legacy_picker(legacy_pool()),
                               rate=LEGACY_RATE)
        threads.append(self.legacy)
        if not self.args.reset_load:
            def loop(name, target, *a):
                threads.append(threading.Thread(name=name, target=target, args=a, daemon=True))
            loop("v1", v1_worker, port)
            for i in range(XMPP_WORKERS):
                loop(f"xmpp-{i}", xmpp_worker, self.srv.xmpp_port, PROJECTS[i % 2], i)
            for i in range(EVENT_READERS + 1):
                loop(f"events-{i}", events_reader, port, 50 + i, i == EVENT_READERS)
            for i, (p, t) in enumerate((p, t) for p in PROJECTS for t in p.poll):
                loop(f"poller-{i}", poller, port, p, t, 70 + i)
            loop("toggler", toggler, port)
        return threads

    def sample(self, t, prev):
        s = proc_sample(self.pid)
        s["t"], s["store_mb"] = t, store_mb(self.db)
        s["legacy"] = self.legacy.done
        s["v1"] = T.get("v1 sends")
        s["xmpp"] = T.get("xmpp acked") + T.get("xmpp nacked")
        s["polls"] = T.get("long polls")
        s["events"] = T.get("events")
        s["errors"] = T.error_total()
        new = self.health.poll()
        s["health_max"] = max((ms for start, ms, _ in new if start >= self.t0), default=0.0)
        self.samples.append(s)
        dt = max(1e-9, t - prev["t"]) if prev else 1.0
        cells = []
        for _, key, fmt in self.columns():
            if key.endswith("/s"):
                v = (s[key[:-2]] - prev[key[:-2]]) / dt if prev else 0.0
            else:
                v = s[key]
            cells.append(format(v, fmt))
        self.out("| " + " | ".join(cells) + " |")
        return s

    def columns(self):
        """(heading, sample key, format); a key ending in /s is the rate since the last row."""
        cols = [("t s", "t", "5.0f"), ("RSS MB", "rss_mb", "6.1f"), ("of it anon MB", "anon_mb", "6.1f"),
                ("fds", "fds", "4d"), ("threads", "threads", "3d"), ("store MB", "store_mb", "7.1f"),
                ("legacy sends/s", "legacy/s", "6.0f")]
        if not self.args.reset_load:
            cols += [("v1/s", "v1/s", "3.0f"), ("XMPP msgs/s", "xmpp/s", "4.0f"),
                     ("long polls/s", "polls/s", "4.1f"), ("events/s", "events/s", "6.0f")]
        return cols + [("health max ms", "health_max", "7.1f"), ("errors", "errors", "4d")]

    def run(self):
        args = self.args
        self.start()
        port = self.srv.port
        if args.reset_load:
            log(f"preloading {args.preload:,} multicasts of {PRELOAD_SIZE} tokens")
            done, secs = preload(port, args.preload)
            self.res["preload"] = (done, secs)
            log(f"preloaded {done:,} in {secs:.1f} s ({done / secs:,.0f}/s)")
        threads = self.clients()
        for th in threads:
            th.start()
        log(f"load running for {args.seconds} s (reset at {args.seconds / 2:.0f} s)")
        self.out("| " + " | ".join(h for h, _, _ in self.columns()) + " |")
        self.out("|" + "---:|" * len(self.columns()))
        t0 = self.t0 = time.monotonic()
        prev = self.sample(0.0, None)
        next_sample, reset_at, end = t0 + SAMPLE_S, t0 + args.seconds / 2.0, t0 + args.seconds
        reset_done = False
        while True:
            now = time.monotonic()
            if not reset_done and now >= reset_at:
                if args.reset_load:
                    self.res["messages_at_reset"] = stats_messages(port)
                self.res["reset"] = do_reset(port)
                log(f"POST /api/v1/reset took {self.res['reset'][1]:.1f} ms")
                reset_done = True
                continue
            if now >= next_sample or now >= end:
                prev = self.sample(min(now, end) - t0, prev)
                next_sample += SAMPLE_S
                if now >= end:
                    break
                continue
            wake = min(next_sample, end, reset_at if not reset_done else end)
            if self.srv.proc.poll() is not None:
                raise BenchError(f"fcm-mock exited ({self.srv.proc.returncode}) during the run: "
                                 f"{self.srv.stderr_tail()}")
            time.sleep(max(0.0, wake - time.monotonic()))
        _stop.set()
        deadline = time.monotonic() + 25
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
        stuck = [th.name for th in threads if th.is_alive()]
        if stuck:
            T.error("transport", "client loops still waiting 25 s after the stop", ", ".join(stuck))
        self.probe.send_signal(signal.SIGTERM)
        try:
            self.probe.wait(10)
        except subprocess.TimeoutExpired:
            self.probe.kill()
        self.health.poll()
        self.res["store_end_mb"] = store_mb(self.db)
        self.res["exit"] = self.srv.stop(60)
        self.res["log_levels"], self.res["log_examples"] = scan_log(os.path.join(self.run_dir, "server.log"))

    # --- summary --------------------------------------------------------------------------

    def summary(self):
        args, res, samples = self.args, self.res, self.samples
        checks = {}
        out = self.out
        out()
        # Every probe must be a 200; latencies are those of the load (with --reset-load, the
        # preload's are reported apart).
        rows = [r for r in self.health.rows if r[0] >= self.t0]
        before = [ms for start, ms, _ in self.health.rows if start < self.t0]
        bad = [r for r in self.health.rows if r[2] != 200]
        for _, ms, st in bad:
            if st == 0:
                T.error("transport", "GET /api/v1/health", f"after {ms:.0f} ms")
            else:
                T.error("non2xx", f"GET /api/v1/health {st}")
        lat = [ms for _, ms, _ in rows]
        r_start, r_ms = res.get("reset", (None, None))
        if r_start is not None:
            r_end = r_start + r_ms / 1000.0
            near = [ms for t, ms, _ in rows
                    if t <= r_end + STALL_MARGIN_S and t + ms / 1000.0 >= r_start - STALL_MARGIN_S]
            stall = max(near, default=None)
            slow_sends = [ms for t, ms in self.legacy.slow if t <= r_end and t + ms / 1000.0 >= r_start]
        else:
            stall, slow_sends = None, []
        lg = self.legacy
        elapsed = samples[-1]["t"] if samples else 0.0
        out(f"Legacy sends: {lg.done:,} answered in {elapsed:.0f} s ({lg.done / max(elapsed, 1e-9):,.0f}/s; "
            f"target rate {LEGACY_RATE:,}/s over {LEGACY_CONNECTIONS} connections; "
            f"{lg.skipped:,} slots skipped for being over {BACKLOG_S:.0f} s late); by kind: "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(lg.by_kind.items()))
            + f"; latency p50 {percentile(lg.lat_ms, 50):.2f} ms, p99 {percentile(lg.lat_ms, 99):.2f} ms, "
            f"max {max(lg.lat_ms, default=0):.1f} ms.")
        if lg.skipped > 0.01 * max(1, lg.issued):
            out(f"Note: the load fell short of {LEGACY_RATE:,}/s ({lg.skipped:,} slots skipped): "
                f"the client or the server could not keep up.")
        if not args.reset_load:
            c = T.counts
            out(f"HTTP v1 sends: {c.get('v1 sends', 0):,}. XMPP: {c.get('xmpp sessions', 0):,} sessions "
                f"({c.get('xmpp logins', 0):,} logged in, {c.get('xmpp clean closes', 0):,} left with "
                f"</stream:stream>, {c.get('xmpp abrupt closes', 0):,} closed abruptly), "
                f"{c.get('xmpp sent', 0):,} messages sent, {c.get('xmpp acked', 0):,} acked, "
                f"{c.get('xmpp nacked', 0):,} nacked"
                + "".join(f", {k[10:]} {v:,}" for k, v in sorted(c.items()) if k.startswith("xmpp nack "))
                + ".")
            out(f"Event streams: {c.get('event readers opened', 0):,} opened, {c.get('events', 0):,} events "
                f"({c.get('event bytes', 0) / 1e6:,.1f} MB). Long polls: {c.get('long polls', 0):,} "
                f"({c.get('long polls met', 0):,} met by a send, {c.get('long polls run out (as asked)', 0):,} "
                f"ran out after 5 s as asked). Devices toggled: {c.get('devices toggled', 0):,}.")
        if args.reset_load:
            done, secs = res["preload"]
            out(f"Preload: {done:,} multicasts of {PRELOAD_SIZE} tokens ({done * PRELOAD_SIZE:,} deliveries) "
                f"in {secs:.1f} s ({done / max(secs, 1e-9):,.0f}/s; the slowest health answer meanwhile "
                f"{max(before, default=0):.0f} ms); messages accepted at the reset "
                f"(GET /api/v1/stats): {bench.fmt_int(res.get('messages_at_reset'))}.")
        out(f"Health: {len(rows):,} probes every {HEALTH_INTERVAL_S * 1000:.0f} ms, p50 "
            f"{percentile(lat, 50):.1f} ms, p99 {percentile(lat, 99):.1f} ms, max {max(lat, default=0):.1f} ms; "
            f"{len(bad)} not 200.")
        if samples:
            out(f"Descriptors {min(s['fds'] for s in samples)}-{max(s['fds'] for s in samples)}, "
                f"threads {min(s['threads'] for s in samples)}-{max(s['threads'] for s in samples)}, "
                f"store {min(s['store_mb'] for s in samples):.1f}-{max(s['store_mb'] for s in samples):.1f} MB "
                f"({res['store_end_mb']:.1f} MB at the end, database and WAL).")
        # memory
        if not args.reset_load:
            warm = next((s for s in samples if s["t"] >= args.warmup), None)
            after = [s for s in samples if warm is not None and s["t"] > warm["t"]]
            if warm and after:
                top = max(s["rss_mb"] for s in after)
                ratio = top / warm["rss_mb"]
                slope = rss_slope(after) * 3600.0
                checks["RSS flat after the warm-up (max after / at its end ≤ 1.10)"] = ratio <= TARGET_RSS_RATIO
                out(f"RSS: {samples[0]['rss_mb']:.1f} MB at start, {warm['rss_mb']:.1f} MB at the end of the "
                    f"warm-up ({warm['t']:.0f} s), at most {top:.1f} MB after it: **{ratio:.3f}x** "
                    f"(target ≤ {TARGET_RSS_RATIO:.2f}x); anonymous memory {warm['anon_mb']:.1f} MB, at most "
                    f"{max(s['anon_mb'] for s in after):.1f} MB after; trend after the warm-up {slope:+.1f} MB/hour "
                    f"(least squares over {len(after)} samples).")
            else:
                checks["RSS flat after the warm-up (max after / at its end ≤ 1.10)"] = None
                out("RSS: too few samples after the warm-up to compare.")
        else:
            out(f"RSS: {samples[0]['rss_mb']:.1f} MB after the preload, "
                f"{max(s['rss_mb'] for s in samples):.1f} MB at most, {samples[-1]['rss_mb']:.1f} MB at the end.")
        # reset
        if r_ms is None:
            checks["reset ≤ 100 ms"] = None
        else:
            out(f"Reset: POST /api/v1/reset at {r_start - self.t0:.0f} s took **{r_ms:.1f} ms**; "
                f"the longest health answer within {STALL_MARGIN_S:.1f} s of it: "
                f"**{stall if stall is not None else float('nan'):.1f} ms**; legacy sends that waited on it over 50 ms: "
                f"{len(slow_sends)} (the longest {max(slow_sends, default=0):.0f} ms).")
            checks["reset ≤ 100 ms"] = r_ms <= TARGET_RESET_MS
            checks["health stall around the reset ≤ 100 ms"] = None if stall is None else stall <= TARGET_STALL_MS
        # errors
        cats = {"non2xx": "non-2xx answers", "transport": "transport errors",
                "wrong": "wrong answers", "unanswered": "XMPP messages neither acked nor nacked"}
        for cat, label in cats.items():
            n = T.error_total(cat)
            out(f"{label[0].upper()}{label[1:]}: {n:,}" + ("" if not n else ": " + "; ".join(
                f"{what} ×{v}" + (f" (e.g. {T.examples[(c, what)][0]})" if T.examples.get((c, what)) else "")
                for (c, what), v in sorted(T.errors.items()) if c == cat)))
            checks[f"{label}: 0"] = n == 0
        if T.designed:
            out("Designed (allowed): " + "; ".join(f"{k} ×{v:,}" for k, v in sorted(T.designed.items())) + ".")
        levels = res["log_levels"]
        out(f"Server log: {sum(levels.values()):,} lines ("
            + ", ".join(f"{k} {v:,}" for k, v in sorted(levels.items())) + ")"
            + ("; " + " | ".join(res["log_examples"]) if res["log_examples"] else "") + ".")
        cpu = os.times()
        out(f"Exit code after SIGTERM: {res['exit']}. This client used {cpu.user + cpu.system:.0f} s of CPU "
            f"(its health probe not counted).")
        checks["exit code 0 after SIGTERM"] = res["exit"] == 0
        failed = [k for k, v in checks.items() if v is False]
        unknown = [k for k, v in checks.items() if v is None]
        out()
        if failed:
            out("Missed: " + "; ".join(failed) + ".")
        if unknown:
            out("Could not check: " + "; ".join(unknown) + ".")
        if not failed and not unknown:
            out("All targets met.")
        return not failed and not unknown


def rss_slope(samples):
    """Least-squares slope of RSS (MB) over time (s)."""
    n = len(samples)
    if n < 2:
        return 0.0
    mt = sum(s["t"] for s in samples) / n
    mr = sum(s["rss_mb"] for s in samples) / n
    den = sum((s["t"] - mt) ** 2 for s in samples)
    return sum((s["t"] - mt) * (s["rss_mb"] - mr) for s in samples) / den if den else 0.0


def scan_log(path):
    """Lines per level of the server's log, and the first few warnings or errors."""
    levels, examples = {}, []
    try:
        with open(path, "rb") as f:
            for line in f:
                parts = line.split(b" ", 2)
                level = parts[1].decode(errors="replace") if len(parts) > 2 else "?"
                levels[level] = levels.get(level, 0) + 1
                if level not in ("info", "debug", "trace") and len(examples) < 3:
                    examples.append(line.decode(errors="replace").strip()[:200])
    except OSError:
        pass
    return levels, examples


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--health-probe":
        return health_probe_main(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mock", default=os.environ.get("FCM_MOCK_BIN", os.path.join(ROOT, ".build/release/fcm-mock")))
    ap.add_argument("--seconds", type=int, default=None,
                    help="load duration (default $SOAK_SECONDS, else 600; 30 with --reset-load)")
    ap.add_argument("--reset-load", action="store_true",
                    help="preload ~175k multicasts of 4 tokens, then time a reset under 1,200 sends/s")
    ap.add_argument("--preload", type=int, default=PRELOAD_MULTICASTS,
                    help=f"multicasts to preload with --reset-load (default {PRELOAD_MULTICASTS:,})")
    ap.add_argument("--work", default=os.path.join(ROOT, ".build", "soak"))
    args = ap.parse_args()
    if args.seconds is None:
        env = os.environ.get("SOAK_SECONDS")
        args.seconds = int(env) if env else (30 if args.reset_load else 600)
    if args.seconds < 10:
        raise BenchError("--seconds must be at least 10")
    args.warmup = float(os.environ.get("SOAK_WARMUP", 60 if args.seconds >= 240 else args.seconds / 4))
    mock = args.mock if os.path.isabs(args.mock) else os.path.join(ROOT, args.mock)
    if not os.access(mock, os.X_OK):
        raise BenchError(f"no fcm-mock binary at {mock} (run `make release`, or set FCM_MOCK_BIN)")
    os.makedirs(args.work, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="run-", dir=args.work)
    run = Run(args, mock, run_dir)
    mode = "reset under load" if args.reset_load else "soak"
    run.out(f"fcm-mock {mode} — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
            f"file store, {sum(len(p.load) + len(p.poll) for p in PROJECTS)} devices over {len(PROJECTS)} "
            f"projects, {args.seconds} s of load" + ("" if args.reset_load else f", warm-up {args.warmup:.0f} s"))
    run.out()
    try:
        run.run()
        ok = run.summary()
    finally:
        _stop.set()
        if os.environ.get("SOAK_KEEP"):
            log(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    with open(os.path.join(args.work, "report-reset-load.md" if args.reset_load else "report.md"), "w") as f:
        f.write("\n".join(run.lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.modules["soak"] = sys.modules[__name__]
    bench.run_script(main, log)
