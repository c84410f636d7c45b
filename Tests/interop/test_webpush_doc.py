"""docs/webpush.md's pywebpush recipe, run as written: each block is read from the page (found
by a line it must contain), so the page and this test cannot drift apart. The block runs in a
fresh Python process with pywebpush 2.5.0 unchanged; only the two lines naming the mock's address
and project are swapped for this run's, and the unmodified way runs the page's resolver block
first, behind a guard that fails any Google name reaching the real resolver.
"""

import os
import pathlib
import re
import subprocess
import sys

from mocksupport import SENDER_A
from test_v1_doc_routes import GUARD

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "webpush.md"
POINTED_LINES = ('MOCK = "http://127.0.0.1:8080"', 'SENDER_ID = "123456789012"')
PLAINTEXT = '{"title": "Goal!", "body": "3-1"}'


def python_block(containing):
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), re.S | re.M)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"docs/webpush.md has {len(found)} python blocks with {containing!r}"
    return found[0]


def pointed_block(mock):
    block = python_block("from pywebpush import webpush")
    for line in POINTED_LINES:
        assert line in block, f"the recipe names {line!r}"
    return (block.replace(POINTED_LINES[0], f'MOCK = "{mock.base_url}"')
                 .replace(POINTED_LINES[1], f'SENDER_ID = "{SENDER_A}"'))


def run(tmp_path, source, env_extra=None):
    script = tmp_path / "app.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "requests_ca_bundle", "curl_ca_bundle")}
    env.update(env_extra or {})
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    return done.stdout.strip().splitlines()


def test_pointed_recipe(mock, tmp_path):
    status, plaintext = run(tmp_path, GUARD + pointed_block(mock))
    assert re.fullmatch(re.escape(f"201 {mock.base_url}/m/") + r"\S+", status), status
    assert plaintext == PLAINTEXT


def test_unmodified_recipe(mock_google_origin, tmp_path):
    mapping = python_block("socket.getaddrinfo = getaddrinfo")
    assert "MOCK_HTTPS_PORT = 8443" in mapping
    mapping = mapping.replace("MOCK_HTTPS_PORT = 8443", f"MOCK_HTTPS_PORT = {mock_google_origin.https_port}")
    ca = mock_google_origin.api("GET", "/api/v1/health")["tls_ca"]
    status, plaintext = run(tmp_path, GUARD + mapping + pointed_block(mock_google_origin), {"REQUESTS_CA_BUNDLE": ca})
    assert re.fullmatch(r"201 https://fcm\.googleapis\.com/m/\S+", status), status
    assert plaintext == PLAINTEXT
