"""Autopush phase of `make bench` (bench.py calls `run`; `bash bench/run.sh --autopush` runs it alone).

Issue 35, point 6, two targets:

(a) A push relayed to a connected browser over HTTP/1.1 costs at most 1.2x the CPU of a push to a
    fake web device, without that device's ECDH. Measured on the server, per push, for:
      - `fake, no body`: a fake `web` device (online), `POST /wp/{id}` with `TTL: 60` and no body
        (no Content-Encoding): the mock's whole path for a push to a fake device, with nothing to
        decrypt (no ECDH, no HKDF, no AES-GCM); the baseline of the target;
      - `fake, aes128gcm`: the same device, one body encrypted once for its keys (reused), which
        the mock decrypts (ECDH and all) and stores: for reference;
      - `relayed, no body`: a raw autopush client (hello, register) that reads each notification
        and acks it (code 100); the server's CPU counts the push, the WebSocket write and the ack
        (the entry `sent`, then `delivered`); like for like with the baseline;
      - `relayed, aes128gcm`: the same with the encrypted body, relayed unread (base64url in the
        notification, the ciphertext kept in the entry), as a browser's pushes come.
    Two measures: instructions per push under callgrind (a mock of its own per case, 1,000 pushes
    on one keep-alive connection after 100 not counted; the same for the same binary whatever the
    machine's neighbours do), and server CPU per push from /proc (one mock, the cases in
    alternating rounds of the same driver, one push at a time). The target is checked on
    instructions, as the other phases' cost targets are.

(b) 1,000 idle autopush connections add at most 20 MB RSS: a fresh mock, VmRSS before, after 10
    connections (hello, one channel registered each) and after 1,000, all idle; the target is on
    the 1,000's whole increase over the mock before any (the first connections' one-time costs
    included); the marginal cost per connection is (RSS at 1,000 - RSS at 10) / 990.

No dependency beyond the standard library and `cryptography` (the aes128gcm body): the WebSocket
client is a few lines here (masked text frames, RFC 6455).
"""

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
import uuid

import bench
import bench_v1
from bench import SENDER_ID, BenchError, Server, http_json, log, raise_nofile

sys.path.insert(0, os.path.join(bench.ROOT, "Tests", "interop"))
from webpush_crypto import encrypt_aes128gcm  # noqa: E402

TARGET_RATIO = 1.2
TARGET_RSS_MB = 20.0
WEB_APP = "com.example.bench.web"
PLAINTEXT = json.dumps({"title": "Goal!", "body": "3-1 in the 89th minute", "url": "/match/42"}).encode()
ROUNDS = 5
ROUND_PUSHES = 4000
WARM_PUSHES = 100
COUNTED_PUSHES = 1000
IDLE_CONNECTIONS = 1000
FIRST_CONNECTIONS = 10


# ---------------------------------------------------------------------------------------------
# a raw autopush client


