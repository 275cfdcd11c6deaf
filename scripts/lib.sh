# shellcheck shell=bash
# Common paths and helpers for the build scripts. Source it; do not run it.

# The repository root, wherever the clone lives.
MKTME_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Kernel source from Debian's linux-source-6.1 package.
MKTME_KERNEL_TARBALL=${MKTME_KERNEL_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
MKTME_BUILD=${MKTME_BUILD:-$MKTME_TOP/build}
# The patched kernel tree. Each profile builds in obj-PROFILE inside it, so
# kbuild uses relative source paths and ccache hits across clones.
MKTME_SRC=$MKTME_BUILD/src/linux-source-6.1
MKTME_LOGS=$MKTME_BUILD/logs
# Caches shared by every clone on this machine (ccache, QEMU, the base image).
MKTME_CACHE=${MKTME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/linux-mktme}

# Print one progress line, run a command with its output in a log, and on
# failure print the log's tail and fail.
#   run_step LABEL LOGNAME COMMAND...
run_step() {
	local label=$1 log=$MKTME_LOGS/$2.log
	shift 2
	mkdir -p "$MKTME_LOGS"
	printf '==> %s (log: %s)\n' "$label" "${log#"$MKTME_TOP"/}"
	local start=$SECONDS
	# Not "if ! cmd": that would switch off errexit inside shell functions.
	local rc=0
	set +e
	(
		set -e
		"$@"
	) >"$log" 2>&1
	rc=$?
	set -e
	if [ "$rc" -ne 0 ]; then
		printf '!!! %s failed; last lines of %s:\n' "$label" "$log" >&2
		tail -n 40 "$log" >&2
		return 1
	fi
	printf '    %s done in %ds\n' "$label" $((SECONDS - start))
}

die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# The object tree of a build profile.
obj_dir() {
	printf '%s/obj-%s\n' "$MKTME_SRC" "$1"
}
