#!/bin/bash
# keyutils' upstream test suite (its tests/ folder, from Debian's keyutils
# source), run in the guest as root against our kernel: each test folder
# with a runtest.sh is one TAP point; a failing one shows the tail of its
# test.out. The suite tests the keys core that the mktme key type plugs
# into (keyrings, quotas, permissions, timeouts, request_key).
#
#   keyutils-suite.sh DIR     DIR is keyutils' tests/ folder
set -euo pipefail
# Copied alone into the guest, without scripts/lib.sh: its print_help by
# hand (the header above is the usage), before the argument is taken for DIR.
case ${1-} in
-h | --help)
	awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"
	exit 0
	;;
esac

dir=$(cd "${1:?usage: keyutils-suite.sh DIR}" && pwd)
cd "$dir"
mapfile -t tests < <(find . -name runtest.sh -mindepth 2 -printf '%h\n' | sed 's|^\./||' | sort)
# Tests that cannot pass on the ci kernel, or not under TCG, and why.
declare -A not_here=(
	[features/builtin_trusted]="the ci profile builds no module signing key, so .builtin_trusted_keys is empty"
	[features/limits]="its second half, keyctl --test limits2, makes an add_key() for every payload size up to 1030 KiB, copying about 550 GB: hours under TCG (it did not finish in 300 s, nor in 17 min); its first half runs below"
)
# keyutils 1.6.3's prepare.inc.sh reads "keyctl supports" into shell
# variables, which names the move capability have_move_key, but its move
# tests check have_move_keys, which stays 0: they would skip on any kernel.
# Set it from what the kernel says.
if grep -q '^have_move_keys=0$' prepare.inc.sh && ! grep -q 'have_move_keys=.*have_move_key' prepare.inc.sh; then
	# shellcheck disable=SC2016 # the text is shell code for prepare.inc.sh
	sed -i 's/^\( *\)eval `keyctl supports`$/&\n\1have_move_keys=${have_move_key:-0}/' prepare.inc.sh
fi
echo "1..$((${#tests[@]} + 1))"
n=0
fails=0
for t in "${tests[@]}"; do
	n=$((n + 1))
	if [ -n "${not_here[$t]:-}" ]; then
		echo "ok $n - $t # SKIP ${not_here[$t]}"
		continue
	fi
	start=$SECONDS
	rc=0
	# The suite's own way to run one test (runtest.sh at its top, in
	# automated mode), with its output kept in the test's test.out.
	(export TEST=$t AUTOMATED=1 && cd "$t" &&
		timeout -k 10 300 bash ./runtest.sh) \
		>"$dir/run.log" 2>&1 </dev/null || rc=$?
	if [ "$rc" -eq 0 ] && grep -q '^++++ SKIPPING TEST' "$t/test.out" 2>/dev/null; then
		echo "ok $n - $t # SKIP $(grep -m1 '^+++ SKIP' "$t/test.out" | sed 's/^+++ //')"
	elif [ "$rc" -eq 0 ] && grep -q '^++++ FINISHED TEST: PASS' "$t/test.out" 2>/dev/null; then
		echo "ok $n - $t ($((SECONDS - start)) s)"
	else
		fails=$((fails + 1))
		echo "not ok $n - $t (status $rc, $((SECONDS - start)) s)"
		tail -n 20 "$t/test.out" 2>/dev/null | sed 's/^/# /' || true
		tail -n 5 "$dir/run.log" | sed 's/^/# /'
	fi
done
# The first half of features/limits: every type name length up to 8191
# (EINVAL from 32 on) and every description length (EINVAL from 4096 on).
n=$((n + 1))
start=$SECONDS
rc=0
(cd features/limits && keyctl session - keyctl --test limits) >"$dir/limits.log" 2>&1 </dev/null || rc=$?
if [ "$rc" -eq 0 ]; then
	echo "ok $n - features/limits, first half: keyctl --test limits ($((SECONDS - start)) s)"
else
	fails=$((fails + 1))
	echo "not ok $n - features/limits, first half: keyctl --test limits (status $rc, $((SECONDS - start)) s)"
	grep -v '^TEST SIZE' "$dir/limits.log" | tail -n 20 | sed 's/^/# /'
fi
[ "$fails" -eq 0 ]
