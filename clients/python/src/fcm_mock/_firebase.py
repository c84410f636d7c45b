"""firebase-admin wired to the mock, in the two ways docs/v1.md describes."""

from __future__ import annotations

import itertools
import os
import socket
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import requests

from .errors import FcmMockError

if TYPE_CHECKING:
    from ._client import FcmMock

#: The hosts firebase-admin and google-auth call: FCM v1, the OAuth 2.0 token endpoint, and the
#: Instance ID API (the SDK's legacy topic calls).
GOOGLE_HOSTS = ("fcm.googleapis.com", "oauth2.googleapis.com", "iid.googleapis.com")
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
#: What Google's names resolve to in this process; a connection to it on port 443 is sent to the
#: mock's TLS port, as a hosts entry plus a port forward would.
VIRTUAL_IP = "127.0.42.43"

_names = itertools.count(1)


def make_app(mock: "FcmMock", project: str, unmodified: bool, name: Optional[str]) -> Any:
    try:
        import firebase_admin
        from firebase_admin import credentials, messaging
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise FcmMockError("firebase_app() needs firebase-admin: pip install 'fcm-mock[firebase]'") from e
    app_name = name or f"fcm-mock-{next(_names)}"
    if not unmodified:
        path = mock.service_account(project)
        app = firebase_admin.initialize_app(credentials.Certificate(str(path)), name=app_name)
        # firebase-admin has no endpoint option: its messaging service keeps the send URL and the
        # topic-subscription base in two attributes made once from Google's host. Replacing them
        # on this app's service moves this app's calls only (docs/v1.md).
        service = messaging._get_messaging_service(app)
        base = f"{mock.base_url}/v1/projects/{app.project_id}"
        service._fcm_url = f"{base}/messages:send"
        service._fcm_topic_url = f"{base}/registrations"
        return app

    if not mock.https_url:
        raise FcmMockError("firebase_app(unmodified=True) needs the mock's TLS listener: "
                           "FcmMock.start(https=True), or FcmMock.connect(url, https_url=...)")
    ca = mock._http.get(mock.base_url + "/api/v1/tls/ca.pem", timeout=mock.timeout)
    if ca.status_code != 200:
        raise FcmMockError(f"the mock serves no local CA (GET /api/v1/tls/ca.pem -> {ca.status_code}):"
                           " started with --tls-cert? Trust that certificate's CA yourself")
    if mock._routing is None:
        ca_path = os.path.join(mock._workdir, "ca.pem")
        with open(ca_path, "wb") as f:
            f.write(ca.content)
        parts = urllib.parse.urlsplit(mock.https_url)
        routing = GoogleRouting((parts.hostname or "127.0.0.1", parts.port or 443), ca_path)
        routing.install()
        mock._routing = routing
    # The service account is made through Google's own name, so its token_uri is Google's: the
    # same JSON as one downloaded from the console.
    with requests.Session() as s:
        r = s.post(f"https://oauth2.googleapis.com/api/v1/projects/{urllib.parse.quote(project, safe='')}"
                   "/service-accounts", json={}, headers=dict(mock._http.headers), timeout=mock.timeout)
    if r.status_code != 201:
        raise FcmMockError(f"creating a service account through oauth2.googleapis.com: {r.status_code} {r.text[:500]}")
    sa: Dict[str, Any] = r.json()
    if sa.get("token_uri") != GOOGLE_TOKEN_URI:
        raise FcmMockError(f"the service account's token_uri is {sa.get('token_uri')!r}, not Google's")
    path = mock._write_service_account(sa)
    return firebase_admin.initialize_app(credentials.Certificate(str(path)), name=app_name)


class GoogleRouting:
    """Inside this process, GOOGLE_HOSTS resolve to VIRTUAL_IP and a connection to it on port
    443 reaches the mock's TLS listener; the mock's CA is trusted through REQUESTS_CA_BUNDLE
    (requests: google-auth, send, send_each) and SSL_CERT_FILE (httpx: send_each_async; read
    when an app's messaging service is made). Every other Google name fails to resolve, so
    nothing reaches the real service. `uninstall` puts everything back."""

    _ENV = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "HTTPS_PROXY", "https_proxy",
            "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

    def __init__(self, target: Tuple[str, int], ca_path: str) -> None:
        self.target = target
        self.ca_path = ca_path
        self._saved: List[Tuple[Any, str, Callable[..., Any]]] = []
        self._env: Dict[str, Optional[str]] = {}

    def install(self) -> None:
        real_getaddrinfo = socket.getaddrinfo
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex
        target = self.target

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            name = (host.decode("ascii", "replace") if isinstance(host, bytes) else (host or "")).rstrip(".").lower()
            if name.endswith(("googleapis.com", "google.com")):
                if name not in GOOGLE_HOSTS or str(port) not in ("443", "https"):
                    raise socket.gaierror(socket.EAI_NONAME, f"{name}:{port} is not resolved while fcm-mock stands in for Google")
                return real_getaddrinfo(VIRTUAL_IP, 443, *args, **kwargs)
            return real_getaddrinfo(host, port, *args, **kwargs)

        def forwarded(address: Any) -> Any:
            if isinstance(address, tuple) and len(address) == 2 and address == (VIRTUAL_IP, 443):
                return target
            return address

        def connect(sock: socket.socket, address: Any) -> None:
            return real_connect(sock, forwarded(address))

        def connect_ex(sock: socket.socket, address: Any) -> int:
            return real_connect_ex(sock, forwarded(address))

        self._saved = [(socket, "getaddrinfo", real_getaddrinfo),
                       (socket.socket, "connect", real_connect),
                       (socket.socket, "connect_ex", real_connect_ex)]
        socket.getaddrinfo = getaddrinfo
        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        self._env = {k: os.environ.get(k) for k in self._ENV}
        for k in self._ENV:
            os.environ.pop(k, None)
        # A proxy from the environment would carry Google's names past the resolver above.
        os.environ["REQUESTS_CA_BUNDLE"] = self.ca_path
        os.environ["SSL_CERT_FILE"] = self.ca_path

    def uninstall(self) -> None:
        for owner, attr, value in reversed(self._saved):
            setattr(owner, attr, value)
        self._saved = []
        for k, v in self._env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._env = {}


