#!/usr/bin/env python3
"""fcm-mock benchmark driver (run through bench/run.sh, which installs and builds first).

    python3 bench/bench.py --mock BIN --ceiling BIN --work DIR [--duration 10]

Measures, on loopback only, with bounded loops:
  a. single-token sends (wrk, 32 connections, 2 threads) against the mock and the ceiling
  b. 1000-token multicasts (wrk, 4 connections) against the mock
  c. start-up: process start to the first answered GET /api/v1/health (median of 10)
  d. resident memory of the mock after at least 100,000 accepted messages
  e. the web page's first screen (PAGE_FIRST_SCREEN) with 1 message stored and with the
     single-token phase's 100,000+, and right after a restart on that store
  (then HTTP v1 in bench_v1.py, APNs against v1 over one HTTP/2 connection in bench_apns.py,
  Web Push in bench_webpush.py, autopush in bench_autopush.py, and MCS in bench_mcs.py)
and checks that every send answered 200 was recorded. Prints a markdown report (also written to
WORK/report.md). Exit 0: all targets met; 1: a target missed; 2: could not measure.
"""

import argparse
import hashlib
import http.client
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SENDER_ID = "424242424242"
SERVER_KEY = "AAAAbench:bench-server-key"
APP = "com.example.bench"
DEVICES = 10_000
MULTICAST_SIZE = 1000
RSS_MESSAGES = 100_000

TARGET_RATIO = 0.40
TARGET_MULTICAST_P50_MS = 15.0
TARGET_STARTUP_MS = 50.0
TARGET_RSS_MB = 30.0
TARGET_CPU_US = 45.0  # server CPU per persisted single-token send (issue 15)
TARGET_P99_X = 3.0  # p99 under load, and p50 of one sequential connection, vs the ceiling's
TARGET_RESET_MS = 50.0
FANOUT_DEVICES = 100_000
TARGET_TOPIC_MS = 1000.0
TARGET_CONDITION_MS = 300.0
TARGET_XMPP_ONE = 25_000.0
# The web page's first screen with 100,000+ messages stored against 1 stored: at most 1.5x, or
# 5 ms more, whichever allows more (5 ms is noise on this shared machine when one load is ~6 ms).
TARGET_PAGE_X = 1.5
TARGET_PAGE_PLUS_MS = 5.0
# What the page asks for when it opens with no filter and no #message=/#device= link
# (Resources/web: page.js's loadMessages, loadDevices, loadTopics, loadGroups, loadXmpp and
# connect(), overview.js's first load of the counters), in the order its scripts ask.
PAGE_FIRST_SCREEN = (
    "/",
    "/api/v1/messages?limit=50&recipients=1&recipient_counts=true&total=true",
    "/api/v1/devices?limit=50&total=true",
    "/api/v1/topics?limit=1000",
    "/api/v1/groups?limit=1000",
    "/api/v1/xmpp/connections?limit=1000",
    "/api/v1/events",
    "/api/v1/stats",
    "/api/v1/stats/series?window=600&bucket=10",
)

_children = []


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# fixtures


