# shellcheck shell=bash disable=SC2154 # here, top: set by the caller
# A VM boot whose guest program and the host take turns (tests/vm/mm.sh,
# tests/vm/hotplug.sh). Source it after tests/tap.sh, with $here
# (tests/vm) and $top (the top of the tree) set.
# It makes $work, a scratch directory removed on exit, and $sock, the QMP
# socket's path, and gives qmp(), the model's tables over QMP
# (tests/vm/mktme_qmp.py), and checks of guest RAM (hosted_ram_check). Not
# a test itself (tests/run-all runs tests/vm/*.sh).
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
	grep -qx 'vm: kernel log: no reports' "$work/err" &&
		{ [ "$1" -eq 0 ] || { [ "$1" -eq 1 ] && [ $((hosted_failed + unfinished)) -gt 0 ]; }; }
}

# The HANDLER of a guest that pauses nowhere and prints only diagnostics.
hosted_no_handler() {
	:
}

# hosted_run LABEL HANDLER PAUSES VM_RUN_ARGS...: boot with vm/run
# VM_RUN_ARGS (ending with "-- COMMAND"). HANDLER is called as
# "HANDLER pause NAME" at each pause and "HANDLER line LINE" for every
# other line of the guest that is not TAP; it must not fail (set -e).
# PAUSES: the names of the pauses the guest must make, in order, separated
# by spaces. COMMAND may run several guest programs one after the other,
# each with its TAP plan: LABEL is then their labels joined by "+" (e.g.
# "mm+faults"), and each program's points are relayed with its own label.
# Adds the points: each pause happened, the guest ran its whole plan (the
# sum of the plans), vm/run's status.
hosted_run() {
	local label=$1 handler=$2 want_pauses=$3 line start=$SECONDS pstart rc=0
	local labels=() program=$1 plans=0
	IFS=+ read -r -a labels <<<"$label"
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
			program=${labels[plans]:-$label}
			plans=$((plans + 1))
			hosted_plan=$((hosted_plan + BASH_REMATCH[1]))
			echo "# $program: the guest plans ${BASH_REMATCH[1]} points"
		elif [[ $line =~ ^(not\ )?ok\ [0-9]+ ]]; then
			hosted_relay "$program" "$line"
		elif [[ $line =~ ^[a-z]+:\ pause\ ([a-z][a-z-]*)$ ]]; then
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
	# vm/run's own lines (boot time, total); all its stderr when a boot
	# failed and was tried again, which is otherwise seen nowhere when the
	# retry works: the console tail of the failed boot is the reproducer.
	if grep -q '^vm: WARNING' "$work/err"; then
		sed "s|^|# $label: |" "$work/err"
	else
		sed -n "s|^vm: |# $label: vm: |p" "$work/err"
	fi
	tap_check "$label: the guest paused at: ${want_pauses:-(no pause)}" \
		test "${hosted_pauses[*]}" = "$want_pauses"
	tap_check "$label: the guest ran its whole plan ($hosted_ran of $hosted_plan points, ${#labels[@]} program(s))" \
		test "$plans" -eq "${#labels[@]}" -a "$hosted_ran" -eq "$hosted_plan" -a "$hosted_bailed" -eq 0
	tap_check "$label: vm/run exits $rc: no kernel reports; the guest failed $hosted_failed points" \
		hosted_run_ok "$rc"
}

# hosted_build NAME: tests/guest/NAME.c built into $work/NAME, as the
# guest's Debian builds it (the host is the same Debian release).
hosted_build() {
	cc -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I "$top/tests/guest" \
		-o "$work/$1" "$top/tests/guest/$1.c" "$top/tests/guest/mktme.c" -lkeyutils
}

