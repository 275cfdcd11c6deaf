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

# The comment block at the top of the running script (after its "#!" line,
# without shellcheck directives): its usage.
print_help() {
	awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"
}

# A script that sources this file first thing answers -h or --help as its
# first argument with its usage, and does nothing else.
case ${1-} in
-h | --help)
	print_help
	exit 0
	;;
esac

# usage_error [MESSAGE]: the command line is wrong or incomplete: MESSAGE
# (if any) and the whole usage on stderr, exit status 2. Before anything
# is done, so that the user only has to read and try again.
usage_error() {
	[ $# -eq 0 ] || printf 'error: %s\n' "$*" >&2
	print_help >&2
	exit 2
}

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

# True when apt has a deb-src entry for Debian.
have_deb_src() {
	# shellcheck disable=SC2016 # apt's own $(FIELD) syntax
	apt-get indextargets --format '$(CREATED_BY)' 2>/dev/null | grep -qx 'Sources'
}

# Write a deb822 file with a deb-src stanza for each enabled Debian "deb"
# stanza (URIs, Suites, Components, Signed-By copied as they are), so that
# no mirror name is ever written into this repository.
write_deb_src() {
	local out=/etc/apt/sources.list.d/linux-mktme-src.sources codename f
	# shellcheck disable=SC1091
	codename=$(. /etc/os-release && printf '%s' "$VERSION_CODENAME")
	: >"$out.tmp"
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		[ "$f" = "$out" ] && continue
		awk -v codename="$codename" '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && enabled != "no" &&
				    suites ~ ("(^| )" codename "([ -]|$)")) {
					print "Types: deb-src"
					print "URIs: " uris
					print "Suites: " suites
					print "Components: " comps
					if (signed != "") print "Signed-By: " signed
					print ""
				}
				types = uris = suites = comps = signed = enabled = ""
			}
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			{
				key = tolower($1); sub(/:$/, "", key)
				val = $0; sub(/^[^:]*:[ \t]*/, "", val)
				if (key == "types") types = val
				else if (key == "uris") uris = val
				else if (key == "suites") suites = val
				else if (key == "components") comps = val
				else if (key == "signed-by") signed = val
				else if (key == "enabled") enabled = tolower(val)
			}
			END { flush() }' "$f" >>"$out.tmp"
	done
	# One-line style entries in sources.list.
	if [ -f /etc/apt/sources.list ]; then
		awk -v codename="$codename" '
			$1 == "deb" && $0 ~ ("[ \t]" codename "([ -]|[ \t]|$)") {
				opts = ""
				if ($2 ~ /^\[/) {
					opts = $2; i = 3
					while (opts !~ /\]$/) opts = opts " " $(i++)
				} else i = 2
				line = "deb-src"
				if (opts != "") line = line " " opts
				for (; i <= NF; i++) line = line " " $i
				print line
			}' /etc/apt/sources.list >"$out.list.tmp"
		if [ -s "$out.list.tmp" ]; then
			mv "$out.list.tmp" /etc/apt/sources.list.d/linux-mktme-src.list
		else
			rm -f "$out.list.tmp"
		fi
	fi
	if [ -s "$out.tmp" ]; then
		mv "$out.tmp" "$out"
	else
		rm -f "$out.tmp"
	fi
	apt-get -o DPkg::Lock::Timeout=600 update
	have_deb_src || die "no deb-src entry could be made from the deb entries"
}

# Make sure apt can fetch Debian's sources (apt-get source), as root.
ensure_deb_src() {
	have_deb_src || write_deb_src
}
