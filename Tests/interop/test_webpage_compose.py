"""The web page's compose form (compose.js) in headless Chromium: the form is filled through the
DOM and sent with its button; the answer it shows must be the one the server gave (checked
against the message record through the control API) and the device must have the message.

Covers a legacy send to a device with the project's own server key, an HTTP v1 send to a topic
with an access token the page mints through the control API, a v1 400 (Google's BadRequest
body shown), and hostile data values that must stay text. On failure a screenshot is saved
under .build/interop-screenshots/.
"""

import json
import time
import uuid

import pytest

from conftest import _serve
from mocksupport import PROJECT_A, SENDER_A

SECRET = "compose-secret"
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>']


def js(value):
    """A JavaScript literal for a Python value (strings with quotes and markup included)."""
    return json.dumps(value)


def open_compose(mock, browser, query=""):
    browser.command("Emulation.setDeviceMetricsOverride",
                    {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    browser.command("Page.navigate", {"url": mock.base_url + "/" + query})
    browser.wait_for("!!document.getElementById('compose-toggle')", what="the compose button")
    browser.eval("window.__alerted = false; window.alert = () => { window.__alerted = true; }; 1")
    browser.eval("document.getElementById('compose-toggle').click(); 1")
    browser.wait_for("!document.getElementById('compose').hidden && "
                     f"[...document.getElementById('compose-project').options].some(o => o.value === {js(SENDER_A)})",
                     what="the compose form with the projects")


def fill(browser, protocol, kind, target, data=(), title="", body="", platform=None):
    """Fills the form as a user would (values set, change events fired) and presses send."""
    platform = platform or {}
    script = f"""{{
      const set = (id, v) => {{ const e = document.getElementById(id); e.value = v;
                               e.dispatchEvent(new Event('input')); e.dispatchEvent(new Event('change')); }};
      set('compose-protocol', {js(protocol)});
      set('compose-project', {js(SENDER_A)});
      set('compose-kind', {js(kind)});
      set('compose-target', {js(target)});
      set('compose-title', {js(title)});
      set('compose-body', {js(body)});
      for (const name of ['android', 'apns', 'webpush']) {{
        const box = document.getElementById('compose-' + name);
        if (box) set('compose-' + name, ({js(platform)})[name] || '');
      }}
      const pairs = {js([list(p) for p in data])};
      const list = document.getElementById('compose-data');
      list.textContent = '';
      for (const [k, v] of pairs) {{
        document.querySelector('#compose .compose-add').click();
        const rows = list.querySelectorAll('.compose-kv');
        const row = rows[rows.length - 1];
        row.querySelector('.compose-k').value = k;
        row.querySelector('.compose-v').value = v;
      }}
      document.getElementById('compose-answer').textContent = '';
      document.getElementById('compose-send').click();
    }} 1"""
    browser.eval(script)
    browser.wait_for("!!document.getElementById('compose-raw') || "
                     "document.getElementById('compose-problem').textContent !== ''",
                     what="the answer to be shown")
    problem = browser.eval("document.getElementById('compose-problem').textContent")
    assert problem == "", problem
    return {
        "status": browser.eval("document.getElementById('compose-status').textContent"),
        "type": browser.eval("document.getElementById('compose-type').textContent"),
        "raw": browser.eval("document.getElementById('compose-raw').textContent"),
        "pretty": browser.eval("(document.getElementById('compose-pretty') || {}).textContent"),
    }


def test_legacy_send_to_a_device_shows_the_answer(mock, browser):
    token = mock.create_device()
    open_compose(mock, browser)
    # The project's devices are offered for the target.
    browser.wait_for(f"[...document.querySelectorAll('#compose-devices option')].some(o => o.value === {js(token)})",
                     what="the device among the target's suggestions")
    marker = "legacy-" + uuid.uuid4().hex[:10]
    shown = fill(browser, "legacy", "token", token, data=[("marker", marker), ("html", HOSTILE[0]), ("attr", HOSTILE[1])],
                 title="Hello", body=HOSTILE[1])
    assert shown["status"] == "HTTP 200 OK", shown
    assert shown["type"] == "Content-Type: application/json; charset=UTF-8", shown
    answer = json.loads(shown["raw"])
    assert answer["success"] == 1 and answer["failure"] == 0, answer
    message_id = answer["results"][0]["message_id"]
    # Pretty-printed without a detour through floating point: the multicast id keeps its digits.
    assert json.loads(shown["pretty"]) == answer and '\n  "multicast_id": ' in shown["pretty"], shown
    assert f'"multicast_id": {answer["multicast_id"]},' in shown["pretty"], shown

    # What the server recorded is what the page sent, and the device has it.
    record = mock.message(message_id)
    assert record["message_id"] == message_id, record
    assert record["transport"] == "http" and record["data"] == {"marker": marker, "html": HOSTILE[0], "attr": HOSTILE[1]}, record
    inbox = mock.wait_inbox(token)
    assert [e["message_id"] for e in inbox] == [message_id]
    assert inbox[0]["data"]["marker"] == marker and inbox[0]["notification"]["body"] == HOSTILE[1], inbox[0]

    # The request shown masks the server key; hostile strings are text, nothing ran.
    request_text = browser.eval("document.querySelector('#compose .compose-request').textContent")
    assert "Authorization: key=AAAAinte…" in request_text and "project-a-server-key" not in request_text, request_text
    assert HOSTILE[0] in request_text and HOSTILE[1] in request_text
    assert browser.eval("document.querySelectorAll('#compose script, #compose img').length") == 0
    time.sleep(0.3)
    assert browser.eval("window.__alerted") is False


def test_v1_send_to_a_topic_with_a_minted_token(mock, browser):
    token = mock.create_device()
    topic = "compose-" + uuid.uuid4().hex[:8]
    mock.subscribe(token, topic)
    open_compose(mock, browser)
    marker = "v1-" + uuid.uuid4().hex[:10]
    shown = fill(browser, "v1", "topic", topic, data=[("marker", marker), ("html", HOSTILE[0])],
                 title="Topic news", body="v1 body", platform={"android": '{"priority": "high", "ttl": "60s"}'})
    assert shown["status"] == "HTTP 200 OK", shown
    assert shown["type"] == "Content-Type: application/json; charset=UTF-8", shown
    name = json.loads(shown["raw"])["name"]
    assert name.startswith(f"projects/{PROJECT_A}/messages/"), name
    record = mock.v1_record(name)
    assert record["target"] == {"kind": "topic", "value": "/topics/" + topic}, record
    assert record["android"] == {"priority": "high", "ttl": "60s"}, record
    assert shown["raw"] == json.dumps({"name": record["v1_name"]}, separators=(",", ":")), shown

    inbox = mock.wait_inbox(token)
    assert len(inbox) == 1 and inbox[0]["via"]["transport"] == "http_v1", inbox
    assert inbox[0]["effective"]["data"] == {"marker": marker, "html": HOSTILE[0]}, inbox[0]
    assert inbox[0]["effective"]["priority"] == "high", inbox[0]

    # The page's token is one the control API minted for the project, listed with the others.
    minted = mock.api("GET", "/api/v1/access-tokens")["items"]
    assert any(t["project_id"] == PROJECT_A for t in minted), minted
    request_text = browser.eval("document.querySelector('#compose .compose-request').textContent")
    assert "Authorization: Bearer ya29.moc…" in request_text, request_text

    # The page keeps its token for the hour; revoked (or gone after a reset), it mints another.
    for t in minted:
        mock.api("DELETE", f"/api/v1/access-tokens/{t['id']}", expect=204)
    shown = fill(browser, "v1", "topic", topic, data=[("again", "1")])
    assert shown["status"] == "HTTP 200 OK", shown
    assert len(mock.wait_inbox(token, count=2)) == 2
    assert browser.eval("document.querySelectorAll('#compose script, #compose img').length") == 0
    assert browser.eval("window.__alerted") is False


def test_v1_errors_show_googles_body(mock, browser):
    token = mock.create_device()
    open_compose(mock, browser)

    # Not JSON at all: the page refuses before sending anything.
    before = len(mock.messages(transport="http_v1"))
    browser.eval("document.getElementById('compose-answer').textContent = ''; 1")
    browser.eval(f"""{{
      const set = (id, v) => {{ const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('change')); }};
      set('compose-protocol', 'v1'); set('compose-project', {js(SENDER_A)}); set('compose-kind', 'token');
      set('compose-target', {js(token)}); set('compose-android', '{{"ttl": ');
      document.getElementById('compose-send').click(); }} 1""")
    browser.wait_for("document.getElementById('compose-problem').textContent.includes('android')",
                     what="the page to refuse android JSON that does not parse")
    assert browser.eval("document.getElementById('compose-android').getAttribute('aria-invalid')") == "true"
    assert browser.eval("document.getElementById('compose-answer').textContent") == ""
    assert len(mock.messages(transport="http_v1")) == before

    # Valid JSON the server refuses: Google's error body as the server sent it.
    shown = fill(browser, "v1", "token", token, data=[("k", "v")], platform={"android": '{"ttl": "abc"}'})
    assert shown["status"] == "HTTP 400 Bad Request", shown
    assert shown["type"] == "Content-Type: application/json; charset=UTF-8", shown
    error = json.loads(shown["raw"])["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT", error
    assert any(v.get("field", "").startswith("message.android.ttl")
               for d in error.get("details", []) for v in d.get("fieldViolations", [])), error
    assert json.loads(shown["pretty"]) == {"error": error} and '\n    "status": "INVALID_ARGUMENT",' in shown["pretty"], shown
    # The server's record of that refusal: the body the page sent, the status it answered.
    rejected = [m for m in mock.messages(transport="http_v1", status="rejected") if '"abc"' in m.get("raw_body", "")]
    assert len(rejected) == 1, rejected
    assert rejected[0]["http_status"] == 400 and rejected[0]["error"] == "INVALID_ARGUMENT", rejected[0]
    assert json.loads(rejected[0]["raw_body"])["message"]["android"] == {"ttl": "abc"}, rejected[0]

    # A credential the server does not know: its 401, shown the same way.
    browser.eval("document.getElementById('compose-auth').value = 'Bearer ya29.not-a-token'; 1")
    shown = fill(browser, "v1", "token", token, data=[("k", "v")])
    assert shown["status"] == "HTTP 401 Unauthorized", shown
    assert json.loads(shown["raw"])["error"]["status"] == "UNAUTHENTICATED", shown
    assert mock.inbox(token) == []


@pytest.fixture(scope="module")
def guarded_mock(tmp_path_factory):
    yield from _serve(tmp_path_factory, ("--control-token", SECRET))


def test_compose_with_a_control_token(guarded_mock, browser):
    """With --control-token the page (opened as /?token=SECRET) mints its access token with it."""
    mock = guarded_mock
    mock.http.headers["Authorization"] = "Bearer " + SECRET
    token = mock.create_device()
    open_compose(mock, browser, query="?token=" + SECRET)
    shown = fill(browser, "v1", "token", token, data=[("k", HOSTILE[1])])
    assert shown["status"] == "HTTP 200 OK", shown
    inbox = mock.wait_inbox(token)
    assert [e["via"]["transport"] for e in inbox] == ["http_v1"] and inbox[0]["data"] == {"k": HOSTILE[1]}, inbox
    # Without the control token the control API refuses to mint one.
    r = mock.http.post(mock.base_url + f"/api/v1/projects/{PROJECT_A}/access-tokens", headers={"Authorization": None}, timeout=10)
    assert r.status_code == 401, r.text
