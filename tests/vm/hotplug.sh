#!/bin/bash
# MKTME keys and CPU hotplug of a whole package, in two boots of
# "vm/run --sockets 2 --cpus 4" (CPUs 0-1 on package 0, 2-3 on package 1,
# each package with its own key table in the model). The guest half is
# tests/guest/hotplug.c: one process takes package 1 offline, fills memory
# encrypted with new keys on CPU 0, brings package 1 back online and reads
# the memory on CPU 2 (package 1's key table), writes it there and reads
# it back on CPU 0.
#
# Boot 1, without mktme_savekeys, two scenarios one after the other:
#   cpu keys            two cpu keys: onlining works; over QMP, before it
#                       package 1's table does not have the KeyIDs
#                       (control), after it it equals package 0's, KeyID by
#                       KeyID (state and fingerprint)
#   user key            a user key: CPU 2 (and 3) cannot come online (EPERM)
#                       while its KeyID is in use, the kernel says why in
#                       dmesg; after munmap and invalidating the key,
#                       onlining works
# Boot 2, with --append mktme_savekeys:
#   user key, saved     onlining works, the data reads back on CPU 2, and
#                       the tables are checked as for cpu keys
#
# The guest's TAP points are relayed, prefixed by the boot's label; the
# plan line comes last. About a minute per boot under TCG, mostly booting.
# Only one VM at a time on a small host: run it under
# "flock /tmp/linux-mktme-vm.lock". Needs "make deb" first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

keyids=() dmesg_lines=()

# A handler of hosted_run: KeyIDs from "region" lines, dmesg lines, and at
# the pauses the key tables.
on_guest() {
	case $1 in
	line)
		# The KeyIDs of the current scenario.
		if [[ $2 == "scenario "* ]]; then
			keyids=()
		elif [[ $2 =~ ^region\ [a-z0-9]+\ keyid=([0-9]+) ]]; then
			keyids+=("${BASH_REMATCH[1]}")
		elif [[ $2 == dmesg:* ]]; then
			dmesg_lines+=("$2")
		fi
		;;
	pause)
		case $2 in
		offline)
			tap_check "$label: host: package 1 offline: KeyIDs ${keyids[*]} are programmed (direct) on package 0" \
				qmp state "$sock" 0 direct "${keyids[@]}"
			tap_check "$label: host: ... and unprogrammed on package 1 (control)" \
				qmp state "$sock" 1 unprogrammed "${keyids[@]}"
			;;
		online)
			tap_check "$label: host: package 1 online: KeyIDs ${keyids[*]} are programmed (direct) on package 1" \
				qmp state "$sock" 1 direct "${keyids[@]}"
			tap_check "$label: host: package 1's key table is package 0's, KeyID by KeyID (state and fingerprint)" \
				qmp same "$sock"
			;;
		esac
		;;
	esac
}

# boot LABEL PAUSES MODE [VM_RUN_OPTIONS...]: hotplug MODE in the guest,
# then the x86/mktme lines of its dmesg ("dmesg: ...").
boot() {
	label=$1
	local pauses=$2 mode=$3
	shift 3
	keyids=() dmesg_lines=()
	hosted_run "$label" on_guest "$pauses" --sockets 2 --cpus 4 --qmp "$sock" \
		--copy "$work/hotplug" "$@" -- \
		"./hotplug $mode; rc=\$?; dmesg | grep -a x86/mktme | sed 's/^/dmesg: /'; exit \$rc"
}

# refused CPU KEYID: the kernel said why CPU could not come online.
refused() {
	local want="CPU $1: package 1 cannot get KeyID $2: user key data not kept (mktme_savekeys)"
	printf '%s\n' "${dmesg_lines[@]}"
	printf '%s\n' "${dmesg_lines[@]}" | grep -qF "x86/mktme: $want"
}

start=$SECONDS
tap_check "tests/guest/hotplug.c builds" hosted_build hotplug
if [ ! -x "$work/hotplug" ]; then
	tap_plan "$TAP_N"
	exit 1
fi

boot "cpu keys, user key" "offline online" "cpu user"
tap_check "user key: dmesg says why CPU 2 stayed offline (KeyID ${keyids[*]:-?})" \
	refused 2 "${keyids[0]:-?}"
tap_check "user key: ... and CPU 3" refused 3 "${keyids[0]:-?}"

boot "user key, mktme_savekeys" "offline online" user-saved --append mktme_savekeys
echo "# two boots in $((SECONDS - start)) s"
tap_plan "$TAP_N"
tap_done
