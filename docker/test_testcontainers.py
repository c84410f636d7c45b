"""The image under testcontainers-python, as docs/testing.md shows it: a generic container waiting
on /readyz, then the Python client against its published port. Run by docker/podman-test.sh
against podman's Docker-compatible API (DOCKER_HOST), with the image it built (FCM_MOCK_IMAGE)."""

import os

import requests
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import HttpWaitStrategy

from fcm_mock import FcmMock


def test_generic_container_waits_on_readyz():
    container = (
        DockerContainer(os.environ["FCM_MOCK_IMAGE"])
        .with_env("FCM_MOCK_DB", ":memory:")
        .with_exposed_ports(8080)
        .waiting_for(HttpWaitStrategy(8080, "/readyz").for_status_code(200))
    )
    with container:
        url = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8080)}"
        assert requests.get(url + "/readyz", timeout=5).json() == {"status": "ready"}
        with FcmMock.connect(url) as mock:
            r = requests.post(url + "/fcm/send", json={"to": "demo-ios-1", "data": {"via": "testcontainers"}},
                              headers={"Authorization": "key=AAAAfcmmock:demo-server-key"}, timeout=10)
            assert r.json()["success"] == 1, r.text
            [m] = mock.wait_for_messages("demo-ios-1", timeout=10)
            assert m.data == {"via": "testcontainers"}
            assert m.effective["platform"] == "ios"
