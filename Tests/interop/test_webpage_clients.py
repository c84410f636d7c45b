"""Real receiving clients on the web page (real-clients.md §4.4), in headless Chromium.

Raw autopush clients (the `websockets` sync client on the mock's /autopush, as a browser's push
service connection) say `hello`, register a channel and are pushed to over HTTP; they ack 100,
ack 101, leave a push unacknowledged, or drop the connection and come back for it. Their
User-Agent is hostile markup. The page must show each client's devices with a badge (Firefox
when the user agent says `Firefox/`, else `raw`) and a connected dot, the user agent and last
heartbeat on hover and in the device view as text, the Clients list beside the XMPP connections
(live, with `disconnect` closing the raw connection), a delivery's timeline (`sent on ws3 ·
acked 100 after 41 ms`, `rejected 101 (could not decrypt)`, `re-sent after reconnect`), the
relayed push's preview, and the `sent` / `client_rejected` status chips and the `client:` chip.
A failing test saves a screenshot in .build/interop-screenshots/.
"""

import json
import re
import time
import urllib.parse
import uuid

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
import requests

from fcmclient import raw_checkin, raw_register
from scanpage import (DESKTOP, HOSTILE, assert_readable, chip, chip_finds_what_the_api_does, client_badge as badge, js, open_detail,
                      open_page, row_cells, set_scheme)

pytestmark = pytest.mark.usefixtures("page_shots")

FIREFOX_UA = HOSTILE + "Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0"
RAW_UA = "<script>alert(2)</script>raw test client"
RELAYED = "encrypted for the browser: relayed unread"


class Raw:
    """One autopush connection: hello (with a uaid to come back), register, read, ack."""

    def __init__(self, mock, user_agent, uaid=None):
        url = mock.base_url.replace("http://", "ws://", 1) + "/autopush"
        self.ws = connect(url, subprotocols=["push-notification"], user_agent_header=user_agent,
                          open_timeout=10, close_timeout=2, proxy=None, ping_interval=None, legacy=True)
        hello = {"messageType": "hello", "broadcasts": {}, "use_webpush": True}
        if uaid:
            hello["uaid"] = uaid
        self.ws.send(json.dumps(hello))
        answer = self.read("hello")
        assert answer["status"] == 200 and re.fullmatch(r"[0-9a-f]{32}", answer["uaid"]), answer
        self.uaid = answer["uaid"]

    def read(self, kind, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            except TimeoutError:
                raise AssertionError(f"no {kind} within {timeout}s") from None
            if message.get("messageType") == kind:
                return message

    def register(self):
        channel = str(uuid.uuid4())
        self.ws.send(json.dumps({"channelID": channel, "messageType": "register"}))
        answer = self.read("register")
        assert answer["status"] == 200 and answer["channelID"] == channel, answer
        return channel, answer["pushEndpoint"]

    def ack(self, channel, version, code=100):
        self.ws.send(json.dumps({"messageType": "ack", "updates": [{"channelID": channel, "version": version, "code": code}]}))

    def closed_with(self, timeout=10):
        """The close code the server sent (it must close within `timeout`)."""
        try:
            while True:
                self.ws.recv(timeout=timeout)
        except TimeoutError:
            raise AssertionError(f"the server did not close the connection within {timeout}s") from None
        except ConnectionClosed as e:
            assert e.rcvd is not None, f"the connection ended without a close frame: {e!r}"
            return e.rcvd.code

    def close(self):
        self.ws.close()


def push(endpoint, body=b"\x00" * 64):
    """A push as a site's server sends it (no VAPID: the channel has no key); the message id."""
    r = requests.post(endpoint, data=body, headers={"TTL": "60", "Content-Encoding": "aes128gcm"}, timeout=10)
    assert r.status_code == 201, r.text
    return urllib.parse.unquote(r.headers["Location"].rsplit("/m/", 1)[1])


def device_of(mock, uaid):
    items = mock.api("GET", f"/api/v1/devices?client_kind=autopush&client_id={uaid}")["items"]
    assert len(items) == 1, items
    return items[0]["token"]


def wait_status(mock, token, status, n=1):
    """The device's inbox entries with `status` once there are `n` of them."""
    deadline = time.monotonic() + 10
    while True:
        items = mock.api("GET", f"/api/v1/devices/{token}/messages?status={status}")["items"]
        if len(items) >= n or time.monotonic() > deadline:
            assert len(items) >= n, f"{token}: {items}"
            return items
        time.sleep(0.1)


@pytest.fixture(scope="module")
def clients(mock):
    """Firefox-looking and raw clients with a push each way: acked 100, acked 101, unacknowledged,
    and re-sent after the connection dropped."""
    out = {"open": []}
    fx = Raw(mock, FIREFOX_UA)
    out["open"].append(fx)
    channel, endpoint = fx.register()
    token = device_of(mock, fx.uaid)
    for name, code in (("acked", 100), ("rejected", 101)):
        out[name] = push(endpoint)
        note = fx.read("notification")
        assert note["channelID"] == channel, note
        fx.ack(channel, note["version"], code)
    wait_status(mock, token, "delivered")
    wait_status(mock, token, "client_rejected")
    out["sent"] = push(endpoint)
    fx.read("notification")
    wait_status(mock, token, "sent")

    raw = Raw(mock, RAW_UA)
    out["open"].append(raw)
    raw_channel, raw_endpoint = raw.register()
    raw_token = device_of(mock, raw.uaid)
    out["resent"] = push(raw_endpoint)
    raw.read("notification")
    raw.close()
    wait_status(mock, raw_token, "pending")
    again = Raw(mock, RAW_UA, uaid=raw.uaid)
    out["open"].append(again)
    note = again.read("notification")
    again.ack(raw_channel, note["version"])
    entry = wait_status(mock, raw_token, "delivered")[0]
    assert entry["client_delivery"]["sends"] == 2, entry

    out.update(fx=fx, token=token, raw=again, raw_token=raw_token)
    yield out
    for ws in out["open"]:
        ws.close()


def open_desktop(page, mock, url="/"):
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock.base_url + url)


