/* ingest_latency.h — how long an article took to be committed: the ingest SLO's series
 * (docs/slo.md). dedup notes each new article (its fetch time, and its publication time when the
 * feed gave a real one), marks the epoch cuts, and when an epoch is durable every article it
 * carried is observed into
 *
 *   newsflow_ingest_latency_seconds{from="fetched"}    fetch done -> epoch committed
 *   newsflow_ingest_latency_seconds{from="published"}  the feed's date -> epoch committed
 *
 * A sampled article's trace (runtime/trace.h) ends the same way: its article.commit span.
 *
 * Memory is bounded: at most `max` articles wait for their commit per shard (16 bytes each);
 * beyond, an article is not observed and newsflow_ingest_latency_unobserved_total counts it.
 * One instance per shard, used on that shard's thread only. */
#ifndef NF_ACTORS_INGEST_LATENCY_H
#define NF_ACTORS_INGEST_LATENCY_H

#include "runtime/metrics.h"
#include "runtime/trace.h"

#include <stddef.h>
#include <stdint.h>

typedef struct nf_ingest_latency_metrics {
    nf_histogram_t fetched, published;
    nf_counter_t unobserved;
} nf_ingest_latency_metrics_t;

/* Registers the series (once per process: nf_metrics returns the same ones again). */
void nf_ingest_latency_metrics(nf_ingest_latency_metrics_t *m);

typedef struct nf_ingest_latency nf_ingest_latency_t;

/* NULL: out of memory. m must outlive it. */
nf_ingest_latency_t *nf_ingest_latency_new(const nf_ingest_latency_metrics_t *m, size_t max);
void nf_ingest_latency_free(nf_ingest_latency_t *l);
/* A new article, in the epoch being filled: fetched_ms, and published_ms (0: no real date). */
void nf_ingest_latency_add(nf_ingest_latency_t *l, int64_t fetched_ms, int64_t published_ms);
/* The cut of `epoch`: the articles added since the last cut are its own. */
void nf_ingest_latency_cut(nf_ingest_latency_t *l, uint64_t epoch);
/* Epochs up to `epoch` are durable at now_ms: their articles are observed and let go. */
void nf_ingest_latency_committed(nf_ingest_latency_t *l, uint64_t epoch, int64_t now_ms);
/* A sampled article's trace (ctx: its trace and its dedup span, the parent): at its epoch's
 * commit an article.commit span from start_ns to the commit is exported, linked to the epoch's
 * own trace (nf_trace_epoch). At most 256 wait a shard; beyond, they are not traced. */
void nf_ingest_latency_trace(nf_ingest_latency_t *l, const nf_trace_ctx_t *ctx, int64_t start_ns,
                             const char *article_id);
/* Articles waiting for their epoch's commit (tests). */
size_t nf_ingest_latency_waiting(const nf_ingest_latency_t *l);

/* The histogram's bounds in seconds: 30 s, the objective, is one of them. */
extern const double nf_ingest_latency_bounds[];
extern const unsigned nf_ingest_latency_nbounds;

#endif
