/* reads.h — the read-events path (DESIGN.md §1, §4) as far as this issue takes it: the Kafka
 * source actor that feeds shards from their assigned partitions, and a keyed counting actor
 * that stands where the interest actor will (it keeps each user's version, the read count).
 *
 *   kafka_in (per shard; owns the partitions p with p % shards == shard):
 *     consumes its queue in budgeted turns -> decodes each record (io/events.h); a record that
 *     does not decode goes to dead-letters with its origin and the decoder's reason, and its
 *     partition keeps flowing -> valid events batched per destination shard (route(user)) and
 *     sent; input positions recorded for the epoch. Records of the sources topic become
 *     messages to the crawl actors (ingest.h: nf_ingest_source_route), one per shard and record;
 *     an undecodable one, or one whose URL is not an http(s) feed URL, goes to dead-letters.
 *     Backpressure: a batch or source message a full ring refuses is held (in order); while
 *     more than kafka.pause_high_water events and source messages are held the shard's
 *     partitions are paused in librdkafka
 *     (bounded memory: librdkafka stops fetching them), resumed below pause_low_water.
 *   reads (per shard; owns the users that route to it):
 *     keyed state NF_KIND_READS, key group = the input partition: {count, last_ts_ms};
 *     each event increments count and emits to interest-updates
 *     {"user_id","version":count,"vector":{},"updated_at"} (the vector is the analytics issue's).
 *
 * Register after nf_runtime_create and before start; the struct must outlive the runtime. */
#ifndef NF_READS_H
#define NF_READS_H

#include "io/kafka.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "state/epoch.h"
#include "state/store.h"

struct nf_ingest;

typedef struct nf_reads {
    nf_kafka_t *kafka; /* NULL: no Kafka input (the actors idle) */
    /* The crawl actors the sources topic feeds (registered before this). NULL: sources records
     * are skipped with a warning (their positions still move). */
    struct nf_ingest *ingest;
    nf_epoch_t *epoch;
    nf_store_t *store; /* NULL: memory-only state */
    uint32_t max_event_bytes;
    uint32_t pause_high_water, pause_low_water;
    size_t budget_bytes; /* keyed state per shard */
    uint32_t slow_us;    /* test knob: the reads actor spins this long per event */
    int in_actor, reads_actor;
    struct {
        nf_counter_t records, events, dead_letters, updates, pauses, resumes;
        nf_counter_t state_errors;
        nf_gauge_t held_events, paused_shards, state_bytes, state_entries;
    } m;
} nf_reads_t;

/* 0 or -errno. */
int nf_reads_register(nf_runtime_t *rt, nf_reads_t *r);

#endif
