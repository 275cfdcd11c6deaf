#!/bin/bash
# vm/run's MKTME model settings without a VM: the -cpu argument
# vm_cpu_arg (vm/lib.sh) makes from MKTME_CPU, MKTME_ALGORITHMS,
# MKTME_TME_BYPASS and MKTME_CACHE_STRICT, and vm/run's errors for values
# the model does not take (status 2, before anything is prepared or
# booted).
#
#   tests/host/vm-mktme-model.sh
#                           no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
# shellcheck source=scripts/lib.sh
. "$here/../../scripts/lib.sh"
# shellcheck source=vm/lib.sh
. "$MKTME_TOP/vm/lib.sh"

# cpu_arg WANT [VAR=VALUE...]: vm_cpu_arg prints WANT with the variables
# set (TCG, the default CPU model unless MKTME_CPU= is among them).
cpu_arg() {
	local want=$1 out v
	shift
	out=$(
		unset MKTME_ALGORITHMS MKTME_TME_BYPASS MKTME_CACHE_STRICT MKTME_CPU
		for v in "$@"; do
			export "${v?}"
		done
		VM_ACCEL=tcg VM_CPU=${MKTME_CPU:-max,vendor=GenuineIntel}
		vm_cpu_arg
	)
	echo "vm_cpu_arg printed: $out"
	echo "wanted:             $want"
	[ "$out" = "$want" ]
}

# rejected MESSAGE VAR=VALUE...: vm/run exits 2 with "error: MESSAGE" and
# nothing else on stderr (an unusable cache and no QEMU: it would fail
# otherwise, with another status, if it went on to prepare the VM).
rejected() {
	local want=$1 rc=0 err
	shift
	err=$(env "$@" MKTME_CACHE=/dev/null/no-cache MKTME_QEMU=/bin/false \
		timeout 60 "$MKTME_TOP/vm/run" -- true 2>&1 >/dev/null) || rc=$?
	echo "vm/run with $*: status $rc, stderr: $err"
	[ "$rc" -eq 2 ] && [ "$err" = "error: $want" ]
}

help_text() {
	local out
	out=$("$MKTME_TOP/vm/run" --help)
	grep -q 'MKTME_ALGORITHMS .*algorithms' <<<"$out" &&
		grep -q 'mktme-algorithms=' <<<"$out" &&
		grep -q 'MKTME_TME_BYPASS .*on' <<<"$out" &&
		grep -q 'mktme-tme-bypass=' <<<"$out"
}

base=max,vendor=GenuineIntel,tme=on,pconfig=on,mktme-cache-strict=on

tap_plan 10
tap_check "default: MKTME on request, the cache checker strict, the model's own algorithm and bypass" \
	cpu_arg "$base"
tap_check "MKTME_ALGORITHMS=aes-xts-256" \
	cpu_arg "$base,mktme-algorithms=aes-xts-256" MKTME_ALGORITHMS=aes-xts-256
tap_check "MKTME_ALGORITHMS=both MKTME_TME_BYPASS=off" \
	cpu_arg "$base,mktme-algorithms=both,mktme-tme-bypass=off" \
	MKTME_ALGORITHMS=both MKTME_TME_BYPASS=off
tap_check "MKTME_TME_BYPASS=on MKTME_CACHE_STRICT=0" \
	cpu_arg "max,vendor=GenuineIntel,tme=on,pconfig=on,mktme-tme-bypass=on" \
	MKTME_TME_BYPASS=on MKTME_CACHE_STRICT=0
tap_check "MKTME_CPU naming mktme-algorithms and mktme-tme-bypass wins over the variables" \
	cpu_arg "max,vendor=GenuineIntel,mktme-algorithms=both,mktme-tme-bypass=on,tme=on,pconfig=on,mktme-cache-strict=on" \
	MKTME_CPU=max,vendor=GenuineIntel,mktme-algorithms=both,mktme-tme-bypass=on \
	MKTME_ALGORITHMS=aes-xts-256 MKTME_TME_BYPASS=off
tap_check "vm/run --help documents MKTME_ALGORITHMS and MKTME_TME_BYPASS" help_text
tap_check "MKTME_ALGORITHMS=aes-xts-512 is refused" \
	rejected "MKTME_ALGORITHMS=aes-xts-512: want aes-xts-128, aes-xts-256 or both" \
	MKTME_ALGORITHMS=aes-xts-512
tap_check "MKTME_ALGORITHMS=AES-XTS-256 (case matters) is refused" \
	rejected "MKTME_ALGORITHMS=AES-XTS-256: want aes-xts-128, aes-xts-256 or both" \
	MKTME_ALGORITHMS=AES-XTS-256
tap_check "MKTME_TME_BYPASS=yes is refused" \
	rejected "MKTME_TME_BYPASS=yes: want on or off" MKTME_TME_BYPASS=yes
tap_check "MKTME_TME_BYPASS=0 is refused" \
	rejected "MKTME_TME_BYPASS=0: want on or off" MKTME_TME_BYPASS=0
tap_done
