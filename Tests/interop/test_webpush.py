"""Web Push (RFC 8030 + RFC 8291 + RFC 8292) with pywebpush 2.5.0 and py-vapid 1.9.6, and with
raw requests encrypted by this suite's own encoder (webpush_crypto.py).

A `web` device made through the control API hands its `web_push` subscription JSON to
`pywebpush.webpush()` as it is. Two set-ups:
- pointed: the mock without an HTTPS port, so the endpoint is on its plain port
  (`http://127.0.0.1:PORT/wp/…`);
- unmodified: the mock with an HTTPS port and `--web-push-origin https://fcm.googleapis.com`, so
  the endpoint is Google's (`https://fcm.googleapis.com/wp/…`); this process resolves that one name to the mock's TLS port
  (a patch of `socket.getaddrinfo`, which every client here resolves through) and trusts the
  mock's local CA, so the library sends to the URL exactly as the subscription gives it, TLS
  checking Google's name.
Each push is checked where the device sees it: the decrypted plaintext in its inbox.
"""

import json
import re
import secrets
import socket
import ssl
import time
import urllib.parse

import httpx
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid01, Vapid02
from pywebpush import WebPusher, WebPushException, webpush

from mocksupport import APP_A, SENDER_A, q
from webpush_crypto import (HEADER_LEN, TAG_LEN, b64u, encrypt_aes128gcm, raw_public, unb64u,
                            vapid_header)

GOOGLE = "fcm.googleapis.com"
WEB_APP = APP_A + ".web"
SUB = "mailto:interop@example.com"
MAX_BODY = 4096
ID_RE = re.compile(r"[A-Za-z0-9_-]{64,}")


# -- set-ups ---------------------------------------------------------------------------------------

class Side:
    """One way of reaching the mock's push endpoint: its control API (`mock`), the requests
    session pywebpush sends with, and the origin every endpoint and Location is on."""

    def __init__(self, name, mock, session, origin):
        self.name, self.mock, self.session, self.origin = name, mock, session, origin

    def device(self, online=True, application_server_key=None):
        """A new `web` device: (token, its subscription JSON)."""
        body = {"sender_id": SENDER_A, "app": WEB_APP, "platform": "web", "online": online}
        if application_server_key is not None:
            body["application_server_key"] = application_server_key
        dev = self.mock.api("POST", "/api/v1/devices", expect=201, json=body)
        assert dev["platform"] == "web", dev
        return dev["token"], dev["web_push"]

    def push(self, subscription, data, vapid=None, claims=None, **kwargs):
        """pywebpush's one call, with a VAPID key (a fresh one unless given) and `sub`; a
        201 answer is returned, a failure raises WebPushException."""
        vapid = vapid or new_vapid()
        return webpush(subscription, data=data, vapid_private_key=vapid,
                       vapid_claims=dict(claims or {"sub": SUB}), requests_session=self.session,
                       timeout=20, **kwargs)

    def raw(self, method, url, **kwargs):
        return self.session.request(method, url, timeout=20, **kwargs)


