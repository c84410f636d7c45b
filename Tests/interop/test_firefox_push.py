"""Firefox ESR as a real Web Push receiver of the mock (real-clients.md §2, §4, §6 items 1-6 and
Firefox's half of 15): its push service speaks autopush over ws://127.0.0.1:H/autopush, a page at
http://localhost:P/ subscribes, pywebpush 2.5.0 sends to the subscription's endpoint, and the
service worker reports each push it handled (firefox.py's PushPage). What the mock recorded is
read through its control API.

One Firefox serves the module; each test subscribes a scope of its own, so each has its own
subscription (channel) and device. A push that must not arrive is shown not to by a later push
that does (the connection delivers in order), never by sleeping.
"""

import re
import secrets
import uuid

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from firefox import (EventStream, Subscribed, assert_delivered_by_ack, location_id, new_vapid,
                     vapid_key, wait_device, wait_entry)
from mocksupport import q
from webpush_crypto import b64u, raw_public

pytestmark = pytest.mark.firefox

# Firefox's Host is the mock's address: the endpoint is on the plain port, `{id}` 86 characters.
ENDPOINT_RE = r"http://127\.0\.0\.1:{port}/wp/[A-Za-z0-9_-]{{86}}"


@pytest.fixture
def subscribed(mock, firefox, push_page, push_session, request):
    """A new scope (named after the test) subscribed with a fresh VAPID key."""
    scope = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[-40:] + "-" + secrets.token_hex(3)
    return Subscribed(mock, firefox, push_page, push_session, scope, new_vapid())


# -- 1, 2: subscribe and receive ------------------------------------------------------------------

def test_subscribe_makes_one_autopush_device_and_aes128gcm_reaches_the_worker(mock, subscribed):
    port = mock.base_url.rsplit(":", 1)[1]
    endpoint = subscribed.sub["endpoint"]
    assert re.fullmatch(ENDPOINT_RE.format(port=port), endpoint), endpoint
    devices = mock.api("GET", "/api/v1/devices", params={"client_kind": "autopush"})["items"]
    assert [d["token"] for d in devices] == [subscribed.token], devices
    dev = devices[0]
    assert dev["platform"] == "web" and dev["state"] == "registered" and dev["online"] is True, dev
    assert dev["application_server_key"] == vapid_key(subscribed.vapid), dev
    assert dev["web_push"] == {"endpoint": endpoint, "expirationTime": None, "keys": None}, dev
    client = dev["client"]
    assert client["kind"] == "autopush" and client["connected"] is True, client
    assert re.fullmatch(r"[0-9a-f]{32}", client["id"]), client
    assert str(uuid.UUID(client["channel_id"])) == client["channel_id"], client
    assert "Firefox/" in client["user_agent"], client

    resp = subscribed.push("hello from pywebpush (aes128gcm)")
    assert resp.status_code == 201, resp.text
    message_id = location_id(resp)
    subscribed.page.wait_report(subscribed.scope, "hello from pywebpush (aes128gcm)",
                                firefox=subscribed.firefox)
    entry = wait_entry(mock, subscribed.token, message_id, "delivered", firefox=subscribed.firefox)
    assert_delivered_by_ack(entry, message_id)


def test_aesgcm_reaches_the_worker(subscribed):
    entry = subscribed.delivered("hello in the older aesgcm", content_encoding="aesgcm")
    assert_delivered_by_ack(entry)


# -- 3: refusals and the browser's verdicts --------------------------------------------------------

def test_a_push_signed_by_another_vapid_key_is_403_and_never_reaches_the_worker(subscribed):
    resp = subscribed.refused("signed by a stranger", vapid=new_vapid())
    assert resp.status_code == 403, (resp.status_code, resp.text)
    subscribed.delivered("after the stranger")
    assert "signed by a stranger" not in subscribed.reports(), subscribed.reports()


def test_a_body_for_other_keys_is_client_rejected_101(mock, subscribed):
    stranger = ec.generate_private_key(ec.SECP256R1())
    other = {"endpoint": subscribed.sub["endpoint"],
             "keys": {"p256dh": b64u(raw_public(stranger)), "auth": b64u(secrets.token_bytes(16))}}
    resp = subscribed.push("for someone else's keys", subscription=other)
    assert resp.status_code == 201, resp.text
    message_id = location_id(resp)
    entry = wait_entry(mock, subscribed.token, message_id, "client_rejected",
                       firefox=subscribed.firefox)
    cd = entry["client_delivery"]
    assert cd["ack"]["by"] == "ack" and cd["ack"]["code"] == 101, cd
    assert cd["rejection"]["code"] == 101, cd
    assert entry["webpush"]["relayed"] is True, entry
    subscribed.delivered("after the undecryptable one")
    assert "for someone else's keys" not in subscribed.reports(), subscribed.reports()


def test_a_throwing_push_handler_is_nacked_301(mock, subscribed):
    resp = subscribed.push("throw, please")
    message_id = location_id(resp)
    subscribed.page.wait_report(subscribed.scope, "throw, please", firefox=subscribed.firefox)
    entry = wait_entry(mock, subscribed.token, message_id, "client_rejected",
                       firefox=subscribed.firefox)
    cd = entry["client_delivery"]
    assert cd["ack"]["code"] == 100, cd  # handed to the worker first
    assert cd["rejection"]["code"] == 301, cd
    assert entry["delivered_at"], entry  # kept from the ack


# -- 4: offline --------------------------------------------------------------------------------------

