"""The web page at / in a real browser: headless Chromium from Debian, driven over the DevTools
protocol (--remote-debugging-pipe: JSON messages separated by NUL bytes on fds 3 and 4).

A message sent over HTTP must appear on the already-open page without a reload; payload strings
must render as text; the device buttons must change the device through the control API.
If Chromium is not installed the test fails: `make test` installs it.
"""

import time
import uuid


from mocksupport import KEY_A


def test_page_shows_a_new_message_live_and_escapes_payloads(mock, browser):
    token = mock.create_device()
    browser.command("Page.navigate", {"url": mock.base_url + "/"})
    browser.wait_for("document.getElementById('live') && document.getElementById('live').textContent === 'live'",
                     what="the event stream to connect")
    browser.wait_for(f"!!document.querySelector('#devices tr[data-token=\"{token}\"]')", what="the device list")
    # Markers that would not survive a reload, and an alert that must never fire.
    browser.eval("window.__sameDocument = true; window.__alerted = false; window.alert = () => { window.__alerted = true; }; 1")

    marker = "live-" + uuid.uuid4().hex[:12]
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    r = mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + KEY_A},
                      json={"to": token, "notification": {"title": marker, "body": hostile}}, timeout=10)
    assert r.status_code == 200 and r.json()["success"] == 1, r.text
    message_id = r.json()["results"][0]["message_id"]

    browser.wait_for(f"document.querySelector('#messages tbody').innerText.includes('{marker}')",
                     what="the message to appear without a reload")
    assert browser.eval("window.__sameDocument === true"), "the page was reloaded"
    row_text = browser.eval(f"document.querySelector('#messages tr[data-id=\"{message_id}\"]').innerText")
    assert token[:24] in row_text and "1 delivered" in row_text, row_text
    # The hostile string is text on the page, not markup (the row's title holds it whole).
    title = browser.eval(f"document.querySelector('#messages tr[data-id=\"{message_id}\"] td.what').title")
    assert title == marker + " — " + hostile, title
    assert browser.eval("document.querySelectorAll('#messages script, #messages img').length") == 0
    time.sleep(0.3)
    assert browser.eval("window.__alerted") is False

    # The filter box narrows the list (server-side query by token).
    other = mock.create_device()
    mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + KEY_A},
                  json={"to": other, "data": {"n": "other"}}, timeout=10).raise_for_status()
    browser.eval(f"const f = document.getElementById('filter'); f.value = '{token}'; "
                 "f.dispatchEvent(new Event('input')); 1")
    browser.wait_for("[...document.querySelectorAll('#messages tbody tr')].length === 1",
                     what="the filter to leave one message")
    assert browser.eval(f"document.querySelector('#messages tbody tr').dataset.id") == message_id

    # The upstream button sends an upstream message as the device (the prompt answered by the test).
    browser.eval("window.prompt = () => 'greeting=hi, n=2'; 1")
    browser.eval(f"[...document.querySelectorAll('#devices tr[data-token=\"{token}\"] button')]"
                 ".find(b => b.textContent === 'upstream…').click(); 1")
    deadline = time.monotonic() + 10
    while not mock.upstream(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    ups = mock.upstream(token)
    assert len(ups) == 1 and ups[0]["data"] == {"greeting": "hi", "n": "2"}, ups

    # The offline button changes the device for real.
    assert mock.device(token)["online"] is True
    browser.eval(f"document.querySelector('#devices tr[data-token=\"{token}\"] button.toggle').click(); 1")
    deadline = time.monotonic() + 10
    while mock.device(token)["online"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mock.device(token)["online"] is False
    browser.wait_for(f"document.querySelector('#devices tr[data-token=\"{token}\"] button.toggle').textContent === 'bring online'",
                     what="the device row to show the device offline")