def test_badges_dots_and_the_user_agent_as_text(mock, clients, page):
    open_desktop(page, mock)
    page.wait_for(f"!!document.querySelector('#devices tr[data-token={js(clients['raw_token'])}] .client-badge')",
                  what="the devices with their badges")
    fx = badge(page, clients["token"])
    assert fx["name"] == "Firefox" and "on" in fx["dot"].split(), fx
    assert "user agent: " + FIREFOX_UA in fx["title"] and "last heartbeat: " in fx["title"], fx["title"]
    raw = badge(page, clients["raw_token"])
    assert raw["name"] == "raw" and "on" in raw["dot"].split(), raw
    assert "user agent: " + RAW_UA in raw["title"], raw
    # A fake device has none.
    fake = mock.create_device()
    page.wait_for(f"!!document.querySelector('#devices tr[data-token={js(fake)}]')", what="the fake device")
    assert badge(page, fake) is None
    assert page.eval("document.querySelectorAll('#devices img, #clients img, #devices script, #clients script').length") == 0

    # The device view: badge, dot, and the user agent written out.
    page.click(f"#devices tr[data-token={js(clients['token'])}] td.target")
    page.wait_for("!!document.querySelector('#device-view .pv-client .client-badge')", what="the device view's client")
    assert page.eval("document.querySelector('#device-view .pv-client .client-name').textContent") == "Firefox"
    assert page.eval("document.querySelector('#device-view .pv-client-ua').textContent") == "user agent: " + FIREFOX_UA
    assert page.eval("document.querySelector('#device-view .pv-client-beat').textContent").startswith("last heartbeat: ")
    assert page.visible("#device-view .pv-client .client-badge")
    # Under each card, its delivery on the connection.
    page.wait_for("[...document.querySelectorAll('#device-view .pv-delivery')].some(d => / · acked 100 after \\d+ m?s/.test(d.textContent))",
                  what="the delivery line under the acked push's card")
    assert page.eval("document.querySelectorAll('#device-view img, #device-view script').length") == 0


