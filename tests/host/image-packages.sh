#!/bin/bash
# Every package that debian/tests/control's Depends: lines name is in the
# test VM's image (vm/image-packages): the image has no apt lists, so
# autopkgtest could not install a missing one (vm/build-image).
#
#   tests/host/image-packages.sh
#                           no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)

mapfile -t image < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$top/vm/image-packages")
# The package names of the Depends: fields (continuation lines included),
# without versions and architecture qualifiers; each of "a | b" counts.
mapfile -t depends < <(awk '
	/^Depends:/ { field = 1; sub(/^Depends:/, ""); print; next }
	field && /^[ \t]/ { print; next }
	{ field = 0 }' "$top/debian/tests/control" |
	sed 's/[,|]/\n/g' | sed -e 's/([^)]*)//g' -e 's/\[[^]]*\]//g' -e 's/:[a-z]*//' \
		-e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | sed '/^$/d' | sort -u)

tap_check "debian/tests/control names test dependencies (${#depends[@]})" \
	test "${#depends[@]}" -gt 0
for p in "${depends[@]}"; do
	tap_check "the test dependency $p is in vm/image-packages" \
		grep -qxF -- "$p" <(printf '%s\n' "${image[@]}")
done
tap_plan "$TAP_N"
tap_done
