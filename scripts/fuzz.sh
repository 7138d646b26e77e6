#!/bin/sh
# make fuzz: build every libFuzzer harness in tests/fuzz/ with ASan and UBSan
# into build/fuzz/, then run each for FUZZ_SECONDS (default 30) seconds.
#
#   scripts/fuzz.sh                 all harnesses
#   scripts/fuzz.sh wire passwd     some of them
#   FUZZ_SECONDS=600 scripts/fuzz.sh http
#
# The corpus of each harness is kept in build/fuzz/corpus/<name>/ and grows
# from run to run; a crashing input is saved in build/fuzz/crashes/ and its
# log in build/fuzz/<name>.log. Exit status: non-zero when a harness does
# not build or any fuzzer finds a crash, leak, timeout or UB.
set -u
cd "$(dirname "$0")/.." || exit 1

CC=${FUZZ_CC:-clang}
SECONDS_EACH=${FUZZ_SECONDS:-30}
OUT=build/fuzz
CFLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE -Isrc -Iinclude"
# UBSan only reports by default; a report must stop the run like a crash.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# The module sources each harness links against.
sources()
{
	case "$1" in
	http) echo "src/client/http.c src/common/error.c src/common/netaddr.c" ;;
	wire) echo "src/common/wire.c" ;;
	passwd) echo "src/common/passwd.c" ;;
	encoding) echo "src/common/encoding.c" ;;
	entry) echo "src/common/wire.c" ;;
	dns) echo "src/net/dnsmsg.c" ;;
	policy) echo "src/net/policy.c src/common/error.c" ;;
	sniff) echo "src/net/sniff.c" ;;
	oci) echo "src/image/oci.c src/image/ref.c src/image/challenge.c src/image/digest.c src/common/error.c" ;;
	layer) echo "src/image/layer.c src/image/digest.c src/common/wire.c src/common/io.c src/common/error.c" ;;
	dockerfile) echo "src/image/dockerfile.c src/common/error.c" ;;
	connect) echo "src/daemon/e2b/connect.c src/daemon/e2b/multipart.c src/common/error.c -ljansson" ;;
	portable) echo "src/engine/portable.c src/common/encoding.c src/common/wire.c src/common/error.c" ;;
	proxy_head) echo "src/daemon/proxy/head.c src/common/parse.c" ;;
	api) echo "tests/fuzz/mock_engine.c $(ls src/daemon/api/*.c | grep -v '/api.c$') src/daemon/http/httpd.c src/daemon/http/httpd_reply.c src/daemon/http/httpd_upgrade.c src/daemon/http/conn.c src/daemon/http/access.c src/common/error.c src/common/metrics.c src/common/encoding.c src/common/parse.c src/common/log.c src/common/io.c src/common/array.c src/common/netaddr.c" ;;
	files_tar) echo "tests/fuzz/extract_shim.c src/engine/portable.c src/common/encoding.c src/common/wire.c src/common/error.c src/common/log.c src/common/io.c src/common/array.c" ;;
	httpd) echo "src/daemon/http/httpd.c src/daemon/http/httpd_reply.c src/daemon/http/httpd_upgrade.c src/common/log.c" ;;
	*) return 1 ;;
	esac
}

# The libraries each harness links against.
libs()
{
	case "$1" in
	oci) echo "-ljansson -lnettle" ;;
	dockerfile) echo "-ljansson" ;;
	layer) echo "-larchive -lnettle" ;;
	portable) echo "-ljansson -levent_core" ;;
	httpd) echo "-levent_core -levent_extra" ;;
	files_tar) echo "-larchive -ljansson -levent_core" ;;
	api) echo "-ljansson -levent_core -levent_extra -lnettle" ;;
	esac
}

A64=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
seed_oci()
{
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":7,"platform":{"os":"linux","architecture":"amd64"}}]}' $A64 >"$1/index"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":7},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":9}]}' $A64 $A64 >"$1/manifest"
	printf '{"os":"linux","architecture":"amd64","config":{"Env":["A=1"],"WorkingDir":"/w","User":"1:1","Entrypoint":["sh"],"Cmd":["-c","x"],"ExposedPorts":{"80/tcp":{}},"Labels":{"k":"v"}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' $A64 >"$1/config"
	printf '[{"Config":"c.json","RepoTags":["a:1"],"Layers":["l/layer.tar"]}]' >"$1/docker"
	printf '{"imageLayoutVersion":"1.0.0"}' >"$1/layout"
	printf 'localhost:5000/a/b:v1@sha256:%s' $A64 >"$1/ref"
	printf 'Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull"' >"$1/challenge"
}

# Small layers made with tar: files, a folder, a hard link, whiteouts,
# and symlinks and hard links aimed outside the tree.
seed_layer()
{
	t=$(mktemp -d) || return 1
	mkdir -p "$t/a/etc" "$t/a/opq" "$t/b"
	echo hello >"$t/a/etc/f"
	ln "$t/a/etc/f" "$t/a/etc/hl"
	ln -s ../outside "$t/a/esc"
	touch "$t/a/.wh.gone" "$t/a/opq/.wh..wh..opq"
	tar -C "$t/a" --owner=0 --group=0 -cf "$1/plain" .
	gzip -c "$1/plain" >"$1/gzip"
	if command -v zstd >/dev/null; then zstd -q -c "$1/plain" >"$1/zstd"; fi
	ln -s ../outside "$t/b/esc"
	tar -C "$t/b" -cf "$1/escape" esc
	mkdir -p "$t/b/esc2" && echo x >"$t/b/esc2/x"
	tar -C "$t/b" --transform 's,^esc2,esc,' --no-recursion -cf "$1/through" esc esc2/x
	rm -rf "$t"
}

