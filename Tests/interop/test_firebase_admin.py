"""firebase-admin 7.7.0 (Python), a real HTTP v1 client, against fcm-mock.

Every test runs in both set-ups of v1support.py: "pointed" (the SDK's FCM URLs moved to the
mock's HTTP port, token_uri the mock's) and "unmodified" (Google's URLs, names resolved to the
mock's TLS port inside this process, the mock's CA trusted through the environment). The service
account is always one the mock made. Each test checks what the SDK returned and what the mock
recorded and delivered, read back through the control API.
"""

import datetime
import re
import secrets
import warnings

import pytest
from firebase_admin import exceptions, messaging

from mocksupport import APP_A, APP_A_IOS, APP_B, KEY_B, MESSAGE_ID_RE, PROJECT_A, SENDER_B, q
from v1support import pointed, unmodified


TOPIC_ID_RE = re.compile(r"\d+")


@pytest.fixture(scope="module", params=["pointed", "unmodified"])
def sdk(request, tmp_path_factory):
    if request.param == "pointed":
        mock = request.getfixturevalue("mock")
        setup = pointed(mock, tmp_path_factory.mktemp("pointed"))
    else:
        mock = request.getfixturevalue("mock_https")
        setup = unmodified(mock, tmp_path_factory.mktemp("unmodified"))
    with setup as s:
        yield s


def device(sdk, app=APP_A, platform="android", sender_id=None):
    """A new online device of the SDK's project (or `sender_id`'s): its token."""
    kwargs = {"app": app, "platform": platform}
    if sender_id:
        kwargs["sender_id"] = sender_id
    return sdk.mock.create_device(**kwargs)


def token_message(token, **fields):
    """A Message to a registration token: `message.token` on the wire, which app servers still
    send and the mock answers as Google does. firebase-admin 7.x deprecates `token=` for `fid=`,
    which is another field on the wire (`message.fid`, tested beside it), so here, and only for
    this constructor, its DeprecationWarning is expected rather than a sign of an old example."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Message.token is deprecated", DeprecationWarning)
        return messaging.Message(token=token, **fields)


def fid_of(sdk, token):
    """The device's Firebase installation id, which firebase-admin 7.x prefers to its token."""
    fid = sdk.mock.device(token)["fid"]
    assert fid and fid != token, fid
    return fid


def unregistered_device(sdk):
    token = device(sdk)
    dev = sdk.mock.api("POST", f"/api/v1/devices/{q(token)}:unregister")
    assert dev["state"] == "unregistered", dev
    return token


def only_entry(sdk, token):
    items = sdk.mock.wait_inbox(token, 1)
    assert len(items) == 1, items
    assert items[0]["status"] == "delivered", items[0]
    assert items[0]["via"]["transport"] == "http_v1", items[0]
    return items[0]


def delivered_for(sdk, name, token):
    """The record of the send answered with `name` and `token`'s only inbox entry, which must be
    that message's delivery."""
    record = sdk.mock.v1_record(name)
    entry = only_entry(sdk, token)
    assert entry["message_id"] == record["message_id"], (entry, record)
    return record, entry


def assert_token_name(sdk, name):
    prefix = f"projects/{sdk.project_id}/messages/"
    assert name.startswith(prefix) and MESSAGE_ID_RE.fullmatch(name[len(prefix):]), name


def send_keeping_block(sdk, msg, token, block):
    """Sends `msg` to `token`: its name is a token send's, and its record keeps the platform
    `block` exactly as the SDK encoded it. Its inbox entry."""
    name = messaging.send(msg, app=sdk.app)
    assert_token_name(sdk, name)
    record, entry = delivered_for(sdk, name, token)
    sent = messaging._MessagingService.encode_message(msg)
    assert record[block] == sent[block], (record[block], sent[block])
    return entry


def barrier(sdk, token):
    """Proves nothing earlier reached `token` (of the SDK's project): one real v1 send, long-polled;
    the inbox must then hold exactly that message."""
    name = messaging.send(token_message(token, data={"probe": "barrier"}), app=sdk.app)
    _, entry = delivered_for(sdk, name, token)
    assert entry["data"] == {"probe": "barrier"}, entry


def rejected(sdk, token, error):
    """The v1 sends to the device of `token` (by its token or its fid) that the mock refused,
    each with FcmError `error`."""
    names = {token, sdk.mock.device(token)["fid"]}
    items = [m for m in sdk.mock.messages(transport="http_v1", status="rejected")
             if m["status"] == "rejected" and m["target"].get("value") in names]
    assert items and all(m["error"] == error for m in items), items
    return items


