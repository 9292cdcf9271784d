/* query.c — see query.h. Each request: validate the route's parameters (400 names the one at
 * fault), acquire the latest committed view, read what the answer needs through it (batched
 * where there are several keys), write the JSON, release the view. */
#include "serve/query.h"

#include "actors/serve_state.h"
#include "actors/sources.h"
#include "algo/bytes.h"
#include "algo/idset.h"
#include "algo/sha256.h"
#include "engine/cluster.h"
#include "engine/follows.h"
#include "engine/interest.h"
#include "feed/dates.h"
#include "feed/text.h"
#include "io/events.h"
#include "runtime/failpoint.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/trace.h"
#include "serve/rank.h"
#include "serve/readers.h"
#include "serve/routes.h"
#include "serve/search.h"
#include "state/changelog.h"
#include "state/kstate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIMIT_DEFAULT  20
#define LIMIT_MAX      100
#define USER_ID_MAX    256
#define TRENDING_SCAN  1000 /* items of a trending window looked at (top_k is 50 by default) */
#define KEY_LEN        18   /* nf_kstate_encode_key */
#define EXPIRY_LEN     8    /* every kind's values start with their expiry (store.h) */
#define FEED_TOPICS    5    /* a reader's top topics the feed draws from */
#define FEED_PER_TOPIC 1000 /* newest recent articles looked at per topic */

typedef struct vcache vcache_t;

struct nf_query {
    nf_query_opts_t o;
    nf_counter_t m_redirects, m_unknown_owner;
    nf_counter_t m_feed_scored, m_feed_skipped;       /* a feed's list entries (rank.h) */
    const nf_variants_t *variants;                    /* the options', or `seed` */
    nf_variants_t seed;                               /* the seed's ranking alone */
    nf_counter_t m_feeds[NF_VARIANTS_MAX];            /* feeds served, by variant */
    nf_histogram_t m_shadow_overlap[NF_VARIANTS_MAX]; /* by the variant served */
    nf_counter_t m_shadow_errors;
    _Atomic uint64_t shadow_tick; /* feeds the shadow could rank beside: sampled by the count */
    nf_gauge_t m_cache_bytes;
    nf_readers_t *readers; /* readers' feed inputs kept across views (readers.h); NULL: off */
    pthread_mutex_t mu;
    vcache_t *cache; /* the latest view's (route_feed), under mu */
};

static void vcache_free(vcache_t *c);

/* The ranking experiments' metrics (engine/variants.h): feeds served by variant, and the
 * shadow variant's overlap with them. */
static void ranking_metrics(nf_query_t *q)
{
    nf_variants_parse("", "default", &q->seed, NULL, 0);
    q->variants = q->o.variants && q->o.variants->n ? q->o.variants : &q->seed;
    const nf_variants_t *vs = q->variants;
    for (unsigned i = 0; i < vs->n; i++) {
        char labels[128]; /* two names of up to 32 bytes */
        snprintf(labels, sizeof labels, "variant=\"%s\"", vs->v[i].name);
        if (vs->v[i].shadow) {
            nf_metrics_counter("newsflow_ranking_shadow_errors_total",
                               "Shadow rankings given up (out of memory, a store read that "
                               "failed): the feed was served all the same.",
                               labels, 0, &q->m_shadow_errors);
            continue;
        }
        nf_metrics_counter("newsflow_ranking_feeds_total",
                           "Feeds served (200) by the ranking variant that ranked them "
                           "(ranking.variants).",
                           labels, 0, &q->m_feeds[i]);
        if (vs->shadow < 0)
            continue;
        static const double bounds[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.999};
        snprintf(labels, sizeof labels, "variant=\"%s\",served=\"%s\"", vs->v[vs->shadow].name,
                 vs->v[i].name);
        nf_metrics_histogram("newsflow_ranking_shadow_overlap",
                             "The stories a feed served (by the variant served) that the shadow "
                             "variant would have shown too, over the longer of the two lists (1: "
                             "the same stories), per feed ranked by interest or follows.",
                             labels, bounds, sizeof bounds / sizeof *bounds,
                             &q->m_shadow_overlap[i]);
    }
}

nf_query_t *nf_query_new(const nf_query_opts_t *o)
{
    nf_query_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->o = *o;
    pthread_mutex_init(&q->mu, NULL);
    nf_metrics_gauge("newsflow_query_view_cache_bytes",
                     "Memory the feed keeps of the latest committed view: topics' recent lists, "
                     "the trending window, articles shown (at most 16,384 of them).",
                     NULL, 0, &q->m_cache_bytes);
    nf_metrics_counter("newsflow_query_redirects_total",
                       "Query API requests answered 307: the key is owned by another process "
                       "of the job (Location names it).",
                       NULL, 0, &q->m_redirects);
    nf_metrics_counter("newsflow_query_owner_unknown_total",
                       "Query API requests for a key owned by another process while no owner "
                       "was known (503 + Retry-After; a rebalance).",
                       NULL, 0, &q->m_unknown_owner);
    static const char *const outcome[2] = {"outcome=\"scored\"", "outcome=\"skipped\""};
    nf_counter_t *const entries[2] = {&q->m_feed_scored, &q->m_feed_skipped};
    nf_metrics_counters("newsflow_query_feed_entries_total",
                        "Entries of the topics' lists a feed's ranking went over, each pass: "
                        "scored, or skipped (pruned: none of them could enter the answer; "
                        "expired; hidden by the reader).",
                        outcome, 2, 0, entries);
    ranking_metrics(q);
    if (o->store && o->reader_cache) {
        /* the kinds a reader's kept inputs come from: slots 4 × entries keep collisions rare */
        uint32_t kinds = 1u << NF_KIND_INTEREST | 1u << NF_KIND_READS;
        if (nf_store_track(o->store, kinds, 4 * (size_t)o->reader_cache) == 0)
            q->readers = nf_readers_new(o->reader_cache);
    }
    return q;
}

void nf_query_free(nf_query_t *q)
{
    if (!q)
        return;
    vcache_free(q->cache);
    nf_readers_free(q->readers);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

void nf_query_readers_stats(nf_query_t *q, nf_readers_stats_t *s)
{
    nf_readers_stats(q->readers, s);
}

/* ------------------------------------------------------------------------------ replies */

/* w's JSON (plus a newline) as the body; a writer that failed (no memory) becomes a 503. */
static int finish(nf_jw_t *w, int status, char **body, size_t *len)
{
    nf_jw_raw(w, "\n", 1);
    if (!w->failed) {
        *body = w->buf;
        *len = w->len;
        return status;
    }
    nf_jw_free(w);
    static const char oom[] = "{\"error\":\"out of memory\"}\n";
    if ((*body = strdup(oom)))
        *len = sizeof oom - 1;
    return 503;
}

/* {"error": msg, "parameter": param} (param NULL: none). */
static int fail(int status, const char *msg, const char *param, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, msg);
    if (param) {
        nf_jw_key(&w, "parameter");
        nf_jw_str(&w, param);
    }
    nf_jw_obj_close(&w);
    return finish(&w, status, body, len);
}

static int store_failed(const char *err, char **body, size_t *len)
{
    char msg[320];
    snprintf(msg, sizeof msg, "the committed state cannot be read: %s", err[0] ? err : "I/O error");
    return fail(503, msg, NULL, body, len);
}

static void put_date(nf_jw_t *w, int64_t ms)
{
    char d[40];
    nf_date_format(ms, d, sizeof d);
    nf_jw_str(w, d);
}

/* Opens the answer's object with the view it reflects. */
static void open_answer(nf_jw_t *w, const nf_store_view_t *v)
{
    nf_jw_init(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "epoch");
    nf_jw_u64(w, nf_store_view_epoch(v));
    nf_jw_key(w, "committed_at");
    put_date(w, nf_store_view_published_ms(v));
}

static void put_vector(const nf_query_t *q, nf_jw_t *w, const nf_topic_vec_t *vec)
{
    nf_jw_obj_open(w);
    for (uint32_t i = 0; i < vec->n; i++) {
        unsigned t = vec->t[i].topic;
        char num[8];
        const char *name = t < q->o.ntopics ? q->o.topic_names[t] : NULL;
        if (!name) {
            snprintf(num, sizeof num, "%u", t);
            name = num;
        }
        nf_jw_key(w, name);
        nf_jw_unit(w, vec->t[i].weight);
    }
    nf_jw_obj_close(w);
}

/* --------------------------------------------------------------------------- parameters */

/* limit: absent = def; else a decimal 1..LIMIT_MAX. */
static bool parse_limit(const char *s, unsigned def, unsigned *out)
{
    if (!s) {
        *out = def;
        return true;
    }
    unsigned n = 0;
    size_t i = 0;
    for (; s[i] >= '0' && s[i] <= '9' && i < 4; i++)
        n = n * 10 + (unsigned)(s[i] - '0');
    if (i == 0 || s[i] || n < 1 || n > LIMIT_MAX)
        return false;
    *out = n;
    return true;
}

/* A topic name of the taxonomy: its index, or -1. */
static int topic_index(const nf_query_t *q, const char *s)
{
    for (unsigned i = 0; i < q->o.ntopics; i++)
        if (q->o.topic_names[i] && strcmp(q->o.topic_names[i], s) == 0)
            return (int)i;
    return -1;
}

/* "topics": the taxonomy's names, in its order. */
static void put_topic_list(const nf_query_t *q, nf_jw_t *w)
{
    nf_jw_key(w, "topics");
    nf_jw_arr_open(w);
    for (unsigned i = 0; i < q->o.ntopics; i++) {
        nf_jw_elem(w);
        nf_jw_str(w, q->o.topic_names[i]);
    }
    nf_jw_arr_close(w);
}

static int bad_topic(const nf_query_t *q, const char *s, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    char msg[160];
    size_t n = strlen(s);
    if (!nf_utf8_valid(s, n))
        s = "?", n = 1;
    if (n > 64) /* cut at a character's start, so the message stays UTF-8 */
        for (n = 64; n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80; n--)
            ;
    snprintf(msg, sizeof msg, "unknown topic '%.*s'", (int)n, s);
    nf_jw_str(&w, msg);
    nf_jw_key(&w, "parameter");
    nf_jw_str(&w, "topic");
    put_topic_list(q, &w);
    nf_jw_obj_close(&w);
    return finish(&w, 400, body, len);
}

