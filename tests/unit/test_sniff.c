/* src/net/sniff.c: the server name of a TLS ClientHello and the Host of an
 * HTTP request, as the egress proxy reads them from a sandbox's first
 * bytes, whole, byte by byte, split over records, and malformed. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "net/sniff.h"
#include "tap.h"

/* A ClientHello: 2 version, 32 random, session id, 2 suites, 1 compression,
 * then extensions: a padding one, the server name (if sni), another. */
static size_t hello_body(uint8_t *b, const char *sni, int sni_twice)
{
	size_t n = 0;
	b[n++] = 3, b[n++] = 3;
	memset(b + n, 0xab, 32), n += 32;
	b[n++] = 4, memset(b + n, 7, 4), n += 4;
	b[n++] = 0, b[n++] = 4, b[n++] = 0x13, b[n++] = 1, b[n++] = 0x13, b[n++] = 2;
	b[n++] = 1, b[n++] = 0;
	size_t ext_len_at = n;
	n += 2;
	b[n++] = 0, b[n++] = 21, b[n++] = 0, b[n++] = 3, b[n++] = 0, b[n++] = 0, b[n++] = 0; /* padding */
	for (int k = 0; sni && k < 1 + sni_twice; k++) {
		size_t l = strlen(sni);
		b[n++] = 0, b[n++] = 0; /* server_name */
		b[n++] = (uint8_t)((l + 5) >> 8), b[n++] = (uint8_t)(l + 5);
		b[n++] = (uint8_t)((l + 3) >> 8), b[n++] = (uint8_t)(l + 3);
		b[n++] = 0, b[n++] = (uint8_t)(l >> 8), b[n++] = (uint8_t)l;
		memcpy(b + n, sni, l), n += l;
	}
	b[n++] = 0, b[n++] = 43, b[n++] = 0, b[n++] = 3, b[n++] = 2, b[n++] = 3, b[n++] = 4; /* versions */
	size_t el = n - ext_len_at - 2;
	b[ext_len_at] = (uint8_t)(el >> 8), b[ext_len_at + 1] = (uint8_t)el;
	return n;
}

/* The handshake message in records of at most frag bytes each. */
static size_t hello(uint8_t *out, const char *sni, size_t frag, int sni_twice)
{
	uint8_t hs[4096];
	size_t bl = hello_body(hs + 4, sni, sni_twice);
	hs[0] = 1, hs[1] = 0, hs[2] = (uint8_t)(bl >> 8), hs[3] = (uint8_t)bl;
	size_t total = bl + 4, n = 0;
	for (size_t off = 0; off < total; off += frag) {
		size_t k = total - off < frag ? total - off : frag;
		out[n++] = 22, out[n++] = 3, out[n++] = 1, out[n++] = (uint8_t)(k >> 8), out[n++] = (uint8_t)k;
		memcpy(out + n, hs + off, k), n += k;
	}
	return n;
}

/* Every prefix but the whole is SNIFF_MORE; the whole gives want. */
static int every_prefix(enum sniff_result (*fn)(const uint8_t *, size_t, char *), const uint8_t *b, size_t n,
			enum sniff_result want, const char *want_name)
{
	char name[SNIFF_NAME_MAX + 1];
	for (size_t i = 0; i < n; i++)
		if (fn(b, i, name) != SNIFF_MORE)
			return 0;
	name[0] = '\0';
	return fn(b, n, name) == want && (!want_name || strcmp(name, want_name) == 0);
}

