#!/bin/bash
# lintian finds no error in the packages (overrides carry their reason).
#
#   tests/packages/lintian.sh
#                           no arguments; TAP on stdout (make check runs it);
#                           MKTME_OUT: the packages' folder (out/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
out=${MKTME_OUT:-$top/out}

tap_plan 2
for deb in "$out"/linux-image-*.deb "$out"/linux-headers-*.deb; do
	no_errors() {
		local report
		report=$(lintian --fail-on none --no-tag-display-limit "$1")
		printf '%s\n' "$report" | grep -E '^[EW]: ' | head -n 30
		! grep -q '^E: ' <<<"$report"
	}
	tap_check "lintian: no errors in $(basename "$deb")" no_errors "$deb"
done
tap_done
