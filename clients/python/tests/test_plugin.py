"""The pytest plugin, run in pytest's own subprocesses (pytester) as a user's suite would be."""

from __future__ import annotations

import json
import os
import sys

import pytest

from fcm_mock import FcmMock

pytest_plugins = ["pytester"]

SEND = '''
import requests

def send(mock, token, data):
    r = requests.post(mock.base_url + "/fcm/send", json={"to": token, "data": data}, timeout=10,
                      headers={"Authorization": "key=AAAAfcmmock:demo-server-key"})
    assert r.status_code == 200, r.text
'''


def test_one_server_per_session_reset_before_each_test(pytester):
    pytester.makepyfile(SEND + '''
seen = []

def test_first(fcm_mock, fcm_mock_server):
    assert fcm_mock is fcm_mock_server
    seen.append(fcm_mock.base_url)
    send(fcm_mock, "demo-android-1", {"n": "1"})
    fcm_mock.create_device(token="made-in-first")
    assert len(fcm_mock.wait_for_messages("demo-android-1")) == 1

def test_second_starts_clean(fcm_mock):
    seen.append(fcm_mock.base_url)
    assert seen[0] == seen[1]
    fcm_mock.assert_no_messages("demo-android-1", within=0.1)
    assert "made-in-first" not in [d.token for d in fcm_mock.devices]
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_failing_assertion_prints_the_devices_last_messages(pytester):
    pytester.makepyfile(SEND + '''
def test_expects_the_wrong_thing(fcm_mock):
    send(fcm_mock, "demo-android-2", {"greeting": "hello"})
    fcm_mock.assert_delivered("demo-android-2", where={"greeting": "bye"}, timeout=0.2)
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: no message matching {'greeting': 'bye'} delivered to device demo-android-2 within 0.2 s",
        "*newest messages of device demo-android-2 (newest first):",
        "*delivered http 0:* data={'greeting': 'hello'}",
    ])


def test_fixtures_option(pytester, tmp_path):
    fixture = tmp_path / "shop.json"
    fixture.write_text(json.dumps({
        "projects": [{"sender_id": "555", "project_id": "shop", "server_keys": ["shop-key"],
                      "apps": [{"app": "com.shop", "platform": "android"}]}],
        "devices": [{"token": "shop-phone", "sender_id": "555", "app": "com.shop", "platform": "android"}],
    }))
    pytester.makepyfile('''
def test_fixture_loaded(fcm_mock):
    assert [d.token for d in fcm_mock.devices] == ["shop-phone"]
    assert fcm_mock.create_device().sender_id == "555"
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fcm-mock-fixtures", str(fixture))
    result.assert_outcomes(passed=1)


def test_url_option_uses_a_running_server(pytester):
    with FcmMock.start() as outside:
        outside.create_device(token="made-outside")
        pytester.makepyfile(f'''
def test_same_server(fcm_mock):
    assert fcm_mock.base_url == "{outside.base_url}"
    assert fcm_mock.process is None
    # reset before the test: the fixtures' devices only
    assert "made-outside" not in [d.token for d in fcm_mock.devices]
''')
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fcm-mock-url", outside.base_url)
        result.assert_outcomes(passed=1)
        assert outside.process.poll() is None, "the plugin stopped a server it did not start"


def test_bin_option(pytester, tmp_path):
    pytester.makepyfile('''
def test_never_runs(fcm_mock):
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fcm-mock-bin", str(tmp_path / "missing"))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*FcmMockError: no fcm-mock executable at */missing*"])


def test_not_found_outside_a_checkout_names_the_options(pytester, monkeypatch):
    monkeypatch.delenv("FCM_MOCK_BIN")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    pytester.makepyfile('''
def test_never_runs(fcm_mock):
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*FcmMockError: fcm-mock not found: give pytest --fcm-mock-bin PATH*"
                                 "--fcm-mock-url URL*"])


def test_https_option_gives_the_port_and_apple_hosts(pytester):
    pytester.makepyfile('''
import socket

def test_tls(fcm_mock):
    assert fcm_mock.https_url == f"https://127.0.0.1:{fcm_mock.https_port}"
    with fcm_mock.apple_hosts():
        assert socket.getaddrinfo("api.push.apple.com", 443)[0][4][0].startswith("127.0.42.")
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fcm-mock-https")
    result.assert_outcomes(passed=1)


def test_https_url_option_names_a_running_servers_tls_listener(pytester):
    with FcmMock.start(https=True) as outside:
        pytester.makepyfile(f'''
def test_same_server(fcm_mock):
    assert (fcm_mock.base_url, fcm_mock.https_port) == ("{outside.base_url}", {outside.https_port})
    assert fcm_mock.apns_certificate("com.example.demo.ios").environments == ["sandbox"]
''')
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fcm-mock-url", outside.base_url,
                                               "--fcm-mock-https-url", outside.https_url)
        result.assert_outcomes(passed=1)


def test_help_lists_the_options(pytester):
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*--fcm-mock-bin=PATH*", "*--fcm-mock-url=URL*", "*reset before every test*",
                                 "*--fcm-mock-https-url=URL*", "*--fcm-mock-fixtures=FILE_OR_DIR*",
                                 "*--fcm-mock-https*"])


def test_the_source_distribution_and_its_metadata(tmp_path):
    """The sdist ships the tests with their conftest.py; the metadata names its classifiers and
    the `pytest` extra the plugin's entry point is for."""
    import shutil
    import subprocess
    import tarfile
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]
    source = tmp_path / "source"
    shutil.copytree(here, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".*cache"))
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(out)!r})"],
                   cwd=source, check=True, capture_output=True)
    [sdist] = out.iterdir()
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        info = tar.extractfile(next(n for n in tar.getnames() if n.endswith("/PKG-INFO"))).read().decode()
    assert {"tests/conftest.py", "tests/test_client.py", "examples/notifier.py", "src/fcm_mock/py.typed"} <= names
    assert "Provides-Extra: pytest" in info and "Classifier: Framework :: Pytest" in info
    assert "Classifier: Typing :: Typed" in info


def test_relative_fixtures_are_read_from_where_pytest_runs(pytester):
    fixture = {"projects": [{"sender_id": "111111111111", "project_id": "mine", "server_keys": ["AAAAmine:key"],
                             "apps": [{"app": "com.example.mine", "platform": "android"}]}],
               "devices": [{"token": "mine-1", "sender_id": "111111111111", "app": "com.example.mine"}]}
    pytester.mkdir("fixtures")
    (pytester.path / "fixtures" / "mine.json").write_text(json.dumps(fixture))
    pytester.makepyfile('''
def test_mine(fcm_mock):
    assert fcm_mock.device("mine-1").sender_id == "111111111111"
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fcm-mock-fixtures", "fixtures/mine.json")
    result.assert_outcomes(passed=1)
