/* E2B's front end's pure parsers: Connect's request envelopes (a malformed
 * one is refused with a reason, whatever its bytes) and undici's
 * multipart uploads. */
#include <stdint.h>
#include <string.h>

#include "daemon/e2b/connect.h"
#include "daemon/e2b/multipart.h"
#include "tap.h"

static int parse(const char *bytes, size_t n, json_t **ret, struct cove_err *err)
{
	*ret = NULL;
	memset(err, 0, sizeof(*err));
	return connect_parse_request((const uint8_t *)bytes, n, ret, err);
}

static void envelopes(void)
{
	json_t *j;
	struct cove_err err;
	static const char good[] = "\x00\x00\x00\x00\x0d{\"path\":\"/d\"}";
	CHECK(parse(good, sizeof(good) - 1, &j, &err) == 0 && j &&
		      strcmp(json_string_value(json_object_get(j, "path")), "/d") == 0,
	      "one envelope with a JSON object: parsed");
	json_decref(j);
	struct {
		const char *bytes;
		size_t n;
		const char *why;
	} bad[] = {
		{ "", 0, "too short" },
		{ "\x00\x00\x00", 3, "too short" },
		{ "\x01\x00\x00\x00\x02{}", 7, "compressed" },
		{ "\x02\x00\x00\x00\x02{}", 7, "flags" },
		{ "\x00\x00\x00\x00\x05{}", 7, "says 5 bytes" },
		{ "\x00\x00\x00\x00\x02{}\x00", 8, "says 2 bytes" },
		{ "\x00\xff\xff\xff\xff{}", 7, "larger than" },
		{ "\x00\x00\x00\x00\x02[]", 7, "object" },
		{ "\x00\x00\x00\x00\x03{\"a", 8, "not JSON" },
		{ "\x00\x00\x00\x00\x0f{\"a\":1,\"a\":2} ", 20, "not JSON" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = parse(bad[i].bytes, bad[i].n, &j, &err);
		CHECK(r == -1 && !j && err.code == COVE_EINVAL && strstr(err.msg, bad[i].why),
		      "malformed envelope %zu refused: %s", i, err.msg);
	}
	CHECK(connect_parse_unary((const uint8_t *)"", 0, &j, &err) == 0 && json_object_size(j) == 0,
	      "an empty unary body is {}");
	json_decref(j);
	CHECK(connect_parse_unary((const uint8_t *)"nope", 4, &j, &err) == -1,
	      "a unary body that is not JSON: refused");
	uint8_t hdr[5];
	connect_envelope_header(CONNECT_FLAG_END, 0x01020304, hdr);
	CHECK(memcmp(hdr, "\x02\x01\x02\x03\x04", 5) == 0, "envelope header: flags, then big-endian length");
	CHECK(strcmp(connect_code_of(COVE_ENOTFOUND), "not_found") == 0 && connect_status_of("not_found") == 404 &&
		      connect_status_of("already_exists") == 409 && connect_status_of("bogus") == 500,
	      "codes and statuses as Connect has them");
}

/* A client stream's body, one envelope after the other. */
static void client_stream(void)
{
	static const char body[] = "\x00\x00\x00\x00\x02{}"
				   "\x02\x00\x00\x00\x08{\"a\":[]}"
				   "\x00\x00\x00\x00\x09{\"b\":1}";
	size_t off = 0;
	uint8_t flags = 9;
	json_t *j = NULL;
	struct cove_err err = { 0 };
	CHECK(connect_next((const uint8_t *)body, sizeof(body) - 1, &off, &flags, &j, &err) == 0 && off == 7 &&
		      flags == 0 && json_object_size(j) == 0,
	      "the first envelope: {}, offset 7");
	json_decref(j);
	CHECK(connect_next((const uint8_t *)body, sizeof(body) - 1, &off, &flags, &j, &err) == 0 && off == 20 &&
		      flags == CONNECT_FLAG_END && json_is_array(json_object_get(j, "a")),
	      "the second: its end-of-stream flag");
	json_decref(j);
	j = NULL;
	CHECK(connect_next((const uint8_t *)body, sizeof(body) - 1, &off, &flags, &j, &err) == -1 && off == 20 && !j &&
		      strstr(err.msg, "says 9 bytes but 7 follow"),
	      "a cut one: refused, the offset unmoved (%s)", err.msg);
	static const char odd[] = "\x04\x00\x00\x00\x02{}";
	off = 0;
	memset(&err, 0, sizeof(err));
	CHECK(connect_next((const uint8_t *)odd, sizeof(odd) - 1, &off, &flags, &j, &err) == -1 && off == 0 &&
		      strstr(err.msg, "unknown flags"),
	      "unknown flags: refused (%s)", err.msg);
}

static void multipart(void)
{
	static const char body[] =
		"------b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/a/x.txt\"\r\n"
		"Content-Type: application/octet-stream\r\n\r\nhello\r\n"
		"------b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/b/%22q%22\"\r\n\r\n"
		"\r\n--\r\n"
		"------b--\r\n";
	struct part parts[4];
	int n = 0;
	struct cove_err err = { 0 };
	char boundary[64];
	CHECK(multipart_boundary("multipart/form-data; boundary=----b", boundary, sizeof(boundary)) == 0 &&
		      strcmp(boundary, "----b") == 0,
	      "the boundary from the Content-Type");
	CHECK(multipart_boundary("multipart/form-data", boundary, sizeof(boundary)) == -1, "no boundary: -1");
	int r = multipart_parse((const unsigned char *)body, sizeof(body) - 1, "----b", parts, 4, &n, &err);
	CHECK(r == 0 && n == 2, "two parts (%d: %s)", n, err.msg);
	CHECK(n == 2 && strcmp(parts[0].path, "/a/x.txt") == 0 && parts[0].len == 5 &&
		      memcmp(parts[0].data, "hello", 5) == 0,
	      "the first part's filename and bytes");
	CHECK(n == 2 && strcmp(parts[1].path, "/b/\"q\"") == 0 && parts[1].len == 4 &&
		      memcmp(parts[1].data, "\r\n--", 4) == 0,
	      "the second's: escapes undone, bytes that look like a delimiter kept");
	CHECK(multipart_parse((const unsigned char *)body, sizeof(body) - 1, "----b", parts, 1, &n, &err) == -1,
	      "more parts than allowed: refused");
	static const char cut[] = "------b\r\nContent-Disposition: form-data; filename=\"/x\"\r\n\r\nhel";
	CHECK(multipart_parse((const unsigned char *)cut, sizeof(cut) - 1, "----b", parts, 4, &n, &err) == -1 &&
		      err.code == COVE_EINVAL,
	      "a body cut short: refused");
	CHECK(multipart_parse((const unsigned char *)"junk", 4, "----b", parts, 4, &n, &err) == -1,
	      "no delimiter at all: refused");
}

int main(void)
{
	envelopes();
	client_stream();
	multipart();
	return tap_done();
}
