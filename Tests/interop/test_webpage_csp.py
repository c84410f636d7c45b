"""The web page under its strict Content-Security-Policy, in headless Chromium: inline code runs
only as the page's own blocks, named by their SHA-256 (no 'unsafe-inline'), so anything else the
page did inline (a style="" or onclick= attribute, a script built from a string) would be
refused. No `securitypolicyviolation` may fire while the page loads and its main views run:
the live list, the overview chart, the filters, the message detail, the device view with its
notification cards, and compose. Then the policy must refuse what 'unsafe-inline' would allow.

On failure a screenshot is saved under .build/interop-screenshots/.
"""

import json
import uuid

import requests

from mocksupport import APP_A_IOS, KEY_A, SENDER_A

# Before any of the page's scripts: every violation, as the page itself would see it. DevTools'
# own scripts are not subject to the page's policy, so this one always runs.
RECORD_VIOLATIONS = """
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', e => window.__violations.push({
      directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample, line: e.lineNumber}), true);
"""


def js(value):
    return json.dumps(value)


def send(mock, body):
    r = requests.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + KEY_A}, json=body, timeout=10)
    assert r.status_code == 200 and r.json()["success"] >= 1, r.text
    return r.json()["results"][0]["message_id"]


def violations(browser):
    return browser.eval("window.__violations")


def test_no_policy_violation_on_the_page_and_its_views(mock, browser):
    android = mock.create_device()
    ios = mock.create_device(app=APP_A_IOS, platform="ios")
    csp = requests.get(mock.base_url + "/", timeout=10).headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in csp and "script-src 'sha256-" in csp and "style-src 'sha256-" in csp, csp

    browser.command("Emulation.setDeviceMetricsOverride",
                    {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    browser.command("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_VIOLATIONS})
    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    browser.wait_for("document.getElementById('live') && document.getElementById('live').textContent === 'live' && "
                     "document.getElementById('messages').dataset.loaded === 'true'",
                     what="the page to load and follow the event stream")
    assert violations(browser) == [], "while loading"

    # The live list, the overview's counters and chart (redrawn every second), the cards' colours.
    marker = "csp-" + uuid.uuid4().hex[:10]
    message_id = send(mock, {"to": android, "data": {"marker": marker},
                             "notification": {"title": "T", "body": "B", "color": "#ff8800", "image": "https://example.com/i.png"}})
    send(mock, {"to": ios, "notification": {"title": "iOS", "body": "banner", "badge": "3", "sound": "default"}})
    send(mock, {"to": android, "data": {"only": "data"}})
    browser.wait_for(f"!!document.querySelector('#messages tr[data-id={js(message_id)}]')",
                     what="the message to appear live")
    browser.wait_for("document.querySelectorAll('#overview svg rect').length > 0", what="the chart to draw the sends")

    # The filters.
    browser.eval("document.getElementById('filters-toggle').click(); 1")
    browser.eval(f"const f = document.getElementById('filter'); f.value = {js(android)}; f.dispatchEvent(new Event('input')); 1")
    browser.wait_for(f"[...document.querySelectorAll('#messages tbody tr.message')].every(tr => tr.innerText.includes({js(android[:24])}))",
                     what="the filter to narrow the list")

    # The message detail, with its timeline and preview cards.
    browser.eval(f"window.fcm.openMessage({js(message_id)}); 1")
    browser.wait_for(f"document.getElementById('detail').dataset.id === {js(message_id)} && "
                     "document.getElementById('detail').innerText.includes('delivered')", what="the detail panel")

    # The device view: Android and iOS notification cards, a data card.
    for token, count in ((android, 2), (ios, 1)):
        browser.eval(f"window.fcm.openDevice({js(token)}); 1")
        browser.wait_for(f"document.querySelectorAll('#device-view .pv-card').length >= {count} && "
                         f"document.getElementById('device-view').innerText.includes({js(token[:24])})",
                         what="the device view's cards")

    # Compose: a legacy send from the page, its answer shown.
    browser.eval("document.getElementById('compose-toggle').click(); 1")
    browser.wait_for(f"[...document.getElementById('compose-project').options].some(o => o.value === {js(SENDER_A)})",
                     what="the compose form with the projects")
    browser.eval(f"""{{
      const set = (id, v) => {{ const e = document.getElementById(id); e.value = v;
                               e.dispatchEvent(new Event('input')); e.dispatchEvent(new Event('change')); }};
      set('compose-protocol', 'legacy'); set('compose-project', {js(SENDER_A)}); set('compose-kind', 'token');
      set('compose-target', {js(android)}); set('compose-title', 'from the page'); set('compose-body', 'hello');
      document.getElementById('compose-send').click();
    }} 1""")
    browser.wait_for("!!document.getElementById('compose-raw')", what="the compose answer")
    assert browser.eval("document.getElementById('compose-status').textContent") == "HTTP 200 OK"

    # Let the chart redraw and the counters resync (once a second) before the last look.
    browser.eval("new Promise(r => setTimeout(r, 1500)).then(() => 1)")
    assert violations(browser) == [], "while the views ran"

    # The policy is really there: what 'unsafe-inline' would allow is refused and reported.
    browser.eval("""{
      const s = document.createElement('script'); s.textContent = 'window.__inlineRan = true'; document.body.append(s);
      document.body.setAttribute('style', 'outline: 1px solid red');
      const b = document.createElement('button'); b.setAttribute('onclick', 'window.__handlerRan = true');
      document.body.append(b); b.click();
    } 1""")
    browser.wait_for("window.__violations.length >= 3", what="the refused inline code to be reported")
    directives = sorted({v["directive"] for v in violations(browser)})
    assert directives == ["script-src-attr", "script-src-elem", "style-src-attr"], violations(browser)
    assert browser.eval("window.__inlineRan === undefined && window.__handlerRan === undefined")
    assert browser.eval("getComputedStyle(document.body).outlineStyle") != "solid"
