#!/bin/bash
# The test VM harness as a user drives it (vm/run): our kernel is the one
# running, options reach QEMU and the kernel, the command's exit status is
# the run's, and a kernel that panics or hangs at boot fails fast with the
# console's tail.
# Needs "make deb" first; the kernel install is cached after the first run.
#
#   tests/vm/harness.sh     no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
run=$top/vm/run
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

deb=$(find "$top/out" -maxdepth 1 -name 'linux-image-*.deb' -printf '%T@ %p\n' |
	sort -rn | sed -n '1s/^[^ ]* //p')
release=$(dpkg-deb -c "$deb" | sed -n 's|.* \./boot/vmlinuz-\(.*\)$|\1|p')

# The reports of tests/host/dmesg-samples.txt, one of each class, for the
# positive control; not the panics: a panic line on the serial console
# stops vm/run's boot checks (vm_check_alive), which is tested below.
controls=() seen='|'
while IFS= read -r line; do
	class=${line%%|*}
	case $line in '#'* | '' | -\|* | panic\|*) continue ;; esac
	[[ $seen != *"|$class|"* ]] || continue
	seen+="$class|"
	controls+=("$line")
done <"$top/tests/host/dmesg-samples.txt"

tap_plan $((11 + 3 + ${#controls[@]}))

# One boot for the topology, the command line, the release and the exit
# status: vm/run exits with the command's (here 3), after its dmesg scan.
start=$SECONDS
rc=0
"$run" --sockets 2 --cpus 4 --append mktme_savekeys -- \
	'uname -r; lscpu; cat /proc/cmdline; exit 3' >"$work/topo.out" 2>"$work/topo.err" || rc=$?
echo "# vm/run --sockets 2 --cpus 4 --append mktme_savekeys: $((SECONDS - start)) s, status $rc"
# vm/run's own lines: on the first run after a new .deb, the install
# (Debian's kernel boots, dpkg -i, reboot, uname -r) comes first.
grep -E '^(==>|    )' "$work/topo.out" | sed 's/^/# /' || true
sed -n 's/^vm: /# vm: /p' "$work/topo.err"
tap_check "vm/run exits with the command's status (3)" test "$rc" -eq 3
tap_check "... after scanning dmesg: no kernel reports" \
	grep -qx 'vm: kernel log: no reports' "$work/topo.err"
tap_check "uname -r in the VM is $release" grep -qx "$release" "$work/topo.out"
tap_check "lscpu shows 2 sockets" grep -qE '^Socket\(s\): +2$' "$work/topo.out"
tap_check "lscpu shows 4 CPUs" grep -qE '^CPU\(s\): +4$' "$work/topo.out"
tap_check "--append reaches /proc/cmdline" grep -qE '(^| )mktme_savekeys( |$)' "$work/topo.out"

# The scan's positive control: the command writes the sample reports to
# the kernel log and succeeds; vm/run must fail (status 1), name each
# report's class and not say "no reports". One boot for all the classes.
for c in "${controls[@]}"; do
	# <2>: KERN_CRIT, as the kernel prints a BUG.
	printf '<2>%s (harness positive control)\n' "${c#*|}"
done >"$work/kmsg.txt"
start=$SECONDS
rc=0
# shellcheck disable=SC2016 # for the guest's shell
"$run" --copy "$work/kmsg.txt" -- \
	'while IFS= read -r l; do printf "%s\n" "$l" >/dev/kmsg; done <kmsg.txt' \
	>"$work/control.out" 2>"$work/control.err" || rc=$?
echo "# positive control (${#controls[@]} kinds of report in dmesg): $((SECONDS - start)) s, status $rc"
sed -n 's/^vm: /# vm: /p' "$work/control.err"
tap_check "kernel reports in dmesg fail a command that succeeded: status 1" test "$rc" -eq 1
tap_check "... vm/run says so" grep -q "^vm: kernel reports in the guest's dmesg:" "$work/control.err"
tap_check "... and not \"no reports\"" bash -c "! grep -q 'kernel log: no reports' '$work/control.err'"
# named CLASS TEXT: vm/run printed the report as "CLASS: [ time] TEXT ...".
named() {
	local l
	while IFS= read -r l; do
		[[ $l == "$1: ["*"] $2 (harness positive control)" ]] && return 0
	done <"$work/control.err"
	echo "no line \"$1: [...] $2 (harness positive control)\" in vm/run's report"
	return 1
}
for c in "${controls[@]}"; do
	tap_check "... names the report ${c%%|*}: ${c#*|}" named "${c%%|*}" "${c#*|}"
done

# No root file system and no init from the initrd: the kernel panics
# ("VFS: Unable to mount root fs"), and the run must stop at once. The
# panic comes within 30 s of console output; a boot that hangs silently
# before it (issue 17's early-boot hang under multi-threaded TCG, seen
# once in the retry, which then took 120 s to be called a hang) fails
# after 30 s of silence.
start=$SECONDS
rc=0
MKTME_CONSOLE_QUIET=30 \
	"$run" --append 'rdinit=/nonexistent panic=0' -- true >"$work/panic.out" 2>&1 || rc=$?
took=$((SECONDS - start))
echo "# boot that panics: failed after $took s, status $rc"
# vm/run's own lines: each try's failure, for a run that takes too long.
sed -n "s/^vm: /# boot that panics: vm: /p" "$work/panic.out"
tap_check "a boot that panics fails" test "$rc" -ne 0
tap_check "... within 120 s, printing the console tail with the panic" \
	bash -c "[ $took -le 120 ] && grep -q 'last 50 lines of the serial console' '$work/panic.out' &&
		grep -q 'Kernel panic' '$work/panic.out'"
tap_check "... after booting it twice (vm_boot tries a failed boot once more)" \
	test "$(grep -c 'booting again' "$work/panic.out")" -eq 1

# A shell as the initrd's init waits on the console for ever: the boot
# hangs, and fails once the console has said nothing for
# MKTME_CONSOLE_QUIET seconds (20 here, 120 by default), long before
# MKTME_BOOT_TIMEOUT.
start=$SECONDS
rc=0
MKTME_CONSOLE_QUIET=20 MKTME_BOOT_TRIES=1 MKTME_BOOT_TIMEOUT=300 \
	"$run" --append 'rdinit=/bin/sh' -- true >"$work/hang.out" 2>&1 || rc=$?
took=$((SECONDS - start))
echo "# boot that hangs: failed after $took s, status $rc"
tap_check "a boot that hangs fails once its console is silent for 20 s (in $took s)" \
	bash -c "[ $rc -ne 0 ] && [ $took -le 150 ] &&
		grep -q 'serial console has been silent for 20s' '$work/hang.out'"
tap_check "... printing the console tail" \
	grep -q 'last 50 lines of the serial console' "$work/hang.out"
tap_done
