"""MCS phase of `make bench` (bench.py calls `run`; `bash bench/run.sh --mcs` runs it alone).

Issue 36, point 6, two targets:

(a) An FCM data send delivered over MCS costs at most 1.3x a delivery to a fake android device.
    Measured on the server, per send, for the same legacy send (`POST /fcm/send`, `key=`,
    `{"to": token, "data": {"a": "b"}}`) to:
      - `fake`: a fake `android` device made online with `POST /api/v1/devices` (the baseline):
        routed, recorded, delivered to its inbox;
      - `mcs`: an `android` device a raw GCM client registered (checkin, register3 with the
        project's sender id) and that is logged in over MCS: the send recorded `sent`, written as
        a DataMessageStanza over TLS, then the client's SelectiveAck (an IqStanza, extension 12)
        read and recorded `delivered`.
    Two measures, as the autopush phase's: instructions per send under callgrind (a mock of its
    own per case, 1,000 sends on one keep-alive connection after 100 not counted), and server CPU
    per send from /proc (one mock, both cases in alternating rounds). The target is on
    instructions.

(b) The MCS port holds 1,000 idle logged-in connections in at most 40 MB RSS, heartbeats
    answered: a fresh mock, VmRSS before any connection, after 10 and after 1,000 connections
    (each its own checkin, register3 and MCS login), all idle; then a HeartbeatPing on a sample of
    them, each answered by a HeartbeatAck. The target is on the whole RSS of the mock with its
    1,000 connections; the increase and the threads (a constant: one loop thread serves every
    MCS connection) and the thread stacks' share (from smaps) are printed beside it. The RSS is
    measured twice: with the bench's fixture (10,000 devices) and with the default fixture (no
    `--fixtures`), which tells the connections' cost apart from the fixture's.

No dependency beyond the standard library: protobuf and MCS's framing are a few lines here
(as in Tests/interop/fcmclient.py).
"""

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import time
import urllib.parse

import bench
import bench_v1
from bench import APP, SENDER_ID, SERVER_KEY, BenchError, Server, http_json, log, raise_nofile

TARGET_RATIO = 1.3
TARGET_RSS_MB = 40.0
ROUNDS = 5
ROUND_SENDS = 3000
WARM_SENDS = 100
COUNTED_SENDS = 1000
IDLE_CONNECTIONS = 1000
FIRST_CONNECTIONS = 10
HEARTBEAT_SAMPLE = 100
DATA = {"a": "b"}

TAG_HEARTBEAT_PING, TAG_HEARTBEAT_ACK, TAG_LOGIN_REQUEST, TAG_LOGIN_RESPONSE = 0, 1, 2, 3
TAG_CLOSE, TAG_IQ, TAG_DATA = 4, 7, 8
MCS_VERSION = 41


# ---------------------------------------------------------------------------------------------
# protobuf, by hand


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


def pb_fields(data):
    """A protobuf message as {field: [values]} (varints and fixed64 as int, bytes as bytes)."""
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
            raise BenchError(f"mcs: protobuf wire type {wire}")
        out.setdefault(field, []).append(value)
    return out


# ---------------------------------------------------------------------------------------------
# a raw GCM client: checkin, register3, MCS


