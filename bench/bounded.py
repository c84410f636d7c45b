#!/usr/bin/env python3
"""Bounded storage benchmark (issue 15): a store given --max-messages stays the same size.

    FCM_MOCK_BIN=.build/release/fcm-mock python3 bench/bounded.py
        [--sends 1000000] [--max-messages 100000] [--every 100000] [--memory]

Starts the binary (FCM_MOCK_BIN, else .build/release/fcm-mock) on a new file store (or :memory:
with --memory) with --max-messages, sends --sends single-token legacy sends to 100 devices over 4
keep-alive connections (Python threads, 32 requests in flight on each), and after every --every
sends prints the send rate, the server's CPU per send, its RSS, the store's files (database +
write-ahead log) and what GET /api/v1/health reports (store_messages, store_bytes). Once the
sends stop it waits (a bounded poll) for the pruner to bring the count down to the limit and
prints a last row.

Flat means: from the first row at twice the limit on, RSS and the files (db + wal) stay within 10%
of that row. Exit 0 when both are flat and the count came down to the limit, 1 when not, 2 when
the benchmark could not run. Loopback only; the standard library only.
"""

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the benchmarks' server process: start, CPU, RSS, stop)

KEY = "AAAAfcmmock:demo-server-key"  # the built-in demo fixture's server key
DEVICES = 100
CONNECTIONS = 4
WINDOW = 32
FLAT_TOLERANCE = 0.10


def log(msg):
    print(f"bounded: {msg}", file=sys.stderr, flush=True)


def health(server):
    """GET /api/v1/health, parsed (answered 200 or 503)."""
    return json.loads(bench.http_json(server.url + "/api/v1/health", timeout=10)[1])


class Client:
    """One keep-alive connection sending pipelined batches of legacy sends."""

    def __init__(self, port, index):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.requests = []
        for i in range(1000):
            body = json.dumps({"to": f"bounded-{(index * 1000 + i) % DEVICES:03d}",
                               "data": {"score": "5x1", "time": "15:10", "n": str(i)}},
                              separators=(",", ":")).encode()
            self.requests.append(b"POST /fcm/send HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                 b"Authorization: key=" + KEY.encode() + b"\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.next = 0
        self.failures = 0

    def send(self, count):
        while count > 0:
            n = min(WINDOW, count)
            batch = []
            for _ in range(n):
                batch.append(self.requests[self.next])
                self.next = (self.next + 1) % len(self.requests)
            self.sock.sendall(b"".join(batch))
            for _ in range(n):
                if self.read_response() != 200:
                    self.failures += 1
            count -= n

    def read_response(self):
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(self.buf) < length:
            self.fill()
        self.buf = self.buf[length:]
        return status

    def fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk


def file_bytes(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("FCM_MOCK_BIN", ".build/release/fcm-mock"))
    ap.add_argument("--sends", type=int, default=1_000_000)
    ap.add_argument("--max-messages", type=int, default=100_000)
    ap.add_argument("--every", type=int, default=100_000)
    ap.add_argument("--memory", action="store_true", help="a :memory: store instead of a file")
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        log(f"{args.bin} is not an executable (build it with make release, or set FCM_MOCK_BIN)")
        return 2
    work = tempfile.mkdtemp(prefix="fcm-mock-bounded-")
    db = ":memory:" if args.memory else os.path.join(work, "store.sqlite")
    server = bench.Server("fcm-mock", [args.bin, "serve", "--http-port", "0", "--xmpp-port", "0", "--db", db,
                                       "--max-messages", str(args.max_messages), "--log-level", "warning"],
                          os.path.join(work, "server.log"), 60)
    rows = []
    try:
        clients = [Client(server.port, i) for i in range(CONNECTIONS)]
        started = time.monotonic()
        sent = 0

        def sample(label):
            h = health(server)
            db_bytes = file_bytes(db) if not args.memory else 0
            wal_bytes = file_bytes(db + "-wal") if not args.memory else 0
            row = {"sends": label, "rss_mib": server.rss_kib()["VmRSS"] / 1024, "db_mib": db_bytes / 2**20,
                   "wal_mib": wal_bytes / 2**20, "files_mib": (db_bytes + wal_bytes) / 2**20,
                   "store_messages": h.get("store_messages"), "store_mib": h.get("store_bytes", 0) / 2**20,
                   "elapsed_s": time.monotonic() - started, "cpu_s": server.cpu_s()}
            rows.append(row)
            log(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}))
            return row

        sample(0)
        while sent < args.sends:
            step = min(args.every, args.sends - sent)
            shares = [step // CONNECTIONS + (1 if i < step % CONNECTIONS else 0) for i in range(CONNECTIONS)]
            errors = []

            def work_on(client, n):
                try:
                    client.send(n)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=work_on, args=(c, n)) for c, n in zip(clients, shares)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise SystemExit(f"bounded: sending failed after {sent} sends: {errors[0]}")
            sent += step
            before = rows[-1]["cpu_s"]
            row = sample(sent)
            row["rate"] = step / (time.monotonic() - t0)
            row["cpu_us"] = (row["cpu_s"] - before) / step * 1e6
        failures = sum(c.failures for c in clients)
        # The pruner works in the background: wait (bounded) for it to reach the limit.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (health(server).get("store_messages") or 0) > args.max_messages:
            time.sleep(0.1)
        sample("settled")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    store = ":memory:" if args.memory else "file"
    print(f"### {args.sends:,} legacy sends, --max-messages {args.max_messages:,}, {store} store\n")
    print("| sends | sends/s | server CPU µs/send | RSS MiB | db MiB | wal MiB | db + wal MiB | health store_messages "
          "| health store_bytes MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        label = f"{r['sends']:,}" if isinstance(r["sends"], int) else r["sends"]
        rate = f"{r['rate']:,.0f}" if "rate" in r else ""
        cpu = f"{r['cpu_us']:.0f}" if "cpu_us" in r else ""
        print(f"| {label} | {rate} | {cpu} | {r['rss_mib']:.1f} | {r['db_mib']:.1f} | {r['wal_mib']:.1f} | {r['files_mib']:.1f} "
              f"| {r['store_messages']} | {r['store_mib']:.1f} |")
    # Flat: from the first row at twice the limit on, within FLAT_TOLERANCE of that row.
    after = [r for r in rows if isinstance(r["sends"], int) and r["sends"] >= 2 * args.max_messages] + rows[-1:]
    verdict = 0
    if len(after) >= 2:
        base = after[0]
        for key, name in (("rss_mib", "RSS"), ("store_mib" if args.memory else "files_mib", "store size")):
            top = max(r[key] for r in after)
            growth = (top - base[key]) / base[key] if base[key] else 0
            ok = growth <= FLAT_TOLERANCE
            verdict |= 0 if ok else 1
            print(f"\n{name}: {base[key]:.1f} MiB at {base['sends']:,} sends, at most {top:.1f} MiB after "
                  f"({growth * 100:+.1f}%): {'flat' if ok else 'GROWS'}", end="")
        print()
    settled = rows[-1]["store_messages"]
    if settled is None or settled > args.max_messages:
        print(f"the count did not come down to {args.max_messages:,} (health says {settled})")
        verdict = 1
    if failures:
        print(f"{failures} sends were not answered 200")
        verdict = 1
    return verdict


if __name__ == "__main__":
    sys.exit(main())
