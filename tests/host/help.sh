#!/bin/bash
# Every script of the repository (a file git tracks, or one it would add,
# that is executable and whose "#!" line names bash or python3: the host's,
# the guest's, the Python helpers) answers -h and --help with its usage on
# stdout and exit status 0, and does nothing else: nothing on stderr, the
# word "usage" or its own name in what it prints, no file created, changed
# or removed, no command run that installs, builds or boots.
#
# Each runs in a sandbox where a side effect shows: a copy of the tree
# (scripts find the repository from their own path, so they act on the
# copy), HOME, TMPDIR, MKTME_BUILD and MKTME_CACHE in empty directories,
# and first on PATH stubs of apt-get, dpkg, make, sudo, qemu-system-x86_64,
# flock and the like, which log their call and fail. After each run the
# sandbox must be as it was, file by file, and the log empty.
#
# vm/run with no arguments, an option left without its value, an unknown
# option or no COMMAND prints a line naming what is wrong (none for no
# arguments) and its whole usage on stderr, exits 2, and does nothing else.
#
# Controls: scripts that each do one wrong thing on --help (write into
# MKTME_BUILD, HOME or the tree, call apt-get, print on stderr, print no
# usage, fail) are caught, each for its own reason; one that does it right
# passes.
#
#   tests/host/help.sh      no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
cd "$MKTME_TOP"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
sandbox=$scratch/sandbox
copy=$sandbox/top
calls=$scratch/stub-calls
mkdir "$scratch/stubs"

# The scripts: what git tracks and what it would add (a new script is
# checked before its first commit), as shellcheck.sh picks its files.
# debian/rules is left out: a makefile, whose --help is make's.
tracked() {
	git ls-files --cached --others --exclude-standard
}
mapfile -t scripts < <(tracked | while IFS= read -r f; do
	if [ -f "$f" ] && [ -x "$f" ] &&
		head -n 1 "$f" | grep -qE '^#!.*(bash|python3)( |$)'; then
		printf '%s\n' "$f"
	fi
done)

# new_sandbox: the sandbox afresh: a copy of the tree as the work tree has
# it (uncommitted changes too), and empty HOME, TMPDIR, MKTME_BUILD and
# MKTME_CACHE.
new_sandbox() {
	rm -rf "$sandbox"
	mkdir -p "$copy" "$sandbox/home" "$sandbox/tmp" "$sandbox/build" \
		"$sandbox/cache"
	tracked | while IFS= read -r f; do
		[ -e "$f" ] && printf '%s\0' "$f"
	done | tar -c --null -T - | tar -x -C "$copy"
}

# Commands with side effects outside the sandbox, or heavy ones: each stub
# logs its call and fails, so a script that gets that far stops there.
for cmd in apt-get apt apt-cache dpkg dpkg-query dpkg-deb dpkg-buildpackage \
	make sudo su qemu-system-x86_64 qemu-img mmdebstrap autopkgtest ssh \
	flock git quilt curl wget; do
	printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 1\n' "$cmd" "$calls" \
		>"$scratch/stubs/$cmd"
	chmod +x "$scratch/stubs/$cmd"
done

# in_sandbox COMMAND...: run COMMAND from the copy's top with the sandbox's
# environment; its stdout in $scratch/stdout, its stderr in
# $scratch/stderr, its exit status in $status.
in_sandbox() {
	status=0
	(cd "$copy" && env -u XDG_CACHE_HOME -u XDG_CONFIG_HOME -u XDG_DATA_HOME \
		HOME="$sandbox/home" TMPDIR="$sandbox/tmp" \
		MKTME_BUILD="$sandbox/build" MKTME_CACHE="$sandbox/cache" \
		PATH="$scratch/stubs:$PATH" \
		timeout 30 "$@" >"$scratch/stdout" 2>"$scratch/stderr" </dev/null) ||
		status=$?
}

# Every file and directory of the sandbox: type, size, time, mode.
sandbox_state() {
	find "$sandbox" -printf '%p %y %s %T@ %m\n' | sort
}

# ran_alone COMMAND...: in the sandbox, COMMAND changes no file and calls
# no stub; says what it did otherwise.
ran_alone() {
	local before after
	: >"$calls"
	before=$(sandbox_state)
	in_sandbox "$@"
	after=$(sandbox_state)
	if [ "$before" != "$after" ]; then
		echo "$*: changed the sandbox:"
		diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") |
			grep '^[<>]' | sed "s|$sandbox/||" | head
		return 1
	fi
	if [ -s "$calls" ]; then
		echo "$*: called a stubbed command:"
		head "$calls"
		return 1
	fi
}

