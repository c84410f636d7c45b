"""Starts the fcm-mock binary for the interop suite and talks to its control API.

The binary comes from $FCM_MOCK_BIN (Tests/interop/run.sh sets it). One server per test module
and fixture (`mock`; `mock_https` adds a TLS listener): it is started on port 0 with an in-memory
store and this suite's own fixtures file, its `listening http=... xmpp=...` line is read from stdout, and on teardown it gets SIGTERM and must
exit 0. Tests make their own devices through the control API, so no reset is needed between them.
"""

import json
import os
import selectors
import signal
import subprocess
import threading
import time

import pytest

from browser import Browser
from mocksupport import FIXTURES, LISTENING_RE, MockServer
from mocksupport import PROJECT_A, SENDER_A
from mocksupport import LISTENING_HTTPS_RE, LISTENING_XMPP_RE

STARTUP_TIMEOUT_S = float(os.environ.get("FCM_MOCK_STARTUP_TIMEOUT", "20"))
STOP_TIMEOUT_S = 10.0


def _start(binary, fixtures_path, stderr_path, extra_args=(), preexec_fn=None, stderr=None):
    cmd = [binary, "serve", "--http-port", "0", "--xmpp-port", "0", "--db", ":memory:",
           "--fixtures", str(fixtures_path), *extra_args]
    stderr_file = open(stderr_path, "wb") if stderr is None else None
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=stderr_file or stderr, preexec_fn=preexec_fn)
    finally:
        if stderr_file:
            stderr_file.close()
    return cmd, proc


