/* Parsers for user-supplied values (CLI flags and API fields), pure; and
 * the random IDs and tokens that coved hands out. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "512M", "1G", "1024", "64k" (binary units; optional trailing "B"/"iB") to
 * bytes. 0 or -1 on bad input or overflow. */
int parse_size(const char *s, uint64_t *ret);
/* "1.5" CPUs to millis (1500); 0 or -1. */
int parse_cpus(const char *s, uint32_t *ret);
/* An environment variable name: [A-Za-z_][A-Za-z0-9_]*, at most 255 bytes. */
bool env_name_valid(const char *name);
/* A sandbox ID: "sb_" and 12 characters of [a-z2-7]. */
bool sandbox_id_valid(const char *id);
/* Make a new random sandbox ID into buf (16 bytes). 0 or -errno. */
int sandbox_id_new(char buf[16]);
/* bytes random bytes (at most 64) as 2 * bytes lowercase hex digits and a
 * NUL into out. 0 or -errno. */
int random_hex(char *out, size_t bytes);
/* A snapshot ID: "sn_" and 12 characters of [a-z2-7]. */
bool snapshot_id_valid(const char *id);
/* Make a new random snapshot ID into buf (16 bytes). 0 or -errno. */
int snapshot_id_new(char buf[16]);
