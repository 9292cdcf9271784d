/* failpoint.h — named fault points for drills and tests, switched on from the environment.
 *
 * NEWSFLOW_FAILPOINTS is a comma-separated list of names (no spaces), read once, on the first
 * call, by whichever thread makes it. A point in the code asks nf_failpoint("its-name") and, when
 * listed, fails as it would for real, through the same error path. The names in use
 * (docs/runbooks.md, "Failure drills"):
 *
 *   actor-init:NAME   the runtime treats actor NAME's init as failed on every shard
 *                     ("failpoint actor-init:NAME"), before calling it (runtime.c).
 *   slow-route:feed=MS  the feed route answers MS milliseconds late, sleeping where it runs
 *                     (a shard's loop: the shard waits too), to drill the feed latency SLO's
 *                     alerts (serve/query.c).
 *
 * Unset or empty: every call is false, after the one-time read. Not configuration: the
 * configuration loader lets the variable through (config.c). */
#ifndef NF_FAILPOINT_H
#define NF_FAILPOINT_H

#include <stdbool.h>

#define NF_FAILPOINTS_ENV "NEWSFLOW_FAILPOINTS"

/* Any thread: is name listed in NEWSFLOW_FAILPOINTS (an exact, whole entry)? */
bool nf_failpoint(const char *name);
/* Any thread: the number of an entry "name=N" (N a decimal in [0, 2^31)), or -1 when none is
 * listed (or N is not such a number). */
long nf_failpoint_value(const char *name);

#endif
