/* A sandbox's network in the engine (network.h): the engine's calls over
 * net/ (pool, veth and rules, policy, DNS). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/network.h"
#include "net/dns.h"
#include "net/egress.h"
#include "net/net.h"
#include "net/policy.h"
#include "net/pool.h"

struct engine_net {
	struct net_pool pool;
	struct net_forwarding fw;
	struct evdns_base *dns; /* the host's resolvers, for the egress proxies */
	bool started;           /* forwarding on, table made */
};

struct sandbox_net {
	struct net_addrs addrs;
	struct policy_list allow, deny;
	struct dns_forwarder *dns;
	struct egress_proxy *proxy; /* once its policy named a domain */
	const struct net_pool *pool;
	int claim_fd;  /* holds the host-wide lock on its addresses, or -1 */
	bool ruled;    /* rules made in this run (network_rules) */
	bool attached; /* veth and rules made in this run */
};

int network_open(struct engine *d, const char *subnet, struct cove_err *err)
{
	struct net_host_routes routes = { 0 };
	uint8_t ula[5];
	struct engine_net *n = calloc(1, sizeof(*n));
	if (!n)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	net_pool_ula_id(ula);
	int r = net_host_routes_read(&routes, err);
	if (r == 0)
		r = net_pool_init(&n->pool, subnet && *subnet ? subnet : NULL, &routes, ula, err);
	net_host_routes_free(&routes);
	struct net_addrs resolver;
	if (r == 0 && net_pool_take(&n->pool, NET_RESOLVER_SLOT, &resolver) < 0)
		r = err_set(err, COVE_EINVAL, "--subnet: too small");
	if (r < 0) {
		free(n);
		return -1;
	}
	d->net = n;
	return 0;
}

void network_close(struct engine *d)
{
	if (!d->net)
		return;
	if (d->net->dns)
		evdns_base_free(d->net->dns, 0);
	net_pool_free(&d->net->pool);
	free(d->net);
	d->net = NULL;
}

/* The n strings of a JSON array into a fresh array (pointers into a). */
static const char **strings_of(json_t *a, size_t *n)
{
	*n = json_array_size(a);
	const char **v = calloc(*n + 1, sizeof(*v));
	for (size_t i = 0; v && i < *n; i++)
		v[i] = json_string_value(json_array_get(a, i));
	return v;
}

static int parse_list(const char *what, json_t *a, struct policy_list *ret, struct cove_err *err)
{
	size_t n;
	_cleanup_free_ const char **v = strings_of(a, &n);
	if (!v)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (!v[i])
			return err_set(err, COVE_EINVAL, "%s[%zu]: not a string", what, i);
	return policy_list_parse(what, v, n, ret, err);
}

int network_check(const struct sandbox_spec *s, struct cove_err *err)
{
	struct policy_list a = { 0 }, b = { 0 };
	if (s->external && s->egress)
		return err_set(err, COVE_EINVAL,
			       "an external sandbox shares the host's network: 'network' must be \"none\"");
	if (parse_list("allow_out", s->allow_out, &a, err) < 0)
		return -1;
	int r = parse_list("deny_out", s->deny_out, &b, err);
	policy_list_free(&a);
	policy_list_free(&b);
	return r;
}

#define CLAIM_DIR "/run/cove-net"
#define GUARD_FILE CLAIM_DIR "/forwarding-guard"

/* Which forwarding a coved turned on, for the coveds after it: forwarding
 * stays on when coved stops, so a restarted coved (or a second one) finds
 * it on and would otherwise drop the guard that keeps the host from
 * routing anything but sandboxes. In /run: gone at a reboot, as the
 * switch is. */
static void guard_share(struct net_forwarding *fw)
{
	char buf[4] = "";
	if (fw->guard4 || fw->guard6) {
		(void)mkdir(CLAIM_DIR, 0700);
		FILE *f = fopen(GUARD_FILE, "we");
		if (f) {
			fprintf(f, "%s%s", fw->guard4 ? "4" : "", fw->guard6 ? "6" : "");
			fclose(f);
		}
		return;
	}
	_cleanup_close_ int fd = open(GUARD_FILE, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0) {
		fw->guard4 = strchr(buf, '4') != NULL;
		fw->guard6 = strchr(buf, '6') != NULL;
	}
}

