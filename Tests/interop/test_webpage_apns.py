"""APNs sends on the web page, in headless Chromium at 1440x900 and 390x844, light and dark.

Real sends over Apple's provider API (h2c with prior knowledge on the plain port, httpx with h2,
provider tokens signed by PyJWT with a key the mock made) to an iOS device, and one FCM send
beside them; then the page must show each as FCM sends are shown: its list line (transport
"APNs", the device's APNs token shortened with the whole of it on hover, `title — body` from
`aps.alert` or what kind of push it is), the `transport:apns` chip against the API's own answer,
the detail's tabs (Apple's headers and the payload, the status with `apns-id` and the reason, the
key that signed the provider token), the iOS banner in Previews, and the device pane's APNs
token and environment; every visible text keeps its contrast. A failing test saves a
screenshot in .build/interop-screenshots/.
"""

import json
import ssl
import time
import urllib.parse
import uuid

import httpx
import jwt
import pytest

from mocksupport import APP_A_IOS
from scanpage import (DESKTOP, HOSTILE, PHONE, assert_markup_stays_text, assert_readable, assert_rows_fit,
                      chip, chip_finds_what_the_api_does, detail_facts as facts, js, open_detail, open_page,
                      row_cells, send, set_scheme, wait_rows)

TEAM = "PAGETEAM01"
SIZES = {"desktop": DESKTOP, "phone": PHONE}
COMBOS = [(size, scheme) for size in SIZES for scheme in ("light", "dark")]
GOAL = {"aps": {"alert": {"title": "Goal", "subtitle": "Second half", "body": "3-1"}, "badge": 3, "sound": "chime.caf"},
        "match": 7}


# One browser for the module (conftest's `page`); a failing test saves a screenshot.
pytestmark = pytest.mark.usefixtures("page_shots")


def short(text, n=40):
    """The page's shortening: the start and the end, an ellipsis between."""
    import math
    return text if len(text) <= n else text[:math.ceil(n * 0.6)] + "…" + text[-math.floor(n * 0.4):]


# An APNs token no device has.
STRANGER = "5ca1ab1e" * 8


def apns_post(client, mock, key, apns_token, headers, payload):
    """One send over h2c to `apns_token`, its provider token signed with `key`."""
    provider = jwt.encode({"iss": TEAM, "iat": int(time.time())}, key["private_key_pem"], algorithm="ES256",
                          headers={"kid": key["key_id"]})
    h = {"authorization": "bearer " + provider, "apns-topic": APP_A_IOS}
    h.update(headers)
    r = client.post(f"{mock.base_url}/3/device/{apns_token}", headers=h, content=json.dumps(payload).encode())
    assert r.http_version == "HTTP/2"
    return r


@pytest.fixture(scope="module")
def sent(mock):
    """An iOS device, a key of its app's team, and five APNs sends (four accepted, one
    refused) plus one legacy FCM send; what the tests look for."""
    key = mock.api("POST", "/api/v1/apns/keys", expect=201, json={"team_id": TEAM, "bundle_ids": [APP_A_IOS]})
    fcm = mock.create_device(platform="ios", app=APP_A_IOS)
    device = mock.device(fcm)
    client = httpx.Client(http1=False, http2=True, trust_env=False, timeout=20)

    def post(headers, payload):
        return apns_post(client, mock, key, device["apns_token"], headers, payload)

    goal_id = str(uuid.uuid4())
    with client:
        r = post({"apns-id": goal_id, "apns-collapse-id": "score", "apns-priority": "10"}, GOAL)
        assert (r.status_code, r.headers["apns-id"]) == (200, goal_id), r.text
        assert post({}, {"aps": {"alert": "Doors open at eight"}}).status_code == 200
        assert post({}, {"aps": {"alert": {"loc-key": "GAME_PLAY", "loc-args": ["Ann"]}}}).status_code == 200
        assert post({"apns-push-type": "background", "apns-priority": "5"}, {"aps": {"content-available": 1}, "sync": "inbox"}).status_code == 200
        refused = post({"apns-push-type": "banner"}, {"aps": {"alert": "never"}})
        assert (refused.status_code, refused.content) == (400, b'{"reason":"InvalidPushType"}')
        # Refused at its headers, before a device is looked for: the token as sent is kept.
        stranger = apns_post(client, mock, key, STRANGER, {"apns-push-type": "banner"}, {"aps": {"alert": "never"}})
        assert stranger.status_code == 400
    assert send(mock, {"to": mock.create_device(), "notification": {"title": "From FCM", "body": "legacy"}}).status_code == 200
    records = mock.api("GET", "/api/v1/messages?transport=apns&limit=10")["items"]
    assert [m["status"] for m in records] == ["rejected", "rejected", "accepted", "accepted", "accepted", "accepted"]
    assert records[0]["target"] == {"kind": "apns_token", "value": STRANGER}
    ids = [m["message_id"] for m in records]
    return {"key": key, "fcm": fcm, "apns_token": device["apns_token"], "goal_apns_id": goal_id, "stranger": ids[0],
            "refused": ids[1], "silent": ids[2], "loc": ids[3], "string": ids[4], "goal": ids[5]}


