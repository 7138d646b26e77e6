/* Dockerfile builds (build.c: the steps on the engine's loop; build_fs.c:
 * their files, on worker threads).
 *
 * A build takes a context (a tar, spooled, then unpacked into
 * <pool>/images/builds/<id>/context) and a Dockerfile in it
 * (image/dockerfile.h), and makes an image like an imported one: each
 * step that changes files (RUN, COPY, ADD, a WORKDIR that makes its
 * folder) is a layer, an uncompressed tar diff stored as a blob whose
 * digest is its diff id, applied onto a snapshot of the tree below
 * (image_layer_make): <pool>/images/layers/<chain id hex>, as an import's.
 * The other instructions change the image's config only.
 *
 * The cache is the layers themselves, as BuildKit's is keyed by the step
 * and its inputs: a COPY or ADD's tar is made first (its digest is its
 * content: names, modes, owners and bytes of the files copied), and the
 * layer of that diff over that parent is its chain id, found or made; a
 * RUN's key is the digest of the parent's chain id, the command, and the
 * env, workdir and user it runs with, and <pool>/images/build-cache/<key
 * hex> names the diff its run made. A RUN runs in a sandbox of the image
 * so far (network "egress"), with its output streamed; its layer is what
 * it changed (engine/changes.h), whiteouts and opaque folders included.
 *
 * Events on the output (OUT_EVENT, struct image_event):
 *   {"type":"step","step":N,"total":T,"line":L,"instruction":TEXT}
 *   {"type":"output","stream":"stdout"|"stderr","data":TEXT}
 *   {"type":"step_done","step":N,"cached":bool[,"layer":CHAIN]}
 *   {"type":"image","image":{...}} last.
 * A bad Dockerfile, an unknown FROM image or a missing COPY source found
 * before the first event is the output's error, with nothing made. A
 * failure after that (a RUN that exits non-zero, a COPY source missing)
 * ends the stream with the error; the build's sandbox, scratch files and
 * the layers it made are deleted, in every case (the client gone too).
 *
 * FROM host: the host image is the first layer (image/image.h), the
 * host's /usr and /opt layered in at run time under what the RUN steps
 * wrote there; a RUN's deletion of a host file there is not kept.
 *
 * Where it is not Docker's: one stage (no COPY --from, a second FROM is
 * refused); ADD takes no URL; copied folders get mtime 0 (the context's
 * were changed by its unpacking), so a file's cache key includes its mtime
 * but not a folder's; RUN keeps no xattrs (file capabilities a RUN sets
 * are lost); a RUN runs as USER's user part (its group is the user's
 * own). */
#pragma once
#include <jansson.h>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/output.h"

struct evbuffer;
struct build;

struct build_request {
	const char *tag;        /* the image's name, or NULL */
	const char *dockerfile; /* its path in the context ("Dockerfile") */
	json_t *build_args;     /* object of strings, or NULL */
};

/* A build whose context comes in pieces (build_data, then build_end). */
int build_start(struct engine *d, const struct build_request *rq, struct output *out, struct build **ret,
		struct cove_err *err);
/* -1: the build failed (out was closed). */
int build_data(struct build *b, struct evbuffer *buf);
void build_end(struct build *b);