/* A user id: 1..USER_ID_MAX bytes of UTF-8 without control characters. */
static bool valid_user(const char *s, size_t n)
{
    if (n == 0 || n > USER_ID_MAX || !nf_utf8_valid(s, n))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

/* Wall-clock ms (the options' clock when a test gives one). */
static int64_t now_ms(const nf_query_t *q)
{
    if (q->o.clock_ms)
        return q->o.clock_ms();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A stored value's expiry has passed (compaction drops such values lazily: readers check). */
static bool expired(const unsigned char *v, int64_t now)
{
    uint64_t exp = nf_get_le64(v);
    return exp != 0 && (int64_t)exp <= now;
}

/* ------------------------------------------------------------------------------ interest */

typedef struct interest {
    uint64_t version;
    int64_t updated_ms;
    int64_t expires_ms; /* 0: never */
    nf_topic_vec_t vec;
} interest_t;

/* The read-events partitions this process owns, taken once per request: every read of one
 * request uses the same set (a rebalance can change ownership under a request), and its
 * signature keys what a reader's kept inputs were read with (readers.h): the bitmask below 64
 * partitions, a 64-bit hash of the owned ones above. */
typedef struct owned {
    uint16_t *p;
    size_t n;
    uint64_t sig;
} owned_t;

static int owned_take(const nf_query_t *q, owned_t *o)
{
    unsigned np = q->o.read_partitions ? q->o.read_partitions : 1;
    o->n = 0;
    o->sig = np <= 64 ? 0 : 0x9e3779b97f4a7c15ull;
    if (!(o->p = malloc(np * sizeof *o->p)))
        return -ENOMEM;
    for (unsigned p = 0; p < np; p++)
        if (!q->o.owns || q->o.owns(q->o.owns_arg, p)) {
            o->p[o->n++] = (uint16_t)p;
            if (np <= 64)
                o->sig |= 1ull << p;
            else
                o->sig = (o->sig ^ (p + 1)) * 0xbf58476d1ce4e5b9ull;
        }
    return 0;
}

/* The reader's committed interest vector: 1 (found), 0 (none in the partitions this process
 * owns), < 0 (-EIO: err says why; -ENOMEM). The most recently updated wins where several
 * partitions hold one (only if the read-events partitions changed). */
static int find_interest(const nf_query_t *q, nf_store_view_t *v, const char *user,
                         const owned_t *own, interest_t *out, char *err, size_t errlen)
{
    nf_id128_t uk = nf_interest_user_key(user);
    size_t n = own->n;
    unsigned char *keys = malloc((n + 1) * KEY_LEN);
    void **vals = calloc(n + 1, sizeof *vals);
    size_t *lens = calloc(n + 1, sizeof *lens);
    int r = -ENOMEM;
    if (keys && vals && lens) {
        for (size_t i = 0; i < n; i++)
            nf_kstate_encode_key(own->p[i], uk, keys + KEY_LEN * i);
        r = nf_store_view_multi_get(v, NF_KIND_INTEREST, n, keys, KEY_LEN, vals, lens, err, errlen);
    }
    const unsigned char *best = NULL;
    size_t best_len = 0;
    int64_t now = now_ms(q);
    for (size_t i = 0; r == 0 && i < n; i++) {
        const unsigned char *x = vals[i];
        if (!x || lens[i] < EXPIRY_LEN + 16 || expired(x, now))
            continue;
        if (!best || (int64_t)nf_get_le64(x + 16) > (int64_t)nf_get_le64(best + 16)) {
            best = x;
            best_len = lens[i];
        }
    }
    if (r == 0 && best) {
        out->expires_ms = (int64_t)nf_get_le64(best);
        out->version = nf_get_le64(best + 8);
        out->updated_ms = (int64_t)nf_get_le64(best + 16);
        r = nf_interest_topics_decode(best + 24, best_len - 24, &out->vec) == 0 ? 1 : -EIO;
        if (r < 0)
            snprintf(err, errlen, "a stored interest vector does not decode");
    }
    for (size_t i = 0; vals && i < n; i++)
        free(vals[i]);
    free(vals);
    free(lens);
    free(keys);
    return r;
}

/* The reader's top topics (at most FEED_TOPICS with weight > 0): by weight, then by index (a
 * stable order for equal weights). Returns how many, their indices in top. */
static unsigned top_topics(const nf_topic_vec_t *vec, uint64_t mute, unsigned top[FEED_TOPICS])
{
    bool used[NF_TOPICS_MAX] = {false};
    unsigned k = 0;
    for (; k < FEED_TOPICS; k++) {
        int at = -1;
        for (uint32_t i = 0; i < vec->n; i++)
            if (!used[i] && vec->t[i].weight > 0 && !((mute >> vec->t[i].topic) & 1) &&
                (at < 0 || vec->t[i].weight > vec->t[at].weight))
                at = (int)i;
        if (at < 0)
            break;
        used[at] = true;
        top[k] = vec->t[at].topic;
    }
    return k;
}

/* The topics a feed draws from: the reader's top topics, then the followed ones not among them
 * (engine/follows.h), in topic order. */
static unsigned feed_topics(const unsigned *top, unsigned nt, uint64_t follow,
                            unsigned drawn[NF_TOPICS_MAX])
{
    memcpy(drawn, top, nt * sizeof *top);
    unsigned n = nt;
    for (unsigned t = 0; t < NF_TOPICS_MAX; t++) {
        bool in = false;
        for (unsigned k = 0; k < nt; k++)
            in |= top[k] == t;
        if (((follow >> t) & 1) && !in)
            drawn[n++] = t;
    }
    return n;
}

static void put_topic_name(const nf_query_t *q, nf_jw_t *w, unsigned t);

/* key: the names of the topics of mask, in topic order. */
static void put_topic_mask(const nf_query_t *q, nf_jw_t *w, const char *key, uint64_t mask)
{
    nf_jw_key(w, key);
    nf_jw_arr_open(w);
    for (unsigned t = 0; t < NF_TOPICS_MAX; t++)
        if ((mask >> t) & 1) {
            nf_jw_elem(w);
            put_topic_name(q, w, t);
        }
    nf_jw_arr_close(w);
}

static void put_topic_name(const nf_query_t *q, nf_jw_t *w, unsigned t)
{
    if (t < q->o.ntopics)
        nf_jw_str(w, q->o.topic_names[t]);
    else
        nf_jw_u64(w, t);
}

static int route_interest(nf_query_t *q, nf_store_view_t *v, const char *user, char **body,
                          size_t *len)
{
    char err[256] = "";
    interest_t in;
    owned_t own;
    int r = owned_take(q, &own);
    if (r == 0)
        r = find_interest(q, v, user, &own, &in, err, sizeof err);
    free(own.p);
    if (r == -ENOMEM)
        return fail(503, "out of memory", NULL, body, len);
    if (r < 0)
        return store_failed(err, body, len);
    if (r == 0)
        return fail(404,
                    "no interest vector for this user in the committed state (no read of "
                    "theirs counted yet, or their partition is another process's)",
                    "user_id", body, len);
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "user_id");
    nf_jw_str(&w, user);
    nf_jw_key(&w, "version");
    nf_jw_u64(&w, in.version);
    nf_jw_key(&w, "updated_at");
    put_date(&w, in.updated_ms);
    nf_jw_key(&w, "vector");
    put_vector(q, &w, &in.vec);
    nf_jw_key(&w, "top_topics");
    nf_jw_arr_open(&w);
    unsigned top[FEED_TOPICS];
    unsigned nt = top_topics(&in.vec, 0, top); /* the vector's own: mutes are the feed's */
    for (unsigned k = 0; k < nt; k++) {
        nf_jw_elem(&w);
        put_topic_name(q, &w, top[k]);
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    return finish(&w, 200, body, len);
}

/* ------------------------------------------------------------------------- reader's reads */

/* One counted event of a reader's history (serve_state.h, NF_KIND_READS). */
typedef struct hist {
    int64_t ts_ms;
    int kind;
    char article[NF_EVENT_FIELD_MAX + 1];
} hist_t;

typedef struct hist_scan {
    hist_t *items;
    size_t n, limit;
    int64_t now;
} hist_scan_t;

/* A history entry decoded, its article's bytes in the view's value. */
typedef struct hentry {
    int kind;
    int64_t ts;
    const char *a;
    size_t al;
} hentry_t;

/* Whether key/val is a history entry not expired at now (then decoded into *e). */
static bool live_entry(const void *key, size_t klen, const void *val, size_t vlen, int64_t now,
                       hentry_t *e)
{
    int64_t expires;
    return nf_serve_history_decode(key, klen, val, vlen, &expires, &e->kind, &e->ts, &e->a,
                                   &e->al) == 0 &&
           (!expires || expires >= now);
}

/* Newest first within a key group: keeps what is not expired, in ts order with the others'. */
static int hist_entry(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    hist_scan_t *h = arg;
    hentry_t e;
    if (!live_entry(key, klen, val, vlen, h->now, &e))
        return 0;
    size_t at = h->n;
    while (at > 0 && h->items[at - 1].ts_ms < e.ts)
        at--;
    if (at >= h->limit)
        return 1; /* older than every kept one and the list is full: the rest is older still */
    if (h->n == h->limit)
        h->n--;
    memmove(&h->items[at + 1], &h->items[at], (h->n - at) * sizeof *h->items);
    h->items[at] = (hist_t){.ts_ms = e.ts, .kind = e.kind};
    memcpy(h->items[at].article, e.a, e.al);
    h->items[at].article[e.al] = '\0';
    h->n++;
    return 0;
}

static bool parse_id(const char *s, size_t n, nf_id128_t *id);

/* Calls fn for the reader's history entries, newest first, in every read-events partition this
 * process owns (a reader's are in one): 0, or -EIO. fn's 1 ends a partition's scan. */
static int scan_history(nf_store_view_t *v, const char *user, const owned_t *own,
                        nf_store_scan_fn fn, void *arg)
{
    nf_id128_t uk = nf_interest_user_key(user);
    unsigned char *prefixes = malloc((own->n + 1) * NF_SERVE_HISTORY_PREFIX);
    if (!prefixes)
        return -EIO;
    for (size_t i = 0; i < own->n; i++)
        nf_serve_history_prefix(own->p[i], uk, prefixes + NF_SERVE_HISTORY_PREFIX * i);
    int r = nf_store_view_scan_prefixes(v, NF_KIND_READS, prefixes, own->n, NF_SERVE_HISTORY_PREFIX,
                                        fn, arg);
    free(prefixes);
    return r < 0 ? -EIO : 0;
}

/* The articles a reader disliked or hid (their history's newest NF_READER_HIDDEN_MAX entries),
 * which the reader's feed leaves out, into a nf_reader_t (readers.h): sorted, until_ms the
 * earliest expiry among them, keep false when the scan reached its limit (an entry's expiry
 * there changes which entries are looked at). */
typedef struct hidden_scan {
    nf_reader_t *rd;
    size_t scanned;
    int64_t now;
    int64_t settings_ms; /* the reader's settings found so far: the latest wins */
} hidden_scan_t;

/* The reader's followed and muted topics (engine/follows.h): the entry whose key is the prefix
 * itself, first of each partition's scan; of several partitions, the latest. */
static void settings_entry(hidden_scan_t *h, const void *val, size_t vlen)
{
    static _Thread_local nf_follows_val_t f; /* 4 KiB: not on an HTTP thread's stack */
    if (vlen < EXPIRY_LEN ||
        nf_follows_decode((const unsigned char *)val + EXPIRY_LEN, vlen - EXPIRY_LEN, &f) != 0 ||
        (h->settings_ms && f.updated_ms < h->settings_ms))
        return;
    nf_reader_t *rd = h->rd;
    rd->follow = f.follow;
    rd->mute = f.mute;
    rd->nmsrc = 0;
    rd->msrc_text_len = 0;
    for (unsigned i = 0; i < f.nsrc; i++) {
        rd->msrc[rd->nmsrc++] = nf_serve_source_hash(f.src[i], f.src_len[i]);
        memcpy(rd->msrc_text + rd->msrc_text_len, f.src[i], f.src_len[i] + 1u);
        rd->msrc_text_len += f.src_len[i] + 1u;
    }
    h->settings_ms = f.updated_ms ? f.updated_ms : 1;
}

static int hidden_entry(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    hidden_scan_t *h = arg;
    if (klen == NF_SERVE_HISTORY_PREFIX) {
        settings_entry(h, val, vlen);
        return 0;
    }
    if (++h->scanned > NF_READER_HIDDEN_MAX) {
        h->rd->keep = false;
        return 1;
    }
    hentry_t e;
    nf_id128_t id;
    int64_t expires;
    if (nf_serve_history_decode(key, klen, val, vlen, &expires, &e.kind, &e.ts, &e.a, &e.al) == 0 &&
        (!expires || expires >= h->now) &&
        (e.kind == NF_READ_KIND_DISLIKE || e.kind == NF_READ_KIND_HIDE) &&
        parse_id(e.a, e.al, &id)) {
        h->rd->hidden[h->rd->nhidden++] = id;
        if (expires && (!h->rd->until_ms || expires < h->rd->until_ms))
            h->rd->until_ms = expires;
    }
    return 0;
}

static int by_id(const void *a, const void *b)
{
    return nf_id128_cmp(*(const nf_id128_t *)a, *(const nf_id128_t *)b);
}

/* The reader's hidden articles, sorted: 0, or -EIO. */
static int find_hidden(nf_store_view_t *v, const char *user, const owned_t *own, int64_t now,
                       nf_reader_t *rd)
{
    hidden_scan_t h = {.rd = rd, .now = now};
    rd->nhidden = 0;
    rd->follow = rd->mute = 0;
    rd->nmsrc = 0;
    rd->msrc_text_len = 0;
    if (scan_history(v, user, own, hidden_entry, &h) != 0)
        return -EIO;
    qsort(rd->hidden, rd->nhidden, sizeof rd->hidden[0], by_id);
    return 0;
}

static bool hidden_skip(const void *arg, nf_id128_t id)
{
    const nf_reader_t *rd = arg;
    return rd->nhidden &&
           bsearch(&id, rd->hidden, rd->nhidden, sizeof rd->hidden[0], by_id) != NULL;
}

/* The named event feed.cache_miss (docs/slo.md, "Log events"): a reader's inputs read from the
 * view, not kept; sampled (log.sample_every), and always when the request is traced. */
static void log_cache_miss(const nf_store_view_t *v, nf_id128_t uk, const nf_admin_req_t *req)
{
    static _Thread_local nf_log_sampler_t sampler;
    nf_trace_ctx_t tr = nf_admin_req_trace(req);
    if (!nf_log_enabled(NF_LOG_INFO) || !nf_log_sampled(&sampler, 1, tr.sampled))
        return;
    char tid[33], key[33];
    nf_trace_id_hex(&tr, tid);
    nf_id128_hex(uk, key);
    nf_log(NF_LOG_INFO, "query", "feed.cache_miss", NF_LS("user_key", key), NF_LS("trace_id", tid),
           NF_LI("epoch", (int64_t)nf_store_view_epoch(v)), NF_LEND);
}

/* A feed's inputs (readers.h): the reader's interest vector (1: found, 0: none) and hidden
 * articles, kept from an earlier view while nothing of the reader's changed since, else read
 * from v and kept. < 0 as find_interest (err says why) or -EIO (the history scan). */
static int find_reader(nf_query_t *q, nf_store_view_t *v, const char *user, int64_t now,
                       const nf_admin_req_t *req, nf_reader_t *rd, char *err, size_t errlen)
{
    nf_id128_t uk = nf_interest_user_key(user);
    owned_t own;
    if (owned_take(q, &own) != 0)
        return -ENOMEM;
    if (nf_readers_get(q->readers, v, uk, own.sig, now, rd)) {
        free(own.p);
        return rd->found;
    }
    log_cache_miss(v, uk, req);
    interest_t in;
    int r = find_interest(q, v, user, &own, &in, err, errlen);
    if (r < 0) {
        free(own.p);
        return r;
    }
    rd->found = r == 1;
    rd->version = r == 1 ? in.version : 0;
    rd->updated_ms = r == 1 ? in.updated_ms : 0;
    rd->vec.n = r == 1 ? in.vec.n : 0;
    memcpy(rd->vec.t, in.vec.t, rd->vec.n * sizeof rd->vec.t[0]);
    rd->until_ms = r == 1 ? in.expires_ms : 0;
    rd->keep = true;
    r = find_hidden(v, user, &own, now, rd);
    if (r == 0) /* read with the partitions own names: kept under its signature */
        nf_readers_put(q->readers, v, uk, own.sig, rd);
    free(own.p);
    if (r != 0) {
        snprintf(err, errlen, "a scan of the reader's history failed");
        return -EIO;
    }
    return rd->found;
}

/* GET /v1/users/{user}/reads?limit=: the reader's counted events, newest first, from every
 * read-events partition this process owns (a reader's are in one). */
static int route_reads(nf_query_t *q, nf_store_view_t *v, const char *user, nf_admin_req_t *req,
                       char **body, size_t *len)
{
    unsigned limit;
    if (!parse_limit(nf_admin_req_arg(req, "limit"), LIMIT_DEFAULT, &limit))
        return fail(400, "limit must be a whole number from 1 to 100", "limit", body, len);
    hist_t items[LIMIT_MAX];
    hist_scan_t h = {.items = items, .limit = limit, .now = now_ms(q)};
    owned_t own;
    if (owned_take(q, &own) != 0)
        return fail(503, "out of memory", NULL, body, len);
    int r = scan_history(v, user, &own, hist_entry, &h);
    free(own.p);
    if (r != 0)
        return store_failed("a scan of the reader's history failed", body, len);
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "user_id");
    nf_jw_str(&w, user);
    nf_jw_key(&w, "items");
    nf_jw_arr_open(&w);
    for (size_t i = 0; i < h.n; i++) {
        nf_jw_elem(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "article_id");
        nf_jw_str(&w, items[i].article);
        nf_jw_key(&w, "kind");
        nf_jw_str(&w, nf_read_kind_name(items[i].kind));
        nf_jw_key(&w, "ts");
        put_date(&w, items[i].ts_ms);
        nf_jw_obj_close(&w);
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    return finish(&w, 200, body, len);
}

/* ------------------------------------------------------------------------------ trending */

static uint16_t article_kg(const nf_query_t *q, nf_id128_t id)
{
    return q->o.global_articles ? (uint16_t)NF_CHANGELOG_GLOBAL_KG : (uint16_t)(id.hi % 256);
}

/* The last trending window committed (the merger's "L"), its items in rank order. */
typedef struct trend {
    cJSON *root; /* owns the strings below */
    const char *window_start, *window_end;
    size_t n;
    const char **ids;
    uint64_t *scores;
    nf_id128_t *aids;
    bool *hex; /* the id is an article id (32 hex digits): it may have a vector */
    /* One entry per story (trending.c): the story's id when the window was ranked (NULL: the
     * article's own, as a record of an earlier version) and how many of its articles were read */
    const char **clusters;
    uint32_t *articles;
} trend_t;

static void trend_free(trend_t *t)
{
    cJSON_Delete(t->root);
    free(t->ids);
    free(t->scores);
    free(t->aids);
    free(t->hex);
    free(t->clusters);
    free(t->articles);
}

/* 0 (t filled; n 0 before the first window), -EIO (err), -ENOMEM. */
static int load_trending(nf_store_view_t *v, trend_t *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    void *last = NULL;
    size_t last_len = 0;
    int r = nf_store_view_get(v, NF_KIND_TRENDING, "L", 1, &last, &last_len, err, errlen);
    if (r < 0)
        return r;
    if (r == 1 && last_len > EXPIRY_LEN)
        t->root = cJSON_ParseWithLength((const char *)last + EXPIRY_LEN, last_len - EXPIRY_LEN);
    free(last);
    if (r == 1 && !cJSON_IsObject(t->root)) {
        snprintf(err, errlen, "the last trending window does not parse");
        return -EIO;
    }
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(t->root, "window_start");
    const cJSON *we = cJSON_GetObjectItemCaseSensitive(t->root, "window_end");
    t->window_start = cJSON_IsString(ws) ? ws->valuestring : NULL;
    t->window_end = cJSON_IsString(we) ? we->valuestring : NULL;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(t->root, "items");
    size_t cap = (size_t)cJSON_GetArraySize(items);
    cap = cap > TRENDING_SCAN ? TRENDING_SCAN : cap ? cap : 1;
    t->ids = calloc(cap, sizeof *t->ids);
    t->scores = calloc(cap, sizeof *t->scores);
    t->aids = calloc(cap, sizeof *t->aids);
    t->hex = calloc(cap, sizeof *t->hex);
    t->clusters = calloc(cap, sizeof *t->clusters);
    t->articles = calloc(cap, sizeof *t->articles);
    if (!t->ids || !t->scores || !t->aids || !t->hex || !t->clusters || !t->articles)
        return -ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        if (t->n == cap)
            break;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "article_id");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(it, "score");
        if (!cJSON_IsString(id) || !cJSON_IsNumber(sc))
            continue;
        size_t i = t->n++;
        t->ids[i] = id->valuestring;
        t->scores[i] = sc->valuedouble > 0 ? (uint64_t)sc->valuedouble : 0;
        const cJSON *cl = cJSON_GetObjectItemCaseSensitive(it, "cluster_id");
        const cJSON *na = cJSON_GetObjectItemCaseSensitive(it, "articles");
        t->clusters[i] = cJSON_IsString(cl) ? cl->valuestring : NULL;
        t->articles[i] = cJSON_IsNumber(na) && na->valuedouble >= 1 ? (uint32_t)na->valuedouble : 1;
        /* a read event may name any article id: only 32 hex digits can have a vector */
        t->hex[i] =
            strlen(id->valuestring) == 32 && nf_id128_from_hex32(id->valuestring, &t->aids[i]) == 0;
    }
    return 0;
}

