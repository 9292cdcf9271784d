/* fuzz_search_query.c — libFuzzer target for a reader's search text (src/serve/search_query.h):
 * nf_search_query_parse on the bytes, then nf_search_query_match, and the expression run the
 * way src/serve/search.c runs it, against an in-memory FTS5 table of the index's schema
 * (fts5(title, summary, topics, id UNINDEXED), the index's own tokenizer: search_tok.h) holding
 * a few rows.
 *
 * The promise checked: no input reaches FTS5's query language as syntax. Every expression the
 * parser accepts must run: sqlite3_step returns only SQLITE_ROW or SQLITE_DONE, for the scan
 * (bm25, since, limit) and for each row's highlight and snippet, with and without the topic
 * filter. Anything else (a syntax error, "unknown special query", "no such column", ...)
 * abort()s with the input's expression and SQLite's message.
 *
 * Also abort()s when the contract in search_query.h breaks:
 *   - parse: 0 or -EINVAL; -EINVAL for more than NF_SEARCH_Q_MAX bytes; a failure's message is
 *     non-empty and NUL-terminated; the same input parses the same twice;
 *   - a parsed query: at least one positive term, n = positive + excluded, at most
 *     NF_SEARCH_TERMS_MAX of each; a term's text is non-empty, holds no '"', no control byte
 *     and no ASCII punctuation, single spaces only between words (none in a word term), at
 *     most NF_SEARCH_PHRASE_MAX words;
 *   - match: fits NF_SEARCH_MATCH_MAX, returns strlen(out); a smaller buffer gives -ENOSPC
 *     with a NUL-terminated prefix.
 *
 * With NF_FUZZ_SELF_MATCH=1 in the environment, one more (semantic) promise: a parsed query's
 * positive terms find an article made of exactly their own text (with the topic filter on its
 * topic). It fails when the parser keeps as a word a character FTS5's tokenizer drops (a
 * combining mark alone, U+0301): the parser leaves that to the tokenizer on purpose, and
 * search.c (index_terms) drops such terms before the expression is written, which this target
 * does not run; hence opt-in. */
#include "serve/search_query.h"
#include "serve/search_tok.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sqlite3 *db;
static sqlite3_stmt *scan, *snip, *probe_put, *probe_find, *probe_del;
static int self_match;
static const char *current_match;

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_search_query: %s\n  %s\n  expression: %s\n", what, detail ? detail : "",
            current_match ? current_match : "(none)");
    abort();
}

static void require(int ok, const char *what)
{
    if (!ok)
        fail(what, NULL);
}

static void check_rc(int rc, const char *what)
{
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        fail(what, sqlite3_errmsg(db));
}

