#!/bin/bash
# Encrypted memory through the memory manager, in one VM boot: 2 sockets
# (2 NUMA nodes), 2 GiB, a 256 MiB swap file, and tests/guest/mm in it
# (swap, migration, compaction, KSM, THP, process_vm_readv and ptrace, core
# dumps). Its TAP points are relayed here, renumbered ("mm: ..."), so that
# tests/run-all counts each of them.
# After swap-in and after move_pages() the guest program prints the
# physical (KeyID 0) addresses of pages of an encrypted (cpu key), a
# no-encrypt and a plain region, and pauses; meanwhile the host reads those
# pages of guest RAM over QMP (tests/vm/ram.py): the encrypted page's
# pattern must not be in RAM there, but must be at its KeyID alias (which
# the model decrypts with package 0's key); the others' patterns must be in
# RAM. Then: the guest ran its whole plan, and vm/run found no kernel
# reports. The plan line comes last (the guest's point count is known only
# at the end). About 3 minutes under TCG, most of it the boot.
# Needs "make deb" first (vm/run installs the kernel).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
helper=$here/ram.py
work=$(mktemp -d)
sock=$work/qmp.sock
pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# The pauses the guest program makes, in order.
pauses=(swap migration)
declare -A paused=()
regions=() # "NAME KIND PA KEYID SEED PAGE" of each region line since the last pause
guest_plan=0 guest_ran=0 guest_failed=0 bailed=0 rc=0

# looks LABEL ADDR SEED PAGE WANT: guest RAM at ADDR, as "ram.py check" sees
# it against page PAGE of the pattern of SEED, is WANT (pattern, absent).
looks() {
	local got
	python3 "$helper" dump "$sock" "$2" "$work/$1.bin" || return 1
	got=$(python3 "$helper" check "$work/$1.bin" "$3" "$4") || return 1
	echo "$1 at $2: $got (want $5)"
	od -A x -t x1 -N 32 "$work/$1.bin"
	[ "$got" = "$5" ]
}

# page_looks NAME KIND PA KEYID SEED PAGE WANT: the page is present, its
# KeyID fits KIND (> 0 for cpu and noenc, 0 for plain), and RAM at PA
# looks as WANT.
page_looks() {
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
	looks "$1" "$3" "$5" "$6" "$7"
}

# alias_looks NAME PA KEYID SEED PAGE: RAM at the page's KeyID alias,
# KeyID << shift | pa (shift from query-mktme), is the pattern.
alias_looks() {
	local shift addr
	[ "$3" -gt 0 ] || {
		echo "$1: KeyID $3: no alias"
		return 1
	}
	shift=$(python3 "$helper" shift "$sock") || return 1
	addr=$(printf '0x%x' $((($3 << shift) | $2)))
	looks "$1-alias" "$addr" "$4" "$5" pattern
}

# failed WHY: a failing check that says why.
failed() {
	echo "$*"
	return 1
}

# relay LINE: a test point of the guest program, renumbered.
relay() {
	local desc
	[[ $1 =~ ^(not\ )?ok\ [0-9]+\ *(-\ *)?(.*)$ ]] || return 0
	desc="mm: ${BASH_REMATCH[3]}"
	guest_ran=$((guest_ran + 1))
	if [ -z "${BASH_REMATCH[1]}" ]; then
		tap_check "$desc" true
	else
		guest_failed=$((guest_failed + 1))
		tap_check "$desc" failed "(in the guest: see its diagnostics above)"
	fi
}