def _read_listening_line(proc, deadline):
    """Returns (line, other_output) once a `listening` line arrives, or (None, output)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    seen = []
    try:
        while True:
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if line.startswith("listening "):
                    return line, seen
                seen.append(line)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, seen + ([buf.decode("utf-8", "replace")] if buf else [])
            if not sel.select(timeout=remaining):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:  # stdout closed: the process is gone or closed it
                return None, seen + ([buf.decode("utf-8", "replace")] if buf else [])
            buf += chunk
    finally:
        sel.close()


def _drain(stream):
    # Keeps the pipe from filling up should the server print more to stdout later.
    try:
        while stream.read(65536):
            pass
    except (OSError, ValueError):
        pass


def _serve(tmp_path_factory, extra_args=(), preexec_fn=None, stderr=None):
    """Runs one server for a module: yields its MockServer, then stops it (SIGTERM, exit 0).
    `preexec_fn` runs in the child before the binary (to set a resource limit); `stderr`
    (subprocess.PIPE) puts stderr on a pipe the test reads from `proc.stderr`, instead of the
    log file `stderr_tail` reads."""
    binary = os.environ.get("FCM_MOCK_BIN", ".build/release/fcm-mock")
    binary = os.path.abspath(binary)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        pytest.fail(f"FCM_MOCK_BIN={binary} is not an executable file", pytrace=False)

    tmp = tmp_path_factory.mktemp("fcm-mock")
    fixtures_path = tmp / "fixtures.json"
    fixtures_path.write_text(json.dumps(FIXTURES, indent=2))
    stderr_path = tmp / "stderr.log"

    cmd, proc = _start(binary, fixtures_path, stderr_path, extra_args, preexec_fn, stderr)
    server = None
    try:
        line, other = _read_listening_line(proc, time.monotonic() + STARTUP_TIMEOUT_S)
        if line is None:
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            status = ("still running" if proc.poll() is None
                      else f"exited with code {proc.returncode}")
            if stderr is None:
                with open(stderr_path, "r", errors="replace") as f:
                    err = f.read()[-4000:]
            else:
                err = "(on the test's pipe)"
            pytest.fail(
                f"fcm-mock printed no 'listening http=... xmpp=...' line within "
                f"{STARTUP_TIMEOUT_S:.0f}s ({status}).\n"
                f"command: {' '.join(cmd)}\nstdout: {other!r}\nstderr:\n{err}",
                pytrace=False)
        m = LISTENING_RE.match(line)
        assert m, f"unexpected listening line: {line!r}"
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()

        server = MockServer(f"http://{m['host']}:{m['port']}", proc, stderr_path)
        server.binary = binary  # for the client subcommands (`fcm-mock service-account`)
        xm = LISTENING_XMPP_RE.match(line)
        assert xm, f"no xmpp=HOST:PORT in the listening line: {line!r}"
        server.xmpp_host, server.xmpp_port = xm["host"], int(xm["port"])
        hm = LISTENING_HTTPS_RE.match(line)
        if "--https-port" in extra_args:
            assert hm, f"--https-port given but no https=HOST:PORT in the listening line: {line!r}"
            server.https_host, server.https_port = hm["host"], int(hm["port"])
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"fcm-mock did not exit within {STOP_TIMEOUT_S:.0f}s of SIGTERM",
                            pytrace=False)
    if server is not None:
        assert proc.returncode == 0, (
            f"fcm-mock exited with {proc.returncode} after SIGTERM (wanted 0); stderr:\n"
            f"{server.stderr_tail()}")


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="module")
def mock_https(tmp_path_factory):
    """A server that also listens for TLS (`--https-port 0`), its certificate signed by a local
    CA it makes in a temporary directory (an in-memory store has no data dir to keep it in)."""
    yield from _serve(tmp_path_factory, ("--https-port", "0"))


@pytest.fixture(scope="module")
def mock_google_origin(tmp_path_factory):
    """`mock_https` whose Web Push endpoints are on Google's host (`--web-push-origin
    https://fcm.googleapis.com`; by default they are on the mock's own port): for libraries sent
    unmodified to https://fcm.googleapis.com through the local CA."""
    yield from _serve(tmp_path_factory, ("--https-port", "0", "--web-push-origin", "https://fcm.googleapis.com"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test, so fixtures can tell a failed test at teardown."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, "report_" + report.when, report)


@pytest.fixture
def browser(request):
    """Headless Chromium for the web page's tests; when the test fails, the page is saved as
    .build/interop-screenshots/TEST.png before the browser closes."""
    b = Browser()
    try:
        yield b
        b.screenshot_if_failed(request)
    finally:
        b.close()


@pytest.fixture(scope="module")
def page():
    """One headless Chromium for a whole module (a test that uses `page_shots` leaves a
    screenshot when it fails)."""
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def page_shots(request, page):
    """After a test that failed, the module's page as .build/interop-screenshots/TEST.png."""
    yield
    page.screenshot_if_failed(request)


@pytest.fixture(scope="module")
def push_page():
    """The Firefox tests' site: a page and service worker at http://localhost:P/ (firefox.py)."""
    from firefox import PushPage
    page = PushPage()
    yield page
    page.close()


@pytest.fixture(scope="module")
def push_session():
    """A requests session for pywebpush's sends (no proxy from the environment)."""
    import requests
    s = requests.Session()
    s.trust_env = False
    yield s
    s.close()


@pytest.fixture(scope="module")
def firefox(mock):
    """Headless Firefox ESR for a whole module, its push service on the mock's
    ws://127.0.0.1:H/autopush (the profile is removed at the end)."""
    from firefox import Firefox, require_autopush
    url = mock.base_url.replace("http://", "ws://", 1) + "/autopush"
    require_autopush(url)
    ff = Firefox(url)
    try:
        ff.start()
        yield ff
    finally:
        ff.close()


@pytest.fixture(scope="module")
def firefox_tls(mock_https):
    """Headless Firefox ESR whose push service is the mock's wss://localhost:S/autopush, the
    mock's local CA imported into its profile with certutil."""
    from firefox import Firefox, require_autopush
    ca = mock_https.api("GET", "/api/v1/health")["tls_ca"]
    url = f"wss://localhost:{mock_https.https_port}/autopush"
    require_autopush(url, ca)
    ff = Firefox(url, ca_pem=ca)
    try:
        ff.start()
        yield ff
    finally:
        ff.close()


# -- FCM's device side: Chromium and firebase-messaging over GCM/MCS (real-clients.md §3, §5) --

def _serve_mcs(tmp_path_factory):
    """A server with `--https-port 0 --mcs-port 0`: yields its MockServer with `https_port`,
    `mcs_host`, `mcs_port` (from the `listening` line's ` mcs=HOST:PORT`) and `ca` (health's
    `tls_ca`), then stops it (SIGTERM, exit 0). Fails at once and says so when the server does
    not take `--mcs-port` or prints no ` mcs=` address."""
    import re
    binary = os.path.abspath(os.environ.get("FCM_MOCK_BIN", ".build/release/fcm-mock"))
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        pytest.fail(f"FCM_MOCK_BIN={binary} is not an executable file", pytrace=False)
    tmp = tmp_path_factory.mktemp("fcm-mock-mcs")
    fixtures_path = tmp / "fixtures.json"
    fixtures_path.write_text(json.dumps(FIXTURES, indent=2))
    stderr_path = tmp / "stderr.log"
    cmd, proc = _start(binary, fixtures_path, stderr_path, ("--https-port", "0", "--mcs-port", "0"))
    server = None
    try:
        line, other = _read_listening_line(proc, time.monotonic() + STARTUP_TIMEOUT_S)
        if line is None:
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            status = "still running" if proc.poll() is None else f"exited with code {proc.returncode}"
            with open(stderr_path, "r", errors="replace") as f:
                err = f.read()[-3000:]
            pytest.fail(f"fcm-mock with --mcs-port 0 (real-clients.md §3.5) printed no 'listening' "
                        f"line within {STARTUP_TIMEOUT_S:.0f}s ({status}): the server lacks FCM's "
                        f"device side.\ncommand: {' '.join(cmd)}\nstdout: {other!r}\nstderr:\n{err}",
                        pytrace=False)
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        addr = dict(re.findall(r"(\w+)=(\S+)", line))
        missing = [k for k in ("http", "https", "mcs") if k not in addr]
        if missing:
            pytest.fail(f"the listening line names no {', '.join(missing)}=HOST:PORT with "
                        f"--https-port 0 --mcs-port 0: {line!r}", pytrace=False)
        host, port = addr["http"].rsplit(":", 1)
        server = MockServer(f"http://{host}:{port}", proc, stderr_path)
        server.binary = binary
        server.https_host, server.https_port = addr["https"].rsplit(":", 1)
        server.https_port = int(server.https_port)
        server.mcs_host, server.mcs_port = addr["mcs"].rsplit(":", 1)
        server.mcs_port = int(server.mcs_port)
        if "xmpp" in addr:
            server.xmpp_host, server.xmpp_port = addr["xmpp"].rsplit(":", 1)
            server.xmpp_port = int(server.xmpp_port)
        server.ca = server.api("GET", "/api/v1/health").get("tls_ca")
        if not server.ca:
            pytest.fail("health names no tls_ca with --https-port 0 --mcs-port 0", pytrace=False)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"fcm-mock did not exit within {STOP_TIMEOUT_S:.0f}s of SIGTERM",
                            pytrace=False)
    if server is not None:
        assert proc.returncode == 0, (
            f"fcm-mock exited with {proc.returncode} after SIGTERM (wanted 0); stderr:\n"
            f"{server.stderr_tail()}")


@pytest.fixture(scope="module")
def mock_mcs(tmp_path_factory):
    """A server with FCM's device side on: `--https-port 0 --mcs-port 0` (its `mcs_port` and
    `ca`, the local CA the MCS listener's certificate is signed by)."""
    yield from _serve_mcs(tmp_path_factory)


@pytest.fixture(scope="module")
def chromium_gcm(mock_mcs):
    """Headless Chromium for a whole module, its GCM on the mock: checkin and register3 on the
    plain port, MCS on https://localhost:M with the mock's CA in its HOME's NSS db
    (chromium_push.py, real-clients.md §5). Fails at once when the mock has no /checkin."""
    from chromium_push import Chromium, require_gcm
    require_gcm(mock_mcs.base_url)
    c = Chromium(mock_mcs.base_url + "/checkin", mock_mcs.base_url + "/c2dm/register3",
                 f"https://localhost:{mock_mcs.mcs_port}", ca_pem=mock_mcs.ca)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def fm_client(mock_mcs):
    """firebase-messaging 0.4.5 registered with the mock (checkin, register3, Installations, FCM
    registration) and logged in over MCS, for a whole module (fcmclient.py). Fails at once when
    the mock has no /checkin."""
    from chromium_push import require_gcm
    from fcmclient import FcmClient
    require_gcm(mock_mcs.base_url)
    c = FcmClient(mock_mcs.base_url, mock_mcs.mcs_port, mock_mcs.ca, PROJECT_A, SENDER_A)
    try:
        c.start()
        yield c
    finally:
        c.close()
