"""Real receiving clients through the Python client (docs/real-clients.md): a raw autopush
connection (the `websockets` sync client on the mock's /autopush, as Firefox's push service
connection) says hello, registers a channel and is pushed to over HTTP; the test follows it with
`clients()`, `wait_for_client()`, `Device.client`, `device_for_endpoint()`,
`Message.client_delivery`, `disconnect_client()`, `delete_client()` and `reset(clients=…)`."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
import requests
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from fcm_mock import ClientDelivery, ControlAPIError, Device, FcmMock, FcmMockError, Message, RealClient

USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0"


class Autopush:
    """One autopush connection: hello (with a uaid to come back), register, read, ack."""

    def __init__(self, mock: FcmMock, uaid: "str | None" = None) -> None:
        url = mock.base_url.replace("http://", "ws://", 1) + "/autopush"
        self.ws = connect(url, subprotocols=["push-notification"], user_agent_header=USER_AGENT,
                          open_timeout=10, close_timeout=2, proxy=None, ping_interval=None, legacy=True)
        hello = {"messageType": "hello", "broadcasts": {}, "use_webpush": True}
        if uaid:
            hello["uaid"] = uaid
        self.ws.send(json.dumps(hello))
        answer = self.read("hello")
        assert answer["status"] == 200 and re.fullmatch(r"[0-9a-f]{32}", answer["uaid"]), answer
        self.uaid = answer["uaid"]

    def read(self, kind: str, timeout: float = 10) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            except TimeoutError:
                raise AssertionError(f"no {kind} within {timeout} s") from None
            if message.get("messageType") == kind:
                return message

    def register(self) -> "tuple[str, str]":
        channel = str(uuid.uuid4())
        self.ws.send(json.dumps({"channelID": channel, "messageType": "register"}))
        answer = self.read("register")
        assert answer["status"] == 200 and answer["channelID"] == channel, answer
        return channel, answer["pushEndpoint"]

    def ack(self, channel: str, version: str, code: int = 100) -> None:
        self.ws.send(json.dumps({"messageType": "ack",
                                 "updates": [{"channelID": channel, "version": version, "code": code}]}))

    def closed_with(self, timeout: float = 10) -> int:
        """The close code the server sent (it must close within `timeout`)."""
        try:
            while True:
                self.ws.recv(timeout=timeout)
        except TimeoutError:
            raise AssertionError(f"the server did not close the connection within {timeout} s") from None
        except ConnectionClosed as e:
            assert e.rcvd is not None, f"the connection ended without a close frame: {e!r}"
            return e.rcvd.code

    def close(self) -> None:
        self.ws.close()


def push(endpoint: str, body: bytes = b"\x00" * 64) -> requests.Response:
    """A push as a site's server sends it (no VAPID: the channel has no key)."""
    return requests.post(endpoint, data=body, headers={"TTL": "60", "Content-Encoding": "aes128gcm"}, timeout=10)


@pytest.fixture(scope="module")
def mock(module_mock):
    return module_mock


@pytest.fixture
def browser(mock):
    """A fresh mock (no real clients: `reset(clients=False)`) and one autopush connection."""
    mock.reset(clients=False)
    assert mock.clients() == []
    b = Autopush(mock)
    yield b
    b.close()


def test_a_connection_is_a_client_and_its_channel_a_device(mock, browser):
    client = mock.wait_for_client("autopush", timeout=5)
    assert isinstance(client, RealClient)
    assert (client.id, client.kind, client.connected, client.user_agent) == (browser.uaid, "autopush", True, USER_AGENT)
    assert client.connection is not None and client.connection.id and client.connection.tls is False
    assert client.connection.unacked == 0 and client.devices == [] and client.checkin is None
    channel, endpoint = browser.register()

    device = mock.device_for_endpoint(endpoint)
    assert device.platform == "web" and device.web_push is not None and device.web_push["endpoint"] == endpoint
    assert device.web_push_id == endpoint.rsplit("/", 1)[1]
    c = device.client
    assert c is not None
    assert (c.kind, c.id, c.connected, c.channel_id, c.unregister_code) == ("autopush", browser.uaid, True, channel, None)
    assert c.user_agent == USER_AGENT and c.connected_at is not None
    assert c.app is None and c.installation_fid is None  # other kinds' fields
    assert mock.client(browser.uaid).devices == [device.token]
    assert mock.clients("autopush", connected=True) == [mock.client(browser.uaid)]
    assert mock.clients("gcm") == []

    # The device filters, and the calls that were there before: fake devices have no client.
    assert [d.token for d in mock.find_devices(client_kind="autopush")] == [device.token]
    assert [d.token for d in mock.find_devices(client_id=browser.uaid, connected=True)] == [device.token]
    assert mock.find_devices(client_id=browser.uaid, connected=False) == []
    assert mock.find_devices(client_kind="gcm") == []
    assert mock.device(device.token).client == c
    assert mock.device("demo-android-1").client is None
    assert [d.token for d in mock.devices if d.client is not None] == [device.token]
    with pytest.raises(FcmMockError, match="no device has the push endpoint"):
        mock.device_for_endpoint(mock.base_url + "/wp/no-such-subscription")


