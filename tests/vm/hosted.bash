# shellcheck shell=bash disable=SC2154 # here, top: set by the caller
# A VM boot whose guest program and the host take turns (tests/vm/hotplug.sh,
# tests/vm/pconfig-faults.sh). Source it after tests/tap.sh, with $here
# (tests/vm) and $top (the top of the tree) set. It makes $work, a scratch
# directory removed on exit, and $sock, the QMP socket's path, and gives
# qmp(), the model's tables over QMP (tests/vm/mktme_qmp.py). Not a test
# itself (tests/run-all runs tests/vm/*.sh).
#
# vm/run's stdout and stdin are FIFOs. The guest program's TAP points are
# relayed here, renumbered and prefixed with the boot's label, so that
# tests/run-all counts each of them. A line "WORD: pause NAME" from the
# guest is a pause: the guest program waits for a line on its stdin, which
# ssh forwards from vm/run's stdin, so the host does what it has to (QMP)
# and then writes "go". Every other line goes to the handler too.

hosted_pid=
hosted_pauses=()
work=$(mktemp -d)
# shellcheck disable=SC2034 # used by the caller
sock=$work/qmp.sock

# shellcheck disable=SC2317 # called by the trap
hosted_cleanup() {
	[ -z "$hosted_pid" ] || kill "$hosted_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap hosted_cleanup EXIT

qmp() {
	python3 "$here/mktme_qmp.py" "$@"
}

# failed WHY: a failing check that says why.
failed() {
	echo "$*"
	return 1
}

# hosted_relay LABEL LINE: a test point of the guest program, renumbered.
hosted_relay() {
	local desc
	[[ $2 =~ ^(not\ )?ok\ [0-9]+\ *(-\ *)?(.*)$ ]] || return 0
	desc="$1: ${BASH_REMATCH[3]}"
	hosted_ran=$((hosted_ran + 1))
	if [ -z "${BASH_REMATCH[1]}" ]; then
		tap_check "$desc" true
	else
		hosted_failed=$((hosted_failed + 1))
		tap_check "$desc" failed "(in the guest: see its diagnostics above)"
	fi
}

# hosted_run_ok RC: vm/run found no kernel reports, and its status RC is
# the guest program's (0, or 1 when it failed points or did not finish).
hosted_run_ok() {
	local unfinished=0
	[ "$hosted_bailed" -eq 0 ] && [ "$hosted_ran" -eq "$hosted_plan" ] || unfinished=1
	tail -n 40 "$work/err"
	! grep -qE "kernel reports in the guest's dmesg|cannot read the guest's dmesg|the guest died|kernel panic" "$work/err" &&
		{ [ "$1" -eq 0 ] || { [ "$1" -eq 1 ] && [ $((hosted_failed + unfinished)) -gt 0 ]; }; }
}

# hosted_run LABEL HANDLER PAUSES VM_RUN_ARGS...: boot with vm/run
# VM_RUN_ARGS (ending with "-- COMMAND"). HANDLER is called as
# "HANDLER pause NAME" at each pause and "HANDLER line LINE" for every
# other line of the guest that is not TAP; it must not fail (set -e).
# PAUSES: the names of the pauses the guest must make, in order, separated
# by spaces. Adds the points: each pause happened, the guest ran its whole
# plan, vm/run's status.
hosted_run() {
	local label=$1 handler=$2 want_pauses=$3 line start=$SECONDS pstart rc=0
	shift 3
	hosted_plan=0 hosted_ran=0 hosted_failed=0 hosted_bailed=0 hosted_pauses=()
	rm -f "$work/in" "$work/out"
	mkfifo "$work/in" "$work/out"
	"$top/vm/run" "$@" <"$work/in" >"$work/out" 2>"$work/err" &
	hosted_pid=$!
	# In this order: vm/run opens its stdin first.
	exec 4>"$work/in" 3<"$work/out"
	while IFS= read -r -u 3 line; do
		line=${line%$'\r'}
		if [[ $line =~ ^1\.\.([0-9]+)$ ]]; then
			hosted_plan=${BASH_REMATCH[1]}
			echo "# $label: the guest plans $hosted_plan points"
		elif [[ $line =~ ^(not\ )?ok\ [0-9]+ ]]; then
			hosted_relay "$label" "$line"
		elif [[ $line =~ ^[a-z]+:\ pause\ ([a-z]+)$ ]]; then
			echo "# $label: guest: $line"
			hosted_pauses+=("${BASH_REMATCH[1]}")
			pstart=$SECONDS
			"$handler" pause "${BASH_REMATCH[1]}"
			echo "# $label: host: done in $((SECONDS - pstart)) s, the guest goes on"
			# The guest may be gone: a subshell takes the SIGPIPE.
			(echo go >&4) 2>/dev/null || true
		elif [[ $line == "Bail out!"* ]]; then
			hosted_bailed=1
			echo "# $label: guest: $line"
		else
			echo "# $label: guest: $line"
			"$handler" line "$line"
		fi
	done
	exec 3<&- 4>&-
	wait "$hosted_pid" || rc=$?
	hosted_pid=
	echo "# $label: vm/run took $((SECONDS - start)) s, status $rc"
	tap_check "$label: the guest paused at: ${want_pauses:-(no pause)}" \
		test "${hosted_pauses[*]}" = "$want_pauses"
	tap_check "$label: the guest program ran its whole plan ($hosted_ran of $hosted_plan points)" \
		test "$hosted_plan" -gt 0 -a "$hosted_ran" -eq "$hosted_plan" -a "$hosted_bailed" -eq 0
	tap_check "$label: vm/run exits $rc: no kernel reports; the guest failed $hosted_failed points" \
		hosted_run_ok "$rc"
}

# hosted_build NAME: tests/guest/NAME.c built into $work/NAME, as the
# guest's Debian builds it (the host is the same Debian release).
hosted_build() {
	cc -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I "$top/tests/guest" \
		-o "$work/$1" "$top/tests/guest/$1.c" "$top/tests/guest/mktme.c" -lkeyutils
}
