#!/usr/bin/env bash
# Checks that the Dockerfile's runtime stage installs exactly the packages that own the C libraries
# the binary links. Run by `make test` on the machine's build of fcm-mock (same Debian release as
# the image). Swift runtime libraries are left out: the image links them statically.
# Packages wanted on purpose that own no linked library (ca-certificates) go in the separate
# RUNTIME_EXTRA_PACKAGES list: it may not name a library package, nor repeat RUNTIME_PACKAGES.
#
#   docker/check-runtime.sh .build/debug/fcm-mock
set -euo pipefail
bin=${1:?usage: check-runtime.sh PATH-TO-fcm-mock}
here=$(cd "$(dirname "$0")" && pwd)

# Libraries every Debian base image has (libc6, libgcc-s1) or the static Swift runtime brings in.
base_libs='^(libc\.so|libm\.so|ld-linux|libpthread\.so|libdl\.so|librt\.so|libutil\.so|libgcc_s\.so)'
swift_libs='^(libswift|libdispatch\.so|libBlocksRuntime\.so|libFoundation|lib_FoundationICU)'

ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "check-runtime: $bin links no shared libraries?" >&2; exit 1; }

want=()
for lib in $needed; do
  [[ $lib =~ $base_libs || $lib =~ $swift_libs ]] && continue
  # awk reads all of its input (no early exit): under pipefail a closed pipe would fail the check.
  path=$("$ldconfig" -p | awk -v l="$lib" '$1 == l && /x86-64|AArch64|aarch64/ && !found { found = $NF } END { print found }')
  [ -n "$path" ] || { echo "check-runtime: $lib is not installed here" >&2; exit 1; }
  owner=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | awk -F: 'NR == 1 { o = $1 } END { print o }') || owner=""
  [ -n "$owner" ] || owner=$(dpkg -S "$path" 2>/dev/null | awk -F: 'NR == 1 { o = $1 } END { print o }') || owner=""
  [ -n "$owner" ] || { echo "check-runtime: no Debian package owns $path ($lib)" >&2; exit 1; }
  want+=("$owner")
done
# The static Swift runtime links the C++ runtime dynamically.
want+=("libstdc++6")

have=$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"$/\1/p' "$here/Dockerfile")
[ -n "$have" ] || { echo "check-runtime: no RUNTIME_PACKAGES line in docker/Dockerfile" >&2; exit 1; }

# The extras: no library packages (a linked one belongs in RUNTIME_PACKAGES, an unlinked one in
# no list), none of RUNTIME_PACKAGES, and both lists reach apt-get install.
extra=$(sed -n 's/^ARG RUNTIME_EXTRA_PACKAGES="\(.*\)"$/\1/p' "$here/Dockerfile")
for p in $extra; do
  case $p in
    lib*) echo "check-runtime: RUNTIME_EXTRA_PACKAGES names the library package $p" \
               "(linked: put it in RUNTIME_PACKAGES; not linked: remove it)" >&2; exit 1 ;;
  esac
  for q in $have; do
    [ "$p" != "$q" ] || { echo "check-runtime: $p is in both RUNTIME_PACKAGES and RUNTIME_EXTRA_PACKAGES" >&2; exit 1; }
  done
done
# The runtime stage is the last FROM; its first RUN (with its continuation lines) installs.
install_cmd=$(awk '/^FROM / { n++ } { line[NR] = $0; stage[NR] = n }
  END { for (i = 1; i <= NR; i++) if (stage[i] == n && line[i] ~ /^RUN /) { s = i; break }
        for (i = s; s && i <= NR; i++) { printf "%s ", line[i]; if (line[i] !~ /\\$/) break } }' \
  "$here/Dockerfile")
for var in RUNTIME_PACKAGES RUNTIME_EXTRA_PACKAGES; do
  [[ $install_cmd == *"\${$var}"* ]] || {
    echo "check-runtime: the runtime stage's apt-get install does not install \${$var}" >&2; exit 1; }
done

want_sorted=$(printf '%s\n' "${want[@]}" | sort -u)
have_sorted=$(printf '%s\n' $have | sort -u)
if [ "$want_sorted" != "$have_sorted" ]; then
  echo "check-runtime: docker/Dockerfile RUNTIME_PACKAGES does not match what $bin links" >&2
  echo "  linked (needs): $(echo $want_sorted)" >&2
  echo "  Dockerfile:     $(echo $have_sorted)" >&2
  diff <(echo "$want_sorted") <(echo "$have_sorted") >&2 || true
  exit 1
fi
echo "check-runtime: docker runtime packages match the linked libraries: $(echo $have_sorted)${extra:+ (and on purpose: $extra)}"
