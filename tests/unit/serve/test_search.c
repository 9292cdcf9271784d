/* Tests src/serve/search_query.c and src/serve/search.c.
 *
 * The query syntax: words, phrases, exclusions, limits, and a property over 20,000 generated
 * texts heavy in FTS5's own syntax: whatever the text, the MATCH expression written for it runs
 * on a real FTS5 table without an error (no text reaches the engine as syntax). The index's
 * tokenizer (word pairs) against plain unicode61 as the reference: same rows, highlights,
 * snippets and lengths for 1,500 generated queries.
 *
 * The index over a real store, as the job feeds it: articles written the way dedup writes them
 * (nf_serve_put_article, the search log entry, the topic vector) in committed epochs, views
 * published; the search thread follows them. Planted matches come first among 400 articles of
 * filler; phrase, exclusion, topic and since filters; recency breaks a tie of relevance; an
 * article published before the retention is not indexed; a later epoch is searchable within a
 * poll; the keep callback's refusals; a restart goes on from the cursor (nothing indexed again,
 * no rebuild); a corrupt file and a state gone back to an older checkpoint are rebuilt. A full
 * disk (a VFS that refuses writes with SQLITE_FULL): logged once in SQLite's words, counted,
 * retried with a back-off; the index catches up once there is room. */
#include "nf_test.h"
#include "teststore.h"

#include "actors/serve_state.h"
#include "algo/bytes.h"
#include "engine/cluster.h"
#include "engine/interest.h"
#include "feed/dates.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "serve/search.h"
#include "serve/search_tok.h"
#include "state/kstate.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOUR_MS (3600ll * 1000)
#define DAY_MS  (24 * HOUR_MS)
#define TTL_MS  (7 * DAY_MS)

/* ----------------------------------------------------------------------------- the syntax */

static nf_search_query_t g_q;

static int parse(const char *s)
{
    char err[256];
    return nf_search_query_parse(s, strlen(s), &g_q, err, sizeof err);
}

