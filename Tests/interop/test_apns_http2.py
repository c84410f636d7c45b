"""APNs provider API over HTTP/2 with httpx 0.28 (h2 4.4) and provider tokens signed by PyJWT
(ES256 through cryptography): the signing key is one the mock made (`POST /api/v1/apns/keys`,
its `.p8` PEM). Each answer is checked byte for byte: Apple's status, `{"reason":…}` body,
`content-type` and `apns-id`. Two set-ups: h2c with prior knowledge on the plain port, and TLS
with ALPN h2 on the HTTPS port, the certificate checked for Apple's host name against the
mock's local CA.
"""

import secrets
import ssl
import time
import uuid

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
import pytest

TEAM = "INTEROP123"
TOPIC = "com.example.interop.ios"
DEVICE = "ab" * 32


@pytest.fixture(scope="module", params=["h2c", "h2-tls"])
def apns(request):
    """(client, base URL, extra request arguments, mock) for one set-up."""
    if request.param == "h2c":
        mock = request.getfixturevalue("mock")
        client = httpx.Client(http1=False, http2=True, trust_env=False, timeout=20)
        base, extra = mock.base_url, {}
    else:
        mock = request.getfixturevalue("mock_https")
        ca = mock.api("GET", "/api/v1/health")["tls_ca"]
        client = httpx.Client(http1=False, http2=True, trust_env=False, timeout=20, verify=ssl.create_default_context(cafile=ca))
        base = f"https://127.0.0.1:{mock.https_port}"
        # Connect to the loopback address, but name Apple's host in TLS (SNI and the
        # certificate's check) and in :authority, as a client reaching it through a hosts entry.
        extra = {"extensions": {"sni_hostname": "api.sandbox.push.apple.com"},
                 "headers": {"host": "api.sandbox.push.apple.com"}}
    with client:
        yield client, base, extra, mock


@pytest.fixture(scope="module")
def key(apns):
    _, _, _, mock = apns
    made = mock.api("POST", "/api/v1/apns/keys", expect=201, json={"team_id": TEAM, "bundle_ids": [TOPIC]})
    assert made["team_id"] == TEAM
    assert made["private_key_pem"].startswith("-----BEGIN PRIVATE KEY-----\n")
    return made


def token(key, iat=None, iss=TEAM, kid=None):
    return jwt.encode({"iss": iss, "iat": int(time.time()) if iat is None else iat},
                      key["private_key_pem"], algorithm="ES256", headers={"kid": kid or key["key_id"]})


def post(apns, key, path=None, headers=None, body=b'{"aps":{"alert":"hi"}}', auth=True, method="POST"):
    client, base, extra, _ = apns
    h = dict(extra.get("headers", {}))
    if auth:
        h["authorization"] = "bearer " + (auth if isinstance(auth, str) else token(key))
    h.update({"apns-topic": TOPIC} if headers is None else headers)
    r = client.request(method, base + (path or f"/3/device/{DEVICE}"), headers=h, content=body,
                       extensions=extra.get("extensions", {}))
    assert r.http_version == "HTTP/2"
    return r


def assert_reason(r, status, reason, apns_id=None):
    """`apns_id`: the one the request sent, echoed (a malformed one too); else a new UUID."""
    assert (r.status_code, r.content) == (status, b'{"reason":"%s"}' % reason.encode())
    assert r.headers["content-type"] == "application/json"
    if apns_id is None:
        uuid.UUID(r.headers["apns-id"])
    else:
        assert r.headers["apns-id"] == apns_id


def test_header_rules_answer_apples_reasons(apns, key):
    rows = [
        ({"apns-topic": TOPIC, "apns-push-type": "banner"}, "InvalidPushType"),
        ({"apns-topic": TOPIC, "apns-id": "nope"}, "BadMessageId"),
        ({"apns-topic": TOPIC, "apns-expiration": "-5"}, "BadExpirationDate"),
        ({"apns-topic": TOPIC, "apns-priority": "2"}, "BadPriority"),
        ({}, "MissingTopic"),
        ({"apns-topic": TOPIC, "apns-push-type": "voip"}, "BadTopic"),
        ({"apns-topic": TOPIC, "apns-collapse-id": "c" * 65}, "BadCollapseId"),
        ({"apns-topic": "com.not.the.teams"}, "TopicDisallowed"),
    ]
    for headers, reason in rows:
        assert_reason(post(apns, key, headers=headers), 400, reason, headers.get("apns-id"))