def test_an_acknowledged_push_is_delivered_with_its_client_delivery(mock, browser):
    channel, endpoint = browser.register()
    token = mock.device_for_endpoint(endpoint).token
    r = push(endpoint)
    assert r.status_code == 201, r.text
    note = browser.read("notification")
    assert note["channelID"] == channel

    sent = mock.wait_for_messages(token, status="sent", timeout=5)[0]
    d = sent.client_delivery
    assert isinstance(d, ClientDelivery)
    assert (d.kind, d.version, d.message_ref, d.sends, d.ack, d.rejection) == \
        ("autopush", note["version"], sent.message_id, 1, None, None)
    assert d.connection_id == mock.client(browser.uaid).connection.id and d.first_sent_at
    assert sent.webpush is not None and sent.webpush.relayed and sent.webpush.plaintext is None
    assert mock.client(browser.uaid).connection.unacked == 1

    browser.ack(channel, note["version"])
    got = mock.assert_delivered(token, transport="webpush")
    assert got.message_id == sent.message_id and got.status == "delivered" and got.delivered_at
    ack = got.client_delivery.ack
    assert ack is not None and (ack.by, ack.code) == ("ack", 100) and ack.at
    assert got.client_delivery.rejection is None
    assert "ack=ack:100" in got.summary()
    assert mock.messages(token, status="sent") == []
    assert mock.client(browser.uaid).connection.unacked == 0

    # The record's recipient carries the same client_delivery (docs/real-clients.md 4.2).
    [recipient] = mock.message_record(got.message_id).recipients
    assert recipient.status == "delivered" and recipient.client_delivery == got.client_delivery
    assert [r.message_id for r in mock.message_records(client_kind="autopush")] == [got.message_id]
    assert [r.message_id for r in mock.message_records(client_kind="any")] == [got.message_id]
    assert [d.token for d in mock.find_devices(client_kind="any")] == [token]
    device = mock.device(token)
    assert isinstance(device.sender_id, str) and isinstance(device.app, str)


def test_a_settled_recipient_has_settled_at(mock):
    phone = mock.create_device()
    mock.go_offline(phone.token)
    for n in ("1", "2"):
        requests.post(mock.base_url + "/fcm/send", timeout=10, headers={"Authorization": "key=AAAAfcmmock:demo-server-key"},
                      json={"to": phone.token, "data": {"n": n}, "collapse_key": "score"})
    [collapsed] = mock.message_records(token=phone.token, status="collapsed")
    [recipient] = collapsed.recipients
    assert recipient.status == "collapsed" and recipient.settled_at and recipient.client_delivery is None


def test_a_refused_push_is_client_rejected(mock, browser):
    channel, endpoint = browser.register()
    token = mock.device_for_endpoint(endpoint).token
    assert push(endpoint).status_code == 201
    browser.ack(channel, browser.read("notification")["version"], code=101)
    refused = mock.wait_for_messages(token, status="client_rejected", timeout=5)[0]
    rejection = refused.client_delivery.rejection
    assert rejection is not None and rejection.code == 101 and "decrypt" in rejection.reason
    assert refused.client_delivery.ack.code == 101
    assert "rejection=101" in refused.summary()
    with pytest.raises(AssertionError, match="client_rejected"):
        mock.assert_delivered(token, timeout=0.2)


