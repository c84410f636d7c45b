"""Typed views of the control API's JSON (docs/control-api.md)."""

from __future__ import annotations

import json
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
        )


@dataclass(frozen=True)
class Message:
    """One entry of a device's inbox: what the device received, or holds while offline.

    `transport` is `http` (legacy), `http_v1`, `xmpp`, `apns` or `webpush`; `status` is
    `delivered`, `pending`, `expired`, `collapsed`, `dropped`, `replaced` (APNs),
    `undecryptable` or `deleted` (Web Push); `effective` is the payload in the platform's own
    form (docs/effective-payloads.md); `apns` and `webpush` are the typed views of an APNs send
    and of a Web Push request (None for the other transports). `raw` keeps the whole JSON entry."""

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

    @classmethod
    def from_json(cls, entry: Dict[str, Any]) -> "Message":
        via = entry.get("via") or {}
        transport = via.get("transport") or entry.get("transport")
        effective = entry.get("effective")
        apns_block = (effective or {}).get("apns") if transport == "apns" else None
        webpush_block = entry.get("webpush") if transport == "webpush" else None
        return cls(
            message_id=entry.get("message_id", ""),
            status=entry.get("status", ""),
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
        if self.data:
            parts.append(f"data={self.data}")
        if self.notification:
            parts.append(f"notification={self.notification}")
        return " ".join(parts)


@dataclass(frozen=True)
class Device:
    """A fake device: its token, installation id, project, app and state. An `ios` device also
    has its APNs device token (`apns_token`, `apns_environment`); a `web` device its push
    subscription, `web_push`, exactly as `PushSubscription.toJSON()` gives it
    (`{"endpoint","expirationTime","keys":{"p256dh","auth"}}`), for a Web Push library as it is."""

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

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Device":
        return cls(
            token=d["token"],
            fid=d.get("fid"),
            sender_id=d.get("sender_id", ""),
            app=d.get("app", ""),
            platform=d.get("platform", ""),
            state=d.get("state", ""),
            online=bool(d.get("online", False)),
            topics=list(d.get("topics") or []),
            pending=int(d.get("pending") or 0),
            apns_token=d.get("apns_token"),
            apns_environment=d.get("apns_environment"),
            web_push=d.get("web_push"),
            application_server_key=d.get("application_server_key"),
            raw=d,
        )


@dataclass(frozen=True)
class Fault:
    """An injected fault (docs/faults.md): its id and definition as the server answered it."""

    id: str
    raw: Dict[str, Any] = field(repr=False, compare=False)


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


def _int(value: Optional[str]) -> Optional[int]:
    return int(value) if value is not None and value.lstrip("-").isdigit() else None
