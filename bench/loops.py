"""Every core (issue 38): the HTTP/1.1 loops, side by side with the ceiling and the Go peer.

`bash bench/run.sh loops` runs it. Legacy single-token sends (bench/single.lua), `wrk -t1 -c32
-d5s`, each side a fresh server per round, the sides interleaved within each round, so the
machine's neighbours hit all of them alike; req/s, the server's CPU per request, each round's
ratio to the same round's ceiling, and the p50 of one connection sending one request at a time
(`wrk -t1 -c1`). The sides:

- ceiling: bench/ceiling.c (libmicrohttpd, a fixed 200);
- peer: szpakas/fakepushprovider's FCM HTTP handler with the bench's tokens in a map
  (bench/peer/main.go), when BENCH_PEER_SRC names a checkout or a bare git directory of it
  (it is built with Debian's golang-go, offline; without it the phase says so and goes on);
- base: BENCH_BASE_BIN, another fcm-mock binary (main's), when given;
- mock-1: this fcm-mock with `--http-loops 1`; mock: this fcm-mock with its default (one loop
  per core the process may use).

Then the scaling figure: the ceiling and the mock pinned with taskset to one core, then to both
(the client is not pinned), the same rounds. Then, per binary (base when given, this one):
instructions per legacy send (callgrind, one connection, 1000 sends), RSS after 100,000
messages (100 multicasts of 1000), and the median start-up to the first health answer.

Env: BENCH_ROUNDS (3), BENCH_SECONDS (5), BENCH_PEER_SRC, BENCH_BASE_BIN, BENCH_SKIP (words:
scaling, callgrind, memory, startup). Prints a markdown report (also .build/bench/loops.md).
Nothing here gates: the figures are printed.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import bench
from bench import (BenchError, Server, SERVER_KEY, bench_token, fcm_send, log, run_wrk,
                   startup_median, write_fixtures)

PEER_FILES = ("fcm/model.go", "fcm/storage.go", "fcm/interface.go", "fcm/mapper.go",
              "fcm/importer.go", "fcm/exporter.go", "fcm/generator.go",
              "fcm/http/handler.go", "fcm/http/model.go")


def build_peer(src, work):
    """The peer's binary, built from `src` (a checkout, or a bare git directory whose HEAD is
    read); None (said why) when it cannot be built here."""
    if not shutil.which("go"):
        log("peer: no Go toolchain (Debian's golang-go): left out")
        return None
    tree = os.path.join(work, "peer-src")
    shutil.rmtree(tree, ignore_errors=True)
    bare = not os.path.isdir(os.path.join(src, "fcm"))
    for rel in PEER_FILES:
        os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
        if bare:
            out = subprocess.run(["git", "--git-dir", src, "show", f"HEAD:{rel}"], capture_output=True)
            if out.returncode != 0:
                log(f"peer: {rel} not in {src}: left out")
                return None
            data = out.stdout
        else:
            with open(os.path.join(src, rel), "rb") as f:
                data = f.read()
        with open(os.path.join(tree, rel), "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(tree, "cmd", "benchpeer"))
    shutil.copy(os.path.join(bench.HERE, "peer", "main.go"), os.path.join(tree, "cmd", "benchpeer", "main.go"))
    with open(os.path.join(tree, "go.mod"), "w") as f:
        f.write("module github.com/szpakas/fakepushprovider\n\ngo 1.19\n")
    binary = os.path.join(work, "peer")
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GO111MODULE="on",
               GOCACHE=os.path.join(work, "gocache"), GOPATH=os.path.join(work, "gopath"))
    out = subprocess.run(["go", "build", "-o", binary, "./cmd/benchpeer"], cwd=tree, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        log(f"peer: go build failed: {out.stderr[-800:]}")
        return None
    return binary


class Side:
    def __init__(self, name, cmd, pin=None):
        self.name, self.cmd, self.pin = name, cmd, pin
        self.rps, self.cpu_s, self.requests, self.ratios, self.p50 = [], 0.0, 0, [], []

    def start(self, run_dir, tag):
        cmd = self.cmd(run_dir, tag)
        if self.pin:
            cmd = ["taskset", "-c", self.pin] + cmd
        return Server(self.name, cmd, os.path.join(run_dir, f"{self.name}-{tag}.stderr"), 60)

    @property
    def cpu_us(self):
        return 1e6 * self.cpu_s / self.requests if self.requests else 0.0


def rounds(sides, run_dir, tokens, n_rounds, seconds, single=True):
    """Each round: every side fresh, warmed for a second, then wrk -t1 -c32 for `seconds`
    (and, with `single`, -t1 -c1 for 2 s); the ratio is to the same round's first side."""
    for i in range(n_rounds):
        first = None
        for s in sides:
            srv = s.start(run_dir, f"r{i}")
            try:
                run_wrk("single.lua", srv.url, 1, 32, 1, tokens)
                before = srv.cpu_s()
                r = run_wrk("single.lua", srv.url, 1, 32, seconds, tokens)
                s.cpu_s += srv.cpu_s() - before
                s.requests += r["requests"]
                if r["status_errors"] or r["socket_errors"]:
                    log(f"{s.name}: {r['status_errors']} status errors, {r['socket_errors']} socket errors")
                s.rps.append(r["rps"])
                first = first or r["rps"]
                s.ratios.append(r["rps"] / first)
                if single:
                    s.p50.append(run_wrk("single.lua", srv.url, 1, 1, 2, tokens)["p50_us"])
            finally:
                srv.stop(30)
            log(f"round {i + 1}: {s.name} {r['rps']:,.0f} req/s")