def bench_token(i):
    """Deterministic FCM-shaped token for index i: 22 chars, ':APA91b', 123 chars (152)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    out = []
    counter = 0
    while len(out) < 145:
        digest = hashlib.sha256(f"fcm-mock-bench:{i}:{counter}".encode()).digest()
        out.extend(alphabet[b & 63] for b in digest)
        counter += 1
    return "".join(out[:22]) + ":APA91b" + "".join(out[22:145])


def write_fixtures(work):
    fixtures = os.path.join(work, "fixtures-10k.json")
    tokens_path = os.path.join(work, "tokens.txt")
    if os.path.exists(fixtures) and os.path.exists(tokens_path):
        return fixtures, tokens_path
    tokens = [bench_token(i) for i in range(DEVICES)]
    assert len(set(tokens)) == DEVICES
    assert all(len(t) == 152 and re.fullmatch(r"[A-Za-z0-9_:-]+", t) for t in tokens)
    doc = {
        "projects": [{"sender_id": SENDER_ID, "server_keys": [SERVER_KEY],
                      "apps": [{"app": APP, "platform": "android"}]}],
        "devices": [{"token": t, "sender_id": SENDER_ID, "app": APP, "platform": "android",
                     "online": True} for t in tokens],
    }
    with open(fixtures + ".tmp", "w") as f:
        json.dump(doc, f)
    with open(tokens_path + ".tmp", "w") as f:
        f.write("\n".join(tokens) + "\n")
    os.replace(fixtures + ".tmp", fixtures)
    os.replace(tokens_path + ".tmp", tokens_path)
    return fixtures, tokens_path


def write_fanout_fixtures(work):
    """100,000 devices with short tokens, all subscribed to `all`; t1, t2, t3: 10,000 each."""
    path = os.path.join(work, "fixtures-fanout.json")
    if os.path.exists(path):
        return path
    tokens = [f"fan-{i:06d}" for i in range(FANOUT_DEVICES)]
    doc = {
        "projects": [{"sender_id": SENDER_ID, "server_keys": [SERVER_KEY],
                      "apps": [{"app": APP, "platform": "android"}]}],
        "devices": [{"token": t, "sender_id": SENDER_ID, "app": APP} for t in tokens],
        "subscriptions": {"all": tokens, "t1": tokens[0:10000], "t2": tokens[10000:20000],
                          "t3": tokens[20000:30000]},
    }
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)
    return path


def timed_send(url, payload):
    """Milliseconds from sending to the committed answer, and the answer."""
    t0 = time.perf_counter()
    status, data = fcm_send(url, payload, timeout=60)
    ms = (time.perf_counter() - t0) * 1000.0
    if status != 200 or b"message_id" not in data:
        raise BenchError(f"fan-out send answered {status}: {data[:200]!r}")
    return ms


# ---------------------------------------------------------------------------------------------
# processes


class Server:
    def __init__(self, name, cmd, stderr_path, timeout_s, key="http="):
        self.name = name
        self.key = key.encode()
        self.cmd = cmd
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=err, cwd=ROOT)
        _children.append(self.proc)
        self.xmpp_port = None
        self.mcs_port = None
        self.port = self._read_port(timeout_s)
        self.url = f"http://127.0.0.1:{self.port}"

    def _read_port(self, timeout_s):
        import selectors
        deadline = time.monotonic() + timeout_s
        buf = b""
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                m = re.search(rb"listening " + re.escape(self.key) + rb"[^\s:]+:(\d+)[^\n]*\n", buf)
                if m:
                    x = re.search(rb"xmpp=[^\s:]+:(\d+)", buf)
                    self.xmpp_port = int(x.group(1)) if x else None
                    mcs = re.search(rb"mcs=\S*:(\d+)", m.group(0))
                    self.mcs_port = int(mcs.group(1)) if mcs else None
                    return int(m.group(1))
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if sel.select(timeout=min(left, 0.5)):
                    chunk = os.read(self.proc.stdout.fileno(), 4096)
                    if not chunk:  # stdout closed: the process is gone
                        break
                    buf += chunk
        finally:
            sel.close()
        self.stop(timeout_s=2)
        raise BenchError(f"{self.name} printed no 'listening http=...' line within {timeout_s}s "
                         f"(command: {' '.join(self.cmd)}; exit code {self.proc.returncode}; "
                         f"stdout {buf[-500:]!r}; stderr: {self.stderr_tail()})")

    def stderr_tail(self, n=1500):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def cpu_s(self):
        """User + system CPU time the process (all its threads) has used so far, seconds."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self):
        fields = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    fields[k] = int(v.split()[0])
        return fields

    def stop(self, timeout_s=60):
        """SIGTERM, wait; returns the exit code (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


def kill_children():
    for p in _children:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# HTTP helpers (stdlib only)


def http_json(url, method="GET", body=None, headers=None, timeout=30):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        path = u.path + (f"?{u.query}" if u.query else "")
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, data
    finally:
        conn.close()


def fcm_send(url, payload, timeout=30):
    status, data = http_json(url + "/fcm/send", "POST", json.dumps(payload).encode(),
                             {"Content-Type": "application/json",
                              "Authorization": f"key={SERVER_KEY}"}, timeout)
    return status, data


def page_first_screen_ms(url, timeout=60):
    """One load of the web page's first screen: every request of PAGE_FIRST_SCREEN, one after
    the other on one keep-alive connection (the event stream on its own, read up to its
    headers, as EventSource opens it), each answered 200 and read whole; wall time in ms."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    t0 = time.perf_counter()
    try:
        for path in PAGE_FIRST_SCREEN:
            if path == "/api/v1/events":
                stream = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
                try:
                    stream.request("GET", path, headers={"Accept": "text/event-stream"})
                    st = stream.getresponse().status
                finally:
                    stream.close()
            else:
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                st = resp.status
            if st != 200:
                raise BenchError(f"web page's first screen: GET {path} answered {st}")
    finally:
        conn.close()
    return (time.perf_counter() - t0) * 1000.0


def page_load_ms(url, runs=5):
    """The median of `runs` first-screen loads, after one load not counted (the server's first
    answers prepare statements and assemble the page)."""
    page_first_screen_ms(url)
    return statistics.median(page_first_screen_ms(url) for _ in range(runs))


# ---------------------------------------------------------------------------------------------
# wrk