/* The host's resolvers: coved --resolv-conf, else /etc/resolv.conf. */
static const char *resolv_conf(const struct engine *d)
{
	return d->resolv_conf[0] ? d->resolv_conf : "/etc/resolv.conf";
}

/* forwarding and the table: once, at the first sandbox with egress. */
static int start(struct engine *d, struct cove_err *err)
{
	struct engine_net *n = d->net;
	if (n->started)
		return 0;
	if (net_forwarding_enable(n->pool.has_v6, &n->fw, err) < 0)
		return -1;
	guard_share(&n->fw);
	if (net_init(&n->pool, &n->fw, err) < 0)
		return -1;
	/* Nameservers and options only: no search list (a name a sandbox
	 * sends is dialed as it is) and no hosts file (the proxy dials what
	 * the resolvers say, as the sandbox's own DNS sees it). */
	n->dns = evdns_base_new(d->base, 0);
	if (!n->dns ||
	    evdns_base_resolv_conf_parse(n->dns, DNS_OPTION_NAMESERVERS | DNS_OPTION_MISC, resolv_conf(d)) != 0) {
		log_warn("network: no nameserver in '%s': the egress proxy cannot resolve", resolv_conf(d));
	}
	n->started = true;
	return 0;
}

void network_reconcile(struct engine *d)
{
	bool any = false;
	for (int i = 0; i < MAX_SANDBOXES; i++)
		any = any || (d->sandboxes[i] && d->sandboxes[i]->spec.egress);
	struct cove_err err = { 0 };
	/* No sandbox has egress: libnftables stays unloaded. */
	if (d->net && any && start(d, &err) < 0)
		log_error("network: %s", err.msg);
}

void network_forget(struct engine *d, const char *id)
{
	struct cove_err err = { 0 };
	if (d->net && start(d, &err) == 0)
		(void)net_sandbox_detach(id, true, &err);
}

static void sandbox_net_free(struct sandbox_net *sn)
{
	if (!sn)
		return;
	dns_forwarder_free(sn->dns);
	egress_proxy_free(sn->proxy);
	if (sn->claim_fd >= 0)
		close(sn->claim_fd);
	policy_list_free(&sn->allow);
	policy_list_free(&sn->deny);
	free(sn);
}

/* A new sandbox's /etc/resolv.conf, in its root's upper layer: the
 * resolver address, the same in every sandbox of the pool (see
 * NET_RESOLVER_SLOT), so a restored or forked root keeps its bytes. */
static int write_resolv_conf(const struct net_pool *p, const char *subvol, struct cove_err *err)
{
	char path[700], gw[INET6_ADDRSTRLEN];
	struct net_addrs r;
	net_pool_addrs(p, NET_RESOLVER_SLOT, &r);
	inet_ntop(AF_INET, r.gw4, gw, sizeof(gw));
	snprintf(path, sizeof(path), "%s/upper/root/etc", subvol);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir '%s'", path);
	snprintf(path, sizeof(path), "%s/upper/root/etc/resolv.conf", subvol);
	FILE *f = fopen(path, "we");
	if (!f || fprintf(f, "# coved's resolver\nnameserver %s\n", gw) < 0 || fclose(f) != 0)
		return err_sys(err, errno, "write '%s'", path);
	return 0;
}

/* Whether addr is an address of this host (another coved's gateway). */
static bool host_has_addr(const uint8_t addr[4])
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	memcpy(&sa.sin_addr, addr, 4);
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	return fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

/* The same for a slot's IPv6 gateway: a veth left with it and without
 * its IPv4 one (seen on a host shared by many coveds killed in tests)
 * would route the new sandbox's IPv6 replies to the old veth. */
static bool host_has_addr6(const struct net_addrs *a)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	if (!a->has_v6)
		return false;
	memcpy(&sa.sin6_addr, a->gw6, 16);
	_cleanup_close_ int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	return fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

/* The host-wide claim on a gateway address, among the coveds of a host: a
 * record lock on CLAIM_DIR/<gateway>, held as long as the sandbox lives in
 * this coved (a POSIX lock: coved's forks do not inherit it, and it goes
 * when coved dies). The fd, or -1 when another coved holds it. A sandbox
 * of a coved that died holds no lock, but its gateway is still on the
 * host: host_has_addr sees that. */