def test_clients_list_live_with_disconnect(mock, clients, page):
    # A heartbeat first: the hover says when it came, and since when the client is connected.
    uaid = clients["fx"].uaid
    clients["fx"].ws.send("{}")
    deadline = time.monotonic() + 10
    while (conn := mock.api("GET", f"/api/v1/clients/{uaid}")["connection"])["last_heartbeat_at"] is None:
        assert time.monotonic() < deadline, conn
        time.sleep(0.05)
    open_desktop(page, mock)
    li = f"#clients li[data-id={js(uaid)}]"
    page.wait_for(f"!!document.querySelector({js(li)})", what="the Clients list")
    text = page.eval(f"document.querySelector({js(li)}).textContent")
    assert re.search(r"ws\d+ · \S+ · no tls · unacked 1 · connected since \d+ (s|min) ago", text), text
    hover = page.eval(f"document.querySelector({js(li + ' .client-ua')}).title")
    assert "connected since " + conn["connected_at"] in hover and "last heartbeat: " + conn["last_heartbeat_at"] in hover, hover
    assert page.eval(f"document.querySelector({js(li + ' .client-ua')}).textContent") == FIREFOX_UA
    assert page.eval(f"document.querySelector({js(li + ' .client-name')}).textContent") == "Firefox"
    assert page.visible(li + " .client-disconnect")
    # The list sits beside the XMPP connections.
    assert page.eval("document.getElementById('xmpp').closest('section').nextElementSibling.id") == "clients-section"
    # Badges, dots and the list keep their contrast, light and dark.
    assert_readable(page)
    set_scheme(page, "dark", DESKTOP)
    page.wait_for(f"!!document.querySelector({js(li)})", what="the Clients list, dark")
    assert_readable(page)
    set_scheme(page, "light", DESKTOP)

    # A client connecting while the page is open appears; disconnect closes its connection.
    late = Raw(mock, "late client Firefox/153.0")
    clients["open"].append(late)
    late_li = f"#clients li[data-id={js(late.uaid)}]"
    page.wait_for(f"!!document.querySelector({js(late_li + ' .client-disconnect')})", what="the new client, live")
    page.click(late_li + " .client-disconnect")
    assert late.closed_with() == 1000
    page.wait_for(f"(document.querySelector({js(late_li)}) || {{}}).textContent.includes('not connected')",
                  what="the client shown disconnected")
    assert not page.eval(f"!!document.querySelector({js(late_li + ' .client-disconnect')})")
    assert mock.api("GET", f"/api/v1/clients/{late.uaid}")["connected"] is False

    # With back-off: autopush's 4774.
    shy = Raw(mock, "shy client")
    clients["open"].append(shy)
    shy_li = f"#clients li[data-id={js(shy.uaid)}]"
    page.wait_for(f"!!document.querySelector({js(shy_li + ' .client-backoff')})", what="the second new client")
    page.click(shy_li + " .client-backoff")
    assert shy.closed_with() == 4774


def recipients_timeline(page, mock, message_id):
    open_detail(page, mock.base_url, message_id)
    page.click("#detail .detail-tabs button[data-tab=Recipients]")
    page.wait_for("!!document.querySelector('#detail .tab-panel[data-tab=Recipients] ol.timeline')", what="the timeline")
    return page.eval("[...document.querySelectorAll('#detail .tab-panel[data-tab=Recipients] ol.timeline li .what')].map(s => s.textContent)")


def test_delivery_timelines(mock, clients, page):
    set_scheme(page, "light", DESKTOP)
    acked = recipients_timeline(page, mock, clients["acked"])
    assert acked[0] == "accepted" and re.fullmatch(r"sent on ws\d+ · acked 100 after \d+ m?s", acked[1]), acked
    assert acked[2] == "delivered", acked
    rejected = recipients_timeline(page, mock, clients["rejected"])
    assert re.fullmatch(r"sent on ws\d+", rejected[1]) and rejected[2] == "rejected 101 (could not decrypt)", rejected
    sent = recipients_timeline(page, mock, clients["sent"])
    assert re.fullmatch(r"sent on ws\d+", sent[1]) and sent[2] == "waiting for the client's ack", sent
    resent = recipients_timeline(page, mock, clients["resent"])
    # Sent first on an earlier connection, then written again on the one that acknowledged it.
    assert resent[1] == "sent" and resent[-1] == "delivered", resent
    assert re.fullmatch(r"re-sent after reconnect on ws\d+ · acked 100 after \d+ (m?s|min)", resent[2]), resent
    # The Summary says why there is no plaintext.
    open_detail(page, mock.base_url, clients["acked"])
    facts = dict(page.eval("[...document.querySelectorAll('#detail .tab-panel[data-tab=Summary] dl.facts dt')].map(dt => [dt.textContent, dt.nextElementSibling.textContent])"))
    assert facts["decrypted"].startswith("no: relayed unread"), facts


def test_relayed_preview_and_list_line(mock, clients, page):
    open_desktop(page, mock)
    cells = row_cells(page)
    assert cells[clients["acked"]]["what"] == RELAYED and cells[clients["acked"]]["via"] == "Web Push"
    assert cells[clients["rejected"]]["mark"] == "!" and "1 client_rejected" in cells[clients["rejected"]]["recip"]
    assert cells[clients["sent"]]["mark"] == "◷" and "1 sent" in cells[clients["sent"]]["recip"]
    open_detail(page, mock.base_url, clients["acked"])
    page.click("#detail .detail-tabs button[data-tab=Previews]")
    page.wait_for("!!document.querySelector('#detail .pv-kind-relayed')", what="the relayed preview")
    assert page.eval("document.querySelector('#detail .pv-kind-relayed .pv-title').textContent") == RELAYED
    assert page.visible("#detail .pv-kind-relayed")
    assert page.eval("document.querySelector('#detail .pv-kind-relayed .pv-status').textContent") == "delivered"


