"""FCM's device side, the rules a client meets only when something is off (real-clients.md
§3.3 Installations and §3.4 FCM registrations: their errors; §3.1 checkin's; §4.3 the surfaces'
faults; §3.5 the 100 unacknowledged deliveries a connection holds and a delayed MCS write).
Raw HTTP and a raw MCS client against a server of this module's own (`mock_mcs`)."""

import base64
import json
import os
import secrets
import signal
import time
import uuid
from urllib.parse import quote

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fcmclient import RawMcs, login_request, pb_bytes, pb_fields, pb_int, raw_checkin, raw_login, raw_register
from firefox import wait_entry
from mocksupport import APP_A, KEY_A, PROJECT_A, PROJECT_B, SENDER_A, SENDER_B, MockServer

TAG_DATA = 8
NO_KEY = ("Method doesn't allow unregistered callers (callers without established identity). "
          "Please use API Key or other form of API consumer identity to call this API.")
API = {"x-goog-api-key": "any-key"}
FID = "dAbCdEfGhIjKlMnOpQrStU"


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def p256dh():
    key = ec.generate_private_key(ec.SECP256R1())
    return b64(key.public_key().public_bytes(serialization.Encoding.X962,
                                             serialization.PublicFormat.UncompressedPoint))


def rpc_error(r, code, status, message=None):
    """A google.rpc.Status answer: exactly `{"error":{"code","message","status"}}`."""
    assert r.status_code == code, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert list(body) == ["error"] and list(body["error"]) == ["code", "message", "status"], body
    assert body["error"]["code"] == code and body["error"]["status"] == status, body
    if message is not None:
        assert body["error"]["message"] == message, body
    return body["error"]["message"]


def installations(mock, project=PROJECT_A):
    return mock.base_url + f"/v1/projects/{project}/installations"


def install(mock, project=PROJECT_A, fid=None):
    """A new installation: (fid, refreshToken, authToken)."""
    body = {"fid": fid or FID[:1] + secrets.token_urlsafe(16)[:21], "appId": f"1:{SENDER_A}:web:abc",
            "authVersion": "FIS_v2", "sdkVersion": "w:0.6.4"}
    r = requests.post(installations(mock, project), json=body, headers=API, timeout=10)
    assert r.status_code == 200, r.text
    j = r.json()
    return j["fid"], j["refreshToken"], j["authToken"]["token"]


def subscription(mock):
    """A Chromium-style `wp:` registration over register3: its endpoint's path."""
    android_id, security_token = raw_checkin(mock.base_url)
    token = raw_register(mock.base_url, android_id, security_token, app="org.chromium.linux",
                         sender=p256dh(), **{"X-subtype": f"wp:http://localhost:8300/#{uuid.uuid4()}-V2"})
    return f"https://fcm.googleapis.com/fcm/send/{token}"


def web(endpoint):
    return {"web": {"applicationPubKey": None, "auth": b64(os.urandom(16)), "endpoint": endpoint,
                    "p256dh": p256dh()}}


def registrations(mock, project=PROJECT_A):
    return mock.base_url + f"/v1/projects/{project}/registrations"


# -- §3.3 Installations ------------------------------------------------------------------------------

def test_installations_answer_and_refuse_as_google_does(mock_mcs):
    body = {"fid": FID, "appId": f"1:{SENDER_A}:web:abc", "authVersion": "FIS_v2", "sdkVersion": "w:0.6.4"}
    # The body is JSON whatever its Content-Type (firebase-messaging sends text/plain).
    r = requests.post(installations(mock_mcs), data=json.dumps(body), timeout=10,
                      headers={**API, "Content-Type": "text/plain"})
    assert r.status_code == 200, r.text
    j = r.json()
    assert list(j) == ["name", "fid", "refreshToken", "authToken"], j
    assert j["name"] == f"projects/{PROJECT_A}/installations/{FID}" and j["fid"] == FID, j
    assert list(j["authToken"]) == ["token", "expiresIn"] and j["authToken"]["expiresIn"] == "604800s", j

    rpc_error(requests.post(installations(mock_mcs), json=body, timeout=10), 403, "PERMISSION_DENIED", NO_KEY)
    rpc_error(requests.post(installations(mock_mcs, "no-such-project"), json=body, headers=API, timeout=10),
              404, "NOT_FOUND")
    rpc_error(requests.post(installations(mock_mcs), data="{not json", headers=API, timeout=10), 400, "INVALID_ARGUMENT")
    rpc_error(requests.post(installations(mock_mcs), json={**body, "appId": None}, headers=API, timeout=10),
              400, "INVALID_ARGUMENT")
    no_app = dict(body)
    del no_app["appId"]
    rpc_error(requests.post(installations(mock_mcs), json=no_app, headers=API, timeout=10), 400, "INVALID_ARGUMENT")
    rpc_error(requests.post(installations(mock_mcs), json={**body, "authVersion": "FIS_v1"}, headers=API, timeout=10),
              400, "INVALID_ARGUMENT")


def test_auth_tokens_are_generated_with_the_refresh_token_only(mock_mcs):
    fid, refresh, _ = install(mock_mcs)
    url = installations(mock_mcs) + f"/{fid}/authTokens:generate"
    r = requests.post(url, json={"installation": {"sdkVersion": "w:0.6.4"}}, timeout=10,
                      headers={**API, "Authorization": f"FIS_v2 {refresh}"})
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["token", "expiresIn"] and r.json()["expiresIn"] == "604800s", r.json()
    _, other_refresh, _ = install(mock_mcs)
    rpc_error(requests.post(url, json={}, headers={**API, "Authorization": f"FIS_v2 {other_refresh}"}, timeout=10),
              401, "UNAUTHENTICATED")
    rpc_error(requests.delete(installations(mock_mcs) + f"/{fid}", headers={**API, "Authorization": f"FIS_v2 {other_refresh}"},
                              timeout=10), 401, "UNAUTHENTICATED")
    r = requests.delete(installations(mock_mcs) + f"/{fid}", headers={**API, "Authorization": f"FIS_v2 {refresh}"}, timeout=10)
    assert r.status_code == 200 and r.json() == {}, r.text


def test_an_earlier_auth_token_stays_good_until_it_expires(mock_mcs):
    """§3.3/§3.4: a new auth token (`authTokens:generate`) does not revoke the one before it, as
    Google's do not: both reach the installation's registration until they expire (the mock's
    clock)."""
    fid, refresh, first = install(mock_mcs)
    r = requests.post(registrations(mock_mcs), json=web(subscription(mock_mcs)), timeout=10,
                      headers={**API, "x-goog-firebase-installations-auth": first})
    assert r.status_code == 200, r.text
    token = r.json()["token"]
    r = requests.post(installations(mock_mcs) + f"/{fid}/authTokens:generate", json={}, timeout=10,
                      headers={**API, "Authorization": f"FIS_v2 {refresh}"})
    assert r.status_code == 200, r.text
    second = r.json()["token"]
    assert second != first
    for auth in (first, second):
        r = requests.get(registrations(mock_mcs) + "/" + token, timeout=10,
                         headers={**API, "x-goog-firebase-installations-auth": auth})
        assert r.status_code == 200 and r.json()["token"] == token, r.text
    mock_mcs.api("POST", "/api/v1/clock", json={"advance_s": 7 * 24 * 3600 + 1})
    try:
        for auth in (first, second):
            rpc_error(requests.get(registrations(mock_mcs) + "/" + token, timeout=10,
                                   headers={**API, "x-goog-firebase-installations-auth": auth}), 401, "UNAUTHENTICATED")
    finally:
        mock_mcs.api("POST", "/api/v1/clock", json={"reset": True})


