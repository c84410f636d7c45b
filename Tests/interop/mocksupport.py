"""Shared pieces of the interop suite: the fixture data, FCM-shaped tokens, and a small client
for fcm-mock's control API with pyfcm pointed at the mock."""

import datetime
import json
import os
import re
import secrets
import urllib.parse

import requests
from requests.adapters import HTTPAdapter
from pyfcm import FCMNotification

# Loopback only, whatever proxy the environment names.
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
os.environ["no_proxy"] = "127.0.0.1,localhost"

LONG_POLL_S = 5

# Two projects, so that a token of the second one is a MismatchSenderId for the first one's key.
SENDER_A = "111111111111"
PROJECT_A = "interop-a"  # the project id HTTP v1 paths and service accounts name
KEY_A = "AAAAinterop:project-a-server-key"
APP_A = "com.example.interop"
APP_A_IOS = "com.example.interop.ios"
SENDER_B = "222222222222"
PROJECT_B = "interop-b"
KEY_B = "AAAAinterop:project-b-server-key"
APP_B = "com.example.other"

MESSAGE_ID_RE = re.compile(r"0:\d{16}%[0-9a-f]{16}")
# `listening http=HOST:PORT xmpp=HOST:PORT`, then ` https=HOST:PORT` when --https-port is given
# and ` mcs=HOST:PORT` with --mcs-port.
_HTTPS_TAIL = r"(?: https=\S+:\d+)?(?: mcs=\S+:\d+)?"
LISTENING_RE = re.compile(
    r"^listening http=(?P<host>[^\s:]+):(?P<port>\d+) xmpp=\S+:\d+" + _HTTPS_TAIL + r"\s*$")
# The same line's XMPP (FCM CCS) listener address.
LISTENING_XMPP_RE = re.compile(
    r"^listening http=\S+:\d+ xmpp=(?P<host>[^\s:]+):(?P<port>\d+)" + _HTTPS_TAIL + r"\s*$")
# The same line's TLS listener (h2 and http/1.1 by ALPN).
LISTENING_HTTPS_RE = re.compile(
    r"^listening http=\S+:\d+ xmpp=\S+:\d+ https=(?P<host>[^\s:]+):(?P<port>\d+)(?: mcs=\S+:\d+)?\s*$")

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

# The Google hosts pyfcm 1.5.4 talks to (some of them through URLs hard-wired in its methods).
GOOGLE_HOSTS = ("fcm.googleapis.com", "iid.googleapis.com")


def fcm_token():
    """A fresh FCM-shaped registration token: 22 chars, ':APA91b', 123 chars (152 in all)."""
    head = "".join(secrets.choice(_ALPHABET) for _ in range(22))
    tail = "".join(secrets.choice(_ALPHABET) for _ in range(123))
    return f"{head}:APA91b{tail}"


FIXTURE_TOKEN_A = fcm_token()

FIXTURES = {
    "projects": [
        {
            "sender_id": SENDER_A,
            "project_id": PROJECT_A,
            "server_keys": [KEY_A],
            "apps": [
                {"app": APP_A, "platform": "android"},
                {"app": APP_A_IOS, "platform": "ios"},
            ],
        },
        {
            "sender_id": SENDER_B,
            "project_id": PROJECT_B,
            "server_keys": [KEY_B],
            "apps": [{"app": APP_B, "platform": "android"}],
        },
    ],
    "devices": [
        {"token": FIXTURE_TOKEN_A, "sender_id": SENDER_A, "app": APP_A,
         "platform": "android", "online": True},
    ],
}


def q(segment):
    """Percent-encodes one path segment (tokens hold ':', message ids hold ':' and '%')."""
    return urllib.parse.quote(segment, safe="")


