"""The rest of the control API's calls (the event stream, counters, access tokens, one inbox
entry, faults by id, APNs keys, teams and certificates, Web Push and APNs token expiry, the list
filters), the waits' paging and their statuses, and the errors of an unreachable server, against
the real binary ($FCM_MOCK_BIN)."""

from __future__ import annotations

import json
import pickle
import threading
import time

import httpx
import jwt
import pytest
import requests

from conftest import legacy_send
from fcm_mock import (ApnsCertificateInfo, ApnsKeyInfo, ApnsTeam, ConnectionFailed, ControlAPIError, Event,
                      FcmMock, FcmMockError, IssuedAccessToken, RequestTimedOut, Stats, StatsSeries,
                      TransportError)
from test_control_api import SENDER, Xmpp, not_found

TEAM = "ABCDE12345"


@pytest.fixture
def mock(module_mock):
    module_mock.reset()
    yield module_mock
    module_mock.reset_clock()


class Counting:
    """Counts the HTTP requests a FcmMock makes."""

    def __init__(self, mock: FcmMock) -> None:
        self.calls: list = []
        real = mock._http.request

        def request(method, url, **kwargs):
            self.calls.append((method, url, dict(kwargs.get("params") or {})))
            return real(method, url, **kwargs)

        mock._http.request = request


def readers(mock, n):
    """Whether health counts `n` event readers within 2 s (the server drops a closed reader
    once it notices the close, on its own thread)."""
    deadline = time.monotonic() + 2
    while mock.health()["event_readers"] != n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)  # health has no long poll
    return True


def test_the_event_stream_is_read_as_it_comes(mock):
    assert readers(mock, 0)
    with mock.events("message.delivered", timeout=10) as stream:
        assert readers(mock, 1)
        sent = legacy_send(mock.base_url, {"to": "demo-android-1", "data": {"n": "1"}}).json()
        event = next(stream)  # the stream stays open: this event was read as it came
        assert isinstance(event, Event) and event.type == "message.delivered"
        assert (event.token, event.message_id) == ("demo-android-1", sent["results"][0]["message_id"])
        legacy_send(mock.base_url, {"to": "demo-android-2", "data": {"n": "2"}})
        assert stream.wait_for(where={"token": "demo-android-2"}, timeout=5).data["status"] == "delivered"
    assert readers(mock, 0)

    # Filters on type (several) and data, and the iteration ends at the stream's timeout.
    with mock.events(["device.created", "device.updated"], where=lambda e: e.token == "made", timeout=1) as stream:
        mock.create_device(token="other")
        mock.create_device(token="made")
        mock.go_offline("made")
        started = time.monotonic()
        assert [(e.type, e.token) for e in stream] == [("device.created", "made"), ("device.updated", "made")]
        assert time.monotonic() - started < 2
    with mock.events(timeout=5) as stream:
        with pytest.raises(AssertionError, match="no event of 'xmpp.connected'"):
            stream.wait_for("xmpp.connected", timeout=0.2)
    with mock.events(timeout=None):
        pass  # close() leaves it; FcmMock.close() closes those left open
    assert readers(mock, 0)


def test_stats_and_series(mock):
    legacy_send(mock.base_url, {"to": "demo-android-1", "data": {}})
    legacy_send(mock.base_url, {"to": "not a token", "data": {}})
    stats = mock.stats()
    assert isinstance(stats, Stats)
    assert stats.messages == {"accepted": 1, "rejected": 1} and stats.errors == {"InvalidRegistration": 1}
    assert (stats.devices, stats.pending, stats.xmpp_connections) == (5, 0, 0)
    series = mock.stats_series(window=60, bucket=10)
    assert isinstance(series, StatsSeries) and (series.window, series.bucket) == (60, 10)
    assert len(series.sends) == 6 and sum(series.sends) == 2 and sum(series.errors) == 1
    assert series.start < series.end
    assert mock.stats_series().window == 600
    with pytest.raises(ControlAPIError) as e:
        mock.stats_series(window=7200)
    assert e.value.status == 400


def test_an_access_token_without_a_jwt(mock):
    issued = mock.create_access_token()
    assert isinstance(issued, IssuedAccessToken) and issued.token_type == "Bearer"
    assert issued.project_id == "demo-project" and issued.expires_in > 3000
    assert [t.id for t in mock.access_tokens] == [issued.id]
    assert mock.create_access_token(SENDER).project_id == "demo-project"
    r = requests.post(mock.base_url + "/v1/projects/demo-project/messages:send", timeout=10,
                      json={"message": {"token": "demo-android-1", "data": {"v": "1"}}},
                      headers={"Authorization": "Bearer " + issued.access_token})
    assert r.status_code == 200, r.text
    [record] = mock.message_records(v1_name=r.json()["name"])
    assert record.transport == "http_v1" and record.data == {"v": "1"}
    assert mock.message_records(v1_name="projects/demo-project/messages/0:1%2") == []
    not_found(mock.create_access_token, "no-such-project")


