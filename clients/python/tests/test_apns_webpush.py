"""APNs and Web Push through the client against the real binary: keys and certificates the mock
makes, aioapns 4.0 unmodified through apple_hosts(), pywebpush 2.5.0 to a web device's
subscription as the server gives it, the transport filter and `where` on APNs payloads and Web
Push plaintexts, and what a failing assertion shows."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import stat
import threading
import time
import urllib.parse

import pytest
import requests
from aioapns import APNs, NotificationRequest
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid
from pywebpush import webpush

from fcm_mock import ApnsCertificate, ApnsKey, FcmMock, FcmMockError, Message

TEAM = "ABCDE12345"
IOS_APP = "com.example.demo.ios"
KEY = {"Authorization": "key=AAAAfcmmock:demo-server-key"}


@pytest.fixture(scope="module")
def server():
    with FcmMock.start(https=True) as m:
        yield m


@pytest.fixture
def mock(server):
    server.reset()
    return server


def apns_send(device_token, message, *, sandbox=True, **credentials):
    """One notification with aioapns as it comes from PyPI: its own SSL context, Apple's host."""
    async def go():
        apns = APNs(use_sandbox=sandbox, **credentials)
        try:
            return await apns.send_notification(NotificationRequest(device_token=device_token, message=message))
        finally:
            apns.pool.close()
    return asyncio.run(go())


def new_vapid():
    v = Vapid()
    v.generate_keys()
    return v


def raw_public_key(vapid):
    return vapid.public_key.public_bytes(serialization.Encoding.X962,
                                         serialization.PublicFormat.UncompressedPoint)


def push(mock, device, payload, vapid, **kwargs):
    """pywebpush to the subscription exactly as the server gave it. With the TLS listener the
    endpoint is on https://fcm.googleapis.com (or, on newer servers, the mock's own https
    origin): google_hosts() routes Google's name and trusts the mock's CA for either."""
    routed = mock.google_hosts() if mock.https_url else contextlib.nullcontext()
    with routed:
        return webpush(device.web_push, data=json.dumps(payload), vapid_private_key=vapid,
                       vapid_claims={"sub": "mailto:ops@example.com"}, ttl=60, **kwargs)


def later(seconds, fn, *args):
    t = threading.Timer(seconds, fn, args)
    t.start()
    return t


# --- APNs ----------------------------------------------------------------------------------------

def test_apns_key_is_written_as_a_p8_of_mode_0600(mock):
    key = mock.apns_key(TEAM)
    assert isinstance(key, ApnsKey)
    assert key.team_id == TEAM and len(key.key_id) == 10
    assert key.pem.startswith("-----BEGIN PRIVATE KEY-----")
    assert key.path.read_text() == key.pem and key.path.name == f"AuthKey_{key.key_id}.p8"
    assert stat.S_IMODE(key.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.path.parent.stat().st_mode) == 0o700
    # bundle_ids=None: the team may send to every iOS app of the mock's projects.
    teams = {t["team_id"]: t["bundle_ids"] for t in mock.api("GET", "/api/v1/apns/teams")["items"]}
    assert teams[TEAM] == [IOS_APP]
    other = mock.apns_key("TEAM000002", bundle_ids=["com.example.other"], key_id="KEY0000002")
    assert other.key_id == "KEY0000002"


