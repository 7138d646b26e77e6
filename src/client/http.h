/* A small HTTP/1.1 client over a unix socket or TCP, for libcove and the CLI.
 *
 * Why not libcurl: loading libcurl and its dependency tree costs more than
 * the whole `cove exec ID -- true` budget (a few ms); cove only speaks to its
 * own daemon, with Content-Length and chunked bodies. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Incremental response parser: feed bytes, get body bytes (dechunked) through
 * on_body. Pure: no IO, used by the client and by the fuzz harness. */
enum http_parse_state {
	HTTP_PARSE_HEAD,
	HTTP_PARSE_BODY,
	HTTP_PARSE_CHUNK_SIZE,
	HTTP_PARSE_CHUNK_DATA,
	HTTP_PARSE_CHUNK_CRLF,
	HTTP_PARSE_TRAILER,
	HTTP_PARSE_DONE,
	HTTP_PARSE_ERROR
};

typedef int (*http_body_cb)(void *arg, const char *buf, size_t len);

struct http_parser {
	enum http_parse_state state;
	int status;             /* after the head */
	int64_t content_length; /* -1 if none */
	int chunked;
	int keep_alive;     /* server allows reuse of the connection */
	uint64_t remaining; /* in the current body / chunk */
	char head[16384];   /* status line + headers, bounded */
	size_t head_len;
	int sub;                /* position inside a chunk-size, CRLF or trailer line */
	size_t line_len;        /* bytes of the current chunk-size line / of all trailers, bounded */
	char content_type[128]; /* truncated to fit */
	int64_t counts[2];      /* X-Cove-Entries, X-Cove-Deleted (an export's); -1 if absent */
	int no_body;            /* set by the caller after init for HEAD: no body whatever the headers say */
	int upgrade;            /* set by the caller after init when it asked for an upgrade: a 101 ends the response */
	const char *why;        /* static reason once in HTTP_PARSE_ERROR */
	http_body_cb on_body;
	void *arg;
};

void http_parser_init(struct http_parser *p, http_body_cb on_body, void *arg);
/* Consume len bytes; returns the number consumed (stops after the response
 * ends, leaving the rest), or -1 with state HTTP_PARSE_ERROR on malformed
 * input or when on_body returns non-zero. The result does not depend on how
 * the input is split across calls. on_body is never called with len 0.
 * Interim 1xx responses are skipped; 101 is an error unless p->upgrade is
 * set, and then the end of the response (the bytes after its head are the
 * new protocol's, not consumed). */
long http_parser_feed(struct http_parser *p, const char *buf, size_t len);
/* To be called at EOF: a body without length/chunking ends there. 0 if the
 * response is complete, -1 if it was cut short. */
int http_parser_eof(struct http_parser *p);

/* Connect to a unix stream socket. Returns fd or -errno. */
int http_connect_unix(const char *path);
/* Connect over TCP to "ADDR:PORT" (see common/netaddr.h: numeric, no name
 * lookup). Returns fd or -errno (-EINVAL for a malformed addr). */
int http_connect_tcp(const char *addr);

struct http_response {
	int status;
	char *body; /* NUL-terminated, owned by the caller (free); NULL when streamed */
	size_t body_len;
	char content_type[128];
	int64_t counts[2]; /* as the parser's */
};

/* Send one request (Content-Length body, may be NULL) on fd and read the whole
 * response. ret is filled only on success, whatever the status code. When on_body is set, body bytes go there as they arrive and
 * ret->body stays NULL; otherwise the body is collected (up to max_body
 * bytes, else error). 0 or -1 with err set ("daemon closed the connection",
 * "malformed response", ...). extra_headers may be NULL or "Name: v\r\n..." */
int http_request(int fd, const char *method, const char *target, const char *extra_headers, const char *body,
		 size_t body_len, http_body_cb on_body, void *arg, size_t max_body, struct http_response *ret,
		 struct cove_err *err);

/* A request body read from fd as it is sent: len bytes (Content-Length),
 * or until EOF when len < 0 (chunked). progress, if set, hears the bytes
 * sent so far after each piece. */
struct http_body_source {
	int fd;
	long long len;
	void (*progress)(void *arg, unsigned long long done);
	void *arg;
};
/* As http_request, the body from src (a regular file by sendfile, else 64 KiB in memory at a
 * time whatever its size). A failure to read src: -1 with err set. With
 * on_body, a success's body of Content-Type type goes there as it comes
 * (as http_request_typed_stream's); http_request_from collects it. */
int http_request_from_stream(int fd, const char *method, const char *target, const char *extra_headers,
			     const struct http_body_source *src, http_body_cb on_body, void *arg, const char *type,
			     size_t max_other_body, struct http_response *ret, struct cove_err *err);
static inline int http_request_from(int fd, const char *method, const char *target, const char *extra_headers,
				    const struct http_body_source *src, size_t max_body, struct http_response *ret,
				    struct cove_err *err)
{
	return http_request_from_stream(fd, method, target, extra_headers, src, NULL, NULL, NULL, max_body, ret, err);
}

/* Send one request (head and Content-Length body, may be NULL) on fd and
 * read nothing: for a response that the caller reads at its own pace with
 * an http_parser (a stream it polls). 0 or -1 with err set. */
int http_send_request(int fd, const char *method, const char *target, const char *extra_headers, const char *body,
		      size_t body_len, struct cove_err *err);
/* Like http_request without a request body, but only the body of a
 * success (status < 300) whose Content-Type starts with type goes to
 * on_body: any other (an error) is collected into ret->body, up to
 * max_other_body bytes. */
/* Ask to switch fd's connection to protocol (a GET of target with
 * "Connection: Upgrade" and "Upgrade: protocol"). ret->status 101: from the
 * byte after the answer's head, which is read a byte at a time so that
 * none of what follows is taken, fd carries the new protocol. Any other
 * answer is read whole (its body in ret->body, as http_request's). 0 or -1
 * with err set. */
int http_request_upgrade(int fd, const char *target, const char *protocol, const char *extra_headers,
			 struct http_response *ret, struct cove_err *err);
int http_request_typed_stream(int fd, const char *method, const char *target, const char *type, http_body_cb on_body,
			      void *arg, size_t max_other_body, struct http_response *ret, struct cove_err *err);
