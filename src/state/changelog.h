/* changelog.h — state that follows Kafka (docs/ARCHITECTURE.md §4 "Changelog"): every state write
 * of an epoch is also a record of a compacted changelog topic, produced in the epoch's transaction
 * with its outputs and input offsets; a state directory that lacks those writes (lost disk, a new
 * machine, a key group another process moved on) is brought up to date from the changelog before
 * the job takes input.
 *
 * Topics: one per state kind, `<prefix>changelog-<kind>` (nf_topic_t NF_TOPIC_CL_*), as many
 * partitions as the job's other topics, cleanup.policy=compact (`newsflow topics create`).
 * Record: key = [key group: 2 bytes BE][the store key], value = the store value (its 8-byte
 * expiry first) or a tombstone for a delete; the producer sends it to partition
 * key group % partitions (io/kafka.c). The key group is the input partition for read-path state
 * (event ids, interest, interest_seen), the partition of a trending counter's or pane's key,
 * the sources partition for crawl schedules in a consumer group (crawl.c; id.hi % 256 in one
 * process), and for the articles' state (ArticleKey, topic vectors, cluster index) the global
 * key group in a consumer group (it follows trending-panes' one partition) or id.hi % 256 in
 * one process.
 *
 * Synced offsets: the store keeps, per changelog partition, the next offset this state
 * directory has not applied ("changelog" meta record, JSON {"<topic>":[offset per partition]}):
 * after every committed epoch the offsets after this writer's last delivered record (its own
 * writes are already applied), after a restore the offsets it read to. A restore reads every
 * partition read_committed from its synced offset (0 when none is recorded) to the end and
 * applies puts and deletes to the live state as they come; records it has already applied are
 * applied again harmlessly (absolute values). After a clean stop it therefore reads nothing.
 *
 * Standbys (state/standby.h) apply the changelog partitions of read-events partitions this
 * process does not own with the same code (nf_changelog_apply) and move their synced offsets;
 * every writer of the meta record changes only its own partitions' entries, under one lock.
 *
 * Threads: nf_changelog_from_batch from the epoch coordinator; restore from the main thread
 * before the shards start, or from the coordinator's rebalance callbacks; the applier from one
 * thread at a time (its own); the synced offsets' calls from any thread. */
#ifndef NF_CHANGELOG_H
#define NF_CHANGELOG_H

#include "io/outbuf.h"
#include "io/streams.h"
#include "state/store.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The changelog topic of a kind (every kind has one but the unused `reads`: -1). */
int nf_changelog_topic(nf_state_kind_t kind);
/* The kind whose changelog a topic is, or -1. */
int nf_changelog_kind(nf_topic_t topic);
/* The key group of a store key of a kind (see the top). */
uint16_t nf_changelog_key_group(nf_state_kind_t kind, const void *key, size_t klen);

/* Appends one changelog record per write of b to out. 0, -ENOMEM or -EINVAL (a malformed
 * batch); out is left as it was on failure. */
int nf_changelog_from_batch(nf_outbuf_t *out, const nf_store_batch_t *b);

#define NF_CHANGELOG_MAX_PARTITIONS 1024
/* The key group of the trending merger's state ("M", "P" + partition + pane start): the merger
 * belongs to the trending-panes partition, not to a read-events partition; its changelog
 * partition is this % partitions, which a process restores when it is assigned trending-panes. */
#define NF_CHANGELOG_MERGER_KG 0xFFFFu
/* The same key group holds the other global stages in a consumer group (ingest.h,
 * in_partitions): article dedup (ArticleKey), topic vectors and the cluster index belong to the
 * one-partition topic too, and move with it. */
#define NF_CHANGELOG_GLOBAL_KG NF_CHANGELOG_MERGER_KG

typedef struct nf_changelog_stats {
    uint64_t records, bytes, puts, deletes, skipped; /* skipped: malformed records (logged) */
    uint64_t expired;         /* values already expired (not written: the TTL filter drops them) */
    uint64_t partitions_read; /* partitions that had anything to read */
    uint64_t ns;
    /* records of the kinds keyed by each input (an nf_input_t): read-events partitions' key
     * groups, sources partitions' (crawl schedules), trending-panes' (the global key group) */
    uint64_t by_input[NF_INPUT__COUNT];
} nf_changelog_stats_t;

/* Progress for /readyz and the metrics (any thread reads it): records applied so far and the
 * records there were to read when the restore started (end - synced, summed). */
typedef struct nf_changelog_progress {
    _Atomic uint64_t applied, total;
    _Atomic bool running;
} nf_changelog_progress_t;

/* Brings the live state up to the changelogs' ends (see the top; each partition up to its end
 * when the read began) and records the synced offsets (reading through k's read_topics).
 * by_input false leaves out the kinds keyed by the read-events partition (in a consumer group
 * they are restored per partition as they are assigned). prog may be NULL. 0 or -errno with err
 * (nothing is recorded as synced then: a retry reads again from the same offsets). */
int nf_changelog_restore(nf_store_t *st, const nf_kafka_ops_t *k, bool by_input,
                         nf_changelog_progress_t *prog, nf_changelog_stats_t *stats, char *err,
                         size_t errlen);

