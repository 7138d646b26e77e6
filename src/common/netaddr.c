#include "common/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* Decimal digits only, no sign, no spaces: "07070" is 7070, "" and "+1" are
 * refused. */
static int parse_port(const char *s, in_port_t *ret)
{
	unsigned v = 0;
	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*ret = htons((in_port_t)v);
	return 0;
}

int netaddr_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon;
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;

	if (!s)
		return -EINVAL;
	if (s[0] == '[') {
		/* "[v6]:port": the brackets keep the address's colons apart
		 * from the port's. */
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, end - s - 1);
		host[end - s - 1] = '\0';
		if (inet_pton(AF_INET6, host, &v6->sin6_addr) != 1 || parse_port(end + 2, &v6->sin6_port) < 0)
			return -EINVAL;
		v6->sin6_family = AF_INET6;
		*ret_len = sizeof(*v6);
	} else {
		colon = strchr(s, ':');
		if (!colon || strchr(colon + 1, ':') || (size_t)(colon - s) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, colon - s);
		host[colon - s] = '\0';
		if (strcmp(host, "localhost") == 0)
			strcpy(host, "127.0.0.1");
		if (inet_pton(AF_INET, host, &v4->sin_addr) != 1 || parse_port(colon + 1, &v4->sin_port) < 0)
			return -EINVAL;
		v4->sin_family = AF_INET;
		*ret_len = sizeof(*v4);
	}
	*ret = ss;
	return 0;
}

void netaddr_format(const struct sockaddr *sa, char *buf, size_t cap)
{
	char host[INET6_ADDRSTRLEN];
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
		snprintf(buf, cap, "%s:%u", host, ntohs(v4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
		snprintf(buf, cap, "[%s]:%u", host, ntohs(v6->sin6_port));
	} else {
		snprintf(buf, cap, "?");
	}
}