def run_wrk(script, url, threads, connections, duration_s, tokens_path, path="/fcm/send",
            extra_env=None):
    env = dict(os.environ, BENCH_DIR=HERE, BENCH_TOKENS=tokens_path, BENCH_SERVER_KEY=SERVER_KEY,
               **(extra_env or {}))
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration_s}s", "--timeout", "5s",
           "-s", os.path.join(HERE, script), url + path]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             timeout=duration_s + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"wrk did not finish: {' '.join(cmd)}")
    m = re.search(r"^WRK (.*)$", out.stdout, re.M)
    if out.returncode != 0 or not m:
        raise BenchError(f"wrk failed ({out.returncode}): {out.stdout[-1500:]} {out.stderr[-1500:]}")
    r = {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    r["ok"] = r["requests"] - r["status_errors"]  # wrk counts status >= 400 as status errors
    r["socket_errors"] = r["connect"] + r["read"] + r["write"] + r["timeout"]
    r["cmd"] = cmd  # the invocation as run, for reports that print their commands
    return r


def merge_runs(runs):
    """One result for several wrk runs: summed counts, overall rate, the median run's latencies."""
    out = {k: sum(r[k] for r in runs) for k in ("requests", "duration_us", "status_errors",
                                                "connect", "read", "write", "timeout", "ok",
                                                "socket_errors")}
    out["rps"] = out["requests"] / (out["duration_us"] / 1e6) if out["duration_us"] else 0.0
    mid = sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]
    for k, v in mid.items():
        if k not in out:
            out[k] = v
    return out


# ---------------------------------------------------------------------------------------------
# start-up


def raise_nofile(want):
    """Raises this process's RLIMIT_NOFILE to `want` (as far as the hard limit allows; the mocks
    it starts inherit it); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def startup_once(cmd_for_port, tmpdir, limit_s=10.0):
    """Milliseconds from spawning the process to the first 200 answer to GET /api/v1/health."""
    port = free_port()
    cmd = cmd_for_port(port, tmpdir)
    request = (f"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Connection: close\r\n\r\n").encode()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    _children.append(proc)
    elapsed = None
    try:
        deadline = t0 + limit_s
        while time.perf_counter() < deadline and proc.poll() is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(max(0.01, deadline - time.perf_counter()))
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(request)
                head = b""
                while b"\r\n" not in head:
                    chunk = s.recv(256)
                    if not chunk:
                        break
                    head += chunk
                if head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
                    elapsed = (time.perf_counter() - t0) * 1000.0
                    break
            except OSError:
                pass
            finally:
                s.close()
            time.sleep(0.0002)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return elapsed


def startup_median(cmd_for_port, runs, work, label):
    times = []
    for i in range(runs):
        d = tempfile.mkdtemp(prefix=f"startup-{label}-{i}-", dir=work)
        try:
            t = startup_once(cmd_for_port, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if t is None:
            raise BenchError(f"{label}: no answer to GET /api/v1/health within 10 s (run {i + 1})")
        times.append(t)
    return statistics.median(times), times


# ---------------------------------------------------------------------------------------------
# recorded messages


def count_recorded(url, expected, time_limit_s=90.0):
    """Counts GET /api/v1/messages by paging (limit=1000, cursor); bounded in pages and time.
    Returns (count, note); count is None when the list is not available."""
    status, data = http_json(url + "/api/v1/messages?limit=1")
    try:
        first = json.loads(data)
    except ValueError:
        first = None
    if status != 200 or not isinstance(first, dict) or "items" not in first:
        return None, f"GET /api/v1/messages?limit=1 -> {status} {data[:200]!r}"
    for key in ("total", "count"):
        if isinstance(first.get(key), int):
            return first[key], f"'{key}' of GET /api/v1/messages"
    count = 0
    cursor = None
    pages = 0
    max_pages = expected // 1000 + 100
    deadline = time.monotonic() + time_limit_s
    while True:
        q = {"limit": "1000"}
        if cursor:
            q["cursor"] = cursor
        status, data = http_json(url + "/api/v1/messages?" + urllib.parse.urlencode(q), timeout=60)
        if status != 200:
            return None, f"GET /api/v1/messages page {pages + 1} -> {status} {data[:200]!r}"
        page = json.loads(data)
        count += len(page.get("items", []))
        pages += 1
        cursor = page.get("next")
        if not cursor:
            return count, f"paged GET /api/v1/messages ({pages} pages)"
        if pages >= max_pages or time.monotonic() > deadline:
            return count, f"stopped paging after {pages} pages (bound); at least this many"


def sqlite_count(db_path):
    """Rows of a `messages` table in the mock's SQLite file (after it stopped), or None."""
    if not shutil.which("sqlite3") or not os.path.exists(db_path):
        return None, "sqlite3 or the db file is missing"
    try:
        tables = subprocess.run(["sqlite3", "-readonly", db_path,
                                 "SELECT name FROM sqlite_master WHERE type='table'"],
                                capture_output=True, text=True, timeout=60).stdout.split()
        if "messages" not in tables:
            return None, f"no 'messages' table (tables: {', '.join(tables) or 'none'})"
        out = subprocess.run(["sqlite3", "-readonly", db_path, "SELECT count(*) FROM messages"],
                             capture_output=True, text=True, timeout=120)
        return int(out.stdout.strip()), "sqlite3 count(*) of table messages"
    except (subprocess.SubprocessError, ValueError) as e:
        return None, f"sqlite3 failed: {e}"


# ---------------------------------------------------------------------------------------------
# report


def fmt_int(n):
    return "n/a" if n is None else f"{n:,.0f}"


def fmt_ms(us):
    return f"{us / 1000.0:.2f}"


