#!/bin/bash
# "make check-keyutils": keyutils' upstream test suite in the VM
# (tests/guest/keyutils-suite.sh), from the source of the host's keyutils
# version (Debian bookworm's, as in the image; by apt-get source, kept in
# the cache; a deb-src entry is added when apt has none). Its TAP points are relayed
# ("keyutils: ..."); vm/run must find no kernel report. Needs "make deb"
# first. Not part of "make check": its 84 tests take tens of minutes under
# TCG.
#
#   tests/suites/keyutils.sh
#                           no arguments; TAP on stdout (make
#                           check-keyutils runs it); vm/run's
#                           environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$top/scripts/lib.sh"
# shellcheck source=tests/vm/hosted.bash
. "$top/tests/vm/hosted.bash"

version=$(dpkg-query -W -f='${source:Version}' keyutils)
cache=$MKTME_CACHE/keyutils/$version

# fetch_suite: keyutils' tests/ folder into $cache/tests, once.
fetch_suite() {
	local d
	[ -f "$cache/.unpacked" ] && return 0
	ensure_deb_src >"$work/apt.log" 2>&1 || { tail -n 20 "$work/apt.log"; return 1; }
	rm -rf "$cache"
	mkdir -p "$cache"
	# The unprivileged _apt user downloads; let it write here.
	chmod 0777 "$cache"
	(cd "$cache" && apt-get source -q --only-source "keyutils=$version") \
		>"$work/apt.log" 2>&1 || { tail -n 20 "$work/apt.log"; return 1; }
	d=$(find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'keyutils-*' | head -n 1)
	if [ -z "$d" ] || [ ! -f "$d/tests/runtest.sh" ]; then
		failed "no keyutils-*/tests in $cache"
	fi
	mv "$d/tests" "$cache/tests"
	touch "$cache/.unpacked"
}

tap_check "keyutils $version: its upstream tests (apt-get source)" fetch_suite
if [ ! -f "$cache/.unpacked" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
mkdir "$work/keyutils-tests"
cp -a "$cache/tests/." "$work/keyutils-tests/"
cp "$top/tests/guest/keyutils-suite.sh" "$work/"
hosted_run keyutils hosted_no_handler "" \
	--copy "$work/keyutils-tests" --copy "$work/keyutils-suite.sh" -- \
	./keyutils-suite.sh /root/keyutils-tests
tap_plan "$TAP_N"
tap_done
