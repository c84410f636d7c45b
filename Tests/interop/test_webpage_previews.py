"""Notification previews and the device view of the web page, in headless Chromium.

Messages are sent for real (HTTP v1 with platform overrides, legacy for data-only), then the
page's device view (`/#device=TOKEN`, `window.fcm.openDevice`) must draw each inbox entry as its
device would show it: an Android card with the android.notification overrides, its colour and
its image URL; an iOS banner from the APNs payload; a data card; localised keys with their
arguments; statuses, newest first, live. Hostile strings stay text. On failure a screenshot is
saved under .build/interop-screenshots/.
"""

import json
import time
import urllib.parse
import uuid

import pytest

from conftest import _serve
from mocksupport import APP_A, APP_A_IOS, KEY_A, PROJECT_A, SENDER_A



@pytest.fixture(scope="module")
def mock_any(tmp_path_factory):
    """A server taking any Bearer token for v1 sends (`--accept-any-key`)."""
    yield from _serve(tmp_path_factory, ("--accept-any-key",))


def send_v1(mock, message):
    r = mock.http.post(f"{mock.base_url}/v1/projects/{PROJECT_A}/messages:send",
                       headers={"Authorization": "Bearer any-token-will-do"},
                       json={"message": message}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["name"].rsplit("/", 1)[1]


def send_legacy(mock, body):
    r = mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + KEY_A},
                       json=body, timeout=10)
    assert r.status_code == 200 and r.json()["success"] == 1, r.text
    return r.json()["results"][0]["message_id"]


def open_device(browser, mock, token):
    browser.command("Page.navigate", {"url": f"{mock.base_url}/#device={urllib.parse.quote(token, safe='')}"})
    browser.wait_for("!!(window.fcm && window.fcm.previews && window.fcm.openDevice)", what="the page's scripts")


def cards(browser):
    """The device view's cards, top to bottom."""
    return browser.eval("""[...document.querySelectorAll('#device-view .pv-screen .pv-card')].map(c => ({
        id: c.dataset.messageId, platform: c.dataset.platform, kind: c.dataset.kind, text: c.innerText,
        status: (c.querySelector('.pv-status') || {}).textContent,
        title: (c.querySelector('.pv-title') || {}).innerText, subtitle: (c.querySelector('.pv-subtitle') || {}).innerText,
        body: (c.querySelector('.pv-body') || {}).innerText}))""")


def wait_cards(browser, count, what):
    browser.wait_for(f"document.querySelectorAll('#device-view .pv-screen .pv-card').length === {count}", what=what)
    return cards(browser)


def test_android_and_ios_previews_of_a_v1_message_with_platform_overrides(mock_any, browser):
    mock = mock_any
    android = mock.create_device()
    ios = mock.create_device(app=APP_A_IOS, platform="ios")
    image = "https://images.example/big-picture.png"
    a_id = send_v1(mock, {"token": android,
                          "notification": {"title": "Generic title", "body": "Generic body"},
                          "android": {"notification": {"title": "Android title", "color": "#ff0000",
                                                       "image": image, "channel_id": "news"}}})
    i_id = send_v1(mock, {"token": ios, "notification": {"title": "Hello", "body": "From v1"},
                          "apns": {"payload": {"aps": {"alert": {"subtitle": "Sub line"},
                                                       "badge": 7, "sound": "chime.caf"}}}})
    open_device(browser, mock, android)
    [c] = wait_cards(browser, 1, "the Android card")
    assert (c["id"], c["platform"], c["kind"], c["status"]) == (a_id, "android", "notification", "delivered"), c
    assert c["title"] == "Android title" and c["body"] == "Generic body", c
    assert "Generic title" not in c["text"], c
    assert APP_A in c["text"] and "news" in c["text"], c
    # The big picture is a placeholder naming the URL: nothing is fetched.
    assert browser.eval("document.querySelector('#device-view .pv-image').innerText.trim()") == image
    assert browser.eval("document.querySelectorAll('#device-view img').length") == 0
    # The small icon is inline SVG in the notification colour.
    assert browser.eval("getComputedStyle(document.querySelector('#device-view .pv-card svg.pv-small-icon')).color") \
        == "rgb(255, 0, 0)"
    assert browser.eval("document.querySelector('#device-view .pv-token').textContent") == android

    browser.eval(f"window.fcm.openDevice({json.dumps(ios)}); 1")
    browser.wait_for("!!document.querySelector('#device-view .pv-card[data-platform=\"ios\"]')", what="the iOS card")
    [c] = cards(browser)
    assert (c["id"], c["kind"], c["status"]) == (i_id, "notification", "delivered"), c
    assert (c["title"], c["subtitle"], c["body"]) == ("Hello", "Sub line", "From v1"), c
    assert browser.eval("document.querySelector('#device-view .pv-badge').textContent") == "7"
    assert browser.eval("document.querySelector('#device-view .pv-sound').innerText.trim()") == "chime.caf"
    assert browser.eval("!!document.querySelector('#device-view .pv-sound svg')")
    assert browser.eval("decodeURIComponent(location.hash)") == "#device=" + ios