# A few valid inputs to start from, so that the first seconds are not spent
# discovering the format.
seed()
{
	d=$OUT/corpus/$1
	[ -n "$(ls -A "$d" 2>/dev/null)" ] && return 0
	mkdir -p "$d"
	case "$1" in
	http)
		printf 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello' >"$d/seed1"
		printf 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n' >"$d/seed2"
		;;
	wire)
		# A bare spawn payload: argc 2, envc 1, user, cwd, argv, envp.
		printf '\002\000\000\000\001\000\000\000root\000/tmp\000ls\000-l\000A=1\000' >"$d/seed1"
		# A whole WIRE_SPAWN packet: type 1, seq 1, pid 0, value 0,
		# flags 0, payload_len 21, then the payload.
		printf '\001\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\025\000\000\000\001\000\000\000\000\000\000\000\000/\000/bin/true\000' >"$d/seed2"
		;;
	passwd)
		printf 'alice\nroot:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\nwheel:x:10:alice,bob\n' >"$d/seed1"
		printf '1000\nalice:x:1000:1000::/home/alice:/bin/sh\n' >"$d/seed2"
		;;
	encoding)
		printf 'Zm9vYmFy' >"$d/seed1"
		printf 'Zm9vYg==' >"$d/seed2"
		printf 'caf\303\251 \342\202\254 \360\237\230\200' >"$d/seed3"
		;;
	dns)
		# A query for www.example.org, type A; a resolv.conf.
		printf '\022\064\001\000\000\001\000\000\000\000\000\000\003www\007example\003org\000\000\001\000\001' >"$d/seed1"
		printf 'nameserver 10.0.0.1\nnameserver ::1\n' >"$d/seed2"
		;;
	proxy_head)
		printf 'GET /a?b=1&cove_token=0123456789abcdef0123456789abcdef HTTP/1.1\r\nHost: 8000-sb-abcdefghijkl.localhost:7071\r\nCookie: a=1; cove_token=x\r\n\r\n' >"$d/seed1"
		printf 'POST / HTTP/1.1\r\nE2b-Sandbox-Id: sb_abcdefghijkl\r\nE2b-Sandbox-Port: 80\r\nTransfer-Encoding: chunked\r\n\r\n' >"$d/seed2"
		;;
	policy)
		printf '10.0.0.0/8\n*.example.org\n2001:db8::/32\npypi.org.\n' >"$d/seed1"
		;;
	connect)
		printf '\000\000\000\000\015{"path":"/d"}' >"$d/seed1"
		printf -- '--b\r\nContent-Disposition: form-data; name="file"; filename="/x"\r\n\r\nhi\r\n--b--\r\n' >"$d/seed2"
		;;
	entry)
		printf './a//b/./c/' >"$d/seed1"
		printf '/../etc/passwd' >"$d/seed2"
		;;
	oci) seed_oci "$d" ;;
	layer) seed_layer "$d" ;;
	esac
}

if [ $# -gt 0 ]; then
	names="$*"
else
	names=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done)
fi

mkdir -p "$OUT/crashes"
failed=""
for n in $names; do
	src=tests/fuzz/fuzz_$n.c
	mods=$(sources "$n") || { echo "fuzz: $n: no module sources known for $src" >&2; failed="$failed $n"; continue; }
	bin=$OUT/fuzz_$n
	log=$OUT/$n.log
	# shellcheck disable=SC2086 # word splitting of the flag lists is intended
	if ! $CC $CFLAGS "$src" $mods -o "$bin" $(libs "$n"); then
		echo "fuzz: $n: build failed" >&2
		failed="$failed $n"
		continue
	fi
	seed "$n"
	echo "fuzz: $n: running for ${SECONDS_EACH}s"
	# The seeds kept in the repo (tests/fuzz/corpus/<name>/) are read too; what
	# the fuzzer finds goes into the first folder, the build's.
	dict="" seeds=""
	[ -f "tests/fuzz/$n.dict" ] && dict="-dict=tests/fuzz/$n.dict"
	[ -d "tests/fuzz/corpus/$n" ] && seeds="tests/fuzz/corpus/$n"
	# shellcheck disable=SC2086 # empty when there is none
	"$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$OUT/crashes/${n}-" $dict "$OUT/corpus/$n" $seeds >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
	corpus=$(find "$OUT/corpus/$n" -type f | wc -l)
	if [ "$rc" -ne 0 ]; then
		echo "fuzz: $n: FAILED (exit $rc) after ${runs:-?} runs; log: $log"
		grep -E 'ERROR: |runtime error|SUMMARY|Test unit written' "$log" | head -10 | sed 's/^/  /'
		failed="$failed $n"
	else
		echo "fuzz: $n: ok, ${runs:-?} runs, coverage ${cov:-?}, corpus $corpus"
	fi
done

if [ -n "$failed" ]; then
	echo "fuzz: failed:$failed"
	exit 1
fi
echo "fuzz: all ok"
