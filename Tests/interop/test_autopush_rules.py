"""Autopush rules a raw WebSocket client meets (real-clients.md §2.4, §4.3): pushes decided
while a `hello` is being recorded reach that connection, and a fault's delay holds the write of
a push that waited for the client as it holds one written at once. No browser: the client is
`websockets`, as Firefox speaks it."""

import json
import threading
import time
import urllib.parse
import uuid

import requests
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from firefox import EventStream, wait_entry
from mocksupport import KEY_A

HELLO = {"messageType": "hello", "broadcasts": {}, "use_webpush": True}


class Channel:
    """A raw autopush client with one channel: `hello(uaid)` opens a connection."""

    def __init__(self, mock):
        self.mock = mock
        self.url = mock.base_url.replace("http://", "ws://", 1) + "/autopush"
        self.ws = None
        self.uaid = None
        self.hello()
        self.channel_id = str(uuid.uuid4())
        self.ws.send(json.dumps({"messageType": "register", "channelID": self.channel_id}))
        answer = json.loads(self.ws.recv(timeout=10))
        assert answer["status"] == 200, answer
        self.endpoint = answer["pushEndpoint"]
        self.token = mock.api("GET", "/api/v1/devices", params={"web_push_id": self.endpoint.rsplit("/", 1)[1]})["items"][0]["token"]

    def hello(self):
        if self.ws is not None:
            self.ws.close()
        self.ws = connect(self.url, subprotocols=["push-notification"], open_timeout=10, close_timeout=0.2, proxy=None,
                          legacy=True)
        self.ws.send(json.dumps({**HELLO, "uaid": self.uaid} if self.uaid else HELLO))
        greeting = json.loads(self.ws.recv(timeout=10))
        assert greeting["messageType"] == "hello" and greeting["status"] == 200, greeting
        self.uaid = greeting["uaid"]

    def notifications(self, until, enough=lambda: False, ack=True, got=None):
        """Versions of the notifications read until `until` (or `enough()`), each acknowledged
        unless `ack` is false; appended to `got` when given, as they come."""
        got = [] if got is None else got
        while time.monotonic() < until and not enough():
            try:
                m = json.loads(self.ws.recv(timeout=max(0.01, min(0.1, until - time.monotonic()))))
            except TimeoutError:
                continue
            if m.get("messageType") == "notification":
                got.add(m["version"]) if isinstance(got, set) else got.append(m["version"])
                if ack:
                    self.ws.send(json.dumps({"messageType": "ack", "updates": [{"channelID": self.channel_id, "version": m["version"]}]}))
        return got

    def close(self):
        self.ws.close()

    def away(self):
        """Closes the connection and waits until the mock shows the client disconnected."""
        self.ws.close()
        deadline = time.monotonic() + 10
        while self.mock.api("GET", f"/api/v1/clients/{self.uaid}")["connected"]:
            assert time.monotonic() < deadline, "the client still shows connected"
            time.sleep(0.05)


def push(session, endpoint):
    r = session.post(endpoint, headers={"TTL": "600"}, timeout=10)
    assert r.status_code == 201, (r.status_code, r.text)
    return urllib.parse.unquote(r.headers["Location"].rsplit("/", 1)[1])


def test_pushes_racing_a_hello_are_written_on_its_connection(mock):
    """§2.4: a push decided while the hello is recorded goes on that connection (or is held and
    written after the hello's answer); none stays `sent` on a live connection unwritten."""
    c = Channel(mock)
    stop = threading.Event()
    sent = []

    def sender():
        s = requests.Session()
        while not stop.is_set():
            sent.append(push(s, c.endpoint))

    senders = [threading.Thread(target=sender, daemon=True) for _ in range(3)]
    for t in senders:
        t.start()
    try:
        for _ in range(30):
            c.hello()
            got = set(c.notifications(time.monotonic() + 0.2))
            connection = mock.api("GET", f"/api/v1/clients/{c.uaid}")["connection"]["id"]
            on_it = {e["message_id"] for e in mock.inbox(c.token, status="sent")
                     if e["client_delivery"]["connection_id"] == connection}
            c.notifications(time.monotonic() + 3, lambda: on_it <= got, got=got)
            missing = on_it - got
            assert not missing, f"sent on {connection} but never written: {sorted(missing)}"
    finally:
        stop.set()
        for t in senders:
            t.join(10)
        c.close()
    assert len(sent) > 20, len(sent)