# -- §3.4 FCM registrations ----------------------------------------------------------------------------

def test_registrations_refuse_as_google_does(mock_mcs):
    _, _, auth = install(mock_mcs)
    endpoint = subscription(mock_mcs)
    fis = {**API, "x-goog-firebase-installations-auth": auth}
    rpc_error(requests.post(registrations(mock_mcs), json=web(endpoint), timeout=10,
                            headers={"x-goog-firebase-installations-auth": auth}), 403, "PERMISSION_DENIED", NO_KEY)
    rpc_error(requests.post(registrations(mock_mcs), json=web(endpoint), headers=API, timeout=10), 401, "UNAUTHENTICATED")
    rpc_error(requests.post(registrations(mock_mcs), json=web(endpoint), timeout=10,
                            headers={**API, "x-goog-firebase-installations-auth": "no-such-token"}), 401, "UNAUTHENTICATED")
    # Who calls comes first: a bad body from an unknown installation is still 401, as Google answers.
    for body in ({"web": {"p256dh": "x", "auth": "y", "endpoint": "z"}}, "{not json"):
        rpc_error(requests.post(registrations(mock_mcs), timeout=10, **({"json": body} if isinstance(body, dict) else {"data": body}),
                                headers={**API, "x-goog-firebase-installations-auth": "no-such-token"}), 401, "UNAUTHENTICATED")
    rpc_error(requests.patch(registrations(mock_mcs) + "/any-token", data="{not json", timeout=10,
                             headers={**API, "x-goog-firebase-installations-auth": "no-such-token"}), 401, "UNAUTHENTICATED")
    # An installation of another project.
    _, _, auth_b = install(mock_mcs, PROJECT_B)
    rpc_error(requests.post(registrations(mock_mcs), json=web(endpoint), timeout=10,
                            headers={**API, "x-goog-firebase-installations-auth": auth_b}), 403, "PERMISSION_DENIED")
    bad_key = web(endpoint)
    bad_key["web"]["p256dh"] = b64(b"\x04" + os.urandom(20))
    assert "web.p256dh" in rpc_error(requests.post(registrations(mock_mcs), json=bad_key, headers=fis, timeout=10),
                                     400, "INVALID_ARGUMENT")
    assert "web.endpoint" in rpc_error(requests.post(registrations(mock_mcs), json=web("https://example.com/fcm/send/nothing-here"),
                                                     headers=fis, timeout=10), 400, "INVALID_ARGUMENT")
    rpc_error(requests.post(registrations(mock_mcs), data="{not json", headers=fis, timeout=10), 400, "INVALID_ARGUMENT")
    rpc_error(requests.get(registrations(mock_mcs) + "/no-such-token", headers=fis, timeout=10), 404, "NOT_FOUND")

    sent = web(endpoint)
    r = requests.post(registrations(mock_mcs), json=sent, headers={**fis, "x-goog-firebase-installations-auth": "FIS " + auth},
                      timeout=10)
    assert r.status_code == 200, r.text
    made = r.json()
    assert list(made) == ["name", "token", "web"] and made["web"] == sent["web"], made
    assert made["name"] == f"projects/{PROJECT_A}/registrations/{made['token']}", made
    got = requests.get(registrations(mock_mcs) + "/" + made["token"], headers=fis, timeout=10)
    assert got.status_code == 200 and got.json() == made, got.text
    head = requests.head(registrations(mock_mcs) + "/" + made["token"], headers=fis, timeout=10)
    assert head.status_code == 200 and head.content == b"" and head.headers["Content-Length"] == str(len(got.content)), head


def test_a_patch_onto_a_connected_subscription_writes_what_the_registration_held(mock_mcs):
    """§3.4: `PATCH` moves a registration onto the subscription its new endpoint names; what it
    held while its old one's client was away goes out on the new one's connection at once."""
    endpoint_away = subscription(mock_mcs)
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token_b = raw_register(mock_mcs.base_url, android_id, security_token, app="org.chromium.linux",
                           sender=p256dh(), **{"X-subtype": f"wp:http://localhost:8300/#{uuid.uuid4()}-V2"})
    _, _, auth = install(mock_mcs)
    fis = {**API, "x-goog-firebase-installations-auth": auth}
    r = requests.post(registrations(mock_mcs), json=web(endpoint_away), headers=fis, timeout=10)
    assert r.status_code == 200, r.text
    token = r.json()["token"]
    message_id = send(mock_mcs, token, {"held": "1"})
    wait_entry(mock_mcs, token, message_id, "pending")
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        r = requests.patch(registrations(mock_mcs) + "/" + token, json=web(f"https://fcm.googleapis.com/fcm/send/{token_b}"),
                           headers=fis, timeout=10)
        assert r.status_code == 200 and r.json()["token"] == token, r.text
        assert data_packets(conn, 1) == [message_id]
        wait_entry(mock_mcs, token, message_id, "sent")
    finally:
        conn.close()


def one_installation_over(mock, *endpoints):
    """A new installation with a registration over each endpoint: its headers and the tokens."""
    _, _, auth = install(mock)
    fis = {**API, "x-goog-firebase-installations-auth": auth}
    tokens = []
    for endpoint in endpoints:
        r = requests.post(registrations(mock), json=web(endpoint), headers=fis, timeout=10)
        assert r.status_code == 200, r.text
        tokens.append(r.json()["token"])
    return fis, tokens


def test_a_patch_onto_an_endpoint_the_installation_has_replaces_its_registration_there(mock_mcs):
    """§3.4: an installation has one registration per endpoint ("the same installation and endpoint
    again → the same token"). A `PATCH` moving one registration onto an endpoint another of the
    same installation has takes that one's place: the other is `unregistered` (its sends
    `NotRegistered`, its `GET` 404), and a later `POST` of that endpoint answers the moved token."""
    endpoint_a, endpoint_b = subscription(mock_mcs), subscription(mock_mcs)
    fis, (displaced, moved) = one_installation_over(mock_mcs, endpoint_a, endpoint_b)
    r = requests.patch(registrations(mock_mcs) + "/" + moved, json=web(endpoint_a), headers=fis, timeout=10)
    assert r.status_code == 200 and r.json()["token"] == moved, r.text
    assert mock_mcs.device(displaced)["state"] == "unregistered"
    assert mock_mcs.device(moved)["state"] == "registered"
    r = requests.get(registrations(mock_mcs) + "/" + displaced, headers=fis, timeout=10)
    rpc_error(r, 404, "NOT_FOUND")
    r = requests.post(mock_mcs.base_url + "/fcm/send", json={"to": displaced, "data": {"a": "b"}},
                      headers={"Authorization": f"key={KEY_A}"}, timeout=10)
    assert r.json()["results"] == [{"error": "NotRegistered"}], r.text
    r = requests.post(registrations(mock_mcs), json=web(endpoint_a), headers=fis, timeout=10)
    assert r.status_code == 200 and r.json()["token"] == moved, r.text


