/* TCP addresses as users write them: "127.0.0.1:7070", "[::1]:7070",
 * "localhost:7070". Shared by coved's --listen and the client's --host.
 * Pure: nothing here resolves a name, so a flag means the same address on
 * every machine and in a static binary (no NSS). */
#pragma once
#include <stddef.h>
#include <sys/socket.h>

/* "ADDR:PORT" into *ret and *ret_len. ADDR is a dotted IPv4 address, an
 * IPv6 address in brackets, or "localhost" (127.0.0.1); PORT is 0 to 65535
 * in decimal (0: any free port, for a listener). 0, or -EINVAL with *ret
 * untouched. */
int netaddr_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);
/* An IPv4 or IPv6 address back as "ADDR:PORT" ("[ADDR]:PORT" for IPv6);
 * "?" for another family. buf holds at least 64 bytes. */
void netaddr_format(const struct sockaddr *sa, char *buf, size_t cap);
