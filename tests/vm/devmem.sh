#!/bin/bash
# Device memory gets no KeyID copies of the direct map, in one VM boot
# with 256 MiB of legacy persistent memory at 8 GiB (memmap=256M!8G: an
# e820 region the pmem driver maps with memremap_pages(), so through
# arch_add_memory() as hot-added RAM): tests/guest/devmem.c unbinds and
# binds its namespace and measures the direct map each time.
# About 2 minutes. Needs "make deb" first (vm/run installs the kernel).
#
#   tests/vm/devmem.sh      no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

tap_check "tests/guest/devmem.c builds" hosted_build devmem
if [ ! -x "$work/devmem" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
hosted_run devmem hosted_no_handler "" --append 'memmap=256M!8G' \
	--copy "$work/devmem" -- ./devmem
tap_plan "$TAP_N"
tap_done
