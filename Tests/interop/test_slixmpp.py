"""slixmpp 1.17.0 (a real XMPP client) against fcm-mock's XMPP (FCM CCS) listener.

The client is set up the way FCM CCS clients set it up: the JID SENDER_ID@fcm.googleapis.com,
a server key as the password, SASL PLAIN allowed on an unencrypted stream (the mock offers no
TLS and no STARTTLS, so only slixmpp's plain-TCP connection method is enabled), and a stanza
plugin for the <gcm xmlns="google:mobile:data"> payload. Every wait on the client is bounded
(asyncio.wait_for), and so is each test's whole exchange, so a client that hangs fails its test.
What devices received is read back through the control API, as in the pyfcm tests; so are the
server's side of receipts and upstream messages (a connection's unacked count, an upstream
message's status), after an XEP-0199 ping has made sure the client's acks were processed.
"""

import asyncio
import contextlib
import ipaddress
import json
import logging
import secrets

import pytest
from slixmpp import JID, ClientXMPP, Message
from slixmpp.xmlstream import ElementBase, register_stanza_plugin
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import StanzaPath

from mocksupport import APP_A, APP_B, KEY_A, KEY_B, SENDER_A, SENDER_B, q

GCM_NS = "google:mobile:data"
STEP_S = 5.0        # any single wait on the XMPP client
SCENARIO_S = 20.0   # one test's whole XMPP exchange, connect to close
POLL_TRIES = 100    # reads of the control API while waiting for a state it reports


class Gcm(ElementBase):
    """The CCS payload: <message><gcm xmlns="google:mobile:data">JSON</gcm></message>. The mock
    answers with a prefixed <data:gcm xmlns:data="google:mobile:data">, the same element."""

    namespace = GCM_NS
    name = "gcm"
    plugin_attrib = "gcm"
    interfaces = {"payload"}

    def get_payload(self):
        return self.xml.text or ""

    def set_payload(self, value):
        self.xml.text = value

    def del_payload(self):
        self.xml.text = None


register_stanza_plugin(Message, Gcm)


def _settle(future, value):
    if not future.done():
        future.set_result(value)


class CcsClient(ClientXMPP):
    """slixmpp's ClientXMPP as an FCM CCS app server configures it, plus futures and a queue
    for what the tests wait on. Made inside the running event loop."""

    def __init__(self, jid, password):
        # unencrypted_plain: let SASL PLAIN go over a stream that is neither TLS nor STARTTLS.
        super().__init__(jid, password,
                         plugin_config={"feature_mechanisms": {"unencrypted_plain": True}})
        # slixmpp 1.17 chooses connection methods with these flags (no use_ssl/force_starttls
        # arguments to connect() any more): plain TCP only, no direct TLS, no STARTTLS.
        self.enable_direct_tls = False
        self.enable_starttls = False
        self.enable_plaintext = True
        self.register_plugin("xep_0199")

        loop = asyncio.get_running_loop()
        self.session_started = loop.create_future()
        self.auth_failed = loop.create_future()
        self.closed = loop.create_future()
        self.ccs = asyncio.Queue()      # (the <message>'s attributes, the <gcm> text)
        self.add_event_handler("session_start", lambda _: _settle(self.session_started, True))
        self.add_event_handler("failed_auth", lambda stanza: _settle(self.auth_failed, stanza))
        self.add_event_handler("disconnected", lambda reason: _settle(self.closed, reason))
        self.register_handler(Callback("FCM CCS payload", StanzaPath("message/gcm"),
                                       self._on_gcm))

    def _on_gcm(self, msg):
        # The attributes as they came on the wire (msg["type"] would read "normal" when absent).
        self.ccs.put_nowait((dict(msg.xml.attrib), msg["gcm"]["payload"]))

    def state(self):
        return (f"authenticated={self.authenticated} session_started={self.sessionstarted} "
                f"failed_auth={self.auth_failed.done()} disconnected={self.closed.done()}")

    async def wait_session(self):
        try:
            await asyncio.wait_for(asyncio.shield(self.session_started), STEP_S)
        except TimeoutError:
            pytest.fail(f"slixmpp had no session_start within {STEP_S:.0f}s ({self.state()})",
                        pytrace=False)

    def send_downstream(self, payload):
        """Sends one <gcm> message (a downstream message, or an ack of what the server sent),
        built by slixmpp (it adds its own stanza id)."""
        msg = self.Message()
        msg["gcm"]["payload"] = json.dumps(payload)
        msg.send()

    async def next_ccs_stanza(self):
        """The next <message> with a <gcm> payload from the server: (its attributes, the
        payload decoded)."""
        try:
            attrs, text = await asyncio.wait_for(self.ccs.get(), STEP_S)
        except TimeoutError:
            pytest.fail(f"no <gcm> message from the server within {STEP_S:.0f}s ({self.state()})",
                        pytrace=False)
        return attrs, json.loads(text)

    async def next_ccs(self):
        """The next <gcm> payload the server sent (an ack, a nack, ...), decoded."""
        _, payload = await self.next_ccs_stanza()
        return payload

    def unread_ccs(self):
        """The <gcm> payloads received and not yet read, decoded (the queue is emptied)."""
        out = []
        while not self.ccs.empty():
            out.append(json.loads(self.ccs.get_nowait()[1]))
        return out

    async def ping(self):
        """An XEP-0199 ping of the server, answered. The server handles a connection's stanzas
        in order, so whatever this client sent before the ping has been processed by then."""
        await asyncio.wait_for(
            self.plugin["xep_0199"].send_ping(JID(self.boundjid.domain), timeout=STEP_S),
            STEP_S + 1)

    async def close(self):
        self.cancel_connection_attempt()
        try:
            await asyncio.wait_for(self.disconnect(wait=2.0), STEP_S)
        except TimeoutError:
            pass
        finally:
            self.abort()