def verdict(ok):
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mock", required=True)
    ap.add_argument("--ceiling", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--duration", type=int, default=int(os.environ.get("BENCH_DURATION", "10")))
    ap.add_argument("--warmup", type=int, default=int(os.environ.get("BENCH_WARMUP", "2")))
    ap.add_argument("--startup-runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_ROUNDS", "3")))
    args = ap.parse_args()

    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="run-", dir=work)
    mock_bin, ceiling_bin = os.path.abspath(args.mock), os.path.abspath(args.ceiling)
    dur = args.duration
    t_start = time.monotonic()
    res = {}

    fixtures, tokens_path = write_fixtures(work)
    log(f"fixtures: {DEVICES} devices in {fixtures}")

    # c. start-up, first, on a quiet machine -----------------------------------------------
    def mock_cmd(fixture_file=None):
        def build(port, tmpdir):
            cmd = [mock_bin, "serve", "--http-port", str(port), "--xmpp-port", "0",
                   "--db", os.path.join(tmpdir, "fcm-mock.sqlite")]
            if fixture_file:
                cmd += ["--fixtures", fixture_file]
            return cmd
        return build

    log(f"start-up: {args.startup_runs} runs each")
    res["startup_mock"], res["startup_mock_all"] = startup_median(
        mock_cmd(), args.startup_runs, run_dir, "mock")
    res["startup_ceiling"], res["startup_ceiling_all"] = startup_median(
        lambda port, _d: [ceiling_bin, str(port)], args.startup_runs, run_dir, "ceiling")
    res["startup_mock_10k"], _ = startup_median(mock_cmd(fixtures), 3, run_dir, "mock-10k")

    # a. single-token sends: the mock and the ceiling side by side, in alternating rounds, so a
    # noisy neighbour on this shared machine hits both alike; the ratio is the median of the
    # rounds' ratios ------------------------------------------------------------------------
    rounds = max(1, args.rounds)
    per_round = max(2, dur // rounds)
    ceiling = Server("ceiling", [ceiling_bin, "0"], os.path.join(run_dir, "ceiling.stderr"), 10)
    db_path = os.path.join(run_dir, "fcm-mock.sqlite")
    mock = Server("fcm-mock", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                               "--db", db_path, "--fixtures", fixtures],
                  os.path.join(run_dir, "mock.stderr"), 60)
    accepted = 0  # messages the mock accepted (single: one per 200; multicast: see probe)
    answered_200 = 0  # every 200 answer of /fcm/send, all phases

    try:
        status, data = fcm_send(mock.url, {"to": bench_token(0), "data": {"probe": "1"}})
        probe = json.loads(data) if status == 200 else None
        if not probe or probe.get("success") != 1:
            raise BenchError(f"probe send: POST /fcm/send to one bench token -> {status} "
                             f"{data[:300]!r}")
        accepted += 1
        answered_200 += 1
        res["page_empty_ms"] = page_load_ms(mock.url)

        log(f"single-token sends, 32 connections: {rounds} rounds of {per_round}s each for "
            f"the ceiling and fcm-mock, alternating (+{args.warmup}s warm-up each)")
        if args.warmup:
            run_wrk("single.lua", ceiling.url, 2, 32, args.warmup, tokens_path)
            w = run_wrk("single.lua", mock.url, 2, 32, args.warmup, tokens_path)
            answered_200 += w["ok"]
            accepted += w["ok"]
        ceiling_runs, mock_runs = [], []
        cpu = {"ceiling": [0.0, 0], "mock": [0.0, 0]}  # CPU seconds, requests

        def measured(server, name):
            before = server.cpu_s()
            r = run_wrk("single.lua", server.url, 2, 32, per_round, tokens_path)
            cpu[name][0] += server.cpu_s() - before
            cpu[name][1] += r["requests"]
            return r

        seq = {"ceiling": [], "mock": []}  # p50 of one connection sending one request at a time
        for _ in range(rounds):
            ceiling_runs.append(measured(ceiling, "ceiling"))
            r = measured(mock, "mock")
            answered_200 += r["ok"]
            accepted += r["ok"]
            mock_runs.append(r)
            seq["ceiling"].append(run_wrk("single.lua", ceiling.url, 1, 1, 2, tokens_path)["p50_us"])
            r = run_wrk("single.lua", mock.url, 1, 1, 2, tokens_path)
            answered_200 += r["ok"]
            accepted += r["ok"]
            seq["mock"].append(r["p50_us"])
        res["seq_p50_us"] = {k: statistics.median(v) for k, v in seq.items()}
        res["seq_rounds"] = seq
        # CPU time per request: what each answer costs the server, whatever the neighbours do
        # to the wall clock.
        res["cpu_us"] = {k: (1e6 * v[0] / v[1] if v[1] else 0.0) for k, v in cpu.items()}
        res["round_ratios"] = [m["rps"] / c["rps"] if c["rps"] else 0.0
                               for m, c in zip(mock_runs, ceiling_runs)]
        res["ceiling_single"] = merge_runs(ceiling_runs)
        res["mock_single"] = merge_runs(mock_runs)
        res["ceiling_rss"] = ceiling.rss_kib()
    finally:
        res["ceiling_exit"] = ceiling.stop(10)
    try:
        log("fcm-mock: counting recorded messages")
        res["single_200"] = answered_200
        res["page_full_ms"] = page_load_ms(mock.url)
        res["recorded"], res["recorded_note"] = count_recorded(mock.url, answered_200)

        status, data = fcm_send(mock.url, {"registration_ids": [bench_token(i) for i in
                                                                range(MULTICAST_SIZE)],
                                           "data": {"probe": "multicast"}})
        probe = json.loads(data) if status == 200 else None
        if not probe:
            raise BenchError(f"multicast probe: {status} {data[:300]!r}")
        per_multicast = int(probe.get("success", 0))
        if per_multicast != MULTICAST_SIZE:
            log(f"warning: a {MULTICAST_SIZE}-token multicast had {per_multicast} successes")
        accepted += per_multicast
        answered_200 += 1
        res["per_multicast"] = per_multicast

        log(f"fcm-mock: {MULTICAST_SIZE}-token multicasts, 4 connections, {dur}s")
        res["mock_multicast"] = r = run_wrk("multicast.lua", mock.url, 2, 4, dur, tokens_path)
        answered_200 += r["ok"]
        accepted += r["ok"] * per_multicast

        res["accepted_total"] = accepted
        res["mock_rss_total"] = mock.rss_kib()
    finally:
        res["mock_exit"] = mock.stop(120)
    res["answered_200"] = answered_200
    res["sqlite_count"], res["sqlite_note"] = sqlite_count(db_path)
    # The first screen after a restart on that store: the first load as soon as the server
    # listens (the sends the store holds are still being counted for /api/v1/stats), and, after
    # another restart, the first load a second later, as a page opened a moment after start.
    log("fcm-mock: the web page's first screen right after a restart on that store, twice")
    for key, pause_s in (("page_restart_at_once_ms", 0.0), ("page_restart_1s_ms", 1.0)):
        again = Server("fcm-mock", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                                    "--db", db_path, "--fixtures", fixtures],
                       os.path.join(run_dir, "restart.stderr"), 120)
        try:
            time.sleep(pause_s)
            res[key] = page_first_screen_ms(again.url)
        finally:
            again.stop(60)
    # d. resident memory of a fresh mock after 100,000 accepted messages (100 multicasts of
    # 1000 of the bench devices), the condition the target names ---------------------------------
    log(f"fcm-mock: resident memory after {RSS_MESSAGES:,} messages (fresh instance)")
    rss_db = os.path.join(run_dir, "rss.sqlite")
    fresh = Server("fcm-mock", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                                "--db", rss_db, "--fixtures", fixtures],
                   os.path.join(run_dir, "rss.stderr"), 60)
    accepted_rss = 0
    try:
        batch = 0
        while accepted_rss < RSS_MESSAGES and batch < 2 * RSS_MESSAGES // MULTICAST_SIZE:
            status, data = fcm_send(fresh.url, {
                "registration_ids": [bench_token((batch * MULTICAST_SIZE + i) % DEVICES)
                                     for i in range(MULTICAST_SIZE)], "data": {"fill": "1"}})
            batch += 1
            if status == 200:
                accepted_rss += json.loads(data).get("success", 0)
        res["accepted"] = accepted_rss
        res["mock_rss"] = fresh.rss_kib()
        # e. reset on that store of 100,000 messages (median of 3: refill a little between)
        resets = []
        for _ in range(3):
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", int(fresh.url.rsplit(":", 1)[1]), timeout=30)
            conn.request("POST", "/api/v1/reset")
            st = conn.getresponse().status
            conn.close()
            resets.append((time.perf_counter() - t0) * 1000.0)
            if st != 204:
                raise BenchError(f"reset answered {st}")
            if len(resets) < 3:
                for b in range(RSS_MESSAGES // MULTICAST_SIZE):
                    fcm_send(fresh.url, {"registration_ids": [bench_token((b * MULTICAST_SIZE + i) % DEVICES)
                                                               for i in range(MULTICAST_SIZE)]})
        res["reset_ms"] = statistics.median(resets)
    finally:
        fresh.stop(60)

    # f. fan-out: one send to a topic of 100,000 subscribers, and a condition over three topics
    # of 10,000 each, answered once every delivery is committed ------------------------------------
    log(f"fcm-mock: topic fan-out to {FANOUT_DEVICES:,} subscribers, condition over 3 x 10,000")
    fan_fixtures = write_fanout_fixtures(work)
    fan = Server("fcm-mock", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                              "--db", os.path.join(run_dir, "fanout.sqlite"), "--fixtures", fan_fixtures],
                 os.path.join(run_dir, "fanout.stderr"), 120)
    try:
        res["topic_ms"] = statistics.median(
            timed_send(fan.url, {"to": "/topics/all", "data": {"k": "v"}}) for _ in range(3))
        res["condition_ms"] = statistics.median(
            timed_send(fan.url, {"condition": "'t1' in topics || 't2' in topics || 't3' in topics",
                                 "data": {"k": "v"}}) for _ in range(3))
    finally:
        fan.stop(60)

    # g. XMPP: downstream messages per second with a window of 100 unanswered, over one and over
    # eight connections, every message validated and persisted; beside a C echo server ------------
    log("fcm-mock: XMPP downstream, 1 and 8 connections, window 100")
    load_bin = os.path.join(os.path.dirname(ceiling_bin), "xmpp_load")
    echo_bin = os.path.join(os.path.dirname(ceiling_bin), "echo")

    def xmpp_rate(port, conns, raw=False):
        cmd = [load_bin, str(port), SENDER_ID, SERVER_KEY, bench_token(0), str(max(3, dur // 2)), str(conns), "100"]
        if raw:
            cmd.append("--raw")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        m = re.search(r"seconds=([0-9.]+) sent=(\d+) answered=(\d+) acks=(\d+) nacks=(\d+)", out.stdout)
        if not m:
            raise BenchError(f"xmpp_load failed: {out.stdout} {out.stderr}")
        secs, answered, nacks = float(m.group(1)), int(m.group(3)), int(m.group(5))
        return answered / secs, nacks

    xdb = os.path.join(run_dir, "xmpp.sqlite")
    xmock = Server("fcm-mock", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0", "--db", xdb,
                                "--fixtures", fixtures], os.path.join(run_dir, "xmpp.stderr"), 60)
    try:
        xport = xmock.xmpp_port
        res["xmpp_one"], res["xmpp_one_nacks"] = xmpp_rate(xport, 1)
        res["xmpp_eight"], res["xmpp_eight_nacks"] = xmpp_rate(xport, 8)
    finally:
        xmock.stop(60)
    echo = Server("echo", [echo_bin, "0"], os.path.join(run_dir, "echo.stderr"), 10, key="xmpp=")
    try:
        res["echo_one"], _ = xmpp_rate(echo.port, 1, raw=True)
        res["echo_eight"], _ = xmpp_rate(echo.port, 8, raw=True)
    finally:
        echo.stop(10)

    # h. HTTP v1: token issuance, v1 against legacy CPU per request, HTTP/2 against HTTP/1.1
    # (bench_v1.py) ------------------------------------------------------------------------------
    import bench_v1
    res["v1"] = bench_v1.run(mock_bin, run_dir, fixtures, tokens_path, dur, rounds)

    # i. APNs against v1, both over one HTTP/2 connection with 32 streams (bench_apns.py) ---------
    import bench_apns
    res["apns"] = bench_apns.run(mock_bin, run_dir, max(bench_apns.ROUNDS, rounds))

    # j. Web Push: pushes per second with decryption, HTTP/1.1 and HTTP/2, CPU per push against an
    # FCM send's (bench_webpush.py) ---------------------------------------------------------------
    import bench_webpush
    res["webpush"] = bench_webpush.run(mock_bin, run_dir, fixtures, tokens_path, rounds)

    # k. Autopush: a push relayed to a connected browser against a push to a fake web device, and
    # the RSS of 1,000 idle autopush connections (bench_autopush.py) ------------------------------
    import bench_autopush
    res["autopush"] = bench_autopush.run(mock_bin, run_dir, fixtures, max(bench_autopush.ROUNDS, rounds))

    # l. MCS: an FCM send delivered over MCS to a raw GCM client against a send to a fake android
    # device, and the RSS of 1,000 idle logged-in MCS connections (bench_mcs.py) ------------------
    import bench_mcs
    res["mcs"] = bench_mcs.run(mock_bin, run_dir, fixtures, max(bench_mcs.ROUNDS, rounds))

    res["db_mb"] = sum(os.path.getsize(os.path.join(run_dir, f)) for f in os.listdir(run_dir)
                       if f.startswith("fcm-mock.sqlite")) / 1e6
    if not os.environ.get("BENCH_KEEP"):
        shutil.rmtree(run_dir, ignore_errors=True)
    res["elapsed_s"] = time.monotonic() - t_start

    ok = report(res, work)
    return 0 if ok else 1


def page_limit_ms(one_message_ms):
    """The most the first screen may take with 100,000+ messages stored (TARGET_PAGE_X, or
    TARGET_PAGE_PLUS_MS more, whichever is larger)."""
    return max(TARGET_PAGE_X * one_message_ms, one_message_ms + TARGET_PAGE_PLUS_MS)


def report(res, work):
    ms, cs, mc = res["mock_single"], res["ceiling_single"], res["mock_multicast"]
    ratio = statistics.median(res["round_ratios"])
    rss_mb = res["mock_rss"]["VmRSS"] / 1024.0
    checks = {
        "ratio": ratio >= TARGET_RATIO,
        "cpu": res["cpu_us"]["mock"] <= TARGET_CPU_US,
        "p99": ms["p99_us"] <= TARGET_P99_X * cs["p99_us"],
        "sequential": res["seq_p50_us"]["mock"] <= TARGET_P99_X * res["seq_p50_us"]["ceiling"],
        "multicast": mc["p50_us"] / 1000.0 < TARGET_MULTICAST_P50_MS,
        "startup": res["startup_mock"] < TARGET_STARTUP_MS,
        "rss": rss_mb < TARGET_RSS_MB and res["accepted"] >= RSS_MESSAGES,
        "reset": res["reset_ms"] < TARGET_RESET_MS,
        "topic": res["topic_ms"] < TARGET_TOPIC_MS,
        "condition": res["condition_ms"] < TARGET_CONDITION_MS,
        "xmpp": res["xmpp_one"] >= TARGET_XMPP_ONE,
        "page": res["page_full_ms"] <= page_limit_ms(res["page_empty_ms"]),
        "recorded": None if res["recorded"] is None else res["recorded"] >= res["single_200"],
        "exit": res["mock_exit"] == 0,
        "errors": ms["socket_errors"] + mc["socket_errors"] + ms["status_errors"]
                  + mc["status_errors"] == 0,
    }
    _v1_res, v1_lines, v1_checks = res["v1"]
    checks.update(v1_checks)
    _apns_res, apns_lines, apns_checks = res["apns"]
    checks.update(apns_checks)
    _wp_res, wp_lines, wp_checks = res["webpush"]
    checks.update(wp_checks)
    _ap_res, ap_lines, ap_checks = res["autopush"]
    checks.update(ap_checks)
    _mcs_res, mcs_lines, mcs_checks = res["mcs"]
    checks.update(mcs_checks)
    if res["sqlite_count"] is not None:
        checks["sqlite"] = res["sqlite_count"] >= res["answered_200"]

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [
        f"fcm-mock benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
        f"loopback, wrk 2 threads",
        "",
        "| measure | fcm-mock | ceiling (libmicrohttpd, no work) | target | result |",
        "|---|---:|---:|---|---|",
        f"| single-token send, req/s (32 conns, {ms['duration_us'] / 1e6:.0f} s in "
        f"{len(res['round_ratios'])} alternating rounds) "
        f"| {ms['rps']:,.0f} | {cs['rps']:,.0f} | mock ≥ 40% of ceiling: **{ratio:.0%}** "
        f"(median of rounds: {', '.join(f'{r:.0%}' for r in res['round_ratios'])}) "
        f"| {verdict(checks['ratio'])} |",
        f"| single-token latency p50 / p99, ms | {fmt_ms(ms['p50_us'])} / {fmt_ms(ms['p99_us'])} "
        f"| {fmt_ms(cs['p50_us'])} / {fmt_ms(cs['p99_us'])} "
        f"| p99 ≤ {TARGET_P99_X:.0f}x the ceiling's: **{ms['p99_us'] / max(cs['p99_us'], 1):.1f}x** "
        f"| {verdict(checks['p99'])} |",
        f"| one connection, sequential sends, p50 µs (median of rounds: "
        f"{', '.join(str(v) for v in res['seq_rounds']['mock'])} vs "
        f"{', '.join(str(v) for v in res['seq_rounds']['ceiling'])}) "
        f"| {res['seq_p50_us']['mock']:.0f} | {res['seq_p50_us']['ceiling']:.0f} "
        f"| ≤ {TARGET_P99_X:.0f}x: **{res['seq_p50_us']['mock'] / max(res['seq_p50_us']['ceiling'], 1):.1f}x** "
        f"| {verdict(checks['sequential'])} |",
        f"| single-token send, server CPU time per request (user + system, all threads), µs "
        f"| {res['cpu_us']['mock']:.1f} | {res['cpu_us']['ceiling']:.1f} "
        f"| ≤ {TARGET_CPU_US:.0f} µs ({res['cpu_us']['mock'] / max(res['cpu_us']['ceiling'], 1e-9):.1f}x the ceiling's) "
        f"| {verdict(checks['cpu'])} |",
        f"| 1000-token multicast, req/s (4 conns) | {mc['rps']:,.1f} "
        f"({mc['rps'] * res['per_multicast']:,.0f} msg/s) | | | |",
        f"| 1000-token multicast latency p50 / p99, ms | {fmt_ms(mc['p50_us'])} / "
        f"{fmt_ms(mc['p99_us'])} | | p50 < {TARGET_MULTICAST_P50_MS:.0f} ms "
        f"| {verdict(checks['multicast'])} |",
        f"| start-up to first answered GET /api/v1/health, median of "
        f"{len(res['startup_mock_all'])}, ms | {res['startup_mock']:.1f} "
        f"| {res['startup_ceiling']:.1f} | < {TARGET_STARTUP_MS:.0f} ms "
        f"| {verdict(checks['startup'])} |",
        f"| start-up with the 10,000-device fixtures, median of 3, ms "
        f"| {res['startup_mock_10k']:.1f} | | (info) | |",
        f"| resident memory (VmRSS) after {res['accepted']:,} accepted messages, MB "
        f"| {rss_mb:.1f} (peak {res['mock_rss']['VmHWM'] / 1024.0:.1f}) "
        f"| {res['ceiling_rss']['VmRSS'] / 1024.0:.1f} | < {TARGET_RSS_MB:.0f} MB "
        f"| {verdict(checks['rss'])} |",
        f"| web page's first screen ({len(PAGE_FIRST_SCREEN)} requests in a row: /, newest 50 messages "
        f"(recipients=20), 200 devices, topics, groups, XMPP connections, the event stream, the counters), "
        f"{res['single_200']:,} messages stored vs 1, median of 5, ms "
        f"| {res['page_full_ms']:.1f} ({res['page_full_ms'] / max(res['page_empty_ms'], 0.001):.2f}x) "
        f"| {res['page_empty_ms']:.1f} (1 message) "
        f"| ≤ {TARGET_PAGE_X}x the 1-message figure or +{TARGET_PAGE_PLUS_MS:.0f} ms, whichever is larger: "
        f"**{page_limit_ms(res['page_empty_ms']):.1f} ms** | {verdict(checks['page'])} |",
        f"| the same, first load after a restart on that store (with the multicast phase's records): "
        f"as soon as it listens / 1 s after, ms "
        f"| {res['page_restart_at_once_ms']:.1f} / {res['page_restart_1s_ms']:.1f} | | (info) | |",
        f"| topic send to {FANOUT_DEVICES:,} subscribers, answered after every delivery is stored "
        f"(median of 3), ms | {res['topic_ms']:.0f} | | < {TARGET_TOPIC_MS:.0f} ms | {verdict(checks['topic'])} |",
        f"| condition over 3 topics of 10,000 subscribers (30,000 deliveries, median of 3), ms "
        f"| {res['condition_ms']:.0f} | | < {TARGET_CONDITION_MS:.0f} ms | {verdict(checks['condition'])} |",
        f"| XMPP downstream, 1 connection, window 100, msgs/s (acked and persisted) | {res['xmpp_one']:,.0f} "
        f"| {res['echo_one']:,.0f} (C echo) | ≥ {TARGET_XMPP_ONE:,.0f} | {verdict(checks['xmpp'])} |",
        f"| XMPP downstream, 8 connections, msgs/s | {res['xmpp_eight']:,.0f} | {res['echo_eight']:,.0f} (C echo) | (info) | |",
        f"| POST /api/v1/reset on a store of {RSS_MESSAGES:,} messages (median of 3), ms "
        f"| {res['reset_ms']:.1f} | | < {TARGET_RESET_MS:.0f} ms | {verdict(checks['reset'])} |",
        f"| resident memory after the whole run ({res['accepted_total']:,} messages), MB "
        f"| {res['mock_rss_total']['VmRSS'] / 1024.0:.1f} | | (info) | |",
        f"| recorded messages ≥ 200 answers (single-token phase) "
        f"| {fmt_int(res['recorded'])} ≥ {res['single_200']:,} | | nothing answered missing "
        f"| {verdict(checks['recorded'])} |",
    ]
    if "sqlite" in checks:
        lines.append(f"| rows in `messages` after stop ≥ all 200 answers "
                     f"| {res['sqlite_count']:,} ≥ {res['answered_200']:,} | | nothing answered "
                     f"missing | {verdict(checks['sqlite'])} |")
    lines += [
        f"| non-200 answers / socket errors under load "
        f"| {ms['status_errors'] + mc['status_errors']} / "
        f"{ms['socket_errors'] + mc['socket_errors']} | {cs['status_errors']} / "
        f"{cs['socket_errors']} | 0 / 0 | {verdict(checks['errors'])} |",
        f"| exit code after SIGTERM | {res['mock_exit']} | {res['ceiling_exit']} | 0 "
        f"| {verdict(checks['exit'])} |",
    ]
    lines += v1_lines
    lines += apns_lines
    lines += wp_lines
    lines += ap_lines
    lines += mcs_lines
    lines += [
        "",
        f"Store: SQLite file (WAL), {res['db_mb']:.0f} MB at the end. Recorded count: "
        f"{res['recorded_note']}" + (f"; {res['sqlite_note']}" if res["sqlite_note"] else "")
        + f". Start-up runs (ms): mock "
        f"{', '.join(f'{t:.1f}' for t in res['startup_mock_all'])}; ceiling "
        f"{', '.join(f'{t:.1f}' for t in res['startup_ceiling_all'])}. "
        f"Whole run {res['elapsed_s']:.0f} s.",
    ]
    failed = [k for k, v in checks.items() if v is False]
    unknown = [k for k, v in checks.items() if v is None]
    lines.append("")
    if failed:
        lines.append(f"Missed: {', '.join(failed)}.")
    if unknown:
        lines.append(f"Could not check: {', '.join(unknown)}.")
    if not failed and not unknown:
        lines.append("All targets met.")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(work, "report.md"), "w") as f:
        f.write(text)
    print(text, end="")
    return not failed and not unknown


def run_script(main, say):
    """Runs a benchmark's `main` as the program: its exit code; 2 (said with `say`) when the
    benchmark could not run; every server it started is gone afterwards."""
    try:
        sys.exit(main())
    except BenchError as e:
        say(f"error: {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        kill_children()


if __name__ == "__main__":
    # bench_v1 imports this file as `bench`: let it find this very module (one BenchError class).
    sys.modules["bench"] = sys.modules[__name__]
    run_script(main, log)