def rss_after(mock_cmd, run_dir, tag, fixtures_messages=100_000, size=1000, devices=bench.DEVICES):
    srv = Server("fcm-mock", mock_cmd(run_dir, tag), os.path.join(run_dir, f"rss-{tag}.stderr"), 60)
    try:
        accepted, batch = 0, 0
        while accepted < fixtures_messages and batch < 200:
            st, data = fcm_send(srv.url, {"registration_ids": [bench_token((batch * size + i) % devices)
                                                                for i in range(size)], "data": {"fill": "1"}})
            batch += 1
            if st == 200:
                accepted += json.loads(data).get("success", 0)
        return srv.rss_kib()["VmRSS"] / 1024.0
    finally:
        srv.stop(60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mock", required=True)
    ap.add_argument("--ceiling", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    n_rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    seconds = int(os.environ.get("BENCH_SECONDS", "5"))
    skip = set(os.environ.get("BENCH_SKIP", "").split())
    work = os.path.abspath(args.work)
    run_dir = tempfile.mkdtemp(prefix="loops-", dir=work)
    fixtures, tokens = write_fixtures(work)
    mock_bin, ceiling_bin = os.path.abspath(args.mock), os.path.abspath(args.ceiling)
    base_bin = os.environ.get("BENCH_BASE_BIN")

    def mock(binary, *extra):
        def cmd(d, tag):
            return [binary, "serve", "--http-port", "0", "--xmpp-port", "0", "--log-level", "warning",
                    "--db", os.path.join(d, f"{tag}-{os.getpid()}-{time.monotonic_ns()}.sqlite"),
                    "--fixtures", fixtures, *extra]
        return cmd

    ceiling = lambda d, tag: [ceiling_bin, "0"]  # noqa: E731
    sides = [Side("ceiling", ceiling)]
    peer_src = os.environ.get("BENCH_PEER_SRC")
    peer_bin = build_peer(peer_src, work) if peer_src else None
    if not peer_src:
        log("peer: BENCH_PEER_SRC not set: left out (compare with the ceiling's ratio)")
    if peer_bin:
        sides.append(Side("peer", lambda d, tag: [peer_bin, tokens, SERVER_KEY]))
    if base_bin:
        sides.append(Side("base", mock(base_bin)))
    sides += [Side("mock-1", mock(mock_bin, "--http-loops", "1")), Side("mock", mock(mock_bin))]
    log(f"{n_rounds} rounds of wrk -t1 -c32 -d{seconds}s: {', '.join(s.name for s in sides)}")
    rounds(sides, run_dir, tokens, n_rounds, seconds)

    scaling = []
    if "scaling" not in skip:
        # On one core the default is one loop; on two, one loop and the default (two) apart.
        for pin in ("0", "0,1"):
            scaling.append(Side(f"ceiling on {pin}", ceiling, pin))
            if peer_bin:
                scaling.append(Side(f"peer on {pin}", lambda d, tag: [peer_bin, tokens, SERVER_KEY], pin))
            if pin != "0":
                scaling.append(Side(f"mock-1 on {pin}", mock(mock_bin, "--http-loops", "1"), pin))
            scaling.append(Side(f"mock on {pin}", mock(mock_bin), pin))
        log("scaling: the sides pinned to core 0, then cores 0,1")
        rounds(scaling, run_dir, tokens, n_rounds, seconds, single=False)
        # Each side's ratio is to the same round's ceiling on the same cores.
        for s in scaling:
            c = next(x for x in scaling if x.name == "ceiling on " + s.pin)
            s.ratios = [m / r for m, r in zip(s.rps, c.rps)]

    binaries = ([("base", base_bin, mock(base_bin))] if base_bin else []) + [("mock", mock_bin, mock(mock_bin))]
    per_binary = {}
    for name, binary, cmd in binaries:
        got = per_binary[name] = {}
        if "callgrind" not in skip and shutil.which("valgrind"):
            import bench_v1
            d = tempfile.mkdtemp(prefix=f"cg-{name}-", dir=run_dir)
            log(f"{name}: instructions per legacy send (callgrind)")
            got["instr"] = bench_v1.instructions_per_send(binary, d, fixtures, "legacy")[0]
        if "memory" not in skip:
            log(f"{name}: RSS after 100,000 messages")
            got["rss_mb"] = rss_after(cmd, run_dir, f"rss-{name}")
        if "startup" not in skip:
            got["startup_ms"] = startup_median(
                lambda port, d, b=binary: [b, "serve", "--http-port", str(port), "--xmpp-port", "0",
                                           "--db", os.path.join(d, "s.sqlite")], 10, run_dir, name)[0]

    lines = ["# Every core: HTTP/1.1 loops (bench/loops.py)", "",
             f"{n_rounds} rounds, wrk -t1 -c32 -d{seconds}s, legacy single-token sends; each side a fresh "
             f"server per round; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at the end.", "",
             "| side | req/s (median) | ÷ ceiling (median of rounds) | CPU µs/request | wrk -c1 p50 µs |",
             "|---|---:|---:|---:|---:|"]
    for s in sides:
        lines.append(f"| {s.name} | {statistics.median(s.rps):,.0f} | {statistics.median(s.ratios):.3f} | "
                     f"{s.cpu_us:.1f} | {statistics.median(s.p50):.0f} |")
    peer = next((s for s in sides if s.name == "peer"), None)
    if peer:
        for s in sides:
            if s.name.startswith("mock") or s.name == "base":
                ratios = [m / p for m, p in zip(s.rps, peer.rps)]
                lines.append(f"\n{s.name} ÷ peer: req/s {statistics.median(ratios):.2f}x "
                             f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}), CPU per request "
                             f"{s.cpu_us / peer.cpu_us:.2f}x the peer's")
    if scaling:
        lines += ["", "| pinned (taskset -c; the client is not) | req/s (median) | ÷ ceiling on the same cores | CPU µs/request |",
                  "|---|---:|---:|---:|"]
        for s in scaling:
            lines.append(f"| {s.name} | {statistics.median(s.rps):,.0f} | {statistics.median(s.ratios):.3f} | {s.cpu_us:.1f} |")
    if any(per_binary.values()):
        lines += ["", "| binary | instructions per legacy send | RSS after 100,000 messages, MB | start-up ms (median of 10) |",
                  "|---|---:|---:|---:|"]
        for name, got in per_binary.items():
            lines.append(f"| {name} | {got.get('instr', 0) / 1000:,.1f}k | {got.get('rss_mb', 0):.1f} | "
                         f"{got.get('startup_ms', 0):.1f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(work, "loops.md"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.modules["bench"] = bench
    sys.path.insert(0, bench.HERE)
    bench.run_script(main, log)
