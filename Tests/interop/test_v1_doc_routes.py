"""The routes docs/v1.md gives for an unmodified firebase-admin without root, run as written.

Each test reads its code block from docs/v1.md itself (found by a line it must contain), so the
page and the test cannot drift apart: a change to the block is what runs here. The block runs in
a fresh Python process, as an app server would run it, with firebase-admin 7.7.0 unchanged and
only the environment the page names (the CA through REQUESTS_CA_BUNDLE and SSL_CERT_FILE).
"""

import json
import os
import pathlib
import re
import subprocess
import sys

from mocksupport import PROJECT_A

ROOT = pathlib.Path(__file__).resolve().parents[2]
V1_DOC = ROOT / "docs" / "v1.md"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"


def doc_block(language, containing):
    """The one ```language block of docs/v1.md with a line containing `containing`."""
    blocks = re.findall(r"^```" + language + r"\n(.*?)^```$", V1_DOC.read_text(), re.S | re.M)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"docs/v1.md has {len(found)} {language} blocks with {containing!r}"
    return found[0]


# Runs before the page's block: a Google name that still reaches the real resolver afterwards
# was not mapped by the block, and fails loudly here instead of going to the network.
GUARD = '''
import socket
_real_getaddrinfo = socket.getaddrinfo

def _guard(host, port, *args, **kwargs):
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    if name.rstrip(".").lower().endswith(("googleapis.com", "google.com")):
        raise socket.gaierror(socket.EAI_NONAME,
                              f"{name!r} reached the real resolver: the docs' mapping missed it")
    return _real_getaddrinfo(host, port, *args, **kwargs)

socket.getaddrinfo = _guard
'''

# Runs after it: the unmodified SDK, synchronous and async calls, one message each.
APP = '''
import asyncio, json, os, sys
MOCK_HTTPS_PORT = int(os.environ["MOCK_HTTPS_PORT"])  # the page's 8443, as this run's port
import firebase_admin
from firebase_admin import credentials, messaging

app = firebase_admin.initialize_app(credentials.Certificate(os.environ["SERVICE_ACCOUNT"]))
service = messaging._get_messaging_service(app)
assert service._fcm_url.startswith("https://fcm.googleapis.com/"), service._fcm_url
fid = os.environ["DEVICE_FID"]
out = {"send": messaging.send(messaging.Message(fid=fid, data={"call": "send"}))}
batch = messaging.send_each([messaging.Message(fid=fid, data={"call": "send_each"})])
out["send_each"] = [r.message_id if r.success else repr(r.exception) for r in batch.responses]
batch = asyncio.run(messaging.send_each_async([messaging.Message(fid=fid, data={"call": "send_each_async"})]))
out["send_each_async"] = [r.message_id if r.success else repr(r.exception) for r in batch.responses]
print(json.dumps(out))
'''


def test_python_in_process_mapping_from_the_docs(mock_https, tmp_path):
    block = doc_block("python", "socket.getaddrinfo, socket.socket.connect = getaddrinfo, connect")
    assert "MOCK_HTTPS_PORT = 8443" in block, "the block names the port it forwards to"
    ca = mock_https.api("GET", "/api/v1/health")["tls_ca"]
    # A service account as the Firebase console gives it: token_uri is Google's.
    sa = mock_https.api("POST", f"/api/v1/projects/{PROJECT_A}/service-accounts", expect=201, json={})
    sa["token_uri"] = GOOGLE_TOKEN_URI
    sa_path = tmp_path / "sa.json"
    sa_path.write_text(json.dumps(sa))
    token = mock_https.create_device()
    script = tmp_path / "app.py"
    script.write_text(GUARD + "\n# --- docs/v1.md ---\n" + block + "# --- end ---\n" + APP)

    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "curl_ca_bundle")}
    env.update(REQUESTS_CA_BUNDLE=ca, SSL_CERT_FILE=ca, MOCK_HTTPS_PORT=str(mock_https.https_port),
               SERVICE_ACCOUNT=str(sa_path), DEVICE_FID=mock_https.device(token)["fid"])
    done = subprocess.run([sys.executable, "-W", "error:Message.token is deprecated:DeprecationWarning", str(script)],
                          capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    out = json.loads(done.stdout.strip().splitlines()[-1])

    prefix = f"projects/{PROJECT_A}/messages/"
    names = [out["send"]] + out["send_each"] + out["send_each_async"]
    assert all(n.startswith(prefix) for n in names), out
    entries = mock_https.wait_inbox(token, 3)
    assert [e["data"]["call"] for e in entries] == ["send", "send_each", "send_each_async"], entries
    assert all(e["via"]["transport"] == "http_v1" for e in entries), entries
    for name, entry in zip(names, entries):
        assert mock_https.v1_record(name)["message_id"] == entry["message_id"]
    # The token came from the mock's endpoint under Google's name, for this account's key.
    issued = mock_https.api("GET", "/api/v1/access-tokens")["items"]
    assert any(t["client_email"] == sa["client_email"] for t in issued), issued


# The command the namespace block runs in place of `node app.js`: the unmodified SDK with only
# what the block exported (GOOGLE_APPLICATION_CREDENTIALS, the CA variables), then the control
# API inside the namespace, the only place it is reachable.
NAMESPACE_APP = '''
import json, os, requests, firebase_admin
from firebase_admin import messaging
assert open("/etc/hosts").read().split() == ["127.0.0.1", "fcm.googleapis.com",
                                             "oauth2.googleapis.com", "iid.googleapis.com"]
app = firebase_admin.initialize_app()    # GOOGLE_APPLICATION_CREDENTIALS
sa = json.load(open(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]))
name = messaging.send(messaging.Message(fid="cDemoAndroid1_fid_0001", data={"via": "namespace"}))  # demo-android-1
inbox = requests.get("http://127.0.0.1:8080/api/v1/devices/demo-android-1/messages",
                     params={"wait": 5}, timeout=30).json()["items"]
print(json.dumps({"name": name, "token_uri": sa["token_uri"], "inbox": inbox}))
'''


def test_namespace_route_from_the_docs(tmp_path):
    """The block runs as written, except its last word (the app) and where `fcm-mock` is found."""
    block = doc_block("sh", "unshare --map-root-user --net --mount")
    assert block.rstrip().endswith(' sh "$PWD/mock-ns" node app.js'), block[-200:]
    block = block.rstrip()[:-len("node app.js")] + '"$PYTHON" app.py\n'
    (tmp_path / "app.py").write_text(NAMESPACE_APP)
    (tmp_path / "route.sh").write_text(block)
    binary = os.path.abspath(os.environ["FCM_MOCK_BIN"])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fcm-mock").symlink_to(binary)
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update(PATH=f"{bindir}:/usr/sbin:/sbin:{os.environ.get('PATH', '/usr/bin:/bin')}",
               PYTHON=sys.executable)
    done = subprocess.run(["sh", "-eu", "route.sh"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (
        f"exit {done.returncode} (this route needs unshare, ip and unprivileged user namespaces)"
        f"\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(f"wrote {tmp_path}/mock-ns/sa.json: "), lines
    out = json.loads(lines[-1])
    assert out["token_uri"] == "https://oauth2.googleapis.com/token", out
    assert re.fullmatch(r"projects/demo-project/messages/0:\d{16}%[0-9a-f]{16}", out["name"]), out
    assert [e["data"] for e in out["inbox"]] == [{"via": "namespace"}], out["inbox"]
    assert out["inbox"][0]["via"]["transport"] == "http_v1", out["inbox"][0]