# Guest RAM, read over QMP (tests/vm/ram.py) while the guest program waits
# at a pause. The program reports pages with lines
#   region NAME kind=KIND pa=0x... keyid=K seed=S page=I
# (KIND cpu, noenc or plain; the page at pa, its KeyID-0 address, holds
# page I of fill(seed S) of tests/guest/mktme.c). A handler gives each line
# to hosted_ram_line, and at the pause calls hosted_ram_check, which checks
# every page reported since the last pause: a cpu page's pattern is not in
# RAM, but its KeyID alias (which the model decrypts with its home package's key)
# reads as the pattern; no-encrypt and plain pages hold their pattern.
hosted_regions=()

hosted_ram_line() {
	local re='^region ([a-z0-9-]+) kind=([a-z]+) pa=(0x[0-9a-f]+) keyid=(-?[0-9]+) seed=([0-9]+) page=([0-9]+)$'
	[[ $1 =~ $re ]] || return 0
	hosted_regions+=("${BASH_REMATCH[*]:1}")
}

# ram_looks NAME ADDR SEED PAGE WANT: guest RAM at ADDR, as "ram.py check"
# sees it against page PAGE of the pattern of SEED, is WANT (pattern,
# absent).
ram_looks() {
	local got
	python3 "$here/ram.py" dump "$sock" "$2" "$work/$1.bin" || return 1
	got=$(python3 "$here/ram.py" check "$work/$1.bin" "$3" "$4") || return 1
	echo "$1 at $2: $got (want $5)"
	od -A x -t x1 -N 32 "$work/$1.bin"
	[ "$got" = "$5" ]
}

# ram_page_looks NAME KIND PA KEYID SEED PAGE WANT: the page is present,
# its KeyID fits KIND (> 0 for cpu and noenc, 0 for plain), and RAM at PA
# looks as WANT.
ram_page_looks() {
	local keyid_ok=0
	if [ "$2" = plain ]; then
		[ "$4" -eq 0 ] || keyid_ok=1
	else
		[ "$4" -gt 0 ] || keyid_ok=1
	fi
	if [ "$3" = 0x0 ] || [ "$keyid_ok" -ne 0 ]; then
		echo "$1: pa $3, KeyID $4: not a present $2 page"
		return 1
	fi
	ram_looks "$1" "$3" "$5" "$6" "$7"
}

# ram_alias_looks NAME PA KEYID SEED PAGE: RAM at the page's KeyID alias,
# KeyID << shift | pa (shift from query-mktme), is the pattern.
ram_alias_looks() {
	local shift addr
	[ "$3" -gt 0 ] || failed "$1: KeyID $3: no alias" || return 1
	shift=$(python3 "$here/ram.py" shift "$sock") || return 1
	addr=$(printf '0x%x' $((($3 << shift) | $2)))
	ram_looks "$1-alias" "$addr" "$4" "$5" pattern
}

# hosted_ram_check LABEL SCENARIO: the checks of the pages reported since
# the last pause, as TAP points.
hosted_ram_check() {
	local label=$1 scenario=$2 r name kind pa keyid seed page
	tap_check "$label: host: $scenario: the guest reported pages to read" \
		test "${#hosted_regions[@]}" -gt 0
	for r in "${hosted_regions[@]}"; do
		read -r name kind pa keyid seed page <<<"$r"
		case $kind in
		cpu)
			tap_check "$label: host: $name (encrypted): its pattern is not in RAM at $pa" \
				ram_page_looks "$name" "$kind" "$pa" "$keyid" "$seed" "$page" absent
			tap_check "$label: host: $name (encrypted): its KeyID $keyid alias reads as the pattern" \
				ram_alias_looks "$name" "$pa" "$keyid" "$seed" "$page"
			;;
		noenc)
			tap_check "$label: host: $name (no-encrypt KeyID $keyid): its pattern is in RAM at $pa" \
				ram_page_looks "$name" "$kind" "$pa" "$keyid" "$seed" "$page" pattern
			;;
		*)
			tap_check "$label: host: $name (plain, control): its pattern is in RAM at $pa" \
				ram_page_looks "$name" "$kind" "$pa" "$keyid" "$seed" "$page" pattern
			;;
		esac
	done
	hosted_regions=()
}
