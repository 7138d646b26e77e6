/* Pulling an image from an OCI distribution registry (the /v2/ API) with
 * libcurl into the image store (image.h): the manifest for the reference
 * (an index resolved to linux/amd64), its config and layers, each verified
 * by its digest and size as it is written (blobs.h), then unpacked as an
 * import is. A blob already in the store is not downloaded again. A blob
 * transfer that breaks off is resumed where it stopped (an HTTP Range
 * request, the hash carried on), up to REGISTRY_TRIES times.
 *
 * Authentication, as a registry asks for it with a 401 and its
 * WWW-Authenticate challenge: Basic (the credentials in opts) or Bearer
 * (a token from the challenge's realm, anonymous or with the credentials).
 * Plain HTTP only for loopback registries or with opts->insecure.
 *
 * Blocking, under the import lock: the manifest and config one after the
 * other, then the layers REGISTRY_PARALLEL (4) at a time on a curl multi
 * handle, each resumed on its own; a layer whose token ran out (a 401) is
 * fetched again alone, authenticating. Never linked into coved (it would
 * bring libcurl's shared libraries into every fork): coved runs it in its
 * helper, cove-image (src/image/helper/). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "image/image.h"

#define REGISTRY_TRIES 5

/* What a pull moved, for progress and for the tests. */
struct registry_stats {
	uint64_t blobs;   /* blobs downloaded (those already stored are not) */
	uint64_t bytes;   /* blob bytes received */
	uint64_t resumed; /* transfers continued with a Range request */
};

struct registry_opts {
	bool insecure;                /* plain HTTP for a registry that is not on loopback */
	const char *user, *password;  /* NULL: anonymous */
	uint64_t test_cut_after;      /* fault injection: the first blob transfer breaks off after this many bytes */
	struct registry_stats *stats; /* filled if not NULL */
};

int image_pull(struct image_store *s, const char *ref, const struct registry_opts *opts, struct image_info *ret,
	       struct cove_err *err);