@contextlib.asynccontextmanager
async def ccs_client(mock, jid, password):
    """A connecting CcsClient; it is closed (bounded) however the block ends."""
    assert mock.xmpp_port, "the mock fixture did not expose the XMPP port"
    assert ipaddress.ip_address(mock.xmpp_host).is_loopback, mock.xmpp_host
    client = CcsClient(jid, password)
    client.connect(mock.xmpp_host, mock.xmpp_port)
    try:
        yield client
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def ccs_session(mock, jid=f"{SENDER_A}@fcm.googleapis.com", password=KEY_A):
    async with ccs_client(mock, jid, password) as client:
        await client.wait_session()
        yield client


def run(scenario):
    """Runs one test's XMPP exchange in a fresh event loop, bounded as a whole."""
    async def bounded():
        return await asyncio.wait_for(scenario(), SCENARIO_S)
    return asyncio.run(bounded())


def ccs_id(prefix="interop"):
    return f"{prefix}-{secrets.token_hex(6)}"


def poll(read, done, what):
    """Reads the control API until `done(value)`, at most POLL_TRIES times (no sleeping: every
    read is a round trip to the server). Returns the last value; fails if it never got there."""
    for _ in range(POLL_TRIES):
        value = read()
        if done(value):
            return value
    pytest.fail(f"{what}: not reached after {POLL_TRIES} reads of the control API; last: {value!r}",
                pytrace=False)


def connection_of(mock, sender_id, resource):
    """The control API's record of the one XMPP connection of `sender_id` bound to `resource`."""
    found = [c for c in mock.xmpp_connections(sender_id) if c["resource"] == resource]
    assert len(found) == 1, (resource, mock.xmpp_connections())
    return found[0]


@pytest.fixture(autouse=True)
def _xmpp_trace(caplog):
    # slixmpp logs every SEND/RECV at DEBUG: a failing test shows the whole exchange.
    caplog.set_level(logging.DEBUG, logger="slixmpp")


