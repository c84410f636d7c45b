"""Starting a server: what FcmMock.start takes (relative paths, a Path binary, an IPv6 host,
https on the control port), what it leaves out (the caller's FCM_MOCK_* variables), how the
server ends with its parent, and connecting to an https:// control API with a private CA."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from fcm_mock import FcmMock, FcmMockError

FIXTURE = {"projects": [{"sender_id": "111111111111", "project_id": "mine", "server_keys": ["AAAAmine:key"],
                         "apps": [{"app": "com.example.mine", "platform": "android"}]}],
           "devices": [{"token": "mine-1", "sender_id": "111111111111", "app": "com.example.mine"}]}


def gone(pid: int, within: float) -> bool:
    """Whether the process `pid` is gone (or a zombie nobody reaped) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_relative_paths_are_the_callers(tmp_path, monkeypatch):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "mine.json").write_text(json.dumps(FIXTURE))
    monkeypatch.chdir(tmp_path)
    with FcmMock.start(fixtures="fixtures/mine.json", db="store.sqlite", https=True, tls_dir="tls") as mock:
        assert mock.device("mine-1").sender_id == "111111111111"
        assert (tmp_path / "store.sqlite").exists()
        assert (tmp_path / "tls" / "ca.pem").read_text() == mock.ca_path().read_text()
    with FcmMock.start(fixtures=[Path("fixtures")]) as mock:
        assert [d.token for d in mock.devices] == ["mine-1"]


def test_binary_as_a_path_and_an_ipv6_host():
    with FcmMock.start(binary=Path(os.environ["FCM_MOCK_BIN"]), host="::1") as mock:
        assert mock.base_url.startswith("http://[::1]:")
        assert mock.health()["status"] == "ok"


def test_the_callers_fcm_mock_variables_do_not_reach_the_server(monkeypatch):
    monkeypatch.setenv("FCM_MOCK_CONTROL_TOKEN", "SECRET")
    monkeypatch.setenv("FCM_MOCK_FIXTURES", "/nonexistent/fixtures.json")
    with FcmMock.start() as mock:
        assert len(mock.devices) == 5  # the demo fixture, and no control token asked for
    with FcmMock.start(control_token="OTHER") as mock:  # an argument still counts
        assert mock.control_token == "OTHER" and len(mock.devices) == 5
        assert requests.get(mock.base_url + "/api/v1/devices", timeout=5).status_code == 401


def test_http_tls_makes_an_https_control_api_that_is_trusted():
    with FcmMock.start(http_tls=True) as mock:
        assert mock.base_url.startswith("https://127.0.0.1:")
        assert isinstance(mock.verify, str) and os.path.isfile(mock.verify)
        assert mock.health()["status"] == "ok" and len(mock.devices) == 5
        with mock.events(timeout=5) as stream:
            mock.create_device(token="over-tls")
            assert stream.wait_for("device.created").data["token"] == "over-tls"
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(mock.base_url + "/readyz", timeout=5)


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
def test_connect_to_https_with_a_ca_bundle(tmp_path):
    with FcmMock.start(https=True, tls_dir=str(tmp_path)) as started:
        https = started.https_url
        assert https is not None
        with pytest.raises(FcmMockError, match="not ready"):
            FcmMock.connect(https, ready_timeout=0.3)
        with FcmMock.connect(https, verify=tmp_path / "ca.pem") as mock:
            assert mock.health()["status"] == "ok" and mock.verify == str(tmp_path / "ca.pem")
        with FcmMock.connect(https, verify=False) as mock:
            assert [d.token for d in mock.devices] == [d.token for d in started.devices]


CHILD = textwrap.dedent("""
    import sys, time
    from fcm_mock import FcmMock
    mock = FcmMock.start()
    print(mock.process.pid, flush=True)
    time.sleep(60)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_server_ends_with_the_process_that_started_it():
    parent = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert not gone(pid, 0.1)
        parent.kill()  # SIGKILL: no Python code runs
        parent.wait()
        assert gone(pid, 5), f"fcm-mock {pid} outlived the process that started it"
    finally:
        parent.kill()
        parent.stdout.close()


pytest_plugins = ["pytester"]


def test_sigterm_to_pytest_stops_the_plugins_server(pytester):
    # Without the kernel's PR_SET_PDEATHSIG (tested apart), so that only the plugin's own SIGTERM
    # handler can stop the server here.
    pytester.makeconftest(textwrap.dedent("""
        import fcm_mock._client
        fcm_mock._client._die_with_parent = lambda: None
    """))
    pytester.makepyfile(textwrap.dedent("""
        import time

        def test_slow(fcm_mock):
            print("SERVERPID", fcm_mock.process.pid, flush=True)
            time.sleep(30)
    """))
    run = pytester.popen([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        pid = None
        for line in run.stdout:
            if line.startswith("SERVERPID"):
                pid = int(line.split()[1])
                break
        assert pid is not None
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=15) == -signal.SIGTERM  # pytest still ends as SIGTERM ends it
        assert gone(pid, 5), f"fcm-mock {pid} outlived pytest"
    finally:
        run.kill()
        run.stdout.close()