/* The same for some input partitions only (parts[input][p] true, p <
 * NF_CHANGELOG_MAX_PARTITIONS; parts[input] NULL: none of that input): the partitions of the
 * kinds keyed by an input partition, which a rebalance moves between processes — read-events
 * (event ids, interest, seen keys, trending counters) and sources (crawl schedules). */
int nf_changelog_restore_partitions(nf_store_t *st, const nf_kafka_ops_t *k,
                                    const bool *const parts[NF_INPUT__COUNT],
                                    nf_changelog_progress_t *prog, nf_changelog_stats_t *stats,
                                    char *err, size_t errlen);

/* Applying changelog records to the live state: what a restore and a standby share. Puts and
 * deletes are gathered and written in batches of 64k records (or 64 MiB); a value already expired
 * (its 8-byte expiry passed) is skipped, as the TTL filter would drop it; a malformed record is
 * counted and logged. Writes go to the store only (never to memory: the owner of a key group
 * loads it when it is assigned). */
typedef struct nf_changelog_applier {
    nf_store_t *st;
    nf_store_batch_t *b;
    nf_changelog_progress_t *prog; /* may be NULL */
    nf_changelog_stats_t *stats;   /* counted into */
    uint64_t now_ms;               /* wall clock for expiries, renewed at every flush */
    bool unlogged; /* writes without RocksDB's WAL: the caller flushes before it records offsets */
    bool bulk;     /* batches of >= NF_CHANGELOG_BULK_MIN records bulk-loaded (nf_store_ingest) */
    struct nf_changelog_writer *w; /* nf_changelog_applier_thread; NULL: writes in the caller */
} nf_changelog_applier_t;
/* Fewer records than this are written through the memtable even when bulk: a table file per
 * family and call is worth it only for many records (each adds to level 0). */
#define NF_CHANGELOG_BULK_MIN 4096u
/* 0 or -ENOMEM. */
int nf_changelog_applier_init(nf_changelog_applier_t *a, nf_store_t *st,
                              nf_changelog_progress_t *prog, nf_changelog_stats_t *stats);
/* Full batches are then written by a thread of the applier's own while the caller gathers the
 * next one (one batch in flight): a restore reads Kafka and writes RocksDB at the same time.
 * nf_changelog_applier_flush still returns only once everything is written; a failed write is
 * returned by the next apply that fills a batch, or by the flush. 0 or -errno (the applier then
 * writes in the caller). */
int nf_changelog_applier_thread(nf_changelog_applier_t *a);
void nf_changelog_applier_free(nf_changelog_applier_t *a);
/* One record of changelog topic `topic` (an nf_topic_t; records of other topics are ignored).
 * 0 or -errno with err (a failed store write). */
int nf_changelog_apply(nf_changelog_applier_t *a, int topic, int32_t partition, int64_t offset,
                       const void *key, size_t klen, const void *val, size_t vlen, bool tombstone,
                       char *err, size_t errlen);
/* Writes what is gathered. Every record passed before it is applied once it returns 0. */
int nf_changelog_applier_flush(nf_changelog_applier_t *a, char *err, size_t errlen);
/* Records gathered and not written yet. */
size_t nf_changelog_applier_pending(const nf_changelog_applier_t *a);

/* The changelog topics (nf_topic_t) of the kinds keyed by input's partition (an nf_input_t):
 * up to cap into topics; their count. Partition p of those of read-events and sources holds
 * that input partition's key group (and, for trending, partition NF_CHANGELOG_MERGER_KG %
 * partitions the merger's); those of trending-panes hold the global key group, in partition
 * NF_CHANGELOG_GLOBAL_KG % partitions. */
int nf_changelog_input_topics(int input, int *topics, int cap);
/* The input (nf_input_t) whose partition keys changelog topic `topic`, or -1 (not one). */
int nf_changelog_topic_input(int topic);
/* The synced offset of one changelog partition (-1: none recorded). 0 or -errno. */
int nf_changelog_synced_get(nf_store_t *st, int topic, int32_t partition, int64_t *offset,
                            char *err, size_t errlen);
/* Records offsets[i] (those >= 0) as synced for (topics[i], partitions[i]) and leaves every
 * other entry as it is: for a writer that applied those partitions (a standby). 0 or -errno. */
int nf_changelog_synced_set(nf_store_t *st, const int *topics, const int32_t *partitions,
                            const int64_t *offsets, size_t n, char *err, size_t errlen);

/* Records the synced offsets after a committed epoch: positions_json is the producer's
 * {"<topic>":[next offset per partition],...} (every output topic; only changelog topics are
 * kept). owned NULL: one process writes every partition (kafka.assignment=all), all move;
 * else (a consumer group) only the partitions of the kinds keyed by an input partition whose
 * partition is assigned here (owned[input][p]; owned[input] NULL: none) move — the trending one
 * that also holds the merger's key group only with merger_owned too — and the others keep what
 * a restore recorded: another process writes them (or wrote them while this one did not read
 * them). 0 or -errno. */
int nf_changelog_save_synced(nf_store_t *st, const char *positions_json, const bool *const *owned,
                             bool merger_owned, char *err, size_t errlen);

#endif
