#include "image/oci.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

/* jansson's own cleanup helper (json_auto_t), by the house name. */
#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

static const struct {
	const char *type;
	enum oci_kind kind;
} media_types[] = {
	{ "application/vnd.oci.image.index.v1+json", OCI_KIND_INDEX },
	{ "application/vnd.docker.distribution.manifest.list.v2+json", OCI_KIND_INDEX },
	{ "application/vnd.oci.image.manifest.v1+json", OCI_KIND_MANIFEST },
	{ "application/vnd.docker.distribution.manifest.v2+json", OCI_KIND_MANIFEST },
	{ "application/vnd.oci.image.config.v1+json", OCI_KIND_CONFIG },
	{ "application/vnd.docker.container.image.v1+json", OCI_KIND_CONFIG },
	{ "application/vnd.oci.image.layer.v1.tar", OCI_KIND_LAYER },
	{ "application/vnd.oci.image.layer.v1.tar+gzip", OCI_KIND_LAYER },
	{ "application/vnd.oci.image.layer.v1.tar+zstd", OCI_KIND_LAYER },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_KIND_LAYER },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", OCI_KIND_LAYER },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", OCI_KIND_LAYER },
	{ "application/vnd.docker.image.rootfs.diff.tar", OCI_KIND_LAYER },
	{ "application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_KIND_LAYER },
	{ "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", OCI_KIND_LAYER },
	{ OCI_HOST_LAYER_TYPE, OCI_KIND_LAYER }, /* no tar: unpacking it fails (image.h) */
};

enum oci_kind oci_media_kind(const char *media_type)
{
	for (size_t i = 0; i < ARRAY_SIZE(media_types); i++)
		if (strcmp(media_type, media_types[i].type) == 0)
			return media_types[i].kind;
	return OCI_KIND_UNKNOWN;
}

/* A JSON object from buf, or NULL with err set. Duplicate keys are
 * refused: two readers could otherwise take different ones. */
static json_t *load_object(const char *buf, size_t len, const char *what, struct cove_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		err_set(err, COVE_EINVAL, "%s: not JSON: %s (line %d)", what, je.text, je.line);
		return NULL;
	}
	if (!json_is_object(j) && !json_is_array(j)) {
		json_decref(j);
		err_set(err, COVE_EINVAL, "%s: not a JSON object", what);
		return NULL;
	}
	return j;
}

/* o[key] as a string: NULL into *ret when absent (or JSON null) and not
 * required; refused when of another type. */
static int get_str(json_t *o, const char *key, bool required, const char **ret, const char *what, struct cove_err *err)
{
	json_t *v = json_object_get(o, key);
	*ret = NULL;
	if (!v || json_is_null(v))
		return required ? err_set(err, COVE_EINVAL, "%s: no \"%s\"", what, key) : 0;
	if (!json_is_string(v))
		return err_set(err, COVE_EINVAL, "%s: \"%s\" is not a string", what, key);
	*ret = json_string_value(v);
	return 0;
}

static int dup_str(json_t *o, const char *key, char **ret, const char *what, struct cove_err *err)
{
	const char *s;
	if (get_str(o, key, false, &s, what, err) < 0)
		return -1;
	if (s && !(*ret = strdup(s)))
		return err_sys(err, ENOMEM, "%s", what);
	return 0;
}

static int parse_descriptor(json_t *d, const char *what, struct oci_descriptor *ret, struct cove_err *err)
{
	const char *mt, *digest;
	if (!json_is_object(d))
		return err_set(err, COVE_EINVAL, "%s: a descriptor is not an object", what);
	if (get_str(d, "mediaType", true, &mt, what, err) < 0 || get_str(d, "digest", true, &digest, what, err) < 0)
		return -1;
	if (strlen(mt) >= sizeof(ret->media_type))
		return err_set(err, COVE_EINVAL, "%s: media type too long", what);
	if (!digest_valid(digest))
		return err_set(err, COVE_EINVAL, "%s: digest '%.80s' is not sha256:<64 lowercase hex>", what, digest);
	json_t *size = json_object_get(d, "size");
	if (!json_is_integer(size) || json_integer_value(size) < 0)
		return err_set(err, COVE_EINVAL, "%s: descriptor %s has no valid size", what, digest);
	strcpy(ret->media_type, mt);
	strcpy(ret->digest, digest);
	ret->size = json_integer_value(size);
	return 0;
}