def refused_by(sdk, fault, error):
    """The v1 requests that `fault` refused (a refused request's record names the fault that
    fired, though not always the target), each recorded with FcmError `error`."""
    items = [m for m in sdk.mock.messages(transport="http_v1", status="rejected")
             if m.get("fault") == fault["id"]]
    assert all(m["error"] == error for m in items), items
    return items


# -- OAuth 2.0 and sends -----------------------------------------------------------------------

def sa_tokens(sdk):
    """The access tokens the mock has issued (and not revoked) to the set-up's service account."""
    email = sdk.service_account["client_email"]
    return [t for t in sdk.mock.api("GET", "/api/v1/access-tokens")["items"]
            if t["client_email"] == email]


def test_service_account_credential_gets_an_access_token(sdk):
    info = sdk.app.credential.get_access_token()  # google-auth's JWT-bearer grant at token_uri

    assert info.access_token.startswith("ya29."), info.access_token[:12]
    remaining = info.expiry - datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert datetime.timedelta(minutes=55) < remaining <= datetime.timedelta(hours=1), info.expiry
    tokens = sa_tokens(sdk)
    assert [t["token_prefix"] for t in tokens] == [info.access_token[:12]], tokens
    assert tokens[0]["project_id"] == PROJECT_A, tokens
    assert "https://www.googleapis.com/auth/cloud-platform" in tokens[0]["scope"].split(), tokens


def test_send_to_fid_is_delivered_with_that_access_token(sdk):
    token = device(sdk)
    fid = fid_of(sdk, token)
    msg = messaging.Message(fid=fid, data={"score": "3x1", "kind": "interop"},
                            notification=messaging.Notification(title="Hello", body="World"))
    name = messaging.send(msg, app=sdk.app)

    assert_token_name(sdk, name)
    record, entry = delivered_for(sdk, name, token)
    assert record["target"]["kind"] == "fid" and record["target"]["value"] == fid, record
    assert entry["via"]["target"] == "fid", entry
    assert entry["data"] == {"score": "3x1", "kind": "interop"}, entry
    assert entry["notification"] == {"title": "Hello", "body": "World"}, entry
    # The send used the token fetched above: no second one was issued.
    cred = sdk.app.credential.get_credential()
    assert [t["token_prefix"] for t in sa_tokens(sdk)] == [cred.token[:12]], sa_tokens(sdk)


def test_send_to_token_android_config_reaches_the_device_as_sent(sdk):
    token = device(sdk)
    android = messaging.AndroidConfig(
        collapse_key="scores", priority="high", ttl=datetime.timedelta(seconds=90),
        data={"extra": "android"},
        notification=messaging.AndroidNotification(channel_id="goals", color="#ff0000"))
    msg = token_message(token, data={"k": "v"}, android=android,
                        notification=messaging.Notification(title="Goal", body="1-0"))
    entry = send_keeping_block(sdk, msg, token, "android")
    assert entry["via"]["target"] == "token", entry
    eff = entry["effective"]
    assert eff["platform"] == "android", eff
    assert eff["data"] == {"k": "v", "extra": "android"}, eff
    assert eff["notification"] == {"title": "Goal", "body": "1-0", "channel_id": "goals",
                                   "color": "#ff0000"}, eff
    assert (eff["collapse_key"], eff["priority"], eff["ttl_s"]) == ("scores", "high", 90), eff


def test_send_to_ios_device_builds_the_apns_request(sdk):
    token = device(sdk, app=APP_A_IOS, platform="ios")
    fid = fid_of(sdk, token)
    apns = messaging.APNSConfig(payload=messaging.APNSPayload(
        aps=messaging.Aps(badge=3, sound="ping.caf", category="GOAL", thread_id="match-7"),
        match="7"))
    msg = messaging.Message(fid=fid, data={"k": "v"}, apns=apns,
                            notification=messaging.Notification(title="Goal", body="1-0"))
    name = messaging.send(msg, app=sdk.app)

    _, entry = delivered_for(sdk, name, token)
    eff = entry["effective"]
    assert eff["platform"] == "ios", eff
    headers = eff["apns"]["headers"]
    assert headers["apns-priority"] == "10" and headers["apns-push-type"] == "alert", headers
    assert eff["apns"]["payload"] == {
        "aps": {"alert": {"title": "Goal", "body": "1-0"}, "badge": 3, "sound": "ping.caf",
                "category": "GOAL", "thread-id": "match-7"},
        "match": "7", "k": "v"}, eff