@pytest.mark.parametrize("size,scheme", COMBOS)
def test_list_lines_of_apns_sends(mock, sent, page, size, scheme):
    set_scheme(page, scheme, SIZES[size])
    open_page(page, mock.base_url + "/")
    # The APNs token replaces the record's FCM token once the device is read.
    for which in ("goal", "refused"):
        page.wait_for(f"!!document.querySelector('#messages tr[data-id={js(sent[which])}] td.target[data-apns-token]')",
                      what=f"the APNs token in the {which} send's target cell")
    got = {k: {n: v for n, v in r.items() if n != 'what_class'} for k, r in row_cells(page).items()}
    token = sent["apns_token"]
    assert got[sent["goal"]] == {"via": "APNs", "target": short(token), "full": token, "what": "Goal · Second half — 3-1",
                                 "recip": "1 delivered", "mark": "✓"}
    assert got[sent["string"]]["what"] == "Doors open at eight"
    assert got[sent["loc"]]["what"] == "loc GAME_PLAY(Ann)"
    assert got[sent["silent"]]["what"] == "silent (content-available)"
    refused = got[sent["refused"]]
    # A refused send names its device too (its record keeps the device's FCM token).
    assert (refused["via"], refused["mark"], refused["recip"], refused["target"]) == ("APNs", "✕", "InvalidPushType", short(token))
    stranger = got[sent["stranger"]]
    assert (stranger["mark"], stranger["target"], stranger["full"]) == ("✕", short(STRANGER), STRANGER + " (no device has this APNs token)")
    assert [r["via"] for r in got.values()].count("legacy") == 1
    # One line each (two on a phone), no sideways scrolling, every text readable.
    assert_rows_fit(page, size == "phone")


@pytest.mark.parametrize("size", SIZES)
def test_transport_apns_chip(mock, sent, page, size):
    set_scheme(page, "light", SIZES[size])
    open_page(page, mock.base_url + "/")
    assert len(chip_finds_what_the_api_does(page, mock, "transport:apns", "transport", "apns")) == 6
    assert set(page.eval("[...document.querySelectorAll('#messages td.via')].map(t => t.textContent)")) == {"APNs"}
    # Excluded: everything else.
    page.click("#chips li[data-name=transport] .chip-remove")
    page.wait_for("document.querySelectorAll('#chips li').length === 0", what="the chip to go")
    chip(page, "-transport:apns")
    wait_rows(page, [m["message_id"] for m in mock.api("GET", "/api/v1/messages?not_transport=apns&limit=50")["items"]],
              "everything but APNs")
    assert "APNs" not in page.eval("[...document.querySelectorAll('#messages td.via')].map(t => t.textContent)")


