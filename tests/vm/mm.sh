#!/bin/bash
# Encrypted memory through the memory manager, in one VM boot: 2 sockets
# (2 NUMA nodes), 2 GiB, a 256 MiB swap file, and tests/guest/mm in it
# (first faults, fork and COW, mremap, MADV_DONTNEED and MADV_FREE, swap,
# migration, compaction, KSM, THP, process_vm_readv and ptrace, core
# dumps). Its TAP points are relayed here, renumbered ("mm: ..."), so that
# tests/run-all counts each of them.
# After writing the data of a scenario (first faults, the child's and the
# parent's pages after fork, mremap, madvise, swap-in, move_pages) the
# guest program prints the physical (KeyID 0) addresses of pages of an
# encrypted (cpu key), a no-encrypt and a plain region, and pauses;
# meanwhile the host reads those pages of guest RAM over QMP: the
# encrypted page's pattern must not be in RAM there, but must be at its
# KeyID alias (which the model decrypts with package 0's key); the others'
# patterns must be in RAM (tests/vm/hosted.bash). Then: the guest ran its
# whole plan, and vm/run found no kernel reports. The plan line comes last.
# About 3 minutes under TCG, most of it the boot.
# Needs "make deb" first (vm/run installs the kernel).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

# A handler of hosted_run.
on_guest() {
	case $1 in
	line) hosted_ram_line "$2" ;;
	pause) hosted_ram_check mm "$2" ;;
	esac
}

tap_check "tests/guest/mm.c builds" hosted_build mm
if [ ! -x "$work/mm" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
hosted_run mm on_guest "fault cowchild cowparent mremap madvise swap migration" \
	--sockets 2 --mem 2048 --qmp "$sock" --copy "$work/mm" -- \
	'set -e; fallocate -l 256M /swapfile; chmod 600 /swapfile; mkswap /swapfile >/dev/null; swapon /swapfile; ./mm'
tap_plan "$TAP_N"
tap_done
