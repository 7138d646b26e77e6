/* Unit tests for src/common/passwd.c: user lookup in a sandbox's own
 * /etc/passwd and supplementary groups from /etc/group. The files belong to
 * the sandbox, so they are hostile input: bad lines are skipped, long lines
 * neither overflow nor match, and a miss is -ENOENT, never a guess. */
#include "common/passwd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static const char passwd_text[] = "root:x:0:0:root:/root:/bin/bash\n"
				  "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
				  "# a comment\n"
				  "\n"
				  "broken line without colons\n"
				  "short:x:5:5\n"
				  "baduid:x:12a:100::/home/baduid:/bin/sh\n"
				  "neguid:x:-3:100::/home/neguid:/bin/sh\n"
				  "biguid:x:4294967296:100::/home/biguid:/bin/sh\n"
				  "badgid:x:200::gecos:/home/badgid:/bin/sh\n"
				  "nohome:x:300:301:::\n"
				  "alice:x:1000:1000:Alice,,,:/home/alice:/bin/zsh\n"
				  "dup:x:1000:1:first uid 1000 wins? no, alice does:/:/bin/sh\n"
				  "bob:x:1001:1001::/home/bob:/bin/sh"; /* no final newline */

static size_t plen(void)
{
	return strlen(passwd_text);
}

static void test_lookup_by_name(void)
{
	struct passwd_entry e;
	int r = passwd_lookup(passwd_text, plen(), "alice", &e);
	CHECK(r == 0, "alice found (%d)", r);
	CHECK_STR(e.name, "alice", "name");
	CHECK(e.uid == 1000 && e.gid == 1000, "uid %u gid %u", (unsigned)e.uid, (unsigned)e.gid);
	CHECK_STR(e.home, "/home/alice", "home");
	CHECK_STR(e.shell, "/bin/zsh", "shell");

	r = passwd_lookup(passwd_text, plen(), "root", &e);
	CHECK(r == 0 && e.uid == 0 && strcmp(e.home, "/root") == 0, "root on the first line found");
	r = passwd_lookup(passwd_text, plen(), "bob", &e);
	CHECK(r == 0 && e.uid == 1001 && strcmp(e.shell, "/bin/sh") == 0, "bob on the last line, no newline, found");
	r = passwd_lookup(passwd_text, plen(), "nohome", &e);
	CHECK(r == 0 && strcmp(e.home, "/") == 0 && strcmp(e.shell, "/bin/sh") == 0,
	      "empty home and shell default to / and /bin/sh");

	e.uid = 4242;
	CHECK(passwd_lookup(passwd_text, plen(), "nosuchuser", &e) == -ENOENT, "unknown name: -ENOENT");
	CHECK(e.uid == 4242, "ret untouched on failure");
	CHECK(passwd_lookup(passwd_text, plen(), "ali", &e) == -ENOENT, "a prefix of a name does not match");
	CHECK(passwd_lookup(passwd_text, plen(), "alicex", &e) == -ENOENT, "a name extending one does not match");
	CHECK(passwd_lookup(passwd_text, 10, "alice", &e) == -ENOENT, "text is bounded by len, not NUL");
	CHECK(passwd_lookup("", 0, "alice", &e) == -ENOENT, "empty text: -ENOENT");
}

