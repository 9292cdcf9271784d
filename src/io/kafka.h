/* kafka.h — newsflow's Kafka client (librdkafka): the epoch's transactional producer, the
 * consumer group whose partitions feed the shards, and the embedded mock cluster.
 *
 * Producer (the epoch coordinator's thread only). nf_kafka_produce_epoch() writes one epoch's
 * outputs: with kafka.exactly_once, inside one transaction together with the input offsets
 * (send_offsets_to_transaction; the metadata is "epoch=<n>;nonce=<n>;writer=<transactional id>");
 * otherwise with the idempotent producer (at-least-once across producer sessions; deterministic
 * keys let consumers dedup). Every record carries four headers: nf-writer (the transactional id),
 * nf-epoch, nf-nonce (the epoch's pending record's random nonce: the same epoch number can come
 * again after a restored checkpoint) and nf-seq (its index among the epoch's records), so that
 * recovery can tell which records of an undecided epoch reached the log: nf_kafka_scan_epoch()
 * reads the output partitions back with isolation.level=read_committed from the positions the
 * pending record noted and marks the seqs found. A broker that hides aborted transactions hides
 * them from this scan too, so they are produced again; one that does not (librdkafka 2.0's mock
 * cluster keeps aborted records visible and does not store transactional offset commits) shows
 * them, so they are not produced twice. Either way every record ends up in the log exactly once
 * (single writer per transactional id: init_transactions fences a previous incarnation).
 *
 * Consumer. One KafkaConsumer in the group kafka.group_id (cooperative-sticky), subscribed to
 * the input topics, isolation.level=read_committed, no auto-commit and no offset store: the
 * position of every assigned partition comes from the job's committed state (the `position`
 * callback), falling back to the earliest offset for a partition never consumed. Each assigned
 * partition's queue is forwarded to the queue of shard (partition % shards); each shard queue
 * signals a pipe (rd_kafka_queue_io_event_enable) that the shard watches on its io_uring.
 * Rebalance callbacks run on the thread calling nf_kafka_poll() (the coordinator): before
 * partitions are released the `revoke` callback commits an epoch, so positions move with state.
 * With assign_all (kafka.assignment = "all") there is no group: the process assigns itself every
 * input partition — for a single process, where waiting out a killed member's session timeout
 * before the group rebalances would only delay the restart.
 *
 * Threads: nf_kafka_shard_* from the named shard; nf_kafka_pause_shard from any thread; the rest
 * from the coordinator's thread. */
#ifndef NF_KAFKA_H
#define NF_KAFKA_H

#include "io/sink.h"
#include "io/streams.h"
#include "runtime/jsonw.h"
#include "runtime/metrics.h"

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- embedded mock cluster ---- */
typedef struct nf_kafka_mock nf_kafka_mock_t;
/* Starts librdkafka's mock cluster (its own threads) and creates every topic (docs/ARCHITECTURE.md
 * §5) with `partitions` partitions. NULL with err on failure. */
nf_kafka_mock_t *nf_kafka_mock_new(unsigned brokers, unsigned partitions, const char *prefix,
                                   char *err, size_t errlen);
const char *nf_kafka_mock_bootstrap(const nf_kafka_mock_t *m);
/* For fault injection (rdkafka_mock.h): request errors, broker down. */
struct rd_kafka_mock_cluster_s *nf_kafka_mock_cluster(nf_kafka_mock_t *m);
void nf_kafka_mock_free(nf_kafka_mock_t *m);

/* ---- topic administration ---- */
typedef struct nf_kafka_topics_opts {
    const char *brokers;
    const char *properties; /* "name=value" lines (kafka.properties), may be NULL */
    const char *prefix;     /* kafka.topic_prefix */
    unsigned partitions;
    int replication; /* -1: the broker's default.replication.factor */
    int timeout_ms;  /* per request; 0 = 30 s */
} nf_kafka_topics_opts_t;
/* One topic's outcome: "created", "exists", "missing" (not created: listing only) or "failed"
 * (error says why); partitions as the cluster's metadata shows them afterwards (0 if none). */
typedef void (*nf_kafka_topic_cb)(void *arg, const char *topic, const char *outcome, int partitions,
                                  const char *error);
/* With create, creates every topic of docs/ARCHITECTURE.md §5 (inputs, outputs, names prefixed)
 * that does not exist on the cluster: `partitions` partitions, `sources` compacted; a topic that
 * exists is left as it is. Then reads the cluster's metadata and calls cb once per topic. 0 if
 * every topic exists, -ENOENT if some are missing, other -errno with err. Any thread; blocks up to
 * about 2 x timeout_ms (+10 s while new topics reach the metadata). */