def resolve_google_to(monkeypatch, port):
    """Makes GOOGLE (port 443) resolve to 127.0.0.1:`port` in this process and refuses any other
    name but loopback, so no request of these tests can reach the real service."""
    real = socket.getaddrinfo

    def getaddrinfo(host, service, *args, **kwargs):
        if host == GOOGLE:
            assert str(service) in ("443", "https"), service
            return real("127.0.0.1", port, *args, **kwargs)
        if host not in ("127.0.0.1", "localhost"):
            raise socket.gaierror(f"the interop suite resolves only {GOOGLE} and loopback, not {host}")
        return real(host, service, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(params=["pointed", "unmodified"])
def side(request, monkeypatch):
    session = requests.Session()
    session.trust_env = False
    if request.param == "pointed":
        mock = request.getfixturevalue("mock")
        yield Side("pointed", mock, session, mock.base_url)
    else:
        mock = request.getfixturevalue("mock_google_origin")
        session.verify = mock.api("GET", "/api/v1/health")["tls_ca"]
        resolve_google_to(monkeypatch, mock.https_port)
        yield Side("unmodified", mock, session, "https://" + GOOGLE)
    session.close()


@pytest.fixture
def pointed(mock):
    session = requests.Session()
    session.trust_env = False
    yield Side("pointed", mock, session, mock.base_url)
    session.close()


def new_vapid(cls=Vapid02):
    v = cls()
    v.generate_keys()
    return v


def vapid_key(v):
    """The application server key of a py-vapid key, as `pushManager.subscribe()` takes it."""
    return b64u(raw_public(v.public_key))


def error_of(call):
    """The response of a pywebpush call that must fail."""
    with pytest.raises(WebPushException) as failed:
        call()
    assert failed.value.response is not None, failed.value
    return failed.value.response


def assert_push_error(resp, status, reason):
    """The contract's error answer: `{"code","errno","error","message"}`, code = the status."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert list(body) == ["code", "errno", "error", "message"], body
    assert body["code"] == status and body["error"] == reason, body
    assert isinstance(body["errno"], int) and body["message"], body
    return body


# -- what the device received --------------------------------------------------------------------

def received(side, token, count=1):
    """The device's inbox, long-polled until it holds `count` entries."""
    items = side.mock.wait_inbox(token, count)
    assert len(items) >= count, items
    return items


def web(entry):
    """The Web Push part of an inbox entry."""
    assert entry["transport"] == "webpush" and entry["via"]["transport"] == "webpush", entry
    return entry["webpush"]


def location_id(side, resp):
    """The message id in a 201's Location (`{origin}/m/{id}`, the id percent-encoded)."""
    loc = resp.headers["Location"]
    assert loc.startswith(side.origin + "/m/"), (loc, side.origin)
    return urllib.parse.unquote(loc[len(side.origin + "/m/"):])


# -- subscriptions -------------------------------------------------------------------------------

def test_a_web_device_has_the_browsers_subscription_json(side):
    token, sub = side.device()
    assert list(sub) == ["endpoint", "expirationTime", "keys"], sub  # as Chrome orders it
    assert sub["expirationTime"] is None
    assert sorted(sub["keys"]) == ["auth", "p256dh"], sub
    p256dh, auth = unb64u(sub["keys"]["p256dh"]), unb64u(sub["keys"]["auth"])
    assert len(p256dh) == 65 and p256dh[0] == 4 and len(auth) == 16, sub
    # A real point of the curve, not just 65 bytes.
    ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), p256dh)
    assert sub["endpoint"].startswith(side.origin + "/wp/"), sub
    push_id = sub["endpoint"][len(side.origin + "/wp/"):]
    assert ID_RE.fullmatch(push_id), sub
    found = side.mock.api("GET", "/api/v1/devices", params={"web_push_id": push_id})["items"]
    assert [d["token"] for d in found] == [token], found


# -- pywebpush: delivery -------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["aes128gcm", "aesgcm"])
def test_pywebpush_push_arrives_decrypted(side, encoding):
    token, sub = side.device()
    v = new_vapid()
    note = {"title": f"Goal ({encoding})", "body": "3-1 in the 89th minute", "n": secrets.token_hex(4)}
    resp = side.push(sub, json.dumps(note), vapid=v, content_encoding=encoding, ttl=120,
                     headers={"Urgency": "high", "Topic": "score"})
    assert (resp.status_code, resp.content) == (201, b""), resp.text
    assert resp.headers["TTL"] == "120"
    mid = location_id(side, resp)

    entry = received(side, token)[0]
    assert entry["status"] == "delivered", entry
    assert entry["message_id"] == mid, (entry["message_id"], mid)
    w = web(entry)
    assert w["plaintext"] == json.dumps(note), w
    assert w["decrypt_error"] is None, w
    assert w["content_encoding"] == encoding, w
    assert w["headers"] == {"TTL": "120", "Urgency": "high", "Topic": "score"}, w
    assert w["vapid"] == {"subject": SUB, "key": vapid_key(v), "scheme": "vapid"}, w
    # JSON with a title and a body: shown as the notification a service worker would display.
    assert w["notification"]["title"] == note["title"] and w["notification"]["body"] == note["body"], w


