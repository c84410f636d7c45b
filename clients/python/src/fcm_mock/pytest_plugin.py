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
"""

from __future__ import annotations

import os
from typing import Iterator, List, Optional

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
        mock = FcmMock.connect(url, control_token=token, https_url=config.getoption("--fcm-mock-https-url"))
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
    try:
        yield mock
    finally:
        mock.close()


@pytest.fixture
def fcm_mock(fcm_mock_server: FcmMock) -> FcmMock:
    """The session's fcm-mock, reset before this test: fixtures applied again, no messages."""
    fcm_mock_server.reset()
    return fcm_mock_server
