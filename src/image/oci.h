/* Parsers for the JSON documents of OCI images (image-spec v1) and of
 * Docker's equivalents: image index (manifest list), image manifest, image
 * config, and the manifest.json of a `docker save` archive. Pure: bytes in,
 * typed structs out, every field checked (types, sizes, digests, media
 * types), so that nothing later trusts what an archive or a registry sent.
 * A document that is not what it claims is refused with COVE_EINVAL. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "image/digest.h"

#define OCI_DOC_MAX (4u << 20)    /* an index or manifest (registries cap them at 4 MiB) */
#define OCI_CONFIG_MAX (8u << 20) /* an image config */
#define OCI_LAYERS_MAX 256        /* layers of one image */
#define OCI_LIST_MAX 65536        /* entries of Env, Cmd, Labels, ... */
#define OCI_MEDIA_TYPE_MAX 128

/* What a descriptor points at, by its media type. */
enum oci_kind {
	OCI_KIND_UNKNOWN,
	OCI_KIND_INDEX,    /* an image index or a Docker manifest list */
	OCI_KIND_MANIFEST, /* an image manifest (OCI or Docker v2 schema 2) */
	OCI_KIND_CONFIG,   /* an image config */
	OCI_KIND_LAYER,    /* a tar layer: plain, gzip or zstd */
};

struct oci_descriptor {
	char media_type[OCI_MEDIA_TYPE_MAX];
	char digest[DIGEST_STR_MAX];
	int64_t size;
};

/* cove's first layer of an image built on the host image (image.h). */
#define OCI_HOST_LAYER_TYPE "application/vnd.cove.image.layer.host.v1"

/* The kind of a media type ("" is OCI_KIND_UNKNOWN). */
enum oci_kind oci_media_kind(const char *media_type);

/* From an index, the manifest for os/arch (e.g. "linux", "amd64"): an
 * entry with that platform, else the first entry without a platform. With
 * ref_name (may be NULL) only entries annotated with that
 * org.opencontainers.image.ref.name count. The chosen descriptor (a
 * manifest, or a nested index) goes to ret. */
int oci_parse_index(const char *buf, size_t len, const char *os, const char *arch, const char *ref_name,
		    struct oci_descriptor *ret, struct cove_err *err);

struct oci_manifest {
	struct oci_descriptor config;
	struct oci_descriptor *layers;
	size_t n_layers;
};

/* An image manifest: schemaVersion 2, a config and 1..OCI_LAYERS_MAX layers. */
int oci_parse_manifest(const char *buf, size_t len, struct oci_manifest *ret, struct cove_err *err);
void oci_manifest_free(struct oci_manifest *m);

struct image_port {
	uint16_t port;
	char proto[8]; /* "tcp", "udp", "sctp" */
};

/* What an image says about how to run it (its config's "config" object)
 * and what its layers are (rootfs.diff_ids). NULL-terminated string
 * arrays; absent strings are NULL. */
struct image_config {
	char *os, *architecture;
	char **env; /* "KEY=VALUE" */
	size_t n_env;
	char *working_dir;
	char *user; /* "uid[:gid]" or "name[:group]", as written */
	char **entrypoint;
	size_t n_entrypoint;
	char **cmd;
	size_t n_cmd;
	struct image_port *ports;
	size_t n_ports;
	char **label_keys, **label_values;
	size_t n_labels;
	char **diff_ids; /* digests of the uncompressed layers, bottom first */
	size_t n_diff_ids;
};

int oci_parse_config(const char *buf, size_t len, struct image_config *ret, struct cove_err *err);
void image_config_free(struct image_config *c);

/* One image of a `docker save` manifest.json: the member names of its
 * config and layers, and its tags. */
struct docker_manifest {
	char *config;
	char **layers;
	size_t n_layers;
	char **repo_tags;
	size_t n_tags;
};

/* The image tagged ref (may be NULL: then the archive must hold one). */
int docker_parse_manifest(const char *buf, size_t len, const char *ref, struct docker_manifest *ret,
			  struct cove_err *err);
void docker_manifest_free(struct docker_manifest *m);

/* The chain id of layers 0..n-1 (image-spec: ChainID(L0) = DiffID(L0),
 * ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln))), into out. */
void oci_chain_id(char *const *diff_ids, size_t n, char out[DIGEST_STR_MAX]);

/* An OCI layout's oci-layout file: {"imageLayoutVersion": "1.0.0"}. */
int oci_parse_layout(const char *buf, size_t len, struct cove_err *err);
/* m as an OCI image manifest document (malloc'd, NUL-terminated), or NULL. */
char *oci_manifest_json(const struct oci_manifest *m);
