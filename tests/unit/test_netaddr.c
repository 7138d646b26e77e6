/* Unit tests for src/common/netaddr.c: the ADDR:PORT of coved's --listen
 * and of the client's --host, parsed and printed back. */
#include "common/netaddr.h"

#include <netinet/in.h>
#include <string.h>

#include "tap.h"

/* s parses, and prints back as want. */
static int round_trip(const char *s, const char *want)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char buf[64];
	if (netaddr_parse(s, &ss, &len) < 0)
		return 0;
	netaddr_format((struct sockaddr *)&ss, buf, sizeof(buf));
	if (strcmp(buf, want) != 0) {
		printf("# '%s' printed as '%s'\n", s, buf);
		return 0;
	}
	return len == (ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
}

/* s is refused, and *ret is left as it was. */
static int refused(const char *s)
{
	struct sockaddr_storage ss;
	socklen_t len = 4242;
	memset(&ss, 0x5a, sizeof(ss));
	return netaddr_parse(s, &ss, &len) < 0 && len == 4242 && ((unsigned char *)&ss)[0] == 0x5a;
}

int main(void)
{
	CHECK(round_trip("127.0.0.1:7070", "127.0.0.1:7070"), "IPv4");
	CHECK(round_trip("0.0.0.0:80", "0.0.0.0:80"), "IPv4 any");
	CHECK(round_trip("127.0.0.1:0", "127.0.0.1:0"), "port 0 (any free port)");
	CHECK(round_trip("127.0.0.1:65535", "127.0.0.1:65535"), "highest port");
	CHECK(round_trip("127.0.0.1:07070", "127.0.0.1:7070"), "leading zeros in the port are decimal");
	CHECK(round_trip("localhost:7070", "127.0.0.1:7070"), "localhost is 127.0.0.1");
	CHECK(round_trip("[::1]:7070", "[::1]:7070"), "IPv6 in brackets");
	CHECK(round_trip("[::]:7070", "[::]:7070"), "IPv6 any");
	CHECK(round_trip("[fe80::1:2]:1", "[fe80::1:2]:1"), "IPv6 with colons");

	const char *bad[] = { "",
			      "127.0.0.1",
			      "127.0.0.1:",
			      ":7070",
			      "127.0.0.1:65536",
			      "127.0.0.1:99999",
			      "127.0.0.1:123456",
			      "127.0.0.1:-1",
			      "127.0.0.1:+1",
			      "127.0.0.1: 1",
			      "127.0.0.1:1 ",
			      "127.0.0.1:0x10",
			      "127.0.0.256:1",
			      "127.0.0:1",
			      "example.com:80",
			      "::1:7070",
			      "[::1]7070",
			      "[::1]:",
			      "[::1:7070",
			      "[127.0.0.1]:1",
			      "[fe80::1%eth0]:1",
			      "["
			      "0000:0000:0000:0000:0000:0000:0000:0000:0000"
			      "]:1",
			      "1.2.3.4:5:6" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(refused(bad[i]), "refused: '%s'", bad[i]);
	CHECK(netaddr_parse(NULL, NULL, NULL) < 0, "NULL is refused");

	struct sockaddr sa = { .sa_family = AF_UNIX };
	char buf[64];
	netaddr_format(&sa, buf, sizeof(buf));
	CHECK(strcmp(buf, "?") == 0, "another family prints as ?");
	return tap_done();
}
