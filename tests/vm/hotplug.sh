#!/bin/bash
# MKTME keys and CPU hotplug of a whole package, in two boots of
# "vm/run --sockets 2 --cpus 4" (CPUs 0-1 on package 0, 2-3 on package 1,
# each package with its own key table in the model), and CPU hot-add in a
# third. The guest half is
# tests/guest/hotplug.c: one process takes package 1 offline, fills memory
# encrypted with new keys on CPU 0, brings package 1 back online and reads
# the memory on CPU 2 (package 1's key table), writes it there and reads
# it back on CPU 0.
#
# Boot 1, without mktme_savekeys, three scenarios one after the other:
#   cpu keys            two cpu keys: onlining works; over QMP, before it
#                       package 1's table does not have the KeyIDs
#                       (control), after it it holds them as random keys of
#                       its own: the state of package 0's, another
#                       fingerprint (each package's CPU made its key)
#   returning package   a cpu key encrypts memory of node 1 (package 1's
#                       table); package 1 goes offline and comes back: over
#                       QMP its key for the KeyID has the same fingerprint
#                       before and after, and the memory reads back
#   user key            a user key: CPU 2 (and 3) cannot come online (EPERM)
#                       while its KeyID is in use, the kernel says why in
#                       dmesg; after munmap and invalidating the key,
#                       onlining works
# Boot 2, with --append mktme_savekeys:
#   user key, saved     onlining works, the data reads back on CPU 2, and
#                       package 1's table holds the KeyID programmed
#                       (direct) with package 0's key (same fingerprint)
# Boot 3, "--sockets 2 --cpus 2 --maxcpus 4" (socket 1 empty):
#   hot-added CPUs      with a cpu key in use, the host hot-adds (QMP
#                       device_add) two CPUs into socket 1, each unlike
#                       the boot CPU in one way: 5 KeyID bits instead of 6,
#                       no PCONFIG; each is refused (EINVAL) and
#                       dmesg says why, MKTME stays and CPU 1 still comes
#                       and goes; once no KeyID is in use, the one without
#                       PCONFIG comes online first (nothing is programmed
#                       there) and MKTME is disabled, then the other
#
# The guest's TAP points are relayed, prefixed by the boot's label; the
# plan line comes last. About a minute per boot under TCG, mostly booting.
# Only one VM at a time on a small host: run it under
# "flock /tmp/linux-mktme-vm.lock". Needs "make deb" first.
#
#   tests/vm/hotplug.sh     no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

keyids=() dmesg_lines=() scenario='' kept_fingerprint=''

# same_fingerprint BEFORE AFTER: one random key, before and after.
same_fingerprint() {
	[ "${1%% *}" = random ] && [ "$1" = "$2" ]
}

# The state a scenario's keys have in the tables: cpu keys are random.
key_state() {
	case $scenario in
	user*) echo direct ;;
	*) echo random ;;
	esac
}