class RedirectingAdapter(HTTPAdapter):
    """A requests transport adapter sending pyfcm's calls to Google's hosts to the mock instead.

    pyfcm 1.5.4 takes it as `FCMNotification(adapter=...)` and mounts it for http:// and https://;
    that is how its Instance ID calls (hard-wired to https://iid.googleapis.com/iid/v1:...) reach
    the mock. The path and query are kept. Anything headed for a host other than the mock's after
    the rewrite is refused, so no test can reach the real service. Every exchange is kept in
    `exchanges` as (original URL, response): pyfcm drops the bodies of some answers."""

    def __init__(self, base_url, **kwargs):
        super().__init__(**kwargs)
        self.base = urllib.parse.urlsplit(base_url)
        self.exchanges = []

    def send(self, request, **kwargs):
        original = request.url
        url = urllib.parse.urlsplit(original)
        if url.hostname in GOOGLE_HOSTS:
            request.url = urllib.parse.urlunsplit(
                (self.base.scheme, self.base.netloc, url.path, url.query, url.fragment))
        elif url.netloc != self.base.netloc:
            raise AssertionError(f"pyfcm request to neither Google nor the mock: {original}")
        response = super().send(request, **kwargs)
        self.exchanges.append((original, response))
        return response

    def last(self, path_suffix):
        """The latest response to a request whose original path ends with `path_suffix`."""
        for original, response in reversed(self.exchanges):
            if urllib.parse.urlsplit(original).path.endswith(path_suffix):
                return response
        raise AssertionError(f"no request ending in {path_suffix!r} went through the adapter: "
                             f"{[u for u, _ in self.exchanges]}")


