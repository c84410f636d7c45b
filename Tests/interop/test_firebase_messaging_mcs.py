"""The MCS port and the device side's refusals with raw clients beside firebase-messaging 0.4.5
(real-clients.md §3.2, §3.4, §3.5, §3.7; §6 items 11 (a raw client's redelivery), 12 and 14):
hostile TLS clients are closed without a byte while firebase-messaging on the same server keeps
receiving; a raw GCM client that does not acknowledge gets the same bytes after logging in again;
register3, FCM registrations and legacy sends refuse what Google refuses.
"""

import re
import secrets
import threading
import time

import pytest
import requests

from fcmclient import (RawMcs, login_request, pb_bytes, pb_fields, pb_int, pb_varint, raw_checkin,
                       raw_login, raw_register)
from firefox import EventStream, wait_entry
from mocksupport import APP_A, KEY_A, PROJECT_A, SENDER_A

pytestmark = [pytest.mark.firebase_messaging, pytest.mark.mcs]

TAG_LOGIN_REQUEST, TAG_LOGIN_RESPONSE, TAG_DATA = 2, 3, 8


def legacy_send(mock, body):
    resp = mock.http.post(mock.base_url + "/fcm/send", json=body, timeout=15,
                          headers={"Authorization": f"key={KEY_A}"})
    assert resp.status_code == 200, (resp.status_code, resp.text)
    return resp.json()


def still_receives(mock, client):
    """A legacy send to firebase-messaging's token arrives and is delivered."""
    data = {"still": secrets.token_hex(4)}
    res = legacy_send(mock, {"to": client.token, "data": data})
    assert res["success"] == 1, res
    message_id = res["results"][0]["message_id"]
    payload, _ = client.by_message_id(message_id)
    assert payload["data"] == data, payload
    wait_entry(mock, client.token, message_id, "delivered", firefox=client)


def closed_silently(mock, conn, what):
    try:
        wrote = conn.closed_within(5)
    except TimeoutError as e:
        raise AssertionError(f"{what}: {e}\nmock stderr (end):\n{mock.stderr_tail(2000)}")
    finally:
        conn.close()
    assert wrote == b"", f"{what}: the server wrote {wrote!r} before closing"


# -- 12: hostile input on the MCS port -----------------------------------------------------------------

def test_version_41_and_a_malformed_login_request_is_closed(mock_mcs, fm_client):
    conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    conn.send(b"\x29" + bytes([TAG_LOGIN_REQUEST]) + pb_varint(5) + b"\xff\xff\xff\xff\xff")
    closed_silently(mock_mcs, conn, "version 41 then a LoginRequest that does not parse")
    still_receives(mock_mcs, fm_client)


def test_version_40_is_closed(mock_mcs, fm_client):
    android_id, token = raw_checkin(mock_mcs.base_url)
    conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    body = login_request(android_id, token)
    conn.send(b"\x28" + bytes([TAG_LOGIN_REQUEST]) + pb_varint(len(body)) + body)
    closed_silently(mock_mcs, conn, "version byte 40")
    still_receives(mock_mcs, fm_client)


def test_a_70_kib_packet_is_closed(mock_mcs, fm_client):
    conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    size = 70 * 1024
    try:
        conn.send(b"\x29" + bytes([TAG_LOGIN_REQUEST]) + pb_varint(size) + pb_bytes(1, b"x" * (size - 4)))
    except OSError:
        pass  # closed while the packet was still being written: what is wanted
    closed_silently(mock_mcs, conn, "a 70 KiB packet")
    still_receives(mock_mcs, fm_client)


def test_a_hostile_close_before_a_login_publishes_client_closed(mock_mcs):
    """§3.7: each close emits `client.closed`, also one before a login named a client: its
    `client` has `id` null and kind `gcm`, the reason the log's."""
    with EventStream(mock_mcs) as events:
        conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
        conn.send(b"\x28" + bytes([TAG_LOGIN_REQUEST]) + pb_varint(1) + b"\x00")
        closed_silently(mock_mcs, conn, "version byte 40")
        closed = events.wait("client.closed", lambda e: e["client"]["id"] is None and e["client"]["kind"] == "gcm")
    assert re.fullmatch(r"m\d+", closed["connection_id"]) and closed["reason"], closed
    assert closed["client"]["connected"] is False and closed["client"]["connection"] is None, closed
    line = f"mcs connection closed conn={closed['connection_id']} "
    deadline = time.monotonic() + 5
    while line not in mock_mcs.stderr_tail(200_000) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert line in mock_mcs.stderr_tail(200_000), mock_mcs.stderr_tail(2000)


