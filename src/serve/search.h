/* search.h — full-text search over the articles of the last search.retention (docs/ARCHITECTURE.md
 * §4, "Search"; GET /v1/search, serve/query.h), on SQLite's FTS5 in one file beside the state
 * (<state.dir>/search.db).
 *
 * What it indexes, and when: a thread of its own follows the store's committed views. For each
 * new view it reads the search log (actors/serve_state.h, NF_KIND_SEARCH_LOG: every new
 * article, in the order its epoch was cut) from its cursor on, and indexes each article's
 * committed metadata (title and summary) and topic vector. So the index only ever holds
 * committed articles — an answer never shows one a crash could take back — and it is within
 * one poll (100 ms) of the latest committed view. The cursor is written with the rows, in the
 * same SQLite transaction: a restart goes on from it (no rebuild); the scan starts a minute
 * before the cursor and skips the articles it already has, so entries whose cut time is not in
 * order (a key group moving between processes with clocks apart) are not lost.
 *
 * Rebuilds (newsflow_search_rebuilds_total{reason}): the file is missing while the state has
 * articles ("missing"); SQLite finds it corrupt at open (PRAGMA quick_check) or later
 * ("corrupt": the file is removed and made again), or it was made by another version of the
 * layout (PRAGMA user_version: "version"); the committed state no longer has the
 * cursor's entry though it would not have expired — an older checkpoint was restored
 * ("behind"). A rebuild reads the whole search log: the articles of the state's last 7 days.
 * Once per index file, after its first pass over the log, the article state is read whole and
 * what the index lacks is added from its metadata: articles an earlier version ingested before
 * it wrote the search log have no entry there ("unlogged", counted when it found any; kv
 * "meta_filled" records the pass).
 *
 * Write failures (a full disk: SQLITE_FULL; I/O errors): the writer's transaction is rolled back
 * and its view read again from the committed cursor after a back-off (poll << n after the n-th
 * failure in a row, at most 60 s); the first failure of such a streak is logged at error level in
 * SQLite's words, then a reminder every 10 minutes while it lasts, and its end; each counts in
 * newsflow_search_write_errors_total. Searches go on answering from what the index holds.
 *
 * The rows: rowid = ~(published_ms << 12 | the row's length in tokens (below 127) << 5 | a
 * slot), so the newest row has the smallest rowid, FTS5 walks a query's matches newest first in
 * its own (ascending) order and filters `since` by rowid, and the ranking reads a row's length
 * from its rowid (no docsize look-up); columns
 * title, summary, topics ("t<index>" for each topic the vector names, searched only by the topic
 * filter) and the id (not indexed). The table's tokenizer (search_tok.h) is unicode61's
 * words plus each pair of adjacent words, colocated: a quoted phrase is looked up as its pairs
 * (as rare as the phrase), not as its words' rows compared position by position. A query
 * scans its newest scan_max matches, scores each relevance * (0.5 + 0.5 * exp(-hours since
 * published / 24)) — relevance is FTS5's bm25 with the title weighted 4 and the summary 1, computed
 * by nf_rank (search.c) from the vocabulary's document counts and the rowid's length — and keeps
 * the best.
 *
 * Bounds: articles ingested more than retention ago — the span the state keeps their
 * metadata for, which a rebuild reads — and the oldest beyond max_articles leave every 10 s;
 * SQLite's page caches are bounded (memory_mb in all); at most `readers` queries run at once (the
 * others wait up to a second, then 503); each reader keeps 4,096 terms' document counts (about
 * 600 KB), used again while the index has changed by at most 1 % (search.c). Metrics:
 * newsflow_search_*.
 *
 * Threads: start/stop from main; nf_search_run from any thread, concurrently. */
#ifndef NF_SEARCH_H
#define NF_SEARCH_H

#include "algo/idset.h"
#include "serve/search_query.h"
#include "state/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_SEARCH_SCAN_MAX 2000 /* matches a query scores, newest first (by default) */