static void test_syntax(void)
{
    NF_CHECK_EQ(parse("hello world"), 0);
    NF_CHECK_EQ(g_q.n, 2u);
    NF_CHECK_STR(g_q.t[0].text, "hello");
    NF_CHECK(!g_q.t[1].phrase && !g_q.t[1].excluded);

    NF_CHECK_EQ(parse("\"rail  link\" -bus -\"night train\""), 0);
    NF_CHECK_EQ(g_q.positive, 1u);
    NF_CHECK_EQ(g_q.excluded, 2u);
    NF_CHECK_STR(g_q.t[0].text, "rail link");
    NF_CHECK(g_q.t[0].phrase);
    NF_CHECK_STR(g_q.t[1].text, "bus");
    NF_CHECK(g_q.t[1].excluded && !g_q.t[1].phrase);
    NF_CHECK_STR(g_q.t[2].text, "night train");
    NF_CHECK(g_q.t[2].excluded && g_q.t[2].phrase);

    /* A hyphen inside a word separates words; it excludes only at a term's start. */
    NF_CHECK_EQ(parse("covid-19 vaccine"), 0);
    NF_CHECK_EQ(g_q.positive, 3u);
    NF_CHECK_EQ(g_q.excluded, 0u);

    /* FTS5's syntax is plain words. */
    NF_CHECK_EQ(parse("NEAR(a b, 2) col:x ^y * OR NOT {title}"), 0);
    NF_CHECK_EQ(g_q.positive, 10u);
    char m[NF_SEARCH_MATCH_MAX];
    NF_CHECK(nf_search_query_match(&g_q, "t3", m, sizeof m) > 0);
    NF_CHECK_STR(m,
                 "(({title summary} : (\"NEAR\" AND \"a\" AND \"b\" AND \"2\" AND \"col\" AND "
                 "\"x\" AND \"y\" AND \"OR\" AND \"NOT\" AND \"title\"))) AND ({topics} : \"t3\")");

    NF_CHECK_EQ(parse("\"unclosed phrase here"), 0);
    NF_CHECK(g_q.t[0].phrase);
    NF_CHECK_STR(g_q.t[0].text, "unclosed phrase here");
    NF_CHECK_EQ(parse("caf\xc3\xa9 \xff\xfe stra\xc3\x9f"
                      "e"),
                0);
    NF_CHECK_EQ(g_q.positive, 2u);
    NF_CHECK_STR(g_q.t[0].text, "caf\xc3\xa9");
    /* Non-ASCII is the tokenizer's to split (the search leaves out a term without a token). */
    NF_CHECK_EQ(parse("a\xe2\x80\x94"
                      "b \xcc\x81 \xc2\xb5m"),
                0);
    NF_CHECK_EQ(g_q.positive, 3u);

    /* Refused: nothing to search for, or too long. */
    NF_CHECK_EQ(parse(""), -EINVAL);
    NF_CHECK_EQ(parse("-x -\"y z\""), -EINVAL);
    NF_CHECK_EQ(parse("\"\" ()*: \x01"), -EINVAL);
    char big[NF_SEARCH_Q_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    NF_CHECK_EQ(parse(big), -EINVAL);
    big[NF_SEARCH_Q_MAX] = '\0';
    NF_CHECK_EQ(parse(big), 0); /* one word of 1,024 letters */

    /* Bounds: 16 terms of each sign, 16 words a phrase. */
    NF_CHECK_EQ(parse("a b c d e f g h i j k l m n o p q r s t"), 0);
    NF_CHECK_EQ(g_q.positive, 16u);
    NF_CHECK_EQ(g_q.dropped, 4u);
    NF_CHECK_EQ(parse("x \"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\""), 0);
    NF_CHECK_STR(g_q.t[1].text, "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16");
    NF_CHECK_EQ(g_q.dropped, 2u);
}

/* An in-memory database with the index's tokenizer, after sql: NULL on an error. */
static sqlite3 *memory_db(const char *sql)
{
    sqlite3 *db = NULL;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
        nf_search_tokenizer_register(db) != SQLITE_OK ||
        sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "  memory_db: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

/* Any text: its expression runs on FTS5 without an error. */
static void test_syntax_property(void)
{
    sqlite3 *db = memory_db("CREATE VIRTUAL TABLE fts USING fts5(title, summary, topics, id "
                            "UNINDEXED, tokenize = '" NF_SEARCH_TOKENIZER "');"
                            "INSERT INTO fts VALUES ('near a col', 'x y or not', 't3 t4', 1);"
                            "INSERT INTO fts VALUES ('caf\xc3\xa9 b', '2 title', 't1', 2);");
    NF_REQUIRE(db);
    sqlite3_stmt *st = NULL;
    NF_REQUIRE(sqlite3_prepare_v2(db, "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ?1", -1,
                                  &st, NULL) == SQLITE_OK);
    static const char alpha[] = "\"\"\"---  ()*:^{}+,.ab NEAR OR AND NOT col title\xc3\xa9\xe2\x80"
                                "\x94\xff\x00\x01\n\t";
    uint64_t seed = 42;
    unsigned ok = 0, errors = 0;
    for (int i = 0; i < 20000; i++) {
        char text[64];
        size_t n = nf_test_rand(&seed) % sizeof text;
        for (size_t j = 0; j < n; j++)
            text[j] = alpha[nf_test_rand(&seed) % (sizeof alpha - 1)];
        char err[256], m[NF_SEARCH_MATCH_MAX];
        if (nf_search_query_parse(text, n, &g_q, err, sizeof err) != 0)
            continue;
        NF_REQUIRE(nf_search_query_match(&g_q, (i & 1) ? "t3" : NULL, m, sizeof m) > 0);
        sqlite3_bind_text(st, 1, m, -1, SQLITE_STATIC);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            ;
        sqlite3_reset(st);
        if (rc != SQLITE_DONE && errors++ < 3)
            fprintf(stderr, "  expression %s: %s\n", m, sqlite3_errmsg(db));
        ok++;
    }
    NF_CHECK_EQ(errors, 0u);
    NF_CHECK(ok > 5000);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The index's tokenizer (word pairs, search_tok.h) against FTS5 with plain unicode61 as the
 * reference model: over 300 generated rows of a small vocabulary (so phrases repeat, overlap and
 * cross each other; accents folded; a word of 150 bytes; the last word, a combining mark alone,
 * is a word to the query parser but no token to unicode61) and 1,500 generated queries (words,
 * phrases of up to 5 words, exclusions, through nf_search_query_parse and _match), both tables
 * find the same rows, highlight the same words in both columns, cut the same snippets and count
 * the same row lengths; and the scan's expression (phrases marked: their pairs alone) finds the
 * same rows with the same bm25 as the query's own. */
static const char *const PAIR_WORDS[] = {
    "a",
    "b",
    "c",
    "the",
    "of",
    "harbour",
    "Harbour",
    "h\xc3\xa4rbour",
    "flood",
    "x",
    "y",
    "caf\xc3\xa9",
    "CAFE",
    "1",
    "22",
    "\xe6\xbc\xa2\xe5\xad\x97",
    "\xc3\x9c\xc3\xb1",
    "\xcc\x81",
};

static void random_words(uint64_t *seed, char *out, size_t cap, unsigned min, unsigned max,
                         const char *long_word)
{
    static const char *const seps[] = {" ", " ", ", ", " - ", ". ", "\xe2\x80\x94"};
    unsigned n = min + (unsigned)(nf_test_rand(seed) % (max - min + 1));
    size_t len = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        const char *w =
            nf_test_rand(seed) % 40 == 0
                ? long_word
                : PAIR_WORDS[nf_test_rand(seed) % (sizeof PAIR_WORDS / sizeof *PAIR_WORDS)];
        len +=
            (size_t)snprintf(out + len, cap - len, "%s%s",
                             i ? seps[nf_test_rand(seed) % (sizeof seps / sizeof *seps)] : "", w);
        if (len >= cap)
            break;
    }
}

static void test_pairs_property(void)
{
    sqlite3 *db = memory_db("CREATE VIRTUAL TABLE ref USING fts5(title, summary, topics, id "
                            "UNINDEXED, tokenize = 'unicode61 remove_diacritics 2');"
                            "CREATE VIRTUAL TABLE pairs USING fts5(title, summary, topics, id "
                            "UNINDEXED, tokenize = '" NF_SEARCH_TOKENIZER "');");
    NF_REQUIRE(db);
    char long_word[151];
    for (int i = 0; i < 75; i++)
        memcpy(long_word + 2 * i, "\xc3\xa4", 2);
    long_word[150] = '\0';
    uint64_t seed = 7;
    sqlite3_stmt *put[2], *find[2], *size[2];
    const char *tables[2] = {"ref", "pairs"};
    for (int t = 0; t < 2; t++) {
        char sql[400];
        snprintf(
            sql, sizeof sql,
            "INSERT INTO %s(rowid, title, summary, topics, id) VALUES (?1, ?2, ?3, 't1 t2', 0)",
            tables[t]);
        NF_REQUIRE(sqlite3_prepare_v2(db, sql, -1, &put[t], NULL) == SQLITE_OK);
        snprintf(sql, sizeof sql,
                 "SELECT rowid, highlight(%s, 0, '[', ']'), highlight(%s, 1, '[', ']'),"
                 " snippet(%s, 1, '[', ']', '...', 8) FROM %s WHERE %s MATCH ?1 ORDER BY rowid",
                 tables[t], tables[t], tables[t], tables[t], tables[t]);
        NF_REQUIRE(sqlite3_prepare_v2(db, sql, -1, &find[t], NULL) == SQLITE_OK);
        snprintf(sql, sizeof sql, "SELECT rowid, sz FROM %s_docsize ORDER BY rowid", tables[t]);
        NF_REQUIRE(sqlite3_prepare_v2(db, sql, -1, &size[t], NULL) == SQLITE_OK);
    }
    for (int row = 1; row <= 300; row++) {
        char title[400], summary[1200];
        random_words(&seed, title, sizeof title, 0, 8, long_word);
        random_words(&seed, summary, sizeof summary, 1, 40, long_word);
        for (int t = 0; t < 2; t++) {
            sqlite3_bind_int(put[t], 1, row);
            sqlite3_bind_text(put[t], 2, title, -1, SQLITE_STATIC);
            sqlite3_bind_text(put[t], 3, summary, -1, SQLITE_STATIC);
            NF_REQUIRE(sqlite3_step(put[t]) == SQLITE_DONE);
            sqlite3_reset(put[t]);
        }
    }
    unsigned queries = 0, found = 0, differ = 0, phrases = 0, marked_differ = 0, marked_rows = 0;
    sqlite3_stmt *rank[2];
    for (int t = 0; t < 2; t++)
        NF_REQUIRE(sqlite3_prepare_v2(db,
                                      "SELECT rowid, bm25(pairs) FROM pairs WHERE pairs MATCH ?1"
                                      " ORDER BY rowid",
                                      -1, &rank[t], NULL) == SQLITE_OK);
    for (int i = 0; i < 1500; i++) {
        char text[300], err[256], m[NF_SEARCH_MATCH_MAX];
        random_words(&seed, text, sizeof text, 1, 5, long_word);
        /* quotes and exclusions at word boundaries */
        for (char *c = text; *c; c++)
            if (*c == ' ' && nf_test_rand(&seed) % 3 == 0)
                *c = nf_test_rand(&seed) % 4 == 0 ? '-' : '"';
        char q[310];
        snprintf(q, sizeof q, "%s%s", nf_test_rand(&seed) % 2 ? "\"" : "", text);
        if (nf_search_query_parse(q, strlen(q), &g_q, err, sizeof err) != 0)
            continue;
        NF_REQUIRE(nf_search_query_match(&g_q, NULL, m, sizeof m) > 0);
        for (unsigned t = 0; t < g_q.n; t++)
            phrases += g_q.t[t].phrase && strchr(g_q.t[t].text, ' ') != NULL;
        queries++;
        for (int t = 0; t < 2; t++)
            sqlite3_bind_text(find[t], 1, m, -1, SQLITE_STATIC);
        for (;;) {
            int r0 = sqlite3_step(find[0]), r1 = sqlite3_step(find[1]);
            if (r0 != r1) {
                if (differ++ < 5)
                    fprintf(stderr, "  %s: one table has more rows (%d %d)\n", m, r0, r1);
                break;
            }
            if (r0 != SQLITE_ROW) {
                NF_CHECK_EQ(r0, SQLITE_DONE);
                break;
            }
            found++;
            bool same = sqlite3_column_int(find[0], 0) == sqlite3_column_int(find[1], 0);
            for (int c = 1; c <= 3 && same; c++)
                same = strcmp((const char *)sqlite3_column_text(find[0], c),
                              (const char *)sqlite3_column_text(find[1], c)) == 0;
            if (!same) {
                if (differ++ < 5)
                    fprintf(stderr, "  %s: row %d %s | %s\n   against row %d %s | %s\n", m,
                            sqlite3_column_int(find[0], 0), sqlite3_column_text(find[0], 2),
                            sqlite3_column_text(find[0], 3), sqlite3_column_int(find[1], 0),
                            sqlite3_column_text(find[1], 2), sqlite3_column_text(find[1], 3));
                break;
            }
        }
        sqlite3_reset(find[0]);
        sqlite3_reset(find[1]);
        /* The scan's expression (phrases as their pairs alone): the same rows, the same bm25. */
        static nf_search_query_t mq;
        static char marked[sizeof mq.buf + 2 * NF_SEARCH_TERMS_MAX + 2], mm[NF_SEARCH_MATCH_MAX];
        nf_search_mark_phrases(&g_q, &mq, marked, sizeof marked);
        NF_REQUIRE(nf_search_query_match(&mq, NULL, mm, sizeof mm) > 0);
        sqlite3_bind_text(rank[0], 1, m, -1, SQLITE_STATIC);
        sqlite3_bind_text(rank[1], 1, mm, -1, SQLITE_STATIC);
        for (;;) {
            int r0 = sqlite3_step(rank[0]), r1 = sqlite3_step(rank[1]);
            if (r0 != r1 ||
                (r0 == SQLITE_ROW &&
                 (sqlite3_column_int(rank[0], 0) != sqlite3_column_int(rank[1], 0) ||
                  sqlite3_column_double(rank[0], 1) != sqlite3_column_double(rank[1], 1)))) {
                if (marked_differ++ < 5)
                    fprintf(stderr, "  %s against %s: other rows or scores\n", m, mm);
                break;
            }
            if (r0 != SQLITE_ROW)
                break;
            marked_rows++;
        }
        sqlite3_reset(rank[0]);
        sqlite3_reset(rank[1]);
    }
    fprintf(stderr, "  %u queries (%u phrases), %u rows found, %u by the marked expressions\n",
            queries, phrases, found, marked_rows);
    NF_CHECK_EQ(differ, 0u);
    NF_CHECK_EQ(marked_differ, 0u);
    NF_CHECK(marked_rows == found);
    NF_CHECK(queries > 900);
    NF_CHECK(phrases > 300);
    NF_CHECK(found > 10000);
    unsigned rows = 0;
    while (sqlite3_step(size[0]) == SQLITE_ROW && sqlite3_step(size[1]) == SQLITE_ROW) {
        NF_CHECK_EQ(sqlite3_column_int(size[0], 0), sqlite3_column_int(size[1], 0));
        NF_CHECK(sqlite3_column_bytes(size[0], 1) == sqlite3_column_bytes(size[1], 1) &&
                 memcmp(sqlite3_column_blob(size[0], 1), sqlite3_column_blob(size[1], 1),
                        (size_t)sqlite3_column_bytes(size[0], 1)) == 0);
        rows++;
    }
    NF_CHECK_EQ(rows, 300u);
    for (int t = 0; t < 2; t++) {
        sqlite3_finalize(put[t]);
        sqlite3_finalize(find[t]);
        sqlite3_finalize(size[t]);
        sqlite3_finalize(rank[t]);
    }
    sqlite3_close(db);
}

/* ------------------------------------------------------------------------------ the index */

static int64_t g_now, g_ingested; /* put_article's articles are ingested at g_ingested */
static bool g_unlogged; /* put_article writes no search log entry (as versions before it did) */

/* One article into b the way dedup writes it at the cut: metadata (and recent entries), its
 * search log entry (cut at cut_ms), its topic vector. */
static void put_article(nf_store_batch_t *b, int64_t cut_ms, nf_id128_t id, const char *title,
                        const char *summary, int64_t published_ms, int topic)
{
    char hex[33], pub[40], ing[40];
    nf_cluster_id_hex(id, hex);
    nf_date_format(published_ms, pub, sizeof pub);
    nf_date_format(g_ingested, ing, sizeof ing);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "article_id");
    nf_jw_str(&w, hex);
    nf_jw_key(&w, "url");
    nf_jw_str(&w, "https://example.org/a");
    nf_jw_key(&w, "title");
    nf_jw_str(&w, title);
    nf_jw_key(&w, "source_id");
    nf_jw_str(&w, "s1");
    nf_jw_key(&w, "published_at");
    nf_jw_str(&w, pub);
    nf_jw_key(&w, "ingested_at");
    nf_jw_str(&w, ing);
    nf_jw_key(&w, "summary");
    nf_jw_str(&w, summary);
    nf_jw_obj_close(&w);
    NF_REQUIRE(!w.failed);
    nf_article_blob_t *a = calloc(1, sizeof *a + w.len + 1);
    NF_REQUIRE(a);
    a->id = id;
    memcpy(a->article_id, hex, 33);
    a->ingested_ms = g_ingested;
    a->len = w.len;
    memcpy(a->json, w.buf, w.len);
    nf_jw_free(&w);
    if (topic >= 0) {
        a->topics.n = 1;
        a->topics.t[0] = (nf_topic_weight_t){.topic = (uint16_t)topic, .weight = 1.0};
    }
    uint16_t kg = (uint16_t)(id.hi % 256);
    NF_REQUIRE(nf_serve_put_article(b, kg, a, TTL_MS) == 0);
    unsigned char key[NF_SERVE_META_KEY_LEN], exp[8 + NF_TOPICS_ENC_MAX];
    nf_kstate_encode_key(kg, id, key);
    nf_put_le64(exp, (uint64_t)(g_ingested + TTL_MS));
    if (!g_unlogged)
        nf_serve_put_search(b, cut_ms, key, exp);
    int n = nf_interest_topics_encode(&a->topics, exp + 8, NF_TOPICS_ENC_MAX);
    NF_REQUIRE(n >= 0);
    nf_store_batch_put(b, NF_KIND_ARTICLE_TOPICS, key, sizeof key, exp, 8 + (size_t)n);
    free(a);
}

static const char *const g_words[] = {
    "market", "policy", "league",   "weather", "harbor", "council", "energy", "stadium",
    "vote",   "orbit",  "festival", "bridge",  "tariff", "flood",   "engine", "museum"};

static int64_t g_market_ms[400]; /* when each filler article naming "market" was published */
static size_t g_market;

/* 400 articles of filler (none with the planted words) and the planted ones, in epoch 1. */
static void load_corpus(nf_store_t *st)
{
    nf_store_batch_t *b = nf_store_batch_new();
    NF_REQUIRE(b);
    uint64_t seed = 7;
    for (uint64_t i = 0; i < 400; i++) {
        char title[128], summary[256];
        int tl = 0, sl = 0;
        for (int k = 0; k < 6; k++)
            tl += snprintf(title + tl, sizeof title - (size_t)tl, "%s ",
                           g_words[nf_test_rand(&seed) % 16]);
        for (int k = 0; k < 20; k++)
            sl += snprintf(summary + sl, sizeof summary - (size_t)sl, "%s ",
                           g_words[nf_test_rand(&seed) % 16]);
        int64_t published = g_now - (int64_t)(nf_test_rand(&seed) % (6 * DAY_MS));
        put_article(b, g_now - 1000, (nf_id128_t){i + 1000, i}, title, summary, published,
                    (int)(i % 5));
        if (strstr(title, "market") || strstr(summary, "market"))
            g_market_ms[g_market++] = published;
    }
    /* Planted: the zebra articles. 1 and 2 alike but for age; 3 in the summary only (title
     * weighs more); 4 names the serengeti; 5 is in topic 9; 6 was ingested before the
     * retention. */
    put_article(b, g_now - 900, (nf_id128_t){1, 1}, "Zebra migration crosses the river",
                "Herds move north.", g_now - 2 * HOUR_MS, 1);
    put_article(b, g_now - 900, (nf_id128_t){2, 2}, "Zebra migration crosses the river",
                "Herds move north.", g_now - 30 * HOUR_MS, 1);
    put_article(b, g_now - 900, (nf_id128_t){3, 3}, "Herds on the move",
                "A zebra migration in the plains, seen from above.", g_now - 2 * HOUR_MS, 1);
    put_article(b, g_now - 900, (nf_id128_t){4, 4}, "Serengeti: zebra migration begins",
                "In the serengeti the zebra herds gather.", g_now - 3 * HOUR_MS, 2);
    put_article(b, g_now - 900, (nf_id128_t){5, 5}, "Zebra <crossing> & \"safety\" rules",
                "Migration of zebra crossings in town.", g_now - 5 * HOUR_MS, 9);
    g_ingested = g_now - 8 * DAY_MS; /* its metadata has expired: not indexed */
    put_article(b, g_now - 900, (nf_id128_t){6, 6}, "Zebra migration of last week", "Old news.",
                g_now - 8 * DAY_MS, 1);
    g_ingested = g_now;
    /* 40 okapi articles published in one millisecond (more than the rowid's 32 slots: the
     * rest move to the next one), one of them longer than the rowid can say (its length is
     * FTS5's docsize). */
    char longsum[2048];
    int ll = 0;
    for (int k = 0; k < 150; k++)
        ll += snprintf(longsum + ll, sizeof longsum - (size_t)ll, "%s ", k % 50 ? "word" : "okapi");
    for (uint64_t i = 0; i < 40; i++)
        put_article(b, g_now - 800, (nf_id128_t){5000 + i, 64 * i}, "Okapi sighted",
                    i == 7 ? longsum : "A rare okapi.", g_now - HOUR_MS, 3);
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 1) == 0);
}

