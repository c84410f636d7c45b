"""FcmMock: start or connect to an fcm-mock server and drive it through its control API."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import requests

from ._records import Device, Fault, Message
from .errors import ControlAPIError, FcmMockError

#: How many of a device's newest messages a failing assertion shows.
SHOWN_MESSAGES = 5

Where = Union[Mapping[str, Any], Callable[[Message], bool], None]

_LISTENING = re.compile(r"^listening http=(?P<http>\S+) xmpp=(?P<xmpp>\S+)(?: https=(?P<https>\S+))?$")


def find_binary(binary: Optional[str] = None) -> str:
    """The fcm-mock executable: `binary`, else $FCM_MOCK_BIN, else `fcm-mock` on PATH, else the
    build of the checkout the current directory is in (.build/release, then .build/debug)."""
    for candidate in (binary, os.environ.get("FCM_MOCK_BIN")):
        if candidate:
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


class FcmMock:
    """An fcm-mock server: one this process started (`FcmMock.start`) or one already running
    (`FcmMock.connect`). Every call goes through the control API (docs/control-api.md); the
    waits are its long polls, never sleeps. Use it as a context manager, or call `close()`."""

    def __init__(self, base_url: str, *, control_token: Optional[str] = None,
                 https_url: Optional[str] = None, xmpp_port: Optional[int] = None,
                 process: "Optional[subprocess.Popen[bytes]]" = None,
                 workdir: Optional[str] = None, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.https_url = https_url.rstrip("/") if https_url else None
        self.xmpp_port = xmpp_port
        self.control_token = control_token
        self.timeout = timeout
        self.process = process
        self._workdir = workdir or tempfile.mkdtemp(prefix="fcm-mock-client-")
        self._owns_workdir = workdir is None
        self._http = requests.Session()
        # Loopback and staging hosts alike: a proxy from the environment must not carry these.
        self._http.trust_env = False
        if control_token:
            self._http.headers["Authorization"] = f"Bearer {control_token}"
        self._apps: List[Any] = []
        self._routing: Optional[Any] = None

    # --- start, connect, stop --------------------------------------------------------------------

    @classmethod
    def start(cls, binary: Optional[str] = None, fixtures: Union[str, Sequence[str], None] = None,
              *, https: bool = False, startup_timeout: float = 20.0, **flags: Any) -> "FcmMock":
        """Starts `fcm-mock serve` on free ports with a `:memory:` store and waits until
        `GET /readyz` answers 200. `fixtures`: a file or folder, or several. `https=True` adds
        a TLS listener (`--https-port 0`, needed by `firebase_app(unmodified=True)`). Other
        flags are passed as `--name value` (`device_rate="10/1s"`, `accept_any_key=True`)."""
        exe = find_binary(binary)
        args = [exe, "serve", "--http-port", "0", "--xmpp-port", "0"]
        flags.setdefault("db", ":memory:")
        if https:
            flags.setdefault("https_port", 0)
        if isinstance(fixtures, (str, os.PathLike)):
            fixtures = [fixtures]
        for f in fixtures or ():
            args += ["--fixtures", os.fspath(f)]
        for name, value in flags.items():
            flag = "--" + name.replace("_", "-")
            if value is True:
                args.append(flag)
            elif value is not False and value is not None:
                args += [flag, str(value)]
        workdir = tempfile.mkdtemp(prefix="fcm-mock-")
        out_path = os.path.join(workdir, "stdout")
        err_path = os.path.join(workdir, "stderr")
        # Files, not pipes: a busy server's log never blocks on a pipe nobody reads.
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                       cwd=workdir)
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
            raise FcmMockError(f"unexpected first line from fcm-mock: {line!r}")
        http_host, http_port = _host_port(m.group("http"))
        if http_host in ("0.0.0.0", "::"):
            http_host = "127.0.0.1"
        https_url = None
        if m.group("https"):
            https_url = f"https://{http_host}:{_host_port(m.group('https'))[1]}"
        mock = cls(f"http://{http_host}:{http_port}", https_url=https_url,
                   xmpp_port=_host_port(m.group("xmpp"))[1], process=process, workdir=workdir,
                   control_token=flags.get("control_token"))
        try:
            mock.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            mock.close()
            raise
        return mock

    @classmethod
    def connect(cls, url: str, *, control_token: Optional[str] = None,
                https_url: Optional[str] = None, timeout: float = 10.0,
                ready_timeout: float = 30.0) -> "FcmMock":
        """Uses a server that is already running (a container, a staging host) at `url`, its
        plain HTTP address; waits until it is ready. `https_url` names its TLS listener when
        `firebase_app(unmodified=True)` is wanted."""
        mock = cls(url, control_token=control_token, https_url=https_url, timeout=timeout)
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
        if self._routing is not None:
            self._routing.uninstall()
            self._routing = None
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
        r = self._http.request(method, self.base_url + path, json=json_body, params=params,
                               timeout=timeout or self.timeout)
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

    def health(self) -> Dict[str, Any]:
        """`GET /api/v1/health`."""
        health: Dict[str, Any] = self.api("GET", "/api/v1/health", expect=(200, 503))
        return health

    def reset(self, fixtures: bool = True) -> None:
        """Back to the state right after start (fixtures applied again unless `fixtures=False`)."""
        self.api("POST", "/api/v1/reset", params=None if fixtures else {"fixtures": "false"})

    @property
    def devices(self) -> List[Device]:
        """Every device, oldest first (all pages)."""
        return [Device.from_json(d) for d in self._all("/api/v1/devices")]

    def device(self, token: str) -> Device:
        """One device by token or installation id."""
        return Device.from_json(self.api("GET", "/api/v1/devices/" + _seg(token)))

    def create_device(self, sender_id: Optional[str] = None, *, app: Optional[str] = None,
                      platform: str = "android", online: bool = True, token: Optional[str] = None,
                      fid: Optional[str] = None) -> Device:
        """A new device of the project `sender_id` (the first project's when None); a token is
        generated unless given."""
        if sender_id is None:
            projects = self.api("GET", "/api/v1/projects")["items"]
            if not projects:
                raise FcmMockError("the mock has no project: give sender_id or load a fixture")
            sender_id = projects[0]["sender_id"]
            if app is None:
                apps = [a for a in projects[0].get("apps", []) if a.get("platform") == platform]
                app = apps[0]["app"] if apps else None
        body: Dict[str, Any] = {"sender_id": sender_id, "platform": platform, "online": online}
        for key, value in (("app", app), ("token", token), ("fid", fid)):
            if value is not None:
                body[key] = value
        return Device.from_json(self.api("POST", "/api/v1/devices", json_body=body))

    def subscribe(self, token: str, topic: str) -> Device:
        """Subscribes the device to `topic` as the client SDK would."""
        return Device.from_json(self.api("POST", f"/api/v1/devices/{_seg(token)}/topics/{_seg(topic)}"))

    def unsubscribe(self, token: str, topic: str) -> Device:
        """Removes the device's subscription to `topic`."""
        return Device.from_json(self.api("DELETE", f"/api/v1/devices/{_seg(token)}/topics/{_seg(topic)}"))

    def go_offline(self, token: str) -> Device:
        """New messages to the device wait as `pending`."""
        return self._set_online(token, False)

    def go_online(self, token: str) -> Device:
        """Every pending unexpired message is delivered, in acceptance order."""
        return self._set_online(token, True)

    def _set_online(self, token: str, online: bool) -> Device:
        return Device.from_json(self.api("PATCH", "/api/v1/devices/" + _seg(token),
                                         json_body={"online": online}))

    def advance_clock(self, seconds: int) -> str:
        """Moves the mock's clock forward (held messages past their TTL expire at once); the new
        time, RFC 3339."""
        return str(self.api("POST", "/api/v1/clock", json_body={"advance_s": int(seconds)})["now"])

    def reset_clock(self) -> None:
        """Returns the mock's clock to real time."""
        self.api("POST", "/api/v1/clock", json_body={"reset": True})

    @contextlib.contextmanager
    def fault(self, then: Mapping[str, Any], *, when: Optional[Mapping[str, Any]] = None,
              times: Optional[int] = None) -> Iterator[Fault]:
        """A fault for the block's duration (docs/faults.md), removed on the way out:
        `with mock.fault({"status": 503, "retry_after_s": 10}, when={"transport": "http_v1"}):`."""
        body: Dict[str, Any] = {"then": dict(then)}
        if when is not None:
            body["when"] = dict(when)
        if times is not None:
            body["times"] = times
        created = self.api("POST", "/api/v1/faults", json_body=body)
        fault = Fault(id=str(created["id"]), raw=created)
        try:
            yield fault
        finally:
            with contextlib.suppress(ControlAPIError):  # a reset in the block removed it already
                self.api("DELETE", "/api/v1/faults/" + _seg(fault.id))

    def service_account(self, project: Optional[str] = None) -> Path:
        """A new service account of `project` (the first project's when None), written as
        Google's JSON file, ready for `firebase_admin.credentials.Certificate`. Its `token_uri`
        is this mock's `/token`."""
        project = project or self._first_project_id()
        sa = self.api("POST", f"/api/v1/projects/{_seg(project)}/service-accounts", json_body={})
        return self._write_service_account(sa)

    def _write_service_account(self, sa: Mapping[str, Any]) -> Path:
        path = Path(self._workdir) / f"service-account-{sa['private_key_id']}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds a private key
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(sa, f)
        return path

    def _first_project_id(self) -> str:
        projects = self.api("GET", "/api/v1/projects")["items"]
        if not projects:
            raise FcmMockError("the mock has no project: give one or load a fixture")
        return str(projects[0]["project_id"])

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

    # --- what devices received -------------------------------------------------------------------

    def messages(self, token: str, *, status: Optional[str] = None) -> List[Message]:
        """The device's inbox now, oldest first (all pages)."""
        params = {"status": status} if status else None
        return [Message.from_json(e) for e in
                self._all(f"/api/v1/devices/{_seg(token)}/messages", params)]

    def wait_for_messages(self, token: str, count: int = 1, timeout: float = 5.0, *,
                          status: Optional[str] = None) -> List[Message]:
        """Waits (a long poll, not a sleep) until the device's inbox holds at least `count`
        entries (of `status`, when given) and returns them all, oldest first. Raises
        AssertionError, showing the device's newest messages, when `timeout` passes first."""
        got = self._poll(token, count, timeout, status)
        if len(got) < count:
            raise AssertionError(f"device {_short(token)} has {len(got)} message(s)"
                                 f"{' with status ' + status if status else ''} after {timeout} s,"
                                 f" {count} expected\n{self._recent(token)}")
        return got

    def assert_delivered(self, token: str, where: Where = None, timeout: float = 5.0) -> Message:
        """Waits until the device has a delivered message matching `where`: a mapping that the
        message's `data` must contain (every key with its value), or a function of the Message.
        Returns the first match; AssertionError with the device's newest messages otherwise."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            got = self._poll(token, seen + 1, max(0.0, deadline - time.monotonic()), "delivered")
            for m in got:
                if _matches(m, where):
                    return m
            seen = len(got)
            if time.monotonic() >= deadline:
                what = f" matching {where!r}" if where is not None else ""
                raise AssertionError(f"no message{what} delivered to device {_short(token)} within"
                                     f" {timeout} s\n{self._recent(token)}")

    def assert_no_messages(self, token: str, within: float = 0.5) -> None:
        """Fails when the device receives anything (any status) within `within` seconds, or
        holds something already."""
        got = self._poll(token, 1, within, None)
        if got:
            raise AssertionError(f"device {_short(token)} received {len(got)} message(s), none"
                                 f" expected\n{self._recent(token)}")

    def _poll(self, token: str, count: int, wait: float, status: Optional[str]) -> List[Message]:
        """The device's inbox (of `status`) once it holds `count` entries, or at the end of
        `wait` seconds: the server's long poll (`?wait=&min=`), 60 s at most per call."""
        deadline = time.monotonic() + wait
        path = f"/api/v1/devices/{_seg(token)}/messages"
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            params: Dict[str, Any] = {"limit": 1000, "min": max(1, count),
                                      "wait": f"{min(60.0, remaining):.3f}"}
            if status:
                params["status"] = status
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
            items = page["items"]
            cursor = page.get("next")
            while cursor:  # more than a page: the rest, without waiting
                rest = self.api("GET", path, params={**params, "wait": 0, "cursor": cursor})
                items += rest["items"]
                cursor = rest.get("next")
            if len(items) >= count or time.monotonic() >= deadline:
                return [Message.from_json(e) for e in items]

    def _recent(self, token: str) -> str:
        """The device's newest messages, for an assertion's message."""
        try:
            page = self.api("GET", f"/api/v1/devices/{_seg(token)}/messages",
                            params={"order": "newest", "limit": SHOWN_MESSAGES})
        except ControlAPIError as e:
            return f"(its messages could not be read: {e})"
        entries = [Message.from_json(e) for e in page["items"]]
        if not entries:
            return f"device {_short(token)} has no messages"
        lines = [f"newest messages of device {_short(token)} (newest first):"]
        lines += [f"  {m.summary()}" for m in entries]
        return "\n".join(lines)

    def _all(self, path: str, params: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
        items: List[Dict[str, Any]] = []
        query: Dict[str, Any] = dict(params or {})
        query["limit"] = 1000
        while True:
            page = self.api("GET", path, params=query)
            items += page["items"]
            if not page.get("next"):
                return items
            query["cursor"] = page["next"]


def _seg(value: str) -> str:
    """One path segment, percent-encoded (tokens hold ':', message ids '%')."""
    return urllib.parse.quote(value, safe="")


def _short(token: str) -> str:
    return token if len(token) <= 24 else token[:20] + "…"


def _matches(m: Message, where: Where) -> bool:
    if where is None:
        return True
    if callable(where):
        return bool(where(m))
    data = m.data or {}
    return all(key in data and data[key] == value for key, value in where.items())
