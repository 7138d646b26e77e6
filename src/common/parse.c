#include "common/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int parse_size(const char *s, uint64_t *ret)
{
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	case '\0':
	case 'B':
		break;
	default:
		return -1;
	}
	if (shift)
		end++;
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*ret = (uint64_t)v << shift;
	return 0;
}

int parse_cpus(const char *s, uint32_t *ret)
{
	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v <= 0 || v > 1024)
		return -1;
	uint32_t m = (uint32_t)(v * 1000 + 0.5);
	if (m == 0)
		return -1;
	*ret = m;
	return 0;
}

bool env_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 255 || isdigit((unsigned char)name[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '_')
			return false;
	return true;
}

static const char id_alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";

/* "<prefix>" and 12 characters of [a-z2-7]; prefix is 3 bytes. */
static bool id_valid(const char *prefix, const char *id)
{
	if (!id || strlen(id) != 15 || strncmp(id, prefix, 3) != 0)
		return false;
	for (int i = 3; i < 15; i++)
		if (!strchr(id_alphabet, id[i]) || !id[i])
			return false;
	return true;
}

static int id_new(const char *prefix, char buf[16])
{
	unsigned char r[12];
	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return -errno;
	memcpy(buf, prefix, 3);
	for (int i = 0; i < 12; i++)
		buf[3 + i] = id_alphabet[r[i] & 31];
	buf[15] = '\0';
	return 0;
}

int random_hex(char *out, size_t bytes)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char r[64];
	if (bytes > sizeof(r))
		return -EINVAL;
	if (getrandom(r, bytes, 0) != (ssize_t)bytes)
		return -errno;
	for (size_t i = 0; i < bytes; i++) {
		out[2 * i] = digits[r[i] >> 4];
		out[2 * i + 1] = digits[r[i] & 15];
	}
	out[2 * bytes] = '\0';
	explicit_bzero(r, bytes); /* it may be a secret (a token) */
	return 0;
}

bool sandbox_id_valid(const char *id)
{
	return id_valid("sb_", id);
}

int sandbox_id_new(char buf[16])
{
	return id_new("sb_", buf);
}

bool snapshot_id_valid(const char *id)
{
	return id_valid("sn_", id);
}

int snapshot_id_new(char buf[16])
{
	return id_new("sn_", buf);
}