@pytest.mark.parametrize("auth_service", [None, 1, 3])
def test_a_login_without_auth_service_2_is_refused(mock_mcs, auth_service):
    """§3.5: the LoginRequest's `auth_service` must be 2 (ANDROID_ID), even with the right pair:
    a LoginResponse with error 401, then Close, then the end."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    try:
        conn.send_packet(TAG_LOGIN_REQUEST, login_request(android_id, security_token, auth_service=auth_service), version=True)
        tag, body = conn.packet()
        assert tag == TAG_LOGIN_RESPONSE, (tag, body)
        error = pb_fields(pb_fields(body)[3][0])
        assert error[1] == [401], error
        assert b"auth_service" in error[2][0], error
        tag, _ = conn.packet()
        assert tag == 4, f"a Close after the refusal, not tag {tag}"
        with pytest.raises(EOFError):
            conn.packet(timeout=5)
        # Both log lines name the android id that was refused.
        refused = f"info mcs login refused conn="
        closed = re.compile(rf"info mcs connection closed conn=\S+ android_id={android_id} remote=\S+ reason=login refused: 401 ")
        deadline = time.monotonic() + 5
        while not closed.search(mock_mcs.stderr_tail(200_000)) and time.monotonic() < deadline:
            time.sleep(0.05)
        tail = mock_mcs.stderr_tail(200_000)
        assert closed.search(tail), tail[-2000:]
        assert f"android_id={android_id} " in tail[tail.index(refused):], tail[-2000:]
    finally:
        conn.close()


# -- 11: a raw client that never acknowledges gets the same bytes after logging in again -------------

def test_a_raw_client_that_does_not_ack_gets_the_same_bytes_after_logging_in_again(mock_mcs):
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    dev = mock_mcs.device(token)
    assert dev["platform"] == "android" and dev["client"]["kind"] == "gcm", dev

    def login():
        conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
        conn.send_packet(TAG_LOGIN_REQUEST, login_request(android_id, security_token), version=True)
        tag, body = conn.packet()
        assert tag == TAG_LOGIN_RESPONSE, (tag, body)
        assert 3 not in pb_fields(body), f"login refused: {pb_fields(body)}"
        return conn

    first = login()
    res = legacy_send(mock_mcs, {"to": token, "data": {"raw": "once"}})
    assert res["success"] == 1, res
    message_id = res["results"][0]["message_id"]
    tag, sent = first.packet()
    assert tag == TAG_DATA, (tag, sent)
    fields = pb_fields(sent)
    assert fields[9] == [message_id.encode()], fields
    wait_entry(mock_mcs, token, message_id, "sent")
    first.close()
    wait_entry(mock_mcs, token, message_id, "pending")

    second = login()
    try:
        tag, again = second.packet()
    finally:
        second.close()
    assert tag == TAG_DATA and again == sent, (tag, again, sent)


def test_another_clients_persistent_ids_at_login_settle_nothing(mock_mcs):
    """A LoginRequest's `received_persistent_id` settles only the logging-in client's own
    deliveries: a second android id naming the first's unacknowledged push leaves it `pending`,
    and the first gets it at its next login."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    first = raw_login(mock_mcs, android_id, security_token)
    res = legacy_send(mock_mcs, {"to": token, "data": {"raw": "mine"}})
    message_id = res["results"][0]["message_id"]
    tag, sent = first.packet()
    assert tag == TAG_DATA, (tag, sent)
    first.close()
    wait_entry(mock_mcs, token, message_id, "pending")

    other_id, other_token = raw_checkin(mock_mcs.base_url)
    other = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    try:
        other.send_packet(TAG_LOGIN_REQUEST, login_request(other_id, other_token, received=[message_id]), version=True)
        tag, body = other.packet()
        assert tag == TAG_LOGIN_RESPONSE and 3 not in pb_fields(body), (tag, pb_fields(body))
        other.send_packet(0, b"")  # a HeartbeatPing: answered once the login is wholly handled
        tag, _ = other.packet()
        assert tag == 1, f"a HeartbeatAck, not tag {tag}"
    finally:
        other.close()
    entry = [e for e in mock_mcs.inbox(token) if e["message_id"] == message_id][0]
    assert entry["status"] == "pending", entry

    again = raw_login(mock_mcs, android_id, security_token)
    try:
        tag, body = again.packet()
    finally:
        again.close()
    assert tag == TAG_DATA and body == sent, (tag, body, sent)


