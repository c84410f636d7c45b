"""pyfcm 1.5.4 (a real legacy-protocol client) against fcm-mock.

Every test checks both sides: what pyfcm made of the mock's answer, and what the mock recorded,
read back through its control API (device inboxes and message records).
"""

import pytest
from pyfcm.errors import AuthenticationError

from mocksupport import (APP_A, APP_B, FIXTURE_TOKEN_A, KEY_A, KEY_B, MESSAGE_ID_RE, SENDER_A,
                      SENDER_B, q)


def only_result(res):
    assert len(res["results"]) == 1, res
    return res["results"][0]


def test_notify_single_device_is_delivered(mock):
    push = mock.fcm()
    data = {"score": "3x1", "kind": "interop"}
    res = push.notify_single_device(registration_id=FIXTURE_TOKEN_A, message_title="Hello",
                                    message_body="World", data_message=data)

    assert (res["success"], res["failure"], res["canonical_ids"]) == (1, 0, 0), res
    assert len(res["multicast_ids"]) == 1 and isinstance(res["multicast_ids"][0], int), res
    result = only_result(res)
    mid = result["message_id"]
    assert MESSAGE_ID_RE.fullmatch(mid), mid
    assert "error" not in result and "registration_id" not in result, result

    items = mock.wait_inbox(FIXTURE_TOKEN_A, 1)
    assert len(items) == 1, items
    entry = items[0]
    assert entry["message_id"] == mid, entry
    assert entry["status"] == "delivered", entry
    assert entry["data"] == data, entry
    assert entry["notification"] == {"title": "Hello", "body": "World"}, entry
    assert entry["via"]["transport"] == "http", entry
    assert entry["via"]["target"] == "token", entry

    record = mock.message(mid)
    assert record["message_id"] == mid, record
    assert record["sender_id"] == SENDER_A, record
    assert record["multicast_id"] == res["multicast_ids"][0], record
    assert record["transport"] == "http" and record["format"] == "json", record
    assert record["target"] == {"kind": "token", "value": FIXTURE_TOKEN_A}, record
    assert record["data"] == data, record
    assert record["notification"] == {"title": "Hello", "body": "World"}, record
    recipients = {r["token"]: r for r in record["recipients"]}
    assert recipients[FIXTURE_TOKEN_A]["status"] == "delivered", record
    assert recipients[FIXTURE_TOKEN_A]["error"] is None, record


def test_notify_multiple_devices_reports_unregistered_in_order(mock):
    tokens = [mock.create_device() for _ in range(3)]
    gone = tokens[1]
    dev = mock.api("POST", f"/api/v1/devices/{q(gone)}:unregister")
    assert dev["token"] == gone and dev["state"] == "unregistered", dev

    push = mock.fcm()
    data = {"batch": "three"}
    res = push.notify_multiple_devices(registration_ids=tokens, message_title="Batch",
                                       data_message=data)

    assert (res["success"], res["failure"], res["canonical_ids"]) == (2, 1, 0), res
    assert len(res["multicast_ids"]) == 1, res
    results = res["results"]
    assert len(results) == 3, res
    assert results[1] == {"error": "NotRegistered"}, res
    for i in (0, 2):
        assert MESSAGE_ID_RE.fullmatch(results[i]["message_id"]), res
        assert "error" not in results[i], res
    assert results[0]["message_id"] != results[2]["message_id"], res

    for i in (0, 2):
        items = mock.wait_inbox(tokens[i], 1)
        assert len(items) == 1, items
        entry = items[0]
        assert entry["message_id"] == results[i]["message_id"], entry
        assert entry["status"] == "delivered", entry
        assert entry["data"] == data, entry
        assert entry["notification"] == {"title": "Batch"}, entry
        assert entry["via"]["target"] == "multicast", entry

    # Both deliveries are in; nothing may have been delivered to the unregistered device.
    assert [e for e in mock.inbox(gone) if e.get("status") == "delivered"] == []
    assert mock.device(gone)["state"] == "unregistered"


def test_refreshed_token_reports_canonical_id(mock):
    old = mock.create_device()
    new_dev = mock.api("POST", f"/api/v1/devices/{q(old)}:refresh")
    new = new_dev["token"]
    assert new and new != old, new_dev
    assert new_dev["state"] == "registered", new_dev
    old_dev = mock.device(old)
    assert old_dev["state"] == "refreshed" and old_dev["canonical_token"] == new, old_dev

    push = mock.fcm()
    res = push.notify_single_device(registration_id=old, message_body="after refresh",
                                    data_message={"step": "refresh"})

    assert (res["success"], res["failure"], res["canonical_ids"]) == (1, 0, 1), res
    result = only_result(res)
    assert result["registration_id"] == new, res
    assert MESSAGE_ID_RE.fullmatch(result["message_id"]), res

    items = mock.wait_inbox(new, 1)
    assert len(items) == 1, items
    assert items[0]["message_id"] == result["message_id"], items
    assert items[0]["status"] == "delivered", items
    assert items[0]["data"] == {"step": "refresh"}, items