def test_pywebpush_old_vapid_scheme_with_crypto_key(side):
    """py-vapid's draft-01 signer: `Authorization: WebPush <JWT>` and `Crypto-Key: p256ecdsa=…`;
    with aesgcm pywebpush appends `;dh=…` to the same Crypto-Key header."""
    for encoding in ("aesgcm", "aes128gcm"):
        token, sub = side.device()
        v = new_vapid(Vapid01)
        resp = side.push(sub, f"old scheme, {encoding}", vapid=v, content_encoding=encoding, ttl=60)
        assert resp.status_code == 201, resp.text
        w = web(received(side, token)[0])
        assert w["plaintext"] == f"old scheme, {encoding}"
        assert w["vapid"] == {"subject": SUB, "key": vapid_key(v), "scheme": "WebPush"}, w


def test_bound_subscription_takes_only_its_key(side):
    v = new_vapid()
    token, sub = side.device(application_server_key=vapid_key(v))
    assert side.push(sub, "signed by the bound key", vapid=v, ttl=60).status_code == 201
    assert web(received(side, token)[0])["plaintext"] == "signed by the bound key"
    # Another key that verifies: 403; no Authorization at all: 401.
    assert_push_error(error_of(lambda: side.push(sub, "x", ttl=60)), 403, "Forbidden")
    unsigned = error_of(lambda: webpush(sub, data="x", ttl=60, requests_session=side.session, timeout=20))
    assert_push_error(unsigned, 401, "Unauthorized")


def test_unsigned_push_to_an_unbound_subscription_is_accepted(side):
    token, sub = side.device()
    resp = webpush(sub, data="no VAPID at all", ttl=60, requests_session=side.session, timeout=20)
    assert resp.status_code == 201
    w = web(received(side, token)[0])
    assert w["plaintext"] == "no VAPID at all"
    assert w["vapid"] is None, w


def test_the_older_fcm_send_endpoint_is_an_alias(side):
    token, sub = side.device()
    old = dict(sub, endpoint=sub["endpoint"].replace("/wp/", "/fcm/send/", 1))
    resp = side.push(old, "through /fcm/send/", ttl=60,
                     claims={"sub": SUB, "aud": side.origin})
    assert resp.status_code == 201, resp.text
    assert web(received(side, token)[0])["plaintext"] == "through /fcm/send/"


# -- pywebpush: the error statuses it reports --------------------------------------------------------

def test_unknown_subscription_is_404(side):
    _, sub = side.device()
    unknown = dict(sub, endpoint=side.origin + "/wp/" + b64u(secrets.token_bytes(60)))
    assert_push_error(error_of(lambda: side.push(unknown, "x", ttl=60)), 404, "Not Found")


def test_expired_subscription_and_unregistered_device_are_410(side):
    token, sub = side.device()
    side.mock.api("POST", f"/api/v1/devices/{q(token)}/web-push/expire")
    gone = error_of(lambda: side.push(sub, "x", ttl=60))
    assert gone.content == (b'{"code":410,"errno":103,"error":"Gone",'
                            b'"message":"the subscription was ended (the user revoked the permission)"}')
    token, sub = side.device()
    side.mock.api("POST", f"/api/v1/devices/{q(token)}:unregister")
    body = assert_push_error(error_of(lambda: side.push(sub, "x", ttl=60)), 410, "Gone")
    assert body["errno"] == 106, body
    token, sub = side.device()
    side.mock.api("DELETE", f"/api/v1/devices/{q(token)}", expect=204)
    body = assert_push_error(error_of(lambda: side.push(sub, "x", ttl=60)), 410, "Gone")
    assert body["errno"] == 106, body