static int check_schema(json_t *o, const char *what, struct cove_err *err)
{
	json_t *v = json_object_get(o, "schemaVersion");
	if (!json_is_integer(v) || json_integer_value(v) != 2)
		return err_set(err, COVE_EINVAL, "%s: schemaVersion is not 2", what);
	return 0;
}

/* 1 if index entry m is for os/arch, 0 if it has no platform, -1 if it is
 * for another. */
static int platform_match(json_t *m, const char *os, const char *arch)
{
	json_t *p = json_object_get(m, "platform");
	if (!p)
		return 0;
	const char *o = json_string_value(json_object_get(p, "os"));
	const char *a = json_string_value(json_object_get(p, "architecture"));
	return o && a && strcmp(o, os) == 0 && strcmp(a, arch) == 0 ? 1 : -1;
}

static bool ref_name_match(json_t *m, const char *ref_name)
{
	if (!ref_name)
		return true;
	const char *n = json_string_value(
		json_object_get(json_object_get(m, "annotations"), "org.opencontainers.image.ref.name"));
	return n && strcmp(n, ref_name) == 0;
}

int oci_parse_index(const char *buf, size_t len, const char *os, const char *arch, const char *ref_name,
		    struct oci_descriptor *ret, struct cove_err *err)
{
	_cleanup_json_ json_t *j = load_object(buf, len, "image index", err);
	if (!j)
		return -1;
	if (!json_is_object(j) || check_schema(j, "image index", err) < 0)
		return err_set(err, COVE_EINVAL, "image index: not an object");
	json_t *ms = json_object_get(j, "manifests");
	if (!json_is_array(ms))
		return err_set(err, COVE_EINVAL, "image index: no \"manifests\" array");
	if (json_array_size(ms) > OCI_LIST_MAX)
		return err_set(err, COVE_EINVAL, "image index: too many manifests");
	json_t *best = NULL;
	int best_rank = -1;
	size_t i;
	json_t *m;
	json_array_foreach(ms, i, m)
	{
		if (!json_is_object(m) || !ref_name_match(m, ref_name))
			continue;
		int rank = platform_match(m, os, arch);
		if (rank > best_rank) {
			best = m;
			best_rank = rank;
		}
	}
	if (!best)
		return err_set(err, COVE_ENOTFOUND, "image index: no image for %s/%s%s%s", os, arch,
			       ref_name ? " named " : "", ref_name ? ref_name : "");
	struct oci_descriptor d;
	if (parse_descriptor(best, "image index", &d, err) < 0)
		return -1;
	enum oci_kind k = oci_media_kind(d.media_type);
	if (k != OCI_KIND_INDEX && k != OCI_KIND_MANIFEST)
		return err_set(err, COVE_EINVAL, "image index: entry %s is a '%s', not a manifest", d.digest,
			       d.media_type);
	*ret = d;
	return 0;
}

int oci_parse_manifest(const char *buf, size_t len, struct oci_manifest *ret, struct cove_err *err)
{
	static const char what[] = "image manifest";
	_cleanup_json_ json_t *j = load_object(buf, len, what, err);
	if (!j)
		return -1;
	if (!json_is_object(j))
		return err_set(err, COVE_EINVAL, "%s: not an object", what);
	if (check_schema(j, what, err) < 0)
		return -1;
	const char *mt;
	if (get_str(j, "mediaType", false, &mt, what, err) < 0)
		return -1;
	if (mt && oci_media_kind(mt) != OCI_KIND_MANIFEST)
		return err_set(err, COVE_EINVAL, "%s: media type '%.80s' is not a manifest's", what, mt);
	struct oci_manifest m = { 0 };
	if (parse_descriptor(json_object_get(j, "config"), what, &m.config, err) < 0)
		return -1;
	if (oci_media_kind(m.config.media_type) != OCI_KIND_CONFIG)
		return err_set(err, COVE_EINVAL, "%s: config media type '%s' is not an image config's", what,
			       m.config.media_type);
	json_t *ls = json_object_get(j, "layers");
	if (!json_is_array(ls) || json_array_size(ls) == 0 || json_array_size(ls) > OCI_LAYERS_MAX)
		return err_set(err, COVE_EINVAL, "%s: \"layers\" is not an array of 1 to %d layers", what,
			       OCI_LAYERS_MAX);
	m.n_layers = json_array_size(ls);
	m.layers = calloc(m.n_layers, sizeof(*m.layers));
	if (!m.layers)
		return err_sys(err, ENOMEM, "%s", what);
	for (size_t i = 0; i < m.n_layers; i++) {
		struct oci_descriptor *l = &m.layers[i];
		if (parse_descriptor(json_array_get(ls, i), what, l, err) < 0 ||
		    (oci_media_kind(l->media_type) != OCI_KIND_LAYER &&
		     err_set(err, COVE_EINVAL, "%s: layer %s has media type '%s', not a tar layer's", what, l->digest,
			     l->media_type) < 0)) {
			oci_manifest_free(&m);
			return -1;
		}
	}
	*ret = m;
	return 0;
}

