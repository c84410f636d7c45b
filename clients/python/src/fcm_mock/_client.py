"""FcmMock: start or connect to an fcm-mock server and drive it through its control API."""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import requests

from ._records import (AccessToken, ApnsCertificate, ApnsCertificateInfo, ApnsKey, ApnsKeyInfo, ApnsTeam, Clock,
                       Device, Event, Fault, Group, IssuedAccessToken, Message, MessageRecord, Project, RealClient,
                       ServiceAccount, Stats, StatsSeries, Topic, UpstreamMessage, XmppConnection, endpoint_id)
from ._routing import APPLE, GOOGLE, HostSet, Routing
from .errors import (ConnectionFailed, ControlAPIError, FcmMockError, RequestTimedOut, TransportError,
                     transport_error)

#: How many of a device's newest messages a failing assertion shows.
SHOWN_MESSAGES = 5

#: The largest page the control API answers.
PAGE = 1000

Where = Union[Mapping[str, Any], Callable[[Message], bool], None]

#: What a message's `transport` may be; `fcm` stands for the three FCM ones.
TRANSPORTS = {"http": ("http",), "http_v1": ("http_v1",), "xmpp": ("xmpp",), "apns": ("apns",),
              "webpush": ("webpush",), "fcm": ("http", "http_v1", "xmpp")}

_LISTENING = re.compile(r"^listening http=(?P<http>\S+) xmpp=(?P<xmpp>\S+)(?: https=(?P<https>\S+))?"
                        r"(?: mcs=(?P<mcs>\S+))?$")


def find_binary(binary: "Union[str, os.PathLike[str], None]" = None) -> str:
    """The fcm-mock executable: `binary`, else $FCM_MOCK_BIN, else `fcm-mock` on PATH, else the
    build of the checkout the current directory is in (.build/release, then .build/debug)."""
    for given in (binary, os.environ.get("FCM_MOCK_BIN")):
        if given:
            candidate = os.fspath(given)
            path = shutil.which(candidate) if os.sep not in candidate else candidate
            if path and os.access(path, os.X_OK) and os.path.isfile(path):
                return os.path.abspath(path)
            raise FcmMockError(f"no fcm-mock executable at {candidate}")
    on_path = shutil.which("fcm-mock")
    if on_path:
        return on_path
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        for build in ("release", "debug"):
            built = folder / ".build" / build / "fcm-mock"
            if built.is_file() and os.access(built, os.X_OK):
                return str(built)
    raise FcmMockError("fcm-mock not found: pass binary=, set FCM_MOCK_BIN, put it on PATH, "
                       "or build the checkout (make release)")


def _host_port(address: str) -> "tuple[str, int]":
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _url_host(host: str) -> str:
    """`host` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


#: `serve` options whose value is a file or folder: made absolute against the caller's current
#: directory, since the server runs in a folder of its own.
PATH_FLAGS = ("db", "tls_cert", "tls_key", "tls_dir")

#: `tls.cert=` (a self-signed certificate made at start) or `tls.ca=` (the local CA) in the log,
#: as text or as JSON (`--log-format json`).
_TLS_LOG = re.compile(r"\btls\.(?:ca|cert)=(\S+)|\"tls\.(?:ca|cert)\":\s*\"([^\"]+)\"")


def _absolute(value: Any) -> str:
    return str(os.path.abspath(os.path.expanduser(os.fspath(value))))


def _child_env() -> Dict[str, str]:
    """The caller's environment without FCM_MOCK_* variables: a started server takes only the
    options `FcmMock.start` gives it (the variables would be options too, `serve` reads them)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FCM_MOCK_")}


