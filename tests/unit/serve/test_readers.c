/* Tests src/serve/readers.c through the query API: a reader's feed inputs kept across committed
 * views against reading them afresh. Two query APIs over one store at one fixed clock — one keeps
 * readers (a small table: sets are shared and entries replaced), one does not — must answer every
 * feed byte for byte the same over random epochs that move readers' interest vectors between
 * partitions, hide and dislike articles (some expiring as the clock moves), follow and mute
 * topics and mute sources (engine/follows.h), delete vectors,
 * change which partitions this process owns, and ingest table files (writes whose ids the store
 * cannot name); and the kept inputs must be used (hits) when nothing of a reader changed. The
 * uncached path is itself checked against an independent model (integration/test_query_feed). */
#include "nf_test.h"
#include "testhttpc.h"
#include "teststore.h"

#include "actors/serve_state.h"
#include "algo/bytes.h"
#include "engine/follows.h"
#include "engine/interest.h"
#include "io/events.h"
#include "runtime/admin.h"
#include "runtime/metrics.h"
#include "serve/query.h"
#include "serve/readers.h"
#include "state/kstate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USERS    16
#define ARTICLES 48
#define TOPICS   3
#define SOURCES  5

static const char *const g_topics[TOPICS] = {"politics", "science", "sports"};
static bool g_owned[4] = {true, true, true, true};
/* The answers' clock: both APIs rank at this instant. It starts at the wall clock and runs
 * ahead of it (never behind: the store's compactions drop values by the wall clock's expiry). */
static int64_t g_now;
static nf_query_t *g_q; /* the API the next request goes to */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t n)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (g_rng >> 33) % n;
}

static bool owns(void *arg, unsigned p)
{
    (void)arg;
    return p < 4 && g_owned[p];
}

static int64_t clock_ms(void)
{
    return g_now;
}

static int api(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    (void)arg;
    int s = nf_query_handle(g_q, route, req, body, len);
    return s ? s : 404;
}

static void article_hex(unsigned i, char out[33])
{
    snprintf(out, 33, "%08x%08x%08x%08x", 0xa0000000u + i, i * 2654435761u, 7u, i);
}

/* Article i: topics by i, published i × 20 minutes before the clock's start, in each of its
 * topics' recent lists, on the trending window with score i % 7. */
static void put_articles(nf_store_batch_t *b)
{
    char json[8192];
    size_t at = (size_t)snprintf(json, sizeof json,
                                 "{\"window_start\":\"2025-11-24T15:00:00Z\",\"window_end\":"
                                 "\"2025-11-24T16:00:00Z\",\"items\":[");
    for (unsigned i = 0; i < ARTICLES; i++) {
        char hex[33];
        article_hex(i, hex);
        nf_id128_t id;
        nf_id128_from_hex32(hex, &id);
        nf_topic_vec_t vec = {.n = 0};
        for (unsigned t = 0; t < TOPICS; t++)
            if ((i + t) % 3 != 0)
                vec.t[vec.n++] = (nf_topic_weight_t){(uint16_t)t, 0.2 + 0.1 * ((i * (t + 1)) % 7)};
        int64_t published = g_now - (int64_t)i * 1200000;
        unsigned char val[16 + NF_TOPICS_ENC_MAX];
        nf_put_le64(val, (uint64_t)(published + 48 * 3600000)); /* a recent list's 48 h */
        nf_put_le64(val + 8, (uint64_t)published);
        int n = nf_interest_topics_encode(&vec, val + 16, NF_TOPICS_ENC_MAX);
        for (uint32_t k = 0; k < vec.n; k++) {
            unsigned char key[NF_SERVE_RECENT_KEY_LEN];
            nf_serve_recent_key(vec.t[k].topic, published, id, key);
            nf_store_batch_put(b, NF_KIND_TOPIC_RECENT, key, sizeof key, val, 16 + (size_t)n);
        }
        unsigned char tkey[18], tval[8 + NF_TOPICS_ENC_MAX];
        nf_kstate_encode_key((uint16_t)(id.hi % 256), id, tkey);
        nf_put_le64(tval, 0);
        n = nf_interest_topics_encode(&vec, tval + 8, NF_TOPICS_ENC_MAX);
        nf_store_batch_put(b, NF_KIND_ARTICLE_TOPICS, tkey, sizeof tkey, tval, 8 + (size_t)n);
        char meta[8 + 96]; /* its metadata: a source, which a reader may mute */
        nf_put_le64((unsigned char *)meta, 0);
        int ml = snprintf(meta + 8, sizeof meta - 8,
                          "{\"source_id\":\"wire-%u\",\"title\":\"a%u\"}", i % SOURCES, i);
        nf_store_batch_put(b, NF_KIND_ARTICLE_META, tkey, sizeof tkey, meta, 8 + (size_t)ml);
        at += (size_t)snprintf(json + at, sizeof json - at,
                               "%s{\"article_id\":\"%s\",\"score\":%u}", i ? "," : "", hex, i % 7);
    }
    snprintf(json + at, sizeof json - at, "]}");
    size_t jn = strlen(json);
    unsigned char *v = calloc(1, 8 + jn);
    memcpy(v + 8, json, jn);
    nf_store_batch_put(b, NF_KIND_TRENDING, "L", 1, v, 8 + jn);
    free(v);
}