void oci_manifest_free(struct oci_manifest *m)
{
	free(m->layers);
	m->layers = NULL;
	m->n_layers = 0;
}

static void strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* A JSON array of strings (absent or null: an empty array) as a
 * NULL-terminated array. */
static int strv_from_json(json_t *a, const char *what, const char *key, char ***ret, size_t *ret_n,
			  struct cove_err *err)
{
	*ret = NULL;
	*ret_n = 0;
	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a) || json_array_size(a) > OCI_LIST_MAX)
		return err_set(err, COVE_EINVAL, "%s: \"%s\" is not an array of strings", what, key);
	size_t n = json_array_size(a);
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		return err_sys(err, ENOMEM, "%s", what);
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(a, i));
		if (!s || !(v[i] = strdup(s))) {
			strv_free(v);
			return err_set(err, s ? ENOMEM : COVE_EINVAL, "%s: \"%s\" is not an array of strings", what,
				       key);
		}
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* "80/tcp", "53/udp", "8080" (tcp, as Docker reads it). */
static int parse_port(const char *s, struct image_port *ret)
{
	char *end;
	errno = 0;
	long p = strtol(s, &end, 10);
	if (errno || end == s || p < 1 || p > 65535 || *s == '+' || *s == '-' || *s == ' ')
		return -1;
	const char *proto = *end == '/' ? end + 1 : *end ? NULL : "tcp";
	if (!proto || (strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0 && strcmp(proto, "sctp") != 0))
		return -1;
	ret->port = (uint16_t)p;
	strcpy(ret->proto, proto);
	return 0;
}

/* cfg[key]: 1 if an object (of at most OCI_LIST_MAX members) into *ret, 0
 * if absent or null, -1 if anything else. */
static int get_object(json_t *cfg, const char *key, json_t **ret, struct cove_err *err)
{
	json_t *o = *ret = json_object_get(cfg, key);
	if (!o || json_is_null(o))
		return 0;
	if (json_is_object(o) && json_object_size(o) <= OCI_LIST_MAX)
		return 1;
	return err_set(err, COVE_EINVAL, "image config: \"%s\" is not an object", key);
}

static int parse_ports(json_t *cfg, struct image_config *c, struct cove_err *err)
{
	json_t *o;
	int r = get_object(cfg, "ExposedPorts", &o, err);
	if (r <= 0)
		return r;
	c->ports = calloc(json_object_size(o) + 1, sizeof(*c->ports));
	if (!c->ports)
		return err_sys(err, ENOMEM, "image config");
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		if (parse_port(k, &c->ports[c->n_ports]) < 0)
			return err_set(err, COVE_EINVAL,
				       "image config: exposed port '%.40s' is not PORT[/tcp|udp|sctp]", k);
		c->n_ports++;
	}
	return 0;
}

static int parse_labels(json_t *cfg, struct image_config *c, struct cove_err *err)
{
	json_t *o;
	int r = get_object(cfg, "Labels", &o, err);
	if (r <= 0)
		return r;
	size_t n = json_object_size(o);
	c->label_keys = calloc(n + 1, sizeof(char *));
	c->label_values = calloc(n + 1, sizeof(char *));
	if (!c->label_keys || !c->label_values)
		return err_sys(err, ENOMEM, "image config");
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		if (!json_is_string(v))
			return err_set(err, COVE_EINVAL, "image config: label '%.40s' is not a string", k);
		c->label_keys[c->n_labels] = strdup(k);
		c->label_values[c->n_labels] = strdup(json_string_value(v));
		if (!c->label_keys[c->n_labels] || !c->label_values[c->n_labels])
			return err_sys(err, ENOMEM, "image config");
		c->n_labels++;
	}
	return 0;
}

