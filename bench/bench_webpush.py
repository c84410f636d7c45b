"""Web Push phase of `make bench` (bench.py calls `run`; `make bench-webpush` runs it alone).

Pushes per second to one `web` device's subscription (`POST /wp/{id}`), each body decrypted and
stored by the mock: over HTTP/1.1 with wrk (2 threads, 32 connections) and over HTTP/2 with h2load
(h2c, ONE connection, many streams). One aes128gcm body encrypted once for the subscription's keys
and one VAPID token are reused for every push, so the client's work stays constant; the server
checks the token once and then finds it by its text (as it does APNs provider tokens), and
decrypts every body.

Beside it, in the same process and in alternating rounds (as bench_v1.py compares v1 with legacy),
legacy FCM single-token sends: the server's CPU time per push against its CPU time per FCM send
is the ratio reported, which the machine's other load moves far less than req/s.

Where the bodies are decrypted: over HTTP/1.1 on the loop that serves the connection (a loop per
core), over HTTP/2 on the Web Push room's pool of threads (one connection is one thread). The
server inherits this script's environment, so `FCM_MOCK_WEBPUSH_HANDOFF=all make bench-webpush`
measures every push on the pool (docs/performance.md, "Web Push off the HTTP threads").

Target (issues 27 and 38): ≥ 10,000 pushes/s on this machine over each protocol.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import bench
import bench_v1
from bench import SENDER_ID, BenchError, Server, http_json, log
from bench_v1 import alternating_cpu_rounds, distinct, run_h2load, shell_line

# The interop suite's own Web Push encoder (RFC 8291 encryption, VAPID tokens), with
# `cryptography` (bench/run.sh installs Debian's python3-cryptography when it is missing).
sys.path.insert(0, os.path.join(bench.ROOT, "Tests", "interop"))
from webpush_crypto import encrypt_aes128gcm, vapid_header  # noqa: E402

from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

TARGET_PUSHES_PER_S = 10_000.0
WEB_APP = "com.example.bench.web"
# A notification as most service workers expect it: JSON with title and body.
PLAINTEXT = json.dumps({"title": "Goal!", "body": "3-1 in the 89th minute", "url": "/match/42"}).encode()
ROUNDS = 5
H2_STREAMS = 100
H2_REQUESTS = 30_000


def make_push(mock):
    """A web device, and what every push to it reuses: its endpoint path, the pre-encrypted body,
    the Authorization header. One probe push proves the body decrypts to PLAINTEXT."""
    st, data = http_json(mock.url + "/api/v1/devices", "POST", json.dumps(
        {"sender_id": SENDER_ID, "app": WEB_APP, "platform": "web", "online": True}).encode(),
        {"Content-Type": "application/json"})
    if st != 201:
        raise BenchError(f"web device: {st} {data[:300]!r}")
    device = json.loads(data)
    sub = device["web_push"]
    if not sub["endpoint"].startswith(mock.url + "/wp/"):
        raise BenchError(f"the subscription's endpoint is not on the plain port: {sub['endpoint']}")
    path = sub["endpoint"][len(mock.url):]
    body = encrypt_aes128gcm(PLAINTEXT, sub["keys"]["p256dh"], sub["keys"]["auth"])
    auth = vapid_header(ec.generate_private_key(ec.SECP256R1()), mock.url, sub="mailto:bench@example.com")
    st, data = http_json(mock.url + path, "POST", body, {"TTL": "60", "Content-Encoding": "aes128gcm",
                                                         "Authorization": auth})
    if st != 201:
        raise BenchError(f"probe push: {st} {data[:300]!r}")
    st, data = http_json(mock.url + f"/api/v1/devices/{device['token']}/messages?wait=5&min=1")
    items = json.loads(data)["items"] if st == 200 else []
    if not items or items[0].get("status") != "delivered" or PLAINTEXT.decode() not in json.dumps(items[0]):
        raise BenchError(f"the probe push was not delivered decrypted: {st} {data[:600]!r}")
    return device["token"], path, body, auth


def ecdh_floor_us(work):
    """CPU microseconds of one P-256 ECDH with nettle (bench/ecdh.c, which bench/run.sh builds
    into WORK/ecdh), the part of every push no server can skip; None when it is not built."""
    tool = os.path.join(work, "ecdh")
    if not os.access(tool, os.X_OK):
        return None
    out = subprocess.run([tool, "2000"], capture_output=True, text=True, timeout=120)
    m = re.search(r"ecdh_us=([0-9.]+)", out.stdout)
    return float(m.group(1)) if m else None


def run(mock_bin, run_dir, fixtures, tokens_path, rounds, work=None):
    """Runs the Web Push phase on a mock of its own; returns (results, report lines, checks)."""
    res = {"ecdh_us": ecdh_floor_us(work or os.path.dirname(run_dir))}
    mock = Server("fcm-mock webpush", [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
                                       "--db", os.path.join(run_dir, "webpush.sqlite"), "--fixtures", fixtures],
                  os.path.join(run_dir, "webpush.stderr"), 60)
    try:
        token, path, body, auth = make_push(mock)
        body_path = os.path.join(run_dir, "webpush-body.bin")
        with open(body_path, "wb") as f:
            f.write(body)
        env = {"BENCH_WP_PATH": path, "BENCH_WP_BODY": body_path, "BENCH_WP_AUTH": auth}
        secrets = {auth: "VAPID"}

        # CPU per request: pushes and legacy sends, back to back in alternating order.
        n = max(ROUNDS, rounds)
        log(f"webpush: pushes and legacy sends over HTTP/1.1, {n} alternating rounds of {bench_v1.CPU_ROUND_S}s")
        sides = (("legacy", "single.lua", "/fcm/send", None), ("webpush", "webpush.lua", path, env))
        measured = alternating_cpu_rounds(mock, sides, n, tokens_path, secrets)
        res["cpu_us"] = {k: v["cpu_us"] for k, v in measured.items()}
        res["cpu_ratios"] = [w / l if l else 0.0
                             for w, l in zip(measured["webpush"]["per_request"], measured["legacy"]["per_request"])]
        res["h1_rps"] = {k: statistics.median(v["rps"]) for k, v in measured.items()}
        res["h1_rounds"] = measured["webpush"]["rps"]
        res["h1_errors"] = sum(v["errors"] for v in measured.values())
        res["h1_cmds"] = {k: v["cmds"] for k, v in measured.items()}
        res["rounds"] = n

        # HTTP/2: one connection, H2_STREAMS streams at once.
        log(f"webpush: h2load, {H2_REQUESTS} pushes on 1 connection x {H2_STREAMS} streams, 3 runs")
        h2 = []
        for _ in range(3):
            before = mock.cpu_s()
            r = run_h2load_push(mock.url + path, body_path, auth)
            r["cpu_us"] = 1e6 * (mock.cpu_s() - before) / max(r["done"], 1)
            h2.append(r)
        res["h2"] = h2
        res["h2_failed"] = sum(r["failed"] + (r["done"] - r["ok2xx"]) for r in h2)
        res["h2_cmd"] = distinct(shell_line(r["cmd"], secrets=secrets) for r in h2)

        st, data = http_json(mock.url + f"/api/v1/devices/{token}")
        res["pending"] = json.loads(data).get("pending") if st == 200 else None
    finally:
        res["exit"] = mock.stop(120)

    ratio = statistics.median(res["cpu_ratios"])
    h2m = sorted(res["h2"], key=lambda r: r["rps"])[len(res["h2"]) // 2]
    checks = {
        "webpush_h1": res["h1_rps"]["webpush"] >= TARGET_PUSHES_PER_S,
        "webpush_h2": h2m["rps"] >= TARGET_PUSHES_PER_S,
        "webpush_errors": res["h1_errors"] + res["h2_failed"] == 0,
        "webpush_exit": res["exit"] == 0,
    }
    v = lambda ok: "ok" if ok else "**missed**"
    lines = [
        "",
        "Web Push (a mock of its own: one `web` device, one pre-encrypted aes128gcm body of "
        f"{len(body)} bytes ({len(PLAINTEXT)} of plaintext), one VAPID token, every body decrypted and stored):",
        "",
        "| measure | value | baseline (same run) | target | result |",
        "|---|---:|---:|---|---|",
        f"| pushes/s over HTTP/1.1 (wrk, 32 conns, median of {n} rounds: "
        f"{', '.join(f'{x:,.0f}' for x in res['h1_rounds'])}) | {res['h1_rps']['webpush']:,.0f} "
        f"| {res['h1_rps']['legacy']:,.0f} (legacy /fcm/send) | ≥ {TARGET_PUSHES_PER_S:,.0f} | {v(checks['webpush_h1'])} |",
        f"| pushes/s over HTTP/2 (h2c, h2load, 1 connection x {H2_STREAMS} streams, median of 3: "
        f"{', '.join(format(r['rps'], ',.0f') for r in res['h2'])}) | {h2m['rps']:,.0f} | | ≥ {TARGET_PUSHES_PER_S:,.0f} "
        f"| {v(checks['webpush_h2'])} |",
        f"| server CPU per push over HTTP/1.1, µs | {res['cpu_us']['webpush']:.1f} "
        f"| {res['cpu_us']['legacy']:.1f} (legacy send) | (info) **{ratio:.2f}x** an FCM send's "
        f"(median of {n} rounds: {', '.join(f'{r:.2f}' for r in res['cpu_ratios'])}) | |",
        f"| server CPU per push over HTTP/2, µs (median run) | {h2m['cpu_us']:.1f} | | (info) | |",
    ]
    if res["ecdh_us"] is not None:
        lines.append(f"| of which at least: one P-256 ECDH with nettle (`ecc_point_mul`, bench/ecdh.c), CPU µs "
                     f"| {res['ecdh_us']:.1f} | | (info: {res['ecdh_us'] / max(res['cpu_us']['webpush'], 1e-9):.0%} "
                     f"of a push) | |")
    lines += [
        f"| errors (non-2xx, failed streams, socket errors) | {res['h1_errors'] + res['h2_failed']} | | 0 "
        f"| {v(checks['webpush_errors'])} |",
        "",
        "Commands, as run from the repository's root ($VAPID: the Authorization header the phase made; "
        "the body file holds the encrypted push):",
        "",
    ]
    for label in ("webpush", "legacy"):
        for c in res["h1_cmds"][label]:
            lines.append(f"- CPU per request, {label} side of each of the {n} rounds: `{c}`")
    for c in res["h2_cmd"]:
        lines.append(f"- HTTP/2, each of the 3 runs: `{c}`")
    if res["ecdh_us"] is not None:
        lines.append("- ECDH: `.build/bench/ecdh 2000` (built by bench/run.sh from bench/ecdh.c)")
    return res, lines, checks


def run_h2load_push(url, body_path, auth):
    """h2load on one connection with H2_STREAMS streams, the push's headers (`auth` is the whole
    `vapid t=…, k=…`; h2load also sends bench_v1's JSON content type, which a push ignores)."""
    scheme, _, credentials = auth.partition(" ")
    return run_h2load(url, body_path, credentials, H2_REQUESTS, 1, H2_STREAMS, scheme=scheme,
                      headers=["ttl: 60", "content-encoding: aes128gcm"])


def main():
    ap = argparse.ArgumentParser(description="the Web Push phase of the benchmark, alone")
    ap.add_argument("--mock", required=True)
    ap.add_argument("--work", default=os.path.join(bench.ROOT, ".build", "bench"))
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    fixtures, tokens_path = bench.write_fixtures(work)
    run_dir = os.path.join(work, f"webpush-{int(time.time())}")
    os.makedirs(run_dir)
    try:
        _res, lines, checks = run(os.path.abspath(args.mock), run_dir, fixtures, tokens_path, args.rounds)
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(run_dir, ignore_errors=True)
    print("\n".join(lines))
    failed = [k for k, ok in checks.items() if not ok]
    print("\n" + (f"Missed: {', '.join(failed)}." if failed else "All targets met."))
    return 1 if failed else 0


if __name__ == "__main__":
    bench.run_script(main, log)
