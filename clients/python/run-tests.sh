#!/usr/bin/env bash
# The Python client's own tests, and the sample project in examples/, against the built binary:
#
#   bash clients/python/run-tests.sh [PATH_TO_FCM_MOCK]
#   bash clients/python/run-tests.sh --setup      # only the environment (docker/podman-test.sh)
#
# Installs the package the way users do (`pip install ./clients/python`, not editable) into a
# virtual environment at .build/client-venv, beside the pinned test packages of
# requirements-test.txt (made once; again only when that file changes). The package itself is
# installed again on every run, so the tests always see the checkout's code.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

setup_only=
[ "${1:-}" != --setup ] || { setup_only=1; shift; }
bin="${1:-${FCM_MOCK_BIN:-.build/debug/fcm-mock}}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
[ -n "$setup_only" ] || [ -x "$bin" ] || { echo "client-tests: no fcm-mock binary at $bin (swift build first)" >&2; exit 2; }

venv="$root/.build/client-venv"
req="$here/requirements-test.txt"
stamp="$venv/.requirements"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
pip_flags=(--quiet --disable-pip-version-check --no-input)
if ! { [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp" && "$venv/bin/python" -c 'import pytest, firebase_admin, mypy, testcontainers, aioapns, pywebpush, websockets' 2>/dev/null; }; then
  echo "client-tests: installing PyPI packages (pytest, mypy, firebase-admin, aioapns, pywebpush, websockets, testcontainers and what they need) into .build/client-venv (once; again only when ${req#"$root"/} changes)"
  rm -rf "$venv"
  mkdir -p "$root/.build"
  if ! { python3 -m venv "$venv" && "$venv/bin/python" -m pip install "${pip_flags[@]}" -r "$req"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "client-tests: could not make $venv (on Debian: apt-get install python3-venv)" >&2
    exit 2
  fi
  cp "$req" "$stamp"
fi
# What users run, again whenever the package's files changed. --no-deps: requests is pinned
# above; --force-reinstall: the same version number with changed code is installed again.
package_stamp=$(cd "$here" && find pyproject.toml README.md src -type f ! -path '*.egg-info*' -print0 \
                | sort -z | xargs -0 sha256sum | sha256sum)
if [ "$package_stamp" != "$(cat "$venv/.package" 2>/dev/null)" ]; then
  if ! "$venv/bin/python" -m pip install "${pip_flags[@]}" --no-deps --force-reinstall "$here" >"$log" 2>&1; then
    cat "$log" >&2
    echo "client-tests: pip install ./clients/python failed" >&2
    exit 1
  fi
  echo "$package_stamp" >"$venv/.package"
fi
[ -z "$setup_only" ] || exit 0

export FCM_MOCK_BIN="$bin"
export PYTHONDONTWRITEBYTECODE=1
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"
# The package is typed (py.typed): its annotations must hold under mypy --strict.
"$venv/bin/python" -m mypy --config-file "$here/pyproject.toml" "$here/src/fcm_mock" \
  || { echo "client-tests: mypy --strict found type errors in clients/python/src" >&2; exit 1; }
# From a folder outside the checkout, so the installed package (not ./src) is what is tested.
cd "$here/tests"
# firebase-admin 7.7 deprecates sends by registration token for installation ids (fid=): this
# package's tests and examples use none, and a new one fails.
"$venv/bin/python" -m pytest -q -p no:cacheprovider \
  -W "error:Message.token is deprecated:DeprecationWarning" \
  -W "error:MulticastMessage.tokens is deprecated:DeprecationWarning" \
  "$here/tests" "$here/examples"