/* ------------------------------------------------------------------------ shared reads */

/* The article's committed topic vector: 1 (found, *vec; its expiry in *expires when not NULL,
 * 0 = never), 0 (absent or expired), < 0 (read). */
static int read_topics(const nf_query_t *q, nf_store_view_t *v, nf_id128_t id, int64_t now,
                       nf_topic_vec_t *vec, int64_t *expires, char *err, size_t errlen)
{
    return nf_interest_view_topics(v, article_kg(q, id), id, now, vec, expires, err, errlen);
}

/* The story cluster of an article as of the view (nf_cluster_view_root). 0, or < 0 on a read
 * error. */
static int find_cluster(const nf_query_t *q, nf_store_view_t *v, uint64_t clock, nf_id128_t id,
                        nf_id128_t *root, char *err, size_t errlen)
{
    return nf_cluster_view_root(v, q->o.global_articles ? (int32_t)NF_CHANGELOG_GLOBAL_KG : -1,
                                clock, id, root, err, errlen);
}

/* A story's record as of the view (serve_state.h, NF_KIND_STORY): its articles and distinct
 * sources, and its expiry; 1 article and 0 sources without one (an article never clustered, or
 * its story expired). */
typedef struct story_info {
    uint32_t size, sources;
    bool more; /* more sources than sources */
    int64_t expires_ms;
} story_info_t;

/* 0, or < 0 on a read error. */
static int story_info(const nf_query_t *q, nf_store_view_t *v, nf_id128_t root, int64_t now,
                      story_info_t *si, char *err, size_t errlen)
{
    unsigned char key[KEY_LEN];
    nf_kstate_encode_key(article_kg(q, root), root, key);
    void *val = NULL;
    size_t len = 0;
    int r = nf_store_view_get(v, NF_KIND_STORY, key, KEY_LEN, &val, &len, err, errlen);
    nf_serve_story_t st;
    *si = (story_info_t){.size = 1};
    if (r == 1 && len >= EXPIRY_LEN && !expired(val, now) &&
        nf_serve_story_decode((unsigned char *)val + EXPIRY_LEN, len - EXPIRY_LEN, &st) == 0)
        *si = (story_info_t){st.size, st.nsources, st.more, (int64_t)nf_get_le64(val)};
    free(val);
    return r < 0 ? r : 0;
}

static void put_id(nf_jw_t *w, nf_id128_t id);

/* A story's size and sources as the items of every route show them. */
static void put_story_fields(nf_jw_t *w, nf_id128_t root, const story_info_t *si)
{
    nf_jw_key(w, "cluster_id");
    put_id(w, root);
    nf_jw_key(w, "cluster_size");
    nf_jw_u64(w, si->size);
    nf_jw_key(w, "cluster_sources");
    nf_jw_u64(w, si->sources);
}

/* The article's stored metadata, parsed (caller deletes); NULL if absent or expired. */
static cJSON *read_meta(const nf_query_t *q, nf_store_view_t *v, nf_id128_t id, int64_t now,
                        int *rc, char *err, size_t errlen)
{
    unsigned char key[KEY_LEN];
    nf_kstate_encode_key(article_kg(q, id), id, key);
    void *val = NULL;
    size_t len = 0;
    *rc = nf_store_view_get(v, NF_KIND_ARTICLE_META, key, KEY_LEN, &val, &len, err, errlen);
    cJSON *meta = NULL;
    if (*rc == 1 && len > EXPIRY_LEN && !expired(val, now))
        meta = cJSON_ParseWithLength((const char *)val + EXPIRY_LEN, len - EXPIRY_LEN);
    free(val);
    return cJSON_IsObject(meta) ? meta : (cJSON_Delete(meta), NULL);
}

/* The fields of a stored metadata object, in their order (strings or null). */
static void put_meta_fields(nf_jw_t *w, const cJSON *meta)
{
    static const char *const keys[] = {"url",         "title",    "source_id", "published_at",
                                       "ingested_at", "language", "summary"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *x = meta ? cJSON_GetObjectItemCaseSensitive(meta, keys[i]) : NULL;
        nf_jw_key(w, keys[i]);
        nf_jw_str(w, cJSON_IsString(x) ? x->valuestring : NULL);
    }
}

/* When an article counts as published (serve_state.h) from its stored metadata; 0 without. */
static int64_t meta_published_ms(const cJSON *meta)
{
    int64_t published, ingested;
    return nf_serve_meta_times(meta, 0, &published, &ingested) ? published : 0;
}

static void put_id(nf_jw_t *w, nf_id128_t id)
{
    char hex[33];
    nf_cluster_id_hex(id, hex);
    nf_jw_str(w, hex);
}

/* An id path parameter: 32 lower-case hex digits. */
static bool parse_id(const char *s, size_t n, nf_id128_t *id)
{
    if (n != 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return nf_id128_from_hex32(s, id) == 0;
}

/* ------------------------------------------------------------------------------ articles */

static int route_article(nf_query_t *q, nf_store_view_t *v, nf_id128_t id, char **body, size_t *len)
{
    char err[256] = "";
    int64_t now = now_ms(q);
    int rc;
    cJSON *meta = read_meta(q, v, id, now, &rc, err, sizeof err);
    if (rc < 0)
        return store_failed(err, body, len);
    if (!meta)
        return fail(404,
                    "no such article in the committed state (never ingested, or older than "
                    "its retention)",
                    "article_id", body, len);
    nf_topic_vec_t vec;
    int tr = read_topics(q, v, id, now, &vec, NULL, err, sizeof err);
    nf_id128_t root;
    story_info_t si = {.size = 1};
    int cr = tr < 0 ? tr : find_cluster(q, v, nf_cluster_view_clock(v), id, &root, err, sizeof err);
    if (cr == 0)
        cr = story_info(q, v, root, now, &si, err, sizeof err);
    if (tr < 0 || cr < 0) {
        cJSON_Delete(meta);
        return store_failed(err, body, len);
    }
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "article_id");
    put_id(&w, id);
    put_meta_fields(&w, meta);
    cJSON_Delete(meta);
    nf_jw_key(&w, "topics");
    if (tr == 1)
        put_vector(q, &w, &vec);
    else
        nf_jw_null(&w);
    put_story_fields(&w, root, &si);
    nf_jw_obj_close(&w);
    return finish(&w, 200, body, len);
}

