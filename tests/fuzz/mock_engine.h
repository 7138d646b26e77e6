/* The mock engine of fuzz_api.c (mock_engine.c). */
#pragma once
#include <stdbool.h>

/* Set when a handler asked the engine to change something. */
extern bool mock_mutated;
