"""firebase-admin wired to the mock, in the two ways docs/v1.md describes."""

from __future__ import annotations

import itertools
import urllib.parse
from typing import TYPE_CHECKING, Any, Dict, Optional

import requests

from ._routing import GOOGLE
from .errors import FcmMockError

if TYPE_CHECKING:
    from ._client import FcmMock

GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"

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

    if mock._google is None:  # for as long as the FcmMock is open: the app outlives any block
        routing = mock._routing(GOOGLE, "firebase_app(unmodified=True)")
        try:
            routing.install()  # FcmMockError while another mock has Google's names
        except BaseException:
            mock._routings.remove(routing)
            raise
        mock._google = routing
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
