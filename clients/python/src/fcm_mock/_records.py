"""Typed views of the control API's JSON (docs/control-api.md)."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class ApnsMessage:
    """What an APNs send put on the phone (the inbox entry's `effective.apns`): the `apns-*`
    headers with Apple's defaults filled in, and the payload as received."""

    headers: Dict[str, str]
    payload: Dict[str, Any]
    push_type: Optional[str]
    topic: Optional[str]
    priority: Optional[int]
    expiration: Optional[int]
    collapse_id: Optional[str]
    apns_id: Optional[str]

    @property
    def aps(self) -> Dict[str, Any]:
        """The payload's `aps` dictionary (empty when it has none)."""
        aps = self.payload.get("aps")
        return aps if isinstance(aps, dict) else {}

    @classmethod
    def from_json(cls, block: Dict[str, Any]) -> "ApnsMessage":
        headers = {str(k): str(v) for k, v in (block.get("headers") or {}).items()}
        payload = block.get("payload")
        return cls(
            headers=headers,
            payload=payload if isinstance(payload, dict) else {},
            push_type=headers.get("apns-push-type"),
            topic=headers.get("apns-topic"),
            priority=_int(headers.get("apns-priority")),
            expiration=_int(headers.get("apns-expiration")),
            collapse_id=headers.get("apns-collapse-id"),
            apns_id=headers.get("apns-id"),
        )


@dataclass(frozen=True)
class WebPushMessage:
    """A Web Push request as the push service saw it (an inbox entry's `webpush`): `plaintext`
    is the body the mock decrypted with the subscription's keys (None when it is not UTF-8, see
    `plaintext_base64`, or did not decrypt, see `decrypt_error`)."""

    headers: Dict[str, str]
    vapid: Optional[Dict[str, Any]]
    content_encoding: Optional[str]
    ciphertext_bytes: int
    plaintext: Optional[str]
    plaintext_base64: Optional[str]
    decrypt_error: Optional[str]
    notification: Optional[Dict[str, Any]]
    #: True for a push to a real browser's subscription (Firefox's autopush, Chromium's): the
    #: mock relays the body unread (it has not the browser's key), so `plaintext` is None and
    #: `ciphertext_base64` holds the body as sent.
    relayed: bool = False
    ciphertext_base64: Optional[str] = None

    @property
    def json(self) -> Any:
        """The plaintext parsed as JSON; None when there is none or it is not JSON."""
        if self.plaintext is None:
            return None
        try:
            return json.loads(self.plaintext)
        except ValueError:
            return None

    @classmethod
    def from_json(cls, block: Dict[str, Any]) -> "WebPushMessage":
        return cls(
            headers={str(k): str(v) for k, v in (block.get("headers") or {}).items()},
            vapid=block.get("vapid"),
            content_encoding=block.get("content_encoding"),
            ciphertext_bytes=int(block.get("ciphertext_bytes") or 0),
            plaintext=block.get("plaintext"),
            plaintext_base64=block.get("plaintext_base64"),
            decrypt_error=block.get("decrypt_error"),
            notification=block.get("notification"),
            relayed=bool(block.get("relayed", False)),
            ciphertext_base64=block.get("ciphertext_base64"),
        )


@dataclass(frozen=True)
class ClientAck:
    """What a real client answered to a push (`client_delivery.ack`): `by` is `ack` (autopush),
    `selective_ack`, `stream_ack` or `login` (MCS); `code` the autopush code (100 taken; 101,
    102 rejecting) or None."""

    by: str
    code: Optional[int]
    at: Optional[str]


@dataclass(frozen=True)
class ClientRejection:
    """Why a real client refused a push (`client_delivery.rejection`): Firefox's code (101 could
    not decrypt, 102 no service worker took it, 301-303 its handler failed) and what it means."""

    code: int
    reason: str
    at: Optional[str]


@dataclass(frozen=True)
class ClientDelivery:
    """How a push went to a real client's connection (an inbox entry's `client_delivery`,
    docs/real-clients.md): `kind` `autopush` or `mcs`; `message_ref` is what the client
    acknowledges it by (autopush's `version`, MCS's `persistent_id`: the entry's message id);
    `sends` counts the writes (more than 1 after a reconnect); `ack` and `rejection` are the
    client's answer, None while it is `sent`. An FCM registration's delivery also has `via` (the
    token it travelled over), `encryption` and `plaintext` (what the mock encrypted)."""

    kind: str
    connection_id: Optional[str]
    version: Optional[str]
    persistent_id: Optional[str]
    first_sent_at: Optional[str]
    sends: int
    ack: Optional[ClientAck]
    rejection: Optional[ClientRejection]
    via: Optional[str]
    encryption: Optional[str]
    plaintext: Any
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def message_ref(self) -> Optional[str]:
        """What the client acknowledges the push by: `version` (autopush) or `persistent_id`."""
        return self.version if self.version is not None else self.persistent_id

    @classmethod
    def from_json(cls, block: Dict[str, Any]) -> "ClientDelivery":
        ack = block.get("ack")
        rejection = block.get("rejection")
        return cls(
            kind=str(block.get("kind") or ""),
            connection_id=block.get("connection_id"),
            version=block.get("version"),
            persistent_id=block.get("persistent_id"),
            first_sent_at=block.get("first_sent_at"),
            sends=int(block.get("sends") or 0),
            ack=ClientAck(by=str(ack.get("by") or ""), code=_opt_int(ack.get("code")), at=ack.get("at"))
            if isinstance(ack, dict) else None,
            rejection=ClientRejection(code=int(rejection.get("code") or 0), reason=str(rejection.get("reason") or ""),
                                      at=rejection.get("at"))
            if isinstance(rejection, dict) else None,
            via=block.get("via"),
            encryption=block.get("encryption"),
            plaintext=block.get("plaintext"),
            raw=block,
        )


@dataclass(frozen=True)
class Message:
    """One entry of a device's inbox: what the device received, or holds while offline.

    `transport` is `http` (legacy), `http_v1`, `xmpp`, `apns` or `webpush`; `status` is
    `delivered`, `pending`, `expired`, `collapsed`, `dropped`, `replaced` (APNs),
    `undecryptable` or `deleted` (Web Push), and for a real client's device `sent` (written on
    its connection, not acknowledged yet) or `client_rejected`; `effective` is the payload in the
    platform's own form (docs/effective-payloads.md); `apns` and `webpush` are the typed views of
    an APNs send and of a Web Push request (None for the other transports); `client_delivery`
    says how a real client (Firefox, Chromium, firebase-messaging) was written to and what it
    answered (None for a fake device). `expires_at` is when its TTL runs out (mock clock),
    `collapse_key` and `priority` as the device got them. `raw` keeps the whole JSON entry."""

    message_id: str
    status: str
    transport: Optional[str]
    target: Optional[str]
    topic: Optional[str]
    data: Optional[Dict[str, Any]]
    notification: Optional[Dict[str, Any]]
    effective: Optional[Dict[str, Any]]
    accepted_at: Optional[str]
    delivered_at: Optional[str]
    apns: Optional[ApnsMessage]
    webpush: Optional[WebPushMessage]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    client_delivery: Optional[ClientDelivery] = None
    expires_at: Optional[str] = None
    collapse_key: Optional[str] = None
    priority: Optional[str] = None

    @classmethod
    def from_json(cls, entry: Dict[str, Any]) -> "Message":
        via = entry.get("via") or {}
        transport = via.get("transport") or entry.get("transport")
        effective = entry.get("effective")
        apns_block = (effective or {}).get("apns") if transport == "apns" else None
        webpush_block = entry.get("webpush") if transport == "webpush" else None
        delivery = entry.get("client_delivery")
        return cls(
            message_id=str(entry.get("message_id") or ""),
            status=str(entry.get("status") or ""),
            transport=transport,
            target=via.get("target"),
            topic=via.get("topic"),
            data=entry.get("data"),
            notification=entry.get("notification"),
            effective=effective,
            accepted_at=entry.get("accepted_at"),
            delivered_at=entry.get("delivered_at"),
            apns=ApnsMessage.from_json(apns_block) if isinstance(apns_block, dict) else None,
            webpush=WebPushMessage.from_json(webpush_block) if isinstance(webpush_block, dict) else None,
            raw=entry,
            client_delivery=ClientDelivery.from_json(delivery) if isinstance(delivery, dict) else None,
            expires_at=entry.get("expires_at"),
            collapse_key=entry.get("collapse_key"),
            priority=entry.get("priority"),
        )

    @property
    def fields(self) -> Dict[str, Any]:
        """What a `where` mapping is matched against: an FCM message's `data`; an APNs
        payload's keys, those inside `aps` and those beside it (the custom keys); a Web Push
        plaintext that is a JSON object."""
        if self.apns is not None:
            return {**self.apns.aps, **self.apns.payload}
        if self.webpush is not None:
            body = self.webpush.json
            return body if isinstance(body, dict) else {}
        return self.data or {}

    def summary(self) -> str:
        """One line: status, transport, id, and what was sent (data and notification, the APNs
        payload, or the Web Push plaintext and why it would not decrypt)."""
        parts = [self.status, self.transport or "?", self.message_id]
        if self.apns is not None:
            parts.append(f"payload={self.apns.payload}")
        elif self.webpush is not None:
            w = self.webpush
            if w.plaintext is not None:
                parts.append(f"plaintext={w.plaintext!r}")
            elif w.plaintext_base64 is not None:
                parts.append(f"plaintext_base64={w.plaintext_base64}")
            if w.decrypt_error:
                parts.append(f"decrypt_error={w.decrypt_error!r}")
            if w.relayed:
                parts.append(f"relayed ciphertext_bytes={w.ciphertext_bytes}")
        if self.data:
            parts.append(f"data={self.data}")
        if self.notification:
            parts.append(f"notification={self.notification}")
        c = self.client_delivery
        if c is not None:
            parts.append(f"{c.kind} conn={c.connection_id} sends={c.sends}")
            if c.ack is not None:
                parts.append(f"ack={c.ack.by}:{c.ack.code}")
            if c.rejection is not None:
                parts.append(f"rejection={c.rejection.code} {c.rejection.reason!r}")
        return " ".join(parts)


@dataclass(frozen=True)
class Device:
    """A fake device: its token, installation id, project, app and state. An `ios` device also
    has its APNs device token (`apns_token`, `apns_environment`); a `web` device its push
    subscription, `web_push`, exactly as `PushSubscription.toJSON()` gives it
    (`{"endpoint","expirationTime","keys":{"p256dh","auth"}}`), for a Web Push library as it is.
    A device a real client made (a Firefox channel, a Chromium or firebase-messaging
    registration) has `client`; a fake device has None. `state` is `registered`, `unregistered`
    or `refreshed`; a refreshed device's `canonical_token` is the token that replaced it.
    `web_push_expired` is true once a web device's subscription ended
    (`expire_web_push()`); `expires_at` is when an `ios` device's APNs token expires (mock clock,
    `set_apns_token_expiry()`), None when it does not."""

    token: str
    fid: Optional[str]
    sender_id: str
    app: str
    platform: str
    state: str
    online: bool
    topics: List[str]
    pending: int
    apns_token: Optional[str]
    apns_environment: Optional[str]
    web_push: Optional[Dict[str, Any]]
    application_server_key: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    client: Optional["DeviceClient"] = None
    canonical_token: Optional[str] = None
    created_at: Optional[str] = None
    last_seen_at: Optional[str] = None
    web_push_expired: bool = False
    expires_at: Optional[str] = None

    @property
    def web_push_id(self) -> Optional[str]:
        """The last path segment of the subscription's endpoint (what `?web_push_id=` finds)."""
        endpoint = (self.web_push or {}).get("endpoint")
        return endpoint_id(endpoint) if isinstance(endpoint, str) else None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Device":
        return cls(
            token=str(d["token"]),
            fid=d.get("fid"),
            sender_id=str(d.get("sender_id") or ""),
            app=str(d.get("app") or ""),
            platform=str(d.get("platform") or ""),
            state=str(d.get("state") or ""),
            online=bool(d.get("online", False)),
            topics=list(d.get("topics") or []),
            pending=int(d.get("pending") or 0),
            apns_token=d.get("apns_token"),
            apns_environment=d.get("apns_environment"),
            web_push=d.get("web_push"),
            application_server_key=d.get("application_server_key"),
            raw=d,
            client=DeviceClient.from_json(d["client"]) if isinstance(d.get("client"), dict) else None,
            canonical_token=d.get("canonical_token"),
            created_at=d.get("created_at"),
            last_seen_at=d.get("last_seen_at"),
            web_push_expired=bool(d.get("web_push_expired", False)),
            expires_at=d.get("expires_at"),
        )


@dataclass(frozen=True)
class DeviceClient:
    """A device's `client`: the real client that made it. `kind` is `autopush` (a Firefox
    channel: `channel_id`, `unregister_code` once it unregistered), `gcm` (a register3
    registration of Chromium or firebase-messaging: `app`, `subtype`, `sender`, `instance_id`,
    `channel`) or `fcm` (a firebase-messaging FCM registration: `installation_fid`, `app_id`,
    `endpoint`, and `via`, the token of the subscription it travels over). `id` is the client's
    (a uaid, an android id), `connected` whether its connection is open now."""

    kind: str
    id: Optional[str]
    connected: bool
    user_agent: Optional[str]
    client_version: Optional[str]
    connected_at: Optional[str]
    last_heartbeat_at: Optional[str]
    channel_id: Optional[str]
    unregister_code: Optional[int]
    app: Optional[str]
    subtype: Optional[str]
    sender: Optional[str]
    instance_id: Optional[str]
    channel: Optional[str]
    installation_fid: Optional[str]
    app_id: Optional[str]
    endpoint: Optional[str]
    via: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, c: Dict[str, Any]) -> "DeviceClient":
        return cls(
            kind=str(c.get("kind") or ""), id=c.get("id"), connected=bool(c.get("connected", False)),
            user_agent=c.get("user_agent"), client_version=c.get("client_version"),
            connected_at=c.get("connected_at"), last_heartbeat_at=c.get("last_heartbeat_at"),
            channel_id=c.get("channel_id"), unregister_code=_opt_int(c.get("unregister_code")),
            app=c.get("app"), subtype=c.get("subtype"), sender=c.get("sender"),
            instance_id=c.get("instance_id"), channel=c.get("channel"),
            installation_fid=c.get("installation_fid"), app_id=c.get("app_id"),
            endpoint=c.get("endpoint"), via=c.get("via"), raw=c,
        )


