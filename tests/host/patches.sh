#!/bin/bash
# Every patch of the kernel series is a git format-patch mail with a
# message that says why, and is clean under checkpatch.pl --strict.
#
#   tests/host/patches.sh   no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$top/scripts/lib.sh"

"$top/scripts/prepare-tree" >/dev/null
mapfile -t series < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$top/patches/series")

# A mail header, a Signed-off-by and at least three lines of explanation
# between the subject and the diffstat.
well_formed() {
	local p=$1
	grep -q '^From: ' "$p" && grep -q '^Subject: \[PATCH' "$p" &&
		grep -q '^Signed-off-by: ' "$p" &&
		[ "$(sed -n '/^Subject:/,/^---$/p' "$p" | sed '1d;$d' |
			grep -cvE '^$|^Signed-off-by:')" -ge 3 ]
}
checkpatch() {
	local report
	# spdxcheck.py wants Debian's python3 (python3-ply, python3-git).
	report=$(PATH=/usr/bin:$PATH perl "$MKTME_SRC/scripts/checkpatch.pl" \
		--strict --no-tree --quiet "$1" 2>&1) || true
	printf '%s\n' "$report"
	! grep -qE '^(ERROR|WARNING|CHECK):|Traceback' <<<"$report"
}

# numbered K N P: patch P's subject is "[PATCH K/N]" (K with two digits).
numbered() {
	local subject want
	subject=$(grep -m1 '^Subject: ' "$top/patches/$3")
	printf -v want '[PATCH %02d/%02d]' "$1" "$2"
	[[ $subject == "Subject: $want "* ]] || failed "$subject: want $want"
}

# The patches that add encrypt_mprotect() to a system call table: only
# the last may, so that no earlier state of the series lets user space
# encrypt memory before every path that reaches it handles KeyIDs.
syscall_wired_last() {
	local p wired=()
	for p in "${series[@]}"; do
		if awk '/^\+\+\+ b\/arch\/x86\/entry\/syscalls\/.*\.tbl$/ { tbl = 1; next }
			/^\+\+\+ / { tbl = 0 }
			tbl && /^\+.*encrypt_mprotect/ { found = 1 }
			END { exit !found }' "$top/patches/$p"; then
			wired+=("$p")
		fi
	done
	[ "${wired[*]}" = "${series[-1]}" ] ||
		failed "wired up by: ${wired[*]:-no patch}; want the last, ${series[-1]}"
}

# The symbols the series exports that are not functions: an exported
# symbol whose definition does not end with "}" just above it. Modules
# get the MKTME geometry through accessor functions only.
exported_variables() {
	local p
	for p in "${series[@]}"; do
		awk -v patch="$p" '/^\+EXPORT_SYMBOL/ && prev !~ /^\+}$/ { print patch ": " $0 }
			{ prev = $0 }' "$top/patches/$p"
	done
}
no_exported_variables() {
	local found
	found=$(exported_variables)
	[ -z "$found" ] || failed "$found"
}

# Generic code (outside arch/x86, the mktme key type and the docs) that
# names the x86 option: it must use ARCH_HAS_MEM_KEYIDS instead.
x86_option_in_generic() {
	local p
	for p in "${series[@]}"; do
		awk -v patch="$p" '/^\+\+\+ b\// { file = substr($2, 3) }
			/^\+[^+].*X86_INTEL_MKTME/ && file !~ /^(arch\/x86\/|Documentation\/|security\/keys\/)/ {
				print patch ": " file ": " $0 }' "$top/patches/$p"
	done
}
x86_option_in_generic_code() {
	local found
	found=$(x86_option_in_generic)
	[ -z "$found" ] || failed "$found"
}

tap_plan $((3 * ${#series[@]} + 3))
k=0
for p in "${series[@]}"; do
	k=$((k + 1))
	tap_check "$p is a mail with a reason" well_formed "$top/patches/$p"
	tap_check "$p: checkpatch --strict" checkpatch "$top/patches/$p"
	tap_check "$p is numbered $k of ${#series[@]}" numbered "$k" "${#series[@]}" "$p"
done
tap_check "only the last patch wires up encrypt_mprotect()" syscall_wired_last
tap_check "the series exports no variable" no_exported_variables
tap_check "generic code names ARCH_HAS_MEM_KEYIDS, not X86_INTEL_MKTME" \
	x86_option_in_generic_code
tap_done
