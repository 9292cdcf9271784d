/* serve_state.h — state kept for the query API alone (docs/ARCHITECTURE.md §4 "Queries";
 * src/serve/query.h reads it through committed views): dedup writes it for each new article, into
 * the epoch that emits the article, so an answer never names an article a crash could take back.
 * Nothing in the job reads it back, so no shard holds it in memory: a new article's entries wait in
 * the dedup shard's batch until its epoch's cut (memory: one epoch's new articles), then live in
 * RocksDB, and leave by their expiry (the store's TTL filter; readers check it too).
 *
 *   NF_KIND_ARTICLE_META  key nf_kstate_encode_key(kg, id), kg the article's key group (as its
 *                         ArticleKey: id.hi % 256, or the global one in a consumer group);
 *                         value [expires_at_ms 8 LE: ingested + meta TTL][JSON object:
 *                         article_id, url, title, source_id, published_at (what the feed said,
 *                         or null), ingested_at, language, summary (at most
 *                         NF_SERVE_SUMMARY_MAX bytes, cut at a character)].
 *   NF_KIND_STORY         a story, written by the stories actor (stories.c) from each
 *                         clustering result, three kinds of key, kg the cluster index's key
 *                         group of the story's id:
 *                         - its record: key nf_kstate_encode_key(kg, cluster id), value
 *                           [expires_at_ms 8 LE: the last change + cluster.ttl_s][articles u32
 *                           LE][sources u32 LE, bit 31: more than listed][source hashes u64 LE
 *                           each, at most NF_SERVE_STORY_SOURCES_MAX] (nf_serve_story_t; a
 *                           record of 4 bytes, from before sources, has none): new 1; joined
 *                           +1; merged the sum of the merged stories + 1 (theirs deleted).
 *                           Sources are nf_hash64 of the articles' source_id, counted once.
 *                           A merge of more than NF_CLUSTER_MERGED_MAX stories at once loses
 *                           the sizes of the ones not listed (newsflow_story_sizes_lost_total);
 *                         - a member: key [kg 2 BE][story 16 BE]['m'][INT64_MAX - published_ms
 *                           8 BE][article 16 BE] (NF_SERVE_MEMBER_KEY_LEN: a scan of
 *                           [kg story 'm'] walks the articles that joined that story, newest
 *                           first), value [expires_at_ms 8 LE: ingested + cluster.ttl_s];
 *                           written once per article, under the story it joined then;
 *                         - a merge: key [kg 2 BE][story 16 BE]['c'][merged story 16 BE]
 *                           (NF_SERVE_CHILD_KEY_LEN), value [expires_at_ms 8 LE]: the merged
 *                           story's members (and its own merges) belong to this one. A story's
 *                           articles are its members and those of its merges, recursively
 *                           (nothing is moved at a merge).
 *   NF_KIND_TOPIC_RECENT  the recent articles by topic, one entry per topic the article's
 *                         vector names: key [0xFF 0xFF][topic u8][INT64_MAX - published_ms,
 *                         8 BE][id 16 BE] (NF_SERVE_RECENT_KEY_LEN bytes: a prefix scan of
 *                         [0xFF 0xFF topic] walks a topic's articles newest first); value
 *                         [expires_at_ms 8 LE: published + NF_SERVE_RECENT_MS][published_ms
 *                         8 LE][the article's topic vector, nf_interest_topics_encode].
 *   NF_KIND_SEARCH_LOG    the articles in the order their epochs were cut, for the search index
 *                         (src/serve/search.h), which follows it view by view: key [0xFF 0xFF]
 *                         [cut_ms 8 BE: the wall clock at the epoch's cut, never behind the
 *                         shard's previous cut][the article's NF_KIND_ARTICLE_META key, 18]
 *                         (NF_SERVE_SEARCH_KEY_LEN bytes); value [expires_at_ms 8 LE: the
 *                         metadata's]. Written by dedup at the cut, from the metadata entries
 *                         of the epoch's new articles.
 *   NF_KIND_READS         a reader's own history (GET /v1/users/{user}/reads), one entry per
 *                         event interest counted (explicit feedback only, unless
 *                         interest.history=all), written by the reads actor into the epoch that
 *                         counts it: key [kg 2 BE][user key hi 8 BE][user key lo 8 BE]
 *                         [INT64_MAX - ts_ms 8 BE][the event's dedup key lo 8 BE]
 *                         (NF_SERVE_HISTORY_KEY_LEN bytes: a prefix scan of the first
 *                         NF_SERVE_HISTORY_PREFIX walks a reader's events newest first), kg the
 *                         event's read-events partition; value [expires_at_ms 8 LE: counted +
 *                         interest.history_ttl_s][kind u8][ts_ms 8 LE][article_id, its bytes].
 *                         The kind's column family also holds each reader's followed and muted
 *                         topics under the 18-byte key [kg][user key] (engine/follows.h), which
 *                         a prefix scan of the reader's history meets first and skips. It held
 *                         a read counter long ago and was unused since; its changelog topic is
 * changelog-reads, keyed like interest by the read-events partition, so a reader's history follows
 * the partition to another process. published_ms is the article's published_at when it has one no
 * later than ingested + 5 minutes, else ingested_ms: a date in the future is the feed's error and
 * must not pin an article at the top; a date in the past, however far (an item dated 1971), is
 * kept, so that the article is as old as its feed says. An article already older than
 * NF_SERVE_RECENT_MS gets no recent entry, so it is in no feed of the last NF_SERVE_RECENT_MS (it
 * is still searchable).
 *
 * Threads: pure functions, any thread. */