@pytest.mark.parametrize("size,scheme", COMBOS)
def test_detail_tabs_and_preview_of_an_apns_send(mock, sent, page, size, scheme):
    set_scheme(page, scheme, SIZES[size])
    open_detail(page, mock.base_url, sent["goal"])
    record = mock.api("GET", "/api/v1/messages/" + urllib.parse.quote(sent["goal"], safe=""))
    headers = record["apns"]["headers"]
    page.wait_for("[...document.querySelectorAll('#detail dt')].some(dt => dt.textContent === 'APNs device token')",
                  what="the APNs token in the summary")
    summary = dict(facts(page, "Summary"))
    assert summary["transport"] == "APNs (Apple's provider API)"
    assert summary["target"] == sent["fcm"]
    assert summary["APNs device token"] == sent["apns_token"]
    assert summary["APNs environment"] == "sandbox"
    assert summary["authorized by"] == "provider token, key " + sent["key"]["key_id"]
    assert summary["status"] == "accepted"
    assert_readable(page)

    page.click("#detail .detail-tabs button[data-tab=Request]")
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(headers["apns-expiration"])))
    assert facts(page, "Request")[:6] == [
        ["apns-push-type", "alert"], ["apns-topic", APP_A_IOS], ["apns-priority", "10"],
        ["apns-expiration", headers["apns-expiration"] + " (" + expiry + ")"], ["apns-collapse-id", "score"],
        ["apns-id", sent["goal_apns_id"]]]
    assert dict(facts(page, "Request")[6:])["authorization"].startswith("bearer eyJ")
    shown = page.eval("document.querySelector('#detail .tab-panel[data-tab=Request] pre.body').textContent")
    assert json.loads(shown) == GOAL
    assert_readable(page)

    page.click("#detail .detail-tabs button[data-tab=Answer]")
    assert facts(page, "Answer") == [["status", "200"], ["apns-id", sent["goal_apns_id"]], ["reason", "none: accepted (200 has no body)"]]

    page.click("#detail .detail-tabs button[data-tab=Previews]")
    page.wait_for("!!document.querySelector('#detail .pv-card.pv-ios')", what="the iOS banner")
    card = page.eval("""(() => { const c = document.querySelector('#detail .pv-card.pv-ios'); const t = s => (c.querySelector(s) || {}).textContent;
        return {title: t('.pv-title'), subtitle: t('.pv-subtitle'), body: t('.pv-body'), badge: t('.pv-badge'),
                sound: t('.pv-sound'), status: t('.pv-status'), data: t('.pv-data')}; })()""")
    assert card == {"title": "Goal", "subtitle": "Second half", "body": "3-1", "badge": "3", "sound": "chime.caf",
                    "status": "delivered", "data": "match7"}, card
    assert_readable(page)


def test_detail_of_a_refused_apns_send(mock, sent, page):
    set_scheme(page, "light", DESKTOP)
    open_detail(page, mock.base_url, sent["refused"])
    summary = dict(facts(page, "Summary"))
    assert (summary["status"], summary["error"], summary["http status"]) == ("rejected", "InvalidPushType", "400")
    page.click("#detail .detail-tabs button[data-tab=Request]")
    text = page.eval("document.querySelector('#detail .tab-panel[data-tab=Request]').textContent")
    assert "not kept: the send was refused" in text and '"alert": "never"' in text, text
    page.click("#detail .detail-tabs button[data-tab=Answer]")
    assert facts(page, "Answer") == [["status", "400"], ["reason", "InvalidPushType"], ["content type", "application/json"]]
    assert page.eval("document.querySelector('#detail .tab-panel[data-tab=Answer] pre').textContent") == \
        '{\n  "reason": "InvalidPushType"\n}'


@pytest.mark.parametrize("size", SIZES)
def test_device_pane_shows_the_apns_token(mock, sent, page, size):
    set_scheme(page, "dark", SIZES[size])
    page.command("Page.navigate", {"url": mock.base_url + "/#device=" + urllib.parse.quote(sent["fcm"], safe="")})
    page.wait_for("!!document.querySelector('#device-view .pv-apns-token')", what="the APNs token")
    assert page.eval("document.querySelector('#device-view .pv-apns-token').textContent") == sent["apns_token"]
    assert page.eval("document.querySelector('#device-view .pv-apns .pv-meta').textContent") == "APNs sandbox"
    assert page.visible("#device-view .pv-apns-token")
    # The inbox's newest entries are the APNs sends, as the phone shows them.
    page.wait_for("document.querySelectorAll('#device-view .pv-screen .pv-card').length === 4", what="four cards")
    assert page.eval("document.querySelector('#device-view .pv-screen .pv-card').dataset.kind") == "data"
    assert_readable(page)


def test_hostile_text_stays_text(mock, sent, page):
    """An alert whose title and body are markup: text in the list, the detail and the banner."""
    body = "<script>alert(2)</script>"
    with httpx.Client(http1=False, http2=True, trust_env=False, timeout=20) as client:
        r = apns_post(client, mock, sent["key"], sent["apns_token"], {}, {"aps": {"alert": {"title": HOSTILE, "body": body}}})
    assert r.status_code == 200, r.text
    hostile = mock.api("GET", "/api/v1/messages?transport=apns&limit=1")["items"][0]["message_id"]
    payload = assert_markup_stays_text(page, mock.base_url, hostile, HOSTILE + " — " + body, ".pv-card.pv-ios")
    assert json.loads(payload)["aps"]["alert"] == {"title": HOSTILE, "body": body}


