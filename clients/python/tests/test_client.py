"""FcmMock against the real binary ($FCM_MOCK_BIN), each test through real sockets."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time

import firebase_admin
import pytest
import requests
from firebase_admin import credentials, messaging

from fcm_mock import ControlAPIError, FcmMock, FcmMockError, Message, find_binary


@pytest.fixture
def mock():
    m = FcmMock.start()
    yield m
    m.close()


def later(seconds, fn, *args):
    """Runs fn(*args) on a thread after `seconds`; join the thread returned."""
    t = threading.Timer(seconds, fn, args)
    t.start()
    return t


def test_start_waits_for_readyz_and_close_stops_with_exit_0():
    m = FcmMock.start()
    assert requests.get(m.base_url + "/readyz", timeout=5).json() == {"status": "ready"}
    assert m.health()["status"] == "ok"
    assert m.xmpp_port and m.https_url is None
    process = m.process
    m.close()
    assert process.returncode == 0
    with pytest.raises(requests.ConnectionError):
        requests.get(m.base_url + "/livez", timeout=2)


def test_start_failure_says_why():
    with pytest.raises(FcmMockError, match="no-such-flag"):
        FcmMock.start(no_such_flag=True)


def test_find_binary(monkeypatch, tmp_path):
    assert find_binary() == os.environ["FCM_MOCK_BIN"]
    monkeypatch.setenv("FCM_MOCK_BIN", str(tmp_path / "nothing"))
    with pytest.raises(FcmMockError, match="no fcm-mock executable"):
        find_binary()


def test_connect_uses_a_running_server(mock):
    other = FcmMock.connect(mock.base_url)
    try:
        assert {d.token for d in other.devices} == {d.token for d in mock.devices}
    finally:
        other.close()
    assert mock.process.poll() is None, "connect's close stopped a server it did not start"


def test_connect_times_out_on_nothing():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    start = time.monotonic()
    with pytest.raises(FcmMockError, match="not ready after 0.3 s"):
        FcmMock.connect(f"http://127.0.0.1:{port}", ready_timeout=0.3)
    assert time.monotonic() - start < 3


def test_devices_and_their_state(mock):
    tokens = [d.token for d in mock.devices]
    assert tokens == ["demo-android-1", "demo-android-2", "demo-ios-1", "demo-web-1", "demo-android-offline"]
    d = mock.create_device()
    assert d.sender_id == "123456789012" and d.app == "com.example.demo" and len(d.token) == 152
    ios = mock.create_device(platform="ios", token="my-ios-token", online=False)
    assert (ios.platform, ios.app, ios.online) == ("ios", "com.example.demo.ios", False)
    assert mock.subscribe(d.token, "news").topics == ["news"]
    assert mock.unsubscribe(d.token, "news").topics == []
    assert mock.go_offline(d.token).online is False
    assert mock.go_online(d.token).online is True
    assert mock.device(d.token).token == d.token
    mock.reset()
    assert d.token not in [x.token for x in mock.devices]
    mock.reset(fixtures=False)
    assert mock.devices == []


def test_control_api_errors_are_typed(mock):
    with pytest.raises(ControlAPIError) as e:
        mock.device("no-such-device")
    assert (e.value.status, e.value.code) == (404, "not_found")
    assert "does not exist" in e.value.message


def test_wait_for_messages_long_polls(mock, send):
    t = later(0.3, send, mock.base_url, {"to": "demo-android-1", "data": {"score": "3x1"}})
    start = time.monotonic()
    got = mock.wait_for_messages("demo-android-1", count=1, timeout=5)
    took = time.monotonic() - start
    t.join()
    assert 0.25 < took < 2, took
    [m] = got
    assert isinstance(m, Message)
    assert (m.status, m.transport, m.target, m.data) == ("delivered", "http", "token", {"score": "3x1"})
    assert m.effective["platform"] == "android" and m.message_id.startswith("0:")
    assert (m.apns, m.webpush, m.fields) == (None, None, {"score": "3x1"})


def test_wait_for_messages_counts_and_times_out_with_the_inbox(mock, send):
    send(mock.base_url, {"to": "demo-android-1", "data": {"n": "1"}})
    assert len(mock.wait_for_messages("demo-android-1", count=1)) == 1
    start = time.monotonic()
    with pytest.raises(AssertionError) as e:
        mock.wait_for_messages("demo-android-1", count=2, timeout=0.4)
    assert 0.35 < time.monotonic() - start < 2
    text = str(e.value)
    assert "has 1 message(s) after 0.4 s, 2 expected" in text
    assert "newest messages of device demo-android-1" in text and "{'n': '1'}" in text


def test_wait_for_a_device_the_first_send_registers(mock, send):
    t = later(0.3, send, mock.base_url, {"to": "new-token-registered-by-its-first-send", "data": {"a": "b"}})
    [m] = mock.wait_for_messages("new-token-registered-by-its-first-send", timeout=5)
    t.join()
    assert m.data == {"a": "b"}


def test_assert_delivered_where(mock, send):
    for i in range(3):
        send(mock.base_url, {"to": "demo-android-1", "data": {"i": str(i), "kind": "k"}})
    assert mock.assert_delivered("demo-android-1", where={"i": "2"}).data == {"i": "2", "kind": "k"}
    assert mock.assert_delivered("demo-android-1", where=lambda m: m.data["i"] == "1").data["i"] == "1"
    t = later(0.3, send, mock.base_url, {"to": "demo-android-1", "data": {"i": "late"}})
    assert mock.assert_delivered("demo-android-1", where={"i": "late"}, timeout=5).data["i"] == "late"
    t.join()


def test_assert_delivered_failing_shows_the_newest_messages(mock, send):
    for i in range(7):
        send(mock.base_url, {"to": "demo-android-2", "data": {"i": str(i)}})
    with pytest.raises(AssertionError) as e:
        mock.assert_delivered("demo-android-2", where={"i": "nope"}, timeout=0.3)
    text = str(e.value)
    assert "no message matching {'i': 'nope'} delivered to device demo-android-2 within 0.3 s" in text
    lines = [line for line in text.splitlines() if line.startswith("  delivered http ")]
    assert [line.rsplit("data=", 1)[1] for line in lines] == [f"{{'i': '{i}'}}" for i in (6, 5, 4, 3, 2)]


def test_assert_no_messages(mock, send):
    start = time.monotonic()
    mock.assert_no_messages("demo-android-1", within=0.3)
    assert time.monotonic() - start >= 0.25
    t = later(0.1, send, mock.base_url, {"to": "demo-android-1", "data": {"x": "y"}})
    with pytest.raises(AssertionError, match="received 1 message"):
        mock.assert_no_messages("demo-android-1", within=3)
    t.join()


def test_offline_pending_and_clock(mock, send):
    mock.go_offline("demo-android-1")
    send(mock.base_url, {"to": "demo-android-1", "data": {"a": "1"}, "time_to_live": 60})
    assert [m.status for m in mock.wait_for_messages("demo-android-1", status="pending")] == ["pending"]
    mock.advance_clock(120)
    assert [m.status for m in mock.messages("demo-android-1")] == ["expired"]
    send(mock.base_url, {"to": "demo-android-1", "data": {"a": "2"}})
    mock.go_online("demo-android-1")
    assert mock.assert_delivered("demo-android-1").data == {"a": "2"}
    mock.reset_clock()


def test_fault_is_removed_after_the_block(mock, send):
    with mock.fault({"status": 503, "retry_after_s": 7}, when={"transport": "http"}) as f:
        assert f.id
        r = send(mock.base_url, {"to": "demo-android-1", "data": {}})
        assert (r.status_code, r.headers.get("Retry-After")) == (503, "7")
    assert mock.api("GET", "/api/v1/faults")["items"] == []
    assert send(mock.base_url, {"to": "demo-android-1", "data": {}}).status_code == 200


def test_service_account_file(mock):
    path = mock.service_account("demo-project")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    cert = credentials.Certificate(str(path))
    assert cert.project_id == "demo-project"
    assert cert.service_account_email.endswith("@demo-project.iam.gserviceaccount.com")
    import json
    assert json.loads(path.read_text())["token_uri"] == mock.base_url + "/token"


def test_firebase_app_pointed(mock):
    app = mock.firebase_app()
    message_id = messaging.send(messaging.Message(fid=mock.device("demo-android-1").fid, data={"k": "v"},
                                                  notification=messaging.Notification(title="Hi")), app=app)
    assert message_id.startswith("projects/demo-project/messages/")
    [m] = mock.wait_for_messages("demo-android-1")
    assert (m.transport, m.data, m.notification["title"]) == ("http_v1", {"k": "v"}, "Hi")
    mock.close()
    with pytest.raises(ValueError):
        firebase_admin.get_app(app.name)


def test_firebase_app_unmodified_is_scoped_and_undone():
    real = (socket.getaddrinfo, socket.socket.connect, os.environ.get("SSL_CERT_FILE"))
    with FcmMock.start(https=True) as mock:
        assert mock.https_url.startswith("https://127.0.0.1:")
        app = mock.firebase_app(unmodified=True)
        # Nothing in the SDK points elsewhere: the service account and the send URL are Google's.
        service = messaging._get_messaging_service(app)
        assert service._fcm_url.startswith("https://fcm.googleapis.com/")
        messaging.send(messaging.Message(fid=mock.device("demo-ios-1").fid, data={"via": "google-names"}), app=app)
        [m] = mock.wait_for_messages("demo-ios-1")
        assert (m.transport, m.data) == ("http_v1", {"via": "google-names"})
        assert m.effective["platform"] == "ios"
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("www.google.com", 443)
    assert (socket.getaddrinfo, socket.socket.connect, os.environ.get("SSL_CERT_FILE")) == real


def test_firebase_app_unmodified_needs_tls(mock):
    with pytest.raises(FcmMockError, match="https=True"):
        mock.firebase_app(unmodified=True)