class AutopushClient:
    """One WebSocket connection to `/autopush` (subprotocol push-notification) that said hello."""

    def __init__(self, port, timeout=60):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /autopush HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           "Sec-WebSocket-Protocol: push-notification\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise BenchError("autopush: the server closed the connection during the upgrade")
            buf += chunk
        head, _, self.buf = buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise BenchError(f"autopush: upgrade answered {head[:200]!r}")
        self.send({"messageType": "hello", "broadcasts": {}, "use_webpush": True})
        hello = self.recv()
        if hello.get("messageType") != "hello" or not hello.get("uaid"):
            raise BenchError(f"autopush: hello answered {hello}")
        self.uaid = hello["uaid"]

    def register(self):
        """Registers a new channel; returns its push endpoint."""
        channel = str(uuid.uuid4())
        self.send({"channelID": channel, "messageType": "register"})
        r = self.recv()
        if r.get("messageType") != "register" or r.get("status") != 200 or not r.get("pushEndpoint"):
            raise BenchError(f"autopush: register answered {r}")
        return channel, r["pushEndpoint"]

    def send(self, obj):
        payload = json.dumps(obj, separators=(",", ":")).encode()
        n = len(payload)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else struct.pack("!BH", 0x80 | 126, n))
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise BenchError("autopush: the server closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        """The next text message, as JSON (pings are answered, other control frames fail)."""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0F
            if op == 0x1:
                return json.loads(payload)
            if op == 0x9:
                mask = os.urandom(4)
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask
                                  + bytes(b ^ mask[i & 3] for i, b in enumerate(payload)))
                continue
            raise BenchError(f"autopush: frame opcode {op} ({payload[:120]!r})")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# the cases


class Case:
    """One kind of push: the endpoint's path, headers and body, and for a relayed one the client
    that reads and acks each notification."""

    def __init__(self, name, path, body, client=None, channel=None, token=None):
        self.name, self.path, self.body, self.client, self.channel = name, path, body, client, channel
        self.token = token
        self.headers = {"TTL": "60"}
        if body:
            self.headers["Content-Encoding"] = "aes128gcm"
        self.sent = 0


def fake_device(url):
    st, data = http_json(url + "/api/v1/devices", "POST", json.dumps(
        {"sender_id": SENDER_ID, "app": WEB_APP, "platform": "web", "online": True}).encode(),
        {"Content-Type": "application/json"})
    if st != 201:
        raise BenchError(f"web device: {st} {data[:300]!r}")
    device = json.loads(data)
    sub = device["web_push"]
    if not sub["endpoint"].startswith(url + "/wp/"):
        raise BenchError(f"the subscription's endpoint is not on the plain port: {sub['endpoint']}")
    return device, sub["endpoint"][len(url):]


def make_cases(url, names):
    """The cases named (fake_nobody, fake_aes128gcm, relayed_nobody, relayed_aes128gcm) on the mock
    at `url`; one fake device, one client per relayed case, one encrypted body for all."""
    port = int(url.rsplit(":", 1)[1])
    device, fake_path = fake_device(url)
    body = encrypt_aes128gcm(PLAINTEXT, device["web_push"]["keys"]["p256dh"], device["web_push"]["keys"]["auth"])
    cases = []
    for name in names:
        with_body = body if name.endswith("aes128gcm") else b""
        if name.startswith("fake"):
            cases.append(Case(name, fake_path, with_body, token=device["token"]))
        else:
            client = AutopushClient(port)
            channel, endpoint = client.register()
            if not endpoint.startswith(url + "/wp/"):
                raise BenchError(f"autopush endpoint not on the plain port: {endpoint}")
            cases.append(Case(name, endpoint[len(url):], with_body, client, channel))
    return cases, body


class Pusher:
    """One keep-alive HTTP/1.1 connection that pushes one at a time."""

    def __init__(self, url):
        self.conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=60)

    def push(self, case):
        self.conn.request("POST", case.path, case.body, case.headers)
        r = self.conn.getresponse()
        r.read()
        if r.status != 201:
            raise BenchError(f"{case.name}: push answered {r.status}")
        case.sent += 1
        if case.client is not None:
            while True:
                n = case.client.recv()
                if n.get("messageType") == "notification":
                    break
            if n.get("channelID") != case.channel or ("data" in n) != bool(case.body):
                raise BenchError(f"{case.name}: unexpected notification {str(n)[:300]}")
            case.client.send({"messageType": "ack",
                              "updates": [{"channelID": case.channel, "version": n["version"], "code": 100}]})

    def settle(self, cases):
        """After the last ack: a `{}` round trip on each client (messages of a connection are
        handled in order, so its acks were), then a short pause for the store's writes."""
        for c in cases:
            if c.client is not None:
                c.client.send({})
                while c.client.recv() != {}:
                    pass
        time.sleep(0.3)

    def close(self):
        self.conn.close()


def check_delivered(url, cases):
    """No push of any case is left `sent` (written, not acked) or `pending`: every relayed push
    was acked, every fake one delivered."""
    for c in cases:
        if c.token is None:
            st, data = http_json(url + f"/api/v1/devices?client_id={c.client.uaid}")
            items = json.loads(data)["items"] if st == 200 else []
            if len(items) != 1:
                raise BenchError(f"{c.name}: the client's device not found: {st} {data[:300]!r}")
            c.token = items[0]["token"]
        for status in ("sent", "pending"):
            st, data = http_json(url + f"/api/v1/devices/{c.token}/messages?status={status}")
            items = json.loads(data).get("items") if st == 200 else None
            if items != []:
                raise BenchError(f"{c.name}: pushes left {status}: {st} {data[:300]!r}")


# ---------------------------------------------------------------------------------------------
# (a) instructions and CPU per push


def instructions_per_push(mock_bin, run_dir, fixtures, name):
    """Instructions per push of case `name` under callgrind, in a mock of its own."""
    def drive(url, ctl):
        cases, _ = make_cases(url, [name])
        p = Pusher(url)
        for _ in range(WARM_PUSHES):
            p.push(cases[0])
        p.settle(cases)
        ctl("-i", "on")
        for _ in range(COUNTED_PUSHES):
            p.push(cases[0])
        p.settle(cases)
        ctl("-d")
        check_delivered(url, cases)
        p.close()
        for c in cases:
            if c.client:
                c.client.close()

    total, argv, _ = bench_v1.under_callgrind(mock_bin, run_dir, fixtures, f"autopush-{name}", drive)
    return total / COUNTED_PUSHES, argv


# The ECDH of a push to a fake device: nettle's scalar multiplication, the rest of the decryption
# (HKDF, AES-GCM) counted with the push.
ECDH_SYMBOL = "nettle_ecc_point_mul"


def inclusive_ir(run_dir, name, symbol):
    """Instructions counted in `symbol` and what it called, over the callgrind dumps of case
    `name` (callgrind_annotate --inclusive=yes); None when it cannot tell."""
    total = 0
    prefix = f"callgrind.autopush-{name}.out."
    for f in sorted(os.listdir(run_dir)):
        if not f.startswith(prefix):
            continue
        out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", os.path.join(run_dir, f)],
                             capture_output=True, text=True, timeout=300)
        for line in out.stdout.splitlines():
            m = re.match(r"\s*([\d,]+) .*:" + re.escape(symbol) + r" \[", line)
            if m:
                total += int(m.group(1).replace(",", ""))
                break
    return total or None


