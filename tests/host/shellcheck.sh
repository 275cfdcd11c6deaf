#!/bin/bash
# Every shell script of the project passes shellcheck.
#
#   tests/host/shellcheck.sh
#                           no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
cd "$here/../.."

# Shell scripts: *.sh, *.bash (sourced), and files whose first line names
# bash or sh.
mapfile -t scripts < <(git ls-files --cached --others --exclude-standard |
	while read -r f; do
		[ -f "$f" ] || continue
		case $f in
		*.sh | *.bash) echo "$f" ;;
		*.patch | *.md | *.c | *.h | *.config) ;;
		*) head -c 64 "$f" | head -n 1 | grep -qE '^#!.*/(ba)?sh( |$)|^#!/usr/bin/env (ba)?sh' && echo "$f" ;;
		esac
	done)
tap_plan "${#scripts[@]}"
for f in "${scripts[@]}"; do
	tap_check "shellcheck $f" shellcheck -x "$f"
done
tap_done
