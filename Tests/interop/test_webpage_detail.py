"""The web page's message detail panel, its deep link, the filters in the URL, and the page's
quality (a phone-width layout, dark mode, keyboard), in headless Chromium over the DevTools
protocol (Tests/interop/browser.py).

On a failure each test saves a screenshot under .build/interop-screenshots/.
"""

import datetime
import re
import time
import urllib.parse
import uuid

import pytest
import requests

from conftest import _serve
from mocksupport import APP_B, KEY_A, SENDER_A, SENDER_B

HOSTILE_SCRIPT = "<script>alert(1)</script>"
HOSTILE_IMG = "\"><img src=x onerror=alert(2)>"


def send(mock, body, key=KEY_A):
    r = requests.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + key}, json=body, timeout=10)
    return r


def open_page(browser, url):
    browser.command("Page.navigate", {"url": url})
    browser.wait_for("document.getElementById('messages') && document.getElementById('messages').dataset.loaded === 'true'",
                     what="the message list to load")


def trap_alerts(browser):
    browser.eval("window.__alerted = false; window.alert = () => { window.__alerted = true; }; 1")


def detail_text(browser):
    """The panel's text, every tab's panel included (one is shown at a time)."""
    return browser.eval("""[document.querySelector('#detail .detail-top').innerText].concat(
        [...document.querySelectorAll('#detail .tab-panel')].map(p => {
            const h = p.hidden; p.hidden = false; const t = p.innerText; p.hidden = h; return t; })).join('\\n')""")


def test_deep_link_opens_the_detail_with_answer_timeline_and_previews(mock, browser):
    online = mock.create_device()
    held = mock.create_device(online=False)
    marker = "detail-" + uuid.uuid4().hex[:10]
    r = send(mock, {"registration_ids": [online, held],
                    "notification": {"title": HOSTILE_SCRIPT, "body": HOSTILE_IMG},
                    "data": {"marker": marker, "html": HOSTILE_SCRIPT + HOSTILE_IMG}})
    assert r.status_code == 200, r.text
    record_id = r.json()["results"][0]["message_id"]  # the record's id is its first recipient's
    answer_text = r.text

    # A stand-in for the previews part: the hook is called with each recipient's inbox entry.
    browser.command("Page.addScriptToEvaluateOnNewDocument", {"source": """
        window.fcm = window.fcm || {};
        // A stand-in for the previews part, kept even when previews.js sets its own: this
        // test checks what the detail panel hands the hook.
        const testPreviews = { card: (entry, o) => {
          const d = document.createElement('div'); d.className = 'test-card';
          d.textContent = o.platform + '|' + o.app + '|' + o.status + '|' + JSON.stringify(entry.effective);
          return d; } };
        Object.defineProperty(window.fcm, 'previews', { get: () => testPreviews, set: () => {} });
        window.__alerted = false; window.alert = () => { window.__alerted = true; };"""})
    open_page(browser, mock.base_url + "/#message=" + urllib.parse.quote(record_id, safe=""))
    browser.wait_for(f"document.getElementById('detail').dataset.id === {record_id!r}", what="the deep-linked panel")
    text = detail_text(browser)
    assert "legacy HTTP" in text, text
    assert "multicast id\t" + str(r.json()["multicast_id"]) in text or \
        "multicast id\n" + str(r.json()["multicast_id"]) in text, "the 64-bit id exactly"
    # The answer as the app server got it (pretty-printed JSON of the exact body).
    assert '"multicast_id": ' + str(r.json()["multicast_id"]) in text, text
    # Re-indented, not re-serialized: the 64-bit multicast_id is the one sent.
    assert browser.eval("document.querySelector('#detail pre.answer').textContent.replace(/\\s/g, '')") == \
        answer_text.replace(" ", ""), answer_text
    # The request headers, the key masked.
    assert "key=AAAAin…" in text and KEY_A not in text, text
    # The timeline of each recipient: one delivered, one held pending.
    boxes = browser.eval("[...document.querySelectorAll('#detail .recipient')].map(b => b.innerText)")
    assert len(boxes) == 2, boxes
    assert online in boxes[0] and "delivered" in boxes[0], boxes[0]
    assert held in boxes[1] and "pending" in boxes[1] and "expires" in boxes[1], boxes[1]
    # Hostile strings stay text.
    assert HOSTILE_SCRIPT in text and HOSTILE_IMG in text, text
    assert browser.eval("document.querySelectorAll('#detail script, #detail img').length") == 0
    # The preview hook got each recipient's effective payload and device.
    browser.wait_for("document.querySelectorAll('#detail .test-card').length === 2", what="the preview cards")
    cards = browser.eval("[...document.querySelectorAll('#detail .test-card')].map(c => c.textContent)")
    assert cards[0].startswith("android|") and "|delivered|" in cards[0] and marker in cards[0], cards
    assert "|pending|" in cards[1], cards

    # The panel follows the message: bringing the device online delivers the held one.
    mock.set_online(held, True)
    browser.wait_for("[...document.querySelectorAll('#detail .recipient')][1].innerText.includes('delivered')",
                     what="the held recipient to show delivered")
    time.sleep(0.3)
    assert browser.eval("window.__alerted") is False

    # Escape closes it and the link goes with it.
    browser.eval("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true})); 1")
    browser.wait_for("document.getElementById('detail').hidden && location.hash === ''", what="Escape to close the panel")


