#!/bin/bash
# Memory hotplug with KeyIDs, in one VM boot with room for DIMMs
# ("vm/run --maxmem", memhp_default_state=online_movable): the host plugs
# a 256 MiB pc-dimm over QMP, the guest (tests/guest/memhotplug.c) checks
# that the direct map and every KeyID's copy of it map the new memory,
# puts encrypted pages there (the host finds ciphertext at their
# addresses and the pattern through their KeyID), offlines the memory
# with the pages mapped (they migrate with their KeyID), the host unplugs
# the DIMM (the guest ejects it through ACPI) and the guest checks that
# every copy's mapping is gone; then the same again with a second DIMM.
# About 3 minutes. Needs "make deb" first (vm/run installs the kernel).
#
#   tests/vm/memhotplug.sh  no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

label=memhotplug

on_guest() {
	case $1 in
	line) hosted_ram_line "$2" ;;
	pause)
		case $2 in
		add | readd)
			tap_check "$label: host: $2: plug a 256 MiB pc-dimm" \
				qmp dimm-add "$sock" "dimm-$2" 256
			;;
		ram-added | ram-readded)
			hosted_ram_check "$label" "$2"
			;;
		remove)
			tap_check "$label: host: remove: unplug the DIMM (the guest ejects it)" \
				qmp dimm-del "$sock" dimm-add
			;;
		esac
		;;
	esac
}

tap_check "tests/guest/memhotplug.c builds" hosted_build memhotplug
if [ ! -x "$work/memhotplug" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
hosted_run "$label" on_guest "add ram-added remove readd ram-readded" \
	--maxmem 3072 --qmp "$sock" --append memhp_default_state=online_movable \
	--copy "$work/memhotplug" -- ./memhotplug
tap_plan "$TAP_N"
tap_done
