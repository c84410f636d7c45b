"""Hostile and clumsy autopush clients beside a real Firefox (real-clients.md §2.5, §6 item 13):
raw WebSocket clients (the `websockets` sync client) on the mock's /autopush break the protocol
one way each and are closed with the code the contract names, or answered and kept; Firefox,
connected to the same server all along, receives a push after each of them.
"""

import json
import re

import pytest
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from firefox import Subscribed, new_vapid

pytestmark = pytest.mark.firefox

HELLO = {"messageType": "hello", "broadcasts": {}, "use_webpush": True}


@pytest.fixture(scope="module")
def receiver(mock, firefox, push_page, push_session):
    """Firefox's subscription on the same server, pushed to after each raw client."""
    return Subscribed(mock, firefox, push_page, push_session, "beside-raw-clients", new_vapid())


@pytest.fixture
def raw(mock):
    """Opens raw autopush connections (offering `push-notification`, as Firefox does) and
    closes what the test left open."""
    opened = []
    url = mock.base_url.replace("http://", "ws://", 1) + "/autopush"

    def open_one():
        try:
            ws = connect(url, subprotocols=["push-notification"], open_timeout=10,
                         close_timeout=2, proxy=None, legacy=True)
        except InvalidStatus as e:
            raise AssertionError(f"GET /autopush was not upgraded: {e.response.status_code} "
                                 f"{e.response.body[:300]!r}") from None
        except (OSError, InvalidHandshake, TimeoutError) as e:
            raise AssertionError(f"no WebSocket at {url}: {e!r}") from None
        opened.append(ws)
        return ws

    yield open_one
    for ws in opened:
        ws.close()


def closed_with(ws, timeout=10):
    """The close code and reason the server sent (it must close within `timeout`)."""
    try:
        while True:
            message = ws.recv(timeout=timeout)
            print("before the close:", message)
    except TimeoutError:
        raise AssertionError(f"the server did not close the connection within {timeout}s") from None
    except ConnectionClosed as e:
        assert e.rcvd is not None, f"the connection ended without a close frame: {e!r}"
        return e.rcvd.code, e.rcvd.reason


def answer(ws, timeout=10):
    try:
        return ws.recv(timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"no answer within {timeout}s") from None
    except ConnectionClosed as e:
        raise AssertionError(f"the server closed the connection instead of answering: {e!r}") from None


def hello(ws):
    ws.send(json.dumps(HELLO))
    greeting = json.loads(answer(ws))
    assert greeting["messageType"] == "hello" and greeting["status"] == 200, greeting
    assert re.fullmatch(r"[0-9a-f]{32}", greeting["uaid"]), greeting
    return greeting


def test_firefox_receives_before_the_raw_clients(receiver):
    receiver.delivered("before any raw client")


def test_a_binary_message_is_closed_1003(raw, receiver):
    ws = raw()
    ws.send(b'{"messageType":"hello"}')
    code, _ = closed_with(ws)
    assert code == 1003, code
    receiver.delivered("after the binary message")


def test_text_that_is_not_json_is_closed_1007(raw, receiver):
    ws = raw()
    ws.send("not json")
    code, _ = closed_with(ws)
    assert code == 1007, code
    receiver.delivered("after the text that is not JSON")


def test_register_before_hello_is_closed_1008(raw, receiver):
    ws = raw()
    ws.send(json.dumps({"messageType": "register",
                        "channelID": "6d6b9a3e-1f5c-4a7e-9b8a-2f0c1d2e3f40"}))
    code, reason = closed_with(ws)
    assert code == 1008, (code, reason)
    assert reason, "the close reason names what was wrong"
    receiver.delivered("after the register before hello")


def test_a_bad_channel_id_is_401_and_the_connection_stays(raw, receiver):
    ws = raw()
    hello(ws)
    ws.send(json.dumps({"channelID": "NOT-A-UUID", "messageType": "register"}))
    assert answer(ws) == ('{"messageType":"register","channelID":"NOT-A-UUID","status":401,'
                          '"reason":"Bad UUID format, use lower case, dashed format"}')
    # Still open: a ping is answered, and a good register after it succeeds.
    ws.send("{}")
    assert json.loads(answer(ws)) == {}
    channel = "0f1e2d3c-4b5a-4697-8a7b-6c5d4e3f2a10"
    ws.send(json.dumps({"channelID": channel, "messageType": "register"}))
    registered = json.loads(answer(ws))
    assert registered["messageType"] == "register" and registered["status"] == 200, registered
    assert registered["channelID"] == channel, registered
    receiver.delivered("after the bad channelID")
