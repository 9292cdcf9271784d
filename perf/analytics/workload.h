/* workload.h — generated workloads for the analytics benchmarks: a seeded PRNG, a Zipf sampler,
 * and read-events JSON values as the job would consume them from Kafka.
 *
 * Deterministic: the same seed gives the same workload, so peers (Redis) and the job count
 * exactly the same events in one run. */
#ifndef NF_WORKLOAD_H
#define NF_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* splitmix64 */
uint64_t nf_wl_rand(uint64_t *state);
/* uniform in [0, 1) */
double nf_wl_uniform(uint64_t *state);

/* Zipf(s) over ranks 0..n-1 (rank 0 the most frequent), by inverse CDF. */
typedef struct nf_zipf {
    double *cdf;
    uint32_t n;
} nf_zipf_t;
int nf_zipf_init(nf_zipf_t *z, uint32_t n, double s); /* 0 or -ENOMEM */
uint32_t nf_zipf_next(const nf_zipf_t *z, uint64_t *rng);
void nf_zipf_free(nf_zipf_t *z);

/* The article_id of rank i: 32 lower-case hex digits, like a real one (a hash of i). */
void nf_wl_article_id(uint32_t i, char out[33]);

struct nf_topic_vec;
/* A deterministic sparse topic vector for article i: 1-3 of 20 topics, L2-normalised. */
void nf_wl_article_topics(uint32_t i, struct nf_topic_vec *v);

/* n read-events values, back to back in buf (value i is buf[off[i]], len[i] bytes):
 *   {"event_id":"e<i>","user_id":"u<rank>","article_id":"<id>","session_id":"s<k>","ts":<ms>}
 * users and articles Zipf-distributed (s = zipf_s), ts = t0_ms + i * span_ms / n (in order).
 * With every_user_first, the first `users` values (n must be at least that) name each user once,
 * in a random order: a job that has served its readers for a while has state for all of them.
 * user_of[i] / article_of[i] (optional, may be NULL) receive the ranks. */
typedef struct nf_wl_events {
    char *buf;
    size_t *off;
    uint32_t *len;
    uint32_t *user_of, *article_of;
    int64_t *ts;
    size_t n;
} nf_wl_events_t;
int nf_wl_read_events(nf_wl_events_t *e, size_t n, uint32_t users, uint32_t articles, double zipf_s,
                      int64_t t0_ms, int64_t span_ms, uint64_t seed, bool every_user_first);
void nf_wl_events_free(nf_wl_events_t *e);

/* Redeliveries: after every `every`-th event (every > 0), the same event again (same bytes, same
 * event_id), as a producer's retry or a consumer's replay delivers it; e grows by n / every.
 * 0 or -ENOMEM (e unchanged). */
int nf_wl_add_redeliveries(nf_wl_events_t *e, size_t every);

/* The partition of user rank u's read events among `partitions`: read-events is keyed by
 * user_id (DESIGN §4), and Kafka's partitioner puts a key's records in one partition chosen by
 * a hash of the key. */
uint16_t nf_wl_partition_of(uint32_t user, uint32_t partitions);

#endif
