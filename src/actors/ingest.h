/* ingest.h — the left half of the pipeline as runtime actors (docs/ARCHITECTURE.md §1): schedule,
 * fetch, parse and dedup, from a list of feed URLs to one normalized article per URL.
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
 * The sources topic (docs/topics.md; compacted, key = source_id, value {url, type, interval_s,
 * status}, tombstone = remove) changes the crawl actors' sources at run time:
 *   kafka_in (kafka_in.c) decodes a record and asks nf_ingest_source_route() where it goes: the
 *     shard whose host key owns the source's host gets NF_MSG_SOURCE_SET (the definition);
 *     every other shard gets NF_MSG_SOURCE_FORGET, because a URL change may move a source to
 *     another shard and a tombstone names no host — a shard holding the source drops it.
 *     (Sources change rarely: one heap record plus shards-1 in-line messages per record.)
 *     A record whose key, JSON or URL is invalid goes to dead-letters instead (stage "decode").
 *   crawl applies SET as an upsert by source_id: a new source is crawled soon (the first-crawl
 *     spread of crawl.c: within 10 ms per source of the shard). For a known one, a new URL
 *     starts a new schedule (validators, failures and backoff belonged to the old URL) and is
 *     crawled soon like a new source; a new interval_s takes effect at the next result
 *     (nf_crawl_set_interval); the status is applied when it differs from the topic's previous
 *     one or the URL changed: paused = never due (timer cancelled), dead = as the policy's
 *     DEAD, active = revived if it was not (failures reset) and crawled soon. A republished
 *     identical record changes nothing — in particular it does not revive a source the policy
 *     declared DEAD (change its status or URL, or ask for a crawl now). crawl_at_ms (an
 *     operator's `sources crawl-now`) other than the last one the source applied makes an
 *     active source due at once — out of a backoff, or revived if the policy declared it DEAD,
 *     after the running fetch if one runs; the source is not crawled again for the same request
 *     (an identical record republished), and a paused one ignores it. A fetch running when the URL
 *     changes still gets its fetch-log record, but its result is not applied. FORGET drops a
 *     source: its timer is cancelled; a fetch in flight completes into fetch-log only (no
 *     parse, no schedule update) and then the source is freed.
 *   Durability: a topic source's definition is part of its CrawlSchedule value, so a restart
 *     recreates it (each shard scans NF_KIND_CRAWL_SCHEDULE for the topic sources routed to it,
 *     whatever the shard count was) with its schedule; a tombstone deletes the state key at the
 *     next epoch cut. Records move with the epochs like read events: the sources position
 *     commits with the state the records produced.
 *   Precedence: a topic record whose key is the source_id of a configured source (the 16 hex
 *     digits nf_sources_add() derives from the URL) overrides it: the topic's URL, interval and
 *     status win, now and after restarts, for as long as the record exists. Its tombstone
 *     removes the override, not the source: the configured definition applies again (to stop a
 *     configured feed from the topic, publish it with status "paused"). Other keys are sources
 *     of their own, even when their URL equals a configured one's. Topic URLs must be http(s).
 *
 *   In a consumer group with changelogs (in_partitions; docs/ARCHITECTURE.md §3 "Sources and the
 *     global stages in a consumer group"): the sources partitions are spread over the processes
 *     like read-events; a process holds only the sources whose records are in the partitions
 *     assigned to it, their CrawlSchedule in that partition's key group. A gained partition's
 *     schedules are restored from the changelog and loaded (crawl_partitions: crawled on at their
 *     next_crawl_at, validators kept); a lost one's are forgotten once its last epoch committed,
 *     without deleting their state. The configured sources are not crawled from the list but
 *     published to the topic at start (sources_publish.h), each to its host's partition
 *     (nf_sources_partition), so one process holds all of a host's feeds and its politeness and
 *     breaker hold across the job. A record in another partition is taken there (that partition is
 *     its key group) and counted in newsflow_sources_misplaced_total.
 *     Articles then go through the job's one-partition topic (trending-panes, the "global stages"
 *     of docs/ARCHITECTURE.md §3): crawl emits each as a record (article_msg.h) in the epoch that
 *     found it; kafka_in of the process assigned that partition hands it to its dedup shard.
 *     ArticleKey, topic vectors and the story index are kept in the global key group
 *     (NF_CHANGELOG_GLOBAL_KG) and move with that partition: one article per URL, one cluster index
 *     for the whole job.
 *
 * Call nf_ingest_register() after nf_runtime_create() and before nf_runtime_start(); the
 * context must outlive the runtime. Sources and options are read-only once shards run. */
