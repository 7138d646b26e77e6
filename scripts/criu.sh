#!/bin/sh
# Build CRIU 4.2.1 from Debian's source package and install it where coved
# looks for it (/usr/local/lib/cove/criu). Called by scripts/deps.sh, after
# the build packages are installed.
#
# Why: Debian 12's criu 3.17 fails on this kernel (the vDSO layout of Linux
# 6.13; any TCP/UDP socket since 6.16); 4.2 fixed both. The Debian archive
# serves 4.2.1's .dsc and orig tarball (its debian.tar is not needed: only
# criu/criu is built, from the upstream source).
#
# Patched (scripts/criu-patches/*.patch, in name order) where cove needs
# what 4.2.1 does not do: check-user-ns.patch lets criu dump a tree that
# criu itself restored (its init's ns links are opened while criu is still
# privileged: such a task's mm belongs to criu's user namespace, not its
# own). PATCHES names the build: a new patch set builds again.
#
# The mirror is the one apt is configured with. The .dsc is pinned by its
# sha256 here, and the tarball must match both the pin and the .dsc's own
# Checksums-Sha256 line. Built once into a cache outside the source tree;
# a second run finds the binary and only checks the install.
set -eu
VER=4.2.1
DSC=criu_$VER-1.dsc
DSC_SHA256=9286c86e5adfd70b97a68e117c2905d91bf9e31132296e7ebf57066189a2f0b0
ORIG=criu_$VER.orig.tar.xz
ORIG_SHA256=29ec0ee09e296479fe7048c80980e8ef1d0684d0b0204c2b101dfea19f6725b9
PATCHES=cove1
CACHE=${COVE_CRIU_CACHE:-/var/cache/cove/criu-$VER-$PATCHES}
DEST=${COVE_CRIU_DEST:-/usr/local/lib/cove/criu}

install_bin() {
	if ! cmp -s "$CACHE/criu" "$DEST" 2>/dev/null; then
		mkdir -p "$(dirname "$DEST")"
		install -m 0755 "$CACHE/criu" "$DEST.tmp"
		mv -f "$DEST.tmp" "$DEST"
	fi
	echo "criu: $VER ($PATCHES) at $DEST"
}

if [ -x "$CACHE/criu" ]; then
	install_bin
	exit 0
fi

# The Debian mirrors apt is configured with (one-line and deb822 formats).
mirrors() {
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '$1 == "deb" || $1 == "deb-src" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }'
	cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }'
}

fetch() { # file
	for m in $(mirrors | grep -v -- '-security' | sed 's,/*$,,' | awk '!seen[$0]++'); do
		if curl -fsSL --retry 2 -o "$DL/$1" "$m/pool/main/c/criu/$1"; then
			return 0
		fi
	done
	echo "criu: cannot fetch $1 from any apt mirror" >&2
	return 1
}

check_sha() { # file sha256
	got=$(sha256sum "$DL/$1" | cut -d' ' -f1)
	if [ "$got" != "$2" ]; then
		echo "criu: $1: sha256 $got, expected $2" >&2
		exit 1
	fi
}

mkdir -p "$CACHE"
DL=$CACHE/dl
rm -rf "$DL" "$CACHE/src"
mkdir -p "$DL"
fetch "$DSC"
check_sha "$DSC" "$DSC_SHA256"
# The .dsc must list the same checksum for the tarball as the pin.
grep -q "^ $ORIG_SHA256 [0-9]* $ORIG\$" "$DL/$DSC" || {
	echo "criu: $DSC does not list $ORIG with sha256 $ORIG_SHA256" >&2
	exit 1
}
fetch "$ORIG"
check_sha "$ORIG" "$ORIG_SHA256"

mkdir -p "$CACHE/src"
tar -xJf "$DL/$ORIG" -C "$CACHE/src" --strip-components=1
for p in "$(dirname "$0")"/criu-patches/*.patch; do
	patch -s -p1 -d "$CACHE/src" <"$p"
done
echo "criu: building $VER in $CACHE/src"
# The build's output is long and only useful on failure.
if ! make -C "$CACHE/src" -j2 criu >"$CACHE/build.log" 2>&1; then
	tail -30 "$CACHE/build.log" >&2
	exit 1
fi
# The binary goes into the cache last: its presence means a whole build.
install -m 0755 "$CACHE/src/criu/criu" "$CACHE/criu.tmp"
mv -f "$CACHE/criu.tmp" "$CACHE/criu"
rm -rf "$DL"
install_bin
