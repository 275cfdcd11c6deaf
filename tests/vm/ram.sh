#!/bin/bash
# Ciphertext in RAM. In the VM, tests/guest/ramcheck fills three locked
# pages with known patterns: one encrypted with a cpu key, one with a
# no-encrypt key, one plain; it prints their physical (KeyID 0) addresses
# and KeyIDs, then sleeps 20 s. Meanwhile the host reads those addresses of
# guest RAM over QMP (tests/vm/ram.py): the cpu page must not show its
# pattern (but its KeyID alias, which the model decrypts with package 0's
# key, must), the no-encrypt and plain pages must show theirs.
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

declare -A pa=() keyid=() after=()

# looks NAME ADDR SEED WANT: guest RAM at ADDR, as "ram.py check" sees it
# against the pattern of SEED, is WANT (pattern, absent).
looks() {
	local got
	python3 "$helper" dump "$sock" "$2" "$work/$1.bin" || return 1
	got=$(python3 "$helper" check "$work/$1.bin" "$3") || return 1
	echo "$1 at $2: $got (want $4)"
	od -A x -t x1 -N 32 "$work/$1.bin"
	[ "$got" = "$4" ]
}

# alias_looks NAME SEED WANT: looks at the page's KeyID alias,
# KeyID << shift | pa (shift from query-mktme).
alias_looks() {
	local shift addr
	shift=$(python3 "$helper" shift "$sock") || return 1
	addr=$(printf '0x%x' $(((${keyid[$1]} << shift) | ${pa[$1]})))
	looks "$1-alias" "$addr" "$2" "$3"
}

# run_ok: vm/run succeeded (its stderr's tail otherwise).
run_ok() {
	tail -n 40 "$work/err"
	[ "$rc" -eq 0 ]
}

tap_plan 11
tap_check "tests/guest/ramcheck builds" make -C "$top/tests/guest" O="$work" "$work/ramcheck"

# vm/run's output streams through a FIFO: the pages are read while the
# guest program sleeps.
mkfifo "$work/out"
"$top/vm/run" --qmp "$sock" --copy "$work/ramcheck" -- ./ramcheck \
	>"$work/out" 2>"$work/err" &
pid=$!
exec 3<"$work/out"
ready=0
while IFS= read -r -u 3 line; do
	echo "# guest: $line"
	if [[ $line =~ ^region\ ([a-z]+)\ pa=(0x[0-9a-f]+)\ keyid=(-?[0-9]+) ]]; then
		pa[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
		keyid[${BASH_REMATCH[1]}]=${BASH_REMATCH[3]}
	fi
	if [ "$line" = "ramcheck: ready" ]; then
		ready=1
		break
	fi
done
for r in cpu noenc plain; do
	[ -n "${pa[$r]:-}" ] || pa[$r]=0x0
	[ -n "${keyid[$r]:-}" ] || keyid[$r]=-1
done

tap_check "the guest program printed three pages and waits" \
	test "$ready" -eq 1 -a "${pa[cpu]}" != 0x0 -a "${pa[noenc]}" != 0x0 -a "${pa[plain]}" != 0x0
tap_check "cpu page: KeyID ${keyid[cpu]} > 0" test "${keyid[cpu]}" -gt 0
tap_check "cpu page: its pattern is not in RAM at ${pa[cpu]}" \
	looks cpu "${pa[cpu]}" 1 absent
tap_check "cpu page: its KeyID alias in RAM reads as the pattern" \
	alias_looks cpu 1 pattern
tap_check "no-encrypt page: KeyID ${keyid[noenc]} > 0" test "${keyid[noenc]}" -gt 0
tap_check "no-encrypt page: its pattern is in RAM at ${pa[noenc]}" \
	looks noenc "${pa[noenc]}" 2 pattern
tap_check "plain page: KeyID 0" test "${keyid[plain]}" -eq 0
tap_check "plain page (control): its pattern is in RAM at ${pa[plain]}" \
	looks plain "${pa[plain]}" 3 pattern

# The rest of the guest's output, and vm/run's status.
while IFS= read -r -u 3 line; do
	echo "# guest: $line"
	if [[ $line =~ ^after\ ([a-z]+)\ pa=(0x[0-9a-f]+) ]]; then
		after[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
	fi
done
rc=0
wait "$pid" || rc=$?
pid=
tap_check "vm/run exits 0 (the pages kept their data; no kernel reports)" \
	run_ok
tap_check "the pages stayed at their addresses meanwhile" \
	test "${after[cpu]:-}" = "${pa[cpu]}" -a "${after[noenc]:-}" = "${pa[noenc]}" \
	-a "${after[plain]:-}" = "${pa[plain]}"
tap_done
