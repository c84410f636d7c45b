"""The pytest plugin (entry point `pytest11`, loaded when the package is installed).

Fixtures:
- `fcm_mock_server` (session): one server for the whole run: started from the binary
  (`--fcm-mock-bin`, else $FCM_MOCK_BIN, `fcm-mock` on PATH, or the checkout's build) with the
  fixtures of `--fcm-mock-fixtures` (with a TLS listener under `--fcm-mock-https`), or the
  running one at `--fcm-mock-url` (its TLS listener at `--fcm-mock-https-url`).
- `fcm_mock` (function): the same server, reset (`POST /api/v1/reset`) before the test; a
  server at `--fcm-mock-url` is reset too, so it must not be one that others use meanwhile.
  Real clients (a browser started once for the session) stay connected across the reset with
  their devices; a test that wants none calls `fcm_mock.reset(clients=False)`.

A started server is stopped when the session ends, and also when pytest itself is ended by
SIGTERM (a CI time-out, `timeout`, a container stop): the plugin stops it and lets the signal end
pytest as before; on Linux the server also ends with the process that started it (SIGKILL).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Iterator, List, Optional

import pytest

from ._client import FcmMock, find_binary
from .errors import FcmMockError


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fcm-mock", "fcm-mock (a fake Firebase Cloud Messaging server)")
    group.addoption("--fcm-mock-bin", default=None, metavar="PATH",
                    help="the fcm-mock executable to start (default: $FCM_MOCK_BIN, fcm-mock on PATH, "
                         "or the checkout's .build)")
    group.addoption("--fcm-mock-url", default=os.environ.get("FCM_MOCK_URL"), metavar="URL",
                    help="use the fcm-mock running at URL instead of starting one (default: $FCM_MOCK_URL);"
                         " it is reset before every test that uses fcm_mock")
    group.addoption("--fcm-mock-https-url", default=os.environ.get("FCM_MOCK_HTTPS_URL"), metavar="URL",
                    help="the TLS listener of the server at --fcm-mock-url, https://HOST:PORT"
                         " (default: $FCM_MOCK_HTTPS_URL)")
    group.addoption("--fcm-mock-cacert", default=os.environ.get("FCM_MOCK_CACERT"), metavar="PEM",
                    help="the CA certificate that an https:// --fcm-mock-url is checked against, such as the"
                         " mock's local CA (default: $FCM_MOCK_CACERT; else the system's CAs)")
    group.addoption("--fcm-mock-fixtures", action="append", default=None, metavar="FILE_OR_DIR",
                    help="fixtures for the started server (repeatable)")
    group.addoption("--fcm-mock-https", action="store_true", default=False,
                    help="start the server with a TLS listener (firebase_app(unmodified=True),"
                         " apple_hosts(), APNs certificates)")


@pytest.fixture(scope="session")
def fcm_mock_server(request: pytest.FixtureRequest) -> Iterator[FcmMock]:
    """One fcm-mock for the session, stopped at its end (when this run started it)."""
    config = request.config
    url: Optional[str] = config.getoption("--fcm-mock-url")
    token = os.environ.get("FCM_MOCK_CONTROL_TOKEN") or None
    if url:
        mock = FcmMock.connect(url, control_token=token, https_url=config.getoption("--fcm-mock-https-url"),
                               verify=config.getoption("--fcm-mock-cacert") or None)
    else:
        binary: Optional[str] = config.getoption("--fcm-mock-bin")
        try:
            binary = find_binary(binary)
        except FcmMockError as e:
            if binary or os.environ.get("FCM_MOCK_BIN"):
                raise
            raise FcmMockError("fcm-mock not found: give pytest --fcm-mock-bin PATH (or set FCM_MOCK_BIN),"
                               " put fcm-mock on PATH, or use a running server with --fcm-mock-url URL"
                               " (or FCM_MOCK_URL); in a checkout of fcm-mock, build it (make release)") from e
        fixtures: Optional[List[str]] = config.getoption("--fcm-mock-fixtures")
        mock = FcmMock.start(binary, fixtures=fixtures,
                             https=bool(config.getoption("--fcm-mock-https")), control_token=token)
    previous = _stop_on_sigterm(mock)
    try:
        yield mock
    finally:
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
        mock.close()


def _stop_on_sigterm(mock: FcmMock) -> Any:
    """While the session runs, SIGTERM stops the server this run started, then ends pytest as
    the signal would have (pytest has no handler of its own: without this, the server would
    outlive it). Only when nobody else handles SIGTERM. The handler it replaced, or None."""
    process = mock.process
    if process is None or threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        return None

    def stop(signum: int, frame: Any) -> None:
        try:
            process.terminate()
            process.wait(timeout=5)
        except Exception:  # noqa: BLE001 - ending anyway
            pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    return previous


@pytest.fixture
def fcm_mock(fcm_mock_server: FcmMock) -> FcmMock:
    """The session's fcm-mock, reset before this test: fixtures applied again, no messages."""
    fcm_mock_server.reset()
    return fcm_mock_server
