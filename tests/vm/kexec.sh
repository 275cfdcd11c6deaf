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
# (which "systemctl kexec" would fall back to without a loaded kernel).
kexec_boot() {
	local banners
	banners=$(grep -ac '\] Linux version ' "$1" || true)
	echo "console: $banners kernel banners; kexec lines:"
	grep -a 'kexec_core: Starting new kernel' "$1" &&
		[ "$banners" -eq 2 ] &&
		grep -aA1 'kexec_core: Starting new kernel' "$1" | grep -aq '\] Linux version '
}
tap_check "kexec: the second boot came by kexec (the console's next line after \"Starting new kernel\" is the new kernel's banner)" \
	kexec_boot "$MKTME_LOGS/vm-run-console.log"
tap_plan "$TAP_N"
tap_done