def test_body_limit_is_4096_bytes(side):
    token, sub = side.device()
    # pywebpush writes one record: the header, the plaintext, one delimiter byte and the tag.
    fits = "a" * (MAX_BODY - HEADER_LEN - 1 - TAG_LEN)
    assert len(WebPusher(sub).encode(fits.encode())["body"]) == MAX_BODY
    assert side.push(sub, fits, ttl=60).status_code == 201
    assert web(received(side, token)[0])["plaintext"] == fits
    too_big = error_of(lambda: side.push(sub, fits + "a", ttl=60))
    assert too_big.status_code == 413
    assert too_big.content == (b'{"code":413,"errno":104,"error":"Payload Too Large",'
                               b'"message":"the body has 4097 bytes, over the 4096 a push may carry"}')


@pytest.mark.parametrize("headers", [
    {"TTL": "-1"}, {"TTL": "soon"}, {"TTL": "1.5"},
    {"Urgency": "urgent"}, {"Urgency": "very_low"},
    {"Topic": "t" * 33}, {"Topic": "not base64url"}, {"Topic": "a+b"},
], ids=lambda h: "-".join(f"{k}={v}" for k, v in h.items()))
def test_bad_headers_are_400(pointed, headers):
    _, sub = pointed.device()
    extra = dict(headers)
    ttl = 0 if "TTL" in extra else 60  # pywebpush keeps a TTL header given when ttl=0
    resp = error_of(lambda: pointed.push(sub, "x", ttl=ttl, headers=extra))
    body = assert_push_error(resp, 400, "Bad Request")
    # autopush's numbers: 112 a bad TTL, 114 a bad header value (Urgency), 113 a bad Topic.
    assert body["errno"] == {"TTL": 112, "Urgency": 114, "Topic": 113}[next(iter(headers))], body


@pytest.mark.parametrize("claims", [
    {"sub": SUB, "aud": "https://push.example.com"},
    {"sub": SUB, "exp": int(time.time()) + 25 * 3600},
], ids=["wrong-aud", "exp-beyond-24h"])
def test_bad_vapid_claims_are_401(side, claims):
    _, sub = side.device()
    assert_push_error(error_of(lambda: side.push(sub, "x", ttl=60, claims=claims)), 401, "Unauthorized")


def test_a_fault_answers_in_the_push_services_shape(side):
    token, sub = side.device()
    side.mock.fault({"transport": "webpush", "token": token}, {"status": 503, "retry_after_s": 7}, times=1)
    with pytest.raises(WebPushException) as failed:
        side.push(sub, "x", ttl=60)
    assert (failed.value.status_code, failed.value.retry_after) == (503, "7")
    body = assert_push_error(failed.value.response, 503, "Service Unavailable")
    assert body["errno"] == 201, body
    assert side.push(sub, "after the fault", ttl=60).status_code == 201
    assert web(received(side, token)[0])["plaintext"] == "after the fault"


# -- delivery rules --------------------------------------------------------------------------------

def test_ttl_above_four_weeks_is_lowered(pointed):
    token, sub = pointed.device()
    resp = pointed.push(sub, "long lived", ttl=10 * 2_419_200)
    assert resp.headers["TTL"] == "2419200"
    assert web(received(pointed, token)[0])["headers"]["TTL"] == "2419200"


def test_topic_replaces_a_pending_message(side):
    token, sub = side.device(online=False)
    side.push(sub, "2-1", ttl=600, headers={"Topic": "score"})
    side.push(sub, "other", ttl=600, headers={"Topic": "news"})
    side.push(sub, "3-1", ttl=600, headers={"Topic": "score"})
    side.mock.set_online(token, True)
    delivered = [web(e)["plaintext"] for e in side.mock.inbox(token, status="delivered", wait=5, min_count=2)]
    assert delivered == ["other", "3-1"], delivered


def test_ttl_zero_to_an_offline_device_is_dropped(side):
    token, sub = side.device(online=False)
    assert side.push(sub, "now or never", ttl=0).status_code == 201
    entry = side.mock.inbox(token)[0]
    assert entry["status"] == "expired", entry
    side.mock.set_online(token, True)
    assert side.mock.inbox(token, status="delivered") == []


