"""README.md's "First sends", run as written: one send per protocol (FCM with curl, APNs with
curl and a PyJWT provider token, Web Push with pywebpush) against a server on the built-in demo
fixture, as `make run` serves it. Each block is read from the page, so the page and this test
cannot drift apart; only the page's 127.0.0.1:8080 is swapped for this run's address. The sh
blocks run in bash, the Python block in a fresh process of this suite's environment (its
`python3` has PyJWT and pywebpush, which the page says to install)."""

import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
PAGE_ADDRESS = "127.0.0.1:8080"


def first_sends():
    """The (language, code) blocks of the section, in order."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## First sends\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"^```(sh|python)\n(.*?)^```$", text[start:end], re.S | re.M)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The binary with no --fixtures (the demo fixture) on free ports: its HOST:PORT."""
    binary = os.path.abspath(os.environ["FCM_MOCK_BIN"])
    tmp = tmp_path_factory.mktemp("readme")
    with open(tmp / "stderr.log", "wb") as err:
        proc = subprocess.Popen([binary, "serve", "--http-port", "0", "--xmpp-port", "0", "--db", ":memory:"],
                                stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp)
    try:
        line = proc.stdout.readline()
        m = re.match(r"listening http=(\S+) ", line)
        assert m, f"no listening line: {line!r}; stderr: {(tmp / 'stderr.log').read_text()[-2000:]}"
        yield m.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_the_readme_first_sends_run_as_written(demo, tmp_path):
    blocks = first_sends()
    assert [language for language, _ in blocks] == ["sh", "sh", "python"], blocks
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "requests_ca_bundle", "curl_ca_bundle")}
    # `python3` in the blocks is this environment's (PyJWT, pywebpush).
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    printed = []
    for language, code in blocks:
        assert PAGE_ADDRESS in code, code
        code = code.replace(PAGE_ADDRESS, demo)
        command = ["bash", "-euo", "pipefail", "-c", code] if language == "sh" else [sys.executable, "-c", code]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{language} block: exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
        printed.append(done.stdout)
    fcm, apns, web = printed
    assert '"success":1,"failure":0' in fcm and '"data":{"score":"3x1"}' in fcm, fcm
    assert re.search(r"^HTTP/2 200\b", apns, re.M), apns
    assert '"transport":"apns"' in apns and '"payload":{"aps":{"alert":"Goal! 3-1"}}' in apns, apns
    assert web.strip() == '{"title": "Goal!", "body": "3-1"}', web
