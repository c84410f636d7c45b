"""The page a tester can scan (issue 25), in headless Chromium with real mouse and keyboard, at
1440x900 and 390x844, light and dark: one line per message with recipient counts, paging,
the detail in tabs with no nested scroll, the search language with chips in the URL, the
chart's history from the server, the device pane in view, empty / loading / disconnected
states, platform-like previews, contrast and the keys. One server with 150 mixed messages and
a 120-device topic send, and one browser, for the module; a failing test saves a screenshot
in .build/interop-screenshots/.
"""

import json
import time
import urllib.parse

import pytest

from conftest import _serve
from mocksupport import KEY_A, SENDER_A, APP_A
import scanpage
from scanpage import DESKTOP, PHONE, HOSTILE, js, send, set_scheme, open_page, row_figures, contrast

SCHEMES = ("light", "dark")
SIZES = (("desktop", DESKTOP), ("phone", PHONE))


# One browser for the module (conftest's `page`); a failing test saves a screenshot.
pytestmark = pytest.mark.usefixtures("page_shots")


@pytest.fixture(scope="module")
def seeded(mock):
    return scanpage.seed(mock, "fans")


def key(browser, k, code=None, vk=0, text=None):
    down = {"type": "keyDown", "key": k, "code": code or ("Key" + k.upper() if len(k) == 1 and k.isalpha() else k),
            "windowsVirtualKeyCode": vk}
    if text is not None:
        down["text"] = text
    browser.command("Input.dispatchKeyEvent", down)
    browser.command("Input.dispatchKeyEvent", {"type": "keyUp", "key": k, "code": down["code"], "windowsVirtualKeyCode": vk})


def type_text(browser, text):
    browser.command("Input.insertText", {"text": text})


def enter(browser):
    key(browser, "Enter", "Enter", 13, "\r")


def row_ids(browser):
    return browser.eval("[...document.querySelectorAll('#messages tbody tr.message')].map(r => r.dataset.id)")


def api_ids(mock, **params):
    q = urllib.parse.urlencode(dict(params, limit=50))
    return [m["message_id"] for m in mock.api("GET", "/api/v1/messages?" + q)["items"]]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", [s[0] for s in SIZES])
def test_one_line_per_message_with_recipient_counts(mock, seeded, page, scheme, size):
    set_scheme(page, scheme, dict(SIZES)[size])
    open_page(page, mock.base_url + "/")
    figs = row_figures(page)
    print(f"{size}/{scheme}: {figs['onScreen']} rows on the first screen, tallest {figs['tallest']:.0f} px")
    assert figs["rows"] == 50
    assert figs["onScreen"] >= (12 if size == "desktop" else 5), figs
    # One line (two on a phone): no row taller than that, whatever it holds.
    lines = 1 if size == "desktop" else 2
    assert figs["tallest"] < (lines + 1) * figs["line"], figs
    assert figs["breaking"] == [], "cells that may break a word in the middle"
    assert page.eval("document.documentElement.scrollWidth <= innerWidth")
    # The 120-device topic send: one row, counted, no token list.
    row = f"#messages tr[data-id={js(seeded['topic_message'])}]"
    assert page.eval(f"document.querySelector('{row} td.recip').textContent") == "120 delivered"
    assert page.eval(f"document.querySelector('{row} td.target').textContent") == "/topics/fans"
    assert page.eval(f"document.querySelector('{row} td.what').textContent") == "To every fan — kick-off at eight"
    assert page.eval(f"document.querySelector('{row}').getBoundingClientRect().height") < (lines + 1) * figs["line"]
    # Relative time, the ISO time on hover.
    iso = page.eval(f"document.querySelector('{row} time').title")
    assert page.eval(f"document.querySelector('{row} time').dateTime") == iso and iso.endswith("Z")
    assert page.eval(f"document.querySelector('{row} time').textContent").endswith(" ago")
    # Hostile text is text.
    assert page.eval("document.querySelectorAll('#messages img, #messages script').length") == 0
    assert page.eval(f"[...document.querySelectorAll('#messages td.what')].some(td => td.textContent.startsWith({js(HOSTILE)}))")


