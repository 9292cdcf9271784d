/* epoch.h — epochs: consistent cuts of the whole job, committed together with their outputs and
 * input positions, so that a kill -9 at any instant loses and duplicates nothing
 * (docs/ARCHITECTURE.md §4 "What an epoch guarantees").
 *
 * One coordinator thread per process runs the protocol; shards take part through participants
 * (one per actor instance that owns state or takes input) registered from actor init hooks.
 *
 * The cut (the only part that stops processing; its duration is the "pause"):
 *   1. pause   every shard's participants stop taking input (Kafka queues are not consumed, due
 *              crawls wait, finished fetches are held unprocessed);
 *   2. drain   the coordinator waits until nothing is in flight: every ring empty (runtime
 *              sent == received, read twice) and no participant `busy` (holding messages a full
 *              ring refused);
 *   3. snapshot each shard writes its participants' dirty state into its own batch and hands
 *              over its output buffer and input positions; a participant with snapshot_more
 *              only marks the cut here (snapshot by reference) and writes its state after 4;
 *   4. resume.
 * Because input stops everywhere before the drain, everything caused by input taken before the
 * cut (across any number of shard hops) is inside it, and nothing after it is.
 *
 * The commit (off the shards, which already process the next epoch; their outputs go to a
 * fresh buffer), once the shards have written what a snapshot by reference left (between their
 * messages, a slice at a time):
 *   a. pending  the epoch's state batches, outputs and input offsets written to the store as
 *               the pending record (synced) — from here the epoch is decided: it will commit;
 *   b. produce  the outputs go to Kafka in one transaction (transactional producer) together
 *               with the input offsets (send_offsets_to_transaction); every record carries the
 *               headers nf-writer, nf-epoch and nf-seq;
 *   c. apply    the pending record is applied to the live state; participants learn the epoch
 *               is durable (their entries become evictable);
 *   d. named checkpoint every checkpoint.retain_every epochs, and of the final epoch of a clean
 *      stop (checkpoint.on_stop), pruned to retain_count.
 * Recovery on start rolls a pending record FORWARD (never discards it). What of the epoch is in
 * Kafka already is settled first: on a broker that keeps transactional offset commits (Apache
 * Kafka), the consumer group's committed offsets answer it (each transaction commits them with
 * "epoch=N;nonce=X;writer=TXID"; init_transactions has completed or aborted the previous
 * incarnation's transaction by then): this epoch and nonce = committed, nothing to produce; an
 * earlier epoch of this writer everywhere (or no offset at all, beside at least one such: a
 * partition first taken in this epoch) = not committed, its records were aborted, produce
 * all. Otherwise (librdkafka's mock keeps no such offsets and shows aborted records; another
 * writer's metadata) the output partitions it touched are read back (read_committed) from the
 * positions recorded in it and records of this writer and epoch are counted by nf-seq. The
 * missing records are produced in a new transaction, then the record is applied. Every retry of
 * a failed commit, and a producer replaced after a fatal error, settles the same way. Exactly
 * once either way: see kafka.h. (docs/ARCHITECTURE.md §4 "Roll-forward recovery"; the
 * offsets-first step departs from the target design, ARCHITECTURE §10 and README's departures.)
 *
 * Fault injection for the crash tests: NF_FAULT="<point>:<epoch>" makes the process _exit(137)
 * (as if SIGKILLed) at that point of that epoch's commit ("*": of the first epoch that reaches
 * it; "~N": of the Nth epoch with records that reaches it), "<point>:<epoch>:stall=<ms>" sleeps
 * there instead (tests act on brokers meanwhile),
 * "<point>:<epoch>:until=<path>" sleeps until the test creates path ("poll_until=<path>": and
 * polls the consumer meanwhile, at before_close, so that a rebalance reaches the process before
 * it leaves the group rather than while it leaves); NF_TEST_FORCE_SCAN=1 skips
 * the offsets and always reads back; points: after_cut, after_pending, mid_produce,
 * before_commit, after_commit, mid_apply (the state applied, the committed mark not yet
 * written: nf_store_set_fault_hook), after_apply, mid_checkpoint, and before_close (nf_epoch_stop,
 * after the final epoch, before the consumer leaves the group).
 *
 * Threads: nf_epoch_emit / nf_epoch_set_offset / nf_epoch_participant_add from the shard whose
 * index they name; everything else from the thread that created the coordinator. */
