#!/bin/bash
# The MKTME API programs of tests/guest (the ones debian/tests/mktme-api
# runs: keys, mprotect, memory, exhaust, cgroup, fuzz) in one boot of vm/run,
# their TAP points relayed ("keys: ...", ...). For "make check-debug", which boots
# the debug kernel (MKTME_VMLINUZ); "make check" runs the same programs
# through autopkgtest instead. Needs "make deb" first.
#
#   tests/debug/api.sh      no arguments; TAP on stdout (tests/run-debug
#                           runs it, with MKTME_VMLINUZ); vm/run's
#                           environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")/../vm" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

read -r -a programs <<<"$(make -s -C "$top/tests/guest" list)"

copies=() run_label='' command='rc=0;'
for p in "${programs[@]}"; do
	tap_check "tests/guest/$p.c builds" hosted_build "$p"
	[ -x "$work/$p" ] || {
		tap_plan "$TAP_N"
		exit 1
	}
	copies+=(--copy "$work/$p")
	run_label+=${run_label:++}$p
	command+=" ./$p || rc=1;"
done
hosted_run "$run_label" hosted_no_handler "" "${copies[@]}" -- "$command exit \$rc"
tap_plan "$TAP_N"
tap_done
