"""aioapns 4.0, an unmodified APNs client from PyPI, against the mock's HTTPS port: provider
tokens (a `.p8` key the mock made) and client certificates (issued by the mock's CA). aioapns
offers no ALPN and starts HTTP/2 with the preface; it takes no host or port, so it is run through
docs/apns.md's recipe (executed here as written): Apple's hosts resolved to the mock in this
process, the mock's CA in its `ssl_context`. Each send is checked where the device sees it (the
inbox, through the control API) and on its record; refusals as aioapns reports them (its status
and `description`, Apple's reason).
"""

import asyncio
import pathlib
import re
import socket

import pytest
from aioapns.connection import APNsBaseClientProtocol, APNsTLSClientProtocol

from mocksupport import APP_A_IOS

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "apns.md"
TEAM = "AIOAPNS123"


class Setup:
    def __init__(self, mock, send, credentials, certificate):
        self.mock = mock
        self.send = send
        self.credentials = credentials
        self.certificate = certificate

    def run(self, token, auth, **overrides):
        return asyncio.run(self.send(token, **{**self.credentials[auth], **overrides}))


@pytest.fixture(scope="module")
def aio(mock_https, tmp_path_factory):
    mock = mock_https
    ca = mock.api("GET", "/api/v1/health")["tls_ca"]
    # The doc's block, run as it is, with the two names it leaves to the reader.
    block = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    names = {"CA_PEM": ca, "MOCK_HTTPS_PORT": mock.https_port}
    real = socket.getaddrinfo
    exec(compile(block, str(DOC), "exec"), names)
    try:
        assert socket.getaddrinfo is not real, "the recipe resolves Apple's hosts to the mock"
        key = mock.api("POST", "/api/v1/apns/keys", expect=201, json={"team_id": TEAM, "bundle_ids": [APP_A_IOS]})
        cert = mock.api("POST", "/api/v1/apns/certificates", expect=201, json={"bundle_id": APP_A_IOS})
        folder = tmp_path_factory.mktemp("aioapns")
        pem = folder / "apns.pem"
        pem.write_text(cert["certificate_pem"] + cert["private_key_pem"])
        credentials = {
            "token": {"key": key["private_key_pem"], "key_id": key["key_id"], "team_id": TEAM, "topic": APP_A_IOS},
            "certificate": {"client_cert": str(pem)},
        }
        yield Setup(mock, names["send"], credentials, cert)
    finally:
        socket.getaddrinfo = real


@pytest.fixture(params=["apple-host", "loopback"])
def route(request, aio, monkeypatch):
    """Apple's sandbox host (resolved to the mock), or 127.0.0.1 and the HTTPS port named."""
    if request.param == "loopback":
        monkeypatch.setattr(APNsBaseClientProtocol, "APNS_SERVER", "127.0.0.1")
        for cls in APNsBaseClientProtocol.__subclasses__() + APNsTLSClientProtocol.__subclasses__():
            monkeypatch.setattr(cls, "APNS_SERVER", "127.0.0.1")
        monkeypatch.setattr(APNsTLSClientProtocol, "APNS_PORT", aio.mock.https_port)
    return request.param


def ios_device(mock):
    fcm = mock.create_device(platform="ios", app=APP_A_IOS)
    return fcm, mock.device(fcm)["apns_token"]


def record(mock, apns_id):
    found = [m for m in mock.messages(transport="apns") if (m.get("apns") or {}).get("headers", {}).get("apns-id") == apns_id]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("auth", ["token", "certificate"])
def test_a_send_reaches_the_device(aio, route, auth):
    fcm, token = ios_device(aio.mock)
    result = aio.run(token, auth)
    assert (result.status, result.description) == ("200", None)
    entry = aio.mock.wait_inbox(fcm)[0]
    assert entry["status"] == "delivered"
    assert entry["via"]["transport"] == "apns"
    assert entry["effective"]["apns"]["payload"] == {"aps": {"alert": "hi"}}
    assert entry["effective"]["apns"]["headers"]["apns-topic"] == APP_A_IOS
    apns = record(aio.mock, result.notification_id)["apns"]
    # Both routes reach the sandbox: Apple's development host, or 127.0.0.1 by --apns-environment.
    assert apns["environment"] == "sandbox"
    if auth == "token":
        assert (apns.get("key_id"), apns.get("certificate_id")) == (aio.credentials["token"]["key_id"], None)
    else:
        assert (apns.get("key_id"), apns.get("certificate_id")) == (None, aio.certificate["id"])


@pytest.mark.parametrize("auth", ["token", "certificate"])
def test_refusals_as_aioapns_reports_them(aio, route, auth):
    mock = aio.mock
    bad = aio.run("0123", auth)
    assert (bad.status, bad.description) == ("400", "BadDeviceToken")
    fcm, token = ios_device(mock)
    mock.api("POST", f"/api/v1/devices/{fcm}:unregister")
    gone = aio.run(token, auth)
    assert (gone.status, gone.description) == ("410", "Unregistered")
    assert isinstance(gone.timestamp, int) and gone.timestamp > 1_600_000_000_000
    other = aio.run(token, auth, topic="com.example.elsewhere") if auth == "token" else None
    if other is not None:
        assert (other.status, other.description) == ("400", "TopicDisallowed")


def test_certificates_the_mock_refuses(aio, route, tmp_path):
    mock = aio.mock
    _, token = ios_device(mock)
    production = mock.api("POST", "/api/v1/apns/certificates", expect=201, json={"bundle_id": APP_A_IOS, "environment": "production"})
    pem = tmp_path / "production.pem"
    pem.write_text(production["certificate_pem"] + production["private_key_pem"])
    wrong = aio.run(token, "certificate", client_cert=str(pem))
    assert (wrong.status, wrong.description) == ("403", "BadCertificateEnvironment")
    mock.api("DELETE", f"/api/v1/apns/certificates/{production['id']}", expect=204)
    revoked = aio.run(token, "certificate", client_cert=str(pem))
    assert (revoked.status, revoked.description) == ("403", "BadCertificate")
