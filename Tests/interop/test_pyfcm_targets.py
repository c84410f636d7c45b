"""pyfcm 1.5.4 against fcm-mock: topics, conditions, Instance ID subscriptions, device groups.

As in test_pyfcm.py, every test checks what pyfcm made of the mock's answer and what devices
received, read back through the control API. Topic and group names carry a random suffix, so the
tests of this module (one server) do not see each other's subscribers.
"""

import secrets
import urllib.parse

import pytest
from pyfcm.errors import InvalidDataError

from mocksupport import (APP_A, APP_A_IOS, APP_B, KEY_B, SENDER_A, SENDER_B, fcm_token, q)

INVALID_CONDITION = "Invalid condition expression provided."


def fresh_name(prefix):
    """A topic or group name no other test uses: [a-zA-Z0-9-_.~%] only."""
    return f"{prefix}-{secrets.token_hex(4)}"


def unregister(mock, token):
    dev = mock.api("POST", f"/api/v1/devices/{q(token)}:unregister")
    assert dev["token"] == token and dev["state"] == "unregistered", dev


def assert_inbox_exactly(mock, token, push, expected_ids):
    """The inbox holds `expected_ids` (in order) and nothing else: one more real message is sent
    and long-polled for, so nothing sent earlier can still be on its way (no sleeping)."""
    res = push.single_device_data_message(registration_id=token, data_message={"probe": "barrier"})
    assert res["success"] == 1, res
    barrier_id = res["results"][0]["message_id"]
    items = mock.wait_inbox(token, len(expected_ids) + 1)
    assert [e["message_id"] for e in items] == list(expected_ids) + [barrier_id], items


def recipients_of(record):
    return {r["token"]: r for r in record["recipients"]}


def only_record(mock, token, kind):
    records = mock.records_for(token, kind)
    assert len(records) == 1, records
    return records[0]


def test_topic_send_reaches_registered_subscribers_of_the_project(mock):
    topic = fresh_name("news")
    online = mock.create_device()
    ios = mock.create_device(app=APP_A_IOS, platform="ios")
    offline = mock.create_device(online=False)
    foreign = mock.create_device(sender_id=SENDER_B, app=APP_B)
    gone = mock.create_device()
    left = mock.create_device()
    bystander = mock.create_device()
    for token in (online, ios, offline, foreign, gone, left):
        mock.subscribe(token, topic)
    mock.unsubscribe(left, topic)
    unregister(mock, gone)

    listed = mock.topic(topic)
    assert listed["name"] == topic, listed
    assert {online, ios, offline, foreign} <= set(listed["subscribers"]), listed
    assert left not in listed["subscribers"] and bystander not in listed["subscribers"], listed
    assert listed["count"] == len(listed["subscribers"]), listed

    push = mock.fcm()
    data = {"edition": "morning"}
    res = push.notify_topic_subscribers(topic_name=topic, message_title="Headlines",
                                        data_message=data)

    # The mock answers {"message_id": <number>}; pyfcm counts that as one success.
    topic_mid = res["topic_message_id"]
    assert push.send_request_responses[0].json() == {"message_id": topic_mid}, res
    assert isinstance(topic_mid, int) and not isinstance(topic_mid, bool) and topic_mid > 0, res
    assert (res["success"], res["failure"], res["canonical_ids"]) == (1, 0, 0), res
    assert res["multicast_ids"] == [] and res["results"] == [], res

    via = {"transport": "http", "target": "topic", "topic": topic}
    delivered = {}
    for token in (online, ios):
        items = mock.wait_inbox(token, 1)
        assert len(items) == 1, items
        entry = items[0]
        assert entry["status"] == "delivered", entry
        assert entry["via"] == via, entry
        assert entry["data"] == data, entry
        assert entry["notification"] == {"title": "Headlines"}, entry
        delivered[token] = entry["message_id"]

    held = mock.wait_inbox(offline, 1)
    assert len(held) == 1, held
    assert held[0]["status"] == "pending" and held[0]["delivered_at"] is None, held
    assert held[0]["via"] == via and held[0]["data"] == data, held
    assert mock.device(offline)["pending"] == 1

    # One record, reaching exactly the registered subscribers of project A.
    record = only_record(mock, online, "topic")
    assert record["target"] == {"kind": "topic", "value": f"/topics/{topic}"}, record
    assert record["sender_id"] == SENDER_A, record
    recipients = recipients_of(record)
    assert set(recipients) == {online, ios, offline}, record
    assert recipients[online]["message_id"] == delivered[online], record
    assert recipients[ios]["message_id"] == delivered[ios], record
    assert recipients[offline]["status"] == "pending", record
    assert recipients[offline]["message_id"] == held[0]["message_id"], record

    # Nothing reached the other project's subscriber, the one that left, or a bystander,
    # and nothing was delivered to the unregistered one.
    assert_inbox_exactly(mock, foreign, mock.fcm(api_key=KEY_B), [])
    assert_inbox_exactly(mock, left, push, [])
    assert_inbox_exactly(mock, bystander, push, [])
    assert [e for e in mock.inbox(gone) if e["status"] == "delivered"] == []

    # The held message is delivered once its device comes online.
    mock.set_online(offline, True)
    items = mock.inbox(offline, wait=5, min_count=1, status="delivered")
    assert [e["message_id"] for e in items] == [held[0]["message_id"]], items
    assert items[0]["via"] == via, items