def test_one_inbox_entry_and_the_newest_first(mock):
    ids = [legacy_send(mock.base_url, {"to": "demo-android-1", "data": {"n": str(i)}}).json()["results"][0]["message_id"]
           for i in range(3)]
    mock.wait_for_messages("demo-android-1", count=3)
    one = mock.message("demo-android-1", ids[1])
    assert (one.message_id, one.data, one.status) == (ids[1], {"n": "1"}, "delivered")
    not_found(mock.message, "demo-android-2", ids[1])
    assert [m.message_id for m in mock.messages("demo-android-1", newest_first=True)] == ids[::-1]
    assert [m.message_id for m in mock.messages("demo-android-1", newest_first=True, limit=2)] == ids[:0:-1]
    assert [m.message_id for m in mock.messages("demo-android-1", limit=1)] == ids[:1]


def test_faults_outside_a_block(mock):
    fault = mock.add_fault({"error": "Unavailable"}, when={"token": "demo-android-1"})
    assert [f.id for f in mock.faults] == [fault.id]
    assert legacy_send(mock.base_url, {"to": "demo-android-1", "data": {}}).json()["failure"] == 1
    mock.delete_fault(fault.id)
    assert mock.faults == []
    assert legacy_send(mock.base_url, {"to": "demo-android-1", "data": {}}).json()["success"] == 1
    not_found(mock.delete_fault, "f999")


def test_apns_keys_teams_and_certificates():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    with FcmMock.start(https=True) as mock:
        made = mock.apns_key(TEAM, ["com.example.demo.ios"])
        [listed] = mock.apns_keys
        assert isinstance(listed, ApnsKeyInfo) and (listed.key_id, listed.team_id) == (made.key_id, TEAM)
        assert listed.public_key_pem.startswith("-----BEGIN PUBLIC KEY-----") and listed.created_at
        public = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        own = mock.import_apns_key("TEAM000002", public, key_id="OWNKEY0001", bundle_ids=["com.example.other"])
        assert (own.key_id, own.team_id, own.public_key_pem) == ("OWNKEY0001", "TEAM000002", public)
        mock.delete_apns_key(made.key_id)
        assert [k.key_id for k in mock.apns_keys] == ["OWNKEY0001"]
        not_found(mock.delete_apns_key, made.key_id)

        team = mock.set_apns_team(TEAM, ["com.example.a", "com.example.b"])
        assert isinstance(team, ApnsTeam) and team.bundle_ids == ["com.example.a", "com.example.b"]
        assert {t.team_id: t.bundle_ids for t in mock.apns_teams}[TEAM] == ["com.example.a", "com.example.b"]

        cert = mock.apns_certificate("com.example.demo.ios", "both")
        [info] = mock.apns_certificates
        assert isinstance(info, ApnsCertificateInfo) and (info.id, info.bundle_id) == (cert.id, cert.bundle_id)
        assert info.certificate_pem == cert.certificate_pem and "private_key_pem" not in info.raw
        assert sorted(info.environments) == ["production", "sandbox"] and info.expires_at == cert.expires_at
        mock.delete_apns_certificate(cert.id)
        assert mock.apns_certificates == []
        not_found(mock.delete_apns_certificate, cert.id)


def test_web_push_expiry_and_apns_token_expiry(mock):
    browser = mock.create_device(platform="web")
    assert browser.web_push_expired is False
    expired = mock.expire_web_push(browser.token)
    assert expired.web_push_expired is True and mock.device(browser.token).web_push_expired is True
    with pytest.raises(ControlAPIError) as e:
        mock.expire_web_push("demo-android-1")
    assert e.value.status == 400

    phone = mock.create_device(platform="ios")
    assert phone.expires_at is None
    import datetime
    at = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert mock.set_apns_token_expiry(phone.token, at).expires_at == "2030-01-02T03:04:05.000Z"
    assert mock.device(phone.token).expires_at == "2030-01-02T03:04:05.000Z"
    assert mock.set_apns_token_expiry(phone.token, None).expires_at is None
    with pytest.raises(ValueError):
        mock.set_apns_token_expiry(phone.token, datetime.datetime(2030, 1, 1))


