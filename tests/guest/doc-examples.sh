#!/bin/bash
# The code examples of the MKTME documentation, extracted, built and run.
#
# Usage: doc-examples.sh [--compile-only] [--patches DIR|FILE]
#        doc-examples.sh [--compile-only] KSRC [FILE.rst...]
#
# Where the documentation comes from:
# - by default, from the project's patch series, as in the test VM where no
#   kernel tree exists: each patches/*.patch of the source tree that holds
#   this script (or each *.patch of --patches DIR, or --patches FILE) with a
#   "+++ b/Documentation/x86/mktme/..." header. The part of each patch that
#   touches Documentation/x86/mktme/ is applied, in the series' order, with
#   patch(1) to an empty temporary tree; a patch that does not apply there
#   is a Bail out!.
# - with KSRC, a kernel source tree: KSRC/Documentation/x86/mktme/*.rst, or
#   the FILE.rst arguments.
#
# An example is the literal block that follows a comment line
#   .. mktme-example: NAME LANG
# LANG is "c" (a complete program), "c-fragment" (the body of main(); see
# wrap_fragment in this script) or "sh" (shell commands, run by
# bash -euo pipefail).
# C examples are built with $CC (cc) -Wall -Werror $CFLAGS ... -lkeyutils.
#
# One TAP point per example: it builds (C) or parses (sh) and, unless
# --compile-only, runs as root in a new anonymous session keyring and exits
# with status 0; status 77 is a skip. An example that names an algorithm
# the kernel knows (aes-xts-128, aes-xts-256) that
# /sys/kernel/mm/mktme/algorithms does not list is skipped: the seeds'
# examples are for AES-XTS-128, which a part that activates AES-XTS-256
# alone refuses (EINVAL), as documented. With --compile-only, shell
# examples are checked with bash -n and, when installed, shellcheck. One
# more point per
# file checks that no literal block that looks like code is left unmarked.
# Running needs a kernel with MKTME (our kernel in the test VM); compiling
# needs only cc and libkeyutils-dev. DOC_EXAMPLES_KEEP=1 keeps the extracted
# documentation, sources, programs and logs; DOC_EXAMPLES_FORCE_RUN=1 runs
# the examples without checking for root and MKTME first (to test this
# script).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# It runs in the source tree (debian/tests/mktme-api), scripts/ included.
# shellcheck source=scripts/lib.sh
. "$top/scripts/lib.sh"

bail_out() {
	echo "Bail out! $*"
	exit 1
}

compile_only=0
patches=
while [ "$#" -gt 0 ]; do
	case $1 in
	--compile-only | -n)
		compile_only=1
		shift
		;;
	--patches)
		[ "$#" -ge 2 ] || usage_error "--patches: needs a value"
		patches=$2
		shift 2
		;;
	--patches=*)
		patches=${1#--patches=}
		shift
		;;
	-h | --help)
		print_help
		exit 0
		;;
	--)
		shift
		break
		;;
	-*) usage_error "$1: no such option" ;;
	*) break ;;
	esac
done
if [ "$#" -gt 0 ] && [ -n "$patches" ]; then
	usage_error "--patches and KSRC exclude each other"
fi

CC=${CC:-cc}
read -r -a extra_cflags <<<"${CFLAGS:--O2}"
timeout_s=${EXAMPLE_TIMEOUT:-120}

work=$(mktemp -d)
if [ -n "${DOC_EXAMPLES_KEEP:-}" ]; then
	echo "# extracted examples and logs kept in $work"
else
	trap 'rm -rf "$work"' EXIT
fi