def test_a_displaced_registration_s_held_pushes_are_not_written_by_the_patch(mock_mcs):
    """§3.4: the registration a `PATCH` displaces is unregistered before the moved one's held
    pushes go out on the endpoint's connection: what the displaced one held is `dropped`, never
    written; what the moved one held is written."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    wp = raw_register(mock_mcs.base_url, android_id, security_token, app="org.chromium.linux",
                      sender=p256dh(), **{"X-subtype": f"wp:http://localhost:8300/#{uuid.uuid4()}-V2"})
    endpoint_a, endpoint_b = f"https://fcm.googleapis.com/fcm/send/{wp}", subscription(mock_mcs)
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        fis, (displaced, moved) = one_installation_over(mock_mcs, endpoint_a, endpoint_b)
        mock_mcs.api("PATCH", f"/api/v1/devices/{displaced}", json={"online": False})
        gone = send(mock_mcs, displaced, {"to": "displaced"})
        kept = send(mock_mcs, moved, {"to": "moved"})
        wait_entry(mock_mcs, displaced, gone, "pending")
        wait_entry(mock_mcs, moved, kept, "pending")
        r = requests.patch(registrations(mock_mcs) + "/" + moved, json=web(endpoint_a), headers=fis, timeout=10)
        assert r.status_code == 200, r.text
        assert data_packets(conn, 1) == [kept]
        assert quiet(conn, 0.5), "the displaced registration's push was written"
        assert mock_mcs.device(displaced)["state"] == "unregistered"
        wait_entry(mock_mcs, displaced, gone, "dropped")
    finally:
        conn.close()


def test_a_hold_on_a_subscription_is_not_a_hold_on_the_registration_over_it(mock_mcs, receiver):
    """§4.1: `PATCH {"online":false}` holds the device it names. An FCM registration made over a
    held `wp:` subscription whose client is connected is online, as at that client's login, and
    what is sent to it is written."""
    wp = mock_mcs.device(receiver.wp)
    held = mock_mcs.api("PATCH", f"/api/v1/devices/{receiver.wp}", json={"online": False})
    assert held["online"] is False and wp["client"]["connected"] is True, held
    receiver.token = receiver.register()
    assert mock_mcs.device(receiver.token)["online"] is True, mock_mcs.device(receiver.token)
    v1(mock_mcs, {"token": receiver.token, "data": {"over": "a held subscription"}})
    assert receiver.payload()["data"] == {"over": "a held subscription"}


def test_registering_again_keeps_the_control_api_s_hold(mock_mcs, receiver):
    """§1 and §4.1: a `PATCH {"online":false}` hold is not the client's to lift: the registration
    registered again (the same installation and endpoint) stays held, and what it holds is written
    once the control API releases it."""
    mock_mcs.api("PATCH", f"/api/v1/devices/{receiver.token}", json={"online": False})
    message_id = v1(mock_mcs, {"token": receiver.token, "data": {"held": "across"}})
    assert receiver.register() == receiver.token
    assert mock_mcs.device(receiver.token)["online"] is False, mock_mcs.device(receiver.token)
    wait_entry(mock_mcs, receiver.token, message_id, "pending")
    released = mock_mcs.api("PATCH", f"/api/v1/devices/{receiver.token}", json={"online": True})
    assert released["online"] is True, released
    assert receiver.payload()["data"] == {"held": "across"}


def test_message_fid_reaches_the_live_registration_after_another_is_deleted(mock_mcs, receiver):
    """§3.4 and v1's `message.fid`: an installation with two registrations, the first deleted:
    sends to the fid reach the one still registered, not `UNREGISTERED`."""
    first = receiver.token
    endpoint = subscription(mock_mcs)
    r = requests.post(registrations(mock_mcs), json=web(endpoint), headers=receiver.fis, timeout=10)
    assert r.status_code == 200, r.text
    second = r.json()["token"]
    r = requests.delete(registrations(mock_mcs) + "/" + second, headers=receiver.fis, timeout=10)
    assert r.status_code == 200, r.text
    v1(mock_mcs, {"fid": receiver.fid, "data": {"to": "first"}})
    assert receiver.payload()["data"] == {"to": "first"}
    r = requests.post(registrations(mock_mcs), json=web(endpoint), headers=receiver.fis, timeout=10)
    third = r.json()["token"]
    r = requests.delete(registrations(mock_mcs) + "/" + first, headers=receiver.fis, timeout=10)
    assert r.status_code == 200, r.text
    message_id = v1(mock_mcs, {"fid": receiver.fid, "data": {"to": "third"}})
    assert mock_mcs.inbox(third)[-1]["message_id"] == message_id
    # A registration the control API deletes hands the fid on as well.
    r = requests.post(registrations(mock_mcs), json=web(subscription(mock_mcs)), headers=receiver.fis, timeout=10)
    fourth = r.json()["token"]
    mock_mcs.api("DELETE", f"/api/v1/devices/{third}", expect=204)
    message_id = v1(mock_mcs, {"fid": receiver.fid, "data": {"to": "fourth"}})
    assert mock_mcs.inbox(fourth)[-1]["message_id"] == message_id


# -- §3.6 an FCM registration over a fake web device's subscription ---------------------------------

def fake_web_device(mock, online=True):
    token = mock.create_device(platform="web", app="https://app.example", online=online)
    return mock.device(token)


def test_an_fcm_registration_over_a_fake_web_device_is_decrypted_there_as_any_push(mock_mcs):
    """§3.4/§3.6: an FCM registration may name a fake web device's `/wp/{id}`. FCM's sends to it
    are encrypted (`aesgcm`, the registration's keys) and handed to that subscription, where the
    mock decrypts them as any push: the fake device's entry shows the FCM payload. Its record is
    `delivered` at once (handed on); the push itself follows the fake device's rules."""
    w = fake_web_device(mock_mcs)
    _, _, auth = install(mock_mcs)
    fis = {**API, "x-goog-firebase-installations-auth": auth}
    keys = w["web_push"]["keys"]
    body = {"web": {"applicationPubKey": None, "auth": keys["auth"], "endpoint": w["web_push"]["endpoint"],
                    "p256dh": keys["p256dh"]}}
    r = requests.post(registrations(mock_mcs), json=body, headers=fis, timeout=10)
    assert r.status_code == 200, r.text
    token = r.json()["token"]
    message_id = send(mock_mcs, token, {"hello": "fake"})
    wait_entry(mock_mcs, token, message_id, "delivered")
    pushes = mock_mcs.inbox(w["token"], wait=10, min_count=1)
    assert len(pushes) == 1, pushes
    push = pushes[0]
    assert push["status"] == "delivered" and push["transport"] == "webpush", push
    wp = push["webpush"]
    assert wp["content_encoding"] == "aesgcm" and wp["decrypt_error"] is None, wp
    plain = json.loads(wp["plaintext"])
    assert plain["data"] == {"hello": "fake"} and plain["from"] == SENDER_A and plain["fcmMessageId"] == message_id, plain

    # Registered with keys that are not the device's: the push is taken and would not decrypt there.
    other = {"web": {**body["web"], "p256dh": p256dh()}}
    _, _, auth2 = install(mock_mcs)
    r = requests.post(registrations(mock_mcs), json=other, headers={**API, "x-goog-firebase-installations-auth": auth2}, timeout=10)
    assert r.status_code == 200, r.text
    send(mock_mcs, r.json()["token"], {"hello": "wrong keys"})
    pushes = mock_mcs.inbox(w["token"], wait=10, min_count=2)
    assert len(pushes) == 2, pushes
    bad = [e for e in pushes if e["message_id"] != push["message_id"]][0]
    assert bad["status"] == "undecryptable" and "does not authenticate" in bad["webpush"]["decrypt_error"], bad


def test_an_fcm_registration_over_an_offline_fake_web_device_waits_with_it(mock_mcs):
    w = fake_web_device(mock_mcs, online=False)
    _, _, auth = install(mock_mcs)
    keys = w["web_push"]["keys"]
    body = {"web": {"applicationPubKey": None, "auth": keys["auth"], "endpoint": w["web_push"]["endpoint"],
                    "p256dh": keys["p256dh"]}}
    r = requests.post(registrations(mock_mcs), json=body, headers={**API, "x-goog-firebase-installations-auth": auth}, timeout=10)
    assert r.status_code == 200, r.text
    send(mock_mcs, r.json()["token"], {"held": "1"})
    held = mock_mcs.inbox(w["token"], wait=10, min_count=1, status="pending")
    assert len(held) == 1, held
    mock_mcs.set_online(w["token"], True)
    got = mock_mcs.inbox(w["token"], wait=10, min_count=1, status="delivered")
    assert json.loads(got[0]["webpush"]["plaintext"])["data"] == {"held": "1"}, got


# -- §3.6 what FCM's sends become for a registration ------------------------------------------------

def app_data(body):
    """A DataMessageStanza's `app_data` pairs (field 7: key 1, value 2), in order."""
    return [(pb_fields(a)[1][0].decode(), pb_fields(a)[2][0].decode()) for a in pb_fields(body).get(7, [])]


def v1(mock, message):
    token = mock.api("POST", f"/api/v1/projects/{SENDER_A}/access-tokens", expect=201)["access_token"]
    r = requests.post(f"{mock.base_url}/v1/projects/{PROJECT_A}/messages:send", json={"message": message},
                      headers={"Authorization": "Bearer " + token}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["name"].rsplit("/", 1)[1]


class RawFcmReceiver:
    """A raw GCM client with a `wp:` registration, logged in over MCS, and an FCM registration
    over it whose keys are this object's: `payload()` reads the next push and decrypts it."""

    def __init__(self, mock):
        import http_ece
        self.ece = http_ece
        self.mock = mock
        self.android_id, self.security_token = android_id, security_token = raw_checkin(mock.base_url)
        self.sender = p256dh()  # the subscription's VAPID key, as Chromium and firebase-messaging register
        self.wp = raw_register(mock.base_url, android_id, security_token, app="org.chromium.linux", sender=self.sender,
                               **{"X-subtype": f"wp:receiver.push.com#{uuid.uuid4()}"})
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        self.fid, self.refresh, auth = install(mock)
        self.fis = {**API, "x-goog-firebase-installations-auth": auth}
        self.token = self.register()
        self.conn = raw_login(mock, android_id, security_token)

    def register(self):
        public = self.key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        body = {"web": {"applicationPubKey": None, "auth": b64(self.auth), "p256dh": b64(public),
                        "endpoint": f"https://fcm.googleapis.com/fcm/send/{self.wp}"}}
        r = requests.post(registrations(self.mock), json=body, headers=self.fis, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()["token"]

    def stanza(self):
        """The next DataMessageStanza's bytes."""
        while True:
            tag, body = self.conn.packet()
            if tag == TAG_DATA:
                return body

    def payload(self, body=None):
        """The next push's FCM JSON (or stanza `body`'s), decrypted (`aesgcm`, salt and dh from its
        app_data)."""
        body = body or self.stanza()
        pairs = dict(app_data(body))
        assert pairs["content-encoding"] == "aesgcm", pairs
        salt = base64.urlsafe_b64decode(pairs["encryption"][len("salt="):])
        dh = base64.urlsafe_b64decode(pairs["crypto-key"][len("dh="):])
        plain = self.ece.decrypt(pb_fields(body)[21][0], salt=salt, dh=dh, private_key=self.key, auth_secret=self.auth,
                                 version="aesgcm")
        return json.loads(plain)

    def close(self):
        self.conn.close()


@pytest.fixture
def receiver(mock_mcs):
    r = RawFcmReceiver(mock_mcs)
    yield r
    r.close()


def test_an_fcm_registrations_push_comes_from_its_subscriptions_sender(mock_mcs, receiver):
    """§3.6: the stanza of an FCM registration's push names the `wp:` subscription's sender in
    `from` (3), as a relayed push does: Chromium finds the subscription's keys by it. The
    project's sender id is the payload's `from`."""
    message_id = send(mock_mcs, receiver.token, {"k": "v"})
    body = receiver.stanza()
    fields = pb_fields(body)
    assert fields[9][0].decode() == message_id, fields
    assert fields[3][0].decode() == receiver.sender, fields
    assert receiver.payload(body)["from"] == SENDER_A


def test_the_plaintext_is_on_the_entry_once_the_client_has_the_push(mock_mcs, receiver):
    """§3.6: the entry shows what the mock encrypted (`client_delivery.plaintext`, `encryption`)
    while it is `sent` too: a client that reads its entry as soon as it has the push finds them
    (the record is committed right after the send's, not left for a later commit)."""
    for n in range(5):
        message_id = send(mock_mcs, receiver.token, {"n": str(n)})
        assert pb_fields(receiver.stanza())[9][0].decode() == message_id
        entry = mock_mcs.api("GET", "/api/v1/devices/" + quote(receiver.token, safe="") + "/messages/" + quote(message_id, safe=""))
        cd = entry["client_delivery"]
        assert cd["encryption"] == "aesgcm" and cd["plaintext"]["data"] == {"n": str(n)}, entry


def test_a_clients_devices_are_those_its_client_id_finds(mock_mcs, receiver):
    """§4.1: the clients API's `devices` and `GET /api/v1/devices?client_id=` agree: the `wp:`
    registration, then the FCM registration that travels over it."""
    client = mock_mcs.api("GET", f"/api/v1/clients/{receiver.android_id}")
    found = mock_mcs.api("GET", "/api/v1/devices", params={"client_id": str(receiver.android_id)})["items"]
    assert client["devices"] == [receiver.wp, receiver.token], client
    assert sorted(d["token"] for d in found) == sorted(client["devices"]), found


def test_the_fcm_payload_takes_the_web_platforms_collapse_key_and_leaves_out_an_empty_notification(mock_mcs, receiver):
    """§3.6: `collapse_key` is the web effective payload's (HTTP v1: `webpush.headers.Topic`, not
    `android.collapse_key`; legacy: `collapse_key`), `do_not_collapse` without one; `notification`
    is absent when empty."""
    message_id = v1(mock_mcs, {"token": receiver.token, "data": {"k": "v"}, "android": {"collapse_key": "android-only"},
                               "webpush": {"headers": {"Topic": "web-topic"}}})
    p = receiver.payload()
    assert p["fcmMessageId"] == message_id and p["collapse_key"] == "web-topic", p
    v1(mock_mcs, {"token": receiver.token, "data": {"k": "v"}, "android": {"collapse_key": "android-only"}})
    assert receiver.payload()["collapse_key"] == "do_not_collapse"
    r = requests.post(mock_mcs.base_url + "/fcm/send", json={"to": receiver.token, "collapse_key": "legacy-key",
                                                             "data": {"k": "v"}, "notification": {}},
                      headers={"Authorization": f"key={KEY_A}"}, timeout=10)
    assert r.status_code == 200 and r.json()["success"] == 1, r.text
    p = receiver.payload()
    assert list(p) == ["data", "from", "priority", "collapse_key", "fcmMessageId"] and p["collapse_key"] == "legacy-key", p


def test_message_fid_names_the_installations_live_registration(mock_mcs, receiver):
    """HTTP v1 `message.fid` reaches the installation's registration, also after the first was
    deleted and the installation registered again."""
    v1(mock_mcs, {"fid": receiver.fid, "data": {"n": "1"}})
    assert receiver.payload()["data"] == {"n": "1"}
    r = requests.delete(registrations(mock_mcs) + "/" + receiver.token, headers=receiver.fis, timeout=10)
    assert r.status_code == 200, r.text
    receiver.token = receiver.register()
    v1(mock_mcs, {"fid": receiver.fid, "data": {"n": "2"}})
    assert receiver.payload()["data"] == {"n": "2"}


def test_a_device_group_takes_no_web_push_subscription(mock_mcs):
    """§1: a browser's Web Push subscription is no FCM registration: a group refuses it as it
    refuses any token that is none (`no valid registration ids`)."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    wp = raw_register(mock_mcs.base_url, android_id, security_token, app="org.chromium.linux", sender=p256dh(),
                      **{"X-subtype": f"wp:http://localhost:8300/#{uuid.uuid4()}-V2"})
    r = mock_mcs.group_request(json={"operation": "create", "notification_key_name": "wp-" + secrets.token_hex(4),
                                     "registration_ids": [wp]})
    assert r.status_code == 400 and "no valid registration ids" in r.text, (r.status_code, r.text)


def test_an_android_registration_gets_the_notification_pairs_its_subtype_and_collapse_key(mock_mcs):
    """§3.6: a `gcm` android registration's stanza: `subtype` first, the effective `data` pairs
    (non-strings as JSON text), `gcm.n.e`=`1` and `gcm.notification.<field>`; `token` (6) the
    collapse key; `from` the sender id; `category` the registration's `app`."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A,
                         **{"X-subtype": "com.example.sub"})
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        r = requests.post(mock_mcs.base_url + "/fcm/send", json={"to": token, "collapse_key": "ck", "data": {"n": 1, "s": "x"},
                                                                 "notification": {"title": "T", "body": "B"}},
                          headers={"Authorization": f"key={KEY_A}"}, timeout=10)
        assert r.status_code == 200 and r.json()["success"] == 1, r.text
        while True:
            tag, body = conn.packet()
            if tag == TAG_DATA:
                break
        f = pb_fields(body)
        assert f[3] == [SENDER_A.encode()] and f[5] == [APP_A.encode()] and f[6] == [b"ck"], f
        pairs = app_data(body)
        assert pairs[0] == ("subtype", "com.example.sub"), pairs
        assert ("n", "1") in pairs and ("s", "x") in pairs, pairs
        n = pairs.index(("gcm.n.e", "1"))
        assert pairs[n + 1:] == [("gcm.notification.title", "T"), ("gcm.notification.body", "B")], pairs
    finally:
        conn.close()


# -- restarts on a file store ---------------------------------------------------------------------

class FileStoreServer:
    """A server of the test's own on a file store (`--db`, its CA beside it), to stop and start
    again on the same file: `self.mock` is the running one."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.db = str(tmp_path / "store.sqlite")
        self.runs = 0
        self.mock = None
        self.start()

    def start(self):
        import re
        import conftest
        self.runs += 1
        fixtures = self.tmp / "fixtures.json"
        fixtures.write_text(json.dumps(conftest.FIXTURES))
        binary = os.path.abspath(os.environ.get("FCM_MOCK_BIN", ".build/release/fcm-mock"))
        _, proc = conftest._start(binary, fixtures, self.tmp / f"stderr-{self.runs}.log",
                                  ("--https-port", "0", "--mcs-port", "0", "--db", self.db))
        line, other = conftest._read_listening_line(proc, time.monotonic() + conftest.STARTUP_TIMEOUT_S)
        assert line, other
        addr = dict(re.findall(r"(\w+)=(\S+)", line))
        self.mock = MockServer("http://" + addr["http"], proc, self.tmp / f"stderr-{self.runs}.log")
        self.mock.mcs_port = int(addr["mcs"].rsplit(":", 1)[1])
        self.mock.ca = self.mock.api("GET", "/api/v1/health")["tls_ca"]

    def stop(self):
        proc = self.mock.proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0, self.mock.stderr_tail(3000)

    def restart(self):
        self.stop()
        self.start()


@pytest.fixture
def file_store(tmp_path):
    server = FileStoreServer(tmp_path)
    yield server
    if server.mock.proc.poll() is None:
        server.stop()


def test_a_login_after_a_restart_settles_what_it_names_as_received(file_store):
    """§3.5: a delivery written and not acknowledged when the server stopped is resent at the next
    login unless the login's `received_persistent_id` names it; named, it is `delivered` by
    `login`, also when the server restarted in between."""
    mock = file_store.mock
    android_id, security_token = raw_checkin(mock.base_url)
    token = raw_register(mock.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    conn = raw_login(mock, android_id, security_token)
    message_id = send(mock, token, {"before": "restart"})
    assert data_packets(conn, 1) == [message_id]
    conn.close()
    file_store.restart()
    mock = file_store.mock
    conn = RawMcs(mock.mcs_port, mock.ca)
    try:
        conn.send_packet(2, login_request(android_id, security_token, received=[message_id]), version=True)
        tag, body = conn.packet()
        assert tag == 3 and 3 not in pb_fields(body), (tag, pb_fields(body))
        assert quiet(conn, 1.0), "written again though the login named it received"
        entry = wait_entry(mock, token, message_id, "delivered")
        assert entry["client_delivery"]["ack"]["by"] == "login", entry
    finally:
        conn.close()


def test_a_login_naming_a_push_never_written_does_not_settle_it(mock_mcs):
    """§3.5: a login's `received_persistent_id` settles what was written; a push held all along
    (`PATCH {"online":false}`) is still the mock's to write, and is written once released."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    first = raw_login(mock_mcs, android_id, security_token)
    first.close()
    mock_mcs.api("PATCH", "/api/v1/devices/" + quote(token, safe=""), json={"online": False})
    message_id = send(mock_mcs, token, {"held": "all along"})
    conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    try:
        conn.send_packet(2, login_request(android_id, security_token, received=[message_id]), version=True)
        tag, body = conn.packet()
        assert tag == 3 and 3 not in pb_fields(body), (tag, pb_fields(body))
        conn.send_packet(0, b"")  # a HeartbeatPing: its ack comes after the login's work
        assert conn.packet()[0] == 1
        entry = wait_entry(mock_mcs, token, message_id, "pending")
        assert entry["client_delivery"] is None, entry
        mock_mcs.api("PATCH", "/api/v1/devices/" + quote(token, safe=""), json={"online": True})
        assert data_packets(conn, 1) == [message_id]
        selective_ack(conn, message_id)
        entry = wait_entry(mock_mcs, token, message_id, "delivered")
        assert entry["client_delivery"]["ack"]["by"] == "selective_ack" and entry["client_delivery"]["sends"] == 1, entry
    finally:
        conn.close()


def test_a_push_resent_after_a_restart_keeps_its_bytes_and_its_record(file_store):
    """§3.5 and §3.6: what was written and not acknowledged when the server stopped goes out again
    at the next login with the same persistent_id and bytes, an FCM registration's encrypted push
    included (the same salt, key and ciphertext, not a new encryption), and its `client_delivery`
    counts the second write: `sends` 2, `first_sent_at` the first write's."""
    mock = file_store.mock
    receiver = RawFcmReceiver(mock)
    android_token = raw_register(mock.base_url, receiver.android_id, receiver.security_token, app=APP_A, sender=SENDER_A)
    encrypted = v1(mock, {"token": receiver.token, "data": {"kept": "bytes"}})
    plain = send(mock, android_token, {"plain": "data"})
    first = {pb_fields(b)[9][0].decode(): b for b in (receiver.stanza(), receiver.stanza())}
    assert set(first) == {encrypted, plain}, first
    before = {m: wait_entry(mock, t, m, "sent")["client_delivery"] for t, m in ((receiver.token, encrypted), (android_token, plain))}
    assert [cd["sends"] for cd in before.values()] == [1, 1], before
    receiver.close()
    file_store.restart()
    mock = receiver.mock = file_store.mock
    receiver.conn = raw_login(mock, receiver.android_id, receiver.security_token)
    again = {pb_fields(b)[9][0].decode(): b for b in (receiver.stanza(), receiver.stanza())}
    assert again == first, "written again with other bytes after the restart"
    assert receiver.payload(again[encrypted])["data"] == {"kept": "bytes"}
    for token, message_id in ((receiver.token, encrypted), (android_token, plain)):
        cd = wait_entry(mock, token, message_id, "sent")["client_delivery"]
        assert cd["sends"] == 2 and cd["first_sent_at"] == before[message_id]["first_sent_at"], (cd, before[message_id])
    cd = wait_entry(mock, receiver.token, encrypted, "sent")["client_delivery"]
    assert cd["encryption"] == "aesgcm" and cd["plaintext"]["data"] == {"kept": "bytes"}, cd
    receiver.close()


def test_message_fid_and_register3_after_a_restart(file_store):
    """After a restart: HTTP v1 `message.fid` still names the installation's live registration
    (not one deleted before it), and register3 after the control API deleted a registration's
    device answers a new token even when a new device took the old one's id."""
    mock = file_store.mock
    fid, _, auth = install(mock)
    fis = {**API, "x-goog-firebase-installations-auth": auth}
    first = requests.post(registrations(mock), json=web(subscription(mock)), headers=fis, timeout=10).json()["token"]
    assert requests.delete(registrations(mock) + "/" + first, headers=fis, timeout=10).status_code == 200
    second = requests.post(registrations(mock), json=web(subscription(mock)), headers=fis, timeout=10).json()["token"]
    android_id, security_token = raw_checkin(mock.base_url)
    old = raw_register(mock.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    mock.api("DELETE", f"/api/v1/devices/{old}", expect=204)
    file_store.restart()
    mock = file_store.mock
    message_id = v1(mock, {"fid": fid, "data": {"k": "v"}})
    assert mock.message(message_id)["recipients"][0]["token"] == second
    mock.create_device()  # the next device id: the deleted one's, after a restart
    new = raw_register(mock.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    assert new != old
    send(mock, new, {"k": "v"})


# -- §3.1 checkin --------------------------------------------------------------------------------------

def test_a_checkin_that_does_not_match_is_401_and_not_a_checkin_400(mock_mcs):
    android_id, _ = raw_checkin(mock_mcs.base_url)
    # AndroidCheckinRequest{id (2) = a known id, checkin (4) {chrome_build (13) {platform 3}},
    # security_token (13, fixed64) = a wrong one}
    wrong = (pb_int(2, android_id) + pb_bytes(4, pb_bytes(13, pb_int(1, 3)))
             + b"\x69" + (12345).to_bytes(8, "little"))
    r = requests.post(mock_mcs.base_url + "/checkin", data=wrong, timeout=10,
                      headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 401 and r.headers["content-type"].startswith("text/plain"), (r.status_code, r.headers)
    assert r.text == "the android id and security token do not match", r.text
    r = requests.post(mock_mcs.base_url + "/checkin", data=b"\xff\xff\xff", timeout=10,
                      headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 400, (r.status_code, r.text)
    assert requests.get(mock_mcs.base_url + "/checkin", timeout=10).status_code == 405


# -- §4.3 faults on the surfaces -------------------------------------------------------------------------

@pytest.mark.parametrize("transport", [None, "http", "any"])
def test_status_faults_answer_each_surface_in_its_shape(mock_mcs, transport):
    when = {} if transport is None else {"transport": transport}
    mock_mcs.fault({**when, "path": "/checkin"}, {"status": 503, "retry_after_s": 7}, times=1)
    r = requests.post(mock_mcs.base_url + "/checkin", data=b"", timeout=10,
                      headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 503 and r.headers.get("Retry-After") == "7", (r.status_code, r.headers)
    # The fault is spent: the next checkin is a checkin.
    android_id, token = raw_checkin(mock_mcs.base_url)

    # register3's shape is `Error=<CODE>`, the code the status means there.
    form = {"app": "org.chromium.linux", "sender": SENDER_A, "device": str(android_id)}
    auth = {"Authorization": f"AidLogin {android_id}:{token}"}
    for status, code in [(401, "AUTHENTICATION_FAILED"), (503, "SERVICE_NOT_AVAILABLE"), (500, "INTERNAL_SERVER_ERROR")]:
        mock_mcs.fault({**when, "path": "/c2dm/register3"}, {"status": status}, times=1)
        r = requests.post(mock_mcs.base_url + "/c2dm/register3", data=form, headers=auth, timeout=10)
        assert (r.status_code, r.text) == (status, f"Error={code}"), (status, r.status_code, r.text)
    assert raw_register(mock_mcs.base_url, android_id, token, app="org.chromium.linux", sender=SENDER_A)

    mock_mcs.fault({**when, "path": "/v1/projects/*/installations"}, {"status": 429, "retry_after_s": 3}, times=1)
    body = {"fid": FID, "appId": f"1:{SENDER_A}:web:abc", "authVersion": "FIS_v2", "sdkVersion": "w:0.6.4"}
    r = requests.post(installations(mock_mcs), json=body, headers=API, timeout=10)
    rpc_error(r, 429, "RESOURCE_EXHAUSTED")
    assert r.headers.get("Retry-After") == "3", r.headers
    fid, refresh, auth = install(mock_mcs)

    mock_mcs.fault({**when, "path": "/v1/projects/*/registrations"}, {"status": 503}, times=1)
    r = requests.post(registrations(mock_mcs), json=web(subscription(mock_mcs)), timeout=10,
                      headers={**API, "x-goog-firebase-installations-auth": auth})
    rpc_error(r, 503, "UNAVAILABLE")
    assert "Retry-After" not in r.headers, r.headers


def test_delay_and_close_faults_act_on_each_surface(mock_mcs):
    """§4.3 with control-api.md's `then`: a delay answers the call late (and normally), a close
    drops its connection without an answer, on every device-side surface."""
    fid, refresh, auth = install(mock_mcs)
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    calls = {
        "/checkin": lambda: raw_checkin(mock_mcs.base_url),
        "/c2dm/register3": lambda: raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A),
        "/v1/projects/*/installations": lambda: install(mock_mcs),
        "/v1/projects/*/registrations": lambda: requests.post(
            registrations(mock_mcs), json=web(subscription(mock_mcs)), timeout=10,
            headers={**API, "x-goog-firebase-installations-auth": auth}).raise_for_status(),
    }
    for path, call in calls.items():
        mock_mcs.fault({"path": path}, {"delay_ms": 600}, times=1)
        started = time.monotonic()
        call()
        assert time.monotonic() - started >= 0.6, f"{path}: not delayed"
        mock_mcs.fault({"path": path}, {"close_connection": True}, times=1)
        with pytest.raises(requests.ConnectionError):
            call()
        call()  # the faults are spent
    assert mock_mcs.fault_ids() == []


def test_surface_faults_match_the_path_as_called_and_the_sender(mock_mcs):
    """control-api.md: `when` fields given must match. A surface named with its project fires on
    that project's calls only; register3's `when.sender_id` is its `sender`, an Installations
    call's its project's; a checkin has no sender. `then.error` is register3's only."""
    body = {"fid": FID, "appId": f"1:{SENDER_A}:web:abc", "authVersion": "FIS_v2", "sdkVersion": "w:0.6.4"}
    concrete = mock_mcs.fault({"path": f"/v1/projects/{PROJECT_B}/installations"}, {"status": 503}, times=1)
    install(mock_mcs)  # project A: untouched
    r = requests.post(installations(mock_mcs, PROJECT_B), json=body, headers=API, timeout=10)
    rpc_error(r, 503, "UNAVAILABLE")
    assert concrete["id"] not in mock_mcs.fault_ids()
    # The project by its sender id names the same project as its id (control-api.md: `{project}`
    # may be either), in the fault and in the call alike.
    numbered = mock_mcs.fault({"path": f"/v1/projects/{SENDER_B}/installations"}, {"status": 503}, times=1)
    rpc_error(requests.post(installations(mock_mcs, PROJECT_B), json=body, headers=API, timeout=10), 503, "UNAVAILABLE")
    assert numbered["id"] not in mock_mcs.fault_ids()
    named = mock_mcs.fault({"path": f"/v1/projects/{PROJECT_B}/installations"}, {"status": 503}, times=1)
    rpc_error(requests.post(installations(mock_mcs, SENDER_B), json=body, headers=API, timeout=10), 503, "UNAVAILABLE")
    assert named["id"] not in mock_mcs.fault_ids()

    by_sender = mock_mcs.fault({"path": "/v1/projects/*/installations", "sender_id": SENDER_B}, {"status": 503}, times=1)
    install(mock_mcs)
    rpc_error(requests.post(installations(mock_mcs, PROJECT_B), json=body, headers=API, timeout=10), 503, "UNAVAILABLE")
    assert by_sender["id"] not in mock_mcs.fault_ids()

    android_id, security_token = raw_checkin(mock_mcs.base_url)
    other = mock_mcs.fault({"path": "/c2dm/register3", "sender_id": "999"}, {"error": "QUOTA_EXCEEDED"}, times=1)
    raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    r = requests.post(mock_mcs.base_url + "/c2dm/register3", data={"app": APP_A, "sender": "999", "device": str(android_id)},
                      headers={"Authorization": f"AidLogin {android_id}:{security_token}"}, timeout=10)
    assert (r.status_code, r.text) == (200, "Error=QUOTA_EXCEEDED"), (r.status_code, r.text)
    assert other["id"] not in mock_mcs.fault_ids()
    mock_mcs.fault({"path": "/checkin", "sender_id": SENDER_A}, {"status": 503}, times=1)
    raw_checkin(mock_mcs.base_url)  # a checkin names no sender: the fault stays
    mock_mcs.api("DELETE", "/api/v1/faults", expect=204)

    for path in ("/checkin", "/v1/projects/*/installations", f"/v1/projects/{PROJECT_A}/registrations"):
        r = requests.post(mock_mcs.base_url + "/api/v1/faults", json={"when": {"path": path}, "then": {"error": "Unavailable"}},
                          timeout=10)
        assert r.status_code == 400 and "then.error does not apply" in r.text, (path, r.status_code, r.text)


def test_a_fault_of_another_transport_leaves_the_surfaces_alone(mock_mcs):
    fault = mock_mcs.fault({"transport": "xmpp", "path": "/checkin"}, {"status": 503}, times=1)
    try:
        raw_checkin(mock_mcs.base_url)
    finally:
        mock_mcs.api("DELETE", f"/api/v1/faults/{fault['id']}", expect=204)


# -- §3.5 what a connection holds ---------------------------------------------------------------------

def send(mock, token, data):
    r = requests.post(mock.base_url + "/fcm/send", json={"to": token, "data": data},
                      headers={"Authorization": f"key={KEY_A}"}, timeout=10)
    assert r.status_code == 200 and r.json()["success"] == 1, r.text
    return r.json()["results"][0]["message_id"]


def data_packets(conn, want, timeout=10):
    """The persistent ids of the next `want` DataMessageStanzas (other packets skipped)."""
    ids = []
    deadline = time.monotonic() + timeout
    while len(ids) < want:
        tag, body = conn.packet(timeout=max(0.01, deadline - time.monotonic()))
        if tag == TAG_DATA:
            ids.append(pb_fields(body)[9][0].decode())
    return ids


def quiet(conn, seconds):
    """True when no DataMessageStanza comes within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            tag, _ = conn.packet(timeout=max(0.01, deadline - time.monotonic()))
        except TimeoutError:
            return True
        if tag == TAG_DATA:
            return False
    return True


def selective_ack(conn, *ids):
    ack = b"".join(pb_bytes(1, i) for i in ids)
    conn.send_packet(7, pb_int(2, 1) + pb_bytes(3, b"") + pb_bytes(7, pb_int(1, 12) + pb_bytes(2, ack)))


def test_a_connection_holds_at_most_100_unacknowledged_and_an_ack_makes_room(mock_mcs):
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        sent = [send(mock_mcs, token, {"n": str(i)}) for i in range(103)]
        written = data_packets(conn, 100)
        assert written == sent[:100], "written in acceptance order"
        assert quiet(conn, 1.0), "a 101st unacknowledged delivery was written"
        held = {e["message_id"] for e in mock_mcs.inbox(token, status="pending")}
        assert held == set(sent[100:]), held
        client = mock_mcs.api("GET", f"/api/v1/clients/{android_id}")
        assert client["connection"]["unacked"] == 100, client["connection"]
        selective_ack(conn, *written[:2])
        assert data_packets(conn, 2) == sent[100:102]
        # Recorded before they were written: read at once, the records say so, and the
        # acknowledgement that made room is recorded with them.
        page = mock_mcs.api("GET", "/api/v1/devices/" + quote(token, safe="") + "/messages", params={"limit": 1000})
        now = {e["message_id"]: e["status"] for e in page["items"]}
        assert [now[m] for m in sent[100:103]] == ["sent", "sent", "pending"], now
        assert [now[m] for m in written[:2]] == ["delivered", "delivered"], now
        assert quiet(conn, 0.5)
        selective_ack(conn, *written[2:])
        assert data_packets(conn, 1) == sent[102:]
        wait_entry(mock_mcs, token, sent[0], "delivered")
    finally:
        conn.close()


def test_what_waits_for_room_on_a_connection_is_kept_whole(mock_mcs):
    """§1: the storage rules (the 100 rule, collapse) are for a device held or disconnected. A
    connected client's pushes that wait behind its 100 unacknowledged are all written, in order,
    as acknowledgements make room: none dropped, none collapsed, no deleted_messages notice."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        sent = [send(mock_mcs, token, {"n": str(i)}) for i in range(100)]
        r = requests.post(mock_mcs.base_url + "/fcm/send", json={"to": token, "collapse_key": "k", "data": {"c": "1"}},
                          headers={"Authorization": f"key={KEY_A}"}, timeout=10)
        sent.append(r.json()["results"][0]["message_id"])
        sent += [send(mock_mcs, token, {"n": str(i)}) for i in range(100, 201)]
        r = requests.post(mock_mcs.base_url + "/fcm/send", json={"to": token, "collapse_key": "k", "data": {"c": "2"}},
                          headers={"Authorization": f"key={KEY_A}"}, timeout=10)
        sent.append(r.json()["results"][0]["message_id"])
        assert data_packets(conn, 100) == sent[:100]
        page = mock_mcs.api("GET", "/api/v1/devices/" + quote(token, safe="") + "/messages", params={"limit": 1000})
        statuses = {e["message_id"]: e["status"] for e in page["items"]}
        assert len(page["items"]) == len(sent), "a notice or another entry was added"
        assert {statuses[m] for m in sent[100:]} == {"pending"}, statuses
        written, acked = sent[:100], 0
        while True:
            selective_ack(conn, *written[acked:])
            acked = len(written)
            if acked == len(sent):
                break
            more = data_packets(conn, min(100, len(sent) - acked))
            assert more == sent[acked:acked + len(more)]
            written += more
        page = mock_mcs.api("GET", "/api/v1/devices/" + quote(token, safe="") + "/messages",
                            params={"status": "delivered", "limit": 1000, "wait": 10, "min": len(sent)})
        assert sorted(e["message_id"] for e in page["items"]) == sorted(sent)
        assert quiet(conn, 0.3)
    finally:
        conn.close()


def test_an_mcs_delay_fault_holds_the_write_not_the_answer(mock_mcs):
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        fault = mock_mcs.fault({"transport": "mcs", "token": token}, {"delay_ms": 1500}, times=1)
        t0 = time.monotonic()
        message_id = send(mock_mcs, token, {"late": "1"})
        assert time.monotonic() - t0 < 1.0, "the sender waited for the delayed write"
        assert quiet(conn, 0.8), "written before its delay"
        # `sent` means written: until then the delivery is `pending`, with no life on the connection.
        waiting = [e for e in mock_mcs.inbox(token) if e["message_id"] == message_id][0]
        assert waiting["status"] == "pending" and waiting["client_delivery"] is None, waiting
        assert data_packets(conn, 1, timeout=5) == [message_id]
        assert time.monotonic() - t0 >= 1.5
        # Recorded before it was written: the client has it, the record says so at once.
        written = [e for e in mock_mcs.inbox(token) if e["message_id"] == message_id][0]
        assert written["status"] == "sent" and written["client_delivery"]["sends"] == 1, written
        selective_ack(conn, message_id)
        delivered = wait_entry(mock_mcs, token, message_id, "delivered")
        assert delivered["client_delivery"]["sends"] == 1, delivered
        assert mock_mcs.message(message_id)["fault"] == fault["id"]
    finally:
        conn.close()


def test_a_fault_on_a_held_push_written_at_login_is_on_its_record(mock_mcs):
    """§4.3: a client fault fires on the write of a delivery, also one held while the client was
    away and written at its next login; the message record and its recipient name the fault, as
    for a push written at once (`close_connection` closes that login's connection instead, and the
    push goes out at the next one)."""
    android_id, security_token = raw_checkin(mock_mcs.base_url)
    token = raw_register(mock_mcs.base_url, android_id, security_token, app=APP_A, sender=SENDER_A)
    message_id = send(mock_mcs, token, {"held": "1"})
    wait_entry(mock_mcs, token, message_id, "pending")
    fault = mock_mcs.fault({"transport": "mcs", "token": token}, {"close_connection": True}, times=1)
    conn = RawMcs(mock_mcs.mcs_port, mock_mcs.ca)
    try:
        conn.send_packet(2, login_request(android_id, security_token), version=True)
        packets = []
        with pytest.raises(EOFError):
            while True:
                packets.append(conn.packet(timeout=5)[0])
        assert TAG_DATA not in packets, packets
    finally:
        conn.close()
    record = mock_mcs.message(message_id)
    assert record["fault"] == fault["id"], record
    assert [r.get("fault") for r in record["recipients"]] == [fault["id"]], record
    conn = raw_login(mock_mcs, android_id, security_token)
    try:
        assert data_packets(conn, 1) == [message_id]
    finally:
        conn.close()


# -- last: moves the module's clock -----------------------------------------------------------------

def test_an_expired_installation_auth_token_is_unauthenticated(mock_mcs):
    _, _, auth = install(mock_mcs)
    endpoint = subscription(mock_mcs)
    mock_mcs.api("POST", "/api/v1/clock", json={"advance_s": 604800 + 60})
    try:
        rpc_error(requests.post(registrations(mock_mcs), json=web(endpoint), timeout=10,
                                headers={**API, "x-goog-firebase-installations-auth": auth}), 401, "UNAUTHENTICATED")
    finally:
        mock_mcs.api("POST", "/api/v1/clock", json={"reset": True})


# -- last: resets the module's server ------------------------------------------------------------------

def test_a_reset_keeps_an_fcm_registration_over_a_connected_client_reachable(mock_mcs, receiver):
    """§4.1: a reset keeps real clients with their devices and connections: an FCM registration
    over a client still logged in takes sends at once after it."""
    mock_mcs.api("POST", "/api/v1/reset", expect=204)
    assert mock_mcs.device(receiver.token)["online"] is True
    v1(mock_mcs, {"token": receiver.token, "data": {"after": "reset"}})
    assert receiver.payload()["data"] == {"after": "reset"}
