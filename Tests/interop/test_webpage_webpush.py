"""Web Push pushes on the web page, in headless Chromium at 1440x900 and 390x844, light and dark.

Real pushes to a web device's subscription (`POST` its endpoint on the plain port), each body
encrypted here as a site's server does it (RFC 8291 `aes128gcm` with the `cryptography` package:
ECDH P-256, HKDF-SHA-256, AES-128-GCM, RFC 8188's record) and signed with VAPID (RFC 8292, an
ES256 JWT by PyJWT); one encrypted for the wrong auth secret, which the mock takes (201) and
marks undecryptable. The page must show each as FCM sends are shown: its list line (transport
"Web Push", the device, `title — body` from the plaintext JSON, else the plaintext's start,
else "undecryptable: why" marked as a failure), the `transport:webpush` chip against the API's
answer, the detail (headers, VAPID subject and key, content encoding, ciphertext size, the
plaintext) and the browser-notification preview; every visible text keeps its contrast. A
failing test saves a screenshot in .build/interop-screenshots/.
"""

import base64
import json
import os
import time
import urllib.parse

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from scanpage import (DESKTOP, HOSTILE, PHONE, assert_markup_stays_text, assert_readable, assert_rows_fit,
                      chip, chip_finds_what_the_api_does, detail_facts as facts, js, open_detail, open_page,
                      row_cells, set_scheme, wait_rows)

# One browser for the module (conftest's `page`); a failing test saves a screenshot.
pytestmark = pytest.mark.usefixtures("page_shots")

SIZES = {"desktop": DESKTOP, "phone": PHONE}
COMBOS = [(size, scheme) for size in SIZES for scheme in ("light", "dark")]
SUBJECT = "mailto:ops@shop.example"
NOTICE = {"title": "Order shipped", "body": "Your hats are on their way", "data": {"order": 42}}


def b64u(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64u(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hkdf(salt, info, length, ikm):
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def encrypt(subscription, plaintext, auth=None):
    """RFC 8291's `aes128gcm` body for the subscription's keys: one record, padding delimiter 2.
    `auth` replaces the subscription's auth secret (a body the browser could not decrypt)."""
    ua_public = unb64u(subscription["keys"]["p256dh"])
    secret = auth if auth is not None else unb64u(subscription["keys"]["auth"])
    sender = ec.generate_private_key(ec.SECP256R1())
    as_public = sender.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    shared = sender.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), ua_public))
    ikm = hkdf(secret, b"WebPush: info\x00" + ua_public + as_public, 32, shared)
    salt = os.urandom(16)
    cek = hkdf(salt, b"Content-Encoding: aes128gcm\x00", 16, ikm)
    nonce = hkdf(salt, b"Content-Encoding: nonce\x00", 12, ikm)
    record = AESGCM(cek).encrypt(nonce, plaintext + b"\x02", None)
    return salt + (4096).to_bytes(4, "big") + bytes([len(as_public)]) + as_public + record


class Site:
    """A site's push server: its VAPID key pair, signing for one endpoint's origin."""

    def __init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.public = b64u(self.key.public_key().public_bytes(serialization.Encoding.X962,
                                                              serialization.PublicFormat.UncompressedPoint))

    def push(self, endpoint, body, headers=None):
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(endpoint))
        token = jwt.encode({"aud": origin, "exp": int(time.time()) + 3600, "sub": SUBJECT}, self.key, algorithm="ES256")
        h = {"TTL": "60", "Content-Encoding": "aes128gcm", "Authorization": f"vapid t={token}, k={self.public}"}
        h.update(headers or {})
        return requests.post(endpoint, data=body, headers=h, timeout=10)


@pytest.fixture(scope="module")
def sent(mock):
    """A web device, and four pushes to it: a notification, plain text, one for the wrong auth
    secret, and one refused for its TTL; what the tests look for."""
    token = mock.create_device(platform="web")
    subscription = mock.device(token)["web_push"]
    site = Site()
    endpoint = subscription["endpoint"]
    assert endpoint.startswith(mock.base_url + "/wp/"), endpoint
    ids = {}
    for name, body, headers in [
            ("notice", encrypt(subscription, json.dumps(NOTICE).encode()), {"Urgency": "high", "Topic": "orders"}),
            ("text", encrypt(subscription, b"ping\nfrom the shop"), {}),
            ("wrong", encrypt(subscription, b'{"title":"never shown"}', auth=os.urandom(16)), {})]:
        r = site.push(endpoint, body, headers)
        assert r.status_code == 201, r.text
        ids[name] = urllib.parse.unquote(r.headers["Location"].rsplit("/m/", 1)[1])
    refused = site.push(endpoint, encrypt(subscription, b"x"), {"TTL": "soon"})
    assert refused.status_code == 400, refused.text
    records = mock.api("GET", "/api/v1/messages?transport=webpush&limit=10")["items"]
    assert [m["status"] for m in records] == ["rejected", "accepted", "accepted", "accepted"]
    assert [m["recipients"][0]["message_id"] for m in records[1:]] == [ids["wrong"], ids["text"], ids["notice"]]
    return {"token": token, "site": site, "subscription": subscription, "refused": records[0]["message_id"],
            "notice": records[3]["message_id"], "text": records[2]["message_id"], "wrong": records[1]["message_id"],
            "notice_record": records[3]}