#ifndef NF_EPOCH_H
#define NF_EPOCH_H

#include "io/sink.h"
#include "io/streams.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "state/standby.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_epoch nf_epoch_t;

typedef struct nf_epoch_participant {
    void (*pause)(nf_shard_t *sh, void *self); /* optional: stop taking input */
    bool (*busy)(nf_shard_t *sh, void *self);  /* optional: still holding messages */
    void (*snapshot)(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch);
    /* optional: a snapshot by reference. `snapshot` then only marks the cut (in O(1): the pause
     * does not grow with the dirty state) and the state as it was at the cut goes into b after
     * the shards resumed: each call writes up to max more entries and returns true once b holds
     * all of it. Called from the shard's thread, between its other messages, until it returns
     * true, before the epoch's batches are used (kstate.h: nf_kstate_freeze). */
    bool (*snapshot_more)(nf_shard_t *sh, void *self, size_t max);
    void (*committed)(nf_shard_t *sh, void *self, uint64_t epoch); /* optional */
    void (*resume)(nf_shard_t *sh, void *self);                    /* optional: take input again */
    /* optional: input partitions this process gained after it started (a rebalance; their
     * key groups are in the store, restored from the changelog) or lost (revoked; their last
     * epoch committed): load their key groups into memory, or forget them */
    void (*partitions)(nf_shard_t *sh, void *self, nf_input_t in, const int32_t *parts, size_t n,
                       bool gained);
} nf_epoch_participant_t;

/* What a start does where the consumer group stands further in an input than the state
 * (nf_epoch_guard_positions): refuse (none), or what the operator chose. */
typedef enum {
    NF_RESET_NONE = 0,
    NF_RESET_GROUP,    /* --reset=group: take the group's positions, with the state as it is */
    NF_RESET_EARLIEST, /* --reset=earliest: read on from the state's positions (its first
                          offsets where it has none): what the group committed is emitted again */
} nf_reset_t;

typedef struct nf_epoch_opts {
    uint32_t interval_ms;
    uint32_t retain_every, retain_count;
    bool checkpoint_on_stop; /* also a named checkpoint of the final epoch (retain_every > 0) */
    bool changelog;          /* state writes go to the changelog topics too (state/changelog.h) */
    bool group;              /* partitions come from a consumer group: the state keyed by them
                                is restored as they are assigned, not at start */
    uint64_t config_hash;
    unsigned fault_epoch; /* from NF_FAULT; 0 = none */
    char fault_point[32];
    nf_reset_t reset;                 /* for the position guard, this process's life long */
    bool from_checkpoint;             /* the state was rolled back on purpose (--from-checkpoint) */
    const char *state_dir, *group_id; /* named in the guard's messages (outlive the coordinator) */
} nf_epoch_opts_t;

/* Creates the coordinator (not started). store may be NULL (memory-only state). tee (may be
 * NULL) receives every committed output after its epoch committed (the JSON-lines sink of
 * `--sink`). Registers its metrics. Reads NF_FAULT. */
nf_epoch_t *nf_epoch_new(nf_runtime_t *rt, nf_store_t *st, nf_sink_t *tee, const nf_epoch_opts_t *o,
                         char *err, size_t errlen);
/* Outputs go to Kafka too (before nf_epoch_recover), through the operations of `kafka`
 * (copied; nf_kafka_ops() of io/kafka.h fills it). Create the client with the hooks below and
 * arg = the coordinator. */
void nf_epoch_attach_kafka(nf_epoch_t *ep, const nf_kafka_ops_t *kafka);
/* Warm standbys (state/standby.h): the rebalance callbacks tell sb which read-events partitions
 * this process owns, and hold a partition's standby while its restore runs. Before the
 * coordinator starts; sb outlives it. */