@dataclass(frozen=True)
class ClientConnection:
    """A real client's open connection: its id (`ws3`, `m2`), when it opened, the peer, whether
    it is TLS, how many pushes are written and unacknowledged, the last heartbeat and frame."""

    id: str
    connected_at: Optional[str]
    remote: Optional[str]
    tls: bool
    unacked: int
    last_heartbeat_at: Optional[str]
    last_frame_at: Optional[str]


@dataclass(frozen=True)
class ClientCheckin:
    """A GCM client's last checkin: Chrome's platform, version and channel, and when."""

    platform: Optional[str]
    chrome_version: Optional[str]
    channel: Optional[str]
    at: Optional[str]


@dataclass(frozen=True)
class ClientRegistration:
    """A GCM client's register3 registration: its token, app, subtype, sender, instance id,
    and the device it made (a token; None for a token only)."""

    token: str
    app: Optional[str]
    subtype: Optional[str]
    sender: Optional[str]
    instance_id: Optional[str]
    device: Optional[str]
    created_at: Optional[str]


@dataclass(frozen=True)
class RealClient:
    """A real receiving client (`GET /api/v1/clients/{id}`, docs/real-clients.md): Firefox's
    uaid (`kind` `autopush`) or a checked-in GCM client's android id (`gcm`), with its open
    `connection` (None when not connected), its `devices` (tokens), and for a GCM client its
    `checkin` and `registrations`."""

    id: str
    kind: str
    connected: bool
    connection: Optional[ClientConnection]
    user_agent: Optional[str]
    client_version: Optional[str]
    checkin: Optional[ClientCheckin]
    created_at: Optional[str]
    last_connected_at: Optional[str]
    devices: List[str]
    registrations: List[ClientRegistration]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, c: Dict[str, Any]) -> "RealClient":
        conn = c.get("connection")
        checkin = c.get("checkin")
        return cls(
            id=str(c["id"]), kind=str(c.get("kind") or ""), connected=bool(c.get("connected", False)),
            connection=ClientConnection(
                id=str(conn.get("id") or ""), connected_at=conn.get("connected_at"), remote=conn.get("remote"),
                tls=bool(conn.get("tls", False)), unacked=int(conn.get("unacked") or 0),
                last_heartbeat_at=conn.get("last_heartbeat_at"), last_frame_at=conn.get("last_frame_at"),
            ) if isinstance(conn, dict) else None,
            user_agent=c.get("user_agent"), client_version=c.get("client_version"),
            checkin=ClientCheckin(platform=checkin.get("platform"), chrome_version=checkin.get("chrome_version"),
                                  channel=checkin.get("channel"), at=checkin.get("at"))
            if isinstance(checkin, dict) else None,
            created_at=c.get("created_at"), last_connected_at=c.get("last_connected_at"),
            devices=[str(t) for t in c.get("devices") or []],
            registrations=[ClientRegistration(
                token=str(r.get("token") or ""), app=r.get("app"), subtype=r.get("subtype"), sender=r.get("sender"),
                instance_id=r.get("instance_id"), device=r.get("device"), created_at=r.get("created_at"))
                for r in c.get("registrations") or [] if isinstance(r, dict)],
            raw=c,
        )


