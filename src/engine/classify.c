/* classify.c — see classify.h for the contract, the file format and the scoring.
 *
 * Load builds one table of every distinct stem used by a keyword or a phrase (a "term"). A term
 * carries its postings (topic, weight) as a single keyword and the list of phrases that start
 * with it. Classifying a field maps each kept word to its term id (-1: not in the taxonomy), then
 * counts keyword terms and, at each position whose term starts phrases, compares the following
 * term ids. Counts live in per-term and per-phrase arrays of the context, reset through a list
 * of the entries touched, so an article costs O(words + matches), not O(taxonomy). */
#include "engine/classify.h"

#include "algo/hash.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <libstemmer.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED_TERM  0x6e66636c61737369ull /* table hashes */
#define SEED_TAXO  0x7461786f6e6f6d79ull /* nf_classify_taxonomy_hash */
#define MAX_PHRASE 8

typedef struct posting {
    uint16_t topic;
    double weight;
} posting_t;

typedef struct term {
    uint64_t hash;
    uint32_t str; /* offset of the stem in pool */
    uint32_t len;
    uint32_t post, npost; /* postings[post .. post+npost) */
    uint32_t phr, nphr;   /* phrase_by_first[phr .. phr+nphr) */
} term_t;

typedef struct phrase {
    uint32_t tok; /* phrase_toks[tok .. tok+ntok): term ids */
    uint16_t ntok;
    uint16_t topic;
    double weight;
} phrase_t;

/* Open-addressing set of strings: slot = index + 1, 0 = empty; power-of-two size. */
typedef struct strtab {
    uint32_t *slot;
    uint32_t mask;
} strtab_t;

struct nf_classify_taxonomy {
    char language[32];
    double title_weight, min_confidence, min_score;
    unsigned max_labels;
    unsigned ntopics;
    char names[NF_CLASSIFY_MAX_TOPICS][64];
    uint64_t hash;

    char *pool; /* all stems and stop words, not NUL-terminated */
    size_t pool_len, pool_cap;

    term_t *terms;
    uint32_t nterms, terms_cap;
    strtab_t term_tab;

    posting_t *postings;
    uint32_t npostings;
    phrase_t *phrases;
    uint32_t nphrases;
    uint32_t *phrase_toks;
    uint32_t nphrase_toks;
    uint32_t *phrase_by_first;

    /* stop words: (offset, len) into pool */
    uint32_t *stop_off, *stop_len;
    uint32_t nstop, stop_cap;
    strtab_t stop_tab;
};

/* Word -> term id cache, direct-mapped: news text repeats a small vocabulary (Zipf), and a
 * hit skips the stop-word probe and the stemmer, which dominate the cost of a word. The cache
 * only memoizes a pure function of the word, so results never depend on what it holds. */
#define CACHE_SLOTS 4096
#define CACHE_WORD  22
#define ID_STOP     (-2)

typedef struct cache_slot {
    uint64_t hash;
    int32_t id;  /* term id, -1 not in the taxonomy, ID_STOP */
    uint8_t len; /* 0: empty */
    char word[CACHE_WORD];
} cache_slot_t;

struct nf_classify_ctx {
    const nf_classify_taxonomy_t *t;
    struct sb_stemmer *stemmer;
    cache_slot_t *cache;
    int32_t *ids; /* term id per kept word of the current field */
    size_t ids_cap;
    uint32_t *tcount, *bcount;   /* per term: title / body occurrences */
    uint32_t *ptcount, *pbcount; /* per phrase */
    uint32_t *touched, ntouched; /* terms with a nonzero count */
    uint32_t *ptouched, nptouched;
};

/* ---- tokenizer (shared by load and text) ---- */

static bool is_ascii_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Length of the separator starting at s[i] (0 if s[i] can be part of a word). */
static size_t sep_len(const unsigned char *s, size_t n, size_t i)
{
    unsigned char c = s[i];
    if (c < 0x80)
        return is_ascii_word(c) ? 0 : 1;
    /* U+00A0 nbsp, U+00AB/U+00BB guillemets */
    if (c == 0xc2 && i + 1 < n && (s[i + 1] == 0xa0 || s[i + 1] == 0xab || s[i + 1] == 0xbb))
        return 2;
    /* U+2000..U+206F general punctuation: E2 80 xx, E2 81 xx */
    if (c == 0xe2 && i + 2 < n && (s[i + 1] == 0x80 || s[i + 1] == 0x81))
        return 3;
    return 0;
}

/* Apostrophe at s[i]: its length in bytes, or 0. */
static size_t apos_len(const unsigned char *s, size_t n, size_t i)
{
    if (s[i] == '\'')
        return 1;
    if (s[i] == 0xe2 && i + 2 < n && s[i + 1] == 0x80 && s[i + 2] == 0x99)
        return 3;
    return 0;
}