CASES = ("fake_nobody", "fake_aes128gcm", "relayed_nobody", "relayed_aes128gcm")
LABELS = {
    "fake_nobody": "fake web device, no body (baseline)",
    "fake_aes128gcm": "fake web device, aes128gcm (ECDH and decryption)",
    "relayed_nobody": "relayed to an autopush client that acks, no body",
    "relayed_aes128gcm": "relayed to an autopush client that acks, aes128gcm body",
}


def cpu_rounds(mock, rounds):
    """Server CPU per push of every case on one mock: a warm-up of each, then `rounds` rounds of
    ROUND_PUSHES pushes per case, the cases' order turning every round."""
    cases, body = make_cases(mock.url, CASES)
    p = Pusher(mock.url)
    for c in cases:
        for _ in range(WARM_PUSHES * 2):
            p.push(c)
    p.settle(cases)
    out = {c.name: {"cpu_s": 0.0, "pushes": 0, "per_push": [], "rate": []} for c in cases}
    for i in range(rounds):
        order = cases[i % len(cases):] + cases[:i % len(cases)]
        for c in order:
            before, t0 = mock.cpu_s(), time.monotonic()
            for _ in range(ROUND_PUSHES):
                p.push(c)
            p.settle([c])
            used, dt = mock.cpu_s() - before, time.monotonic() - t0
            o = out[c.name]
            o["cpu_s"] += used
            o["pushes"] += ROUND_PUSHES
            o["per_push"].append(1e6 * used / ROUND_PUSHES)
            o["rate"].append(ROUND_PUSHES / dt)
    check_delivered(mock.url, cases)
    p.close()
    for c in cases:
        if c.client:
            c.client.close()
    for o in out.values():
        o["cpu_us"] = 1e6 * o["cpu_s"] / o["pushes"]
    return out, len(body)


# ---------------------------------------------------------------------------------------------
# (b) RSS of idle connections


def idle_rss(mock_bin, run_dir, fixtures):
    """VmRSS (KiB) of a fresh mock before any connection, after FIRST_CONNECTIONS and after
    IDLE_CONNECTIONS idle autopush connections (hello, one channel each)."""
    mock = Server("fcm-mock autopush-rss", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                                            "--db", os.path.join(run_dir, "autopush-rss.sqlite"),
                                            "--fixtures", fixtures],
                  os.path.join(run_dir, "autopush-rss.stderr"), 60)
    clients = []
    try:
        http_json(mock.url + "/api/v1/health")
        time.sleep(1.0)
        res = {"before": mock.rss_kib()}
        for n in range(IDLE_CONNECTIONS):
            c = AutopushClient(mock.port)
            c.register()
            clients.append(c)
            if n + 1 == FIRST_CONNECTIONS:
                time.sleep(1.0)
                res["first"] = mock.rss_kib()
        time.sleep(2.0)
        res["after"] = mock.rss_kib()
        st, data = http_json(mock.url + "/api/v1/health")
        res["health_clients"] = json.loads(data).get("clients") if st == 200 else None
    finally:
        for c in clients:
            c.close()
        res["exit"] = mock.stop(60)
    return res