@dataclass(frozen=True)
class Fault:
    """An injected fault (docs/faults.md): its id and definition as the server answered it,
    `times` it may still fire (None: until deleted) and how often it `fired`."""

    id: str
    raw: Dict[str, Any] = field(repr=False, compare=False)
    when: Dict[str, Any] = field(default_factory=dict)
    then: Dict[str, Any] = field(default_factory=dict)
    times: Optional[int] = None
    fired: int = 0
    created_at: Optional[str] = None

    @classmethod
    def from_json(cls, f: Dict[str, Any]) -> "Fault":
        return cls(id=str(f["id"]), raw=f, when=dict(f.get("when") or {}), then=dict(f.get("then") or {}),
                   times=_opt_int(f.get("times")), fired=int(f.get("fired") or 0), created_at=f.get("created_at"))


@dataclass(frozen=True)
class Recipient:
    """One recipient of a message record: its token, the message id it got, its `status`
    (`delivered`, `pending`, `failed`, `expired`, `sent`, `client_rejected`, …), the FCM `error`
    when it failed, the `canonical_token` of a refreshed device, when it was delivered
    (`delivered_at`) or settled by the storage rules (`settled_at`: `collapsed`, `dropped`,
    `expired`, `replaced`), and for a real client's device `client_delivery`, as on its inbox
    entry (docs/real-clients.md)."""

    token: str
    message_id: Optional[str]
    status: str
    error: Optional[str]
    canonical_token: Optional[str]
    delivered_at: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    settled_at: Optional[str] = None
    client_delivery: Optional[ClientDelivery] = None

    @classmethod
    def from_json(cls, r: Dict[str, Any]) -> "Recipient":
        delivery = r.get("client_delivery")
        return cls(token=str(r.get("token") or ""), message_id=r.get("message_id"), status=str(r.get("status") or ""),
                   error=r.get("error"), canonical_token=r.get("canonical_token"),
                   delivered_at=r.get("delivered_at"), raw=r, settled_at=r.get("settled_at"),
                   client_delivery=ClientDelivery.from_json(delivery) if isinstance(delivery, dict) else None)