static void test_tls(void)
{
	uint8_t b[8192];
	char name[SNIFF_NAME_MAX + 1];
	size_t n = hello(b, "pkg.example.test", 16384, 0);
	CHECK(every_prefix(sniff_tls, b, n, SNIFF_NAME, "pkg.example.test"),
	      "TLS: the server name, at every prefix MORE");
	n = hello(b, "split.example.test", 7, 0);
	CHECK(every_prefix(sniff_tls, b, n, SNIFF_NAME, "split.example.test"),
	      "TLS: a ClientHello split over records of 7 bytes");
	n = hello(b, "Trailing.Example.Test.", 16384, 0);
	CHECK(sniff_tls(b, n, name) == SNIFF_NAME && strcmp(name, "Trailing.Example.Test") == 0,
	      "TLS: one trailing dot dropped, case kept (the policy compares without case)");
	n = hello(b, NULL, 16384, 0);
	CHECK(every_prefix(sniff_tls, b, n, SNIFF_NONE, NULL), "TLS: no server name is NONE (judged by address)");
	n = hello(b, "a.example.test", 16384, 1);
	CHECK(sniff_tls(b, n, name) == SNIFF_BAD, "TLS: two server_name extensions refused");
	static const char *const bad[] = { "a\0b.test", "a b.test", "a..test",     ".a.test",
					   "a.test..",  "a/b.test", "1.2.3.4:443", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t body[512];
		/* hello() takes a C string: a NUL is put in after building. */
		const char *s = i == 0 ? "aXb.test" : bad[i];
		n = hello(body, s, 16384, 0);
		if (i == 0)
			((uint8_t *)memmem(body, n, "aXb", 3))[1] = 0;
		CHECK(sniff_tls(body, n, name) == SNIFF_BAD, "TLS: server name '%s' refused",
		      i == 0 ? "a\\0b.test" : s);
	}
	CHECK(sniff_tls((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name) == SNIFF_BAD, "TLS: HTTP on 443 refused");
	CHECK(sniff_tls((const uint8_t *)"\x16\x03\x01\x00\x00", 5, name) == SNIFF_BAD, "TLS: an empty record refused");
	CHECK(sniff_tls((const uint8_t *)"\x16\x03\x01\x00\x04\x02\x00\x00\x00", 9, name) == SNIFF_BAD,
	      "TLS: a ServerHello refused");
	CHECK(sniff_tls((const uint8_t *)"\x16\x03\x01\x00\x04\x01\xff\xff\xff", 9, name) == SNIFF_BAD,
	      "TLS: a ClientHello longer than SNIFF_MAX refused at once");
	n = hello(b, "cut.example.test", 16384, 0);
	b[4 + 5 + 2 + 32] = 33; /* session id longer than 32 */
	CHECK(sniff_tls(b, n, name) == SNIFF_BAD, "TLS: a session id of 33 bytes refused");
	n = hello(b, "cut.example.test", 16384, 0);
	b[4]--, b[8]--; /* the record and the message one byte shorter: extensions run past */
	CHECK(sniff_tls(b, n - 1, name) == SNIFF_BAD, "TLS: extensions past the message's end refused");
}

static int http(const char *req, enum sniff_result want, const char *want_name)
{
	return every_prefix(sniff_http, (const uint8_t *)req, strlen(req), want, want_name);
}

static void test_http(void)
{
	char name[SNIFF_NAME_MAX + 1];
	CHECK(http("GET / HTTP/1.1\r\nHost: pkg.example.test\r\nAccept: */*\r\n\r\n", SNIFF_NAME, "pkg.example.test"),
	      "HTTP: Host, at every prefix MORE");
	CHECK(http("GET /x HTTP/1.1\r\nUser-Agent: t\r\nhOsT:\t web.example.test:8080 \r\n\r\n", SNIFF_NAME,
		   "web.example.test"),
	      "HTTP: Host in any case, white space and port dropped");
	CHECK(http("GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", SNIFF_NAME, "2001:db8::1"),
	      "HTTP: an IPv6 literal without brackets");
	CHECK(http("GET / HTTP/1.1\r\nHost: 198.51.100.2\r\n\r\n", SNIFF_NAME, "198.51.100.2"),
	      "HTTP: an IPv4 literal");
	CHECK(http("GET http://abs.example.test/p HTTP/1.1\r\nHost: abs.example.test\r\n\r\n", SNIFF_NAME,
		   "abs.example.test"),
	      "HTTP: an absolute target that agrees with Host");
	CHECK(http("GET http://abs.example.test:80/p HTTP/1.0\r\n\r\n", SNIFF_NAME, "abs.example.test"),
	      "HTTP: an absolute target alone");
	CHECK(http("GET / HTTP/1.0\r\nAccept: */*\r\n\r\n", SNIFF_NONE, NULL), "HTTP: no Host is NONE");
	static const char *const bad[] = {
		"GET http://a.example.test/ HTTP/1.1\r\nHost: b.example.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.example.test\r\nHost: b.example.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.example.test\r\n folded\r\n\r\n",
		"GET http://user@a.example.test/ HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a b.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test:8x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: a.test\r\n\r\n",
		"get / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nBad Header: x\r\nHost: a.test\r\n\r\n",
		"\x16\x03\x01\x00\x10",
		"SSH-2.0-OpenSSH_9.2\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(sniff_http((const uint8_t *)bad[i], strlen(bad[i]), name) == SNIFF_BAD,
		      "HTTP: bad request %zu refused", i);
	/* A NUL in the value: the comparison and the dial would see two names. */
	static const char nul[] = "GET / HTTP/1.1\r\nHost: a.test\0.evil.test\r\n\r\n";
	CHECK(sniff_http((const uint8_t *)nul, sizeof(nul) - 1, name) == SNIFF_BAD, "HTTP: a NUL in Host refused");
}

static int one(const char *req, const char *want)
{
	uint8_t out[1024];
	size_t n = sniff_http_one_request((const uint8_t *)req, strlen(req), out, sizeof(out));
	return n == strlen(want) && memcmp(out, want, n) == 0;
}

static void test_one_request(void)
{
	CHECK(one("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		  "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"),
	      "one request: Connection: close added");
	CHECK(one("GET / HTTP/1.1\r\nConnection: keep-alive\r\nHost: a.test\r\nKeep-Alive: timeout=5\r\n"
		  "Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
		  "GET / HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"),
	      "one request: keep-alive headers replaced");
	CHECK(one("GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		  "GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: upgrade, close\r\n\r\n"),
	      "one request: an upgrade stays asked for");
	CHECK(one("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 9\r\n\r\nbody\r\nGET",
		  "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 9\r\nConnection: close\r\n\r\nbody\r\nGET"),
	      "one request: the bytes after the headers kept as they are");
	uint8_t out[64];
	CHECK(sniff_http_one_request((const uint8_t *)"GET / HTTP/1.1\r\n", 16, out, sizeof(out)) == 0,
	      "one request: headers not whole: 0");
}

int main(void)
{
	test_tls();
	test_http();
	test_one_request();
	return tap_done();
}
