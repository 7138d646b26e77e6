/* Unit tests for src/common/parse.c: sizes, CPU counts, environment names
 * and sandbox IDs, as they arrive from CLI flags and API fields. */
#include "common/parse.h"

#include <stdint.h>
#include <string.h>

#include <errno.h>

#include "tap.h"

static int size_is(const char *s, uint64_t want)
{
	uint64_t v = 0;
	return parse_size(s, &v) == 0 && v == want;
}

static int size_bad(const char *s)
{
	uint64_t v = 4242;
	return parse_size(s, &v) == -1 && v == 4242;
}

static void test_parse_size(void)
{
	CHECK(size_is("0", 0), "0");
	CHECK(size_is("1024", 1024), "plain bytes");
	CHECK(size_is("1024B", 1024), "bytes with B");
	CHECK(size_is("7b", 7), "bytes with b");
	CHECK(size_is("64k", 64 << 10), "64k");
	CHECK(size_is("64K", 64 << 10), "64K");
	CHECK(size_is("64KB", 64 << 10), "64KB");
	CHECK(size_is("64KiB", 64 << 10), "64KiB");
	CHECK(size_is("64kib", 64 << 10), "64kib");
	CHECK(size_is("512M", 512ULL << 20), "512M");
	CHECK(size_is("512MiB", 512ULL << 20), "512MiB");
	CHECK(size_is("1G", 1ULL << 30), "1G");
	CHECK(size_is("1g", 1ULL << 30), "1g");
	CHECK(size_is("2T", 2ULL << 40), "2T");
	CHECK(size_is("0M", 0), "0M");
	CHECK(size_is("007", 7), "leading zeros are decimal, not octal");

	CHECK(size_is("18446744073709551615", UINT64_MAX), "UINT64_MAX bytes");
	CHECK(size_bad("18446744073709551616"), "UINT64_MAX + 1 bytes: overflow");
	CHECK(size_bad("99999999999999999999999"), "far past UINT64_MAX: overflow");
	CHECK(size_is("16777215T", 16777215ULL << 40), "16777215T: the largest T that fits");
	CHECK(size_bad("16777216T"), "16777216T = 2^64: overflow");
	CHECK(size_is("17179869183G", 17179869183ULL << 30), "17179869183G fits");
	CHECK(size_bad("17179869184G"), "17179869184G = 2^64: overflow");
	CHECK(size_bad("18446744073709551615K"), "UINT64_MAX K: overflow");

	CHECK(size_bad(NULL), "NULL");
	CHECK(size_bad(""), "empty");
	CHECK(size_bad("M"), "unit only");
	CHECK(size_bad("-1"), "negative");
	CHECK(size_bad("-1M"), "negative with unit");
	CHECK(size_bad("+1"), "explicit plus");
	CHECK(size_bad(" 1"), "leading space");
	CHECK(size_bad("1 "), "trailing space");
	CHECK(size_bad("1 M"), "space before unit");
	CHECK(size_bad("1.5G"), "fraction");
	CHECK(size_bad("0x10"), "hex");
	CHECK(size_bad("1P"), "unknown unit P");
	CHECK(size_bad("1X"), "unknown unit X");
	CHECK(size_bad("1MM"), "unit twice");
	CHECK(size_bad("1MBB"), "B twice");
	CHECK(size_bad("1BB"), "B twice, no unit");
	CHECK(size_bad("1iB"), "iB without a unit");
	CHECK(size_bad("1Mi B"), "space inside the unit");
	CHECK(size_bad("1M\n"), "trailing newline");
	CHECK(size_bad("1Mx"), "junk after the unit");
}

static int cpus_is(const char *s, uint32_t want)
{
	uint32_t v = 0;
	return parse_cpus(s, &v) == 0 && v == want;
}

static int cpus_bad(const char *s)
{
	uint32_t v = 4242;
	return parse_cpus(s, &v) == -1 && v == 4242;
}

static void test_parse_cpus(void)
{
	CHECK(cpus_is("1", 1000), "1");
	CHECK(cpus_is("1.5", 1500), "1.5");
	CHECK(cpus_is("0.5", 500), "0.5");
	CHECK(cpus_is(".25", 250), ".25");
	CHECK(cpus_is("2.", 2000), "2.");
	CHECK(cpus_is("0.001", 1), "0.001: 1 milli");
	CHECK(cpus_is("0.0015", 2), "0.0015 rounds to 2 millis");
	CHECK(cpus_is("1.0004", 1000), "1.0004 rounds to 1000");
	CHECK(cpus_is("1024", 1024000), "1024: the maximum");

	CHECK(cpus_bad(NULL), "NULL");
	CHECK(cpus_bad(""), "empty");
	CHECK(cpus_bad("0"), "0");
	CHECK(cpus_bad("0.0"), "0.0");
	CHECK(cpus_bad("0.0004"), "0.0004 rounds to 0");
	CHECK(cpus_bad("-1"), "negative");
	CHECK(cpus_bad("+1"), "explicit plus");
	CHECK(cpus_bad(" 1"), "leading space");
	CHECK(cpus_bad("1 "), "trailing space");
	CHECK(cpus_bad("1024.001"), "above 1024");
	CHECK(cpus_bad("1e9"), "1e9");
	CHECK(cpus_bad("1e999"), "1e999: ERANGE");
	CHECK(cpus_bad("1e-999"), "1e-999: underflow");
	CHECK(cpus_bad("inf"), "inf");
	CHECK(cpus_bad("nan"), "nan");
	CHECK(cpus_bad("."), "a lone dot");
	CHECK(cpus_bad("1,5"), "decimal comma");
	CHECK(cpus_bad("2cpus"), "junk after the number");
	CHECK(cpus_bad("1.5\n"), "trailing newline");
}