def test_delete_removes_a_pending_message(side):
    token, sub = side.device(online=False)
    resp = side.push(sub, "cancelled", ttl=600)
    location = resp.headers["Location"]
    kept = side.push(sub, "kept", ttl=600)
    gone = side.raw("DELETE", location)
    assert (gone.status_code, gone.content) == (204, b"")
    assert side.raw("DELETE", location).status_code == 404
    side.mock.set_online(token, True)
    delivered = [web(e)["plaintext"] for e in side.mock.inbox(token, status="delivered", wait=5, min_count=1)]
    assert delivered == ["kept"], delivered
    # Delivered now: no longer deletable.
    assert side.raw("DELETE", kept.headers["Location"]).status_code == 404


# -- raw requests with this suite's own encryption -----------------------------------------------------

def raw_push(side, sub, body, key=None, **headers):
    """POSTs an aes128gcm body to the subscription's endpoint, signed by `key` (a fresh P-256 key
    unless given) for the endpoint's origin."""
    key = key or ec.generate_private_key(ec.SECP256R1())
    h = {"TTL": "60", "Content-Encoding": "aes128gcm",
         "Authorization": vapid_header(key, side.origin)}
    h.update(headers)
    return side.raw("POST", sub["endpoint"], data=body, headers={k: v for k, v in h.items() if v is not None})


def test_own_encoder_with_padding_decrypts(side):
    token, sub = side.device()
    body = encrypt_aes128gcm("padded, ünïcode".encode(), sub["keys"]["p256dh"], sub["keys"]["auth"], pad=40)
    assert raw_push(side, sub, body).status_code == 201
    w = web(received(side, token)[0])
    assert w["plaintext"] == "padded, ünïcode"
    assert w["ciphertext_bytes"] == len(body) and "ciphertext_base64" not in w, w


def test_binary_plaintext_is_shown_as_base64(pointed):
    token, sub = pointed.device()
    raw = bytes(range(256))[::-1][:64]
    body = encrypt_aes128gcm(raw, sub["keys"]["p256dh"], sub["keys"]["auth"])
    assert raw_push(pointed, sub, body).status_code == 201
    w = web(received(pointed, token)[0])
    assert w["plaintext"] is None and unb64u(w["plaintext_base64"].rstrip("=")) == raw, w


UNDECRYPTABLE = {
    "wrong-auth": "record 0 does not authenticate: wrong keys, or the body was altered",
    "bad-padding": "record 0 has bad padding",
    "no-last-record": "the body is truncated at record 0",
    "rs-17": "the record size 17 is too small",
    "rs-0": "the record size 0 is too small",
    "aesgcm-without-encryption": "missing the Encryption header",
}


@pytest.mark.parametrize("case", list(UNDECRYPTABLE))
def test_undecryptable_body_is_accepted_and_marked(side, case):
    token, sub = side.device()
    p256dh, auth = sub["keys"]["p256dh"], sub["keys"]["auth"]
    headers = {}
    if case == "wrong-auth":
        body = encrypt_aes128gcm(b"for someone else", p256dh, b64u(secrets.token_bytes(16)))
    elif case == "bad-padding":
        body = encrypt_aes128gcm(b"a delimiter of neither kind", p256dh, auth, delimiter=b"\x05")
    elif case == "no-last-record":  # the one record says more follow
        body = encrypt_aes128gcm(b"cut short", p256dh, auth, delimiter=b"\x01")
    elif case.startswith("rs-"):
        body = encrypt_aes128gcm(b"x" * 100, p256dh, auth, rs=int(case[3:]))
    else:  # pywebpush's aesgcm body and Crypto-Key: dh=, without its Encryption: salt=
        encoded = WebPusher(sub).encode(b"no salt", "aesgcm")
        body = encoded["body"]
        headers = {"Content-Encoding": "aesgcm", "Crypto-Key": "dh=" + encoded["crypto_key"].decode()}
    resp = raw_push(side, sub, body, **headers)
    assert (resp.status_code, resp.content) == (201, b""), resp.text
    entry = received(side, token)[0]
    assert entry["status"] == "undecryptable", entry
    w = web(entry)
    assert (w["plaintext"], w["decrypt_error"]) == (None, UNDECRYPTABLE[case]), w
    # Kept as received, to be taken apart by hand.
    assert unb64u(w["ciphertext_base64"]) == body and w["ciphertext_bytes"] == len(body), w
    assert side.mock.api("GET", "/api/v1/health")["webpush"]["undecryptable"] >= 1


