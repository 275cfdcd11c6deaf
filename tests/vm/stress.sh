#!/bin/bash
# The concurrent stress of keys and encrypted memory (tests/guest/stress.c),
# in one boot of "vm/run --sockets 2" (one CPU per package, 2 NUMA nodes)
# with mktme_savekeys: first without CPU hotplug, then with a thread that
# takes CPU 1, the only CPU of package 1, offline and back throughout.
# Each run races add_key, update, invalidate, encrypt_mprotect, writes and
# read-backs, fork, mprotect, mremap, MADV_DONTNEED and munmap on shared
# keys, checks every byte, then drops every key and mapping: keyids_in_use
# must come back to where it started (issue 22's reproducer), and vm/run
# must find no kernel report. MKTME_STRESS_SECONDS sets each run's length
# (default 60). Its TAP points are relayed ("stress: ...",
# "stress-hotplug: ..."). Needs "make deb" first.
#
#   tests/vm/stress.sh      no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

seconds=${MKTME_STRESS_SECONDS:-60}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || {
	echo "MKTME_STRESS_SECONDS: not a positive number: $seconds" >&2
	exit 2
}

tap_check "tests/guest/stress.c builds" hosted_build stress
if [ ! -x "$work/stress" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
# shellcheck disable=SC2016 # $rc is the guest shell's
hosted_run stress+stress-hotplug hosted_no_handler "" \
	--sockets 2 --append mktme_savekeys --copy "$work/stress" -- \
	"rc=0; ./stress $seconds || rc=1; MKTME_STRESS_HOTPLUG=1 ./stress $seconds || rc=1; exit \$rc"
tap_plan "$TAP_N"
tap_done