@dataclass(frozen=True)
class MessageRecord:
    """What an app server sent (`GET /api/v1/messages/{id}`, docs/control-api.md#message-records),
    as the mock recorded it, accepted or not: `status` `accepted` or `rejected` (then `error`
    and `error_detail` say why); `transport` `http`, `http_v1`, `xmpp`, `apns` or `webpush`;
    `target_kind` (`token`, `multicast`, `topic`, `condition`, `group`, `fid`, …) and
    `target_value` what it was addressed to; `options` the send's options (`collapse_key`,
    `priority`, `time_to_live`, …); `fault` the id of a fault that fired on it. `raw` keeps the
    whole JSON record (the v1, APNs and Web Push blocks, `answer`, `headers`)."""

    message_id: str
    multicast_id: Optional[int]
    sender_id: Optional[str]
    transport: Optional[str]
    format: Optional[str]
    status: str
    accepted_at: Optional[str]
    target_kind: Optional[str]
    target_value: Optional[str]
    options: Dict[str, Any]
    data: Optional[Dict[str, Any]]
    notification: Optional[Dict[str, Any]]
    error: Optional[str]
    error_detail: Optional[str]
    http_status: Optional[int]
    fault: Optional[str]
    recipients: List[Recipient]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, m: Dict[str, Any]) -> "MessageRecord":
        target = m.get("target")
        target = target if isinstance(target, dict) else {}
        return cls(
            message_id=str(m.get("message_id") or ""), multicast_id=_opt_int(m.get("multicast_id")),
            sender_id=m.get("sender_id"), transport=m.get("transport"), format=m.get("format"),
            status=str(m.get("status") or ""), accepted_at=m.get("accepted_at"),
            target_kind=target.get("kind"), target_value=target.get("value"),
            options=dict(m.get("options") or {}), data=m.get("data"), notification=m.get("notification"),
            error=m.get("error"), error_detail=m.get("error_detail"), http_status=_opt_int(m.get("http_status")),
            fault=m.get("fault"),
            recipients=[Recipient.from_json(r) for r in m.get("recipients") or [] if isinstance(r, dict)],
            raw=m,
        )