# check_pause SCENARIO SECONDS: while the guest sleeps, the host's view of
# the pages it reported.
check_pause() {
	local scenario=$1 secs=$2 start=$SECONDS r name kind pa keyid seed page
	paused[$scenario]=1
	echo "# host: the guest pauses ${secs} s after $scenario; reading ${#regions[@]} pages of its RAM"
	for r in "${regions[@]}"; do
		read -r name kind pa keyid seed page <<<"$r"
		case $kind in
		cpu)
			tap_check "host: $name (encrypted): its pattern is not in RAM at $pa" \
				page_looks "$name" "$kind" "$pa" "$keyid" "$seed" "$page" absent
			tap_check "host: $name (encrypted): its KeyID $keyid alias reads as the pattern" \
				alias_looks "$name" "$pa" "$keyid" "$seed" "$page"
			;;
		noenc)
			tap_check "host: $name (no-encrypt KeyID $keyid): its pattern is in RAM at $pa" \
				page_looks "$name" "$kind" "$pa" "$keyid" "$seed" "$page" pattern
			;;
		*)
			tap_check "host: $name (plain, control): its pattern is in RAM at $pa" \
				page_looks "$name" "$kind" "$pa" "$keyid" "$seed" "$page" pattern
			;;
		esac
	done
	tap_check "host: $scenario pause: ${#regions[@]} pages reported, read in $((SECONDS - start)) s (< $secs s)" \
		test "${#regions[@]}" -gt 0 -a $((SECONDS - start)) -lt "$secs"
	regions=()
}

# run_ok: no kernel reports, and vm/run's status is the guest program's
# (1 when it failed points or did not finish).
run_ok() {
	local unfinished=0
	[ "$bailed" -eq 0 ] && [ "$guest_ran" -eq "$guest_plan" ] || unfinished=1
	tail -n 40 "$work/err"
	! grep -qE "kernel reports in the guest's dmesg|cannot read the guest's dmesg|the guest died|kernel panic" "$work/err" &&
		{ [ "$rc" -eq 0 ] || { [ "$rc" -eq 1 ] && [ $((guest_failed + unfinished)) -gt 0 ]; }; }
}

tap_check "tests/guest/mm builds" make -C "$top/tests/guest" O="$work" "$work/mm"
if [ ! -x "$work/mm" ]; then
	tap_plan "$TAP_N"
	exit 1
fi

# vm/run's output streams through a FIFO: RAM is read while the guest
# program sleeps.
mkfifo "$work/out"
"$top/vm/run" --sockets 2 --mem 2048 --qmp "$sock" --copy "$work/mm" -- \
	'set -e; fallocate -l 256M /swapfile; chmod 600 /swapfile; mkswap /swapfile; swapon /swapfile; ./mm' \
	</dev/null >"$work/out" 2>"$work/err" &
pid=$!
exec 3<"$work/out"
re_region='^region ([a-z0-9-]+) kind=([a-z]+) pa=(0x[0-9a-f]+) keyid=(-?[0-9]+) seed=([0-9]+) page=([0-9]+)$'
while IFS= read -r -u 3 line; do
	if [[ $line =~ ^1\.\.([0-9]+)$ ]]; then
		guest_plan=${BASH_REMATCH[1]}
		echo "# mm: plan of $guest_plan points"
	elif [[ $line =~ ^(not\ )?ok\ [0-9]+ ]]; then
		relay "$line"
	elif [[ $line =~ $re_region ]]; then
		echo "# guest: $line"
		regions+=("${BASH_REMATCH[*]:1}")
	elif [[ $line =~ ^mm:\ pause\ ([a-z]+)\ ([0-9]+)$ ]]; then
		check_pause "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
	elif [[ $line == "Bail out!"* ]]; then
		bailed=1
		echo "# mm: $line"
	elif [[ $line == "#"* ]]; then
		echo "# mm:${line#\#}"
	else
		echo "# guest: $line"
	fi
done
wait "$pid" || rc=$?
pid=

for p in "${pauses[@]}"; do
	[ -n "${paused[$p]:-}" ] ||
		tap_check "host: the guest paused after $p and the host read its RAM" \
			failed "no \"mm: pause $p\" line from the guest"
done
tap_check "mm ran its whole plan without bailing out ($guest_ran of $guest_plan points)" \
	test "$guest_plan" -gt 0 -a "$guest_ran" -eq "$guest_plan" -a "$bailed" -eq 0
tap_check "vm/run exits $rc: no kernel reports; the guest program failed $guest_failed points" \
	run_ok
tap_plan "$TAP_N"
tap_done