def entry_of(mock, token, version):
    return mock.api("GET", f"/api/v1/devices/{token}/messages/{urllib.parse.quote(version, safe='')}")


def test_a_delay_fault_holds_the_write_of_a_push_that_waited_for_the_client(mock):
    """§4.3: `{"delay_ms":N}` holds the write, also of a push held while the client was away and
    written after its next hello. §4.2: `sent` means written, so the push stays `pending` (no
    `client_delivery`, no `message.sent`) until the delay ends."""
    c = Channel(mock)
    c.away()
    version = push(requests.Session(), c.endpoint)
    fault = mock.fault({"transport": "autopush", "token": c.token}, {"delay_ms": 1500}, times=1)
    try:
        with EventStream(mock) as events:
            t0 = time.monotonic()
            c.hello()
            assert c.notifications(time.monotonic() + 0.8, ack=False) == [], "written before its delay"
            waiting = entry_of(mock, c.token, version)
            assert waiting["status"] == "pending" and waiting["client_delivery"] is None, waiting
            assert not [e for n, e in events.events if n == "message.sent" and e["message_id"] == version]
            got = []
            c.notifications(time.monotonic() + 5, lambda: version in got, got=got)
            assert got == [version], got
            assert time.monotonic() - t0 >= 1.5
            sent = events.wait("message.sent", lambda e: e["message_id"] == version)
            assert sent["client_delivery"]["sends"] == 1, sent
        assert fault["id"] not in mock.fault_ids(), "the fault was not spent"
        assert mock.message(version)["fault"] == fault["id"]
    finally:
        c.close()


def test_a_push_whose_delayed_write_outlived_its_connection_was_never_sent(mock):
    """§4.3: a delayed write whose connection closed first is not written; the push stays
    `pending` with no send counted, and the next hello writes it once (`sends` 1)."""
    c = Channel(mock)
    mock.fault({"transport": "autopush", "token": c.token}, {"delay_ms": 2500}, times=1)
    t0 = time.monotonic()
    version = push(requests.Session(), c.endpoint)
    c.away()
    assert time.monotonic() - t0 < 2.0, "the connection took too long to close for the test to mean anything"
    held = entry_of(mock, c.token, version)
    # Past the delay's end (the mock's clock is the wall clock here): the stale write is due and not made.
    time.sleep(max(0.0, rfc3339_s(held["accepted_at"]) + 3.0 - time.time()))
    held = entry_of(mock, c.token, version)
    assert held["status"] == "pending" and held["client_delivery"] is None, held
    c.hello()
    got = []
    c.notifications(time.monotonic() + 5, lambda: version in got, got=got)
    assert got == [version], got
    entry = wait_entry(mock, c.token, version, "delivered")
    assert entry["client_delivery"]["sends"] == 1, entry
    # Its first write was at the hello, not when the delayed one was decided.
    written_after = rfc3339_s(entry["client_delivery"]["first_sent_at"]) - rfc3339_s(entry["accepted_at"])
    assert written_after >= 2.9, entry
    c.close()


def test_a_delay_fault_of_0_ms_writes_at_once_and_records_the_write(mock):
    """§4.3: `{"delay_ms":0}` delays nothing: the push is written at once and is `sent`, its send
    counted, as without the fault."""
    c = Channel(mock)
    mock.fault({"transport": "autopush", "token": c.token}, {"delay_ms": 0}, times=1)
    version = push(requests.Session(), c.endpoint)
    got = []
    c.notifications(time.monotonic() + 5, lambda: version in got, ack=False, got=got)
    assert got == [version], got
    entry = wait_entry(mock, c.token, version, "sent")
    assert entry["client_delivery"]["sends"] == 1, entry
    c.close()


def test_message_sent_of_a_push_written_at_once_carries_its_client_delivery(mock):
    """docs/events.md: a real client's `message.sent` carries the entry's `client_delivery`, for a
    push written the moment it is sent as for one written later."""
    c = Channel(mock)
    with EventStream(mock) as events:
        version = push(requests.Session(), c.endpoint)
        sent = events.wait("message.sent", lambda e: e["message_id"] == version)
        cd = sent["client_delivery"]
        assert cd["sends"] == 1 and cd["connection_id"] and cd["first_sent_at"], sent
        assert cd == wait_entry(mock, c.token, version, "sent")["client_delivery"], sent
    c.close()


