#!/bin/bash
# The kernel's memory-management selftests (tools/testing/selftests/vm of
# the patched tree in build/src), built here and run in one boot of
# "vm/run --sockets 2 --mem 4096" (2 NUMA nodes, for KSM's NUMA tests;
# mremap_test maps 2 GiB): each plain, then with every private anonymous
# mapping it makes encrypted (tests/guest/selftests-vm.sh,
# tests/guest/encrypt_anon.c). Its TAP points are relayed
# ("selftests-vm: ..."); vm/run must find no kernel report.
# Needs "make deb" first (the tree and the packages).
#
#   tests/vm/selftests.sh   no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$top/scripts/lib.sh"
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

src=$MKTME_SRC/tools/testing/selftests/vm
st_dir=$work/selftests-vm

# build_selftests: the selftests into $st_dir, their log's tail on failure.
build_selftests() {
	[ -d "$src" ] || failed "no $src: run make deb first"
	mkdir -p "$st_dir"
	make -s -C "$src" OUTPUT="$st_dir" -j"$(nproc)" >"$work/build.log" 2>&1 ||
		{ tail -n 30 "$work/build.log"; return 1; }
	# Dynamically linked: LD_PRELOAD needs the dynamic linker.
	readelf -l "$st_dir/userfaultfd" | grep -q 'INTERP'
}

build_shim() {
	cc -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -shared -fPIC \
		-o "$st_dir/encrypt_anon.so" "$top/tests/guest/encrypt_anon.c" &&
		cp "$top/tests/guest/selftests-vm.sh" \
			"$top/tests/guest/mktme-algorithms.bash" "$st_dir/"
}

tap_check "the vm selftests build from the patched tree" build_selftests
tap_check "tests/guest/encrypt_anon.c builds" build_shim
if [ ! -x "$st_dir/userfaultfd" ] || [ ! -f "$st_dir/encrypt_anon.so" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
hosted_run selftests-vm hosted_no_handler "" --sockets 2 --mem 4096 --copy "$st_dir" -- \
	./selftests-vm/selftests-vm.sh /root/selftests-vm
tap_plan "$TAP_N"
tap_done
