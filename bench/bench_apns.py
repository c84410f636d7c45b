"""APNs phase of `make bench` (bench.py calls `run`; `python3 bench/bench_apns.py [BIN]` runs it
alone): `POST /3/device/{token}` with a provider token against HTTP v1 sends, both over
one HTTP/2 connection with 32 streams (h2load -c 1 -m 32) to the same mock, in the same run.

Targets (issue 26): APNs CPU per send within 10% of a v1 send's; at least 20,000 APNs sends/s.
Ratios only, both sides measured in this run: nine rounds, the two sides back to back in each and
in alternating order (APNs first, then v1 first, ...), the ratio the median of the rounds'.

The CPU target is judged on sends that do the same work besides their protocol's: each side
spread over IOS_DEVICES devices of its platform, through the same client (bench/h2send.c, a body
per request: h2load sends one body to every URI, so its v1 sends all name one device). Spreading
costs any send (the store's inbox index and the engine's per-device state are touched at another
place each time): measured with h2load, APNs over 1,000 devices against v1 to one device, the
ratio holds that cost too; that row is kept for information, beside the same comparison in
instructions (callgrind, a mock of its own per side; free of the machine's noise) and over TLS
(ALPN h2) in three rounds.

Set-up through the control API, as a tester's would be: a team and a signing key
(`POST /api/v1/apns/keys`), one ES256 provider token signed with the key's `.p8` by openssl's
command line (the bench stays stdlib-only), IOS_DEVICES iOS devices (`POST /api/v1/devices`)
whose APNs tokens h2load takes in turn; a service account and one OAuth access token for v1,
whose h2load sends go to one of the bench's Android devices (its h2send sends to each in turn).
BENCH_IOS_DEVICES (default 1000) sets how many devices of each platform the phase makes.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import bench
from bench import SENDER_ID, BenchError, Server, bench_token, http_json, log
from bench_v1 import b64url, distinct, openssl_signed, run_h2load, shell_line, sign_assertion, under_callgrind

TARGET_APNS_CPU = 1.10
TARGET_APNS_RPS = 20_000.0
CONNECTIONS, STREAMS = 1, 32
ROUNDS = 9
TLS_ROUNDS = 3
# Sends per h2load run: one to two seconds at the rates seen here.
REQUESTS = 30_000
IOS_DEVICES = int(os.environ.get("BENCH_IOS_DEVICES", "1000"))
TEAM = "BENCHTEAM1"
BUNDLE = "com.example.bench.ios"
APNS_PAYLOAD = '{"aps":{"alert":{"title":"Score","body":"5x1"}},"time":"15:10"}'
# Sends counted under callgrind per side (after WARM_SENDS not counted).
COUNTED_SENDS, WARM_SENDS = 2000, 200


def apns_token_of(i):
    """The APNs token of bench iOS device i: 64 lowercase hex digits."""
    return f"{i:08x}" * 8


def der_to_raw(der):
    """An ECDSA signature's DER (SEQUENCE of INTEGER r, INTEGER s), as openssl writes it, in
    JWS's form: r and s as 32 bytes each (RFC 7518 section 3.4)."""
    if len(der) < 8 or der[0] != 0x30:
        raise BenchError(f"not a DER ECDSA signature: {der.hex()}")
    pos = 2 if der[1] < 0x80 else 2 + (der[1] & 0x7F)
    out = b""
    for _ in range(2):
        if der[pos] != 0x02:
            raise BenchError(f"not a DER ECDSA signature: {der.hex()}")
        n = der[pos + 1]
        value = der[pos + 2:pos + 2 + n].lstrip(b"\x00")
        if len(value) > 32:
            raise BenchError(f"an ECDSA integer over 32 bytes: {der.hex()}")
        out += value.rjust(32, b"\x00")
        pos += 2 + n
    return out


def sign_provider_token(key, work):
    """An ES256 provider token for `key` (the answer of POST /api/v1/apns/keys): header
    {alg, kid}, claims {iss: the team, iat: now}, signed with the key's .p8."""
    signed, der = openssl_signed({"alg": "ES256", "kid": key["key_id"]}, {"iss": key["team_id"], "iat": int(time.time())},
                                 key["private_key_pem"], os.path.join(work, f"AuthKey_{key['key_id']}.p8"),
                                 "the provider token")
    return f"{signed}.{b64url(der_to_raw(der))}"