@dataclass(frozen=True)
class ServiceAccount:
    """A project's service account as the mock lists it (never its private key): the
    `private_key_id` that revokes it, its `client_email`, `client_id` and `public_key` (PEM)."""

    client_email: str
    private_key_id: str
    client_id: Optional[str]
    public_key: Optional[str] = field(repr=False)
    created_at: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, a: Dict[str, Any]) -> "ServiceAccount":
        return cls(client_email=str(a.get("client_email") or ""), private_key_id=str(a.get("private_key_id") or ""),
                   client_id=a.get("client_id"), public_key=a.get("public_key"), created_at=a.get("created_at"),
                   raw=a)


@dataclass(frozen=True)
class ProjectApp:
    """An app of a project: its id (package name, bundle id), `platform` (`android`, `ios`,
    `web`) and `apns_credential` (`valid`, `missing`, `expired`)."""

    app: str
    platform: str
    apns_credential: Optional[str]


@dataclass(frozen=True)
class Project:
    """A Firebase project of the mock (`GET /api/v1/projects/{project}`): its `sender_id`, its
    `project_id` (what HTTP v1 paths name), the legacy `server_keys`, its apps and its service
    accounts."""

    sender_id: str
    project_id: str
    server_keys: List[str]
    apps: List[ProjectApp]
    service_accounts: List[ServiceAccount]
    created_at: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, p: Dict[str, Any]) -> "Project":
        return cls(
            sender_id=str(p["sender_id"]), project_id=str(p.get("project_id") or ""),
            server_keys=[str(k) for k in p.get("server_keys") or []],
            apps=[ProjectApp(app=str(a.get("app") or ""), platform=str(a.get("platform") or ""),
                             apns_credential=a.get("apns_credential"))
                  for a in p.get("apps") or [] if isinstance(a, dict)],
            service_accounts=[ServiceAccount.from_json(a) for a in p.get("service_accounts") or []
                              if isinstance(a, dict)],
            created_at=p.get("created_at"), raw=p,
        )