/* Next word of s[*pos..n) lower-cased into buf (NF_CLASSIFY_MAX_WORD bytes); its length, or 0
 * at the end. Words that do not fit are skipped. */
static size_t next_word(const unsigned char *s, size_t n, size_t *pos, char *buf)
{
    size_t i = *pos;
    for (;;) {
        /* skip separators and apostrophes that do not sit inside a word */
        while (i < n) {
            size_t k = sep_len(s, n, i);
            if (!k)
                k = apos_len(s, n, i);
            if (!k)
                break;
            i += k;
        }
        if (i >= n) {
            *pos = n;
            return 0;
        }
        size_t len = 0;
        bool overflow = false;
        while (i < n) {
            size_t a = apos_len(s, n, i);
            if (a) {
                size_t j = i + a;
                if (j >= n || sep_len(s, n, j) || apos_len(s, n, j))
                    break; /* trailing apostrophe ends the word */
                /* possessive 's at the end of a word: drop it */
                if ((s[j] == 's' || s[j] == 'S') &&
                    (j + 1 >= n || sep_len(s, n, j + 1) || apos_len(s, n, j + 1))) {
                    i = j + 1;
                    break;
                }
                i = j; /* inner apostrophe: dropped, word goes on */
                continue;
            }
            if (sep_len(s, n, i))
                break;
            unsigned char c = s[i++];
            if (c >= 'A' && c <= 'Z')
                c = (unsigned char)(c - 'A' + 'a');
            if (len < NF_CLASSIFY_MAX_WORD)
                buf[len++] = (char)c;
            else
                overflow = true;
        }
        if (!overflow && len) {
            *pos = i;
            return len;
        }
    }
}

/* ---- string tables ---- */

static int strtab_init(strtab_t *tab, uint32_t n)
{
    uint32_t size = 16;
    while (size < 2 * n + 2)
        size *= 2;
    tab->slot = calloc(size, sizeof *tab->slot);
    tab->mask = size - 1;
    return tab->slot ? 0 : -ENOMEM;
}

static int pool_add(nf_classify_taxonomy_t *t, const char *s, size_t n, uint32_t *off)
{
    if (t->pool_len + n > t->pool_cap) {
        size_t cap = t->pool_cap ? t->pool_cap * 2 : 4096;
        while (cap < t->pool_len + n)
            cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p)
            return -ENOMEM;
        t->pool = p;
        t->pool_cap = cap;
    }
    memcpy(t->pool + t->pool_len, s, n);
    *off = (uint32_t)t->pool_len;
    t->pool_len += n;
    return 0;
}

/* Term id of stem s, or -1. */
static int32_t term_find(const nf_classify_taxonomy_t *t, const char *s, size_t n, uint64_t h)
{
    if (!t->term_tab.slot)
        return -1;
    for (uint32_t i = (uint32_t)h & t->term_tab.mask;; i = (i + 1) & t->term_tab.mask) {
        uint32_t v = t->term_tab.slot[i];
        if (!v)
            return -1;
        const term_t *e = &t->terms[v - 1];
        if (e->hash == h && e->len == n && memcmp(t->pool + e->str, s, n) == 0)
            return (int32_t)(v - 1);
    }
}

static void tab_put(strtab_t *tab, uint64_t h, uint32_t idx)
{
    uint32_t i = (uint32_t)h & tab->mask;
    while (tab->slot[i])
        i = (i + 1) & tab->mask;
    tab->slot[i] = idx + 1;
}