def test_condition_send_reaches_exactly_the_matching_devices(mock):
    news, sport, tennis = fresh_name("news"), fresh_name("sport"), fresh_name("tennis")
    both = mock.create_device()
    both_upper = mock.create_device()  # subscribed under upper-case names
    news_only = mock.create_device()
    sport_only = mock.create_device()
    news_tennis = mock.create_device()
    foreign_both = mock.create_device(sender_id=SENDER_B, app=APP_B)
    subscriptions = {both: [news, sport], both_upper: [news.upper(), sport.upper()],
                     news_only: [news], sport_only: [sport], news_tennis: [news, tennis],
                     foreign_both: [news, sport]}
    for token, topics in subscriptions.items():
        for topic in topics:
            mock.subscribe(token, topic)

    push = mock.fcm()
    # Matching is case-insensitive both ways: `sport` is named in upper case here.
    cond_and = f"'{news}' in topics && '{sport.upper()}' in topics"
    res = push.notify_topic_subscribers(condition=cond_and, message_title="Both",
                                        data_message={"cond": "and"})
    assert (res["success"], res["failure"]) == (1, 0), res
    assert isinstance(res["topic_message_id"], int) and res["topic_message_id"] > 0, res
    assert push.send_request_responses[0].json() == {"message_id": res["topic_message_id"]}

    # Two operators is the limit, and it is allowed; && binds tighter than ||.
    cond_or = f"'{news}' in topics && ('{sport}' in topics || '{tennis}' in topics)"
    res2 = push.notify_topic_subscribers(condition=cond_or, message_title="Either",
                                         data_message={"cond": "or"})
    assert (res2["success"], res2["failure"]) == (1, 0), res2
    assert res2["topic_message_id"] != res["topic_message_id"], (res, res2)

    received = {}
    for token, n in ((both, 2), (both_upper, 2), (news_tennis, 1)):
        items = mock.wait_inbox(token, n)
        assert len(items) == n, items
        for entry in items:
            assert entry["status"] == "delivered", entry
            assert entry["via"]["transport"] == "http", entry
            assert entry["via"]["target"] == "condition", entry
        received[token] = items
    for token in (both, both_upper):
        assert [e["data"] for e in received[token]] == [{"cond": "and"}, {"cond": "or"}]
    assert [e["data"] for e in received[news_tennis]] == [{"cond": "or"}]

    by_cond = {r["target"]["value"]: r for r in mock.records_for(both, "condition")}
    assert set(by_cond) == {cond_and, cond_or}, by_cond
    assert set(recipients_of(by_cond[cond_and])) == {both, both_upper}, by_cond[cond_and]
    assert set(recipients_of(by_cond[cond_or])) == {both, both_upper, news_tennis}, by_cond

    for token in (both, both_upper, news_tennis):
        assert_inbox_exactly(mock, token, push, [e["message_id"] for e in received[token]])
    assert_inbox_exactly(mock, news_only, push, [])
    assert_inbox_exactly(mock, sport_only, push, [])
    assert_inbox_exactly(mock, foreign_both, mock.fcm(api_key=KEY_B), [])