static void user_name(unsigned u, char out[16])
{
    snprintf(out, 16, "r%u", u);
}

/* A new interest vector for reader u in partition p (or its deletion). */
static void put_interest(nf_store_batch_t *b, unsigned u, unsigned p, bool del)
{
    char name[16];
    user_name(u, name);
    unsigned char key[18], val[24 + NF_TOPICS_ENC_MAX];
    nf_kstate_encode_key((uint16_t)p, nf_interest_user_key(name), key);
    if (del) {
        nf_store_batch_delete(b, NF_KIND_INTEREST, key, sizeof key);
        return;
    }
    nf_topic_vec_t vec = {.n = 0};
    for (unsigned t = 0; t < TOPICS; t++)
        if (rnd(3))
            vec.t[vec.n++] = (nf_topic_weight_t){(uint16_t)t, (double)(rnd(200) + 1) / 100.0 - 0.3};
    int64_t expires = rnd(4) == 0 ? g_now + (int64_t)rnd(20000) + 1 : 0;
    nf_put_le64(val, (uint64_t)expires);
    nf_put_le64(val + 8, rnd(1000));
    nf_put_le64(val + 16, (uint64_t)(g_now + (int64_t)rnd(100000)));
    int n = nf_interest_topics_encode(&vec, val + 24, NF_TOPICS_ENC_MAX);
    nf_store_batch_put(b, NF_KIND_INTEREST, key, sizeof key, val, 24 + (size_t)n);
}

/* A history entry of reader u in partition p: a read, save, dislike or hide of a random article,
 * some expiring within the next seconds. */
static void put_history(nf_store_batch_t *b, unsigned u, unsigned p)
{
    char name[16], hex[33];
    user_name(u, name);
    article_hex((unsigned)rnd(ARTICLES), hex);
    nf_interest_read_t r = {.user = nf_interest_user_key(name),
                            .seen = {.hi = rnd(1u << 30), .lo = rnd(1u << 30)},
                            .ts_ms = g_now - (int64_t)rnd(100000),
                            .kg = (uint16_t)p};
    static const uint8_t kinds[4] = {NF_READ_KIND_READ, NF_READ_KIND_SAVE, NF_READ_KIND_DISLIKE,
                                     NF_READ_KIND_HIDE};
    r.kind = kinds[rnd(4)];
    int64_t expires = rnd(2) == 0 ? g_now + (int64_t)rnd(15000) + 1 : 0;
    nf_serve_history_put(b, &r, hex, 32, expires);
}

/* Reader u's followed and muted topics and muted sources in partition p (engine/follows.h), or
 * their deletion. */
static void put_settings(nf_store_batch_t *b, unsigned u, unsigned p)
{
    char name[16];
    user_name(u, name);
    unsigned char key[18], val[8 + NF_FOLLOWS_VALUE_MAX] = {0};
    nf_kstate_encode_key((uint16_t)p, nf_interest_user_key(name), key);
    if (rnd(5) == 0) {
        nf_store_batch_delete(b, NF_KIND_READS, key, sizeof key);
        return;
    }
    nf_follows_val_t v = {.updated_ms = g_now - (int64_t)rnd(100000)};
    for (unsigned t = 0; t < TOPICS; t++) {
        uint64_t r = rnd(3); /* followed, muted or neither */
        v.follow |= (uint64_t)(r == 0) << t;
        v.mute |= (uint64_t)(r == 1) << t;
    }
    for (unsigned k = 0, m = (unsigned)rnd(4); k < m; k++) { /* muted sources */
        char src[16];
        int sl = snprintf(src, sizeof src, "wire-%u", (unsigned)rnd(SOURCES));
        bool evicted;
        nf_follows_step_source(&v, NF_READ_KIND_MUTE_SOURCE, src, (size_t)sl, v.updated_ms,
                               &evicted);
    }
    size_t n = nf_follows_encode(&v, val + 8);
    nf_store_batch_put(b, NF_KIND_READS, key, sizeof key, val, 8 + n);
}