def test_rejected_rows_name_their_target_and_error(mock, seeded, page):
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock.base_url + "/?status=rejected")
    page.wait_for("document.querySelectorAll('#messages tbody tr.message').length === 45", what="45 rejected")
    rows = page.eval("""[...document.querySelectorAll('#messages tbody tr.message')].map(r => ({
        target: r.querySelector('td.target').title, recip: r.querySelector('td.recip').textContent,
        mark: r.querySelector('td.mark').textContent}))""")
    errors = {r["recip"] for r in rows}
    assert errors == {"Unauthorized", "InvalidRegistration", "NotRegistered"}, errors
    assert all(r["mark"] == "✕" for r in rows)
    bad = [r for r in rows if r["recip"] == "InvalidRegistration"]
    assert all(r["target"].startswith("not a token ") for r in bad), bad[:2]
    # A 401 has no recipient: its target comes from the body as sent.
    unauthorized = [r for r in rows if r["recip"] == "Unauthorized"]
    assert all(r["target"] in seeded["tokens"] for r in unauthorized), unauthorized[:2]
    assert not any(r["target"] in ("", "(no target)") for r in rows)


def test_paging_says_where_it_is(mock, seeded, page):
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock.base_url + "/")
    total = page.eval("document.getElementById('range').textContent")
    assert total == "1–50 of 151", total
    page.click("#older")
    page.wait_for("document.getElementById('range').textContent === '51–100 of 151'", what="the second page")
    second = row_ids(page)
    assert second == [m["message_id"] for m in mock.api("GET", "/api/v1/messages?limit=100")["items"][50:]]
    page.click("#older")
    page.wait_for("document.getElementById('range').textContent === '101–150 of 151'", what="the third page")
    page.click("#older")
    page.wait_for("document.getElementById('range').textContent === '151–151 of 151'", what="the last page")
    assert page.eval("document.getElementById('older').disabled")
    page.click("#newer")
    page.wait_for("document.getElementById('range').textContent === '101–150 of 151'", what="back a page")
    # Devices page too, and search on the server.
    assert page.eval("document.getElementById('device-range').textContent") == "1–50 of 129"
    page.click("#devices-older")
    page.wait_for("document.getElementById('device-range').textContent === '51–100 of 129'", what="the devices' second page")
    fan = seeded["fans"][-1]
    page.click("#device-search")
    type_text(page, fan[:30])
    page.wait_for(f"document.getElementById('device-range').textContent === '1–1 of 1' && "
                  f"document.querySelector('#devices tbody tr').dataset.token === {js(fan)}", what="the device search")


