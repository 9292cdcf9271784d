/* ratelimit.h — token buckets per client, so that one reader or one address cannot take the
 * readers' server for itself (issue 38): a request that finds its bucket empty is answered 429
 * with Retry-After, the time until the bucket holds what the request costs.
 *
 * A bucket holds up to `burst` tokens and refills at `rate` per second; a request takes `cost`
 * (1, or the number of events of a batch). Buckets are keyed by a client's name (the token's
 * subject when it has one, else its address) hashed to 64 bits, in a table of fixed size: at
 * most max_keys clients are tracked, and past it the bucket idle longest in the probe window is
 * reused (a forgotten client starts full: the table errs toward letting a request through, and
 * its memory never grows). 16 stripes, each behind its own mutex, so that the HTTP server's
 * threads seldom wait on each other.
 *
 * Threads: new/free from one thread; nf_ratelimit_take from any thread. */
#ifndef NF_RATELIMIT_H
#define NF_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_ratelimit nf_ratelimit_t;

/* rate: tokens per second (> 0); burst: the bucket's size (>= 1); max_keys: clients tracked
 * (rounded up to a power of two, at least 1024). NULL on out-of-memory. */
nf_ratelimit_t *nf_ratelimit_new(double rate, double burst, size_t max_keys);
void nf_ratelimit_free(nf_ratelimit_t *l);

/* Takes cost tokens from key's bucket at now_ns (a monotonic clock): true if it had them; else
 * false and *retry_after_s = whole seconds (at least 1) until it will. A cost above the burst
 * can never be met: false with the time a full bucket needs. */
bool nf_ratelimit_take(nf_ratelimit_t *l, const char *key, size_t keylen, double cost,
                       uint64_t now_ns, unsigned *retry_after_s);

#endif