def test_rows_open_the_panel_by_click_and_keyboard_and_back_closes_it(mock, browser):
    token = mock.create_device()
    bad = send(mock, {"to": token, "time_to_live": HOSTILE_IMG})
    assert bad.status_code == 400, bad.text
    ok = send(mock, {"to": token, "data": {"n": "1"}})
    ok_id = ok.json()["results"][0]["message_id"]
    open_page(browser, mock.base_url + "/?transport=http")
    trap_alerts(browser)
    browser.wait_for(f"document.querySelector('#messages tbody tr').dataset.id === {ok_id!r}", what="the newest message")

    # Keyboard: the newest row takes focus, Enter opens it, and the link names it.
    browser.eval("document.querySelector('#messages tbody tr').focus(); 1")
    browser.command("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter", "code": "Enter",
                                               "windowsVirtualKeyCode": 13, "text": "\r"})
    browser.wait_for(f"document.getElementById('detail').dataset.id === {ok_id!r}", what="Enter to open the row")
    assert browser.eval("location.hash") == "#message=" + urllib.parse.quote(ok_id, safe="")
    assert browser.eval("document.querySelector('#messages tr[aria-current=true]').dataset.id") == ok_id
    assert "transport=http" in browser.eval("location.search"), "the filter stays in the link"
    browser.eval("history.back(); 1")
    browser.wait_for("document.getElementById('detail').hidden", what="back to close the panel")
    browser.wait_for("document.activeElement && document.activeElement.dataset.id === " + repr(ok_id),
                     what="focus to return to the row")

    # ArrowDown moves to the refused send; a click opens it: its raw body and 400 answer.
    browser.command("Input.dispatchKeyEvent", {"type": "keyDown", "key": "ArrowDown", "code": "ArrowDown",
                                               "windowsVirtualKeyCode": 40})
    rejected_id = browser.eval("document.activeElement.dataset.id")
    assert rejected_id and rejected_id != ok_id
    browser.eval("document.activeElement.click(); 1")
    browser.wait_for(f"document.getElementById('detail').dataset.id === {rejected_id!r}", what="a click to open the row")
    text = detail_text(browser)
    assert "rejected" in text and "InvalidJson" in text, text
    assert HOSTILE_IMG in text, "the raw body as sent, as text"
    assert bad.text.strip() in browser.eval("document.querySelector('#detail pre.answer').textContent")
    assert browser.eval("document.querySelectorAll('#detail img, #detail script').length") == 0
    time.sleep(0.3)
    assert browser.eval("window.__alerted") is False