def test_aioapns_with_a_key_through_apple_hosts(mock):
    phone = mock.create_device(platform="ios")
    assert (phone.app, phone.apns_environment) == (IOS_APP, "sandbox") and len(phone.apns_token) == 64
    key = mock.apns_key(TEAM)
    real = (socket.getaddrinfo, os.environ.get("SSL_CERT_FILE"))
    with mock.apple_hosts() as ca:
        assert ca == mock.ca_path() and os.environ["SSL_CERT_FILE"] == str(ca)
        [(_, _, _, _, address)] = {a for a in socket.getaddrinfo("api.sandbox.push.apple.com", 443, type=socket.SOCK_STREAM)}
        assert address[0].startswith("127.0.42.") and address[1] == 443
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("www.push.apple.com", 443)
        result = apns_send(phone.apns_token, {"aps": {"alert": {"title": "Hi"}}, "kind": "welcome"},
                           key=key.path.read_text(), key_id=key.key_id, team_id=TEAM, topic=IOS_APP)
    assert (socket.getaddrinfo, os.environ.get("SSL_CERT_FILE")) == real
    assert (result.status, result.description) == ("200", None)
    m = mock.assert_delivered(phone.token, where={"kind": "welcome"}, transport="apns")
    assert m.transport == "apns" and m.webpush is None and m.data is None
    assert m.apns.payload == {"aps": {"alert": {"title": "Hi"}}, "kind": "welcome"}
    assert m.apns.aps == {"alert": {"title": "Hi"}}
    assert (m.apns.topic, m.apns.push_type, m.apns.priority, m.apns.apns_id) == (IOS_APP, "alert", 10, result.notification_id)
    # Keys inside aps match as well as the custom ones beside it, and sub-mappings match.
    assert mock.assert_delivered(phone.token, where={"alert": {"title": "Hi"}}) == m
    assert mock.assert_delivered(phone.token, where={"aps": {"alert": {"title": "Hi"}}, "kind": "welcome"}) == m


def test_apple_hosts_maps_port_443_of_the_production_host(mock):
    phone = mock.create_device(platform="ios", apns_environment="production")
    key = mock.apns_key(TEAM)
    with mock.apple_hosts():
        result = apns_send(phone.apns_token, {"aps": {"alert": "prod"}, "n": 1}, sandbox=False,
                           key=key.pem, key_id=key.key_id, team_id=TEAM, topic=IOS_APP)
        wrong = apns_send(mock.create_device(platform="ios").apns_token, {"aps": {}}, sandbox=False,
                          key=key.pem, key_id=key.key_id, team_id=TEAM, topic=IOS_APP)
    assert (result.status, wrong.status, wrong.description) == ("200", "400", "BadDeviceToken")
    assert mock.assert_delivered(phone.token, where={"n": 1}).apns.aps == {"alert": "prod"}


def test_aioapns_with_a_certificate(mock):
    phone = mock.create_device(platform="ios")
    cert = mock.apns_certificate(phone.app, "sandbox")
    assert isinstance(cert, ApnsCertificate)
    assert (cert.bundle_id, cert.environments) == (IOS_APP, ["sandbox"]) and IOS_APP in cert.topics
    assert cert.path.read_text() == cert.certificate_pem.rstrip("\n") + "\n" + cert.private_key_pem
    assert (cert.cert_path.read_text(), cert.key_path.read_text()) == (cert.certificate_pem, cert.private_key_pem)
    assert {stat.S_IMODE(p.stat().st_mode) for p in (cert.path, cert.cert_path, cert.key_path)} == {0o600}
    with mock.apple_hosts():
        result = apns_send(phone.apns_token, {"aps": {"badge": 3}, "order": "A-1"}, client_cert=str(cert.path))
    assert result.status == "200", result.description
    m = mock.assert_delivered(phone.token, where={"order": "A-1", "badge": 3}, transport="apns")
    assert m.apns.push_type == "background" and m.apns.priority == 5
    record = mock.api("GET", "/api/v1/messages", params={"transport": "apns"})["items"][0]
    assert (record["apns"]["certificate_id"], record["apns"].get("key_id")) == (cert.id, None)


def test_apple_hosts_and_google_hosts_need_the_tls_listener():
    with FcmMock.start() as plain:
        assert plain.https_port is None
        for cm in (plain.apple_hosts, plain.google_hosts):
            with pytest.raises(Exception, match="needs the mock's TLS listener.*--fcm-mock-https"):
                with cm():
                    pass