#ifndef NF_SERVE_STATE_H
#define NF_SERVE_STATE_H

#include "actors/article_msg.h"
#include "engine/interest.h"
#include "state/store.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_SERVE_RECENT_MS      (48ll * 3600 * 1000)
#define NF_SERVE_RECENT_KEY_LEN 27
#define NF_SERVE_RECENT_PREFIX  3
#define NF_SERVE_SUMMARY_MAX    300
#define NF_SERVE_META_KEY_LEN   18
#define NF_SERVE_SEARCH_KEY_LEN (2 + 8 + NF_SERVE_META_KEY_LEN)
#define NF_SERVE_SEARCH_PREFIX  2

#define NF_SERVE_STORY_SOURCES_MAX 64
#define NF_SERVE_STORY_PREFIX      19       /* [kg 2][story 16][tag 1] */
#define NF_SERVE_MEMBER_TAIL       (8 + 16) /* [INT64_MAX - published 8 BE][article 16 BE] */
#define NF_SERVE_MEMBER_KEY_LEN    (NF_SERVE_STORY_PREFIX + NF_SERVE_MEMBER_TAIL)
#define NF_SERVE_CHILD_KEY_LEN     (NF_SERVE_STORY_PREFIX + 16)
#define NF_SERVE_STORY_MEMBER      'm'
#define NF_SERVE_STORY_CHILD       'c'

#define NF_SERVE_HISTORY_KEY_LEN 34
#define NF_SERVE_HISTORY_PREFIX  18

/* A story's record (NF_KIND_STORY, above). */
typedef struct nf_serve_story {
    uint32_t size;     /* articles */
    uint32_t nsources; /* distinct sources listed in sources[] */
    bool more;         /* more sources than listed */
    uint64_t sources[NF_SERVE_STORY_SOURCES_MAX];
} nf_serve_story_t;
/* A story of one article and no known source (what a story without a record counts as). */
void nf_serve_story_init(nf_serve_story_t *s);
/* The record after its expiry (val, len bytes) into s; 0, or -EINVAL (s as nf_serve_story_init
 * leaves it). */
int nf_serve_story_decode(const void *val, size_t len, nf_serve_story_t *s);
/* The record into out (at least 8 + 8 * NF_SERVE_STORY_SOURCES_MAX bytes); its length. */
size_t nf_serve_story_encode(const nf_serve_story_t *s, unsigned char *out);
/* A source (nf_hash64 of its id) into s, once; from's sources into into. */
void nf_serve_story_add_source(nf_serve_story_t *s, uint64_t source);
void nf_serve_story_merge(nf_serve_story_t *into, const nf_serve_story_t *from);
/* The hash a source id counts as. */
uint64_t nf_serve_source_hash(const char *source_id, size_t len);

/* [kg story tag]: the prefix of a story's members (NF_SERVE_STORY_MEMBER) or merges. */
void nf_serve_story_prefix(uint16_t kg, nf_id128_t story, char tag,
                           unsigned char out[NF_SERVE_STORY_PREFIX]);
/* A member key's tail, after the story's prefix (its order: newest first, then by id); a date
 * before 1970 sorts as 1970. And back. */