def test_filter_deep_link_restores_the_filtered_list(mock, browser):
    mine, other = mock.create_device(), mock.create_device()
    for t in (mine, other, mine):
        assert send(mock, {"to": t, "data": {"k": "v"}}).status_code == 200
    mine_ids = [m["message_id"] for m in mock.messages(token=mine)]
    url = mock.base_url + "/?transport=http&status=delivered&device=" + urllib.parse.quote(mine)
    open_page(browser, url)
    rows = browser.eval("[...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.id)")
    assert rows == mine_ids, rows
    assert browser.eval("document.querySelector('#filters [name=device]').value") == mine
    assert browser.eval("document.querySelector('#filters [name=transport]').value") == "http"
    assert browser.eval("document.getElementById('filters').hidden") is False

    # Changing a field rewrites the link; a reload restores that list.
    browser.eval("const s = document.querySelector('#filters [name=transport]'); s.value = 'xmpp';"
                 "s.dispatchEvent(new Event('input', {bubbles: true})); 1")
    browser.wait_for("document.querySelectorAll('#messages tbody tr').length === 0", what="the xmpp filter")
    assert "transport=xmpp" in browser.eval("location.search")
    browser.command("Page.reload")
    browser.wait_for("document.readyState === 'complete' && document.getElementById('messages').dataset.loaded === 'true'")
    assert browser.eval("document.querySelector('#filters [name=transport]').value") == "xmpp"
    assert browser.eval("document.querySelectorAll('#messages tbody tr').length") == 0

    # The error and project filters, from a link: a send to another project's device fails
    # MismatchSenderId.
    foreign = mock.create_device(sender_id=SENDER_B, app=APP_B)
    assert send(mock, {"to": foreign}).json()["results"][0]["error"] == "MismatchSenderId"
    failed_id = mock.messages(token=foreign)[0]["message_id"]
    open_page(browser, mock.base_url + "/?error=MismatchSenderId&project=" + SENDER_A)
    rows = browser.eval("[...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.id)")
    assert rows == [failed_id], rows
    open_page(browser, mock.base_url + "/?error=MismatchSenderId&project=" + SENDER_B)
    assert browser.eval("document.querySelectorAll('#messages tbody tr').length") == 0

    # The topic filter, from a link: only the send to that topic (any case).
    topic = "deep-" + uuid.uuid4().hex[:8]
    mock.subscribe(mine, topic)
    assert send(mock, {"to": "/topics/" + topic, "data": {"k": "t"}}).status_code == 200
    [topic_record] = mock.messages(topic=topic)
    open_page(browser, mock.base_url + "/?topic=" + topic.upper())
    rows = browser.eval("[...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.id)")
    assert rows == [topic_record["message_id"]], rows
    assert browser.eval("document.querySelector('#filters [name=topic]').value") == topic.upper()

    # The time range, from a link (RFC 3339 UTC): three sends two minutes apart on the mock's
    # clock; since and until pick the ones between them.
    timed = mock.create_device()
    for i in range(3):
        if i:
            mock.api("POST", "/api/v1/clock", json={"advance_s": 120})
        assert send(mock, {"to": timed, "data": {"i": str(i)}}).status_code == 200
    newest, middle, oldest = [m["message_id"] for m in mock.messages(token=timed)]
    at = datetime.datetime.fromisoformat(mock.message(middle)["accepted_at"].replace("Z", "+00:00"))
    utc = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")
    since, until = utc(at - datetime.timedelta(seconds=60)), utc(at + datetime.timedelta(seconds=60))
    device = "device=" + urllib.parse.quote(timed)
    for query, want in [(f"since={since}&until={until}", [middle]), (f"since={since}", [newest, middle]),
                        (f"until={until}", [middle, oldest])]:
        open_page(browser, mock.base_url + "/?" + device + "&" + query)
        rows = browser.eval("[...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.id)")
        assert rows == want, (query, rows)
    # The fields show the range (local time in the inputs, the same instants).
    shown = browser.eval("['since', 'until'].map(n => { const v = document.querySelector('#filters [name=' + n + ']').value;"
                         " return v ? new Date(v).toISOString() : ''; })")
    assert shown == ["", until.replace("Z", ".000Z")], shown
    open_page(browser, mock.base_url + "/?" + device + f"&since={since}&until={until}")
    shown = browser.eval("['since', 'until'].map(n => new Date(document.querySelector('#filters [name=' + n + ']').value).toISOString())")
    assert shown == [since.replace("Z", ".000Z"), until.replace("Z", ".000Z")], shown
    assert browser.eval("document.getElementById('filters-toggle').textContent") == "filters (3)"

    # A hostile value in the link stays in the input as text.
    open_page(browser, mock.base_url + "/?error=" + urllib.parse.quote(HOSTILE_IMG))
    assert browser.eval("document.querySelector('#filters [name=error]').value") == HOSTILE_IMG
    assert browser.eval("document.querySelectorAll('#filters img').length") == 0