def test_what_changes_during_a_delayed_write_applies_to_it(mock):
    """§2.4 and §4.3: a delayed write is a write at its time: a push whose TTL ran out meanwhile
    is `expired` and not written; one its sender took back (`DELETE` of its `Location`) is
    `deleted`; one whose device was held offline (`PATCH {"online":false}`) is held and written
    once released."""
    c = Channel(mock)
    session = requests.Session()
    mock.fault({"transport": "autopush", "token": c.token}, {"delay_ms": 2000}, times=3)
    r = session.post(c.endpoint, headers={"TTL": "1"}, timeout=10)
    assert r.status_code == 201, r.text
    short = urllib.parse.unquote(r.headers["Location"].rsplit("/", 1)[1])
    r = session.post(c.endpoint, headers={"TTL": "600"}, timeout=10)
    taken_back = urllib.parse.unquote(r.headers["Location"].rsplit("/", 1)[1])
    held = push(session, c.endpoint)
    d = session.delete(r.headers["Location"], timeout=10)
    assert d.status_code == 204, (d.status_code, d.text)
    mock.api("PATCH", f"/api/v1/devices/{c.token}", json={"online": False})
    wait_entry(mock, c.token, taken_back, "deleted")
    wait_entry(mock, c.token, short, "expired")
    got = []
    c.notifications(time.monotonic() + 3.0, ack=False, got=got)
    assert got == [], f"written though settled or held during the delay: {got}"
    waiting = entry_of(mock, c.token, held)
    assert waiting["status"] == "pending" and waiting["client_delivery"] is None, waiting
    mock.api("PATCH", f"/api/v1/devices/{c.token}", json={"online": True})
    c.notifications(time.monotonic() + 5, lambda: held in got, got=got)
    assert got == [held], got
    assert wait_entry(mock, c.token, held, "delivered")["client_delivery"]["sends"] == 1
    c.close()


def test_a_slot_a_delayed_write_gives_up_goes_to_what_waits_for_room(mock):
    """§2.4: a connection has at most 100 pushes unacknowledged; one of them whose delayed write
    is not made (its device held offline meanwhile) leaves room, and what waited for it is
    written then, not at the next acknowledgement."""
    c = Channel(mock)
    other = str(uuid.uuid4())
    c.ws.send(json.dumps({"messageType": "register", "channelID": other}))
    while True:
        answer = json.loads(c.ws.recv(timeout=10))
        if answer.get("messageType") == "register":
            break
    assert answer["status"] == 200, answer
    other_token = mock.api("GET", "/api/v1/devices", params={"web_push_id": answer["pushEndpoint"].rsplit("/", 1)[1]})["items"][0]["token"]
    mock.fault({"transport": "autopush", "token": c.token}, {"delay_ms": 4000}, times=100)
    session = requests.Session()
    t0 = time.monotonic()
    for _ in range(100):
        push(session, c.endpoint)
    waiting = push(session, answer["pushEndpoint"])
    mock.api("PATCH", f"/api/v1/devices/{c.token}", json={"online": False})
    assert time.monotonic() - t0 < 3.5, "too slow to hold the device before the delays end for the test to mean anything"
    assert entry_of(mock, other_token, waiting)["status"] == "pending"
    got = []
    c.notifications(time.monotonic() + 10, lambda: waiting in got, ack=False, got=got)
    assert got == [waiting], got[:5]
    c.close()


def rfc3339_s(text):
    import datetime
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_push_held_for_a_real_client_shows_client_delivery_null(mock):
    """§4.2: a real client's entries and record recipients have `client_delivery`; one never
    written on a connection shows it null."""
    c = Channel(mock)
    c.away()
    version = push(requests.Session(), c.endpoint)
    entry = mock.api("GET", f"/api/v1/devices/{c.token}/messages/{urllib.parse.quote(version, safe='')}")
    assert entry["status"] == "pending" and "client_delivery" in entry and entry["client_delivery"] is None, entry
    recipient = mock.message(version)["recipients"][0]
    assert "client_delivery" in recipient and recipient["client_delivery"] is None, recipient
    # A fake device's entries have none.
    fake = mock.create_device(platform="android")
    r = requests.post(mock.base_url + "/fcm/send", json={"to": fake, "data": {"x": "1"}},
                      headers={"Authorization": f"key={KEY_A}"}, timeout=10)
    assert "client_delivery" not in mock.inbox(fake)[0], mock.inbox(fake)[0]
    assert r.status_code == 200