# A handler of hosted_run: KeyIDs from "region" lines, dmesg lines, and at
# the pauses the key tables.
on_guest() {
	case $1 in
	line)
		# The KeyIDs of the current scenario.
		if [[ $2 == "scenario "* ]]; then
			keyids=() scenario=${2#scenario }
		elif [[ $2 =~ ^region\ [a-z0-9]+\ keyid=([0-9]+) ]]; then
			keyids+=("${BASH_REMATCH[1]}")
		elif [[ $2 == dmesg:* ]]; then
			dmesg_lines+=("$2")
		fi
		;;
	pause)
		case $2 in
		hotadd-*)
			local kind=${2#hotadd-} core
			core=$(hotadd_core "$kind")
			tap_check "$label: host: device_add of CPU socket 1 core $core, ${hotadd_props[$kind]}" \
				qmp hotadd "$sock" 1 "$core" "${hotadd_props[$kind]}"
			;;
		offline)
			tap_check "$label: host: package 1 offline: KeyIDs ${keyids[*]} are programmed ($(key_state)) on package 0" \
				qmp state "$sock" 0 "$(key_state)" "${keyids[@]}"
			tap_check "$label: host: ... and unprogrammed on package 1 (control)" \
				qmp state "$sock" 1 unprogrammed "${keyids[@]}"
			;;
		online)
			tap_check "$label: host: package 1 online: KeyIDs ${keyids[*]} are programmed ($(key_state)) on package 1" \
				qmp state "$sock" 1 "$(key_state)" "${keyids[@]}"
			tap_check "$label: host: package 1's key table agrees with package 0's (direct: same key; random: a key of its own)" \
				qmp agree "$sock"
			;;
		kept-before)
			kept_fingerprint=$(qmp fingerprint "$sock" 1 "${keyids[0]:-0}") || kept_fingerprint=
			tap_check "$label: host: cpu KeyID ${keyids[*]} is random on package 1 ($kept_fingerprint)" \
				test "${kept_fingerprint%% *}" = random
			tap_check "$label: host: ... and package 0 holds another random key for it" \
				qmp agree "$sock" "${keyids[0]:-0}"
			;;
		kept-after)
			local now
			now=$(qmp fingerprint "$sock" 1 "${keyids[0]:-0}") || now=
			tap_check "$label: host: package 1 back online keeps KeyID ${keyids[*]}'s key: $now (was $kept_fingerprint)" \
				same_fingerprint "$kept_fingerprint" "$now"
			;;
		esac
		;;
	esac
}

# The CPUs that hotadd hot-adds, in order, each unlike the boot CPU in one
# way, and the core of socket 1 each goes to.
declare -A hotadd_props=(
	[bits]="mktme-keyid-bits=5"
	[nopconfig]="pconfig=false"
)
hotadd_kinds=(bits nopconfig)
hotadd_core() {
	local i
	for i in "${!hotadd_kinds[@]}"; do
		[ "${hotadd_kinds[$i]}" != "$1" ] || echo "$i"
	done
}

# boot LABEL PAUSES MODE [VM_RUN_OPTIONS...]: hotplug MODE in the guest,
# then the x86/mktme lines of its dmesg ("dmesg: ...").
boot() {
	label=$1
	local pauses=$2 mode=$3
	shift 3
	keyids=() dmesg_lines=()
	hosted_run "$label" on_guest "$pauses" --sockets 2 --qmp "$sock" \
		--copy "$work/hotplug" "$@" -- \
		"./hotplug $mode; rc=\$?; dmesg | grep -a x86/mktme | sed 's/^/dmesg: /'; exit \$rc"
}

# said LINE: the guest's dmesg has the x86/mktme line LINE.
said() {
	printf '%s\n' "${dmesg_lines[@]}"
	printf '%s\n' "${dmesg_lines[@]}" | grep -qF "x86/mktme: $1"
}

# refused CPU KEYID: the kernel said why CPU could not come online.
refused() {
	said "CPU $1: package 1 cannot get KeyID $2: user key data not kept (mktme_savekeys)"
}

start=$SECONDS
tap_check "tests/guest/hotplug.c builds" hosted_build hotplug
if [ ! -x "$work/hotplug" ]; then
	tap_plan "$TAP_N"
	exit 1
fi

boot "cpu keys, returning package, user key" "offline online kept-before kept-after" \
	"cpu returning user" --cpus 4
tap_check "user key: dmesg says why CPU 2 stayed offline (KeyID ${keyids[*]:-?})" \
	refused 2 "${keyids[0]:-?}"
tap_check "user key: ... and CPU 3" refused 3 "${keyids[0]:-?}"

boot "user key, mktme_savekeys" "offline online" user-saved --cpus 4 --append mktme_savekeys

boot "hot-added CPUs" "hotadd-bits hotadd-nopconfig" hotadd --cpus 2 --maxcpus 4
for cpu in 2 3; do
	tap_check "hot-added CPUs: dmesg says CPU $cpu was refused for its TME configuration" \
		said "CPU $cpu refused: its TME configuration differs from the boot CPU's while 1 KeyID(s) are in use"
done
tap_check "hot-added CPUs: dmesg says MKTME was disabled once no KeyID was in use" \
	said "disabled: TME configuration differs between CPUs"
echo "# three boots in $((SECONDS - start)) s"
tap_plan "$TAP_N"
tap_done
