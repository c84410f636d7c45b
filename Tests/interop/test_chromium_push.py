"""Chromium as a real Web Push receiver of the mock over FCM's device side (real-clients.md §3,
§4, §5; §6 items 7, 8 and 15, the last also with Firefox on the same server): its GCM client checks in and registers with
the mock's /checkin and /c2dm/register3 and logs in over MCS (TLS, the mock's CA in its HOME's
NSS database); a page at http://localhost:P/ subscribes with a VAPID key; pywebpush 2.5.0 sends to
the subscription's endpoint, its origin replaced by the mock's (Debian's build reports
https://jmt17.google.com/fcm/send/{token}); the service worker reports each push it handled.

One Chromium serves the module (chromium_push.py); each test subscribes a scope of its own. The
test that restarts Chromium runs last.
"""

import json
import re
import secrets
import time

import pytest

from chromium_push import rewritten
from firefox import (EventStream, Subscribed, location_id, new_vapid, vapid_key, wait_device,
                     wait_entry)
from mocksupport import KEY_A, PROJECT_A, SENDER_A, q
from scanpage import DESKTOP, client_badge, js, listed_client, open_page, set_scheme

pytestmark = pytest.mark.chromium

JMT_RE = re.compile(r"https://jmt17\.google\.com/fcm/send/([A-Za-z0-9_:-]+)")
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{22}:APA91b[A-Za-z0-9_:-]{124}")
GOOGLE_SENDER = "745476177629"  # Chromium registers it at start; the mock answers a token, no device


class ChromiumSubscribed(Subscribed):
    """One scope's subscription in Chromium; pushes go to its endpoint on the mock's port."""

    def __init__(self, mock, chromium, page, session, scope, vapid):
        super().__init__(mock, chromium, page, session, scope, vapid)
        self.endpoint = self.sub["endpoint"]
        self.to_mock = dict(self.sub, endpoint=rewritten(self.endpoint, mock.base_url))

    def push(self, text, vapid=None, subscription=None, **kwargs):
        return super().push(text, vapid=vapid, subscription=subscription or self.to_mock, **kwargs)


@pytest.fixture
def subscribed(mock_mcs, chromium_gcm, push_page, push_session, request):
    scope = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[-40:] + "-" + secrets.token_hex(3)
    return ChromiumSubscribed(mock_mcs, chromium_gcm, push_page, push_session, scope, new_vapid())


def gcm_client(mock, android_id, chromium, connected=True, timeout=20):
    """`GET /api/v1/clients/{id}` once its `connected` is as wanted (the MCS login follows the
    registration)."""
    deadline = time.monotonic() + timeout
    while True:
        c = mock.api("GET", f"/api/v1/clients/{q(android_id)}")
        if c["connected"] is connected:
            return c
        if time.monotonic() >= deadline:
            raise AssertionError(f"client {android_id} not connected={connected} within {timeout}s: "
                                 f"{json.dumps(c)[:2000]}\nmock stderr (end):\n"
                                 f"{mock.stderr_tail(2000)}\n{chromium.log_tail()}")
        time.sleep(0.1)


def assert_delivered_by_stream_ack(entry, message_id):
    assert entry["status"] == "delivered" and entry["delivered_at"], entry
    cd = entry["client_delivery"]
    assert cd["kind"] == "mcs" and cd["persistent_id"] == message_id, cd
    assert cd["ack"]["by"] == "stream_ack", cd
    assert cd["rejection"] is None, cd
    wp = entry["webpush"]
    assert wp["relayed"] is True and wp["ciphertext_base64"], wp


# -- 7: subscribe, checkin, register3, MCS login, a push delivered -----------------------------------

def test_subscribe_registers_over_gcm_and_a_push_is_delivered_by_stream_ack(mock_mcs, chromium_gcm,
                                                                             push_page, subscribed):
    m = JMT_RE.fullmatch(subscribed.endpoint)
    assert m, f"Debian's Chromium should report a jmt17.google.com endpoint: {subscribed.endpoint}"
    token = m.group(1)
    assert TOKEN_RE.fullmatch(token), token
    dev = subscribed.device
    assert dev["token"] == token, dev
    assert dev["platform"] == "web" and dev["state"] == "registered", dev
    assert dev["application_server_key"] == vapid_key(subscribed.vapid), dev
    assert dev["web_push"]["endpoint"] == subscribed.endpoint, dev
    assert dev["app"] == push_page.origin + "/", dev
    client = dev["client"]
    assert client["kind"] == "gcm", client
    assert client["subtype"].startswith(f"wp:{push_page.origin}/#") and client["subtype"].endswith("-V2"), client
    assert client["sender"] == vapid_key(subscribed.vapid), client
    assert "HeadlessChrome/" in client["user_agent"], client

    c = gcm_client(mock_mcs, client["id"], chromium_gcm)
    assert c["kind"] == "gcm" and c["connection"]["tls"] is not False, c
    assert re.fullmatch(r"chrome-\d+\.\d+\.\d+\.\d+", c["client_version"] or ""), c
    assert c["checkin"] and c["checkin"]["chrome_version"] == c["client_version"][len("chrome-"):], c
    senders = {r["sender"]: r for r in c["registrations"]}
    assert GOOGLE_SENDER in senders, c["registrations"]
    assert senders[GOOGLE_SENDER]["token"] not in c["devices"], c
    assert senders[vapid_key(subscribed.vapid)]["token"] == token, c["registrations"]
    assert token in c["devices"], c
    # The MCS login follows the registration: online once it is in.
    assert mock_mcs.device(token)["online"] is True, mock_mcs.device(token)

    text = "hello Chromium over MCS " + secrets.token_hex(4)
    resp = subscribed.push(text)
    assert resp.status_code == 201, (resp.status_code, resp.text)
    message_id = location_id(resp)
    push_page.wait_report(subscribed.scope, text, firefox=chromium_gcm)
    entry = wait_entry(mock_mcs, token, message_id, "delivered", firefox=chromium_gcm)
    assert_delivered_by_stream_ack(entry, message_id)


