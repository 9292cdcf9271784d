/* edge_kafka.h — the HTTP edge's Kafka producer (serve/edge.h): a reader's events are answered
 * 202 only once the broker has acknowledged every one of them.
 *
 * The contract of the seed's ingest tier, "202 means durable": librdkafka's idempotent producer
 * (acks=all, retries without duplicates or reordering within a partition), records keyed by
 * user_id with the partitioner the job's query routing assumes (serve.partitioner), and a
 * request's thread waiting on the delivery report of each of its records. Nothing is answered
 * before it is durable; nothing accepted is dropped silently: a record that cannot be delivered
 * within delivery_timeout_ms (librdkafka's message.timeout.ms, so the wait is bounded by the
 * client itself) fails its request, and the client sends it again — the event_id set at the
 * source makes the repeat harmless, the job counts an event_id once (actors/reads.h).
 *
 * A broker that failed a record is not tried again for delivery_timeout_ms: the requests of
 * that time fail at once (NF_EDGE_FAILED, nothing produced) instead of each holding an HTTP
 * thread for the whole timeout, which the readers' routes share.
 *
 * Back-pressure: records produced and not yet acknowledged, across all requests, are bounded by
 * max_in_flight; a request that would pass it, or meets librdkafka's own full queue, produces
 * nothing and is refused (NF_EDGE_BUSY: the edge answers 503 with Retry-After).
 *
 * Threads: nf_edge_kafka_new/free from one thread; nf_edge_kafka_send and _ready from any number
 * of threads at once (the HTTP server's). A poller thread of its own serves the delivery
 * reports. */
#ifndef NF_EDGE_KAFKA_H
#define NF_EDGE_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_edge_kafka_opts {
    const char *brokers;          /* bootstrap servers (the embedded cluster's too) */
    const char *properties;       /* "name=value" lines (kafka.properties), may be NULL */
    const char *topic;            /* full name, prefix included */
    const char *partitioner;      /* librdkafka's name: consistent_random, murmur2_random */
    uint32_t delivery_timeout_ms; /* a record unacknowledged after it fails (0: 10000) */
    uint64_t max_in_flight;       /* records unacknowledged at once, all requests (0: 100000) */
} nf_edge_kafka_opts_t;

typedef struct nf_edge_rec {
    const char *key, *value;
    size_t keylen, len;
} nf_edge_rec_t;

enum {
    NF_EDGE_OK = 0,
    NF_EDGE_BUSY = -1,   /* over max_in_flight or the client's queue: nothing was produced */
    NF_EDGE_FAILED = -2, /* at least one record was not acknowledged; others may have been */
};

typedef struct nf_edge_kafka nf_edge_kafka_t;

/* NULL with a message in err (a bad property, a topic name librdkafka refuses). Connecting is
 * lazy: an unreachable broker shows in nf_edge_kafka_ready and in failed sends. */
nf_edge_kafka_t *nf_edge_kafka_new(const nf_edge_kafka_opts_t *o, char *err, size_t errlen);
/* Waits up to delivery_timeout_ms (and a margin) for what is in flight, so that a request still
 * waiting gets its answer, then frees. No send may start once it is called (stop the HTTP
 * server first). NULL is fine. */
void nf_edge_kafka_free(nf_edge_kafka_t *k);

/* Produces recs[0..n) and waits for each one's delivery report. NF_EDGE_OK: all acknowledged.
 * NF_EDGE_BUSY: nothing produced. NF_EDGE_FAILED: *acked of them were acknowledged (which ones
 * is not said: send them all again), err names the first failure (librdkafka's words, e.g.
 * "Local: Message timed out"). */
int nf_edge_kafka_send(nf_edge_kafka_t *k, const nf_edge_rec_t *recs, size_t n, size_t *acked,
                       char *err, size_t errlen);

/* Whether the producer can deliver: not failed for good (an idempotent producer's fatal
 * error), and the topic's metadata came from a broker (a cached answer, asked again at most
 * once a second): false with the reason in why. */
bool nf_edge_kafka_ready(nf_edge_kafka_t *k, char *why, size_t whylen);

/* Records unacknowledged now (a gauge). */
uint64_t nf_edge_kafka_in_flight(const nf_edge_kafka_t *k);

#endif
