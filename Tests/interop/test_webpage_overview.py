"""The live overview of the web page (issue 14, part 5) in headless Chromium: counters that start
from GET /api/v1/stats and move with the event stream, and the sends/errors chart, all without a
reload. On failure a screenshot is saved under .build/interop-screenshots/.
"""

import json
import re

import pytest

from mocksupport import KEY_A


@pytest.fixture
def browser(browser):
    """The shared driver (conftest), at 1280x800."""
    browser.command("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    return browser


def send(mock, body, key=KEY_A):
    return mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + key}, json=body, timeout=10)


def expected(stats):
    return json.dumps({
        "counters": {"accepted": str(stats["messages"]["accepted"]), "rejected": str(stats["messages"]["rejected"]),
                     "pending": str(stats["pending"]), "xmpp_connections": str(stats["xmpp_connections"]),
                     "devices": str(stats["devices"])},
        "errors": {k: str(v) for k, v in stats["errors"].items()}}, separators=(",", ":"))


def wait_counters(browser, mock, what):
    want = expected(mock.api("GET", "/api/v1/stats"))
    browser.wait_for(f"(() => {{ const p = {page_counters_js()}; return p === {json.dumps(want)}; }})()", what=what)
    return json.loads(want)


def page_counters_js():
    return """JSON.stringify({
        counters: Object.fromEntries([...document.querySelectorAll('#overview [data-counter]')]
                                     .map(b => [b.dataset.counter, b.querySelector('dd').textContent])),
        errors: Object.fromEntries([...document.querySelectorAll('#overview .ov-errors li[data-code]')]
                                   .map(li => [li.querySelector('.ov-code').textContent, li.querySelector('.ov-count').textContent]))})"""


def test_overview_counts_live_and_charts_sends_and_errors(mock, browser):
    # Some history before the page opens: its counters must start from it.
    online = mock.create_device()
    offline = mock.create_device(online=False)
    gone = mock.create_device()
    mock.api("POST", f"/api/v1/devices/{gone}:unregister")
    assert send(mock, {"to": online, "data": {"k": "v"}}).json()["success"] == 1
    assert send(mock, {"to": offline, "data": {"k": "v"}}).json()["success"] == 1
    assert send(mock, {"to": gone}).json()["results"][0]["error"] == "NotRegistered"
    before = mock.api("GET", "/api/v1/stats")
    assert before["pending"] >= 1 and before["errors"].get("NotRegistered", 0) >= 1, before

    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    browser.wait_for("document.getElementById('live') && document.getElementById('live').textContent === 'live'",
                     what="the page's event stream to connect")
    wait_counters(browser, mock, "the counters to show GET /api/v1/stats")
    # The overview sits above the message list, one section of its own.
    assert browser.eval("document.querySelectorAll('#overview').length") == 1
    assert browser.eval("document.getElementById('overview').getBoundingClientRect().top"
                        " < document.getElementById('messages').getBoundingClientRect().top")
    browser.eval("window.__sameDocument = true; 1")
    # The chart starts from the server's history (GET /api/v1/stats/series), not from nothing.
    history = mock.api("GET", "/api/v1/stats/series?window=600&bucket=10")
    sent, failed = sum(history["sends"]), sum(history["errors"])
    assert sent >= 3 and failed >= 1, history
    browser.wait_for(f"document.querySelector('#overview .ov-summary').textContent.startsWith('Last 10 minutes: {sent} sends')",
                     what="the chart's history")

    # A burst: 20 accepted, 5 refused for an unregistered token, 3 with a wrong key.
    for i in range(20):
        assert send(mock, {"to": online, "data": {"n": str(i)}}).status_code == 200
    for _ in range(5):
        assert send(mock, {"to": gone}).json()["results"][0]["error"] == "NotRegistered"
    for _ in range(3):
        assert send(mock, {"to": online}, key="not-a-key").status_code == 401

    after = mock.api("GET", "/api/v1/stats")
    assert after["messages"]["accepted"] == before["messages"]["accepted"] + 20, (before, after)
    assert after["messages"]["rejected"] == before["messages"]["rejected"] + 8, (before, after)
    assert after["errors"]["NotRegistered"] == before["errors"]["NotRegistered"] + 5, (before, after)
    assert after["errors"]["Unauthorized"] == before["errors"].get("Unauthorized", 0) + 3, (before, after)
    shown = wait_counters(browser, mock, "the counters to move without a reload")
    assert shown["errors"]["Unauthorized"] == str(after["errors"]["Unauthorized"])
    assert browser.eval("window.__sameDocument === true"), "the page was reloaded"

    # The chart: bars for the buckets with sends and with errors, and a summary that adds up.
    browser.wait_for(f"document.querySelector('#overview .ov-summary').textContent.includes(' {sent + 28} sends')",
                     what="the chart's summary to count the burst")
    label = browser.eval("document.querySelector('#overview svg.ov-chart').getAttribute('aria-label')")
    m = re.fullmatch(rf"Last 10 minutes: {sent + 28} sends \(peak (\d+) per 10 s\), {failed + 8} errors \(peak (\d+) per 10 s\)", label)
    assert m and 1 <= int(m.group(2)) <= failed + 8 and int(m.group(1)) >= int(m.group(2)), label
    assert browser.eval("document.querySelector('#overview svg.ov-chart').getAttribute('role')") == "img"
    bars = browser.eval("""JSON.stringify([...document.querySelectorAll('#overview .ov-sends rect, #overview .ov-errs rect')]
        .map(r => [r.parentNode.getAttribute('class'), +r.getAttribute('x'), +r.getAttribute('height')]))""")
    bars = json.loads(bars)
    sends = [b for b in bars if b[0] == "ov-sends"]
    errors = [b for b in bars if b[0] == "ov-errs"]
    assert sends and errors, bars
    assert all(0 < h <= 96 and 0 <= x < 600 for _, x, h in bars), bars
    # The newest bars stand at the right-hand end (the last bucket).
    assert max(x for _, x, _ in sends) >= 590, bars


def test_error_codes_are_text(mock, browser):
    # Error codes come from the server: each is put on the page as text, one item per code.
    gone = mock.create_device()
    mock.api("POST", f"/api/v1/devices/{gone}:unregister")
    assert send(mock, {"to": gone}).json()["results"][0]["error"] == "NotRegistered"
    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    stats = wait_counters(browser, mock, "the counters")
    items = json.loads(browser.eval("""JSON.stringify([...document.querySelectorAll('#overview .ov-errors li')]
        .map(li => [li.dataset.code, li.textContent, li.children.length, li.querySelectorAll('*').length]))"""))
    # Each a button (it searches for the code): the code and the count, two spans.
    assert items == [[code, f"{code} {n}", 1, 3] for code, n in sorted(stats["errors"].items())], items
    assert browser.eval("document.querySelectorAll('#overview script, #overview img').length") == 0
