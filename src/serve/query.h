/* query.h — the query API (docs/ARCHITECTURE.md §4, "Queries"): readers' questions answered from
 * the job's own committed state, on the admin server's /v1/ routes.
 *
 * Every answer reads one committed view of the store (state/store.h, "committed views"): the
 * state as the last committed epoch left it, never what a crash could take back. Each JSON
 * answer names that epoch ("epoch") and when it was published ("committed_at").
 *
 * Routes (docs/openapi.json describes them; tests/integration/query_api.py checks that the
 * server and the document agree, feed_model.py the feed's ranking):
 *   GET /v1/feed/{user_id}?limit=      the reader's feed: the articles published in the last
 *                                      48 h (serve_state.h) in the reader's top-5 topics, scored
 *                                      dot(interest, topics) * exp(-0.5 * hours since published)
 *                                      + 0.1 * trending score / 1000, best first (then newer,
 *                                      then smaller id), one per story cluster, less the
 *                                      articles the reader disliked or hid (the newest 512
 *                                      entries of their history); followed topics
 *                                      (engine/follows.h) are drawn from too and add 0.5 to the
 *                                      reader's weight for them, an article of a muted topic is
 *                                      left out; a reader without a vector gets their followed
 *                                      topics' articles ("follows"), or without follows the
 *                                      trending window's articles. Those are the seed's weights:
 *                                      the reader's ranking variant (engine/variants.h, named
 *                                      in the answer's "variant") brings its own, and a shadow
 *                                      variant is ranked beside it, never shown
 *   GET /v1/users/{user_id}/reads?limit=
 *                                      the reader's own history: the events interest counted,
 *                                      newest first (serve_state.h, NF_KIND_READS)
 *   GET /v1/users/{user_id}/interest   the reader's interest vector (interest.h), by topic name,
 *                                      its version and last update; 404 for a reader without one
 *   GET /v1/trending?limit=&topic=     the last trending window emitted (the `trending` record
 *                                      the merger keeps as "L", trending.c), one entry per story:
 *                                      its lead article with its topic vector, the story's id,
 *                                      size and sources; topic= keeps the entries whose lead's
 *                                      vector names that topic
 *   GET /v1/articles/{article_id}      its metadata (serve_state.h), topic vector and story
 *                                      cluster (the root of its union-find links, cluster.h)
 *                                      with the story's size; feed items carry both too
 *   GET /v1/topics/{topic}/recent      the topic's articles of the last 48 h, newest first
 *   GET /v1/topics                     the taxonomy's topic names (the page's filter)
 *   GET /v1/search?q=&topic=&since=&limit=
 *                                      full-text search of the articles of the last
 *                                      search.retention (serve/search.h, the syntax in
 *                                      search_query.h), best first by relevance blended with
 *                                      recency, one per story cluster (its id and size), the
 *                                      title and a snippet as HTML with the matches marked
 *   GET /v1/stories/{cluster_id}?limit=&after=
 *                                      a story: its current id (a story merged into another
 *                                      answers as that one), its size and distinct sources
 *                                      (serve_state.h, NF_KIND_STORY), its first article, and
 *                                      its articles newest first (its members and its merges',
 *                                      at most 64 stories deep), paged by the cursor `next`
 * Errors are JSON {"error": "...", "parameter": "..."} (parameter only when one is at fault):
 * 400 a bad user id, article id, limit or topic; 404 an unknown route, reader or article; 503
 * while no committed view exists yet (restoring: Retry-After: 1) or when the store cannot be
 * read.
 *
 * Several processes (a consumer group; docs/ARCHITECTURE.md §4, "Several processes"): a reader's
 * routes (feed, interest) are answered by the process assigned the reader's read-events partition
 * (the producers' partitioner over the user id, nf_query_partition); any other process answers 307
 * with Location at the owner's advertised URL (serve/owners.h) and a JSON body naming the owner and
 * the partition, or 503 + Retry-After while no owner is known (a rebalance). The other routes
 * (trending, articles, stories, topics) read the global key group: answered wherever its state is
 * held (its owner, or a process keeping its changelog applied), else 307 to its owner.
 *
 * Where state lives (the key groups read):
 *   interest   key group = the read-events partition the reader's events came in on, which the
 *              job does not choose (the producer's partitioner does): every partition this
 *              process owns is tried (one batched read), and the most recently updated vector
 *              found wins.
 *   article topic vectors (NF_KIND_ARTICLE_TOPICS)  id.hi % 256, or the global key group in a
 *              consumer group (dedup.c).
 *
 * Threads: nf_query_new/free from main; nf_query_handle from any thread, concurrently (it only
 * reads the options and the store's views). */