def _die_with_parent() -> Optional[Callable[[], None]]:
    """On Linux, a `preexec_fn` that has the kernel send SIGTERM to the child when the thread that
    started it ends (prctl PR_SET_PDEATHSIG): a test run killed with SIGTERM or SIGKILL leaves no
    server behind. Only from the main thread, whose end is the process's (a worker thread that
    ends would take the server with it). None elsewhere."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl: nobody will send it
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _tls_verify(verify: "Union[bool, str, os.PathLike[str], None]") -> Union[bool, str]:
    if verify is None:
        return True
    return verify if isinstance(verify, bool) else _absolute(verify)


class FcmMock:
    """An fcm-mock server: one this process started (`FcmMock.start`) or one already running
    (`FcmMock.connect`). Every call goes through the control API (docs/control-api.md); the
    waits are its long polls, never sleeps. Use it as a context manager, or call `close()`."""

    def __init__(self, base_url: str, *, control_token: Optional[str] = None,
                 https_url: Optional[str] = None, xmpp_port: Optional[int] = None,
                 process: "Optional[subprocess.Popen[bytes]]" = None,
                 workdir: Optional[str] = None, timeout: float = 10.0,
                 mcs_port: Optional[int] = None,
                 verify: "Union[bool, str, os.PathLike[str], None]" = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.https_url = https_url.rstrip("/") if https_url else None
        self.xmpp_port = xmpp_port
        #: The MCS port real GCM clients (Chromium, firebase-messaging) connect to:
        #: `FcmMock.start(mcs_port=0)`; None without one.
        self.mcs_port = mcs_port
        self.control_token = control_token
        self.timeout = timeout
        self.process = process
        #: How an https:// control API's certificate is checked: True (the system's CAs), a CA
        #: bundle's path, or False (not at all).
        self.verify: Union[bool, str] = _tls_verify(verify)
        self._workdir = workdir or tempfile.mkdtemp(prefix="fcm-mock-client-")
        self._owns_workdir = workdir is None
        self._http = requests.Session()
        # Loopback and staging hosts alike: a proxy from the environment must not carry these,
        # nor REQUESTS_CA_BUNDLE choose the CA (`verify=` does).
        self._http.trust_env = False
        self._http.verify = self.verify
        if control_token:
            self._http.headers["Authorization"] = f"Bearer {control_token}"
        self._apps: List[Any] = []
        self._routings: List[Routing] = []
        self._google: Optional[Routing] = None
        self._ca_path: Optional[str] = None
        self._streams: List["EventStream"] = []

    # --- start, connect, stop --------------------------------------------------------------------

    @classmethod
    def start(cls, binary: "Union[str, os.PathLike[str], None]" = None,
              fixtures: "Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]], None]" = None,
              *, https: bool = False, startup_timeout: float = 20.0,
              verify: "Union[bool, str, os.PathLike[str], None]" = None, **flags: Any) -> "FcmMock":
        """Starts `fcm-mock serve` on free ports with a `:memory:` store and waits until
        `GET /readyz` answers 200. `fixtures`: a file or folder, or several. `https=True` adds
        a TLS listener (`--https-port 0`, needed by `firebase_app(unmodified=True)`). Other
        flags are passed as `--name value` (`device_rate="10/1s"`, `accept_any_key=True`,
        `mcs_port=0` for real GCM clients: `FcmMock.mcs_port`). Relative paths (`fixtures`,
        `db`, `tls_cert`, `tls_key`, `tls_dir`) are read from the current directory.

        Only these arguments configure the server: the caller's FCM_MOCK_* variables are not
        passed on to it. `http_tls=True` makes the control API https://, its certificate trusted
        through the one the server made (or `verify=`: a CA bundle, or False). On Linux the
        server ends with the thread that started it (the main thread: the process)."""
        exe = find_binary(binary)
        args = [exe, "serve", "--http-port", "0", "--xmpp-port", "0"]
        flags.setdefault("db", ":memory:")
        if https:
            flags.setdefault("https_port", 0)
        for name in PATH_FLAGS:
            value = flags.get(name)
            if value is not None and value is not False and not (name == "db" and value == ":memory:"):
                flags[name] = _absolute(value)
        if isinstance(fixtures, (str, os.PathLike)):
            fixtures = [fixtures]
        for f in fixtures or ():
            args += ["--fixtures", _absolute(f)]
        for name, value in flags.items():
            flag = "--" + name.replace("_", "-")
            if value is True:
                args.append(flag)
            elif value is not False and value is not None:
                args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
        workdir = tempfile.mkdtemp(prefix="fcm-mock-")
        out_path = os.path.join(workdir, "stdout")
        err_path = os.path.join(workdir, "stderr")
        # Files, not pipes: a busy server's log never blocks on a pipe nobody reads.
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                       cwd=workdir, env=_child_env(), preexec_fn=_die_with_parent())
        deadline = time.monotonic() + startup_timeout
        line = ""
        while True:
            with open(out_path, "r", encoding="utf-8", errors="replace") as out_file:
                first = out_file.readline()
            if first.endswith("\n"):
                line = first.strip()
                break
            if process.poll() is not None or time.monotonic() > deadline:
                if process.poll() is None:
                    process.kill()
                    process.wait()
                with open(err_path, "r", encoding="utf-8", errors="replace") as err_file:
                    stderr = err_file.read()[-4000:]
                shutil.rmtree(workdir, ignore_errors=True)
                why = (f"exited with {process.returncode}" if process.returncode is not None
                       else f"printed no listening line in {startup_timeout} s")
                raise FcmMockError(f"{' '.join(args)} {why}: {stderr.strip()}")
            time.sleep(0.01)  # the child's first line, before any server exists to long-poll
        m = _LISTENING.match(line)
        if not m:
            process.kill()
            process.wait()
            shutil.rmtree(workdir, ignore_errors=True)
            raise FcmMockError(f"unexpected first line from fcm-mock: {line!r}")
        http_host, http_port = _host_port(m.group("http"))
        if http_host == "0.0.0.0":
            http_host = "127.0.0.1"
        elif http_host == "::":
            http_host = "::1"
        host = _url_host(http_host)
        https_url = None
        if m.group("https"):
            https_url = f"https://{host}:{_host_port(m.group('https'))[1]}"
        scheme = "http"
        if flags.get("http_tls"):
            scheme = "https"
            if verify is None and not flags.get("tls_cert"):
                # The certificate the server made: its path is in the log, written before the
                # listening line.
                with open(err_path, "r", encoding="utf-8", errors="replace") as err_file:
                    made = _TLS_LOG.search(err_file.read())
                if not made:
                    process.kill()
                    process.wait()
                    shutil.rmtree(workdir, ignore_errors=True)
                    raise FcmMockError("start(http_tls=True): the server's log does not name the certificate it made "
                                       "(a log level above warning hides it): give verify= the CA to trust, or tls_cert=")
                verify = made.group(1) or made.group(2)
        mock = cls(f"{scheme}://{host}:{http_port}", https_url=https_url,
                   xmpp_port=_host_port(m.group("xmpp"))[1], process=process, workdir=workdir,
                   control_token=flags.get("control_token"),
                   mcs_port=_host_port(m.group("mcs"))[1] if m.group("mcs") else None, verify=verify)
        try:
            mock.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            mock.close()
            raise
        return mock

    @classmethod
    def connect(cls, url: str, *, control_token: Optional[str] = None,
                https_url: Optional[str] = None, timeout: float = 10.0,
                ready_timeout: float = 30.0,
                verify: "Union[bool, str, os.PathLike[str], None]" = None) -> "FcmMock":
        """Uses a server that is already running (a container, a staging host) at `url`, its
        control API's address (http://, or https:// under `serve --http-tls` or behind a TLS
        proxy); waits until it is ready. `verify` checks an https:// URL's certificate: True
        (the system's CAs; REQUESTS_CA_BUNDLE is not read), the path of a CA bundle (the mock's
        local CA, `ca.pem`), or False. `https_url` names its TLS listener when
        `firebase_app(unmodified=True)` is wanted."""
        mock = cls(url, control_token=control_token, https_url=https_url, timeout=timeout, verify=verify)
        try:
            mock.wait_ready(timeout=ready_timeout)
        except BaseException:
            mock.close()
            raise
        return mock

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Returns once `GET /readyz` answers 200; raises FcmMockError with the last answer
        after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            try:
                r = self._http.get(self.base_url + "/readyz", timeout=2)
                if r.status_code == 200:
                    return
                last = f"{r.status_code} {r.text.strip()}"
            except requests.RequestException as e:
                last = str(e)
            if self.process is not None and self.process.poll() is not None:
                raise FcmMockError(f"fcm-mock exited with {self.process.returncode} before it was ready")
            if time.monotonic() > deadline:
                raise FcmMockError(f"{self.base_url} is not ready after {timeout} s: {last}")
            # /readyz has no long poll: a server that is starting answers in milliseconds.
            time.sleep(0.05)

    def close(self) -> None:
        """Deletes the firebase-admin apps made here, undoes the process-wide wiring of
        `firebase_app(unmodified=True)`, and stops the server if this process started it
        (SIGTERM; it exits 0)."""
        if self._apps:
            import firebase_admin

            for app in self._apps:
                with contextlib.suppress(ValueError):
                    firebase_admin.delete_app(app)
            self._apps.clear()
        for stream in list(self._streams):
            stream.close()
        for routing in self._routings:
            routing.uninstall()
        self._routings.clear()
        self._google = None
        self._http.close()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._owns_workdir or self.process is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> "FcmMock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def https_port(self) -> Optional[int]:
        """The port of the TLS listener (`https=True`, `--fcm-mock-https`, or `https_url`
        given to `connect`); None without one."""
        if not self.https_url:
            return None
        return urllib.parse.urlsplit(self.https_url).port or 443

    @property
    def stderr(self) -> str:
        """What a started server wrote to stderr so far (its log)."""
        path = os.path.join(self._workdir, "stderr")
        if not os.path.exists(path):
            return ""
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read()

    # --- the control API -------------------------------------------------------------------------

    def api(self, method: str, path: str, *, json_body: Any = None,
            params: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None,
            expect: Sequence[int] = (200, 201, 204)) -> Any:
        """One control API call; the decoded JSON answer (None for 204). Any other status
        raises ControlAPIError with the server's error code and message."""
        r = self._request(method, path, json=json_body, params=params, timeout=timeout or self.timeout)
        body: Any = None
        if r.content:
            try:
                body = r.json()
            except ValueError:
                body = r.text
        if r.status_code not in expect:
            err = body.get("error") if isinstance(body, dict) else None
            if isinstance(err, dict):
                raise ControlAPIError(method, path, r.status_code, err.get("code"),
                                      str(err.get("message")), body)
            raise ControlAPIError(method, path, r.status_code, None, str(body), body)
        return body

    def _request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """One HTTP request to the mock; what `requests` raises for a transport failure becomes
        a TransportError (ConnectionFailed, RequestTimedOut) naming the URL and the cause."""
        url = self.base_url + path
        try:
            return self._http.request(method, url, **kwargs)
        except requests.RequestException as e:
            raise transport_error(method, url, e) from e

    def health(self) -> Dict[str, Any]:
        """`GET /api/v1/health`."""
        health: Dict[str, Any] = self.api("GET", "/api/v1/health", expect=(200, 503))
        return health

    def stats(self) -> Stats:
        """The counters (`GET /api/v1/stats`): records by status, errors by code, held
        deliveries, XMPP connections, devices."""
        return Stats.from_json(self.api("GET", "/api/v1/stats"))

    def stats_series(self, window: Optional[int] = None, bucket: Optional[int] = None) -> StatsSeries:
        """Sends and errors per `bucket` seconds over the last `window` seconds (server
        defaults: 600 and 10; `GET /api/v1/stats/series`). ControlAPIError 400 for a window
        outside 1-3600 s or more than 600 buckets."""
        params = {k: v for k, v in (("window", window), ("bucket", bucket)) if v is not None}
        return StatsSeries.from_json(self.api("GET", "/api/v1/stats/series", params=params or None))

    def events(self, types: Union[str, Sequence[str], None] = None, *,
               where: "Union[Mapping[str, Any], Callable[[Event], bool], None]" = None,
               timeout: Optional[float] = 10.0) -> "EventStream":
        """The event stream (`GET /api/v1/events`, docs/events.md), connected before this
        returns, so it holds every change made after the call: iterate it for `Event`s, read as
        they arrive. Only events of `types` (one name, such as `message.delivered`, or several)
        and matching `where` (a mapping the event's data holds, as `assert_delivered` matches,
        or a function of the Event) are yielded. The iteration ends `timeout` seconds after
        the call (None: when the stream is closed or the server stops);
        `EventStream.wait_for()` returns one event or raises AssertionError. Close it (`with`,
        or `close()`; `FcmMock.close()` closes those still open): the server takes at most 64
        readers. ControlAPIError 503 when that many are open."""
        return EventStream(self, types, where, timeout)

    def reset(self, fixtures: bool = True, *, clients: bool = True) -> None:
        """Back to the state right after start (fixtures applied again unless `fixtures=False`).
        Real clients (a Firefox, a Chromium) stay connected with their devices, their inboxes
        emptied; `clients=False` forgets them and closes their connections."""
        params: Dict[str, str] = {}
        if not fixtures:
            params["fixtures"] = "false"
        if not clients:
            params["clients"] = "false"
        self.api("POST", "/api/v1/reset", params=params or None)

    @property
    def devices(self) -> List[Device]:
        """Every device, oldest first (all pages)."""
        return [Device.from_json(d) for d in self._all("/api/v1/devices")]

    def device(self, token: str, *, endpoint_base: Optional[str] = None) -> Device:
        """One device by token or installation id; `endpoint_base` (an `http://` or `https://`
        origin) shows a web device's push endpoint on that origin."""
        params = {"endpoint_base": endpoint_base} if endpoint_base is not None else None
        return Device.from_json(self.api("GET", "/api/v1/devices/" + _seg(token), params=params))

    def find_devices(self, *, sender_id: Optional[str] = None, app: Optional[str] = None,
                     state: Optional[str] = None, topic: Optional[str] = None, q: Optional[str] = None,
                     client_kind: Optional[str] = None, client_id: Optional[str] = None,
                     connected: Optional[bool] = None, web_push_id: Optional[str] = None,
                     apns_token: Optional[str] = None) -> List[Device]:
        """The devices that match every filter given, oldest first (all pages): of the project
        `sender_id`, of the app `app`, in `state` (`registered`, `unregistered`, `refreshed`),
        subscribed to `topic`, whose token, fid, app or sender id holds the text `q` (any case);
        made by a real client of `client_kind` (`autopush`, `gcm`, `fcm`, or `any`: every real
        client's), of the client `client_id` (a uaid, an android id), whose client is
        `connected` or not; whose Web Push endpoint ends in `web_push_id`; with the APNs token
        `apns_token`. ControlAPIError 400 for a value the server does not take."""
        params: Dict[str, Any] = {}
        for key, value in (("sender_id", sender_id), ("app", app), ("state", state), ("topic", topic),
                           ("q", q), ("client_kind", client_kind), ("client_id", client_id),
                           ("web_push_id", web_push_id), ("apns_token", apns_token)):
            if value is not None:
                params[key] = value
        if connected is not None:
            params["connected"] = _flag(connected)
        return [Device.from_json(d) for d in self._all("/api/v1/devices", params)]

    def device_for_endpoint(self, endpoint: str) -> Device:
        """The device whose push subscription has `endpoint` (what a browser's
        `pushManager.subscribe()` or an autopush `register` answered), found by its last path
        segment (`?web_push_id=`) whatever origin it is written on. FcmMockError when none has."""
        found = self.find_devices(web_push_id=endpoint_id(endpoint))
        if not found:
            raise FcmMockError(f"no device has the push endpoint {endpoint}")
        return found[0]

    # --- real clients (Firefox, Chromium, firebase-messaging; docs/real-clients.md) ------------

    def clients(self, kind: Optional[str] = None, *, connected: Optional[bool] = None) -> List[RealClient]:
        """The real receiving clients, oldest first: of `kind` (`autopush`, `gcm`) and
        `connected` or not, when given."""
        params: Dict[str, Any] = {}
        if kind is not None:
            params["kind"] = kind
        if connected is not None:
            params["connected"] = _flag(connected)
        return [RealClient.from_json(c) for c in self._all("/api/v1/clients", params)]

    def client(self, client_id: str) -> RealClient:
        """One real client by its id (a uaid, an android id); ControlAPIError 404 when unknown."""
        return RealClient.from_json(self.api("GET", "/api/v1/clients/" + _seg(client_id)))

    def disconnect_client(self, client_id: str, backoff: bool = False) -> RealClient:
        """Closes the client's connection (a browser reconnects as it would after a network
        drop); `backoff=True` closes an autopush connection with 4774, after which Firefox stays
        away until it restarts. The client as the server answered: the close is under way, so it
        may still show the connection; `wait_for_client(client_id=…, connected=False)` waits
        until it is gone."""
        return RealClient.from_json(self.api("POST", f"/api/v1/clients/{_seg(client_id)}:disconnect",
                                             json_body={"backoff": True} if backoff else None))

    def delete_client(self, client_id: str) -> None:
        """Forgets the client with its registrations and devices (their endpoints answer 410,
        sends to them `NotRegistered`) and closes its connection."""
        self.api("DELETE", "/api/v1/clients/" + _seg(client_id))

    def wait_for_client(self, kind: Optional[str] = None, *, client_id: Optional[str] = None,
                        connected: Optional[bool] = True, timeout: float = 10.0) -> RealClient:
        """Waits until a real client (of `kind`, the one `client_id`, when given) is connected
        (`connected=False`: known and not connected; None: known) and returns it, the newest
        connected one when several match. Raises AssertionError listing the clients when
        `timeout` passes first."""
        deadline = time.monotonic() + timeout
        while True:
            found = [c for c in self.clients(kind, connected=connected)
                     if client_id is None or c.id == client_id]
            if found:
                return max(found, key=lambda c: c.last_connected_at or "")
            if time.monotonic() >= deadline:
                what = " ".join(f"{k}={v}" for k, v in (("kind", kind), ("id", client_id),
                                                        ("connected", connected)) if v is not None)
                known = "\n".join(f"  {c.kind} {c.id} connected={c.connected} user_agent={c.user_agent!r}"
                                  for c in self.clients()) or "  (none)"
                raise AssertionError(f"no real client {what} after {timeout} s; the clients:\n{known}")
            # The clients list has no long poll: a browser connects within milliseconds to
            # seconds, so asking every 50 ms costs nothing.
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def create_device(self, sender_id: Optional[str] = None, *, app: Optional[str] = None,
                      platform: str = "android", online: bool = True, token: Optional[str] = None,
                      fid: Optional[str] = None,
                      application_server_key: Union[str, bytes, None] = None,
                      apns_token: Optional[str] = None,
                      apns_environment: Optional[str] = None) -> Device:
        """A new device of the project `sender_id` (a sender id or a project id; the first
        project's when None); a token is generated unless given. `platform` is `android`, `ios` or `web`; the app, unless given,
        is the project's first app of that platform, else named as the fixtures name them (the
        Android app's id with `.ios` or `.web`). An `ios` device has an APNs token
        (`apns_token`, derived unless given; `apns_environment` `sandbox` unless said); a `web`
        device a push subscription (`Device.web_push`), bound to the VAPID public key
        `application_server_key` when given (base64url, or the 65 raw bytes of the point)."""
        # A sender id or a project id, as the server's own routes take either: the body needs
        # the sender id.
        project = self._project(sender_id)
        sender_id = str(project["sender_id"])
        if app is None:
            app = _default_app(project.get("apps") or [], platform)
        if isinstance(application_server_key, bytes):
            application_server_key = base64.urlsafe_b64encode(application_server_key).decode("ascii").rstrip("=")
        body: Dict[str, Any] = {"sender_id": sender_id, "platform": platform, "online": online}
        for key, value in (("app", app), ("token", token), ("fid", fid),
                           ("application_server_key", application_server_key),
                           ("apns_token", apns_token), ("apns_environment", apns_environment)):
            if value is not None:
                body[key] = value
        return Device.from_json(self.api("POST", "/api/v1/devices", json_body=body))

    def _project(self, sender_id: Optional[str]) -> Dict[str, Any]:
        """The project `sender_id` (a sender id or project id), or the first one."""
        if sender_id is not None:
            project: Dict[str, Any] = self.api("GET", "/api/v1/projects/" + _seg(sender_id))
            return project
        projects = self.api("GET", "/api/v1/projects")["items"]
        if not projects:
            raise FcmMockError("the mock has no project: give sender_id or load a fixture")
        first: Dict[str, Any] = projects[0]
        return first

    @property
    def projects(self) -> List[Project]:
        """Every project, in creation order (all pages)."""
        return [Project.from_json(p) for p in self._all("/api/v1/projects")]

    def project(self, project: str) -> Project:
        """One project by its sender id or project id; ControlAPIError 404 when unknown."""
        return Project.from_json(self._project(project))

    def create_project(self, sender_id: str, *, project_id: Optional[str] = None,
                       server_keys: Optional[Sequence[str]] = None,
                       apps: Optional[Sequence[Mapping[str, Any]]] = None) -> Project:
        """A new project (`POST /api/v1/projects`): `project_id` is `project-{sender_id}` unless
        given; `apps` as the API takes them (`{"app": "com.example", "platform": "android"}`,
        `"apns_credential"` for an iOS app). ControlAPIError 409 when the sender id, the project
        id or a server key exists already."""
        body: Dict[str, Any] = {"sender_id": sender_id}
        if project_id is not None:
            body["project_id"] = project_id
        if server_keys is not None:
            body["server_keys"] = list(server_keys)
        if apps is not None:
            body["apps"] = [dict(a) for a in apps]
        return Project.from_json(self.api("POST", "/api/v1/projects", json_body=body))

    def delete_project(self, project: str) -> None:
        """Forgets the project (by sender id or project id); ControlAPIError 404 when unknown."""
        self.api("DELETE", "/api/v1/projects/" + _seg(project))

    def subscribe(self, token: str, topic: str) -> Device:
        """Subscribes the device to `topic` as the client SDK would."""
        return Device.from_json(self.api("POST", f"/api/v1/devices/{_seg(token)}/topics/{_seg(topic)}"))

    def unsubscribe(self, token: str, topic: str) -> Device:
        """Removes the device's subscription to `topic`."""
        return Device.from_json(self.api("DELETE", f"/api/v1/devices/{_seg(token)}/topics/{_seg(topic)}"))

    @property
    def topics(self) -> List[Topic]:
        """Every topic with subscribers (all pages)."""
        return [Topic.from_json(t) for t in self._all("/api/v1/topics")]

    def topic(self, name: str) -> Topic:
        """One topic by its bare name (`news`): no subscribers when nobody subscribes to it;
        ControlAPIError 400 for a malformed name."""
        return Topic.from_json(self.api("GET", "/api/v1/topics/" + _seg(name)))

    @property
    def groups(self) -> List[Group]:
        """Every device group (all pages)."""
        return [Group.from_json(g) for g in self._all("/api/v1/groups")]

    def group(self, notification_key: str) -> Group:
        """One device group by its notification key; ControlAPIError 404 when unknown."""
        return Group.from_json(self.api("GET", "/api/v1/groups/" + _seg(notification_key)))

    def go_offline(self, token: str) -> Device:
        """New messages to the device wait as `pending`."""
        return self._set_online(token, False)

    def go_online(self, token: str) -> Device:
        """Every pending unexpired message is delivered, in acceptance order."""
        return self._set_online(token, True)

    def _set_online(self, token: str, online: bool) -> Device:
        return Device.from_json(self.api("PATCH", "/api/v1/devices/" + _seg(token),
                                         json_body={"online": online}))

    def unregister(self, token: str) -> Device:
        """The app was uninstalled: later sends to the device get `NotRegistered`
        (`UNREGISTERED` over HTTP v1). The device, `state` `unregistered`."""
        return Device.from_json(self.api("POST", f"/api/v1/devices/{_seg(token)}:unregister"))

    def refresh(self, token: str) -> Device:
        """Rotates the device's token: the new device (its topics and groups moved to it). Sends
        to the old token still reach it and report it as canonical; the old device's `state` is
        `refreshed` and its `canonical_token` the new token."""
        return Device.from_json(self.api("POST", f"/api/v1/devices/{_seg(token)}:refresh"))

    def delete_device(self, token: str) -> None:
        """Forgets the device: its token is unknown again."""
        self.api("DELETE", "/api/v1/devices/" + _seg(token))

    def expire_web_push(self, token: str) -> Device:
        """Ends a web device's push subscription, as a user revoking the permission does
        (`POST /api/v1/devices/{token}/web-push/expire`): pushes to it then answer 410. The
        device, `web_push_expired` true. ControlAPIError 400 for a device without a
        subscription, 404 for an unknown token."""
        return Device.from_json(self.api("POST", f"/api/v1/devices/{_seg(token)}/web-push/expire"))

    def set_apns_token_expiry(self, token: str,
                              expires_at: "Union[str, datetime.datetime, None]") -> Device:
        """When an `ios` device's APNs token expires, on the mock's clock (`PATCH
        {"expires_at"}`): an APNs send after it is 410 `ExpiredToken`. RFC 3339 text or a
        timezone-aware datetime; None: it never expires. The device, its `expires_at` set."""
        if isinstance(expires_at, datetime.datetime):
            if expires_at.tzinfo is None:
                raise ValueError("expires_at needs a timezone (datetime.timezone.utc)")
            expires_at = expires_at.astimezone(datetime.timezone.utc).isoformat(timespec="milliseconds")
            expires_at = expires_at.replace("+00:00", "Z")
        return Device.from_json(self.api("PATCH", "/api/v1/devices/" + _seg(token),
                                         json_body={"expires_at": expires_at}))

    def advance_clock(self, seconds: int) -> str:
        """Moves the mock's clock forward (held messages past their TTL expire at once); the new
        time, RFC 3339."""
        return str(self.api("POST", "/api/v1/clock", json_body={"advance_s": int(seconds)})["now"])

    def reset_clock(self) -> None:
        """Returns the mock's clock to real time."""
        self.api("POST", "/api/v1/clock", json_body={"reset": True})

    @property
    def clock(self) -> Clock:
        """The mock's time now and its offset from real time in seconds."""
        now = self.api("GET", "/api/v1/clock")
        return Clock(now=str(now["now"]), offset_s=int(now.get("offset_s") or 0))

    @contextlib.contextmanager
    def fault(self, then: Mapping[str, Any], *, when: Optional[Mapping[str, Any]] = None,
              times: Optional[int] = None) -> Iterator[Fault]:
        """A fault for the block's duration (docs/faults.md), removed on the way out:
        `with mock.fault({"status": 503, "retry_after_s": 10}, when={"transport": "http_v1"}):`."""
        fault = self.add_fault(then, when=when, times=times)
        try:
            yield fault
        finally:
            with contextlib.suppress(ControlAPIError):  # a reset in the block removed it already
                self.delete_fault(fault.id)

    @property
    def faults(self) -> List[Fault]:
        """Every fault in place, with how often each `fired` and the `times` it has left."""
        return [Fault.from_json(f) for f in self._all("/api/v1/faults")]

    def add_fault(self, then: Mapping[str, Any], *, when: Optional[Mapping[str, Any]] = None,
                  times: Optional[int] = None) -> Fault:
        """A fault (docs/faults.md) that stays until `delete_fault(fault.id)`, `clear_faults()`,
        a reset, or its `times` run out; `with fault(…)` removes it after a block."""
        body: Dict[str, Any] = {"then": dict(then)}
        if when is not None:
            body["when"] = dict(when)
        if times is not None:
            body["times"] = times
        return Fault.from_json(self.api("POST", "/api/v1/faults", json_body=body))

    def delete_fault(self, fault_id: str) -> None:
        """Removes one fault by its id (204 also for one whose `times` ran out, until a reset);
        ControlAPIError 404 for an id the server does not know."""
        self.api("DELETE", "/api/v1/faults/" + _seg(fault_id))

    def clear_faults(self) -> None:
        """Removes every fault."""
        self.api("DELETE", "/api/v1/faults")

    def service_account(self, project: Optional[str] = None) -> Path:
        """A new service account of `project` (the first project's when None), written as
        Google's JSON file, ready for `firebase_admin.credentials.Certificate`. Its `token_uri`
        is this mock's `/token`."""
        project = project or self._first_project_id()
        sa = self.api("POST", f"/api/v1/projects/{_seg(project)}/service-accounts", json_body={})
        return self._write_service_account(sa)

    def service_accounts(self, project: Optional[str] = None) -> List[ServiceAccount]:
        """The service accounts of `project` (the first project's when None), without their
        private keys."""
        project = project or self._first_project_id()
        return [ServiceAccount.from_json(a) for a in
                self._all(f"/api/v1/projects/{_seg(project)}/service-accounts")]

    def delete_service_account(self, private_key_id: str, project: Optional[str] = None) -> None:
        """Revokes the service account's key (its access tokens then get 401);
        ControlAPIError 404 when `project` (the first project when None) has no such key."""
        project = project or self._first_project_id()
        self.api("DELETE", f"/api/v1/projects/{_seg(project)}/service-accounts/{_seg(private_key_id)}")

    @property
    def access_tokens(self) -> List[AccessToken]:
        """The HTTP v1 access tokens issued since start or the last reset."""
        return [AccessToken.from_json(t) for t in self._all("/api/v1/access-tokens")]

    def create_access_token(self, project: Optional[str] = None) -> IssuedAccessToken:
        """A new HTTP v1 access token of `project` (the first project's when None) without
        signing a JWT (`POST /api/v1/projects/{project}/access-tokens`): issued as the token
        endpoint would to the project's first service account (made first when it has none).
        ControlAPIError 404 for an unknown project."""
        project = project or self._first_project_id()
        return IssuedAccessToken.from_json(self.api("POST", f"/api/v1/projects/{_seg(project)}/access-tokens"))

    def revoke_access_token(self, token_id: str) -> None:
        """Revokes an access token by its `id` (its requests then get 401); ControlAPIError 404
        when unknown."""
        self.api("DELETE", "/api/v1/access-tokens/" + _seg(token_id))

    def _write_service_account(self, sa: Mapping[str, Any]) -> Path:
        return self._write_secret(f"service-account-{sa['private_key_id']}.json", json.dumps(sa))

    def _write_secret(self, name: str, text: str) -> Path:
        """`text` written to `name` in this FcmMock's own folder (mode 0700, removed by
        `close()`), as a file of mode 0600: it holds a private key."""
        path = Path(self._workdir) / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    # --- APNs credentials and the real services' host names ------------------------------------

    def apns_key(self, team_id: str, bundle_ids: Optional[Sequence[str]] = None, *,
                 key_id: Optional[str] = None) -> ApnsKey:
        """A new APNs signing key of the team `team_id` (10 uppercase letters or digits; made if
        new), made by the mock (`POST /api/v1/apns/keys`): its key id, and its `.p8` written to
        `path` (mode 0600) for a client that takes a file. `bundle_ids` are added to the team's
        apps; None adds every iOS app of the mock's projects, so the key may send to them."""
        if bundle_ids is None:
            bundle_ids = [a["app"] for p in self._all("/api/v1/projects") for a in p.get("apps") or []
                          if a.get("platform") == "ios"]
        body: Dict[str, Any] = {"team_id": team_id, "bundle_ids": list(bundle_ids)}
        if key_id is not None:
            body["key_id"] = key_id
        made = self.api("POST", "/api/v1/apns/keys", json_body=body)
        pem = str(made["private_key_pem"])
        return ApnsKey(key_id=str(made["key_id"]), team_id=str(made["team_id"]), pem=pem,
                       path=self._write_secret(f"AuthKey_{made['key_id']}.p8", pem))

    def apns_certificate(self, bundle_id: str, environment: str = "sandbox", *,
                         bundle_ids: Optional[Sequence[str]] = None,
                         days: Optional[int] = None) -> ApnsCertificate:
        """A new APNs client certificate for the app `bundle_id` (and `bundle_ids`), good for
        `environment` (`sandbox`, `production` or `both`), issued by the mock's CA
        (`POST /api/v1/apns/certificates`; the server needs its TLS listener). Its PEM files:
        `path` (certificate and key, for aioapns' `client_cert`), `cert_path`, `key_path`."""
        body: Dict[str, Any] = {"bundle_id": bundle_id, "environment": environment}
        if bundle_ids is not None:
            body["bundle_ids"] = list(bundle_ids)
        if days is not None:
            body["days"] = days
        made = self.api("POST", "/api/v1/apns/certificates", json_body=body)
        cert, key = str(made["certificate_pem"]), str(made["private_key_pem"])
        name = f"apns-{made['id']}"
        return ApnsCertificate(
            id=str(made["id"]), bundle_id=str(made["bundle_id"]), topics=list(made.get("topics") or []),
            environments=list(made.get("environments") or []), expires_at=made.get("expires_at"),
            certificate_pem=cert, private_key_pem=key,
            path=self._write_secret(name + ".pem", cert.rstrip("\n") + "\n" + key),
            cert_path=self._write_secret(name + "-cert.pem", cert),
            key_path=self._write_secret(name + "-key.pem", key))

    @property
    def apns_keys(self) -> List[ApnsKeyInfo]:
        """Every APNs signing key (`GET /api/v1/apns/keys`), with its public key only."""
        return [ApnsKeyInfo.from_json(k) for k in self._all("/api/v1/apns/keys")]

    def import_apns_key(self, team_id: str, public_key_pem: str, *, key_id: Optional[str] = None,
                        bundle_ids: Optional[Sequence[str]] = None) -> ApnsKeyInfo:
        """Adds the sender's own APNs key by its public half (a P-256 `BEGIN PUBLIC KEY` PEM):
        provider tokens it signs are then taken. ControlAPIError 400 for any other PEM, 409 for
        a key id in use."""
        body: Dict[str, Any] = {"team_id": team_id, "public_key_pem": public_key_pem}
        if key_id is not None:
            body["key_id"] = key_id
        if bundle_ids is not None:
            body["bundle_ids"] = list(bundle_ids)
        return ApnsKeyInfo.from_json(self.api("POST", "/api/v1/apns/keys", json_body=body))

    def delete_apns_key(self, key_id: str) -> None:
        """Deletes an APNs signing key; ControlAPIError 404 for an unknown key."""
        self.api("DELETE", "/api/v1/apns/keys/" + _seg(key_id))

    @property
    def apns_teams(self) -> List[ApnsTeam]:
        """Every APNs team, in creation order (`GET /api/v1/apns/teams`)."""
        return [ApnsTeam.from_json(t) for t in self._all("/api/v1/apns/teams")]

    def set_apns_team(self, team_id: str, bundle_ids: Sequence[str]) -> ApnsTeam:
        """Makes the team, or replaces its apps (`PUT /api/v1/apns/teams/{team_id}`)."""
        return ApnsTeam.from_json(self.api("PUT", "/api/v1/apns/teams/" + _seg(team_id),
                                           json_body={"bundle_ids": list(bundle_ids)}))

    @property
    def apns_certificates(self) -> List[ApnsCertificateInfo]:
        """Every APNs client certificate the mock issued, in issue order, without private keys."""
        return [ApnsCertificateInfo.from_json(c) for c in self._all("/api/v1/apns/certificates")]

    def delete_apns_certificate(self, certificate_id: str) -> None:
        """Revokes a client certificate: its connections are refused `BadCertificate` from their
        next request on. ControlAPIError 404 for an unknown id."""
        self.api("DELETE", "/api/v1/apns/certificates/" + _seg(certificate_id))

    def ca_path(self) -> Path:
        """The mock's local CA certificate (`GET /api/v1/tls/ca.pem`), written once to this
        FcmMock's folder: what a client trusts to reach the TLS listener (`ssl_context`,
        `verify=`)."""
        if self._ca_path is None:
            ca = self._request("GET", "/api/v1/tls/ca.pem", timeout=self.timeout)
            if ca.status_code != 200:
                raise FcmMockError(f"the mock serves no local CA (GET /api/v1/tls/ca.pem -> {ca.status_code}):"
                                   " started with --tls-cert? Trust that certificate's CA yourself")
            self._ca_path = str(self._write_secret("ca.pem", ca.content.decode("ascii")))
        return Path(self._ca_path)

    def _routing(self, hosts: HostSet, what: str) -> Routing:
        """A routing of `hosts` to this mock's TLS listener (installed by the caller), undone by
        `close()` at the latest."""
        if not self.https_url:
            raise FcmMockError(f"{what} needs the mock's TLS listener: FcmMock.start(https=True), "
                               "pytest --fcm-mock-https, or FcmMock.connect(url, https_url=...)")
        parts = urllib.parse.urlsplit(self.https_url)
        routing = Routing(hosts, (parts.hostname or "127.0.0.1", parts.port or 443), str(self.ca_path()))
        self._routings.append(routing)
        return routing

    @contextlib.contextmanager
    def _routed(self, hosts: HostSet, what: str) -> Iterator[Path]:
        routing = self._routing(hosts, what)
        try:
            routing.install()
            yield Path(routing.ca_path)
        finally:
            routing.uninstall()
            with contextlib.suppress(ValueError):
                self._routings.remove(routing)

    def apple_hosts(self) -> "contextlib.AbstractContextManager[Path]":
        """For the block, inside this process, Apple's APNs hosts (api.push.apple.com,
        api.sandbox.push.apple.com, api.development.push.apple.com) on ports 443 and 2197 reach
        the mock's TLS listener, and its CA is the one trusted (REQUESTS_CA_BUNDLE,
        SSL_CERT_FILE: an `ssl.create_default_context()` made in the block trusts it); other
        names under push.apple.com do not resolve. An APNs client (aioapns) runs unmodified.
        Yields the CA's path. The same mechanism as `google_hosts()`."""
        return self._routed(APPLE, "apple_hosts()")

    def google_hosts(self) -> "contextlib.AbstractContextManager[Path]":
        """For the block, inside this process, Google's FCM, OAuth and IID hosts on port 443
        reach the mock's TLS listener, its CA trusted as `apple_hosts()` does, and other Google
        names do not resolve: for a Web Push endpoint on https://fcm.googleapis.com
        (`serve --web-push-origin`), or firebase-admin set up by hand. Yields the CA's path."""
        return self._routed(GOOGLE, "google_hosts()")

    def _first_project_id(self) -> str:
        return str(self._project(None)["project_id"])

    def firebase_app(self, project: Optional[str] = None, *, unmodified: bool = False,
                     name: Optional[str] = None) -> Any:
        """A firebase-admin App of `project` (the first project's when None) that sends to this
        mock. By default its service account's `token_uri` and its messaging service's URLs
        point at the mock. With `unmodified=True` nothing in the SDK is changed: for as long as
        this FcmMock is open, Google's FCM, OAuth and IID host names resolve to the mock's TLS
        listener inside this process and its CA is trusted (REQUESTS_CA_BUNDLE, SSL_CERT_FILE),
        as docs/v1.md describes for a machine. Deleted by `close()`."""
        from . import _firebase

        app = _firebase.make_app(self, project or self._first_project_id(), unmodified, name)
        self._apps.append(app)
        return app

    # --- what app servers sent, upstream messages and XMPP connections ------------------------

    def message_records(self, *, sender_id: Optional[str] = None, token: Optional[str] = None,
                        topic: Optional[str] = None, transport: Optional[str] = None,
                        status: Optional[str] = None, error: Optional[str] = None,
                        since: Optional[str] = None, until: Optional[str] = None,
                        v1_name: Optional[str] = None, client_kind: Optional[str] = None,
                        xmpp_message_id: Optional[str] = None, app: Optional[str] = None,
                        text: Optional[str] = None, limit: Optional[int] = None) -> List[MessageRecord]:
        """The message records (what app servers sent, refused sends included) matching every
        filter given, newest first: of the project `sender_id`, to `token`, to `topic`, over
        `transport` (`http`, `http_v1`, `xmpp`, `apns`, `webpush`), of `status` (`accepted`,
        `rejected`, or a recipient's: `delivered`, `pending`, `failed`, …), with `error` (its own
        or a recipient's: `NotRegistered`, `UNREGISTERED`, …), accepted at or after `since` and
        at or before `until` (RFC 3339, mock clock); the HTTP v1 send answered `v1_name`
        (`projects/…/messages/…`); sent to a real client's device of `client_kind` (`autopush`,
        `gcm`, `fcm`, or `any`); the XMPP send of the app server's `xmpp_message_id`; to a
        device of `app`; holding every word of `text` (docs/control-api.md#searching-messages).
        Every page, or the newest `limit` records. ControlAPIError 400 for a value the server
        does not take."""
        params: Dict[str, Any] = {}
        for key, value in (("sender_id", sender_id), ("token", token), ("topic", topic),
                           ("transport", transport), ("status", status), ("error", error),
                           ("since", since), ("until", until), ("v1_name", v1_name),
                           ("client_kind", client_kind), ("xmpp_message_id", xmpp_message_id),
                           ("app", app), ("text", text)):
            if value is not None:
                params[key] = value
        return [MessageRecord.from_json(m) for m in self._all("/api/v1/messages", params, most=limit)]

    def message_record(self, message_id: str) -> MessageRecord:
        """One message record by its message id (any recipient's id of a multicast finds it);
        ControlAPIError 404 when there is none."""
        return MessageRecord.from_json(self.api("GET", "/api/v1/messages/" + _seg(message_id)))

    def send_upstream(self, token: str, data: Mapping[str, Any], *, message_id: Optional[str] = None,
                      time_to_live: Optional[int] = None) -> UpstreamMessage:
        """The device sends `data` to its app server: `queued` until an XMPP connection of its
        sender exists, then `sent` on one. ControlAPIError 404 for an unknown token."""
        body: Dict[str, Any] = {"data": dict(data)}
        if message_id is not None:
            body["message_id"] = message_id
        if time_to_live is not None:
            body["time_to_live"] = time_to_live
        return UpstreamMessage.from_json(self.api("POST", f"/api/v1/devices/{_seg(token)}/upstream",
                                                  json_body=body))

    def upstream(self, *, sender_id: Optional[str] = None, token: Optional[str] = None,
                 status: Optional[str] = None) -> List[UpstreamMessage]:
        """The upstream messages of the project `sender_id`, from `token`, of `status`
        (`queued`, `sent`, `acked`), when given (all pages)."""
        params = {k: v for k, v in (("sender_id", sender_id), ("token", token), ("status", status))
                  if v is not None}
        return [UpstreamMessage.from_json(u) for u in self._all("/api/v1/upstream", params)]

    @property
    def xmpp_connections(self) -> List[XmppConnection]:
        """The app servers' open XMPP connections (all pages)."""
        return [XmppConnection.from_json(c) for c in self._all("/api/v1/xmpp/connections")]

    def drain_xmpp(self, connection_id: Optional[str] = None) -> List[XmppConnection]:
        """Sends `CONNECTION_DRAINING` on the connection `connection_id`, or on every one when
        None; a draining connection nacks new downstream messages and is closed once nothing is
        pending. The connections drained. ControlAPIError 404 for a connection that is not open,
        or is draining already."""
        if connection_id is not None:
            drained = self.api("POST", f"/api/v1/xmpp/connections/{_seg(connection_id)}:drain")
            return [XmppConnection.from_json(drained)]
        return [XmppConnection.from_json(c) for c in self.api("POST", "/api/v1/xmpp:drain")["items"]]

    # --- what devices received -------------------------------------------------------------------

    def messages(self, token: str, *, status: Optional[str] = None, newest_first: bool = False,
                 limit: Optional[int] = None) -> List[Message]:
        """The device's inbox now (of `status`, when given), oldest first, or newest first with
        `newest_first=True` (`order=newest`); every page, or the first `limit` entries (with
        `newest_first`, the newest `limit` for the price of one request)."""
        params: Dict[str, Any] = {}
        if status:
            params["status"] = status
        if newest_first:
            params["order"] = "newest"
        return [Message.from_json(e) for e in
                self._all(f"/api/v1/devices/{_seg(token)}/messages", params, most=limit)]

    def message(self, token: str, message_id: str) -> Message:
        """One entry of the device's inbox by its message id, its status as of now
        (`GET /api/v1/devices/{token}/messages/{message_id}`); ControlAPIError 404 when it is not
        one of the device's entries."""
        return Message.from_json(self.api("GET", f"/api/v1/devices/{_seg(token)}/messages/{_seg(message_id)}"))

    def wait_for_messages(self, token: str, count: int = 1, timeout: float = 5.0, *,
                          status: Optional[str] = None,
                          transport: Optional[str] = None) -> List[Message]:
        """Waits (the server's long poll, not a sleep) until the device's inbox holds at least
        `count` entries (of `status`, and of `transport`: `http`, `http_v1`, `xmpp`, `apns`,
        `webpush`, or `fcm` for the three FCM ones, when given) and returns them all, oldest
        first (`count=0`: at once). Raises AssertionError, showing the device's newest
        messages, when `timeout` passes first."""
        accept = _accept(transport, None)
        if count <= 0:
            return [m for m in self._poll(token, 0, 0.0, status) if accept(m)]
        got, _ = self._wait(token, count, timeout, status, accept)
        if len(got) < count:
            what = "".join(f" with {k} {v}" for k, v in (("status", status), ("transport", transport)) if v)
            raise AssertionError(f"device {_short(token)} has {len(got)} message(s){what} after"
                                 f" {timeout} s, {count} expected\n{self._recent(token, transport)}")
        return got

    def assert_delivered(self, token: str, where: Where = None, timeout: float = 5.0, *,
                         transport: Optional[str] = None) -> Message:
        """Waits until the device has a delivered message (of `transport`, when given) matching
        `where`: a mapping whose every key the message holds with that value (a mapping as a
        value matches a sub-mapping), read from `Message.fields`: an FCM message's `data`, an
        APNs payload's keys (the custom ones beside `aps`, and those inside `aps`), a Web Push
        plaintext that is a JSON object; or a function of the Message. Returns the first match;
        AssertionError showing the device's newest messages and their payloads otherwise."""
        got = self._wait_delivered(token, timeout, _accept(transport, where))
        if got is None:
            what = "".join(f" {k} {v!r}" for k, v in (("over", transport), ("matching", where)) if v is not None)
            raise AssertionError(f"no message{what} delivered to device {_short(token)} within"
                                 f" {timeout} s\n{self._recent(token, transport)}")
        return got

    def assert_no_messages(self, token: str, within: float = 0.5, *,
                           transport: Optional[str] = None) -> None:
        """Fails when the device receives anything (any status; of `transport`, when given)
        within `within` seconds, or holds something already."""
        got, _ = self._wait(token, 1, within, None, _accept(transport, None))
        if got:
            over = f" over {transport}" if transport else ""
            raise AssertionError(f"device {_short(token)} received {len(got)} message(s){over}, none"
                                 f" expected\n{self._recent(token, transport)}")

    def _wait(self, token: str, count: int, wait: float, status: Optional[str],
              accept: Callable[[Message], bool]) -> "tuple[List[Message], List[Message]]":
        """The inbox's entries (of `status`) that `accept` takes, once there are `count` of
        them or `wait` seconds passed, and every entry seen: long polls for one entry more than
        seen each time, so the server answers as soon as anything new arrives."""
        deadline = time.monotonic() + wait
        need = count
        while True:
            seen = self._poll(token, need, max(0.0, deadline - time.monotonic()), status)
            taken = [m for m in seen if accept(m)]
            if len(taken) >= count or time.monotonic() >= deadline:
                return taken, seen
            need = len(seen) + count - len(taken)

    #: Inbox statuses an entry may leave for `delivered`: held for an offline device, or written
    #: to a real client that has not acknowledged it yet.
    _ON_THE_WAY = ("pending", "sent")

    def _wait_delivered(self, token: str, wait: float, accept: Callable[[Message], bool]) -> Optional[Message]:
        """The first delivered entry that `accept` takes, waiting up to `wait` seconds; None then.

        Counting delivered entries is no way to wait for a new one: a delivered entry may leave
        that status as the new one comes (an APNs notification with the same `apns-collapse-id`
        turns the one on the screen `replaced`). So the whole inbox is long-polled for one entry
        more than it holds, and while an entry that `accept` takes is on its way (`pending`,
        `sent`), its turning `delivered` is waited for as a delivered count one higher, in polls
        of at most a second, so a delivered entry leaving meanwhile costs that second at most."""
        deadline = time.monotonic() + wait
        inbox = self._poll(token, 0, 0.0, None)
        while True:
            for m in inbox:
                if m.status == "delivered" and accept(m):
                    return m
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if any(m.status in self._ON_THE_WAY and accept(m) for m in inbox):
                delivered = sum(1 for m in inbox if m.status == "delivered")
                self._poll(token, delivered + 1, min(1.0, remaining), "delivered")
                inbox = self._poll(token, 0, 0.0, None)
            else:
                inbox = self._poll(token, len(inbox) + 1, remaining, None)

    def _poll(self, token: str, count: int, wait: float, status: Optional[str]) -> List[Message]:
        """The device's inbox (of `status`) once it holds `count` entries, or at the end of
        `wait` seconds: the server's long poll (`?wait=&min=`), 60 s at most per call. A page
        holds 1000 entries at most, and the server answers a full page at once whatever `min`
        asks: the wait goes on from the last full page's cursor for what is still missing, so a
        count above a page waits like any other."""
        deadline = time.monotonic() + wait
        path = f"/api/v1/devices/{_seg(token)}/messages"
        before: List[Dict[str, Any]] = []  # the full pages already read
        cursor: Optional[Any] = None       # where the page after them starts
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            params: Dict[str, Any] = {"limit": PAGE, "min": max(1, count - len(before)),
                                      "wait": f"{min(60.0, remaining):.3f}"}
            if status:
                params["status"] = status
            if cursor is not None:
                params["cursor"] = cursor
            try:
                page = self.api("GET", path, params=params, timeout=min(60.0, remaining) + self.timeout)
            except ControlAPIError as e:
                if e.status != 404 or "does not exist" not in e.message:
                    raise
                if remaining <= 0:
                    return []
                # A server older than control API 1.2 answers a long poll on a device that
                # does not exist yet at once: ask again until the first send registers it.
                time.sleep(min(0.05, remaining))
                continue
            items: List[Dict[str, Any]] = page["items"]
            if page.get("next"):  # a full page: the next one is asked for at once
                before += items
                cursor = page["next"]
                continue
            if len(before) + len(items) >= count or time.monotonic() >= deadline:
                return [Message.from_json(e) for e in before + items]
            if len(items) >= PAGE:
                # The last page is full and nothing follows: the server answered without
                # waiting. The same page less its last entry has a cursor to wait from.
                shorter = dict(params, limit=len(items) - 1, wait=0)
                shorter.pop("min", None)
                head = self.api("GET", path, params=shorter)
                if head.get("next"):
                    before += head["items"]
                    cursor = head["next"]
                else:
                    # Entries changed in between (left `status`): nothing to wait from yet.
                    time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _recent(self, token: str, transport: Optional[str] = None) -> str:
        """The device's newest messages (of `transport`, when given), for an assertion's
        message."""
        kinds = TRANSPORTS.get(transport or "")
        try:
            page = self.api("GET", f"/api/v1/devices/{_seg(token)}/messages",
                            params={"order": "newest", "limit": 1000 if kinds else SHOWN_MESSAGES})
        except ControlAPIError as e:
            return f"(its messages could not be read: {e})"
        entries = [m for m in map(Message.from_json, page["items"])
                   if kinds is None or m.transport in kinds][:SHOWN_MESSAGES]
        which = f"{transport} messages" if kinds else "messages"
        if not entries:
            return f"device {_short(token)} has no {which}"
        lines = [f"newest {which} of device {_short(token)} (newest first):"]
        lines += [f"  {m.summary()}" for m in entries]
        return "\n".join(lines)

    def _all(self, path: str, params: Optional[Mapping[str, Any]] = None, *,
             most: Optional[int] = None) -> List[Dict[str, Any]]:
        """Every item of the list at `path` (page after page), or its first `most`."""
        items: List[Dict[str, Any]] = []
        query: Dict[str, Any] = dict(params or {})
        while True:
            query["limit"] = PAGE if most is None else max(1, min(PAGE, most - len(items)))
            page = self.api("GET", path, params=query)
            items += page["items"]
            if not page.get("next") or (most is not None and len(items) >= most):
                return items if most is None else items[:most]
            query["cursor"] = page["next"]