def h2send_tool(work):
    """bench/h2send.c built into `work` (bench/run.sh builds it too), rebuilt when older."""
    source = os.path.join(bench.ROOT, "bench", "h2send.c")
    tool = os.path.join(work, "h2send")
    if not os.path.exists(tool) or os.path.getmtime(tool) < os.path.getmtime(source):
        out = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-o", tool, source, "-lnghttp2"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise BenchError(f"building bench/h2send.c: {out.stderr[-800:]}")
    return tool


def run_h2send(tool, base, lines_path, requests, streams, headers):
    """h2send's POSTs, each request's path and body the next line of `lines_path`."""
    host, port = base.split("://", 1)[1].rsplit(":", 1)
    cmd = [tool, host, port, str(requests), str(streams), lines_path]
    for h in headers:
        cmd += ["-H", h]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    m = re.search(r"requests=(\d+) ok=(\d+) non2xx=(\d+) seconds=([\d.]+)", out.stdout)
    if out.returncode != 0 or not m:
        raise BenchError(f"h2send failed ({out.returncode}): {out.stdout[-800:]} {out.stderr[-800:]}")
    done, seconds = int(m.group(1)), float(m.group(4))
    return {"rps": done / max(seconds, 1e-9), "done": done, "ok2xx": int(m.group(2)), "failed": 0, "cmd": cmd}


def write_fixtures(work):
    """The bench's project with an iOS app beside its Android one, and IOS_DEVICES of its
    Android devices (h2load's v1 sends go to one of them; h2send's to each in turn)."""
    path = os.path.join(work, "fixtures-apns.json")
    doc = {
        "projects": [{"sender_id": SENDER_ID, "server_keys": [bench.SERVER_KEY],
                      "apps": [{"app": bench.APP, "platform": "android"}, {"app": BUNDLE, "platform": "ios"}]}],
        "devices": [{"token": bench_token(i), "sender_id": SENDER_ID, "app": bench.APP, "platform": "android",
                     "online": True} for i in range(max(100, IOS_DEVICES))],
    }
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