static bool keep_all(void *arg, const nf_search_hit_t *h)
{
    (void)arg;
    (void)h;
    return true;
}

static bool keep_odd(void *arg, const nf_search_hit_t *h)
{
    (*(unsigned *)arg)++;
    return h->id.lo % 2 == 1;
}

static nf_search_result_t g_res;

static int search(nf_search_t *s, const char *q, int topic, int64_t since, unsigned limit)
{
    nf_search_result_free(&g_res);
    if (parse(q) != 0)
        abort();
    char err[256];
    int r =
        nf_search_run(s, &g_q, topic, since, g_now, limit, keep_all, NULL, &g_res, err, sizeof err);
    if (r != 0 && r != -EAGAIN) /* -EAGAIN: not open yet (503), which test_index waits out */
        fprintf(stderr, "  search %s: %s\n", q, err);
    return r;
}

static uint64_t hit(size_t i)
{
    return i < g_res.n ? g_res.hits[i].id.lo : 999999;
}

/* Waits (5 s at most) until the index has read the view of `epoch`. */
static bool wait_epoch(nf_search_t *s, uint64_t epoch)
{
    for (int i = 0; i < 500; i++) {
        uint64_t n, e;
        nf_search_status(s, &n, &e);
        if (e == epoch)
            return true;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* A metric's value in the rendered registry (series: name{labels} as rendered), or -1. */
static double metric(const char *series)
{
    char *text = NULL;
    if (nf_metrics_render(&text) < 0)
        abort();
    double v = -1;
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') {
            v = strtod(p + n + 1, NULL);
            break;
        }
    free(text);
    return v;
}

/* sql prepared on the index file at path (read-only, with the index's tokenizer); the caller
 * finalizes it and closes its connection (close_stmt). */
static sqlite3_stmt *index_stmt(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        nf_search_tokenizer_register(db) != SQLITE_OK ||
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        abort();
    return st;
}

static void close_stmt(sqlite3_stmt *st)
{
    sqlite3 *db = sqlite3_db_handle(st);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* g_res's hit i's id, as the index's id column holds it. */
static void hit_id(size_t i, unsigned char idb[16])
{
    nf_put_be64(idb, g_res.hits[i].id.hi);
    nf_put_be64(idb + 8, g_res.hits[i].id.lo);
}

/* How many of g_res's hits (a one-word query's) have the relevance FTS5's bm25 gives. */
static unsigned same_as_bm25(const char *path, const char *word)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT -bm25(fts, 4.0, 1.0, 0.0) FROM fts WHERE fts MATCH '\"%s\"' AND id = ?1",
             word);
    sqlite3_stmt *bs = index_stmt(path, sql);
    unsigned same = 0;
    for (size_t i = 0; i < g_res.n; i++) {
        unsigned char idb[16];
        hit_id(i, idb);
        sqlite3_bind_blob(bs, 1, idb, 16, SQLITE_STATIC);
        if (sqlite3_step(bs) == SQLITE_ROW &&
            fabs(sqlite3_column_double(bs, 0) - g_res.hits[i].relevance) <=
                1e-9 * g_res.hits[i].relevance)
            same++;
        sqlite3_reset(bs);
    }
    close_stmt(bs);
    return same;
}

