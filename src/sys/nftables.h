/* nftables through libnftables: coved hands it rule text in nft's own
 * language, one transaction per call.
 *
 * Why libnftables and not the `nft` program: it is the same parser and the
 * same netlink code, but in coved's process: no fork and exec of nft per
 * sandbox start (coved's forks are what a create costs), an error comes
 * back as text in a buffer rather than on another process's stderr, and a
 * listing comes back as JSON that jansson reads, not as text to scrape.
 * A whole script is one netlink batch, which the kernel applies atomically:
 * a sandbox's rules are all there or none are.
 *
 * Calls run on a thread of libnftables' own (see nftables.c), which the
 * first call starts: every call talks to the network namespace that first
 * caller's thread was in (coved's loop: the host's). */
#pragma once
#include "common/error.h"

/* Runs script (commands separated by newlines). 0, or -1 with err holding
 * nft's message and what was asked (and nothing applied). */
int nftables_run(const char *script, struct cove_err *err);
/* Runs a list command with JSON output; *ret_json is the malloc'ed
 * output. 0, or -1 with err set. */
int nftables_list_json(const char *cmd, char **ret_json, struct cove_err *err);
