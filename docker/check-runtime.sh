#!/usr/bin/env bash
# Checks that the Dockerfile's runtime stage installs exactly the packages that own the C libraries
# the binary links. Run by `make test` on the machine's build of fcm-mock (same Debian release as
# the image). Swift runtime libraries are left out: the image links them statically.
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

want_sorted=$(printf '%s\n' "${want[@]}" | sort -u)
have_sorted=$(printf '%s\n' $have | sort -u)
if [ "$want_sorted" != "$have_sorted" ]; then
  echo "check-runtime: docker/Dockerfile RUNTIME_PACKAGES does not match what $bin links" >&2
  echo "  linked (needs): $(echo $want_sorted)" >&2
  echo "  Dockerfile:     $(echo $have_sorted)" >&2
  diff <(echo "$want_sorted") <(echo "$have_sorted") >&2 || true
  exit 1
fi
echo "check-runtime: docker runtime packages match the linked libraries: $(echo $have_sorted)"
