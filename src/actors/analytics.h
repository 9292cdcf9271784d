/* analytics.h — the right half of the pipeline (docs/ARCHITECTURE.md §1) wired into the actors:
 * classify, cluster, trending and interest, each exactly-once through the epoch like the left half.
 *
 *   crawl (ingest.h), per article it serializes: classify (engine/classify.h; the shard's own
 *     stemmer) adds category_labels and topics to the articles value; MinHash (algo/minhash.h)
 *     signs title + body. Both are stateless, so they run where the text is, spread over the
 *     shards, and travel with the article to dedup (a duplicate's work is wasted: feeds are
 *     re-fetched conditionally, so duplicates are few).
 *   dedup, for a new article only, in the epoch that emits it:
 *     - its topic vector into keyed state NF_KIND_ARTICLE_TOPICS (the durable copy, TTL
 *       cluster.ttl_s) and broadcast to every shard's interest engine (NF_MSG_TOPICS);
 *     - its signature to the stories actor of the cluster shard (NF_MSG_CLUSTER).
 *   stories (one shard: cluster.shard % shards owns the whole similarity index — LSH is a
 *     global similarity join, and one shard does tens of thousands of articles/s against feed
 *     volumes of hundreds): engine/cluster.h assigns the article; one story-clusters record
 *     {article_id, cluster_id, action new|joined|merged, similarity, merged_from, ts}.
 *   kafka_in (reads.h), per read event after decoding: the event_id dedup set (a keyset,
 *     state/keyset.h: kind NF_KIND_EVENT_IDS, key group = partition, TTL
 *     trending.event_id_ttl_s, held wholly in memory by the shard that consumes the partition;
 *     a repeat changes nothing downstream), then the trending counter of the event's partition
 *     (engine/trend.h: one counter per read-events partition, held by the shard that consumes
 *     it; its watermark, panes of slide_s, and late decisions depend on that partition's stream
 *     only), then to the user's interest shard with its keys computed (nf_interest_read_init).
 *     Every 250 ms each counter's final panes and then its watermark go to the trending merger,
 *     or, once the partition has been idle for trending.idle_ms, its open panes and
 *     NF_MSG_IDLE.
 *   trending merger (shard 0): its counters are the read-events partitions (trend_partitions);
 *     it sums their pane summaries per pane; each time the minimum of the active partitions'
 *     watermarks passes a window end, one ranked list to `trending` (key = window_end).
 *   interest (the reads actor, reads.h): engine/interest.h per event; one interest-updates
 *     record per counted event.
 *
 * Durability: every piece of state above is keyed state, a keyset or a blob in NF_KIND_TRENDING
 * written at the epoch's cut, so state, outputs and input offsets commit together. Trending
 * blobs are keyed by partition ("C" + partition: a counter; "P" + partition + pane_start: a pane
 * summary the merger took; "M": the merger's meta), so runtime.shards may change between runs:
 * whichever shard consumes a partition loads its counter. State of the per-shard layout of
 * earlier versions (lower-case keys "c" + shard, "n", "p", "m") cannot be split by partition:
 * the merger drops it at start (nf_analytics_legacy_shards finds it), keeping only its last
 * window end so no window is emitted twice, logs at warn what is lost and counts the dropped
 * blobs in newsflow_trending_legacy_dropped_total.
 *
 * Register with nf_analytics_register() after nf_runtime_create() and before the ingest and
 * reads actors (they read the actor ids); the struct must outlive the runtime. */
#ifndef NF_ANALYTICS_H
#define NF_ANALYTICS_H

#include "algo/minhash.h"
#include "engine/breaking.h"
#include "engine/classify.h"
#include "engine/cluster.h"
#include "engine/interest.h"
#include "engine/notify.h"
#include "engine/trend.h"
#include "io/sink.h"
#include "runtime/metrics.h"
#include "runtime/outbox.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"
#include "state/epoch.h"
#include "state/kstate_gauges.h"
#include "state/store.h"

#include <stdatomic.h>
#include <string.h>

/* Message kinds. NF_MSG_TOPICS goes to the reads actor; NF_MSG_CLUSTER to stories;
 * NF_MSG_PANE, NF_MSG_WATERMARK and NF_MSG_IDLE to the trending merger. WATERMARK and IDLE:
 * body.u64[0] the counter's taken watermark, body.u64[1] its partition. */
enum {
    NF_MSG_TOPICS = 20,
    NF_MSG_CLUSTER = 21,
    NF_MSG_PANE = 22,
    NF_MSG_WATERMARK = 23,
    NF_MSG_IDLE = 24,
    NF_MSG_BREAKING = 25 /* to the reads actor: body.ptr an nf_notify_window_t (heap, freed by
                          * the receiver) */
};

