"""Typed views of the control API's JSON (docs/control-api.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Message:
    """One entry of a device's inbox: what the device received, or holds while offline.

    `transport` is `http` (legacy), `http_v1` or `xmpp`; `status` is `delivered`, `pending`,
    `expired`, `collapsed` or `dropped`; `effective` is the payload in the platform's own form
    (docs/effective-payloads.md). `raw` keeps the whole JSON entry."""

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
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, entry: Dict[str, Any]) -> "Message":
        via = entry.get("via") or {}
        return cls(
            message_id=entry.get("message_id", ""),
            status=entry.get("status", ""),
            transport=via.get("transport"),
            target=via.get("target"),
            topic=via.get("topic"),
            data=entry.get("data"),
            notification=entry.get("notification"),
            effective=entry.get("effective"),
            accepted_at=entry.get("accepted_at"),
            delivered_at=entry.get("delivered_at"),
            raw=entry,
        )

    def summary(self) -> str:
        """One line: status, transport, id, data and notification."""
        parts = [self.status, self.transport or "?", self.message_id]
        if self.data:
            parts.append(f"data={self.data}")
        if self.notification:
            parts.append(f"notification={self.notification}")
        return " ".join(parts)


@dataclass(frozen=True)
class Device:
    """A fake device: its token, installation id, project, app and state."""

    token: str
    fid: Optional[str]
    sender_id: str
    app: str
    platform: str
    state: str
    online: bool
    topics: List[str]
    pending: int
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
            raw=d,
        )


@dataclass(frozen=True)
class Fault:
    """An injected fault (docs/faults.md): its id and definition as the server answered it."""

    id: str
    raw: Dict[str, Any] = field(repr=False, compare=False)
