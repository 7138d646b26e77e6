/* What sandboxes.c and initconn.c share: cove-init's messages. */
#pragma once
#include <sys/types.h>

#include "common/wire.h"
#include "engine/engine.h"

/* One packet from init: a header, and the fds that came with it (nfds of
 * them). Returns the recv result. */
ssize_t sandbox_recv_packet(int conn, struct wire_hdr *h, int *fds, int *nfds);
/* The packet h (and its fds, all taken) to whom it is for. */
void sandbox_dispatch(struct sandbox *sb, const struct wire_hdr *h, int *fds, int nfds);
