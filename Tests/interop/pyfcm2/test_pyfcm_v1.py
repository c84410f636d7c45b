"""pyfcm 2.x, a second HTTP v1 client (beside firebase-admin): a service account made by the
mock, its token_uri the mock's, google-auth's JWT exchange, and sends through pyfcm's
`notify` (requests) and `async_notify_multiple_devices` (aiohttp). Its FCM endpoint is set to the
mock's (pyfcm builds `https://fcm.googleapis.com/v1/projects/{id}/messages:send` from a class
attribute; nothing else of it changes). Every send is checked in the device's inbox."""

import json

import pytest
from pyfcm import FCMNotification
from pyfcm.errors import FCMNotRegisteredError

from mocksupport import APP_A_IOS, PROJECT_A, SENDER_A


@pytest.fixture(scope="module")
def fcm(mock, tmp_path_factory):
    account = mock.api("POST", f"/api/v1/projects/{PROJECT_A}/service-accounts", expect=201, json={})
    assert account["token_uri"] == mock.base_url + "/token"
    path = tmp_path_factory.mktemp("pyfcm2") / "service-account.json"
    path.write_text(json.dumps(account))
    client = FCMNotification(service_account_file=str(path), project_id=PROJECT_A)
    client.FCM_END_POINT_BASE = mock.base_url + "/v1/projects"
    return client


def test_notify_reaches_the_device_with_a_token_from_the_mock(mock, fcm):
    token = mock.create_device()
    answer = fcm.notify(fcm_token=token, notification_title="Score", notification_body="3x1",
                        data_payload={"match": "42"})
    assert answer["name"].startswith(f"projects/{PROJECT_A}/messages/0:"), answer
    inbox = mock.wait_inbox(token)
    assert inbox[0]["data"] == {"match": "42"}
    assert inbox[0]["notification"]["title"] == "Score"
    assert inbox[0]["via"]["transport"] == "http_v1"
    record = mock.v1_record(answer["name"])
    assert record["transport"] == "http_v1" and record["sender_id"] == SENDER_A
    tokens = mock.api("GET", "/api/v1/access-tokens")["items"]
    assert any(t["project_id"] == PROJECT_A for t in tokens), tokens


def test_platform_configs_and_the_ios_effective_payload(mock, fcm):
    token = mock.create_device(app=APP_A_IOS, platform="ios")
    answer = fcm.notify(fcm_token=token, notification_title="Hi", notification_body="there",
                        apns_config={"headers": {"apns-priority": "5"},
                                     "payload": {"aps": {"badge": 3, "sound": "ping.caf"}}})
    assert "name" in answer, answer
    effective = mock.wait_inbox(token)[0]["effective"]
    assert effective["platform"] == "ios"
    assert effective["apns"]["headers"]["apns-priority"] == "5"
    aps = effective["apns"]["payload"]["aps"]
    assert aps["badge"] == 3 and aps["sound"] == "ping.caf"
    assert aps["alert"] == {"title": "Hi", "body": "there"}


def test_an_uninstalled_app_is_unregistered(mock, fcm):
    token = mock.create_device()
    mock.api("POST", f"/api/v1/devices/{token}:unregister")
    with pytest.raises(FCMNotRegisteredError):
        fcm.notify(fcm_token=token, data_payload={"k": "v"})
    assert mock.inbox(token) == []


def test_async_sends_to_many_devices(mock, fcm):
    tokens = [mock.create_device() for _ in range(5)]
    params = [{"fcm_token": t, "data_payload": {"n": str(i)}} for i, t in enumerate(tokens)]
    answers = fcm.async_notify_multiple_devices(params_list=params, timeout=10)
    assert len(answers) == 5 and all("name" in a for a in answers), answers
    for i, t in enumerate(tokens):
        assert mock.wait_inbox(t)[0]["data"] == {"n": str(i)}