/* s as search.c's to_html writes a highlight: escaped, char(1)/char(2) as <mark>/</mark>. */
static void marks_html(const unsigned char *s, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (; s && *s && n + 8 < cap; s++) {
        const char *rep = *s == '&'    ? "&amp;"
                          : *s == '<'  ? "&lt;"
                          : *s == '>'  ? "&gt;"
                          : *s == '"'  ? "&quot;"
                          : *s == '\'' ? "&#39;"
                          : *s == 1    ? "<mark>"
                          : *s == 2    ? "</mark>"
                                       : NULL;
        if (rep)
            n += (size_t)snprintf(out + n, cap - n, "%s", rep);
        else
            out[n++] = (char)*s, out[n] = '\0';
    }
}

/* How many of g_res's hits have the title highlight and the snippet FTS5 gives their row alone
 * (the statement search.c ran once per row before it highlighted all rows in one pass). */
static unsigned same_as_per_row(const char *path, const char *q)
{
    char err[256], m[NF_SEARCH_MATCH_MAX];
    nf_search_query_t pq;
    if (nf_search_query_parse(q, strlen(q), &pq, err, sizeof err) != 0 ||
        nf_search_query_match(&pq, NULL, m, sizeof m) < 0)
        abort();
    sqlite3_stmt *st = index_stmt(path, "SELECT highlight(fts, 0, char(1), char(2)),"
                                        " snippet(fts, 1, char(1), char(2), '…', 24) FROM fts"
                                        " WHERE fts MATCH ?1 AND id = ?2");
    unsigned same = 0;
    for (size_t i = 0; i < g_res.n; i++) {
        unsigned char idb[16];
        hit_id(i, idb);
        sqlite3_bind_text(st, 1, m, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, idb, 16, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            char t[2048], sn[4096];
            marks_html(sqlite3_column_text(st, 0), t, sizeof t);
            marks_html(sqlite3_column_text(st, 1), sn, sizeof sn);
            same += strcmp(t, g_res.hits[i].title_html) == 0 &&
                    strcmp(sn, g_res.hits[i].snippet_html) == 0;
        }
        sqlite3_reset(st);
    }
    close_stmt(st);
    return same;
}