static void test_env_name(void)
{
	char name[300];

	CHECK(env_name_valid("PATH"), "PATH");
	CHECK(env_name_valid("_"), "_");
	CHECK(env_name_valid("_x1"), "_x1");
	CHECK(env_name_valid("lower_case9"), "lower_case9");
	CHECK(!env_name_valid(""), "empty");
	CHECK(!env_name_valid("1X"), "leading digit");
	CHECK(!env_name_valid("A=B"), "'='");
	CHECK(!env_name_valid("A-B"), "'-'");
	CHECK(!env_name_valid("A B"), "space");
	CHECK(!env_name_valid("A.B"), "'.'");
	CHECK(!env_name_valid("A\n"), "newline");
	CHECK(!env_name_valid("\xc3\xa9"), "non-ASCII");
	memset(name, 'A', 255);
	name[255] = '\0';
	CHECK(env_name_valid(name), "255 bytes");
	memset(name, 'A', 256);
	name[256] = '\0';
	CHECK(!env_name_valid(name), "256 bytes");
}

static void test_sandbox_id(void)
{
	CHECK(sandbox_id_valid("sb_abcdefgh2345"), "sb_abcdefgh2345");
	CHECK(sandbox_id_valid("sb_zzzzzz777777"), "sb_zzzzzz777777");
	CHECK(!sandbox_id_valid(NULL), "NULL");
	CHECK(!sandbox_id_valid(""), "empty");
	CHECK(!sandbox_id_valid("sb_"), "prefix only");
	CHECK(!sandbox_id_valid("sb_abcdefgh234"), "11 characters");
	CHECK(!sandbox_id_valid("sb_abcdefgh23456"), "13 characters");
	CHECK(!sandbox_id_valid("sc_abcdefgh2345"), "wrong prefix");
	CHECK(!sandbox_id_valid("SB_abcdefgh2345"), "upper-case prefix");
	CHECK(!sandbox_id_valid("sb_Abcdefgh2345"), "upper-case letter");
	CHECK(!sandbox_id_valid("sb_abcdefgh2341"), "digit 1 (not base32)");
	CHECK(!sandbox_id_valid("sb_abcdefgh2380"), "digits 8 and 0");
	CHECK(!sandbox_id_valid("sb_abcdefgh/.."), "path characters");
	CHECK(!sandbox_id_valid("sb_abcdef\0h2345"), "embedded NUL");

	char id[16];
	int ok = 1, distinct = 1;
	char prev[16] = "";
	for (int i = 0; i < 100; i++) {
		memset(id, 'X', sizeof(id));
		if (sandbox_id_new(id) != 0 || id[15] != '\0' || strlen(id) != 15 || strncmp(id, "sb_", 3) != 0 ||
		    !sandbox_id_valid(id))
			ok = 0;
		if (strcmp(id, prev) == 0)
			distinct = 0;
		memcpy(prev, id, sizeof(id));
	}
	CHECK(ok, "100 new IDs are \"sb_\" + 12 of [a-z2-7], NUL-terminated, and valid (last %s)", id);
	CHECK(distinct, "consecutive new IDs differ");
}

static void test_snapshot_id(void)
{
	CHECK(snapshot_id_valid("sn_abcdefgh2345"), "sn_abcdefgh2345");
	CHECK(!snapshot_id_valid("sb_abcdefgh2345"), "a sandbox ID is not a snapshot ID");
	CHECK(!sandbox_id_valid("sn_abcdefgh2345"), "a snapshot ID is not a sandbox ID");
	CHECK(!snapshot_id_valid("sn_abcdefgh234"), "11 characters");
	CHECK(!snapshot_id_valid("sn_abcdefgh/.."), "path characters");
	CHECK(!snapshot_id_valid(NULL), "NULL");
	char id[16];
	CHECK(snapshot_id_new(id) == 0 && snapshot_id_valid(id), "a new snapshot ID is valid (%s)", id);
}

static void test_random_hex(void)
{
	char a[2 * 16 + 1], b[2 * 16 + 1], big[2 * 65 + 1];
	CHECK(random_hex(a, 16) == 0 && strlen(a) == 32, "16 bytes are 32 digits");
	CHECK(strspn(a, "0123456789abcdef") == 32, "lowercase hex only: %s", a);
	CHECK(random_hex(b, 16) == 0 && strcmp(a, b) != 0, "two draws differ");
	CHECK(random_hex(big, 65) == -EINVAL, "more than 64 bytes is refused");
}

int main(void)
{
	test_parse_size();
	test_parse_cpus();
	test_env_name();
	test_sandbox_id();
	test_snapshot_id();
	test_random_hex();
	return tap_done();
}
