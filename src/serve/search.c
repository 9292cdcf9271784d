/* search.c — see search.h. One writer connection, owned by the indexing thread (and by
 * nf_search_add's caller under wmu); a pool of reader connections for queries (WAL: readers
 * never wait for the writer). */
#include "serve/search.h"

#include "actors/serve_state.h"
#include "algo/bytes.h"
#include "engine/interest.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "serve/search_tok.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* rowid = ~key, key = published_ms << 12 | tokens << 5 | slot: the newest row has the smallest
 * rowid, so FTS5 walks a query's matches newest first in its own order (ascending: walking a
 * doclist backwards costs it a forward pass over each page first, 6-12 % of the queries/s at
 * 1M articles); `tokens` is the row's length in tokens (all columns, as FTS5 counts it) when
 * below LEN_LOOKUP, which spares the ranking a look-up of FTS5's docsize per row; slot (from
 * the id) tells apart the articles of one millisecond and length: a slot taken tries the next,
 * then the next millisecond. */
#define ROWID_BITS   12
#define LEN_SHIFT    5
#define LEN_LOOKUP   127 /* the length is FTS5's to say (xColumnSize) */
#define SLOTS        32
#define KEY(rowid)   (~(sqlite3_int64)(rowid)) /* and back: ROWID(key) */
#define ROWID(key)   (~(sqlite3_int64)(key))
#define LOOKBACK_MS  60000
#define TX_ROWS      1000 /* rows per writer transaction */
#define EXPIRE_EVERY 10000
#define EXPIRE_BATCH 500
#define TITLE_W      4.0
#define SUMMARY_W    1.0
#define DECAY_H      24.0
/* Pages read through a memory map (the kernel's page cache) rather than copied into SQLite's
 * own cache: address space, not process memory. */
#define MMAP_BYTES  "4294967296"
#define MERGE_PAGES "400" /* FTS5 segment merging the thread does per poll (search.h) */
#define MARK_ON     '\x01'
#define MARK_OFF    '\x02'
/* After a failed write (a full disk: SQLITE_FULL; an I/O error) the writer waits poll << n ms
 * after its n-th failure in a row, at most this long, before it tries again; a streak of them
 * is logged once, then again every WRITE_REMIND_MS while it lasts. */
#define WRITE_BACKOFF_MAX_MS 60000
#define WRITE_REMIND_MS      600000

/* A term's document count, as the vocabulary gave it when the index had changed `at` times.
 * fts5vocab walks the term's whole posting list to count it (a common word: most of the
 * index), 22 % of a query's time at 1M articles; a count is used again while the index has
 * changed by at most 1 % of its articles since (exact below DF_EXACT_BELOW articles, where
 * counting is cheap). BM25's IDF moves by less than 1 % for such a change. */
#define DF_SLOTS       4096
#define DF_EXACT_BELOW 10000
typedef struct {
    uint64_t hash, at;
    int64_t df;
    int len; /* 0: empty */
    char tok[NF_SEARCH_PAIR_MAX];
} df_entry_t;

/* A row waiting for its transaction's commit: FTS5 starts a new segment whenever a rowid is
 * below the last one it was given, and articles come oldest first while rowids run newest
 * first, so each transaction's rows are inserted together, sorted. */
typedef struct pending {
    sqlite3_int64 key; /* the rowid's key (KEY) with slot 0 */
    int64_t ingested_ms;
    uint64_t slot_from; /* the id's low word: the first slot tried */
    unsigned char id[16];
    char *text; /* title \0 summary \0 topics \0 */
    size_t title_len, summary_len, topics_len;
} pending_t;

typedef struct reader {
    sqlite3 *db;
    sqlite3_stmt *scan, *ids, *snip, *vocab;
    fts5_tokenizer tok; /* the table's (search_tok.h), for the terms' document counts */
    Fts5Tokenizer *tokenizer;
    uint64_t changes, articles;  /* the index's, when the query began (under mu) */
    df_entry_t *df;              /* DF_SLOTS document counts looked up before */
    unsigned df_hits, df_misses; /* this query's, for the metric */
    nf_search_query_t mq;        /* a query's terms with its phrases marked for the scan */
    char marked[sizeof((nf_search_query_t *)0)->buf + 2 * NF_SEARCH_TERMS_MAX + 2];
    char smatch[NF_SEARCH_MATCH_MAX]; /* the scan's expression */
    struct reader *next;
} reader_t;

struct nf_search {
    nf_search_opts_t o;
    pthread_t th;
    bool started;

    pthread_mutex_t mu; /* below, to the writer's part */
    pthread_cond_t cv;
    bool stop, ready, corrupt;
    reader_t *idle;
    unsigned open_readers, busy;
    uint64_t epoch, articles;
    uint64_t changes; /* rows indexed + removed, ever: how far cached document counts are off */
    int64_t committed_ms;

    /* The writer: the thread's (nf_search_add: the caller's), under wmu. */
    pthread_mutex_t wmu;
    sqlite3 *w;
    sqlite3_stmt *has, *ins, *ins_id, *put_kv, *oldest, *del_id, *del_doc;
    fts5_tokenizer wtok; /* the table's tokenizer: a row's length for its rowid */
    Fts5Tokenizer *wtokenizer;
    bool in_tx, fresh, checked;
    unsigned tx_rows;
    pending_t *pending; /* the transaction's rows, inserted newest first at its commit */
    size_t npending;
    unsigned char cursor[NF_SERVE_SEARCH_KEY_LEN];
    bool has_cursor;
    /* The article state was read whole into the index once (kv "meta_filled", written with
     * the rows): articles an earlier version ingested before it wrote the search log have no
     * entry there, and only that pass finds them (fill_from_meta). */
    bool meta_filled;
    int64_t last_expire;
    int64_t started_ms;
    /* The first failure of the writer's last call (keep_err), as SQLite told it before anything
     * else ran on the connection: "" when none. */
    char werr[256];

    nf_counter_t m_indexed, m_expired, m_missing, m_queries, m_errors, m_busy, m_write_errors;
    nf_counter_t m_df_hit, m_df_miss;
    nf_counter_t m_rebuild_missing, m_rebuild_corrupt, m_rebuild_behind, m_rebuild_version,
        m_rebuild_unlogged;
    nf_gauge_t m_articles, m_disk, m_behind;
    nf_histogram_t m_freshness;
    nf_histogram_t m_latency;
};

static void chosen_fn(sqlite3_context *ctx, int n, sqlite3_value **v);

#define SCHEMA_VERSION 4 /* PRAGMA user_version: the layout below, the rowid's, the tokenizer's */
#define STR_(x)        #x
#define STR(x)         STR_(x)
static const char SCHEMA[] = "PRAGMA user_version = " STR(
    SCHEMA_VERSION) ";"
                    "CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
                    "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(title, summary, topics, id "
                    "UNINDEXED,"
                    " tokenize = '" NF_SEARCH_TOKENIZER "');"
                    "CREATE TABLE IF NOT EXISTS ids(id BLOB PRIMARY KEY, doc INTEGER NOT NULL,"
                    " ingested INTEGER NOT NULL) WITHOUT ROWID;"
                    "CREATE INDEX IF NOT EXISTS ids_ingested ON ids(ingested);";

/* ---------------------------------------------------------------------------- allocator */

/* SQLite counts the memory it holds by default (SQLITE_CONFIG_MEMSTATUS) under one mutex of the
 * process, taken around every allocation: with two query threads and the writer, waiting on it
 * cost 16-30 % of the queries per second at 1M articles (perf/README, "Search"). This allocator
 * is malloc with the count kept in an atomic instead, so newsflow_search_memory_bytes stays
 * true without the lock. */
static _Atomic int64_t sql_bytes;
static bool sql_ours;
static pthread_once_t sql_once = PTHREAD_ONCE_INIT;

static void *sql_malloc(int n)
{
    void *p = malloc((size_t)n);
    if (p)
        atomic_fetch_add_explicit(&sql_bytes, (int64_t)malloc_usable_size(p), memory_order_relaxed);
    return p;
}

static void sql_free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub_explicit(&sql_bytes, (int64_t)malloc_usable_size(p), memory_order_relaxed);
    free(p);
}

static void *sql_realloc(void *p, int n) /* SQLite: p != NULL, n > 0 */
{
    int64_t before = (int64_t)malloc_usable_size(p);
    void *q = realloc(p, (size_t)n);
    if (q)
        atomic_fetch_add_explicit(&sql_bytes, (int64_t)malloc_usable_size(q) - before,
                                  memory_order_relaxed);
    return q;
}

static int sql_size(void *p)
{
    return p ? (int)malloc_usable_size(p) : 0;
}

static int sql_roundup(int n)
{
    return (n + 7) & ~7;
}

static int sql_init(void *arg)
{
    (void)arg;
    return SQLITE_OK;
}

static void sql_shutdown(void *arg)
{
    (void)arg;
}

static void sql_setup(void)
{
    static const sqlite3_mem_methods m = {sql_malloc,  sql_free, sql_realloc,  sql_size,
                                          sql_roundup, sql_init, sql_shutdown, NULL};
    /* Refused (SQLITE_MISUSE) once SQLite is initialized: then its own allocator and count. */
    sql_ours = sqlite3_config(SQLITE_CONFIG_MALLOC, &m) == SQLITE_OK &&
               sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
}

bool nf_search_sqlite_init(void)
{
    pthread_once(&sql_once, sql_setup);
    return sql_ours;
}

int64_t nf_search_memory_bytes(void)
{
    nf_search_sqlite_init();
    return sql_ours ? atomic_load_explicit(&sql_bytes, memory_order_relaxed)
                    : (int64_t)sqlite3_memory_used();
}

