/* kstate_gauges.c — keyed state's memory on /metrics (kstate_gauges.h). */
#include "state/kstate_gauges.h"

#include <stdio.h>

void nf_kstate_gauges_register(nf_kstate_gauges_t *g, nf_state_kind_t kind)
{
    char labels[96];
    snprintf(labels, sizeof labels, "kind=\"%s\"", nf_state_kind_name(kind));
    nf_metrics_gauge("newsflow_state_allocated_bytes",
                     "Memory a kind of keyed state holds (records, slot table, value "
                     "blocks, vectors): above state.budget_mb while an epoch's changes "
                     "outgrow it, given back when that epoch commits.",
                     labels, 0, &g->allocated);
    nf_metrics_gauge("newsflow_state_used_bytes",
                     "Memory a kind of keyed state needs for the entries it holds: what "
                     "state.budget_mb bounds (past it, an early epoch is asked for).",
                     labels, 0, &g->used);
}

void nf_kstate_gauges_set(const nf_kstate_gauges_t *g, const nf_kstate_stats_t *s)
{
    nf_gauge_set(g->allocated, s ? (int64_t)s->bytes : 0);
    nf_gauge_set(g->used, s ? (int64_t)s->used : 0);
}