def test_device_list_filters(mock):
    mock.subscribe("demo-android-2", "news")
    mock.unregister("demo-android-1")
    assert [d.token for d in mock.find_devices(topic="news")] == ["demo-android-2"]
    assert [d.token for d in mock.find_devices(state="unregistered")] == ["demo-android-1"]
    assert {d.token for d in mock.find_devices(app="com.example.demo")} == {"demo-android-1", "demo-android-2", "demo-android-offline"}
    assert len(mock.find_devices(sender_id=SENDER)) == 5 and mock.find_devices(sender_id="999") == []
    assert [d.token for d in mock.find_devices(q="DEMO-IOS")] == ["demo-ios-1"]
    assert mock.find_devices(client_kind="any") == [] and mock.find_devices(client_id="nobody") == []
    with pytest.raises(ControlAPIError):
        mock.find_devices(state="sleeping")


def test_record_filters_client_kind_and_xmpp_message_id(mock):
    xmpp = Xmpp(mock.xmpp_port, "filters")
    try:
        xmpp.send_json({"to": "demo-android-1", "message_id": "app-m-1", "data": {"via": "xmpp"}})
        assert b"ack" in xmpp.read_to(b"</message>")
    finally:
        xmpp.close()
    [record] = mock.message_records(xmpp_message_id="app-m-1")
    assert record.transport == "xmpp" and record.data == {"via": "xmpp"}
    assert mock.message_records(xmpp_message_id="other") == []
    assert mock.message_records(client_kind="any") == []
    assert len(mock.message_records(app="com.example.demo")) == 1


def test_create_device_takes_a_project_id_with_an_app_too(mock):
    assert mock.create_device("demo-project", app="com.example.demo").sender_id == SENDER
    assert mock.create_device("demo-project").sender_id == SENDER
    assert mock.create_device(SENDER, app="com.example.demo").sender_id == SENDER


def test_waits_page_past_a_thousand_without_spinning(mock):
    with requests.Session() as s:
        s.trust_env = False
        for i in range(1001):
            assert s.post(mock.base_url + "/fcm/send", json={"to": "demo-android-1", "data": {"n": str(i)}},
                          headers={"Authorization": "key=AAAAfcmmock:demo-server-key"}, timeout=10).status_code == 200
    counting = Counting(mock)
    got = mock.wait_for_messages("demo-android-1", count=1001, timeout=2)
    assert len({m.message_id for m in got}) == 1001
    counting.calls.clear()
    later = threading.Timer(0.5, legacy_send, (mock.base_url, {"to": "demo-android-1", "data": {"n": "last"}}))
    later.start()
    started = time.monotonic()
    got = mock.wait_for_messages("demo-android-1", count=1002, timeout=5)
    later.join()
    assert len(got) == 1002 and got[-1].data == {"n": "last"} and time.monotonic() - started < 3
    assert len(counting.calls) <= 6, counting.calls
    counting.calls.clear()
    with pytest.raises(AssertionError, match="1002 message"):
        mock.wait_for_messages("demo-android-1", count=1003, timeout=1)
    assert len(counting.calls) <= 8, counting.calls  # a few pages and polls, never a spin


def test_count_zero_returns_at_once(mock):
    started = time.monotonic()
    assert mock.wait_for_messages("demo-android-1", count=0, timeout=3) == []
    assert time.monotonic() - started < 0.5


def apns_send(mock, phone, key, order):
    token = jwt.encode({"iss": TEAM, "iat": int(time.time())}, key.pem, algorithm="ES256",
                       headers={"kid": key.key_id})
    with httpx.Client(http1=False, http2=True, trust_env=False) as c:
        r = c.post(f"{mock.base_url}/3/device/{phone.apns_token}",
                   content=json.dumps({"aps": {"alert": "x"}, "order": order}),
                   headers={"authorization": f"bearer {token}", "apns-topic": phone.app, "apns-collapse-id": "score"})
    assert r.status_code == 200, r.text


def test_assert_delivered_sees_a_new_message_that_replaced_the_delivered_one(mock):
    phone = mock.create_device(platform="ios")
    key = mock.apns_key(TEAM)
    apns_send(mock, phone, key, "A")
    mock.assert_delivered(phone.token, where={"order": "A"}, transport="apns")
    later = threading.Timer(0.3, apns_send, (mock, phone, key, "B"))
    later.start()
    started = time.monotonic()
    got = mock.assert_delivered(phone.token, where={"order": "B"}, transport="apns", timeout=5)
    later.join()
    assert time.monotonic() - started < 1.5
    assert [(m.status, m.fields["order"]) for m in mock.messages(phone.token)] == [("replaced", "A"), ("delivered", "B")]
    assert got.fields["order"] == "B"