def test_send_to_web_device_builds_the_webpush_message(sdk):
    token = device(sdk, platform="web")
    assert sdk.mock.device(token)["platform"] == "web"
    webpush = messaging.WebpushConfig(
        headers={"X-Trace": "t1", "Urgency": "high", "TTL": "300"},
        data={"shared": "web", "w": "1"},
        notification=messaging.WebpushNotification(
            body="2-0", icon="https://example.com/icon.png",
            actions=[messaging.WebpushNotificationAction(action="open", title="Open")]),
        fcm_options=messaging.WebpushFCMOptions(link="https://example.com/match/7"))
    msg = messaging.Message(fid=fid_of(sdk, token), data={"k": "v", "shared": "message"}, webpush=webpush,
                            notification=messaging.Notification(title="Goal", body="1-0"))
    entry = send_keeping_block(sdk, msg, token, "webpush")
    eff = entry["effective"]
    assert list(eff) == ["platform", "webpush"] and eff["platform"] == "web", eff
    web = eff["webpush"]
    # docs/effective-payloads.md, "Web": TTL, Topic, Urgency first (Topic absent: none given),
    # then the other headers; data and notification overlaid by the webpush block's; the link.
    assert list(web["headers"].items()) == [("TTL", "300"), ("Urgency", "high"), ("X-Trace", "t1")], web
    assert web["data"] == {"k": "v", "shared": "web", "w": "1"}, web
    assert web["notification"] == {"title": "Goal", "body": "2-0", "icon": "https://example.com/icon.png",
                                   "actions": [{"action": "open", "title": "Open"}]}, web
    assert web["fcm_options"] == {"link": "https://example.com/match/7"}, web


def test_send_each_reports_each_outcome_in_order(sdk):
    good1, good2, gone = device(sdk), device(sdk), unregistered_device(sdk)
    other = device(sdk, app=APP_B, sender_id=SENDER_B)
    msgs = [messaging.Message(fid=fid_of(sdk, good1), data={"n": "0"}),
            messaging.Message(fid=fid_of(sdk, gone), data={"n": "1"}),
            token_message(other, data={"n": "2"}),
            token_message(good2, data={"n": "3"})]
    batch = messaging.send_each(msgs, app=sdk.app)

    assert (batch.success_count, batch.failure_count) == (2, 2), batch.responses
    r = batch.responses
    assert r[0].success and r[3].success, r
    assert isinstance(r[1].exception, messaging.UnregisteredError), r[1].exception
    assert r[1].exception.http_response.status_code == 404, r[1].exception
    assert isinstance(r[2].exception, messaging.SenderIdMismatchError), r[2].exception
    assert r[2].exception.code == exceptions.PERMISSION_DENIED, r[2].exception
    for i, token in ((0, good1), (3, good2)):
        assert_token_name(sdk, r[i].message_id)
        _, entry = delivered_for(sdk, r[i].message_id, token)
        assert entry["data"] == {"n": str(i)}, entry
    rejected(sdk, gone, "UNREGISTERED")
    assert [e for e in sdk.mock.inbox(gone) if e.get("status") == "delivered"] == []
    sdk.mock.assert_inbox_only_barrier(other, sdk.mock.fcm(api_key=KEY_B))


def test_send_each_async_goes_through_httpx(sdk):
    devices = [device(sdk) for _ in range(4)]
    gone = unregistered_device(sdk)
    msgs = [messaging.Message(fid=fid_of(sdk, t), data={"n": str(i)})
            for i, t in enumerate(devices)]
    msgs.append(token_message(gone, data={"n": "gone"}))
    sdk.http_versions.clear()
    batch = sdk.run(messaging.send_each_async(msgs, app=sdk.app))

    assert (batch.success_count, batch.failure_count) == (4, 1), batch.responses
    assert isinstance(batch.responses[4].exception, messaging.UnregisteredError), batch.responses
    names = [r.message_id for r in batch.responses[:4]]
    assert len(set(names)) == 4, names
    for i, token in enumerate(devices):
        _, entry = delivered_for(sdk, names[i], token)
        assert entry["data"] == {"n": str(i)}, entry
    # Over TLS httpx negotiates h2 by ALPN (http2=True); over plain http it speaks HTTP/1.1.
    wanted = "HTTP/2" if sdk.name == "unmodified" else "HTTP/1.1"
    assert sdk.http_versions and set(sdk.http_versions) == {wanted}, sdk.http_versions