# help_is_clean SCRIPT: SCRIPT -h and SCRIPT --help (SCRIPT relative to the
# copy's top) each print its usage on stdout and nothing on stderr, exit
# 0 and change nothing.
help_is_clean() {
	local script=$1 name opt
	name=$(basename "$script")
	for opt in -h --help; do
		ran_alone "./$script" "$opt" || return 1
		if [ "$status" -ne 0 ]; then
			echo "$script $opt: exit status $status"
			cat "$scratch/stderr"
			return 1
		fi
		if [ -s "$scratch/stderr" ]; then
			echo "$script $opt: printed on stderr:"
			head "$scratch/stderr"
			return 1
		fi
		if ! grep -qiw usage "$scratch/stdout" &&
			! grep -qF "$name" "$scratch/stdout"; then
			echo "$script $opt: no usage on stdout (neither \"usage\" nor \"$name\"):"
			head "$scratch/stdout"
			return 1
		fi
	done
}

# caught_for WHY SCRIPT: help_is_clean fails for SCRIPT, saying WHY.
caught_for() {
	local why=$1 out
	shift
	if out=$(help_is_clean "$@"); then
		echo "$1 passed"
		return 1
	fi
	echo "$out"
	grep -q "$why" <<<"$out"
}

# control NAME BODY: a script in the copy's controls/ that runs BODY, then
# answers --help (or -h) with its usage, unless BODY exits first.
control() {
	mkdir -p "$copy/controls"
	printf '#!/bin/bash\n%s\necho "usage: controls/%s"\n' "$2" "$1" \
		>"$copy/controls/$1"
	chmod +x "$copy/controls/$1"
}
# shellcheck disable=SC2016 # the bodies are the controls' code
make_controls() {
	control good ':'
	control writes-build 'mkdir -p "$MKTME_BUILD/obj"'
	control writes-home 'mkdir -p "$HOME/.cache/linux-mktme"'
	control writes-tree 'touch "$(dirname "$0")/../build-stamp"'
	control installs 'apt-get install -y qemu-system-x86 || true'
	control warns 'echo "warning: no kernel tree" >&2'
	control no-usage 'echo "Boot the VM."; exit 0'
	control fails 'echo "usage: controls/fails" >&2; exit 2'
}
new_sandbox
make_controls

# misuse_of_vm_run WHAT ARGS...: vm/run ARGS exits 2 with nothing on
# stdout and, on stderr, a line "error: ..." that names WHAT (no line if
# WHAT is empty) and then its whole usage ($vm_run_usage); it changes
# nothing.
misuse_of_vm_run() {
	local what=$1
	shift
	ran_alone vm/run "$@" || return 1
	echo "vm/run $*: status $status, stderr:"
	head -n 3 "$scratch/stderr"
	[ "$status" -eq 2 ] && [ ! -s "$scratch/stdout" ] || return 1
	if [ -z "$what" ]; then
		[ "$(cat "$scratch/stderr")" = "$vm_run_usage" ]
	else
		head -n 1 "$scratch/stderr" | grep -q "^error: .*$what" &&
			[ "$(tail -n +2 "$scratch/stderr")" = "$vm_run_usage" ]
	fi
}

tap_plan $((8 + ${#scripts[@]} + 6))
tap_check "control: a script that answers --help right passes" \
	help_is_clean controls/good
tap_check "control: a script that writes into MKTME_BUILD first is caught" \
	caught_for "changed the sandbox" controls/writes-build
tap_check "control: a script that writes into HOME first is caught" \
	caught_for "changed the sandbox" controls/writes-home
tap_check "control: a script that writes into its tree first is caught" \
	caught_for "changed the sandbox" controls/writes-tree
tap_check "control: a script that runs apt-get first is caught" \
	caught_for "called a stubbed command" controls/installs
tap_check "control: a script that prints on stderr is caught" \
	caught_for "printed on stderr" controls/warns
tap_check "control: a script that prints no usage is caught" \
	caught_for "no usage on stdout" controls/no-usage
tap_check "control: a script that fails is caught" \
	caught_for "exit status 2" controls/fails

# The scripts' own sandbox, without the controls and what they left.
new_sandbox
for s in "${scripts[@]}"; do
	tap_check "$s -h and --help print its usage and change nothing" \
		help_is_clean "$s"
done
in_sandbox vm/run --help
vm_run_usage=$(cat "$scratch/stdout")
tap_check "vm/run with no arguments: status 2, its usage on stderr" \
	misuse_of_vm_run ''
tap_check "vm/run --qmp at the end of the line: names --qmp, status 2" \
	misuse_of_vm_run --qmp --qmp
tap_check "vm/run --copy followed by an option: names --copy, status 2" \
	misuse_of_vm_run --copy --copy --iommu -- true
tap_check "vm/run with an unknown option: names it, status 2" \
	misuse_of_vm_run --bogus --bogus -- true
tap_check "vm/run with a command but no --: names it, status 2" \
	misuse_of_vm_run uname uname -r
tap_check "vm/run with options but no COMMAND: says so, status 2" \
	misuse_of_vm_run COMMAND --mem 512
tap_done