#ifndef NF_QUERY_H
#define NF_QUERY_H

#include "engine/variants.h"
#include "runtime/admin.h"
#include "serve/owners.h"
#include "serve/readers.h"
#include "serve/search.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nf_query_opts {
    nf_store_t *store;
    /* The taxonomy: topic index -> name (ntopics of them, each non-NULL). */
    const char *const *topic_names;
    unsigned ntopics;
    /* Read-events partitions (interest's key groups); owns(arg, p): whether this process owns
     * partition p now (NULL: every one). */
    unsigned read_partitions;
    bool (*owns)(void *arg, unsigned partition);
    void *owns_arg;
    /* Article state in the global key group (a consumer group), not id.hi % 256. */
    bool global_articles;
    /* Several processes (a consumer group; NULL owns: one process answers everything): a
     * reader's read-events partition by the producers' partitioner (0 consistent_random =
     * CRC32 of the user id, 1 murmur2_random), whose owner answers for the reader; the owners
     * of other partitions and of the global key group are found in `owners` (serve/owners.h).
     * global_here(owns_arg): whether this process holds the global key group's state (it owns
     * trending-panes 0 or keeps its changelog applied, serve.global_replica); NULL = yes. */
    int partitioner;
    nf_owners_t *owners;
    bool (*global_here)(void *arg);
    const char *self_url; /* this process's advertised URL (never redirect to itself) */
    nf_search_t *search;  /* GET /v1/search (serve/search.h); NULL: search is off (404) */
    /* Readers whose feed inputs (interest, hidden articles) are kept across views
     * (serve/readers.h; it turns on the store's tracked writes); 0: none. */
    size_t reader_cache;
    /* The ranking variants (engine/variants.h): a reader's feed is ranked by their variant's
     * weights and names it ("variant"); NULL or none: the seed's alone. */
    const nf_variants_t *variants;
    unsigned shadow_percent; /* of the feeds it could rank beside (ranking.shadow_percent) */
    /* Wall-clock ms since the Unix epoch for expiries and decays; NULL: CLOCK_REALTIME (a test
     * fixes it to compare answers made at one instant). */
    int64_t (*clock_ms)(void);
} nf_query_opts_t;

typedef struct nf_query nf_query_t;

/* The page (src/serve/page.html, compiled in): what GET / answers, text/html. */
extern const char nf_serve_page[];
extern const size_t nf_serve_page_len;

/* What the readers' kept feed inputs did (serve/readers.h); zeros when none are kept. */
void nf_query_readers_stats(nf_query_t *q, nf_readers_stats_t *s);

/* The read-events partition of user id (n bytes) among partitions, as the partitioner places
 * a record keyed by it (0 consistent_random: CRC-32 % partitions, 1 murmur2_random: (murmur2
 * & 0x7fffffff) % partitions, librdkafka's and Java's defaults). */
int32_t nf_query_partition(int partitioner, const char *user, size_t n, unsigned partitions);

/* NULL on out-of-memory. The options' pointers must outlive the query object. */
nf_query_t *nf_query_new(const nf_query_opts_t *o);
void nf_query_free(nf_query_t *q);

/* Answers GET /v1/ROUTE (route as the admin hook gets it): the HTTP status with a malloc'd JSON
 * body in *body (*len bytes), or 0 when route is none of the query API's (nothing written). */
int nf_query_handle(nf_query_t *q, const char *route, nf_admin_req_t *req, char **body,
                    size_t *len);

#endif