def test_assert_delivered_waits_for_a_pending_one_to_be_delivered(mock):
    mock.go_offline("demo-android-1")
    legacy_send(mock.base_url, {"to": "demo-android-1", "data": {"n": "1"}})
    later = threading.Timer(0.3, mock.go_online, ("demo-android-1",))
    later.start()
    started = time.monotonic()
    assert mock.assert_delivered("demo-android-1", where={"n": "1"}, timeout=5).status == "delivered"
    later.join()
    assert time.monotonic() - started < 1.5


def test_an_unreachable_server_is_a_transport_error():
    mock = FcmMock.start()
    url = mock.base_url
    try:
        with pytest.raises(RequestTimedOut) as timed_out:
            mock.api("GET", "/api/v1/devices/demo-android-1/messages", params={"wait": 2}, timeout=0.2)
        assert isinstance(timed_out.value, requests.Timeout) and isinstance(timed_out.value, FcmMockError)
        # The cause's own class too: `except requests.ReadTimeout` written before still catches it.
        assert isinstance(timed_out.value, requests.ReadTimeout)
        assert url + "/api/v1/devices/demo-android-1/messages" in str(timed_out.value)
        mock.process.terminate()
        mock.process.wait()
        for call in (lambda: mock.devices, lambda: mock.wait_for_messages("demo-android-1", timeout=0.5),
                     lambda: mock.events(timeout=1)):
            with pytest.raises(ConnectionFailed) as failed:
                call()
            e = failed.value
            assert isinstance(e, TransportError) and isinstance(e, requests.ConnectionError)
            assert e.url.startswith(url) and e.cause is not None and url in str(e)
    finally:
        mock.close()


def test_errors_pickle():
    e = ControlAPIError("GET", "/api/v1/devices/x", 404, "not_found", "device 'x' does not exist", {"error": {}})
    again = pickle.loads(pickle.dumps(e))
    assert (again.status, again.code, again.message, again.body, str(again)) == \
        (404, "not_found", "device 'x' does not exist", {"error": {}}, str(e))
    failed = ConnectionFailed("GET", "http://127.0.0.1:1/x", requests.ConnectionError("refused"))
    again = pickle.loads(pickle.dumps(failed))
    assert type(again) is ConnectionFailed and again.url == failed.url and str(again) == str(failed)


def test_a_transport_error_is_also_of_the_causes_own_class():
    from fcm_mock.errors import transport_error

    causes = [requests.exceptions.ReadTimeout("slow"), requests.exceptions.SSLError("certificate verify failed"),
              requests.exceptions.ProxyError("proxy"), requests.exceptions.ChunkedEncodingError("cut"),
              requests.ConnectTimeout("late"), requests.ConnectionError("refused")]
    for cause in causes:
        e = transport_error("GET", "http://127.0.0.1:1/x", cause)
        assert isinstance(e, type(cause)) and isinstance(e, TransportError) and isinstance(e, FcmMockError), type(e).__mro__
        again = pickle.loads(pickle.dumps(e))
        assert isinstance(again, type(cause)) and str(again) == str(e)
    # A cause that does not pickle (urllib3's errors hold their pool) leaves the classes as they were.
    import urllib3
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 1)
    slow = transport_error("GET", "http://127.0.0.1:1/x",
                           requests.exceptions.ReadTimeout(urllib3.exceptions.ReadTimeoutError(pool, "/x", "read timed out")))
    again = pickle.loads(pickle.dumps(slow))
    assert type(again).__mro__ == type(slow).__mro__ and isinstance(again, requests.ReadTimeout)
    tls = transport_error("GET", "https://127.0.0.1:1/x", requests.exceptions.SSLError("certificate verify failed"))
    assert isinstance(tls, ConnectionFailed) and "TLS" in str(tls) and "refused" not in str(tls)


def test_a_second_mock_may_not_take_googles_names_from_the_first():
    import firebase_admin

    with FcmMock.start(https=True) as first, FcmMock.start(https=True) as second:
        first.firebase_app(unmodified=True)
        with pytest.raises(FcmMockError, match="already reach another fcm-mock"):
            second.firebase_app(unmodified=True)
        with pytest.raises(FcmMockError, match="already reach another fcm-mock"):
            with second.google_hosts():
                pass
        with first.google_hosts():  # the same mock: no conflict
            pass
        with second.apple_hosts():  # other names: no conflict
            pass
        apps = len(firebase_admin._apps)
        first.close()
        second.firebase_app(unmodified=True)  # the names are free again
        assert len(firebase_admin._apps) == apps
