# shellcheck shell=bash
# The encryption algorithms the platform has activated for MKTME (issue
# 18), for the shell tests, as tests/guest/mktme.c reads them for the C
# ones (mktme_algorithms()): the names in /sys/kernel/mm/mktme/algorithms
# ("aes-xts-128 aes-xts-256", "aes-xts-256", ...), or aes-xts-128 alone
# without that file (kernels before issue 18). Source it; it needs no other
# file of the project (tests/guest/selftests-vm.sh takes it into the guest).
#
#   mktme_algorithms        the activated ones (of those the tests know),
#                           space-separated, in the file's order
#   mktme_algorithm_active ALG
#                           status 0 if ALG is activated
#   mktme_algorithm         the algorithm of the tests' keys: aes-xts-128
#                           where it is activated (the payloads of before
#                           issue 18), else aes-xts-256
#   mktme_hex ALG [tweak]   the tests' key (or tweak) for ALG: its number
#                           of hexadecimal digits (32, 64) of HEX64 (or
#                           HEX64_B) of tests/guest/mktme.h
#
# MKTME_ALGORITHMS names another file than the sysfs one (to check the
# scripts on a host).

mktme_algorithms() {
	local file=${MKTME_ALGORITHMS:-/sys/kernel/mm/mktme/algorithms} name names=() known=()
	if [ ! -e "$file" ]; then
		echo aes-xts-128
		return
	fi
	read -r -a names <"$file" || true
	for name in "${names[@]}"; do
		case $name in
		aes-xts-128 | aes-xts-256) known+=("$name") ;;
		esac
	done
	echo "${known[*]}"
}

mktme_algorithm_active() {
	[[ " $(mktme_algorithms) " == *" $1 "* ]]
}

mktme_algorithm() {
	if mktme_algorithm_active aes-xts-128 || ! mktme_algorithm_active aes-xts-256; then
		echo aes-xts-128
	else
		echo aes-xts-256
	fi
}

mktme_hex() {
	local hex=00112233445566778899aabbccddeeffffeeddccbbaa99887766554433221100
	[ "${2-}" != tweak ] || hex=0f1e2d3c4b5a69788796a5b4c3d2e1f0f0e1d2c3b4a5968778695a4b3c2d1e0f
	case $1 in
	aes-xts-128) echo "${hex:0:32}" ;;
	aes-xts-256) echo "$hex" ;;
	*) return 1 ;;
	esac
}
