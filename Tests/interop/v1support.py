"""firebase-admin 7.x against fcm-mock, in the two ways an app server can meet the mock.

- "pointed": the service-account JSON comes from `fcm-mock service-account` (its `token_uri` is
  the mock's plain-HTTP URL) and the SDK's FCM URLs are moved to the mock's HTTP port.
- "unmodified": the SDK keeps every Google URL. Inside this test process only, Google's host
  names resolve to the mock's TLS port (`socket.getaddrinfo` and `socket.socket.connect` are
  patched, see google_names) and the mock's local CA is trusted through REQUESTS_CA_BUNDLE and
  SSL_CERT_FILE, as a user would set them. The machine is not changed.

In both, any other Google host name fails to resolve, so no test can reach the real service.
"""

import asyncio
import contextlib
import json
import socket
import subprocess
import urllib.parse

import firebase_admin
import pytest
import requests
from firebase_admin import credentials, messaging

from mocksupport import PROJECT_A

# The hosts firebase-admin 7.x and google-auth call: FCM v1 (sends and topic subscriptions),
# the OAuth 2.0 token endpoint, and the Instance ID API (the SDK's *_legacy topic calls).
GOOGLE_NAMES = ("fcm.googleapis.com", "oauth2.googleapis.com", "iid.googleapis.com")
GOOGLE_SUFFIXES = (".googleapis.com", ".google.com", "googleapis.com", "google.com")
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"


def _host(host):
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return (host or "").rstrip(".").lower()


# The address Google's names resolve to inside the test process. Nothing listens there: every
# connection to it on port 443 is sent to the mock's TLS port instead (see google_names).
GOOGLE_VIRTUAL_IP = "127.0.42.43"


@contextlib.contextmanager
def google_names(target=None):
    """Within the block, GOOGLE_NAMES resolve to GOOGLE_VIRTUAL_IP, as a hosts file would map
    them, and a connection to that address on port 443 reaches `target` (host, port), as a port
    forward would: that is what a machine with `127.0.0.1 fcm.googleapis.com` in /etc/hosts and
    the mock on port 443 does. Both steps are needed because anyio (under httpx) keeps only the
    address from getaddrinfo and connects to the port it asked for, while urllib3 connects to
    the whole socket address. Every other Google name, and these on another port, fail like an
    unknown host; with no target, every Google name fails (the pointed set-up needs none)."""
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        name = _host(host)
        if name.endswith(GOOGLE_SUFFIXES):
            if target is None or name not in GOOGLE_NAMES or str(port) not in ("443", "https"):
                raise socket.gaierror(socket.EAI_NONAME,
                                      f"{name}:{port} is not resolved by the interop suite")
            return real_getaddrinfo(GOOGLE_VIRTUAL_IP, 443, family, type, proto, flags)
        return real_getaddrinfo(host, port, family, type, proto, flags)

    def forwarded(address):
        if (target is not None and isinstance(address, tuple) and len(address) == 2
                and address[0] == GOOGLE_VIRTUAL_IP and address[1] == 443):
            return target
        return address

    def connect(self, address):
        return real_connect(self, forwarded(address))

    def connect_ex(self, address):
        return real_connect_ex(self, forwarded(address))

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    try:
        yield
    finally:
        socket.getaddrinfo = real_getaddrinfo
        socket.socket.connect = real_connect
        socket.socket.connect_ex = real_connect_ex


class Setup:
    """One way of running firebase-admin against the mock: its app, the mock behind it, the
    event loop its async calls run on, and the HTTP versions httpx used for them."""

    def __init__(self, name, mock, app, service_account):
        self.name = name
        self.mock = mock
        self.app = app
        self.service_account = service_account
        self.project_id = service_account["project_id"]
        self.loop = asyncio.new_event_loop()
        self.http_versions = []
        # httpx's client is created with the messaging service; its response hook tells which
        # protocol each async request used (the SDK does not say).
        client = messaging._get_messaging_service(app)._async_client.async_client

        async def record(response):
            self.http_versions.append(response.http_version)

        client.event_hooks["response"].append(record)

    def run(self, coroutine):
        """Runs an SDK coroutine on this set-up's one loop (httpx's pool belongs to it)."""
        return self.loop.run_until_complete(coroutine)

    def name_of(self, message_id):
        return f"projects/{self.project_id}/messages/{message_id}"

    def close(self):
        service = messaging._get_messaging_service(self.app)
        self.run(service._async_client.async_client.aclose())
        self.loop.close()
        firebase_admin.delete_app(self.app)