static void setup(void)
{
    static const char *const sql[] = {
        "CREATE VIRTUAL TABLE fts USING fts5(title, summary, topics, id UNINDEXED,"
        " tokenize = '" NF_SEARCH_TOKENIZER "')",
        "INSERT INTO fts(rowid, title, summary, topics, id) VALUES (4096 * 1795000000000,"
        " 'Harbour cities agree on shared flood defences',"
        " 'Twelve port cities signed a pact to pool engineering work on sea walls.',"
        " 't3 t7', x'00112233445566778899aabbccddeeff')",
        "INSERT INTO fts(rowid, title, summary, topics, id) VALUES (4096 * 1795000001000 + 5,"
        " 'Café naïve résumé: 漢字 Ελλάδα NEAR AND OR NOT title summary',"
        " 'A b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6 7 8 9 "
        "x y z x y z harbour flood Ünïcödé straße ﬁ ǅ',"
        " 't0', x'ffeeddccbbaa99887766554433221100')",
        "INSERT INTO fts(rowid, title, summary, topics, id) VALUES (4096 * 1795000002000 + 9,"
        " '', '', '', x'0102030405060708090a0b0c0d0e0f10')",
        "CREATE VIRTUAL TABLE probe USING fts5(title, summary, topics, id UNINDEXED,"
        " tokenize = '" NF_SEARCH_TOKENIZER "')",
    };
    const char *e = getenv("NF_FUZZ_SELF_MATCH");
    self_match = e && *e && strcmp(e, "0") != 0;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK || nf_search_tokenizer_register(db) != SQLITE_OK)
        fail("sqlite3_open", sqlite3_errmsg(db));
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++)
        if (sqlite3_exec(db, sql[i], NULL, NULL, NULL) != SQLITE_OK)
            fail("setup", sqlite3_errmsg(db));
    /* search.c's statements, with bm25 for nf_rank and without nf_chosen (its own functions). */
    if (sqlite3_prepare_v2(db,
                           "SELECT rowid, bm25(fts, 4.0, 1.0, 0.0) FROM fts WHERE fts MATCH ?1"
                           " AND rowid >= ?2 ORDER BY rowid DESC LIMIT ?3",
                           -1, &scan, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT id, highlight(fts, 0, char(1), char(2)),"
                           " snippet(fts, 1, char(1), char(2), '…', 24)"
                           " FROM fts WHERE fts MATCH ?1 AND rowid >= ?2 AND rowid <= ?3",
                           -1, &snip, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "INSERT INTO probe(rowid, title, summary, topics, id)"
                           " VALUES (7, ?1, '', 't3', x'00')",
                           -1, &probe_put, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT rowid FROM probe WHERE probe MATCH ?1", -1, &probe_find,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "DELETE FROM probe", -1, &probe_del, NULL) != SQLITE_OK)
        fail("prepare", sqlite3_errmsg(db));
}

/* NF_FUZZ_SELF_MATCH: the positive terms find a row of their own text. */
static void check_self_match(const nf_search_query_t *q)
{
    static nf_search_query_t pos;
    static char doc[sizeof q->buf * 2], match[NF_SEARCH_MATCH_MAX];
    pos = *q; /* the terms' text stays in q->buf */
    pos.n = pos.excluded = 0;
    size_t dl = 0;
    for (unsigned i = 0; i < q->n; i++) {
        if (q->t[i].excluded)
            continue;
        pos.t[pos.n++] = q->t[i];
        dl += (size_t)snprintf(doc + dl, sizeof doc - dl, "%s%s", dl ? " | " : "", q->t[i].text);
    }
    require(nf_search_query_match(&pos, "t3", match, sizeof match) > 0, "the positive expression");
    current_match = match;
    sqlite3_bind_text(probe_put, 1, doc, (int)dl, SQLITE_STATIC);
    if (sqlite3_step(probe_put) != SQLITE_DONE)
        fail("the probe row", sqlite3_errmsg(db));
    sqlite3_reset(probe_put);
    sqlite3_bind_text(probe_find, 1, match, -1, SQLITE_STATIC);
    int rc = sqlite3_step(probe_find);
    sqlite3_reset(probe_find);
    sqlite3_step(probe_del);
    sqlite3_reset(probe_del);
    if (rc != SQLITE_ROW)
        fail(rc == SQLITE_DONE ? "the query's own words do not find a row of exactly them "
                                 "(a term FTS5 reads as no token?)"
                               : "the probe query failed",
             rc == SQLITE_DONE ? doc : sqlite3_errmsg(db));
    current_match = NULL;
}

static int is_word_byte(unsigned char c)
{
    if (c < 0x80)
        return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9');
    return 1; /* part of a UTF-8 sequence the parser took as a word character */
}

static void check_query(const nf_search_query_t *q)
{
    require(q->positive >= 1, "a parsed query has a positive term");
    require(q->positive <= NF_SEARCH_TERMS_MAX && q->excluded <= NF_SEARCH_TERMS_MAX,
            "at most NF_SEARCH_TERMS_MAX terms of each sign");
    require(q->n == q->positive + q->excluded, "n = positive + excluded");
    unsigned pos = 0;
    for (unsigned i = 0; i < q->n; i++) {
        const char *t = q->t[i].text;
        size_t len = strlen(t);
        require(len > 0, "a term is not empty");
        require(t >= q->buf && t + len < q->buf + sizeof q->buf, "a term lies in q.buf");
        unsigned words = 1;
        for (size_t j = 0; j < len; j++) {
            unsigned char c = (unsigned char)t[j];
            if (c == ' ') {
                require(j > 0 && j + 1 < len && t[j + 1] != ' ', "single spaces between words");
                words++;
            } else {
                require(is_word_byte(c), "a term holds only word characters and spaces");
            }
        }
        require(q->t[i].phrase || words == 1, "a word term is one word");
        require(words <= NF_SEARCH_PHRASE_MAX, "at most NF_SEARCH_PHRASE_MAX words a phrase");
        pos += !q->t[i].excluded;
    }
    require(pos == q->positive, "positive counts the positive terms");
}

/* The expression run as search.c runs it: every step ROW or DONE. */
static void run(const char *match)
{
    current_match = match;
    sqlite3_bind_text(scan, 1, match, -1, SQLITE_STATIC);
    sqlite3_bind_int64(scan, 2, 0);
    sqlite3_bind_int64(scan, 3, 101);
    sqlite3_int64 rows[8];
    int n = 0, rc;
    while ((rc = sqlite3_step(scan)) == SQLITE_ROW)
        if (n < 8)
            rows[n++] = sqlite3_column_int64(scan, 0);
    check_rc(rc, "the scan failed");
    sqlite3_reset(scan);
    for (int i = 0; i < n; i++) {
        sqlite3_bind_text(snip, 1, match, -1, SQLITE_STATIC);
        sqlite3_bind_int64(snip, 2, rows[i]);
        sqlite3_bind_int64(snip, 3, rows[i]);
        rc = sqlite3_step(snip);
        check_rc(rc, "highlight/snippet failed");
        if (rc == SQLITE_ROW)
            require(sqlite3_column_bytes(snip, 0) == 16, "the row's id");
        sqlite3_reset(snip);
    }
    current_match = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!db)
        setup();
    static nf_search_query_t q, q2;
    char err[256], err2[256];
    memset(err, 0x55, sizeof err);
    int r = nf_search_query_parse((const char *)data, size, &q, err, sizeof err);
    require(r == 0 || r == -EINVAL, "parse returns 0 or -EINVAL");
    require(size <= NF_SEARCH_Q_MAX || r == -EINVAL, "a q longer than NF_SEARCH_Q_MAX is refused");
    int r2 = nf_search_query_parse((const char *)data, size, &q2, err2, sizeof err2);
    require(r2 == r, "the same input parses the same twice");
    if (r != 0) {
        require(memchr(err, '\0', sizeof err) != NULL && err[0] != '\0',
                "a refusal has a NUL-terminated message");
        require(strcmp(err, err2) == 0, "the same message twice");
        return 0;
    }
    check_query(&q);
    require(q2.n == q.n && q2.dropped == q.dropped, "the same terms twice");
    for (unsigned i = 0; i < q.n; i++)
        require(strcmp(q.t[i].text, q2.t[i].text) == 0 && q.t[i].phrase == q2.t[i].phrase &&
                    q.t[i].excluded == q2.t[i].excluded,
                "the same terms twice");

    static char match[NF_SEARCH_MATCH_MAX];
    static const char *const topics[] = {NULL, "t3", "t0", "t63"};
    for (size_t k = 0; k < sizeof topics / sizeof topics[0]; k++) {
        int m = nf_search_query_match(&q, topics[k], match, sizeof match);
        require(m > 0 && (size_t)m < sizeof match && strlen(match) == (size_t)m,
                "the expression fits NF_SEARCH_MATCH_MAX");
        /* A buffer too small by a little: -ENOSPC and a terminated prefix. */
        static char small[NF_SEARCH_MATCH_MAX];
        size_t cap = (size_t)m - (size % (size_t)m);
        memset(small, 'Z', sizeof small);
        int s = nf_search_query_match(&q, topics[k], small, cap);
        require(s == -ENOSPC && memchr(small, '\0', cap) != NULL,
                "a small buffer: -ENOSPC, NUL-terminated");
        run(match);
    }
    if (self_match)
        check_self_match(&q);
    return 0;
}
