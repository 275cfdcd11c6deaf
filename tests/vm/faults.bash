# shellcheck shell=bash disable=SC2154 # sock: set by tests/vm/hosted.bash
# PCONFIG failures reach add_key: the host half of tests/guest/faults.c,
# for a boot of "vm/run --sockets 2 --qmp" (two packages, each with its
# own key table in the model). Before each of its add_key or update calls
# of a cpu key the guest pauses, and the host acts over QMP
# (x-mktme-inject-pconfig-error, query-mktme). The kernel tries a failing
# PCONFIG 5 times (MKTME_PROGRAM_TRIES), and on a final failure gives the
# packages already done their old key back (or clears the KeyID):
#
#   entropy  the host injects 5 entropy errors into package 0: add_key
#            fails with ENOKEY, keyids_in_use unchanged
#   busy     package 0 failed 5 times; the host injects 5 device busy into
#            package 1: ENOKEY again, and package 0, programmed meanwhile,
#            is cleared again: both tables agree
#   retry    package 1 failed 5 times, the tables agree; one failure on
#            each package: add_key succeeds on a retry
#   update   each package failed once; 5 device busy on package 1:
#            keyctl update of the cpu key fails; package 0 got a new random
#            key, and no command gives a random key back
#   rejected package 1 failed 5 times; the KeyID is cleared on both
#            packages (the key is rejected)
#   done     after an update without failures, the KeyID is random on
#            both packages, each with a key of its own
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

# faults_inject PKG COUNT STATUS: one TAP point.
faults_inject() {
	tap_check "faults: host: inject $2 $3 into package $1's next PCONFIGs" \
		qmp inject "$sock" "$1" "$2" "$3"
}

# faults_agree WHEN: one TAP point, every KeyID alike in both tables.
faults_agree() {
	tap_check "faults: host: $1: both packages' key tables agree on every KeyID" \
		qmp agree "$sock"
}

# faults_pause NAME: the host's turn at the faults program's pause NAME.
faults_pause() {
	case $1 in
	entropy)
		faults_snapshot
		tap_check "faults: host: nothing injected yet (inject-remaining 0 and 0)" \
			faults_counters 0 0
		faults_inject 0 5 entropy-error
		faults_snapshot
		tap_check "faults: host: inject-remaining 5 on package 0, 0 on package 1" \
			faults_counters 5 0 0 0
		;;
	busy)
		faults_snapshot
		tap_check "faults: host: add_key tried package 0 five times (5 more failures there, none on package 1)" \
			faults_counters 0 0 5 0
		faults_agree "after 5 failures on package 0"
		faults_inject 1 5 device-busy
		;;
	retry)
		faults_snapshot
		tap_check "faults: host: add_key tried package 1 five times (5 more failures there, none on package 0)" \
			faults_counters 0 0 0 5
		faults_agree "after package 1 failed and package 0 was undone"
		faults_inject 0 1 entropy-error
		faults_inject 1 1 device-busy
		;;
	update)
		faults_snapshot
		tap_check "faults: host: add_key retried once on each package" \
			faults_counters 0 0 1 1
		faults_agree "after the retried add_key"
		faults_inject 1 5 device-busy
		faults_snapshot
		;;
	rejected)
		faults_snapshot
		tap_check "faults: host: the update tried package 1 five times, nothing left to inject" \
			faults_counters 0 0 0 5
		tap_check "faults: host: the rejected key's KeyID ${faults_keyid:-?} is cleared on package 0" \
			qmp state "$sock" 0 clear "${faults_keyid:-?}"
		tap_check "faults: host: ... and on package 1" \
			qmp state "$sock" 1 clear "${faults_keyid:-?}"
		;;
	done)
		tap_check "faults: host: updated again, KeyID ${faults_keyid:-?} is random on package 0" \
			qmp state "$sock" 0 random "${faults_keyid:-?}"
		tap_check "faults: host: ... and on package 1, with a key of its own" \
			qmp agree "$sock" "${faults_keyid:-?}"
		faults_snapshot
		tap_check "faults: host: the successful update failed nowhere" \
			faults_counters 0 0 0 0
		;;
	esac
}