@pytest.mark.parametrize("domain", ["fcm.googleapis.com", "gcm.googleapis.com"])
def test_downstream_message_is_acked_and_delivered(mock, domain):
    token = mock.create_device()
    mid = ccs_id()
    data = {"client": "slixmpp", "nonce": mid}

    async def scenario():
        async with ccs_session(mock, f"{SENDER_A}@{domain}", KEY_A) as client:
            bound = JID(client.boundjid)
            client.send_downstream({"to": token, "message_id": mid, "data": data})
            ack = await client.next_ccs()
            return bound, ack

    bound, ack = run(scenario)
    assert bound.bare == f"{SENDER_A}@gcm.googleapis.com" and bound.resource, bound
    assert ack == {"message_type": "ack", "from": token, "message_id": mid}, ack

    items = mock.wait_inbox(token, 1)
    assert len(items) == 1, items
    entry = items[0]
    assert entry["status"] == "delivered", entry
    assert entry["data"] == data, entry
    assert entry["notification"] is None, entry
    assert entry["via"]["transport"] == "xmpp", entry
    assert entry["via"]["target"] == "token", entry

    record = mock.message(entry["message_id"])
    assert record["sender_id"] == SENDER_A, record
    assert record["transport"] == "xmpp", record
    assert record["target"] == {"kind": "token", "value": token}, record
    assert record["data"] == data, record
    recipients = {r["token"]: r for r in record["recipients"]}
    assert recipients[token]["status"] == "delivered", record


@pytest.mark.parametrize("password", ["AAAAinterop:not-a-server-key", KEY_B],
                         ids=["unknown-key", "other-projects-key"])
def test_wrong_password_fails_auth_without_session(mock, password):
    async def scenario():
        async with ccs_client(mock, f"{SENDER_A}@fcm.googleapis.com", password) as client:
            try:
                failure = await asyncio.wait_for(asyncio.shield(client.auth_failed), STEP_S)
            except TimeoutError:
                pytest.fail(f"no failed_auth within {STEP_S:.0f}s ({client.state()})",
                            pytrace=False)
            # The stream ends after the failure (the mock closes it, and slixmpp, out of
            # mechanisms to try, closes its side): no session can start on it.
            try:
                await asyncio.wait_for(asyncio.shield(client.closed), STEP_S)
            except TimeoutError:
                pytest.fail(f"the stream stayed open {STEP_S:.0f}s after the SASL failure "
                            f"({client.state()})", pytrace=False)
            return (failure["condition"], client.authenticated, client.sessionstarted,
                    client.session_started.done())

    condition, authenticated, session, session_event = run(scenario)
    assert condition == "not-authorized", condition
    assert not authenticated
    assert not session and not session_event


def test_unregistered_device_gets_nack_and_nothing(mock):
    gone = mock.create_device()
    live = mock.create_device()
    dev = mock.api("POST", f"/api/v1/devices/{q(gone)}:unregister")
    assert dev["token"] == gone and dev["state"] == "unregistered", dev
    nack_id, ack_id = ccs_id(), ccs_id()

    async def scenario():
        async with ccs_session(mock) as client:
            client.send_downstream({"to": gone, "message_id": nack_id,
                                    "data": {"nonce": nack_id}})
            nack = await client.next_ccs()
            # A nack leaves the stream usable: the next message, to a registered device, is acked.
            client.send_downstream({"to": live, "message_id": ack_id,
                                    "data": {"nonce": ack_id}})
            ack = await client.next_ccs()
            return nack, ack

    nack, ack = run(scenario)
    assert nack["message_type"] == "nack", nack
    assert nack["from"] == gone and nack["message_id"] == nack_id, nack
    assert nack["error"] == "DEVICE_UNREGISTERED", nack
    assert isinstance(nack.get("error_description"), str) and nack["error_description"], nack
    assert ack == {"message_type": "ack", "from": live, "message_id": ack_id}, ack

    # The later message is in; the nacked one was never delivered, and is recorded as rejected.
    items = mock.wait_inbox(live, 1)
    assert [e["data"] for e in items] == [{"nonce": ack_id}], items
    assert items[0]["via"]["transport"] == "xmpp", items
    assert [e for e in mock.inbox(gone) if e.get("status") == "delivered"] == []
    assert [e for e in mock.inbox(gone) if nack_id in json.dumps(e)] == []
    rejected = mock.rejected_for(gone)
    assert len(rejected) == 1, rejected
    assert rejected[0]["transport"] == "xmpp", rejected
    assert rejected[0]["data"] == {"nonce": nack_id}, rejected
    assert [r["status"] for r in rejected[0]["recipients"]] == ["failed"], rejected
    assert mock.device(gone)["state"] == "unregistered"