def test_https_port_and_routings_in_any_order(mock):
    assert mock.https_port == int(mock.https_url.rsplit(":", 1)[1])
    real = (socket.getaddrinfo, os.environ.get("REQUESTS_CA_BUNDLE"))
    apple = mock.apple_hosts()
    google = mock.google_hosts()
    apple.__enter__()
    google.__enter__()
    assert socket.getaddrinfo("fcm.googleapis.com", 443)[0][4][0] != socket.getaddrinfo("api.push.apple.com", 2197)[0][4][0]
    apple.__exit__(None, None, None)   # the first one ends first: Google's names still route
    assert socket.getaddrinfo("fcm.googleapis.com", "https")[0][4][0].startswith("127.0.42.")
    with pytest.raises(socket.gaierror):  # still guarded by Google's set, Apple's is gone
        socket.getaddrinfo("www.google.com", 443)
    google.__exit__(None, None, None)
    assert (socket.getaddrinfo, os.environ.get("REQUESTS_CA_BUNDLE")) == real


# --- Web Push ------------------------------------------------------------------------------------

@pytest.fixture(params=["https", "plain", "google-origin"])
def any_mock(request, mock):
    """The mock with a TLS listener (endpoints on https://fcm.googleapis.com, or on newer
    servers its own origin), one without (endpoints on its plain port), and one whose endpoints
    are on Google's host (`--web-push-origin`, or a server older than that flag with HTTPS)."""
    if request.param == "https":
        yield mock
    elif request.param == "plain":
        with FcmMock.start() as plain:
            yield plain
    else:
        try:
            google = FcmMock.start(https=True, web_push_origin="https://fcm.googleapis.com")
        except FcmMockError as e:
            assert "web-push-origin" in str(e), e
            google = FcmMock.start(https=True)
        with google:
            endpoint = google.create_device(platform="web").web_push["endpoint"]
            assert endpoint.startswith("https://fcm.googleapis.com/wp/"), endpoint
            yield google


def test_pywebpush_to_a_web_device(any_mock):
    mock = any_mock
    vapid = new_vapid()
    browser = mock.create_device(platform="web", application_server_key=raw_public_key(vapid))
    assert browser.app == "com.example.demo.web" and browser.platform == "web"
    sub = browser.web_push
    assert set(sub) == {"endpoint", "expirationTime", "keys"} and set(sub["keys"]) == {"p256dh", "auth"}
    assert sub["expirationTime"] is None and urllib.parse.urlsplit(sub["endpoint"]).path.startswith("/wp/")
    assert browser.application_server_key == base64.urlsafe_b64encode(raw_public_key(vapid)).decode().rstrip("=")
    assert browser.apns_token is None and mock.device(browser.token).web_push == sub

    t = later(0.3, push, mock, browser, {"title": "Goal!", "body": "3-1", "match": {"id": 7}}, vapid)
    start = time.monotonic()
    [m] = mock.wait_for_messages(browser.token, 1, 5, transport="webpush")
    assert time.monotonic() - start < 3
    t.join()
    assert isinstance(m, Message) and m.transport == "webpush" and m.apns is None
    assert json.loads(m.webpush.plaintext) == {"title": "Goal!", "body": "3-1", "match": {"id": 7}}
    assert m.webpush.json == json.loads(m.webpush.plaintext) and m.webpush.decrypt_error is None
    assert m.webpush.vapid["key"] == browser.application_server_key and m.webpush.content_encoding == "aes128gcm"
    assert m.webpush.headers["TTL"] == "60" and m.webpush.notification["title"] == "Goal!"
    assert mock.assert_delivered(browser.token, where={"body": "3-1", "match": {"id": 7}}, transport="webpush") == m


def test_a_web_device_of_a_project_with_a_web_app(mock):
    mock.api("POST", "/api/v1/projects", json_body={
        "sender_id": "777", "project_id": "shop", "server_keys": ["shop-key"],
        "apps": [{"app": "com.shop", "platform": "android"}, {"app": "com.shop.site", "platform": "web"}]})
    try:
        assert mock.create_device("777", platform="web").app == "com.shop.site"
        assert mock.create_device("shop", platform="ios").app == "com.shop.ios"
        assert mock.create_device("777").app == "com.shop"
        assert mock.create_device(platform="web", app="com.example.elsewhere").sender_id == "123456789012"
    finally:
        mock.api("DELETE", "/api/v1/projects/777")