def test_a_newer_login_takes_over_what_was_written_and_it_reads_sent(mock_mcs):
    """§3.5: a newer login of the same android id closes the older connection (`client.closed`
    names it, §3.7) and writes again what it had unacknowledged: the entry is `sent` on the new
    connection (`sends` 2)."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    events = EventStream(mock_mcs)
    first = raw_login(mock_mcs, android_id, security_token)
    try:
        res = legacy_send(mock_mcs, {"to": token, "data": {"taken": "over"}})
        message_id = res["results"][0]["message_id"]
        tag, sent = first.packet()
        assert tag == TAG_DATA, (tag, sent)
        older = entry_connection(mock_mcs, token, message_id)
        second = raw_login(mock_mcs, android_id, security_token)
        try:
            tag, again = second.packet()
            assert tag == TAG_DATA and pb_fields(again)[9] == [message_id.encode()], (tag, pb_fields(again))
            entry = wait_entry(mock_mcs, token, message_id, "sent")
            cd = entry["client_delivery"]
            assert cd["sends"] == 2 and cd["ack"] is None and cd["connection_id"] != older, cd
            closed = events.wait("client.closed", lambda e: e["connection_id"] == older)
            assert closed["client"]["id"] == str(android_id), closed
            assert closed["reason"] == "replaced by a newer login of this android id", closed
            assert closed["client"]["connection"]["id"] == cd["connection_id"], closed
        finally:
            second.close()
    finally:
        first.close()
        events.close()


def entry_connection(mock, token, message_id):
    """The connection the entry was last written on."""
    return wait_entry(mock, token, message_id, "sent")["client_delivery"]["connection_id"]


TAG_HEARTBEAT_PING, TAG_HEARTBEAT_ACK, TAG_IQ = 0, 1, 7


def stream_ack(last_stream_id_received):
    """Chromium's StreamAck: an IqStanza (type SET, id "") with extension 13 and no data."""
    return (pb_int(2, 1) + pb_bytes(3, b"") + pb_bytes(7, pb_int(1, 13) + pb_bytes(2, b""))
            + pb_int(10, last_stream_id_received))


def test_an_acknowledgement_ahead_of_the_packets_made_acknowledges_nothing(mock_mcs):
    """§3.5: a delivery written as server packet n is `delivered` by a client packet whose
    `last_stream_id_received` reaches n. A count ahead of the packets the server has made (a client
    that kept its counter from an earlier connection) is no count of this connection's packets:
    a push written later stays `sent` until a count that comes after it. The connection's `last_frame_at`
    follows every frame (§4.1)."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        conn.send_packet(TAG_IQ, stream_ack(3))
        # Packets are handled in order: the HeartbeatAck (server packet 2) says the ack was read.
        conn.send_packet(TAG_HEARTBEAT_PING, b"")
        tag, _ = conn.packet()
        assert tag == TAG_HEARTBEAT_ACK, tag
        res = legacy_send(mock_mcs, {"to": token, "data": {"acked": "first"}})
        message_id = res["results"][0]["message_id"]
        tag, sent = conn.packet()
        assert tag == TAG_DATA and pb_fields(sent)[9] == [message_id.encode()], (tag, pb_fields(sent))
        time.sleep(0.3)
        assert wait_entry(mock_mcs, token, message_id, "sent")["client_delivery"]["ack"] is None
        conn.send_packet(TAG_IQ, stream_ack(3))
        entry = wait_entry(mock_mcs, token, message_id, "delivered")
        assert entry["client_delivery"]["ack"]["by"] == "stream_ack", entry["client_delivery"]
        # §4.1: the connection shows the client's last frame (the login is the first).
        c = mock_mcs.api("GET", f"/api/v1/clients/{android_id}")["connection"]
        assert c["last_frame_at"] and c["last_frame_at"] >= c["connected_at"], c
        assert c["last_heartbeat_at"] and c["last_frame_at"] >= c["last_heartbeat_at"], c
        # A frame that settles nothing moves it too.
        time.sleep(0.01)
        conn.send_packet(TAG_IQ, stream_ack(3))
        deadline = time.monotonic() + 5
        while True:
            later = mock_mcs.api("GET", f"/api/v1/clients/{android_id}")["connection"]
            if later["last_frame_at"] > c["last_frame_at"]:
                break
            assert time.monotonic() < deadline, (c, later)
            time.sleep(0.05)
        assert later["last_heartbeat_at"] == c["last_heartbeat_at"], later
    finally:
        conn.close()


def test_a_deleted_messages_notice_is_written_at_login(mock_mcs):
    """§3.6: more than 100 held for an offline registration are dropped for one
    `deleted_messages` notice, written over MCS at the next login (`message_type`,
    `total_deleted` and nothing else: not the registration's `subtype`; never encrypted) and
    `delivered` by its SelectiveAck."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A,
                         **{"X-subtype": "com.example.notices"})
    for i in range(101):
        assert legacy_send(mock_mcs, {"to": token, "data": {"i": str(i)}})["success"] == 1
    held = mock_mcs.inbox(token, status="pending")
    notices = [e for e in held if e.get("message_type") == "deleted_messages"]
    assert len(notices) == 1 and notices[0]["total_deleted"] == 101, held[:3]
    notice_id = notices[0]["message_id"]
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        tag, body = conn.packet()
        assert tag == TAG_DATA, (tag, body)
        f = pb_fields(body)
        assert f[9] == [notice_id.encode()] and f[3] == [SENDER_A.encode()], f
        pairs = [(p[1][0].decode(), p[2][0].decode()) for p in (pb_fields(a) for a in f.get(7, []))]
        assert pairs == [("message_type", "deleted_messages"), ("total_deleted", "101")], pairs
        assert 21 not in f, "a notice carries no raw_data"
        # IqStanza{type SET, id "", extension{id 12, data SelectiveAck{id}}}
        conn.send_packet(7, pb_int(2, 1) + pb_bytes(3, b"") + pb_bytes(7, pb_int(1, 12) + pb_bytes(2, pb_bytes(1, notice_id))))
        entry = wait_entry(mock_mcs, token, notice_id, "delivered")
        assert entry["client_delivery"]["ack"]["by"] == "selective_ack", entry
        # One info line for the frame, as docs/events.md shows it.
        line = f"info mcs dir=in conn={entry['client_delivery']['connection_id']} android_id={android_id} tag=IqStanza ext=12 persistent_ids={notice_id} delivered=1"
        deadline = time.monotonic() + 5
        while line not in mock_mcs.stderr_tail(200_000) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert line in mock_mcs.stderr_tail(200_000), mock_mcs.stderr_tail(2000)
    finally:
        conn.close()