def test_data_only_and_localised_cards_newest_first_and_live(mock_any, browser):
    mock = mock_any
    token = mock.create_device()
    loc_id = send_v1(mock, {"token": token, "android": {"notification": {
        "title_loc_key": "greet_title", "title_loc_args": ["Ann"],
        "body_loc_key": "greet_body", "body_loc_args": ["3", "apples"]}}})
    data_id = send_legacy(mock, {"to": token, "data": {"score": "3x1", "team": "blue"}})
    open_device(browser, mock, token)
    first, second = wait_cards(browser, 2, "two cards")
    assert [first["id"], second["id"]] == [data_id, loc_id], "newest first"
    assert first["kind"] == "data" and "data message" in first["text"], first
    assert browser.eval("[...document.querySelectorAll('#device-view .pv-kind-data .pv-data dt, "
                        "#device-view .pv-kind-data .pv-data dd')].map(e => e.textContent)") \
        == ["score", "3x1", "team", "blue"]
    assert second["kind"] == "notification", second
    assert browser.eval("[...document.querySelectorAll('#device-view .pv-loc')].map(l => "
                        "[l.querySelector('.pv-loc-key').textContent, "
                        "[...l.querySelectorAll('.pv-loc-arg')].map(a => a.textContent)])") \
        == [["greet_title", ["Ann"]], ["greet_body", ["3", "apples"]]]

    # Live, without a reload: the device goes offline from the view, a new send lands pending
    # on top, and bringing it back online turns it delivered.
    browser.eval("window.__same = true; 1")
    browser.eval("document.querySelector('#device-view .pv-online').click(); 1")
    browser.wait_for("document.querySelector('#device-view .pv-online').textContent === 'bring online'",
                     what="the device to show offline")
    assert mock.device(token)["online"] is False
    held = send_legacy(mock, {"to": token, "notification": {"title": "held"}})
    browser.wait_for(f"(document.querySelector('#device-view .pv-card') || {{}}).dataset.messageId === {json.dumps(held)}",
                     what="the pending message on top")
    assert cards(browser)[0]["status"] == "pending"
    browser.eval("document.querySelector('#device-view .pv-online').click(); 1")
    browser.wait_for("document.querySelector('#device-view .pv-card .pv-status').textContent === 'delivered'",
                     what="the held message to be delivered")
    assert browser.eval("window.__same === true"), "the page was reloaded"


DESKTOP = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
ACTIONS = [".pv-online", ".pv-unregister", ".pv-refresh", ".pv-upstream"]


def assert_device_view_shown(browser, token):
    """The device view is on the screen with `token`: its token, its actions, its phone frame
    and the create form's summary are drawn (not only in the DOM), and nothing is wider than
    the window."""
    assert browser.eval("document.querySelector('#device-view .pv-token').textContent") == token
    for part in ["#device-view", "#device-view .pv-token", "#device-view .pv-phone", "#device-view .pv-screen",
                 "#device-view details.pv-create > summary"] + ["#device-view " + a for a in ACTIONS]:
        assert browser.visible(part), f"{part} is not drawn"
    assert browser.eval("document.documentElement.scrollWidth <= window.innerWidth"), \
        browser.eval("[document.documentElement.scrollWidth, window.innerWidth]")