def test_search_prefixes_chips_and_url(mock, seeded, page):
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock.base_url + "/")
    # `/` focuses the search box, from anywhere.
    page.eval("document.activeElement.blur(); 1")
    key(page, "/", "Slash", 191, "/")
    assert page.eval("document.activeElement.id") == "filter"
    type_text(page, "status:rejected -error:unauthorized")
    enter(page)
    page.wait_for("document.querySelectorAll('#chips li').length === 2", what="two chips")
    assert page.eval("[...document.querySelectorAll('#chips .chip-label')].map(c => c.textContent)") == \
        ["status:rejected", "-error:unauthorized"]
    # Error codes are matched exactly (the server's, case and all): excluding "unauthorized" keeps Unauthorized.
    page.wait_for("!!document.querySelector('#messages tbody tr')", what="rows")
    assert "status=rejected" in page.eval("location.search") and "not_error=unauthorized" in page.eval("location.search")
    # Remove the exclusion by its ×, with a real click; add a proper one.
    page.click("#chips li[data-name=not_error] .chip-remove")
    page.wait_for("document.querySelectorAll('#chips li').length === 1", what="the chip to go")
    page.click("#filter")
    type_text(page, "-error:Unauthorized -error:NotRegistered")
    enter(page)
    page.wait_for("document.querySelectorAll('#messages tbody tr.message').length === 15", what="InvalidRegistration only")
    assert set(page.eval("[...document.querySelectorAll('#messages td.recip')].map(t => t.textContent)")) == {"InvalidRegistration"}
    assert row_ids(page) == api_ids(mock, status="rejected", not_error="Unauthorized,NotRegistered")
    # A reload keeps the chips (the URL is the state).
    page.command("Page.reload")
    page.wait_for("document.querySelectorAll('#chips li').length === 3 && document.querySelectorAll('#messages tbody tr.message').length === 15",
                  what="the chips after a reload")
    # Plain words search title, body and data ignoring case; phrases; exclusions; relative times.
    open_page(page, mock.base_url + "/")
    page.click("#filter")
    type_text(page, 'sale "forty PER cent" after:10m -transport:v1')
    enter(page)
    page.wait_for("document.querySelectorAll('#messages tbody tr.message').length === 15", what="the 15 sale notifications")
    assert all(t.startswith("Summer SALE") for t in page.eval("[...document.querySelectorAll('#messages td.what')].map(t => t.textContent)"))
    since = urllib.parse.parse_qs(page.eval("location.search")[1:])["since"][0]
    assert since.endswith("Z") and since < mock.api("GET", "/api/v1/messages?limit=1")["items"][0]["accepted_at"]
    page.click("#filter")
    type_text(page, "-sale")
    enter(page)
    page.wait_for("document.querySelectorAll('#messages tbody tr.message').length === 0", what="sale and not sale")
    # No match: it says so with the search, and clears it.
    assert page.eval("document.getElementById('messages-state').textContent").startswith("No messages match ")
    assert "-sale" in page.eval("document.querySelector('#messages-state code').textContent")
    page.click("#messages-state .state-clear")
    page.wait_for("document.querySelectorAll('#messages tbody tr.message').length === 50 && location.search === ''", what="clear")
    # token:, topic:, transport:, app:, project: — each as the API answers.
    fan = seeded["fans"][0]
    for text, params in ((f"token:{fan}", {"token": fan}), ("topic:FANS", {"topic": "fans"}),
                         ("transport:v1", {"transport": "http_v1"}), (f"app:{APP_A} status:pending", {"app": APP_A, "status": "pending"}),
                         (f"project:{SENDER_A} -status:accepted", {"sender_id": SENDER_A, "not_status": "accepted"})):
        open_page(page, mock.base_url + "/")
        page.click("#filter")
        type_text(page, text)
        enter(page)
        want = api_ids(mock, **params)
        assert want, text
        compact = json.dumps(want, separators=(",", ":"))
        page.wait_for(f"JSON.stringify([...document.querySelectorAll('#messages tbody tr.message')].map(r => r.dataset.id)) === {js(compact)}",
                      what=text)
    # The overview's error counts, a device's and a topic's buttons add their chips.
    open_page(page, mock.base_url + "/")
    page.click("#overview li[data-code=NotRegistered] button")
    page.wait_for("[...document.querySelectorAll('#chips .chip-label')].map(c => c.textContent).join() === 'error:NotRegistered'", what="the error chip")
    page.wait_for("document.querySelectorAll('#messages tbody tr.message').length === 15", what="NotRegistered rows")
    open_page(page, mock.base_url + "/")
    page.click(f"#devices tr[data-token={js(seeded['offline'])}] td.inbox button")
    page.wait_for(f"[...document.querySelectorAll('#chips .chip-label')].map(c => c.title).join() === {js('token:' + seeded['offline'])}",
                  what="the device chip")
    page.wait_for("document.querySelectorAll('#messages tbody tr.message').length === 15", what="the offline device's messages")
    open_page(page, mock.base_url + "/")
    page.click("#topics button")
    page.wait_for("document.querySelector('#chips .chip-label').textContent.startsWith('topic:')", what="the topic chip")
    # The help: `?` opens it, Escape closes it; the syntax is on the page.
    open_page(page, mock.base_url + "/")
    page.eval("document.activeElement.blur(); 1")
    key(page, "?", "Slash", 191, "?")
    assert page.visible("#search-help")
    for prefix in ("token:", "topic:", "status:", "error:", "transport:", "app:", "project:", "after:", "before:", "-status:"):
        assert prefix in page.eval("document.getElementById('search-help').textContent"), prefix
    key(page, "Escape", "Escape", 27)
    assert not page.visible("#search-help")
    # A registration token may start with "-" and holds a ":": typed whole it is the token, not
    # an exclusion of a word (`-token:` excludes one).
    dash = "-" + "A" * 21 + ":APA91b" + "x" * 40
    assert json.loads(page.eval(f"JSON.stringify(fcm.search.apply({{}}, {js(dash)}))")) == {"device": dash}
    assert json.loads(page.eval(f"JSON.stringify(fcm.search.apply({{}}, {js('-token:' + dash)}))")) == {"not_device": dash}
    # A term the page cannot take says why.
    page.click("#filter")
    type_text(page, "status:lost")
    enter(page)
    assert "status: takes" in page.eval("document.getElementById('error').textContent")