static void test_lookup_by_uid(void)
{
	struct passwd_entry e;
	int r = passwd_lookup(passwd_text, plen(), "1000", &e);
	CHECK(r == 0 && strcmp(e.name, "alice") == 0, "uid 1000 is alice (the first match)");
	CHECK(e.gid == 1000 && strcmp(e.home, "/home/alice") == 0, "with alice's gid and home");
	r = passwd_lookup(passwd_text, plen(), "0", &e);
	CHECK(r == 0 && strcmp(e.name, "root") == 0, "uid 0 is root");
	r = passwd_lookup(passwd_text, plen(), "1", &e);
	CHECK(r == 0 && strcmp(e.name, "daemon") == 0, "uid 1 is daemon");
	r = passwd_lookup(passwd_text, plen(), "0001", &e);
	CHECK(r == 0 && strcmp(e.name, "daemon") == 0, "leading zeros: 0001 is uid 1");

	/* Not listed: resolves anyway, as docker does. */
	r = passwd_lookup(passwd_text, plen(), "4321", &e);
	CHECK(r == 0, "unlisted numeric uid resolves");
	CHECK(e.uid == 4321 && e.gid == 4321, "to uid = gid = 4321");
	CHECK_STR(e.name, "4321", "name is the number");
	CHECK_STR(e.home, "/", "home /");
	CHECK_STR(e.shell, "/bin/sh", "shell /bin/sh");
	r = passwd_lookup("", 0, "65534", &e);
	CHECK(r == 0 && e.uid == 65534, "numeric uid resolves with an empty passwd");
	r = passwd_lookup(passwd_text, plen(), "2147483647", &e);
	CHECK(r == 0 && e.uid == 2147483647, "uid 2^31-1 accepted");
}

static void test_bad_specs_and_lines(void)
{
	struct passwd_entry e;
	int r;

	CHECK(passwd_lookup(passwd_text, plen(), "", &e) == -EINVAL, "empty spec: -EINVAL");
	CHECK(passwd_lookup(passwd_text, plen(), NULL, &e) == -EINVAL, "NULL spec: -EINVAL");
	CHECK(passwd_lookup(passwd_text, plen(), "a:b", &e) == -EINVAL, "spec with ':': -EINVAL");
	CHECK(passwd_lookup(passwd_text, plen(), "a\nb", &e) == -EINVAL, "spec with newline: -EINVAL");
	CHECK(passwd_lookup(passwd_text, plen(), "-1", &e) == -ENOENT, "-1 is not a uid (and no such name)");
	CHECK(passwd_lookup(passwd_text, plen(), "4294967296", &e) == -ENOENT, "2^32 is not a uid");
	CHECK(passwd_lookup(passwd_text, plen(), "2147483648", &e) == -ENOENT, "2^31 is not a uid");
	CHECK(passwd_lookup(passwd_text, plen(), "12a", &e) == -ENOENT, "12a is a name, and not listed");
	CHECK(passwd_lookup(passwd_text, plen(), " 12", &e) == -ENOENT, "' 12' is not a uid");

	CHECK(passwd_lookup(passwd_text, plen(), "short", &e) == -ENOENT, "line with too few fields skipped");
	CHECK(passwd_lookup(passwd_text, plen(), "baduid", &e) == -ENOENT, "line with a non-numeric uid skipped");
	CHECK(passwd_lookup(passwd_text, plen(), "neguid", &e) == -ENOENT, "line with a negative uid skipped");
	CHECK(passwd_lookup(passwd_text, plen(), "biguid", &e) == -ENOENT, "line with uid 2^32 skipped");
	CHECK(passwd_lookup(passwd_text, plen(), "badgid", &e) == -ENOENT, "line with an empty gid skipped");
	CHECK(passwd_lookup(passwd_text, plen(), "# a comment", &e) == -ENOENT, "comment line never matches");

	/* No name: skipped, so that uid 8 falls through to the next line. */
	static const char noname[] = ":x:8:8::/:/bin/sh\nreal:x:8:8::/home/real:/bin/sh\n";
	r = passwd_lookup(noname, strlen(noname), "8", &e);
	CHECK(r == 0 && strcmp(e.name, "real") == 0, "a line with an empty name is skipped (got \"%s\")", e.name);

	/* Eight fields: the shell must not swallow a ':'. */
	static const char extra[] = "eve:x:7:7::/home/eve:/bin/sh:junk\n";
	r = passwd_lookup(extra, strlen(extra), "eve", &e);
	CHECK(r == -ENOENT, "a line with an eighth field is skipped (the shell must not be \"/bin/sh:junk\")");

	/* A NUL inside the text ends that line's fields but not the scan. */
	static const char nul[] = "x\0y:x:9:9::/:/bin/sh\nzed:x:10:10::/z:/bin/sh\n";
	r = passwd_lookup(nul, sizeof(nul) - 1, "zed", &e);
	CHECK(r == 0 && e.uid == 10, "a NUL byte on one line does not stop the next");
	CHECK(passwd_lookup(nul, sizeof(nul) - 1, "y", &e) == -ENOENT, "nor make a name out of the bytes after it");

	/* CRLF files: "\r" stays part of the shell, which is at least not a
	 * different user. */
	static const char crlf[] = "carl:x:20:20::/home/carl:/bin/sh\r\n";
	r = passwd_lookup(crlf, strlen(crlf), "carl", &e);
	CHECK(r == 0 && e.uid == 20, "CRLF line still matches by name");
}

