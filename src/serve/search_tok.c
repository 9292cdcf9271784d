/* search_tok.c — see search_tok.h. */
#include "serve/search_tok.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SEP '\x1F'

typedef struct {
    fts5_tokenizer base; /* unicode61's */
    Fts5Tokenizer *inner;
} pairs_t;

typedef int (*token_fn)(void *, int, const char *, int, int, int);

typedef struct {
    void *ctx;
    token_fn emit;
    bool has_prev;
    int pairs; /* emitted (queries) */
    int prev_len, prev_start, prev_end;
    char prev[NF_SEARCH_PAIR_MAX];
    char pair[NF_SEARCH_PAIR_MAX];
} pass_t;

/* n cut to at most cap bytes without splitting a UTF-8 sequence. */
static int cut(const char *t, int n, int cap)
{
    if (n <= cap)
        return n;
    while (cap > 0 && ((unsigned char)t[cap] & 0xC0) == 0x80)
        cap--;
    return cap;
}

/* "prev\x1Ft" (cut) in p->pair: its length. */
static int make_pair(pass_t *p, const char *t, int n)
{
    char both[2 * NF_SEARCH_PAIR_MAX + 1];
    memcpy(both, p->prev, (size_t)p->prev_len);
    both[p->prev_len] = SEP;
    int tn = n < NF_SEARCH_PAIR_MAX ? n : NF_SEARCH_PAIR_MAX;
    memcpy(both + p->prev_len + 1, t, (size_t)tn);
    int len = cut(both, p->prev_len + 1 + tn, NF_SEARCH_PAIR_MAX);
    memcpy(p->pair, both, (size_t)len);
    return len;
}

static void keep_prev(pass_t *p, const char *t, int n, int start, int end)
{
    p->prev_len = n < NF_SEARCH_PAIR_MAX ? n : NF_SEARCH_PAIR_MAX; /* the pair is cut anyway */
    memcpy(p->prev, t, (size_t)p->prev_len);
    p->prev_start = start;
    p->prev_end = end;
    p->has_prev = true;
}

static int doc_token(void *arg, int flags, const char *t, int n, int start, int end)
{
    pass_t *p = arg;
    if (flags & FTS5_TOKEN_COLOCATED) /* not unicode61's, but another's: passed on */
        return p->emit(p->ctx, flags, t, n, start, end);
    if (p->has_prev) {
        int rc =
            p->emit(p->ctx, FTS5_TOKEN_COLOCATED, p->pair, make_pair(p, t, n), p->prev_start, end);
        if (rc != SQLITE_OK)
            return rc;
    }
    int rc = p->emit(p->ctx, 0, t, n, start, end);
    keep_prev(p, t, n, start, end);
    return rc;
}

static int query_token(void *arg, int flags, const char *t, int n, int start, int end)
{
    pass_t *p = arg;
    if (flags & FTS5_TOKEN_COLOCATED)
        return SQLITE_OK;
    if (p->has_prev) {
        int rc = p->emit(p->ctx, 0, p->pair, make_pair(p, t, n), p->prev_start, end);
        if (rc != SQLITE_OK)
            return rc;
        p->pairs++;
    }
    keep_prev(p, t, n, start, end);
    return SQLITE_OK;
}

static int pairs_tokenize(Fts5Tokenizer *tk, void *ctx, int flags, const char *text, int n,
                          token_fn emit)
{
    pairs_t *pt = (pairs_t *)tk;
    pass_t p = {.ctx = ctx, .emit = emit};
    if (flags & FTS5_TOKENIZE_AUX) /* highlight(), snippet(): they skip colocated tokens */
        return pt->base.xTokenize(pt->inner, ctx, flags, text, n, emit);
    if (!(flags & FTS5_TOKENIZE_QUERY))
        return pt->base.xTokenize(pt->inner, &p, flags, text, n, doc_token);
    bool pairs_only = n > 0 && text[n - 1] == NF_SEARCH_PAIRS_ONLY;
    int rc = pt->base.xTokenize(pt->inner, &p, flags, text, n, query_token);
    if (rc == SQLITE_OK && p.has_prev &&
        !(pairs_only && p.pairs > 0)) /* the last word, or the only one */
        rc = emit(ctx, 0, p.prev, p.prev_len, p.prev_start, p.prev_end);
    return rc;
}

static int pairs_create(void *ud, const char **args, int nargs, Fts5Tokenizer **out)
{
    fts5_api *api = ud;
    static const char *uargs[] = {"remove_diacritics", "2"};
    (void)args, (void)nargs;
    *out = NULL;
    pairs_t *pt = sqlite3_malloc(sizeof *pt);
    if (!pt)
        return SQLITE_NOMEM;
    memset(pt, 0, sizeof *pt);
    void *uud = NULL;
    int rc = api->xFindTokenizer(api, "unicode61", &uud, &pt->base);
    if (rc == SQLITE_OK)
        rc = pt->base.xCreate(uud, uargs, 2, &pt->inner);
    if (rc != SQLITE_OK) {
        sqlite3_free(pt);
        return rc;
    }
    *out = (Fts5Tokenizer *)pt;
    return SQLITE_OK;
}

static void pairs_delete(Fts5Tokenizer *tk)
{
    pairs_t *pt = (pairs_t *)tk;
    if (!pt)
        return;
    if (pt->inner)
        pt->base.xDelete(pt->inner);
    sqlite3_free(pt);
}

fts5_api *nf_search_fts5(sqlite3 *db)
{
    fts5_api *api = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_pointer(st, 1, &api, "fts5_api_ptr", NULL);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return api;
}

int nf_search_tokenizer_register(sqlite3 *db)
{
    fts5_api *api = nf_search_fts5(db);
    if (!api)
        return SQLITE_ERROR;
    fts5_tokenizer t = {pairs_create, pairs_delete, pairs_tokenize};
    return api->xCreateTokenizer(api, NF_SEARCH_TOKENIZER, api, &t, NULL);
}

int nf_search_tokenizer_open(sqlite3 *db, fts5_tokenizer *tok, Fts5Tokenizer **out)
{
    fts5_api *api = nf_search_fts5(db);
    void *ud = NULL;
    *out = NULL;
    if (!api || api->xFindTokenizer(api, NF_SEARCH_TOKENIZER, &ud, tok) != SQLITE_OK)
        return SQLITE_ERROR;
    return tok->xCreate(ud, NULL, 0, out);
}

void nf_search_mark_phrases(const nf_search_query_t *q, nf_search_query_t *m, char *buf, size_t cap)
{
    *m = *q; /* the texts stay q's but the marked ones */
    size_t at = 0;
    for (unsigned i = 0; i < q->n; i++) {
        const char *t = q->t[i].text;
        size_t n = strlen(t);
        if (!strchr(t, ' ') || at + n + 2 > cap)
            continue;
        memcpy(buf + at, t, n);
        buf[at + n] = NF_SEARCH_PAIRS_ONLY;
        buf[at + n + 1] = '\0';
        m->t[i].text = buf + at;
        at += n + 2;
    }
}