static nf_search_t *start_scan(nf_store_t *st, const char *path, unsigned scan_max)
{
    nf_search_opts_t o = {.store = st,
                          .scan_max = scan_max,
                          .path = path,
                          .retention_ms = TTL_MS,
                          .max_articles = 100000,
                          .memory_mb = 8,
                          .readers = 2,
                          .poll_ms = 10};
    char err[256];
    nf_search_t *s = nf_search_start(&o, err, sizeof err);
    if (!s)
        abort();
    return s;
}

static nf_search_t *start(nf_store_t *st, const char *path)
{
    return start_scan(st, path, 0);
}

static int by_newest(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* A test's state in a directory of its own (dir; *st), the index file's path beside it (path),
 * a fresh metrics registry and the articles' clock at now. */
static void open_state(const char *name, char dir[256], char path[300], nf_store_t **st)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    NF_REQUIRE(nf_teststore_tmpdir(name, dir, 256));
    snprintf(path, 300, "%s/search.db", dir);
    NF_REQUIRE((*st = nf_teststore_open(dir)) != NULL);
    g_now = g_ingested = nf_wall_ms();
}

static void close_state(nf_store_t *st, const char *dir)
{
    nf_store_close(st);
    nf_teststore_rmtree(dir);
    nf_metrics_shutdown();
}

