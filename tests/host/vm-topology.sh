#!/bin/bash
# vm/run's CPU topology without a VM: the -smp and -numa arguments
# vm_topology_args (vm/lib.sh) makes for --sockets, --cpus and --maxcpus,
# and vm/run's errors for values that make no topology (status 2, before
# anything is prepared or booted).
#
#   tests/host/vm-topology.sh
#                           no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
# shellcheck source=scripts/lib.sh
. "$here/../../scripts/lib.sh"
# shellcheck source=vm/lib.sh
. "$MKTME_TOP/vm/lib.sh"

# topology "SOCKETS CPUS MAXCPUS" WANT...: vm_topology_args prints the
# words WANT, one a line ("-" for an option left out; --mem 2048).
topology() {
	local sockets cpus max out want
	read -r sockets cpus max <<<"$1"
	shift
	[ "$sockets" != - ] || sockets=''
	[ "$cpus" != - ] || cpus=''
	[ "$max" != - ] || max=''
	out=$(VM_SOCKETS=$sockets VM_CPUS=$cpus VM_MAXCPUS=$max VM_MEM=2048 vm_topology_args)
	want=$(printf '%s\n' "$@")
	echo "vm_topology_args printed:"
	echo "$out"
	echo "wanted:"
	echo "$want"
	[ "$out" = "$want" ]
}

# numa SOCKETS SLOTS_PER_SOCKET: the -object/-numa words for 2048 MiB.
numa() {
	local n
	for ((n = 0; n < $1; n++)); do
		printf '%s\n' -object "memory-backend-ram,id=mem$n,size=$((2048 / $1))M" \
			-numa "node,nodeid=$n,memdev=mem$n,cpus=$((n * $2))-$(((n + 1) * $2 - 1))"
	done
}

# rejected MESSAGE VM_RUN_ARGS...: vm/run exits 2 with "error: MESSAGE"
# and nothing else on stderr. With an unusable cache (and no QEMU), vm/run
# fails at once, with another status and message, if it ever goes on to
# prepare the VM.
rejected() {
	local want=$1 rc=0 err
	shift
	err=$(MKTME_CACHE=/dev/null/no-cache MKTME_QEMU=/bin/false \
		timeout 60 "$MKTME_TOP/vm/run" "$@" -- true 2>&1 >/dev/null) || rc=$?
	echo "vm/run $*: status $rc, stderr: $err"
	[ "$rc" -eq 2 ] && [ "$err" = "error: $want" ]
}

help_text() {
	local out rc=0
	out=$("$MKTME_TOP/vm/run" --help) || rc=$?
	echo "vm/run --help: status $rc"
	[ "$rc" -eq 0 ] &&
		grep -q -- '\[--maxcpus M\]' <<<"$out" &&
		grep -q -- '--maxcpus M  .*CPU slots' <<<"$out" &&
		grep -q 'device_add' <<<"$out"
}

mapfile -t numa21 < <(numa 2 1)
mapfile -t numa22 < <(numa 2 2)

tap_plan 23

# Without --maxcpus: the arguments vm/run has always given.
tap_check "default: 2 vCPUs, 1 socket, no NUMA" \
	topology "- - -" -smp cpus=2,sockets=1,cores=2,threads=1
tap_check "--sockets 2: 1 vCPU per socket, a NUMA node each" \
	topology "2 - -" -smp cpus=2,sockets=2,cores=1,threads=1 "${numa21[@]}"
tap_check "--sockets 2 --cpus 4" \
	topology "2 4 -" -smp cpus=4,sockets=2,cores=2,threads=1 "${numa22[@]}"

# With --maxcpus: M slots, M/S per socket and node.
tap_check "--sockets 2 --cpus 2 --maxcpus 4: CPUs 0-1 on socket 0 / node 0, socket 1 empty" \
	topology "2 2 4" -smp cpus=2,maxcpus=4,sockets=2,cores=2,threads=1 "${numa22[@]}"
tap_check "--sockets 2 --cpus 3 --maxcpus 4: --cpus need not be a multiple of --sockets" \
	topology "2 3 4" -smp cpus=3,maxcpus=4,sockets=2,cores=2,threads=1 "${numa22[@]}"
tap_check "--sockets 2 --maxcpus 4: the default --cpus (2) are both on socket 0" \
	topology "2 - 4" -smp cpus=2,maxcpus=4,sockets=2,cores=2,threads=1 "${numa22[@]}"
tap_check "--cpus 1 --maxcpus 2: one socket, no NUMA" \
	topology "- 1 2" -smp cpus=1,maxcpus=2,sockets=1,cores=2,threads=1
tap_check "--sockets 2 --cpus 4 --maxcpus 4: every slot present" \
	topology "2 4 4" -smp cpus=4,maxcpus=4,sockets=2,cores=2,threads=1 "${numa22[@]}"

tap_check "vm/run --help documents --maxcpus" help_text

# Values that make no topology: status 2 before anything is prepared.
tap_check "--maxcpus below --cpus" \
	rejected "--maxcpus 1 is less than --cpus 2" --cpus 2 --maxcpus 1
tap_check "--maxcpus below the default --cpus" \
	rejected "--maxcpus 1 is less than --cpus 2" --maxcpus 1
tap_check "--maxcpus not a multiple of --sockets" \
	rejected "--maxcpus 3 is not a multiple of --sockets 2" --sockets 2 --cpus 2 --maxcpus 3
tap_check "--maxcpus 0" \
	rejected "--maxcpus 0: not a positive number" --maxcpus 0
tap_check "--maxcpus not a number" \
	rejected "--maxcpus four: not a positive number" --maxcpus four
tap_check "--maxcpus empty" \
	rejected "--maxcpus : not a positive number" --maxcpus ''
tap_check "without --maxcpus, --cpus not a multiple of --sockets" \
	rejected "--cpus 3 is not a multiple of --sockets 2" --sockets 2 --cpus 3
tap_check "--mem that does not split over the sockets" \
	rejected "--mem 2047 does not split over 2 sockets" --sockets 2 --mem 2047
tap_check "--maxmem not more than --mem" \
	rejected "--maxmem 2048 is not more than --mem 2048" --mem 2048 --maxmem 2048
tap_check "--maxmem not a number" \
	rejected "--maxmem lots: not a positive number" --maxmem lots
tap_check "--dma-disk 0" \
	rejected "--dma-disk 0: not a positive number" --dma-disk 0
tap_check "--then without --reboot-with" \
	rejected "--reboot-with and --then go together" --then 'uname -r'
tap_check "--reboot-with without --then" \
	rejected "--reboot-with and --then go together" --reboot-with 'systemctl reboot'
tap_check "--reboot-with an empty command" \
	rejected "--reboot-with: needs a command" --reboot-with '' --then 'uname -r'
tap_done