# -- topics ----------------------------------------------------------------------------------------

def test_subscribe_send_to_topic_and_unsubscribe(sdk):
    topic = "news-" + secrets.token_hex(4)
    t1, t2, gone = device(sdk), device(sdk), unregistered_device(sdk)
    other = device(sdk, app=APP_B, sender_id=SENDER_B)
    fid2 = fid_of(sdk, t2)

    res = messaging.subscribe_to_topic([t1, fid2, gone, other], topic, app=sdk.app)
    assert (res.success_count, res.failure_count) == (2, 2), res.errors
    assert [(e.index, e.reason) for e in res.errors] == [
        (2, "UNREGISTERED"), (3, "SENDER_ID_MISMATCH")], res.errors
    for token in (t1, t2):
        assert topic in sdk.mock.device(token)["topics"], sdk.mock.device(token)
    for token in (gone, other):
        assert topic not in sdk.mock.device(token)["topics"], sdk.mock.device(token)
    again = messaging.subscribe_to_topic(t1, "/topics/" + topic, app=sdk.app)
    assert (again.success_count, again.failure_count) == (1, 0), again.errors

    name = messaging.send(messaging.Message(topic=topic, data={"edition": "1"}), app=sdk.app)
    prefix = f"projects/{sdk.project_id}/messages/"
    assert name.startswith(prefix) and TOPIC_ID_RE.fullmatch(name[len(prefix):]), name
    record = sdk.mock.v1_record(name)
    assert record["target"] == {"kind": "topic", "value": f"/topics/{topic}"}, record
    for token in (t1, t2):
        entry = only_entry(sdk, token)
        assert entry["data"] == {"edition": "1"} and entry["via"]["target"] == "topic", entry

    res = messaging.unsubscribe_from_topic(t1, topic, app=sdk.app)
    assert (res.success_count, res.failure_count) == (1, 0), res.errors
    assert topic not in sdk.mock.device(t1)["topics"], sdk.mock.device(t1)
    # allow_missing=true: unsubscribing what is not subscribed succeeds.
    res = messaging.unsubscribe_from_topic(t1, topic, app=sdk.app)
    assert (res.success_count, res.failure_count) == (1, 0), res.errors

    messaging.send(messaging.Message(topic=topic, data={"edition": "2"}), app=sdk.app)
    items = sdk.mock.wait_inbox(t2, 2)
    assert sorted(e["data"]["edition"] for e in items) == ["1", "2"], items
    assert [e["data"] for e in sdk.mock.inbox(t1)] == [{"edition": "1"}]


def test_async_subscription_then_multicast_to_fids(sdk):
    topic = "async-" + secrets.token_hex(4)
    tokens = [device(sdk) for _ in range(3)]
    fids = [fid_of(sdk, t) for t in tokens]
    sdk.http_versions.clear()
    res = sdk.run(messaging.subscribe_to_topic_async(fids[:2], topic, app=sdk.app))
    assert (res.success_count, res.failure_count) == (2, 0), res.errors
    assert [topic in sdk.mock.device(t)["topics"] for t in tokens] == [True, True, False]
    wanted = "HTTP/2" if sdk.name == "unmodified" else "HTTP/1.1"
    assert set(sdk.http_versions) == {wanted}, sdk.http_versions

    multicast = messaging.MulticastMessage(fids=fids, data={"to": "all"})
    batch = messaging.send_each_for_multicast(multicast, app=sdk.app)
    assert (batch.success_count, batch.failure_count) == (3, 0), batch.responses
    for response, token in zip(batch.responses, tokens):
        _, entry = delivered_for(sdk, response.message_id, token)
        assert entry["data"] == {"to": "all"} and entry["via"]["target"] == "fid", entry


# -- dry run ----------------------------------------------------------------------------------------

def test_dry_run_validates_without_delivering(sdk):
    token = device(sdk)
    name = messaging.send(messaging.Message(fid=fid_of(sdk, token), data={"dry": "1"}), dry_run=True,
                          app=sdk.app)
    assert name == f"projects/{sdk.project_id}/messages/fake_message_id", name

    batch = messaging.send_each([token_message(token, data={"dry": "2"})],
                                dry_run=True, app=sdk.app)
    assert batch.responses[0].message_id == name, batch.responses

    gone = unregistered_device(sdk)
    with pytest.raises(messaging.UnregisteredError):
        messaging.send(token_message(gone, data={"dry": "3"}), dry_run=True,
                       app=sdk.app)
    barrier(sdk, token)


# -- typed errors ----------------------------------------------------------------------------------