@pytest.mark.parametrize("joiner", [";", ","])
def test_older_scheme_with_dh_and_p256ecdsa_in_one_crypto_key(pointed, joiner):
    """aesgcm and the draft VAPID scheme share `Crypto-Key`: `dh=…` and `p256ecdsa=…` joined by
    `;` (as pywebpush writes them) or `,`, in either order."""
    token, sub = pointed.device()
    encoded = WebPusher(sub).encode(f"joined by {joiner}".encode(), "aesgcm")
    v = new_vapid(Vapid01)
    signed = v.sign({"sub": SUB, "aud": pointed.origin})
    crypto_key = signed["Crypto-Key"] + joiner + "dh=" + encoded["crypto_key"].decode()
    if joiner == ",":
        crypto_key = "dh=" + encoded["crypto_key"].decode() + joiner + signed["Crypto-Key"]
    resp = raw_push(pointed, sub, encoded["body"], **{
        "Content-Encoding": "aesgcm", "Encryption": "salt=" + encoded["salt"].decode(),
        "Crypto-Key": crypto_key, "Authorization": signed["Authorization"]})
    assert resp.status_code == 201, resp.text
    w = web(received(pointed, token)[0])
    assert w["plaintext"] == f"joined by {joiner}", w
    assert w["vapid"] == {"subject": SUB, "key": vapid_key(v), "scheme": "WebPush"}, w


def test_largest_record_size_decrypts(pointed):
    """rs = 2^32 - 1 is a legal record size: a body shorter than it is one last record."""
    token, sub = pointed.device()
    body = encrypt_aes128gcm(b"one big record", sub["keys"]["p256dh"], sub["keys"]["auth"], rs=2**32 - 1)
    assert raw_push(pointed, sub, body).status_code == 201
    entry = received(pointed, token)[0]
    assert (entry["status"], web(entry)["plaintext"]) == ("delivered", "one big record"), entry


def test_missing_ttl_answers_the_documented_body(pointed):
    _, sub = pointed.device()
    body = encrypt_aes128gcm(b"x", sub["keys"]["p256dh"], sub["keys"]["auth"])
    resp = raw_push(pointed, sub, body, TTL=None)
    assert resp.status_code == 400
    assert resp.content == (b'{"code":400,"errno":111,"error":"Bad Request",'
                            b'"message":"the TTL header is required: the seconds the push service may keep the message"}')
    assert resp.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("case", ["no-sub", "expired", "bad-signature", "garbage"])
def test_raw_vapid_failures_are_401(pointed, case):
    _, sub = pointed.device()
    body = encrypt_aes128gcm(b"x", sub["keys"]["p256dh"], sub["keys"]["auth"])
    key = ec.generate_private_key(ec.SECP256R1())
    if case == "no-sub":
        auth = vapid_header(key, pointed.origin, sub=None)
    elif case == "expired":
        auth = vapid_header(key, pointed.origin, exp=int(time.time()) - 60)
    elif case == "bad-signature":
        other = ec.generate_private_key(ec.SECP256R1())
        auth = vapid_header(key, pointed.origin).split(", k=")[0] + ", k=" + b64u(raw_public(other))
    else:
        auth = "vapid t=not.a.jwt, k=" + b64u(raw_public(key))
    assert_push_error(raw_push(pointed, sub, body, key=key, Authorization=auth), 401, "Unauthorized")


