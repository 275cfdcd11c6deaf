#!/bin/bash
# The configuration step: every profile resolves with MKTME on, and a fragment
# option that cannot survive olddefconfig fails the step, naming the option.
#
#   tests/host/config.sh    no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$top/scripts/lib.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tap_plan 7
tap_check "kernel tree prepared" "$top/scripts/prepare-tree"
for profile in ci debug debian series; do
	mktme_on() {
		"$top/scripts/make-config" "$1" "$work/obj-$1" &&
			grep -qx 'CONFIG_X86_INTEL_MKTME=y' "$work/obj-$1/.config" &&
			grep -qx 'CONFIG_LOCALVERSION="-mktme"' "$work/obj-$1/.config"
	}
	tap_check "profile $profile resolves with CONFIG_X86_INTEL_MKTME=y" mktme_on "$profile"
done

# A copy of the project whose fragment asks for MKTME on a 32-bit kernel.
mkdir -p "$work/top"
cp -r "$top/scripts" "$top/profiles" "$top/config-fragments" "$work/top/"
printf '# CONFIG_64BIT is not set\n' >"$work/top/config-fragments/zz-i386.config"
lost() {
	local out
	if out=$(MKTME_BUILD=$MKTME_BUILD "$work/top/scripts/make-config" ci "$work/obj-lost" 2>&1); then
		echo "make-config accepted a fragment whose option was lost"
		return 1
	fi
	printf '%s\n' "$out"
	grep -q 'config-fragments/mktme.config: CONFIG_X86_INTEL_MKTME=y did not survive' <<<"$out"
}
tap_check "a lost option fails, naming fragment and option" lost
tap_check "a failed check leaves no .config behind" test ! -e "$work/obj-lost/.config"
tap_done