def test_a_purge_after_the_notice_was_written_is_told_by_a_notice_of_its_own(mock_mcs):
    """A second purge while a device is away raises the notice it holds, but not one the client
    was written already (unacknowledged when its connection went): that one is written again
    with the same bytes, and a new notice tells of what was lost after it."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)

    def totals(body):
        f = pb_fields(body)
        pairs = dict((p[1][0].decode(), p[2][0].decode()) for p in (pb_fields(a) for a in f.get(7, [])))
        return f[9][0].decode(), pairs.get("total_deleted")

    for i in range(101):
        assert legacy_send(mock_mcs, {"to": token, "data": {"i": str(i)}})["success"] == 1
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        tag, body = conn.packet()
        assert tag == TAG_DATA, tag
        first, total = totals(body)
        assert total == "101", total
    finally:
        conn.close()
    wait_entry(mock_mcs, token, first, "pending")
    for i in range(101):
        assert legacy_send(mock_mcs, {"to": token, "data": {"j": str(i)}})["success"] == 1
    notices = [e for e in mock_mcs.inbox(token, status="pending") if e.get("message_type") == "deleted_messages"]
    assert [(e["message_id"], e["total_deleted"]) for e in notices] == [(first, 101), (notices[-1]["message_id"], 101)], notices
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        got = [totals(conn.packet()[1]) for _ in range(2)]
        assert got == [(first, "101"), (notices[-1]["message_id"], "101")], got
    finally:
        conn.close()


def test_a_multicast_to_two_registrations_of_one_raw_client_writes_each_its_stanza(mock_mcs):
    """One send to two registrations on one connection: each stanza names its own registration,
    persistent id and app, with the send's data."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    tokens = [raw_register(mock_mcs.base_url, android_id, security_token, app=app, sender=SENDER_A)
              for app in (APP_A, APP_A + ".second")]
    assert tokens[0] != tokens[1]
    conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    try:
        conn.send_packet(TAG_LOGIN_REQUEST, login_request(android_id, security_token), version=True)
        tag, body = conn.packet()
        assert tag == TAG_LOGIN_RESPONSE and 3 not in pb_fields(body), (tag, pb_fields(body))
        res = legacy_send(mock_mcs, {"registration_ids": tokens, "data": {"both": "yes"}})
        assert res["success"] == 2, res
        ids = [r["message_id"] for r in res["results"]]
        stanzas = []
        for _ in tokens:
            tag, sent = conn.packet()
            assert tag == TAG_DATA, (tag, sent)
            stanzas.append(pb_fields(sent))
        for token, message_id in zip(tokens, ids):
            wait_entry(mock_mcs, token, message_id, "sent")
    finally:
        conn.close()
    for token, message_id, app, f in zip(tokens, ids, (APP_A, APP_A + ".second"), stanzas):
        assert f[9] == [message_id.encode()], f        # persistent_id
        assert f[4] == [token.encode()], f             # to: the registration
        assert f[5] == [app.encode()], f               # category: its app
        assert f[3] == [SENDER_A.encode()], f          # from: the project's sender id
        data = {pb_fields(a)[1][0]: pb_fields(a)[2][0] for a in f[7]}
        assert data == {b"both": b"yes"}, data


