#include "common/wire.h"

#include <errno.h>
#include <string.h>

/* Payload layout: u32 argc, u32 envc, then NUL-terminated strings:
 * user, cwd, argv[0..argc), envp[0..envc). */

static int put_str(char *buf, size_t cap, size_t *off, const char *s)
{
	size_t n = strlen(s) + 1;
	if (n > cap - *off)
		return -E2BIG;
	memcpy(buf + *off, s, n);
	*off += n;
	return 0;
}

static size_t count_strs(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

long wire_encode_spawn(char *buf, size_t cap, struct wire_hdr *hdr, const char *user, const char *cwd,
		       const char *const *argv, const char *const *envp)
{
	size_t argc = count_strs(argv), envc = count_strs(envp);
	if (argc == 0 || argc > WIRE_MAX_ARGS || envc > WIRE_MAX_ARGS)
		return -EINVAL;
	/* Refuse what the decoder would refuse, so the caller gets the error
	 * rather than a packet that init rejects. */
	for (size_t i = 0; i < envc; i++)
		if (!strchr(envp[i], '='))
			return -EINVAL;
	if (cap > WIRE_MAX_PACKET)
		cap = WIRE_MAX_PACKET;
	size_t off = sizeof(*hdr);
	if (off + 8 > cap)
		return -E2BIG;
	uint32_t n32[2] = { (uint32_t)argc, (uint32_t)envc };
	memcpy(buf + off, n32, 8);
	off += 8;
	int r = put_str(buf, cap, &off, user ? user : "");
	if (r == 0)
		r = put_str(buf, cap, &off, cwd ? cwd : "");
	for (size_t i = 0; r == 0 && i < argc; i++)
		r = put_str(buf, cap, &off, argv[i]);
	for (size_t i = 0; r == 0 && i < envc; i++)
		r = put_str(buf, cap, &off, envp[i]);
	if (r < 0)
		return r;
	hdr->type = WIRE_SPAWN;
	hdr->payload_len = off - sizeof(*hdr);
	memcpy(buf, hdr, sizeof(*hdr));
	return (long)off;
}

/* Take the next NUL-terminated string starting at *off, or NULL. */
static const char *take_str(const char *p, size_t len, size_t *off)
{
	if (*off >= len)
		return NULL;
	const char *s = p + *off;
	const char *nul = memchr(s, '\0', len - *off);
	if (!nul)
		return NULL;
	*off += (size_t)(nul - s) + 1;
	return s;
}

int wire_decode_spawn(const char *payload, size_t len, struct wire_spawn *ret)
{
	uint32_t argc, envc;
	if (len < 8)
		return -EINVAL;
	memcpy(&argc, payload, 4);
	memcpy(&envc, payload + 4, 4);
	if (argc == 0 || argc > WIRE_MAX_ARGS || envc > WIRE_MAX_ARGS)
		return -EINVAL;
	size_t off = 8;
	ret->user = take_str(payload, len, &off);
	ret->cwd = take_str(payload, len, &off);
	if (!ret->user || !ret->cwd)
		return -EINVAL;
	for (uint32_t i = 0; i < argc; i++)
		if (!(ret->argv[i] = take_str(payload, len, &off)))
			return -EINVAL;
	for (uint32_t i = 0; i < envc; i++)
		if (!(ret->envp[i] = take_str(payload, len, &off)) || !strchr(ret->envp[i], '='))
			return -EINVAL;
	if (off != len)
		return -EINVAL;
	ret->argv[argc] = NULL;
	ret->envp[envc] = NULL;
	ret->argc = argc;
	ret->envc = envc;
	return 0;
}

int wire_check_hdr(const void *pkt, size_t len, struct wire_hdr *ret)
{
	if (len < sizeof(*ret))
		return -EINVAL;
	memcpy(ret, pkt, sizeof(*ret));
	if (ret->payload_len != len - sizeof(*ret) || ret->type < WIRE_SPAWN || ret->type > WIRE_TYPE_LAST)
		return -EINVAL;
	return 0;
}

/* Path payload layout: u32 mode, then NUL-terminated path, path2, user. */
long wire_encode_path(char *buf, size_t cap, struct wire_hdr *hdr, const struct wire_path *p)
{
	if (!p->path || p->path[0] != '/')
		return -EINVAL;
	if (cap > WIRE_MAX_PACKET)
		cap = WIRE_MAX_PACKET;
	size_t off = sizeof(*hdr);
	if (off + 4 > cap)
		return -E2BIG;
	memcpy(buf + off, &p->mode, 4);
	off += 4;
	int r = put_str(buf, cap, &off, p->path);
	if (r == 0)
		r = put_str(buf, cap, &off, p->path2 ? p->path2 : "");
	if (r == 0)
		r = put_str(buf, cap, &off, p->user ? p->user : "");
	if (r < 0)
		return r;
	hdr->payload_len = off - sizeof(*hdr);
	memcpy(buf, hdr, sizeof(*hdr));
	return (long)off;
}

int wire_decode_path(const char *payload, size_t len, struct wire_path *ret)
{
	if (len < 4)
		return -EINVAL;
	memcpy(&ret->mode, payload, 4);
	size_t off = 4;
	ret->path = take_str(payload, len, &off);
	ret->path2 = take_str(payload, len, &off);
	ret->user = take_str(payload, len, &off);
	if (!ret->path || !ret->path2 || !ret->user || ret->path[0] != '/' || off != len)
		return -EINVAL;
	return 0;
}

const char *wire_stage_name(int stage)
{
	switch (stage) {
	case WIRE_STAGE_FORK:
		return "fork";
	case WIRE_STAGE_USER:
		return "user";
	case WIRE_STAGE_CWD:
		return "cwd";
	case WIRE_STAGE_EXEC:
		return "exec";
	case WIRE_STAGE_STDIO:
		return "stdio";
	default:
		return "spawn";
	}
}

int wire_entry_check(const struct wire_entry *e)
{
	if (e->type < WIRE_ENTRY_END || e->type > WIRE_ENTRY_TYPE_LAST || e->path_len > WIRE_ENTRY_MAX_PATH ||
	    e->link_len > WIRE_ENTRY_MAX_PATH || e->mode > 07777)
		return -EINVAL;
	if (e->type == WIRE_ENTRY_END ? e->link_len != 0 : e->path_len == 0)
		return -EINVAL;
	return 0;
}

bool wire_entry_path_valid(const char *path, size_t len)
{
	if (len == 0 || len > WIRE_ENTRY_MAX_PATH || memchr(path, '\0', len))
		return false;
	for (size_t i = 0; i < len;) {
		size_t n = 0;
		while (i + n < len && path[i + n] != '/')
			n++;
		if (n == 0 || (n == 1 && path[i] == '.') || (n == 2 && path[i] == '.' && path[i + 1] == '.'))
			return false;
		i += n;
		if (i < len && ++i == len) /* a trailing slash */
			return false;
	}
	return true;
}

int wire_entry_path_normalize(const char *name, char *out, size_t cap)
{
	size_t n = 0;
	for (const char *p = name; *p;) {
		size_t len = strcspn(p, "/");
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (n + (n > 0) + len + 1 > cap)
				return -ENAMETOOLONG;
			if (n > 0)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
		p += *p == '/';
	}
	if (cap > 0)
		out[n < cap ? n : cap - 1] = '\0';
	return n == 0 ? 1 : 0;
}