/* NF_MSG_TOPICS body.ptr (heap, freed by the receiver). */
typedef struct nf_topics_msg {
    nf_id128_t id;
    nf_topic_vec_t vec;
} nf_topics_msg_t;

/* NF_MSG_CLUSTER body.ptr (heap, freed by the receiver). */
typedef struct nf_cluster_msg {
    nf_id128_t id;
    int64_t ingested_ms;
    int64_t published_ms; /* as the query API counts it (serve_state.h) */
    uint64_t source;      /* nf_serve_source_hash of its source_id; 0: none */
    nf_trace_ctx_t trace; /* the article's fetch (runtime/trace.h): the cluster span's parent */
    uint32_t sig[];       /* minhash hashes */
} nf_cluster_msg_t;

/* NF_MSG_PANE body.ptr (heap): one final pane of a partition's counter. */
typedef struct nf_pane_msg {
    int32_t partition;
    int64_t pane_start;
    size_t len;
    unsigned char blob[];
} nf_pane_msg_t;

typedef struct nf_analytics {
    /* Set by the caller. */
    nf_epoch_t *epoch; /* outputs with the epoch; NULL: straight to sink */
    nf_sink_t *sink;
    nf_store_t *store;                      /* NULL: memory only */
    const nf_classify_taxonomy_t *taxonomy; /* NULL: articles carry no labels or topics */
    nf_minhash_opts_t minhash;
    nf_cluster_opts_t cluster;
    unsigned cluster_shard; /* modulo the shard count */
    nf_trend_opts_t trend;
    /* The read-events partition count: the merger's counters. 0: nf_reads_register sets it
     * (from Kafka's metadata, or the memory source's partition count). */
    unsigned trend_partitions;
    /* A job in several processes (state.changelog with a consumer group): the counters' panes,
     * watermarks and idle marks go through the trending-panes topic (one partition), and the
     * merger runs in the process assigned it, restored there from the changelog; elsewhere it
     * stays empty and writes nothing. false: straight to shard 0's merger, as messages. */
    bool panes_topic;
    uint64_t event_id_ttl_ms;
    /* trending.max_future_ms (0 = no bound): a read event dated further ahead of the wall clock
     * goes to dead-letters (reads.h), and trending state restored with an event time or
     * watermark beyond it (saved before the bound existed) is repaired at start
     * (nf_trend_counter_clamp, nf_trend_merger_clamp): logged at warn, counted in
     * m.trend_repairs. */
    int64_t max_future_ms;
    /* Read events older than this when they were written (their Kafka record's timestamp) are
     * not counted into trending (counted in m.old_events), so that one stray old event does
     * not open windows dated then; interest still takes them. A rule on the record, not on when
     * it is read: a replay decides the same. Records of the memory source (a file replayed on
     * purpose) have no write time and are all counted. 0 = no bound (trending.backfill); else
     * window + lateness. */
    int64_t max_age_ms;
    uint64_t topics_ttl_ms; /* an article's topic vector in state (default 7 days) */
    /* The merger ranks stories (trending.by_story; needs a store: the stories are read from its
     * committed views); false: articles. */
    bool trend_by_story;
    /* breaking.*: the merger announces breaking news (engine/breaking.h); false: it does not */
    bool breaking;
    nf_breaking_opts_t breaking_opts;
    /* The merger thread's CPU spent on breaking news (reading the leads' topics, judging), ns:
     * newsflow_breaking_cpu_seconds_total, and what the read-path benchmark divides. */
    _Atomic uint64_t breaking_cpu_ns;
    /* notifications.*: the merger sends each window's breaking stories to every shard's reads
     * actor (NF_MSG_BREAKING), which notifies the subscribed readers (engine/notify.h); false:
     * subscriptions are kept, nothing is sent. notify_cap: per reader per day. */
    bool notify;
    unsigned notify_cap;
    _Atomic uint64_t notify_cpu_ns; /* the shards' CPU fanning windows out to readers */
    /* a reader's counted events kept for GET /v1/users/{user}/reads (serve_state.h,
     * NF_KIND_READS) this long; 0: no history. history_reads: reads too, not only explicit
     * feedback (each read then costs a state write) */
    uint64_t history_ttl_ms;
    bool history_reads;
    nf_interest_opts_t interest;
    size_t budget_bytes; /* per kind of keyed state per shard (0 = unlimited) */
    /* Set by nf_analytics_register (and interest_actor by nf_reads_register). */
    nf_minhash_t *mh;
    int stories_actor, trend_actor, interest_actor;
    const char *topic_names[NF_TOPICS_MAX + 1];
    struct {
        nf_counter_t clusters[4]; /* new, joined, merged, duplicate */
        nf_counter_t topics_broadcast, unclassified, unsigned_articles;
        nf_counter_t event_duplicates, late_events, old_events, counted_events, windows, panes;
        nf_counter_t interest_duplicates, interest_unknown, state_errors, trend_repairs;
        nf_counter_t trend_legacy_dropped, index_loads, index_evictions, story_sizes_lost;
        nf_counter_t trend_story_errors, trend_stories_folded;
        nf_counter_t breaking_news, breaking_topic_errors;
        /* engine/notify.h's outcomes (sent, repeat, capped), the windows fanned out */
        nf_counter_t notify[NF_NOTIFY__OUTCOMES], notify_windows;
        nf_gauge_t notify_subscribers;
        nf_gauge_t breaking_cooling;
        nf_gauge_t held_messages, index_bytes, index_entries, trend_watermark_lag;
        nf_histogram_t trend_freshness; /* the trending SLO's (docs/slo.md) */
        nf_gauge_t trend_open_panes, trend_bytes, merger_panes, merger_bytes;
        nf_kstate_gauges_t sig_mem, bucket_mem, parent_mem, story_mem; /* kstate_gauges.h */
    } m;
} nf_analytics_t;