# -- 14: refusals ------------------------------------------------------------------------------------------

def test_register3_without_authorization_is_authentication_failed(mock_mcs):
    r = requests.post(mock_mcs.base_url + "/c2dm/register3", timeout=10,
                      data={"app": "org.chromium.linux", "sender": SENDER_A})
    assert r.status_code == 401 and r.text == "Error=AUTHENTICATION_FAILED", (r.status_code, r.text)


def test_an_fcm_registration_with_an_unknown_installation_token_is_unauthenticated(mock_mcs, fm_client):
    web = fm_client.credentials["fcm"]["registration"]["web"]
    r = requests.post(f"{mock_mcs.base_url}/v1/projects/{PROJECT_A}/registrations", timeout=10,
                      headers={"x-goog-api-key": "any-api-key",
                               "x-goog-firebase-installations-auth": "not-an-installation-token"},
                      json={"web": web})
    assert r.status_code == 401, (r.status_code, r.text)
    assert r.json()["error"]["status"] == "UNAUTHENTICATED", r.text


def test_a_legacy_send_to_a_web_push_registration_is_invalid_registration(mock_mcs, fm_client):
    wp_token = fm_client.credentials["gcm"]["token"]
    assert mock_mcs.device(wp_token)["client"]["subtype"].startswith("wp:")
    res = legacy_send(mock_mcs, {"to": wp_token, "data": {"never": "delivered"}})
    assert res["failure"] == 1 and res["results"][0]["error"] == "InvalidRegistration", res
    assert not [e for e in mock_mcs.inbox(wp_token) if e.get("data") == {"never": "delivered"}]


def test_sends_racing_a_login_are_written_on_it(mock_mcs):
    """§3.5: a send accepted while a login is being recorded is written on that connection (or
    held and written at the login): none stays `sent` on a live connection without its packet.
    Sends go on a thread without pause while the client logs in again and again; after each
    login it reads and acknowledges for a while, then every message `sent` on the connection
    must have come within 3 s."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    stop = threading.Event()
    sent_ids = []

    def sender():
        s = requests.Session()
        while not stop.is_set():
            r = s.post(mock_mcs.base_url + "/fcm/send", json={"to": token, "data": {"n": str(len(sent_ids))}},
                       headers={"Authorization": f"key={KEY_A}"}, timeout=10)
            assert r.status_code == 200, r.text
            sent_ids.append(r.json()["results"][0]["message_id"])

    def read_and_ack(conn, got, until, enough=lambda: False):
        while time.monotonic() < until and not enough():
            try:
                tag, body = conn.packet(timeout=max(0.01, min(0.1, until - time.monotonic())))
            except TimeoutError:
                continue
            if tag == TAG_DATA:
                pid = pb_fields(body)[9][0]
                got.add(pid.decode())
                conn.send_packet(7, pb_int(2, 1) + pb_bytes(3, b"") + pb_bytes(7, pb_int(1, 12) + pb_bytes(2, pb_bytes(1, pid))))

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        for _ in range(20):
            conn = raw_login(mock_mcs, android_id, security_token)
            try:
                got = set()
                read_and_ack(conn, got, time.monotonic() + 0.2)
                connection = mock_mcs.api("GET", f"/api/v1/clients/{android_id}")["connection"]["id"]
                on_it = {e["message_id"] for e in mock_mcs.inbox(token, status="sent")
                         if e["client_delivery"]["connection_id"] == connection}
                read_and_ack(conn, got, time.monotonic() + 3, lambda: on_it <= got)
                missing = on_it - got
                assert not missing, f"sent on {connection} but never written: {sorted(missing)}"
            finally:
                conn.close()
    finally:
        stop.set()
        t.join(10)
    assert len(sent_ids) > 20, len(sent_ids)