def test_the_page_shows_chromiums_device_and_client_with_a_chromium_badge(mock_mcs, chromium_gcm, subscribed, page):
    """§4.4: a real client's device gets a badge naming it (Chromium, from its checkin's user agent
    and its login's `chrome-` version) with a connected dot and the user agent on hover; the
    Clients list names it too, with its MCS connection."""
    client = subscribed.device["client"]
    gcm_client(mock_mcs, client["id"], chromium_gcm)
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock_mcs.base_url + "/")
    page.wait_for(f"!!document.querySelector('#devices tr[data-token={js(subscribed.token)}] .client-badge')",
                  what="Chromium's device with its badge")
    b = client_badge(page, subscribed.token)
    assert b["name"] == "Chromium" and "on" in b["dot"].split(), b
    assert "user agent: " + client["user_agent"] in b["title"], b
    listed = listed_client(page, client["id"])
    assert listed["name"] == "Chromium", listed
    assert re.search(r"m\d+ · \S+ · tls", listed["text"]), listed


def test_aesgcm_push_reaches_the_worker(subscribed):
    text = "aesgcm to Chromium " + secrets.token_hex(4)
    resp = subscribed.push(text, content_encoding="aesgcm")
    assert resp.status_code == 201, (resp.status_code, resp.text)
    message_id = location_id(resp)
    subscribed.page.wait_report(subscribed.scope, text, firefox=subscribed.firefox)
    entry = wait_entry(subscribed.mock, subscribed.token, message_id, "delivered",
                       firefox=subscribed.firefox)
    assert_delivered_by_stream_ack(entry, message_id)


# -- §1, §3.4, §3.6: an FCM registration over Chromium's subscription (Firebase's web SDK) ----------

def test_an_fcm_registration_over_chromiums_subscription_reaches_its_worker(mock_mcs, subscribed):
    """An installation and an FCM registration naming Chromium's subscription, as Firebase's web
    SDK makes them: an FCM send to its token is encrypted by the mock with the subscription's
    keys and written over Chromium's MCS connection from the subscription's sender (its VAPID
    key: Chromium finds the keys by it); the service worker gets the FCM JSON."""
    import requests
    api = {"x-goog-api-key": "any-key"}
    fid = "d" + secrets.token_hex(11)[:21]
    r = requests.post(f"{mock_mcs.base_url}/v1/projects/{PROJECT_A}/installations", headers=api, timeout=10,
                      json={"fid": fid, "appId": f"1:{SENDER_A}:web:abc", "authVersion": "FIS_v2", "sdkVersion": "w:0.6.4"})
    assert r.status_code == 200, r.text
    fis = {**api, "x-goog-firebase-installations-auth": r.json()["authToken"]["token"]}
    keys = subscribed.sub["keys"]
    r = requests.post(f"{mock_mcs.base_url}/v1/projects/{PROJECT_A}/registrations", headers=fis, timeout=10,
                      json={"web": {"applicationPubKey": vapid_key(subscribed.vapid), "auth": keys["auth"],
                                    "endpoint": subscribed.endpoint, "p256dh": keys["p256dh"]}})
    assert r.status_code == 200, r.text
    token = r.json()["token"]
    nonce = "to Chromium through FCM " + secrets.token_hex(4)
    r = requests.post(mock_mcs.base_url + "/fcm/send", json={"to": token, "data": {"hello": nonce}},
                      headers={"Authorization": f"key={KEY_A}"}, timeout=10)
    assert r.status_code == 200 and r.json()["success"] == 1, r.text
    message_id = r.json()["results"][0]["message_id"]
    entry = wait_entry(mock_mcs, token, message_id, "delivered", firefox=subscribed.firefox)
    plaintext = entry["client_delivery"]["plaintext"]
    assert plaintext["data"] == {"hello": nonce} and plaintext["from"] == SENDER_A, entry
    subscribed.page.wait_report(subscribed.scope, json.dumps(plaintext, separators=(",", ":")),
                                firefox=subscribed.firefox)