int nf_kafka_topics(const nf_kafka_topics_opts_t *o, bool create, nf_kafka_topic_cb cb, void *arg,
                    char *err, size_t errlen);

/* ---- client ---- */
typedef struct nf_kafka nf_kafka_t;

typedef struct nf_kafka_opts {
    const char *brokers;
    bool exactly_once;
    const char *topic_prefix;
    const char *group_id;
    const char *transactional_id;
    const char *group_instance_id; /* static membership (KIP-345); NULL = dynamic member */
    const char *client_id;         /* the consumer's client.id (NULL: librdkafka's default); the
                                      group's member descriptions carry it (nf_kafka_members) */
    const char *properties;        /* "name=value" entries separated by '\n' (may be NULL) */
    unsigned shards;               /* consumer shard queues */
    bool consume;                  /* join the group and feed the shards */
    bool assign_all;               /* no group: take every partition of the inputs (one process) */
    bool changelog;                /* produce changelog records (their topics must exist) */
    bool trending_panes; /* trending panes through the trending-panes topic (analytics.h) */
    /* Called from the coordinator thread; may be NULL. */
    int64_t (*position)(void *arg, nf_input_t in, int32_t partition); /* -1 = none */
    /* A rebalance (group mode): partitions (input, partition; input NF_INPUT__COUNT for a topic
     * that is not one) assigned, before they are positioned (false: the job failed, they are
     * not taken: no position, no shard, paused until the consumer closes); revoked, after the
     * shards stopped taking their records (nf_kafka_owns) and before they are released. */
    bool (*assign)(void *arg, const nf_kafka_offset_t *parts, size_t n);
    void (*revoke)(void *arg, const nf_kafka_offset_t *parts, size_t n, bool lost);
    void (*fault)(const char *point); /* fault-injection points inside the produce */
    void *arg;
} nf_kafka_opts_t;

/* Connects the producer (init_transactions, which fences an older incarnation and aborts its
 * open transaction) and, with consume, creates the consumer and the shard queues (subscribing
 * waits for nf_kafka_subscribe). Checks that every topic exists. NULL with err. */
/* NULL with err on failure; errno is then ENOENT when the cluster answered but topics of the
 * job are missing (err names every one), else EIO. */
nf_kafka_t *nf_kafka_new(const nf_kafka_opts_t *o, char *err, size_t errlen);
void nf_kafka_free(nf_kafka_t *k);

/* A librdkafka configuration as the job's clients start from it: bootstrap.servers = brokers,
 * the operator's kafka.properties ("name=value" lines, may be NULL) and the job's log and error
 * callbacks (log lines under component "kafka"). For clients of their own (the HTTP edge's
 * producer, io/edge_kafka.h). NULL with err naming the bad property. */
rd_kafka_conf_t *nf_kafka_conf_new(const char *brokers, const char *props, char *err,
                                   size_t errlen);
int nf_kafka_subscribe(nf_kafka_t *k, char *err, size_t errlen);
/* Leaves the group: undoes the partitions' forwarding and pauses, then closes the consumer;
 * the revoke callback does not commit again (the final epoch is committed before this). */
void nf_kafka_close_consumer(nf_kafka_t *k);

const char *nf_kafka_output_topic(const nf_kafka_t *k, nf_topic_t t);
const char *nf_kafka_input_topic(const nf_kafka_t *k, nf_input_t in);
/* nf_input_t of a consumed record's topic, or -1. */
int nf_kafka_input_of(const nf_kafka_t *k, const char *topic);

/* Bounds every blocking call from now on (transactions, flushes, committed offsets, the
 * recovery scan) by deadline_ns (nf_now_ns clock; 0 = none): a call past it returns at once
 * with -ETIMEDOUT and err naming the deadline; a transaction it interrupts is neither retried
 * nor aborted (the next incarnation's init_transactions settles it). Shutdown uses it so that
 * shutdown.timeout_ms holds with the broker down. Any thread. */
void nf_kafka_set_deadline(nf_kafka_t *k, uint64_t deadline_ns);
bool nf_kafka_past_deadline(const nf_kafka_t *k);

/* The consumer group's members as its coordinator describes them (DescribeConsumerGroups):
 * for each member, cb(arg, client_id, input, partition) per input partition assigned to it,
 * and once with partition -1 for a member assigned none. Blocks up to timeout_ms; any thread
 * (an admin request on a client of its own, created at the first call). 0, or -errno with err
 * (-ENOTCONN without a consumer, -ETIMEDOUT, -EOPNOTSUPP when the cluster cannot describe
 * groups — librdkafka's mock cannot —, -EIO with the broker's error). */
