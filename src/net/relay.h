/* Bytes both ways between two connected bufferevents, with back-pressure:
 * a side's reading stops while the other side has RELAY_HIGH_WATER bytes
 * or more waiting to be written, and starts again once they drain below
 * half of that, so a fast sender and a slow receiver cost at most about
 * RELAY_HIGH_WATER per direction in memory (redis' and libevent's rule: no
 * unbounded buffer).
 *
 * When one side ends (EOF or error), what the other still has to write is
 * written (an EOF is passed on as a shutdown of writing), and the relay
 * ends when both directions are done or after RELAY_LINGER_S; done is
 * called once, after both bufferevents are freed. A byte relay any proxy
 * of coved's can use (the egress proxy; the inbound port proxy). */
#pragma once
#include <event2/bufferevent.h>

#define RELAY_HIGH_WATER (64 * 1024)
#define RELAY_LINGER_S 30

struct relay;
typedef void (*relay_done_fn)(void *data);

/* Takes a and b (BEV_OPT_CLOSE_ON_FREE expected), both connected. What a
 * already holds in its input (bytes read before the relay started) goes
 * to b first. NULL on allocation failure (a and b then freed, done not
 * called). */
struct relay *relay_start(struct bufferevent *a, struct bufferevent *b, relay_done_fn done, void *data);
/* Ends the relay at once (both freed, done not called). NULL-safe. */
void relay_free(struct relay *r);
