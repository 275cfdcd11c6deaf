#!/bin/bash
# The kernel's own memory-management selftests (tools/testing/selftests/vm
# of the tree the kernel was built from), run in the guest twice: plain,
# then with every private anonymous mapping they make encrypted by
# encrypt_anon.so (tests/guest/encrypt_anon.c) under one mktme key. A test
# that passes plain must pass encrypted; one that does not pass plain is
# not run encrypted (and fails, unless it skipped). The encrypted run also
# needs the shim to have encrypted at least one mapping.
#
#   selftests-vm.sh DIR     DIR holds the built selftests and encrypt_anon.so;
#                           mktme-algorithms.bash is next to this script
#
# Prints TAP. Each test runs with a time limit (MKTME_SELFTEST_TIMEOUT, 300 s).
set -euo pipefail
# Copied into the guest without scripts/lib.sh (only mktme-algorithms.bash
# goes with it): its print_help by hand (the header above is the usage),
# before the argument is taken for DIR.
case ${1-} in
-h | --help)
	awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"
	exit 0
	;;
esac

dir=${1:?usage: selftests-vm.sh DIR}
# Copied with it: the algorithm of the key (aes-xts-128 where activated).
# shellcheck source=tests/guest/mktme-algorithms.bash
. "$(dirname "$0")/mktme-algorithms.bash"
cd "$dir"
limit=${MKTME_SELFTEST_TIMEOUT:-300}
ksft_skip=4

# The tests and their arguments, those of run_vmtests.sh where it has them,
# smaller where encrypted memory under TCG would take minutes (the model
# decrypts every access in software). "TEST|REASON" runs TEST plain only,
# for REASON (KSM's tests fail encrypted by design). Not here: hugetlb
# tests (the shim leaves hugetlb alone), memfd_secret, map_populate and
# mlock-random-test (no private anonymous mmap() to encrypt), on-fault-limit
# (runs as nobody, who cannot use root's key), compaction_test and
# transhuge-stress (fill most of RAM, or loop until killed), test_hmm and
# test_vmalloc (need test modules the ci profile does not build), gup_test
# -ct (dumps pages into the kernel log, which vm/run counts as a report),
# split_huge_page_test (maps with memalign(), which the shim does not see),
# khugepaged (its swap-in tests need swap, which this boot has none of; the
# mm test's and the memory test's THP points collapse and split encrypted
# huge pages), migration (skips
# all its tests with fewer than 3 CPUs; the mm test moves encrypted pages).
# protection_keys_64 splits hugetlb VMAs at random: it found the lock order
# of hugetlb_split() that patch 0001 fixes.
ksm_design="by design: KSM never merges encrypted pages (the mm test's KSM points check that)"
tests=(
	"./map_fixed_noreplace"
	"./mremap_dontunmap"
	"./mremap_test -t 4"
	"./madv_populate"
	"./mlock2-tests"
	"./mrelease_test"
	"./soft-dirty"
	"./userfaultfd anon 4 4"
	"./userfaultfd anon:dev 4 4"
	"./gup_test -u -m 16"
	"./gup_test -a -m 16"
	"./ksm_tests -M -p 10|$ksm_design"
	"./ksm_tests -U|$ksm_design"
	"./ksm_tests -Z -p 10 -z 0|$ksm_design"
	"./ksm_tests -Z -p 10 -z 1|$ksm_design"
	"./ksm_tests -N -m 1|$ksm_design"
	"./ksm_tests -N -m 0|$ksm_design"
	"./protection_keys_64"
	"./virtual_address_range|in one of two runs the shim saw none of its mmap() calls (not understood yet)"
	"./va_128TBswitch"
)

n=0
fails=0
point() { # point OK DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 1 ]; then
		echo "ok $n - $2"
	else
		fails=$((fails + 1))
		echo "not ok $n - $2"
	fi
}
skip() { # skip DESCRIPTION REASON
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}

# run LOG CMD...: CMD with the time limit, its output into LOG; its status.
run() {
	local log=$1 rc=0
	shift
	timeout -k 10 "$limit" "$@" >"$log" 2>&1 </dev/null || rc=$?
	return "$rc"
}

# show LOG: the last lines of a test's output, as diagnostics.
show() {
	# awk ends every line, also a last one a killed test left unfinished.
	tail -n 15 "$1" | awk '{ print "# " $0 }'
}

echo "1..$((2 * ${#tests[@]} + 3))"

# One key for all mappings, in the session keyring so that every child of
# a test can use it.
key=$(keyctl add mktme selftests-vm "type=cpu algorithm=$(mktme_algorithm)" @s)
point 1 "an mktme key for the shim: serial $key"
export MKTME_SHIM_KEY=$key

# Positive control: with a key serial that is not an mktme key, the shim's
# refusal must fail a test that maps anonymous memory.
bogus=$(keyctl add user selftests-vm-user x @s)
rc=0
MKTME_SHIM_KEY=$bogus LD_PRELOAD=$dir/encrypt_anon.so \
	run log.control ./map_fixed_noreplace || rc=$?
point "$([ "$rc" -ne 0 ] && grep -q 'encrypt_anon: encrypt_mprotect' log.control && echo 1 || echo 0)" \
	"control: a key of another type makes the shim fail map_fixed_noreplace (status $rc)"
[ "$rc" -ne 0 ] || show log.control

total_mappings=0
for entry in "${tests[@]}"; do
	t=${entry%%|*}
	why=${entry#"$t"}
	why=${why#|}
	read -r -a cmd <<<"$t"
	start=$SECONDS
	rc=0
	run log.plain "${cmd[@]}" || rc=$?
	took=$((SECONDS - start))
	if [ "$rc" -eq "$ksft_skip" ]; then
		skip "plain: $t" "the test skipped ($took s)"
		skip "encrypted: $t" "it skipped plain"
		show log.plain
		continue
	fi
	point "$([ "$rc" -eq 0 ] && echo 1 || echo 0)" "plain: $t (status $rc, $took s)"
	if [ "$rc" -ne 0 ]; then
		show log.plain
		point 0 "encrypted: $t: not run, it failed plain"
		continue
	fi
	if [ -n "$why" ]; then
		skip "encrypted: $t" "$why"
		continue
	fi
	rm -f shim.log
	start=$SECONDS
	rc=0
	MKTME_SHIM_LOG=$dir/shim.log LD_PRELOAD=$dir/encrypt_anon.so \
		run log.encrypted "${cmd[@]}" || rc=$?
	took=$((SECONDS - start))
	# Mappings and refusals over every process of the test.
	read -r mappings bytes refused < <(awk '
		$1 == "encrypted" { m++; b += $3 }
		$1 == "refused" { r++ }
		END { printf "%d %d %d\n", m, b, r }' shim.log 2>/dev/null || echo 0 0 0)
	total_mappings=$((total_mappings + mappings))
	point "$([ "$rc" -eq 0 ] && [ "$mappings" -gt 0 ] && echo 1 || echo 0)" \
		"encrypted: $t (status $rc, $took s; $mappings mappings, $((bytes >> 20)) MiB encrypted, $refused refused)"
	if [ "$rc" -ne 0 ] || [ "$mappings" -eq 0 ]; then
		show log.encrypted
	fi
done

keyctl invalidate "$key"
keyctl invalidate "$bogus"
point "$([ "$total_mappings" -gt 0 ] && echo 1 || echo 0)" \
	"the shim encrypted $total_mappings mappings in all"
[ "$fails" -eq 0 ]