@pytest.mark.parametrize("template", [
    pytest.param("'{a}' in topics && '{b}' in topics && '{c}' in topics || '{d}' in topics",
                 id="three-operators"),
    pytest.param("('{a}' in topics && '{b}' in topics", id="unbalanced-parenthesis"),
    pytest.param("'{a}' && '{b}' in topics", id="missing-in-topics"),
    pytest.param("'{a}' in topics &&", id="dangling-operator"),
])
def test_invalid_condition_raises_invalid_data_error(mock, template):
    names = {k: fresh_name(k) for k in "abcd"}
    subscriber = mock.create_device()
    for topic in names.values():
        mock.subscribe(subscriber, topic)

    push = mock.fcm()
    with pytest.raises(InvalidDataError) as raised:
        push.notify_topic_subscribers(condition=template.format(**names),
                                      message_title="never", data_message={"probe": "invalid"})

    response = push.send_request_responses[0]
    assert response.status_code == 400, response.text
    assert response.text.strip() == INVALID_CONDITION, response.text
    assert str(raised.value).strip() == INVALID_CONDITION, raised.value

    assert mock.records_for(subscriber, "condition") == []
    assert_inbox_exactly(mock, subscriber, push, [])


def test_subscribe_and_unsubscribe_through_pyfcm_instance_id_calls(mock):
    topic = fresh_name("sport")
    first, second = mock.create_device(), mock.create_device()
    foreign = mock.create_device(sender_id=SENDER_B, app=APP_B)
    gone = mock.create_device()
    unregister(mock, gone)

    push = mock.fcm_redirected()
    day_before = mock.clock_date()
    assert push.subscribe_registration_ids_to_topic([first, foreign, second, gone], topic) is True
    day_after = mock.clock_date()

    # pyfcm posted to its hard-wired Google URL; the adapter took it to the mock. pyfcm returns
    # only True for a 200, so the per-token results are read from the adapter's record.
    added = push.adapter.last("/iid/v1:batchAdd")
    assert added.request.url == mock.base_url + "/iid/v1:batchAdd", added.request.url
    assert added.status_code == 200, added.text
    assert added.json() == {"results": [{}, {"error": "NOT_FOUND"}, {}, {"error": "NOT_FOUND"}]}
    sent_to = [u for u, r in push.adapter.exchanges if r is added]
    assert sent_to == ["https://iid.googleapis.com/iid/v1:batchAdd"], sent_to

    listed = mock.topic(topic)
    assert listed["name"] == topic, listed
    assert sorted(listed["subscribers"]) == sorted([first, second]), listed
    assert listed["count"] == 2, listed
    assert mock.device(first)["topics"] == [topic]
    assert mock.device(foreign)["topics"] == []

    info = push.get_registration_id_info(first)
    assert info is not None
    add_date = info["rel"]["topics"][topic]["addDate"]
    assert add_date in {day_before, day_after}, info
    assert info == {"application": APP_A, "authorizedEntity": SENDER_A, "platform": "ANDROID",
                    "rel": {"topics": {topic: {"addDate": add_date}}}}, info
    looked_up = push.adapter.last("/iid/info/" + first)
    assert looked_up.request.url.startswith(mock.base_url + "/iid/info/"), looked_up.request.url
    assert urllib.parse.urlsplit(looked_up.request.url).query == "details=true"
    assert push.get_registration_id_info(fcm_token()) is None

    assert push.unsubscribe_registration_ids_from_topic([second], topic) is True
    removed = push.adapter.last("/iid/v1:batchRemove")
    assert removed.request.url == mock.base_url + "/iid/v1:batchRemove", removed.request.url
    assert removed.json() == {"results": [{}]}, removed.text

    listed = mock.topic(topic)
    assert listed["subscribers"] == [first] and listed["count"] == 1, listed
    assert push.get_registration_id_info(second)["rel"] == {"topics": {}}
    assert push.get_registration_id_info(first)["rel"]["topics"] == {topic: {"addDate": add_date}}

    # A topic send through the same client (its /fcm/send also goes through the adapter)
    # reaches the remaining subscriber only.
    res = push.topic_subscribers_data_message(topic_name=topic, data_message={"after": "remove"})
    assert (res["success"], res["failure"]) == (1, 0), res
    assert any(u == "https://fcm.googleapis.com/fcm/send" for u, _ in push.adapter.exchanges)
    items = mock.wait_inbox(first, 1)
    assert len(items) == 1 and items[0]["data"] == {"after": "remove"}, items
    assert items[0]["via"] == {"transport": "http", "target": "topic", "topic": topic}, items
    assert_inbox_exactly(mock, second, push, [])


