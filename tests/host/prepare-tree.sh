#!/bin/bash
# scripts/prepare-tree on a small stand-in for linux-source-6.1: patches go
# on in order, a rejected or fuzzy patch stops it with the patch's name, and
# a changed patch brings back only what it changes (file times kept).
#
#   tests/host/prepare-tree.sh
#                           no arguments; TAP on stdout (make check runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
top=$work/top
mkdir -p "$top/scripts" "$top/patches" "$work/src/linux-source-6.1"
cp "$here/../../scripts/lib.sh" "$here/../../scripts/prepare-tree" "$top/scripts/"
export MKTME_BUILD=$work/build MKTME_KERNEL_TARBALL=$work/linux-source-6.1.tar.xz
tree=$MKTME_BUILD/src/linux-source-6.1

seq 1 30 | sed 's/^/alpha line /' >"$work/src/linux-source-6.1/alpha.c"
seq 1 30 | sed 's/^/beta line /' >"$work/src/linux-source-6.1/beta.c"
tar -C "$work/src" -cJf "$MKTME_KERNEL_TARBALL" linux-source-6.1

# make_patch NAME FILE OLD NEW: a patch replacing line OLD by NEW in FILE.
make_patch() {
	local name=$1 file=$2 old=$3 new=$4
	mkdir -p "$work/a" "$work/b"
	cp "$work/src/linux-source-6.1/$file" "$work/a/$file"
	sed "s/^$old\$/$new/" "$work/a/$file" >"$work/b/$file"
	(cd "$work" && { diff -u "a/$file" "b/$file" || true; }) >"$top/patches/$name"
	rm -rf "$work/a" "$work/b"
}
mtime() { stat -c %Y "$tree/$1"; }

make_patch 0001-alpha.patch alpha.c "alpha line 5" "alpha line five"
make_patch 0002-beta.patch beta.c "beta line 7" "beta line seven"
printf '0001-alpha.patch\n0002-beta.patch\n' >"$top/patches/series"

tap_plan 9
tap_check "applies the series" "$top/scripts/prepare-tree"
tap_check "patched content is there" grep -qx "beta line seven" "$tree/beta.c"

# Age the files so that a rewrite is visible in the times.
touch -d '2001-01-01' "$tree/alpha.c" "$tree/beta.c"
before_alpha=$(mtime alpha.c) before_beta=$(mtime beta.c)
tap_check "an unchanged series is a no-op" \
	bash -c "'$top/scripts/prepare-tree' | grep -q 'up to date'"

make_patch 0001-alpha.patch alpha.c "alpha line 6" "alpha line six"
tap_check "a changed first patch applies again" "$top/scripts/prepare-tree"
changed_ok() {
	grep -qx "alpha line six" "$tree/alpha.c" && grep -qx "alpha line 5" "$tree/alpha.c" &&
		[ "$(mtime alpha.c)" != "$before_alpha" ]
}
tap_check "the changed patch's file has the new content and a new time" changed_ok
tap_check "a file whose content did not change keeps its time" \
	test "$(mtime beta.c)" = "$before_beta"
make_patch 0002-beta.patch beta.c "beta line 8" "beta line eight"
tap_check "a changed second patch applies again, then all is up to date" \
	bash -c "'$top/scripts/prepare-tree' >/dev/null &&
		'$top/scripts/prepare-tree' | grep -q 'up to date'"

# A patch whose removed line is not in the tree.
make_patch 0003-broken.patch alpha.c "alpha line 20" "alpha line twenty"
sed -i 's/^-alpha line 20$/-alpha line 2000/' "$top/patches/0003-broken.patch"
echo 0003-broken.patch >>"$top/patches/series"
rejected() {
	local out
	if out=$("$top/scripts/prepare-tree" 2>&1); then
		echo "prepare-tree succeeded with a broken patch"
		return 1
	fi
	grep -q "patches/0003-broken.patch does not apply" <<<"$out"
}
tap_check "a patch that does not apply stops it, naming the patch" rejected

# Context that only matches with fuzz: line 12's neighbours changed.
sed -i '$d' "$top/patches/series"
make_patch 0003-fuzzy.patch beta.c "beta line 12" "beta line twelve"
sed -i -e 's/^ beta line 11$/ beta line eleven/' -e 's/^ beta line 13$/ beta line thirteen/' \
	-e 's/^ beta line 10$/ beta line ten/' "$top/patches/0003-fuzzy.patch"
echo 0003-fuzzy.patch >>"$top/patches/series"
fuzzy() {
	! "$top/scripts/prepare-tree" >/dev/null 2>&1 &&
		! grep -q "beta line twelve" "$tree/beta.c"
}
tap_check "a patch that would need fuzz stops it" fuzzy
tap_done
