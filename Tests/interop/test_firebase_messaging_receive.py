"""firebase-messaging 0.4.5 as a real FCM receiver of the mock (real-clients.md §3, §4, §5; §6
items 9, 10 and 11): it checks in, registers (register3 `wp:`), makes a Firebase installation and
an FCM registration, logs in over MCS (TLS, the mock's CA as SSL_CERT_FILE) and receives what
firebase-admin 7.7.0 (v1, the "pointed" set-up of v1support.py) and the legacy /fcm/send send to
its token, encrypted by the mock (aesgcm), each checked in the client's callback and in what the
mock recorded.

One client serves the module (fcmclient.py, a child process); its messages are matched by
`fcmMessageId`, the message id the mock names.
"""

import json
import re
import secrets
import time
import warnings

import pytest
from firebase_admin import messaging

from firefox import wait_entry
from mocksupport import KEY_A, PROJECT_A, SENDER_A, q
from scanpage import DESKTOP, client_badge, js, listed_client, open_detail, open_page, set_scheme
from v1support import pointed

pytestmark = pytest.mark.firebase_messaging


@pytest.fixture(scope="module")
def sdk(mock_mcs, tmp_path_factory):
    with pointed(mock_mcs, tmp_path_factory.mktemp("pointed")) as s:
        yield s


