"""Firefox's push service over TLS (real-clients.md §5): `dom.push.serverURL` is the mock's
wss://localhost:S/autopush and the mock's local CA is imported into the profile with certutil,
as a person would do. The subscription's endpoint is then on the HTTPS port, and a push sent
there with pywebpush (trusting the same CA) reaches the service worker.
"""

import re

import pytest
import requests

from firefox import Subscribed, assert_delivered_by_ack, new_vapid

pytestmark = pytest.mark.firefox


def test_firefox_over_wss_subscribes_and_receives(mock_https, firefox_tls, push_page):
    session = requests.Session()
    session.trust_env = False
    session.verify = mock_https.api("GET", "/api/v1/health")["tls_ca"]
    sub = Subscribed(mock_https, firefox_tls, push_page, session, "over-tls", new_vapid())
    endpoint = sub.sub["endpoint"]
    # The port's scheme and the upgrade's Host.
    assert re.fullmatch(rf"https://localhost:{mock_https.https_port}/wp/[A-Za-z0-9_-]{{86}}",
                        endpoint), endpoint
    assert sub.device["client"]["kind"] == "autopush", sub.device
    entry = sub.delivered("over wss:// and https://")
    assert_delivered_by_ack(entry)
    uaid = sub.device["client"]["id"]
    client = mock_https.api("GET", f"/api/v1/clients/{uaid}")
    assert client["connected"] is True and client["connection"]["tls"] is True, client
    session.close()
