#!/bin/bash
# What the packages in out/ carry: the kernel, its modules, MKTME config and
# the MKTME manual pages in linux-image; what an out-of-tree module build
# needs in linux-headers, proven by building tests/module against them.
#
#   tests/packages/contents.sh
#                           no arguments; TAP on stdout (make check runs it);
#                           MKTME_OUT: the packages' folder (out/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
out=${MKTME_OUT:-$top/out}

image=$(ls "$out"/linux-image-*.deb)
headers=$(ls "$out"/linux-headers-*.deb)
release=$(dpkg-deb -f "$image" Package)
release=${release#linux-image-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -c "$image" | awk '{print $6}' >"$work/image.list"

tap_plan 13
tap_check "linux-image carries /boot/vmlinuz-$release" \
	grep -qx "./boot/vmlinuz-$release" "$work/image.list"
tap_check "linux-image carries System.map and config" \
	bash -c "grep -qx './boot/System.map-$release' '$work/image.list' &&
		grep -qx './boot/config-$release' '$work/image.list'"
tap_check "linux-image carries modules" \
	grep -qE "^\./lib/modules/$release/kernel/.*\.ko$" "$work/image.list"
dpkg-deb -x "$image" "$work/image"
tap_check "/boot/config-$release has CONFIG_X86_INTEL_MKTME=y" \
	grep -qx CONFIG_X86_INTEL_MKTME=y "$work/image/boot/config-$release"
tap_check "linux-image runs the /etc/kernel hooks" \
	bash -c "dpkg-deb -e '$image' '$work/control' &&
		grep -q /etc/kernel/postinst.d '$work/control/postinst' &&
		grep -q /etc/kernel/postrm.d '$work/control/postrm'"

man_pages=(usr/share/man/man2/encrypt_mprotect.2.gz usr/share/man/man7/mktme.7.gz)
in_image_list() {
	local page
	for page in "$@"; do
		grep -qx "./$page" "$work/image.list" || {
			echo "not in $(basename "$image"): /$page"
			return 1
		}
	done
}
tap_check "linux-image carries the man pages encrypt_mprotect(2) and mktme(7)" \
	in_image_list "${man_pages[@]}"
# man_renders PAGE...: man formats each page with every groff warning on
# (-ww; "all" would leave out undefined macros) at 80 columns and
# says nothing on stderr.
man_renders() {
	local page err
	for page in "$@"; do
		err=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=w -l "$work/image/$page" 2>&1 >/dev/null) || {
			printf '/%s: man failed\n%s\n' "$page" "$err"
			return 1
		}
		if [ -n "$err" ]; then
			printf '/%s:\n%s\n' "$page" "$err"
			return 1
		fi
	done
}
tap_check "man -l renders both man pages without warnings" \
	man_renders "${man_pages[@]}"

dpkg-deb -x "$headers" "$work/headers"
kdir=$work/headers/usr/src/linux-headers-$release
# The seeds' ABI: encrypt_mprotect is 335 on x86-64 and 387 on i386.
tap_check "linux-headers' uapi unistd headers number encrypt_mprotect 335 and 387" \
	bash -c "grep -qx '#define __NR_encrypt_mprotect 335' '$kdir/arch/x86/include/generated/uapi/asm/unistd_64.h' &&
		grep -qx '#define __NR_encrypt_mprotect 387' '$kdir/arch/x86/include/generated/uapi/asm/unistd_32.h'"
tap_check "linux-headers links /lib/modules/$release/build to its tree" \
	test "$(readlink "$work/headers/lib/modules/$release/build")" = "/usr/src/linux-headers-$release"
cp -r "$top/tests/module" "$work/module"
build_module() {
	make -C "$kdir" M="$work/module" modules >"$work/module.log" 2>&1 ||
		{ cat "$work/module.log"; return 1; }
}
tap_check "an out-of-tree module builds against linux-headers" build_module
tap_check "the module's vermagic is $release" \
	bash -c "modinfo -F vermagic '$work/module/mktme_hello.ko' | grep -q '^$release '"
tap_check "modpost resolved every symbol from the packaged Module.symvers" \
	bash -c "! grep -i 'undefined\|warning' '$work/module.log'"
# __pa() and pte_modify() in a module call the exported accessors of the
# MKTME geometry (the variables are not exported).
imports_accessors() {
	local undefined
	undefined=$(nm -u "$work/module/mktme_hello.ko")
	printf '%s\n' "$undefined" | grep -E 'mktme|direct_map' || true
	grep -qw mktme_direct_map_mask <<<"$undefined" &&
		grep -qw mktme_keyid_pte_mask <<<"$undefined"
}
tap_check "the module imports the accessors mktme_direct_map_mask() and mktme_keyid_pte_mask()" \
	imports_accessors
tap_done