def test_status_chips_and_the_client_chip(mock, clients, page):
    for status in ("sent", "client_rejected"):
        open_desktop(page, mock)
        want = chip_finds_what_the_api_does(page, mock, "status:" + status, "status", status)
        assert clients["sent" if status == "sent" else "rejected"] in want
    # The filters panel offers both.
    assert page.eval("[...document.querySelectorAll('#filters select[name=status] option')].map(o => o.value).filter(v => v === 'sent' || v === 'client_rejected').length") == 2

    # `client:` keeps real clients' devices (any kind: a GCM client's registration too), and
    # the Clients list to them.
    mock.create_device()
    android_id, security_token = raw_checkin(mock.base_url)
    sender = mock.api("GET", "/api/v1/projects")["items"][0]["sender_id"]
    gcm_token = raw_register(mock.base_url, android_id, security_token, app="com.example.gcm", sender=sender)
    open_desktop(page, mock)
    chip(page, "client:")
    page.wait_for("document.querySelectorAll('#chips li').length === 1", what="the client chip")
    assert page.eval("document.querySelector('#chips .chip-label').textContent") == "client:any"
    assert "client=any" in page.eval("location.search")
    every = mock.api("GET", "/api/v1/devices?client_kind=any&limit=1000")["items"]
    assert gcm_token in [d["token"] for d in every] and {d["client"]["kind"] for d in every} == {"autopush", "gcm"}, every
    want = sorted(d["token"] for d in every[:50])
    want = json.dumps(want, separators=(",", ":"))
    page.wait_for(f"JSON.stringify([...document.querySelectorAll('#devices tbody tr[data-token]')].map(r => r.dataset.token).sort()) === {js(want)}",
                  what="the devices table to keep real clients' devices")
    assert page.eval("[...document.querySelectorAll('#devices tbody tr[data-token]')].every(r => !!r.querySelector('.client-badge'))")
    # Counted over every kind (the GCM client's registration among them).
    assert page.eval("document.getElementById('device-range').textContent").endswith(f" of {len(every)}")
    # The messages too: those sent to real clients' devices, as the control API finds them.
    want_ids = sorted(m["message_id"] for m in mock.api("GET", "/api/v1/messages?client_kind=any&limit=100")["items"])
    assert want_ids, "the raw clients' pushes are records"
    page.wait_for(f"JSON.stringify([...document.querySelectorAll('#messages tbody tr[data-id]')].map(r => r.dataset.id).sort()) === {js(json.dumps(want_ids, separators=(',', ':')))}",
                  what="the message list to keep real clients' messages")
    # A link keeps it; a kind it does not know is said.
    open_desktop(page, mock, "/?client=autopush")
    assert page.eval("document.querySelector('#chips .chip-label').textContent") == "client:autopush"
    chip(page, "client:pigeon")
    page.wait_for("document.getElementById('error').textContent.startsWith('client: takes')", what="the refusal")
    # It cannot be excluded: said, not taken the other way round (the refused text cleared first).
    page.eval("document.getElementById('filter').value = ''")
    chip(page, "-client:autopush")
    page.wait_for("document.getElementById('error').textContent.startsWith('-client: cannot be excluded')", what="the refusal of -client:")
    page.eval("document.getElementById('error').textContent = ''; document.getElementById('filter').value = ''")
    chip(page, "-client:")
    page.wait_for("document.getElementById('error').textContent.startsWith('-client: cannot be excluded')", what="the refusal of a bare -client:")
    assert page.eval("document.querySelector('#chips .chip-label').textContent") == "client:autopush"


def test_held_messages_follow_their_device_live(mock, page):
    """What a device held turns `deleted` when the device is deleted, and `undeliverable` when it
    comes back after its app was uninstalled: the open page's rows follow, no reload."""
    from mocksupport import KEY_A
    gone, uninstalled = mock.create_device(online=False), mock.create_device(online=False)
    ids = {}
    for token in (gone, uninstalled):
        r = requests.post(mock.base_url + "/fcm/send", json={"to": token, "data": {"n": "1"}},
                          headers={"Authorization": "key=" + KEY_A}, timeout=10)
        assert r.status_code == 200, r.text
        ids[token] = r.json()["results"][0]["message_id"]
    open_desktop(page, mock)
    for token in (gone, uninstalled):
        page.wait_for(f"(document.querySelector('#messages tr[data-id={js(ids[token])}] td.recip') || {{}}).textContent === '1 pending'",
                      what="the held message's row")
    mock.api("DELETE", f"/api/v1/devices/{gone}", expect=204)
    mock.api("POST", f"/api/v1/devices/{uninstalled}:unregister")
    mock.api("PATCH", f"/api/v1/devices/{uninstalled}", json={"online": True})
    page.wait_for(f"document.querySelector('#messages tr[data-id={js(ids[gone])}] td.recip').textContent === '1 deleted'",
                  what="the deleted device's message shown deleted, live")
    page.wait_for(f"document.querySelector('#messages tr[data-id={js(ids[uninstalled])}] td.recip').textContent === '1 undeliverable'",
                  what="the uninstalled app's message shown undeliverable, live")