/* ------------------------------------------------------------------------------- stories */

#define STORY_TREE_MAX 64 /* stories a story's merges are followed to (its own included) */
#define CURSOR_LEN     NF_SERVE_MEMBER_TAIL /* a member key's tail (serve_state.h) */

/* A story's articles newest first (serve_state.h: its members and its merges' members): per
 * story of the tree, the members after the cursor, at most want of each. */
typedef struct members {
    int64_t now;
    nf_id128_t tree[STORY_TREE_MAX];
    unsigned ntree;
    bool truncated; /* more merges than STORY_TREE_MAX */
    unsigned char cursor[CURSOR_LEN];
    bool has_cursor;
    unsigned want, got;                 /* per story scanned */
    unsigned char (*tails)[CURSOR_LEN]; /* found, all stories */
    size_t n, cap;
} members_t;

static int child_cb(const void *k, size_t kl, const void *val, size_t vl, void *arg)
{
    members_t *m = arg;
    int64_t exp;
    nf_id128_t child;
    if (nf_serve_child_decode(k, kl, val, vl, &exp, &child) != 0 || (exp && exp <= m->now))
        return 0;
    for (unsigned i = 0; i < m->ntree; i++)
        if (m->tree[i].hi == child.hi && m->tree[i].lo == child.lo)
            return 0;
    if (m->ntree == STORY_TREE_MAX) {
        m->truncated = true;
        return 1;
    }
    m->tree[m->ntree++] = child;
    return 0;
}

static int member_cb(const void *k, size_t kl, const void *val, size_t vl, void *arg)
{
    members_t *m = arg;
    int64_t exp, pub;
    nf_id128_t id;
    if (nf_serve_member_decode(k, kl, val, vl, &exp, &pub, &id) != 0 || (exp && exp <= m->now))
        return 0;
    const unsigned char *tail = (const unsigned char *)k + NF_SERVE_STORY_PREFIX;
    if (m->has_cursor && memcmp(tail, m->cursor, CURSOR_LEN) <= 0)
        return 0; /* the cursor's own entry: the page before ended there */
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        void *t = realloc(m->tails, cap * CURSOR_LEN);
        if (!t)
            return -ENOMEM;
        m->tails = t;
        m->cap = cap;
    }
    memcpy(m->tails[m->n++], tail, CURSOR_LEN);
    return ++m->got >= m->want;
}

static int cmp_tail(const void *a, const void *b)
{
    return memcmp(a, b, CURSOR_LEN);
}

/* A story without member entries (clustered before they were kept, or never clustered: no
 * signature) lists its root. 0 or -ENOMEM. */
static int member_root(members_t *m, nf_id128_t root, int64_t published_ms)
{
    unsigned char k[NF_SERVE_MEMBER_KEY_LEN], v[EXPIRY_LEN] = {0};
    nf_serve_story_prefix(0, root, NF_SERVE_STORY_MEMBER, k);
    nf_serve_member_tail(published_ms, root, k + NF_SERVE_STORY_PREFIX);
    return member_cb(k, sizeof k, v, sizeof v, m) < 0 ? -ENOMEM : 0;
}

/* The story tree of root (its merges, recursively) and up to want members of each after the
 * cursor, sorted newest first. 0, or < 0 (err). */
static int members_find(const nf_query_t *q, nf_store_view_t *v, nf_id128_t root, members_t *m,
                        char *err, size_t errlen)
{
    m->tree[0] = root;
    m->ntree = 1;
    int r = 0;
    for (unsigned i = 0; i < m->ntree && r >= 0 && !m->truncated; i++) {
        unsigned char p[NF_SERVE_STORY_PREFIX];
        nf_serve_story_prefix(article_kg(q, m->tree[i]), m->tree[i], NF_SERVE_STORY_CHILD, p);
        r = nf_store_view_scan_prefix(v, NF_KIND_STORY, p, sizeof p, child_cb, m);
    }
    for (unsigned i = 0; i < m->ntree && r >= 0; i++) {
        unsigned char p[NF_SERVE_STORY_PREFIX], from[NF_SERVE_MEMBER_KEY_LEN];
        nf_serve_story_prefix(article_kg(q, m->tree[i]), m->tree[i], NF_SERVE_STORY_MEMBER, p);
        memcpy(from, p, sizeof p);
        memcpy(from + sizeof p, m->cursor, CURSOR_LEN);
        m->got = 0;
        r = nf_store_view_scan_from(v, NF_KIND_STORY, p, sizeof p, from,
                                    m->has_cursor ? sizeof from : 0, member_cb, m);
    }
    if (r < 0 && r != -ENOMEM && err[0] == '\0')
        snprintf(err, errlen, "a story's articles cannot be read");
    if (r >= 0 && m->n > 1) /* qsort of NULL, 0 is undefined */
        qsort(m->tails, m->n, CURSOR_LEN, cmp_tail);
    return r < 0 ? r : 0;
}

/* after=: a cursor as a page's "next" gives it (48 hex digits). */
static bool parse_cursor(const char *s, unsigned char out[CURSOR_LEN])
{
    if (strlen(s) != 2 * CURSOR_LEN)
        return false;
    for (size_t i = 0; i < CURSOR_LEN; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + (size_t)k];
            if (c >= '0' && c <= '9')
                v = v * 16 + (unsigned)(c - '0');
            else if (c >= 'a' && c <= 'f')
                v = v * 16 + (unsigned)(c - 'a' + 10);
            else
                return false;
        }
        out[i] = (unsigned char)v;
    }
    return true;
}

static void put_cursor(nf_jw_t *w, const unsigned char tail[CURSOR_LEN])
{
    char hex[2 * CURSOR_LEN + 1];
    nf_hex(tail, CURSOR_LEN, hex);
    nf_jw_str(w, hex);
}

/* The page's articles: each one's metadata as of the view (null fields once expired). */
static int put_members(const nf_query_t *q, nf_store_view_t *v, nf_jw_t *w, const members_t *m,
                       size_t shown, char *err, size_t errlen)
{
    nf_jw_key(w, "articles");
    nf_jw_arr_open(w);
    for (size_t i = 0; i < shown; i++) {
        nf_id128_t id;
        int64_t published;
        nf_serve_member_tail_decode(m->tails[i], &published, &id);
        int rc;
        cJSON *meta = read_meta(q, v, id, m->now, &rc, err, errlen);
        if (rc < 0)
            return rc;
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "article_id");
        put_id(w, id);
        put_meta_fields(w, meta);
        nf_jw_key(w, "published_ms");
        nf_jw_i64(w, published);
        nf_jw_obj_close(w);
        cJSON_Delete(meta);
    }
    nf_jw_arr_close(w);
    return 0;
}

static int route_story(nf_query_t *q, nf_store_view_t *v, nf_id128_t id, nf_admin_req_t *req,
                       char **body, size_t *len)
{
    unsigned limit;
    if (!parse_limit(nf_admin_req_arg(req, "limit"), LIMIT_DEFAULT, &limit))
        return fail(400, "limit must be a whole number from 1 to 100", "limit", body, len);
    members_t m = {.now = now_ms(q), .want = limit + 1};
    const char *after = nf_admin_req_arg(req, "after");
    if (after && !(m.has_cursor = parse_cursor(after, m.cursor)))
        return fail(400, "after must be the \"next\" of a page of this story (48 hex digits)",
                    "after", body, len);
    char err[256] = "";
    nf_id128_t root;
    story_info_t si = {.size = 1};
    int rc = 0, r = find_cluster(q, v, nf_cluster_view_clock(v), id, &root, err, sizeof err);
    if (r == 0)
        r = story_info(q, v, root, m.now, &si, err, sizeof err);
    cJSON *meta = r == 0 ? read_meta(q, v, root, m.now, &rc, err, sizeof err) : NULL;
    if (r == 0 && rc >= 0 && meta)
        r = members_find(q, v, root, &m, err, sizeof err);
    if (r == 0 && meta && m.n == 0 && !m.has_cursor)
        r = member_root(&m, root, meta_published_ms(meta));
    if (r < 0 || rc < 0) {
        cJSON_Delete(meta);
        free(m.tails);
        return r == -ENOMEM ? fail(503, "out of memory", NULL, body, len)
                            : store_failed(err, body, len);
    }
    if (!meta) {
        free(m.tails);
        return fail(404,
                    "no such story in the committed state (an id of no article, or older "
                    "than its retention)",
                    "cluster_id", body, len);
    }
    size_t shown = m.n < limit ? m.n : limit;
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "cluster_id");
    put_id(&w, root);
    nf_jw_key(&w, "size");
    nf_jw_u64(&w, si.size);
    nf_jw_key(&w, "sources");
    nf_jw_u64(&w, si.sources);
    nf_jw_key(&w, "sources_more");
    nf_jw_bool(&w, si.more);
    nf_jw_key(&w, "first_article");
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "article_id");
    put_id(&w, root);
    put_meta_fields(&w, meta);
    nf_jw_obj_close(&w);
    cJSON_Delete(meta);
    r = put_members(q, v, &w, &m, shown, err, sizeof err);
    nf_jw_key(&w, "next");
    if (m.n > limit)
        put_cursor(&w, m.tails[limit - 1]);
    else
        nf_jw_null(&w);
    nf_jw_key(&w, "merges_truncated");
    nf_jw_bool(&w, m.truncated);
    nf_jw_obj_close(&w);
    free(m.tails);
    if (r < 0) {
        nf_jw_free(&w);
        return store_failed(err, body, len);
    }
    return finish(&w, 200, body, len);
}

/* ------------------------------------------------------------------ recent articles by topic */

typedef struct recent {
    nf_id128_t id;
    int64_t published_ms;
    nf_topic_vec_t vec;
} recent_t;

typedef struct recent_scan {
    recent_t *items;
    size_t n, max;
    int64_t now;
} recent_scan_t;

static int recent_cb(const void *k, size_t kl, const void *val, size_t vl, void *arg)
{
    recent_scan_t *rs = arg;
    recent_t *r = &rs->items[rs->n];
    int64_t exp;
    if (nf_serve_recent_decode(k, kl, val, vl, &exp, &r->published_ms, &r->id, &r->vec) != 0)
        return 0;
    if (exp <= rs->now)
        return 1; /* newest first: every later entry was published earlier and expired too */
    return ++rs->n == rs->max;
}

/* The topic's recent articles, newest first (at most max, unexpired). 0 or -EIO. */
static int scan_recent(nf_store_view_t *v, unsigned topic, int64_t now, recent_t *items, size_t max,
                       size_t *n)
{
    unsigned char prefix[NF_SERVE_RECENT_PREFIX];
    nf_serve_recent_prefix(topic, prefix);
    recent_scan_t rs = {.items = items, .max = max, .now = now};
    int r = max ? nf_store_view_scan_prefix(v, NF_KIND_TOPIC_RECENT, prefix, sizeof prefix,
                                            recent_cb, &rs)
                : 0;
    *n = rs.n;
    return r < 0 ? r : 0;
}

static void put_recent_item(const nf_query_t *q, nf_jw_t *w, const recent_t *r, const cJSON *meta)
{
    nf_jw_key(w, "article_id");
    put_id(w, r->id);
    put_meta_fields(w, meta);
    nf_jw_key(w, "published_ms");
    nf_jw_i64(w, r->published_ms);
    nf_jw_key(w, "topics");
    put_vector(q, w, &r->vec);
}

static int route_recent(nf_query_t *q, nf_store_view_t *v, unsigned topic, nf_admin_req_t *req,
                        char **body, size_t *len)
{
    unsigned limit;
    if (!parse_limit(nf_admin_req_arg(req, "limit"), LIMIT_DEFAULT, &limit))
        return fail(400, "limit must be a whole number from 1 to 100", "limit", body, len);
    recent_t items[LIMIT_MAX];
    size_t n = 0;
    int64_t now = now_ms(q);
    if (scan_recent(v, topic, now, items, limit, &n) != 0)
        return store_failed("a scan of the recent articles failed", body, len);
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "topic");
    nf_jw_str(&w, q->o.topic_names[topic]);
    nf_jw_key(&w, "items");
    nf_jw_arr_open(&w);
    char err[256] = "";
    for (size_t i = 0; i < n; i++) {
        int rc;
        cJSON *meta = read_meta(q, v, items[i].id, now, &rc, err, sizeof err);
        if (rc < 0) {
            nf_jw_free(&w);
            return store_failed(err, body, len);
        }
        nf_jw_elem(&w);
        nf_jw_obj_open(&w);
        put_recent_item(q, &w, &items[i], meta);
        nf_jw_obj_close(&w);
        cJSON_Delete(meta);
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    return finish(&w, 200, body, len);
}