class EventStream:
    """An open `GET /api/v1/events` (made by `FcmMock.events`): an iterator of `Event`s, read
    from the connection as they come (one socket read at a time, never the whole stream), that
    ends at its deadline. A context manager; `close()` leaves the stream."""

    def __init__(self, mock: FcmMock, types: Union[str, Sequence[str], None],
                 where: "Union[Mapping[str, Any], Callable[[Event], bool], None]",
                 timeout: Optional[float]) -> None:
        self._mock = mock
        self._types = None if types is None else ({types} if isinstance(types, str) else set(types))
        self._where = where
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self._buffer = b""
        self._fields: Dict[str, str] = {}
        self._data: List[str] = []
        self._closed = False
        parts = urllib.parse.urlsplit(mock.base_url)
        path = (parts.path or "") + "/api/v1/events"
        self.url = mock.base_url + "/api/v1/events"
        connect_timeout = mock.timeout if timeout is None else max(0.001, min(mock.timeout, timeout))
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname or "127.0.0.1", parts.port or 443,
                                               timeout=connect_timeout, context=_ssl_context(mock.verify))
        else:
            conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80,
                                              timeout=connect_timeout)
        self._conn = conn
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        auth = mock._http.headers.get("Authorization")
        if auth:
            headers["Authorization"] = str(auth)
        try:
            conn.request("GET", path, headers=headers)
            # The socket kept apart: the connection lets go of it (`sock` None) as soon as a
            # response says it will close (an SSE stream through a proxy, say).
            self._sock: Optional[socket.socket] = conn.sock
            self._response = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _socket_error("GET", self.url, e) from e
        if self._response.status != 200:
            body: Any = self._response.read().decode("utf-8", "replace")
            conn.close()
            with contextlib.suppress(ValueError):
                body = json.loads(body)
            err = body.get("error") if isinstance(body, dict) else None
            if isinstance(err, dict):
                raise ControlAPIError("GET", "/api/v1/events", self._response.status, err.get("code"),
                                      str(err.get("message")), body)
            raise ControlAPIError("GET", "/api/v1/events", self._response.status, None, str(body), body)
        mock._streams.append(self)

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        event = self._next(self.deadline)
        if event is None:
            self.close()
            raise StopIteration
        return event

    def wait_for(self, types: Union[str, Sequence[str], None] = None, *,
                 where: "Union[Mapping[str, Any], Callable[[Event], bool], None]" = None,
                 timeout: Optional[float] = None) -> Event:
        """The next event (of the stream's filters) also of `types` and matching `where`;
        AssertionError when none comes within `timeout` seconds (None: by the stream's
        deadline). The stream is closed once its time is up."""
        wanted = None if types is None else ({types} if isinstance(types, str) else set(types))
        deadline = self.deadline
        if timeout is not None:
            own = time.monotonic() + timeout
            deadline = own if deadline is None else min(deadline, own)
        while True:
            event = self._next(deadline)
            if event is None:
                self.close()
                what = "".join(f" {k} {v!r}" for k, v in (("of", types), ("matching", where)) if v is not None)
                raise AssertionError(f"no event{what} on {self.url} in time")
            if (wanted is None or event.type in wanted) and _event_matches(event, where):
                return event

    def close(self) -> None:
        """Leaves the stream (the server frees its place at once)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            if self._sock is not None:
                self._sock.shutdown(socket.SHUT_RDWR)
        # The response may own the socket by now (a stream that said it would close).
        with contextlib.suppress(Exception):
            self._response.close()
        self._conn.close()
        with contextlib.suppress(ValueError):
            self._mock._streams.remove(self)

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self, deadline: Optional[float]) -> Optional[Event]:
        """The next event that passes the stream's filters, or None at `deadline` or the
        stream's end."""
        while not self._closed:
            line = self._line(deadline)
            if line is None:
                return None
            if line == "":
                event = self._dispatch()
                if event is not None and (self._types is None or event.type in self._types) \
                        and _event_matches(event, self._where):
                    return event
                continue
            if line.startswith(":"):  # a comment: the server's keepalive
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                self._data.append(value)
            elif name in ("event", "id"):
                self._fields[name] = value
        return None

    def _dispatch(self) -> Optional[Event]:
        fields, data = self._fields, self._data
        self._fields, self._data = {}, []
        if not data and "event" not in fields:
            return None
        text = "\n".join(data)
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        return Event(type=fields.get("event", "message"), data=value, id=fields.get("id"))

    def _line(self, deadline: Optional[float]) -> Optional[str]:
        """One line of the stream, read as it comes; None at `deadline` or the end."""
        while b"\n" not in self._buffer:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
            sock = self._sock
            if sock is None:
                return None
            try:
                sock.settimeout(None if deadline is None else max(0.001, deadline - time.monotonic()))
                chunk = self._response.read1(65536)
            except (socket.timeout, TimeoutError):
                return None
            except (OSError, http.client.HTTPException, ValueError):
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.rstrip(b"\r").decode("utf-8", "replace")


