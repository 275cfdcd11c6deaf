# shellcheck shell=bash
# Minimal TAP producer for the host-side tests. Source it.
#   tap_plan N; tap_ok COND_EXIT_STATUS "description"; tap_done
#   tap_skip "description" "reason": a point skipped
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
TAP_N=0
TAP_FAILED=0

tap_plan() { echo "1..$1"; }

# tap_skip DESCRIPTION REASON: a test point skipped, for REASON.
tap_skip() {
	TAP_N=$((TAP_N + 1))
	echo "ok $TAP_N - $1 # SKIP $2"
}

# tap_check DESCRIPTION COMMAND...: one test point from a command's status;
# on failure the command's output is shown as TAP diagnostics.
tap_check() {
	local desc=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	TAP_N=$((TAP_N + 1))
	if [ "$rc" -eq 0 ]; then
		echo "ok $TAP_N - $desc"
	else
		echo "not ok $TAP_N - $desc"
		printf '%s\n' "$out" | tail -n 20 | sed 's/^/# /'
		TAP_FAILED=$((TAP_FAILED + 1))
	fi
}

# failed WHY: a failing check that says why (its output is the diagnostic).
failed() {
	echo "$*"
	return 1
}

tap_done() {
	[ "$TAP_FAILED" -eq 0 ]
}