/* ---------------------------------------------------------------------------------- feed */

/* What a feed reads of a view, kept for as long as the view is the latest (vcache_t): each
 * topic's recent list, decoded once; the trending window, parsed once, with a sorted look-up
 * and its articles' topic vectors; the cluster engine's clock; and each article shown, its
 * metadata already written as JSON with its story's root and size. A view is immutable, so
 * all of it is what reading the view again would give; what depends on the time (an entry's
 * expiry) is kept with it and checked at use. */

typedef struct item {
    bool used;
    nf_id128_t id, root;
    story_info_t story;
    int64_t expires_ms;   /* the earliest expiry of what it was made of (0 = never) */
    int64_t published_ms; /* from its metadata (trending candidates) */
    uint64_t source;      /* nf_serve_source_hash of its source_id (0: none) */
    char *frag;           /* "article_id":...,<metadata fields> */
    size_t fraglen;
} item_t;

#define ITEMS_CAP 16384 /* articles kept per view (3/4 of it used: open addressing) */

/* A /v1/trending answer of the view, the same for every reader who asks with its limit and
 * topic until the first of its articles' vectors expires (until_ms; 0 = never). */
typedef struct answer {
    unsigned limit;
    int topic; /* -1: none */
    int64_t until_ms;
    char *body;
    size_t len;
} answer_t;

#define ANSWERS_CAP 8

struct vcache {
    uint64_t epoch;
    int64_t published;
    int refs; /* under the query's mu */
    pthread_mutex_t mu;
    bool trend_loaded, clock_loaded;
    trend_t trend;
    nf_id128_t *tk; /* trending articles' ids, sorted, with their scores */
    uint64_t *ts;
    size_t tn;
    uint64_t clock;
    nf_rlist_t topics[NF_TOPICS_MAX];
    nf_rlist_t trending; /* the trending window's articles with their vectors */
    item_t *items;
    size_t nitems;
    size_t bytes;
    answer_t answers[ANSWERS_CAP]; /* /v1/trending's, by limit and topic */
};

static void vcache_free(vcache_t *c)
{
    if (!c)
        return;
    trend_free(&c->trend);
    free(c->tk);
    free(c->ts);
    for (unsigned t = 0; t < NF_TOPICS_MAX; t++)
        nf_rlist_free(&c->topics[t]);
    nf_rlist_free(&c->trending);
    for (size_t i = 0; c->items && i < ITEMS_CAP; i++)
        free(c->items[i].frag);
    for (size_t i = 0; i < ANSWERS_CAP; i++)
        free(c->answers[i].body);
    free(c->items);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The cache of view v, referenced (vcache_put), or NULL: v is older than the latest cached
 * (a request that acquired its view just before a newer one was published) or no memory. */
static vcache_t *vcache_get(nf_query_t *q, nf_store_view_t *v)
{
    uint64_t e = nf_store_view_epoch(v);
    int64_t p = nf_store_view_published_ms(v);
    pthread_mutex_lock(&q->mu);
    vcache_t *c = q->cache;
    if (!c || c->epoch < e || (c->epoch == e && c->published < p)) {
        vcache_t *n = calloc(1, sizeof *n);
        if (n && !(n->items = calloc(ITEMS_CAP, sizeof *n->items))) {
            free(n);
            n = NULL;
        }
        if (n) {
            n->epoch = e;
            n->published = p;
            n->refs = 1; /* the query's */
            n->bytes = sizeof *n + ITEMS_CAP * sizeof *n->items;
            pthread_mutex_init(&n->mu, NULL);
            if (c && --c->refs == 0)
                vcache_free(c);
            q->cache = c = n;
            nf_gauge_set(q->m_cache_bytes, (int64_t)n->bytes);
        }
    }
    if (c && (c->epoch != e || c->published != p))
        c = NULL;
    if (c)
        c->refs++;
    pthread_mutex_unlock(&q->mu);
    return c;
}

static void vcache_put(nf_query_t *q, vcache_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&q->mu);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&q->mu);
    if (last)
        vcache_free(c);
}

/* Under c->mu: bytes more kept; the gauge follows the latest cache. */
static void vcache_grew(nf_query_t *q, vcache_t *c, size_t bytes)
{
    c->bytes += bytes;
    if (q->cache == c)
        nf_gauge_set(q->m_cache_bytes, (int64_t)c->bytes);
}

typedef struct rlist_scan {
    nf_rlist_t *l;
    size_t cap, wcap;
    int64_t now;
    int err;
} rlist_scan_t;

static int rlist_cb(const void *k, size_t kl, const void *val, size_t vl, void *arg)
{
    rlist_scan_t *s = arg;
    int64_t exp, pub;
    nf_id128_t id;
    nf_topic_vec_t vec;
    if (nf_serve_recent_decode(k, kl, val, vl, &exp, &pub, &id, &vec) != 0)
        return 0;
    if (exp <= s->now)
        return 1; /* newest first: every later entry was published earlier and expired too */
    if ((s->err = nf_rlist_add(s->l, &s->cap, &s->wcap, id, pub, exp, 0, &vec)) != 0)
        return 1;
    return s->l->n == FEED_PER_TOPIC;
}

/* A topic's recent articles (newest first, at most FEED_PER_TOPIC). 0 or < 0. */
static int rlist_load_topic(nf_store_view_t *v, unsigned topic, int64_t now, nf_rlist_t *l)
{
    unsigned char prefix[NF_SERVE_RECENT_PREFIX];
    nf_serve_recent_prefix(topic, prefix);
    rlist_scan_t s = {.l = l, .now = now};
    int r = nf_store_view_scan_prefix(v, NF_KIND_TOPIC_RECENT, prefix, sizeof prefix, rlist_cb, &s);
    return r < 0 ? r : s.err;
}

/* The trending window's articles (article ids only, in its order) with their topic vectors
 * (known: one was found; expires_ms: the vector's expiry). */
static int rlist_load_trending(const nf_query_t *q, nf_store_view_t *v, const trend_t *t,
                               int64_t now, nf_rlist_t *l, char *err, size_t errlen)
{
    size_t cap = 0, wcap = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!t->hex[i])
            continue;
        nf_topic_vec_t vec;
        int64_t exp = 0;
        int r = read_topics(q, v, t->aids[i], now, &vec, &exp, err, errlen);
        if (r < 0)
            return r;
        if (r == 0)
            vec.n = 0;
        if (nf_rlist_add(l, &cap, &wcap, t->aids[i], 0, exp, t->scores[i], &vec) != 0)
            return -ENOMEM;
        l->e[l->n - 1].known = r == 1;
    }
    return 0;
}

typedef struct tpair {
    nf_id128_t id;
    size_t i;
} tpair_t;

static int tpair_cmp(const void *a, const void *b)
{
    const tpair_t *x = a, *y = b;
    int d = nf_id128_cmp(x->id, y->id);
    return d ? d : x->i < y->i ? -1 : x->i > y->i;
}

static int tk_cmp(const void *a, const void *b)
{
    return nf_id128_cmp(*(const nf_id128_t *)a, *(const nf_id128_t *)b);
}

/* Under c->mu: the trending window, its look-up and its candidates, once per view. */
static int vcache_trending(const nf_query_t *q, nf_store_view_t *v, vcache_t *c, int64_t now,
                           char *err, size_t errlen)
{
    if (c->trend_loaded)
        return 0;
    int r = load_trending(v, &c->trend, err, errlen);
    if (r == 0 && c->trend.n) {
        /* sorted (id, index) pairs: the first listing of an id wins, as trend_score's scan */
        size_t n = 0;
        tpair_t *p = malloc(c->trend.n * sizeof *p);
        c->tk = malloc(c->trend.n * sizeof *c->tk);
        c->ts = malloc(c->trend.n * sizeof *c->ts);
        if (!p || !c->tk || !c->ts)
            r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < c->trend.n; i++)
            if (c->trend.hex[i]) {
                p[n].id = c->trend.aids[i];
                p[n++].i = i;
            }
        if (r == 0) {
            qsort(p, n, sizeof *p, tpair_cmp); /* equal ids: the earlier listing first */
            for (size_t i = 0; i < n; i++) {
                if (c->tn && tk_cmp(&c->tk[c->tn - 1], &p[i].id) == 0)
                    continue;
                c->tk[c->tn] = p[i].id;
                c->ts[c->tn++] = c->trend.scores[p[i].i];
            }
        }
        free(p);
    }
    if (r == 0)
        r = rlist_load_trending(q, v, &c->trend, now, &c->trending, err, errlen);
    if (r != 0) {
        trend_free(&c->trend);
        memset(&c->trend, 0, sizeof c->trend);
        free(c->tk);
        free(c->ts);
        c->tk = NULL;
        c->ts = NULL;
        c->tn = 0;
        nf_rlist_free(&c->trending);
        return r;
    }
    c->trend_loaded = true;
    return 0;
}

/* An article's score in the trending window: a binary search of the sorted look-up. */
static uint64_t vcache_trend_score(const vcache_t *c, nf_id128_t id)
{
    size_t lo = 0, hi = c->tn;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int d = tk_cmp(&c->tk[mid], &id);
        if (d == 0)
            return c->ts[mid];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Everything shown of an article but its score and vector: metadata, story root and size, made
 * from the view. 0 or < 0 (err). */
static int item_make(const nf_query_t *q, nf_store_view_t *v, uint64_t clock, nf_id128_t id,
                     int64_t now, item_t *it, char *err, size_t errlen)
{
    memset(it, 0, sizeof *it);
    it->id = id;
    int rc = 0;
    if (find_cluster(q, v, clock, id, &it->root, err, errlen) < 0)
        return -EIO;
    unsigned char key[KEY_LEN];
    nf_kstate_encode_key(article_kg(q, id), id, key);
    void *val = NULL;
    size_t len = 0;
    rc = nf_store_view_get(v, NF_KIND_ARTICLE_META, key, KEY_LEN, &val, &len, err, errlen);
    if (rc < 0)
        return rc;
    cJSON *meta = NULL;
    if (rc == 1 && len > EXPIRY_LEN && !expired(val, now)) {
        it->expires_ms = (int64_t)nf_get_le64(val);
        meta = cJSON_ParseWithLength((const char *)val + EXPIRY_LEN, len - EXPIRY_LEN);
        if (!cJSON_IsObject(meta)) {
            cJSON_Delete(meta);
            meta = NULL;
        }
    }
    free(val);
    rc = story_info(q, v, it->root, now, &it->story, err, errlen);
    if (rc < 0) {
        cJSON_Delete(meta);
        return rc;
    }
    int64_t e = it->story.expires_ms;
    if (e && (!it->expires_ms || e < it->expires_ms))
        it->expires_ms = e;
    it->published_ms = meta_published_ms(meta);
    const cJSON *src = meta ? cJSON_GetObjectItemCaseSensitive(meta, "source_id") : NULL;
    if (cJSON_IsString(src) && src->valuestring[0])
        it->source = nf_serve_source_hash(src->valuestring, strlen(src->valuestring));
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "article_id");
    put_id(&w, id);
    put_meta_fields(&w, meta);
    cJSON_Delete(meta);
    if (w.failed) {
        nf_jw_free(&w);
        return -ENOMEM;
    }
    it->fraglen = w.len - 1; /* without the "{" */
    it->frag = malloc(it->fraglen + 1);
    if (!it->frag) {
        nf_jw_free(&w);
        return -ENOMEM;
    }
    memcpy(it->frag, w.buf + 1, it->fraglen + 1);
    nf_jw_free(&w);
    it->used = true;
    return 0;
}

static size_t item_slot(nf_id128_t id)
{
    return (size_t)((id.hi ^ (id.lo * 0x9e3779b97f4a7c15ull)) >> 7) & (ITEMS_CAP - 1);
}

/* The article's item: from the cache when it has it (and it has not expired since), else made
 * into tmp and kept when there is room; *out is the cache's or tmp (whose frag the caller then
 * frees). */
