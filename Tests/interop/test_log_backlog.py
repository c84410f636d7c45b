"""A server whose stderr nobody reads keeps serving in bounded memory: stderr is a pipe this test
does not read while it sends 8,000 requests with 7 KB paths (an access line each, 56 MB in all)
and then sends until the store is full (`--store-max-pages 1`), which logs a warning on the
thread that commits sends. Every request is answered promptly, the resident size stays well
under what the 56 MB of lines would take, and once the pipe is read a warning line says how many
lines were dropped."""

import http.client
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import _serve
from mocksupport import FIXTURE_TOKEN_A, KEY_A

REQUESTS = 8000
PATH = "/not-a-route/" + "p" * 7000
# The queue's bound (16 MiB of text, 1 MiB more for warnings), the 1,000-line buffer a batch is
# formatted in (7 MB of these lines) and the allocator's slack, with room to spare: all 56 MB of
# lines held would be well past it.
MAX_GROWTH_KIB = 40 * 1024
PROMPT_S = 5.0


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.fixture
def unread(tmp_path_factory):
    """A server whose stderr is a pipe only the test reads, when it chooses; its store fills up
    at once."""
    yield from _serve(tmp_path_factory, ("--store-max-pages", "1"), stderr=subprocess.PIPE)


def test_unread_stderr_neither_wedges_the_server_nor_grows_it(unread):
    proc = unread.proc
    err = bytearray()
    reading = []

    def read_stderr():
        """Reads the pipe from now on, into `err` (once)."""
        if reading:
            return

        def read():
            while chunk := os.read(proc.stderr.fileno(), 1 << 20):
                err.extend(chunk)
        reading.append(threading.Thread(target=read, daemon=True))
        reading[0].start()

    try:
        host, port = unread.base_url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=PROMPT_S)
        idle = rss_kib(proc.pid)

        def timed(method, path, body=None, headers=None):
            start = time.monotonic()
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            r.read()
            return r.status, time.monotonic() - start

        slowest = 0.0
        for i in range(REQUESTS):
            status, took = timed("GET", PATH)
            assert status == 404, f"request {i}: {status}"
            slowest = max(slowest, took)
        assert slowest < PROMPT_S, f"a request took {slowest:.1f} s"

        # Sends of 3 KB each until the store is full: the first failing commit logs a warning.
        filler = "x" * 3000
        answers = []
        for i in range(50):
            body = json.dumps({"to": FIXTURE_TOKEN_A, "data": {"i": str(i), "filler": filler}})
            status, took = timed("POST", "/fcm/send", body,
                                 {"Authorization": f"key={KEY_A}", "Content-Type": "application/json"})
            answers.append(status)
            if status == 500:
                break
        assert answers[-1] == 500, f"the store never filled up: {answers}"
        # Served after the warning too.
        status, _ = timed("GET", "/api/v1/health")
        assert status == 503

        growth = rss_kib(proc.pid) - idle
        assert growth < MAX_GROWTH_KIB, f"resident size grew {growth // 1024} MiB while stderr was not read"

        # Read the pipe now: the backlog comes out, then the line telling what was dropped.
        read_stderr()
        deadline = time.monotonic() + 30
        while not (b"log lines dropped" in err and b"\n" in err[err.find(b"log lines dropped"):]):
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        text = err.decode("utf-8", "replace")
        dropped = [line for line in text.splitlines() if "log lines dropped" in line]
        assert len(dropped) == 1, f"{len(dropped)} dropped-lines lines; last of stderr: {text[-600:]!r}"
        fields = dict(f.split("=", 1) for f in dropped[0].split(" ") if "=" in f)
        assert " warning log lines dropped: " in dropped[0], dropped[0]
        assert int(fields["dropped"]) > 0 and fields["dropped"] == fields["dropped.info"], dropped[0]
        assert "store writes are failing" in text, "the warning was dropped"
        # Every request's access line is either written or counted, and the notice comes after
        # the lines written before it.
        before, _, after = text.partition(dropped[0])
        assert after.strip() == "", after[:300]
        access = before.count(" info http method=")
        assert access + int(fields["dropped.info"]) == REQUESTS + len(answers) + 1, (access, dropped[0])
        assert access < REQUESTS, "nothing was dropped"
    finally:
        # Whatever happened, stderr is read so that the server can stop (it writes every line
        # before it exits).
        read_stderr()


@pytest.fixture
def never_read(tmp_path_factory):
    """A server whose stderr is a pipe nobody ever reads."""
    yield from _serve(tmp_path_factory, stderr=subprocess.PIPE)


def test_sigterm_ends_a_server_whose_stderr_is_never_read(never_read):
    """The lines left at exit are written within a few seconds or lost: a harness that never
    drains the pipe still sees the server exit (it waited for a reader for ever)."""
    proc = never_read.proc
    host, port = never_read.base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=PROMPT_S)
    for i in range(200):  # 1.4 MB of access lines: far more than a pipe holds
        conn.request("GET", PATH)
        r = conn.getresponse()
        r.read()
        assert r.status == 404, f"request {i}: {r.status}"
    conn.close()
    time.sleep(0.1)  # the writer is blocked on the full pipe
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("fcm-mock did not exit within 20 s of SIGTERM with stderr unread")
    assert code == 0
    assert time.monotonic() - start < 10, f"exit took {time.monotonic() - start:.1f} s"
