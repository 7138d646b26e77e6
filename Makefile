# cove — plain GNU Makefile. Objects in build/, dependency files via -MMD -MP.
CC      ?= cc
BUILD   ?= build
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror=implicit-function-declaration \
           -Werror=incompatible-pointer-types -Werror=return-type -Wshadow \
           -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-format-truncation -Wno-unused-parameter
HARDEN  := -fstack-protector-strong -D_FORTIFY_SOURCE=2
BASE_CFLAGS = -std=gnu17 -D_GNU_SOURCE $(WARN) $(HARDEN) $(CFLAGS) -Iinclude -Isrc -I$(BUILD)/gen -MMD -MP
ALL_CFLAGS = $(BASE_CFLAGS) $(SAN)
PIE_CFLAGS = -fPIE
PIE_LDFLAGS = -pie -Wl,-z,relro,-z,now $(SAN)

LIBS_DAEMON := -levent_core -levent_extra -ljansson -lsqlite3 -lseccomp -larchive -lprotobuf-c -lnettle -ldl -lpthread
LIBS_CLIENT := -ljansson -larchive -lacl

COMMON_SRC := $(wildcard src/common/*.c)
SYS_SRC    := $(filter-out src/sys/nftables.c,$(wildcard src/sys/*.c))
# The registry client is never linked into coved: libcurl's shared
# libraries would be mapped into every fork (see COVED_LIBS). Imports and
# pulls run in cove-image, a helper coved starts (src/image/helper/).
REGISTRY_SRC := src/image/registry.c
HELPER_SRC := src/image/helper/cove_image.c
SANDBOX_SRC:= $(wildcard src/sandbox/*.c) $(filter-out $(REGISTRY_SRC),$(wildcard src/image/*.c))
DAEMON_SRC := $(wildcard src/daemon/*.c src/daemon/*/*.c)
ENGINE_SRC := $(wildcard src/engine/*.c src/store/*.c)
# The network (src/net/, and libnftables through src/sys/nftables.c, which
# loads it with dlopen on first use: it is a shared library only, and coved
# must not map it at every sandbox start unless a sandbox has egress).
NET_SRC    := $(wildcard src/net/*.c) src/sys/nftables.c
CLIENT_SRC := $(wildcard src/client/*.c)
CLI_SRC    := $(wildcard src/cli/*.c)
INIT_SRC   := $(wildcard src/init/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
# cove-init is static and links only libc: it is built from its own objects
# (compiled without PIE) plus the pure helpers it shares.
INIT_COMMON := src/common/array.c src/common/wire.c src/common/passwd.c src/common/io.c src/common/fdpass.c
iobj = $(patsubst %.c,$(BUILD)/init-obj/%.o,$(1))

# CRIU's RPC messages (src/sys/criu_rpc.proto), compiled by protoc-c.
GEN_OBJ    := $(BUILD)/gen/criu_rpc.pb-c.o
CORE_OBJ   := $(call obj,$(COMMON_SRC) $(SYS_SRC) $(SANDBOX_SRC)) $(GEN_OBJ)
NET_OBJ    := $(call obj,$(NET_SRC))
DAEMON_OBJ := $(call obj,$(DAEMON_SRC))
ENGINE_OBJ := $(call obj,$(ENGINE_SRC))
CLIENT_OBJ := $(call obj,$(CLIENT_SRC) $(COMMON_SRC))
CLI_OBJ    := $(call obj,$(CLI_SRC))

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

PROGS := $(BUILD)/coved $(BUILD)/cove $(BUILD)/cove-init $(BUILD)/libcove.a $(BUILD)/cove-probe $(BUILD)/cove-image

MANS := $(BUILD)/man/cove.1 $(BUILD)/man/coved.8

.PHONY: all check unit integration asan lint bench clean fuzz crash soak asan-unit install FORCE
all: $(PROGS) $(MANS) $(BUILD)/cove.pc

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) -c $< -o $@

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: src/sys/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen -Isrc/sys $<

$(GEN_OBJ): $(BUILD)/gen/criu_rpc.pb-c.c
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) -c $< -o $@

$(BUILD)/src/sys/criu.o: $(BUILD)/gen/criu_rpc.pb-c.h

$(BUILD)/init-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fno-pie -Os -c $< -o $@

$(BUILD)/libcove.a: $(CLIENT_OBJ)
	@rm -f $@
	ar rcs $@ $^

# coved links its libraries statically, but for libxml2's chain (libarchive's
# xar writer pulls it in, and libxml2 needs ICU, too big to link in): coved
# forks for every sandbox start (setup, user-namespace helper, init), and
# each fork copies and each exit unmaps every mapping of every shared
# library. libarchive's 14 shared libraries made a create 0.7-1 ms slower.
COVED_LIBS := -Wl,-Bstatic -levent_core -levent_extra -ljansson -lsqlite3 -lseccomp -larchive -lacl -lnettle \
              -lzstd -llz4 -lbz2 -lprotobuf-c -Wl,-Bdynamic -lxml2 -ldl -llzma -lz -lm -lpthread

$(BUILD)/coved: $(DAEMON_OBJ) $(ENGINE_OBJ) $(CORE_OBJ) $(NET_OBJ)
	$(CC) $(PIE_LDFLAGS) -o $@ $^ $(COVED_LIBS)

$(BUILD)/cove-image: $(call obj,$(HELPER_SRC) $(REGISTRY_SRC)) $(CORE_OBJ)
	$(CC) $(PIE_LDFLAGS) -o $@ $^ $(LIBS_DAEMON) -lcurl -lzstd

# The CLI is linked statically (static-pie keeps ASLR): loading shared
# libraries costs a third of a `cove exec` on this kind of VM. Sanitizer
# builds link dynamically, as the sanitizers need.
CLI_LDFLAGS = $(if $(SAN),$(PIE_LDFLAGS),-static-pie -Wl,-z,relro,-z,now)
$(BUILD)/cove: $(CLI_OBJ) $(BUILD)/libcove.a
	$(CC) $(CLI_LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libcove.a $(LIBS_CLIENT)

$(BUILD)/cove-init: $(call iobj,$(INIT_SRC) $(INIT_COMMON))
	$(CC) -static -no-pie -o $@ $^

$(BUILD)/cove-probe: $(call iobj,tests/probe/probe.c tests/probe/escape.c)
	$(CC) -static -no-pie -o $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(CORE_OBJ) $(NET_OBJ) $(call obj,$(CLIENT_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) -o $@ $(filter-out %.h,$^) $(LIBS_DAEMON)

# The engine's own test drives it without any server: it links the engine.
$(BUILD)/tests/test_engine: tests/unit/test_engine.c $(ENGINE_OBJ) $(CORE_OBJ) $(NET_OBJ) $(call obj,$(CLIENT_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) -o $@ $(filter-out %.h,$^) $(LIBS_DAEMON)

# The engine's images: the engine too.
$(BUILD)/tests/test_images: tests/unit/test_images.c $(ENGINE_OBJ) $(CORE_OBJ) $(NET_OBJ) $(call obj,$(CLIENT_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) -o $@ $(filter-out %.h,$^) $(LIBS_DAEMON)

# changes.c is the engine's, and reads the host layers' names (sandbox/).
$(BUILD)/tests/test_changes: tests/unit/test_changes.c $(BUILD)/src/engine/changes.o $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) -o $@ $(filter-out %.h,$^) $(LIBS_DAEMON)

$(BUILD)/tests/test_registry: tests/unit/test_registry.c $(CORE_OBJ) $(call obj,$(CLIENT_SRC) $(REGISTRY_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) -o $@ $(filter-out %.h,$^) $(LIBS_DAEMON) -lcurl -lcrypt

# E2B's pure parsers, alone (the fuzzer drives the same objects).
E2B_PURE_OBJ := $(call obj,src/daemon/e2b/connect.c src/daemon/e2b/multipart.c)
$(BUILD)/tests/test_e2b_connect: tests/unit/test_e2b_connect.c $(E2B_PURE_OBJ) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) -o $@ $(filter-out %.h,$^) $(LIBS_DAEMON)

# The port proxy's reading of request heads, alone.
$(BUILD)/tests/test_proxy_head: tests/unit/test_proxy_head.c $(call obj,src/daemon/proxy/head.c) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) -o $@ $(filter-out %.h,$^) $(LIBS_DAEMON)

unit: $(UNIT_BIN)
	@scripts/run-unit.sh $(UNIT_BIN)

integration: all $(BUILD)/docs-example
	@COVE_BUILD=$(abspath $(BUILD)) python3 tests/integration/run.py

# The whole suite: unit tests, then the integration tests against the real
# binaries; one summary line at the end counts both.
# docs/example.c is compiled with the tests: the documented use of libcove
# must keep building (and tests/integration/test_example.py runs it).
$(BUILD)/docs-example: docs/example.c $(BUILD)/libcove.a include/cove.h
	$(CC) $(BASE_CFLAGS) $(PIE_CFLAGS) $(PIE_LDFLAGS) docs/example.c $(BUILD)/libcove.a -ljansson -o $@

check: all $(UNIT_BIN) $(BUILD)/docs-example
	@COVE_BUILD=$(abspath $(BUILD)) scripts/check.sh $(UNIT_BIN)

# make asan: the whole suite (make check) on binaries built with ASan and
# UBSan; LeakSanitizer checks each instrumented process as it exits. Every
# report goes to a file in SAN_LOG, as the stderr of the process that makes
# it may be a log nobody reads (coved's, a forked child's): the test during
# which one appears fails (run-unit.sh, tests/integration/run.py), and
# check.sh fails the run for any, the SDKs' coveds' too. A UBSan report
# stops its process, as an ASan one does; GCC's UBSan writes it to stderr
# whatever log_path says, so the tests' coveds' logs are searched for
# reports too (tests/integration/covetest.py).
# ASan keeps freed memory in quarantine (256 MB by default), which the tests
# that bound coved's RSS would take for a leak: keep it small.
SAN_LOG := $(abspath build-asan/sanitizer)
SAN_MAKE = rm -rf $(SAN_LOG) && mkdir -p $(SAN_LOG) && \
	ASAN_OPTIONS=quarantine_size_mb=1:thread_local_quarantine_size_kb=64:log_path=$(SAN_LOG)/asan \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	COVE_SANITIZER_LOG=$(SAN_LOG) \
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
asan:
	$(SAN_MAKE) check

# The unit tests alone under the sanitizers: 2 minutes where the whole
# suite (make asan, which .ci/run runs) takes 26.
asan-unit:
	$(SAN_MAKE) all unit

lint: $(BUILD)/gen/criu_rpc.pb-c.h
	@scripts/lint.sh

bench: all
	@bench/run.sh

# SIGKILL of coved at random moments of every write path alone (make check
# runs it with 10 each): COVE_CRASH_WRITES_TRIALS=N for more.
crash: all
	COVE_BUILD=$(abspath $(BUILD)) \
	COVE_CRASH_WRITES_TRIALS=$${COVE_CRASH_WRITES_TRIALS:-10} python3 tests/integration/run.py -k test_crash_writes

fuzz:
	@scripts/fuzz.sh

# An hour of mixed load from 50 clients on a private coved, then every
# resource it held compared with before (bench/soak.py; not in check).
# SOAK_SECONDS=300 make soak for a short one.
soak: all
	@COVE_BUILD=$(abspath $(BUILD)) python3 bench/soak.py

# The manual pages are made from the binaries' own help texts (commands.c
# for cove, coved --help for coved): they cannot drift from what --help says.
$(BUILD)/man/cove.1: $(BUILD)/cove
	@mkdir -p $(dir $@)
	$(BUILD)/cove help --man > $@.tmp && mv $@.tmp $@

$(BUILD)/man/coved.8: $(BUILD)/coved scripts/man-coved.sh
	@mkdir -p $(dir $@)
	scripts/man-coved.sh $(BUILD)/coved > $@.tmp && mv $@.tmp $@

# make install [PREFIX=/usr/local] [DESTDIR=]: cove, coved and cove-init go
# side by side in bin/, as cove starts the coved next to it and coved the
# cove-init next to it; libcove.a, cove.h and cove.pc for programs that use
# libcove (pkg-config --static --libs cove); the manual; bash completion.
PREFIX ?= /usr/local
BINDIR := $(PREFIX)/bin
LIBDIR := $(PREFIX)/lib
INCDIR := $(PREFIX)/include
MANDIR := $(PREFIX)/share/man
COMPDIR := $(PREFIX)/share/bash-completion/completions

# Remade when PREFIX changes (the file names it).
$(BUILD)/cove.pc: FORCE
	@mkdir -p $(BUILD)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: libcove' 'Description: the C client of coved, the cove sandbox daemon' 'Version: 0.1' \
	  'Libs: -L$${libdir} -lcove -ljansson' \
	  'Cflags: -I$${includedir}' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(COMPDIR)
	install -m 0755 $(BUILD)/cove $(BUILD)/coved $(BUILD)/cove-init $(BUILD)/cove-image $(DESTDIR)$(BINDIR)/
	install -m 0644 $(BUILD)/libcove.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 include/cove.h $(DESTDIR)$(INCDIR)/
	install -m 0644 $(BUILD)/cove.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 0644 $(BUILD)/man/cove.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(BUILD)/man/coved.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 scripts/cove.bash-completion $(DESTDIR)$(COMPDIR)/cove

FORCE:

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