@pytest.mark.parametrize("size,scheme", COMBOS)
def test_list_lines_of_pushes(mock, sent, page, size, scheme):
    set_scheme(page, scheme, SIZES[size])
    open_page(page, mock.base_url + "/")
    got = row_cells(page)
    notice = got[sent["notice"]]
    assert (notice["via"], notice["full"], notice["what"], notice["recip"], notice["mark"]) == \
        ("Web Push", sent["token"], "Order shipped — Your hats are on their way", "1 delivered", "✓")
    assert got[sent["text"]]["what"] == "ping from the shop"
    wrong = got[sent["wrong"]]
    assert wrong["what"].startswith("undecryptable: ") and len(wrong["what"]) > len("undecryptable: ") + 10, wrong
    assert "undecryptable" in wrong["what_class"].split()
    assert (wrong["recip"], wrong["mark"]) == ("1 undecryptable", "!")
    refused = got[sent["refused"]]
    assert (refused["via"], refused["mark"], refused["recip"]) == ("Web Push", "✕", "invalidTTL")
    # The transport's name is whole, not cut with an ellipsis.
    assert page.eval("[...document.querySelectorAll('#messages td.via')].every(td => td.scrollWidth <= td.clientWidth)")
    # One line each (two on a phone; the newest row is the refused one, in smaller type).
    line = page.eval(f"parseFloat(getComputedStyle(document.querySelector('#messages tr[data-id={js(sent['notice'])}] td.what')).lineHeight)")
    assert_rows_fit(page, size == "phone", line)


@pytest.mark.parametrize("size", SIZES)
def test_transport_webpush_chip(mock, sent, page, size):
    set_scheme(page, "dark", SIZES[size])
    open_page(page, mock.base_url + "/")
    assert len(chip_finds_what_the_api_does(page, mock, "transport:webpush", "transport", "webpush")) == 4
    # The undecryptable one by its status.
    chip(page, "status:undecryptable")
    wait_rows(page, [sent["wrong"]], "the undecryptable push")


@pytest.mark.parametrize("size,scheme", COMBOS)
def test_detail_and_preview_of_a_push(mock, sent, page, size, scheme):
    set_scheme(page, scheme, SIZES[size])
    open_detail(page, mock.base_url, sent["notice"])
    summary = dict(facts(page, "Summary"))
    assert summary["transport"] == "Web Push (RFC 8030)"
    assert (summary["VAPID subject"], summary["decrypted"], summary["target"]) == (SUBJECT, "yes", sent["token"])
    page.click("#detail .detail-tabs button[data-tab=Request]")
    webpush = sent["notice_record"]["webpush"]
    got = facts(page, "Request")
    assert got[:8] == [["TTL", "60"], ["Urgency", "high"], ["Topic", "orders"],
                       ["subject", SUBJECT], ["key", sent["site"].public], ["scheme", "vapid"],
                       ["content encoding", "aes128gcm"], ["ciphertext", f"{webpush['ciphertext_bytes']} bytes"]], got
    # 16 salt + 4 rs + 1 + 65 key id + the record (plaintext, delimiter, 16-byte tag).
    assert webpush["ciphertext_bytes"] == 86 + len(json.dumps(NOTICE)) + 1 + 16
    plain = page.eval("document.querySelector('#detail .tab-panel[data-tab=Request] pre.plaintext').textContent")
    assert json.loads(plain) == NOTICE
    assert_readable(page)
    page.click("#detail .detail-tabs button[data-tab=Answer]")
    assert dict(facts(page, "Answer"))["status"] == "201"
    page.click("#detail .detail-tabs button[data-tab=Previews]")
    page.wait_for("!!document.querySelector('#detail .pv-card.pv-web')", what="the browser notification")
    card = page.eval("""(() => { const c = document.querySelector('#detail .pv-card.pv-web'); const t = s => (c.querySelector(s) || {}).textContent;
        return {kind: c.dataset.kind, title: t('.pv-title'), body: t('.pv-body'), status: t('.pv-status')}; })()""")
    assert card == {"kind": "notification", "title": "Order shipped", "body": "Your hats are on their way", "status": "delivered"}, card
    assert_readable(page)


def test_detail_of_an_undecryptable_push(mock, sent, page):
    set_scheme(page, "light", DESKTOP)
    record = mock.api("GET", "/api/v1/messages/" + urllib.parse.quote(sent["wrong"], safe=""))
    reason = record["webpush"]["decrypt_error"]
    assert reason and record["webpush"]["plaintext"] is None
    open_detail(page, mock.base_url, sent["wrong"])
    assert dict(facts(page, "Summary"))["decrypted"] == "no: " + reason
    page.click("#detail .detail-tabs button[data-tab=Request]")
    assert page.eval("document.querySelector('#detail .tab-panel[data-tab=Request] p.undecryptable').textContent") == \
        "undecryptable: " + reason
    assert page.eval("document.querySelector('#detail .tab-panel[data-tab=Request] pre.ciphertext').textContent") == \
        record["webpush"]["ciphertext_base64"]
    page.click("#detail .detail-tabs button[data-tab=Previews]")
    page.wait_for("!!document.querySelector('#detail .pv-card')", what="the card")
    card = page.eval("""(() => { const c = document.querySelector('#detail .pv-card');
        return {kind: c.dataset.kind, text: c.textContent, status: c.querySelector('.pv-status').textContent}; })()""")
    assert card["kind"] == "undecryptable" and reason in card["text"] and card["status"] == "undecryptable", card
    assert_readable(page)


def test_hostile_text_stays_text(mock, sent, page):
    """A plaintext whose title and body are markup: text in the list, the detail and the notification."""
    body = "<script>alert(2)</script>"
    r = sent["site"].push(sent["subscription"]["endpoint"], encrypt(sent["subscription"], json.dumps({"title": HOSTILE, "body": body}).encode()))
    assert r.status_code == 201, r.text
    hostile = mock.api("GET", "/api/v1/messages?transport=webpush&limit=1")["items"][0]["message_id"]
    plaintext = assert_markup_stays_text(page, mock.base_url, hostile, HOSTILE + " — " + body, ".pv-card.pv-web")
    assert json.loads(plaintext) == {"title": HOSTILE, "body": body}