def test_ping_is_answered(mock):
    async def scenario():
        async with ccs_session(mock) as client:
            ping = client.plugin["xep_0199"]
            # What slixmpp's whitespace keepalive sends (every 300 s): the stream must take it.
            client.send_raw(" ")
            # send_ping raises IqError on an error answer and IqTimeout on none.
            reply = await asyncio.wait_for(
                ping.send_ping(JID(client.boundjid.domain), timeout=STEP_S), STEP_S + 1)
            # ping() to a JID other than the bound domain also raises on an error answer.
            rtt = await asyncio.wait_for(
                ping.ping(JID("fcm.googleapis.com"), timeout=STEP_S), STEP_S + 1)
            return reply["type"], reply["id"], rtt

    reply_type, reply_id, rtt = run(scenario)
    assert reply_type == "result", reply_type
    assert reply_id, reply_id
    assert isinstance(rtt, float) and 0 <= rtt < STEP_S, rtt


def test_delivery_receipt_is_sent_and_acked(mock):
    token = mock.create_device()
    mid = ccs_id("r")
    data = {"client": "slixmpp", "nonce": mid}

    async def scenario():
        async with ccs_session(mock) as client:
            resource = client.boundjid.resource
            before = await asyncio.to_thread(mock.clock_millis)
            client.send_downstream({"to": token, "message_id": mid, "data": data,
                                    "delivery_receipt_requested": True})
            ack = await client.next_ccs()
            receipt_attrs, receipt = await client.next_ccs_stanza()
            after = await asyncio.to_thread(mock.clock_millis)
            # The receipt waits for this client's ack.
            pending = await asyncio.to_thread(connection_of, mock, SENDER_A, resource)
            client.send_downstream({"to": "gcm.googleapis.com", "message_id": f"dr2:{mid}",
                                    "message_type": "ack"})
            await client.ping()
            unread = client.unread_ccs()  # a nack of the ack (BAD_ACK) would be here by now
            settled = await asyncio.to_thread(
                poll, lambda: connection_of(mock, SENDER_A, resource),
                lambda c: c["unacked"] == 0, "the receipt's ack cleared the connection")
            return ack, receipt_attrs, receipt, before, after, pending, unread, settled

    ack, receipt_attrs, receipt, before, after, pending, unread, settled = run(scenario)
    assert ack == {"message_type": "ack", "from": token, "message_id": mid}, ack
    assert receipt_attrs.get("type", "normal") == "normal", receipt_attrs

    stamp = receipt.get("data", {}).get("message_sent_timestamp")
    assert isinstance(stamp, str) and stamp.isdigit(), receipt
    assert before <= int(stamp) <= after, (before, stamp, after)
    assert receipt == {
        "message_type": "receipt",
        "message_id": f"dr2:{mid}",
        "from": "gcm.googleapis.com",
        "category": APP_A,
        "data": {
            "message_status": "MESSAGE_SENT_TO_DEVICE",
            "original_message_id": mid,
            "device_registration_id": token,
            "message_sent_timestamp": stamp,
        },
    }, receipt

    assert pending["unacked"] == 1, pending
    assert unread == [], unread
    assert settled["unacked"] == 0 and settled["draining"] is False, settled

    items = mock.wait_inbox(token, 1)
    assert [e["data"] for e in items] == [data], items
    assert items[0]["status"] == "delivered", items
    assert items[0]["via"]["transport"] == "xmpp", items