#ifndef NF_INGEST_H
#define NF_INGEST_H

#include "actors/crawl_policy.h"
#include "actors/ingest_latency.h"
#include "actors/sources.h"
#include "feed/feed.h"
#include "io/addrguard.h"
#include "io/events.h"
#include "io/fetch.h"
#include "io/kafka.h"
#include "io/sink.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "state/epoch.h"
#include "state/kstate_gauges.h"
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
    /* Article dates beyond the fetch time + this (trending.max_future_ms; default 300000; 0 =
     * no bound), or at or before 1970, are replaced (nf_article_bound_dates in feed/feed.h). */
    int64_t max_future_ms;
} nf_ingest_opts_t;

void nf_ingest_opts_default(nf_ingest_opts_t *o);

typedef struct nf_ingest_metrics {
    nf_counter_t fetch_result[NF_FETCH_E_OTHER + 1]; /* by fetch error; OK split below */
    nf_counter_t fetch_http[6];                      /* 1xx..5xx by class, [0] other */
    nf_histogram_t fetch_seconds, lateness_seconds, parse_seconds, classify_seconds;
    nf_counter_t fetch_bytes, deferred_host, deferred_breaker, deferred_capacity,
        deferred_membership;
    nf_counter_t breaker_open, breaker_half_open, breaker_closed, sources_dead;
    nf_counter_t parse_result[6]; /* ok, too_large, not_a_feed, malformed, too_deep, nomem */
    nf_counter_t parse_articles, parse_no_link, parse_warnings, parse_truncated;
    nf_counter_t parse_dates_replaced;
    nf_counter_t dedup_new, dedup_duplicate, sink_errors, ring_full_articles;
    /* Sources topic, counted by the shard that applies the change; a source whose new URL moves
     * it to another shard counts as removed here and added there. */
    nf_counter_t sources_added, sources_updated, sources_removed;
    nf_counter_t sources_misplaced; /* in_partitions: records outside their host's partition */
    nf_gauge_t in_flight, pending_articles, sources, dedup_keys, dedup_bytes;
    nf_kstate_gauges_t seen_mem, topics_mem; /* ArticleKey, topic vectors (kstate_gauges.h) */
    /* Sources by health (crawl_policy.h: ok, backoff, dead, paused), each shard its own part;
     * failure log lines the per-source rate limit held back. */
    nf_gauge_t sources_by_health[NF_CRAWL_HEALTH_N];
    nf_counter_t failure_logs_suppressed;
    nf_ingest_latency_metrics_t latency; /* the ingest SLO's (ingest_latency.h) */
    nf_gauge_t coverage[2];              /* crawl coverage: covered, uncovered (crawl.c) */
} nf_ingest_metrics_t;