def test_device_actions_and_row_click(mock_any, browser):
    mock = mock_any
    token = mock.create_device()
    browser.command("Emulation.setDeviceMetricsOverride", DESKTOP)
    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    row = f"#devices tbody tr[data-token={json.dumps(token)}]"
    browser.wait_for(f"!!document.querySelector('{row} td')", what="the device in the devices table")
    # Real mouse clicks (DevTools input events): they land only on what is drawn.
    browser.click(row + " td")
    browser.wait_for(f"(document.querySelector('#device-view .pv-token') || {{}}).textContent === {json.dumps(token)}",
                     what="a row click to open the device")
    assert_device_view_shown(browser, token)
    # A pane of its own, in view (not a section far below the lists).
    assert browser.eval("document.getElementById('device-view').classList.contains('pv-open')")
    assert browser.eval("(() => { const r = document.querySelector('#device-view .pv-token').getBoundingClientRect();"
                        " return r.top >= 0 && r.bottom <= innerHeight; })()")

    browser.eval("window.prompt = () => 'greeting=hi, n=2'; 1")
    browser.click("#device-view .pv-upstream")
    deadline = time.monotonic() + 10
    while not mock.upstream(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [u["data"] for u in mock.upstream(token)] == [{"greeting": "hi", "n": "2"}]

    browser.click("#device-view .pv-refresh")
    # While the fresh device loads, the view holds no device (no token at all): wait for its token.
    browser.wait_for(f"(t => !!t && t !== {json.dumps(token)})"
                     "((document.querySelector('#device-view .pv-token') || {}).textContent)",
                     what="the view to follow the new token")
    fresh = browser.eval("document.querySelector('#device-view .pv-token').textContent")
    assert mock.device(token)["state"] == "refreshed" and mock.device(fresh)["state"] == "registered"
    assert browser.eval("decodeURIComponent(location.hash)") == "#device=" + fresh
    assert_device_view_shown(browser, fresh)

    browser.click("#device-view .pv-unregister")
    browser.wait_for("document.querySelector('#device-view .pv-state').textContent === 'unregistered'",
                     what="the device to show unregistered")
    assert mock.device(fresh)["state"] == "unregistered"

    # close takes the device out of the view and the URL; the create form stays.
    browser.click("#device-view .pv-close")
    browser.wait_for("location.hash === ''", what="close to clear the link")
    assert not browser.visible("#device-view .pv-token")
    assert browser.visible("#device-view details.pv-create > summary")


def test_create_device_form(mock_any, browser):
    mock = mock_any
    browser.command("Emulation.setDeviceMetricsOverride", DESKTOP)
    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    browser.wait_for("!!document.querySelector('#device-view details')", what="the create form")
    # No device open: the form is on the page all the same, and opens by a real click.
    browser.click("#device-view details.pv-create > summary")
    browser.wait_for(f"[...document.querySelectorAll('#device-view select[name=project] option')]"
                     f".some(o => o.value === {json.dumps(SENDER_A)})", what="the projects")
    for field in ("project", "app", "platform", "online"):
        assert browser.visible(f"#device-view form [name={field}]"), field
    browser.eval(f"""(() => {{ const f = document.querySelector('#device-view form');
        f.project.value = {json.dumps(SENDER_A)}; f.project.dispatchEvent(new Event('change'));
        f.app.value = {json.dumps(APP_A_IOS)}; f.app.dispatchEvent(new Event('change'));
        return 1; }})()""")
    assert browser.eval("document.querySelector('#device-view form').platform.value") == "ios"
    browser.click("#device-view form button[type=submit]")
    browser.wait_for("location.hash.startsWith('#device=') && "
                     "!!(document.querySelector('#device-view .pv-token') || {}).textContent",
                     what="the new device to open")
    token = browser.eval("document.querySelector('#device-view .pv-token').textContent")
    d = mock.device(token)
    assert (d["sender_id"], d["app"], d["platform"], d["online"]) == (SENDER_A, APP_A_IOS, "ios", True), d
    browser.wait_for("!!document.querySelector('#device-view .pv-empty')", what="the empty inbox")
    assert_device_view_shown(browser, token)
    assert browser.visible("#device-view .pv-empty")


def test_device_view_at_phone_width(mock_any, browser):
    mock = mock_any
    token = mock.create_device()
    sent = send_legacy(mock, {"to": token, "notification": {"title": "on the phone", "body": "x" * 200}})
    browser.command("Emulation.setDeviceMetricsOverride", PHONE)
    open_device(browser, mock, token)
    [c] = wait_cards(browser, 1, "the card")
    assert c["id"] == sent, c
    assert_device_view_shown(browser, token)
    assert browser.visible("#device-view .pv-card")
    # One column: the phone frame is under the actions and fits the screen.
    assert browser.eval("document.querySelector('#device-view .pv-phone').getBoundingClientRect().top >= "
                        "document.querySelector('#device-view .pv-actions').getBoundingClientRect().bottom")
    assert browser.eval("document.querySelector('#device-view .pv-phone').getBoundingClientRect().right") <= 390
    browser.click("#device-view .pv-online")
    browser.wait_for("document.querySelector('#device-view .pv-online').textContent === 'bring online'",
                     what="a tap to take the device offline")
    assert mock.device(token)["online"] is False
    browser.click("#device-view details.pv-create > summary")
    browser.wait_for("document.querySelector('#device-view details.pv-create').open", what="the create form to open")
    assert browser.visible("#device-view form button[type=submit]")
    assert browser.eval("document.documentElement.scrollWidth <= window.innerWidth")


def test_devices_table_rows_open_the_device_view_from_the_keyboard(mock_any, browser):
    mock = mock_any
    first, second = mock.create_device(), mock.create_device(platform="web")
    browser.command("Emulation.setDeviceMetricsOverride", DESKTOP)
    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    rows = "#devices tbody tr[data-token]"
    browser.wait_for(f"[...document.querySelectorAll('{rows}')].some(r => r.dataset.token === {json.dumps(second)})",
                     what="both devices in the table")
    assert browser.eval(f"[...document.querySelectorAll('{rows}')].every(r => r.tabIndex === 0)")
    # Enter on a focused row opens its device.
    browser.eval(f"document.querySelector('{rows}[data-token={json.dumps(first)}]').focus(); 1")
    browser.press("Enter")
    browser.wait_for(f"(document.querySelector('#device-view .pv-token') || {{}}).textContent === {json.dumps(first)}",
                     what="Enter to open the device")
    assert_device_view_shown(browser, first)
    # Tab moves through the row's buttons to the next row (rows are in the tab order); Space opens it.
    browser.eval(f"document.querySelector('{rows}[data-token={json.dumps(first)}]').focus(); 1")
    buttons = browser.eval(f"document.querySelectorAll('{rows}[data-token={json.dumps(first)}] button').length")
    for _ in range(buttons + 1):
        browser.press("Tab")
    assert browser.eval("document.activeElement.dataset.token") == \
        browser.eval(f"document.querySelector('{rows}[data-token={json.dumps(first)}]').nextElementSibling.dataset.token")
    browser.eval(f"document.querySelector('{rows}[data-token={json.dumps(second)}]').focus(); 1")
    browser.press(" ")
    browser.wait_for(f"(document.querySelector('#device-view .pv-token') || {{}}).textContent === {json.dumps(second)}",
                     what="Space to open the device")
    assert_device_view_shown(browser, second)
    assert browser.eval("decodeURIComponent(location.hash)") == "#device=" + second
    # A key on the row's own buttons does what the button does, not open the device.
    browser.eval(f"document.querySelector('{rows}[data-token={json.dumps(first)}] button.toggle').focus(); 1")
    browser.press("Enter")
    deadline = time.monotonic() + 10
    while mock.device(first)["online"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mock.device(first)["online"] is False
    assert browser.eval("document.querySelector('#device-view .pv-token').textContent") == second
    # The table is drawn again on that change; focus stays on the (new) button of the same row.
    browser.wait_for(f"document.activeElement.matches('{rows}[data-token={json.dumps(first)}] button.toggle') && "
                     "document.activeElement.textContent === 'bring online'", what="focus to stay on the button")


def test_ios_localised_string_alert_and_background_cards(mock_any, browser):
    mock = mock_any
    token = mock.create_device(app=APP_A_IOS, platform="ios")
    # Legacy spells loc args as a JSON string; the iPhone gets an array.
    loc = send_legacy(mock, {"to": token, "notification": {
        "title_loc_key": "T_KEY", "body_loc_key": "B_KEY", "body_loc_args": '["x", "y"]'}})
    plain = send_v1(mock, {"token": token, "apns": {"payload": {"aps": {"alert": "Just a string"}}}})
    background = send_v1(mock, {"token": token, "data": {"sync": "now"},
                                "apns": {"payload": {"aps": {"content-available": 1}}}})
    open_device(browser, mock, token)
    got = wait_cards(browser, 3, "three cards")
    assert [c["id"] for c in got] == [background, plain, loc], got
    assert got[0]["kind"] == "data" and "sync" in got[0]["text"] and "now" in got[0]["text"], got[0]
    assert (got[1]["kind"], got[1].get("title"), got[1]["body"]) == ("notification", None, "Just a string"), got[1]
    assert browser.eval("[...document.querySelectorAll('#device-view .pv-card:last-child .pv-loc')].map(l => "
                        "[l.querySelector('.pv-loc-key').textContent, "
                        "[...l.querySelectorAll('.pv-loc-arg')].map(a => a.textContent)])") \
        == [["T_KEY", []], ["B_KEY", ["x", "y"]]]
    # A deleted_messages notice has no payload: a card saying how many were lost.
    text = browser.eval("window.fcm.previews.card({message_id: 'n1', message_type: 'deleted_messages', "
                        "total_deleted: 12, status: 'delivered', effective: null}, "
                        "{platform: 'android', app: 'a.b'}).innerText")
    assert "deleted messages" in text and "12" in text and "delivered" in text, text


HOSTILE_TITLE = "<script>alert(1)</script>"
HOSTILE_BODY = '"><img src=x onerror=alert(2)>'


@pytest.mark.parametrize("platform", ["android", "ios", "web"])
def test_hostile_values_stay_text(mock_any, browser, platform):
    mock = mock_any
    token = mock.create_device(app=APP_A_IOS if platform == "ios" else APP_A, platform=platform)
    message = {"token": token, "notification": {"title": HOSTILE_TITLE, "body": HOSTILE_BODY},
               "data": {"k" + uuid.uuid4().hex[:4]: HOSTILE_BODY}}
    if platform == "web":
        message["webpush"] = {"fcm_options": {"link": "https://example.test/" + urllib.parse.quote(HOSTILE_BODY)}}
    send_v1(mock, message)
    send_legacy(mock, {"to": token, "data": {"html": HOSTILE_TITLE + HOSTILE_BODY}})
    open_device(browser, mock, token)
    browser.eval("window.__alerted = false; window.alert = () => { window.__alerted = true; }; 1")
    data_card, shown = wait_cards(browser, 2, "two cards")
    assert shown["platform"] == platform and shown["kind"] == "notification", shown
    assert (shown["title"], shown["body"]) == (HOSTILE_TITLE, HOSTILE_BODY), shown
    assert HOSTILE_BODY in shown["text"], shown
    assert data_card["kind"] == "data" and HOSTILE_TITLE + HOSTILE_BODY in data_card["text"], data_card
    assert browser.eval("document.querySelectorAll('#device-view script, #device-view img').length") == 0
    time.sleep(0.3)
    assert browser.eval("window.__alerted") is False


@pytest.fixture(scope="module")
def mock_guarded(tmp_path_factory):
    """A server whose control API and page need `--control-token`."""
    yield from _serve(tmp_path_factory, ("--control-token", "pv-s3cret"))


def test_device_view_with_a_control_token_reads_and_follows_live(mock_guarded, browser):
    mock = mock_guarded
    mock.http.headers["Authorization"] = "Bearer pv-s3cret"  # the control API's calls only
    token = mock.create_device()
    first = send_legacy(mock, {"to": token, "data": {"n": "1"}})
    browser.command("Page.navigate", {"url": f"{mock.base_url}/?token=pv-s3cret#device={urllib.parse.quote(token, safe='')}"})
    assert [c["id"] for c in wait_cards(browser, 1, "the card")] == [first]
    second = send_legacy(mock, {"to": token, "data": {"n": "2"}})
    assert [c["id"] for c in wait_cards(browser, 2, "the second card, live")] == [second, first]
