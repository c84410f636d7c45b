"""The errors the client raises."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

import requests


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

    def __reduce__(self) -> Tuple[Any, ...]:
        # Exception pickles its args, the message alone: rebuild from the fields instead
        # (multiprocessing, pytest-xdist and other runners send exceptions between processes).
        return (type(self), (self.method, self.path, self.status, self.code, self.message, self.body))


class TransportError(FcmMockError, requests.RequestException):
    """The mock could not be reached: the connection was refused or dropped, or the answer did
    not come in time. `method` and `url` name the call, `cause` is what the HTTP library raised.
    Also a `requests.RequestException` (and, as the cause was, a `requests.ConnectionError` or
    `requests.Timeout`: `ConnectionFailed`, `RequestTimedOut`), so code written against the
    exceptions of `requests` still catches it."""

    def __init__(self, method: str, url: str, cause: BaseException) -> None:
        super().__init__(f"{method} {url} failed: {self._what()}: {cause}")
        self.method = method
        self.url = url
        self.cause = cause
        self.__cause__ = cause
        self.request = getattr(cause, "request", None)
        self.response = getattr(cause, "response", None)

    @staticmethod
    def _what() -> str:
        return "the mock could not be reached"

    def __reduce__(self) -> Tuple[Any, ...]:
        # Rebuilt with the same classes (its own, and the cause's `requests` class it was made
        # for, below), even when the cause itself does not survive pickling.
        base = next(b for b in type(self).__mro__ if b in (ConnectTimedOut, RequestTimedOut, ConnectionFailed, TransportError))
        kind = type(self.cause) if isinstance(self.cause, requests.RequestException) else None
        if type(self) in _CAUSE_CLASSES.values():
            kind = next((b for b in type(self).__bases__ if b is not base), kind)
        return (_rebuild, (base, kind, self.method, self.url, _picklable(self.cause)))


class ConnectionFailed(TransportError, requests.ConnectionError):
    """The connection to the mock was refused, reset or closed (is it running at that URL?)."""

    @staticmethod
    def _what() -> str:
        return "the mock could not be reached (connection refused, reset or closed)"


class RequestTimedOut(TransportError, requests.Timeout):
    """The mock did not answer in time (`FcmMock(timeout=…)`, or a wait's own time)."""

    @staticmethod
    def _what() -> str:
        return "the mock did not answer in time"


class ConnectTimedOut(ConnectionFailed, RequestTimedOut, requests.ConnectTimeout):
    """The connection to the mock was not made in time."""

    @staticmethod
    def _what() -> str:
        return "the connection to the mock was not made in time"


def transport_error(method: str, url: str, cause: BaseException) -> TransportError:
    """The package's error for what `requests` raised calling `url`: of the class that says what
    went wrong (`ConnectionFailed`, `RequestTimedOut`, …) and, for a `requests` error, of the
    cause's own class too, so every `except` written against `requests` (`ReadTimeout`,
    `SSLError`, `ChunkedEncodingError`, …) still catches it."""
    base: Type[TransportError]
    if isinstance(cause, requests.ConnectTimeout):
        base = ConnectTimedOut
    elif isinstance(cause, requests.Timeout):
        base = RequestTimedOut
    elif isinstance(cause, requests.ConnectionError):
        base = ConnectionFailed
    else:
        base = TransportError
    return _with_cause_class(base, type(cause))(method, url, cause)


_CAUSE_CLASSES: Dict[Tuple[type, type], Type[TransportError]] = {}


def _rebuild(base: Type[TransportError], kind: Optional[type], method: str, url: str,
             cause: BaseException) -> TransportError:
    """A pickled `TransportError` back, of the classes it had."""
    return _with_cause_class(base, kind)(method, url, cause)


def _with_cause_class(base: Type[TransportError], kind: Optional[type]) -> Type[TransportError]:
    """`base`, or a subclass of it and of a `requests` error class `kind` (made once per pair)."""
    if kind is None or not issubclass(kind, requests.RequestException) or issubclass(base, kind):
        return base
    made = _CAUSE_CLASSES.get((base, kind))
    if made is None:
        body: Dict[str, Any] = {"__module__": __name__, "__qualname__": base.__qualname__, "__doc__": base.__doc__}
        if issubclass(kind, requests.exceptions.SSLError):
            body["_what"] = staticmethod(lambda: "the TLS connection to the mock failed (is its CA trusted? `verify=`)")
        made = type(base.__name__, (base, kind), body)
        _CAUSE_CLASSES[(base, kind)] = made
    return made


def _picklable(cause: BaseException) -> BaseException:
    """`cause`, or a plain stand-in with its text when it does not survive pickling (urllib3's
    errors hold their connection pool)."""
    import pickle

    try:
        pickle.loads(pickle.dumps(cause))
        return cause
    except Exception:
        return FcmMockError(f"{type(cause).__name__}: {cause}")