@pytest.mark.parametrize("when", ["before-connect", "while-connected"])
def test_upstream_message_is_received_and_acked(mock, when):
    # A project of its own (B): no other test's connection can take its upstream messages.
    token = mock.create_device(sender_id=SENDER_B, app=APP_B)
    uid = ccs_id("u")
    data = {"hello": "world"}
    queued = None
    if when == "before-connect":
        # An earlier test's connection of B may still be closing on the server's side.
        poll(lambda: mock.xmpp_connections(SENDER_B), lambda cs: cs == [],
             "no XMPP connection of the second project")
        created = mock.create_upstream(token, data, uid)
        assert created["status"] == "queued", created
        queued = mock.upstream(token)
    created_holder = {}

    async def scenario():
        async with ccs_session(mock, f"{SENDER_B}@fcm.googleapis.com", KEY_B) as client:
            resource = client.boundjid.resource
            if when == "while-connected":
                created_holder["created"] = await asyncio.to_thread(
                    mock.create_upstream, token, data, uid)
            attrs, payload = await client.next_ccs_stanza()
            conn = await asyncio.to_thread(connection_of, mock, SENDER_B, resource)
            sent = await asyncio.to_thread(mock.upstream, token)
            client.send_downstream({"to": token, "message_id": uid, "message_type": "ack"})
            await client.ping()
            unread = client.unread_ccs()
            acked = await asyncio.to_thread(
                poll, lambda: mock.upstream(token),
                lambda items: len(items) == 1 and items[0]["status"] != "sent",
                "the upstream message's ack recorded")
            settled = await asyncio.to_thread(connection_of, mock, SENDER_B, resource)
            return attrs, payload, conn, sent, unread, acked, settled

    attrs, payload, conn, sent, unread, acked, settled = run(scenario)

    if queued is not None:
        assert [(u["message_id"], u["status"], u["sent_at"]) for u in queued] == [
            (uid, "queued", None)], queued
    else:
        created = created_holder["created"]
        assert created["message_id"] == uid and created["status"] in ("queued", "sent"), created

    assert attrs.get("to") == f"{SENDER_B}@fcm.googleapis.com", attrs
    assert attrs.get("from") == "devices@gcm.googleapis.com", attrs
    assert attrs.get("type") == "normal", attrs
    assert payload == {"data": data, "time_to_live": 86400, "from": token, "message_id": uid,
                       "category": APP_B}, payload

    assert conn["unacked"] == 1, conn
    assert len(sent) == 1, sent
    assert sent[0]["status"] == "sent" and sent[0]["sent_at"], sent
    assert sent[0]["connection_id"] == conn["id"], (sent, conn)

    assert unread == [], unread
    entry = acked[0]
    assert entry["message_id"] == uid and entry["token"] == token, entry
    assert entry["sender_id"] == SENDER_B and entry["category"] == APP_B, entry
    assert entry["data"] == data, entry
    assert entry["status"] == "acked" and entry["acked_at"], entry
    assert settled["unacked"] == 0, settled
    # Closing the connection after the ack leaves it acked (an unacked one would be queued again).
    assert [(u["message_id"], u["status"]) for u in mock.upstream(token)] == [(uid, "acked")]


def test_a_receipt_for_a_real_client_waits_for_its_acknowledgement(mock_mcs):
    """A raw GCM client logged in over MCS (fcmclient.py): the message is written to it at once,
    but it reaches the device when the client acknowledges it (real-clients.md §4.2), and so
    the receipt comes then."""
    from fcmclient import pb_bytes, pb_fields, pb_int, raw_checkin, raw_login, raw_register
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    conn = raw_login(mock_mcs, android_id, security_token)
    mid = ccs_id("real")

    def written():
        while True:
            tag, body = conn.packet(timeout=STEP_S)
            if tag == 8:  # DataMessageStanza
                return pb_fields(body)[9][0].decode()

    def selective_ack(persistent_id):
        ack = pb_int(2, 1) + pb_bytes(3, b"") + pb_bytes(7, pb_int(1, 12) + pb_bytes(2, pb_bytes(1, persistent_id)))
        conn.send_packet(7, ack)

    async def scenario():
        async with ccs_session(mock_mcs) as client:
            client.send_downstream({"to": token, "message_id": mid, "data": {"n": "1"},
                                    "delivery_receipt_requested": True})
            ack = await client.next_ccs()
            persistent_id = await asyncio.to_thread(written)
            await client.ping()
            early = client.unread_ccs()  # written, not acknowledged: no receipt yet
            await asyncio.to_thread(selective_ack, persistent_id)
            _, receipt = await client.next_ccs_stanza()
            return ack, early, persistent_id, receipt

    try:
        ack, early, persistent_id, receipt = run(scenario)
    finally:
        conn.close()
    assert ack == {"message_type": "ack", "from": token, "message_id": mid}, ack
    assert early == [], early
    assert receipt["message_type"] == "receipt" and receipt["category"] == APP_A, receipt
    assert receipt["data"]["original_message_id"] == mid, receipt
    assert receipt["data"]["device_registration_id"] == token, receipt
    assert receipt["data"]["message_status"] == "MESSAGE_SENT_TO_DEVICE", receipt
    entry = mock_mcs.api("GET", f"/api/v1/devices/{q(token)}/messages/{q(persistent_id)}")
    assert entry["status"] == "delivered", entry
