/* The port proxy's shared state (proxy.c) and connections (conn.c). */
#pragma once
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "engine/ports.h"

#define PROXY_TOKEN_NAME "cove_token"

struct pconn;

struct proxy {
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *resume; /* re-enables the listener after an accept error */
	int fd;               /* bound, until proxy_serve takes it */
	char listen[64];
	char domain[128];
	int port;
	struct pconn *conns;
	int count;
};
extern struct proxy proxy;

/* Where a connection is in its client's byte stream. */
enum pstate {
	PS_HEAD,       /* waiting for a request head */
	PS_BODY,       /* remaining bytes of a Content-Length body */
	PS_CHUNK_SIZE, /* a chunk-size line */
	PS_CHUNK_DATA, /* remaining bytes of a chunk and its CRLF */
	PS_TRAILER,    /* trailer lines up to the blank one */
	PS_RAW,        /* after an upgrade: bytes both ways */
};

struct pconn {
	struct pconn *prev, *next;
	struct bufferevent *cli, *up; /* up: NULL until the first head is through */
	char peer[64];                /* the client's address, for X-Forwarded-For */
	char id[16];                  /* the sandbox and port the first request chose */
	int port;
	enum pstate state;
	uint64_t remaining;
	bool v6;      /* the port's ::1 was tried (127.0.0.1 refused) */
	bool up_seen; /* a byte came from the port */
	bool cli_eof, up_eof;
	bool closing;    /* answered by the proxy: closed once that is sent */
	bool set_cookie; /* the first answer gets the token's cookie */
	char token[PORT_TOKEN_LEN + 1];
};

void pconn_new(struct event_base *base, int fd, const struct sockaddr *sa);
void pconn_free(struct pconn *c);
