"""docs/real-clients.md's start recipe, run as written: the block is read from the page. Its serve
line starts two servers side by side (every port picked, the XMPP one too when another holds
5235), and its `CA=` line, with `H` set to the listening line's HTTP port, names the local CA's
PEM file."""

import os
import pathlib
import re
import subprocess

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "real-clients.md"


def start_block():
    blocks = re.findall(r"^```sh\n(.*?)^```$", DOC.read_text(), re.S | re.M)
    found = [b for b in blocks if "fcm-mock serve" in b and "CA=$(" in b]
    assert len(found) == 1, f"docs/real-clients.md has {len(found)} start blocks"
    lines = found[0].splitlines()
    serve = [l for l in lines if l.startswith("fcm-mock serve")]
    ca = [l for l in lines if l.startswith("CA=$(")]
    assert len(serve) == 1 and len(ca) == 1, lines
    return serve[0], ca[0]


def ports(line):
    return dict(re.findall(r"(\w+)=127\.0\.0\.1:(\d+)", line))


def test_the_start_recipe_starts_twice_and_names_the_ca():
    serve, ca_line = start_block()
    binary = os.path.abspath(os.environ.get("FCM_MOCK_BIN", ".build/release/fcm-mock"))
    argv = serve.split()
    argv[0] = binary
    # The block as a reader runs it: no FCM_MOCK_* variable of this run's (one naming the XMPP
    # port would make it the caller's).
    env = {k: v for k, v in os.environ.items() if not k.startswith("FCM_MOCK_")}
    procs = []
    try:
        seen = []
        for _ in range(2):
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
            procs.append(p)
            line = p.stdout.readline()
            assert line.startswith("listening "), line
            got = ports(line)
            assert set(got) == {"http", "xmpp", "https", "mcs"}, line
            seen.append(got)
        assert seen[0]["xmpp"] != seen[1]["xmpp"], seen
        out = subprocess.run(["bash", "-c", ca_line + '\nprintf %s "$CA"'], env={**env, "H": seen[1]["http"]},
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        assert pathlib.Path(out.stdout).read_text().startswith("-----BEGIN CERTIFICATE-----"), out.stdout
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
