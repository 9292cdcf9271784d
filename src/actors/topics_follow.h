/* topics_follow.h — the articles' topic vectors in every process of a consumer group, as a global
 * table (docs/ARCHITECTURE.md §3 "Sources and the global stages in a consumer group"; Kafka
 * Streams' GlobalKTable).
 *
 * In a consumer group the one process assigned the one-partition topic deduplicates the job's
 * articles (ingest.h), so its dedup is the only one that broadcasts their topic vectors to its
 * interest engines; a read event of such an article consumed by another process would find no
 * vector. Each process therefore follows the `articles` topic (every partition, read_committed,
 * from its first offset at every start: nf_kafka_follow) and hands each article's vector to
 * every shard's interest engine (NF_MSG_TOPICS, as dedup does; the engine's table is a bounded
 * cache of them, interest.h). A vector arrives once its article is committed: a read of an
 * article within that time counts as unknown (interest.unknown_articles), as a read that
 * arrives before the article does in one process. The vectors also go to the store as dedup
 * writes them (NF_KIND_ARTICLE_TOPICS, the global key group, TTL cluster.ttl_s), where the
 * engine looks up what its table no longer holds, at least once a second together with the
 * offsets reached (meta record "topics_follow"): a restart reads on from there, not from the
 * start. These writes are outside the epochs (derived from committed records: nothing to
 * roll back) and not in the changelog.
 *
 * Metrics: newsflow_topics_follow_{records,vectors}_total, newsflow_topics_follow_lag_records.
 * Threads: start and stop from the main thread (after the shards started; before they stop);
 * the records are read on the follower's own thread. */
#ifndef NF_TOPICS_FOLLOW_H
#define NF_TOPICS_FOLLOW_H

#include "actors/analytics.h"
#include "io/kafka.h"
#include "runtime/runtime.h"

typedef struct nf_topics_follow nf_topics_follow_t;

/* an: the taxonomy (names -> topic indexes) and interest_actor. NULL with err. */
nf_topics_follow_t *nf_topics_follow_start(nf_kafka_t *k, nf_runtime_t *rt,
                                           const nf_analytics_t *an, char *err, size_t errlen);
/* Parses one articles value into its id and topic vector (names of the taxonomy; unknown names
 * are skipped). true if it names an article. For tests. */
bool nf_topics_follow_parse(const nf_classify_taxonomy_t *tax, const void *val, size_t len,
                            nf_id128_t *id, nf_topic_vec_t *vec);
void nf_topics_follow_stop(nf_topics_follow_t *f);

#endif
