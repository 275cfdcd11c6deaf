#!/bin/bash
# PCONFIG failures reach add_key, in one boot of "vm/run --sockets 2" (two
# packages, each with its own key table in the model). The guest half is
# tests/guest/faults.c; before each of its add_key calls of a cpu key it
# pauses, and the host acts over QMP (mktme-inject-pconfig-error,
# query-mktme):
#
#   entropy  the host injects an entropy error into package 0's next
#            PCONFIG: add_key fails with ENOKEY, keyids_in_use unchanged
#   busy     package 0's injection was used up (one more failure there);
#            the host injects device busy into package 1's next PCONFIG:
#            ENOKEY again, keyids_in_use unchanged
#   clean    package 1's injection was used up, none is left on either
#            package: add_key succeeds, keyids_in_use + 1
#   done     the new key's KeyID is programmed alike on both packages
#
# The guest's TAP points are relayed, prefixed "faults"; the plan line
# comes last. About a minute under TCG, mostly booting. Only one VM at a
# time on a small host: run it under "flock /tmp/linux-mktme-vm.lock".
# Needs "make deb" first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

keyid=
rem=() fc=() prev_fc=()

# snapshot: inject-remaining and fail-count of packages 0 and 1 into
# rem[] and fc[], the previous fail-counts into prev_fc[] ("?" if unknown).
snapshot() {
	local p
	for p in 0 1; do
		prev_fc[p]=${fc[p]:-?}
		rem[p]=$(qmp field "$sock" "$p" inject-remaining) || rem[p]='?'
		fc[p]=$(qmp field "$sock" "$p" fail-count) || fc[p]='?'
	done
	echo "# faults: host: inject-remaining ${rem[0]} ${rem[1]}, fail-count ${fc[0]} ${fc[1]}"
}

# counters REM0 REM1 [NEW0 NEW1]: as of the last snapshot, packages 0 and 1
# have inject-remaining REM0 and REM1, and NEW0 and NEW1 more failures
# than at the snapshot before.
counters() {
	local p bad=0 want_rem=("$1" "$2") want_new=("${3:-}" "${4:-}")
	for p in 0 1; do
		echo "package $p: inject-remaining ${rem[p]} (want ${want_rem[p]}), fail-count ${prev_fc[p]} -> ${fc[p]}${want_new[p]:+ (want +${want_new[p]})}"
		[ "${rem[p]}" = "${want_rem[p]}" ] || bad=1
		[ -z "${want_new[p]}" ] ||
			{ [[ ${fc[p]}${prev_fc[p]} =~ ^[0-9]+$ ]] &&
				[ $((fc[p] - prev_fc[p])) -eq "${want_new[p]}" ]; } || bad=1
	done
	return "$bad"
}

# A handler of hosted_run.
on_guest() {
	case $1 in
	line)
		if [[ $2 =~ ^region\ cpu\ keyid=([0-9]+)$ ]]; then
			keyid=${BASH_REMATCH[1]}
		fi
		;;
	pause)
		case $2 in
		entropy)
			snapshot
			tap_check "faults: host: nothing injected yet (inject-remaining 0 and 0)" \
				counters 0 0
			tap_check "faults: host: inject entropy-error into package 0's next PCONFIG" \
				qmp inject "$sock" 0 1 entropy-error
			snapshot
			tap_check "faults: host: inject-remaining 1 on package 0, 0 on package 1" \
				counters 1 0 0 0
			;;
		busy)
			snapshot
			tap_check "faults: host: the failed add_key used package 0's injection (inject-remaining 0, one more failure there, none on package 1)" \
				counters 0 0 1 0
			tap_check "faults: host: inject device-busy into package 1's next PCONFIG" \
				qmp inject "$sock" 1 1 device-busy
			snapshot
			tap_check "faults: host: inject-remaining 0 on package 0, 1 on package 1" \
				counters 0 1 0 0
			;;
		clean)
			snapshot
			tap_check "faults: host: the failed add_key used package 1's injection: inject-remaining 0 on both packages, one more failure on package 1" \
				counters 0 0 0 1
			;;
		done)
			tap_check "faults: host: the new key's KeyID ${keyid:-?} is programmed (direct) on package 0" \
				qmp state "$sock" 0 direct "${keyid:-?}"
			tap_check "faults: host: ... and on package 1, with the same fingerprint" \
				qmp same "$sock" "${keyid:-?}"
			snapshot
			tap_check "faults: host: no more failures, inject-remaining 0 on both packages" \
				counters 0 0 0 0
			;;
		esac
		;;
	esac
}

tap_check "tests/guest/faults.c builds" hosted_build faults
if [ ! -x "$work/faults" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
hosted_run faults on_guest "entropy busy clean done" --sockets 2 --qmp "$sock" \
	--copy "$work/faults" -- ./faults
tap_plan "$TAP_N"
tap_done
