/* libFuzzer harness for the OCI document parsers (src/image/oci.c): image
 * index, image manifest, image config, docker manifest.json, oci-layout.
 *
 * Beyond "no crash" (and no leak: every parsed struct is freed), what a
 * parser accepts keeps its contract: a chosen index entry is a manifest or
 * an index with a valid digest; a manifest has 1..OCI_LAYERS_MAX layers of
 * layer media types with valid digests and sizes >= 0, and its
 * oci_manifest_json reads back as the same manifest; a config's Env
 * entries are KEY=VALUE, its ports 1..65535, its WorkingDir absolute or
 * empty, its diff ids valid and 1..OCI_LAYERS_MAX. An image reference that
 * parses, written out in full, parses back to the same. A WWW-Authenticate
 * challenge that parses has a scheme and NUL-terminated fields.
 *
 *   scripts/fuzz.sh oci
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/challenge.h"
#include "image/oci.h"
#include "image/ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_manifest(const struct oci_manifest *m)
{
	if (m->n_layers < 1 || m->n_layers > OCI_LAYERS_MAX || !digest_valid(m->config.digest) ||
	    oci_media_kind(m->config.media_type) != OCI_KIND_CONFIG)
		abort();
	for (size_t i = 0; i < m->n_layers; i++)
		if (!digest_valid(m->layers[i].digest) || m->layers[i].size < 0 ||
		    oci_media_kind(m->layers[i].media_type) != OCI_KIND_LAYER)
			abort();
	char *json = oci_manifest_json(m);
	struct oci_manifest again;
	struct cove_err err = { 0 };
	if (!json || oci_parse_manifest(json, strlen(json), &again, &err) != 0 || again.n_layers != m->n_layers ||
	    strcmp(again.layers[m->n_layers - 1].digest, m->layers[m->n_layers - 1].digest) != 0)
		abort();
	oci_manifest_free(&again);
	free(json);
}

static void check_config(const struct image_config *c)
{
	for (size_t i = 0; i < c->n_env; i++)
		if (!strchr(c->env[i], '=') || c->env[i][0] == '=')
			abort();
	for (size_t i = 0; i < c->n_ports; i++)
		if (c->ports[i].port == 0)
			abort();
	if (c->working_dir && c->working_dir[0] && c->working_dir[0] != '/')
		abort();
	if (c->n_diff_ids < 1 || c->n_diff_ids > OCI_LAYERS_MAX || c->diff_ids[c->n_diff_ids])
		abort();
	for (size_t i = 0; i < c->n_diff_ids; i++)
		if (!digest_valid(c->diff_ids[i]))
			abort();
	char chain[DIGEST_STR_MAX];
	oci_chain_id(c->diff_ids, c->n_diff_ids, chain);
	if (!digest_valid(chain))
		abort();
}

static void check_ref(const uint8_t *data, size_t size)
{
	char s[1024], full[1024];
	if (size >= sizeof(s))
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	struct image_ref r, again;
	struct cove_err err = { 0 };
	if (image_ref_parse(s, &r, &err) != 0)
		return;
	if (image_ref_format(&r, full, sizeof(full)) != 0 || image_ref_parse(full, &again, &err) != 0 ||
	    memcmp(&r, &again, sizeof(r)) != 0 || (r.digest[0] && !digest_valid(r.digest)) ||
	    (!r.tag[0] && !r.digest[0]))
		abort();
	(void)image_ref_is_loopback(&r);
	struct challenge ch;
	if (challenge_parse(s, &ch) == 0 &&
	    (!ch.scheme[0] || strlen(ch.realm) >= sizeof(ch.realm) || strlen(ch.service) >= sizeof(ch.service) ||
	     strlen(ch.scope) >= sizeof(ch.scope)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_ref(data, size);
	const char *buf = (const char *)data;
	struct cove_err err = { 0 };
	struct oci_descriptor d;
	if (oci_parse_index(buf, size, "linux", "amd64", NULL, &d, &err) == 0) {
		enum oci_kind k = oci_media_kind(d.media_type);
		if (!digest_valid(d.digest) || d.size < 0 || (k != OCI_KIND_INDEX && k != OCI_KIND_MANIFEST))
			abort();
	} else if (!err.msg[0]) {
		abort(); /* a refusal always says why */
	}
	struct oci_manifest m;
	memset(&err, 0, sizeof(err));
	if (oci_parse_manifest(buf, size, &m, &err) == 0) {
		check_manifest(&m);
		oci_manifest_free(&m);
	}
	struct image_config c;
	if (oci_parse_config(buf, size, &c, &err) == 0) {
		check_config(&c);
		image_config_free(&c);
	}
	struct docker_manifest dm;
	if (docker_parse_manifest(buf, size, NULL, &dm, &err) == 0) {
		if (!dm.config || dm.n_layers < 1 || dm.n_layers > OCI_LAYERS_MAX)
			abort();
		docker_manifest_free(&dm);
	}
	(void)oci_parse_layout(buf, size, &err);
	return 0;
}
