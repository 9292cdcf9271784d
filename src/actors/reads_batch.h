/* reads_batch.h — what the kafka_in actor (kafka_in.c) and the interest-update actor "reads"
 * (reads.c) share, private to those two: the batch of counted reads that goes from
 * the shard that decoded them to the shard of their users, and back emptied. */
#ifndef NF_READS_BATCH_H
#define NF_READS_BATCH_H

#include "engine/interest.h"
#include "io/events.h"
#include "runtime/runtime.h"
#include "state/keyset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* MSG_READ_BATCH: kafka_in -> reads; MSG_BATCH_BACK: the emptied batch back to the kafka_in that
 * filled it, for reuse (a 21 KB malloc per batch made glibc consolidate its fastbins each time). */
enum { MSG_READ_BATCH = 1, MSG_BATCH_BACK = 2 };
#define BATCH_MAX 64 /* events per cross-shard message */

/* One counted read on its way to the user's shard: its keys, computed once where it was decoded
 * (so the interest shard hashes nothing), and where its strings are in the batch's text. */
typedef struct read_item {
    nf_interest_read_t rd;
    uint16_t user_at;    /* user_id in text[], NUL-terminated */
    uint16_t article_at; /* article_id in text[] when !rd.article_ok (for the log), else 0 */
} read_item_t;

/* Room for the longest strings of every item: an item can always be added while n < max. */
#define BATCH_TEXT (BATCH_MAX * 2 * (NF_EVENT_FIELD_MAX + 1))

typedef struct read_batch {
    struct read_batch *next; /* kafka_in's held list, or its spares */
    unsigned origin, dest, n;
    size_t text_len;
    read_item_t items[BATCH_MAX];
    char text[BATCH_TEXT];
} read_batch_t;

/* The interest-update actor's type (nf_reads_register registers it). */
extern const nf_actor_ops_t nf_interest_update_ops;

/* The drop hook of both actors: a batch (or a message body) never delivered is freed. */
void nf_reads_batch_drop(void *ctx, const nf_msg_t *m);

/* What a dedup set's owner remembers between reports. */
typedef struct nf_reads_dedup_seen {
    bool over;                  /* reported over budget */
    nf_keyset_stats_t reported; /* the counters as last added to the metrics */
} nf_reads_dedup_seen_t;

/* A dedup set's gauges (this shard's part) and counters (what grew since the last report) from
 * its stats; and, once per crossing, a warning when it is over its budget — it cannot evict (a
 * forgotten id would count twice), so it is over only when it could not move keys to disk. */
void nf_reads_dedup_report(const nf_reads_dedup_m_t *m, nf_reads_dedup_seen_t *seen, bool over,
                           const char *set, unsigned shard, const nf_keyset_stats_t *st);

#endif