def test_paths_methods_tokens_and_payloads(apns, key):
    assert_reason(post(apns, key, path="/3/nothing"), 404, "BadPath")
    assert_reason(post(apns, key, method="PUT"), 405, "MethodNotAllowed")
    assert_reason(post(apns, key, path="/3/device/xyz"), 400, "BadDeviceToken")
    assert_reason(post(apns, key, body=b""), 400, "PayloadEmpty")
    big = b'{"aps":{"alert":"' + b"x" * 4096 + b'"}}'
    assert_reason(post(apns, key, body=big), 413, "PayloadTooLarge")
    # A well-formed token no device has: the mock runs with --unknown-tokens register (the
    # default), so it becomes an iOS device of the topic's app and the send reaches it.
    fresh = secrets.token_hex(32)
    assert post(apns, key, path="/3/device/" + fresh).status_code == 200
    _, _, _, mock = apns
    made = mock.api("GET", "/api/v1/devices", params={"apns_token": fresh})["items"]
    assert [(d["app"], d["platform"], d["apns_environment"]) for d in made] == [(TOPIC, "ios", "sandbox")]


def test_provider_tokens(apns, key):
    assert_reason(post(apns, key, auth=False), 403, "MissingProviderToken")
    assert_reason(post(apns, key, auth=token(key, iss="OTHER12345")), 403, "InvalidProviderToken")
    assert_reason(post(apns, key, auth=token(key, kid="NOSUCHKEY1")), 403, "InvalidProviderToken")
    assert_reason(post(apns, key, auth=token(key, iat=int(time.time()) + 600)), 403, "InvalidProviderToken")
    assert_reason(post(apns, key, auth=token(key, iat=int(time.time()) - 3700)), 403, "ExpiredProviderToken")
    stranger = jwt.encode({"iss": TEAM, "iat": int(time.time())}, ec.generate_private_key(ec.SECP256R1()),
                          algorithm="ES256", headers={"kid": key["key_id"]})
    assert_reason(post(apns, key, auth=stranger), 403, "InvalidProviderToken")


def test_apns_id_is_echoed(apns, key):
    given = str(uuid.uuid4()).upper()
    r = post(apns, key, headers={"apns-topic": TOPIC, "apns-id": given})
    assert r.headers["apns-id"] == given


def test_a_send_reaches_the_ios_device_that_has_the_token(apns, key):
    _, _, extra, mock = apns
    fcm = mock.create_device(platform="ios", app=TOPIC)
    device = mock.device(fcm)
    assert device["apns_environment"] == "sandbox"
    assert mock.api("GET", "/api/v1/devices", params={"apns_token": device["apns_token"]})["items"][0]["token"] == fcm
    r = post(apns, key, path="/3/device/" + device["apns_token"],
             headers={"apns-topic": TOPIC, "apns-collapse-id": "score"}, body=b'{"aps":{"alert":"interop"},"k":1}')
    assert (r.status_code, r.content) == (200, b"")
    uuid.UUID(r.headers["apns-id"])
    # Both set-ups reach the sandbox: 127.0.0.1 by --apns-environment's default, the TLS one by
    # Apple's sandbox host name.
    uuid.UUID(r.headers["apns-unique-id"])
    entry = mock.wait_inbox(fcm)[0]
    assert entry["status"] == "delivered"
    assert entry["via"]["transport"] == "apns"
    assert entry["effective"]["apns"]["payload"]["k"] == 1
    assert entry["effective"]["apns"]["headers"]["apns-collapse-id"] == "score"
    # The same token on Apple's production host is of the other environment.
    if "headers" in extra:
        client, base, _, _ = apns
        h = {"host": "api.push.apple.com", "authorization": "bearer " + token(key), "apns-topic": TOPIC}
        p = client.post(base + "/3/device/" + device["apns_token"], headers=h, content=b'{"aps":{}}',
                        extensions={"sni_hostname": "api.push.apple.com"})
        assert_reason(p, 400, "BadDeviceToken")


def test_the_largest_expiration_apple_reads_is_delivered_and_held_at_most_a_century(apns, key):
    """`apns-expiration` of 18 digits (the most the header takes): delivered to an online device,
    held a century at most for an offline one, and the server goes on (it once overflowed)."""
    _, _, _, mock = apns
    far = "999999999999999999"
    for online in (True, False):
        fcm = mock.create_device(platform="ios", app=TOPIC, online=online)
        device = mock.device(fcm)
        r = post(apns, key, path="/3/device/" + device["apns_token"],
                 headers={"apns-topic": TOPIC, "apns-expiration": far})
        assert (r.status_code, r.content) == (200, b"")
        entry = mock.inbox(fcm)[0]
        assert entry["status"] == ("delivered" if online else "pending"), entry
        assert entry["effective"]["apns"]["headers"]["apns-expiration"] == far, entry
        assert int(entry["expires_at"][:4]) <= time.gmtime().tm_year + 101, entry
    assert mock.api("GET", "/api/v1/health")["status"] == "ok"
