#!/usr/bin/env bash
# Builds the image from docker/Dockerfile with podman and runs it for real (`make docker-test`,
# called by `make test`):
#
#   bash docker/podman-test.sh .build/release/fcm-mock     (the static binary of `make release`)
#
# - podman, runc and debootstrap are installed through apt when missing; podman runs as root with
#   the vfs storage driver, runc (crun fails on hybrid cgroups), host networking, chroot isolation
#   for builds, and a containers.conf (CONTAINERS_CONF) with `default_ulimits = []` (the default
#   ulimits are refused on these machines). Its storage is $FCM_MOCK_PODMAN_STATE
#   (/var/lib/fcm-mock-podman), apart from any other podman use of the machine.
# - The base is debian:bookworm-slim when it can be pulled; otherwise (no registry reachable) the
#   same thing made from Debian's packages: `debootstrap --variant=minbase bookworm`, slimmed as
#   the official image is, then `podman import`. It is kept in that storage and reused (a warm run
#   skips it); FCM_MOCK_PODMAN_REFRESH_BASE=1 makes it again.
# - The Dockerfile's build stage is replaced by the binary given (BINARY_FROM=prebuilt); the
#   runtime stage is the one users get.
# - The container is then run and checked: healthy (its HEALTHCHECK, run inside, passes), a send
#   with curl and one with the Python client (clients/python, firebase-admin) delivered, uid
#   10001, SIGTERM ends it with exit 0 within 2 s, started again on the same volume it still has
#   both messages; and testcontainers-python starts the image through podman's Docker API
#   (docker/test_testcontainers.py). The figures (size, build and start times, idle RSS) are
#   printed at the end.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${1:?usage: podman-test.sh PATH-TO-STATIC-fcm-mock}
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
[ -x "$bin" ] || { echo "docker-test: no fcm-mock binary at $bin (make release)" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
  echo "docker-test: podman runs as root here: running this script with sudo"
  exec sudo --preserve-env=PATH,FCM_MOCK_PODMAN_STATE,FCM_MOCK_PODMAN_REFRESH_BASE,DEBIAN_MIRROR bash "$0" "$bin"
fi

say() { echo "docker-test: $*"; }
fail() { echo "docker-test: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
t_all=$(now)

# --- packages ----------------------------------------------------------------------------------
missing=""
for p in podman runc debootstrap curl; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
  say "installing${missing}: to build and run the image (Debian's podman; about 60 MB, once)"
  log=$(mktemp)
  if ! { apt-get -o DPkg::Lock::Timeout=300 update -qq \
         && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
              --no-install-recommends $missing; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2; rm -f "$log"
    fail "could not install$missing (the end of apt-get's output is above)"
  fi
  rm -f "$log"
fi

# --- podman, as this machine needs it ------------------------------------------------------------
state=${FCM_MOCK_PODMAN_STATE:-/var/lib/fcm-mock-podman}
mkdir -p "$state"
cat >"$state/containers.conf" <<'EOF'
# Written by docker/podman-test.sh.
[containers]
# The default ulimits (nofile, nproc) are refused here.
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$state/containers.conf"
# Podman runs an image's HEALTHCHECK on a systemd timer, made at start and removed with the
# container. Where systemd is not the init (this machine is itself a container), podman 4.3 tries
# anyway, and `podman rm` logs `level=error … Removing timer … unable to get systemd connection`
# for a passing run. DISABLE_HC_SYSTEMD is podman's own switch for that: no timer (podman 4.4 and
# later skip it there on their own); the check stays the image's, and wait_healthy runs it.
[ -d /run/systemd/system ] || export DISABLE_HC_SYSTEMD=true
podman=(podman --root "$state/storage" --runroot /run/fcm-mock-podman --storage-driver vfs --runtime runc)

scratch=$(mktemp -d)
name=fcm-mock-test-$$
volume=fcm-mock-test-data-$$
service_pid=
cleanup() {
  [ -z "$service_pid" ] || { kill "$service_pid" 2>/dev/null || true; wait "$service_pid" 2>/dev/null || true; }
  "${podman[@]}" rm -f -t 0 "$name" >/dev/null 2>&1 || true
  "${podman[@]}" volume rm -f "$volume" >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT

# --- the base image -------------------------------------------------------------------------------
official=docker.io/library/debian:bookworm-slim
local_base=localhost/fcm-mock-base:bookworm
t_base=$(now)
base_how=cached
if "${podman[@]}" image exists "$official"; then
  base=$official
elif timeout 60 "${podman[@]}" pull -q "$official" >"$scratch/pull.log" 2>&1; then
  base=$official; base_how=pulled
elif [ -z "${FCM_MOCK_PODMAN_REFRESH_BASE:-}" ] && "${podman[@]}" image exists "$local_base"; then
  base=$local_base
else
  say "$official cannot be pulled ($(tail -n 1 "$scratch/pull.log" | cut -c1-120)):" \
      "making $local_base from Debian's packages (debootstrap --variant=minbase bookworm; once)"
  mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
  rootfs="$scratch/rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$scratch/debootstrap.log" 2>&1 \
    || { tail -n 30 "$scratch/debootstrap.log" >&2; fail "debootstrap failed (the end of its output is above)"; }
  # What the official slim image sets up (debuerreotype): no documentation or translations from
  # later installs, no .deb files or package caches kept, and the same package sources.
  mkdir -p "$rootfs/etc/dpkg/dpkg.cfg.d" "$rootfs/etc/apt/apt.conf.d" "$rootfs/etc/apt/sources.list.d"
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/man/*' 'path-exclude /usr/share/groff/*' 'path-exclude /usr/share/info/*' \
    'path-exclude /usr/share/lintian/*' 'path-exclude /usr/share/linda/*' \
    'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
    >"$rootfs/etc/dpkg/dpkg.cfg.d/docker"
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d" && chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
         "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
         "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/*
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  tar -C "$rootfs" --numeric-owner -cf - . \
    | "${podman[@]}" import --change 'CMD ["bash"]' --message "debootstrap --variant=minbase bookworm ($mirror)" \
        - "$local_base" >/dev/null 2>"$scratch/import.log" \
    || { cat "$scratch/import.log" >&2; fail "podman import failed"; }
  rm -rf "$rootfs"
  base=$local_base; base_how="made with debootstrap"
fi
base_s=$(since "$t_base")

# --- the image --------------------------------------------------------------------------------------
image=localhost/fcm-mock:test
mkdir -p "$scratch/binary"
cp "$bin" "$scratch/binary/fcm-mock"
t_build=$(now)
if ! "${podman[@]}" build --isolation chroot --network host --format docker --layers \
       --build-arg RUNTIME_IMAGE="$base" --build-arg BINARY_FROM=prebuilt \
       --build-context fcm-mock-binary="$scratch/binary" \
       -f "$here/Dockerfile" -t "$image" "$root" >"$scratch/build.log" 2>&1; then
  tail -n 40 "$scratch/build.log" >&2
  fail "podman build failed (the end of its output is above)"
fi
build_s=$(since "$t_build")
# Earlier builds' images, now untagged (the layers this build reused stay).
"${podman[@]}" image prune -f >/dev/null 2>&1 || true
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
hc=$("${podman[@]}" image inspect --format '{{json .Config.Healthcheck.Test}}' "$image")
[ "$hc" = '["CMD","fcm-mock","health"]' ] || fail "the image's HEALTHCHECK is $hc"
user=$("${podman[@]}" image inspect --format '{{.Config.User}}' "$image")
[ "$user" = 10001:10001 ] || fail "the image's USER is '$user', not 10001:10001"

# --- run it -------------------------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
http_port=$(free_port)
xmpp_port=$(free_port)
url="http://127.0.0.1:$http_port"
# wait_healthy SECONDS: until the image's own HEALTHCHECK, run inside the container, passes.
wait_healthy() {
  local deadline=$(( $(date +%s) + $1 ))
  until "${podman[@]}" healthcheck run "$name" >/dev/null 2>&1; do
    [ "$("${podman[@]}" inspect --format '{{.State.Running}}' "$name")" = true ] \
      || { "${podman[@]}" logs "$name" >&2 || true; fail "the container stopped before it was healthy"; }
    [ "$(date +%s)" -lt "$deadline" ] \
      || { "${podman[@]}" logs "$name" >&2 || true; fail "the container is not healthy after $1 s"; }
    sleep 0.1
  done
}
# Loopback only, though the network is the host's: the test exposes nothing to the machine's network.
t_run=$(now)
"${podman[@]}" run -d --name "$name" --network host -v "$volume:/data" \
  -e FCM_MOCK_HOST=127.0.0.1 -e FCM_MOCK_HTTP_PORT="$http_port" -e FCM_MOCK_XMPP_PORT="$xmpp_port" \
  "$image" >"$scratch/run.log" 2>&1 || { cat "$scratch/run.log" >&2; fail "podman run failed"; }
wait_healthy 30
healthy_s=$(since "$t_run")
[ "$(curl -s "$url/readyz")" = '{"status":"ready"}' ] || fail "GET /readyz: $(curl -s "$url/readyz")"

# PID 1 is fcm-mock itself (the entry point execs it), as uid and gid 10001.
ids=$("${podman[@]}" exec "$name" sh -c 'grep -E "^(Name|Uid|Gid):" /proc/1/status' | awk '{ printf "%s ", $0 }')
[[ $ids == *"Name:"*"fcm-mock"* ]] || fail "PID 1 is not fcm-mock: $ids"
[[ $ids =~ Uid:[[:space:]]+10001[[:space:]]+10001[[:space:]]+10001[[:space:]]+10001 ]] || fail "fcm-mock does not run as uid 10001: $ids"
[[ $ids =~ Gid:[[:space:]]+10001[[:space:]]+10001 ]] || fail "fcm-mock does not run as gid 10001: $ids"

# A legacy send with curl, answered and delivered.
answer=$(curl -sS -H 'Authorization: key=AAAAfcmmock:demo-server-key' -H 'Content-Type: application/json' \
              -d '{"to":"demo-android-1","data":{"via":"curl"}}' "$url/fcm/send")
[[ $answer == *'"success":1,"failure":0'* ]] || fail "curl's send was answered: $answer"
curl_id=$(sed -n 's/.*"message_id":"\([^"]*\)".*/\1/p' <<<"$answer")
inbox=$(curl -sS "$url/api/v1/devices/demo-android-1/messages?wait=5")
[[ $inbox == *"\"message_id\":\"$curl_id\",\"status\":\"delivered\""* ]] || fail "curl's message is not in the inbox: $inbox"

# The Python client: firebase-admin through firebase_app(), asserted with wait_for_messages.
bash "$root/clients/python/run-tests.sh" --setup
py="$root/.build/client-venv/bin/python"
client_id=$("$py" - "$url" <<'EOF'
import sys
from firebase_admin import messaging
from fcm_mock import FcmMock

with FcmMock.connect(sys.argv[1]) as mock:
    app = mock.firebase_app()
    # By installation id (firebase-admin 7.7 deprecates token=): the demo fixture's demo-android-2.
    name = messaging.send(messaging.Message(fid="cDemoAndroid2_fid_0002", data={"via": "python"}), app=app)
    [m] = mock.wait_for_messages(token="demo-android-2", count=1, timeout=10)
    assert (m.transport, m.data, m.status) == ("http_v1", {"via": "python"}, "delivered"), m
    assert name.endswith("/" + m.message_id), (name, m.message_id)
    print(m.message_id)
EOF
) || fail "the Python client's send through the container failed"

# Idle: nothing asked for a second.
sleep 1
rss_kib=$("${podman[@]}" exec "$name" awk '/^VmRSS:/ { print $2 }' /proc/1/status)

# SIGTERM: exit 0 within 2 s.
t_stop=$(now)
"${podman[@]}" kill --signal TERM "$name" >/dev/null
code=$(timeout 10 "${podman[@]}" wait "$name") || fail "the container did not stop within 10 s of SIGTERM"
stop_s=$(since "$t_stop")
[ "$code" = 0 ] || fail "SIGTERM: exit code $code, not 0"
awk -v s="$stop_s" 'BEGIN { exit !(s < 2) }' || fail "SIGTERM: the container took $stop_s s to stop (2 s at most)"

# Started again on the same volume: both messages are still there.
"${podman[@]}" start "$name" >"$scratch/start.log" 2>&1 || { cat "$scratch/start.log" >&2; fail "podman start failed"; }
wait_healthy 30
for pair in "demo-android-1 $curl_id" "demo-android-2 $client_id"; do
  set -- $pair
  inbox=$(curl -sS "$url/api/v1/devices/$1/messages")
  [[ $inbox == *"\"message_id\":\"$2\""* ]] || fail "after a restart on the same volume, $1's inbox lost $2: $inbox"
done
"${podman[@]}" rm -f -t 2 "$name" >/dev/null

# testcontainers-python through podman's Docker-compatible API.
sock="$scratch/podman.sock"
"${podman[@]}" system service --time=0 "unix://$sock" >"$scratch/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 100); do
  [ "$(curl -s --unix-socket "$sock" http://podman/_ping 2>/dev/null)" = OK ] && break
  sleep 0.1
done
[ "$(curl -s --unix-socket "$sock" http://podman/_ping 2>/dev/null)" = OK ] \
  || { cat "$scratch/service.log" >&2; fail "podman system service did not answer on $sock"; }
# Ryuk (testcontainers' reaper) is an image from a registry: off, the test removes its container.
# This machine is itself a container (/.dockerenv), where testcontainers would look for a gateway;
# the published ports are on this host's loopback.
if ! DOCKER_HOST="unix://$sock" TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_CONNECTION_MODE=docker_host \
     TC_HOST=127.0.0.1 FCM_MOCK_IMAGE="$image" PYTHONDONTWRITEBYTECODE=1 \
     "$py" -m pytest -q -p no:cacheprovider "$here/test_testcontainers.py"; then
  fail "the testcontainers test failed"
fi

say "image $image: $(awk -v b="$size" 'BEGIN { printf "%.0f MB", b / 1e6 }') on $base (base $base_how: $base_s s);" \
    "build $build_s s; healthy $healthy_s s after podman run; idle RSS $(( rss_kib / 1024 )) MiB;" \
    "SIGTERM -> exit 0 in $stop_s s; uid 10001; curl and Python client sends kept across a restart;" \
    "testcontainers passed; $(since "$t_all") s in all"