def test_a_push_unacknowledged_when_its_channel_unregistered_is_dropped_not_sent_again(mock):
    """§2.3: an unregistered channel's held notifications become `dropped` (`error_detail` `the
    channel unregistered`); so does one written and not acknowledged when the channel went, once
    its connection ends, instead of going out again on the next hello."""
    c = Channel(mock)
    version = push(requests.Session(), c.endpoint)
    got = []
    c.notifications(time.monotonic() + 5, lambda: version in got, ack=False, got=got)
    assert got == [version], got
    c.ws.send(json.dumps({"messageType": "unregister", "channelID": c.channel_id}))
    c.away()
    entry = wait_entry(mock, c.token, version, "dropped")
    assert entry["error_detail"] == "the channel unregistered", entry
    c.hello()
    assert c.notifications(time.monotonic() + 1, ack=False) == [], "written again to an unregistered channel"
    c.close()


def test_disconnect_answers_the_client_closed_and_the_push_held(mock):
    """§4.1: `:disconnect` closes the connection: its answer, and every read after it, show the
    client without a connection; a push sent right after is held for the next hello; the
    client's socket gets the close (4774 with back-off); one `client.closed`."""
    c = Channel(mock)
    connection = mock.api("GET", f"/api/v1/clients/{c.uaid}")["connection"]["id"]
    with EventStream(mock) as events:
        answer = mock.api("POST", f"/api/v1/clients/{c.uaid}:disconnect", json={"backoff": True})
        assert answer["connected"] is False and answer["connection"] is None, answer
        assert mock.device(c.token)["online"] is False
        version = push(requests.Session(), c.endpoint)
        entry = mock.api("GET", f"/api/v1/devices/{c.token}/messages/{urllib.parse.quote(version, safe='')}")
        assert entry["status"] == "pending", entry
        closed = events.wait("client.closed", lambda e: e["connection_id"] == connection)
        assert closed["code"] == 4774 and closed["reason"] == "disconnected by the control API, with back-off", closed
        try:
            while True:
                c.ws.recv(timeout=5)
        except ConnectionClosed as e:
            assert e.rcvd is not None and e.rcvd.code == 4774, e
        time.sleep(0.3)
        assert [e for n, e in events.events if n == "client.closed" and e["connection_id"] == connection] == [closed]
    c.hello()
    got = []
    c.notifications(time.monotonic() + 5, lambda: version in got, got=got)
    assert got == [version], got
    c.close()


def test_a_connection_closed_before_hello_publishes_client_closed(mock):
    """§2.5: every close publishes `client.closed`, also one before `hello`, when there is no
    client to name yet: its `client` has the clients API's keys with `id` null, the kind and the
    upgrade's user agent."""
    url = mock.base_url.replace("http://", "ws://", 1) + "/autopush"
    agent = "pre-hello-" + uuid.uuid4().hex[:8]
    with EventStream(mock) as events:
        for first, code, said in (({"messageType": "register", "channelID": str(uuid.uuid4())}, 1008, "register"),
                                  (b"\x00binary", 1003, "binary")):
            ws = connect(url, subprotocols=["push-notification"], user_agent_header=agent, open_timeout=10, close_timeout=2,
                         proxy=None, legacy=True)
            ws.send(first if isinstance(first, bytes) else json.dumps(first))
            try:
                while True:
                    ws.recv(timeout=5)
            except ConnectionClosed as e:
                assert e.rcvd is not None and e.rcvd.code == code, e
            closed = events.wait("client.closed", lambda e: e["client"]["user_agent"] == agent and e["code"] == code)
            assert closed["client"]["id"] is None and closed["client"]["kind"] == "autopush", closed
            assert closed["client"]["connected"] is False and closed["client"]["devices"] == [], closed
            assert closed["connection_id"].startswith("ws") and said in closed["reason"], closed


def test_a_reset_that_forgets_clients_publishes_each_close(mock):
    """§4.1: `POST /api/v1/reset?clients=false` forgets clients and closes their connections;
    each close publishes `client.closed`, as every close does. Last in the module: it resets."""
    c = Channel(mock)
    connection = mock.api("GET", f"/api/v1/clients/{c.uaid}")["connection"]["id"]
    with EventStream(mock) as events:
        mock.api("POST", "/api/v1/reset", params={"clients": "false"}, expect=204)
        closed = events.wait("client.closed", lambda e: e["connection_id"] == connection)
    assert closed["client"]["id"] == c.uaid and closed["client"]["connected"] is False, closed
    assert closed["reason"] == "reset: the client was forgotten" and closed["code"] == 1000, closed
    c.close()
