#!/usr/bin/env bash
# `make install` and `make uninstall`, into a temporary DESTDIR. Run by `make test` with the debug
# build (INSTALL_BIN), so it costs no release build; that `make install` builds the release binary
# statically (and that the benchmark builds the same one) is checked on `make -n`.
#
#   bash Tests/install/run.sh [PATH_TO_FCM_MOCK]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
bin="${1:-.build/debug/fcm-mock}"
[ -x "$bin" ] || { echo "install test: no fcm-mock binary at $bin" >&2; exit 2; }

# A clean make: no PREFIX/DESTDIR from the environment, no variables from a calling make (make test).
make=(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PREFIX -u DESTDIR make --no-print-directory -C "$root")
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }

# Default PREFIX: $(DESTDIR)/usr/local/bin/fcm-mock, mode 0755, runs, and the copy needed no sudo.
out=$("${make[@]}" install INSTALL_BIN="$bin" DESTDIR="$stage" 2>&1) || { echo "$out" >&2; fail "make install failed"; }
installed="$stage/usr/local/bin/fcm-mock"
[ -f "$installed" ] && [ -x "$installed" ] || fail "no executable at \$DESTDIR/usr/local/bin/fcm-mock"
[ "$(stat -c %a "$installed")" = 755 ] || fail "mode $(stat -c %a "$installed"), expected 755"
case $out in *sudo*) fail "used sudo for a writable DESTDIR: $out" ;; esac
cmp -s "$bin" "$installed" || fail "the installed file differs from $bin (stripped?)"
version=$("$installed" version) || fail "the installed binary does not run: fcm-mock version"
case $version in "fcm-mock "[0-9]*) ;; *) fail "fcm-mock version printed: $version" ;; esac

# Installing again over the first copy works (packagers and upgrades do that).
"${make[@]}" -s install INSTALL_BIN="$bin" DESTDIR="$stage" >/dev/null || fail "a second make install failed"

# PREFIX is honoured; uninstall removes exactly the binary, and a second uninstall is harmless.
"${make[@]}" -s install INSTALL_BIN="$bin" DESTDIR="$stage" PREFIX=/opt/fcm >/dev/null \
    || fail "make install PREFIX=/opt/fcm failed"
[ -x "$stage/opt/fcm/bin/fcm-mock" ] || fail "PREFIX=/opt/fcm: no \$DESTDIR/opt/fcm/bin/fcm-mock"
"${make[@]}" -s uninstall DESTDIR="$stage" >/dev/null || fail "make uninstall failed"
[ ! -e "$installed" ] || fail "make uninstall left $installed"
[ -x "$stage/opt/fcm/bin/fcm-mock" ] || fail "make uninstall (default PREFIX) removed the PREFIX=/opt/fcm copy"
"${make[@]}" -s uninstall DESTDIR="$stage" >/dev/null || fail "a second make uninstall failed"

# install-strip strips the copy (and only the copy).
if command -v strip >/dev/null; then
    "${make[@]}" -s install-strip INSTALL_BIN="$bin" DESTDIR="$stage" >/dev/null || fail "make install-strip failed"
    [ "$(stat -c %s "$installed")" -lt "$(stat -c %s "$bin")" ] || fail "make install-strip did not strip"
    "$installed" version >/dev/null || fail "the stripped binary does not run"
fi

# A missing binary is a clear error, not a copy of nothing.
if "${make[@]}" -s install INSTALL_BIN=.build/no-such-fcm-mock DESTDIR="$stage" >/dev/null 2>&1; then
    fail "make install succeeded without a binary"
fi

# Without INSTALL_BIN, make install builds the release binary first, with the Swift runtime linked
# statically (the portable build); the benchmark builds through the same target.
plan=$("${make[@]}" -n install DESTDIR="$stage")
grep -q -- 'build -c release --static-swift-stdlib' <<<"$plan" \
    || fail "make install does not build the release binary with --static-swift-stdlib"
plan=$("${make[@]}" -n run)
grep -q -- 'build -c release --static-swift-stdlib' <<<"$plan" \
    || fail "make run does not build the release binary with --static-swift-stdlib"
if "${make[@]}" -n install INSTALL_BIN="$bin" DESTDIR="$stage" | grep -q 'build -c release'; then
    fail "make install INSTALL_BIN=... builds the release binary anyway"
fi
grep -qE '^[^#]*make.* release' bench/run.sh || fail "bench/run.sh does not build through make release"
if grep -qE '^[^#]*swift build -c release( |$)' bench/run.sh && ! grep -q 'show-bin-path' <<<"$(grep -E '^[^#]*swift build -c release' bench/run.sh)"; then
    fail "bench/run.sh builds with its own swift build flags (it would relink make run's binary)"
fi

echo "install test: make install/uninstall/install-strip into DESTDIR, PREFIX, and the release build's flags: ok"