@dataclass(frozen=True)
class AccessToken:
    """An HTTP v1 access token the mock issued (`GET /api/v1/access-tokens`): its `id` (what
    revokes it), the first 12 characters of the token, who it was issued to and for what."""

    id: str
    token_prefix: Optional[str]
    client_email: Optional[str]
    project_id: Optional[str]
    scope: Optional[str]
    issued_at: Optional[str]
    expires_at: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, t: Dict[str, Any]) -> "AccessToken":
        return cls(id=str(t["id"]), token_prefix=t.get("token_prefix"), client_email=t.get("client_email"),
                   project_id=t.get("project_id"), scope=t.get("scope"), issued_at=t.get("issued_at"),
                   expires_at=t.get("expires_at"), raw=t)


@dataclass(frozen=True)
class Topic:
    """A topic (`GET /api/v1/topics/{name}`): its bare name (`news`), the subscribed tokens and
    how many there are (none for a topic nobody subscribes to)."""

    name: str
    subscribers: List[str]
    count: int

    @classmethod
    def from_json(cls, t: Dict[str, Any]) -> "Topic":
        subscribers = [str(s) for s in t.get("subscribers") or []]
        return cls(name=str(t["name"]), subscribers=subscribers, count=int(t.get("count") or len(subscribers)))


@dataclass(frozen=True)
class Group:
    """A device group (`GET /api/v1/groups/{notification_key}`): its key, its name, its
    project's sender id and its members' tokens."""

    notification_key: str
    notification_key_name: Optional[str]
    sender_id: Optional[str]
    members: List[str]
    created_at: Optional[str] = None

    @classmethod
    def from_json(cls, g: Dict[str, Any]) -> "Group":
        return cls(notification_key=str(g["notification_key"]), notification_key_name=g.get("notification_key_name"),
                   sender_id=g.get("sender_id"), members=[str(m) for m in g.get("members") or []],
                   created_at=g.get("created_at"))


