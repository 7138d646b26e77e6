/* The Connect protocol as E2B's SDK speaks it (JSON codec, HTTP/1.1):
 * enveloped messages, unary and server-streaming answers, and its error
 * codes. Pure but for the answers: the envelope parser is unit-tested and
 * fuzzed (tests/unit/test_e2b_connect.c, tests/fuzz/). */
#pragma once
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END 0x02
#define CONNECT_MAX_MESSAGE (16u << 20)

/* A streaming request's body: exactly one uncompressed message envelope
 * holding a JSON object, and nothing after it. *ret is the object. -1 with
 * a COVE_EINVAL err naming what is wrong otherwise. */
int connect_parse_request(const uint8_t *body, size_t len, json_t **ret, struct cove_err *err);
/* The next envelope of a client stream's body at *off: its flags (0 or
 * CONNECT_FLAG_END) and its JSON object; *off moves past it. -1 with a
 * COVE_EINVAL err naming what is wrong (nothing moved). */
int connect_next(const uint8_t *body, size_t len, size_t *off, uint8_t *flags, json_t **ret, struct cove_err *err);
/* A unary request's body: a JSON object (empty = {}). */
int connect_parse_unary(const uint8_t *body, size_t len, json_t **ret, struct cove_err *err);
/* Connect's code name for a cove error code, and its HTTP status. */
const char *connect_code_of(int cove_code);
int connect_status_of(const char *code);
/* The 5-byte envelope header for a payload of len bytes. */
void connect_envelope_header(uint8_t flags, uint32_t len, uint8_t out[5]);