def rgb(css):
    """`rgb(r, g, b)` or `rgba(r, g, b, a)` as [r, g, b]."""
    return [int(float(x)) for x in css[css.index("(") + 1:css.index(")")].split(",")[:3]]


def contrast(a, b):
    """The WCAG contrast ratio of two sRGB colours."""
    def luminance(c):
        lin = [v / 255 / 12.92 if v / 255 <= 0.04045 else ((v / 255 + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_phone_width_has_no_horizontal_scroll_and_dark_mode_follows_the_os(mock, browser):
    token = mock.create_device()
    long_value = "x" * 300
    r = send(mock, {"to": token, "data": {"long": long_value, "more": "y" * 120}})
    message_id = r.json()["results"][0]["message_id"]
    browser.command("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 2,
                                                          "mobile": True})
    open_page(browser, mock.base_url + "/")
    browser.wait_for("document.querySelectorAll('#messages tbody tr').length >= 1")
    fits = "document.documentElement.scrollWidth <= window.innerWidth"
    assert browser.eval(fits), browser.eval("[document.documentElement.scrollWidth, window.innerWidth]")
    # The table is a list of cards: its header row is hidden, cells carry their labels.
    assert browser.eval("getComputedStyle(document.querySelector('#messages thead')).display") == "none"
    browser.eval("document.querySelector('#messages tbody tr').click(); 1")
    browser.wait_for(f"document.getElementById('detail').dataset.id === {message_id!r}")
    assert browser.eval(fits), browser.eval("[document.documentElement.scrollWidth, window.innerWidth]")
    assert browser.eval("document.getElementById('detail').getBoundingClientRect().width") <= 390

    def background():
        return rgb(browser.eval("getComputedStyle(document.body).backgroundColor"))

    def overview_colours():
        """The live overview's colours: its chart's background, and the contrast of a counter's
        label, the rejected count and the errors' key against the overview's background."""
        c = browser.eval("""(() => { const s = e => getComputedStyle(e);
            const o = document.getElementById('overview');
            return {panel: s(o).backgroundColor, chart: s(o.querySelector('.ov-chart')).backgroundColor,
                    label: s(o.querySelector('.ov-counter dt')).color,
                    rejected: s(o.querySelector('.ov-counter[data-counter=rejected] dd')).color,
                    errors: getComputedStyle(o.querySelector('.ov-key-errors'), '::before').backgroundColor}; })()""")
        panel = rgb(c["panel"])
        return {"chart": rgb(c["chart"]), "label": contrast(rgb(c["label"]), panel),
                "rejected": contrast(rgb(c["rejected"]), panel), "errors": contrast(rgb(c["errors"]), rgb(c["chart"]))}

    browser.command("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    assert sum(background()) > 600, background()
    light = overview_colours()
    assert sum(light["chart"]) > 600, light
    browser.command("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    assert sum(background()) < 150, background()
    panel_bg = browser.eval("getComputedStyle(document.getElementById('detail')).backgroundColor")
    assert panel_bg != "rgb(255, 255, 255)", panel_bg
    # The overview follows: a dark chart box, and text that stays readable (WCAG AA: 4.5:1 for
    # text, 3:1 for the chart's marks), as it is in light mode.
    dark = overview_colours()
    assert sum(dark["chart"]) < 150, dark
    for colours in (light, dark):
        assert colours["label"] >= 4.5 and colours["rejected"] >= 4.5 and colours["errors"] >= 3, (light, dark)

    # At 1280×800 the list and the side column sit next to each other.
    browser.command("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 800, "deviceScaleFactor": 1,
                                                          "mobile": False})
    browser.wait_for("getComputedStyle(document.querySelector('main')).gridTemplateColumns.split(' ').length === 2",
                     what="two columns at 1280 wide")
    assert browser.eval(fits)


def test_v1_send_by_firebase_admin_in_a_transport_link_and_its_detail(mock, browser, tmp_path):
    from firebase_admin import messaging
    from v1support import pointed

    with pointed(mock, tmp_path) as sdk:
        token = mock.create_device()
        # By installation id, as firebase-admin 7.7 asks (token= is deprecated).
        name = messaging.send(messaging.Message(fid=mock.device(token)["fid"], data={"html": HOSTILE_SCRIPT},
                                                android=messaging.AndroidConfig(priority="high", notification=messaging.AndroidNotification(
                                                    title=HOSTILE_IMG, channel_id="news"))), app=sdk.app)
        record = mock.messages(v1_name=name)[0]
        open_page(browser, mock.base_url + "/?transport=http_v1")
        trap_alerts(browser)
        rows = browser.eval("[...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.id)")
        assert record["message_id"] in rows, rows
        assert all(m["transport"] == "http_v1" for m in mock.messages(transport="http_v1")), "the server filtered"
        assert len(rows) == len(mock.messages(transport="http_v1")[:50]), rows
        browser.eval(f"document.querySelector('#messages tr[data-id=\"{record['message_id']}\"]').click(); 1")
        browser.wait_for(f"document.getElementById('detail').dataset.id === {record['message_id']!r}")
        text = detail_text(browser)
        assert "HTTP v1" in text and name in text, text
        assert "fire-admin-python/" in text and re.search(r"Bearer ya29\.\S…", text), text
        assert '"name": "' + name + '"' in browser.eval("document.querySelector('#detail pre.answer').textContent")
        # As JSON text: the quote escaped, the markup as characters.
        assert '"channel_id": "news"' in text and '"title": "\\"><img src=x onerror=alert(2)>"' in text, text
        assert HOSTILE_SCRIPT in text, text
        assert browser.eval("document.querySelectorAll('#detail img, #detail script').length") == 0
        time.sleep(0.3)
        assert browser.eval("window.__alerted") is False


def test_the_detail_panel_draws_the_real_preview_cards(mock, browser):
    """With previews.js on the page (no stand-in), each recipient of the panel gets the
    notification card the device would show, titles as text."""
    token = mock.create_device()
    r = send(mock, {"to": token, "notification": {"title": HOSTILE_SCRIPT, "body": "real card", "color": "#336699"}})
    assert r.status_code == 200, r.text
    record_id = r.json()["results"][0]["message_id"]
    open_page(browser, mock.base_url + "/#message=" + urllib.parse.quote(record_id, safe=""))
    trap_alerts(browser)
    browser.wait_for("document.querySelectorAll('#detail .pv-title').length === 1", what="the Android card in the panel")
    assert browser.eval("document.querySelector('#detail .pv-title').textContent") == HOSTILE_SCRIPT
    assert browser.eval("document.querySelectorAll('#detail script, #detail img').length") == 0
    assert browser.eval("window.__alerted") is False


@pytest.fixture(scope="module")
def mock_busy(tmp_path_factory):
    """A server of its own: one device gets more than a page of 1000 inbox entries."""
    yield from _serve(tmp_path_factory)


def test_a_preview_past_the_first_1000_entries_of_the_device_inbox(mock_busy, browser):
    """The panel reads the recipient's one inbox entry by its message id: the newest of 1005
    entries has its card, as the oldest has."""
    mock = mock_busy
    token = mock.create_device()
    ids = []
    for i in range(1005):
        r = mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + KEY_A},
                           json={"to": token, "notification": {"title": f"number {i}"}}, timeout=10)
        assert r.status_code == 200, r.text
        ids.append(r.json()["results"][0]["message_id"])
    for n in (1004, 0):
        open_page(browser, mock.base_url + "/#message=" + urllib.parse.quote(ids[n], safe=""))
        browser.wait_for(f"document.getElementById('detail').dataset.id === {ids[n]!r} && "
                         "!!document.querySelector('#detail .preview-box .pv-card, #detail .preview-box p.muted')",
                         what="the recipient's preview")
        assert "not in the device's inbox" not in detail_text(browser), detail_text(browser)
        card = browser.eval("(c => [c.dataset.messageId, c.querySelector('.pv-title').textContent])"
                            "(document.querySelector('#detail .preview-box .pv-card'))")
        assert card == [ids[n], f"number {n}"], card
    # The device view draws the newest 100 of the 1005, newest first (one newest-first request).
    open_page(browser, mock.base_url + "/#device=" + urllib.parse.quote(token, safe=""))
    browser.wait_for("document.querySelectorAll('#device-view .pv-screen .pv-card').length === 100",
                     what="the device view's 100 newest cards")
    drawn = browser.eval("[...document.querySelectorAll('#device-view .pv-screen .pv-card')].map(c => c.dataset.messageId)")
    assert drawn == ids[::-1][:100], (drawn[:3], ids[-3:])
