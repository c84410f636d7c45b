#!/usr/bin/env python3
"""Reset under load (issue 16, item 4): how long `POST /api/v1/reset` takes on a full store while
sends keep arriving, and how long health waits meanwhile.

    FCM_MOCK_BIN=.build/release/fcm-mock python3 bench/reset_load.py [--messages 190000]
        [--deliveries 700000] [--rate 1200] [--resets 3]

Starts the binary on a file store, fills it with single-token sends and 20-token multicasts to 40
devices until it holds about --messages records and --deliveries deliveries, then sends --rate
legacy sends a second from one thread while another asks GET /api/v1/health every 10 ms, and
resets the store --resets times (refilling in between). Prints, per reset, its time, the slowest
health answer around it and the sends' latency before, during and after it, and checks reset's
contract at once (nothing old is visible: a record by id, the list, an inbox); exit 1 when
something old was. Loopback only; the standard library only.
"""

import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the benchmarks' server process: start, stop)

KEY = "AAAAfcmmock:demo-server-key"
DEVICES = [f"reset-load-{i:02d}" for i in range(40)]
MULTICAST = 20


def log(msg):
    print(f"reset_load: {msg}", file=sys.stderr, flush=True)


def connect(server):
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)


def send(conn, body):
    conn.request("POST", "/fcm/send", body=body,
                 headers={"Content-Type": "application/json", "Authorization": "key=" + KEY})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"send answered {r.status}: {data[:200]!r}")
    return data


def get(conn, path):
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read()