void nf_epoch_attach_standby(nf_epoch_t *ep, nf_standby_t *sb);
/* Hooks for nf_kafka_opts_t: committed positions, fault points, and the rebalance:
 *   assign  with opts.changelog, the key groups of the gained read-events partitions are
 *           brought up to the changelog (their tail from this directory's recorded offsets) and
 *           their positions taken from the consumer group's committed offsets; then every
 *           participant's `partitions` hook loads them;
 *   revoke  an epoch commits what was taken of the revoked partitions (the shards take no
 *           more: nf_kafka_owns), their positions leave the epochs, and every participant's
 *           `partitions` hook forgets them. Lost partitions (the group evicted this process:
 *           its session or max.poll.interval.ms ran out) cannot be committed for: the job
 *           fails, and what it took since its last epoch is read again by the new owners. */
int64_t nf_epoch_position_cb(void *ep, nf_input_t in, int32_t partition);
bool nf_epoch_assign_cb(void *ep, const nf_kafka_offset_t *parts, size_t n);
void nf_epoch_revoke_cb(void *ep, const nf_kafka_offset_t *parts, size_t n, bool lost);
void nf_epoch_fault_cb(const char *point);
void nf_epoch_free(nf_epoch_t *ep);

/* Before nf_runtime_start: finishes a pending record left by a crash (roll forward) and reads
 * the committed epoch. 0 or -errno with err. */
int nf_epoch_recover(nf_epoch_t *ep, char *err, size_t errlen);
/* The committed input position of (input, partition): the next offset to read, or -1 if none
 * was ever committed. Valid after nf_epoch_recover. Any thread. */
int64_t nf_epoch_committed_offset(const nf_epoch_t *ep, nf_input_t in, int32_t partition);
uint64_t nf_epoch_committed_epoch(const nf_epoch_t *ep);
/* An epoch that committed (pending record written, Kafka transaction committed) but that the
 * store then failed to apply (a full disk): the job stopped, and the next start applies it (rolls
 * it forward). 0: none. Any thread. */
uint64_t nf_epoch_unapplied(const nf_epoch_t *ep);
/* With opts.changelog and Kafka attached, after nf_epoch_recover and before the shards start:
 * brings the state directory up to the changelog topics (nf_changelog_restore), then takes the
 * input positions from the consumer group's committed offsets wherever the group has them
 * (they commit in the same transactions as the changelog records, so state and positions
 * agree), and numbers epochs on after the highest of this writer they name. 0 (also without
 * changelog) or -errno with err. Either way it then publishes the store's first committed view
 * (store.h), as every epoch's apply publishes the next. */
int nf_epoch_restore_changelog(nf_epoch_t *ep, char *err, size_t errlen);
/* The consumer group's committed positions go[n] replace the state's (a changelog restore, an
 * operator's --reset=group: nf_epoch_guard_positions), each change logged (the first 8) at `level`;
 * epochs number on after group_epoch if it is higher. Before the shards start. */
void nf_epoch_adopt_positions(nf_epoch_t *ep, const nf_kafka_offset_t *go, size_t n,
                              uint64_t group_epoch, nf_log_level_t level);
/* The position guard, for a job without changelogs (docs/runbooks.md "Lost disk"). Wherever the
 * consumer group's committed offset of an input partition stands further than the state's
 * position (the state is empty, lost, older, or another job's), reading on from the state's
 * position would emit again what the group's transactions committed. Then, by opts.reset:
 * none -> refused: -EEXIST, err names the partitions, both positions and the ways out (restore
 * the changelog or a checkpoint, or --reset); group -> the group's positions are taken (and
 * epochs number on after its last); earliest, or opts.from_checkpoint -> warned, and the inputs
 * are read again from the state's positions. With kafka.assignment=all, call it after
 * nf_epoch_recover, before the shards start (every input partition); in a consumer group the
 * assign callback runs it on the gained partitions (a refusal there fails the job:
 * nf_epoch_refused). 0, -EEXIST, or another -errno: the group's offsets could not be read. */
int nf_epoch_guard_positions(nf_epoch_t *ep, char *err, size_t errlen);
/* The job failed because the position guard refused a gained partition (exit 2, not 1). */
bool nf_epoch_refused(const nf_epoch_t *ep);
/* The restore's progress (any thread): records applied, records there were to read, whether it
 * runs now. */