# doc_patches DIR|FILE: the patches with a Documentation/x86/mktme/ file.
doc_patches() {
	local p
	if [ -f "$1" ]; then
		echo "$1"
		return
	fi
	for p in "$1"/*.patch; do
		[ -f "$p" ] || continue
		if grep -q '^+++ b/Documentation/x86/mktme/' "$p"; then
			echo "$p"
		fi
	done
}

# doc_diff PATCH: the part of PATCH (git format) that changes files in
# Documentation/x86/mktme/, as a diff that patch(1) applies to a tree that
# has nothing else. A block runs from its "diff --git" line to the next one
# or to the "-- " line of git's signature.
doc_diff() {
	awk '
	/^diff --git / { keep = ($3 ~ /^a\/Documentation\/x86\/mktme\//) }
	/^-- $/ { keep = 0 }
	keep' "$1"
}

# apply_doc_patches TREE PATCH...: apply the Documentation/x86/mktme/ part
# of each patch, in order, to the empty tree TREE. Prints patch(1)'s output
# and fails when a patch does not apply (a hunk against a file that an
# earlier patch did not create, or that does not match).
apply_doc_patches() {
	local tree=$1 p
	shift
	for p in "$@"; do
		if ! doc_diff "$p" | patch -p1 -d "$tree" --batch --forward --quiet \
			--no-backup-if-mismatch -r - 2>&1; then
			echo "$p does not apply"
			return 1
		fi
	done
}

if [ "$#" -gt 0 ]; then
	ksrc=$1
	shift
	if [ "$#" -gt 0 ]; then
		files=("$@")
	else
		files=("$ksrc"/Documentation/x86/mktme/*.rst)
	fi
else
	patches=${patches:-$top/patches}
	mapfile -t doc_patch_list < <(doc_patches "$patches")
	[ "${#doc_patch_list[@]}" -gt 0 ] ||
		bail_out "no patch in $patches creates Documentation/x86/mktme/ files"
	echo "# documentation from ${doc_patch_list[*]}"
	mkdir "$work/tree"
	if ! apply_doc_patches "$work/tree" "${doc_patch_list[@]}" >"$work/patch.log"; then
		sed 's/^/# /' "$work/patch.log"
		bail_out "cannot take the documentation from ${doc_patch_list[*]}"
	fi
	files=()
	for f in "$work"/tree/Documentation/x86/mktme/*.rst; do
		if [ -e "$f" ]; then files+=("$f"); fi
	done
	[ "${#files[@]}" -gt 0 ] ||
		bail_out "no .rst file created in Documentation/x86/mktme/ by ${doc_patch_list[*]}"
fi
for f in "${files[@]}"; do
	[ -r "$f" ] || bail_out "cannot read $f"
done

# extract FILE OUTDIR: write each example of FILE to OUTDIR/NNN-NAME.LANG
# and print one line per example, "NAME LANG LINE PATH" (PATH empty when the
# marker has no literal block after it), then one line per unmarked code
# block, "UNMARKED - LINE -".
extract() {
	expand -t 8 "$1" | awk -v out="$2" -v seq="${3:-0}" '
	function indent(s) { match(s, /^ */); return RLENGTH }
	function finish_block() {
		if (state == "body") {
			while (nbody > 0 && body[nbody] ~ /^[ \t]*$/)
				nbody--
			if (want != "") {
				path = sprintf("%s/%03d-%s.%s", out, ++seq, want_name, want_lang)
				for (i = 1; i <= nbody; i++)
					print substr(body[i], bindent + 1) > path
				close(path)
				print want_name, want_lang, want_line, path
				want = ""
			} else {
				code = 0
				for (i = 1; i <= nbody; i++)
					if (body[i] ~ /^ *#include/ || body[i] ~ /main\(/ ||
					    body[i] ~ /^ *(keyctl|\$) /)
						code = 1
				if (code)
					print "UNMARKED", "-", block_line, "-"
			}
		}
		state = ""
		nbody = 0
	}
	{
		line = $0
		if (state == "body") {
			if (line ~ /^[ \t]*$/ || indent(line) >= bindent) {
				body[++nbody] = line
				next
			}
			finish_block()
		}
		if (state == "start") {
			if (line ~ /^[ \t]*$/)
				next
			if (indent(line) > pindent) {
				state = "body"
				bindent = indent(line)
				block_line = NR
				body[++nbody] = line
				next
			}
			state = ""
		}
		if (match(line, /^ *\.\. mktme-example: */)) {
			if (want != "")
				print want_name, want_lang, want_line, ""
			split(substr(line, RLENGTH + 1), w, /[ \t]+/)
			want = "yes"
			want_name = w[1]
			want_lang = w[2]
			want_line = NR
			next
		}
		if (line ~ /::[ \t]*$/ && line !~ /^ *\.\. [A-Za-z-]+::/) {
			state = "start"
			pindent = indent(line)
			nbody = 0
		}
	}
	END {
		finish_block()
		if (want != "")
			print want_name, want_lang, want_line, ""
	}'
}