static int claim(const uint8_t gw4[4])
{
	char path[64], gw[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, gw4, gw, sizeof(gw));
	snprintf(path, sizeof(path), CLAIM_DIR "/%s", gw);
	(void)mkdir(CLAIM_DIR, 0700);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	if (fd >= 0 && fcntl(fd, F_SETLK, &fl) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A free slot of the pool that no other coved on the host has: claimed
 * (*claim_fd), and its gateway not on the host yet. The slots skipped go
 * back (next fit moves past them anyway). */
#define ALLOC_MAX_SKIPPED 4096 /* slots held by other coveds (their sandboxes outlive them) */

static int alloc_addrs(struct net_pool *p, struct net_addrs *ret, int *claim_fd)
{
	static uint32_t skipped[ALLOC_MAX_SKIPPED]; /* the loop's: one alloc at a time */
	int n = 0, r;
	while ((r = net_pool_alloc(p, ret)) == 0) {
		if ((*claim_fd = claim(ret->gw4)) >= 0 && !host_has_addr(ret->gw4) && !host_has_addr6(ret))
			break;
		if (*claim_fd >= 0)
			close(*claim_fd);
		*claim_fd = -1;
		skipped[n++] = ret->slot;
		if (n == ALLOC_MAX_SKIPPED) {
			r = -ENOSPC;
			break;
		}
	}
	for (int i = 0; i < n; i++)
		net_pool_release(p, skipped[i]);
	return r;
}

int network_prepare(struct engine *d, struct sandbox *sb, bool loaded, const char *new_root, struct cove_err *err)
{
	if (!sb->spec.egress)
		return 0;
	struct sandbox_net *sn = calloc(1, sizeof(*sn));
	if (!sn)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	sn->claim_fd = -1;
	sn->pool = &d->net->pool;
	int r = !loaded ? alloc_addrs(&d->net->pool, &sn->addrs, &sn->claim_fd)
			: net_pool_take(&d->net->pool, (uint32_t)sb->spec.net_slot, &sn->addrs);
	/* A sandbox kept over a restart: its addresses are its own already. */
	if (r == 0 && loaded)
		sn->claim_fd = claim(sn->addrs.gw4);
	if (r < 0) {
		free(sn);
		return r == -ENOSPC
			       ? err_set(err, COVE_EFULL, "the network pool is full")
			       : err_set(err, COVE_EINTERNAL, "network slot %d: %s", sb->spec.net_slot, strerror(-r));
	}
	sb->spec.net_slot = (int)sn->addrs.slot;
	if (parse_list("allow_out", sb->spec.allow_out, &sn->allow, err) < 0 ||
	    parse_list("deny_out", sb->spec.deny_out, &sn->deny, err) < 0 ||
	    (new_root && !sb->spec.external && write_resolv_conf(&d->net->pool, new_root, err) < 0)) {
		net_pool_release(&d->net->pool, sn->addrs.slot);
		sandbox_net_free(sn);
		return -1;
	}
	sb->net = sn;
	return 0;
}

void network_readdress(struct engine *d, struct sandbox *sb)
{
	struct sandbox_net *sn = sb->net;
	struct net_addrs a;
	int fd = -1;
	if (!sn || sn->claim_fd >= 0 || alloc_addrs(&d->net->pool, &a, &fd) < 0)
		return;
	log_info("sandbox %s: network slot %u is another coved's now: slot %u", sb->id, sn->addrs.slot, a.slot);
	net_pool_release(&d->net->pool, sn->addrs.slot);
	sn->addrs = a;
	sn->claim_fd = fd;
	sb->spec.net_slot = (int)a.slot;
}

static bool name_allowed(void *data, const char *name)
{
	struct sandbox_net *sn = data;
	return policy_name_allowed(&sn->allow, &sn->deny, name);
}

static int dns_start(struct engine *d, struct sandbox_net *sn, struct cove_err *err)
{
	struct dns_config c = { .allowed = name_allowed, .data = sn };
	struct sockaddr_in *sa = (struct sockaddr_in *)&c.listen;
	if (dns_config_resolv_conf(&c, resolv_conf(d), err) < 0)
		return -1;
	sa->sin_family = AF_INET;
	sa->sin_port = htons(53);
	memcpy(&sa->sin_addr, sn->addrs.gw4, 4);
	c.listen_len = sizeof(*sa);
	sn->dns = dns_forwarder_new(d->base, &c, err);
	return sn->dns ? 0 : -1;
}

static enum egress_verdict judge_name(void *data, const char *name)
{
	struct sandbox_net *sn = data;
	enum policy_verdict v = policy_name_verdict(&sn->allow, &sn->deny, name);
	return v == POLICY_ALLOW ? EGRESS_ALLOW : v == POLICY_DENY ? EGRESS_DENY : EGRESS_BY_ADDRESS;
}

static bool judge_addr(void *data, const struct sockaddr *sa, bool name_allowed)
{
	struct sandbox_net *sn = data;
	if (net_addr_denied(sn->pool, sa))
		return false;
	if (name_allowed)
		return true;
	const uint8_t *a = sa->sa_family == AF_INET ? (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr
						    : ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	return policy_addr_allowed(&sn->allow, &sn->deny, sa->sa_family, a);
}

/* The sandbox's egress proxy, made the first time its policy names a
 * domain (and kept: its connections outlive a policy change); the ports
 * that ns's rules send TCP 80 and 443 to while the policy names one. */
static int proxy_ports(struct engine *d, struct sandbox *sb, struct net_sandbox *ns, struct cove_err *err)
{
	struct sandbox_net *sn = sb->net;
	if (!policy_has_domains(ns->allow, ns->deny))
		return 0;
	if (!sn->proxy) {
		struct egress_config c = { .id = sb->id,
					   .dns = d->net->dns,
					   .judge_name = judge_name,
					   .judge_addr = judge_addr,
					   .data = sn,
					   .has_peer6 = sn->addrs.has_v6 };
		struct sockaddr_in *v4 = (struct sockaddr_in *)&c.listen[0];
		v4->sin_family = AF_INET;
		memcpy(&v4->sin_addr, sn->addrs.gw4, 4);
		c.listen_len[0] = sizeof(*v4);
		memcpy(c.peer4, sn->addrs.sb4, 4);
		c.n_listen = 1;
		if (sn->addrs.has_v6) {
			struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&c.listen[1];
			v6->sin6_family = AF_INET6;
			memcpy(&v6->sin6_addr, sn->addrs.gw6, 16);
			c.listen_len[1] = sizeof(*v6);
			memcpy(c.peer6, sn->addrs.sb6, 16);
			c.n_listen = 2;
		}
		if (!d->net->dns)
			return err_set(err, COVE_EINTERNAL, "the egress proxy has no resolver ('%s')", resolv_conf(d));
		sn->proxy = egress_proxy_new(d->base, &c, err);
		if (!sn->proxy)
			return -1;
	}
	ns->proxy4 = egress_proxy_port(sn->proxy, AF_INET);
	ns->proxy6 = egress_proxy_port(sn->proxy, AF_INET6);
	return 0;
}

static void net_sandbox_of(const struct sandbox *sb, struct net_sandbox *ret)
{
	struct sandbox_net *sn = sb->net;
	*ret = (struct net_sandbox){ .id = sb->id, .addrs = sn->addrs, .allow = &sn->allow, .deny = &sn->deny };
}

int network_rules(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	struct sandbox_net *sn = sb->net;
	struct net_sandbox ns;
	if (!sn || sn->ruled)
		return 0;
	net_sandbox_of(sb, &ns);
	if (start(d, err) < 0 || proxy_ports(d, sb, &ns, err) < 0 || net_sandbox_policy(&ns, err) < 0)
		return -1;
	sn->ruled = true;
	return 0;
}

int network_attach(struct engine *d, struct sandbox *sb, bool reattached, struct cove_err *err)
{
	struct sandbox_net *sn = sb->net;
	struct net_sandbox ns;
	if (!sn)
		return 0;
	if (network_rules(d, sb, err) < 0)
		return -1;
	/* A re-attached sandbox's veth is there, and its rules are all it
	 * needs; but for a coved killed between its init's start and its
	 * veth's (its gateway is then nowhere on the host). */
	if (!reattached || !host_has_addr(sn->addrs.gw4)) {
		char path[64];
		net_sandbox_of(sb, &ns);
		snprintf(path, sizeof(path), "/proc/%d/ns/net", sb->init_pid);
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return err_sys(err, errno, "open '%s'", path);
		if (net_sandbox_link(&ns, fd, err) < 0)
			return -1;
	}
	sn->attached = true;
	return dns_start(d, sn, err);
}

void network_release(struct engine *d, struct sandbox *sb)
{
	struct sandbox_net *sn = sb->net;
	struct cove_err err = { 0 };
	/* A row loaded in state "deleting" has rules of a previous run. */
	if (sb->spec.egress && d->net && start(d, &err) == 0 && net_sandbox_detach(sb->id, false, &err) < 0)
		log_error("sandbox %s: network: %s", sb->id, err.msg);
	if (!sn)
		return;
	net_pool_release(&d->net->pool, sn->addrs.slot);
	sandbox_net_free(sn);
	sb->net = NULL;
}

/* A JSON array of n strings. */
static json_t *array_of(const char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

int network_set_policy(struct engine *d, struct sandbox *sb, const struct network_policy_req *req, struct cove_err *err)
{
	struct sandbox_net *sn = sb->net;
	if (!sb->spec.egress)
		return err_set(err, COVE_ESTATE, "sandbox '%s' has network \"none\": it has no policy", sb->id);
	if (!sn || !sn->attached)
		return err_set(err, COVE_ESTATE, "sandbox '%s' is not running", sb->id);
	struct policy_list allow = { 0 }, deny = { 0 };
	if (policy_list_parse("allow_out", req->allow_out, req->n_allow, &allow, err) < 0)
		return -1;
	if (policy_list_parse("deny_out", req->deny_out, req->n_deny, &deny, err) < 0) {
		policy_list_free(&allow);
		return -1;
	}
	json_t *old_allow = sb->spec.allow_out, *old_deny = sb->spec.deny_out;
	sb->spec.allow_out = array_of(req->allow_out, req->n_allow);
	sb->spec.deny_out = array_of(req->deny_out, req->n_deny);
	struct net_sandbox ns = { .id = sb->id, .addrs = sn->addrs, .allow = &allow, .deny = &deny };
	/* Stored first: what is in force is never what a restart would not
	 * bring back. */
	bool saved = sandbox_save(d, sb, err) == 0;
	if (!saved || proxy_ports(d, sb, &ns, err) < 0 || net_sandbox_policy(&ns, err) < 0) {
		json_decref(sb->spec.allow_out);
		json_decref(sb->spec.deny_out);
		sb->spec.allow_out = old_allow;
		sb->spec.deny_out = old_deny;
		if (saved)
			(void)sandbox_save(d, sb, NULL);
		policy_list_free(&allow);
		policy_list_free(&deny);
		return -1;
	}
	json_decref(old_allow);
	json_decref(old_deny);
	policy_list_free(&sn->allow);
	policy_list_free(&sn->deny);
	sn->allow = allow;
	sn->deny = deny;
	return 0;
}

static void put_addr(json_t *j, const char *key, int family, const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];
	inet_ntop(family, a, buf, sizeof(buf));
	json_object_set_new(j, key, json_string(buf));
}

json_t *network_to_json(const struct sandbox *sb)
{
	const struct sandbox_spec *s = &sb->spec;
	json_t *j = json_pack("{s:s, s:o, s:o}", "mode", s->egress ? "egress" : "none", "allow_out",
			      s->allow_out ? json_incref(s->allow_out) : json_array(), "deny_out",
			      s->deny_out ? json_incref(s->deny_out) : json_array());
	const struct sandbox_net *sn = sb->net;
	if (!sn || !sn->attached)
		return j;
	put_addr(j, "address", AF_INET, sn->addrs.sb4);
	put_addr(j, "gateway", AF_INET, sn->addrs.gw4);
	struct net_addrs r;
	net_pool_addrs(&engine_ctx->net->pool, NET_RESOLVER_SLOT, &r);
	put_addr(j, "dns", AF_INET, r.gw4);
	if (sn->addrs.has_v6) {
		put_addr(j, "address6", AF_INET6, sn->addrs.sb6);
		put_addr(j, "gateway6", AF_INET6, sn->addrs.gw6);
	}
	return j;
}

json_t *network_modes_json(void)
{
	return json_pack("[s, s]", "egress", "none");
}