/* One epoch of random changes, written one of three ways. */
static void change(nf_store_t *st, uint64_t epoch)
{
    nf_store_batch_t *b = nf_store_batch_new();
    unsigned n = (unsigned)rnd(6);
    for (unsigned k = 0; k < n; k++) {
        unsigned u = (unsigned)rnd(USERS), p = (unsigned)rnd(4);
        uint64_t what = rnd(5);
        if (what < 2)
            put_interest(b, u, p, rnd(8) == 0);
        else if (what < 4)
            put_history(b, u, p);
        else
            put_settings(b, u, p);
    }
    char err[256];
    uint64_t how = rnd(10);
    if (n == 0)
        ;
    else if (how == 0)
        NF_CHECK_EQ(nf_store_ingest(st, b, err, sizeof err), 0);
    else if (how == 1)
        NF_CHECK_EQ(nf_store_write(st, b, err, sizeof err), 0);
    else
        NF_CHECK_EQ(nf_teststore_commit(st, epoch, b), 0);
    nf_store_batch_free(b);
}

static char *feed(uint16_t port, nf_query_t *q, unsigned u, int *status)
{
    char path[64], name[16];
    user_name(u, name);
    snprintf(path, sizeof path, "/v1/feed/%s?limit=30", name);
    g_q = q;
    nf_testhttpc_resp_t r = nf_testhttpc(port, "GET", path, NULL, "", 0);
    *status = r.status;
    char *body = r.body ? strdup(r.body) : strdup("");
    nf_testhttpc_free(&r);
    return body;
}

/* A store, the two query APIs on it (kept: a table of 8 readers, 4 sets of 2 that readers share;
 * fresh: none) served on one port, the articles committed in epoch 1, the clock at the wall's. */
typedef struct pair {
    char dir[128];
    nf_store_t *st;
    nf_query_t *kept, *fresh;
    nf_admin_t *a;
    uint16_t port;
} pair_t;

static bool pair_start(pair_t *t, const char *name)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    memset(g_owned, 1, sizeof g_owned);
    if (!nf_teststore_tmpdir(name, t->dir, sizeof t->dir) || !(t->st = nf_teststore_open(t->dir)))
        return false;
    nf_query_opts_t qo = {.store = t->st,
                          .topic_names = g_topics,
                          .ntopics = TOPICS,
                          .read_partitions = 4,
                          .owns = owns,
                          .clock_ms = clock_ms,
                          .reader_cache = 8};
    t->kept = nf_query_new(&qo);
    qo.reader_cache = 0;
    t->fresh = nf_query_new(&qo);
    nf_admin_hooks_t hooks = {.api = api};
    char err[256];
    if (!t->kept || !t->fresh || !(t->a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err)))
        return false;
    t->port = nf_admin_port(t->a);
    nf_store_batch_t *b = nf_store_batch_new();
    put_articles(b);
    int r = nf_teststore_commit(t->st, 1, b);
    nf_store_batch_free(b);
    return r == 0;
}

static void pair_stop(pair_t *t)
{
    nf_admin_stop(t->a);
    nf_query_free(t->kept);
    nf_query_free(t->fresh);
    nf_store_close(t->st);
    nf_teststore_rmtree(t->dir);
}

/* Both APIs' answers for reader u: 1 equal (status 200 and items), 0 equal otherwise, -1 they
 * differ (printed). *kept_body: the kept API's (malloc'd) when asked for. */
static int compare(pair_t *t, unsigned u, uint64_t epoch, char **kept_body)
{
    int s1, s2;
    char *x = feed(t->port, t->kept, u, &s1);
    char *y = feed(t->port, t->fresh, u, &s2);
    int r = s1 == 200 && strstr(x, "\"items\":[{") != NULL;
    if (s1 != s2 || strcmp(x, y) != 0) {
        fprintf(stderr, "epoch %llu reader r%u:\n  kept  %d %s\n  fresh %d %s\n",
                (unsigned long long)epoch, u, s1, x, s2, y);
        r = -1;
    }
    if (kept_body)
        *kept_body = x;
    else
        free(x);
    free(y);
    return r;
}