def test_dry_run_is_validated_but_not_delivered(mock):
    token = mock.create_device()
    push = mock.fcm()
    res = push.notify_single_device(registration_id=token, message_title="dry",
                                    data_message={"probe": "dry"}, dry_run=True)

    assert (res["success"], res["failure"]) == (1, 0), res
    assert only_result(res)["message_id"] == "fake_message_id", res

    mock.assert_inbox_only_barrier(token, push)
    recorded = mock.messages(token=token)
    assert all((m.get("data") or {}).get("probe") != "dry" for m in recorded), recorded
    assert all(not m["options"].get("dry_run") for m in recorded), recorded


def test_wrong_server_key_raises_authentication_error(mock):
    token = mock.create_device()
    bad = mock.fcm(api_key="AAAAinterop:not-a-key-of-any-project")
    with pytest.raises(AuthenticationError):
        bad.notify_single_device(registration_id=token, message_title="nope",
                                 data_message={"probe": "unauthorized"})

    mock.assert_inbox_only_barrier(token, mock.fcm())
    recorded = mock.messages(token=token)
    assert all((m.get("data") or {}).get("probe") != "unauthorized" for m in recorded), recorded


@pytest.mark.parametrize("kwargs, error", [
    pytest.param({"data_message": {"from": "app-server", "ok": "1"}}, "InvalidDataKey",
                 id="reserved-data-key"),
    pytest.param({"data_message": {"ok": "1"}, "time_to_live": 2419201}, "InvalidTtl",
                 id="ttl-out-of-range"),
    pytest.param({"data_message": {"blob": "x" * 4200}}, "MessageTooBig",
                 id="payload-over-4096-bytes"),
])
def test_invalid_message_is_rejected(mock, kwargs, error):
    token = mock.create_device()
    push = mock.fcm()
    res = push.single_device_data_message(registration_id=token, **kwargs)

    assert (res["success"], res["failure"]) == (0, 1), res
    assert only_result(res) == {"error": error}, res

    rejected = mock.rejected_for(token)
    assert any(error in str(m) for m in rejected), rejected
    mock.assert_inbox_only_barrier(token, push)


def test_restricted_package_name_mismatch(mock):
    token = mock.create_device(app=APP_A)
    push = mock.fcm()
    res = push.notify_single_device(registration_id=token, message_title="pkg",
                                    restricted_package_name="com.example.not-this-app")

    assert (res["success"], res["failure"]) == (0, 1), res
    assert only_result(res) == {"error": "InvalidPackageName"}, res
    rejected = mock.rejected_for(token)
    assert any("InvalidPackageName" in str(m) for m in rejected), rejected

    # The right package name goes through.
    ok = push.notify_single_device(registration_id=token, message_title="pkg",
                                   restricted_package_name=APP_A)
    assert ok["success"] == 1, ok
    items = mock.wait_inbox(token, 1)
    assert [e["message_id"] for e in items] == [only_result(ok)["message_id"]], items
    assert mock.message(items[0]["message_id"])["options"]["restricted_package_name"] == APP_A


def test_token_of_another_sender_is_mismatch_sender_id(mock):
    foreign = mock.create_device(sender_id=SENDER_B, app=APP_B)
    res = mock.fcm(api_key=KEY_A).notify_single_device(registration_id=foreign,
                                                       message_title="wrong project")

    assert (res["success"], res["failure"]) == (0, 1), res
    assert only_result(res) == {"error": "MismatchSenderId"}, res
    rejected = mock.rejected_for(foreign)
    assert any("MismatchSenderId" in str(m) for m in rejected), rejected
    assert all(m["sender_id"] == SENDER_A for m in rejected), rejected

    # Its own project's key reaches it, and that is the only thing in its inbox.
    mock.assert_inbox_only_barrier(foreign, mock.fcm(api_key=KEY_B))


def test_options_are_recorded_as_sent(mock):
    token = mock.create_device()
    push = mock.fcm()
    res = push.notify_single_device(registration_id=token, message_title="opts",
                                    data_message={"k": "v"}, low_priority=True,
                                    collapse_key="score_update", time_to_live=3600,
                                    content_available=True)
    assert res["success"] == 1, res
    mid = only_result(res)["message_id"]

    record = mock.message(mid)
    opts = record["options"]
    assert opts["priority"] == "normal", record
    assert opts["collapse_key"] == "score_update", record
    assert opts["time_to_live"] == 3600, record
    assert opts["content_available"] is True, record
    assert opts["mutable_content"] is False, record
    assert opts["dry_run"] is False, record
    assert opts["restricted_package_name"] is None, record

    items = mock.wait_inbox(token, 1)
    assert items[0]["message_id"] == mid, items
    assert items[0]["collapse_key"] == "score_update", items
    assert items[0]["priority"] == "normal", items

    # pyfcm's defaults: priority "high" always sent, no TTL (mock default 4 weeks).
    res2 = push.notify_single_device(registration_id=token, message_title="defaults")
    opts2 = mock.message(only_result(res2)["message_id"])["options"]
    assert opts2["priority"] == "high", opts2
    assert opts2["time_to_live"] == 2419200, opts2
    assert opts2["collapse_key"] is None, opts2
    assert opts2["content_available"] is False, opts2