static int check_env(const struct image_config *c, struct cove_err *err)
{
	for (size_t i = 0; i < c->n_env; i++) {
		const char *eq = strchr(c->env[i], '=');
		if (!eq || eq == c->env[i])
			return err_set(err, COVE_EINVAL, "image config: Env entry '%.40s' is not KEY=VALUE", c->env[i]);
	}
	return 0;
}

static int parse_rootfs(json_t *r, struct image_config *c, struct cove_err *err)
{
	const char *type;
	if (!json_is_object(r))
		return err_set(err, COVE_EINVAL, "image config: no \"rootfs\" object");
	if (get_str(r, "type", true, &type, "image config rootfs", err) < 0)
		return -1;
	if (strcmp(type, "layers") != 0)
		return err_set(err, COVE_EINVAL, "image config: rootfs type '%.40s' is not \"layers\"", type);
	if (strv_from_json(json_object_get(r, "diff_ids"), "image config", "diff_ids", &c->diff_ids, &c->n_diff_ids,
			   err) < 0)
		return -1;
	if (c->n_diff_ids == 0 || c->n_diff_ids > OCI_LAYERS_MAX)
		return err_set(err, COVE_EINVAL, "image config: 1 to %d diff_ids expected", OCI_LAYERS_MAX);
	for (size_t i = 0; i < c->n_diff_ids; i++)
		if (!digest_valid(c->diff_ids[i]))
			return err_set(err, COVE_EINVAL, "image config: diff_id '%.80s' is not sha256:<hex>",
				       c->diff_ids[i]);
	return 0;
}

static int parse_run_config(json_t *cfg, struct image_config *c, struct cove_err *err)
{
	static const char what[] = "image config";
	if (!cfg || json_is_null(cfg))
		return 0;
	if (!json_is_object(cfg))
		return err_set(err, COVE_EINVAL, "%s: \"config\" is not an object", what);
	if (strv_from_json(json_object_get(cfg, "Env"), what, "Env", &c->env, &c->n_env, err) < 0 ||
	    check_env(c, err) < 0 ||
	    strv_from_json(json_object_get(cfg, "Entrypoint"), what, "Entrypoint", &c->entrypoint, &c->n_entrypoint,
			   err) < 0 ||
	    strv_from_json(json_object_get(cfg, "Cmd"), what, "Cmd", &c->cmd, &c->n_cmd, err) < 0 ||
	    dup_str(cfg, "WorkingDir", &c->working_dir, what, err) < 0 ||
	    dup_str(cfg, "User", &c->user, what, err) < 0 || parse_ports(cfg, c, err) < 0 ||
	    parse_labels(cfg, c, err) < 0)
		return -1;
	if (c->working_dir && *c->working_dir && c->working_dir[0] != '/')
		return err_set(err, COVE_EINVAL, "%s: WorkingDir '%.80s' is not absolute", what, c->working_dir);
	return 0;
}

int oci_parse_config(const char *buf, size_t len, struct image_config *ret, struct cove_err *err)
{
	_cleanup_json_ json_t *j = load_object(buf, len, "image config", err);
	if (!j)
		return -1;
	if (!json_is_object(j))
		return err_set(err, COVE_EINVAL, "image config: not an object");
	struct image_config c = { 0 };
	if (dup_str(j, "os", &c.os, "image config", err) < 0 ||
	    dup_str(j, "architecture", &c.architecture, "image config", err) < 0 ||
	    parse_run_config(json_object_get(j, "config"), &c, err) < 0 ||
	    parse_rootfs(json_object_get(j, "rootfs"), &c, err) < 0) {
		image_config_free(&c);
		return -1;
	}
	*ret = c;
	return 0;
}

void image_config_free(struct image_config *c)
{
	free(c->os);
	free(c->architecture);
	strv_free(c->env);
	free(c->working_dir);
	free(c->user);
	strv_free(c->entrypoint);
	strv_free(c->cmd);
	free(c->ports);
	strv_free(c->label_keys);
	strv_free(c->label_values);
	strv_free(c->diff_ids);
	memset(c, 0, sizeof(*c));
}