static int item_get(nf_query_t *q, nf_store_view_t *v, vcache_t *c, uint64_t clock, nf_id128_t id,
                    int64_t now, item_t *tmp, const item_t **out, char *err, size_t errlen)
{
    size_t s = item_slot(id);
    if (c) {
        const item_t *hit = NULL;
        pthread_mutex_lock(&c->mu);
        for (size_t k = s; c->items[k].used; k = (k + 1) & (ITEMS_CAP - 1))
            if (c->items[k].id.hi == id.hi && c->items[k].id.lo == id.lo) {
                hit = &c->items[k];
                break;
            }
        pthread_mutex_unlock(&c->mu);
        if (hit && !(hit->expires_ms && hit->expires_ms <= now)) {
            *out = hit;
            return 0;
        }
    }
    int r = item_make(q, v, clock, id, now, tmp, err, errlen);
    if (r != 0)
        return r;
    *out = tmp;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    if (c->nitems < ITEMS_CAP / 4 * 3) {
        size_t k = s;
        while (c->items[k].used && !(c->items[k].id.hi == id.hi && c->items[k].id.lo == id.lo))
            k = (k + 1) & (ITEMS_CAP - 1);
        if (!c->items[k].used) {
            c->items[k] = *tmp;
            c->nitems++;
            vcache_grew(q, c, tmp->fraglen + 1);
            *out = &c->items[k];
            tmp->frag = NULL; /* the cache owns it */
        }
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* The latest view's cache (*vc, referenced) or, for a request on an older view, *solo (*vc
 * NULL); *c is the one to use, with the trending window and the cluster clock loaded. 0 or < 0
 * (err); vcache_done releases it either way. */
static int vcache_open(nf_query_t *q, nf_store_view_t *v, int64_t now, vcache_t *solo,
                       vcache_t **vc, vcache_t **c, char *err, size_t errlen)
{
    *c = *vc = vcache_get(q, v);
    if (!*c) {
        memset(solo, 0, sizeof *solo);
        pthread_mutex_init(&solo->mu, NULL);
        *c = solo;
    }
    pthread_mutex_lock(&(*c)->mu);
    int r = vcache_trending(q, v, *c, now, err, errlen);
    if (r == 0 && !(*c)->clock_loaded) {
        (*c)->clock = nf_cluster_view_clock(v);
        (*c)->clock_loaded = true;
    }
    pthread_mutex_unlock(&(*c)->mu);
    return r;
}

static void vcache_done(nf_query_t *q, vcache_t *vc, vcache_t *c, vcache_t *solo)
{
    if (c == solo) {
        trend_free(&solo->trend);
        free(solo->tk);
        free(solo->ts);
        nf_rlist_free(&solo->trending);
        pthread_mutex_destroy(&solo->mu);
    }
    vcache_put(q, vc);
}

/* What the ranking needs of each entry of a topic's list, once per list: its trending score
 * (the view's window: t) and its decay at time at_ms (rank.h). */
static uint64_t trend_of(const void *t, nf_id128_t id)
{
    return vcache_trend_score(t, id);
}

static int rlist_prepare(nf_rlist_t *l, const vcache_t *t, int64_t at_ms)
{
    return nf_rlist_prepare(l, trend_of, t, at_ms);
}

/* The lists a feed draws from: the view cache's (loaded on first use), or loaded for this
 * request alone (own[], freed by the caller) when there is no cache; t has the view's trending
 * window. */
static int feed_list(nf_query_t *q, nf_store_view_t *v, vcache_t *c, const vcache_t *t,
                     unsigned topic, int64_t now, nf_rlist_t *own, const nf_rlist_t **out)
{
    if (!c) {
        int r = rlist_load_topic(v, topic, now, own);
        if (r == 0)
            r = rlist_prepare(own, t, now);
        *out = own;
        return r;
    }
    pthread_mutex_lock(&c->mu);
    nf_rlist_t *l = &c->topics[topic];
    int r = 0;
    if (!l->loaded) {
        r = rlist_load_topic(v, topic, now, l);
        if (r == 0)
            r = rlist_prepare(l, t, c->published);
        if (r == 0) {
            l->loaded = true;
            vcache_grew(q, c, nf_rlist_bytes(l));
        } else {
            nf_rlist_free(l);
        }
    }
    pthread_mutex_unlock(&c->mu);
    *out = l;
    return r;
}

/* A copy of the view's answer for limit and topic while it holds at now, or NULL. */
static char *answer_get(vcache_t *c, unsigned limit, int topic, int64_t now, size_t *len)
{
    char *copy = NULL;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ANSWERS_CAP && !copy; i++) {
        const answer_t *a = &c->answers[i];
        if (a->body && a->limit == limit && a->topic == topic &&
            !(a->until_ms && now >= a->until_ms) && (copy = malloc(a->len + 1))) {
            memcpy(copy, a->body, a->len + 1);
            *len = a->len;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return copy;
}

/* Keeps a copy of body as the view's answer for limit and topic, valid until the first of the
 * trending window's vectors that are still live at now expires. */
static void answer_put(nf_query_t *q, vcache_t *c, unsigned limit, int topic, int64_t now,
                       const char *body, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, body, len);
    copy[len] = '\0';
    pthread_mutex_lock(&c->mu);
    int64_t until = 0;
    for (size_t j = 0; j < c->trending.n; j++) {
        int64_t e = c->trending.e[j].expires_ms;
        if (e > now && (!until || e < until))
            until = e;
    }
    answer_t *a = &c->answers[((size_t)limit * 31 + (size_t)(topic + 1)) % ANSWERS_CAP];
    for (size_t i = 0; i < ANSWERS_CAP; i++)
        if (!c->answers[i].body || (c->answers[i].limit == limit && c->answers[i].topic == topic)) {
            a = &c->answers[i];
            break;
        }
    if (a->body)
        c->bytes -= a->len + 1;
    vcache_grew(q, c, len + 1);
    free(a->body);
    *a = (answer_t){.limit = limit, .topic = topic, .until_ms = until, .body = copy, .len = len};
    pthread_mutex_unlock(&c->mu);
}

/* A trending entry's story: its id now (a story merged since the window was ranked answers as
 * the one it merged into), its size and sources, and how many of its articles the window read.
 * 0, or < 0 on a read error (err). */
static int put_trending_story(const nf_query_t *q, nf_store_view_t *v, uint64_t clock, nf_jw_t *w,
                              const trend_t *t, size_t i, int64_t now, char *err, size_t errlen)
{
    nf_id128_t sid, root;
    story_info_t si = {.size = 1};
    const char *cid = t->clusters[i] ? t->clusters[i] : t->ids[i];
    bool hex = strlen(cid) == 32 && nf_id128_from_hex32(cid, &sid) == 0;
    int r = hex ? find_cluster(q, v, clock, sid, &root, err, errlen) : 0;
    if (hex && r == 0)
        r = story_info(q, v, root, now, &si, err, errlen);
    if (r < 0)
        return r;
    if (hex) {
        put_story_fields(w, root, &si);
    } else { /* an id of no article: a story of its own */
        nf_jw_key(w, "cluster_id");
        nf_jw_str(w, cid);
        nf_jw_key(w, "cluster_size");
        nf_jw_u64(w, 1);
        nf_jw_key(w, "cluster_sources");
        nf_jw_u64(w, 0);
    }
    nf_jw_key(w, "articles_read");
    nf_jw_u64(w, t->articles[i]);
    return 0;
}

static int route_trending(nf_query_t *q, nf_store_view_t *v, nf_admin_req_t *req, char **body,
                          size_t *len)
{
    unsigned limit;
    if (!parse_limit(nf_admin_req_arg(req, "limit"), LIMIT_DEFAULT, &limit))
        return fail(400, "limit must be a whole number from 1 to 100", "limit", body, len);
    const char *topic = nf_admin_req_arg(req, "topic");
    int ti = -1;
    if (topic && (ti = topic_index(q, topic)) < 0)
        return bad_topic(q, topic, body, len);
    char err[256] = "";
    int64_t now = now_ms(q);
    vcache_t solo, *vc, *c;
    int r = vcache_open(q, v, now, &solo, &vc, &c, err, sizeof err);
    if (r != 0) {
        vcache_done(q, vc, c, &solo);
        return r == -ENOMEM ? fail(503, "out of memory", NULL, body, len)
                            : store_failed(err, body, len);
    }
    char *kept = vc ? answer_get(vc, limit, ti, now, len) : NULL;
    if (kept) { /* the view's answer: computed once per view, limit and topic */
        vcache_done(q, vc, c, &solo);
        *body = kept;
        return 200;
    }
    const trend_t *t = &c->trend;
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "window_start");
    nf_jw_str(&w, t->window_start);
    nf_jw_key(&w, "window_end");
    nf_jw_str(&w, t->window_end);
    nf_jw_key(&w, "topic");
    nf_jw_str(&w, topic);
    nf_jw_key(&w, "items");
    nf_jw_arr_open(&w);
    unsigned shown = 0;
    size_t j = 0; /* c->trending holds the window's article ids, in its order */
    for (size_t i = 0; i < t->n && shown < limit; i++) {
        const nf_rentry_t *e = t->hex[i] && j < c->trending.n ? &c->trending.e[j++] : NULL;
        bool known = e && e->known && !(e->expires_ms && e->expires_ms <= now);
        const nf_topic_weight_t *vw = known ? c->trending.w + e->off : NULL;
        if (ti >= 0) {
            bool has = false;
            for (uint32_t k = 0; known && k < e->n && !has; k++)
                has = vw[k].topic == (unsigned)ti && vw[k].weight > 0;
            if (!has)
                continue;
        }
        nf_jw_elem(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "article_id");
        nf_jw_str(&w, t->ids[i]);
        nf_jw_key(&w, "score");
        nf_jw_u64(&w, t->scores[i]);
        nf_jw_key(&w, "topics");
        if (known) {
            nf_topic_vec_t vec = {.n = e->n};
            memcpy(vec.t, vw, e->n * sizeof *vw);
            put_vector(q, &w, &vec);
        } else {
            nf_jw_null(&w);
        }
        if ((r = put_trending_story(q, v, c->clock, &w, t, i, now, err, sizeof err)) < 0)
            break;
        nf_jw_obj_close(&w);
        shown++;
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    if (r < 0) {
        nf_jw_free(&w);
        vcache_done(q, vc, c, &solo);
        return store_failed(err, body, len);
    }
    int status = finish(&w, 200, body, len);
    if (vc && status == 200)
        answer_put(q, vc, limit, ti, now, *body, *len);
    vcache_done(q, vc, c, &solo);
    return status;
}

/* One ranking of a reader's lists under a variant's weights (engine/variants.h): the chosen
 * articles, best first, one per story, with the items made for this request. */
typedef struct feed_pass {
    nf_cand_t *cand;       /* every list entry may be a candidate */
    const item_t **chosen; /* limit + 1 of each */
    item_t *tmp;
    nf_cand_t *chosen_c;
    size_t shown, ntmp, limit;
} feed_pass_t;

static int feed_pass_init(feed_pass_t *p, size_t total, unsigned limit)
{
    *p = (feed_pass_t){.limit = limit};
    p->cand = malloc((total + 1) * sizeof *p->cand);
    p->chosen = malloc((limit + 1) * sizeof *p->chosen);
    p->tmp = calloc(limit + 1, sizeof *p->tmp);
    p->chosen_c = malloc((limit + 1) * sizeof *p->chosen_c);
    return p->cand && p->chosen && p->tmp && p->chosen_c ? 0 : -ENOMEM;
}

/* Frees the items made for this request (all of tmp: a pass leaves them NULL or its own). */
static void feed_pass_free(feed_pass_t *p)
{
    for (size_t i = 0; p->tmp && i < p->limit + 1; i++)
        free(p->tmp[i].frag);
    free(p->tmp);
    free(p->chosen);
    free(p->chosen_c);
    free(p->cand);
}

/* The reader's weights by topic under weights wt: interest × their vector (when the feed draws
 * from their top topics) + follow × each followed topic (query.h). */
static void feed_dense(const nf_reader_t *rd, bool interest, const nf_rank_weights_t *wt,
                       double dense[NF_TOPICS_MAX])
{
    memset(dense, 0, NF_TOPICS_MAX * sizeof *dense);
    for (uint32_t i = 0; interest && i < rd->vec.n; i++)
        dense[rd->vec.t[i].topic] = wt->interest * rd->vec.t[i].weight;
    for (unsigned t = 0; t < NF_TOPICS_MAX; t++)
        dense[t] += ((rd->follow >> t) & 1) ? wt->follow : 0;
}

/* Whether the reader muted the source whose hash is h (engine/follows.h; 0: no source). */
static bool source_muted(const nf_reader_t *rd, uint64_t h)
{
    for (unsigned i = 0; h && i < rd->nmsrc; i++)
        if (rd->msrc[i] == h)
            return true;
    return false;
}

/* The best `limit` of the lists for the reader (dense NULL: cold, by trending score), one per
 * story and none of a muted source: the best m articles (rank.h: the lists read only as far as
 * an entry could still enter), m four times larger while stories and muted sources used up the
 * m before the limit and some were left out. 0, -ENOMEM or -EIO (err). */
static int feed_rank(nf_query_t *q, nf_store_view_t *v, vcache_t *vc, uint64_t clock,
                     const nf_reader_t *rd, const nf_rlist_t *const *lists, size_t nl,
                     const double *dense, const nf_rank_weights_t *wt, int64_t now, feed_pass_t *p,
                     char *err, size_t errlen)
{
    size_t m = p->limit + 8;
    nf_rank_t rk = {.dropped = true};
    for (int pass = 0;; pass++) {
        if (pass > 0 && (p->shown == p->limit || !rk.dropped))
            return 0;
        if (pass > 0)
            m *= 4;
        nf_rank_init(&rk, dense, now, p->cand, m);
        rk.trend_w = wt->trending;
        rk.decay = wt->decay;
        rk.skip = hidden_skip;
        rk.skip_arg = rd;
        rk.mute = rd->mute;
        size_t entries = 0;
        for (size_t k = 0; k < nl; k++) {
            nf_rank_list(&rk, lists[k], true);
            entries += lists[k]->n;
        }
        nf_counter_add(q->m_feed_scored, rk.scored);
        nf_counter_add(q->m_feed_skipped, entries - rk.scored);
        nf_rank_finish(&rk);
        for (size_t i = 0; i < p->ntmp; i++) { /* the last pass's items made for this request */
            free(p->tmp[i].frag);
            p->tmp[i].frag = NULL;
        }
        p->shown = p->ntmp = 0;
        nf_cand_t x;
        while (p->shown < p->limit && nf_rank_next(&rk, &x)) { /* each article once (rank.h) */
            const item_t *it = NULL;
            int r = item_get(q, v, vc, clock, x.e->id, now, &p->tmp[p->ntmp], &it, err, errlen);
            if (r != 0)
                return r;
            bool seen = source_muted(rd, it->source);
            for (size_t k = 0; k < p->shown && !seen; k++)
                seen = nf_id128_cmp(p->chosen[k]->root, it->root) == 0;
            if (seen) { /* one article per story (the best of each), none of a muted source */
                if (it == &p->tmp[p->ntmp]) {
                    free(p->tmp[p->ntmp].frag);
                    p->tmp[p->ntmp].frag = NULL;
                }
                continue;
            }
            if (it == &p->tmp[p->ntmp])
                p->ntmp++;
            p->chosen_c[p->shown] = x;
            p->chosen[p->shown++] = it;
        }
    }
}

/* The shadow variant (engine/variants.h) ranked over the same lists for a reader ranked by
 * interest or follows: the share of the served stories it would have shown too, observed in
 * newsflow_ranking_shadow_overlap. Its failure is counted, never the reader's. */
static void feed_shadow(nf_query_t *q, nf_store_view_t *v, vcache_t *vc, uint64_t clock,
                        const nf_reader_t *rd, bool interest, const nf_rlist_t *const *lists,
                        size_t nl, size_t total, int64_t now, unsigned vi,
                        const feed_pass_t *served)
{
    const nf_variants_t *vs = q->variants;
    double dense[NF_TOPICS_MAX];
    feed_dense(rd, interest, &vs->v[vs->shadow].w, dense);
    feed_pass_t p;
    char err[256];
    int r = feed_pass_init(&p, total, (unsigned)served->limit);
    if (r == 0)
        r = feed_rank(q, v, vc, clock, rd, lists, nl, dense, &vs->v[vs->shadow].w, now, &p, err,
                      sizeof err);
    if (r != 0) {
        nf_counter_inc(q->m_shadow_errors);
        feed_pass_free(&p);
        return;
    }
    size_t both = 0;
    for (size_t i = 0; i < served->shown; i++)
        for (size_t k = 0; k < p.shown; k++)
            if (nf_id128_cmp(served->chosen[i]->root, p.chosen[k]->root) == 0) {
                both++;
                break;
            }
    size_t n = served->shown > p.shown ? served->shown : p.shown;
    nf_histogram_observe(q->m_shadow_overlap[vi], n ? (double)both / (double)n : 1.0);
    feed_pass_free(&p);
}

/* Whether this feed is one of ranking.shadow_percent of those the shadow could rank beside:
 * feed k of this process is when k % 100 < the percent (an exact share, whatever the readers). */
static bool shadow_sampled(nf_query_t *q)
{
    uint64_t k = atomic_fetch_add_explicit(&q->shadow_tick, 1, memory_order_relaxed);
    return k % 100 < q->o.shadow_percent;
}

/* The feed's answer: the reader, where its articles came from, the variant and the items. */
static int feed_answer(nf_query_t *q, nf_store_view_t *v, const vcache_t *c, const char *user,
                       const nf_reader_t *rd, const char *source, const unsigned *top, unsigned nt,
                       const char *variant, int64_t now, const feed_pass_t *p, char **body,
                       size_t *len)
{
    nf_jw_t w;
    open_answer(&w, v);
    nf_jw_key(&w, "user_id");
    nf_jw_str(&w, user);
    nf_jw_key(&w, "source");
    nf_jw_str(&w, source);
    nf_jw_key(&w, "variant");
    nf_jw_str(&w, variant);
    nf_jw_key(&w, "ranked_at_ms");
    nf_jw_i64(&w, now);
    nf_jw_key(&w, "window_end");
    nf_jw_str(&w, c->trend.window_end);
    nf_jw_key(&w, "top_topics");
    nf_jw_arr_open(&w);
    for (unsigned k = 0; k < nt; k++) {
        nf_jw_elem(&w);
        put_topic_name(q, &w, top[k]);
    }
    nf_jw_arr_close(&w);
    put_topic_mask(q, &w, "followed_topics", rd->follow);
    put_topic_mask(q, &w, "muted_topics", rd->mute);
    nf_jw_key(&w, "muted_sources");
    nf_jw_arr_open(&w);
    for (size_t at = 0; at < rd->msrc_text_len; at += strlen(rd->msrc_text + at) + 1) {
        nf_jw_elem(&w);
        nf_jw_str(&w, rd->msrc_text + at);
    }
    nf_jw_arr_close(&w);
    nf_jw_key(&w, "items");
    nf_jw_arr_open(&w);
    for (size_t i = 0; i < p->shown; i++) {
        const nf_cand_t *x = &p->chosen_c[i];
        const item_t *it = p->chosen[i];
        nf_jw_elem(&w);
        nf_jw_obj_open(&w);
        nf_jw_raw(&w, it->frag, it->fraglen);
        w.first = false;
        nf_jw_key(&w, "published_ms");
        nf_jw_i64(&w, x->e->published_ms ? x->e->published_ms : it->published_ms);
        nf_jw_key(&w, "topics");
        nf_topic_vec_t vec = {.n = x->nw};
        memcpy(vec.t, x->w, x->nw * sizeof *x->w);
        put_vector(q, &w, &vec);
        nf_jw_key(&w, "score");
        nf_jw_score(&w, x->score);
        nf_jw_key(&w, "trending_score");
        nf_jw_u64(&w, x->e->trend);
        put_story_fields(&w, it->root, &it->story);
        nf_jw_obj_close(&w);
    }
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    return finish(&w, 200, body, len);
}

static int route_feed(nf_query_t *q, nf_store_view_t *v, const char *user, nf_admin_req_t *req,
                      char **body, size_t *len)
{
    unsigned limit;
    if (!parse_limit(nf_admin_req_arg(req, "limit"), LIMIT_DEFAULT, &limit))
        return fail(400, "limit must be a whole number from 1 to 100", "limit", body, len);
    char err[256] = "";
    int64_t now = now_ms(q);
    nf_reader_t *rd = malloc(sizeof *rd); /* what the reader disliked or hid stays out */
    if (!rd)
        return fail(503, "out of memory", NULL, body, len);
    int ri = find_reader(q, v, user, now, req, rd, err, sizeof err);
    if (ri < 0) {
        free(rd);
        return ri == -ENOMEM ? fail(503, "out of memory", NULL, body, len)
                             : store_failed(err, body, len);
    }
    vcache_t solo, *vc, *c;
    int r = vcache_open(q, v, now, &solo, &vc, &c, err, sizeof err);
    unsigned top[FEED_TOPICS], drawn[NF_TOPICS_MAX];
    unsigned nt = ri == 1 ? top_topics(&rd->vec, rd->mute, top) : 0;
    unsigned nd = feed_topics(top, nt, rd->follow, drawn);
    nf_rlist_t own[NF_TOPICS_MAX]; /* the lists not in the view's cache: nd used */
    memset(own, 0, nd * sizeof *own);
    const nf_rlist_t *lists[NF_TOPICS_MAX + 1];
    size_t nl = 0, total = 0;
    if (r == 0 && !nd) {
        lists[nl++] = &c->trending;
        total = c->trending.n;
    }
    for (unsigned k = 0; r == 0 && k < nd; k++) {
        r = feed_list(q, v, vc, c, drawn[k], now, &own[k], &lists[nl]);
        total += lists[nl++]->n;
    }
    const nf_variants_t *vs = q->variants;
    unsigned vi = nf_variants_assign(vs, user, strlen(user));
    feed_pass_t p = {0};
    if (r == 0)
        r = feed_pass_init(&p, total, limit);
    double dense[NF_TOPICS_MAX];
    feed_dense(rd, nt > 0, &vs->v[vi].w, dense);
    if (r == 0)
        r = feed_rank(q, v, vc, c->clock, rd, lists, nl, nd ? dense : NULL, &vs->v[vi].w, now, &p,
                      err, sizeof err);
    int status;
    if (r != 0) {
        status = r == -ENOMEM ? fail(503, "out of memory", NULL, body, len)
                              : store_failed(err[0] ? err : "a scan of the recent articles failed",
                                             body, len);
    } else {
        if (vs->shadow >= 0 && nd && shadow_sampled(q))
            feed_shadow(q, v, vc, c->clock, rd, nt > 0, lists, nl, total, now, vi, &p);
        status = feed_answer(q, v, c, user, rd,
                             nt   ? "interest"
                             : nd ? "follows"
                                  : "trending",
                             top, nt, vs->v[vi].name, now, &p, body, len);
        if (status == 200)
            nf_counter_inc(q->m_feeds[vi]);
    }
    free(rd);
    feed_pass_free(&p);
    for (unsigned k = 0; k < nd; k++)
        nf_rlist_free(&own[k]);
    vcache_done(q, vc, c, &solo);
    return status;
}

/* -------------------------------------------------------------------------------- search */

/* What the search keeps (one article per story cluster, with metadata in the view). */
typedef struct skeep {
    nf_query_t *q;
    nf_store_view_t *v;
    uint64_t clock;
    int64_t now;
    unsigned n;
    nf_id128_t roots[LIMIT_MAX];
    story_info_t stories[LIMIT_MAX];
    cJSON *metas[LIMIT_MAX];
    int rc; /* a read failed: < 0, with err */
    char err[256];
} skeep_t;

static bool search_keep(void *arg, const nf_search_hit_t *h)
{
    skeep_t *k = arg;
    if (k->rc < 0 || k->n >= LIMIT_MAX)
        return false;
    int rc = 0;
    cJSON *meta = read_meta(k->q, k->v, h->id, k->now, &rc, k->err, sizeof k->err);
    nf_id128_t root = h->id;
    story_info_t si = {.size = 1};
    int r = meta ? find_cluster(k->q, k->v, k->clock, h->id, &root, k->err, sizeof k->err) : 0;
    if (meta && r == 0)
        r = story_info(k->q, k->v, root, k->now, &si, k->err, sizeof k->err);
    if (rc < 0 || r < 0) {
        k->rc = rc < 0 ? rc : r;
        cJSON_Delete(meta);
        return false;
    }
    if (!meta)
        return false; /* gone from the committed state (expired) since it was indexed */
    for (unsigned i = 0; i < k->n; i++) {
        if (k->roots[i].hi == root.hi && k->roots[i].lo == root.lo) {
            cJSON_Delete(meta);
            return false; /* its story is shown already, by a better article */
        }
    }
    k->roots[k->n] = root;
    k->stories[k->n] = si;
    k->metas[k->n++] = meta;
    return true;
}

static void put_terms(nf_jw_t *w, const char *key, const nf_search_query_t *sq, bool phrase,
                      bool excluded)
{
    nf_jw_key(w, key);
    nf_jw_arr_open(w);
    for (unsigned i = 0; i < sq->n; i++) {
        if (sq->t[i].excluded != excluded || (!excluded && sq->t[i].phrase != phrase))
            continue;
        nf_jw_elem(w);
        nf_jw_str(w, sq->t[i].text);
    }
    nf_jw_arr_close(w);
}

static void put_search_hits(const nf_query_t *q, nf_jw_t *w, const nf_search_result_t *res,
                            const skeep_t *k)
{
    nf_jw_key(w, "results");
    nf_jw_arr_open(w);
    for (size_t i = 0; i < res->n && i < k->n; i++) {
        const nf_search_hit_t *h = &res->hits[i];
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "article_id");
        put_id(w, h->id);
        put_meta_fields(w, k->metas[i]);
        nf_jw_key(w, "title_html");
        nf_jw_str(w, h->title_html);
        nf_jw_key(w, "snippet_html");
        nf_jw_str(w, h->snippet_html);
        nf_jw_key(w, "score");
        nf_jw_unit(w, h->score);
        nf_jw_key(w, "relevance");
        nf_jw_unit(w, h->relevance);
        put_story_fields(w, k->roots[i], &k->stories[i]);
        nf_jw_obj_close(w);
    }
    nf_jw_arr_close(w);
    (void)q;
}