static void test_index(void)
{
    char dir[256], path[300];
    nf_store_t *st = NULL;
    open_state("search", dir, path, &st);
    NF_REQUIRE(st);
    load_corpus(st);
    nf_search_t *s = start(st, path);
    /* While the index is rebuilt, no answer says it reflects epoch 1 without epoch 1's articles
     * (the writer publishes an epoch only after committing its view). */
    unsigned early = 0, answered_at_1 = 0;
    for (int i = 0; i < 5000 && answered_at_1 < 3; i++) {
        int r = search(s, "zebra migration", -1, 0, 20);
        NF_REQUIRE(r == 0 || r == -EAGAIN);
        if (r == 0 && g_res.epoch == 1) {
            answered_at_1++;
            early += g_res.n != 5;
        }
    }
    NF_CHECK_EQ(early, 0u);
    NF_REQUIRE(wait_epoch(s, 1));
    uint64_t articles, epoch;
    nf_search_status(s, &articles, &epoch);
    NF_CHECK_EQ(articles, 445u); /* 6 is past the retention */
    /* The state had articles before the index existed: a rebuild, for want of the file. */
    NF_CHECK_EQ(metric("newsflow_search_rebuilds_total{reason=\"missing\"}"), 1.0);

    /* The planted ones, title matches first, then the summary match; 1 before 2 (newer). */
    NF_CHECK_EQ(search(s, "zebra migration", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 5u);
    NF_CHECK_EQ(hit(0), 1u);
    NF_CHECK(g_res.n == 5 && g_res.hits[0].score > g_res.hits[1].score);
    NF_CHECK_EQ(g_res.epoch, 1u);
    NF_CHECK_EQ(g_res.matches, 5u);
    bool two_after_one = false;
    for (size_t i = 1; i < g_res.n; i++)
        two_after_one |= hit(i) == 2;
    NF_CHECK(two_after_one);
    /* The same relevance, recency decides: 1 and 2 differ only by age. */
    for (size_t i = 0; i < g_res.n; i++)
        if (hit(i) == 2)
            NF_CHECK(g_res.hits[0].relevance == g_res.hits[i].relevance);
    /* Highlights: marked, escaped; every hit's as FTS5 gives its row alone. */
    NF_CHECK_STR(g_res.hits[0].title_html,
                 "<mark>Zebra</mark> <mark>migration</mark> crosses the river");
    NF_CHECK_EQ(same_as_per_row(path, "zebra migration"), 5u);
    NF_CHECK_EQ(search(s, "crossing safety", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 1u);
    NF_CHECK_STR(g_res.n ? g_res.hits[0].title_html : "",
                 "Zebra &lt;<mark>crossing</mark>&gt; &amp; &quot;<mark>safety</mark>&quot; rules");

    /* A term the tokenizer finds no token in is left out, not an AND that matches nothing;
     * a query of nothing else is refused. */
    NF_CHECK_EQ(search(s, "zebra migration \xcc\x81 \xe2\x80\x94", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 5u);
    NF_CHECK_EQ(g_res.dropped, 2u);
    nf_search_result_free(&g_res);
    char err[256];
    NF_REQUIRE(parse("\xe2\x80\x94 \xf0\x9f\x98\x80") == 0);
    NF_CHECK_EQ(nf_search_run(s, &g_q, -1, 0, g_now, 20, keep_all, NULL, &g_res, err, sizeof err),
                -EINVAL);
    /* Phrase: in order only ("migration zebra" is in none; "zebra migration" in 1-4, not 5). */
    NF_CHECK_EQ(search(s, "\"migration zebra\"", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 0u);
    NF_CHECK_EQ(search(s, "\"zebra migration\"", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 4u);
    NF_CHECK_EQ(same_as_per_row(path, "\"zebra migration\""), 4u);
    /* Exclusion. */
    NF_CHECK_EQ(search(s, "zebra -serengeti", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 4u);
    for (size_t i = 0; i < g_res.n; i++)
        NF_CHECK(hit(i) != 4);
    /* Topic, since. */
    NF_CHECK_EQ(search(s, "zebra", 9, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 1u);
    NF_CHECK_EQ(hit(0), 5u);
    NF_CHECK_EQ(search(s, "zebra", -1, g_now - 4 * HOUR_MS, 20), 0);
    NF_CHECK_EQ(g_res.n, 3u); /* 1, 3 and 4: not 2 (30 h) or 5 (5 h) */
    NF_CHECK_EQ(search(s, "zebra", -1, g_now + HOUR_MS, 20), 0);
    NF_CHECK_EQ(g_res.n, 0u);
    /* Limit, and what keep refuses is skipped. */
    NF_CHECK_EQ(search(s, "zebra", -1, 0, 2), 0);
    NF_CHECK_EQ(g_res.n, 2u);
    unsigned asked = 0;
    nf_search_result_free(&g_res);
    NF_REQUIRE(parse("zebra") == 0);
    NF_CHECK_EQ(nf_search_run(s, &g_q, -1, 0, g_now, 20, keep_odd, &asked, &g_res, err, sizeof err),
                0);
    NF_CHECK_EQ(asked, 5u);
    NF_CHECK_EQ(g_res.n, 3u); /* 1, 3, 5 */
    /* Filler: a common word matches hundreds, scored and capped at the best. */
    NF_CHECK_EQ(search(s, "market", -1, 0, 100), 0);
    NF_CHECK_EQ(g_res.n, 100u);
    NF_CHECK(g_res.matches > 100);
    /* The relevance of a one-word query is FTS5's own bm25 (the document count from the
     * vocabulary is the one bm25 counts; the length from the rowid is FTS5's docsize). A
     * word in most articles has bm25's floor (1e-6) both ways; okapi, below, is rare. */
    NF_CHECK_EQ(same_as_bm25(path, "market"), (unsigned)g_res.n);
    NF_CHECK_EQ(same_as_per_row(path, "market"), (unsigned)g_res.n);
    /* 40 in one millisecond, one of them long: all there, the long one scored alike. */
    NF_CHECK_EQ(search(s, "okapi", -1, 0, 100), 0);
    NF_CHECK_EQ(g_res.n, 40u);
    NF_CHECK_EQ(same_as_bm25(path, "okapi"), 40u);

    /* A later epoch is searchable once the thread has read its view. */
    nf_store_batch_t *b = nf_store_batch_new();
    put_article(b, g_now, (nf_id128_t){7, 7}, "Quokka census", "Counted. An okapi too.", g_now, 1);
    { /* logged twice in the epoch (a retried write): indexed once, in one transaction */
        unsigned char qk[NF_SERVE_META_KEY_LEN], qexp[8];
        nf_kstate_encode_key(7, (nf_id128_t){7, 7}, qk);
        nf_put_le64(qexp, (uint64_t)(g_ingested + TTL_MS));
        nf_serve_put_search(b, g_now - 1, qk, qexp);
    }
    NF_REQUIRE(nf_teststore_commit(st, 2, b) == 0);
    nf_store_batch_free(b);
    NF_CHECK_EQ(search(s, "quokka", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 0u); /* committed, but no view of it yet */
    NF_REQUIRE(nf_store_view_publish(st, 2) == 0);
    NF_CHECK(wait_epoch(s, 2));
    NF_CHECK_EQ(search(s, "quokka", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 1u);
    NF_CHECK_EQ(g_res.epoch, 2u);
    /* A document count looked up before (okapi's 40) is not used again once the index has
     * changed: exact on an index this small (search.c, DF_EXACT_BELOW). */
    NF_CHECK_EQ(search(s, "okapi", -1, 0, 100), 0);
    NF_CHECK_EQ(g_res.n, 41u);
    NF_CHECK_EQ(same_as_bm25(path, "okapi"), 41u);
    /* Asked again on the unchanged index: the count comes from the cache, and is counted so. */
    double hits = metric("newsflow_search_doc_counts_total{result=\"hit\"}"),
           misses = metric("newsflow_search_doc_counts_total{result=\"miss\"}");
    NF_CHECK(misses >= 1);
    NF_CHECK_EQ(search(s, "okapi", -1, 0, 100), 0);
    NF_CHECK_EQ(metric("newsflow_search_doc_counts_total{result=\"hit\"}"), hits + 1);
    NF_CHECK_EQ(metric("newsflow_search_doc_counts_total{result=\"miss\"}"), misses);
    nf_search_result_free(&g_res);

    /* What SQLite holds is counted (search.c's allocator: its connections, caches and
     * statements) and given back when the search stops. */
    double held = 0;
    bool same = false; /* the indexer's thread allocates too: a read between two equal counts */
    for (int i = 0; i < 100000 && !same; i++) {
        int64_t before = nf_search_memory_bytes();
        held = metric("newsflow_search_memory_bytes");
        same = held == (double)before && before == nf_search_memory_bytes();
    }
    NF_CHECK(same);
    NF_CHECK(held > 64 * 1024);

    /* Restart: goes on from the cursor, indexing nothing again. */
    nf_search_stop(s);
    NF_CHECK(nf_search_memory_bytes() < held / 2);
    double indexed = metric("newsflow_search_indexed_total");
    s = start(st, path);
    NF_REQUIRE(wait_epoch(s, 2));
    b = nf_store_batch_new();
    put_article(b, g_now + 1, (nf_id128_t){8, 8}, "Wombat burrows", "Dug.", g_now, 1);
    NF_REQUIRE(nf_teststore_commit(st, 3, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 3) == 0);
    NF_CHECK(wait_epoch(s, 3));
    NF_CHECK_EQ(metric("newsflow_search_indexed_total"), indexed + 1);
    nf_search_status(s, &articles, &epoch);
    NF_CHECK_EQ(articles, 447u);
    NF_CHECK_EQ(search(s, "wombat OR quokka", -1, 0, 20), 0); /* OR is a word: nothing */
    NF_CHECK_EQ(g_res.n, 0u);
    nf_search_stop(s);

    /* Corrupt: garbage over the file's pages; rebuilt from the state at the next start. */
    int fd = open(path, O_WRONLY);
    NF_REQUIRE(fd >= 0);
    char junk[8192];
    memset(junk, 0x5A, sizeof junk);
    NF_REQUIRE(pwrite(fd, junk, sizeof junk, 4096) == (ssize_t)sizeof junk);
    NF_REQUIRE(pwrite(fd, junk, 100, 0) == 100);
    close(fd);
    s = start(st, path);
    NF_REQUIRE(wait_epoch(s, 3));
    NF_CHECK_EQ(metric("newsflow_search_rebuilds_total{reason=\"corrupt\"}"), 1.0);
    nf_search_status(s, &articles, &epoch);
    NF_CHECK_EQ(articles, 447u);
    NF_CHECK_EQ(search(s, "zebra migration", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 5u);
    NF_CHECK_EQ(hit(0), 1u);
    nf_search_stop(s);

    /* Behind: the state loses the last epoch's articles (an older checkpoint restored): the
     * index would show an article the state no longer has, so it is rebuilt. */
    b = nf_store_batch_new();
    unsigned char mk[NF_SERVE_META_KEY_LEN], lk[NF_SERVE_SEARCH_KEY_LEN];
    nf_kstate_encode_key(8, (nf_id128_t){8, 8}, mk);
    nf_serve_search_key(g_now + 1, mk, lk);
    nf_store_batch_delete(b, NF_KIND_SEARCH_LOG, lk, sizeof lk);
    nf_store_batch_delete(b, NF_KIND_ARTICLE_META, mk, sizeof mk);
    NF_REQUIRE(nf_teststore_commit(st, 4, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 4) == 0);
    s = start(st, path);
    NF_REQUIRE(wait_epoch(s, 4));
    NF_CHECK_EQ(metric("newsflow_search_rebuilds_total{reason=\"behind\"}"), 1.0);
    NF_CHECK_EQ(search(s, "wombat", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 0u);
    NF_CHECK_EQ(search(s, "quokka", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 1u);
    nf_search_result_free(&g_res);
    nf_search_stop(s);

    /* Missing: the file deleted; rebuilt, and counted as such. */
    unlink(path);
    s = start(st, path);
    NF_REQUIRE(wait_epoch(s, 4));
    NF_CHECK_EQ(metric("newsflow_search_rebuilds_total{reason=\"missing\"}"), 2.0);
    nf_search_status(s, &articles, &epoch);
    NF_CHECK_EQ(articles, 446u);
    nf_search_stop(s);

    /* A capped scan scores the newest matches: with 50 of several hundred, every hit was
     * published no earlier than the 50th newest "market" article. */
    s = start_scan(st, path, 50);
    NF_REQUIRE(wait_epoch(s, 4));
    qsort(g_market_ms, g_market, sizeof *g_market_ms, by_newest);
    NF_REQUIRE(g_market > 100);
    NF_CHECK_EQ(search(s, "market", -1, 0, 100), 0);
    NF_CHECK(g_res.capped);
    NF_CHECK_EQ(g_res.matches, 50u);
    NF_CHECK_EQ(g_res.n, 50u);
    unsigned older = 0;
    for (size_t i = 0; i < g_res.n; i++)
        older += g_res.hits[i].published_ms < g_market_ms[49];
    NF_CHECK_EQ(older, 0u);
    nf_search_result_free(&g_res);
    nf_search_stop(s);

    close_state(st, dir);
}

/* ------------------------------------------------------------------------- a full disk */

/* A VFS over SQLite's default one whose files refuse every write with SQLITE_FULL (what the unix
 * VFS answers to ENOSPC) while g_disk_full is set: the disk fills up and is freed again. */
static sqlite3_vfs *g_base_vfs;
static sqlite3_vfs g_full_vfs;
static _Atomic bool g_disk_full;
static _Atomic unsigned g_refused;

typedef struct {
    sqlite3_file base;
    sqlite3_file *real; /* the default VFS's file, right after this struct */
} full_file_t;

#define REAL(f) (((full_file_t *)(f))->real)

static int ff_close(sqlite3_file *f)
{
    return REAL(f)->pMethods->xClose(REAL(f));
}
static int ff_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int ff_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
    if (atomic_load(&g_disk_full)) {
        atomic_fetch_add(&g_refused, 1);
        return SQLITE_FULL;
    }
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int ff_truncate(sqlite3_file *f, sqlite3_int64 n)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int ff_sync(sqlite3_file *f, int flags)
{
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int ff_size(sqlite3_file *f, sqlite3_int64 *n)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int ff_lock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int ff_unlock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int ff_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int ff_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int ff_sector(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int ff_device(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int ff_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **p)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, p);
}
static int ff_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void ff_shm_barrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int ff_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int ff_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **p)
{
    return REAL(f)->pMethods->xFetch(REAL(f), o, n, p);
}
static int ff_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), o, p);
}

static const sqlite3_io_methods g_full_io = {
    3,           ff_close,       ff_read,      ff_write,   ff_truncate, ff_sync,   ff_size,
    ff_lock,     ff_unlock,      ff_reserved,  ff_control, ff_sector,   ff_device, ff_shm_map,
    ff_shm_lock, ff_shm_barrier, ff_shm_unmap, ff_fetch,   ff_unfetch};

static int ff_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out)
{
    (void)vfs;
    full_file_t *f = (full_file_t *)file;
    f->real = (sqlite3_file *)(f + 1);
    int rc = g_base_vfs->xOpen(g_base_vfs, name, f->real, flags, out);
    /* the wrapper is closed (xClose) only when the real file was opened */
    f->base.pMethods = rc == SQLITE_OK && f->real->pMethods ? &g_full_io : NULL;
    return rc;
}

/* Makes the full-disk VFS SQLite's default (after nf_search_sqlite_init: registering
 * initializes SQLite), or takes it away again. */
static bool full_vfs(bool on)
{
    if (!on)
        return sqlite3_vfs_unregister(&g_full_vfs) == SQLITE_OK;
    g_base_vfs = sqlite3_vfs_find(NULL);
    if (!g_base_vfs)
        return false;
    g_full_vfs = *g_base_vfs; /* the same pAppData: its other methods are the base's */
    g_full_vfs.zName = "nf-test-full";
    g_full_vfs.szOsFile = (int)sizeof(full_file_t) + g_base_vfs->szOsFile;
    g_full_vfs.xOpen = ff_open;
    g_full_vfs.pNext = NULL;
    return sqlite3_vfs_register(&g_full_vfs, 1) == SQLITE_OK;
}

/* Lines of the file at path that contain both a and b ("" matches any). */
static unsigned lines_with(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned n = 0;
    char line[8192];
    while (fgets(line, sizeof line, f))
        n += strstr(line, a) && strstr(line, b);
    fclose(f);
    return n;
}

/* The index's disk fills up (issue 36): the writer's SQLITE_FULL is logged once, as SQLite
 * says it (not the "cannot rollback - no transaction is active" of the ROLLBACK that followed
 * it), counted in newsflow_search_write_errors_total and retried with a back-off while searches
 * answer from what the index holds; once the disk has room again the index catches up, and
 * says so. */
static void test_disk_full(void)
{
    char dir[256], path[300], logpath[320];
    nf_store_t *st = NULL;
    open_state("search-full", dir, path, &st);
    NF_REQUIRE(st);
    snprintf(logpath, sizeof logpath, "%s/log.jsonl", dir);
    nf_store_batch_t *b = nf_store_batch_new();
    put_article(b, g_now - 10, (nf_id128_t){1, 1}, "Zebra migration", "Herds.", g_now, 1);
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 1) == 0);
    NF_REQUIRE(full_vfs(true));
    int lfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    NF_REQUIRE(lfd >= 0);
    nf_log_set_fd(lfd);

    nf_search_t *s = start(st, path);
    NF_CHECK(wait_epoch(s, 1));
    atomic_store(&g_disk_full, true);
    b = nf_store_batch_new();
    put_article(b, g_now, (nf_id128_t){2, 2}, "Quokka census", "Counted.", g_now, 1);
    NF_REQUIRE(nf_teststore_commit(st, 2, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 2) == 0);
    /* Three failed tries of the new view (the bound only turns a hang into a failure). */
    for (int i = 0; i < 12000 && metric("newsflow_search_write_errors_total") < 3; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    double failed = metric("newsflow_search_write_errors_total");
    NF_CHECK(failed >= 3);
    NF_CHECK(atomic_load(&g_refused) > 0);
    /* Searches go on, from what the index holds. */
    NF_CHECK_EQ(search(s, "zebra", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 1u);
    NF_CHECK_EQ(g_res.epoch, 1u);
    NF_CHECK_EQ(search(s, "quokka", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 0u);

    atomic_store(&g_disk_full, false); /* room again: the index catches up */
    bool caught_up = false;
    for (int i = 0; i < 12000 && !caught_up; i++) {
        uint64_t n, e;
        nf_search_status(s, &n, &e);
        if (!(caught_up = e == 2))
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    NF_CHECK(caught_up);
    NF_CHECK_EQ(search(s, "quokka", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 1u);
    nf_search_result_free(&g_res);
    nf_search_stop(s);
    nf_log_set_fd(2);
    close(lfd);

    /* Logged once, in SQLite's words; the end of the streak too; no "no transaction". */
    NF_CHECK_EQ(lines_with(logpath, "\"level\":\"error\"", "the search index cannot be written"),
                1u);
    NF_CHECK_EQ(lines_with(logpath, "the search index cannot be written: its disk is full",
                           "database or disk is full"),
                1u);
    NF_CHECK_EQ(lines_with(logpath, "no transaction is active", ""), 0u);
    NF_CHECK_EQ(lines_with(logpath, "the search index is written again", ""), 1u);
    NF_CHECK(metric("newsflow_search_write_errors_total") >= failed);

    NF_CHECK(full_vfs(false));
    close_state(st, dir);
}

/* Removes the index's record of its pass over the article state, as in a file an earlier
 * version made. */
static void forget_meta_fill(const char *path)
{
    sqlite3 *db = NULL;
    NF_REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    NF_REQUIRE(sqlite3_exec(db, "DELETE FROM kv WHERE k = 'meta_filled'", NULL, NULL, NULL) ==
               SQLITE_OK);
    NF_CHECK_EQ(sqlite3_changes(db), 1);
    sqlite3_close(db);
}

/* Articles an earlier version ingested before it wrote the search log (issue 37: never
 * searchable after an upgrade) are indexed from the article state, in a new index file and in
 * one an earlier version made; once, then not scanned again. */
static void test_unlogged(void)
{
    char dir[256], path[300];
    nf_store_t *st = NULL;
    open_state("search-unlogged", dir, path, &st);
    NF_REQUIRE(st);
    nf_store_batch_t *b = nf_store_batch_new();
    g_unlogged = true;
    put_article(b, g_now - 50, (nf_id128_t){21, 1}, "Narwhal tusks", "Sensing.", g_now - 50, 1);
    put_article(b, g_now - 40, (nf_id128_t){22, 2}, "Narwhal pods", "Counted.", g_now - 40, 2);
    g_unlogged = false;
    put_article(b, g_now - 30, (nf_id128_t){23, 3}, "Narwhal songs", "Heard.", g_now - 30, 1);
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 1) == 0);

    /* A new file: the log names one article, the state holds three. */
    double unlogged0 = metric("newsflow_search_rebuilds_total{reason=\"unlogged\"}");
    unlogged0 = unlogged0 < 0 ? 0 : unlogged0; /* registered by the first start */
    nf_search_t *s = start(st, path);
    NF_REQUIRE(wait_epoch(s, 1));
    uint64_t articles, epoch;
    nf_search_status(s, &articles, &epoch);
    NF_CHECK_EQ(articles, 3u);
    NF_CHECK_EQ(search(s, "narwhal", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 3u);
    NF_CHECK_EQ(metric("newsflow_search_rebuilds_total{reason=\"unlogged\"}"), unlogged0 + 1);
    nf_search_stop(s);

    /* A file an earlier version made (no record of the pass) and one more unlogged article. */
    b = nf_store_batch_new();
    g_unlogged = true;
    put_article(b, g_now - 20, (nf_id128_t){24, 4}, "Narwhal winters", "Ice.", g_now - 20, 1);
    g_unlogged = false;
    NF_REQUIRE(nf_teststore_commit(st, 2, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 2) == 0);
    forget_meta_fill(path);
    s = start(st, path);
    NF_REQUIRE(wait_epoch(s, 2));
    NF_CHECK_EQ(search(s, "narwhal winters", -1, 0, 20), 0);
    NF_CHECK_EQ(g_res.n, 1u);
    nf_search_status(s, &articles, &epoch);
    NF_CHECK_EQ(articles, 4u);
    NF_CHECK_EQ(metric("newsflow_search_rebuilds_total{reason=\"unlogged\"}"), unlogged0 + 2);
    nf_search_stop(s);

    /* Once per file: a later start does not scan the state again (nothing to add, not counted). */
    s = start(st, path);
    NF_REQUIRE(wait_epoch(s, 2));
    NF_CHECK_EQ(metric("newsflow_search_rebuilds_total{reason=\"unlogged\"}"), unlogged0 + 2);
    nf_search_result_free(&g_res);
    nf_search_stop(s);
    close_state(st, dir);
}

int main(void)
{
    /* Before any connection of the tests: the index's allocator, as the job has it. */
    NF_CHECK(nf_search_sqlite_init());
    NF_RUN(test_syntax);
    NF_RUN(test_syntax_property);
    NF_RUN(test_pairs_property);
    NF_RUN(test_index);
    NF_RUN(test_disk_full);
    NF_RUN(test_unlogged);
    return nf_test_report();
}
