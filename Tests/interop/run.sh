#!/usr/bin/env bash
# Interop suite: drives a running fcm-mock with real third-party clients (pyfcm 1.5.4, slixmpp,
# firebase-admin 7.7.0, aioapns 4.0, pywebpush 2.5.0).
#
#   bash Tests/interop/run.sh [PATH_TO_FCM_MOCK]
#
# The binary is the first argument, else $FCM_MOCK_BIN, else .build/release/fcm-mock.
# A virtual environment with the pinned packages of Tests/interop/requirements.txt is made
# once at .build/interop-venv and reused while it matches that file. Exits with pytest's code.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

bin="${1:-${FCM_MOCK_BIN:-.build/release/fcm-mock}}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
if [ ! -x "$bin" ]; then
    echo "interop: no fcm-mock binary at $bin (build it with 'swift build -c release'," \
         "or pass its path as the first argument or in FCM_MOCK_BIN)" >&2
    exit 2
fi

# ensure_venv DIR REQUIREMENTS IMPORTS: a virtual environment at DIR holding REQUIREMENTS, made
# again only when the file changed or IMPORTS (a Python import line) fails in it.
ensure_venv() {
    local venv="$1" req="$2" imports="$3"
    local stamp="$venv/.interop-requirements"
    if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp" \
        && "$venv/bin/python" -c "$imports" >/dev/null 2>&1; then
        return 0
    fi
    local why="once; again only when ${req#"$root"/} changes"
    [ -d "$venv" ] && why="${req#"$root"/} changed or the environment is incomplete"
    local pkgs
    pkgs=$(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' "$req" | tr '\n' ' ')
    echo "interop: installing PyPI packages (${pkgs% }) into ${venv#"$root"/}: the interop suite's clients ($why)"
    local log
    log="$(mktemp)"
    rm -rf "$venv"
    mkdir -p "$root/.build"
    local pip_flags=(--quiet --disable-pip-version-check --no-input)
    local pip
    if python3 -m venv "$venv" >"$log" 2>&1; then
        pip=("$venv/bin/python" -m pip)
    else
        rm -rf "$venv"
        if python3 -m venv --without-pip "$venv" >>"$log" 2>&1 \
           && python3 -m pip --version >>"$log" 2>&1; then
            pip=(python3 -m pip --python "$venv/bin/python")
        else
            cat "$log" >&2
            rm -f "$log"
            echo "interop: could not create a virtual environment at $venv" \
                 "(on Debian: apt-get install python3-venv)" >&2
            exit 2
        fi
    fi
    if ! "${pip[@]}" install "${pip_flags[@]}" -r "$req" >>"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "interop: installing $req into $venv failed" >&2
        exit 2
    fi
    rm -f "$log"
    cp "$req" "$stamp"
}

venv="$root/.build/interop-venv"
ensure_venv "$venv" "$here/requirements.txt" 'import pyfcm, pytest, requests, firebase_admin, httpx, h2, aioapns, pywebpush, http_ece'
# pyfcm 2.x (HTTP v1) has the package name of the legacy pyfcm 1.5.4: its own environment.
venv2="$root/.build/interop-venv-pyfcm2"
ensure_venv "$venv2" "$here/pyfcm2/requirements.txt" 'import pyfcm, pytest, requests, aiohttp, google.oauth2'

export FCM_MOCK_BIN="$bin"
export PYTHONDONTWRITEBYTECODE=1
# Loopback only: never route the suite's requests through a proxy from the environment.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"

set +e
"$venv/bin/python" -m pytest -q Tests/interop --ignore=Tests/interop/pyfcm2
main=$?
"$venv2/bin/python" -m pytest -q Tests/interop/pyfcm2
v2=$?
[ "$main" -eq 0 ] && [ "$v2" -eq 0 ]
exit $?