int nf_kafka_members(nf_kafka_t *k, int timeout_ms,
                     void (*cb)(void *arg, const char *client_id, nf_input_t in, int32_t partition),
                     void *arg, char *err, size_t errlen);

/* Whether this process's consumer-group membership has lapsed, or may have: librdkafka says its
 * session expired (it was stopped, starved or cut off from the coordinator longer than
 * session.timeout.ms), so its partitions may be another member's already, before the rebalance
 * callback says so; or the coordinator thread (nf_kafka_poll, the slices of its blocking calls)
 * has not run unbroken for the last 2 s, as after a SIGSTOP, when librdkafka has not looked yet.
 * False without a group. Any thread; cheap (atomic reads). */
bool nf_kafka_member_lost(nf_kafka_t *k);
/* Serves the consumer's events (rebalance) and the producer's delivery reports. */
void nf_kafka_poll(nf_kafka_t *k, int timeout_ms);
/* 0 while both clients are usable; -ESTALE once the broker fenced this process (another one
 * took over its transactional.id or group.instance.id), -EPIPE after any other fatal client
 * error; err says which. A fenced process must stop without committing anything more. */
int nf_kafka_fatal(nf_kafka_t *k, char *err, size_t errlen);
/* After a fatal producer error that is not fencing (nf_kafka_produce_epoch returned -EPIPE):
 * replaces the producer with a new one under the same transactional id, whose
 * init_transactions fences the old one and completes or aborts its transaction. What of the
 * epoch reached the log is then unknown to the caller: decide it as after a restart
 * (nf_kafka_epoch_outcome, else nf_kafka_scan_epoch). 0 or -errno with err. */
int nf_kafka_reset_producer(nf_kafka_t *k, char *err, size_t errlen);

/* Output positions: for every output partition, the offset after this writer's last delivered
 * record (or the high watermark at start), as {"topic":[p0,p1,...],...} — the lower bound a
 * recovery scan starts from. */
void nf_kafka_positions_json(nf_kafka_t *k, nf_jw_t *w);

/* Produces the records of an epoch (bufs: nf_outbuf data, records numbered 0.. in order) that
 * are not marked in `present` (a bitmap of nrecords bits; NULL = none present) and commits.
 * 0, or -errno with err (nothing is known about what reached the log: scan and call again);
 * -EOWNERDEAD when the consumer group has evicted this process (its session expired), so that
 * no attempt can commit its positions: stop, do not retry. */
int nf_kafka_produce_epoch(nf_kafka_t *k, uint64_t epoch, uint64_t nonce, const nf_blob_t *bufs,
                           unsigned nbufs, const uint8_t *present, const nf_kafka_offset_t *offsets,
                           size_t noffsets, char *err, size_t errlen);
/* Whether the transaction of (this writer, epoch, nonce) committed, from the consumer group's
 * committed offsets of the epoch's input partitions: every transaction commits them with the
 * metadata "epoch=<n>;nonce=<nonce>;writer=<transactional id>" (the nonce is the pending record's:
 * after a restored checkpoint the same epoch number comes again, with another nonce). Only on a
 * broker that stores transactional offset commits (Apache Kafka; not librdkafka's mock) and only
 * after init_transactions (which completes or aborts the previous incarnation's transaction):
 * COMMITTED if a partition names this epoch and nonce, NOT_COMMITTED if all name an earlier
 * epoch of this writer, else UNKNOWN (then scan). why says what was seen. */
nf_kafka_outcome_t nf_kafka_epoch_outcome(nf_kafka_t *k, uint64_t epoch, uint64_t nonce,
                                          const nf_kafka_offset_t *offsets, size_t n, char *why,
                                          size_t whylen);
/* Marks in present (nrecords bits, zeroed by the caller) the records of (this writer, epoch,
 * nonce) found in the output partitions from the positions in positions_json (NULL = from the
 * start); a record without an nf-nonce header (older versions) matches on epoch alone, and so
 * does every record when nonce is 0. Returns how many were found, or -errno with err. */
long nf_kafka_scan_epoch(nf_kafka_t *k, uint64_t epoch, uint64_t nonce, const char *positions_json,
                         uint8_t *present, size_t nrecords, char *err, size_t errlen);

/* ---- an input topic whole, and records published to one (actors/sources_publish.h) ---- */
/* Calls rec for every record of the input topic's partitions, from the first offset to each
 * partition's end when the read began, read_committed (topic_index is 0). 0 or -errno with
 * err. */
