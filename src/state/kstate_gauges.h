/* kstate_gauges.h — the memory of a kind of keyed state on /metrics:
 * newsflow_state_allocated_bytes{kind} and newsflow_state_used_bytes{kind} (kind = the store's
 * name of the kind, nf_state_kind_name), summed over the shards that hold one. What each counts
 * is kstate.h's stats.bytes and stats.used: `used` is what state.budget_mb bounds, `allocated`
 * what the process holds for it (above the budget while an epoch's dirty entries outgrow it,
 * given back by the commit that makes them clean: docs/ARCHITECTURE.md §4). */
#ifndef NF_KSTATE_GAUGES_H
#define NF_KSTATE_GAUGES_H

#include "runtime/metrics.h"
#include "state/kstate.h"

typedef struct nf_kstate_gauges {
    nf_gauge_t allocated, used;
} nf_kstate_gauges_t;

/* Registers the two gauges of kind (start-up, before the shards run); a failure is the
 * registry's to report (metrics.h). */
void nf_kstate_gauges_register(nf_kstate_gauges_t *g, nf_state_kind_t kind);
/* Sets this shard's part from the stats of its kstate of that kind (NULL: 0). From that shard. */
void nf_kstate_gauges_set(const nf_kstate_gauges_t *g, const nf_kstate_stats_t *s);

#endif
