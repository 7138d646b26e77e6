#!/bin/sh
# Install every Debian package that cove's build, tests and benchmarks need.
# Idempotent; run as root on Debian 12.
set -eu
PKGS="gcc make pkg-config libc6-dev
libevent-dev libjansson-dev libsqlite3-dev libseccomp-dev
libarchive-dev libacl1-dev libcurl4-openssl-dev
nettle-dev libzstd-dev liblz4-dev libbz2-dev libxml2-dev liblzma-dev zlib1g-dev
btrfs-progs util-linux iproute2 procps psmisc python3
busybox-static hyperfine crun bubblewrap docker-registry
clang libclang-rt-14-dev clang-format clang-tidy cppcheck tmux"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "deps: installing$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "deps: ok"
