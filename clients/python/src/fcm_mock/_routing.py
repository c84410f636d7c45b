"""Real services' host names sent to the mock inside this process, as a hosts entry, a port
forward and a trust store entry would do for a machine: Google's for firebase-admin and Web Push
endpoints on fcm.googleapis.com, Apple's for APNs clients. One mechanism for every host set."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import FcmMockError


@dataclass(frozen=True)
class HostSet:
    """Host names routed together: `hosts` reach the mock on `ports`; any other name under one
    of `guarded` fails to resolve while they are routed, so nothing reaches the real service."""

    hosts: Tuple[str, ...]
    ports: Tuple[int, ...]
    guarded: Tuple[str, ...]


#: firebase-admin and google-auth: FCM v1, the OAuth 2.0 token endpoint, the Instance ID API (the
#: SDK's legacy topic calls); fcm.googleapis.com is also Chrome's Web Push endpoint host.
GOOGLE = HostSet(("fcm.googleapis.com", "oauth2.googleapis.com", "iid.googleapis.com"), (443,),
                 ("googleapis.com", "google.com"))
#: APNs: production, sandbox and the older development name (docs/apns.md), on both of Apple's
#: ports.
APPLE = HostSet(("api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com"),
                (443, 2197), ("push.apple.com",))

#: What routed names resolve to: 127.0.42.N, one N per routing in force, so two mocks can be
#: routed at once for different names (one Apple's, the other Google's); a connection to it on
#: a routed port reaches that routing's mock. One name reaches one mock at a time.
_VIRTUAL_NET = "127.0.42."
_FIRST_HOST = 43

_ENV = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "HTTPS_PROXY", "https_proxy",
        "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

_lock = threading.RLock()
_active: List["Routing"] = []
_saved: List[Tuple[Any, str, Callable[..., Any]]] = []
_saved_env: Dict[str, Optional[str]] = {}
_bundle_dir: Optional[str] = None


class Routing:
    """Inside this process, the names of `hosts` resolve to a loopback address of their own, and
    a connection to it on one of the set's ports reaches `target` (the mock's TLS listener); the
    CA in `ca_path` is trusted through REQUESTS_CA_BUNDLE (requests) and SSL_CERT_FILE (httpx,
    and `ssl.create_default_context()`, read when a context is made), the only CAs trusted then.
    Proxy variables are cleared, since a proxy would carry the names past the resolver. Several
    routings may be in force at once and end in any order; the last `uninstall` puts everything
    back."""

    def __init__(self, hosts: HostSet, target: Tuple[str, int], ca_path: str) -> None:
        self.hosts = hosts
        self.target = target
        self.ca_path = ca_path
        self.address = ""

    def install(self) -> None:
        """Puts the routing in force. A host name reaches one place at a time inside a process:
        FcmMockError when another routing in force sends one of these names to another mock."""
        with _lock:
            if self in _active:
                return
            for other in _active:
                shared = sorted(set(other.hosts.hosts) & set(self.hosts.hosts))
                if shared and other.target != self.target:
                    raise FcmMockError(
                        f"{', '.join(shared)} already reach another fcm-mock in this process (its TLS listener at"
                        f" {other.target[0]}:{other.target[1]}): host names route to one mock at a time, so this"
                        f" one would take its traffic. Close that FcmMock (or leave its google_hosts()/apple_hosts()"
                        f" block) first, or give the second mock's firebase-admin app the URLs of"
                        f" firebase_app(unmodified=False)")
            used = {r.address for r in _active}
            self.address = next(a for a in (f"{_VIRTUAL_NET}{n}" for n in range(_FIRST_HOST, 255))
                                if a not in used)
            _active.append(self)
            _refresh()

    def uninstall(self) -> None:
        with _lock:
            if self in _active:
                _active.remove(self)
                _refresh()

    def __enter__(self) -> "Routing":
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


def _port(port: Any) -> Optional[int]:
    text = port.decode("ascii", "replace") if isinstance(port, bytes) else str(port)
    if text == "https":
        return 443
    return int(text) if text.isdigit() else None


def _refresh() -> None:
    """Patches the resolver and `connect` while any routing is in force, and sets the CA."""
    global _bundle_dir
    if _active and not _saved:
        _patch()
    if not _active:
        for owner, attr, value in reversed(_saved):
            setattr(owner, attr, value)
        _saved.clear()
        for k, v in _saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _saved_env.clear()
        if _bundle_dir is not None:
            shutil.rmtree(_bundle_dir, ignore_errors=True)
            _bundle_dir = None
        return
    cas = list(dict.fromkeys(r.ca_path for r in _active))
    bundle = cas[0]
    if len(cas) > 1:  # mocks with CAs of their own: one file holding them all
        if _bundle_dir is None:
            _bundle_dir = tempfile.mkdtemp(prefix="fcm-mock-ca-")
        bundle = os.path.join(_bundle_dir, "bundle.pem")
        with open(bundle, "w", encoding="utf-8") as out:
            for path in cas:
                with open(path, "r", encoding="utf-8") as f:
                    out.write(f.read().rstrip("\n") + "\n")
    os.environ["REQUESTS_CA_BUNDLE"] = bundle
    os.environ["SSL_CERT_FILE"] = bundle


def _patch() -> None:
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = (host.decode("ascii", "replace") if isinstance(host, bytes) else (host or "")).rstrip(".").lower()
        for r in reversed(_active):
            if name in r.hosts.hosts:
                number = _port(port)
                if number not in r.hosts.ports:
                    raise socket.gaierror(socket.EAI_NONAME, f"{name}:{port} is not resolved while fcm-mock stands in for it")
                return real_getaddrinfo(r.address, number, *args, **kwargs)
        for r in _active:
            if any(name == g or name.endswith("." + g) for g in r.hosts.guarded):
                raise socket.gaierror(socket.EAI_NONAME, f"{name} is not resolved while fcm-mock stands in for {', '.join(r.hosts.hosts)}")
        return real_getaddrinfo(host, port, *args, **kwargs)

    def forwarded(address: Any) -> Any:
        if isinstance(address, tuple) and len(address) == 2:
            for r in _active:
                if address[0] == r.address and address[1] in r.hosts.ports:
                    return r.target
        return address

    def connect(sock: socket.socket, address: Any) -> None:
        return real_connect(sock, forwarded(address))

    def connect_ex(sock: socket.socket, address: Any) -> int:
        return real_connect_ex(sock, forwarded(address))

    _saved.extend([(socket, "getaddrinfo", real_getaddrinfo),
                   (socket.socket, "connect", real_connect),
                   (socket.socket, "connect_ex", real_connect_ex)])
    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    _saved_env.update({k: os.environ.get(k) for k in _ENV})
    for k in _ENV:
        os.environ.pop(k, None)
