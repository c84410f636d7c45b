#!/usr/bin/env bash
# fcm-mock benchmark (`make bench`). Loopback only; every phase is bounded in time.
#
#   bash bench/run.sh                        builds the mock (make release) and measures
#   FCM_MOCK_BIN=path bash bench/run.sh      measures that binary instead of building
#   bash bench/run.sh --webpush              only the Web Push phase (bench/bench_webpush.py)
#   bash bench/run.sh --autopush             only the autopush phase (bench/bench_autopush.py): a push
#                                            relayed to a connected raw autopush client against a push
#                                            to a fake web device; RSS of 1,000 idle connections
#   bash bench/run.sh --mcs                  only the MCS phase (bench/bench_mcs.py): an FCM send
#                                            delivered over MCS to a raw GCM client that acks it
#                                            against a send to a fake android device; RSS of 1,000
#                                            idle logged-in MCS connections, heartbeats answered
#   BENCH_PEER_SRC=dir bash bench/run.sh     the whole bench, then the loops' phase below
#   bash bench/run.sh loops                  only the HTTP/1.1 loops' phase (bench/loops.py): the
#                                            ceiling, the Go peer (BENCH_PEER_SRC), main's binary
#                                            (BENCH_BASE_BIN), one loop and the default, taskset
#   bash bench/run.sh ecdh [COUNT]           only P-256 ECDH: nettle against OpenSSL's libcrypto
#   bash bench/run.sh tls-sessions [N]       only GnuTLS's resident memory per idle server session, with
#                                            a priority cache per session and with the shared one
#
# Installs what is missing (wrk, libmicrohttpd-dev, gcc, pkg-config, python3, sqlite3, h2load from
# nghttp2-client, openssl, valgrind, python3-cryptography) with apt-get, builds the ceiling server (bench/ceiling.c) into .build/bench/, then runs
# bench/bench.py, which prints a markdown report (also left in .build/bench/report.md); its last
# phases are bench/bench_v1.py (HTTP v1), bench/bench_apns.py (APNs against v1 over HTTP/2),
# bench/bench_webpush.py (Web Push), bench/bench_autopush.py (pushes relayed to autopush clients) and
# bench/bench_mcs.py (sends delivered over MCS).
# Environment: BENCH_DURATION (seconds per wrk phase, default 10), BENCH_WARMUP (default 2),
# BENCH_KEEP=1 keeps the run's SQLite file under .build/bench/.
# Exit: 0 all targets met, 1 a target missed, 2 could not build or measure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
out="$root/.build/bench"
mkdir -p "$out"