typedef struct nf_search_opts {
    nf_store_t *store;
    const char *path;     /* the index file */
    int64_t retention_ms; /* by ingestion time */
    uint64_t max_articles;
    unsigned memory_mb; /* SQLite page caches, all connections together */
    unsigned readers;   /* connections for queries: queries at once */
    unsigned poll_ms;   /* how often the thread looks for a new view (0: 100) */
    unsigned scan_max;  /* matches a query scores, newest first (0: NF_SEARCH_SCAN_MAX) */
} nf_search_opts_t;

typedef struct nf_search nf_search_t;

/* Installs SQLite's allocator of the index (malloc with a lock-free count of what SQLite holds,
 * in place of SQLite's own count behind one process-wide mutex: search.c) unless SQLite was
 * initialized before; nf_search_start calls it. Whether the allocator is ours. */
bool nf_search_sqlite_init(void);

/* Bytes SQLite holds now, in the whole process (its page caches, statements). */
int64_t nf_search_memory_bytes(void);

/* Starts the indexing thread (which opens, checks and if need be rebuilds the file). NULL with
 * a message on failure (no memory, no thread). */
nf_search_t *nf_search_start(const nf_search_opts_t *o, char *err, size_t errlen);
void nf_search_stop(nf_search_t *s);

typedef struct nf_search_hit {
    nf_id128_t id;
    int64_t published_ms; /* as the index ranks it (serve_state.h nf_serve_published_ms) */
    double relevance, score;
    /* The title, and the summary's best fragment (at most ~24 words), as HTML: text escaped,
     * matched words in <mark></mark>. malloc'd. */
    char *title_html, *snippet_html;
} nf_search_hit_t;

typedef struct nf_search_result {
    uint64_t epoch;       /* the committed view the index reflects */
    int64_t committed_ms; /* when that view was published */
    uint64_t articles;    /* in the index */
    uint64_t matches;     /* matches scored (at most scan_max) */
    bool capped;          /* more matched than were scored */
    unsigned dropped;     /* terms left out: past the limits, or no token (search_query.h) */
    nf_search_hit_t *hits;
    size_t n;
} nf_search_result_t;

/* Whether a candidate is shown (the query API keeps one per story cluster, and only articles
 * whose metadata the committed view still has). Called best first until limit are kept. */
typedef bool (*nf_search_keep_fn)(void *arg, const nf_search_hit_t *h);

/* Searches q (topic: the index of the topic an article's vector must name, or -1; since_ms:
 * published at or after, 0 = any) for the best `limit` hits that keep() accepts, from the best
 * 4 * limit + 16 by score. 0 and *out (free with nf_search_result_free); -EAGAIN while the index
 * is not open yet (opening, rebuilding after corruption: say Retry-After), -EBUSY when every
 * connection stayed busy for a second, -EINVAL when no term of q has a token the index knows
 * how to search (a message for the reader in err), -EIO with a message (SQLite's) in err. */
int nf_search_run(nf_search_t *s, const nf_search_query_t *q, int topic, int64_t since_ms,
                  int64_t now_ms, unsigned limit, nf_search_keep_fn keep, void *arg,
                  nf_search_result_t *out, char *err, size_t errlen);
void nf_search_result_free(nf_search_result_t *r);

/* What the index holds now (tests, the page): articles, and the epoch of the last view read
 * (0 before the first). */
void nf_search_status(nf_search_t *s, uint64_t *articles, uint64_t *epoch);

/* Indexes one article without a view (benchmarks: a corpus not produced by a job; its
 * ingestion time is taken to be published_ms), in the
 * calling thread, which must be the only writer: call it before any view is published, or on a
 * search started with no store. Batched: nf_search_flush commits. 0, 1 (already there), < 0. */
int nf_search_add(nf_search_t *s, nf_id128_t id, const char *title, const char *summary,
                  int64_t published_ms, const uint32_t *topics, unsigned ntopics);
int nf_search_flush(nf_search_t *s);

#endif
