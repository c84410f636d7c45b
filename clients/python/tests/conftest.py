"""Helpers for the client's own tests: legacy sends straight to the mock's wire protocol, and
one server a test module shares."""

from __future__ import annotations

from typing import Any, Dict

import pytest
import requests

from fcm_mock import FcmMock

SERVER_KEY = "AAAAfcmmock:demo-server-key"


def legacy_send(base_url: str, body: Dict[str, Any]) -> requests.Response:
    """POST /fcm/send with the demo project's server key."""
    return requests.post(base_url + "/fcm/send", json=body, timeout=10,
                         headers={"Authorization": f"key={SERVER_KEY}"})


@pytest.fixture
def send():
    return legacy_send


@pytest.fixture(scope="module")
def module_mock():
    """One server (the binary the tests were given) for a whole module."""
    m = FcmMock.start()
    yield m
    m.close()