def test_unregistered_device_is_unregistered_error(sdk):
    gone = unregistered_device(sdk)
    with pytest.raises(messaging.UnregisteredError) as info:
        messaging.send(token_message(gone, data={"k": "v"}), app=sdk.app)
    assert info.value.code == exceptions.NOT_FOUND, info.value
    assert info.value.http_response.status_code == 404, info.value
    rejected(sdk, gone, "UNREGISTERED")
    assert [e for e in sdk.mock.inbox(gone) if e.get("status") == "delivered"] == []


def test_token_of_another_project_is_sender_id_mismatch(sdk):
    other = device(sdk, app=APP_B, sender_id=SENDER_B)
    with pytest.raises(messaging.SenderIdMismatchError) as info:
        messaging.send(token_message(other, data={"k": "v"}), app=sdk.app)
    assert info.value.http_response.status_code == 403, info.value
    sdk.mock.assert_inbox_only_barrier(other, sdk.mock.fcm(api_key=KEY_B))


def test_fault_429_is_quota_exceeded_error(sdk):
    token = device(sdk)
    fault = sdk.mock.fault({"transport": "http_v1", "token": token}, {"status": 429}, times=1)
    with pytest.raises(messaging.QuotaExceededError) as info:
        messaging.send(token_message(token, data={"k": "v"}), app=sdk.app)
    assert info.value.code == exceptions.RESOURCE_EXHAUSTED, info.value
    assert info.value.http_response.status_code == 429, info.value
    assert "Retry-After" not in info.value.http_response.headers, info.value.http_response.headers
    assert fault["id"] not in sdk.mock.fault_ids()  # fired its one time
    assert len(refused_by(sdk, fault, "QUOTA_EXCEEDED")) == 1
    barrier(sdk, token)


def test_fault_503_is_unavailable_error_after_the_sdks_retries(sdk):
    token = device(sdk)
    # firebase-admin retries a 503 four times, waiting Retry-After seconds between tries.
    fault = sdk.mock.fault({"transport": "http_v1", "token": token},
                           {"status": 503, "retry_after_s": 1}, times=5)
    with pytest.raises(exceptions.UnavailableError) as info:
        messaging.send(token_message(token, data={"k": "v"}), app=sdk.app)
    assert info.value.http_response.status_code == 503, info.value
    assert info.value.http_response.headers["Retry-After"] == "1", info.value.http_response.headers
    assert fault["id"] not in sdk.mock.fault_ids()  # fired all five times
    assert len(refused_by(sdk, fault, "UNAVAILABLE")) == 5  # the first try and four retries
    barrier(sdk, token)


def test_fault_503_once_is_retried_by_the_sdk_and_delivered(sdk):
    token = device(sdk)
    fault = sdk.mock.fault({"transport": "http_v1", "token": token},
                           {"status": 503, "retry_after_s": 1}, times=1)
    name = messaging.send(token_message(token, data={"try": "again"}), app=sdk.app)
    _, entry = delivered_for(sdk, name, token)
    assert entry["data"] == {"try": "again"}, entry
    assert fault["id"] not in sdk.mock.fault_ids()
    assert len(refused_by(sdk, fault, "UNAVAILABLE")) == 1


def test_invalid_condition_is_invalid_argument_error(sdk):
    condition = " && ".join(f"'t{i}' in topics" for i in range(6))
    with pytest.raises(exceptions.InvalidArgumentError) as info:
        messaging.send(messaging.Message(condition=condition), app=sdk.app)
    assert info.value.http_response.status_code == 400, info.value
    body = info.value.http_response.json()
    assert body["error"]["status"] == "INVALID_ARGUMENT", body


def test_revoked_access_token_is_refreshed_by_the_sdk(sdk):
    sdk.app.credential.get_access_token()  # one is issued even when this test runs alone
    before = sa_tokens(sdk)
    assert before, "no access token issued yet"
    for t in before:
        sdk.mock.api("DELETE", f"/api/v1/access-tokens/{t['id']}", expect=204)
    token = device(sdk)
    # google-auth's session answers a 401 by fetching a new token and trying once more.
    name = messaging.send(token_message(token, data={"k": "fresh"}), app=sdk.app)
    delivered_for(sdk, name, token)
    after = sa_tokens(sdk)
    assert len(after) == 1 and after[0]["id"] not in {t["id"] for t in before}, after
    cred = sdk.app.credential.get_credential()
    assert after[0]["token_prefix"] == cred.token[:12], (after, cred.token[:12])