def _ssl_context(verify: Union[bool, str]) -> ssl.SSLContext:
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


def _socket_error(method: str, url: str, cause: BaseException) -> TransportError:
    """The package's error for a socket-level failure (the event stream's own connection)."""
    if isinstance(cause, (socket.timeout, TimeoutError)):
        return RequestTimedOut(method, url, cause)
    return ConnectionFailed(method, url, cause)


def _event_matches(event: Event, where: "Union[Mapping[str, Any], Callable[[Event], bool], None]") -> bool:
    if where is None:
        return True
    if callable(where):
        return bool(where(event))
    return isinstance(event.data, Mapping) and _holds(event.data, where)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _seg(value: str) -> str:
    """One path segment, percent-encoded (tokens hold ':', message ids '%')."""
    return urllib.parse.quote(value, safe="")


def _short(token: str) -> str:
    return token if len(token) <= 24 else token[:20] + "…"


def _default_app(apps: Sequence[Mapping[str, Any]], platform: str) -> Optional[str]:
    """The project's first app of `platform`; else, as the fixtures name them, the Android app's
    id (the first app's) with `.ios` or `.web`; None for a project without apps."""
    for a in apps:
        if a.get("platform") == platform:
            return str(a["app"])
    base = next((a for a in apps if a.get("platform") == "android"), apps[0] if apps else None)
    if base is None:
        return None
    return str(base["app"]) if platform == "android" else f"{base['app']}.{platform}"


def _accept(transport: Optional[str], where: Where) -> Callable[[Message], bool]:
    """The test an entry must pass: of `transport` (TRANSPORTS' names) and matching `where`."""
    kinds: Optional[Sequence[str]] = None
    if transport is not None:
        if transport not in TRANSPORTS:
            raise ValueError(f"transport {transport!r} is none of {', '.join(TRANSPORTS)}")
        kinds = TRANSPORTS[transport]
    return lambda m: (kinds is None or m.transport in kinds) and _matches(m, where)


def _matches(m: Message, where: Where) -> bool:
    if where is None:
        return True
    if callable(where):
        return bool(where(m))
    return _holds(m.fields, where)


def _holds(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """Every key of `want` is in `have` with its value; a mapping value, as a sub-mapping."""
    for key, value in want.items():
        if key not in have:
            return False
        got = have[key]
        if isinstance(value, Mapping) and isinstance(got, Mapping):
            if not _holds(got, value):
                return False
        elif got != value:
            return False
    return True