def _service_account_from_cli(mock, tmp_path):
    """`fcm-mock service-account --project P --server URL --out FILE`, as the docs tell users."""
    out = tmp_path / "service-account.json"
    cmd = [mock.binary, "service-account", "--project", PROJECT_A, "--server", mock.base_url,
           "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"{cmd} -> {done.returncode}: {done.stdout}{done.stderr}"
    return out, json.loads(out.read_text())


@contextlib.contextmanager
def pointed(mock, tmp_path):
    """Set-up A: token_uri is the mock's URL; the SDK's FCM URLs are moved to the mock."""
    path, sa = _service_account_from_cli(mock, tmp_path)
    assert sa["token_uri"] == mock.base_url + "/token", sa["token_uri"]  # never the private key
    with google_names(None):
        app = firebase_admin.initialize_app(credentials.Certificate(str(path)), name="pointed")
        service = messaging._get_messaging_service(app)
        # firebase-admin has no documented endpoint override. Its messaging service keeps the
        # send URL and the topic-subscription base in these two instance attributes, formatted
        # once from Google's host in its constructor; replacing them on this app's service only
        # moves this app's calls and leaves the SDK's classes, other apps and every other
        # behaviour (headers, retries, auth, error mapping, httpx for the async calls) alone.
        base = f"{mock.base_url}/v1/projects/{app.project_id}"
        service._fcm_url = f"{base}/messages:send"
        service._fcm_topic_url = f"{base}/registrations"
        setup = Setup("pointed", mock, app, sa)
        try:
            yield setup
        finally:
            setup.close()


@contextlib.contextmanager
def unmodified(mock, tmp_path):
    """Set-up B: nothing in the SDK is changed; names and trust are the process's own."""
    assert mock.https_port, "the server has no TLS listener (started without --https-port?)"
    health = mock.api("GET", "/api/v1/health")
    ca_path = health.get("tls_ca")
    assert ca_path, f"health names no local CA (tls_ca): {health}"
    with open(ca_path, "rb") as f:
        ca_pem = f.read()
    served = mock.http.get(mock.base_url + "/api/v1/tls/ca.pem", timeout=10)
    assert served.status_code == 200 and served.content == ca_pem, (served.status_code,
                                                                     served.text[:200])
    with contextlib.ExitStack() as stack:
        stack.enter_context(google_names((mock.https_host, mock.https_port)))
        env = stack.enter_context(pytest.MonkeyPatch.context())
        # requests reads REQUESTS_CA_BUNDLE per request; httpx reads SSL_CERT_FILE when its
        # transport is made (with the messaging service), so both are set before the app.
        env.setenv("REQUESTS_CA_BUNDLE", ca_path)
        env.setenv("SSL_CERT_FILE", ca_path)
        env.delenv("CURL_CA_BUNDLE", raising=False)
        # A proxy from the environment would carry Google's names past the patched resolver.
        for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                    "all_proxy"):
            env.delenv(var, raising=False)

        # The service account is made through Google's own name, so its token_uri is Google's
        # (`{scheme}://{Host}/token`): the same JSON as one downloaded from the console.
        session = requests.Session()
        stack.callback(session.close)
        resp = session.post(
            f"https://oauth2.googleapis.com/api/v1/projects/{PROJECT_A}/service-accounts",
            json={}, timeout=30)
        assert resp.status_code == 201, (resp.status_code, resp.text[:2000])
        sa = resp.json()
        assert sa["token_uri"] == GOOGLE_TOKEN_URI, sa["token_uri"]  # never the private key
        path = tmp_path / "service-account.json"
        path.write_text(json.dumps(sa))

        app = firebase_admin.initialize_app(credentials.Certificate(str(path)),
                                            name="unmodified")
        service = messaging._get_messaging_service(app)
        assert urllib.parse.urlsplit(service._fcm_url).hostname == "fcm.googleapis.com"
        setup = Setup("unmodified", mock, app, sa)
        try:
            yield setup
        finally:
            setup.close()