def test_disconnect_with_backoff_closes_4774(mock, browser):
    before = mock.client(browser.uaid).connection.id
    after = mock.disconnect_client(browser.uaid, backoff=True)
    assert after.id == browser.uaid  # as the server answered: its connection may still be closing
    assert browser.closed_with() == 4774
    assert mock.wait_for_client("autopush", connected=False, timeout=5).id == browser.uaid
    with pytest.raises(AssertionError, match="no real client kind=autopush connected=True"):
        mock.wait_for_client("autopush", timeout=0.2)

    again = Autopush(mock, uaid=browser.uaid)  # Firefox restarted: the same uaid comes back
    try:
        back = mock.wait_for_client(client_id=browser.uaid, timeout=5)
        assert back.connected and back.connection.id not in ("", before)
    finally:
        again.close()


def test_delete_client_forgets_it_and_its_endpoints_answer_410(mock, browser):
    channel, endpoint = browser.register()
    token = mock.device_for_endpoint(endpoint).token
    assert mock.delete_client(browser.uaid) is None  # 204
    assert push(endpoint).status_code == 410
    with pytest.raises(ControlAPIError) as e:
        mock.client(browser.uaid)
    assert e.value.status == 404
    with pytest.raises(ControlAPIError):
        mock.device(token)
    assert mock.clients() == []


def test_reset_keeps_real_clients_unless_told(mock, browser):
    channel, endpoint = browser.register()
    mock.reset()
    kept = mock.client(browser.uaid)
    assert kept.connected and len(kept.devices) == 1
    assert mock.device_for_endpoint(endpoint).client.channel_id == channel
    assert mock.find_devices(client_id=browser.uaid)[0].token == kept.devices[0]

    mock.reset(clients=False)
    assert mock.clients() == [] and mock.find_devices(client_kind="autopush") == []
    assert browser.closed_with() is not None
    assert mock.health()["clients"]["autopush_connections"] == 0


def test_start_with_an_mcs_port():
    with FcmMock.start(mcs_port=0) as m:
        assert isinstance(m.mcs_port, int) and m.mcs_port > 0
        assert m.health()["clients"]["mcs"]["listening"].endswith(f":{m.mcs_port}")
    with FcmMock.start() as m:
        assert m.mcs_port is None


def test_old_and_new_json_alike():
    """A server before real clients (no `client`, no `client_delivery`) and one with fields this
    package does not know yet both read."""
    old = Device.from_json({"token": "t", "platform": "web"})
    assert old.client is None and old.web_push_id is None
    new = Device.from_json({"token": "t", "platform": "web", "some_new_field": 1,
                            "web_push": {"endpoint": "https://updates.push.services.mozilla.com/wpush/v2/gAAA"},
                            "client": {"kind": "fcm", "id": None, "connected": False, "installation_fid": "f",
                                       "via": "tok", "future": True}})
    assert new.client is not None and new.client.kind == "fcm" and new.client.id is None
    assert (new.client.installation_fid, new.client.via, new.web_push_id) == ("f", "tok", "gAAA")
    m = Message.from_json({"message_id": "m", "status": "delivered", "via": {"transport": "http_v1"},
                           "client_delivery": {"kind": "mcs", "persistent_id": "0:1%2", "sends": 2,
                                               "ack": {"by": "selective_ack", "code": None, "at": "x"},
                                               "rejection": None, "plaintext": {"data": {"a": "1"}},
                                               "encryption": "aesgcm", "next_year": []}})
    d = m.client_delivery
    assert d is not None and (d.kind, d.message_ref, d.sends, d.ack.by, d.ack.code) == ("mcs", "0:1%2", 2, "selective_ack", None)
    assert d.plaintext == {"data": {"a": "1"}} and d.encryption == "aesgcm"
    assert Message.from_json({"message_id": "m", "status": "pending"}).client_delivery is None
    c = RealClient.from_json({"id": "1", "kind": "gcm", "connected": False, "connection": None,
                              "checkin": {"platform": "linux", "chrome_version": "140", "channel": "stable", "at": "x"},
                              "registrations": [{"token": "r", "app": "a", "device": None}], "new": 1})
    assert c.checkin.chrome_version == "140" and c.registrations[0].token == "r" and c.devices == []