def fill(server, messages, deliveries, threads=4):
    """Single sends and multicasts so that records ~ messages and deliveries ~ deliveries."""
    multicasts = max(0, (deliveries - messages) // (MULTICAST - 1))
    singles = max(0, messages - multicasts)
    jobs = [("m", i) for i in range(multicasts)] + [("s", i) for i in range(singles)]
    # Interleaved, so the store looks like a day of mixed traffic.
    jobs.sort(key=lambda j: (j[1] * 7919) % 100003)
    errors = []

    def work(part):
        c = connect(server)
        try:
            for kind, i in part:
                if kind == "m":
                    ids = [DEVICES[(i + k) % len(DEVICES)] for k in range(MULTICAST)]
                    body = json.dumps({"registration_ids": ids, "data": {"n": str(i)}})
                else:
                    body = json.dumps({"to": DEVICES[i % len(DEVICES)], "data": {"n": str(i)}})
                send(c, body)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    started = time.monotonic()
    ts = [threading.Thread(target=work, args=(jobs[k::threads],)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise SystemExit(f"reset_load: fill failed: {errors[0]}")
    log(f"filled {singles + multicasts} sends ({singles} single, {multicasts} x {MULTICAST}) "
        f"in {time.monotonic() - started:.1f} s")


def percentile(values, p):
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def stamp(message_id):
    return int(message_id.split(":", 1)[1].split("%", 1)[0])


def snapshot(db, sql):
    """One value read from the store file as a snapshot (None for :memory:).

    The running server holds its store exclusively, so this reads the database file alone
    (`immutable=1`: no locks, no log): it lags the server by a checkpoint (about 50 ms). A read
    that meets a checkpoint half-way is tried again."""
    if db == ":memory:":
        return None
    import sqlite3
    for _ in range(100):
        c = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        try:
            return c.execute(sql).fetchone()[0]
        except sqlite3.DatabaseError:
            time.sleep(0.05)
        finally:
            c.close()
    raise RuntimeError(f"could not read {db}")


def leftovers(db):
    """Tables a reset set aside that the store file still holds (None for :memory:)."""
    return snapshot(db, "SELECT count(*) FROM sqlite_schema WHERE name GLOB 'gone_*'")


def one_reset(server, rate, db, settle=2.0, after=6.0):
    stop = threading.Event()
    sends = []    # (start, latency)
    health = []   # (start, latency)

    def sender():
        c = connect(server)
        period = 1.0 / rate
        nxt = time.monotonic()
        i = 0
        while not stop.is_set():
            now = time.monotonic()
            if now < nxt:
                time.sleep(nxt - now)
            t0 = time.monotonic()
            send(c, json.dumps({"to": DEVICES[i % len(DEVICES)], "data": {"load": str(i)}}))
            sends.append((t0, time.monotonic() - t0))
            i += 1
            nxt += period
            if nxt < time.monotonic() - 1:  # fell behind by a second: do not burst to catch up
                nxt = time.monotonic()

    def poller():
        c = connect(server)
        while not stop.is_set():
            t0 = time.monotonic()
            status, _ = get(c, "/api/v1/health")
            health.append((t0, time.monotonic() - t0))
            time.sleep(max(0.0, 0.010 - (time.monotonic() - t0)))

    ts = [threading.Thread(target=sender), threading.Thread(target=poller)]
    for t in ts:
        t.start()
    time.sleep(settle)
    c = connect(server)
    old = json.loads(get(c, "/api/v1/messages?limit=1")[1])["items"][0]["message_id"]
    t0 = time.monotonic()
    c.request("POST", "/api/v1/reset")
    r = c.getresponse()
    r.read()
    t1 = time.monotonic()
    assert r.status == 204, r.status
    # Reset's contract, checked at once: the old record is gone, the list holds only new sends,
    # the inbox likewise.
    status, _ = get(c, "/api/v1/messages/" + old.replace("%", "%25").replace(":", "%3A"))
    listed = json.loads(get(c, "/api/v1/messages?limit=1000")[1])["items"]
    inbox = json.loads(get(c, f"/api/v1/devices/{DEVICES[0]}/messages?limit=1000")[1]).get("items", [])
    # A message id is `0:<16-digit stamp>%<suffix>`; stamps grow, so an old one is at most `old`'s.
    stale = [e for e in listed + inbox if stamp(e["message_id"]) <= stamp(old)]
    # The tables set aside (a large store's) are emptied in the background: how long it takes.
    emptied = None
    set_aside = leftovers(db)
    while set_aside == 0 and time.monotonic() < t1 + 1:  # the file lags by a checkpoint
        time.sleep(0.05)
        set_aside = leftovers(db)
    while set_aside and time.monotonic() < t1 + 120:
        if not leftovers(db):
            emptied = time.monotonic() - t1
            break
        time.sleep(0.1)
    time.sleep(max(0.0, t1 + after - time.monotonic()))
    stop.set()
    for t in ts:
        t.join()
    around = [lat for (s, lat) in health if t0 - 0.05 <= s <= t1 + 0.05]
    during = [lat for (s, lat) in sends if t0 - 0.05 <= s <= t1 + 0.05]
    before = [lat for (s, lat) in sends if s < t0 - 0.05]
    later = [lat for (s, lat) in sends if s > t1 + 0.05]
    return {
        "send_before_p99_ms": percentile(before, 0.99) * 1000,
        "send_before_max_ms": max(before, default=0) * 1000,
        "send_after_p99_ms": percentile(later, 0.99) * 1000,
        "send_after_max_ms": max(later, default=0) * 1000,
        "sends_after_over_10ms": sum(1 for x in later if x > 0.010),
        "reset_ms": (t1 - t0) * 1000,
        "health_max_ms": max([lat for _, lat in health], default=0) * 1000,
        "health_max_around_ms": max(around, default=0) * 1000,
        "health_n": len(health),
        "send_p50_ms": percentile([l for _, l in sends], 0.50) * 1000,
        "send_p99_ms": percentile([l for _, l in sends], 0.99) * 1000,
        "send_max_ms": max([l for _, l in sends], default=0) * 1000,
        "send_max_around_ms": max(during, default=0) * 1000,
        "sends_per_s": len(sends) / (sends[-1][0] - sends[0][0]) if len(sends) > 1 else 0,
        "set_aside": bool(set_aside),
        "emptied_s": emptied,
        "old_record_status": status,
        "stale_after": len(stale),
    }


def emptied_text(r):
    if not r["set_aside"]:
        return "no"
    return f"yes, {r['emptied_s']:.1f} s" if r["emptied_s"] is not None else "yes, not within 120 s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("FCM_MOCK_BIN", ".build/release/fcm-mock"))
    ap.add_argument("--messages", type=int, default=190_000)
    ap.add_argument("--deliveries", type=int, default=700_000)
    ap.add_argument("--rate", type=int, default=1200)
    ap.add_argument("--resets", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="a :memory: store instead of a file")
    ap.add_argument("--extra", default="", help="more serve flags, space-separated")
    ap.add_argument("--server-log", default=None, help="where the server's stderr goes (default: nowhere)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="fcm-mock-reset-load-")
    db = ":memory:" if args.memory else os.path.join(work, "store.sqlite")
    extra = args.extra.split() if args.extra else []
    if args.memory:
        extra += ["--max-messages", "none"] if "--max-messages" not in extra else []
    server = bench.Server("fcm-mock", [args.bin, "serve", "--http-port", "0", "--xmpp-port", "0", "--db", db,
                                       "--log-level", "warning"] + extra,
                          args.server_log or os.devnull, 60)
    rows = []
    try:
        for n in range(args.resets):
            fill(server, args.messages, args.deliveries)
            res = one_reset(server, args.rate, db)
            rows.append(res)
            log(f"reset {n + 1}: {json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in res.items()})}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"| reset | POST /reset ms | slowest health ms (around / whole run) | sends/s | slowest send during reset ms "
          f"| sends 2 s before: p99 / max ms | sends 6 s after: p99 / max ms, over 10 ms | old record, stale entries "
          f"| set aside, emptied after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        print(f"| {i} | {r['reset_ms']:.1f} | {r['health_max_around_ms']:.1f} / {r['health_max_ms']:.1f} "
              f"| {r['sends_per_s']:.0f} | {r['send_max_around_ms']:.1f} "
              f"| {r['send_before_p99_ms']:.2f} / {r['send_before_max_ms']:.1f} "
              f"| {r['send_after_p99_ms']:.2f} / {r['send_after_max_ms']:.1f}, {r['sends_after_over_10ms']} "
              f"| {r['old_record_status']}, {r['stale_after']} | {emptied_text(r)} |")
    bad = [r for r in rows if r["old_record_status"] != 404 or r["stale_after"]]
    if bad:
        print("reset_load: something from before a reset was still visible after it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