# -- 8: unsubscribe ------------------------------------------------------------------------------

def test_unsubscribe_deletes_the_registration_and_the_endpoint_answers_410(mock_mcs, chromium_gcm,
                                                                          subscribed):
    subscribed.delivered("before unsubscribe")
    android_id = subscribed.device["client"]["id"]
    # Chromium's register3 delete=true must be answered `token=...` (its Instance ID parser),
    # else unsubscribe() still resolves but the registration is kept.
    assert chromium_gcm.evaluate("window.unsubscribe()") is True
    dev = wait_device(mock_mcs, subscribed.token, lambda d: d["state"] == "unregistered",
                      "unregistered after unsubscribe()")
    assert dev["client"]["kind"] == "gcm", dev
    c = mock_mcs.api("GET", f"/api/v1/clients/{q(android_id)}")
    assert subscribed.token not in [r["token"] for r in c["registrations"]], c["registrations"]
    resp = subscribed.refused("after unsubscribe")
    assert resp.status_code == 410, (resp.status_code, resp.text)
    assert "after unsubscribe" not in subscribed.reports()


# -- 15 (Chromium's half): the clients list and the event stream ------------------------------------

def push_sent_and_delivered(events, sub, text):
    """Pushes `text` to subscription `sub` (201) and waits for its `message.sent` (for `sub`'s
    token) and `message.delivered` events; the latter's data."""
    resp = sub.push(text)
    assert resp.status_code == 201, (resp.status_code, resp.text)
    message_id = location_id(resp)
    sent = events.wait("message.sent", lambda d: d.get("message_id") == message_id)
    assert sent["token"] == sub.token, sent
    return events.wait("message.delivered", lambda d: d.get("message_id") == message_id)


@pytest.mark.firefox
def test_firefox_and_chromium_on_one_server_are_listed_and_each_push_is_on_the_event_stream(
        mock_mcs, chromium_gcm, push_page, push_session, subscribed):
    """§6 item 15 with both browsers on one server: the clients list shows Firefox (autopush)
    and Chromium (gcm) connected with their user agents, and each push to either is
    `message.sent` then `message.delivered` on the event stream."""
    from firefox import Firefox, require_autopush
    url = mock_mcs.base_url.replace("http://", "ws://", 1) + "/autopush"
    require_autopush(url)
    ff = Firefox(url)
    try:
        with EventStream(mock_mcs) as events:
            ff.start()
            ff_sub = Subscribed(mock_mcs, ff, push_page, push_session,
                                "both-browsers-" + secrets.token_hex(3), new_vapid())
            uaid = ff.uaid()
            events.wait("client.connected", lambda d: uaid in json.dumps(d), timeout=30)
            connected = {c["id"]: c for c in mock_mcs.api("GET", "/api/v1/clients")["items"] if c["connected"]}
            fx = connected.get(uaid)
            assert fx and fx["kind"] == "autopush" and "Firefox/" in fx["user_agent"], connected
            android_id = subscribed.device["client"]["id"]
            cr = connected.get(android_id)
            assert cr and cr["kind"] == "gcm" and "HeadlessChrome/" in cr["user_agent"], connected
            for sub, browser in ((subscribed, chromium_gcm), (ff_sub, ff)):
                text = "one server, two browsers " + secrets.token_hex(4)
                done = push_sent_and_delivered(events, sub, text)
                assert done["token"] == sub.token and done["status"] == "delivered", done
                sub.page.wait_report(sub.scope, text, firefox=browser)
    finally:
        ff.close()


def test_clients_list_chromium_and_events_follow_a_push_after_a_restart(mock_mcs, chromium_gcm,
                                                                      subscribed):
    android_id = subscribed.device["client"]["id"]
    listed = mock_mcs.api("GET", "/api/v1/clients", params={"kind": "gcm"})["items"]
    mine = [c for c in listed if c["id"] == android_id]
    assert len(mine) == 1, listed
    assert mine[0]["connected"] is True and "HeadlessChrome/" in mine[0]["user_agent"], mine[0]

    with EventStream(mock_mcs) as events:
        chromium_gcm.restart()
        # The same profile: GCM starts again with its android id and registrations.
        chromium_gcm.navigate(subscribed.page.url(subscribed.scope, vapid_key(subscribed.vapid)))
        again = chromium_gcm.evaluate("window.currentSubscription()")
        assert again and again["endpoint"] == subscribed.endpoint, again
        events.wait("client.connected", lambda d: android_id in json.dumps(d), timeout=30)
        gcm_client(mock_mcs, android_id, chromium_gcm)
        text = "after a restart " + secrets.token_hex(4)
        done = push_sent_and_delivered(events, subscribed, text)
        assert done["client_delivery"]["ack"]["by"] == "stream_ack", done
    subscribed.page.wait_report(subscribed.scope, text, firefox=chromium_gcm)