static void test_long_lines(void)
{
	struct passwd_entry e;
	/* A 1 MiB line naming alice with uid 0, then the real alice. A
	 * parser that truncated instead of skipping would see "alice:x:0:0". */
	size_t big = 1 << 20;
	char *text = malloc(big + 128);
	size_t n = 0;
	n += (size_t)sprintf(text + n, "alice:x:0:0:");
	memset(text + n, 'g', big);
	n += big;
	n += (size_t)sprintf(text + n, ":/:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n");
	int r = passwd_lookup(text, n, "alice", &e);
	CHECK(r == 0 && e.uid == 1000, "an over-long line is skipped, the next one found (uid %u)", (unsigned)e.uid);
	r = passwd_lookup(text, n, "0", &e);
	CHECK(r == 0 && strcmp(e.name, "0") == 0, "uid 0 from the over-long line is not matched");

	/* Lines around the internal buffer size (1024): 1023 bytes fit, 1024 do
	 * not, and neither reads past the text. */
	for (size_t len = 1020; len <= 1026; len++) {
		char *t = malloc(len);
		static const char head[] = "long:x:77:77::/";
		static const char tail[] = ":/bin/sh";
		memcpy(t, head, sizeof(head) - 1);
		memset(t + sizeof(head) - 1, 'h', len - (sizeof(head) - 1) - (sizeof(tail) - 1));
		memcpy(t + len - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
		r = passwd_lookup(t, len, "long", &e);
		/* The home field is longer than passwd_entry.home either way. */
		CHECK(r == -ENOENT, "a %zu-byte line whose home overflows the entry is skipped", len);
		free(t);
	}

	/* Fields exactly at the entry's limits. */
	char name[64], home[256];
	memset(name, 'n', 63);
	name[63] = '\0';
	memset(home, 'd', 255);
	home[0] = '/';
	home[255] = '\0';
	n = (size_t)sprintf(text, "%s:x:5:5::%s:/bin/sh\n", name, home);
	r = passwd_lookup(text, n, name, &e);
	CHECK(r == 0 && strlen(e.name) == 63 && strlen(e.home) == 255, "63-byte name and 255-byte home fit");
	char name64[65];
	memset(name64, 'm', 64);
	name64[64] = '\0';
	n = (size_t)sprintf(text, "%s:x:5:5::/:/bin/sh\n", name64);
	CHECK(passwd_lookup(text, n, name64, &e) == -ENOENT, "64-byte name does not fit: skipped");
	n = (size_t)sprintf(text, "%s:x:5:5::/:/bin/sh\n", name64);
	r = passwd_lookup(text, n, "5", &e);
	CHECK(r == 0 && strcmp(e.name, "5") == 0, "by uid, the too-long line is skipped too");
	free(text);
}

static const char group_text[] = "root:x:0:\n"
				 "wheel:x:10:alice,bob\n"
				 "audio:x:29:bob\n"
				 "video:x:44:carol,alice\n"
				 "empty:x:50:\n"
				 "bad:x:notanumber:alice\n"
				 "short:x:60\n"
				 "sub:x:70:alicex,xalice,ali\n"
				 "spaces:x:80: alice\n"
				 "commas:x:90:,,alice,,\n"
				 "extra:x:110:alice:junk\n"
				 "last:x:100:alice"; /* no final newline */

static void test_groups(void)
{
	gid_t g[PASSWD_MAX_GROUPS];
	size_t n = strlen(group_text);

	int r = passwd_groups(group_text, n, "alice", g, PASSWD_MAX_GROUPS);
	CHECK(r == 4, "alice is in 4 groups, the 5-field line skipped (%d)", r);
	CHECK(r == 4 && g[0] == 10 && g[1] == 44 && g[2] == 90 && g[3] == 100,
	      "wheel, video, commas and last, in file order");
	r = passwd_groups(group_text, n, "bob", g, PASSWD_MAX_GROUPS);
	CHECK(r == 2 && g[0] == 10 && g[1] == 29, "bob in wheel and audio");
	CHECK(passwd_groups(group_text, n, "carol", g, PASSWD_MAX_GROUPS) == 1 && g[0] == 44, "carol in video");
	CHECK(passwd_groups(group_text, n, "nobody", g, PASSWD_MAX_GROUPS) == 0, "nobody in none");
	CHECK(passwd_groups(group_text, n, "ali", g, PASSWD_MAX_GROUPS) == 1 && g[0] == 70,
	      "exact member names only: ali in sub only");
	CHECK(passwd_groups(group_text, n, "", g, PASSWD_MAX_GROUPS) == 0, "empty name in no group");
	CHECK(passwd_groups(group_text, n, "root", g, PASSWD_MAX_GROUPS) == 0, "a group's own name is not membership");
	CHECK(passwd_groups("", 0, "alice", g, PASSWD_MAX_GROUPS) == 0, "empty text: no groups");

	r = passwd_groups(group_text, n, "alice", g, 2);
	CHECK(r == 2 && g[0] == 10 && g[1] == 44, "max 2: the first 2 groups");
	gid_t guard[2] = { 12345, 12345 };
	r = passwd_groups(group_text, n, "alice", guard, 0);
	CHECK(r == 0 && guard[0] == 12345, "max 0: nothing written");

	/* More groups than PASSWD_MAX_GROUPS: capped, no overflow. */
	size_t cap = 100 * 32;
	char *t = malloc(cap);
	size_t off = 0;
	for (int i = 0; i < 100; i++)
		off += (size_t)snprintf(t + off, cap - off, "g%d:x:%d:alice\n", i, 1000 + i);
	gid_t many[PASSWD_MAX_GROUPS + 1];
	many[PASSWD_MAX_GROUPS] = 4242;
	r = passwd_groups(t, off, "alice", many, PASSWD_MAX_GROUPS);
	CHECK(r == PASSWD_MAX_GROUPS && many[PASSWD_MAX_GROUPS - 1] == 1000 + PASSWD_MAX_GROUPS - 1 &&
		      many[PASSWD_MAX_GROUPS] == 4242,
	      "100 groups capped at %d", PASSWD_MAX_GROUPS);
	free(t);

	/* An over-long member list is skipped, not truncated to a match. */
	size_t big = 4096;
	t = malloc(big + 64);
	off = (size_t)sprintf(t, "huge:x:7:alice,");
	memset(t + off, 'z', big);
	off += big;
	off += (size_t)sprintf(t + off, "\nok:x:8:alice\n");
	r = passwd_groups(t, off, "alice", g, PASSWD_MAX_GROUPS);
	CHECK(r == 1 && g[0] == 8, "an over-long group line is skipped (%d)", r);
	free(t);
}

int main(void)
{
	test_lookup_by_name();
	test_lookup_by_uid();
	test_bad_specs_and_lines();
	test_long_lines();
	test_groups();
	return tap_done();
}
