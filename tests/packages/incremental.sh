#!/bin/bash
# A second "make deb" with nothing changed rebuilds nothing: the packages in
# out/ stay as they are.
#
#   tests/packages/incremental.sh
#                           no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)

before=$(stat -c '%n %Y %s' "$top"/out/*.deb)
tap_plan 2
tap_check "make deb with nothing changed succeeds" make -C "$top" deb
tap_check "the packages were not rebuilt" \
	test "$(stat -c '%n %Y %s' "$top"/out/*.deb)" = "$before"
tap_done
