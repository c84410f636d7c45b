"""The errors the client raises."""

from __future__ import annotations

from typing import Any, Optional


class FcmMockError(Exception):
    """The mock could not be started or reached."""


class ControlAPIError(FcmMockError):
    """A control API call failed: `status` is the HTTP status, `code` and `message` the
    server's `{"error":{"code":…,"message":…}}`."""

    def __init__(self, method: str, path: str, status: int, code: Optional[str], message: str,
                 body: Any = None) -> None:
        super().__init__(f"{method} {path} -> {status} {code or ''}: {message}".replace("  ", " "))
        self.method = method
        self.path = path
        self.status = status
        self.code = code
        self.message = message
        self.body = body