/* Term id of stem s, added if new. The table is rebuilt on growth (load only). */
static int32_t term_intern(nf_classify_taxonomy_t *t, const char *s, size_t n)
{
    uint64_t h = nf_hash64(s, n, SEED_TERM);
    int32_t id = term_find(t, s, n, h);
    if (id >= 0)
        return id;
    if (t->nterms == t->terms_cap) {
        uint32_t cap = t->terms_cap ? t->terms_cap * 2 : 256;
        term_t *p = realloc(t->terms, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        t->terms = p;
        t->terms_cap = cap;
    }
    term_t *e = &t->terms[t->nterms];
    memset(e, 0, sizeof *e);
    e->hash = h;
    e->len = (uint32_t)n;
    if (pool_add(t, s, n, &e->str) < 0)
        return -ENOMEM;
    t->nterms++;
    if (2 * t->nterms + 2 > t->term_tab.mask + 1 || !t->term_tab.slot) {
        free(t->term_tab.slot);
        if (strtab_init(&t->term_tab, t->nterms * 2) < 0) {
            t->term_tab.slot = NULL;
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < t->nterms; i++)
            tab_put(&t->term_tab, t->terms[i].hash, i);
    } else {
        tab_put(&t->term_tab, h, t->nterms - 1);
    }
    return (int32_t)(t->nterms - 1);
}

static bool is_stop(const nf_classify_taxonomy_t *t, const char *w, size_t n)
{
    if (!t->nstop)
        return false;
    uint64_t h = nf_hash64(w, n, SEED_TERM); /* the same hash as the cache's: one pass */
    for (uint32_t i = (uint32_t)h & t->stop_tab.mask;; i = (i + 1) & t->stop_tab.mask) {
        uint32_t v = t->stop_tab.slot[i];
        if (!v)
            return false;
        if (t->stop_len[v - 1] == n && memcmp(t->pool + t->stop_off[v - 1], w, n) == 0)
            return true;
    }
}

/* ---- load ---- */

typedef struct loader {
    nf_classify_taxonomy_t *t;
    const char *path;
    char *err;
    size_t errlen;
    struct sb_stemmer *stemmer;
    /* keyword records before grouping by term */
    struct kw {
        uint32_t term;
        uint16_t topic;
        double weight;
        const char *key;
    } * kws;
    uint32_t nkw, kw_cap;
    const char **phrase_key; /* per phrase, for error messages */
    uint32_t phrase_cap, phrase_tok_cap;
} loader_t;

__attribute__((format(printf, 2, 3))) static void fail(loader_t *L, const char *fmt, ...)
{
    if (!L->errlen)
        return;
    int n = snprintf(L->err, L->errlen, "%s: ", L->path);
    if (n < 0 || (size_t)n >= L->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err + n, L->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static void taxo_hash(nf_classify_taxonomy_t *t, const void *p, size_t n)
{
    /* length first, so ("ab","c") and ("a","bc") differ */
    uint64_t len = n;
    t->hash = nf_hash64(&len, sizeof len, t->hash);
    t->hash = nf_hash64(p, n, t->hash);
}

static void taxo_hash_double(nf_classify_taxonomy_t *t, double d)
{
    taxo_hash(t, &d, sizeof d);
}

static char *read_file(const char *path, size_t *len, int *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *e = errno;
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        if (cap >= (64u << 20)) { /* a taxonomy is kilobytes; refuse absurd files */
            free(buf);
            fclose(f);
            *e = EFBIG;
            return NULL;
        }
        cap *= 2;
        char *p = realloc(buf, cap + 1);
        if (!p) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = p;
    }
    if (!buf) {
        fclose(f);
        *e = ENOMEM;
        return NULL;
    }
    if (ferror(f)) {
        *e = EIO;
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Tokenizes, drops stop words and stems text into term ids (interned). Returns the number of
 * words (at most max; max + 1 means "more than max"), or -ENOMEM. */
static int stem_terms(loader_t *L, const char *text, int32_t *ids, int max)
{
    char word[NF_CLASSIFY_MAX_WORD];
    size_t pos = 0, n = strlen(text), len;
    int k = 0;
    while ((len = next_word((const unsigned char *)text, n, &pos, word)) > 0) {
        if (is_stop(L->t, word, len))
            continue;
        if (k == max)
            return max + 1;
        const sb_symbol *st = sb_stemmer_stem(L->stemmer, (const sb_symbol *)word, (int)len);
        if (!st)
            return -ENOMEM;
        int32_t id = term_intern(L->t, (const char *)st, (size_t)sb_stemmer_length(L->stemmer));
        if (id < 0)
            return -ENOMEM;
        ids[k++] = id;
    }
    return k;
}

static bool get_number(const cJSON *o, const char *key, double lo, double hi, double def,
                       double *out, loader_t *L, const char *what)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        *out = def;
        return true;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        fail(L, "%s: must be a number %s", key, what);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static bool check_keys(loader_t *L, const cJSON *o, const char *where, const char *const *allowed)
{
    for (const cJSON *c = o->child; c; c = c->next) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= c->string && strcmp(c->string, *a) == 0;
        if (!ok) {
            fail(L, "%s\"%s\": unknown key", where, c->string ? c->string : "");
            return false;
        }
    }
    return true;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

static int load_stop_words(loader_t *L, const cJSON *arr)
{
    nf_classify_taxonomy_t *t = L->t;
    if (!cJSON_IsArray(arr)) {
        fail(L, "stop_words: must be an array of strings");
        return -EINVAL;
    }
    uint32_t n = (uint32_t)cJSON_GetArraySize(arr);
    t->stop_off = calloc(n + 1, sizeof *t->stop_off);
    t->stop_len = calloc(n + 1, sizeof *t->stop_len);
    if (!t->stop_off || !t->stop_len || strtab_init(&t->stop_tab, n) < 0)
        return -ENOMEM;
    uint32_t i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        char word[NF_CLASSIFY_MAX_WORD];
        size_t pos = 0, len;
        if (!cJSON_IsString(c)) {
            fail(L, "stop_words[%u]: must be a string", i);
            return -EINVAL;
        }
        const char *s = c->valuestring;
        len = next_word((const unsigned char *)s, strlen(s), &pos, word);
        char rest[NF_CLASSIFY_MAX_WORD];
        if (!len || next_word((const unsigned char *)s, strlen(s), &pos, rest)) {
            fail(L, "stop_words[%u] \"%s\": must be exactly one word", i, s);
            return -EINVAL;
        }
        if (is_stop(t, word, len))
            continue; /* duplicates are harmless */
        if (pool_add(t, word, len, &t->stop_off[t->nstop]) < 0)
            return -ENOMEM;
        t->stop_len[t->nstop] = (uint32_t)len;
        tab_put(&t->stop_tab, nf_hash64(word, len, SEED_TERM), t->nstop);
        t->nstop++;
        taxo_hash(t, word, len);
    }
    return 0;
}

static int add_keyword(loader_t *L, uint16_t topic, const cJSON *c, unsigned ti)
{
    int32_t ids[2];
    int k = stem_terms(L, c->string, ids, 1);
    if (k < 0)
        return k;
    if (k != 1) {
        fail(L, "topics[%u].keywords.\"%s\": must be exactly one word that is not a stop word%s",
             ti, c->string, k > 1 ? " (put several words under \"phrases\")" : "");
        return -EINVAL;
    }
    if (L->nkw == L->kw_cap) {
        uint32_t cap = L->kw_cap ? L->kw_cap * 2 : 1024;
        struct kw *p = realloc(L->kws, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        L->kws = p;
        L->kw_cap = cap;
    }
    L->kws[L->nkw++] = (struct kw){(uint32_t)ids[0], topic, c->valuedouble, c->string};
    return 0;
}

static int add_phrase(loader_t *L, uint16_t topic, const cJSON *c, unsigned ti, uint32_t first)
{
    nf_classify_taxonomy_t *t = L->t;
    int32_t ids[MAX_PHRASE + 1];
    int k = stem_terms(L, c->string, ids, MAX_PHRASE);
    if (k < 0)
        return k;
    if (k < 2 || k > MAX_PHRASE) {
        fail(L, "topics[%u].phrases.\"%s\": must have 2..%d words that are not stop words", ti,
             c->string, MAX_PHRASE);
        return -EINVAL;
    }
    /* same stems as an earlier phrase of this topic? */
    for (uint32_t p = first; p < t->nphrases; p++) {
        const phrase_t *q = &t->phrases[p];
        if (q->ntok == k && memcmp(&t->phrase_toks[q->tok], ids, (size_t)k * sizeof *ids) == 0) {
            fail(L, "topics[%u].phrases.\"%s\": same stems as phrase \"%s\"", ti, c->string,
                 L->phrase_key[p]);
            return -EINVAL;
        }
    }
    if (t->nphrases == L->phrase_cap) {
        uint32_t cap = L->phrase_cap ? L->phrase_cap * 2 : 256;
        phrase_t *p = realloc(t->phrases, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        t->phrases = p;
        const char **kp = realloc(L->phrase_key, cap * sizeof *kp);
        if (!kp)
            return -ENOMEM;
        L->phrase_key = kp;
        L->phrase_cap = cap;
    }
    if (t->nphrase_toks + (uint32_t)k > L->phrase_tok_cap) {
        uint32_t cap = L->phrase_tok_cap ? L->phrase_tok_cap * 2 : 1024;
        uint32_t *p = realloc(t->phrase_toks, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        t->phrase_toks = p;
        L->phrase_tok_cap = cap;
    }
    phrase_t *ph = &t->phrases[t->nphrases];
    ph->tok = t->nphrase_toks;
    ph->ntok = (uint16_t)k;
    ph->topic = topic;
    ph->weight = c->valuedouble;
    memcpy(&t->phrase_toks[t->nphrase_toks], ids, (size_t)k * sizeof *ids);
    t->nphrase_toks += (uint32_t)k;
    L->phrase_key[t->nphrases++] = c->string;
    return 0;
}

static int load_terms(loader_t *L, const cJSON *obj, unsigned ti, bool phrases)
{
    const char *what = phrases ? "phrases" : "keywords";
    if (!obj)
        return 0;
    if (!cJSON_IsObject(obj)) {
        fail(L, "topics[%u].%s: must be an object {\"term\": weight}", ti, what);
        return -EINVAL;
    }
    uint32_t first_phrase = L->t->nphrases;
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble) || c->valuedouble <= 0 ||
            c->valuedouble > 100) {
            fail(L, "topics[%u].%s.\"%s\": weight must be a number in (0, 100]", ti, what,
                 c->string);
            return -EINVAL;
        }
        int r = phrases ? add_phrase(L, (uint16_t)ti, c, ti, first_phrase)
                        : add_keyword(L, (uint16_t)ti, c, ti);
        if (r < 0)
            return r;
        taxo_hash(L->t, c->string, strlen(c->string));
        taxo_hash_double(L->t, c->valuedouble);
    }
    return 0;
}

static int cmp_kw(const void *a, const void *b)
{
    const struct kw *x = a, *y = b;
    if (x->term != y->term)
        return x->term < y->term ? -1 : 1;
    return x->topic < y->topic ? -1 : x->topic > y->topic;
}

/* Groups keyword records into per-term postings and phrases into per-first-term lists. */
static int finish(loader_t *L)
{
    nf_classify_taxonomy_t *t = L->t;
    qsort(L->kws, L->nkw, sizeof *L->kws, cmp_kw);
    for (uint32_t i = 1; i < L->nkw; i++) {
        if (L->kws[i].term == L->kws[i - 1].term && L->kws[i].topic == L->kws[i - 1].topic) {
            fail(L, "topics[%u].keywords.\"%s\": same stem as keyword \"%s\"", L->kws[i].topic,
                 L->kws[i].key, L->kws[i - 1].key);
            return -EINVAL;
        }
    }
    t->postings = calloc(L->nkw + 1, sizeof *t->postings);
    t->phrase_by_first = calloc(t->nphrases + 1, sizeof *t->phrase_by_first);
    if (!t->postings || !t->phrase_by_first)
        return -ENOMEM;
    for (uint32_t i = 0; i < L->nkw; i++) {
        term_t *e = &t->terms[L->kws[i].term];
        if (!e->npost)
            e->post = i;
        assert(e->post + e->npost == i); /* sorted by term: contiguous */
        e->npost++;
        t->postings[i] = (posting_t){L->kws[i].topic, L->kws[i].weight};
    }
    t->npostings = L->nkw;
    /* counting sort of phrases by first term, stable (phrase order = file order) */
    for (uint32_t p = 0; p < t->nphrases; p++)
        t->terms[t->phrase_toks[t->phrases[p].tok]].nphr++;
    uint32_t off = 0;
    for (uint32_t i = 0; i < t->nterms; i++) {
        t->terms[i].phr = off;
        off += t->terms[i].nphr;
        t->terms[i].nphr = 0;
    }
    for (uint32_t p = 0; p < t->nphrases; p++) {
        term_t *e = &t->terms[t->phrase_toks[t->phrases[p].tok]];
        t->phrase_by_first[e->phr + e->nphr++] = p;
    }
    return 0;
}

static int load_tree(loader_t *L, const cJSON *root)
{
    nf_classify_taxonomy_t *t = L->t;
    static const char *const top_keys[] = {
        "version",        "description", "language",   "title_weight", "max_labels",
        "min_confidence", "min_score",   "stop_words", "topics",       NULL};
    static const char *const topic_keys[] = {"name", "description", "keywords", "phrases", NULL};
    if (!cJSON_IsObject(root)) {
        fail(L, "the taxonomy must be a JSON object");
        return -EINVAL;
    }
    if (!check_keys(L, root, "", top_keys))
        return -EINVAL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(v) || v->valuedouble != 1) {
        fail(L, "version: must be 1");
        return -EINVAL;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (v && !cJSON_IsString(v)) {
        fail(L, "description: must be a string");
        return -EINVAL;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "language");
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof t->language) {
        fail(L, "language: must be a string naming a libstemmer algorithm (e.g. \"english\")");
        return -EINVAL;
    }
    strcpy(t->language, v->valuestring);
    L->stemmer = sb_stemmer_new(t->language, "UTF_8");
    if (!L->stemmer) {
        fail(L, "language: \"%s\" is not a libstemmer algorithm (e.g. \"english\")", t->language);
        return -EINVAL;
    }
    taxo_hash(t, t->language, strlen(t->language));
    double max_labels;
    if (!get_number(root, "title_weight", 1e-3, 100, 3, &t->title_weight, L, "in (0, 100]") ||
        !get_number(root, "max_labels", 0, NF_CLASSIFY_MAX_LABELS, 3, &max_labels, L, "in 0..8") ||
        !get_number(root, "min_confidence", 0, 1, 0.15, &t->min_confidence, L, "in [0, 1]") ||
        !get_number(root, "min_score", 0, 1e6, 1, &t->min_score, L, "in [0, 1e6]"))
        return -EINVAL;
    if (max_labels != (double)(unsigned)max_labels) {
        fail(L, "max_labels: must be an integer in 0..8");
        return -EINVAL;
    }
    t->max_labels = (unsigned)max_labels;
    taxo_hash_double(t, t->title_weight);
    taxo_hash_double(t, max_labels);
    taxo_hash_double(t, t->min_confidence);
    taxo_hash_double(t, t->min_score);

    v = cJSON_GetObjectItemCaseSensitive(root, "stop_words");
    if (v) {
        int r = load_stop_words(L, v);
        if (r < 0)
            return r;
    }
    const cJSON *topics = cJSON_GetObjectItemCaseSensitive(root, "topics");
    if (!cJSON_IsArray(topics) || cJSON_GetArraySize(topics) < 1) {
        fail(L, "topics: must be a non-empty array");
        return -EINVAL;
    }
    if (cJSON_GetArraySize(topics) > NF_CLASSIFY_MAX_TOPICS) {
        fail(L, "topics: %d topics, at most %d are allowed", cJSON_GetArraySize(topics),
             NF_CLASSIFY_MAX_TOPICS);
        return -EINVAL;
    }
    unsigned ti = 0;
    for (const cJSON *tp = topics->child; tp; tp = tp->next, ti++) {
        char where[32];
        snprintf(where, sizeof where, "topics[%u].", ti);
        if (!cJSON_IsObject(tp)) {
            fail(L, "topics[%u]: must be an object", ti);
            return -EINVAL;
        }
        if (!check_keys(L, tp, where, topic_keys))
            return -EINVAL;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(tp, "name");
        if (!cJSON_IsString(name) || !valid_name(name->valuestring)) {
            fail(L, "topics[%u].name: must be a string of 1..63 characters [a-z0-9_-]", ti);
            return -EINVAL;
        }
        for (unsigned j = 0; j < ti; j++) {
            if (strcmp(t->names[j], name->valuestring) == 0) {
                fail(L, "topics[%u].name: \"%s\" is already the name of topics[%u]", ti,
                     name->valuestring, j);
                return -EINVAL;
            }
        }
        v = cJSON_GetObjectItemCaseSensitive(tp, "description");
        if (v && !cJSON_IsString(v)) {
            fail(L, "topics[%u].description: must be a string", ti);
            return -EINVAL;
        }
        strcpy(t->names[ti], name->valuestring);
        taxo_hash(t, t->names[ti], strlen(t->names[ti]));
        const cJSON *kw = cJSON_GetObjectItemCaseSensitive(tp, "keywords");
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(tp, "phrases");
        if (!kw && !ph) {
            fail(L, "topics[%u] (\"%s\"): needs \"keywords\" or \"phrases\"", ti, t->names[ti]);
            return -EINVAL;
        }
        int r = load_terms(L, kw, ti, false);
        if (r == 0)
            r = load_terms(L, ph, ti, true);
        if (r < 0)
            return r;
        t->ntopics = ti + 1;
    }
    return finish(L);
}

/* 1-based line of offset off in text, for JSON syntax errors. */
static unsigned line_of(const char *text, size_t off)
{
    unsigned line = 1;
    for (size_t i = 0; i < off; i++)
        line += text[i] == '\n';
    return line;
}

nf_classify_taxonomy_t *nf_classify_load(const char *path, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    size_t len = 0;
    int e = 0;
    char *text = read_file(path, &len, &e);
    if (!text) {
        loader_t L = {.path = path, .err = err, .errlen = errlen};
        fail(&L, "cannot read: %s", strerror(e));
        return NULL;
    }
    nf_classify_taxonomy_t *t = nf_classify_load_text(path, text, len, err, errlen);
    free(text);
    return t;
}

nf_classify_taxonomy_t *nf_classify_load_text(const char *name, const char *data, size_t len,
                                              char *err, size_t errlen)
{
    loader_t L = {.path = name, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = '\0';
    char *text = malloc(len + 1);
    if (!text) {
        fail(&L, "out of memory");
        return NULL;
    }
    memcpy(text, data, len);
    text[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, true);
    if (!root) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        const char *at = cJSON_GetErrorPtr();
        if (at && at >= text && at <= text + len)
            off = (size_t)(at - text);
        fail(&L, "line %u: invalid JSON", line_of(text, off));
        free(text);
        return NULL;
    }
    L.t = calloc(1, sizeof *L.t);
    int r = L.t ? 0 : -ENOMEM;
    if (r == 0) {
        L.t->hash = SEED_TAXO;
        r = load_tree(&L, root);
    }
    if (r == -ENOMEM)
        fail(&L, "out of memory");
    if (L.stemmer)
        sb_stemmer_delete(L.stemmer);
    free(L.kws);
    free(L.phrase_key);
    cJSON_Delete(root);
    free(text);
    if (r < 0) {
        nf_classify_free(L.t);
        return NULL;
    }
    return L.t;
}

void nf_classify_free(nf_classify_taxonomy_t *t)
{
    if (!t)
        return;
    free(t->pool);
    free(t->terms);
    free(t->term_tab.slot);
    free(t->postings);
    free(t->phrases);
    free(t->phrase_toks);
    free(t->phrase_by_first);
    free(t->stop_off);
    free(t->stop_len);
    free(t->stop_tab.slot);
    free(t);
}

unsigned nf_classify_topic_count(const nf_classify_taxonomy_t *t)
{
    return t->ntopics;
}

const char *nf_classify_topic_name(const nf_classify_taxonomy_t *t, unsigned idx)
{
    return idx < t->ntopics ? t->names[idx] : NULL;
}

int nf_classify_topic_index(const nf_classify_taxonomy_t *t, const char *name)
{
    for (unsigned i = 0; i < t->ntopics; i++)
        if (strcmp(t->names[i], name) == 0)
            return (int)i;
    return -1;
}

uint64_t nf_classify_taxonomy_hash(const nf_classify_taxonomy_t *t)
{
    return t->hash;
}

/* ---- classify ---- */

nf_classify_ctx_t *nf_classify_ctx_new(const nf_classify_taxonomy_t *t)
{
    nf_classify_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->t = t;
    c->stemmer = sb_stemmer_new(t->language, "UTF_8");
    size_t nt = t->nterms + 1, np = t->nphrases + 1;
    c->tcount = calloc(nt, sizeof *c->tcount);
    c->bcount = calloc(nt, sizeof *c->bcount);
    c->touched = calloc(nt, sizeof *c->touched);
    c->ptcount = calloc(np, sizeof *c->ptcount);
    c->pbcount = calloc(np, sizeof *c->pbcount);
    c->ptouched = calloc(np, sizeof *c->ptouched);
    c->cache = calloc(CACHE_SLOTS, sizeof *c->cache);
    c->ids_cap = 1024;
    c->ids = malloc(c->ids_cap * sizeof *c->ids);
    if (!c->stemmer || !c->tcount || !c->bcount || !c->touched || !c->ptcount || !c->pbcount ||
        !c->ptouched || !c->ids || !c->cache) {
        nf_classify_ctx_free(c);
        return NULL;
    }
    return c;
}

void nf_classify_ctx_free(nf_classify_ctx_t *c)
{
    if (!c)
        return;
    if (c->stemmer)
        sb_stemmer_delete(c->stemmer);
    free(c->ids);
    free(c->cache);
    free(c->tcount);
    free(c->bcount);
    free(c->touched);
    free(c->ptcount);
    free(c->pbcount);
    free(c->ptouched);
    free(c);
}

/* Maps the kept words of one field to term ids in c->ids; their number, or -ENOMEM. */
static long field_ids(nf_classify_ctx_t *c, const char *s, unsigned *tokens)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, NF_CLASSIFY_MAX_TEXT);
    /* a word takes at least two bytes with its separator: bounds the ids needed */
    size_t need = n / 2 + 1;
    if (need > c->ids_cap) {
        int32_t *p = realloc(c->ids, need * sizeof *p);
        if (!p)
            return -ENOMEM;
        c->ids = p;
        c->ids_cap = need;
    }
    const nf_classify_taxonomy_t *t = c->t;
    char word[NF_CLASSIFY_MAX_WORD];
    size_t pos = 0, len;
    long k = 0;
    while ((len = next_word((const unsigned char *)s, n, &pos, word)) > 0) {
        uint64_t h = nf_hash64(word, len, SEED_TERM);
        cache_slot_t *slot = &c->cache[h & (CACHE_SLOTS - 1)];
        int32_t id;
        if (slot->len == len && slot->hash == h && memcmp(slot->word, word, len) == 0) {
            id = slot->id;
        } else {
            if (is_stop(t, word, len)) {
                id = ID_STOP;
            } else {
                const sb_symbol *st =
                    sb_stemmer_stem(c->stemmer, (const sb_symbol *)word, (int)len);
                if (!st)
                    return -ENOMEM;
                size_t sl = (size_t)sb_stemmer_length(c->stemmer);
                id = term_find(t, (const char *)st, sl, nf_hash64(st, sl, SEED_TERM));
            }
            if (len <= CACHE_WORD) {
                slot->hash = h;
                slot->id = id;
                slot->len = (uint8_t)len;
                memcpy(slot->word, word, len);
            }
        }
        if (id == ID_STOP)
            continue;
        assert((size_t)k < c->ids_cap);
        c->ids[k++] = id;
    }
    *tokens += (unsigned)k;
    return k;
}