typedef struct nf_ingest {
    nf_ingest_opts_t o;
    const nf_source_list_t *sources;
    /* Outputs go to the epoch (committed with state; `newsflow run`) when set, else straight
     * to the sink (tests of the ingestion path alone). */
    nf_epoch_t *epoch;
    nf_sink_t *sink;
    nf_store_t *store; /* NULL: ArticleKey and CrawlSchedule in memory only */
    /* Sources follow the sources topic's partitions (a consumer group with changelogs,
     * docs/ARCHITECTURE.md §3): a process crawls the sources whose records are in the partitions
     * assigned to it; their CrawlSchedules are that partition's key group and move with it (the
     * changelog); configured sources are crawled only through their published records
     * (sources_publish.h), and a tombstone removes a source (the next start publishes a configured
     * one again). */
    bool in_partitions;
    /* With in_partitions: the consumer whose group assigns them. A process whose membership
     * has lapsed (its session expired: it was stopped, starved or cut off from the brokers)
     * starts no fetch, as its sources may already be another process's (politeness). */
    nf_kafka_t *kafka;
    size_t budget_bytes; /* ArticleKey state in memory per shard (0 = unlimited) */
    /* Classify, cluster and the topic broadcast (analytics.h); NULL: articles only. */
    struct nf_analytics *an;
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

/* ---------------------------------------------------------------- for operators */

/* On shard sh (through nf_runtime_call): appends one JSON object per source of this shard's
 * crawl actor to the open array in w (nf_jw_elem before each) — source_id, url, state
 * (nf_crawl_health_name), failures, next_crawl_at_ms, last_outcome, last_error, last_error_at_ms,
 * last_ok_at_ms (0 = not in this run), from_topic, interval_s (0: the default), in_flight,
 * last_attempt_at_ms (the last fetch's start, 0 = none in this run), crawl_at_ms (the last
 * crawl-now request applied, 0 = none in this run), crawl_answered_ms (the request the last
 * finished fetch answered). failing: only sources in backoff or dead. */
void nf_ingest_sources_json(nf_shard_t *sh, nf_ingest_t *in, bool failing, nf_jw_t *w);

/* A CrawlSchedule value as stored (NF_KIND_CRAWL_SCHEDULE), for reading a stopped job's state. */
typedef struct nf_ingest_stored_source {
    nf_crawl_schedule_t sched;
    bool has_def, from_topic, is_file; /* has_def: the value names its source (format 2) */
    char source_id[NF_SOURCE_ID_MAX + 1];
    char url[NF_SOURCE_URL_MAX + 1];
} nf_ingest_stored_source_t;
/* true and *out filled if v is a readable CrawlSchedule value. Any thread. */
bool nf_ingest_schedule_decode(const void *v, size_t len, nf_ingest_stored_source_t *out);

/* ---------------------------------------------------------------- the sources topic */

/* Message kinds of the crawl actor (nf_msg_t.kind). */
enum { NF_MSG_SOURCE_SET = 2, NF_MSG_SOURCE_FORGET = 3 };
/* NF_MSG_SOURCE_FORGET flags: the source now lives on another shard (which writes its state):
 * drop it without deleting its state, and cancel a delete this shard has not written yet.
 * Without it (a removal) the holder deletes the state at the next epoch cut. */
#define NF_SOURCE_FORGET_MOVED 1u

/* Body of NF_MSG_SOURCE_SET (nf_msg_t.body.ptr; one heap block, owned by the message). */
typedef struct nf_source_set {
    nf_id128_t key;      /* nf_ingest_source_key(source_id) */
    uint64_t host_key;   /* routes to the receiving shard */
    int32_t part;        /* in_partitions: the sources partition of its record, else -1 */
    uint32_t interval_s; /* 0 = the crawl default */
    int64_t crawl_at_ms; /* the record's crawl-now request (0: none) */
    uint8_t type;        /* nf_source_type_t (kept; the parser detects the format itself) */
    uint8_t status;      /* nf_source_status_t */
    bool from_topic;     /* false: a tombstone gave a configured source its configuration back */
    bool is_file;        /* a configured local file (never from the topic) */
    const char *source_id, *url, *host; /* into text */
    char text[];
} nf_source_set_t;

/* The 128-bit state and index key of a source_id: a configured id (16 lower-case hex digits)
 * is its value in hi, lo = 0 (CrawlSchedule keys written before the topic existed stay valid);
 * any other key is SHA-256(source_id)'s first 16 bytes with the low bit of lo set, so the two
 * forms never meet. The key group of the state key is hi % 256. */
nf_id128_t nf_ingest_source_key(const char *source_id);

/* Where one decoded sources record goes. owner: the shard that holds the source afterwards, or
 * -1 (removed everywhere); set: the NF_MSG_SOURCE_SET body for owner (malloc'd), NULL when
 * owner is -1. A tombstone of a configured source_id gives that source's configuration back
 * (owner = the configuration's shard). 0; -EINVAL with the reason in err (the URL is not an
 * http(s) feed URL: a dead letter); -ENOMEM. Any shard, concurrently (reads in->sources). */
typedef struct nf_source_route {
    nf_id128_t key;
    int owner;
    nf_source_set_t *set;
} nf_source_route_t;
int nf_ingest_source_route(const nf_ingest_t *in, nf_runtime_t *rt, const nf_source_record_t *rec,
                           nf_source_route_t *out, char *err, size_t errlen);
/* The message for shard `shard` of a routed record: SET (taking r->set) for the owner, FORGET for
 * the others. Send each to its shard in order; free the SET body if it cannot be sent. */
void nf_ingest_source_msg(const nf_ingest_t *in, nf_source_route_t *r, unsigned shard, nf_msg_t *m);

/* One shard's view of a source, for tests and queries. On the shard's own thread; true if the
 * shard holds source_id (then *out is filled). */
typedef struct nf_source_info {
    nf_crawl_schedule_t sched;
    char url[1024];
    uint32_t interval_s;
    int64_t crawl_at_ms;       /* the last crawl-now request applied (0: none in this run) */
    int64_t crawl_answered_ms; /* the request the last finished fetch answered (0: none) */
    uint8_t type, want;        /* the topic's type and status (nf_source_*_t) */
    bool from_topic, in_flight;
} nf_source_info_t;
bool nf_ingest_source_info(nf_shard_t *sh, const nf_ingest_t *in, const char *source_id,
                           nf_source_info_t *out);

#endif
