/* Sizes and ages as people read them in a table: "512M", "3 min ago". Pure. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* bytes in binary units, B K M G T P: an integer from 10 up ("512M",
 * "17G"), one decimal below ("1.5G"), none when it is whole ("2G"). */
void human_size(uint64_t bytes, char *buf, size_t cap);
/* How long before now_ms then_ms was (unix ms): "just now", "42 s ago",
 * "3 min ago", "5 h ago", "2 days ago"; "in the future" after now. */
void human_age(int64_t then_ms, int64_t now_ms, char *buf, size_t cap);
