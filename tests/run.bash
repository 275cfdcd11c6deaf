# shellcheck shell=bash
# The runner's counting, for tests/run-all (make check) and tests/run-debug
# (make check-debug): run_tap runs a TAP producer and counts its points,
# run_summary prints "N passed, N failed, N skipped" and fails if any
# failed. Source it from the top of the tree.
passed=0
failed=0
skipped=0
run_start=$SECONDS

# run_tap NAME COMMAND...: run a TAP producer, show its output, count points.
# A producer that fails without a failing point counts as one failure.
run_tap() {
	local name=$1 log rc=0 p f s start=$SECONDS
	shift
	log=$(mktemp)
	echo "### $name"
	"$@" 2>&1 | tee "$log" || rc=$?
	echo "# $name: $((SECONDS - start)) s (make check at $((SECONDS - run_start)) s)"
	s=$(grep -cE '^ok [0-9]+.*# *SKIP' "$log" || true)
	p=$(($(grep -cE '^ok [0-9]+' "$log" || true) - s))
	f=$(grep -cE '^not ok [0-9]+' "$log" || true)
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited with status $rc"
		f=1
	fi
	passed=$((passed + p))
	skipped=$((skipped + s))
	failed=$((failed + f))
	rm -f "$log"
	return "$rc"
}

# run_summary: the closing line; false if a point failed.
run_summary() {
	echo
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
}