@dataclass(frozen=True)
class Clock:
    """The mock's clock (`GET /api/v1/clock`): `now` (RFC 3339) and how far it was moved ahead
    of real time, `offset_s`."""

    now: str
    offset_s: int


@dataclass(frozen=True)
class XmppConnection:
    """An app server's XMPP connection (`GET /api/v1/xmpp/connections`, docs/xmpp.md): its id,
    the sender id it logged in as, its resource, how many downstream messages it has not acked,
    whether it is `draining` and whether it is TLS."""

    id: str
    sender_id: Optional[str]
    resource: Optional[str]
    connected_at: Optional[str]
    unacked: int
    draining: bool
    tls: bool
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, c: Dict[str, Any]) -> "XmppConnection":
        return cls(id=str(c["id"]), sender_id=c.get("sender_id"), resource=c.get("resource"),
                   connected_at=c.get("connected_at"), unacked=int(c.get("unacked") or 0),
                   draining=bool(c.get("draining", False)), tls=bool(c.get("tls", False)), raw=c)


@dataclass(frozen=True)
class UpstreamMessage:
    """A message a device sent to its app server (docs/xmpp.md): `status` `queued` (no XMPP
    connection of its sender yet), `sent` (on `connection_id`, not acked) or `acked`."""

    message_id: str
    token: str
    sender_id: Optional[str]
    category: Optional[str]
    data: Dict[str, Any]
    time_to_live: Optional[int]
    status: str
    created_at: Optional[str]
    sent_at: Optional[str]
    acked_at: Optional[str]
    connection_id: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, u: Dict[str, Any]) -> "UpstreamMessage":
        return cls(
            message_id=str(u["message_id"]), token=str(u.get("token") or ""), sender_id=u.get("sender_id"),
            category=u.get("category"), data=dict(u.get("data") or {}), time_to_live=_opt_int(u.get("time_to_live")),
            status=str(u.get("status") or ""), created_at=u.get("created_at"), sent_at=u.get("sent_at"),
            acked_at=u.get("acked_at"), connection_id=u.get("connection_id"), raw=u,
        )


@dataclass(frozen=True)
class ApnsKey:
    """An APNs signing key the mock made (`POST /api/v1/apns/keys`): its key id, its team, the
    `.p8` PKCS #8 private key as Apple's download (`pem`), and `path`, that file (mode 0600)."""

    key_id: str
    team_id: str
    pem: str = field(repr=False)
    path: Path


@dataclass(frozen=True)
class ApnsCertificate:
    """An APNs client certificate the mock's CA issued (`POST /api/v1/apns/certificates`).
    `path` holds the certificate and its key in one PEM file, as aioapns' `client_cert` and
    curl's `--cert` take it; `cert_path` and `key_path` hold them apart (requests' and httpx's
    `cert=(cert_path, key_path)`). Every file is mode 0600."""

    id: str
    bundle_id: str
    topics: List[str]
    environments: List[str]
    expires_at: Optional[str]
    certificate_pem: str
    private_key_pem: str = field(repr=False)
    path: Path
    cert_path: Path
    key_path: Path


@dataclass(frozen=True)
class ApnsKeyInfo:
    """An APNs signing key as the mock lists it (`GET /api/v1/apns/keys`), or one imported by its
    public half (`import_apns_key`): never its private key."""

    key_id: str
    team_id: str
    public_key_pem: Optional[str] = field(repr=False)
    created_at: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, k: Dict[str, Any]) -> "ApnsKeyInfo":
        return cls(key_id=str(k.get("key_id") or ""), team_id=str(k.get("team_id") or ""),
                   public_key_pem=k.get("public_key_pem"), created_at=k.get("created_at"), raw=k)


@dataclass(frozen=True)
class ApnsTeam:
    """An APNs team (`GET /api/v1/apns/teams`): its id and the bundle ids its keys may send to."""

    team_id: str
    bundle_ids: List[str]
    created_at: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, t: Dict[str, Any]) -> "ApnsTeam":
        return cls(team_id=str(t.get("team_id") or ""), bundle_ids=[str(b) for b in t.get("bundle_ids") or []],
                   created_at=t.get("created_at"), raw=t)


