#!/bin/bash
# Every patch of the kernel series is a git format-patch mail with a
# message that says why, and is clean under checkpatch.pl --strict.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$top/scripts/lib.sh"

"$top/scripts/prepare-tree" >/dev/null
mapfile -t series < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$top/patches/series")

# A mail header, a Signed-off-by and at least three lines of explanation
# between the subject and the diffstat.
well_formed() {
	local p=$1
	grep -q '^From: ' "$p" && grep -q '^Subject: \[PATCH' "$p" &&
		grep -q '^Signed-off-by: ' "$p" &&
		[ "$(sed -n '/^Subject:/,/^---$/p' "$p" | sed '1d;$d' |
			grep -cvE '^$|^Signed-off-by:')" -ge 3 ]
}
checkpatch() {
	local report
	# spdxcheck.py wants Debian's python3 (python3-ply, python3-git).
	report=$(PATH=/usr/bin:$PATH perl "$MKTME_SRC/scripts/checkpatch.pl" \
		--strict --no-tree --quiet "$1" 2>&1) || true
	printf '%s\n' "$report"
	! grep -qE '^(ERROR|WARNING|CHECK):|Traceback' <<<"$report"
}

tap_plan $((2 * ${#series[@]}))
for p in "${series[@]}"; do
	tap_check "$p is a mail with a reason" well_formed "$top/patches/$p"
	tap_check "$p: checkpatch --strict" checkpatch "$top/patches/$p"
done
tap_done