# wrap_fragment SRC DST: a c-fragment as a complete program.
wrap_fragment() {
	{
		cat <<'EOF'
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <keyutils.h>

#ifndef __NR_encrypt_mprotect
#ifdef __x86_64__
#define __NR_encrypt_mprotect 335
#else
#define __NR_encrypt_mprotect 387
#endif
#endif

static inline int encrypt_mprotect(void *addr, size_t len, int prot,
				   key_serial_t serial)
{
	return syscall(__NR_encrypt_mprotect, addr, len, prot, serial);
}

int main(void)
{
EOF
		sed 's/^/\t/' "$1"
		printf '\treturn 0;\n}\n'
	} >"$2"
}

# Collect the examples of every file first: TAP needs the plan up front.
list=$work/list
: >"$list"
n_files=0
for f in "${files[@]}"; do
	n_files=$((n_files + 1))
	mkdir -p "$work/src"
	seq=$(grep -c . "$list" || true)
	extract "$f" "$work/src" "$seq" | while read -r name lang line path; do
		printf '%s\t%s\t%s\t%s\t%s\n' "$f" "$name" "$lang" "$line" "$path"
	done >>"$list"
done
n_examples=$(awk -F'\t' '$2 != "UNMARKED"' "$list" | grep -c . || true)

if [ "$compile_only" -eq 0 ] && [ -z "${DOC_EXAMPLES_FORCE_RUN:-}" ]; then
	[ "$(id -u)" -eq 0 ] ||
		bail_out "run as root: creating mktme keys needs CAP_SYS_RESOURCE"
	nr=$(cat /sys/kernel/mm/mktme/nr_keyids 2>/dev/null || echo 0)
	[ "$nr" -gt 0 ] ||
		bail_out "no MKTME KeyIDs on this kernel ($(uname -r)); use --compile-only"
	command -v keyctl >/dev/null ||
		bail_out "keyctl (keyutils) is not installed"
fi

echo "1..$((n_examples + n_files))"
t=0
failed=0

# settle_keyids: wait (at most 10 s) until keyids_in_use holds still. The
# key garbage collector releases the KeyIDs of the keys an example left in
# its session keyring after the example ends; on a model with 7 KeyIDs the
# next examples would otherwise find the pool empty.
settle_keyids() {
	local f=/sys/kernel/mm/mktme/keyids_in_use prev='' now i
	[ -r "$f" ] || return 0
	for ((i = 0; i < 20; i++)); do
		now=$(cat "$f")
		[ "$now" = "$prev" ] && return 0
		prev=$now
		sleep 0.5
	done
}

# The algorithms keys may name here; unknown without MKTME's sysfs file.
algorithms_file=/sys/kernel/mm/mktme/algorithms
activated=$(cat "$algorithms_file" 2>/dev/null || true)

# unactivated_algorithm FILE: the first algorithm FILE names that is not
# activated here, if any (none when the kernel does not say).
unactivated_algorithm() {
	local alg
	[ -r "$algorithms_file" ] || return 0
	# Only the names the kernel knows: key-errors names aes-xts-512 on
	# purpose, to be refused everywhere.
	{ grep -oE 'aes-xts-(128|256)' "$1" || true; } | sort -u | while read -r alg; do
		case " $activated " in
		*" $alg "*) ;;
		*)
			echo "$alg"
			break
			;;
		esac
	done
}

