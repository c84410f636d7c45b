"""The web page when the server refuses its event stream (the 64 readers it takes are open): it
says it is not live and why, stays usable (no "unreachable" banner, which is for a server that
does not answer), and follows the events once a reader leaves. A browser never retries an
EventSource refused with an error; the page does.
"""

import socket
import time
import urllib.parse

LIMIT = 64


def open_reader(base_url):
    """A reader of /api/v1/events over a raw socket, once its answer's head has come."""
    u = urllib.parse.urlsplit(base_url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, "the event stream closed before its head"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return s


def event_readers(mock):
    return mock.http.get(mock.base_url + "/api/v1/health", timeout=10).json()["event_readers"]


def wait_readers(mock, n):
    deadline = time.monotonic() + 10
    while event_readers(mock) != n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert event_readers(mock) == n


def test_page_refused_its_event_stream_says_so_and_follows_once_a_reader_leaves(mock, browser):
    readers = [open_reader(mock.base_url) for _ in range(LIMIT)]
    try:
        wait_readers(mock, LIMIT)
        r = mock.http.get(mock.base_url + "/api/v1/events", timeout=10)
        assert r.status_code == 503, r.text[:300]
        assert r.json()["error"]["code"] == "unavailable", r.text

        browser.command("Page.navigate", {"url": mock.base_url + "/"})
        browser.wait_for("document.getElementById('live') && document.getElementById('live').textContent"
                         f".startsWith('not live: {LIMIT} event streams')",
                         what="the page to say why it is not live")
        assert browser.eval("document.getElementById('offline').hidden") is True, "the server answers: not offline"
        assert event_readers(mock) == LIMIT

        readers.pop().close()
        wait_readers(mock, LIMIT - 1)
        browser.wait_for("document.getElementById('live').textContent === 'live'", timeout=25,
                         what="the page to connect again once a place was free")
        wait_readers(mock, LIMIT)
        # Live again: a new device appears without a reload.
        browser.eval("window.__sameDocument = true; 1")
        token = mock.create_device()
        browser.wait_for(f"!!document.querySelector('#devices tr[data-token=\"{token}\"]')", what="the new device")
        assert browser.eval("window.__sameDocument === true"), "the page was reloaded"
    finally:
        for s in readers:
            s.close()