def test_a_send_authorized_by_a_client_certificate(mock_https, page, tmp_path):
    """Over TLS with a client certificate the mock issued and no provider token: the Summary
    names the certificate."""
    mock = mock_https
    cert = mock.api("POST", "/api/v1/apns/certificates", expect=201, json={"bundle_id": APP_A_IOS})
    pem = tmp_path / "client.pem"
    pem.write_text(cert["certificate_pem"] + cert["private_key_pem"])
    tls = ssl.create_default_context(cafile=mock.api("GET", "/api/v1/health")["tls_ca"])
    tls.load_cert_chain(str(pem))
    apns_token = mock.device(mock.create_device(platform="ios", app=APP_A_IOS))["apns_token"]
    with httpx.Client(http1=False, http2=True, trust_env=False, timeout=20, verify=tls) as client:
        r = client.post(f"https://127.0.0.1:{mock.https_port}/3/device/{apns_token}", headers={"apns-topic": APP_A_IOS},
                        content=b'{"aps":{"alert":"by certificate"}}')
    assert (r.http_version, r.status_code) == ("HTTP/2", 200), r.text
    record = mock.api("GET", "/api/v1/messages?transport=apns&limit=1")["items"][0]
    assert record["apns"]["certificate_id"] == cert["id"]
    set_scheme(page, "light", DESKTOP)
    open_detail(page, mock.base_url, record["message_id"])
    assert dict(facts(page, "Summary"))["authorized by"] == "client certificate " + cert["id"]


def test_a_payload_that_is_not_a_json_object(mock, sent, page):
    """Accepted (200, as Apple does) and undeliverable: the list line says why, the Request tab
    shows the body as sent (markup kept as text), Previews and the device view a card saying so."""
    body = "<b>not json</b> at all"
    provider = jwt.encode({"iss": TEAM, "iat": int(time.time())}, sent["key"]["private_key_pem"], algorithm="ES256",
                          headers={"kid": sent["key"]["key_id"]})
    with httpx.Client(http1=False, http2=True, trust_env=False, timeout=20) as client:
        r = client.post(f"{mock.base_url}/3/device/{sent['apns_token']}", content=body.encode(),
                        headers={"authorization": "bearer " + provider, "apns-topic": APP_A_IOS})
    assert (r.status_code, r.content) == (200, b""), r.text
    record = mock.api("GET", "/api/v1/messages?transport=apns&limit=1")["items"][0]
    assert record["error_detail"] == "undeliverable: payload is not a JSON object"
    assert [p["status"] for p in record["recipients"]] == ["undeliverable"]
    assert (record["apns"]["payload"], record["apns"]["raw_body"]) == (None, body)
    entry = mock.api("GET", f"/api/v1/devices/{sent['fcm']}/messages?order=newest&limit=1")["items"][0]
    assert (entry["status"], entry["error_detail"]) == ("undeliverable", record["error_detail"])
    assert (entry["effective"]["apns"]["payload"], entry["effective"]["apns"]["raw_body"]) == (None, body)

    set_scheme(page, "light", DESKTOP)
    open_page(page, mock.base_url + "/")
    page.wait_for(f"!!document.querySelector('#messages tr[data-id={js(record['message_id'])}]')", what="the send's line")
    line = row_cells(page)[record["message_id"]]
    assert (line["what"], line["mark"], line["recip"]) == (record["error_detail"], "!", "1 undeliverable"), line
    open_detail(page, mock.base_url, record["message_id"])
    page.click("#detail .detail-tabs button[data-tab=Request]")
    assert "payload as sent (not a JSON object: undeliverable)" in \
        page.eval("document.querySelector('#detail .tab-panel[data-tab=Request]').textContent")
    assert page.eval("document.querySelector('#detail .tab-panel[data-tab=Request] pre.body').textContent") == body
    page.click("#detail .detail-tabs button[data-tab=Previews]")
    page.wait_for("!!document.querySelector('#detail .pv-card.pv-kind-undeliverable')", what="the undeliverable card")
    assert page.eval("document.querySelector('#detail .pv-card.pv-kind-undeliverable .pv-body').textContent") == body
    assert page.eval("document.querySelectorAll('#detail b, #messages b').length") == 0
    assert_readable(page)
