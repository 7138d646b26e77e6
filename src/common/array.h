/* Arrays that grow by doubling. */
#pragma once
#include <stddef.h>

/* items (n of them in use, *cap allocated, each size bytes) with room for
 * one more: items itself when there is room, else a larger copy (*cap
 * doubled, or first when nothing was allocated) and items freed. NULL when
 * out of memory, with items and *cap unchanged. */
void *array_room_for_one(void *items, size_t n, size_t *cap, size_t size, size_t first);
