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


# --- the documented signatures and the examples' types -------------------------------------------

CALL = re.compile(r"`(?:with )?(?:FcmMock\.)?([a-z_]+)\(([^`]*)\)")


def documented_calls() -> list:
    """(name, parameters) of every call docs/testing.md's table writes with its parameters."""
    text = (ROOT / "docs/testing.md").read_text(encoding="utf-8")
    calls = []
    for row in text.splitlines():
        if not row.startswith("| `"):
            continue
        first = row.split(" | ")[0]
        for name, params in CALL.findall(first):
            if params and params != "…":
                calls.append((name, [p.strip() for p in params.split(",")]))
    return calls


def test_the_documented_signatures_are_the_codes():
    import inspect

    from fcm_mock import FcmMock

    calls = documented_calls()
    assert {"start", "connect", "create_device", "wait_for_messages", "fault", "apns_certificate"} <= \
        {name for name, _ in calls}
    for name, params in calls:
        code = list(inspect.signature(getattr(FcmMock, name)).parameters.values())
        if code and code[0].name in ("self", "cls"):
            code = code[1:]
        keyword_only = False
        for i, param in enumerate(params):
            if param in ("…", "*"):
                keyword_only = keyword_only or param == "*"
                continue
            if param.startswith("**"):
                assert any(p.kind is p.VAR_KEYWORD for p in code), f"{name}: no {param}"
                continue
            pname = param.split("=")[0]
            found = [p for p in code if p.name == pname]
            assert found, f"docs/testing.md writes {name}(…{pname}…), which the code does not take"
            if keyword_only:
                assert found[0].kind in (found[0].KEYWORD_ONLY, found[0].POSITIONAL_OR_KEYWORD), (name, pname)
            else:
                assert code.index(found[0]) == i and found[0].kind is found[0].POSITIONAL_OR_KEYWORD, \
                    f"docs/testing.md passes {name}'s {pname} by position; the code takes it by keyword only"
            if "=" in param:
                assert found[0].default is not inspect.Parameter.empty, (name, pname)


# Names the README's examples take from the reader's suite.
README_STUBS = '''from typing import Any
from fcm_mock import FcmMock
def send_welcome(app: Any, *, fid: Any) -> None: ...
def send_news(subscription: Any) -> None: ...
class Browser:
    subscription: Any
    def subscribe(self) -> str: return ""
'''


def test_the_examples_type_check_under_mypy_strict(tmp_path):
    """A typed suite copying an example must pass `mypy --strict`: Optional values (a fake
    device's `client`, another transport's `apns`) are narrowed before use."""
    import subprocess
    import sys

    files = []
    for i, code in enumerate(python_blocks(ROOT / "clients/python/README.md")):
        files.append(tmp_path / f"readme_{i}.py")
        files[-1].write_text(README_STUBS + code)
    for i, code in enumerate(python_blocks(ROOT / "docs/testing.md")):
        files.append(tmp_path / f"testing_{i}.py")
        files[-1].write_text(code)
    assert len(files) == 7
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports",
                          "--allow-subclassing-any", "--allow-untyped-decorators", "--no-incremental",
                          "--cache-dir", str(tmp_path / "cache"), *map(str, files)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
