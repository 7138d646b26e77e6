/* A sandbox's network in the engine: its mode (spec.egress), its policy
 * (spec.allow_out, spec.deny_out: arrays of strings, kept with the spec so
 * that snapshots, restores and forks copy them), and, for a running egress
 * sandbox, what net/ made of them: addresses, rules, a DNS forwarder.
 *
 * A sandbox's addresses are a slot of the pool, stored with its spec
 * (spec.net_slot) so that a restart takes them back. Several coveds may
 * share a host (each its own data root, e.g. tests): they share the table
 * `inet cove` and must share the pool (the default, or one --subnet), a
 * new sandbox skips a slot whose gateway address is on the host already
 * (another coved's), and each coved removes only its own sandboxes'
 * veths and chains, never "everything not live" (that would be another
 * coved's live sandboxes).
 *
 * Nothing of net/ is touched (nor libnftables loaded) until the first
 * sandbox with egress: network_open only checks the pool. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The most entries of one list (net/policy.h's POLICY_MAX_ENTRIES). */
#define NETWORK_LIST_MAX 1024

struct engine;
struct sandbox;
struct sandbox_spec;
struct sandbox_net;

/* At engine_open: the host's routes and the pool (subnet, or NULL for the
 * default). A pool that overlaps a host route stops coved. */
int network_open(struct engine *d, const char *subnet, struct cove_err *err);
void network_close(struct engine *d);

/* Whether the spec's lists parse (a 400 naming the bad item if not), and
 * that an external sandbox does not ask for egress. */
int network_check(const struct sandbox_spec *s, struct cove_err *err);

/* Create (loaded false), before the runtime starts: the sandbox's
 * addresses (COVE_EFULL when the pool has none) and its parsed policy; in
 * new_root (a new root's subvolume, NULL for a restored or forked one,
 * which has it already) /etc/resolv.conf naming the resolver. At load
 * (loaded true): the addresses it had. A no-op for network "none". */
int network_prepare(struct engine *d, struct sandbox *sb, bool loaded, const char *new_root, struct cove_err *err);
/* Before a loaded sandbox boots anew (its init was gone): when another
 * coved took its addresses while this one was down (it had no veth yet,
 * so they looked free; the claim is the other's now), new ones. */
void network_readdress(struct engine *d, struct sandbox *sb);
/* The sandbox's nftables rules (and its egress proxy), network_attach's
 * first half, for a create to run while its runtime's child makes the
 * namespace: the rules name the veth before it exists, and the
 * transaction is then off the create's critical path. A no-op for network
 * "none"; network_attach skips what it did. */
int network_rules(struct engine *d, struct sandbox *sb, struct cove_err *err);
/* After the runtime started init (a new network namespace): veth, rules,
 * resolver. With reattached (init of a previous coved, still running: its
 * veth is there) only rules and resolver. */
int network_attach(struct engine *d, struct sandbox *sb, bool reattached, struct cove_err *err);
/* Everything of the sandbox's network, once its init is dead (its veth goes
 * with the namespace). NULL-safe on a sandbox without network. */
void network_release(struct engine *d, struct sandbox *sb);
/* After sandboxes_load: the network started if a sandbox has egress. The
 * leftovers of a crash are all sandboxes of this data root: rows in state
 * "deleting" (network_release on their finish) and roots with no row
 * (network_forget). */
void network_reconcile(struct engine *d);
/* The veth and rules of a sandbox this coved has no row for (an
 * interrupted create), if the network was ever started. */
void network_forget(struct engine *d, const char *id);

/* The typed request of PUT /v1/sandboxes/{id}/network: the new lists
 * (replace semantics), NULL-terminated arrays of strings. */
struct network_policy_req {
	const char *const *allow_out;
	size_t n_allow;
	const char *const *deny_out;
	size_t n_deny;
};
/* Checked (400, nothing changed), stored, then in force. 409 for a
 * sandbox with network "none" or not running. */
int network_set_policy(struct engine *d, struct sandbox *sb, const struct network_policy_req *req,
		       struct cove_err *err);

/* "network": {mode, allow_out, deny_out, and for a running egress
 * sandbox address, gateway, address6, gateway6, dns}. */
json_t *network_to_json(const struct sandbox *sb);
/* The modes for GET /v1/capabilities. */
json_t *network_modes_json(void);
