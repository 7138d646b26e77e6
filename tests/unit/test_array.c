/* array_room_for_one: doubling growth that keeps what is there. */
#include <stdint.h>
#include <stdlib.h>

#include "common/array.h"
#include "tap.h"

int main(void)
{
	int *items = NULL;
	size_t n = 0, cap = 0;
	bool kept = true, roomy = true;
	for (int i = 0; i < 100; i++) {
		int *grown = array_room_for_one(items, n, &cap, sizeof(*items), 4);
		if (!grown)
			break;
		items = grown;
		roomy = roomy && n < cap;
		items[n++] = i;
	}
	for (size_t i = 0; i < n; i++)
		kept = kept && items[i] == (int)i;
	CHECK(n == 100 && roomy, "100 appends, each with room (%zu)", n);
	CHECK(kept, "the items stay as they were through every growth");
	CHECK(cap == 128, "the capacity doubles from the first size: 4, 8, ... 128 (%zu)", cap);
	CHECK(array_room_for_one(items, n - 1, &cap, sizeof(*items), 4) == items && cap == 128,
	      "with room left: the same array, capacity unchanged");
	size_t huge = SIZE_MAX / 4;
	CHECK(array_room_for_one(items, huge, &huge, sizeof(*items), 4) == NULL && huge == SIZE_MAX / 4,
	      "a size that would overflow: NULL, capacity unchanged");
	free(items);
	return tap_done();
}
