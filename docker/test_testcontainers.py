"""The Testcontainers recipe of docs/testing.md, run as written: its Python block is this module's
code. docker/podman-test.sh runs it against podman's Docker-compatible API (DOCKER_HOST) with the
image it built (FCM_MOCK_IMAGE)."""

import re
from pathlib import Path

_doc = (Path(__file__).resolve().parents[1] / "docs" / "testing.md").read_text(encoding="utf-8")
_blocks = [b for b in re.findall(r"^```python\n(.*?)^```", _doc, flags=re.S | re.M) if "testcontainers" in b]
assert len(_blocks) == 1, f"docs/testing.md has {len(_blocks)} Testcontainers blocks in Python, 1 expected"
exec(compile(_blocks[0], "docs/testing.md (Testcontainers, Python)", "exec"))