static int route_search(nf_query_t *q, nf_store_view_t *v, nf_admin_req_t *req, char **body,
                        size_t *len)
{
    if (!q->o.search)
        return fail(404, "search is off on this process (search.enabled)", NULL, body, len);
    const char *text = nf_admin_req_arg(req, "q");
    if (!text)
        return fail(400, "q is required: the words to search for", "q", body, len);
    nf_search_query_t sq;
    char err[320] = "";
    if (nf_search_query_parse(text, strlen(text), &sq, err, sizeof err) != 0)
        return fail(400, err, "q", body, len);
    unsigned limit;
    if (!parse_limit(nf_admin_req_arg(req, "limit"), LIMIT_DEFAULT, &limit))
        return fail(400, "limit must be a whole number from 1 to 100", "limit", body, len);
    const char *tname = nf_admin_req_arg(req, "topic");
    int topic = tname ? topic_index(q, tname) : -1;
    if (tname && topic < 0)
        return bad_topic(q, tname, body, len);
    const char *since_s = nf_admin_req_arg(req, "since");
    int64_t since = 0;
    if (since_s && nf_date_parse(since_s, strlen(since_s), &since) != 0)
        return fail(400, "since must be a date and time (RFC 3339, e.g. 2026-11-27T08:00:00Z)",
                    "since", body, len);
    skeep_t k = {.q = q, .v = v, .clock = nf_cluster_view_clock(v), .now = now_ms(q)};
    nf_search_result_t res;
    int r = nf_search_run(q->o.search, &sq, topic, since, k.now, limit, search_keep, &k, &res, err,
                          sizeof err);
    int status;
    if (r == -EAGAIN || r == -EBUSY) {
        nf_admin_req_header(req, "Retry-After", "1");
        status = fail(503, err, NULL, body, len);
    } else if (r == -EINVAL) {
        status = fail(400, err, "q", body, len);
    } else if (r < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "the search index failed: %s", err);
        status = fail(503, msg, NULL, body, len);
    } else if (k.rc < 0) {
        status = store_failed(k.err, body, len);
    } else {
        nf_jw_t w;
        open_answer(&w, v);
        nf_jw_key(&w, "indexed_epoch");
        nf_jw_u64(&w, res.epoch);
        nf_jw_key(&w, "query");
        nf_jw_obj_open(&w);
        put_terms(&w, "words", &sq, false, false);
        put_terms(&w, "phrases", &sq, true, false);
        put_terms(&w, "excluded", &sq, false, true);
        nf_jw_key(&w, "dropped");
        nf_jw_u64(&w, res.dropped);
        nf_jw_obj_close(&w);
        nf_jw_key(&w, "topic");
        nf_jw_str(&w, topic >= 0 ? q->o.topic_names[topic] : NULL);
        nf_jw_key(&w, "since");
        if (since_s)
            put_date(&w, since);
        else
            nf_jw_null(&w);
        nf_jw_key(&w, "articles_indexed");
        nf_jw_u64(&w, res.articles);
        nf_jw_key(&w, "matches");
        nf_jw_u64(&w, res.matches);
        nf_jw_key(&w, "matches_capped");
        nf_jw_bool(&w, res.capped);
        put_search_hits(q, &w, &res, &k);
        nf_jw_obj_close(&w);
        status = finish(&w, 200, body, len);
    }
    for (unsigned i = 0; i < k.n; i++)
        cJSON_Delete(k.metas[i]);
    if (r == 0)
        nf_search_result_free(&res);
    return status;
}