def to_token(token, **fields):
    """A v1 Message to a registration token (firebase-admin 7.x deprecates `token=`; the
    receiver only has a token)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Message.token is deprecated", DeprecationWarning)
        return messaging.Message(token=token, **fields)


def v1_send(sdk, message):
    name = messaging.send(message, app=sdk.app)
    prefix = f"projects/{PROJECT_A}/messages/"
    assert name.startswith(prefix), name
    return name[len(prefix):]


def legacy_send(mock, body):
    resp = mock.http.post(mock.base_url + "/fcm/send", json=body, timeout=15,
                          headers={"Authorization": f"key={KEY_A}"})
    assert resp.status_code == 200, (resp.status_code, resp.text)
    return resp.json()


def wait_disconnected(mock, android_id, client, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        c = mock.api("GET", f"/api/v1/clients/{q(android_id)}")
        if c["connected"] is False:
            return c
        if time.monotonic() >= deadline:
            raise AssertionError(f"client {android_id} still connected {timeout}s after firebase-"
                                 f"messaging stopped: {c}\n{client.log_tail()}")
        time.sleep(0.1)


def assert_delivered_by_selective_ack(entry, message_id, client):
    assert entry["status"] == "delivered" and entry["delivered_at"], entry
    cd = entry["client_delivery"]
    assert cd["kind"] == "mcs" and cd["persistent_id"] == message_id, cd
    assert cd["ack"]["by"] == "selective_ack", cd
    assert cd["encryption"] == "aesgcm", cd
    assert cd["via"] == client.credentials["gcm"]["token"], cd


def test_the_page_shows_its_devices_and_client_as_firebase_messaging(mock_mcs, fm_client, page):
    """§4.4: firebase-messaging's FCM registration and the `wp:` registration it travels over get a
    firebase-messaging badge (its checkin's aiohttp user agent, a login version without `chrome-`)
    with a connected dot; the Clients list names the client so too."""
    wp = fm_client.credentials["gcm"]["token"]
    android_id = mock_mcs.device(wp)["client"]["id"]
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock_mcs.base_url + "/")
    for token in (fm_client.token, wp):
        page.wait_for(f"!!document.querySelector('#devices tr[data-token={js(token)}] .client-badge')",
                      what=f"firebase-messaging's device {token[:12]}… with its badge")
        b = client_badge(page, token)
        assert b["name"] == "firebase-messaging" and "on" in b["dot"].split(), (token, b)
    assert listed_client(page, android_id)["name"] == "firebase-messaging"


def test_the_page_shows_what_the_mock_encrypted_and_the_delivery_on_the_connection(mock_mcs, fm_client, sdk, page):
    """§4.4: an `fcm` delivery's preview shows the JSON the mock encrypted for the registration;
    its timeline the write on the MCS connection and the acknowledgement (the step's title names
    the `persistent_id`)."""
    marker = "shown " + secrets.token_hex(4)
    message_id = v1_send(sdk, to_token(fm_client.token, data={"k": marker}))
    fm_client.by_message_id(message_id)
    entry = wait_entry(mock_mcs, fm_client.token, message_id, "delivered")
    set_scheme(page, "light", DESKTOP)
    open_detail(page, mock_mcs.base_url, message_id)
    page.click("#detail .detail-tabs button[data-tab=Previews]")
    page.wait_for("!!document.querySelector('#detail .pv-encrypted pre')", what="the JSON the mock encrypted")
    shown = page.eval("document.querySelector('#detail .pv-encrypted pre').textContent")
    assert json.loads(shown) == entry["client_delivery"]["plaintext"] and json.loads(shown)["data"]["k"] == marker, shown
    assert page.eval("document.querySelector('#detail .pv-encrypted .pv-meta').textContent") == \
        "encrypted by the mock (aesgcm) for the registration's keys:"
    assert page.visible("#detail .pv-encrypted pre")
    page.click("#detail .detail-tabs button[data-tab=Recipients]")
    page.wait_for("!!document.querySelector('#detail .tab-panel[data-tab=Recipients] ol.timeline li.sent')", what="the timeline")
    steps = page.eval("[...document.querySelectorAll('#detail .tab-panel[data-tab=Recipients] ol.timeline li')]"
                      ".map(li => [li.querySelector('.what').textContent, li.title])")
    assert steps[0][0] == "accepted" and steps[-1][0] == "delivered", steps
    assert re.fullmatch(r"sent on m\d+ · acked after [\d.]+ (ms|s|min)", steps[1][0]), steps
    assert steps[1][1] == "persistent_id " + message_id, steps


# -- 9: registration and a v1 data message ------------------------------------------------------------

def test_registers_and_receives_a_v1_data_message(mock_mcs, fm_client, sdk):
    token = fm_client.token
    creds = fm_client.credentials
    dev = mock_mcs.device(token)
    assert dev["platform"] == "web" and dev["state"] == "registered", dev
    assert dev["client"]["kind"] == "fcm", dev
    assert dev["fid"] == creds["fcm"]["installation"]["fid"], (dev, creds["fcm"]["installation"])
    assert dev["web_push"]["endpoint"].endswith("/fcm/send/" + creds["gcm"]["token"]), dev
    assert dev["web_push"]["keys"]["p256dh"] == creds["keys"]["public"].rstrip("="), dev
    gcm = mock_mcs.device(creds["gcm"]["token"])
    assert gcm["client"]["kind"] == "gcm" and gcm["client"]["subtype"] == creds["gcm"]["app_id"], gcm

    data = {"score": "5x1", "nonce": secrets.token_hex(4)}
    message_id = v1_send(sdk, to_token(token, data=data))
    payload, persistent_id = fm_client.by_message_id(message_id)
    assert payload["data"] == data, payload
    assert payload["from"] == SENDER_A, payload
    assert persistent_id == message_id, (persistent_id, message_id)
    entry = wait_entry(mock_mcs, token, message_id, "delivered", firefox=fm_client)
    assert_delivered_by_selective_ack(entry, message_id, fm_client)


# -- 10: a notification message, a topic send, a legacy send ------------------------------------------

def test_receives_a_v1_notification_message(mock_mcs, fm_client, sdk):
    title = "Goal " + secrets.token_hex(3)
    message_id = v1_send(sdk, to_token(fm_client.token, notification=messaging.Notification(
        title=title, body="in the 90th minute")))
    payload, _ = fm_client.by_message_id(message_id)
    assert payload["notification"]["title"] == title, payload
    assert payload["notification"]["body"] == "in the 90th minute", payload
    entry = wait_entry(mock_mcs, fm_client.token, message_id, "delivered", firefox=fm_client)
    assert_delivered_by_selective_ack(entry, message_id, fm_client)


def test_receives_a_topic_send_after_subscribe_to_topic(mock_mcs, fm_client, sdk):
    topic = "fm-" + secrets.token_hex(4)
    res = messaging.subscribe_to_topic([fm_client.token], topic, app=sdk.app)
    assert (res.success_count, res.failure_count) == (1, 0), res.errors
    assert topic in mock_mcs.device(fm_client.token)["topics"]
    name = messaging.send(messaging.Message(topic=topic, data={"edition": topic}), app=sdk.app)
    payload, persistent_id = fm_client.wait_notification(
        lambda p, pid: p.get("data") == {"edition": topic}, what=f"the send to topic {topic} ({name})")
    entry = wait_entry(mock_mcs, fm_client.token, persistent_id, "delivered", firefox=fm_client)
    assert entry["via"]["target"] == "topic", entry
    assert payload["fcmMessageId"] == persistent_id, payload


def test_receives_fcm_options_with_the_link_and_the_analytics_label(mock_mcs, fm_client, sdk):
    """§3.6: `fcmOptions` carries `webpush.fcm_options` as sent, `link` and `analytics_label`
    (firebase-admin's WebpushFCMOptions has no label: the v1 request is sent as JSON, with the
    same service account's access token)."""
    bearer = sdk.app.credential.get_access_token().access_token
    options = {"link": "https://example.test/match/" + secrets.token_hex(3), "analytics_label": "spring-push"}
    body = {"message": {"token": fm_client.token, "data": {"n": secrets.token_hex(4)},
                        "webpush": {"fcm_options": options}}}
    resp = mock_mcs.http.post(f"{mock_mcs.base_url}/v1/projects/{PROJECT_A}/messages:send", json=body, timeout=15,
                              headers={"Authorization": f"Bearer {bearer}"})
    assert resp.status_code == 200, (resp.status_code, resp.text)
    message_id = resp.json()["name"].rsplit("/", 1)[1]
    payload, _ = fm_client.by_message_id(message_id)
    assert payload["fcmOptions"] == options, payload
    entry = wait_entry(mock_mcs, fm_client.token, message_id, "delivered", firefox=fm_client)
    assert_delivered_by_selective_ack(entry, message_id, fm_client)


def test_receives_a_legacy_send_to_its_token(mock_mcs, fm_client):
    data = {"legacy": secrets.token_hex(4)}
    res = legacy_send(mock_mcs, {"to": fm_client.token, "data": data})
    assert res["success"] == 1, res
    message_id = res["results"][0]["message_id"]
    payload, persistent_id = fm_client.by_message_id(message_id)
    assert payload["data"] == data and payload["from"] == SENDER_A, payload
    assert persistent_id == message_id
    entry = wait_entry(mock_mcs, fm_client.token, message_id, "delivered", firefox=fm_client)
    assert_delivered_by_selective_ack(entry, message_id, fm_client)


def test_patch_online_holds_and_releases_its_registration_while_it_stays_connected(mock_mcs, fm_client, sdk):
    """§1 and §4.1: `PATCH {"online":false}` holds what is sent to the FCM registration while
    firebase-messaging stays connected; `{"online":true}` puts it back online and writes what it
    held at once."""
    held = mock_mcs.api("PATCH", f"/api/v1/devices/{q(fm_client.token)}", json={"online": False})
    assert held["online"] is False and held["client"]["connected"] is True, held
    data = {"held": secrets.token_hex(4)}
    message_id = v1_send(sdk, to_token(fm_client.token, data=data))
    wait_entry(mock_mcs, fm_client.token, message_id, "pending", firefox=fm_client)
    released = mock_mcs.api("PATCH", f"/api/v1/devices/{q(fm_client.token)}", json={"online": True})
    assert released["online"] is True, released
    payload, _ = fm_client.by_message_id(message_id)
    assert payload["data"] == data, payload
    entry = wait_entry(mock_mcs, fm_client.token, message_id, "delivered", firefox=fm_client)
    assert_delivered_by_selective_ack(entry, message_id, fm_client)


def test_the_unmodified_recipe_reaches_the_mock_under_googles_names(mock_mcs, sdk):
    """§5 "Unmodified": firebase-messaging with Google's URLs as it has them, the names resolved to
    the mock's HTTPS and MCS ports (docs/real-clients.md's block, run as written but for the two
    ports), checks in, registers and receives an HTTP v1 send, `delivered` by `selective_ack`."""
    from fcmclient import FcmClient
    client = FcmClient(mock_mcs.base_url, mock_mcs.mcs_port, mock_mcs.ca, PROJECT_A, SENDER_A,
                       https_port=mock_mcs.https_port)
    try:
        client.start()
        dev = mock_mcs.device(client.token)
        assert dev["client"]["kind"] == "fcm" and dev["client"]["connected"] is True, dev
        data = {"unmodified": secrets.token_hex(4)}
        message_id = v1_send(sdk, to_token(client.token, data=data))
        payload, persistent_id = client.by_message_id(message_id)
        assert payload["data"] == data and payload["from"] == SENDER_A and persistent_id == message_id, payload
        entry = wait_entry(mock_mcs, client.token, message_id, "delivered", firefox=client)
        assert_delivered_by_selective_ack(entry, message_id, client)
    finally:
        client.close()


# -- 11: redelivery after the connection closed ----------------------------------------------------------

def test_a_closed_connection_holds_the_message_until_the_client_logs_in_again(mock_mcs, fm_client, sdk):
    android_id = fm_client.credentials["gcm"]["android_id"]
    before = mock_mcs.api("GET", f"/api/v1/clients/{q(str(android_id))}")
    assert before["connected"] is True, before
    fault = mock_mcs.fault({"transport": "mcs"}, {"close_connection": True}, times=1)
    data = {"redelivered": secrets.token_hex(4)}
    message_id = v1_send(sdk, to_token(fm_client.token, data=data))
    payload, persistent_id = fm_client.by_message_id(message_id, timeout=30)
    assert payload["data"] == data and persistent_id == message_id, (payload, persistent_id)
    entry = wait_entry(mock_mcs, fm_client.token, message_id, "delivered", firefox=fm_client)
    assert_delivered_by_selective_ack(entry, message_id, fm_client)
    assert fault["id"] not in mock_mcs.fault_ids(), mock_mcs.fault_ids()
    after = mock_mcs.api("GET", f"/api/v1/clients/{q(str(android_id))}")
    assert after["connected"] is True, after
    assert after["connection"]["id"] != before["connection"]["id"], (before, after)
    assert entry["client_delivery"]["connection_id"] == after["connection"]["id"], entry
    # Once: a later message arrives and the first has not come again.
    barrier = v1_send(sdk, to_token(fm_client.token, data={"barrier": message_id}))
    fm_client.by_message_id(barrier)
    assert fm_client.received(message_id) == 1, fm_client.notifications


def test_restarted_with_its_credentials_it_gets_what_was_sent_while_stopped(mock_mcs, fm_client, sdk):
    android_id = str(fm_client.credentials["gcm"]["android_id"])
    fm_client.stop()
    wait_disconnected(mock_mcs, android_id, fm_client)
    data = {"while": "stopped " + secrets.token_hex(4)}
    message_id = v1_send(sdk, to_token(fm_client.token, data=data))
    entry = mock_mcs.inbox(fm_client.token)
    assert [e["status"] for e in entry if e["message_id"] == message_id] == ["pending"], entry
    token = fm_client.start()
    assert token == fm_client.token
    payload, _ = fm_client.by_message_id(message_id, timeout=30)
    assert payload["data"] == data, payload
    entry = wait_entry(mock_mcs, fm_client.token, message_id, "delivered", firefox=fm_client)
    assert entry["client_delivery"]["ack"]["by"] in ("selective_ack", "login"), entry
    assert fm_client.received(message_id) == 1, fm_client.notifications