# ---------------------------------------------------------------------------------------------


def run(mock_bin, run_dir, fixtures, rounds=ROUNDS, callgrind=True):
    """Runs the autopush phase on mocks of its own; returns (results, report lines, checks)."""
    res = {"nofile": raise_nofile(IDLE_CONNECTIONS + 256)}

    log(f"autopush: RSS of {IDLE_CONNECTIONS} idle autopush connections")
    res["rss"] = idle_rss(mock_bin, run_dir, fixtures)

    log(f"autopush: server CPU per push, {len(CASES)} cases, {rounds} rounds of {ROUND_PUSHES} pushes each")
    mock = Server("fcm-mock autopush", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                                        "--db", os.path.join(run_dir, "autopush.sqlite"), "--fixtures", fixtures],
                  os.path.join(run_dir, "autopush.stderr"), 60)
    try:
        res["cpu"], res["body_len"] = cpu_rounds(mock, rounds)
    finally:
        res["exit"] = mock.stop(120)

    res["ir"] = {}
    if callgrind and shutil.which("valgrind") and shutil.which("callgrind_control"):
        for name in CASES:
            log(f"autopush: instructions per push under callgrind, {name}, {COUNTED_PUSHES} pushes")
            res["ir"][name], res.setdefault("ir_argv", {})[name] = instructions_per_push(
                mock_bin, run_dir, fixtures, name)
        ecdh = inclusive_ir(run_dir, "fake_aes128gcm", ECDH_SYMBOL) if shutil.which("callgrind_annotate") else None
        res["ecdh_ir"] = ecdh / COUNTED_PUSHES if ecdh else None

    cpu = {k: v["cpu_us"] for k, v in res["cpu"].items()}
    per_round = [r / b for r, b in zip(res["cpu"]["relayed_nobody"]["per_push"], res["cpu"]["fake_nobody"]["per_push"])]
    ir = res["ir"]
    ratio_ir = ir["relayed_nobody"] / ir["fake_nobody"] if ir else None
    ratio_ir_body = ir["relayed_aes128gcm"] / ir["fake_nobody"] if ir else None
    fake_less_ecdh = ir["fake_aes128gcm"] - res["ecdh_ir"] if ir and res.get("ecdh_ir") else None
    ratio_ir_literal = ir["relayed_aes128gcm"] / fake_less_ecdh if fake_less_ecdh else None
    ratio_cpu = statistics.median(per_round)
    rss = res["rss"]
    added_kib = rss["after"]["VmRSS"] - rss["before"]["VmRSS"]
    marginal_kib = (rss["after"]["VmRSS"] - rss["first"]["VmRSS"]) / (IDLE_CONNECTIONS - FIRST_CONNECTIONS)
    checks = {
        # The measure: the relayed push (its body, the write, the ack) against the fake web
        # device's push of the same body less that device's ECDH (what the browser does instead).
        "autopush_cpu": (ratio_ir_literal if ratio_ir_literal is not None else ratio_cpu) <= TARGET_RATIO,
        "autopush_rss": added_kib / 1024 <= TARGET_RSS_MB,
        "autopush_exit": res["exit"] == 0 and rss["exit"] == 0,
    }
    res["ratios"] = {"ir": ratio_ir, "ir_body": ratio_ir_body, "ir_literal": ratio_ir_literal, "cpu": ratio_cpu,
                     "cpu_rounds": per_round}
    v = lambda ok: "ok" if ok else "**missed**"

    lines = [
        "",
        "Autopush (mocks of their own; one push at a time on one keep-alive HTTP/1.1 connection, "
        f"`TTL: 60`, no VAPID; the aes128gcm body is {res['body_len']} bytes, {len(PLAINTEXT)} of plaintext, "
        "encrypted once for the fake device's keys; a relayed push counts the server's push, WebSocket "
        "write and the client's ack):",
        "",
        "| push | instructions/push (callgrind, "
        f"{COUNTED_PUSHES:,} pushes) | against the baseline | server CPU/push, µs (/proc, {rounds} rounds of "
        f"{ROUND_PUSHES:,}) | against the baseline |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in CASES:
        i = ir.get(name)
        lines.append(f"| {LABELS[name]} | {i:,.0f} | {i / ir['fake_nobody']:.2f}x |" if i else f"| {LABELS[name]} | | |")
        lines[-1] += f" {cpu[name]:.1f} | {cpu[name] / cpu['fake_nobody']:.2f}x |"
    lines += [
        "",
        "| measure | value | target | result |",
        "|---|---:|---|---|",
    ]
    if ratio_ir_literal is not None:
        lines.append(f"| relayed push with the aes128gcm body (with the ack) against the fake device's aes128gcm push less its ECDH "
                     f"(`{ECDH_SYMBOL}`, inclusive: {res['ecdh_ir']:,.0f} of {ir['fake_aes128gcm']:,.0f}; "
                     f"left {fake_less_ecdh:,.0f}), instructions | **{ratio_ir_literal:.2f}x** | ≤ {TARGET_RATIO}x | "
                     f"{v(checks['autopush_cpu'])} |")
    if ratio_ir is not None:
        lines.append(f"| stricter: a relayed push without a body (with the ack) against a fake device's push without a body, "
                     f"instructions | {ratio_ir:.2f}x | (info: the ack is a second state change the fake push has not) | |")
        lines.append(f"| the same, the relayed push carrying the aes128gcm body | {ratio_ir_body:.2f}x | (info) | |")
    lines.append(f"| the same in server CPU (/proc, median of {rounds} rounds: "
                 f"{', '.join(f'{r:.2f}' for r in per_round)}) | {ratio_cpu:.2f}x | "
                 f"{'(info)' if ratio_ir_literal is not None else f'≤ {TARGET_RATIO}x'} | "
                 f"{'' if ratio_ir_literal is not None else v(checks['autopush_cpu'])} |")
    lines += [
        f"| RSS added by {IDLE_CONNECTIONS:,} idle autopush connections (hello, one channel each), MB "
        f"({rss['before']['VmRSS'] / 1024:.1f} → {rss['after']['VmRSS'] / 1024:.1f}) "
        f"| **{added_kib / 1024:.1f}** | ≤ {TARGET_RSS_MB:.0f} | {v(checks['autopush_rss'])} |",
        f"| of which per connection past the first {FIRST_CONNECTIONS}, KiB "
        f"({rss['first']['VmRSS'] / 1024:.1f} MB at {FIRST_CONNECTIONS}) | {marginal_kib:.1f} | (info) | |",
        "",
        f"Commands: `bash bench/run.sh --autopush` (bench/bench_autopush.py; the client is its own: "
        f"RLIMIT_NOFILE {res['nofile']}, inherited by the mock it starts).",
    ]
    for name, argv in res.get("ir_argv", {}).items():
        lines.append(f"- instructions, {name}: `{bench_v1.shell_line(argv)}`, then `callgrind_control -i on PID`, "
                     f"{COUNTED_PUSHES} pushes, `callgrind_control -d PID`")
    return res, lines, checks


def main():
    ap = argparse.ArgumentParser(description="the autopush phase of the benchmark, alone")
    ap.add_argument("--mock", required=True)
    ap.add_argument("--work", default=os.path.join(bench.ROOT, ".build", "bench"))
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--no-callgrind", action="store_true")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    fixtures, _tokens = bench.write_fixtures(work)
    run_dir = os.path.join(work, f"autopush-{int(time.time())}")
    os.makedirs(run_dir)
    try:
        _res, lines, checks = run(os.path.abspath(args.mock), run_dir, fixtures, args.rounds,
                                  callgrind=not args.no_callgrind)
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(run_dir, ignore_errors=True)
    print("\n".join(lines))
    failed = [k for k, ok in checks.items() if not ok]
    print("\n" + (f"Missed: {', '.join(failed)}." if failed else "All targets met."))
    return 1 if failed else 0


if __name__ == "__main__":
    bench.run_script(main, log)
