#include "net/dnsmsg.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The name at msg[*at], as text into out; *at moves past it. */
static int read_name(const uint8_t *msg, size_t len, size_t *at, char out[DNS_NAME_MAX + 1])
{
	size_t o = 0, p = *at;
	for (;;) {
		if (p >= len)
			return -EINVAL;
		uint8_t l = msg[p++];
		if (l == 0)
			break;
		/* 0xc0: a compression pointer; 0x40, 0x80: reserved. */
		if (l > 63 || p + l > len)
			return -EINVAL;
		if (o + (o ? 1 : 0) + l > DNS_NAME_MAX)
			return -EINVAL;
		if (o)
			out[o++] = '.';
		for (uint8_t i = 0; i < l; i++) {
			unsigned char c = msg[p + i];
			/* A name in a policy is letters, digits and hyphens: any
			 * other byte (a dot within a label, a NUL) would let a
			 * name read as another. */
			if (!isalnum(c) && c != '-' && c != '_')
				return -EINVAL;
			out[o++] = (char)tolower(c);
		}
		p += l;
	}
	out[o] = '\0';
	*at = p;
	return 0;
}

int dnsmsg_question(const uint8_t *msg, size_t len, struct dns_question *ret)
{
	if (len < DNS_HEADER)
		return -EINVAL;
	struct dns_question q = { .id = get16(msg), .response = msg[2] & 0x80 };
	uint16_t opcode = (msg[2] >> 3) & 0xf, qd = get16(msg + 4), an = get16(msg + 6);
	if (opcode != 0 || qd != 1 || (!q.response && an != 0))
		return -EINVAL;
	size_t at = DNS_HEADER;
	if (read_name(msg, len, &at, q.name) < 0 || at + 4 > len)
		return -EINVAL;
	q.type = get16(msg + at);
	q.class = get16(msg + at + 2);
	q.end = at + 4;
	*ret = q;
	return 0;
}

size_t dnsmsg_reply_error(const uint8_t *query, const struct dns_question *q, int rcode, uint8_t *out, size_t cap)
{
	if (q->end > cap || q->end < DNS_HEADER)
		return 0;
	memcpy(out, query, q->end);
	out[2] = (uint8_t)(0x80 | (query[2] & 0x79)); /* QR, the opcode and RD kept, AA and TC clear */
	out[3] = (uint8_t)(0x80 | (rcode & 0xf));     /* RA */
	memset(out + 6, 0, 6);                        /* no answer, authority or additional records */
	return q->end;
}

bool dnsmsg_answers(const uint8_t *answer, size_t len, const struct dns_question *q)
{
	struct dns_question a;
	if (len < DNS_HEADER || !(answer[2] & 0x80))
		return false;
	/* A refusal may come without the question; accept only one with it. */
	return dnsmsg_question(answer, len, &a) == 0 && a.response && a.type == q->type && a.class == q->class &&
	       strcmp(a.name, q->name) == 0;
}

void dnsmsg_set_id(uint8_t *msg, uint16_t id)
{
	msg[0] = (uint8_t)(id >> 8);
	msg[1] = (uint8_t)id;
}

int dnsmsg_resolv_conf(const char *text, char (*ret)[46], int max)
{
	int n = 0;
	for (const char *line = text; line && *line && n < max;) {
		const char *end = strchr(line, '\n');
		size_t ll = end ? (size_t)(end - line) : strlen(line);
		char buf[128];
		if (ll < sizeof(buf)) {
			memcpy(buf, line, ll);
			buf[ll] = '\0';
			char word[16], addr[64];
			unsigned char bin[16];
			/* "nameserver ADDR", an IPv6 one possibly with a %zone. */
			if (sscanf(buf, " %15s %63s", word, addr) == 2 && strcmp(word, "nameserver") == 0) {
				addr[strcspn(addr, "%")] = '\0';
				if (inet_pton(AF_INET, addr, bin) == 1 || inet_pton(AF_INET6, addr, bin) == 1)
					strcpy(ret[n++], addr);
			}
		}
		line = end ? end + 1 : NULL;
	}
	return n;
}