/* Counts keyword and phrase occurrences of the field in c->ids[0..k). */
static void count_field(nf_classify_ctx_t *c, long k, bool title, unsigned *matches)
{
    const nf_classify_taxonomy_t *t = c->t;
    uint32_t *tc = title ? c->tcount : c->bcount;
    uint32_t *pc = title ? c->ptcount : c->pbcount;
    for (long i = 0; i < k; i++) {
        int32_t id = c->ids[i];
        if (id < 0)
            continue;
        const term_t *e = &t->terms[id];
        if (e->npost) {
            if (!c->tcount[id] && !c->bcount[id])
                c->touched[c->ntouched++] = (uint32_t)id;
            tc[id]++;
            (*matches)++;
        }
        for (uint32_t j = 0; j < e->nphr; j++) {
            uint32_t p = t->phrase_by_first[e->phr + j];
            const phrase_t *ph = &t->phrases[p];
            if (i + ph->ntok > k)
                continue;
            const uint32_t *want = &t->phrase_toks[ph->tok];
            uint16_t m = 1;
            while (m < ph->ntok && c->ids[i + m] == (int32_t)want[m])
                m++;
            if (m < ph->ntok)
                continue;
            if (!c->ptcount[p] && !c->pbcount[p])
                c->ptouched[c->nptouched++] = p;
            pc[p]++;
            (*matches)++;
        }
    }
}

