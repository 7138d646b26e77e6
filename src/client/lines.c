/* NDJSON lines out of a streamed body (client.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int client_lines_feed(void *lines, const char *buf, size_t n)
{
	struct client_lines *l = lines;
	while (n > 0) {
		const char *nl = memchr(buf, '\n', n);
		size_t take = nl ? (size_t)(nl - buf) : n;
		if (l->len + take + 1 > l->cap) {
			size_t cap = (l->len + take + 1) * 2;
			char *bigger = cap <= MAX_EVENT_LINE ? realloc(l->line, cap) : NULL;
			if (!bigger)
				return 1;
			l->line = bigger;
			l->cap = cap;
		}
		memcpy(l->line + l->len, buf, take);
		l->len += take;
		if (!nl)
			break;
		l->line[l->len] = '\0';
		size_t len = l->len;
		l->len = 0;
		if (l->fn(l->arg, l->line, len) != 0)
			return 1;
		buf += take + 1;
		n -= take + 1;
	}
	return 0;
}

const char *client_line_type(json_t *j, char *code, char *message)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	if (!type && json_object_get(j, "error"))
		type = "error"; /* an error answer instead of the stream */
	if (type && strcmp(type, "error") == 0) {
		const char *c = "internal", *m = "";
		json_unpack(j, "{s:{s?s, s?s}}", "error", "code", &c, "message", &m);
		snprintf(code, 32, "%s", c);
		snprintf(message, 512, "%s", m);
	}
	return type;
}
