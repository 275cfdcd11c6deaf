#!/bin/bash
# The kernel-log scan of vm/run and vm/autopkgtest (vm_dmesg_reports in
# vm/lib.sh), without a VM: each kind of kernel report, as the kernel
# prints it, is found and named by its class; lines of a good boot of our
# ci kernel, and user space's own fault lines, are not reports.
# tests/vm/harness.sh has the same scan's positive control in a real boot.
#
#   tests/host/dmesg-scan.sh
#                           no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
# shellcheck source=scripts/lib.sh
. "$here/../../scripts/lib.sh"
# shellcheck source=vm/lib.sh
. "$MKTME_TOP/vm/lib.sh"

# The samples: "CLASS|LINE" reports, "-|LINE" lines that are none.
reports=() benign=()
while IFS= read -r line; do
	case $line in
	'#'* | '') ;;
	-\|*) benign+=("${line#-|}") ;;
	*) reports+=("$line") ;;
	esac
done <"$here/dmesg-samples.txt"

# The dmesg of a real boot of our ci kernel in the test VM (a run of the
# fuzzer, tests/guest/fuzz.c, included): none of its lines is a report, or
# every run of vm/run would fail. Not build/logs/vm-run-console.log: the
# positive control of tests/vm/harness.sh leaves its reports there.
boot_logs=()
[ ! -s "$here/dmesg-ci-boot.txt" ] || boot_logs+=("$here/dmesg-ci-boot.txt")

tap_plan $((${#reports[@]} + ${#benign[@]} + ${#boot_logs[@]} + 3))

# reported_as CLASS LINE: vm_dmesg_reports names LINE as CLASS, and fails.
reported_as() {
	local out rc=0
	out=$(vm_dmesg_reports - <<<"$2") || rc=$?
	echo "vm_dmesg_reports: status $rc, printed: $out"
	[ "$rc" -eq 1 ] && [ "$out" = "$1: $2" ]
}

# not_reported FILE: vm_dmesg_reports finds nothing in FILE.
not_reported() {
	local out rc=0
	out=$(vm_dmesg_reports "$1") || rc=$?
	echo "vm_dmesg_reports: status $rc, printed: $out"
	[ "$rc" -eq 0 ] && [ -z "$out" ]
}

# With a timestamp, as in dmesg.
stamp='[   12.345678] '
for r in "${reports[@]}"; do
	tap_check "report (${r%%|*}): ${r#*|}" reported_as "${r%%|*}" "$stamp${r#*|}"
done
for b in "${benign[@]}"; do
	tap_check "not a report: $b" not_reported <(printf '%s\n' "$stamp$b")
done
for f in "${boot_logs[@]}"; do
	tap_check "no report in the kernel lines of ${f#"$MKTME_TOP"/}" \
		not_reported <(tr -d '\r' <"$f" | grep -aE '^\[ *[0-9]+\.[0-9]+\] ')
done

# The whole log at once: one line a report, in order, with the serial
# console's carriage returns gone; and an empty log.
two_reports() {
	local out rc=0
	out=$(printf '%s\r\n' '[ 1.0] rcu: Hierarchical RCU implementation.' \
		'[ 2.0] kernel BUG at mm/fake.c:1!' '[ 2.1] Call Trace:' '[ 3.0] ok' |
		vm_dmesg_reports -) || rc=$?
	printf 'status %s:\n%s\n' "$rc" "$out"
	[ "$rc" -eq 1 ] && [ "$out" = "$(printf '%s\n' 'BUG: [ 2.0] kernel BUG at mm/fake.c:1!' \
		'call trace: [ 2.1] Call Trace:')" ]
}
tap_check "a log of good lines and two reports: both, in order, CR stripped" two_reports
tap_check "an empty log: no report" not_reported /dev/null
# Every class matches at least one sample, so none is left untested.
every_class_sampled() {
	local n r unsampled=0
	for n in "${VM_DMESG_NAMES[@]}"; do
		for r in "${reports[@]}"; do
			[ "${r%%|*}" = "$n" ] && continue 2
		done
		echo "class $n has no sample report"
		unsampled=1
	done
	return "$unsampled"
}
tap_check "every class of VM_DMESG_NAMES has a sample report" every_class_sampled
tap_done