def test_chart_has_the_servers_history_after_a_reload(mock, seeded, page):
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock.base_url + "/")
    series = mock.api("GET", "/api/v1/stats/series?window=600&bucket=10")
    want = sum(series["sends"])
    assert want >= 151
    page.wait_for(f"document.querySelector('#overview .ov-summary').textContent.startsWith('Last 10 minutes: {want} sends')",
                  what="the summary from the server's history")
    assert page.eval("document.querySelectorAll('#overview .ov-sends rect').length") >= 1
    assert page.eval("document.querySelectorAll('#overview .ov-errs rect').length") >= 1
    assert page.eval("[...document.querySelectorAll('#overview .ov-tick')].map(t => t.textContent)") == \
        ["−10 min", "−8 min", "−5 min", "−3 min", "now"]
    # Values on hover: a real mouse over the newest bar.
    x, y = page.eval("""(() => { const r = [...document.querySelectorAll('#overview .ov-sends rect')].pop().getBoundingClientRect();
                                 return [r.left + r.width / 2, r.top + r.height / 2]; })()""")
    page.command("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    page.wait_for("/UTC: \\d+ sends, \\d+ errors/.test(document.querySelector('#overview .ov-tip').textContent)", what="the hover values")
    # The hour.
    page.click("#overview button[data-window='1h']")
    page.wait_for(f"document.querySelector('#overview .ov-summary').textContent.startsWith('Last hour: {want} sends')", what="the hour")


@pytest.mark.parametrize("size", [s[0] for s in SIZES])
def test_device_deep_link_opens_in_view(mock, seeded, page, size):
    set_scheme(page, "light", dict(SIZES)[size])
    token = seeded["fans"][-1]
    page.command("Page.navigate", {"url": mock.base_url + "/#device=" + urllib.parse.quote(token, safe="")})
    page.wait_for(f"(document.querySelector('#device-view .pv-token') || {{}}).textContent === {js(token)}", what="the device")
    page.wait_for("document.querySelectorAll('#device-view .pv-card').length === 1", what="its card")
    box = page.eval("(() => { const r = document.querySelector('#device-view .pv-token').getBoundingClientRect(); return [r.top, r.bottom]; })()")
    assert 0 <= box[0] and box[1] <= (900 if size == "desktop" else 844), box
    for part in (".pv-phone", ".pv-online", ".pv-subs", ".pv-card"):
        assert page.visible("#device-view " + part), part
    assert page.eval("document.querySelector('#device-view .pv-subs').textContent").endswith("/topics/fans ")
    # Escape closes it; the link goes.
    page.eval("document.activeElement.blur(); 1")
    key(page, "Escape", "Escape", 27)
    page.wait_for("location.hash === '' && !document.getElementById('device-view').classList.contains('pv-open')", what="Escape")


def test_detail_tabs_pinned_head_no_nested_scroll(mock, seeded, page):
    for size in (DESKTOP, PHONE):
        set_scheme(page, "dark", size)
        open_page(page, mock.base_url + "/")
        page.click(f"#messages tr[data-id={js(seeded['topic_message'])}] td.what")
        page.wait_for("!!document.querySelector('#detail .detail-tabs')", what="the detail")
        tabs = page.eval("[...document.querySelectorAll('#detail .detail-tabs button')].map(b => b.textContent)")
        assert tabs == ["Summary", "Request", "Answer", "Recipients (120)", "Previews"], tabs
        page.click("#detail .detail-tabs button[data-tab=Recipients]")
        page.wait_for("document.querySelectorAll('#detail .recipient').length === 50", what="a page of recipients")
        assert page.eval("document.querySelector('#detail .rc-pager span').textContent") == "1–50 of 120"
        page.click("#detail .rc-pager button[aria-label='next recipients']")
        page.wait_for("document.querySelector('#detail .rc-pager span').textContent === '51–100 of 120'", what="page 2")
        page.click("#detail .rc-filter button[data-status=delivered]")
        page.wait_for("document.querySelector('#detail .rc-pager span').textContent === '1–50 of 120'", what="delivered")
        # One scrolling box: the tab's body; nothing inside it scrolls on its own.
        nested = page.eval("""[...document.querySelectorAll('#detail .detail-body *')].filter(e => {
            const s = getComputedStyle(e); return /(auto|scroll)/.test(s.overflowY + s.overflowX) && (e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1);
        }).map(e => e.className)""")
        assert nested == [], nested
        page.eval("document.querySelector('#detail .detail-body').scrollTop = 1e6; 1")
        close = page.eval("(() => { const r = document.querySelector('#detail .close').getBoundingClientRect(); return [r.top, r.bottom]; })()")
        assert close[0] >= 0 and close[1] <= innerheight(page), close
        page.click("#detail .close")
        page.wait_for("document.getElementById('detail').hidden", what="close")
    # A multicast's request shows its registration_ids.
    set_scheme(page, "light", DESKTOP)
    multicast = next(m for m in mock.api("GET", "/api/v1/messages?limit=50")["items"] if (m["target"] or {}).get("kind") == "multicast")
    page.command("Page.navigate", {"url": mock.base_url + "/#message=" + urllib.parse.quote(multicast["message_id"], safe="")})
    page.wait_for("!!document.querySelector('#detail .detail-tabs')", what="the multicast")
    page.click("#detail .detail-tabs button[data-tab=Request]")
    text = page.eval("document.querySelector('#detail .detail-body').textContent")
    assert '"registration_ids"' in text and seeded["tokens"][4] in text and '"multicast"' not in text, text[:400]


def innerheight(page):
    return page.eval("innerHeight")


def test_keyboard_skip_link_j_k_enter_escape(mock, seeded, page):
    set_scheme(page, "light", DESKTOP)
    open_page(page, mock.base_url + "/")
    page.eval("document.activeElement.blur(); 1")
    page.press("Tab")
    assert page.eval("document.activeElement.className") == "skip"
    assert page.visible(".skip")
    page.press("Enter")
    page.wait_for("document.activeElement.id === 'messages-section'", what="the skip link")
    key(page, "j", vk=74, text="j")
    first = row_ids(page)[0]
    assert page.eval("document.activeElement.dataset.id") == first
    key(page, "j", vk=74, text="j")
    key(page, "j", vk=74, text="j")
    key(page, "k", vk=75, text="k")
    second = row_ids(page)[1]
    assert page.eval("document.activeElement.dataset.id") == second
    page.press("Enter")
    page.wait_for(f"document.getElementById('detail').dataset.id === {js(second)}", what="Enter opens")
    # With the detail open, j opens the next one.
    page.eval("document.querySelector('#messages tr[aria-current=true]').focus(); 1")
    key(page, "j", vk=74, text="j")
    page.wait_for(f"document.getElementById('detail').dataset.id === {js(row_ids(page)[2])}", what="j follows")
    page.press("Escape")
    page.wait_for("document.getElementById('detail').hidden", what="Escape closes")


def test_previews_look_like_the_platform(mock, seeded, page):
    ios = mock.create_device(app="com.example.interop.ios", platform="ios")
    web = mock.create_device(platform="web")
    android = mock.create_device()
    for t in (ios, web, android):
        r = scanpage.send_v1(mock, {"token": t, "notification": {"title": "Doors open", "body": "Gate 4 in ten minutes"},
                                    "apns": {"payload": {"aps": {"alert": {"subtitle": "Stadium"}, "badge": 2}}},
                                    "webpush": {"notification": {"actions": [{"action": "map", "title": "Show the map"}]},
                                                "fcm_options": {"link": "https://tickets.example.com/gate"}}})
        assert r.status_code == 200, r.text
    for scheme in SCHEMES:
        set_scheme(page, scheme, DESKTOP)
        page.command("Page.navigate", {"url": mock.base_url + "/#device=" + urllib.parse.quote(ios, safe="")})
        page.wait_for("!!document.querySelector('#device-view .pv-card.pv-ios .pv-ios-icon')", what="the iOS banner")
        assert page.eval("document.querySelector('#device-view .pv-ios .pv-time').textContent") in ("now", "1m")
        assert page.eval("document.querySelector('#device-view .pv-ios .pv-subtitle').textContent") == "Stadium"
        assert float(page.eval("parseFloat(getComputedStyle(document.querySelector('#device-view .pv-ios')).borderTopLeftRadius)")) >= 16
        low = [c for c in contrast(page) if c["ratio"] < c["need"]]
        assert low == [], low[:5]
        page.eval(f"fcm.openDevice({js(web)}); 1")
        page.wait_for("!!document.querySelector('#device-view .pv-card.pv-web .pv-web-actions')", what="the web notification")
        assert page.eval("document.querySelector('#device-view .pv-phone').classList.contains('pv-frame-desktop')")
        assert page.eval("document.querySelector('#device-view .pv-origin').textContent").startswith("tickets.example.com")
        assert "Show the map" in page.eval("document.querySelector('#device-view .pv-web-actions').textContent")
        low = [c for c in contrast(page) if c["ratio"] < c["need"]]
        assert low == [], low[:5]
        page.eval(f"fcm.openDevice({js(android)}); 1")
        page.wait_for("!!document.querySelector('#device-view .pv-card.pv-android .pv-small-icon')", what="the Android card")
        assert not page.eval("document.querySelector('#device-view .pv-phone').classList.contains('pv-frame-desktop')")
        low = [c for c in contrast(page) if c["ratio"] < c["need"]]
        assert low == [], low[:5]


def test_contrast_of_every_visible_text(mock, seeded, page):
    worst = {}
    for scheme in SCHEMES:
        for name, size in SIZES:
            set_scheme(page, scheme, size)
            open_page(page, mock.base_url + "/")
            page.wait_for("document.querySelector('#overview .ov-summary').textContent !== ''", what="the overview")
            seen = contrast(page)
            # The detail, open on its summary.
            page.click(f"#messages tr[data-id={js(seeded['topic_message'])}] td.what")
            page.wait_for("!!document.querySelector('#detail .detail-tabs')", what="the detail")
            seen += contrast(page)
            page.press("Escape")
            low = [c for c in seen if c["ratio"] < c["need"]]
            assert low == [], (scheme, name, low[:8])
            worst[f"{name}/{scheme}"] = min(c["ratio"] for c in seen)
            assert len(seen) > 40
    print("lowest contrast:", worst)


def test_fresh_server_loading_and_disconnected(tmp_path_factory, page):
    gen = _serve(tmp_path_factory)
    mock = next(gen)
    try:
        set_scheme(page, "light", DESKTOP)
        open_page(page, mock.base_url + "/")
        page.wait_for("document.getElementById('live').textContent === 'live'", what="the stream")
        assert page.eval("document.getElementById('messages-state').textContent").startswith("No messages yet — send one.")
        page.click("#messages-state .state-compose")
        assert page.visible("#compose form")
        assert page.eval("document.getElementById('messages-section').getAttribute('aria-busy')") == "false"
        # The loading state shows while the server has not answered (a delay put on fetch).
        page.eval("""window.__fetch = window.fetch; window.fetch = (...a) => new Promise(r => setTimeout(() => r(window.__fetch(...a)), 800)); 1""")
        page.eval("fcm.setFilters({status: 'rejected'}); 1")
        page.wait_for("document.getElementById('messages-state').textContent === 'Loading messages…'", what="loading")
        page.wait_for("document.getElementById('messages-state').textContent.startsWith('No messages match')", what="no match")
        page.eval("window.fetch = window.__fetch; fcm.setFilters({}); 1")
        token = mock.create_device()
        page.wait_for(f"!!document.querySelector('#devices tr[data-token={js(token)}]')", what="the device")
    finally:
        next(gen, None)  # SIGTERM; it must exit 0
    page.wait_for("!document.getElementById('offline').hidden", timeout=20, what="the banner")
    assert page.visible("#offline")
    assert "unreachable" in page.eval("document.getElementById('offline').textContent")
    assert page.eval("document.body.classList.contains('stale')")
    assert page.eval(f"document.querySelector('#devices tr[data-token={js(token)}] button.toggle').disabled")
    assert page.eval(f"document.querySelector('#devices tr[data-token={js(token)}] button.toggle').title") == "the server is unreachable"
    # An action tried anyway says what happened in a sentence, not "Failed to fetch".
    page.eval("fcm.setFilters({status: 'accepted'}); 1")
    page.wait_for("document.getElementById('error').textContent.startsWith('The server is unreachable')", what="the sentence")
    assert "Failed to fetch" not in page.eval("document.body.innerText")