static bool has_tag(json_t *img, const char *ref)
{
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(img, "RepoTags"), i,
			   t) if (json_is_string(t) && strcmp(json_string_value(t), ref) == 0) return true;
	return false;
}

int docker_parse_manifest(const char *buf, size_t len, const char *ref, struct docker_manifest *ret,
			  struct cove_err *err)
{
	static const char what[] = "docker archive manifest.json";
	_cleanup_json_ json_t *j = load_object(buf, len, what, err);
	if (!j)
		return -1;
	if (!json_is_array(j) || json_array_size(j) == 0)
		return err_set(err, COVE_EINVAL, "%s: not an array of images", what);
	json_t *img = NULL;
	if (!ref && json_array_size(j) > 1)
		return err_set(err, COVE_EINVAL, "%s: %zu images in the archive: name the one to import", what,
			       json_array_size(j));
	for (size_t i = 0; i < json_array_size(j) && !img; i++)
		if (!ref || has_tag(json_array_get(j, i), ref))
			img = json_array_get(j, i);
	if (!img)
		return err_set(err, COVE_ENOTFOUND, "%s: no image tagged '%s'", what, ref);
	if (!json_is_object(img))
		return err_set(err, COVE_EINVAL, "%s: an image is not an object", what);
	struct docker_manifest m = { 0 };
	const char *config;
	if (get_str(img, "Config", true, &config, what, err) < 0)
		return -1;
	if (!(m.config = strdup(config)) ||
	    strv_from_json(json_object_get(img, "Layers"), what, "Layers", &m.layers, &m.n_layers, err) < 0 ||
	    strv_from_json(json_object_get(img, "RepoTags"), what, "RepoTags", &m.repo_tags, &m.n_tags, err) < 0) {
		docker_manifest_free(&m);
		return err_set(err, ENOMEM, "%s", what);
	}
	if (m.n_layers == 0 || m.n_layers > OCI_LAYERS_MAX) {
		docker_manifest_free(&m);
		return err_set(err, COVE_EINVAL, "%s: 1 to %d layers expected", what, OCI_LAYERS_MAX);
	}
	*ret = m;
	return 0;
}

void docker_manifest_free(struct docker_manifest *m)
{
	free(m->config);
	strv_free(m->layers);
	strv_free(m->repo_tags);
	memset(m, 0, sizeof(*m));
}

void oci_chain_id(char *const *diff_ids, size_t n, char out[DIGEST_STR_MAX])
{
	char buf[2 * DIGEST_STR_MAX + 1];
	if (n == 0) {
		out[0] = '\0';
		return;
	}
	strcpy(out, diff_ids[0]);
	for (size_t i = 1; i < n; i++) {
		snprintf(buf, sizeof(buf), "%s %s", out, diff_ids[i]);
		digest_of(buf, strlen(buf), out);
	}
}

int oci_parse_layout(const char *buf, size_t len, struct cove_err *err)
{
	_cleanup_json_ json_t *j = load_object(buf, len, "oci-layout", err);
	if (!j)
		return -1;
	const char *v = json_string_value(json_object_get(j, "imageLayoutVersion"));
	if (!v || strcmp(v, "1.0.0") != 0)
		return err_set(err, COVE_EINVAL, "oci-layout: imageLayoutVersion is not \"1.0.0\"");
	return 0;
}

static json_t *descriptor_json(const struct oci_descriptor *d)
{
	return json_pack("{s:s, s:s, s:I}", "mediaType", d->media_type, "digest", d->digest, "size",
			 (json_int_t)d->size);
}

char *oci_manifest_json(const struct oci_manifest *m)
{
	_cleanup_json_ json_t *layers = json_array();
	for (size_t i = 0; layers && i < m->n_layers; i++)
		if (json_array_append_new(layers, descriptor_json(&m->layers[i])) < 0)
			return NULL;
	_cleanup_json_ json_t *j = json_pack("{s:i, s:s, s:o, s:O}", "schemaVersion", 2, "mediaType",
					     "application/vnd.oci.image.manifest.v1+json", "config",
					     descriptor_json(&m->config), "layers", layers);
	return j ? json_dumps(j, JSON_COMPACT) : NULL;
}
