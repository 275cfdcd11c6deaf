#!/bin/bash
# Every host-side script of the repository (an executable bash script that
# git tracks, except the guest's: tests/guest/, debian/tests/) answers
# --help with its usage and exit status 0, and changes nothing: its build
# and cache directories (MKTME_BUILD, MKTME_CACHE, pointed at empty
# scratch directories) stay empty and git sees no change in the work tree.
# A control script that writes on --help must be caught.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
cd "$MKTME_TOP"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# help_changes_nothing SCRIPT: SCRIPT --help succeeds within 30 s, prints
# something, and leaves the scratch directories and the work tree alone.
help_changes_nothing() {
	local script=$1 out rc=0 before after
	rm -rf "$scratch/build" "$scratch/cache"
	mkdir "$scratch/build" "$scratch/cache"
	before=$(git status --porcelain)
	out=$(MKTME_BUILD=$scratch/build MKTME_CACHE=$scratch/cache \
		timeout 30 "$script" --help 2>&1 </dev/null) || rc=$?
	after=$(git status --porcelain)
	if [ "$rc" -ne 0 ]; then
		printf '%s --help: exit status %d\n%s\n' "$script" "$rc" "$out"
		return 1
	fi
	if [ -z "$out" ]; then
		echo "$script --help printed nothing"
		return 1
	fi
	if [ -n "$(find "$scratch/build" "$scratch/cache" -mindepth 1 -print -quit)" ]; then
		echo "$script --help wrote into MKTME_BUILD or MKTME_CACHE:"
		find "$scratch/build" "$scratch/cache" -mindepth 1 | head
		return 1
	fi
	if [ "$before" != "$after" ]; then
		echo "$script --help changed the work tree:"
		diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") || true
		return 1
	fi
}

help_is_caught() {
	! help_changes_nothing "$1"
}

# The control: a script that builds (writes into MKTME_BUILD) whatever its
# arguments are, as scripts/check-series once did on --help.
cat >"$scratch/writes-on-help" <<'EOF'
#!/bin/bash
mkdir -p "$MKTME_BUILD/obj"
echo building
EOF
chmod +x "$scratch/writes-on-help"

mapfile -t scripts < <(git ls-files -s | awk '$1 == "100755" { print $4 }' |
	grep -vE '^(tests/guest|debian/tests)/' |
	while IFS= read -r f; do
		head -n 1 "$f" | grep -q '^#!.*bash' && printf '%s\n' "$f"
	done)

tap_plan $((${#scripts[@]} + 1))
tap_check "control: a script that writes on --help is caught" \
	help_is_caught "$scratch/writes-on-help"
for s in "${scripts[@]}"; do
	tap_check "$s --help prints its usage and changes nothing" \
		help_changes_nothing "./$s"
done
tap_done
