/* reads.h — the read-events path (docs/ARCHITECTURE.md §1, §3 "A read event"; docs/topics.md): the
 * Kafka source actor that feeds shards from their assigned partitions (with event-id dedup and the
 * trending counters of analytics.h, one per partition), and the interest actor keyed by user.
 *
 *   kafka_in (kafka_in.c; per shard; owns the partitions p with p % shards == shard):
 *     consumes its queue in budgeted turns -> decodes each record (io/events.h); a record that
 *     does not decode goes to dead-letters with its origin and the decoder's reason, and its
 *     partition keeps flowing; so does an event whose ts is before 2000 or further ahead of the
 *     wall clock than an->max_future_ms (nf_read_event_check_time, stage "event_time") -> decoded
 *     events wait in groups of 16 with their event-id slots
 *     prefetched, then meet the event-id dedup set and their partition's trending counter
 *     (analytics.h) -> batched per destination shard (route(user)) as 64-byte items carrying
 *     every key the interest engine needs, and sent; input positions recorded for the epoch.
 *     Emptied batches come back (MSG_BATCH_BACK) and are reused.
 *     Records of the sources topic become
 *     messages to the crawl actors (ingest.h: nf_ingest_source_route), one per shard and record;
 *     an undecodable one, or one whose URL is not an http(s) feed URL, goes to dead-letters.
 *     Backpressure: a batch or source message a full ring refuses is held (in order); while
 *     more than kafka.pause_high_water events and source messages are held the shard's
 *     partitions are paused in librdkafka
 *     (bounded memory: librdkafka stops fetching them), resumed below pause_low_water.
 *   reads (reads.c; per shard; owns the users that route to it): the interest engine
 *     (engine/interest.h; key group = the input partition), a batch at a time with the batch's
 *     memory prefetched in stages; each counted event emits one interest-updates record. It
 *     also takes the topic broadcasts (NF_MSG_TOPICS) of dedup.
 *   Both dedup sets (event ids here, (user, article, session) in the interest engine) are
 *     keysets (state/keyset.h), loaded at start from the store for the partitions / users the
 *     shard owns; newsflow_read_dedup_keys / _bytes{set} report their size, and a warning says
 *     when one grows past state.budget_mb (they cannot evict).
 *
 * Memory source: with kafka NULL and mem.n > 0, kafka_in reads read-events values from memory
 * instead (benchmarks and tests of the in-process read path): record i is partition
 * mem.part[i] (as Kafka's partitioner put it, by its user_id) or, with mem.part NULL,
 * i % mem.partitions; its offset is i / mem.partitions, and it is consumed by the shard owning
 * that partition; each shard starts when its kafka_in gets NF_MSG_MEM_START (post it once the topic
 * tables are filled) and increments mem_shards_done once it has taken all of its records.
 *
 * Register after nf_runtime_create and before start; the struct must outlive the runtime. */
#ifndef NF_READS_H
#define NF_READS_H

#include "algo/idset.h"
#include "engine/variants.h"
#include "io/events.h"
#include "io/kafka.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "state/epoch.h"
#include "state/kstate_gauges.h"
#include "state/store.h"

#include <stdatomic.h>

struct nf_ingest;
struct nf_analytics;

enum { NF_MSG_MEM_START = 30 }; /* to kafka_in: start the memory source */

/* A read-path dedup set's series, the same for both ({set="event_ids"} and {set="seen"}). */
typedef struct nf_reads_dedup_m {
    nf_gauge_t keys, bytes, disk_keys, disk_bytes, unfiltered;
    nf_counter_t disk_lookups, disk_reads, disk_hits, spill_failures;
} nf_reads_dedup_m_t;

typedef struct nf_reads {
    nf_kafka_t *kafka; /* NULL: no Kafka input (the actors idle) */
    /* The crawl actors the sources topic feeds (registered before this). NULL: sources records
     * are skipped with a warning (their positions still move). */
    struct nf_ingest *ingest;
    nf_epoch_t *epoch;
    struct nf_analytics *an; /* required: dedup, trending and interest options and metrics */
    nf_store_t *store;       /* NULL: memory-only state */
    /* Non-zero when processes may write one key group in turn (a consumer group with
     * changelogs): this process's id in the dedup sets' blob keys (keyset.h). */
    uint64_t process_id;
    struct {
        const char *buf;
        const size_t *off;
        const uint32_t *len;
        const uint16_t *part; /* optional: each record's partition, < partitions */
        size_t n;
        uint32_t partitions;
    } mem;
    atomic_uint mem_shards_done;
    uint32_t max_event_bytes;
    uint32_t pause_high_water, pause_low_water;
    size_t budget_bytes; /* keyed state per shard */
    uint32_t slow_us;    /* test knob: the reads actor spins this long per event */
    /* interest.coalesce: one interest-updates record per user per epoch, its latest state (the
     * versions in between are not emitted), rendered when the epoch is cut or when more than
     * coalesce_max users wait on a shard; 0 = one record per counted event. */
    uint32_t coalesce_max;
    /* The ranking variants (engine/variants.h) whose readers' events are counted by the variant
     * they name (newsflow_ranking_reads_total); NULL: not counted. */
    const nf_variants_t *variants;
    int in_actor, reads_actor;
    struct {
        nf_counter_t records, events, dead_letters, dead_letters_time, updates, pauses, resumes;
        nf_counter_t
            revoked_dropped; /* records of a partition being revoked, left to its next owner */
        nf_counter_t coalesced;
        nf_counter_t state_errors;
        nf_counter_t topics_taken; /* NF_MSG_TOPICS taken by the shards' interest engines */
        /* follow, unfollow, mute, unmute, mute_source, unmute_source (engine/follows.h),
         * subscribe, unsubscribe (engine/notify.h) applied */
        nf_counter_t settings[NF_EVENT_KIND__COUNT - NF_READ_KIND_FOLLOW];
        nf_counter_t muted_sources_evicted; /* the oldest muted source forgotten (follows.h) */
        nf_gauge_t settings_readers;        /* readers with followed or muted topics in memory */
        /* by the variant an event names (its index; n: none, n + 1: another name) and kind */
        nf_counter_t ranking[NF_VARIANTS_MAX + 2][NF_READ_KIND__COUNT];
        nf_gauge_t held_events, paused_shards, state_bytes, state_entries;
        nf_kstate_gauges_t users_mem;     /* interest vectors (kstate_gauges.h) */
        nf_reads_dedup_m_t ids_m, seen_m; /* the two dedup sets */
    } m;
} nf_reads_t;

/* 0 or -errno. */
int nf_reads_register(nf_runtime_t *rt, nf_reads_t *r);

/* The event-id dedup set's key of an event id (persisted: fixed forever). */
nf_id128_t nf_reads_event_key(const char *event_id);

#endif