void nf_serve_member_tail(int64_t published_ms, nf_id128_t article,
                          unsigned char out[NF_SERVE_MEMBER_TAIL]);
void nf_serve_member_tail_decode(const unsigned char tail[NF_SERVE_MEMBER_TAIL],
                                 int64_t *published_ms, nf_id128_t *article);
void nf_serve_put_member(nf_store_batch_t *b, uint16_t kg, nf_id128_t story, int64_t published_ms,
                         nf_id128_t article, int64_t expires_ms);
void nf_serve_put_child(nf_store_batch_t *b, uint16_t kg, nf_id128_t story, nf_id128_t merged,
                        int64_t expires_ms);
/* A member / merge entry back: 0, or -EINVAL when key or value is not one. */
int nf_serve_member_decode(const void *key, size_t klen, const void *val, size_t vlen,
                           int64_t *expires_ms, int64_t *published_ms, nf_id128_t *article);
int nf_serve_child_decode(const void *key, size_t klen, const void *val, size_t vlen,
                          int64_t *expires_ms, nf_id128_t *merged);
/* What the story index needs of a new article from its record: when it counts as published
 * (above) and its source's hash (0 without a source_id). */
void nf_serve_article_story(const nf_article_blob_t *a, int64_t *published_ms, uint64_t *source);

/* One counted event of a reader into b (see NF_KIND_READS above): r as the reads actor keyed it
 * (user key, dedup key, kind, ts, kg), the article's id as the event named it. */
void nf_serve_history_put(nf_store_batch_t *b, const nf_interest_read_t *r, const char *article,
                          size_t alen, int64_t expires_ms);
void nf_serve_history_prefix(uint16_t kg, nf_id128_t user,
                             unsigned char out[NF_SERVE_HISTORY_PREFIX]);
/* An entry back (the article's bytes point into val): 0, or -EINVAL when it is not one. */
int nf_serve_history_decode(const void *key, size_t klen, const void *val, size_t vlen,
                            int64_t *expires_ms, int *kind, int64_t *ts_ms, const char **article,
                            size_t *alen);

/* The article's serving entries into b (meta under key group kg, expiring meta_ttl_ms after
 * ingestion; recent entries per topic). 0, or -ENOMEM. */
int nf_serve_put_article(nf_store_batch_t *b, uint16_t kg, const nf_article_blob_t *a,
                         uint64_t meta_ttl_ms);

/* The time an article counts as published (see the top). */
int64_t nf_serve_published_ms(int64_t published_at_ms, bool has_published, int64_t ingested_ms);
/* The same from a stored NF_KIND_ARTICLE_META object: *published_ms, and *ingested_ms (its
 * ingested_at, else ingested_default). Whether it had a readable ingested_at. */
bool nf_serve_meta_times(const cJSON *meta, int64_t ingested_default, int64_t *published_ms,
                         int64_t *ingested_ms);

void nf_serve_recent_key(unsigned topic, int64_t published_ms, nf_id128_t id,
                         unsigned char out[NF_SERVE_RECENT_KEY_LEN]);
void nf_serve_recent_prefix(unsigned topic, unsigned char out[NF_SERVE_RECENT_PREFIX]);
/* A recent entry back: 0, or -EINVAL when key or value is not one. */
int nf_serve_recent_decode(const void *key, size_t klen, const void *val, size_t vlen,
                           int64_t *expires_ms, int64_t *published_ms, nf_id128_t *id,
                           nf_topic_vec_t *vec);

/* The search log's key prefix, and an entry's key: see the top. */
void nf_serve_search_prefix(unsigned char out[NF_SERVE_SEARCH_PREFIX]);
void nf_serve_search_key(int64_t cut_ms, const unsigned char meta_key[NF_SERVE_META_KEY_LEN],
                         unsigned char out[NF_SERVE_SEARCH_KEY_LEN]);
/* The search log entry of a metadata entry (meta_key, meta_val as nf_serve_put_article wrote
 * them) into b. */
void nf_serve_put_search(nf_store_batch_t *b, int64_t cut_ms, const void *meta_key,
                         const void *meta_val);
/* A search log entry back: 0, or -EINVAL when key or value is not one. */
int nf_serve_search_decode(const void *key, size_t klen, const void *val, size_t vlen,
                           int64_t *cut_ms, unsigned char meta_key[NF_SERVE_META_KEY_LEN],
                           int64_t *expires_ms);

#endif
