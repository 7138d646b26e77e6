#!/bin/sh
# Install every Debian package that cove's build, tests and benchmarks need,
# then CRIU 4.2.1 built from Debian's source (scripts/criu.sh; the line from
# libbsd-dev on is its build's). Idempotent; run as root on Debian 12.
set -eu
PKGS="gcc make pkg-config libc6-dev
libevent-dev libjansson-dev libsqlite3-dev libseccomp-dev
libarchive-dev libacl1-dev libnftables-dev nftables libcurl4-openssl-dev
nettle-dev libzstd-dev liblz4-dev libbz2-dev libxml2-dev liblzma-dev zlib1g-dev
btrfs-progs util-linux iproute2 procps psmisc python3 python3-pytest python3-pip python3-setuptools python3-wheel jq man-db
busybox-static hyperfine crun bubblewrap docker-registry wrk skopeo
clang libclang-rt-14-dev clang-format clang-tidy cppcheck tmux
curl xz-utils libprotobuf-c-dev protobuf-c-compiler
libbsd-dev libcap-dev libgnutls28-dev libnet1-dev libnl-3-dev
libprotobuf-dev protobuf-compiler uuid-dev pkgconf python3-protobuf"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
# node and npm for tests/e2b/ (E2B's SDK): Debian's, unless some are there.
command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
if [ -n "$missing" ]; then
	echo "deps: installing$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
sh "$(dirname "$0")/criu.sh"
echo "deps: ok"