static int route_topics(const nf_query_t *q, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    put_topic_list(q, &w);
    nf_jw_obj_close(&w);
    return finish(&w, 200, body, len);
}

/* ------------------------------------------------------------------------------ owners */

/* CRC-32 (IEEE 802.3, reflected; zlib's and librdkafka's rd_crc32). */
static uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int b = 0; b < 8; b++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

int32_t nf_query_partition(int partitioner, const char *user, size_t n, unsigned partitions)
{
    if (partitions == 0)
        return 0;
    uint32_t h = partitioner == 1 ? (uint32_t)nf_murmur2(user, n) & 0x7fffffffu
                                  : crc32_ieee((const unsigned char *)user, n);
    return (int32_t)(h % partitions);
}

/* Appends s percent-encoded (RFC 3986 unreserved bytes and, with slash, '/' kept) to out at
 * *at (cut before cap). */
static void put_encoded(char *out, size_t cap, size_t *at, const char *s, bool slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p && *at + 4 < cap; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (slash && c == '/')) {
            out[(*at)++] = (char)c;
        } else {
            out[(*at)++] = '%';
            out[(*at)++] = hex[c >> 4];
            out[(*at)++] = hex[c & 15];
        }
    }
    out[*at] = 0;
}

/* 307 to the process assigned (in, partition): Location = its URL + /v1/ + route + the
 * arguments this API reads; 503 + Retry-After while none is known (or the table still names
 * this process: it has just let the partition go). */
static int redirect(nf_query_t *q, nf_admin_req_t *req, const char *route, nf_input_t in,
                    int32_t partition, char **body, size_t *len)
{
    char url[512];
    if (!nf_owners_url(q->o.owners, in, partition, url, sizeof url) ||
        (q->o.self_url && strcmp(url, q->o.self_url) == 0)) {
        nf_owners_kick(q->o.owners);
        nf_counter_add(q->m_unknown_owner, 1);
        nf_admin_req_header(req, "Retry-After", "1");
        nf_jw_t w;
        nf_jw_init(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "error");
        nf_jw_str(&w, "another process owns this key and which one is not known yet (the "
                      "consumer group is rebalancing): retry");
        nf_jw_key(&w, "input");
        nf_jw_str(&w, nf_input_name(in));
        nf_jw_key(&w, "partition");
        nf_jw_i64(&w, partition);
        nf_jw_obj_close(&w);
        return finish(&w, 503, body, len);
    }
    char loc[2048];
    size_t at = (size_t)snprintf(loc, sizeof loc, "%s/v1/", url);
    if (at >= sizeof loc)
        at = sizeof loc - 1;
    put_encoded(loc, sizeof loc, &at, route, true);
    static const char *const args[] = {"limit", "topic", "after"};
    char sep = '?';
    for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
        const char *v = nf_admin_req_arg(req, args[i]);
        if (!v || at + strlen(args[i]) + 3 >= sizeof loc)
            continue;
        at += (size_t)snprintf(loc + at, sizeof loc - at, "%c%s=", sep, args[i]);
        put_encoded(loc, sizeof loc, &at, v, false);
        sep = '&';
    }
    nf_admin_req_header(req, "Location", loc);
    nf_counter_add(q->m_redirects, 1);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, "another process of the job owns this key: ask it (Location)");
    nf_jw_key(&w, "owner");
    nf_jw_str(&w, url);
    nf_jw_key(&w, "location");
    nf_jw_str(&w, loc);
    nf_jw_key(&w, "input");
    nf_jw_str(&w, nf_input_name(in));
    nf_jw_key(&w, "partition");
    nf_jw_i64(&w, partition);
    nf_jw_obj_close(&w);
    return finish(&w, 307, body, len);
}

/* Whether another process answers this route: 0 (answer here) or the status written. */
static int route_elsewhere(nf_query_t *q, nf_route_id_t which, const char *route, const char *user,
                           size_t ulen, nf_admin_req_t *req, char **body, size_t *len)
{
    if (!q->o.owns)
        return 0; /* one process: every key is here */
    if (which == NF_ROUTE_INTEREST || which == NF_ROUTE_FEED || which == NF_ROUTE_READS) {
        int32_t p = nf_query_partition(q->o.partitioner, user, ulen, q->o.read_partitions);
        if (!q->o.owns(q->o.owns_arg, (unsigned)p))
            return redirect(q, req, route, NF_INPUT_READ_EVENTS, p, body, len);
        if (which != NF_ROUTE_FEED || !q->o.global_here || q->o.global_here(q->o.owns_arg))
            return 0;
        nf_admin_req_header(req, "Retry-After", "5");
        return fail(503,
                    "this process owns the reader but holds no state of the global key group "
                    "(articles, stories, trending) to rank a feed with: run with "
                    "state.changelog=true and serve.global_replica=true on Apache Kafka",
                    NULL, body, len);
    }
    if (!q->o.global_here || q->o.global_here(q->o.owns_arg))
        return 0;
    return redirect(q, req, route, NF_INPUT_TRENDING_PANES, 0, body, len);
}

/* The drill NEWSFLOW_FAILPOINTS=slow-route:feed=MS (runtime/failpoint.h): a feed answered MS
 * late, to see the feed latency SLO's histogram and alerts move (docs/runbooks.md). */
static void drill_slow_feed(void)
{
    long ms = nf_failpoint_value("slow-route:feed");
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}

int nf_query_handle(nf_query_t *q, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    const char *p = NULL;
    size_t pl = 0;
    const nf_route_t *r = nf_route_match("GET", route, &p, &pl, NULL);
    if (!r || r->by != NF_SERVED_BY_QUERY)
        return 0;
    nf_route_id_t which = r->id;
    if (which == NF_ROUTE_TOPICS)
        return route_topics(q, body, len);
    /* The path parameter first: a 400 needs no state. */
    nf_id128_t id = {0, 0};
    int topic = -1;
    char *param = NULL;
    bool reader = which == NF_ROUTE_INTEREST || which == NF_ROUTE_FEED || which == NF_ROUTE_READS;
    if (reader && !valid_user(p, pl))
        return fail(400, "user_id must be 1 to 256 bytes of UTF-8 without control characters",
                    "user_id", body, len);
    if (which == NF_ROUTE_ARTICLE && !parse_id(p, pl, &id))
        return fail(400, "an article id is 32 lower-case hex digits", "article_id", body, len);
    if (which == NF_ROUTE_STORY && !parse_id(p, pl, &id))
        return fail(400, "a story id is 32 lower-case hex digits", "cluster_id", body, len);
    if (which == NF_ROUTE_RECENT) {
        if (!(param = strndup(p, pl)))
            return fail(503, "out of memory", NULL, body, len);
        topic = topic_index(q, param);
        int st = topic < 0 ? bad_topic(q, param, body, len) : 0;
        free(param);
        param = NULL;
        if (st)
            return st;
    }
    if (reader && !(param = strndup(p, pl)))
        return fail(503, "out of memory", NULL, body, len);
    int away = route_elsewhere(q, which, route, p, pl, req, body, len);
    if (away) {
        free(param);
        return away;
    }

    nf_store_view_t *v = q->o.store ? nf_store_view_acquire(q->o.store) : NULL;
    if (!v) {
        free(param);
        nf_admin_req_header(req, "Retry-After", "1");
        return fail(503, "restoring: no committed state to answer from yet", NULL, body, len);
    }
    int status = 0;
    switch (which) {
    case NF_ROUTE_INTEREST:
        status = route_interest(q, v, param, body, len);
        break;
    case NF_ROUTE_FEED:
        drill_slow_feed();
        status = route_feed(q, v, param, req, body, len);
        break;
    case NF_ROUTE_TRENDING:
        status = route_trending(q, v, req, body, len);
        break;
    case NF_ROUTE_ARTICLE:
        status = route_article(q, v, id, body, len);
        break;
    case NF_ROUTE_STORY:
        status = route_story(q, v, id, req, body, len);
        break;
    case NF_ROUTE_SEARCH:
        status = route_search(q, v, req, body, len);
        break;
    case NF_ROUTE_READS:
        status = route_reads(q, v, param, req, body, len);
        break;
    default:
        status = route_recent(q, v, (unsigned)topic, req, body, len);
        break;
    }
    free(param);
    nf_store_view_release(v);
    return status;
}