class MockServer:
    # The XMPP listener's loopback address; conftest's `mock` fixture sets both from the
    # `listening` line.
    xmpp_host = None
    xmpp_port = None
    # The TLS listener's address, when the server was started with --https-port.
    https_host = None
    https_port = None
    binary = None  # the fcm-mock executable, for its client subcommands


    def __init__(self, base_url, proc, stderr_path):
        self.base_url = base_url
        self.proc = proc
        self.stderr_path = stderr_path
        self.http = requests.Session()
        self.http.trust_env = False

    # -- plumbing ---------------------------------------------------------------------------
    def stderr_tail(self, limit=4000):
        try:
            with open(self.stderr_path, "r", errors="replace") as f:
                return f.read()[-limit:]
        except OSError:
            return ""

    def api(self, method, path, expect=200, **kwargs):
        """Calls the control API; asserts the status and returns the decoded JSON (or None)."""
        kwargs.setdefault("timeout", LONG_POLL_S + 10)
        resp = self.http.request(method, self.base_url + path, **kwargs)
        assert resp.status_code == expect, (
            f"{method} {path} -> {resp.status_code} (wanted {expect}): {resp.text[:2000]}")
        if not resp.content:
            return None
        return resp.json()

    # -- pyfcm, pointed at the mock -----------------------------------------------------------
    def fcm(self, api_key=KEY_A):
        push = FCMNotification(api_key=api_key)
        # pyfcm 1.5.x posts to the FCM_END_POINT attribute; an instance attribute overrides it.
        push.FCM_END_POINT = self.base_url + "/fcm/send"
        push.requests_session.trust_env = False
        return push

    def fcm_redirected(self, api_key=KEY_A):
        """pyfcm with a RedirectingAdapter (as `push.adapter`): every call, including the
        Instance ID ones, goes to the mock at its real Google URL's path."""
        adapter = RedirectingAdapter(self.base_url)
        push = FCMNotification(api_key=api_key, adapter=adapter)
        push.requests_session.trust_env = False
        # pyfcm mounts a plain adapter on the class's INFO_END_POINT (an https://iid... prefix);
        # the instance attribute moves the info calls to the mock, through the adapter above.
        push.INFO_END_POINT = self.base_url + "/iid/info/"
        push.adapter = adapter
        return push

    def clock_date(self):
        """Today on the mock's clock, YYYY-MM-DD (UTC)."""
        return self.api("GET", "/api/v1/clock")["now"][:10]

    def clock_millis(self):
        """The mock's clock now, in milliseconds since the epoch."""
        now = self.api("GET", "/api/v1/clock")["now"]
        return round(datetime.datetime.fromisoformat(now).timestamp() * 1000)

    # -- XMPP (FCM CCS) connections and upstream messages ------------------------------------------
    def xmpp_connections(self, sender_id=None):
        items = self.api("GET", "/api/v1/xmpp/connections")["items"]
        return [c for c in items if sender_id is None or c.get("sender_id") == sender_id]

    def create_upstream(self, token, data, message_id):
        """A device sends `data` upstream to its app server (`POST .../upstream`, 201)."""
        body = {"data": data, "message_id": message_id}
        return self.api("POST", f"/api/v1/devices/{q(token)}/upstream", expect=201, json=body)

    def upstream(self, token):
        return self.api("GET", "/api/v1/upstream", params={"token": token})["items"]

    def set_online(self, token, online):
        dev = self.api("PATCH", f"/api/v1/devices/{q(token)}", json={"online": online})
        assert dev["online"] is online, dev
        return dev

    def subscribe(self, token, topic):
        dev = self.api("POST", f"/api/v1/devices/{q(token)}/topics/{q(topic)}")
        assert topic.lower() in [t.lower() for t in dev["topics"]], dev
        return dev

    def unsubscribe(self, token, topic):
        dev = self.api("DELETE", f"/api/v1/devices/{q(token)}/topics/{q(topic)}")
        assert topic.lower() not in [t.lower() for t in dev["topics"]], dev
        return dev

    def fault(self, when, then, times=None):
        """Injects a fault (`POST /api/v1/faults`, 201) and returns it (its `id`)."""
        body = {"when": when, "then": then}
        if times is not None:
            body["times"] = times
        return self.api("POST", "/api/v1/faults", expect=201, json=body)

    def fault_ids(self):
        """The ids of the faults still armed (`GET /api/v1/faults`; one whose `times` ran out is
        gone from the list)."""
        return [f["id"] for f in self.api("GET", "/api/v1/faults")["items"]]

    def v1_record(self, name):
        """The one message record of the HTTP v1 send answered with `name`."""
        items = self.messages(v1_name=name)
        found = [m for m in items if m.get("v1_name") == name]
        assert len(found) == 1, (name, items)
        assert found[0]["transport"] == "http_v1", found[0]
        return found[0]

    def topic(self, name, expect=200):
        return self.api("GET", f"/api/v1/topics/{q(name)}", expect=expect)

    def group(self, notification_key):
        return self.api("GET", f"/api/v1/groups/{q(notification_key)}")

    def group_request(self, method="POST", api_key=KEY_A, sender_id=SENDER_A, **kwargs):
        """Device group management (`/fcm/notification`), which pyfcm 1.5.4 has no calls for."""
        headers = {"Authorization": f"key={api_key}", "project_id": sender_id}
        kwargs.setdefault("timeout", LONG_POLL_S + 10)
        return self.http.request(method, self.base_url + "/fcm/notification", headers=headers,
                                 **kwargs)

    def records_for(self, token, kind):
        """Message records naming `token` as a recipient whose target is of `kind`."""
        return [m for m in self.messages(token=token) if m["target"]["kind"] == kind
                and any(r["token"] == token for r in m["recipients"])]

    # -- devices and what they received ---------------------------------------------------------
    def create_device(self, sender_id=SENDER_A, app=APP_A, platform="android", online=True):
        token = fcm_token()
        body = {"token": token, "sender_id": sender_id, "app": app,
                "platform": platform, "online": online}
        dev = self.api("POST", "/api/v1/devices", expect=201, json=body)
        assert dev["token"] == token, dev
        assert dev["state"] == "registered", dev
        return token

    def device(self, token):
        return self.api("GET", f"/api/v1/devices/{q(token)}")

    def inbox(self, token, wait=None, min_count=None, status=None):
        params = {}
        if wait is not None:
            params["wait"] = wait
        if min_count is not None:
            params["min"] = min_count
        if status is not None:
            params["status"] = status
        page = self.api("GET", f"/api/v1/devices/{q(token)}/messages", params=params)
        return page["items"]

    def wait_inbox(self, token, count=1):
        """Long-polls the inbox until it holds at least `count` entries (no sleeping)."""
        return self.inbox(token, wait=LONG_POLL_S, min_count=count)

    def message(self, message_id):
        return self.api("GET", f"/api/v1/messages/{q(message_id)}")

    def messages(self, **params):
        params.setdefault("limit", 1000)
        return self.api("GET", "/api/v1/messages", params=params)["items"]

    def rejected_for(self, token):
        """Rejected sends recorded for a token (filtered here too, in case a filter is ignored)."""
        items = self.messages(status="rejected", token=token)
        return [m for m in items if token in json.dumps(m)]

    def assert_inbox_only_barrier(self, token, push):
        """Proves nothing earlier reached `token`: sends one real message and long-polls for it;
        the inbox must then hold exactly that message. Avoids sleeping to prove a negative."""
        res = push.single_device_data_message(registration_id=token,
                                              data_message={"probe": "barrier"})
        assert res["success"] == 1, res
        barrier_id = res["results"][0]["message_id"]
        items = self.wait_inbox(token, 1)
        assert [e["message_id"] for e in items] == [barrier_id], items
        assert items[0]["data"] == {"probe": "barrier"}, items[0]
        return items[0]
