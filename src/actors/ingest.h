/* ingest.h — the left half of the pipeline as runtime actors (DESIGN.md §1): schedule, fetch,
 * parse and dedup, from a list of feed URLs to one normalized article per URL.
 *
 *   crawl (per shard; owns the sources whose host routes to it):
 *     per-source CrawlSchedule + wheel timer -> per-host politeness and breaker -> fetcher on
 *     the shard's io_uring -> parse (inline: stateless, and its outcome feeds the source's
 *     schedule) -> one fetch-log record per attempt -> each article sent to the dedup shard
 *     that owns its article_id.
 *   dedup (per shard; owns the article_ids that route to it):
 *     first sighting wins (ArticleKey: article_id -> first-seen time); new articles go to the
 *     sink's articles topic, duplicates are counted (and logged at debug as article.duplicate).
 *
 * Backpressure: an article refused by a full ring waits in the crawl actor's overflow list (in
 * order) and is re-sent from the resume hook; while that list is over max_pending_articles, or
 * max_in_flight fetches run, due sources queue instead of starting — input stops, nothing is
 * dropped. Shutdown: the stop hook cancels timers and in-flight fetches (recorded as cancelled
 * attempts), the overflow still drains to dedup before the shards exit.
 *
 * Call nf_ingest_register() after nf_runtime_create() and before nf_runtime_start(); the
 * context must outlive the runtime. Sources and options are read-only once shards run. */
#ifndef NF_INGEST_H
#define NF_INGEST_H

#include "actors/crawl_policy.h"
#include "actors/sources.h"
#include "feed/feed.h"
#include "io/addrguard.h"
#include "io/fetch.h"
#include "io/sink.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "state/epoch.h"
#include "state/store.h"

#include <string.h>

typedef struct nf_ingest_opts {
    nf_crawl_policy_t policy;
    nf_fetch_opts_t fetch; /* .guard is set to &guard by nf_ingest_register */
    nf_addrguard_t guard;
    nf_feed_limits_t limits;
    unsigned max_in_flight;        /* concurrent fetches per shard (default 256) */
    unsigned max_pending_articles; /* overflow before fetching pauses (default 4096) */
    uint32_t sink_flush_ms;        /* sink buffers flushed at least this often (default 100) */
} nf_ingest_opts_t;

void nf_ingest_opts_default(nf_ingest_opts_t *o);

typedef struct nf_ingest_metrics {
    nf_counter_t fetch_result[NF_FETCH_E_OTHER + 1]; /* by fetch error; OK split below */
    nf_counter_t fetch_http[6];                      /* 1xx..5xx by class, [0] other */
    nf_histogram_t fetch_seconds, lateness_seconds, parse_seconds;
    nf_counter_t fetch_bytes, deferred_host, deferred_breaker, deferred_capacity;
    nf_counter_t breaker_open, breaker_half_open, breaker_closed, sources_dead;
    nf_counter_t parse_result[6]; /* ok, too_large, not_a_feed, malformed, too_deep, nomem */
    nf_counter_t parse_articles, parse_no_link, parse_warnings, parse_truncated;
    nf_counter_t dedup_new, dedup_duplicate, sink_errors, ring_full_articles;
    nf_gauge_t in_flight, pending_articles, sources, dedup_keys, dedup_bytes;
} nf_ingest_metrics_t;

typedef struct nf_ingest {
    nf_ingest_opts_t o;
    const nf_source_list_t *sources;
    /* Outputs go to the epoch (committed with state; `newsflow run`) when set, else straight
     * to the sink (tests of the ingestion path alone). */
    nf_epoch_t *epoch;
    nf_sink_t *sink;
    nf_store_t *store;   /* NULL: ArticleKey and CrawlSchedule in memory only */
    size_t budget_bytes; /* ArticleKey state in memory per shard (0 = unlimited) */
    int crawl_actor, dedup_actor;
    nf_ingest_metrics_t m;
} nf_ingest_t;

/* One output record of the ingestion actors, from shard `shard`: into the epoch when there is
 * one, else into the sink. 0 or -errno. */
static inline int nf_ingest_emit(nf_ingest_t *in, unsigned shard, nf_topic_t topic, const char *key,
                                 const char *value, size_t len)
{
    if (in->epoch)
        return nf_epoch_emit(in->epoch, shard, topic, key, strlen(key), value, len);
    return nf_sink_emit(in->sink, shard, topic, key, value, len);
}

/* Registers the crawl and dedup actors and their metrics. 0 or -errno. */
int nf_ingest_register(nf_runtime_t *rt, nf_ingest_t *in);

#endif