@dataclass(frozen=True)
class ApnsCertificateInfo:
    """An APNs client certificate as the mock lists it (`GET /api/v1/apns/certificates`), without
    its private key: `id` (its serial number in hex) is what `delete_apns_certificate` revokes."""

    id: str
    bundle_id: str
    topics: List[str]
    environments: List[str]
    created_at: Optional[str]
    expires_at: Optional[str]
    certificate_pem: Optional[str] = field(repr=False)
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, c: Dict[str, Any]) -> "ApnsCertificateInfo":
        return cls(id=str(c.get("id") or ""), bundle_id=str(c.get("bundle_id") or ""),
                   topics=[str(t) for t in c.get("topics") or []],
                   environments=[str(e) for e in c.get("environments") or []],
                   created_at=c.get("created_at"), expires_at=c.get("expires_at"),
                   certificate_pem=c.get("certificate_pem"), raw=c)


@dataclass(frozen=True)
class IssuedAccessToken:
    """An HTTP v1 access token issued by `POST /api/v1/projects/{project}/access-tokens`: the
    token itself (`Authorization: Bearer …`), how long it lasts, and its `id` (what
    `revoke_access_token` takes; `access_tokens` lists it)."""

    access_token: str = field(repr=False)
    expires_in: int
    token_type: str
    id: str
    client_email: Optional[str]
    project_id: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, t: Dict[str, Any]) -> "IssuedAccessToken":
        return cls(access_token=str(t.get("access_token") or ""), expires_in=int(t.get("expires_in") or 0),
                   token_type=str(t.get("token_type") or ""), id=str(t.get("id") or ""),
                   client_email=t.get("client_email"), project_id=t.get("project_id"), raw=t)


@dataclass(frozen=True)
class Stats:
    """The counters (`GET /api/v1/stats`): message records by status (`messages["accepted"]`,
    `messages["rejected"]`), errors by code, the deliveries offline devices hold (`pending`), the
    open XMPP connections and the devices."""

    messages: Dict[str, int]
    errors: Dict[str, int]
    pending: int
    xmpp_connections: int
    devices: int
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, s: Dict[str, Any]) -> "Stats":
        return cls(messages={str(k): int(v) for k, v in (s.get("messages") or {}).items()},
                   errors={str(k): int(v) for k, v in (s.get("errors") or {}).items()},
                   pending=int(s.get("pending") or 0), xmpp_connections=int(s.get("xmpp_connections") or 0),
                   devices=int(s.get("devices") or 0), raw=s)


@dataclass(frozen=True)
class StatsSeries:
    """Sends and errors per bucket (`GET /api/v1/stats/series`): `window` seconds in buckets of
    `bucket` seconds, oldest first, the last ending with the mock clock's current second
    (`end`)."""

    start: str
    end: str
    window: int
    bucket: int
    sends: List[int]
    errors: List[int]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, s: Dict[str, Any]) -> "StatsSeries":
        return cls(start=str(s.get("start") or ""), end=str(s.get("end") or ""), window=int(s.get("window") or 0),
                   bucket=int(s.get("bucket") or 0), sends=[int(n) for n in s.get("sends") or []],
                   errors=[int(n) for n in s.get("errors") or []], raw=s)


@dataclass(frozen=True)
class Event:
    """One event of `GET /api/v1/events` (docs/events.md): its `type` (the SSE `event:`, such as
    `message.delivered`, `device.created`, `client.connected`), `data` (its JSON) and the SSE
    `id` when the server gave one."""

    type: str
    data: Any
    id: Optional[str] = None

    @property
    def message_id(self) -> Optional[str]:
        """The `message_id` of a message event's data (None for other events)."""
        value = self.data.get("message_id") if isinstance(self.data, dict) else None
        return str(value) if value is not None else None

    @property
    def token(self) -> Optional[str]:
        """The device token the event concerns: a delivery event's `token`, a device event's."""
        value = self.data.get("token") if isinstance(self.data, dict) else None
        return str(value) if value is not None else None


def endpoint_id(endpoint: str) -> str:
    """A push endpoint's last path segment: its subscription's id (`/wp/{id}`,
    `/fcm/send/{token}`, `/wpush/v2/{id}`), what `GET /api/v1/devices?web_push_id=` takes."""
    path = urllib.parse.urlsplit(endpoint).path.rstrip("/")
    return urllib.parse.unquote(path.rsplit("/", 1)[-1])


def _opt_int(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Optional[str]) -> Optional[int]:
    return int(value) if value is not None and value.lstrip("-").isdigit() else None