def test_a_remembered_token_expires_on_the_mocks_clock(pointed):
    """The same VAPID header twice (the second push finds the token by its text), then again
    once the mock's clock has passed its exp: 401 though no real time went by."""
    token, sub = pointed.device()
    key = ec.generate_private_key(ec.SECP256R1())
    header = vapid_header(key, pointed.origin, exp=int(time.time()) + 3600)
    for n in (1, 2):
        body = encrypt_aes128gcm(f"push {n}".encode(), sub["keys"]["p256dh"], sub["keys"]["auth"])
        assert raw_push(pointed, sub, body, Authorization=header).status_code == 201
    assert [web(e)["plaintext"] for e in received(pointed, token, 2)] == ["push 1", "push 2"]
    pointed.mock.api("POST", "/api/v1/clock", json={"advance_s": 2 * 3600})
    try:
        body = encrypt_aes128gcm(b"push 3", sub["keys"]["p256dh"], sub["keys"]["auth"])
        late = assert_push_error(raw_push(pointed, sub, body, Authorization=header), 401, "Unauthorized")
        assert "expired" in late["message"], late
    finally:
        pointed.mock.api("POST", "/api/v1/clock", json={"reset": True})


def test_push_over_http2_to_googles_name(mock_google_origin, monkeypatch):
    """The same push with httpx over h2 (ALPN) to https://fcm.googleapis.com, as a client on
    HTTP/2 reaches the real service."""
    resolve_google_to(monkeypatch, mock_google_origin.https_port)
    ca = mock_google_origin.api("GET", "/api/v1/health")["tls_ca"]
    side = Side("unmodified", mock_google_origin, None, "https://" + GOOGLE)
    token, sub = side.device()
    key = ec.generate_private_key(ec.SECP256R1())
    body = encrypt_aes128gcm(b"over h2", sub["keys"]["p256dh"], sub["keys"]["auth"])
    tls = ssl.create_default_context(cafile=ca)
    with httpx.Client(http1=False, http2=True, verify=tls, trust_env=False, timeout=20) as client:
        r = client.post(sub["endpoint"], content=body, headers={
            "TTL": "30", "Content-Encoding": "aes128gcm",
            "Authorization": vapid_header(key, "https://" + GOOGLE)})
    assert r.http_version == "HTTP/2"
    assert (r.status_code, r.content, r.headers["ttl"]) == (201, b"", "30")
    assert r.headers["location"].startswith("https://" + GOOGLE + "/m/")
    assert web(received(side, token)[0])["plaintext"] == "over h2"



def test_endpoints_stay_on_the_mock_with_a_tls_listener(mock_https):
    """Without `--web-push-origin` a TLS listener changes nothing: endpoints are on the plain
    port, so a library posting to one never reaches Google's real service."""
    dev = mock_https.api("POST", "/api/v1/devices", expect=201,
                         json={"sender_id": SENDER_A, "app": WEB_APP, "platform": "web"})
    assert dev["web_push"]["endpoint"].startswith(mock_https.base_url + "/wp/"), dev
    assert mock_https.api("GET", "/api/v1/health")["webpush"]["endpoint_base"] == mock_https.base_url

def test_delete_takes_back_only_web_pushes(pointed):
    """`DELETE /m/{id}` is the push service's: it takes back a held Web Push message, and neither
    an FCM message held for an Android device under the same kind of id nor a Web Push message
    named with another sender's suffix."""
    mock = pointed.mock
    android = mock.create_device(online=False)
    res = mock.fcm().single_device_data_message(registration_id=android, data_message={"k": "held"})
    fcm_id = res["results"][0]["message_id"]
    gone = pointed.raw("DELETE", f"{pointed.origin}/m/{fcm_id.replace('%', '%25')}")
    assert gone.status_code == 404, (gone.status_code, gone.text)
    assert [e["status"] for e in mock.inbox(android)] == ["pending"]

    token, sub = pointed.device(online=False)
    location = pointed.push(sub, "held", ttl=600).headers["Location"]
    micros, _, suffix = urllib.parse.unquote(location.rsplit("/m/", 1)[1]).partition("%")
    other = f"{pointed.origin}/m/{micros}%25{'0' * len(suffix)}"
    assert pointed.raw("DELETE", other).status_code == 404
    assert [e["status"] for e in mock.inbox(token)] == ["pending"]