# --- the transport filter and failure messages ---------------------------------------------------

def legacy(mock, token, data):
    r = requests.post(mock.base_url + "/fcm/send", json={"to": token, "data": data}, headers=KEY, timeout=10)
    assert r.status_code == 200, r.text


def test_wait_for_messages_by_transport_long_polls_past_other_messages(mock):
    phone = mock.create_device(platform="ios")
    key = mock.apns_key(TEAM)
    legacy(mock, phone.token, {"via": "fcm"})

    def send_apns():
        with mock.apple_hosts():
            apns_send(phone.apns_token, {"aps": {"alert": "a"}, "via": "apns"},
                      key=key.pem, key_id=key.key_id, team_id=TEAM, topic=IOS_APP)
    t = later(0.4, send_apns)
    start = time.monotonic()
    [m] = mock.wait_for_messages(phone.token, transport="apns", timeout=10)
    took = time.monotonic() - start
    t.join()
    assert 0.3 < took < 5, took
    assert m.apns.payload["via"] == "apns"
    assert [x.data for x in mock.wait_for_messages(phone.token, transport="fcm")] == [{"via": "fcm"}]
    assert [x.transport for x in mock.wait_for_messages(phone.token, 2)] == ["http", "apns"]
    assert mock.assert_delivered(phone.token, where={"via": "apns"}).transport == "apns"
    mock.assert_no_messages(phone.token, within=0.2, transport="webpush")
    with pytest.raises(AssertionError, match="received 1 message\\(s\\) over apns, none expected"):
        mock.assert_no_messages(phone.token, transport="apns")
    with pytest.raises(ValueError, match="none of http, http_v1, xmpp, apns, webpush, fcm"):
        mock.wait_for_messages(phone.token, transport="gcm")
    with pytest.raises(AssertionError, match="has 1 message\\(s\\) with transport apns after 0.2 s, 2 expected"):
        mock.wait_for_messages(phone.token, 2, 0.2, transport="apns")


def test_failing_assertions_show_the_payloads(mock):
    phone = mock.create_device(platform="ios")
    key = mock.apns_key(TEAM)
    with mock.apple_hosts():
        apns_send(phone.apns_token, {"aps": {"alert": "hi"}, "kind": "welcome"},
                  key=key.pem, key_id=key.key_id, team_id=TEAM, topic=IOS_APP)
    with pytest.raises(AssertionError) as e:
        mock.assert_delivered(phone.token, where={"kind": "goodbye"}, transport="apns", timeout=0.3)
    text = str(e.value)
    assert f"no message over 'apns' matching {{'kind': 'goodbye'}} delivered to device {phone.token[:20]}" in text
    assert "delivered apns 0:" in text and "payload={'aps': {'alert': 'hi'}, 'kind': 'welcome'}" in text
    # With a transport, the messages shown are of it, however many others came after them.
    for i in range(6):
        legacy(mock, phone.token, {"n": str(i)})
    mock.wait_for_messages(phone.token, 7)
    with pytest.raises(AssertionError) as e:
        mock.wait_for_messages(phone.token, 2, 0.2, transport="apns")
    lines = str(e.value).splitlines()
    assert lines[1] == f"newest apns messages of device {phone.token[:20]}… (newest first):"
    assert len(lines) == 3 and "payload={'aps': {'alert': 'hi'}, 'kind': 'welcome'}" in lines[2]

    vapid = new_vapid()
    browser = mock.create_device(platform="web")
    push(mock, browser, {"title": "Hi", "kind": "news"}, vapid)
    with pytest.raises(AssertionError) as e:
        mock.assert_delivered(browser.token, where={"kind": "sports"}, timeout=0.3)
    text = str(e.value)
    assert "no message matching {'kind': 'sports'} delivered" in text
    assert """delivered webpush 0:""" in text and """plaintext='{"title": "Hi", "kind": "news"}'""" in text
