/* kafka_ops.c — nf_kafka_ops() (kafka.h): the client's operations the epoch coordinator uses,
 * as the table of io/streams.h. Each entry only forwards to the nf_kafka_* function of its name;
 * they take void * so that state/epoch.c needs no Kafka header (state may not be included by
 * io, and the coordinator names no client type). */
#include "io/kafka.h"

static int ops_subscribe(void *k, char *err, size_t errlen)
{
    return nf_kafka_subscribe(k, err, errlen);
}

static void ops_poll(void *k, int timeout_ms)
{
    nf_kafka_poll(k, timeout_ms);
}

static int ops_fatal(void *k, char *err, size_t errlen)
{
    return nf_kafka_fatal(k, err, errlen);
}

static int ops_reset_producer(void *k, char *err, size_t errlen)
{
    return nf_kafka_reset_producer(k, err, errlen);
}

static void ops_close_consumer(void *k)
{
    nf_kafka_close_consumer(k);
}

static void ops_set_deadline(void *k, uint64_t deadline_ns)
{
    nf_kafka_set_deadline(k, deadline_ns);
}

static void ops_update_lag(void *k)
{
    nf_kafka_update_lag(k);
}

static void ops_positions_json(void *k, nf_jw_t *w)
{
    nf_kafka_positions_json(k, w);
}

static int ops_produce_epoch(void *k, uint64_t epoch, uint64_t nonce, const nf_blob_t *bufs,
                             unsigned nbufs, const uint8_t *present,
                             const nf_kafka_offset_t *offsets, size_t noffsets, char *err,
                             size_t errlen)
{
    return nf_kafka_produce_epoch(k, epoch, nonce, bufs, nbufs, present, offsets, noffsets, err,
                                  errlen);
}

static nf_kafka_outcome_t ops_epoch_outcome(void *k, uint64_t epoch, uint64_t nonce,
                                            const nf_kafka_offset_t *offsets, size_t n, char *why,
                                            size_t whylen)
{
    return nf_kafka_epoch_outcome(k, epoch, nonce, offsets, n, why, whylen);
}

static long ops_scan_epoch(void *k, uint64_t epoch, uint64_t nonce, const char *positions_json,
                           uint8_t *present, size_t nrecords, char *err, size_t errlen)
{
    return nf_kafka_scan_epoch(k, epoch, nonce, positions_json, present, nrecords, err, errlen);
}

static int ops_topic_partitions(void *k, int topic)
{
    return nf_kafka_topic_partitions(k, (nf_topic_t)topic);
}

static int ops_topic_ends(void *k, int topic, int64_t *hi, int n, char *err, size_t errlen)
{
    return nf_kafka_topic_ends(k, (nf_topic_t)topic, hi, n, err, errlen);
}

static int ops_read_topics(void *k, const int *topics, int ntopics, const int *nparts, int stride,
                           const int64_t *from, int64_t *end, nf_kafka_record_fn rec, void *rarg,
                           char *err, size_t errlen)
{
    return nf_kafka_read_topics(k, topics, ntopics, nparts, stride, from, end, rec, rarg, err,
                                errlen);
}

static int ops_group_offsets(void *k, const nf_kafka_offset_t *only, size_t nonly,
                             nf_kafka_offset_t *out, size_t cap, size_t *n, uint64_t *max_epoch,
                             char *err, size_t errlen)
{
    return nf_kafka_group_offsets(k, only, nonly, out, cap, n, max_epoch, err, errlen);
}

static void *ops_tail_new(void *k, char *err, size_t errlen)
{
    return nf_kafka_tail_new(k, err, errlen);
}

static int ops_tail_set(void *t, int topic, int32_t partition, int64_t from, char *err,
                        size_t errlen)
{
    return nf_kafka_tail_set(t, (nf_topic_t)topic, partition, from, err, errlen);
}

static int ops_tail_poll(void *t, int timeout_ms, int max, nf_kafka_record_fn rec, void *rarg,
                         char *err, size_t errlen)
{
    return nf_kafka_tail_poll(t, timeout_ms, max, rec, rarg, err, errlen);
}

static int ops_tail_position(void *t, int topic, int32_t partition, int64_t *pos, int64_t *hi)
{
    return nf_kafka_tail_position(t, (nf_topic_t)topic, partition, pos, hi);
}

static void ops_tail_free(void *t)
{
    nf_kafka_tail_free(t);
}

nf_kafka_ops_t nf_kafka_ops(nf_kafka_t *k)
{
    return (nf_kafka_ops_t){
        .arg = k,
        .subscribe = ops_subscribe,
        .poll = ops_poll,
        .fatal = ops_fatal,
        .reset_producer = ops_reset_producer,
        .close_consumer = ops_close_consumer,
        .set_deadline = ops_set_deadline,
        .update_lag = ops_update_lag,
        .positions_json = ops_positions_json,
        .produce_epoch = ops_produce_epoch,
        .epoch_outcome = ops_epoch_outcome,
        .scan_epoch = ops_scan_epoch,
        .topic_partitions = ops_topic_partitions,
        .topic_ends = ops_topic_ends,
        .read_topics = ops_read_topics,
        .group_offsets = ops_group_offsets,
        .tail_new = ops_tail_new,
        .tail_set = ops_tail_set,
        .tail_poll = ops_tail_poll,
        .tail_position = ops_tail_position,
        .tail_free = ops_tail_free,
    };
}