static void test_kept_equals_fresh(void)
{
    pair_t t;
    NF_REQUIRE(pair_start(&t, "readers"));
    unsigned compared = 0, differ = 0, items = 0;
    for (uint64_t epoch = 2; epoch < 160; epoch++) {
        change(t.st, epoch);
        if (rnd(12) == 0)
            g_owned[rnd(4)] ^= true;
        g_now += (int64_t)rnd(3000);
        NF_REQUIRE(nf_store_view_publish(t.st, epoch) == 0);
        for (unsigned k = 0; k < 6; k++) { /* some readers twice: kept, then used */
            int r = compare(&t, (unsigned)rnd(USERS), epoch, NULL);
            compared++;
            differ += r < 0 && differ < 3;
            items += r == 1;
        }
    }
    NF_CHECK_EQ(differ, 0);
    NF_CHECK(items > compared / 3); /* answers with items: their ranking is compared too */
    nf_readers_stats_t rs;
    nf_query_readers_stats(t.kept, &rs);
    fprintf(stderr, "compared %u feeds: kept inputs used %llu times, changed %llu, missed %llu\n",
            compared, (unsigned long long)rs.hits, (unsigned long long)rs.changed,
            (unsigned long long)rs.misses);
    NF_CHECK(rs.hits > compared / 10);
    NF_CHECK(rs.changed > 0);
    NF_CHECK(rs.misses > 0);
    pair_stop(&t);
}

/* The expiries a kept reader ends at, one by one with nothing written: a hidden article's (it
 * comes back into the feed), then the interest vector's (the feed becomes the trending
 * window's). */
static void test_kept_until_expiry(void)
{
    pair_t t;
    NF_REQUIRE(pair_start(&t, "readers_exp"));
    nf_readers_stats_t rs0, rs;
    nf_query_readers_stats(t.kept, &rs0); /* the counters are the process's metrics */
    nf_store_batch_t *b = nf_store_batch_new();
    char name[16], hex[33];
    user_name(0, name);
    unsigned char key[18], val[24 + NF_TOPICS_ENC_MAX];
    nf_kstate_encode_key(1, nf_interest_user_key(name), key);
    nf_topic_vec_t vec = {.n = 1, .t = {{1, 1.0}}}; /* science: article 0 is its newest */
    nf_put_le64(val, (uint64_t)(g_now + 20000));
    nf_put_le64(val + 8, 1);
    nf_put_le64(val + 16, (uint64_t)g_now);
    int n = nf_interest_topics_encode(&vec, val + 24, NF_TOPICS_ENC_MAX);
    nf_store_batch_put(b, NF_KIND_INTEREST, key, sizeof key, val, 24 + (size_t)n);
    article_hex(0, hex);
    nf_interest_read_t r = {.user = nf_interest_user_key(name),
                            .seen = {1, 2},
                            .ts_ms = g_now,
                            .kg = 1,
                            .kind = NF_READ_KIND_HIDE};
    nf_serve_history_put(b, &r, hex, 32, g_now + 10000);
    NF_REQUIRE(nf_teststore_commit(t.st, 2, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(t.st, 2) == 0);
    char *body = NULL;
    NF_CHECK_EQ(compare(&t, 0, 2, &body), 1); /* read, kept */
    NF_CHECK(strstr(body, hex) == NULL);
    NF_CHECK(strstr(body, "\"source\":\"interest\"") != NULL);
    free(body);
    NF_CHECK_EQ(compare(&t, 0, 2, NULL), 1); /* used */
    g_now += 10001;                          /* the hide has expired: article 0 is back */
    NF_CHECK_EQ(compare(&t, 0, 2, &body), 1);
    NF_CHECK(strstr(body, hex) != NULL);
    free(body);
    g_now += 10000; /* and the vector: the trending window's feed */
    NF_CHECK_EQ(compare(&t, 0, 2, &body), 1);
    NF_CHECK(strstr(body, "\"source\":\"trending\"") != NULL);
    free(body);
    nf_query_readers_stats(t.kept, &rs);
    NF_CHECK_EQ(rs.hits - rs0.hits, 1);
    NF_CHECK_EQ(rs.changed - rs0.changed, 2);
    pair_stop(&t);
}

int main(void)
{
    if (nf_metrics_init(4) != 0) /* the kept inputs' counters are metrics */
        return 1;
    NF_RUN(test_kept_equals_fresh);
    NF_RUN(test_kept_until_expiry);
    nf_metrics_shutdown();
    return nf_test_report();
}