void nf_analytics_defaults(nf_analytics_t *an);

/* Registers the stories and trending-merger actors and the metrics; builds the MinHash
 * functions. 0, -EINVAL (inconsistent options; err says which) or -ENOMEM. */
int nf_analytics_register(nf_runtime_t *rt, nf_analytics_t *an, char *err, size_t errlen);
void nf_analytics_free(nf_analytics_t *an);

/* Trending blobs in NF_KIND_TRENDING follow the store's TTL convention (store.h): an 8-byte
 * expiry, here 0 (never), before the blob — without it the compaction filter would read the
 * blob's first bytes as an expiry time. put: 0 or -ENOMEM. value: the blob inside a stored
 * value, or NULL if the value is too short. */
int nf_analytics_put_blob(nf_store_batch_t *b, const void *key, size_t klen, const void *blob,
                          size_t len);
const void *nf_analytics_blob(const void *val, size_t vlen, size_t *len);
/* A blob of any size under KEY (klen <= NF_ANALYTICS_KEY_MAX), as chunks of at most
 * NF_ANALYTICS_CHUNK_BYTES: each chunk is one RocksDB value and one changelog record, so a
 * trending counter of any size stays under Kafka's record limit. Up to one chunk: one value under
 * KEY, as nf_analytics_put_blob writes it. More: KEY holds [u32 NF_ANALYTICS_CHUNKED][u32 n]
 * [u64 total length] and the first chunk; KEY + chunk index (2 bytes BE) the others. put also
 * deletes the chunks past the new count of the PREV chunks the key had (0 if unknown) and sets
 * *chunks to the new count. 0 or -ENOMEM (-EFBIG past 65535 chunks).
 * get: 1 and the whole blob (malloc'ed) with its chunk count, 0 if KEY has none, or -errno
 * (err says what: a chunk missing or of the wrong length); the head and the chunks are read in
 * one scan, so from one consistent view of the store. A failed put marks b failed. */
#define NF_ANALYTICS_CHUNK_BYTES (1u << 20)
#define NF_ANALYTICS_CHUNKED     0x4B434E4Eu /* "NNCK" little-endian; not a blob's magic */
#define NF_ANALYTICS_KEY_MAX     32
int nf_analytics_put_chunked(nf_store_batch_t *b, const void *key, size_t klen, const void *blob,
                             size_t len, unsigned prev, unsigned *chunks);
int nf_analytics_get_chunked(nf_store_t *st, const void *key, size_t klen, void **blob, size_t *len,
                             unsigned *chunks, char *err, size_t errlen);
/* The shard count of trending state of the per-shard layout (earlier versions: key "n"), 0 if
 * there is none, or -errno. Any thread (the store is thread-safe). */
long nf_analytics_legacy_shards(nf_store_t *st);

/* The nf_trend_fix_fn of the trending repair at start (an->max_future_ms): logs the change at
 * warn, old and new values as dates, and counts it in m.trend_repairs. ctx: the nf_analytics_t.
 * Any thread (a counter increment and a log line). */
void nf_analytics_trend_fixed(void *ctx, nf_trend_fix_t what, int64_t id, int64_t old_v,
                              int64_t new_v);

/* One output record of an analytics actor: into the epoch when there is one, else the sink. */
static inline int nf_analytics_emit(nf_analytics_t *an, unsigned shard, nf_topic_t topic,
                                    const char *key, const char *value, size_t len)
{
    if (an->epoch)
        return nf_epoch_emit(an->epoch, shard, topic, key, strlen(key), value, len);
    if (an->sink)
        return nf_sink_emit(an->sink, shard, topic, key, value, len);
    return 0; /* benchmarks: serialized and counted, kept nowhere */
}

#endif
