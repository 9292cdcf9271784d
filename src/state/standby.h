/* standby.h — warm standbys (scale.standby_replicas, docs/ARCHITECTURE.md §4 "Warm standbys"): a
 * process of a job in a consumer group with changelogs keeps the changelog partitions of the key
 * groups it does NOT own applied to its local store, so that when one of them is assigned to it the
 * restore (state/changelog.h) reads only the tail written since.
 *
 * Which key groups (units): every input partition not assigned here whose owner writes a
 * changelog — each read-events partition (event ids, interest vectors and their seen sets,
 * trending counters), each sources partition (crawl schedules), and trending-panes partition 0,
 * the global key group (article keys, the cluster index, topic vectors; every record in
 * changelog partition NF_CHANGELOG_GLOBAL_KG % partitions). With P processes each one stands by
 * for all the others' (P - 1 standbys per unit, at least the N asked for when P > N). Kafka
 * Streams places N standbys per task in its own assignor; librdkafka's cooperative-sticky
 * assignor cannot be told, and reading the group's membership to choose N would still not place
 * the partition on a standby at failover. Tailing costs a fetch and a store write per record of
 * the others' state, no memory beyond one batch.
 *
 * What is tailed: a unit's partition of the changelog topics of the kinds keyed by its input
 * (nf_changelog_input_topics), from its synced offset, read_committed, by one consumer of its
 * own (nf_kafka_ops_t tail_*), on a thread of its own. Records go through the restore's own
 * path (nf_changelog_apply: 64k-record batches, expired values skipped) into the store only:
 * nothing is loaded into memory; a participant loads a key group when its partition is
 * assigned, after the restore. After every write (at least every second) the units' synced
 * offsets move to the consumer's positions (nf_changelog_synced_set: only the entries of the
 * units tailed, under the meta record's lock), so a standby's offset moves only while its unit
 * is not owned here; the coordinator moves the owned ones (save_synced).
 *
 * Rebalances (the coordinator's callbacks, state/epoch.c):
 *   - before a restore, nf_standby_hold(parts): the standby writes what it applied of them,
 *     records their offsets and stops reading them; it returns once it has (one poll, ≤ ~0.2 s);
 *   - after it, nf_standby_assigned(gained): the gained partitions are owned; held units that
 *     are not (the read-events one whose trending partition a gained merger brings) are tailed
 *     again;
 *   - after a revoke let its key groups go, nf_standby_revoked(lost): they are tailed from the
 *     offset the revoke's epoch recorded.
 * Nothing is tailed before the first assignment (or 30 s after the start): a new process would
 * otherwise start reading partitions it is about to be given.
 *
 * With replicas 0 only the global key group is tailed (serve.global_replica): every process
 * of the job then holds the articles, stories and trending window the query API's feeds and
 * global routes read (serve/query.h), as committed by their owner.
 *
 * A failure of the standby (a store write, the consumer) is logged and ends the standby only:
 * the job goes on, restores read more. */
#ifndef NF_STANDBY_H
#define NF_STANDBY_H

#include "io/streams.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_standby nf_standby_t;

typedef struct nf_standby_opts {
    nf_store_t *st;
    const nf_kafka_ops_t *kafka; /* its tail_* entries are used, from the standby's thread */
    int partitions;              /* of read-events (= of each changelog topic) */
    int source_partitions;       /* of sources (those beyond `partitions` have no changelog) */
    unsigned replicas;           /* scale.standby_replicas; 0 = the global key group only (the
                                    query API's replica of it, serve.global_replica) */
} nf_standby_opts_t;

/* Registers the metrics (newsflow_standby_*). NULL with err. */
nf_standby_t *nf_standby_new(const nf_standby_opts_t *o, char *err, size_t errlen);
/* Starts the thread. 0 or -errno with err. */
int nf_standby_start(nf_standby_t *sb, char *err, size_t errlen);

/* The coordinator's calls (see the top). hold: per input NULL or its partitions' flags (as
 * nf_changelog_restore_partitions takes them; trending-panes: one flag). */
void nf_standby_hold(nf_standby_t *sb, const bool *const parts[NF_INPUT__COUNT]);
void nf_standby_assigned(nf_standby_t *sb, const nf_kafka_offset_t *parts, size_t n);
void nf_standby_revoked(nf_standby_t *sb, const nf_kafka_offset_t *parts, size_t n);

/* What /v1/status shows (any thread). */
typedef struct nf_standby_status {
    unsigned partitions; /* units tailed now: read-events and sources partitions, global */
    bool global;         /* the global key group (trending-panes 0) is tailed */
    uint64_t lag;        /* records behind the high watermarks, summed over them */
    uint64_t records;    /* changelog records applied since the start */
    bool failed;
} nf_standby_status_t;
/* parts, sources: NULL or NF_EPOCH_MAX_PARTITIONS flags, set for the read-events and the
 * sources partitions tailed. */
void nf_standby_status(const nf_standby_t *sb, nf_standby_status_t *out, bool *parts,
                       bool *sources);

/* Stops the thread (writing what it applied and its offsets) and frees. Before the store and
 * the Kafka client are closed. NULL is a no-op. */
void nf_standby_free(nf_standby_t *sb);

#endif
