/* streams.h — the job's streams as the io and state layers both name them: the Kafka inputs
 * whose positions epochs carry, a position in one, the opaque blobs an epoch's outputs travel
 * in, and the Kafka operations the epoch coordinator uses (nf_kafka_ops_t).
 *
 * A leaf: it includes only runtime/ and system headers, so that io/kafka.h and state/ share this
 * vocabulary without io including state (the layering rule, scripts/check-layers.sh). The output
 * topics (nf_topic_t) are io/sink.h's.
 *
 * nf_kafka_ops_t is how state/epoch.c reaches Kafka, the way actors reach the runtime: through a
 * table of functions and an argument, filled by nf_kafka_ops() (io/kafka.h, io/kafka_ops.c) and
 * handed to nf_epoch_attach_kafka (state/epoch.h). Each entry does what the nf_kafka_* function
 * of the same name says in io/kafka.h, on the thread kafka.h names for it. */
#ifndef NF_STREAMS_H
#define NF_STREAMS_H

#include "runtime/jsonw.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka inputs whose positions epochs carry. */
/* NF_INPUT_TRENDING_PANES: the output topic trending-panes read back by the process that merges
 * (a job in several processes, analytics.h). */
typedef enum {
    NF_INPUT_READ_EVENTS = 0,
    NF_INPUT_SOURCES,
    NF_INPUT_TRENDING_PANES,
    NF_INPUT__COUNT
} nf_input_t;
/* An input's name in epoch headers and logs ("read-events", "sources", "trending-panes"). */
const char *nf_input_name(nf_input_t in);
#define NF_EPOCH_MAX_PARTITIONS 1024

/* A position in an input: what an epoch commits per (input, partition). */
typedef struct nf_kafka_offset {
    nf_input_t input;
    int32_t partition;
    int64_t next; /* next offset to read */
} nf_kafka_offset_t;

typedef struct nf_blob {
    const void *data;
    size_t len;
} nf_blob_t;

typedef enum {
    NF_KAFKA_UNKNOWN = 0,
    NF_KAFKA_COMMITTED,
    NF_KAFKA_NOT_COMMITTED
} nf_kafka_outcome_t;

/* One record of topics read whole (nf_kafka_read_topics): which of the topics asked for (its
 * index), partition, offset; tombstone: a null value. Return 0 to go on, non-zero to stop the
 * read with that value. */
typedef int (*nf_kafka_record_fn)(void *arg, int topic_index, int32_t partition, int64_t offset,
                                  const void *key, size_t klen, const void *val, size_t vlen,
                                  bool tombstone);

typedef struct nf_kafka_ops {
    void *arg; /* passed to every entry: the client */
    int (*subscribe)(void *arg, char *err, size_t errlen);
    void (*poll)(void *arg, int timeout_ms);
    int (*fatal)(void *arg, char *err, size_t errlen);
    int (*reset_producer)(void *arg, char *err, size_t errlen);
    void (*close_consumer)(void *arg);
    void (*set_deadline)(void *arg, uint64_t deadline_ns);
    void (*update_lag)(void *arg);
    void (*positions_json)(void *arg, nf_jw_t *w);
    int (*produce_epoch)(void *arg, uint64_t epoch, uint64_t nonce, const nf_blob_t *bufs,
                         unsigned nbufs, const uint8_t *present, const nf_kafka_offset_t *offsets,
                         size_t noffsets, char *err, size_t errlen);
    nf_kafka_outcome_t (*epoch_outcome)(void *arg, uint64_t epoch, uint64_t nonce,
                                        const nf_kafka_offset_t *offsets, size_t n, char *why,
                                        size_t whylen);
    long (*scan_epoch)(void *arg, uint64_t epoch, uint64_t nonce, const char *positions_json,
                       uint8_t *present, size_t nrecords, char *err, size_t errlen);
    /* the changelog's (state/changelog.h); `topic` is an nf_topic_t */
    int (*topic_partitions)(void *arg, int topic);
    int (*topic_ends)(void *arg, int topic, int64_t *hi, int n, char *err, size_t errlen);
    int (*read_topics)(void *arg, const int *topics, int ntopics, const int *nparts, int stride,
                       const int64_t *from, int64_t *end, nf_kafka_record_fn rec, void *rarg,
                       char *err, size_t errlen);
    int (*group_offsets)(void *arg, const nf_kafka_offset_t *only, size_t nonly,
                         nf_kafka_offset_t *out, size_t cap, size_t *n, uint64_t *max_epoch,
                         char *err, size_t errlen);
    /* the standby's (state/standby.h): a consumer of changelog partitions kept open, used by
     * one thread; `tail` is what tail_new returned, `topic` an nf_topic_t */
    void *(*tail_new)(void *arg, char *err, size_t errlen);
    int (*tail_set)(void *tail, int topic, int32_t partition, int64_t from, char *err,
                    size_t errlen);
    int (*tail_poll)(void *tail, int timeout_ms, int max, nf_kafka_record_fn rec, void *rarg,
                     char *err, size_t errlen);
    int (*tail_position)(void *tail, int topic, int32_t partition, int64_t *pos, int64_t *hi);
    void (*tail_free)(void *tail);
} nf_kafka_ops_t;
/* tail_set's `from` that stops reading a partition */
#define NF_KAFKA_TAIL_STOP (-2)

#endif