int nf_kafka_read_input(nf_kafka_t *k, nf_input_t in, nf_kafka_record_fn rec, void *arg, char *err,
                        size_t errlen);
typedef struct nf_kafka_pub {
    const char *key, *value;
    size_t klen, vlen;
    int32_t partition; /* explicit; < the topic's partitions */
} nf_kafka_pub_t;
/* Produces the records to the input topic with an idempotent producer of its own (outside any
 * epoch) and waits for every delivery. 0 or -errno with err (then some may have been
 * written). */
int nf_kafka_publish(nf_kafka_t *k, nf_input_t in, const nf_kafka_pub_t *recs, size_t n, char *err,
                     size_t errlen);

/* ---- following an output topic (a global table: actors/topics_follow.h) ---- */
typedef struct nf_kafka_follower nf_kafka_follower_t;
/* Starts a thread that reads every partition p of output topic t from from[p] (p < nfrom and
 * from[p] >= 0; else its first offset) on, read_committed, with a consumer of its own (no
 * group), and calls rec (topic_index 0) for each record on that thread, in offset order per
 * partition, until nf_kafka_follow_stop. Consumer errors are logged and retried by
 * librdkafka. NULL with err if it cannot start. */
nf_kafka_follower_t *nf_kafka_follow(nf_kafka_t *k, nf_topic_t t, const int64_t *from, int nfrom,
                                     nf_kafka_record_fn rec, void *arg, char *err, size_t errlen);
/* Records handed to rec so far, and the partitions' summed lag behind their high watermarks
 * (-1 before it is known; computed every second, also into the gauge nf_kafka_follow_gauge
 * names). Any thread. */
uint64_t nf_kafka_follow_records(const nf_kafka_follower_t *f);
int64_t nf_kafka_follow_lag(const nf_kafka_follower_t *f);
/* Stops the thread (waits for it) and frees f. NULL is a no-op. */
void nf_kafka_follow_stop(nf_kafka_follower_t *f);
/* A gauge the follower thread sets to the lag each second (before records arrive too). Call
 * right after nf_kafka_follow. */
void nf_kafka_follow_gauge(nf_kafka_follower_t *f, nf_gauge_t g);

/* ---- reading an output topic whole (changelog restore, state/changelog.h) ---- */
/* Partitions of an output topic (0 when it was not loaded: a changelog topic without
 * kafka opts `changelog`). */
int nf_kafka_topic_partitions(const nf_kafka_t *k, nf_topic_t t);
/* The high watermark of each of the topic's first n partitions into hi. 0 or -EIO with err. */
int nf_kafka_topic_ends(nf_kafka_t *k, nf_topic_t t, int64_t *hi, int n, char *err, size_t errlen);
/* Calls rec (io/streams.h) for every record of output topics topics[0..ntopics) (nf_topic_t),
 * partitions 0..nparts[i]-1 of topic i, from from[i * stride + p] (< 0: the first offset) to the
 * partition's end, read_committed, with one consumer of its own (no group join). Records of
 * one partition come in offset order; partitions interleave. end[i * stride + p] comes in as the
 * high watermark (nothing is read when from >= it) and goes out as the next offset to read.
 * rec's non-zero return stops the read and is returned. 0 or -errno with err. */
int nf_kafka_read_topics(nf_kafka_t *k, const int *topics, int ntopics, const int *nparts,
                         int stride, const int64_t *from, int64_t *end, nf_kafka_record_fn rec,
                         void *arg, char *err, size_t errlen);
/* A consumer of output topics' partitions kept open (a standby's, state/standby.h): no group
 * join, read_committed, each partition from the offset it is set at. One thread uses it. */
typedef struct nf_kafka_tail nf_kafka_tail_t;
/* NULL with err on failure. */
nf_kafka_tail_t *nf_kafka_tail_new(nf_kafka_t *k, char *err, size_t errlen);
/* Starts reading topic's partition at from (-1: its first offset), or stops reading it (from =
 * NF_KAFKA_TAIL_STOP: nothing of it is delivered after this returns). 0 or -EIO/-EINVAL. */
int nf_kafka_tail_set(nf_kafka_tail_t *t, nf_topic_t topic, int32_t partition, int64_t from,
                      char *err, size_t errlen);
/* Calls rec (topic_index = the nf_topic_t) for up to max records, waiting up to timeout_ms for
 * the first; records of a partition in offset order. The count, rec's non-zero return, or -EIO
 * (the consumer failed for good). */