void nf_epoch_restore_progress(const nf_epoch_t *ep, uint64_t *applied, uint64_t *total,
                               bool *running);

/* Starts the coordinator thread (after nf_runtime_start). 0 or -errno. */
int nf_epoch_start(nf_epoch_t *ep);
/* Asks for an epoch as soon as possible (memory budget crossed). Any thread, lock-free. */
void nf_epoch_request(nf_epoch_t *ep);
/* Runs one cut + commit now, from the coordinator's owner thread while the coordinator thread
 * is not running (tests, the final epoch). 0 or -errno; -ECANCELED if the job has failed
 * (nf_runtime_fail): nothing is committed after a failure. */
int nf_epoch_run_once(nf_epoch_t *ep, char *err, size_t errlen);
/* Stops the coordinator thread after committing a final epoch (SIGTERM path); call before
 * nf_runtime_request_stop. 0 or -errno of the final commit; after a failure of the job
 * (nf_runtime_fail) no final epoch is committed and this returns -ECANCELED. */
int nf_epoch_stop(nf_epoch_t *ep);
/* Bounds the rest of the epoch work by deadline_ns (nf_now_ns clock): the commit in flight and
 * the final one give up past it (nf_kafka_set_deadline bounds each Kafka call), leaving their
 * pending record for the next start to settle. Call before nf_epoch_stop. Any thread. */
void nf_epoch_set_deadline(nf_epoch_t *ep, uint64_t deadline_ns);
/* An epoch commit stopped at that deadline (the job then stops as failed). */
bool nf_epoch_timed_out(const nf_epoch_t *ep);
/* What the coordinator is doing now, for an operator ("cutting: ...", "writing the pending
 * record (synced)", "producing the outputs and committing the Kafka transaction", "closing the
 * Kafka consumer (leaving the group)", "between epochs", ...): a static string. Any thread. */
const char *nf_epoch_step(const nf_epoch_t *ep);
/* nf_epoch_stop's final epoch committed (what follows it, the consumer's close, may still run).
 * Any thread. */
bool nf_epoch_final_committed(const nf_epoch_t *ep);
/* A commit failed in a way the job cannot continue from (store write failed, producer fenced),
 * or the job failed and an epoch was dropped: the coordinator logs it, fails the runtime
 * (nf_runtime_fail) and this returns true. */
bool nf_epoch_failed(const nf_epoch_t *ep);
/* The failure was the broker fencing this process (a newer one took over its transactional id
 * or group instance id): see kafka.h nf_kafka_fatal. */
bool nf_epoch_fenced(const nf_epoch_t *ep);

/* ---- shard side ---- */
/* From an actor's init hook. 0 or -ENOSPC (too many participants on the shard). */
int nf_epoch_participant_add(nf_epoch_t *ep, nf_shard_t *sh, const nf_epoch_participant_t *p,
                             void *self);
/* An output of the current epoch. 0 or -ENOMEM. */
int nf_epoch_emit(nf_epoch_t *ep, unsigned shard, nf_topic_t topic, const char *key, size_t klen,
                  const char *value, size_t vlen);
/* The shard consumed (input, partition) up to next_offset - 1. */
void nf_epoch_set_offset(nf_epoch_t *ep, nf_input_t in, int32_t partition, int64_t next_offset);

typedef struct nf_epoch_stats {
    uint64_t epoch, committed, failed, checkpoints, outputs, recovered_epochs, recovered_records;
    uint64_t last_pause_ns, last_commit_ns;
} nf_epoch_stats_t;
void nf_epoch_stats(const nf_epoch_t *ep, nf_epoch_stats_t *out);
/* For status (any thread): seconds since the last epoch committed (or since start, before any;
 * the value of newsflow_epoch_seconds_since_commit), and the next offset of an input partition
 * the shards have taken so far (-1: none; committed with the next epoch). */
double nf_epoch_seconds_since_commit(const nf_epoch_t *ep);
int64_t nf_epoch_position(const nf_epoch_t *ep, nf_input_t in, int32_t partition);

#endif