# --- tools -------------------------------------------------------------------------------------
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
command -v h2load >/dev/null 2>&1 || missing+=(nghttp2-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
# The Web Push phase encrypts its one push body with `cryptography` (ECDH, AES-GCM).
python3 -c 'import cryptography' >/dev/null 2>&1 || missing+=(python3-cryptography)
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libmicrohttpd; then
    missing+=(libmicrohttpd-dev)
fi
# bench/ecdh.c measures OpenSSL's P-256 beside nettle's.
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libcrypto; then
    missing+=(libssl-dev)
fi
# The loops' phase builds the Go peer when BENCH_PEER_SRC names its source.
if [ -n "${BENCH_PEER_SRC:-}" ] && ! command -v go >/dev/null 2>&1; then
    missing+=(golang-go)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    echo "bench: installing ${missing[*]}" >&2
    if ! { "${sudo[@]}" apt-get update -qq \
           && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
                  --no-install-recommends "${missing[@]}"; } >"$out/apt.log" 2>&1; then
        cat "$out/apt.log" >&2
        echo "bench: could not install ${missing[*]}" >&2
        exit 2
    fi
fi

# --- the ceiling server --------------------------------------------------------------------------
ceiling="$out/ceiling"
if [ ! -x "$ceiling" ] || [ "$here/ceiling.c" -nt "$ceiling" ]; then
    # shellcheck disable=SC2046
    gcc -O2 -Wall -Wextra -o "$ceiling" "$here/ceiling.c" \
        $(pkg-config --cflags --libs libmicrohttpd) -lpthread
fi

# --- the XMPP load client and its ceiling (an echo server) ---------------------------------------
for tool in xmpp_load echo; do
    if [ ! -x "$out/$tool" ] || [ "$here/$tool.c" -nt "$out/$tool" ]; then
        gcc -O2 -Wall -o "$out/$tool" "$here/$tool.c" -lpthread
    fi
done

# --- the Web Push floor: one P-256 ECDH with nettle, as the mock makes once per push, and the same
# with OpenSSL's libcrypto ---------------------------------------------------------------------------
if [ ! -x "$out/ecdh" ] || [ "$here/ecdh.c" -nt "$out/ecdh" ]; then
    # shellcheck disable=SC2046
    gcc -O2 -Wall -Wextra -o "$out/ecdh" "$here/ecdh.c" $(pkg-config --cflags --libs hogweed nettle libcrypto) -lgmp
fi
if [ "${1:-}" = "ecdh" ] || [ "${1:-}" = "--ecdh" ]; then
    exec "$out/ecdh" "${2:-2000}" all
fi

# --- GnuTLS's resident memory per idle server session, with and without the shared priority cache --
if [ ! -x "$out/tls_sessions" ] || [ "$here/tls_sessions.c" -nt "$out/tls_sessions" ]; then
    # shellcheck disable=SC2046
    gcc -O2 -Wall -Wextra -o "$out/tls_sessions" "$here/tls_sessions.c" $(pkg-config --cflags --libs gnutls)
fi
if [ "${1:-}" = "tls-sessions" ]; then
    mkdir -p "$out/tls-sessions"
    [ -f "$out/tls-sessions/server.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -subj /CN=localhost -days 30 -keyout "$out/tls-sessions/server.key" -out "$out/tls-sessions/server.pem" 2>/dev/null
    exec "$out/tls_sessions" "${2:-1000}" "$out/tls-sessions/server.pem" "$out/tls-sessions/server.key"
fi

# --- the APNs phase's HTTP/2 client for a body per request (h2load sends one body to all) ---------
if [ ! -x "$out/h2send" ] || [ "$here/h2send.c" -nt "$out/h2send" ]; then
    gcc -O2 -Wall -Wextra -o "$out/h2send" "$here/h2send.c" -lnghttp2
fi

# --- the mock ------------------------------------------------------------------------------------
if [ -n "${FCM_MOCK_BIN:-}" ]; then
    mock="$FCM_MOCK_BIN"
    case "$mock" in /*) ;; *) mock="$root/$mock" ;; esac
else
    # `make release`: the shipped, statically linked binary (and no relink of `make run`'s build).
    echo "bench: building fcm-mock (make release)" >&2
    if ! "${MAKE:-make}" --no-print-directory -C "$root" release >"$out/swift-build.log" 2>&1; then
        tail -n 40 "$out/swift-build.log" >&2
        echo "bench: make release failed (log: $out/swift-build.log)" >&2
        exit 2
    fi
    mock="$(swift build -c release --show-bin-path)/fcm-mock"
fi
if [ ! -x "$mock" ]; then
    echo "bench: no fcm-mock binary at $mock" >&2
    exit 2
fi

if [ "${1:-}" = "loops" ] || [ "${1:-}" = "--loops" ]; then
    exec python3 "$here/loops.py" --mock "$mock" --ceiling "$ceiling" --work "$out"
fi
if [ "${1:-}" = "--webpush" ]; then
    exec python3 "$here/bench_webpush.py" --mock "$mock" --work "$out"
fi
if [ "${1:-}" = "--autopush" ] || [ "${1:-}" = "autopush" ]; then
    exec python3 "$here/bench_autopush.py" --mock "$mock" --work "$out"
fi
if [ "${1:-}" = "--mcs" ] || [ "${1:-}" = "mcs" ]; then
    exec python3 "$here/bench_mcs.py" --mock "$mock" --work "$out"
fi
if [ -z "${BENCH_PEER_SRC:-}" ]; then
    exec python3 "$here/bench.py" --mock "$mock" --ceiling "$ceiling" --work "$out"
fi
# With the Go peer's source at hand, the loops' phase follows (it prints; it gates nothing).
rc=0
python3 "$here/bench.py" --mock "$mock" --ceiling "$ceiling" --work "$out" || rc=$?
python3 "$here/loops.py" --mock "$mock" --ceiling "$ceiling" --work "$out" || { [ "$rc" -ne 0 ] || rc=2; }
exit "$rc"