# report STATUS DESCRIPTION [OUTPUT_FILE]: one TAP point.
report() {
	local status=$1 desc=$2 log=${3:-}
	t=$((t + 1))
	case $status in
	ok) echo "ok $t - $desc" ;;
	skip)
		echo "ok $t - $desc # SKIP $(tail -n 1 "$log" 2>/dev/null | tr -d '#')"
		;;
	*)
		echo "not ok $t - $desc"
		failed=$((failed + 1))
		;;
	esac
	if [ "$status" = fail ] && [ -n "$log" ] && [ -s "$log" ]; then
		tail -n 30 "$log" | sed 's/^/# /'
	fi
}

declare -A seen=()
while IFS=$'\t' read -r file name lang line path; do
	[ "$name" = UNMARKED ] && continue
	desc="$(basename "$file"):$line $name ($lang)"
	log=$work/log.$t
	: >"$log"
	if [ -z "$path" ]; then
		echo "no literal block (::) after the marker" >"$log"
		report fail "$desc" "$log"
		continue
	fi
	if [ -n "${seen[$name]:-}" ]; then
		echo "the name $name is used twice" >"$log"
		report fail "$desc" "$log"
		continue
	fi
	seen[$name]=1
	case $lang in
	c | c-fragment)
		src=$path
		if [ "$lang" = c-fragment ]; then
			src=$work/$name.wrapped.c
			wrap_fragment "$path" "$src"
		else
			cp "$path" "$work/$name.c"
			src=$work/$name.c
		fi
		run=("$work/$name")
		if ! "$CC" -Wall -Werror "${extra_cflags[@]}" -o "$work/$name" \
			"$src" -lkeyutils >"$log" 2>&1; then
			report fail "$desc: build" "$log"
			continue
		fi
		;;
	sh)
		if ! bash -n "$path" >"$log" 2>&1; then
			report fail "$desc: syntax" "$log"
			continue
		fi
		if [ "$compile_only" -eq 1 ] && command -v shellcheck >/dev/null &&
			! shellcheck -s bash "$path" >"$log" 2>&1; then
			report fail "$desc: shellcheck" "$log"
			continue
		fi
		run=(bash -euo pipefail "$path")
		;;
	*)
		echo "unknown language '$lang' (c, c-fragment or sh)" >"$log"
		report fail "$desc" "$log"
		continue
		;;
	esac
	if [ "$compile_only" -eq 1 ]; then
		report ok "$desc: builds"
		continue
	fi
	missing=$(unactivated_algorithm "$path")
	if [ -n "$missing" ]; then
		echo "# $missing is not activated here (/sys/kernel/mm/mktme/algorithms: ${activated:-none})" >"$log"
		report skip "$desc" "$log"
		continue
	fi
	settle_keyids
	rc=0
	# The group's redirection also catches the shell's own report of a
	# program killed by a signal.
	{ (cd "$work" && timeout "$timeout_s" keyctl session - "${run[@]}") \
		</dev/null >"$log" 2>&1; } 2>>"$log" || rc=$?
	case $rc in
	0) report ok "$desc" ;;
	77) report skip "$desc" "$log" ;;
	*)
		if [ "$rc" -eq 124 ]; then
			echo "timed out after $timeout_s s" >>"$log"
		elif [ "$rc" -gt 128 ]; then
			echo "killed by signal $((rc - 128)) (status $rc)" >>"$log"
		else
			echo "exit status $rc" >>"$log"
		fi
		report fail "$desc" "$log"
		;;
	esac
done <"$list"

for f in "${files[@]}"; do
	log=$work/unmarked.log
	awk -F'\t' -v f="$f" '$1 == f && $2 == "UNMARKED" {
		print "unmarked code block at line " $4 }' "$list" >"$log"
	if [ -s "$log" ]; then
		report fail "$(basename "$f"): every code block is marked" "$log"
	else
		report ok "$(basename "$f"): every code block is marked"
	fi
done

[ "$failed" -eq 0 ]