int nf_kafka_tail_poll(nf_kafka_tail_t *t, int timeout_ms, int max, nf_kafka_record_fn rec,
                       void *arg, char *err, size_t errlen);
/* The next offset rec has not been given (past transaction markers and aborted records; -1
 * before the first fetch) and the partition's high watermark as last fetched (-1: unknown). */
int nf_kafka_tail_position(nf_kafka_tail_t *t, nf_topic_t topic, int32_t partition, int64_t *pos,
                           int64_t *hi);
void nf_kafka_tail_free(nf_kafka_tail_t *t);

/* The consumer group's committed offsets of the input partitions in only[nonly] (only NULL: of
 * every input partition) that have one (up to cap into out, *n of them) and the highest epoch of
 * this writer their metadata names (0 if none). Stable offsets: the answer waits while a
 * transaction holding offsets of one of those partitions is open. Needs a broker that keeps
 * transactional offset commits (not librdkafka's mock). 0 or -EIO. */
int nf_kafka_group_offsets(nf_kafka_t *k, const nf_kafka_offset_t *only, size_t nonly,
                           nf_kafka_offset_t *out, size_t cap, size_t *n, uint64_t *max_epoch,
                           char *err, size_t errlen);

/* The operations above that the epoch coordinator uses, as the table state/epoch.h takes
 * (nf_kafka_ops_t, io/streams.h; arg = k). Defined in kafka_ops.c. */
nf_kafka_ops_t nf_kafka_ops(nf_kafka_t *k);

/* ---- shard side ---- */
/* Readable when the shard's queue went from empty to non-empty; drain it, then consume. */
int nf_kafka_shard_fd(const nf_kafka_t *k, unsigned shard);
/* Up to n messages (0 if none). Destroy each with rd_kafka_message_destroy. */
size_t nf_kafka_shard_consume(nf_kafka_t *k, unsigned shard, rd_kafka_message_t **msgs, size_t n);
/* The partitions of input `in` assigned to the shard now: up to n into out, sorted; returns
 * how many there are (may exceed n). Any thread (takes the assignment lock): the trending
 * counter polls it so an assigned partition that has not produced an event yet holds the
 * watermark back (analytics.h). */
size_t nf_kafka_shard_partitions(nf_kafka_t *k, unsigned shard, nf_input_t in, int32_t *out,
                                 size_t n);
/* Whether the shards may take records of the partition: assigned and not being revoked. A record
 * of a partition this returns false for is dropped unprocessed (its next owner reads it). Any
 * thread, lock-free. */
bool nf_kafka_owns(const nf_kafka_t *k, nf_input_t in, int32_t partition);
/* Pauses (or resumes) fetching for every partition assigned to the shard. */
void nf_kafka_pause_shard(nf_kafka_t *k, unsigned shard, bool pause);

/* Consumer lag (coordinator thread, after an epoch commits): for every partition this process
 * is assigned, the high watermark librdkafka last saw (cached, non-blocking) minus the job's
 * committed position (the `position` callback; the low watermark if never committed), into the
 * gauge newsflow_kafka_consumer_lag{topic,partition}. Partitions no longer assigned read 0 there
 * and -1 from nf_kafka_lag. */
void nf_kafka_update_lag(nf_kafka_t *k);
/* The last lag computed for a partition, -1 if not assigned or not known yet. Any thread. */
int64_t nf_kafka_lag(const nf_kafka_t *k, nf_input_t in, int32_t partition);
/* Whether this process is assigned the partition now. Any thread (takes the assignment lock). */
bool nf_kafka_assigned(nf_kafka_t *k, nf_input_t in, int32_t partition);
/* Partitions of an input topic (0 before the metadata was read, or without Kafka). Any thread. */
int nf_kafka_input_partitions(const nf_kafka_t *k, nf_input_t in);

typedef struct nf_kafka_stats {
    uint64_t produced, delivery_errors, transactions, aborts, scans, assigned, revoked, pauses;
} nf_kafka_stats_t;
void nf_kafka_stats(const nf_kafka_t *k, nf_kafka_stats_t *out);
/* The consumer's group as librdkafka last reported it (every 5 s): "state/join_state
 * rebalances=N last=Ss ago (reason)"; "" without a consumer or before the first report. Any
 * thread. */
void nf_kafka_group_state(nf_kafka_t *k, char *buf, size_t len);
/* The last error librdkafka reported on either client (error_cb: broker down, transport,
 * authentication...) into buf, and how long ago in ns (UINT64_MAX and "" if none). Any
 * thread. */
uint64_t nf_kafka_last_client_error(nf_kafka_t *k, char *buf, size_t len);

#endif