static bool is_corrupt(int rc)
{
    rc &= 0xFF;
    return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

static void sql_err(sqlite3 *db, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "search index %s: %s", what, db ? sqlite3_errmsg(db) : "no connection");
}

/* ------------------------------------------------------------------------------ writer */

static int exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Keeps rc's message (SQLite's, for the last call on the writer) unless one is kept already: a
 * ROLLBACK after a failed COMMIT says only "cannot rollback - no transaction is active" when
 * SQLite has rolled back by itself (it does on SQLITE_FULL). */
static void keep_err(nf_search_t *s, int rc)
{
    if (rc == SQLITE_OK || s->werr[0])
        return;
    const char *msg = s->w ? sqlite3_errmsg(s->w) : "no connection";
    int code = s->w ? sqlite3_extended_errcode(s->w) : rc;
    if (strcmp(msg, sqlite3_errstr(rc)) != 0) /* a message of its own: the code's words too */
        snprintf(s->werr, sizeof s->werr, "%s (%s, SQLite code %d)", msg, sqlite3_errstr(rc), code);
    else
        snprintf(s->werr, sizeof s->werr, "%s (SQLite code %d)", msg, code);
}

/* Ends the open transaction, if SQLite has not ended it itself. */
static void rollback(nf_search_t *s)
{
    if (s->w && !sqlite3_get_autocommit(s->w))
        exec(s->w, "ROLLBACK");
    s->in_tx = false;
}

static int insert_pending(nf_search_t *s);

static void drop_pending(nf_search_t *s)
{
    for (size_t i = 0; i < s->npending; i++)
        free(s->pending[i].text);
    s->npending = 0;
}

static void close_writer(nf_search_t *s)
{
    sqlite3_stmt **st[] = {&s->has,    &s->ins,    &s->ins_id, &s->put_kv,
                           &s->oldest, &s->del_id, &s->del_doc};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        sqlite3_finalize(*st[i]);
        *st[i] = NULL;
    }
    if (s->wtokenizer)
        s->wtok.xDelete(s->wtokenizer);
    s->wtokenizer = NULL;
    sqlite3_close(s->w);
    s->w = NULL;
    s->in_tx = false;
    s->tx_rows = 0;
    drop_pending(s);
    free(s->pending);
    s->pending = NULL;
}