class Sides:
    """What each side sends: the h2load arguments of an APNs and of a v1 send to one mock, and
    the secrets to hide when the commands are printed."""

    def __init__(self, url, run_dir, tag):
        self.url, self.run_dir, self.tag = url, run_dir, tag
        self.secrets = {}

    def set_up(self, ios_devices=IOS_DEVICES):
        """Team, key, provider token and iOS devices; service account, access token."""
        st, data = http_json(self.url + "/api/v1/apns/keys", "POST",
                             json.dumps({"team_id": TEAM, "bundle_ids": [BUNDLE]}).encode(),
                             {"Content-Type": "application/json"})
        if st != 201:
            raise BenchError(f"POST /api/v1/apns/keys: {st} {data[:300]!r}")
        self.provider_token = sign_provider_token(json.loads(data), self.run_dir)
        import http.client
        port = int(self.url.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for i in range(ios_devices):
                conn.request("POST", "/api/v1/devices", json.dumps({
                    "sender_id": SENDER_ID, "app": BUNDLE, "platform": "ios", "online": True,
                    "apns_token": apns_token_of(i), "apns_environment": "sandbox"}),
                    {"Content-Type": "application/json"})
                r = conn.getresponse()
                body = r.read()
                if r.status != 201:
                    raise BenchError(f"POST /api/v1/devices (iOS device {i}): {r.status} {body[:300]!r}")
        finally:
            conn.close()
        self.apns_body = os.path.join(self.run_dir, "apns-body.json")
        with open(self.apns_body, "w") as f:
            f.write(APNS_PAYLOAD)
        self.ios_devices = ios_devices

        st, data = http_json(f"{self.url}/api/v1/projects/{SENDER_ID}/service-accounts", "POST", b"{}",
                             {"Content-Type": "application/json"})
        if st != 201:
            raise BenchError(f"service account: {st} {data[:300]!r}")
        account = json.loads(data)
        form = ("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="
                + sign_assertion(account, self.run_dir)).encode()
        st, data = http_json(self.url + "/token", "POST", form, {"Content-Type": "application/x-www-form-urlencoded"})
        if st != 200:
            raise BenchError(f"token endpoint: {st} {data[:300]!r}")
        self.bearer = json.loads(data)["access_token"]
        self.v1_path = f"/v1/projects/{account['project_id']}/messages:send"
        self.v1_body = os.path.join(self.run_dir, "apns-v1-body.json")
        self.v1_payload = json.dumps({"message": {"token": bench_token(1),
                                                  "data": {"score": "5x1", "time": "15:10"}}})
        with open(self.v1_body, "w") as f:
            f.write(self.v1_payload)
        self.secrets = {self.provider_token: "PROVIDER_TOKEN", self.bearer: "TOKEN"}
        # h2send's requests: each side over `ios_devices` devices of its platform, in turn.
        self.spread_lines = {
            "apns": os.path.join(self.run_dir, f"apns-spread-{self.tag}.txt"),
            "v1": os.path.join(self.run_dir, f"v1-spread-{self.tag}.txt"),
        }
        with open(self.spread_lines["apns"], "w") as f:
            f.write("".join(f"/3/device/{apns_token_of(i)}\t{APNS_PAYLOAD}\n" for i in range(ios_devices)))
        with open(self.spread_lines["v1"], "w") as f:
            # The h2load body's text (json.dumps' own spacing), each with its device's token.
            f.write("".join(self.v1_path + "\t" + json.dumps({"message": {"token": bench_token(i),
                                                                           "data": {"score": "5x1", "time": "15:10"}}}) + "\n"
                            for i in range(ios_devices)))

    def point_at(self, base):
        """Sends to `base` (http://… or https://…): writes the APNs URIs for it."""
        self.base = base
        self.apns_urls = os.path.join(self.run_dir, f"apns-urls-{self.tag}-{base.split(':')[0]}.txt")
        with open(self.apns_urls, "w") as f:
            f.write("".join(f"{base}/3/device/{apns_token_of(i)}\n" for i in range(self.ios_devices)))

    def probe(self):
        """One send of each kind over h2load, answered 200 (the set-up works, nothing refused)."""
        for side in ("apns", "v1"):
            r = self.h2load(side, 1, 1)
            if r["ok2xx"] != 1 or r["failed"]:
                raise BenchError(f"{side} probe over {self.base} was not answered 200: {r}")

    def h2send(self, side, requests, streams=STREAMS):
        """`requests` sends of `side` through h2send over h2c, spread over every device."""
        headers = ([f"authorization: bearer {self.provider_token}", f"apns-topic: {BUNDLE}"] if side == "apns"
                   else [f"authorization: Bearer {self.bearer}"])
        return run_h2send(self.h2send_tool, self.url, self.spread_lines[side], requests, streams, headers)

    def h2load(self, side, requests, streams=STREAMS):
        if side == "apns":
            return run_h2load(None, self.apns_body, self.provider_token, requests, CONNECTIONS, streams,
                              headers=[f"apns-topic: {BUNDLE}"], scheme="bearer", urls_file=self.apns_urls)
        return run_h2load(self.base + self.v1_path, self.v1_body, self.bearer, requests, CONNECTIONS, streams)


def alternating(mock, sides, rounds, requests, label, client="h2load"):
    """`rounds` rounds of both sides back to back, in alternating order, on `mock`: per side the
    client's results and the server CPU per send (µs); the rounds' APNs/v1 CPU ratios."""
    runs = {"apns": [], "v1": []}
    cpu_us = {"apns": [], "v1": []}
    started = time.monotonic()
    send = sides.h2send if client == "h2send" else sides.h2load
    for i in range(rounds):
        for side in (("apns", "v1") if i % 2 == 0 else ("v1", "apns")):
            before = mock.cpu_s()
            r = send(side, requests)
            used = mock.cpu_s() - before
            runs[side].append(r)
            cpu_us[side].append(1e6 * used / max(r["done"], 1))
    log(f"apns: {label}: {rounds} rounds took {time.monotonic() - started:.0f}s")
    return {
        "runs": runs,
        "cpu_us": cpu_us,
        "ratios": [a / v if v else 0.0 for a, v in zip(cpu_us["apns"], cpu_us["v1"])],
        "rps": {k: statistics.median(r["rps"] for r in v) for k, v in runs.items()},
        "cpu_total_us": {k: statistics.median(v) for k, v in cpu_us.items()},
        "failed": sum(r["failed"] + (r["done"] - r["ok2xx"]) for v in runs.values() for r in v),
        "cmds": {k: distinct(shell_line(r["cmd"], secrets=sides.secrets) for r in v) for k, v in runs.items()},
    }


def instructions_per_send(mock_bin, run_dir, fixtures, side):
    """Instructions the whole server executes per send of `side` over one h2c connection with
    32 streams, counted by callgrind over COUNTED_SENDS sends (after WARM_SENDS not counted),
    on a mock of its own; the same for the same binary and input whatever the neighbours do.
    Returns the count, the server's command line and the counted h2load's."""
    def drive(url, ctl):
        sides = Sides(url, run_dir, f"callgrind-{side}")
        sides.set_up(ios_devices=100)
        sides.point_at(url)
        sides.h2load(side, WARM_SENDS)
        ctl("-i", "on")
        r = sides.h2load(side, COUNTED_SENDS)
        ctl("-d")
        if r["ok2xx"] != COUNTED_SENDS:
            raise BenchError(f"{side} sends under callgrind: {r['ok2xx']} of {COUNTED_SENDS} answered 2xx")
        return shell_line(r["cmd"], secrets=sides.secrets)

    total, argv, cmd = under_callgrind(mock_bin, run_dir, fixtures, f"h2-{side}", drive)
    return total / COUNTED_SENDS, shell_line(argv), cmd


def run(mock_bin, run_dir, rounds=ROUNDS, tls=True, callgrind=True):
    """Runs the APNs phase on mocks of its own; returns (results, report lines, checks)."""
    if not shutil.which("h2load"):
        raise BenchError("h2load is missing (Debian nghttp2-client)")
    fixtures = write_fixtures(run_dir)
    res = {}
    argv = [mock_bin, "serve", "--http-port", "0", "--xmpp-port", "0",
            "--db", os.path.join(run_dir, "apns.sqlite"), "--fixtures", fixtures]
    if tls:
        argv += ["--https-port", str(bench.free_port()), "--tls-dir", os.path.join(run_dir, "apns-tls")]
    mock = Server("fcm-mock apns", argv, os.path.join(run_dir, "apns.stderr"), 60)
    try:
        log(f"apns: a team, a key, a provider token and {IOS_DEVICES} iOS devices through the control API")
        sides = Sides(mock.url, run_dir, "h2c")
        sides.set_up()
        sides.h2send_tool = h2send_tool(os.path.dirname(run_dir))
        sides.point_at(mock.url)
        sides.probe()
        # Warm-up (not counted): the first sends prepare statements and fill caches.
        for side in ("apns", "v1"):
            sides.h2send(side, REQUESTS // 3)
            sides.h2load(side, REQUESTS // 3)
        log(f"apns: h2send {REQUESTS} APNs and {REQUESTS} v1 sends over h2c, each side over {IOS_DEVICES} devices "
            f"(1 conn x {STREAMS} streams), {rounds} alternating rounds")
        res["spread"] = alternating(mock, sides, rounds, REQUESTS, "h2c, equal spread", client="h2send")
        res["spread"]["rounds"] = rounds
        log(f"apns: h2load {REQUESTS} APNs and {REQUESTS} v1 sends over h2c ({CONNECTIONS} conn x {STREAMS} "
            f"streams; v1 to one device), {rounds} alternating rounds")
        res["h2c"] = alternating(mock, sides, rounds, REQUESTS, "h2c")
        res["h2c"]["rounds"] = rounds
        if tls:
            sides.point_at(f"https://127.0.0.1:{argv[argv.index('--https-port') + 1]}")
            sides.probe()
            log(f"apns: the same over TLS (ALPN h2), {TLS_ROUNDS} alternating rounds")
            res["tls"] = alternating(mock, sides, TLS_ROUNDS, REQUESTS, "TLS")
            res["tls"]["rounds"] = TLS_ROUNDS
        res["fixtures"] = fixtures
    finally:
        res["exit"] = mock.stop(120)

    if callgrind and shutil.which("valgrind") and shutil.which("callgrind_control"):
        log(f"apns: instructions per send under callgrind, {COUNTED_SENDS} APNs and {COUNTED_SENDS} v1 sends over h2c")
        counted = {k: instructions_per_send(mock_bin, run_dir, fixtures, k) for k in ("apns", "v1")}
        res["instr"] = {k: v[0] for k, v in counted.items()}
        res["instr_cmds"] = {k: (v[1], v[2]) for k, v in counted.items()}
    return report(res)


def report(res):
    h, e = res["h2c"], res["spread"]
    ratio = statistics.median(e["ratios"])
    h2load_ratio = statistics.median(h["ratios"])
    failed = h["failed"] + e["failed"] + res.get("tls", {}).get("failed", 0)
    checks = {
        "apns_cpu": ratio <= TARGET_APNS_CPU,
        "apns_rps": h["rps"]["apns"] >= TARGET_APNS_RPS,
        "apns_errors": failed == 0,
        "apns_exit": res["exit"] == 0,
    }
    v = lambda ok: "ok" if ok else "**missed**"
    spread = lambda xs: f"{min(xs):.2f}-{max(xs):.2f}"
    lines = [
        "",
        f"APNs against HTTP v1 (a mock of its own, {IOS_DEVICES:,} iOS and {IOS_DEVICES:,} Android devices; "
        f"1 connection x {STREAMS} streams, {REQUESTS:,} sends a run; \"equal spread\": each side over all its "
        f"platform's devices through bench/h2send.c; h2load: APNs over the iOS devices, v1 to one device):",
        "",
        "| measure | APNs `POST /3/device/{token}` | v1 `messages:send` (same run) | target | result |",
        "|---|---:|---:|---|---|",
        f"| h2c, equal spread, server CPU per send, µs (median of {e['rounds']} rounds) "
        f"| {e['cpu_total_us']['apns']:.1f} | {e['cpu_total_us']['v1']:.1f} | ≤ {TARGET_APNS_CPU:.2f}x: **{ratio:.2f}x** "
        f"(rounds {spread(e['ratios'])}: {', '.join(f'{r:.2f}' for r in e['ratios'])}) | {v(checks['apns_cpu'])} |",
        f"| h2c, equal spread, sends/s | {e['rps']['apns']:,.0f} | {e['rps']['v1']:,.0f} | (info) | |",
        f"| h2c, h2load, sends/s (median of {h['rounds']} rounds) | {h['rps']['apns']:,.0f} | {h['rps']['v1']:,.0f} "
        f"| APNs ≥ {TARGET_APNS_RPS:,.0f} | {v(checks['apns_rps'])} |",
        f"| h2c, h2load (v1 to one device), server CPU per send, µs | {h['cpu_total_us']['apns']:.1f} "
        f"| {h['cpu_total_us']['v1']:.1f} | (info: {h2load_ratio:.2f}x, rounds {spread(h['ratios'])}; the spread's "
        f"cost included on the APNs side only) | |",
    ]
    if "instr" in res:
        ir = res["instr"]
        lines.append(f"| h2c, server instructions per send (callgrind, {COUNTED_SENDS:,} sends) | {ir['apns']:,.0f} "
                     f"| {ir['v1']:,.0f} | (info: {ir['apns'] / ir['v1']:.2f}x) | |")
    if "tls" in res:
        t = res["tls"]
        tr = statistics.median(t["ratios"])
        lines += [
            f"| TLS (ALPN h2), sends/s (median of {t['rounds']} rounds) | {t['rps']['apns']:,.0f} "
            f"| {t['rps']['v1']:,.0f} | (info) | |",
            f"| TLS (ALPN h2), server CPU per send, µs | {t['cpu_total_us']['apns']:.1f} "
            f"| {t['cpu_total_us']['v1']:.1f} | (info: {tr:.2f}x, rounds {spread(t['ratios'])}) | |",
        ]
    lines += [
        f"| failed or non-2xx sends | {failed} | | 0 | {v(checks['apns_errors'])} |",
        "",
        "Commands, as run from the repository's root ($PROVIDER_TOKEN: the ES256 provider token the phase "
        "signed; $TOKEN: its v1 access token; the URI file lists `/3/device/{token}` of every iOS device; "
        "h2send's files a path and a body a line, one line per device):",
        "",
    ]
    for proto in ("spread", "h2c", "tls"):
        if proto not in res:
            continue
        for side in ("apns", "v1"):
            for c in res[proto]["cmds"][side]:
                lines.append(f"- {proto}, {side} side of each of the {res[proto]['rounds']} rounds: `{c}`")
    for side, (server, client) in res.get("instr_cmds", {}).items():
        lines.append(f"- instructions, {side}: `{server}`, then `callgrind_control -i on PID`, `{client}`, "
                     f"`callgrind_control -d PID`")
    return res, lines, checks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mock", nargs="?", default=os.path.join(bench.ROOT, ".build", "release", "fcm-mock"),
                    help="the fcm-mock binary (default: make release's)")
    ap.add_argument("--work", default=os.path.join(bench.ROOT, ".build", "bench"))
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--no-tls", action="store_true")
    ap.add_argument("--no-callgrind", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="apns-", dir=args.work)
    try:
        _res, lines, checks = run(os.path.abspath(args.mock), run_dir, args.rounds, tls=not args.no_tls,
                                  callgrind=not args.no_callgrind)
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(run_dir, ignore_errors=True)
    print("\n".join(lines).lstrip("\n"))
    failed = [k for k, ok in checks.items() if not ok]
    print(f"\nMissed: {', '.join(failed)}." if failed else "\nAll APNs targets met.")
    return 1 if failed else 0


if __name__ == "__main__":
    bench.run_script(main, log)