static double sat(uint32_t n)
{
    return n ? 1.0 + log((double)n) : 0.0;
}

static int cmp_topic(const void *a, const void *b)
{
    const nf_classify_topic_t *x = a, *y = b;
    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    return x->topic < y->topic ? -1 : x->topic > y->topic;
}

int nf_classify_text(nf_classify_ctx_t *c, const char *title, const char *body,
                     nf_classify_result_t *out)
{
    const nf_classify_taxonomy_t *t = c->t;
    out->ntopics = out->nlabels = out->tokens = out->matches = 0;
    memset(out->score, 0, sizeof out->score);
    assert(c->ntouched == 0 && c->nptouched == 0);

    long k = field_ids(c, title, &out->tokens);
    if (k >= 0)
        count_field(c, k, true, &out->matches);
    if (k >= 0)
        k = field_ids(c, body, &out->tokens);
    if (k >= 0)
        count_field(c, k, false, &out->matches);

    /* Sum in touched order, which is text order: deterministic for a given text. */
    for (uint32_t i = 0; i < c->ntouched; i++) {
        uint32_t id = c->touched[i];
        const term_t *e = &t->terms[id];
        double f = t->title_weight * sat(c->tcount[id]) + sat(c->bcount[id]);
        for (uint32_t j = 0; j < e->npost; j++)
            out->score[t->postings[e->post + j].topic] += t->postings[e->post + j].weight * f;
        c->tcount[id] = c->bcount[id] = 0;
    }
    for (uint32_t i = 0; i < c->nptouched; i++) {
        uint32_t p = c->ptouched[i];
        double f = t->title_weight * sat(c->ptcount[p]) + sat(c->pbcount[p]);
        out->score[t->phrases[p].topic] += t->phrases[p].weight * f;
        c->ptcount[p] = c->pbcount[p] = 0;
    }
    c->ntouched = c->nptouched = 0;
    if (k < 0) {
        memset(out->score, 0, sizeof out->score);
        out->tokens = out->matches = 0;
        return (int)k;
    }

    double sum = 0, sq = 0;
    for (unsigned i = 0; i < t->ntopics; i++) {
        if (out->score[i] > 0) {
            sum += out->score[i];
            sq += out->score[i] * out->score[i];
            out->topics[out->ntopics++] = (nf_classify_topic_t){(uint16_t)i, out->score[i]};
        }
    }
    if (!out->ntopics)
        return 0;
    double norm = sqrt(sq);
    qsort(out->topics, out->ntopics, sizeof *out->topics, cmp_topic);
    for (unsigned i = 0; i < out->ntopics; i++) {
        double s = out->topics[i].weight;
        out->topics[i].weight = s / norm;
        assert(out->topics[i].weight > 0 && out->topics[i].weight <= 1.0 + 1e-12);
        double conf = s / sum;
        if (out->nlabels < t->max_labels && conf >= t->min_confidence && s >= t->min_score)
            out->labels[out->nlabels++] = (nf_classify_label_t){out->topics[i].topic, conf};
    }
    return 0;
}

static void put_double(nf_jw_t *w, double d)
{
    char buf[32];
    assert(isfinite(d));
    int n = snprintf(buf, sizeof buf, "%.9g", d);
    nf_jw_raw(w, buf, (size_t)n);
}

void nf_classify_json(const nf_classify_taxonomy_t *t, const nf_classify_result_t *r, nf_jw_t *w)
{
    nf_jw_key(w, "category_labels");
    nf_jw_arr_open(w);
    for (unsigned i = 0; i < r->nlabels; i++) {
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "category");
        nf_jw_str(w, t->names[r->labels[i].topic]);
        nf_jw_key(w, "confidence");
        put_double(w, r->labels[i].confidence);
        nf_jw_obj_close(w);
    }
    nf_jw_arr_close(w);
    nf_jw_key(w, "topics");
    nf_jw_obj_open(w);
    for (unsigned i = 0; i < r->ntopics; i++) {
        nf_jw_key(w, t->names[r->topics[i].topic]);
        put_double(w, r->topics[i].weight);
    }
    nf_jw_obj_close(w);
}
