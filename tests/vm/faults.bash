# shellcheck shell=bash disable=SC2154 # sock: set by tests/vm/hosted.bash
# PCONFIG failures reach add_key: the host half of tests/guest/faults.c,
# for a boot of "vm/run --sockets 2 --qmp" (two packages, each with its
# own key table in the model). Sourced by tests/vm/mm.sh, whose boot runs
# the faults program after the mm program, after tests/vm/hosted.bash (for
# qmp() and $sock). Before each of its add_key calls of a cpu key the guest
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
# Gives faults_line and faults_pause, for the boot's handler of hosted_run.

faults_keyid=
faults_rem=() faults_fc=() faults_prev_fc=()

# faults_snapshot: inject-remaining and fail-count of packages 0 and 1
# into faults_rem[] and faults_fc[], the previous fail-counts into
# faults_prev_fc[] ("?" if unknown).
faults_snapshot() {
	local p
	for p in 0 1; do
		faults_prev_fc[p]=${faults_fc[p]:-?}
		faults_rem[p]=$(qmp field "$sock" "$p" inject-remaining) || faults_rem[p]='?'
		faults_fc[p]=$(qmp field "$sock" "$p" fail-count) || faults_fc[p]='?'
	done
	echo "# faults: host: inject-remaining ${faults_rem[0]} ${faults_rem[1]}, fail-count ${faults_fc[0]} ${faults_fc[1]}"
}

# faults_counters REM0 REM1 [NEW0 NEW1]: as of the last snapshot, packages
# 0 and 1 have inject-remaining REM0 and REM1, and NEW0 and NEW1 more
# failures than at the snapshot before.
faults_counters() {
	local p bad=0 want_rem=("$1" "$2") want_new=("${3:-}" "${4:-}")
	for p in 0 1; do
		echo "package $p: inject-remaining ${faults_rem[p]} (want ${want_rem[p]}), fail-count ${faults_prev_fc[p]} -> ${faults_fc[p]}${want_new[p]:+ (want +${want_new[p]})}"
		[ "${faults_rem[p]}" = "${want_rem[p]}" ] || bad=1
		[ -z "${want_new[p]}" ] ||
			{ [[ ${faults_fc[p]}${faults_prev_fc[p]} =~ ^[0-9]+$ ]] &&
				[ $((faults_fc[p] - faults_prev_fc[p])) -eq "${want_new[p]}" ]; } || bad=1
	done
	return "$bad"
}

# faults_line LINE: a line of the guest's faults program (not TAP).
faults_line() {
	if [[ $1 =~ ^region\ cpu\ keyid=([0-9]+)$ ]]; then
		faults_keyid=${BASH_REMATCH[1]}
	fi
}

# faults_pause NAME: the host's turn at the faults program's pause NAME.
faults_pause() {
	case $1 in
	entropy)
		faults_snapshot
		tap_check "faults: host: nothing injected yet (inject-remaining 0 and 0)" \
			faults_counters 0 0
		tap_check "faults: host: inject entropy-error into package 0's next PCONFIG" \
			qmp inject "$sock" 0 1 entropy-error
		faults_snapshot
		tap_check "faults: host: inject-remaining 1 on package 0, 0 on package 1" \
			faults_counters 1 0 0 0
		;;
	busy)
		faults_snapshot
		tap_check "faults: host: the failed add_key used package 0's injection (inject-remaining 0, one more failure there, none on package 1)" \
			faults_counters 0 0 1 0
		tap_check "faults: host: inject device-busy into package 1's next PCONFIG" \
			qmp inject "$sock" 1 1 device-busy
		faults_snapshot
		tap_check "faults: host: inject-remaining 0 on package 0, 1 on package 1" \
			faults_counters 0 1 0 0
		;;
	clean)
		faults_snapshot
		tap_check "faults: host: the failed add_key used package 1's injection: inject-remaining 0 on both packages, one more failure on package 1" \
			faults_counters 0 0 0 1
		;;
	done)
		tap_check "faults: host: the new key's KeyID ${faults_keyid:-?} is programmed (direct) on package 0" \
			qmp state "$sock" 0 direct "${faults_keyid:-?}"
		tap_check "faults: host: ... and on package 1, with the same fingerprint" \
			qmp same "$sock" "${faults_keyid:-?}"
		faults_snapshot
		tap_check "faults: host: no more failures, inject-remaining 0 on both packages" \
			faults_counters 0 0 0 0
		;;
	esac
}