def checkin(conn):
    """A new client (an empty AndroidCheckinRequest's `checkin`); (android_id, security_token)."""
    conn.request("POST", "/checkin", pb_bytes(4, b""), {"Content-Type": "application/x-protobuf"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise BenchError(f"checkin answered {r.status} {data[:200]!r}")
    f = pb_fields(data)
    return f[7][0], f[8][0]


def register(conn, android_id, security_token):
    """register3 with the project's sender id: the token of an android device of that project."""
    form = urllib.parse.urlencode({"app": APP, "device": str(android_id), "sender": SENDER_ID})
    conn.request("POST", "/c2dm/register3", form, {"Content-Type": "application/x-www-form-urlencoded",
                                                    "Authorization": f"AidLogin {android_id}:{security_token}"})
    r = conn.getresponse()
    text = r.read().decode()
    if r.status != 200 or not text.startswith("token="):
        raise BenchError(f"register3 answered {r.status} {text[:200]!r}")
    return text[len("token="):]


def tls_context(ca):
    ctx = ssl.create_default_context(cafile=ca)
    return ctx


class McsClient:
    """One logged-in MCS connection (TLS, version byte, LoginRequest, LoginResponse)."""

    def __init__(self, port, ctx, android_id, security_token, timeout=60):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
        self.buf = b""
        self.version_seen = False
        login = (pb_bytes(1, "bench") + pb_bytes(2, "mcs.android.com") + pb_bytes(3, str(android_id))
                 + pb_bytes(4, str(android_id)) + pb_bytes(5, str(security_token)) + pb_int(16, 2))
        self.sock.sendall(bytes([MCS_VERSION]) + self.packet_bytes(TAG_LOGIN_REQUEST, login))
        tag, body = self.packet()
        if tag != TAG_LOGIN_RESPONSE or 3 in pb_fields(body):
            raise BenchError(f"mcs: login answered tag {tag} {body[:200]!r}")

    @staticmethod
    def packet_bytes(tag, body):
        return bytes([tag]) + pb_varint(len(body)) + body

    def send(self, tag, body):
        self.sock.sendall(self.packet_bytes(tag, body))

    def packet(self):
        """The next (tag, body)."""
        while True:
            b, i = self.buf, 0 if self.version_seen else 1
            if len(b) > i:
                if not self.version_seen and b[0] != MCS_VERSION:
                    raise BenchError(f"mcs: the server's version byte is {b[0]}")
                tag, j, size, shift = b[i], i + 1, 0, 0
                while j < len(b):
                    c = b[j]
                    j += 1
                    size |= (c & 0x7F) << shift
                    shift += 7
                    if not c & 0x80:
                        if len(b) >= j + size:
                            self.version_seen = True
                            self.buf = b[j + size:]
                            return tag, b[j:j + size]
                        break
            chunk = self.sock.recv(65536)
            if not chunk:
                raise BenchError("mcs: the server closed the connection")
            self.buf += chunk

    def data_message(self):
        """The next DataMessageStanza's fields (heartbeats skipped; a ping answered)."""
        while True:
            tag, body = self.packet()
            if tag == TAG_DATA:
                return pb_fields(body)
            if tag == TAG_HEARTBEAT_PING:
                self.send(TAG_HEARTBEAT_ACK, b"")
            elif tag != TAG_HEARTBEAT_ACK:
                raise BenchError(f"mcs: tag {tag} while waiting for a data message ({body[:200]!r})")

    def selective_ack(self, persistent_id):
        """IqStanza{type SET, id "", extension{id 12, data SelectiveAck{id}}}."""
        ext = pb_int(1, 12) + pb_bytes(2, pb_bytes(1, persistent_id))
        self.send(TAG_IQ, pb_int(2, 1) + pb_bytes(3, b"") + pb_bytes(7, ext))

    def heartbeat(self):
        """A HeartbeatPing; True when a HeartbeatAck is the next packet."""
        self.send(TAG_HEARTBEAT_PING, b"")
        tag, _ = self.packet()
        return tag == TAG_HEARTBEAT_ACK

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def gcm_client(url, mcs_port, ctx, conn=None):
    """A checked-in, registered, logged-in raw GCM client: (McsClient, token, android_id)."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=60)
    try:
        aid, secret = checkin(conn)
        token = register(conn, aid, secret)
    finally:
        if own:
            conn.close()
    return McsClient(mcs_port, ctx, aid, secret), token, aid


def tls_ca(url):
    st, data = http_json(url + "/api/v1/health")
    ca = json.loads(data).get("tls_ca") if st == 200 else None
    if not ca or not os.path.exists(ca):
        raise BenchError(f"health names no TLS CA: {st} {data[:300]!r}")
    return ca


# ---------------------------------------------------------------------------------------------
# the cases


class Case:
    def __init__(self, name, token, client=None):
        self.name, self.token, self.client = name, token, client
        self.body = json.dumps({"to": token, "data": DATA}).encode()
        self.sent = 0


def make_cases(url, mcs_port, names):
    cases = []
    for name in names:
        if name == "fake":
            st, data = http_json(url + "/api/v1/devices", "POST", json.dumps(
                {"sender_id": SENDER_ID, "platform": "android", "online": True}).encode(),
                {"Content-Type": "application/json"})
            if st != 201:
                raise BenchError(f"android device: {st} {data[:300]!r}")
            cases.append(Case(name, json.loads(data)["token"]))
        else:
            client, token, _ = gcm_client(url, mcs_port, tls_context(tls_ca(url)))
            cases.append(Case(name, token, client))
    return cases


class Sender:
    """One keep-alive HTTP/1.1 connection that sends one at a time; an MCS case's client reads
    each delivery and acks it (SelectiveAck) before the next send."""

    def __init__(self, url):
        self.conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=60)
        self.headers = {"Content-Type": "application/json", "Authorization": f"key={SERVER_KEY}"}

    def send(self, case):
        self.conn.request("POST", "/fcm/send", case.body, self.headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200 or b'"success":1' not in data:
            raise BenchError(f"{case.name}: send answered {r.status} {data[:300]!r}")
        case.sent += 1
        if case.client is not None:
            f = case.client.data_message()
            pid = f.get(9, [b""])[0]
            pairs = [pb_fields(a) for a in f.get(7, [])]
            if not pid or [(p[1][0], p[2][0]) for p in pairs] != [(b"a", b"b")]:
                raise BenchError(f"{case.name}: unexpected DataMessageStanza {f}")
            case.client.selective_ack(pid)

    def settle(self, cases):
        """After the last ack: a heartbeat round trip on each client (its packets are handled in
        order, so its acks were), then a short pause for the store's writes."""
        for c in cases:
            if c.client is not None and not c.client.heartbeat():
                raise BenchError(f"{c.name}: no HeartbeatAck")
        time.sleep(0.3)

    def close(self):
        self.conn.close()


def check_delivered(url, cases):
    """No send of any case is left `sent` (written, not acked) or `pending`."""
    for c in cases:
        for status in ("sent", "pending"):
            st, data = http_json(url + f"/api/v1/devices/{c.token}/messages?status={status}")
            items = json.loads(data).get("items") if st == 200 else None
            if items != []:
                raise BenchError(f"{c.name}: sends left {status}: {st} {data[:300]!r}")


def server_args(http_port="0", https_port="0", mcs_port="0"):
    return ["--http-port", str(http_port), "--xmpp-port", "0", "--https-port", str(https_port),
            "--mcs-port", str(mcs_port)]


# ---------------------------------------------------------------------------------------------
# (a) instructions and CPU per send


CASES = ("fake", "mcs")
LABELS = {
    "fake": "fake android device, online (baseline)",
    "mcs": "android device of a raw GCM client logged in over MCS, SelectiveAck each",
}


def instructions_per_send(mock_bin, run_dir, fixtures, name):
    """Instructions per send of case `name` under callgrind, in a mock of its own (listening on
    HTTPS and MCS in both cases)."""
    https_port, mcs_port = bench.free_port(), bench.free_port()

    def drive(url, ctl):
        cases = make_cases(url, mcs_port, [name])
        s = Sender(url)
        for _ in range(WARM_SENDS):
            s.send(cases[0])
        s.settle(cases)
        ctl("-i", "on")
        for _ in range(COUNTED_SENDS):
            s.send(cases[0])
        s.settle(cases)
        ctl("-d")
        check_delivered(url, cases)
        s.close()
        for c in cases:
            if c.client:
                c.client.close()

    total, argv, _ = bench_v1.under_callgrind(mock_bin, run_dir, fixtures, f"mcs-{name}", drive,
                                              extra_args=["--https-port", str(https_port), "--mcs-port", str(mcs_port)])
    return total / COUNTED_SENDS, argv


def cpu_rounds(mock, rounds):
    """Server CPU per send of both cases on one mock, in alternating rounds of ROUND_SENDS."""
    cases = make_cases(mock.url, mock.mcs_port, CASES)
    s = Sender(mock.url)
    for c in cases:
        for _ in range(WARM_SENDS * 2):
            s.send(c)
    s.settle(cases)
    out = {c.name: {"cpu_s": 0.0, "sends": 0, "per_send": [], "rate": []} for c in cases}
    for i in range(rounds):
        for c in (cases if i % 2 == 0 else cases[::-1]):
            before, t0 = mock.cpu_s(), time.monotonic()
            for _ in range(ROUND_SENDS):
                s.send(c)
            s.settle([c])
            used, dt = mock.cpu_s() - before, time.monotonic() - t0
            o = out[c.name]
            o["cpu_s"] += used
            o["sends"] += ROUND_SENDS
            o["per_send"].append(1e6 * used / ROUND_SENDS)
            o["rate"].append(ROUND_SENDS / dt)
    check_delivered(mock.url, cases)
    s.close()
    for c in cases:
        if c.client:
            c.client.close()
    for o in out.values():
        o["cpu_us"] = 1e6 * o["cpu_s"] / o["sends"]
    return out


# ---------------------------------------------------------------------------------------------
# (b) RSS of idle connections


def stack_rss_kib(pid):
    """Resident KiB of the mappings that look like thread stacks (anonymous, read-write, the size
    of RLIMIT_STACK's default thread stack, 8 MiB, or of the mock's own smaller MCS stacks when
    they are named by size below 8 MiB and above 64 KiB with a guard page before them), and how
    many there are. From /proc/PID/smaps; an estimate (glibc does not name its stacks)."""
    maps, cur, prev = [], None, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(\S*)", line)
            if m:
                cur = {"start": int(m.group(1), 16), "end": int(m.group(2), 16), "perms": m.group(3),
                       "inode": int(m.group(4)), "path": m.group(5), "rss": 0}
                maps.append(cur)
            elif line.startswith("Rss:") and cur is not None:
                cur["rss"] = int(line.split()[1])
    kib = count = 0
    for a, b in zip(maps, maps[1:]):
        # glibc's thread stack: a guard mapping (---p) right below the stack (rw-p), anonymous.
        if a["perms"] == "---p" and b["perms"] == "rw-p" and a["end"] == b["start"] \
                and not b["path"] and b["inode"] == 0 and 64 << 10 <= b["end"] - b["start"] <= 8 << 20 \
                and a["end"] - a["start"] <= 64 << 10:
            kib += b["rss"]
            count += 1
    return kib, count


def idle_rss(mock_bin, run_dir, fixtures, name="mcs-rss"):
    """VmRSS (KiB) and threads of a fresh mock before any connection, after FIRST_CONNECTIONS and
    after IDLE_CONNECTIONS logged-in idle MCS connections; then heartbeats on a sample. `fixtures`
    None: the mock's default fixture."""
    argv = [mock_bin, "serve", *server_args(), "--db", os.path.join(run_dir, f"{name}.sqlite")]
    if fixtures is not None:
        argv += ["--fixtures", fixtures]
    mock = Server(f"fcm-mock {name}", argv, os.path.join(run_dir, f"{name}.stderr"), 60)
    clients = []
    res = {}
    try:
        ctx = tls_context(tls_ca(mock.url))
        time.sleep(1.0)
        res["before"] = mock.rss_kib()
        res["before_stacks"] = stack_rss_kib(mock.proc.pid)
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=60)
        t0 = time.monotonic()
        for n in range(IDLE_CONNECTIONS):
            c, _, _ = gcm_client(mock.url, mock.mcs_port, ctx, conn)
            clients.append(c)
            if n + 1 == FIRST_CONNECTIONS:
                time.sleep(1.0)
                res["first"] = mock.rss_kib()
        res["connect_s"] = time.monotonic() - t0
        conn.close()
        time.sleep(2.0)
        res["after"] = mock.rss_kib()
        res["after_stacks"] = stack_rss_kib(mock.proc.pid)
        st, data = http_json(mock.url + "/api/v1/health")
        res["health"] = json.loads(data) if st == 200 else None
        step = max(1, len(clients) // HEARTBEAT_SAMPLE)
        sample = clients[::step][:HEARTBEAT_SAMPLE]
        res["heartbeats"] = (sum(1 for c in sample if c.heartbeat()), len(sample))
        res["after_heartbeats"] = mock.rss_kib()
    finally:
        for c in clients:
            c.close()
        res["exit"] = mock.stop(60)
    return res


# ---------------------------------------------------------------------------------------------


def rss_lines(rss, label):
    """The report's rows for one RSS measure (`idle_rss`)."""
    added_kib = rss["after"]["VmRSS"] - rss["before"]["VmRSS"]
    marginal_kib = (rss["after"]["VmRSS"] - rss["first"]["VmRSS"]) / (IDLE_CONNECTIONS - FIRST_CONNECTIONS)
    hb_ok, hb_n = rss["heartbeats"]
    stacks_kib, stacks_n = rss["after_stacks"]
    return [
        f"| RSS of the mock ({label}) holding {IDLE_CONNECTIONS:,} idle logged-in MCS connections (each its own "
        f"checkin, register3 and login), MB; heartbeats answered {hb_ok} of {hb_n} "
        f"| **{rss['after']['VmRSS'] / 1024:.1f}** | ≤ {TARGET_RSS_MB:.0f}, every heartbeat answered | "
        f"{'ok' if rss['after']['VmRSS'] / 1024 <= TARGET_RSS_MB and hb_ok == hb_n else '**missed**'} |",
        f"| of which added by the connections, MB ({rss['before']['VmRSS'] / 1024:.1f} before; "
        f"{rss['first']['VmRSS'] / 1024:.1f} at {FIRST_CONNECTIONS}) | {added_kib / 1024:.1f} | (info) | |",
        f"| per connection past the first {FIRST_CONNECTIONS}, KiB | {marginal_kib:.1f} | (info) | |",
        f"| threads before → after | {rss['before']['Threads']} → {rss['after']['Threads']} | (info) | |",
        f"| thread stacks resident after (smaps: {stacks_n} guarded anonymous mappings of 64 KiB-8 MiB), MB "
        f"| {stacks_kib / 1024:.1f} | (info) | |",
    ]


def run_rss(mock_bin, run_dir, fixtures):
    """The RSS measures alone (`--rss-only`): with the bench's fixture and with the default one."""
    res = {"nofile": raise_nofile(2 * IDLE_CONNECTIONS + 256)}
    log(f"mcs: RSS of {IDLE_CONNECTIONS} idle logged-in MCS connections, the bench's fixture")
    res["rss"] = idle_rss(mock_bin, run_dir, fixtures)
    log(f"mcs: RSS of {IDLE_CONNECTIONS} idle logged-in MCS connections, the default fixture")
    res["rss_default"] = idle_rss(mock_bin, run_dir, None, "mcs-rss-default")
    return res


def run(mock_bin, run_dir, fixtures, rounds=ROUNDS, callgrind=True, rss_only=False):
    """Runs the MCS phase on mocks of its own; returns (results, report lines, checks)."""
    res = run_rss(mock_bin, run_dir, fixtures)
    if rss_only:
        rss, rss_default = res["rss"], res["rss_default"]
        lines = ["", "| measure | value | target | result |", "|---|---:|---|---|",
                 *rss_lines(rss, "the bench's fixture, 10,000 devices"), *rss_lines(rss_default, "the default fixture")]
        checks = {"mcs_rss": rss["after"]["VmRSS"] / 1024 <= TARGET_RSS_MB and rss["heartbeats"][0] == rss["heartbeats"][1],
                  "mcs_exit": rss["exit"] == 0 and rss_default["exit"] == 0}
        return res, lines, checks

    log(f"mcs: server CPU per send, {len(CASES)} cases, {rounds} rounds of {ROUND_SENDS} sends each")
    mock = Server("fcm-mock mcs", [mock_bin, "serve", *server_args(), "--db", os.path.join(run_dir, "mcs.sqlite"),
                                   "--fixtures", fixtures],
                  os.path.join(run_dir, "mcs.stderr"), 60)
    try:
        res["cpu"] = cpu_rounds(mock, rounds)
    finally:
        res["exit"] = mock.stop(120)

    res["ir"] = {}
    if callgrind and shutil.which("valgrind") and shutil.which("callgrind_control"):
        for name in CASES:
            log(f"mcs: instructions per send under callgrind, {name}, {COUNTED_SENDS} sends")
            res["ir"][name], res.setdefault("ir_argv", {})[name] = instructions_per_send(mock_bin, run_dir, fixtures, name)

    cpu = {k: v["cpu_us"] for k, v in res["cpu"].items()}
    per_round = [m / f for m, f in zip(res["cpu"]["mcs"]["per_send"], res["cpu"]["fake"]["per_send"])]
    ratio_cpu = statistics.median(per_round)
    ir = res["ir"]
    ratio_ir = ir["mcs"] / ir["fake"] if ir else None
    rss, rss_default = res["rss"], res["rss_default"]
    after_mb = rss["after"]["VmRSS"] / 1024
    hb_ok, hb_n = rss["heartbeats"]
    checks = {
        "mcs_cpu": (ratio_ir if ratio_ir is not None else ratio_cpu) <= TARGET_RATIO,
        "mcs_rss": after_mb <= TARGET_RSS_MB and hb_ok == hb_n,
        "mcs_exit": res["exit"] == 0 and rss["exit"] == 0 and rss_default["exit"] == 0,
    }
    res["ratios"] = {"ir": ratio_ir, "cpu": ratio_cpu, "cpu_rounds": per_round}
    v = lambda ok: "ok" if ok else "**missed**"

    lines = [
        "",
        "MCS (mocks of their own, listening on HTTPS and MCS; one legacy send at a time on one keep-alive "
        f"HTTP/1.1 connection, `{json.dumps({'data': DATA})[1:-1]}`; a send over MCS counts the server's send, "
        "the DataMessageStanza written over TLS and the client's SelectiveAck):",
        "",
        f"| send | instructions/send (callgrind, {COUNTED_SENDS:,} sends) | against the baseline | "
        f"server CPU/send, µs (/proc, {rounds} rounds of {ROUND_SENDS:,}) | against the baseline |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in CASES:
        i = ir.get(name)
        lines.append(f"| {LABELS[name]} | {i:,.0f} | {i / ir['fake']:.2f}x |" if i else f"| {LABELS[name]} | | |")
        lines[-1] += f" {cpu[name]:.1f} | {cpu[name] / cpu['fake']:.2f}x |"
    lines += [
        "",
        "| measure | value | target | result |",
        "|---|---:|---|---|",
    ]
    if ratio_ir is not None:
        lines.append(f"| a send delivered over MCS (with the SelectiveAck) against a send to a fake android device, "
                     f"instructions | **{ratio_ir:.2f}x** | ≤ {TARGET_RATIO}x | {v(checks['mcs_cpu'])} |")
    lines.append(f"| the same in server CPU (/proc, median of {rounds} rounds: "
                 f"{', '.join(f'{r:.2f}' for r in per_round)}) | {ratio_cpu:.2f}x | "
                 f"{'(info)' if ratio_ir is not None else f'≤ {TARGET_RATIO}x'} | "
                 f"{'' if ratio_ir is not None else v(checks['mcs_cpu'])} |")
    lines += [
        *rss_lines(rss, "the bench's fixture, 10,000 devices"),
        *rss_lines(rss_default, "the default fixture"),
        "",
        f"Commands: `bash bench/run.sh --mcs` (bench/bench_mcs.py; the client is its own: RLIMIT_NOFILE "
        f"{res['nofile']}, inherited by the mock it starts; {IDLE_CONNECTIONS:,} connections made in "
        f"{rss['connect_s']:.1f} s).",
    ]
    for name, argv in res.get("ir_argv", {}).items():
        lines.append(f"- instructions, {name}: `{bench_v1.shell_line(argv)}`, then `callgrind_control -i on PID`, "
                     f"{COUNTED_SENDS} sends, `callgrind_control -d PID`")
    return res, lines, checks


def main():
    ap = argparse.ArgumentParser(description="the MCS phase of the benchmark, alone")
    ap.add_argument("--mock", required=True)
    ap.add_argument("--work", default=os.path.join(bench.ROOT, ".build", "bench"))
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--rss-only", action="store_true", help="only the RSS of idle connections (both fixtures)")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    fixtures, _tokens = bench.write_fixtures(work)
    run_dir = os.path.join(work, f"mcs-{int(time.time())}")
    os.makedirs(run_dir)
    try:
        _res, lines, checks = run(os.path.abspath(args.mock), run_dir, fixtures, args.rounds,
                                  callgrind=not args.no_callgrind, rss_only=args.rss_only)
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(run_dir, ignore_errors=True)
    print("\n".join(lines))
    failed = [k for k, ok in checks.items() if not ok]
    print("\n" + (f"Missed: {', '.join(failed)}." if failed else "All targets met."))
    return 1 if failed else 0


if __name__ == "__main__":
    bench.run_script(main, log)