def test_a_stopped_firefox_gets_its_unexpired_push_when_it_starts_again(mock, firefox, subscribed):
    uaid = firefox.uaid()
    assert subscribed.device["client"]["id"] == uaid, subscribed.device
    firefox.stop()
    try:
        wait_device(mock, subscribed.token, lambda d: d["client"]["connected"] is False,
                    "disconnected")
        kept = location_id(subscribed.push("kept while Firefox was off", ttl=600))
        gone = location_id(subscribed.push("expired while Firefox was off", ttl=30))
        for message_id in (kept, gone):
            wait_entry(mock, subscribed.token, message_id, "pending", timeout=5)
        mock.api("POST", "/api/v1/clock", json={"advance_s": 60})
        wait_entry(mock, subscribed.token, gone, "expired", timeout=5)
    finally:
        firefox.start()
    try:
        subscribed.page.wait_report(subscribed.scope, "kept while Firefox was off", firefox=firefox)
        assert_delivered_by_ack(wait_entry(mock, subscribed.token, kept, "delivered", firefox=firefox), kept)
        dev = wait_device(mock, subscribed.token, lambda d: d["client"]["connected"] is True, "connected")
        assert dev["client"]["id"] == uaid, dev  # its hello named its uaid
        subscribed.delivered("after the restart")
        assert "expired while Firefox was off" not in subscribed.reports(), subscribed.reports()
        assert mock.message(gone)["recipients"][0]["status"] == "expired", mock.message(gone)
    finally:
        mock.api("POST", "/api/v1/clock", json={"reset": True})


# -- 5: unsubscribe ----------------------------------------------------------------------------------

def test_unsubscribe_unregisters_the_device_and_the_next_push_is_410_errno_106(mock, firefox, subscribed):
    subscribed.delivered("before unsubscribing")
    # The tab is still on this scope's page (the fixture subscribed there).
    assert firefox.evaluate("window.subscribed.then(() => window.unsubscribe())") is True
    dev = wait_device(mock, subscribed.token, lambda d: d["state"] == "unregistered", "unregistered")
    assert dev["client"]["unregister_code"] == 200, dev
    resp = subscribed.refused("after unsubscribing")
    assert resp.status_code == 410, (resp.status_code, resp.text)
    body = resp.json()
    assert list(body) == ["code", "errno", "error", "message"], body
    assert body["code"] == 410 and body["errno"] == 106 and body["error"] == "Gone", body


# -- 6: held offline while connected, and reset -----------------------------------------------------

def test_a_device_held_offline_keeps_the_push_pending_until_it_is_online(mock, firefox, push_page,
                                                                        push_session, subscribed):
    witness = Subscribed(mock, firefox, push_page, push_session, subscribed.scope + "-w", new_vapid())
    mock.set_online(subscribed.token, False)
    message_id = location_id(subscribed.push("held while offline"))
    # The same connection carries the witness's push: once it arrived, the held one would have too.
    witness.delivered("the witness")
    wait_entry(mock, subscribed.token, message_id, "pending", timeout=5)
    assert subscribed.device["client"]["id"] == mock.device(subscribed.token)["client"]["id"]
    assert mock.device(subscribed.token)["client"]["connected"] is True
    assert "held while offline" not in subscribed.reports(), subscribed.reports()
    mock.set_online(subscribed.token, True)
    subscribed.page.wait_report(subscribed.scope, "held while offline", firefox=firefox)
    assert_delivered_by_ack(wait_entry(mock, subscribed.token, message_id, "delivered", firefox=firefox))


def test_after_a_reset_the_same_subscription_still_receives(mock, subscribed):
    subscribed.delivered("before the reset")
    mock.api("POST", "/api/v1/reset", expect=204)
    dev = mock.device(subscribed.token)
    assert dev["state"] == "registered" and dev["client"]["connected"] is True, dev
    assert mock.inbox(subscribed.token) == [], "the reset empties the inbox"
    assert_delivered_by_ack(subscribed.delivered("after the reset"))


# -- 15: clients and events --------------------------------------------------------------------------

def test_clients_list_firefox_and_the_event_stream_shows_its_connection_and_a_push(mock, firefox, subscribed):
    uaid = firefox.uaid()
    clients = mock.api("GET", "/api/v1/clients", params={"kind": "autopush"})["items"]
    mine = [c for c in clients if c["id"] == uaid]
    assert len(mine) == 1, clients
    c = mine[0]
    assert c["kind"] == "autopush" and c["connected"] is True, c
    assert "Firefox/" in c["user_agent"], c
    assert c["connection"] is not None and c["connection"]["tls"] is False, c
    assert subscribed.token in c["devices"], c

    with EventStream(mock) as events:
        # A dropped connection (not a back-off): Firefox comes back after dom.push.retryBaseInterval.
        mock.api("POST", f"/api/v1/clients/{q(uaid)}:disconnect", json={})
        events.wait("client.closed", lambda d: uaid in str(d))
        events.wait("client.connected", lambda d: uaid in str(d))
        wait_device(mock, subscribed.token, lambda d: d["client"]["connected"] is True, "connected again")
        resp = subscribed.push("seen on the event stream")
        message_id = location_id(resp)
        subscribed.page.wait_report(subscribed.scope, "seen on the event stream", firefox=firefox)
        events.wait("message.sent", lambda d: d.get("message_id") == message_id)
        done = events.wait("message.delivered", lambda d: d.get("message_id") == message_id)
    assert done["token"] == subscribed.token and done["status"] == "delivered", done
    assert done["client_delivery"]["ack"]["code"] == 100, done
