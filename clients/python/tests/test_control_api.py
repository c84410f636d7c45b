"""The control API's typed calls (projects, device actions, message records, topics and groups,
the clock, faults, upstream and XMPP, service accounts and access tokens) against the real
binary ($FCM_MOCK_BIN): each call, the fields it parses, and the error the server answers."""

from __future__ import annotations

import base64
import json
import socket
import time

import pytest
import requests

from conftest import SERVER_KEY, legacy_send
from fcm_mock import ControlAPIError

SENDER = "123456789012"
STREAM = (b'<stream:stream to="fcm.googleapis.com" version="1.0" xmlns="jabber:client" '
          b'xmlns:stream="http://etherx.jabber.org/streams">')


@pytest.fixture
def mock(module_mock):
    module_mock.reset()
    yield module_mock
    module_mock.reset_clock()


def not_found(call, *args, **kwargs):
    """The ControlAPIError a call raises, which must be the server's 404."""
    with pytest.raises(ControlAPIError) as e:
        call(*args, **kwargs)
    assert (e.value.status, e.value.code) == (404, "not_found"), e.value
    return e.value


class Xmpp:
    """An app server's XMPP connection, logged in with SASL PLAIN as the demo project."""

    def __init__(self, port: int, resource: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.sock.sendall(STREAM)
        self.read_to(b"</stream:features>")
        plain = base64.b64encode(b"\x00" + SENDER.encode() + b"\x00" + SERVER_KEY.encode())
        self.sock.sendall(b'<auth mechanism="PLAIN" xmlns="urn:ietf:params:xml:ns:xmpp-sasl">' + plain + b"</auth>")
        assert b"<success" in self.read_to(b"/>")
        self.sock.sendall(STREAM)
        self.read_to(b"</stream:features>")
        self.sock.sendall(b'<iq type="set" id="b1"><bind xmlns="urn:ietf:params:xml:ns:xmpp-bind"><resource>'
                          + resource.encode() + b"</resource></bind></iq>")
        self.read_to(b"</iq>")

    def read_to(self, marker: bytes) -> bytes:
        """What the server sent up to and including `marker` (the rest is kept)."""
        while marker not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, f"the server closed the stream; got {self.buf[-200:]!r}"
            self.buf += chunk
        end = self.buf.index(marker) + len(marker)
        got, self.buf = self.buf[:end], self.buf[end:]
        return got

    def send_json(self, body: dict) -> None:
        self.sock.sendall(b'<message><gcm xmlns="google:mobile:data">' + json.dumps(body).encode()
                          + b"</gcm></message>")

    def close(self) -> None:
        self.sock.close()


def test_projects_crud(mock):
    [demo] = mock.projects
    assert (demo.sender_id, demo.project_id, demo.server_keys) == (SENDER, "demo-project", [SERVER_KEY])
    assert [(a.app, a.platform) for a in demo.apps][:2] == [("com.example.demo", "android"),
                                                             ("com.example.demo.ios", "ios")]
    made = mock.create_project("555000555", server_keys=["AAAAother:key"],
                               apps=[{"app": "com.other", "platform": "android"},
                                     {"app": "com.other.ios", "platform": "ios", "apns_credential": "expired"}])
    assert (made.sender_id, made.project_id, made.service_accounts) == ("555000555", "project-555000555", [])
    assert [(a.app, a.apns_credential) for a in made.apps] == [("com.other", "valid"), ("com.other.ios", "expired")]
    assert made.created_at and made.raw["server_keys"] == ["AAAAother:key"]
    assert [p.sender_id for p in mock.projects] == [SENDER, "555000555"]
    assert mock.project("project-555000555") == mock.project("555000555") == made
    with pytest.raises(ControlAPIError) as e:
        mock.create_project("555000555")
    assert (e.value.status, e.value.code) == (409, "conflict")
    named = mock.create_project("777000777", project_id="named-project")
    assert mock.project("named-project").sender_id == "777000777" and named.server_keys == []
    mock.delete_project("555000555")
    mock.delete_project("named-project")
    assert [p.sender_id for p in mock.projects] == [SENDER]
    not_found(mock.project, "555000555")
    not_found(mock.delete_project, "555000555")


def test_device_fields_unregister_refresh_and_delete(mock):
    d = mock.device("demo-android-1")
    assert d.canonical_token is None and d.created_at and d.last_seen_at and d.state == "registered"

    new = mock.refresh("demo-android-2")
    assert new.token != "demo-android-2" and new.state == "registered" and new.fid == "cDemoAndroid2_fid_0002"
    old = mock.device("demo-android-2")
    assert (old.state, old.canonical_token) == ("refreshed", new.token)
    answer = legacy_send(mock.base_url, {"to": "demo-android-2", "data": {"k": "v"}}).json()
    assert answer["results"][0]["registration_id"] == new.token
    [rec] = mock.message_records(token="demo-android-2")
    assert rec.recipients[0].canonical_token == new.token

    gone = mock.unregister("demo-android-1")
    assert (gone.token, gone.state) == ("demo-android-1", "unregistered")
    answer = legacy_send(mock.base_url, {"to": "demo-android-1", "data": {}}).json()
    assert answer["results"] == [{"error": "NotRegistered"}]
    not_found(mock.unregister, "no-such-device")
    not_found(mock.refresh, "no-such-device")

    mock.delete_device(new.token)
    assert new.token not in [x.token for x in mock.devices]
    e = not_found(mock.device, new.token)
    assert "does not exist" in e.message
    not_found(mock.delete_device, new.token)


def test_message_records_and_inbox_options(mock):
    r = legacy_send(mock.base_url, {"to": "demo-android-1", "data": {"n": "1"}, "collapse_key": "score",
                                    "time_to_live": 60, "priority": "high"})
    first_id = r.json()["results"][0]["message_id"]
    [entry] = mock.messages("demo-android-1")
    assert (entry.collapse_key, entry.priority) == ("score", "high")
    assert entry.expires_at and entry.expires_at > entry.accepted_at

    mock.subscribe("demo-android-2", "news")
    later = mock.advance_clock(60)
    legacy_send(mock.base_url, {"to": "/topics/news", "data": {"n": "2"}})
    legacy_send(mock.base_url, {"to": "not a token", "data": {"n": "3"}})

    newest_first = mock.message_records()
    assert [m.data for m in newest_first] == [{"n": "3"}, {"n": "2"}, {"n": "1"}]
    assert [m.data for m in mock.message_records(limit=2)] == [{"n": "3"}, {"n": "2"}]

    [rec] = mock.message_records(token="demo-android-1")
    assert (rec.message_id, rec.sender_id, rec.transport, rec.format, rec.status) == \
        (first_id, SENDER, "http", "json", "accepted")
    assert (rec.target_kind, rec.target_value, rec.http_status, rec.error, rec.fault) == \
        ("token", "demo-android-1", 200, None, None)
    assert (rec.options["collapse_key"], rec.options["priority"], rec.options["time_to_live"]) == ("score", "high", 60)
    assert isinstance(rec.multicast_id, int) and rec.accepted_at == entry.accepted_at
    [to] = rec.recipients
    assert (to.token, to.message_id, to.status, to.error, to.canonical_token) == \
        ("demo-android-1", first_id, "delivered", None, None)
    assert to.delivered_at and rec.raw["answer"]["status"] == 200

    [topic] = mock.message_records(topic="news")
    assert (topic.target_kind, topic.data) == ("topic", {"n": "2"})
    [refused] = mock.message_records(status="rejected")
    assert refused.recipients[0].error == "InvalidRegistration" and refused.data == {"n": "3"}
    assert [m.data for m in mock.message_records(since=later)] == [{"n": "3"}, {"n": "2"}]
    assert mock.message_records(sender_id=SENDER, transport="http_v1") == []
    assert [m.data for m in mock.message_records(error="InvalidRegistration")] == [{"n": "3"}]

    assert mock.message_record(first_id) == rec
    not_found(mock.message_record, "0:1%2nothing")
    with pytest.raises(ControlAPIError) as e:
        mock.message_records(transport="fcm")
    assert (e.value.status, e.value.code) == (400, "bad_request")


def test_topics_and_groups(mock):
    assert mock.topics == []
    mock.subscribe("demo-android-1", "news")
    mock.subscribe("demo-android-2", "news")
    mock.subscribe("demo-android-1", "sport")
    assert sorted((t.name, t.count) for t in mock.topics) == [("news", 2), ("sport", 1)]
    news = mock.topic("news")
    assert (news.name, sorted(news.subscribers), news.count) == ("news", ["demo-android-1", "demo-android-2"], 2)
    nobody = mock.topic("nobody-listens")
    assert (nobody.name, nobody.subscribers, nobody.count) == ("nobody-listens", [], 0)
    with pytest.raises(ControlAPIError) as bad:
        mock.topic("bad name")
    assert bad.value.status == 400, bad.value

    assert mock.groups == []
    made = requests.post(mock.base_url + "/fcm/notification", timeout=10,
                         headers={"Authorization": f"key={SERVER_KEY}", "project_id": SENDER},
                         json={"operation": "create", "notification_key_name": "family",
                               "registration_ids": ["demo-android-1", "demo-ios-1"]})
    key = made.json()["notification_key"]
    [group] = mock.groups
    assert group == mock.group(key)
    assert (group.notification_key, group.notification_key_name, group.sender_id, group.members) == \
        (key, "family", SENDER, ["demo-android-1", "demo-ios-1"])
    assert group.created_at
    not_found(mock.group, "APA91-no-such-group")


def test_clock(mock):
    start = mock.clock
    assert start.offset_s == 0 and start.now.endswith("Z")
    moved = mock.advance_clock(3600)
    now = mock.clock
    assert now.offset_s == 3600 and now.now >= moved > start.now
    mock.reset_clock()
    assert mock.clock.offset_s == 0


def test_faults_listed_and_cleared(mock):
    with mock.fault({"delay_ms": 1}, when={"transport": "http"}, times=2) as delayed, \
            mock.fault({"error": "Unavailable"}, when={"token": "demo-android-2"}) as failing:
        legacy_send(mock.base_url, {"to": "demo-android-1", "data": {}})
        listed = {f.id: f for f in mock.faults}
        assert list(listed) == [delayed.id, failing.id]
        one, two = listed[delayed.id], listed[failing.id]
        assert (one.when["transport"], one.then, one.times, one.fired) == ("http", {"delay_ms": 1}, 1, 1)
        assert (two.when["token"], two.then, two.times, two.fired) == ("demo-android-2", {"error": "Unavailable"},
                                                                         None, 0)
        assert one.created_at and delayed.times == 2 and delayed.fired == 0
        mock.clear_faults()
        assert mock.faults == []
        assert legacy_send(mock.base_url, {"to": "demo-android-2", "data": {}}).json()["success"] == 1
    assert mock.faults == []


def test_upstream_and_xmpp_connections(mock):
    up = mock.send_upstream("demo-android-1", {"hello": "app"}, message_id="up-1", time_to_live=600)
    assert (up.message_id, up.token, up.sender_id, up.category, up.data) == \
        ("up-1", "demo-android-1", SENDER, "com.example.demo", {"hello": "app"})
    assert (up.status, up.time_to_live, up.connection_id, up.sent_at) == ("queued", 600, None, None)
    assert [u.message_id for u in mock.upstream(status="queued")] == ["up-1"]
    assert mock.upstream(token="demo-android-2") == [] and mock.upstream(sender_id="999") == []
    not_found(mock.send_upstream, "no-such-device", {"a": "b"})

    assert mock.xmpp_connections == []
    first = Xmpp(mock.xmpp_port, "first")
    second = None
    try:
        assert b'"message_id":"up-1"' in first.read_to(b"</message>")
        [conn] = mock.xmpp_connections
        assert (conn.sender_id, conn.resource, conn.draining, conn.tls) == (SENDER, "first", False, False)
        assert conn.connected_at and conn.unacked == 1  # the upstream message, until it is acked
        [sent] = mock.upstream(status="sent")
        assert (sent.message_id, sent.connection_id) == ("up-1", conn.id) and sent.sent_at

        # Drained while up-1 awaits its ack, so the connection stays open to answer.
        [drained] = mock.drain_xmpp(conn.id)
        assert (drained.id, drained.draining, drained.unacked) == (conn.id, True, 1)
        assert b"CONNECTION_DRAINING" in first.read_to(b"</message>")
        not_found(mock.drain_xmpp, conn.id)
        first.send_json({"to": "demo-android-1", "message_id": "up-1", "message_type": "ack"})
        deadline = time.monotonic() + 5
        while mock.upstream(status="acked") == [] and time.monotonic() < deadline:
            time.sleep(0.02)  # the ack is read on the connection's own thread; no long poll here
        [acked] = mock.upstream(status="acked")
        assert (acked.message_id, acked.connection_id) == ("up-1", conn.id) and acked.acked_at

        second = Xmpp(mock.xmpp_port, "second")
        mock.send_upstream("demo-android-2", {"n": "2"}, message_id="up-2")
        assert b'"message_id":"up-2"' in second.read_to(b"</message>")
        [other] = [c for c in mock.xmpp_connections if c.resource == "second"]
        assert (other.draining, other.unacked) == (False, 1)
        assert [(c.id, c.draining) for c in mock.drain_xmpp()] == [(other.id, True)]
        assert b"CONNECTION_DRAINING" in second.read_to(b"</message>")
    finally:
        first.close()
        if second is not None:
            second.close()


def test_service_accounts_and_access_tokens(mock):
    path = mock.service_account()
    key_id = json.loads(path.read_text())["private_key_id"]
    [account] = [a for a in mock.service_accounts() if a.private_key_id == key_id]
    assert account.client_email.endswith("@demo-project.iam.gserviceaccount.com")
    assert account.public_key.startswith("-----BEGIN PUBLIC KEY-----") and account.created_at
    assert "private_key" not in account.raw
    assert key_id in [a.private_key_id for a in mock.project("demo-project").service_accounts]
    assert mock.service_accounts(SENDER) == mock.service_accounts("demo-project")

    assert mock.access_tokens == []
    issued = mock.api("POST", "/api/v1/projects/demo-project/access-tokens")
    [token] = mock.access_tokens
    assert (token.id, token.token_prefix, token.project_id) == \
        (issued["id"], issued["access_token"][:12], "demo-project")
    assert token.client_email == issued["client_email"] and token.scope.endswith("/auth/firebase.messaging")
    assert token.issued_at < token.expires_at
    v1 = mock.base_url + "/v1/projects/demo-project/messages:send"
    message = {"message": {"token": "demo-android-1", "data": {"a": "b"}}}
    auth = {"Authorization": "Bearer " + issued["access_token"]}
    assert requests.post(v1, json=message, headers=auth, timeout=10).status_code == 200
    mock.revoke_access_token(token.id)
    assert mock.access_tokens == []
    assert requests.post(v1, json=message, headers=auth, timeout=10).status_code == 401
    not_found(mock.revoke_access_token, token.id)

    mock.delete_service_account(key_id)
    assert key_id not in [a.private_key_id for a in mock.service_accounts()]
    not_found(mock.delete_service_account, key_id, "demo-project")
    not_found(mock.service_accounts, "no-such-project")