static int kv_put(nf_search_t *s, const char *k, const void *blob, size_t n, int64_t num)
{
    sqlite3_bind_text(s->put_kv, 1, k, -1, SQLITE_STATIC);
    if (blob)
        sqlite3_bind_blob(s->put_kv, 2, blob, (int)n, SQLITE_TRANSIENT);
    else
        sqlite3_bind_int64(s->put_kv, 2, num);
    int rc = sqlite3_step(s->put_kv);
    sqlite3_reset(s->put_kv);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int64_t count_rows(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int64_t n = 0;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM ids", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* The cursor and the epoch from kv. */
static int load_kv(nf_search_t *s)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->w, "SELECT k, v FROM kv", -1, &st, NULL);
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        if ((rc = sqlite3_step(st)) != SQLITE_ROW)
            break;
        const char *k = (const char *)sqlite3_column_text(st, 0);
        if (k && strcmp(k, "cursor") == 0 &&
            sqlite3_column_bytes(st, 1) == NF_SERVE_SEARCH_KEY_LEN) {
            memcpy(s->cursor, sqlite3_column_blob(st, 1), NF_SERVE_SEARCH_KEY_LEN);
            s->has_cursor = true;
        } else if (k && strcmp(k, "epoch") == 0) {
            pthread_mutex_lock(&s->mu);
            s->epoch = (uint64_t)sqlite3_column_int64(st, 1);
            pthread_mutex_unlock(&s->mu);
        } else if (k && strcmp(k, "meta_filled") == 0) {
            s->meta_filled = sqlite3_column_int64(st, 1) == 1;
        } else if (k && strcmp(k, "committed_ms") == 0) {
            pthread_mutex_lock(&s->mu);
            s->committed_ms = sqlite3_column_int64(st, 1);
            pthread_mutex_unlock(&s->mu);
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Opens the file (creating it), checks it when it existed, makes the schema: SQLITE_OK, or
 * the failing code (a corrupt file: is_corrupt, or quick_check's verdict as SQLITE_CORRUPT). */
static int open_writer(nf_search_t *s, char *err, size_t errlen)
{
    struct stat sb;
    bool existed = stat(s->o.path, &sb) == 0 && sb.st_size > 0;
    int rc = sqlite3_open_v2(
        s->o.path, &s->w, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = nf_search_tokenizer_register(s->w);
    char pragmas[160];
    snprintf(pragmas, sizeof pragmas,
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-%u;"
             " PRAGMA busy_timeout=5000; PRAGMA mmap_size=" MMAP_BYTES ";",
             (s->o.memory_mb ? s->o.memory_mb : 2) * 1024 / 2);
    if (rc == SQLITE_OK)
        rc = exec(s->w, pragmas);
    if (rc == SQLITE_OK && existed) {
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(s->w, "PRAGMA quick_check", -1, &st, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(st);
            const char *v = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
            if (rc == SQLITE_ROW)
                rc = v && strcmp(v, "ok") == 0 ? SQLITE_OK : SQLITE_CORRUPT;
            if (rc == SQLITE_CORRUPT)
                snprintf(err, errlen, "search index %s: quick_check: %s", s->o.path,
                         v ? v : "no verdict");
        }
        sqlite3_finalize(st);
    }
    if (rc == SQLITE_OK && existed) { /* a file of another layout is rebuilt, not misread */
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(s->w, "PRAGMA user_version", -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
            rc = sqlite3_column_int(st, 0) == SCHEMA_VERSION ? SQLITE_OK : SQLITE_FORMAT;
        sqlite3_finalize(st);
        if (rc == SQLITE_FORMAT)
            snprintf(err, errlen, "search index %s: made by another version of newsflow",
                     s->o.path);
    }
    if (rc == SQLITE_OK)
        rc = exec(s->w, SCHEMA);
    struct {
        sqlite3_stmt **st;
        const char *sql;
    } prep[] = {
        {&s->has, "SELECT 1 FROM ids WHERE id = ?1"},
        {&s->ins, "INSERT INTO fts(rowid, title, summary, topics, id) VALUES (?1, ?2, ?3, ?4, ?5)"},
        {&s->ins_id, "INSERT INTO ids(id, doc, ingested) VALUES (?1, ?2, ?3)"},
        {&s->put_kv, "INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)"},
        {&s->oldest, "SELECT doc, id FROM ids WHERE ingested < ?1 ORDER BY ingested LIMIT ?2"},
        {&s->del_id, "DELETE FROM ids WHERE id = ?1"},
        {&s->del_doc, "DELETE FROM fts WHERE rowid = ?1"},
    };
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof prep / sizeof prep[0]; i++)
        rc = sqlite3_prepare_v2(s->w, prep[i].sql, -1, prep[i].st, NULL);
    if (rc == SQLITE_OK)
        rc = load_kv(s);
    if (rc == SQLITE_OK)
        rc = nf_search_tokenizer_open(s->w, &s->wtok, &s->wtokenizer);
    if (rc != SQLITE_OK) {
        if ((rc != SQLITE_CORRUPT && rc != SQLITE_FORMAT) || !err[0])
            sql_err(s->w, s->o.path, err, errlen);
        close_writer(s);
        return rc;
    }
    s->fresh = !existed;
    s->checked = false;
    pthread_mutex_lock(&s->mu);
    s->articles = (uint64_t)count_rows(s->w);
    s->changes++; /* another file, perhaps: counts cached before are not this one's */
    pthread_mutex_unlock(&s->mu);
    nf_gauge_set(s->m_articles, (int64_t)s->articles);
    return SQLITE_OK;
}

static void remove_files(const char *path)
{
    static const char *const ext[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s%s", path, ext[i]);
        unlink(p);
    }
}

/* Opens the index; a corrupt one is removed and made again (a rebuild). 0 or -EIO. */
static int open_index(nf_search_t *s)
{
    char err[512] = "";
    int rc = open_writer(s, err, sizeof err);
    if (rc == SQLITE_OK)
        return 0;
    if (is_corrupt(rc) || rc == SQLITE_FORMAT) {
        nf_log(NF_LOG_WARN, "search",
               rc == SQLITE_FORMAT
                   ? "the search index was made by another version: removing it and rebuilding"
                   : "the search index is corrupt: removing it and rebuilding",
               NF_LS("path", s->o.path), NF_LS("error", err), NF_LEND);
        nf_counter_inc(rc == SQLITE_FORMAT ? s->m_rebuild_version : s->m_rebuild_corrupt);
        remove_files(s->o.path);
        err[0] = '\0';
        if ((rc = open_writer(s, err, sizeof err)) == SQLITE_OK) {
            s->fresh = false; /* counted as corrupt, not missing */
            return 0;
        }
    }
    nf_log(NF_LOG_ERROR, "search", "the search index cannot be opened: search answers 503",
           NF_LS("path", s->o.path), NF_LS("error", err), NF_LEND);
    return -EIO;
}

static int begin(nf_search_t *s)
{
    if (s->in_tx)
        return SQLITE_OK;
    int rc = exec(s->w, "BEGIN");
    s->in_tx = rc == SQLITE_OK;
    s->tx_rows = 0;
    return rc;
}

/* Commits the open transaction as the index of `epoch` (committed at committed_ms). */
static int commit_as(nf_search_t *s, uint64_t epoch, int64_t committed_ms)
{
    if (!s->in_tx)
        return SQLITE_OK;
    int rc = insert_pending(s);
    if (rc == SQLITE_OK && s->has_cursor)
        rc = kv_put(s, "cursor", s->cursor, sizeof s->cursor, 0);
    if (rc == SQLITE_OK)
        rc = kv_put(s, "epoch", NULL, 0, (int64_t)epoch);
    if (rc == SQLITE_OK)
        rc = kv_put(s, "committed_ms", NULL, 0, committed_ms);
    rc = rc == SQLITE_OK ? exec(s->w, "COMMIT") : rc;
    if (rc != SQLITE_OK) {
        keep_err(s, rc);
        rollback(s);
    }
    s->in_tx = false;
    drop_pending(s);
    return rc;
}

static int commit(nf_search_t *s)
{
    return commit_as(s, s->epoch, s->committed_ms);
}

/* text without the highlight markers' bytes (a feed's text could hold them), in buf. */
static const char *clean(const char *text, char **buf)
{
    if (!text || (!strchr(text, MARK_ON) && !strchr(text, MARK_OFF)))
        return text ? text : "";
    size_t n = strlen(text), j = 0;
    if (!(*buf = malloc(n + 1)))
        return "";
    for (size_t i = 0; i < n; i++)
        if (text[i] != MARK_ON && text[i] != MARK_OFF)
            (*buf)[j++] = text[i];
    (*buf)[j] = '\0';
    return *buf;
}

/* An id as 16 big-endian bytes (the index's id column; the tail of a kstate key). */
static void id_bytes(nf_id128_t id, unsigned char out[16])
{
    nf_put_be64(out, id.hi);
    nf_put_be64(out + 8, id.lo);
}

static nf_id128_t id_of(const unsigned char *b)
{
    return (nf_id128_t){nf_get_be64(b), nf_get_be64(b + 8)};
}

static int count_token(void *arg, int flags, const char *tok, int n, int start, int end)
{
    (void)tok, (void)n, (void)start, (void)end;
    if (!(flags & FTS5_TOKEN_COLOCATED)) /* a word pair: FTS5 does not count it either */
        (*(int *)arg)++;
    return SQLITE_OK;
}

/* Queues one article for the open transaction (inserted at its commit: insert_pending): 0
 * queued, 1 already there, 2 too old, or an SQLite error code (negated). */
static int insert_doc(nf_search_t *s, nf_id128_t id, const char *title, const char *summary,
                      int64_t published_ms, int64_t ingested_ms, const uint32_t *topics,
                      unsigned ntopics, int64_t now)
{
    unsigned char idb[16];
    id_bytes(id, idb);
    sqlite3_bind_blob(s->has, 1, idb, 16, SQLITE_STATIC);
    int rc = sqlite3_step(s->has);
    sqlite3_reset(s->has);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc != SQLITE_DONE)
        return -rc;
    if (ingested_ms < now - s->o.retention_ms || published_ms < 0)
        return 2;
    char tbuf[NF_TOPICS_MAX * 5 + 1];
    size_t tl = 0;
    tbuf[0] = '\0';
    for (unsigned i = 0; i < ntopics && i < NF_TOPICS_MAX; i++)
        tl += (size_t)snprintf(tbuf + tl, sizeof tbuf - tl, "%st%u", tl ? " " : "", topics[i]);
    char *tb = NULL, *sb = NULL;
    const char *t = clean(title, &tb), *sm = clean(summary, &sb);
    int tokens = 0;
    const char *cols[3] = {t, sm, tbuf};
    for (int c = 0; c < 3 && s->wtokenizer; c++)
        s->wtok.xTokenize(s->wtokenizer, &tokens, FTS5_TOKENIZE_DOCUMENT, cols[c],
                          (int)strlen(cols[c]), count_token);
    sqlite3_int64 len = s->wtokenizer && tokens < LEN_LOOKUP ? tokens : LEN_LOOKUP;
    size_t n1 = strlen(t), n2 = strlen(sm);
    rc = s->npending == TX_ROWS ? insert_pending(s) : SQLITE_OK; /* callers commit before */
    if (!s->pending)
        s->pending = malloc(TX_ROWS * sizeof *s->pending);
    pending_t *p = rc == SQLITE_OK && s->pending ? &s->pending[s->npending] : NULL;
    char *text = p ? malloc(n1 + n2 + tl + 3) : NULL;
    if (text) {
        memcpy(text, t, n1 + 1);
        memcpy(text + n1 + 1, sm, n2 + 1);
        memcpy(text + n1 + n2 + 2, tbuf, tl + 1);
        *p = (pending_t){.key = (sqlite3_int64)published_ms << ROWID_BITS | len << LEN_SHIFT,
                         .ingested_ms = ingested_ms,
                         .slot_from = id.lo,
                         .text = text,
                         .title_len = n1,
                         .summary_len = n2,
                         .topics_len = tl};
        memcpy(p->id, idb, 16);
        s->npending++;
    }
    free(tb);
    free(sb);
    return text ? 0 : rc != SQLITE_OK ? -rc : -SQLITE_NOMEM;
}

static int newest_first(const void *a, const void *b)
{
    const pending_t *x = a, *y = b;
    return (x->key < y->key) - (x->key > y->key);
}

/* The transaction's queued rows, newest first (ascending rowids: one FTS5 segment). SQLite
 * code. */
static int insert_pending(nf_search_t *s)
{
    if (s->npending > 1)
        qsort(s->pending, s->npending, sizeof *s->pending, newest_first);
    int rc = SQLITE_DONE;
    for (size_t i = 0; i < s->npending && rc == SQLITE_DONE; i++) {
        const pending_t *p = &s->pending[i];
        sqlite3_bind_blob(s->has, 1, p->id, 16, SQLITE_STATIC);
        rc = sqlite3_step(s->has); /* the same article twice in one transaction */
        sqlite3_reset(s->has);
        if (rc == SQLITE_ROW) {
            rc = SQLITE_DONE;
            continue;
        }
        if (rc != SQLITE_DONE)
            break;
        sqlite3_int64 rowid = 0;
        for (int tries = 0; tries < 4096; tries++) {
            rowid = ROWID(p->key + ((sqlite3_int64)(tries / SLOTS) << ROWID_BITS) +
                          (sqlite3_int64)((p->slot_from + (uint64_t)tries) % SLOTS));
            sqlite3_bind_int64(s->ins, 1, rowid);
            sqlite3_bind_text(s->ins, 2, p->text, (int)p->title_len, SQLITE_STATIC);
            sqlite3_bind_text(s->ins, 3, p->text + p->title_len + 1, (int)p->summary_len,
                              SQLITE_STATIC);
            sqlite3_bind_text(s->ins, 4, p->text + p->title_len + p->summary_len + 2,
                              (int)p->topics_len, SQLITE_STATIC);
            sqlite3_bind_blob(s->ins, 5, p->id, 16, SQLITE_STATIC);
            rc = sqlite3_step(s->ins);
            sqlite3_reset(s->ins);
            if ((rc & 0xFF) != SQLITE_CONSTRAINT)
                break; /* a rowid taken: the next slot */
        }
        if (rc != SQLITE_DONE)
            break;
        sqlite3_bind_blob(s->ins_id, 1, p->id, 16, SQLITE_STATIC);
        sqlite3_bind_int64(s->ins_id, 2, rowid);
        sqlite3_bind_int64(s->ins_id, 3, p->ingested_ms);
        rc = sqlite3_step(s->ins_id);
        sqlite3_reset(s->ins_id);
        if (rc != SQLITE_DONE)
            break;
        pthread_mutex_lock(&s->mu);
        s->articles++;
        s->changes++;
        pthread_mutex_unlock(&s->mu);
        nf_counter_inc(s->m_indexed);
    }
    drop_pending(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Deletes up to EXPIRE_BATCH articles ingested before `below` (oldest first), at most `max`: the
 * rows * deleted, or a negated SQLite code. */
static int64_t delete_oldest(nf_search_t *s, sqlite3_int64 below, int64_t max)
{
    sqlite3_bind_int64(s->oldest, 1, below);
    sqlite3_bind_int64(s->oldest, 2, max < EXPIRE_BATCH ? max : EXPIRE_BATCH);
    sqlite3_int64 rows[EXPIRE_BATCH];
    unsigned char ids[EXPIRE_BATCH][16];
    int n = 0, rc;
    while ((rc = sqlite3_step(s->oldest)) == SQLITE_ROW && n < EXPIRE_BATCH) {
        rows[n] = sqlite3_column_int64(s->oldest, 0);
        const void *b = sqlite3_column_blob(s->oldest, 1);
        memset(ids[n], 0, 16);
        if (b && sqlite3_column_bytes(s->oldest, 1) == 16)
            memcpy(ids[n], b, 16);
        n++;
    }
    sqlite3_reset(s->oldest);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return -rc;
    for (int i = 0; i < n; i++) {
        sqlite3_bind_blob(s->del_id, 1, ids[i], 16, SQLITE_STATIC);
        rc = sqlite3_step(s->del_id);
        sqlite3_reset(s->del_id);
        if (rc == SQLITE_DONE) {
            sqlite3_bind_int64(s->del_doc, 1, rows[i]);
            rc = sqlite3_step(s->del_doc);
            sqlite3_reset(s->del_doc);
        }
        if (rc != SQLITE_DONE)
            return -rc;
    }
    pthread_mutex_lock(&s->mu);
    s->articles -= (uint64_t)n <= s->articles ? (uint64_t)n : s->articles;
    s->changes += (uint64_t)n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Drops what is past retention, then the oldest beyond max_articles. SQLite code. */
static int expire(nf_search_t *s, int64_t now)
{
    sqlite3_int64 below = now - s->o.retention_ms;
    for (;;) {
        int rc = begin(s);
        int64_t n = rc == SQLITE_OK ? delete_oldest(s, below, EXPIRE_BATCH) : -rc;
        if (n < 0 || (rc = commit(s)) != SQLITE_OK)
            return n < 0 ? (int)-n : rc;
        nf_counter_add(s->m_expired, (uint64_t)n);
        if (n < EXPIRE_BATCH)
            break;
    }
    while (s->o.max_articles && s->articles > s->o.max_articles) {
        int rc = begin(s);
        int64_t over = (int64_t)(s->articles - s->o.max_articles);
        int64_t n = rc == SQLITE_OK ? delete_oldest(s, INT64_MAX, over) : -rc;
        if (n < 0 || (rc = commit(s)) != SQLITE_OK)
            return n < 0 ? (int)-n : rc;
        nf_counter_add(s->m_expired, (uint64_t)n);
        if (n == 0)
            break;
    }
    nf_gauge_set(s->m_articles, (int64_t)s->articles);
    return SQLITE_OK;
}

/* ---------------------------------------------------------------------- following views */

typedef struct {
    nf_search_t *s;
    nf_store_view_t *v;
    int64_t now;
    int rc;           /* the first SQLite failure */
    uint64_t entries; /* log entries read past the cursor */
    uint64_t added;   /* articles index_entry added (not in the index yet, within retention) */
    bool older;       /* one was cut before this process started */
    struct {          /* the added articles' cut times (the search freshness SLO's samples), */
        int64_t cut;  /* in log order: an epoch's share one; past 32 cuts, the rest count */
        uint64_t n;   /* with the last (their lag over-stated by at most the passes' spread) */
    } cuts[32];
    unsigned ncuts;
} pass_t;

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* One article into the index: its committed metadata and topics. val (len bytes) is its
 * metadata's value when the caller read it already (a scan of the article state); NULL: read
 * here (a search log entry names only the key). */
static int index_entry(pass_t *p, const unsigned char meta_key[NF_SERVE_META_KEY_LEN],
                       const void *val, size_t len)
{
    nf_search_t *s = p->s;
    char err[256];
    void *got = NULL;
    int r = 1;
    if (!val) {
        r = nf_store_view_get(p->v, NF_KIND_ARTICLE_META, meta_key, NF_SERVE_META_KEY_LEN, &got,
                              &len, err, sizeof err);
        if (r < 0) {
            nf_log(NF_LOG_WARN, "search", "an article's metadata cannot be read; not indexed",
                   NF_LS("error", err), NF_LEND);
            nf_counter_inc(s->m_missing);
            return 0;
        }
        val = got;
    }
    cJSON *meta = r == 1 && len > 8 ? cJSON_ParseWithLength((const char *)val + 8, len - 8) : NULL;
    free(got);
    if (!meta) { /* expired (TTL) or not what serve_state writes */
        nf_counter_inc(s->m_missing);
        return 0;
    }
    int64_t published, ingested;
    nf_serve_meta_times(meta, p->now, &published, &ingested);
    nf_topic_vec_t vec = {0};
    uint32_t topics[NF_TOPICS_MAX];
    unsigned nt = 0;
    void *tv = NULL;
    size_t tl = 0;
    if (nf_store_view_get(p->v, NF_KIND_ARTICLE_TOPICS, meta_key, NF_SERVE_META_KEY_LEN, &tv, &tl,
                          err, sizeof err) == 1 &&
        tl > 8 && nf_interest_topics_decode((unsigned char *)tv + 8, tl - 8, &vec) == 0) {
        for (uint32_t i = 0; i < vec.n; i++)
            if (vec.t[i].weight > 0)
                topics[nt++] = vec.t[i].topic;
    }
    free(tv);
    int rc = insert_doc(s, id_of(meta_key + 2), jstr(meta, "title"), jstr(meta, "summary"),
                        published, ingested, topics, nt, p->now);
    p->added += rc == 0;
    cJSON_Delete(meta);
    return rc < 0 ? -rc : SQLITE_OK;
}

/* index_entry within the writer's transaction (committed every TX_ROWS rows), for a scan's
 * callback: 0 to go on, 1 to stop (a SQLite failure in p->rc, or the thread is stopping). */
static int index_in_tx(pass_t *p, const unsigned char meta_key[NF_SERVE_META_KEY_LEN],
                       const void *val, size_t len)
{
    nf_search_t *s = p->s;
    int rc = begin(s);
    if (rc == SQLITE_OK)
        rc = index_entry(p, meta_key, val, len);
    if (rc == SQLITE_OK && ++s->tx_rows >= TX_ROWS)
        rc = commit(s);
    if (rc != SQLITE_OK) {
        p->rc = rc;
        return 1;
    }
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop ? 1 : 0;
}

static int log_cb(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
    pass_t *p = arg;
    nf_search_t *s = p->s;
    int64_t cut, expires;
    unsigned char meta_key[NF_SERVE_META_KEY_LEN];
    if (nf_serve_search_decode(k, kl, v, vl, &cut, meta_key, &expires) != 0)
        return 0;
    if (!s->has_cursor || memcmp(k, s->cursor, NF_SERVE_SEARCH_KEY_LEN) > 0) {
        memcpy(s->cursor, k, NF_SERVE_SEARCH_KEY_LEN);
        s->has_cursor = true;
        p->entries++;
        p->older |= cut < s->started_ms;
    }
    if (expires != 0 && expires < p->now)
        return 0;
    uint64_t added = p->added;
    int rc = index_in_tx(p, meta_key, NULL, 0);
    if (p->added != added) {
        if (p->ncuts && (p->cuts[p->ncuts - 1].cut == cut || p->ncuts == 32)) {
            p->cuts[p->ncuts - 1].n++;
        } else {
            p->cuts[p->ncuts].cut = cut;
            p->cuts[p->ncuts++].n = 1;
        }
    }
    return rc;
}

/* One article of the article state (fill_from_meta): indexed unless the index has it, from the
 * value the scan read. */
static int meta_cb(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
    return kl == NF_SERVE_META_KEY_LEN ? index_in_tx(arg, k, v, vl) : 0;
}

/* Once per index (after its first pass over the log): every article of the state within the
 * retention that the index lacks (one an earlier version ingested before it wrote the search
 * log) is indexed from its metadata; "meta_filled" goes into kv with the view's commit. A
 * scan of the article state (the retention's articles, about 1 KB each): once per file. */
static int fill_from_meta(nf_search_t *s, nf_store_view_t *v, int64_t now)
{
    pass_t p = {.s = s, .v = v, .now = now};
    /* the log pass's rows first: the index's own look-up (has) sees committed rows only */
    int rc = commit(s);
    if (rc != SQLITE_OK)
        return rc;
    int r = nf_store_view_scan_prefix(v, NF_KIND_ARTICLE_META, NULL, 0, meta_cb, &p);
    if (p.rc != SQLITE_OK)
        return p.rc;
    if (r != 0) { /* unreadable, or cut short by a stop: not done, so not recorded as done */
        if (r < 0)
            nf_log(NF_LOG_WARN, "search",
                   "the article state cannot be read whole; looking for unlogged articles again "
                   "at the next view",
                   NF_LI("errno", -r), NF_LEND);
        return SQLITE_OK;
    }
    if (p.added) {
        nf_counter_inc(s->m_rebuild_unlogged);
        nf_log(NF_LOG_WARN, "search",
               "articles of the state missing from the search log (ingested by an earlier "
               "version): indexed from their metadata",
               NF_LI("articles", (int64_t)p.added), NF_LEND);
    }
    rc = begin(s);
    rc = rc == SQLITE_OK ? kv_put(s, "meta_filled", NULL, 0, 1) : rc;
    if (rc == SQLITE_OK)
        s->meta_filled = true; /* committed with the view (follow); a failure reloads kv */
    return rc;
}

/* When the cursor's entry was cut (its key's time). */
static int64_t cursor_cut(const nf_search_t *s)
{
    int64_t cut = 0, expires;
    unsigned char mk[NF_SERVE_META_KEY_LEN];
    nf_serve_search_decode(s->cursor, sizeof s->cursor, "\0\0\0\0\0\0\0\0", 8, &cut, mk, &expires);
    return cut;
}

/* Clears the index (the state went back: an older checkpoint). SQLite code. */
static int clear(nf_search_t *s)
{
    int rc = begin(s);
    drop_pending(s);
    if (rc == SQLITE_OK)
        rc = exec(s->w, "DELETE FROM fts; DELETE FROM ids; DELETE FROM kv;");
    s->has_cursor = false;
    s->meta_filled = false;
    rc = rc == SQLITE_OK ? commit(s) : rc;
    pthread_mutex_lock(&s->mu);
    s->changes += s->articles + 1;
    s->articles = 0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The first view after opening: whether the state still has the cursor's entry (it has unless
 * the entry expired or an older checkpoint was restored). */
static int check_cursor(nf_search_t *s, nf_store_view_t *v, int64_t now)
{
    s->checked = true;
    if (!s->has_cursor)
        return SQLITE_OK;
    void *val = NULL;
    size_t len = 0;
    char err[256];
    int r = nf_store_view_get(v, NF_KIND_SEARCH_LOG, s->cursor, sizeof s->cursor, &val, &len, err,
                              sizeof err);
    free(val);
    if (r != 0)
        return SQLITE_OK; /* there (or unreadable: the next start looks again) */
    int64_t cut = cursor_cut(s);
    if (cut + s->o.retention_ms < now)
        return SQLITE_OK; /* gone by age */
    nf_log(NF_LOG_WARN, "search",
           "the committed state does not have the search index's last article (an older "
           "checkpoint was restored): rebuilding the index from the state",
           NF_LI("cursor_cut_ms", cut), NF_LEND);
    nf_counter_inc(s->m_rebuild_behind);
    return clear(s);
}

/* The search freshness SLO's samples: the pass's articles searchable now, each from its own
 * epoch's cut (a little before its commit: the lag is never under-stated, and an index that fell
 * behind several epochs shows it). Not for a rebuild's old articles. */
static void observe_freshness(nf_search_t *s, const pass_t *p)
{
    int64_t now = nf_wall_ms();
    for (unsigned c = 0; c < p->ncuts; c++) {
        int64_t lag = now - p->cuts[c].cut;
        for (uint64_t i = 0; i < p->cuts[c].n; i++)
            nf_histogram_observe(s->m_freshness, lag > 0 ? (double)lag / 1000 : 0);
    }
}

static int follow(nf_search_t *s, nf_store_view_t *v)
{
    pass_t p = {.s = s, .v = v, .now = nf_wall_ms()};
    int rc = s->checked ? SQLITE_OK : check_cursor(s, v, p.now);
    if (rc != SQLITE_OK)
        return rc;
    bool was_empty = !s->has_cursor;
    unsigned char prefix[NF_SERVE_SEARCH_PREFIX], from[NF_SERVE_SEARCH_KEY_LEN];
    nf_serve_search_prefix(prefix);
    size_t flen = 0;
    if (s->has_cursor) {
        static const unsigned char first[NF_SERVE_META_KEY_LEN]; /* the least meta key */
        int64_t cut = cursor_cut(s);
        nf_serve_search_key(cut > LOOKBACK_MS ? cut - LOOKBACK_MS : 0, first, from);
        flen = sizeof from;
    }
    int r = nf_store_view_scan_from(v, NF_KIND_SEARCH_LOG, prefix, sizeof prefix, from, flen,
                                    log_cb, &p);
    if (p.rc != SQLITE_OK)
        return p.rc;
    if (r < 0)
        nf_log(NF_LOG_WARN, "search", "the search log cannot be read; retrying at the next view",
               NF_LI("errno", -r), NF_LEND);
    if (s->fresh && was_empty && p.older) { /* not a new job's first articles */
        nf_counter_inc(s->m_rebuild_missing);
        nf_log(NF_LOG_WARN, "search",
               "the search index was missing: rebuilt from the state's search log",
               NF_LS("path", s->o.path), NF_LI("articles", (int64_t)s->articles), NF_LEND);
    }
    s->fresh = false;
    if (!s->meta_filled && (rc = fill_from_meta(s, v, p.now)) != SQLITE_OK)
        return rc;
    /* The view's articles are committed to the index before the view's epoch is published:
     * an answer that says it reflects an epoch has all of that epoch's articles. */
    uint64_t epoch = r == 0 ? nf_store_view_epoch(v) : s->epoch;
    int64_t committed_ms = r == 0 ? nf_store_view_published_ms(v) : s->committed_ms;
    rc = begin(s);
    rc = rc == SQLITE_OK ? commit_as(s, epoch, committed_ms) : rc;
    if (rc == SQLITE_OK) {
        pthread_mutex_lock(&s->mu);
        s->epoch = epoch;
        s->committed_ms = committed_ms;
        pthread_mutex_unlock(&s->mu);
        if (!(was_empty && p.older))
            observe_freshness(s, &p);
    }
    if (rc == SQLITE_OK && p.now - s->last_expire >= EXPIRE_EVERY) {
        s->last_expire = p.now;
        rc = expire(s, p.now);
    }
    nf_gauge_set(s->m_articles, (int64_t)s->articles);
    return rc;
}

/* ------------------------------------------------------------------------------ ranking */

/* nf_rank(fts, dfs): FTS5's bm25 with the table's weights (title TITLE_W, summary SUMMARY_W,
 * topics 0; k1 1.2, b 0.75, the row's length over all columns), except where each phrase's
 * document count comes from: dfs (a blob of one int64 per phrase of the expression, -1 for a
 * phrase that does not score: exclusions, the topic) holds counts looked up in the index's
 * vocabulary before the query (a phrase of several words: the least frequent word's count).
 * bm25() counts them by running every phrase over the whole table first, which costs as much
 * as the whole match list (a phrase of common words: the whole table); this costs nothing
 * per query, and per row only the row's own hits and length. A relevance >= 0. */
#define RANK_PHRASES 64

typedef struct {
    int n;
    double idf[RANK_PHRASES], avgdl;
} rank_data_t;

static void rank_fn(const Fts5ExtensionApi *x, Fts5Context *ctx, sqlite3_context *out, int nval,
                    sqlite3_value **val)
{
    rank_data_t *d = x->xGetAuxdata(ctx, 0);
    if (!d) {
        if (!(d = sqlite3_malloc(sizeof *d))) {
            sqlite3_result_error_nomem(out);
            return;
        }
        sqlite3_int64 rows = 0, tokens = 0;
        x->xRowCount(ctx, &rows);
        x->xColumnTotalSize(ctx, -1, &tokens);
        d->avgdl = rows > 0 ? (double)tokens / (double)rows : 1;
        d->n = x->xPhraseCount(ctx);
        if (d->n > RANK_PHRASES)
            d->n = RANK_PHRASES;
        const unsigned char *dfs = nval > 0 ? sqlite3_value_blob(val[0]) : NULL;
        int ndf = nval > 0 ? sqlite3_value_bytes(val[0]) / 8 : 0;
        for (int i = 0; i < d->n; i++) {
            int64_t df = -1;
            if (dfs && i < ndf)
                memcpy(&df, dfs + 8 * i, 8);
            double idf = log(((double)rows - (double)df + 0.5) / ((double)df + 0.5)); /* FTS5's */
            d->idf[i] = df < 0 ? 0 : idf > 1e-6 ? idf : 1e-6;
        }
        if (x->xSetAuxdata(ctx, d, sqlite3_free) != SQLITE_OK) {
            sqlite3_result_error_nomem(out);
            return;
        }
    }
    static const double w[3] = {TITLE_W, SUMMARY_W, 0};
    int len = (int)(KEY(x->xRowid(ctx)) >> LEN_SHIFT & LEN_LOOKUP);
    if (len == LEN_LOOKUP)
        x->xColumnSize(ctx, -1, &len);
    double norm = 1.2 * (1 - 0.75 + 0.75 * (double)len / d->avgdl), score = 0;
    for (int i = 0; i < d->n; i++) {
        if (d->idf[i] == 0)
            continue;
        Fts5PhraseIter it;
        int col = -1, off = 0;
        double f = 0;
        if (x->xPhraseFirst(ctx, i, &it, &col, &off) != SQLITE_OK)
            continue;
        for (; col >= 0; x->xPhraseNext(ctx, &it, &col, &off))
            f += col < 3 ? w[col] : 0;
        if (f > 0)
            score += d->idf[i] * f * 2.2 / (f + norm);
    }
    sqlite3_result_double(out, score);
}

typedef struct {
    reader_t *r;
    int64_t min; /* the least document count of the term's tokens; -2: none yet */
    bool pairs;  /* a word pair was among them */
    int rc;
} df_t;

static int token_df(void *arg, int flags, const char *tok, int n, int start, int end)
{
    df_t *d = arg;
    (void)flags, (void)start, (void)end;
    /* A phrase's last word comes after its pairs (search_tok.h) and is in at least as many rows
     * as the pair that ends with it: its count (a long posting list to walk, for a common
     * word) cannot be the least. */
    bool pair = memchr(tok, '\x1F', (size_t)n) != NULL;
    if (d->pairs && !pair)
        return SQLITE_OK;
    d->pairs |= pair;
    reader_t *r = d->r;
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned char)tok[i]) * 1099511628211ull;
    df_entry_t *e = n <= NF_SEARCH_PAIR_MAX && r->df ? &r->df[h % DF_SLOTS] : NULL;
    int64_t df;
    if (e && e->len == n && e->hash == h && memcmp(e->tok, tok, (size_t)n) == 0 &&
        (r->changes == e->at ||
         (r->articles >= DF_EXACT_BELOW && (r->changes - e->at) * 100 <= r->articles))) {
        df = e->df;
        r->df_hits++;
    } else {
        r->df_misses++;
        sqlite3_bind_text(r->vocab, 1, tok, n, SQLITE_STATIC);
        int rc = sqlite3_step(r->vocab);
        df = rc == SQLITE_ROW ? sqlite3_column_int64(r->vocab, 0) : 0;
        sqlite3_reset(r->vocab);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return d->rc = rc;
        if (e) {
            *e = (df_entry_t){.hash = h, .at = r->changes, .df = df, .len = n};
            memcpy(e->tok, tok, (size_t)n);
        }
    }
    if (d->min == -2 || df < d->min)
        d->min = df;
    return SQLITE_OK;
}

/* q without the terms the index's tokenizer finds no token in (they would match nothing, and
 * an AND with them nothing at all), into *f; and the document count of each phrase of f's
 * expression (nf_search_query_match's order: positive terms, then exclusions and the topic,
 * which do not score) into dfs. SQLite code. */
static int index_terms(reader_t *r, const nf_search_query_t *q, nf_search_query_t *f, int64_t *dfs,
                       int *n)
{
    *f = *q;
    f->n = f->positive = f->excluded = 0;
    *n = 0;
    for (unsigned i = 0; i < q->n; i++) {
        df_t d = {.r = r, .min = -2};
        int rc = r->tok.xTokenize(r->tokenizer, &d, FTS5_TOKENIZE_QUERY, q->t[i].text,
                                  (int)strlen(q->t[i].text), token_df);
        if (d.rc != SQLITE_OK || (rc != SQLITE_OK && rc != SQLITE_DONE))
            return d.rc != SQLITE_OK ? d.rc : rc;
        if (d.min == -2) {
            f->dropped++;
            continue;
        }
        f->t[f->n++] = q->t[i]; /* the text stays in q's buffer */
        if (q->t[i].excluded) {
            f->excluded++;
        } else {
            f->positive++;
            if (*n < RANK_PHRASES)
                dfs[(*n)++] = d.min;
        }
    }
    for (unsigned i = 0; i < f->excluded + 1 && *n < RANK_PHRASES; i++)
        dfs[(*n)++] = -1; /* exclusions and the topic: never scored */
    return SQLITE_OK;
}

/* ------------------------------------------------------------------------------ readers */

static void close_reader(reader_t *r)
{
    if (!r)
        return;
    if (r->tokenizer)
        r->tok.xDelete(r->tokenizer);
    sqlite3_finalize(r->vocab);
    sqlite3_finalize(r->scan);
    sqlite3_finalize(r->ids);
    sqlite3_finalize(r->snip);
    sqlite3_close(r->db);
    free(r->df);
    free(r);
}

static reader_t *open_reader(nf_search_t *s, char *err, size_t errlen)
{
    reader_t *r = calloc(1, sizeof *r);
    if (r)
        r->df = calloc(DF_SLOTS, sizeof *r->df); /* none: every count looked up */
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int rc = sqlite3_open_v2(s->o.path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    char pragmas[160];
    unsigned readers = s->o.readers ? s->o.readers : 1;
    snprintf(pragmas, sizeof pragmas,
             "PRAGMA query_only=1; PRAGMA cache_size=-%u; PRAGMA busy_timeout=5000;"
             " PRAGMA mmap_size=" MMAP_BYTES ";",
             (s->o.memory_mb ? s->o.memory_mb : 2) * 1024 / 2 / readers);
    if (rc == SQLITE_OK)
        rc = nf_search_tokenizer_register(r->db);
    /* The vocabulary first: query_only refuses even a temporary table. */
    if (rc == SQLITE_OK)
        rc = exec(r->db, "CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, fts, 'row')");
    if (rc == SQLITE_OK)
        rc = exec(r->db, pragmas);
    fts5_api *api = rc == SQLITE_OK ? nf_search_fts5(r->db) : NULL;
    if (rc == SQLITE_OK)
        rc = nf_search_tokenizer_open(r->db, &r->tok, &r->tokenizer);
    if (rc == SQLITE_OK &&
        (!api || api->xCreateFunction(api, "nf_rank", NULL, rank_fn, NULL) != SQLITE_OK))
        rc = SQLITE_ERROR;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(r->db, "SELECT doc FROM temp.vocab WHERE term = ?1", -1, &r->vocab,
                                NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(r->db,
                                "SELECT rowid, nf_rank(fts, ?4) FROM fts WHERE fts MATCH ?1"
                                " AND rowid <= ?2 ORDER BY rowid LIMIT ?3",
                                -1, &r->scan, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(r->db, "nf_chosen", 2, SQLITE_UTF8, NULL, chosen_fn, NULL,
                                     NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(r->db, "SELECT id FROM fts WHERE rowid = ?1", -1, &r->ids, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(r->db,
                                "SELECT rowid, highlight(fts, 0, char(1), char(2)),"
                                " snippet(fts, 1, char(1), char(2), '…', 24)"
                                " FROM fts WHERE fts MATCH ?1 AND rowid >= ?2 AND rowid <= ?3"
                                " AND nf_chosen(rowid, ?4)",
                                -1, &r->snip, NULL);
    if (rc != SQLITE_OK) {
        sql_err(r->db, "open for a query", err, errlen);
        close_reader(r);
        return NULL;
    }
    return r;
}

/* A connection for a query: 0 and *out; -EAGAIN not open; -EBUSY all busy for a second;
 * -EIO (err). */
static int take_reader(nf_search_t *s, reader_t **out, char *err, size_t errlen)
{
    struct timespec until = nf_deadline_after(CLOCK_REALTIME, 1000);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (!s->ready || s->corrupt || s->stop) {
            pthread_mutex_unlock(&s->mu);
            snprintf(err, errlen, "the search index is being opened or rebuilt");
            return -EAGAIN;
        }
        if (s->idle) {
            *out = s->idle;
            s->idle = s->idle->next;
            s->busy++;
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
        if (s->open_readers < (s->o.readers ? s->o.readers : 1)) {
            s->open_readers++;
            s->busy++;
            pthread_mutex_unlock(&s->mu);
            if ((*out = open_reader(s, err, errlen)))
                return 0;
            pthread_mutex_lock(&s->mu);
            s->open_readers--;
            s->busy--;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            return -EIO;
        }
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&s->mu);
            snprintf(err, errlen, "every search connection stayed busy for a second");
            return -EBUSY;
        }
    }
}

static void give_reader(nf_search_t *s, reader_t *r, bool corrupt)
{
    pthread_mutex_lock(&s->mu);
    s->busy--;
    if (corrupt)
        s->corrupt = true;
    if (s->corrupt || s->stop) {
        s->open_readers--;
        close_reader(r);
    } else {
        r->next = s->idle;
        s->idle = r;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------------------- queries */

typedef struct {
    sqlite3_int64 rowid;
    double relevance, score;
} cand_t;

static bool better(const cand_t *a, const cand_t *b)
{
    return a->score > b->score || (a->score == b->score && a->rowid < b->rowid); /* newer */
}

/* A min-heap on `better` of at most k: the worst at [0]. */
static void heap_push(cand_t *h, size_t *n, size_t k, cand_t c)
{
    size_t i;
    if (*n < k) {
        i = (*n)++;
        while (i > 0 && better(&h[(i - 1) / 2], &c)) {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = c;
        return;
    }
    if (!better(&c, &h[0]))
        return;
    i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = l + 1, w = i;
        const cand_t *worst = &c;
        if (l < *n && better(worst, &h[l]))
            w = l, worst = &h[l];
        if (m < *n && better(worst, &h[m]))
            w = m;
        if (w == i)
            break;
        h[i] = h[w];
        i = w;
    }
    h[i] = c;
}

static int by_better(const void *a, const void *b)
{
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

/* text (SQLite's, with the markers) as HTML: escaped, markers as <mark></mark>. */
static char *to_html(const unsigned char *text)
{
    /* A byte becomes at most 7 ("</mark>"); one more "</mark>" may close the text. */
    size_t n = text ? strlen((const char *)text) : 0, j = 0;
    char *o = malloc(7 * n + 8);
    if (!o)
        return NULL;
    bool open = false;
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        switch (text[i]) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        case MARK_ON:
            rep = open ? "" : "<mark>", open = true;
            break;
        case MARK_OFF:
            rep = open ? "</mark>" : "", open = false;
            break;
        default:
            o[j++] = (char)text[i];
            continue;
        }
        size_t rl = strlen(rep);
        memcpy(o + j, rep, rl);
        j += rl;
    }
    if (open) {
        memcpy(o + j, "</mark>", 7);
        j += 7;
    }
    o[j] = '\0';
    return o;
}

static double score_of(double relevance, int64_t published_ms, int64_t now)
{
    double hours = (double)(now - published_ms) / 3.6e6;
    if (hours < 0)
        hours = 0;
    return relevance * (0.5 + 0.5 * exp(-hours / DECAY_H));
}

void nf_search_result_free(nf_search_result_t *r)
{
    for (size_t i = 0; r && i < r->n; i++) {
        free(r->hits[i].title_html);
        free(r->hits[i].snippet_html);
    }
    if (r) {
        free(r->hits);
        r->hits = NULL;
        r->n = 0;
    }
}

/* The rows fill() highlights: sorted rowids (nf_chosen(rowid, ?) in the statement). */
typedef struct {
    const sqlite3_int64 *rowid;
    size_t n;
} chosen_t;

static int by_rowid(const void *a, const void *b)
{
    sqlite3_int64 x = *(const sqlite3_int64 *)a, y = *(const sqlite3_int64 *)b;
    return (x > y) - (x < y);
}

static void chosen_fn(sqlite3_context *ctx, int n, sqlite3_value **v)
{
    const chosen_t *c = n == 2 ? sqlite3_value_pointer(v[1], "nf_chosen") : NULL;
    sqlite3_int64 rowid = sqlite3_value_int64(v[0]);
    sqlite3_result_int(ctx, c && c->n && bsearch(&rowid, c->rowid, c->n, sizeof rowid, by_rowid));
}

/* The chosen candidates' ids, best first, while keep() wants them; then their highlights in one
 * pass of the expression over the rowids they span (FTS5 would otherwise set up the
 * expression's iterators in every segment once per row: 55-63 % of a one-word query's time at
 * 1M articles). A row gone (expired) since the scan is skipped. */
static int fill(reader_t *r, const char *match, const cand_t *c, size_t nc, unsigned limit,
                nf_search_keep_fn keep, void *arg, nf_search_result_t *out)
{
    sqlite3_int64 *rowids = malloc(2 * (limit ? limit : 1) * sizeof *rowids);
    if (!rowids)
        return SQLITE_NOMEM;
    int rc = SQLITE_OK;
    for (size_t i = 0; i < nc && out->n < limit && rc == SQLITE_OK; i++) {
        sqlite3_bind_int64(r->ids, 1, c[i].rowid);
        rc = sqlite3_step(r->ids);
        if (rc == SQLITE_ROW && sqlite3_column_bytes(r->ids, 0) == 16) {
            nf_search_hit_t h = {.id = id_of(sqlite3_column_blob(r->ids, 0)),
                                 .published_ms = (int64_t)(KEY(c[i].rowid) >> ROWID_BITS),
                                 .relevance = c[i].relevance,
                                 .score = c[i].score};
            if (keep(arg, &h)) {
                rowids[out->n] = c[i].rowid;
                out->hits[out->n++] = h;
            }
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
            rc = SQLITE_OK; /* deleted (expired) since the scan */
        }
        sqlite3_reset(r->ids);
    }
    if (rc != SQLITE_OK || out->n == 0) {
        free(rowids);
        return rc;
    }
    sqlite3_int64 *sorted = rowids + limit;
    memcpy(sorted, rowids, out->n * sizeof *sorted);
    qsort(sorted, out->n, sizeof *sorted, by_rowid);
    chosen_t ch = {.rowid = sorted, .n = out->n};
    sqlite3_bind_text(r->snip, 1, match, -1, SQLITE_STATIC);
    sqlite3_bind_int64(r->snip, 2, sorted[0]);
    sqlite3_bind_int64(r->snip, 3, sorted[out->n - 1]);
    sqlite3_bind_pointer(r->snip, 4, &ch, "nf_chosen", NULL);
    while ((rc = sqlite3_step(r->snip)) == SQLITE_ROW) {
        sqlite3_int64 rowid = sqlite3_column_int64(r->snip, 0);
        for (size_t i = 0; i < out->n; i++) {
            nf_search_hit_t *h = &out->hits[i];
            if (rowids[i] != rowid || h->title_html)
                continue;
            h->title_html = to_html(sqlite3_column_text(r->snip, 1));
            h->snippet_html = to_html(sqlite3_column_text(r->snip, 2));
            if (!h->title_html || !h->snippet_html) {
                rc = SQLITE_NOMEM;
                break;
            }
            break;
        }
        if (rc == SQLITE_NOMEM)
            break;
    }
    sqlite3_reset(r->snip);
    sqlite3_bind_null(r->snip, 4);
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    size_t n = 0; /* a row deleted between the two statements: left out */
    for (size_t i = 0; i < out->n; i++) {
        if (out->hits[i].title_html && out->hits[i].snippet_html) {
            out->hits[n++] = out->hits[i];
        } else {
            free(out->hits[i].title_html);
            free(out->hits[i].snippet_html);
        }
    }
    out->n = n;
    free(rowids);
    return rc;
}

int nf_search_run(nf_search_t *s, const nf_search_query_t *q, int topic, int64_t since_ms,
                  int64_t now_ms, unsigned limit, nf_search_keep_fn keep, void *arg,
                  nf_search_result_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t k = 4 * (size_t)limit + 16;
    cand_t *heap = malloc(k * sizeof *heap);
    out->hits = calloc(limit ? limit : 1, sizeof *out->hits);
    if (!heap || !out->hits) {
        free(heap);
        free(out->hits);
        out->hits = NULL;
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    uint64_t t0 = nf_now_ns();
    reader_t *r = NULL;
    int e = take_reader(s, &r, err, errlen);
    if (e != 0) {
        free(heap);
        nf_search_result_free(out);
        nf_counter_inc(e == -EBUSY ? s->m_busy : s->m_errors);
        return e;
    }
    pthread_mutex_lock(&s->mu);
    out->epoch = s->epoch;
    out->committed_ms = s->committed_ms;
    out->articles = r->articles = s->articles;
    r->changes = s->changes;
    pthread_mutex_unlock(&s->mu);

    size_t nh = 0;
    sqlite3_int64 hi = ROWID(since_ms > 0 ? (sqlite3_int64)since_ms << ROWID_BITS : 0);
    int64_t dfs[RANK_PHRASES];
    int ndf = 0;
    nf_search_query_t fq;
    char match[NF_SEARCH_MATCH_MAX], tok[16] = "";
    match[0] = '\0'; /* bound below even when the terms cannot be read */
    if (topic >= 0)
        snprintf(tok, sizeof tok, "t%d", topic);
    r->df_hits = r->df_misses = 0;
    int rc = index_terms(r, q, &fq, dfs, &ndf);
    nf_counter_add(s->m_df_hit, r->df_hits);
    nf_counter_add(s->m_df_miss, r->df_misses);
    if (rc == SQLITE_OK && fq.positive == 0) {
        give_reader(s, r, false);
        free(heap);
        nf_search_result_free(out);
        snprintf(err, errlen, "q has no word the index can search for (letters or digits)");
        return -EINVAL;
    }
    out->dropped = fq.dropped;
    if (rc == SQLITE_OK &&
        nf_search_query_match(&fq, topic >= 0 ? tok : NULL, match, sizeof match) < 0)
        rc = SQLITE_TOOBIG; /* cannot happen: NF_SEARCH_MATCH_MAX bounds it */
    /* The scan's expression: phrases as their word pairs alone (search_tok.h). */
    r->smatch[0] = '\0';
    nf_search_mark_phrases(&fq, &r->mq, r->marked, sizeof r->marked);
    if (rc == SQLITE_OK &&
        nf_search_query_match(&r->mq, topic >= 0 ? tok : NULL, r->smatch, sizeof r->smatch) < 0)
        rc = SQLITE_TOOBIG;
    sqlite3_bind_text(r->scan, 1, r->smatch, -1, SQLITE_STATIC);
    sqlite3_bind_int64(r->scan, 2, hi);
    sqlite3_bind_blob(r->scan, 4, dfs, ndf * 8, SQLITE_STATIC);
    sqlite3_bind_int64(r->scan, 3, (sqlite3_int64)s->o.scan_max + 1);
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        if ((rc = sqlite3_step(r->scan)) != SQLITE_ROW)
            break;
        if (out->matches == s->o.scan_max) {
            out->capped = true;
            break;
        }
        out->matches++;
        cand_t c = {.rowid = sqlite3_column_int64(r->scan, 0),
                    .relevance = sqlite3_column_double(r->scan, 1)};
        c.score = score_of(c.relevance, (int64_t)(KEY(c.rowid) >> ROWID_BITS), now_ms);
        heap_push(heap, &nh, k, c);
    }
    sqlite3_reset(r->scan);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        qsort(heap, nh, sizeof *heap, by_better);
        rc = fill(r, match, heap, nh, limit, keep, arg, out);
    }
    bool corrupt = is_corrupt(rc);
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
        sql_err(r->db, "query", err, errlen);
    give_reader(s, r, corrupt);
    free(heap);
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) {
        nf_counter_inc(s->m_errors);
        nf_search_result_free(out);
        if (corrupt)
            nf_log(NF_LOG_ERROR, "search", "the search index is corrupt: rebuilding it",
                   NF_LS("error", err), NF_LEND);
        return corrupt ? -EAGAIN : -EIO;
    }
    nf_histogram_observe(s->m_latency, (double)(nf_now_ns() - t0) / 1e9);
    nf_counter_inc(s->m_queries);
    return 0;
}

/* ------------------------------------------------------------------------------- thread */

static int64_t file_bytes(const char *path)
{
    int64_t n = 0;
    static const char *const ext[] = {"", "-wal"};
    for (size_t i = 0; i < 2; i++) {
        char p[4096];
        struct stat sb;
        snprintf(p, sizeof p, "%s%s", path, ext[i]);
        if (stat(p, &sb) == 0)
            n += (int64_t)sb.st_size;
    }
    return n;
}

/* After corruption: every reader returned and closed, the file made again. */
static void reopen(nf_search_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->ready = false;
    while (s->busy > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    while (s->idle) {
        reader_t *r = s->idle;
        s->idle = r->next;
        s->open_readers--;
        close_reader(r);
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->wmu);
    close_writer(s);
    nf_counter_inc(s->m_rebuild_corrupt);
    remove_files(s->o.path);
    s->has_cursor = false;
    pthread_mutex_lock(&s->mu);
    s->epoch = 0;
    pthread_mutex_unlock(&s->mu);
    int r = open_index(s);
    pthread_mutex_unlock(&s->wmu);
    pthread_mutex_lock(&s->mu);
    s->corrupt = false;
    s->ready = r == 0;
    pthread_mutex_unlock(&s->mu);
}

/* A streak of failed writes (a full disk): logged at its first failure, reminded of every
 * WRITE_REMIND_MS, its end logged; the writer backs off meanwhile. The thread's own. */
typedef struct {
    unsigned failures; /* in a row */
    int64_t since_ms, logged_ms;
} write_streak_t;

/* poll << failures, at most WRITE_BACKOFF_MAX_MS (ms). */
static unsigned backoff_ms(unsigned poll, unsigned failures)
{
    uint64_t wait = (uint64_t)poll << (failures < 20 ? failures : 20);
    return wait < WRITE_BACKOFF_MAX_MS ? (unsigned)wait : WRITE_BACKOFF_MAX_MS;
}

/* After one round of the writer: rc its outcome, wrote whether it wrote (followed a view or
 * expired articles). The wait before the next round, in ms. */
static unsigned write_outcome(nf_search_t *s, write_streak_t *w, int rc, bool wrote, unsigned poll)
{
    int64_t now = nf_wall_ms();
    if (rc == SQLITE_OK) {
        if (wrote && w->failures) {
            nf_log(NF_LOG_INFO, "search", "the search index is written again",
                   NF_LI("failed_tries", w->failures),
                   NF_LF("seconds", (double)(now - w->since_ms) / 1e3), NF_LEND);
            w->failures = 0;
        }
        return backoff_ms(poll, w->failures); /* a round that wrote nothing ends no streak */
    }
    keep_err(s, rc);
    nf_counter_inc(s->m_write_errors);
    if (w->failures++ == 0) {
        w->since_ms = w->logged_ms = now;
        nf_log(NF_LOG_ERROR, "search",
               (rc & 0xFF) == SQLITE_FULL
                   ? "the search index cannot be written: its disk is full (searches answer from "
                     "what it holds; retried with a back-off, logged again every 10 minutes "
                     "while it lasts)"
                   : "the search index cannot be written (searches answer from what it holds; "
                     "retried with a back-off, logged again every 10 minutes while it lasts)",
               NF_LS("path", s->o.path), NF_LS("error", s->werr), NF_LEND);
    } else if (now - w->logged_ms >= WRITE_REMIND_MS) {
        w->logged_ms = now;
        nf_log(NF_LOG_WARN, "search", "the search index still cannot be written",
               NF_LS("path", s->o.path), NF_LI("failed_tries", w->failures),
               NF_LF("seconds", (double)(now - w->since_ms) / 1e3), NF_LS("error", s->werr),
               NF_LEND);
    }
    return backoff_ms(poll, w->failures);
}

static void *run(void *arg)
{
    nf_search_t *s = arg;
    pthread_mutex_lock(&s->wmu);
    int opened = open_index(s);
    pthread_mutex_unlock(&s->wmu);
    pthread_mutex_lock(&s->mu);
    s->ready = opened == 0;
    unsigned poll = s->o.poll_ms ? s->o.poll_ms : 100, wait = poll;
    write_streak_t streak = {0};
    while (!s->stop) {
        bool corrupt = s->corrupt;
        pthread_mutex_unlock(&s->mu);
        if (corrupt)
            reopen(s);
        nf_store_view_t *v = s->o.store && s->w ? nf_store_view_acquire(s->o.store) : NULL;
        int rc = SQLITE_OK;
        bool wrote = false;
        pthread_mutex_lock(&s->wmu);
        s->werr[0] = '\0';
        if ((wrote = v && s->w && nf_store_view_epoch(v) != s->epoch))
            rc = follow(s, v);
        else if ((wrote = s->w && nf_wall_ms() - s->last_expire >= EXPIRE_EVERY))
            rc = expire(s, (s->last_expire = nf_wall_ms()));
        if (rc == SQLITE_OK && s->w && !s->in_tx) /* fewer segments, cheaper queries */
            rc = exec(s->w, "INSERT INTO fts(fts, rank) VALUES ('merge', " MERGE_PAGES ")");
        if (s->w)
            wait = write_outcome(s, &streak, rc, wrote, poll);
        if (rc != SQLITE_OK && s->w) {
            rollback(s);
            drop_pending(s);
            s->checked = false;
            s->has_cursor = false;
            load_kv(s); /* back to the committed cursor */
        }
        pthread_mutex_unlock(&s->wmu);
        if (v) {
            int64_t lag = nf_store_view_published_ms(v) - s->committed_ms;
            nf_gauge_set(s->m_behind, s->committed_ms && lag > 0 ? lag / 1000 : 0);
            nf_store_view_release(v);
        }
        nf_gauge_set(s->m_disk, file_bytes(s->o.path));
        pthread_mutex_lock(&s->mu);
        if (is_corrupt(rc))
            s->corrupt = true;
        if (s->stop)
            break;
        struct timespec until = nf_deadline_after(CLOCK_REALTIME, wait);
        pthread_cond_timedwait(&s->cv, &s->mu, &until);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static double memory_bytes(void *arg)
{
    (void)arg;
    return (double)nf_search_memory_bytes();
}

static void register_metrics(nf_search_t *s)
{
    nf_metrics_counter("newsflow_search_indexed_total",
                       "Articles added to the search index (committed articles only).", NULL, 0,
                       &s->m_indexed);
    nf_metrics_counter("newsflow_search_expired_total",
                       "Articles removed from the search index: ingested before "
                       "search.retention, or the oldest beyond search.max_articles.",
                       NULL, 0, &s->m_expired);
    nf_metrics_counter("newsflow_search_missing_meta_total",
                       "Search log entries whose article metadata the committed state no longer "
                       "had (expired or unreadable): not indexed.",
                       NULL, 0, &s->m_missing);
    nf_metrics_counter("newsflow_search_queries_total", "Searches answered.", NULL, 0,
                       &s->m_queries);
    nf_metrics_counter("newsflow_search_query_errors_total",
                       "Searches that failed in the engine or found the index not open (503).",
                       NULL, 0, &s->m_errors);
    nf_metrics_counter("newsflow_search_write_errors_total",
                       "Rounds of the search index's writer that failed (SQLITE_FULL on a full "
                       "disk, I/O errors): each is retried after a back-off of up to 60 s, and "
                       "the index stays behind meanwhile (newsflow_search_behind_seconds).",
                       NULL, 0, &s->m_write_errors);
    nf_metrics_counter("newsflow_search_busy_total",
                       "Searches refused because every connection stayed busy for a second "
                       "(503; search.readers).",
                       NULL, 0, &s->m_busy);
    static const char df_help[] =
        "Document counts of query terms: taken from a connection's cache (hit) or counted in "
        "the index's vocabulary (miss: a walk of the term's posting list).";
    nf_metrics_counter("newsflow_search_doc_counts_total", df_help, "result=\"hit\"", 0,
                       &s->m_df_hit);
    nf_metrics_counter("newsflow_search_doc_counts_total", df_help, "result=\"miss\"", 0,
                       &s->m_df_miss);
    static const char help[] =
        "Rebuilds of the search index from the committed state: missing (no file), corrupt, "
        "behind (an older checkpoint was restored), version (a file of another layout), "
        "unlogged (articles an earlier version ingested without a search log entry).";
    nf_metrics_counter("newsflow_search_rebuilds_total", help, "reason=\"missing\"", 0,
                       &s->m_rebuild_missing);
    nf_metrics_counter("newsflow_search_rebuilds_total", help, "reason=\"corrupt\"", 0,
                       &s->m_rebuild_corrupt);
    nf_metrics_counter("newsflow_search_rebuilds_total", help, "reason=\"behind\"", 0,
                       &s->m_rebuild_behind);
    nf_metrics_counter("newsflow_search_rebuilds_total", help, "reason=\"version\"", 0,
                       &s->m_rebuild_version);
    nf_metrics_counter("newsflow_search_rebuilds_total", help, "reason=\"unlogged\"", 0,
                       &s->m_rebuild_unlogged);
    nf_metrics_gauge("newsflow_search_articles", "Articles in the search index.", NULL, 0,
                     &s->m_articles);
    nf_metrics_gauge("newsflow_search_disk_bytes", "The search index's file and its WAL.", NULL, 0,
                     &s->m_disk);
    nf_metrics_gauge("newsflow_search_behind_seconds",
                     "How far the search index is behind the latest committed view (by the "
                     "views' publication times).",
                     NULL, 0, &s->m_behind);
    static const double fresh_bounds[] = {0.1, 0.25, 0.5, 1,   2.5, 5,   10,
                                          30,  60,   120, 300, 900, 3600};
    nf_metrics_histogram("newsflow_search_freshness_seconds",
                         "Time from the cut of an article's epoch to the article searchable (the "
                         "index's transaction that took it), one sample per article, a rebuild's "
                         "left out: the search freshness SLO (docs/slo.md).",
                         NULL, fresh_bounds, sizeof fresh_bounds / sizeof fresh_bounds[0],
                         &s->m_freshness);
    nf_metrics_gauge_fn("newsflow_search_memory_bytes",
                        "Memory SQLite holds (the search index's page caches and statements).",
                        NULL, memory_bytes, NULL);
    nf_metrics_histogram("newsflow_search_query_seconds", "Time to answer a search (engine part).",
                         NULL, nf_metrics_latency_bounds, nf_metrics_latency_nbounds,
                         &s->m_latency);
}

nf_search_t *nf_search_start(const nf_search_opts_t *o, char *err, size_t errlen)
{
    nf_search_t *s = calloc(1, sizeof *s);
    if (!s || !(s->o.path = strdup(o->path))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    const char *path = s->o.path;
    s->o = *o;
    s->o.path = path;
    if (!s->o.scan_max)
        s->o.scan_max = NF_SEARCH_SCAN_MAX;
    if (!nf_search_sqlite_init())
        nf_log(NF_LOG_DEBUG, "search",
               "SQLite was initialized before the search: its own allocator", NF_LEND);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_cond_init(&s->cv, NULL);
    register_metrics(s);
    s->started_ms = nf_wall_ms();
    int e = pthread_create(&s->th, NULL, run, s);
    if (e != 0) {
        snprintf(err, errlen, "cannot start the search thread: %s", strerror(e));
        nf_search_stop(s);
        return NULL;
    }
    s->started = true;
    return s;
}

void nf_search_stop(nf_search_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started)
        pthread_join(s->th, NULL);
    pthread_mutex_lock(&s->mu);
    while (s->busy > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    while (s->idle) {
        reader_t *r = s->idle;
        s->idle = r->next;
        close_reader(r);
    }
    pthread_mutex_unlock(&s->mu);
    if (s->w) {
        commit(s);
        close_writer(s);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->wmu);
    pthread_cond_destroy(&s->cv);
    free((char *)s->o.path);
    free(s);
}

void nf_search_status(nf_search_t *s, uint64_t *articles, uint64_t *epoch)
{
    pthread_mutex_lock(&s->mu);
    *articles = s->articles;
    *epoch = s->epoch;
    pthread_mutex_unlock(&s->mu);
}

int nf_search_add(nf_search_t *s, nf_id128_t id, const char *title, const char *summary,
                  int64_t published_ms, const uint32_t *topics, unsigned ntopics)
{
    pthread_mutex_lock(&s->wmu);
    int rc = s->w ? begin(s) : SQLITE_MISUSE;
    int r = rc == SQLITE_OK ? insert_doc(s, id, title, summary, published_ms, published_ms, topics,
                                         ntopics, nf_wall_ms())
                            : -rc;
    if (r >= 0 && ++s->tx_rows >= TX_ROWS && commit(s) != SQLITE_OK)
        r = -EIO;
    pthread_mutex_unlock(&s->wmu);
    return r < 0 ? -EIO : r == 1 ? 1 : 0;
}

int nf_search_flush(nf_search_t *s)
{
    pthread_mutex_lock(&s->wmu);
    int rc = s->w ? commit(s) : SQLITE_MISUSE;
    pthread_mutex_unlock(&s->wmu);
    nf_gauge_set(s->m_articles, (int64_t)s->articles);
    return rc == SQLITE_OK ? 0 : -EIO;
}