def test_device_group_send_reports_unregistered_member(mock):
    online, offline, gone = mock.create_device(), mock.create_device(online=False), \
        mock.create_device()
    name = fresh_name("family")
    created = mock.group_request(json={"operation": "create", "notification_key_name": name,
                                       "registration_ids": [online, offline, gone]})
    assert created.status_code == 200, created.text
    key = created.json()["notification_key"]
    assert created.json() == {"notification_key": key}, created.text
    assert key.startswith("APA91b"), key

    found = mock.group_request("GET", params={"notification_key_name": name})
    assert found.status_code == 200 and found.json() == {"notification_key": key}, found.text

    group = mock.group(key)
    assert group["notification_key"] == key and group["notification_key_name"] == name, group
    assert group["sender_id"] == SENDER_A, group
    assert sorted(group["members"]) == sorted([online, offline, gone]), group
    assert isinstance(group["created_at"], str) and group["created_at"], group

    unregister(mock, gone)
    push = mock.fcm()
    data = {"group": name}
    res = push.notify_single_device(registration_id=key, message_title="Family",
                                    data_message=data)

    raw = push.send_request_responses[0].json()
    assert raw == {"success": 2, "failure": 1, "failed_registration_ids": [gone]}, raw
    # pyfcm 1.5.4 adds up the counts; it keeps no results and drops failed_registration_ids.
    assert res == {"multicast_ids": [], "success": 2, "failure": 1, "canonical_ids": 0,
                   "results": [], "topic_message_id": None}, res

    items = mock.wait_inbox(online, 1)
    assert len(items) == 1, items
    assert items[0]["status"] == "delivered" and items[0]["data"] == data, items
    assert items[0]["via"]["transport"] == "http" and items[0]["via"]["target"] == "group", items
    held = mock.wait_inbox(offline, 1)
    assert len(held) == 1 and held[0]["status"] == "pending", held
    assert held[0]["via"]["target"] == "group" and held[0]["data"] == data, held

    record = only_record(mock, online, "group")
    assert record["target"] == {"kind": "group", "value": key}, record
    assert set(recipients_of(record)) == {online, offline}, record
    assert [e for e in mock.inbox(gone) if e["status"] == "delivered"] == []
    assert_inbox_exactly(mock, online, push, [items[0]["message_id"]])


def test_device_group_add_and_remove_change_who_is_reached(mock):
    first, second = mock.create_device(), mock.create_device()
    name = fresh_name("team")
    created = mock.group_request(json={"operation": "create", "notification_key_name": name,
                                       "registration_ids": [first]})
    assert created.status_code == 200, created.text
    key = created.json()["notification_key"]

    added = mock.group_request(json={"operation": "add", "notification_key": key,
                                     "registration_ids": [second]})
    assert added.status_code == 200 and added.json() == {"notification_key": key}, added.text
    assert sorted(mock.group(key)["members"]) == sorted([first, second])

    removed = mock.group_request(json={"operation": "remove", "notification_key_name": name,
                                       "notification_key": key, "registration_ids": [first]})
    assert removed.status_code == 200 and removed.json() == {"notification_key": key}, removed.text
    assert mock.group(key)["members"] == [second]

    push = mock.fcm()
    res = push.single_device_data_message(registration_id=key, data_message={"team": name})
    assert push.send_request_responses[0].json() == {"success": 1, "failure": 0}
    assert (res["success"], res["failure"], res["results"]) == (1, 0, []), res

    items = mock.wait_inbox(second, 1)
    assert len(items) == 1 and items[0]["data"] == {"team": name}, items
    assert items[0]["via"]["target"] == "group", items
    assert_inbox_exactly(mock, first, push, [])
