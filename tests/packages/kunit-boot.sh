#!/bin/bash
# Boot the packaged kernel bare under QEMU (no root file system): its
# built-in KUnit suites for MKTME run at boot and print KTAP on the serial
# console; each case becomes a test point here. Two machines: Debian's QEMU
# (no MKTME: the kernel must behave as before, the cases that need MKTME
# skip) and the MKTME platform model (vm/qemu) with 3 KeyID bits, where the
# kernel must find 7 KeyIDs and take their bits out of physical_mask.
#
#   tests/packages/kunit-boot.sh
#                           no arguments; TAP on stdout (make check runs it);
#                           MKTME_OUT: the packages' folder (out/);
#                           MKTME_BOOT_TIMEOUT (300 s) and
#                           MKTME_BOOT_TRIES (2): as for vm/run
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
out=${MKTME_OUT:-$top/out}
model=$("$top/vm/qemu/build" 2>/dev/null | tail -n 1)
suites='mktme*'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$(ls "$out"/linux-image-*.deb)" "$work/image"
kernel=$(ls "$work"/image/boot/vmlinuz-*)

# boot NAME QEMU CPU: the console log of one boot in $work/NAME.log. With
# no root file system the kernel panics after the KUnit run, and QEMU exits
# instead of rebooting. A boot that QEMU does not end within
# MKTME_BOOT_TIMEOUT seconds (default 300) hung (a few boots in a hundred
# hang under multi-threaded TCG before the second CPU starts: issue 17); as
# vm/run does, it is tried again, up to MKTME_BOOT_TRIES boots in all
# (default 2), after its console tail.
boot() {
	local try tries=${MKTME_BOOT_TRIES:-2} limit=${MKTME_BOOT_TIMEOUT:-300} status
	for ((try = 1; ; try++)); do
		status=0
		timeout "$limit" "$2" -machine q35 -accel tcg -cpu "$3" -m 512 -smp 2 \
			-global q35-pcihost.pci-hole64-size=1G \
			-nographic -no-reboot -kernel "$kernel" \
			-append "console=ttyS0 panic=-1 kunit.filter_glob=$suites" \
			>"$work/$1.log" 2>&1 || status=$?
		if [ "$status" -ne 124 ] || [ "$try" -ge "$tries" ]; then
			break
		fi
		tr -d '\r' <"$work/$1.log" | tail -n 5 | sed 's/^/# /'
		echo "# WARNING: $1 boot $try of $tries hung (no end within $limit s, console tail above); booting again"
	done
	# KTAP after the printk time stamp: suite results at the top level,
	# their cases indented by four spaces.
	tr -d '\r' <"$work/$1.log" | sed -n -E 's/^\[[^]]*\] //p' >"$work/$1.ktap"
}
boot stock qemu-system-x86_64 max
boot model "$model" max,vendor=GenuineIntel,tme=on,pconfig=on,mktme-keyid-bits=3

mapfile -t stock_cases < <(sed -n -E 's/^    ((not )?ok [0-9]+ .*)$/\1/p' "$work/stock.ktap")
mapfile -t model_cases < <(sed -n -E 's/^    ((not )?ok [0-9]+ .*)$/\1/p' "$work/model.ktap")
tap_plan $((${#stock_cases[@]} + ${#model_cases[@]} + 5))

# cases_from NAME CASE...: one test point per KUnit case.
cases_from() {
	local name=$1 c case_name
	shift
	for c in "$@"; do
		TAP_N=$((TAP_N + 1))
		# KTAP: "ok N name" or "ok N - name", maybe "# SKIP reason".
		case_name=$(sed -E 's/^(not )?ok [0-9]+ (- )?//' <<<"$c")
		case $c in
		"not ok"*)
			echo "not ok $TAP_N - kunit ($name): $case_name"
			TAP_FAILED=$((TAP_FAILED + 1))
			grep -E 'Expected|ASSERT|EXPECT|mktme' "$work/$name.ktap" | head -n 20 | sed 's/^/# /'
			;;
		*) echo "ok $TAP_N - kunit ($name): $case_name" ;;
		esac
	done
}
ran() { [ "$(grep -cE '^(not )?ok [0-9]+ mktme' "$work/$1.ktap")" -gt 0 ] || { tail -n 30 "$work/$1.log"; false; }; }
tap_check "Debian's QEMU: the KUnit suites $suites ran at boot" ran stock
tap_check "Debian's QEMU: no MKTME, no KeyID geometry line" \
	bash -c "! grep -q 'x86/mktme: [0-9]* KeyIDs' '$work/stock.ktap'"
cases_from stock "${stock_cases[@]}"
tap_check "MKTME model: the KUnit suites $suites ran at boot" ran model
# The model activates aes-xts-128 alone (its default); a kernel since
# issue 18 names it at the end of the line, one before it does not.
tap_check "MKTME model: one line gives 7 KeyIDs with their shift and mask" \
	grep -qxE 'x86/mktme: 7 KeyIDs, KeyID shift 37, KeyID mask 0xe000000000(, algorithms: aes-xts-128)?' "$work/model.ktap"
tap_check "MKTME model: the boot geometry case ran, not skipped" \
	grep -qE '^    ok [0-9]+ mktme_test_boot_geometry$' "$work/model.ktap"
cases_from model "${model_cases[@]}"
tap_done
