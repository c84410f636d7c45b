#!/usr/bin/env bash
# Static checks of the image's files that no Docker engine is needed for (run by `make test`):
#   - the HEALTHCHECK (Dockerfile and compose.yaml) names no URL or port and FCM_MOCK_URL is not
#     set, so the check follows FCM_MOCK_HTTP_PORT / FCM_MOCK_HTTP_TLS;
#   - the runtime stage installs ca-certificates and runs as a non-root user;
#   - data/ and certs/ (SQLite files, private keys) are ignored by git and by the build context;
#   - docker/entrypoint.sh, run here with the built binary: it execs fcm-mock, and refuses a
#     database directory the user cannot write with a message naming the uid and the fixes.
# Then it checks that these checks, and docker/check-runtime.sh, fail on broken copies.
#
#   docker/check-dockerfile.sh .build/debug/fcm-mock
set -euo pipefail
bin=${1:?usage: check-dockerfile.sh PATH-TO-fcm-mock}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
[ -x "$bin" ] || { echo "check-dockerfile: no fcm-mock binary at $bin" >&2; exit 2; }
scratch=$(mktemp -d)
server_pid=
cleanup() {
  [ -z "$server_pid" ] || { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
  chmod -R u+w "$scratch" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

# --- the files --------------------------------------------------------------------------------
# check_files DIR: DIR holds Dockerfile, compose.yaml, .gitignore-like rules are checked in git's
# view of $root, and DIR/../.dockerignore. Prints the first problem and returns 1.
check_files() {
  local d=$1 df=$1/Dockerfile compose=$1/compose.yaml hc
  # Uncommented lines only; Dockerfile continuation lines joined.
  local code
  code=$(sed -e 's/^[[:space:]]*#.*$//' "$df" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
  hc=$(grep -E '^HEALTHCHECK' <<<"$code" || true)
  [ -n "$hc" ] || { echo "Dockerfile has no HEALTHCHECK"; return 1; }
  [[ $hc == *'"fcm-mock", "health"'* || $hc == *'fcm-mock health'* ]] \
    || { echo "the HEALTHCHECK does not run fcm-mock health: $hc"; return 1; }
  if grep -qE -- '--server|https?:|:[0-9]{2,5}\b|127\.0\.0\.1|localhost' <<<"${hc#*CMD}"; then
    echo "the HEALTHCHECK names a URL or port (it must follow FCM_MOCK_HTTP_PORT): $hc"; return 1
  fi
  if grep -q 'FCM_MOCK_URL' <<<"$code"; then
    echo "the Dockerfile sets FCM_MOCK_URL (the health check would not follow FCM_MOCK_HTTP_PORT)"; return 1
  fi
  local ccode
  ccode=$(sed -e 's/^[[:space:]]*#.*$//' -e 's/[[:space:]]#.*$//' "$compose")
  if grep -q 'FCM_MOCK_URL' <<<"$ccode"; then
    echo "compose.yaml sets FCM_MOCK_URL (the health check would not follow FCM_MOCK_HTTP_PORT)"; return 1
  fi
  local ctest
  ctest=$(awk '/^[[:space:]]*healthcheck:/ { on = 1; next } on && /^[[:space:]]*test:/ { print; exit }' <<<"$ccode")
  [[ $ctest == *'"fcm-mock", "health"'* ]] || { echo "compose.yaml's healthcheck does not run fcm-mock health: $ctest"; return 1; }
  if grep -qE -- '--server|https?:|:[0-9]{2,5}\b|127\.0\.0\.1|localhost' <<<"$ctest"; then
    echo "compose.yaml's healthcheck names a URL or port: $ctest"; return 1
  fi
  # The build stage copies fixtures/ before it builds: the default fixture is embedded from
  # fixtures/default.json, which Sources/FCMServer/Resources links to.
  local build
  build=$(awk '/^FROM /{ n++ } n == 1' <<<"$code")
  awk '/^COPY fixtures \.\/fixtures/{ c = 1 } /^RUN swift build/{ exit !c }' <<<"$build" \
    || { echo "the build stage does not copy fixtures/ before swift build (the embedded default fixture links there)"; return 1; }
  # The runtime stage (the last FROM): ca-certificates, and a USER that is not root.
  local runtime
  runtime=$(awk '/^FROM /{ s = "" } { s = s $0 "\n" } END { printf "%s", s }' <<<"$code")
  grep -qE '^ARG RUNTIME(_EXTRA)?_PACKAGES="([^"]* )?ca-certificates( [^"]*)?"' <<<"$runtime" \
    || { echo "the runtime stage does not install ca-certificates"; return 1; }
  local user
  user=$(grep -E '^USER ' <<<"$runtime" | tail -n 1 | awk '{ print $2 }')
  case ${user%%:*} in
    '' | root | 0) echo "the runtime stage runs as root (USER ${user:-unset})"; return 1 ;;
  esac
  grep -qE '^ENTRYPOINT .*entrypoint\.sh' <<<"$runtime" && grep -qE '^COPY docker/entrypoint\.sh ' <<<"$runtime" \
    || { echo "the image does not run docker/entrypoint.sh"; return 1; }
  # Never ship data or keys: .dockerignore (one level up from the Dockerfile, the build context).
  local di=$d/../.dockerignore p
  for p in data certs; do
    grep -qE "^(\*\*/)?$p/?$" "$di" 2>/dev/null || { echo ".dockerignore does not exclude $p/"; return 1; }
  done
}

# git's view: data/ and certs/ (also beside compose.yaml, whose ../data is the root's) ignored.
check_gitignore() {
  local dir=$1 f
  if git -C "$dir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    for f in data/fcm-mock.sqlite data/x certs/ca.key certs/ca.pem docker/data/x docker/certs/x; do
      git -C "$dir" check-ignore -q --no-index "$f" || { echo ".gitignore does not ignore $f"; return 1; }
    done
  else
    for p in data certs; do
      grep -qE "^/?$p/?$" "$dir/.gitignore" || { echo ".gitignore does not ignore $p/"; return 1; }
    done
  fi
}

problem=$(check_files "$here") || { echo "check-dockerfile: $problem" >&2; exit 1; }
problem=$(check_gitignore "$root") || { echo "check-dockerfile: $problem" >&2; exit 1; }

# --- the entry point, with the built binary ---------------------------------------------------
mkdir -p "$scratch/path"
ln -s "$bin" "$scratch/path/fcm-mock"
entry() { env PATH="$scratch/path:$PATH" sh "$here/entrypoint.sh" "$@"; }

out=$(entry version) || { echo "check-dockerfile: entrypoint.sh version failed: $out" >&2; exit 1; }
[[ $out == "fcm-mock "* ]] || { echo "check-dockerfile: entrypoint.sh version printed: $out" >&2; exit 1; }

# serve with a writable /data stand-in: it execs the server (which prints its listening line).
mkdir -p "$scratch/data"
exec 3< <(FCM_MOCK_DB="$scratch/data/fcm-mock.sqlite" FCM_MOCK_HTTP_PORT=0 FCM_MOCK_XMPP_PORT=0 \
          FCM_MOCK_HOST=127.0.0.1 exec env PATH="$scratch/path:$PATH" sh "$here/entrypoint.sh" serve 2>/dev/null)
server_pid=$!
line=
read -r -t 20 line <&3 || true
[[ $line == "listening http="* ]] || { echo "check-dockerfile: entrypoint.sh serve did not start the server: '$line'" >&2; exit 1; }
http=${line#listening http=}; http=${http%% *}; port=${http##*:}
# The image's HEALTHCHECK is `fcm-mock health` with FCM_MOCK_URL unset: it must ask the port
# FCM_MOCK_HTTP_PORT names.
if ! env -u FCM_MOCK_URL FCM_MOCK_HTTP_PORT="$port" "$bin" health >/dev/null 2>&1; then
  echo "check-dockerfile: 'fcm-mock health' with FCM_MOCK_URL unset does not follow FCM_MOCK_HTTP_PORT=$port:" \
       "the image's HEALTHCHECK would work on the default port 8080 only" >&2
  kill "$server_pid" 2>/dev/null || true
  exit 1
fi
kill "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
server_pid=
exec 3<&-
[ -f "$scratch/data/fcm-mock.sqlite" ] || { echo "check-dockerfile: entrypoint.sh serve made no database in /data" >&2; exit 1; }

# serve with a /data the user cannot write: refused with the uid and the fixes, before fcm-mock runs.
mkdir -p "$scratch/ro"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  chmod 0755 "$scratch" "$scratch/ro"
  as_user=(setpriv --reuid 10001 --regid 10001 --clear-groups)
else
  chmod 0555 "$scratch/ro"
  as_user=()
fi
# (A copy of the script: the checkout may be unreadable for uid 10001, under /root for example.)
cp "$here/entrypoint.sh" "$scratch/entrypoint.sh" && chmod 0644 "$scratch/entrypoint.sh"
set +e
out=$(FCM_MOCK_DB="$scratch/ro/fcm-mock.sqlite" "${as_user[@]}" env PATH="$scratch/path:$PATH" \
      sh "$scratch/entrypoint.sh" serve 2>&1)
rc=$?
set -e
if [ "$rc" != 1 ] || [[ $out != *"runs as $( [ ${#as_user[@]} -gt 0 ] && echo 10001 || id -u):"* ]] \
   || [[ $out != *"--user"* ]] || [[ $out != *"chown"* ]] || [[ $out != *":memory:"* ]]; then
  echo "check-dockerfile: entrypoint.sh did not refuse an unwritable /data clearly (exit $rc): $out" >&2; exit 1
fi
# ... but --db on the command line (or :memory:) is not its business.
out=$(FCM_MOCK_DB="$scratch/ro/fcm-mock.sqlite" timeout 10 "${as_user[@]}" env PATH="$scratch/path:$PATH" \
      sh "$scratch/entrypoint.sh" serve --db :memory: --no-such-flag 2>&1) || true
[[ $out != *"cannot write"* ]] || { echo "check-dockerfile: entrypoint.sh checked /data although --db was given" >&2; exit 1; }

# --- the checks fail on broken copies ---------------------------------------------------------
# mutant NAME SED-EXPRESSION FILE: a copy of docker/ (and .dockerignore) with FILE edited.
mutant() {
  local m="$scratch/mut-$1"
  mkdir -p "$m/docker"
  cp "$here/Dockerfile" "$here/compose.yaml" "$here/check-runtime.sh" "$m/docker/"
  cp "$root/.dockerignore" "$m/"
  sed -i -e "$2" "$m/$3"
  cmp -s "$m/$3" "$( [ "$3" = .dockerignore ] && echo "$root" || echo "$here")/${3#docker/}" \
    && { echo "check-dockerfile: self-test $1: the edit changed nothing" >&2; exit 1; }
  echo "$m"
}
expect_files_fail() {
  local m
  m=$(mutant "$1" "$2" "$3")
  if check_files "$m/docker" >/dev/null; then
    echo "check-dockerfile: self-test: a Dockerfile with '$1' passed" >&2; exit 1
  fi
  [ -z "${CHECK_DOCKERFILE_VERBOSE:-}" ] || echo "  $1: $(check_files "$m/docker")" >&2
}
expect_files_fail 'FCM_MOCK_URL set again' 's|^HEALTHCHECK|ENV FCM_MOCK_URL=http://127.0.0.1:8080\nHEALTHCHECK|' docker/Dockerfile
expect_files_fail 'a port in the HEALTHCHECK' 's|"fcm-mock", "health"\]|"fcm-mock", "health", "--server", "http://127.0.0.1:8080"]|' docker/Dockerfile
expect_files_fail 'FCM_MOCK_URL in compose' 's|^\( *\)FCM_MOCK_LOG_LEVEL: info|\1FCM_MOCK_URL: http://127.0.0.1:8080|' docker/compose.yaml
expect_files_fail 'no ca-certificates' 's|ca-certificates||' docker/Dockerfile
expect_files_fail 'no fixtures in the build stage' 's|^COPY fixtures ./fixtures$||' docker/Dockerfile
expect_files_fail 'USER root' 's|^USER .*|USER root|' docker/Dockerfile
expect_files_fail 'certs in the build context' '/^certs$/d; /^\*\*\/certs$/d' .dockerignore
expect_files_fail 'data in the build context' '/^data$/d; /^\*\*\/data$/d' .dockerignore
# check-runtime.sh: exact RUNTIME_PACKAGES; extras are no library packages and reach apt-get.
expect_runtime_fail() {
  local m
  m=$(mutant "$1" "$2" docker/Dockerfile)
  if bash "$m/docker/check-runtime.sh" "$bin" >/dev/null 2>&1; then
    echo "check-dockerfile: self-test: check-runtime.sh passed a Dockerfile with '$1'" >&2; exit 1
  fi
  [ -z "${CHECK_DOCKERFILE_VERBOSE:-}" ] || echo "  $1: $(bash "$m/docker/check-runtime.sh" "$bin" 2>&1 | head -n 1)" >&2
}
expect_runtime_fail 'a linked library package missing' 's|^\(ARG RUNTIME_PACKAGES=".*\) libgnutls30|\1|'
expect_runtime_fail 'an unlinked library package' 's|^ARG RUNTIME_PACKAGES="|&libpng16-16 |'
expect_runtime_fail 'a library package among the extras' 's|^ARG RUNTIME_EXTRA_PACKAGES="|&libpng16-16 |'
expect_runtime_fail 'a linked package among the extras' 's|^\(ARG RUNTIME_PACKAGES=".*\) libgnutls30\(.*\)|\1\2\nARG RUNTIME_EXTRA_PACKAGES="libgnutls30"|'
expect_runtime_fail 'extras not installed' 's| \${RUNTIME_EXTRA_PACKAGES}||'
# check_gitignore: a repository whose .gitignore lost a line.
expect_gitignore_fail() {
  local m="$scratch/git-$1"
  mkdir -p "$m" && git -C "$m" init -q
  grep -vxF "$2/" "$root/.gitignore" >"$m/.gitignore"
  if check_gitignore "$m" >/dev/null; then
    echo "check-dockerfile: self-test: a .gitignore without '$2/' passed" >&2; exit 1
  fi
  [ -z "${CHECK_DOCKERFILE_VERBOSE:-}" ] || echo "  no $2/ in .gitignore: $(check_gitignore "$m")" >&2
}
if command -v git >/dev/null; then
  expect_gitignore_fail data data
  expect_gitignore_fail certs certs
fi

echo "check-dockerfile: health check with no URL or port, ca-certificates, non-root user," \
     "data/ and certs/ ignored, entrypoint.sh checked with $bin; each check fails on a broken copy"
