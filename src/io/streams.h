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

#include <stddef.h>
#include <stdint.h>

/* Kafka inputs whose positions epochs carry. */
typedef enum { NF_INPUT_READ_EVENTS = 0, NF_INPUT_SOURCES, NF_INPUT__COUNT } nf_input_t;
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
} nf_kafka_ops_t;

#endif
