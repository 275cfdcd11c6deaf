#!/bin/bash
# System sleep with KeyIDs in use, in one VM boot: tests/guest/sleep
# (hibernation and suspend to RAM are refused with EBUSY while a KeyID is
# in use, and go ahead once none is; both run only as far as the kernel's
# pm_test modes, so the machine never really sleeps).
# One vCPU: every freeze of tasks flips a static key, and under QEMU 7.2's
# multi-threaded TCG another vCPU sometimes executes the int3 of a
# just-finished text_poke_bp() and oopses ("int3: 0000 [#1]" in
# __refrigerator, seen once in about 18 freezes with 2 vCPUs: issue 17's
# cross-vCPU code patching). With one vCPU there is no other CPU to race.
# About 2 minutes.
# Needs "make deb" first (vm/run installs the kernel).
#
#   tests/vm/sleep.sh       no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

tap_check "tests/guest/sleep.c builds" hosted_build sleep
if [ ! -x "$work/sleep" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
hosted_run sleep hosted_no_handler "" \
	--cpus 1 --copy "$work/sleep" -- ./sleep
tap_plan "$TAP_N"
tap_done
