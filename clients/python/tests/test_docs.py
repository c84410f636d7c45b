"""The Python blocks of README.md's "Using it from a test suite" and of docs/testing.md, each run
as a test module with the installed plugin: a snippet in the docs is code. A block whose first
line is `# pytest --option …` is run with those options. (The Testcontainers block needs a
container engine: docker/test_testcontainers.py runs it.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]


def python_blocks(path: Path, section: str = "") -> list:
    text = path.read_text(encoding="utf-8")
    if section:
        start = text.index(section)
        end = text.find("\n## ", start + len(section))
        text = text[start:end if end >= 0 else len(text)]
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


BLOCKS = [(f"README.md#{i}", b) for i, b in
          enumerate(python_blocks(ROOT / "README.md", "## Using it from a test suite"))]
BLOCKS += [(f"docs/testing.md#{i}", b) for i, b in enumerate(python_blocks(ROOT / "docs/testing.md"))
           if "testcontainers" not in b]


def test_the_blocks_are_found():
    assert [name for name, _ in BLOCKS] == ["README.md#0", "docs/testing.md#0", "docs/testing.md#1",
                                            "docs/testing.md#2", "docs/testing.md#3"]
    assert [options(code) for _, code in BLOCKS] == [[], [], [], ["--fcm-mock-https"], ["--fcm-mock-https"]]


def options(code: str) -> list:
    """The pytest options a block's first line names (`# pytest --fcm-mock-https`)."""
    first = code.splitlines()[0]
    return first.split()[2:] if first.startswith("# pytest ") else []


# The blocks send by fid: firebase-admin's deprecated Message.token fails them.
WARNINGS = {"README.md": ["-W", "error:Message.token is deprecated:DeprecationWarning"],
            "docs/testing.md": ["-W", "error:Message.token is deprecated:DeprecationWarning"]}


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_block_passes(pytester, name, code):
    pytester.makepyfile(test_doc_block=code)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *WARNINGS[name.split("#")[0]], *options(code))
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1 and set(outcomes) <= {"passed", "warnings", "warning"}, \
        f"{name}:\n" + "\n".join(result.outlines[-40:])
