#!/bin/bash
# Boot the packaged kernel bare under QEMU (no root file system): its
# built-in KUnit suites for MKTME run at boot and print KTAP on the serial
# console; each case becomes a test point here. With MKTME_QEMU and
# MKTME_CPU pointing at the MKTME platform model, the cases that need
# MKTME hardware run too; elsewhere they are skipped, as KUnit reports.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
out=${MKTME_OUT:-$top/out}
qemu=${MKTME_QEMU:-qemu-system-x86_64}
cpu=${MKTME_CPU:-max}
suites='mktme*'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$(ls "$out"/linux-image-*.deb)" "$work/image"
kernel=$(ls "$work"/image/boot/vmlinuz-*)

# No root file system: the kernel panics after the KUnit run, and QEMU
# exits instead of rebooting.
timeout 300 "$qemu" -machine q35 -accel tcg -cpu "$cpu" -m 512 -smp 2 \
	-nographic -no-reboot -kernel "$kernel" \
	-append "console=ttyS0 panic=-1 kunit.filter_glob=$suites" \
	>"$work/console.log" 2>&1 || true

# KTAP after the printk time stamp: suite results at the top level, their
# cases indented by four spaces.
sed -n -E 's/^\[[^]]*\] //p' "$work/console.log" >"$work/ktap"
mapfile -t cases < <(sed -n -E 's/^    ((not )?ok [0-9]+ .*)$/\1/p' "$work/ktap")
mapfile -t suites_run < <(grep -E '^(not )?ok [0-9]+ ' "$work/ktap")

if [ "${#cases[@]}" -eq 0 ]; then
	echo "1..1"
	echo "not ok 1 - KUnit suites $suites ran at boot"
	tail -n 30 "$work/console.log" | sed 's/^/# /'
	exit 1
fi
tap_plan $((${#cases[@]} + 1))
tap_check "boot log has the KUnit summary of $suites" test "${#suites_run[@]}" -gt 0
for c in "${cases[@]}"; do
	TAP_N=$((TAP_N + 1))
	case $c in
	"not ok"*)
		echo "not ok $TAP_N - kunit: ${c#not ok * - }"
		TAP_FAILED=$((TAP_FAILED + 1))
		;;
	*) echo "ok $TAP_N - kunit: ${c#ok * - }" ;;
	esac
done
if [ "$TAP_FAILED" -gt 0 ]; then
	grep -E 'Expected|ASSERT|EXPECT|mktme' "$work/console.log" | head -n 40 | sed 's/^/# /'
fi
tap_done
