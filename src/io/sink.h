/* sink.h — where the job's outputs go (the topics of docs/topics.md).
 *
 * Outputs reach Kafka through the epoch's transaction (state/epoch.h, io/kafka.h); a sink is
 * the tee of what committed (`sink.spec`, default stdout) and a benchmark's output. Backends:
 * "jsonl:PATH" appends one JSON object per line,
 *   {"topic":"articles","key":"<key>","value":{...}}
 * to PATH ("-" = stdout), and "none" discards (benchmarks). Each shard emits into its own
 * buffer (no locks, no syscall per record) and flushes it with one write(2) on an O_APPEND file
 * descriptor, so records of different shards never interleave inside a line. Shard s calls
 * only with shard index s. */
#ifndef NF_SINK_H
#define NF_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NF_TOPIC_ARTICLES = 0,
    NF_TOPIC_FETCH_LOG,
    NF_TOPIC_STORY_CLUSTERS,
    NF_TOPIC_TRENDING,
    NF_TOPIC_INTEREST_UPDATES,
    NF_TOPIC_DEAD_LETTERS,
    /* Internal topics, never teed to the sink. The trending counters' panes and watermarks on
     * their way to the one merger of a job in several processes (one partition; analytics.h). */
    NF_TOPIC_TRENDING_PANES,
    NF_TOPIC_INTERNAL_FIRST = NF_TOPIC_TRENDING_PANES,
    /* The changelog topics (state/changelog.h): state, not outputs. */
    NF_TOPIC_CL_ARTICLE_KEY,
    NF_TOPIC_CL_FIRST = NF_TOPIC_CL_ARTICLE_KEY,
    NF_TOPIC_CL_CRAWL_SCHEDULE,
    NF_TOPIC_CL_EVENT_IDS,
    NF_TOPIC_CL_CLUSTER_SIG,
    NF_TOPIC_CL_CLUSTER_BUCKET,
    NF_TOPIC_CL_CLUSTER_PARENT,
    NF_TOPIC_CL_ARTICLE_TOPICS,
    NF_TOPIC_CL_INTEREST,
    NF_TOPIC_CL_INTEREST_SEEN,
    NF_TOPIC_CL_TRENDING,
    NF_TOPIC_CL_ARTICLE_META,
    NF_TOPIC_CL_TOPIC_RECENT,
    NF_TOPIC_CL_STORY,
    NF_TOPIC_CL_SEARCH_LOG,
    NF_TOPIC_CL_READS, /* a reader's history (serve_state.h) */
    NF_TOPIC_CL_END,   /* one past the changelog topics */
    /* Outputs added since, after everything: the ids above are persisted (the topic byte of an
     * epoch's pending record, io/outbuf.h), so a new topic never renumbers them. */
    NF_TOPIC_BREAKING_NEWS = NF_TOPIC_CL_END, /* engine/breaking.h */
    NF_TOPIC_NOTIFICATIONS,                   /* engine/notify.h */
    NF_TOPIC__COUNT
} nf_topic_t;

/* A changelog topic (state/changelog.h): state, not an output. */
static inline bool nf_topic_is_changelog(int t)
{
    return t >= NF_TOPIC_CL_FIRST && t < NF_TOPIC_CL_END;
}
/* An output teed to the sink and read by consumers (not trending-panes, not a changelog). */
static inline bool nf_topic_is_output(int t)
{
    return (t >= 0 && t < NF_TOPIC_INTERNAL_FIRST) || t >= NF_TOPIC_CL_END;
}

const char *nf_topic_name(nf_topic_t t);

typedef struct nf_sink nf_sink_t;

/* NULL with a message naming the spec or the file on failure. */
nf_sink_t *nf_sink_open(const char *spec, unsigned nshards, char *err, size_t errlen);
/* value_json must be one complete JSON value. 0, or -errno of a failed flush. */
int nf_sink_emit(nf_sink_t *s, unsigned shard, nf_topic_t topic, const char *key,
                 const char *value_json, size_t len);
/* Writes the shard's buffer now. 0 or -errno (the records stay buffered for a retry). */
int nf_sink_flush(nf_sink_t *s, unsigned shard);
/* Records accepted per topic, all shards (any thread; approximate while running). */
uint64_t nf_sink_records(const nf_sink_t *s, nf_topic_t topic);
/* Flushes every shard's buffer and closes. Call after the shards stopped. */
int nf_sink_close(nf_sink_t *s);

#endif
