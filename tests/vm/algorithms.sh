#!/bin/bash
# MKTME on models that activate other algorithms than the default
# AES-XTS-128 alone (the model's mktme-algorithms, vm/run's
# MKTME_ALGORITHMS): "aes-xts-256", as client parts do, and "both". One
# boot each, with tests/guest/algorithms, then the API suites
# tests/guest/keys and tests/guest/memory in the same boot (their CPU_KEY
# and USER_KEY are aes-xts-256 keys on the 256-only model):
#
#   algorithms   keys of each activated algorithm encrypt pages that read
#                back; for a user key the host reads RAM at the page over
#                QMP and compares it with the AES-XTS ciphertext that
#                openssl computes from the key the guest chose and the
#                page's physical address (tests/vm/ram.py xts, its
#                construction checked first against IEEE 1619 vectors);
#                the same with the tweak of the next page must not match
#                (control); a cpu page's pattern is not in RAM, its KeyID
#                alias reads as the pattern; an algorithm not activated is
#                refused with EINVAL
#   boot line    the kernel's "algorithms:" boot line names what the model
#                activated, and /sys/kernel/mm/mktme/algorithms the same
#
# The guest's TAP points are relayed, prefixed by the boot's programs; the
# plan line comes last. About 2 minutes per boot under TCG.
# Needs "make deb" first (vm/run installs the kernel).
#
#   tests/vm/algorithms.sh  no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

xts_pages=() boot_line='' sysfs_line='' boot_label=''

# xts_matches NAME KEY TWEAK PA SEED WANT: RAM at PA is (WANT ciphertext)
# or is not (WANT differs) the ciphertext of fill(SEED) at PA.
xts_matches() {
	local got
	python3 "$here/ram.py" dump "$sock" "$4" "$work/$1.bin" || return 1
	got=$(python3 "$here/ram.py" xts "$work/$1.bin" "$2" "$3" "$4" "$5") || return 1
	echo "$1 at $4: $got (want $6)"
	od -A x -t x1 -N 32 "$work/$1.bin"
	case $6 in
	ciphertext) [ "$got" = ciphertext ] ;;
	*) [ "$got" != ciphertext ] ;;
	esac
}

# xts_check_page NAME ALG KEY TWEAK PA SEED: two TAP points.
xts_check_page() {
	local next
	next=$(printf '0x%x' $(($5 + 4096)))
	tap_check "$boot_label: host: $1: RAM at $5 is openssl's $2 ciphertext of the pattern (key and tweak key of the guest, address tweak)" \
		xts_matches "$1" "$3" "$4" "$5" "$6" ciphertext
	tap_check "$boot_label: host: $1: ... and not that with the next page's address as tweak (control)" \
		xts_matches "$1-control" "$3" "$4" "$next" "$6" differs
}

on_guest() {
	local re='^xts ([a-z0-9-]+) alg=(aes-xts-[0-9]+) key=([0-9a-f]+) tweak=([0-9a-f]+) pa=(0x[0-9a-f]+) seed=([0-9]+)$'
	case $1 in
	line)
		hosted_ram_line "$2"
		if [[ $2 =~ $re ]]; then
			xts_pages+=("${BASH_REMATCH[*]:1}")
		elif [[ $2 == "dmesg: "* ]]; then
			boot_line=${2#dmesg: }
		elif [[ $2 == "sysfs: "* ]]; then
			sysfs_line=${2#sysfs: }
		fi
		;;
	pause)
		local p name alg key tweak pa seed
		tap_check "$boot_label: host: the guest reported pages of user keys" \
			test "${#xts_pages[@]}" -gt 0
		for p in "${xts_pages[@]}"; do
			read -r name alg key tweak pa seed <<<"$p"
			xts_check_page "$name" "$alg" "$key" "$tweak" "$pa" "$seed"
		done
		hosted_ram_check "$boot_label" "$2"
		;;
	esac
}

# algorithms_named WANT: the boot line lists WANT, space-separated, and
# sysfs the same.
algorithms_named() {
	echo "boot line: $boot_line"
	echo "sysfs: $sysfs_line"
	[[ $boot_line == *"algorithms: $1" ]] && [ "$sysfs_line" = "$1" ]
}

tap_check "tests/vm/ram.py: the openssl construction gives IEEE 1619's AES-XTS-128 and -256 known answers" \
	python3 "$here/ram.py" xts-kat
for prog in algorithms keys memory; do
	tap_check "tests/guest/$prog.c builds" hosted_build "$prog"
	[ -x "$work/$prog" ] || {
		tap_plan "$TAP_N"
		exit 1
	}
done

start=$SECONDS
for config in aes-xts-256 both; do
	case $config in
	both) want="aes-xts-128 aes-xts-256" ;;
	*) want=$config ;;
	esac
	boot_label="algorithms ($config)"
	xts_pages=() boot_line='' sysfs_line=''
	# shellcheck disable=SC2016 # $rc is the guest shell's
	MKTME_ALGORITHMS=$config hosted_run \
		"$config: algorithms+$config: keys+$config: memory" on_guest ram \
		--qmp "$sock" --copy "$work/algorithms" --copy "$work/keys" --copy "$work/memory" -- \
		'rc=0; ./algorithms || rc=1; ./keys || rc=1; ./memory || rc=1
		dmesg | grep -a "x86/mktme: .*algorithms:" | sed "s/^.*x86/dmesg: x86/"
		echo "sysfs: $(cat /sys/kernel/mm/mktme/algorithms)"; exit $rc'
	tap_check "$boot_label: the boot line and sysfs name the algorithms the model activated: $want" \
		algorithms_named "$want"
done
echo "# two boots in $((SECONDS - start)) s"
tap_plan "$TAP_N"
tap_done
