#!/bin/bash
# Encrypted memory through the memory manager, in one VM boot: 2 sockets
# (2 NUMA nodes), 2 GiB, a 256 MiB virtio-blk disk as the swap device, and
# tests/guest/mm in it (first faults, fork and COW, mremap, MADV_DONTNEED
# and MADV_FREE, swap, migration (move_pages, migrate_pages, mbind with
# MPOL_MF_MOVE), compaction, encrypt_mprotect() racing move_pages(), KSM,
# THP, hugetlb VMAs split in two, process_vm_readv and ptrace, core
# dumps). Its TAP points are relayed here, renumbered ("mm: ..."), so that
# tests/run-all counts each of them.
# After writing the data of a scenario (first faults, the child's and the
# parent's pages after fork, mremap, madvise, swap-in, move_pages, a
# transparent huge page of each kind) the
# guest program prints the physical (KeyID 0) addresses of pages of an
# encrypted (cpu key), a no-encrypt and a plain region, and pauses;
# meanwhile the host reads those pages of guest RAM over QMP: the
# encrypted page's pattern must not be in RAM there, but must be at its
# KeyID alias (which the model decrypts with its home package's key); the others'
# patterns must be in RAM (tests/vm/hosted.bash). Then: the guest ran its
# whole plan, and vm/run found no kernel reports. The plan line comes last.
# The same boot then runs tests/guest/faults (PCONFIG failures reach
# add_key, its host half in tests/vm/faults.bash): a boot costs a minute
# under TCG, more than both programs. About 3 minutes in all.
# The model activates AES-XTS-256 alone, as client parts do (vm/run's
# MKTME_ALGORITHMS, aes-xts-256 unless set): the keys of this suite are
# 256-bit ones, where every other test's are AES-XTS-128 keys.
# Needs "make deb" first (vm/run installs the kernel).
#
#   tests/vm/mm.sh          no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"
# shellcheck source=tests/vm/faults.bash
. "$here/faults.bash"

# The swap device's requests between the "madvise" and the "swap" pauses
# (the swap scenario: MADV_PAGEOUT of 64-page regions, encrypted among
# them, and their swap-in), from QEMU's block statistics: the device
# reaches encrypted pages through their KeyID, and requests of 64 KiB and
# more must work (the model once had one 4 KiB bounce buffer for that).
swap_stats_before=''
swap_requests() {
	local wr_ops wr_bytes rd_ops rd_bytes b_wr_ops b_wr_bytes b_rd_ops b_rd_bytes
	read -r wr_ops wr_bytes rd_ops rd_bytes < <(python3 "$here/mktme_qmp.py" blockstats "$sock" scratch)
	read -r b_wr_ops b_wr_bytes b_rd_ops b_rd_bytes <<<"$swap_stats_before"
	wr_ops=$((wr_ops - b_wr_ops)) wr_bytes=$((wr_bytes - b_wr_bytes))
	rd_ops=$((rd_ops - b_rd_ops)) rd_bytes=$((rd_bytes - b_rd_bytes))
	echo "# swap: the swap disk wrote $wr_ops requests, $((wr_bytes / 1024)) KiB, and read $rd_ops requests, $((rd_bytes / 1024)) KiB"
	# Some request is at least as large as the average. The requests of
	# the three regions (encrypted, no-encrypt, plain) are not told apart:
	# the encrypted one is >= 64 KiB only as far as the diagnostic's
	# figures show (e.g. 3 requests of 768 KiB: each region's 256 KiB).
	tap_check "swap: swap-out of the three regions wrote requests averaging 64 KiB or more (average $((wr_ops ? wr_bytes / wr_ops / 1024 : 0)) KiB)" \
		test "$wr_ops" -gt 0 -a "$wr_bytes" -ge $((wr_ops * 65536))
}

# A handler of hosted_run: the pauses of faults are faults', the others
# mm's RAM checks.
on_guest() {
	case $1 in
	line)
		hosted_ram_line "$2"
		faults_line "$2"
		;;
	pause)
		case $2 in
		entropy | busy | retry | update | rejected | done) faults_pause "$2" ;;
		*) hosted_ram_check mm "$2" ;;
		esac
		case $2 in
		madvise) swap_stats_before=$(python3 "$here/mktme_qmp.py" blockstats "$sock" scratch) ;;
		swap) swap_requests ;;
		esac
		;;
	esac
}

tap_check "tests/guest/mm.c builds" hosted_build mm
tap_check "tests/guest/faults.c builds" hosted_build faults
if [ ! -x "$work/mm" ] || [ ! -x "$work/faults" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
# Both programs run whatever the first's status; the command's status is 1
# if either failed.
# shellcheck disable=SC2016 # $rc is the guest shell's
MKTME_ALGORITHMS=${MKTME_ALGORITHMS:-aes-xts-256} hosted_run mm+faults on_guest \
	"fault cowchild cowparent mremap madvise swap migration thp entropy busy retry update rejected done" \
	--sockets 2 --mem 2048 --disk 256 --qmp "$sock" --copy "$work/mm" --copy "$work/faults" -- \
	'set -e; swap=/dev/disk/by-id/virtio-scratch; udevadm settle; mkswap $swap >/dev/null; swapon $swap;
	rc=0; ./mm || rc=1; ./faults || rc=1; exit $rc'
tap_plan "$TAP_N"
tap_done
