#include "common/array.h"

#include <stdint.h>
#include <stdlib.h>

void *array_room_for_one(void *items, size_t n, size_t *cap, size_t size, size_t first)
{
	if (n < *cap)
		return items;
	size_t want = *cap ? *cap * 2 : first;
	if (want > SIZE_MAX / size)
		return NULL;
	void *grown = realloc(items, want * size);
	if (grown)
		*cap = want;
	return grown;
}
