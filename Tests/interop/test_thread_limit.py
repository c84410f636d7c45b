"""A server the system gives no more threads keeps serving: an XMPP or HTTP/2 connection that
would need one more thread is refused (closed at once), work for threads started when first
needed runs on the thread that asked, the server goes on, and once connections end new ones are
served again. The limit is the address space (RLIMIT_AS): the same server's idle size plus room
for a dozen 64 MiB thread stacks and 32 MiB more, so thread creation fails while the heap still
has room."""

import os
import resource
import socket
import time

import pytest
import requests
from py_vapid import Vapid02
from pywebpush import webpush

from conftest import _serve
from mocksupport import APP_A, KEY_A, SENDER_A

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
STREAM_HEADER = (b'<stream:stream to="fcm.googleapis.com" version="1.0" xmlns="jabber:client" '
                 b'xmlns:stream="http://etherx.jabber.org/streams">')


def vm_size_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))


_HARD_STACK = resource.getrlimit(resource.RLIMIT_STACK)[1]
# Each thread's stack (glibc takes RLIMIT_STACK as the default), 64 MiB unless the hard limit is
# lower; half of it is left for the heap when the next stack does not fit.
STACK = 64 << 20 if _HARD_STACK == resource.RLIM_INFINITY else min(64 << 20, _HARD_STACK)
MARGIN = STACK // 2
THREADS = 12  # threads the limit leaves room for beyond an idle server's


def settings(limit=None):
    """The child's settings before the binary runs: 64 MiB stacks and one malloc arena, so
    thread stacks are the only large reservations and a failed one leaves at least MARGIN for
    the heap; every Web Push decryption through the pool, whose threads start when first
    needed; and the address-space limit when given."""
    def apply():
        resource.setrlimit(resource.RLIMIT_STACK, (STACK, _HARD_STACK))
        os.environ["MALLOC_ARENA_MAX"] = "1"
        os.environ["FCM_MOCK_WEBPUSH_HANDOFF"] = "all"
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    # The address space of the same server idle, with the same settings and no limit.
    reference = _serve(tmp_path_factory, preexec_fn=settings())
    idle = vm_size_kib(next(reference).proc.pid) * 1024
    next(reference, None)
    yield from _serve(tmp_path_factory, preexec_fn=settings(idle + THREADS * STACK + MARGIN))


def open_until_refused(host, port, first_bytes, most=300):
    """Opens connections (each sending `first_bytes`) until the server closes three at once;
    returns (open sockets, how many were refused)."""
    socks, refused = [], 0
    for _ in range(most):
        s = socket.create_connection((host, port))
        s.settimeout(0.2)
        if first_bytes:
            s.sendall(first_bytes)
        try:
            got = s.recv(64)
        except socket.timeout:
            got = None  # served, and waiting for more
        except ConnectionResetError:
            got = b""
        if got == b"":
            refused += 1
            s.close()
            if refused == 3:
                break
        else:
            socks.append(s)
    return socks, refused


def served(host, port, first_bytes, expect):
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(first_bytes)
        try:
            return s.recv(200).startswith(expect)
        except ConnectionResetError:
            return False


@pytest.mark.parametrize("kind", ["xmpp", "h2c"])
def test_no_thread_to_be_had_refuses_the_connection_not_the_server(limited, kind):
    host, port = (limited.xmpp_host, limited.xmpp_port) if kind == "xmpp" else ("127.0.0.1", int(limited.base_url.rsplit(":", 1)[1]))
    first = b"" if kind == "xmpp" else H2_PREFACE
    socks, refused = open_until_refused(host, port, first)
    try:
        assert refused == 3, f"{len(socks)} connections served and none refused: the limit was not reached"
        assert len(socks) > 0, "not one connection was served"
        assert limited.proc.poll() is None, limited.stderr_tail()
        assert limited.api("GET", "/api/v1/health")["status"] == "ok"
        # A request with a large body is handled off the loop by threads started when first
        # needed: with none to be had it is handled on the loop, and answered.
        tokens = [f"thread-limit-{kind}-{i:04d}" for i in range(1000)]
        r = requests.post(limited.base_url + "/fcm/send", headers={"Authorization": f"key={KEY_A}"},
                          json={"registration_ids": tokens, "data": {"k": "v"}}, timeout=30)
        assert r.status_code == 200 and len(r.json()["results"]) == 1000, r.text[:300]
        # The Web Push pool likewise: the push is decrypted on the thread that took it.
        dev = limited.api("POST", "/api/v1/devices", expect=201,
                          json={"sender_id": SENDER_A, "app": APP_A + ".web", "platform": "web"})
        vapid = Vapid02()
        vapid.generate_keys()
        with requests.Session() as session:
            session.trust_env = False
            pushed = webpush(dev["web_push"], data=f"at the limit ({kind})", vapid_private_key=vapid,
                             vapid_claims={"sub": "mailto:limit@example.com"}, requests_session=session, timeout=20)
        assert pushed.status_code == 201, pushed.text
        entry = limited.inbox(dev["token"])[0]
        assert entry["status"] == "delivered" and entry["webpush"]["plaintext"] == f"at the limit ({kind})", entry
    finally:
        for s in socks:
            s.close()
    # Their threads end with them; a new connection is served again.
    deadline = time.monotonic() + 10
    again = STREAM_HEADER if kind == "xmpp" else H2_PREFACE
    expect = b"<stream:stream" if kind == "xmpp" else b"\x00\x00"
    while not served(host, port, again, expect):
        assert time.monotonic() < deadline, "no connection served after the others closed"
        time.sleep(0.2)
    assert limited.proc.poll() is None, limited.stderr_tail()
