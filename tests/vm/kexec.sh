#!/bin/bash
# kexec with KeyIDs in use, in two boots of one vm/run: tests/guest/kexec.c
# leaves a process writing memory encrypted under two keys and loads the
# running kernel with kexec_file_load(); "kexec exec" (vm/run
# --reboot-with; reboot(LINUX_REBOOT_CMD_KEXEC) at once, so the writer is
# still running, where "systemctl kexec" would kill it first) starts it;
# in the new kernel MKTME is there with no KeyID in use and encrypts anew.
# vm/run scans the dmesg of both boots. The old kernel's unflushed KeyID
# lines make the model's cache checker (strict in every vm/run) end the
# run unless the kernel wrote them back before the jump (patch 0029).
# About 3 minutes. Needs "make deb" first (vm/run installs the kernel); with
# MKTME_VMLINUZ, that bzImage is copied in and kexec'd into.
#
#   tests/vm/kexec.sh       no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

tap_check "tests/guest/kexec.c builds" hosted_build kexec
if [ ! -x "$work/kexec" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
# The kernel and initrd the guest booted: the installed ones, or the
# bzImage of MKTME_VMLINUZ with the initrd /initrd.img names.
copies=(--copy "$work/kexec")
# shellcheck disable=SC2016 # expanded by the guest's shell
kernel='/boot/vmlinuz-$(uname -r)' initrd='/boot/initrd.img-$(uname -r)'
if [ -n "${MKTME_VMLINUZ:-}" ]; then
	cp "$MKTME_VMLINUZ" "$work/bzImage"
	copies+=(--copy "$work/bzImage")
	kernel=/root/bzImage initrd=/initrd.img
fi
hosted_run kexec+kexec-after hosted_no_handler "" "${copies[@]}" \
	--reboot-with "setsid -f /root/kexec exec </dev/null >/dev/null 2>&1" \
	--then './kexec check' \
	-- ./kexec load "$kernel" "$initrd"

# kexec_boot CONSOLE_LOG: the second boot started by kexec, not by a reset
# (which "systemctl kexec" would fall back to without a loaded kernel): the
# console has two kernel banners, and between the old kernel's "Starting new
# kernel" and the second banner neither a restart nor the boot loader (a
# reset goes through GRUB, which prints "Loading Linux" on this console).
# Other CPUs may still print a line or two before the jump, so the banner
# need not be the very next line; what lies between is printed.
kexec_boot() {
	local banners between
	banners=$(grep -ac '\] Linux version ' "$1" || true)
	echo "console: $banners kernel banners"
	between=$(awk '/kexec_core: Starting new kernel/ { on = 1 }
		on { print; n++ }
		on && n > 1 && /\] Linux version / { exit }
		n > 40 { exit }' "$1" | tr -d '\r' | cut -c1-160)
	echo "from \"Starting new kernel\" to the next banner:"
	printf '%s\n' "$between" | head -12
	[ "$banners" -eq 2 ] &&
		printf '%s\n' "$between" | head -1 | grep -aq 'kexec_core: Starting new kernel' &&
		printf '%s\n' "$between" | tail -1 | grep -aq '\] Linux version ' &&
		! printf '%s\n' "$between" | grep -aqE 'Loading Linux|Booting `|reboot: Restarting'
}
tap_check "kexec: the second boot came by kexec (after \"Starting new kernel\", the new kernel's banner with no restart or boot loader between)" \
	kexec_boot "$MKTME_LOGS/vm-run-console.log"
tap_plan "$TAP_N"
tap_done
