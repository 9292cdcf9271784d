/* Tests src/engine/cluster.c.
 *
 * The core is a corpus with planted near-duplicate groups (random-word base documents, each
 * with a few copies made by 1-2 word substitutions, so the 3-shingle Jaccard to the base is
 * >= 0.9) and unrelated singles, in shuffled order so that groups often form as separate
 * clusters first and merge later. Every result is checked against a reference union-find the
 * test builds from the reported actions (NEW/JOINED/MERGED semantics, cluster_id = earliest
 * article, merged_from = the ids that disappeared), the final clusters against a brute-force
 * LSH (any two articles sharing a band key with estimate >= threshold must share a cluster),
 * and against the planted groups by pairwise precision and recall.
 *
 * Around it: hand-made signatures for merges and out-of-order input, duplicates, empty
 * signatures, the bucket cap, TTL expiry, and restart through a real store (snapshot, commit,
 * new engine, under a tiny memory budget so entries are evicted and read back) giving exactly
 * the results of an uninterrupted run.
 *
 * Deterministic: one seeded PRNG. */
#include "algo/hash.h"
#include "algo/idset.h"
#include "algo/minhash.h"
#include "engine/cluster.h"
#include "nf_test.h"
#include "state/store.h"
#include "testcluster.h"
#include "teststore.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng_state += 0x9e3779b97f4a7c15ull;
    return nf_mix64(rng_state);
}

/* Clock readings lie in 2100, or in 2023 (PAST): the store's compaction filter must drop the
 * index's values by the engine's clock, whatever the wall clock says. */
#define FUTURE 4102444800000ll
#define PAST   1700000000000ll
#define DAY    ((int64_t)NF_CLUSTER_DAY_MS)

static nf_id128_t id_of(uint64_t i)
{
    return (nf_id128_t){nf_mix64(i + 1), nf_mix64(~i)};
}

static bool id_eq(nf_id128_t a, nf_id128_t b)
{
    return a.hi == b.hi && a.lo == b.lo;
}

static int id_cmp(nf_id128_t a, nf_id128_t b)
{
    if (a.hi != b.hi)
        return a.hi < b.hi ? -1 : 1;
    return a.lo < b.lo ? -1 : a.lo > b.lo;
}

static nf_cluster_t *engine(nf_store_t *st, size_t budget)
{
    nf_cluster_opts_t o;
    nf_cluster_opts_default(&o);
    o.budget_bytes = budget;
    return nf_cluster_new(st, &o);
}

/* ------------------------------------------------------------------ corpus */

enum { VOCAB = 20000 };
static char vocab[VOCAB][12];

static void make_vocab(void)
{
    for (int i = 0; i < VOCAB; i++) {
        int len = 3 + (int)(rnd() % 8);
        for (int k = 0; k < len; k++)
            vocab[i][k] = (char)('a' + rnd() % 26);
        vocab[i][len] = '\0';
    }
}

typedef struct doc {
    nf_id128_t id;
    uint64_t keys[16];
    int64_t ms;
    int group; /* planted group, -1 for a single */
    uint32_t sig[128];
} doc_t;

typedef struct corpus {
    doc_t *d;
    size_t n;
} corpus_t;

/* Renders words[0..n) as text and signs it. */
static void sign_words(nf_minhash_t *mh, nf_minhash_scratch_t *s, const uint32_t *w, size_t n,
                       uint32_t *sig)
{
    static char text[16384];
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", vocab[w[i]],
                                i % 9 == 8 ? ". " : " ");
    int r = nf_minhash_sign_text(mh, s, "", 0, text, len, sig);
    (void)r;
}

/* groups x (1 base + 2..5 near-duplicates) + singles, shuffled, ms increasing by 1 s. */
static void make_corpus(corpus_t *c, nf_minhash_t *mh, int groups, int singles)
{
    size_t cap = (size_t)groups * 6 + (size_t)singles;
    c->d = calloc(cap, sizeof *c->d);
    c->n = 0;
    nf_minhash_scratch_t s = {0};
    uint32_t base[300], w[300];
    for (int g = 0; g < groups + singles; g++) {
        size_t n = 200 + rnd() % 100;
        for (size_t i = 0; i < n; i++)
            base[i] = (uint32_t)(rnd() % VOCAB);
        int copies = g < groups ? 2 + (int)(rnd() % 4) : 0;
        for (int k = 0; k <= copies; k++) {
            memcpy(w, base, n * sizeof *w);
            /* 1-3 substitutions: Jaccard to the base >= (n-2-9)/(n-2+9) >= 0.91, but two
             * copies can be < 0.85 apart, so groups often form in parts and merge later. */
            if (k > 0)
                for (int e = 0, edits = 1 + (int)(rnd() % 3); e < edits; e++)
                    w[rnd() % n] = (uint32_t)(rnd() % VOCAB);
            doc_t *d = &c->d[c->n];
            d->group = g < groups ? g : -1;
            sign_words(mh, &s, w, n, d->sig);
            c->n++;
        }
    }
    nf_minhash_scratch_free(&s);
    for (size_t i = c->n; i > 1; i--) {
        size_t j = rnd() % i;
        doc_t t = c->d[i - 1];
        c->d[i - 1] = c->d[j];
        c->d[j] = t;
    }
    for (size_t i = 0; i < c->n; i++) {
        for (unsigned b = 0; b < 16; b++)
            c->d[i].keys[b] = nf_minhash_band_key(c->d[i].sig, b, 8);
        c->d[i].id = id_of(i);
        c->d[i].ms = FUTURE + (int64_t)i * 1000;
    }
}

/* ------------------------------------------------------------------ reference union-find */

typedef struct model {
    size_t n;
    size_t *parent; /* over corpus indices */
    nf_id128_t *id; /* copy of ids, for lookups */
    int64_t *ms;
} model_t;

static size_t m_find(model_t *m, size_t x)
{
    while (m->parent[x] != x)
        x = m->parent[x] = m->parent[m->parent[x]];
    return x;
}

static size_t m_index(const corpus_t *c, nf_id128_t id)
{
    for (size_t i = 0; i < c->n; i++)
        if (id_eq(c->d[i].id, id))
            return i;
    return (size_t)-1;
}

/* Adds doc i and checks the result against the model; returns false on a failed check. */
static bool add_checked(nf_cluster_t *cl, const corpus_t *c, model_t *m, size_t i,
                        nf_cluster_result_t *res, unsigned *counts)
{
    const doc_t *d = &c->d[i];
    int r = nf_cluster_add(cl, d->id, d->ms, d->sig, res);
    NF_CHECK_EQ(r, 0);
    if (r != 0)
        return false;
    counts[res->action]++;
    int before = nf_test_failed_checks;
    size_t root = m_index(c, res->cluster_id);
    NF_CHECK(root != (size_t)-1);
    if (root == (size_t)-1)
        return false;
    switch (res->action) {
    case NF_CLUSTER_NEW:
        NF_CHECK(id_eq(res->cluster_id, d->id));
        NF_CHECK(res->similarity == 0.0);
        NF_CHECK_EQ(res->merged_count, 0);
        break;
    case NF_CLUSTER_JOINED:
        /* An existing cluster's id, not later than the article. */
        NF_CHECK(root != i && m_find(m, root) == root);
        NF_CHECK(c->d[root].ms <= d->ms);
        NF_CHECK(res->similarity >= 0.85);
        NF_CHECK_EQ(res->merged_count, 0);
        m->parent[i] = root;
        break;
    case NF_CLUSTER_MERGED: {
        NF_CHECK(res->similarity >= 0.85);
        NF_CHECK(res->merged_count >= 1);
        /* The surviving id is the earliest of the clusters involved and the article. */
        size_t involved = root != i ? 1 : 0;
        NF_CHECK(root == i || m_find(m, root) == root);
        for (unsigned k = 0; k < res->merged_count; k++) {
            size_t x = m_index(c, res->merged_from[k]);
            NF_CHECK(x != (size_t)-1 && x != root && m_find(m, x) == x);
            if (x == (size_t)-1)
                return false;
            NF_CHECK(c->d[root].ms < c->d[x].ms ||
                     (c->d[root].ms == c->d[x].ms && id_cmp(c->d[root].id, c->d[x].id) < 0));
            if (k > 0) {
                size_t prev = m_index(c, res->merged_from[k - 1]);
                NF_CHECK(c->d[prev].ms <= c->d[x].ms);
            }
            m->parent[x] = root;
            involved++;
        }
        NF_CHECK(involved >= 2);
        m->parent[i] = root;
        break;
    }
    case NF_CLUSTER_DUPLICATE:
        NF_CHECK(m_find(m, i) == root);
        break;
    }
    return nf_test_failed_checks == before;
}

/* Pairwise precision/recall of final clusters (via nf_cluster_find) against planted groups;
 * also every final root must be the earliest member of its cluster. */
static void score(nf_cluster_t *cl, const corpus_t *c, double *prec, double *rec)
{
    size_t *root = malloc(c->n * sizeof *root);
    for (size_t i = 0; i < c->n; i++) {
        nf_id128_t cid;
        NF_CHECK_EQ(nf_cluster_find(cl, c->d[i].id, &cid), 1);
        root[i] = m_index(c, cid);
        NF_CHECK(root[i] != (size_t)-1);
        if (root[i] != (size_t)-1)
            NF_CHECK(c->d[root[i]].ms <= c->d[i].ms);
    }
    uint64_t tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < c->n; i++)
        for (size_t j = i + 1; j < c->n; j++) {
            bool same = root[i] == root[j];
            bool planted = c->d[i].group >= 0 && c->d[i].group == c->d[j].group;
            tp += same && planted;
            fp += same && !planted;
            fn += !same && planted;
        }
    *prec = tp + fp ? (double)tp / (double)(tp + fp) : 1.0;
    *rec = tp + fn ? (double)tp / (double)(tp + fn) : 1.0;
    free(root);
}

static void test_planted_groups(void)
{
    nf_minhash_opts_t mo;
    nf_minhash_opts_default(&mo);
    char err[256];
    nf_minhash_t *mh = nf_minhash_new(&mo, err, sizeof err);
    NF_REQUIRE(mh);
    corpus_t c;
    make_corpus(&c, mh, 250, 800);
    nf_cluster_t *cl = engine(NULL, 0);
    NF_REQUIRE(cl && c.d);
    model_t m = {.n = c.n, .parent = malloc(c.n * sizeof(size_t))};
    for (size_t i = 0; i < c.n; i++)
        m.parent[i] = i;
    unsigned counts[4] = {0};
    nf_cluster_result_t res;
    for (size_t i = 0; i < c.n; i++) {
        if (!add_checked(cl, &c, &m, i, &res, counts))
            break;
        /* Now and then a repeat of an earlier article: DUPLICATE, nothing changes. */
        if (i % 17 == 16) {
            size_t j = rnd() % (i + 1);
            if (!add_checked(cl, &c, &m, j, &res, counts))
                break;
            NF_CHECK_EQ(res.action, NF_CLUSTER_DUPLICATE);
        }
    }
    fprintf(stderr, "   %zu articles: new %u joined %u merged %u duplicate %u\n", c.n, counts[0],
            counts[1], counts[2], counts[3]);
    NF_CHECK(counts[NF_CLUSTER_MERGED] > 0); /* the shuffled order must exercise merges */

    /* The engine's clusters equal the model's. */
    for (size_t i = 0; i < c.n; i++) {
        nf_id128_t cid;
        NF_CHECK_EQ(nf_cluster_find(cl, c.d[i].id, &cid), 1);
        NF_CHECK(id_eq(cid, c.d[m_find(&m, i)].id));
    }
    /* Brute-force LSH: a pair sharing a band key with a verified estimate shares a cluster. */
    unsigned pairs = 0;
    for (size_t i = 0; i < c.n; i++) {
        for (size_t j = i + 1; j < c.n; j++) {
            bool share = false;
            for (unsigned b = 0; b < 16 && !share; b++)
                share = c.d[i].keys[b] == c.d[j].keys[b];
            if (share && nf_minhash_similarity(c.d[i].sig, c.d[j].sig, 128) >= 0.85) {
                pairs++;
                NF_CHECK(m_find(&m, i) == m_find(&m, j));
            }
        }
    }
    double prec, rec;
    score(cl, &c, &prec, &rec);
    fprintf(stderr, "   verified LSH pairs %u; pairwise precision %.4f recall %.4f\n", pairs, prec,
            rec);
    /* Unrelated random-word documents share no 3-shingle: any false pair is a bug. Planted
     * copies are >= 0.91 from their base (LSH probability ~1; the estimate's s.e. is ~0.025, so
     * ~1% of copy-base pairs miss 0.85) and groups also connect through other copies, so
     * recall below 0.97 means something is broken. */
    NF_CHECK(prec >= 0.999);
    NF_CHECK(rec >= 0.97);

    nf_cluster_stats_t st;
    nf_cluster_stats(cl, &st);
    NF_CHECK_EQ(st.sig.entries, c.n);
    NF_CHECK_EQ(st.parent.entries, c.n + 1); /* + the clock */
    NF_CHECK(st.bytes > 0 && st.entries == st.sig.entries + st.bucket.entries + st.parent.entries);
    nf_cluster_free(cl);
    free(m.parent);
    free(c.d);
    nf_minhash_free(mh);
}

/* ------------------------------------------------------------------ hand-made signatures */

static void random_sig(uint32_t *s)
{
    for (int i = 0; i < 128; i++)
        s[i] = (uint32_t)rnd() & 0x7fffffffu;
}

static void test_merge_semantics(void)
{
    nf_cluster_t *cl = engine(NULL, 0);
    NF_REQUIRE(cl);
    uint32_t s1[128], s2[128], s3[128];
    random_sig(s1);
    /* s2: one slot changed in each of bands 0..9 (118/128 = 0.92 to s1); s3: another slot of
     * bands 0..9 changed from s2 (0.92 to s2, 108/128 = 0.84 to s1: a candidate, not a match). */
    memcpy(s2, s1, sizeof s1);
    for (int b = 0; b < 10; b++)
        s2[b * 8] ^= 0x10000000u;
    memcpy(s3, s2, sizeof s2);
    for (int b = 0; b < 10; b++)
        s3[b * 8 + 1] ^= 0x10000000u;
    nf_id128_t a = id_of(1), b3 = id_of(3), b2 = id_of(2), z = id_of(4);
    nf_cluster_result_t r;
    NF_CHECK_EQ(nf_cluster_add(cl, a, FUTURE + 10, s1, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_NEW);
    NF_CHECK(id_eq(r.cluster_id, a));
    NF_CHECK_EQ(nf_cluster_add(cl, b3, FUTURE + 20, s3, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_NEW); /* 0.84 < 0.85 */
    NF_CHECK_EQ(r.candidates, 1);
    NF_CHECK(id_eq(r.cluster_id, b3));
    NF_CHECK_EQ(nf_cluster_add(cl, b2, FUTURE + 30, s2, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_MERGED);
    NF_CHECK(id_eq(r.cluster_id, a));
    NF_CHECK_EQ(r.merged_count, 1);
    NF_CHECK(id_eq(r.merged_from[0], b3));
    NF_CHECK(r.similarity == 118.0 / 128);
    /* Out of order: an article earlier than the cluster's root takes its id over. */
    NF_CHECK_EQ(nf_cluster_add(cl, z, FUTURE + 5, s1, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_MERGED);
    NF_CHECK(id_eq(r.cluster_id, z));
    NF_CHECK_EQ(r.merged_count, 1);
    NF_CHECK(id_eq(r.merged_from[0], a));
    NF_CHECK(r.similarity == 1.0);
    nf_id128_t cid;
    NF_CHECK_EQ(nf_cluster_find(cl, b3, &cid), 1);
    NF_CHECK(id_eq(cid, z));
    /* A repeat changes nothing, whatever signature it brings. */
    uint32_t other[128];
    random_sig(other);
    NF_CHECK_EQ(nf_cluster_add(cl, b2, FUTURE + 40, other, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_DUPLICATE);
    NF_CHECK(id_eq(r.cluster_id, z));
    NF_CHECK_EQ(nf_cluster_find(cl, id_of(99), &cid), 0);

    /* Empty signatures: each is NEW, never a candidate of another. */
    uint32_t e[128];
    memset(e, 0xff, sizeof e);
    for (uint64_t k = 10; k < 13; k++) {
        NF_CHECK_EQ(nf_cluster_add(cl, id_of(k), FUTURE + 50, e, &r), 0);
        NF_CHECK_EQ(r.action, NF_CLUSTER_NEW);
        NF_CHECK_EQ(r.candidates, 0);
    }

    /* Many clusters merged by one article: merged_from capped, the rest counted. */
    nf_cluster_t *c2 = engine(NULL, 0);
    NF_REQUIRE(c2);
    uint32_t hub[128];
    random_sig(hub);
    for (uint64_t k = 0; k < 12; k++) {
        uint32_t s[128];
        /* 10 slots of its own flipped: 118/128 to the hub, 108/128 < 0.85 to each other. */
        memcpy(s, hub, sizeof s);
        for (uint64_t i = k * 10; i < k * 10 + 10; i++)
            s[i] ^= 0x20000000u;
        NF_CHECK_EQ(nf_cluster_add(c2, id_of(100 + k), FUTURE + 100 + (int64_t)k, s, &r), 0);
        NF_CHECK_EQ(r.action, NF_CLUSTER_NEW);
    }
    NF_CHECK_EQ(nf_cluster_add(c2, id_of(200), FUTURE + 200, hub, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_MERGED);
    NF_CHECK(id_eq(r.cluster_id, id_of(100)));
    NF_CHECK_EQ(r.merged_count, NF_CLUSTER_MERGED_MAX);
    NF_CHECK_EQ(r.merged_more, 11 - NF_CLUSTER_MERGED_MAX);
    for (unsigned k = 0; k < r.merged_count; k++)
        NF_CHECK(id_eq(r.merged_from[k], id_of(101 + k))); /* earliest first */
    nf_cluster_free(c2);
    nf_cluster_free(cl);
}

static void test_bucket_cap(void)
{
    nf_cluster_t *cl = engine(NULL, 0);
    NF_REQUIRE(cl);
    uint32_t s[128];
    random_sig(s);
    nf_cluster_result_t r;
    for (uint64_t k = 0; k < 40; k++) {
        NF_CHECK_EQ(nf_cluster_add(cl, id_of(k), FUTURE + (int64_t)k, s, &r), 0);
        NF_CHECK_EQ(r.action, k == 0 ? NF_CLUSTER_NEW : NF_CLUSTER_JOINED);
        NF_CHECK(id_eq(r.cluster_id, id_of(0)));
        NF_CHECK(r.candidates <= 32);
    }
    nf_cluster_stats_t st;
    nf_cluster_stats(cl, &st);
    NF_CHECK_EQ(st.bucket_overflow, 16 * (40 - 32));
    NF_CHECK_EQ(st.bucket.entries, 16);
    nf_cluster_free(cl);
}

/* ------------------------------------------------------------------ TTL */

static void test_ttl(void)
{
    nf_cluster_t *cl = engine(NULL, 0);
    NF_REQUIRE(cl);
    uint32_t s[128];
    random_sig(s);
    nf_cluster_result_t r;
    int64_t t0 = FUTURE;
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(1), t0, s, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_NEW);
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(2), t0 + 6 * DAY, s, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_JOINED);
    /* Article 1's signature expired at 7 days, but the cluster (root re-put on each join)
     * lives on through article 2: still cluster 1. */
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(3), t0 + 12 * DAY, s, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_JOINED);
    NF_CHECK_EQ(r.candidates, 1);
    NF_CHECK(id_eq(r.cluster_id, id_of(1)));
    /* More than 7 days after the last member: nothing matches. */
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(4), t0 + 19 * DAY + 1, s, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_NEW);
    NF_CHECK_EQ(r.candidates, 0);
    nf_id128_t cid;
    NF_CHECK_EQ(nf_cluster_find(cl, id_of(2), &cid), 0); /* expired = absent */
    /* The sweep drops what expired from memory. */
    size_t dropped = nf_cluster_expire(cl, (uint64_t)(t0 + 19 * DAY + 1), 0);
    nf_cluster_stats_t st;
    nf_cluster_stats(cl, &st);
    NF_CHECK(dropped > 0);
    NF_CHECK_EQ(st.sig.entries, 1);
    NF_CHECK_EQ(st.parent.entries, 2); /* article 4 and the clock */
    NF_CHECK_EQ(st.bucket.entries, 16);
    /* A repeat after expiry is a new article again, not a duplicate. */
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(1), t0 + 40 * DAY, s, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_NEW);
    nf_cluster_free(cl);
}

/* ------------------------------------------------------------------ restart through a store */

static int count_value(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    ++*(size_t *)arg;
    return 0;
}

/* Runs the corpus through a store (a commit every 50 adds, a restart half-way, a budget that
 * evicts) and checks every result against a memory-only run. base: the clock's start; compact:
 * a full compaction every 200 adds, so the TTL filter runs over everything, and before the
 * restart 300 adds never committed (a crash), then replayed. */
static void restart_identity(int64_t base, bool compact)
{
    nf_minhash_opts_t mo;
    nf_minhash_opts_default(&mo);
    char err[256];
    nf_minhash_t *mh = nf_minhash_new(&mo, err, sizeof err);
    NF_REQUIRE(mh);
    corpus_t c;
    make_corpus(&c, mh, 150, 300);
    NF_REQUIRE(c.d);
    /* Stretch time over 12 days so that expiry happens during the run, with up to a day of
     * disorder (the engine clock, which must survive the restart, is the maximum seen). */
    for (size_t i = 0; i < c.n; i++)
        c.d[i].ms = base + (int64_t)(i * (uint64_t)(12 * DAY) / c.n) - (int64_t)(rnd() % DAY);
    /* Repeats, so duplicates cross the restart too. */
    size_t n = c.n + c.n / 10;
    size_t *order = malloc(n * sizeof *order);
    for (size_t i = 0, k = 0; i < c.n; i++) {
        order[k++] = i;
        if (i % 10 == 9)
            order[k++] = rnd() % (i + 1);
    }
    nf_cluster_result_t *want = calloc(n, sizeof *want);
    NF_REQUIRE(order && want);

    nf_cluster_t *cl = engine(NULL, 0);
    NF_REQUIRE(cl);
    for (size_t k = 0; k < n; k++)
        NF_CHECK_EQ(
            nf_cluster_add(cl, c.d[order[k]].id, c.d[order[k]].ms, c.d[order[k]].sig, &want[k]), 0);
    nf_cluster_free(cl);

    char dir[] = "/tmp/nf-test-cluster-XXXXXX";
    NF_REQUIRE(mkdtemp(dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    /* A budget far below the working set: entries are evicted after commits and read back. */
    cl = engine(st, 64 * 1024);
    NF_REQUIRE(cl);
    uint64_t epoch = 0;
    size_t half = n / 2, mismatches = 0;
    nf_cluster_result_t got;
    for (size_t k = 0; k < half; k++) {
        NF_CHECK_EQ(nf_cluster_add(cl, c.d[order[k]].id, c.d[order[k]].ms, c.d[order[k]].sig, &got),
                    0);
        mismatches += !nf_testcluster_same(&got, &want[k]);
        if (k % 50 == 49)
            NF_CHECK_EQ(nf_testcluster_commit(cl, st, ++epoch), 0);
        if (compact && k % 200 == 199)
            NF_CHECK_EQ(nf_store_compact(st, err, sizeof err), 0);
    }
    NF_CHECK_EQ(nf_testcluster_commit(cl, st, ++epoch), 0);
    nf_cluster_stats_t s1;
    nf_cluster_stats(cl, &s1);
    if (compact) {
        /* A crash after a tail never committed: its clock ran days ahead meanwhile, and a
         * compaction by that clock would drop entries the replay below still sees live. */
        for (size_t k = half; k < n && k < half + 300; k++)
            NF_CHECK_EQ(
                nf_cluster_add(cl, c.d[order[k]].id, c.d[order[k]].ms, c.d[order[k]].sig, &got), 0);
        NF_CHECK_EQ(nf_store_compact(st, err, sizeof err), 0);
    }
    nf_cluster_free(cl);
    nf_store_close(st);

    st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    cl = engine(st, 64 * 1024);
    NF_REQUIRE(cl);
    for (size_t k = half; k < n; k++) {
        NF_CHECK_EQ(nf_cluster_add(cl, c.d[order[k]].id, c.d[order[k]].ms, c.d[order[k]].sig, &got),
                    0);
        mismatches += !nf_testcluster_same(&got, &want[k]);
        if (k % 50 == 49)
            NF_CHECK_EQ(nf_testcluster_commit(cl, st, ++epoch), 0);
        if (compact && k % 200 == 199)
            NF_CHECK_EQ(nf_store_compact(st, err, sizeof err), 0);
    }
    nf_cluster_stats_t s2;
    nf_cluster_stats(cl, &s2);
    fprintf(stderr,
            "   %zu adds across a restart: %zu mismatches; evictions %llu+%llu, loads %llu\n", n,
            mismatches, (unsigned long long)(s1.sig.evictions + s1.bucket.evictions),
            (unsigned long long)(s2.sig.evictions + s2.bucket.evictions),
            (unsigned long long)(s2.sig.loads + s2.bucket.loads + s2.parent.loads));
    NF_CHECK_EQ(mismatches, 0);
    NF_CHECK(s1.sig.evictions + s1.bucket.evictions > 0); /* the budget did bite */
    NF_CHECK(s2.sig.loads + s2.bucket.loads + s2.parent.loads > 0);
    if (compact) { /* the filter did drop: signatures older than the clock's last 7 days */
        NF_CHECK_EQ(nf_testcluster_commit(cl, st, ++epoch), 0);
        NF_CHECK_EQ(nf_store_compact(st, err, sizeof err), 0);
        size_t stored = 0;
        NF_CHECK_EQ(nf_store_scan(st, NF_KIND_CLUSTER_SIG, count_value, &stored), 0);
        fprintf(stderr, "   signatures on the store after compaction: %zu of %zu articles\n",
                stored, c.n);
        NF_CHECK(stored > 0 && stored < c.n * 3 / 4);
    }
    nf_cluster_free(cl);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
    free(order);
    free(want);
    free(c.d);
    nf_minhash_free(mh);
}

static void test_restart_identity(void)
{
    restart_identity(FUTURE, false);
}

/* Times in the past of the wall clock, compacted as they go: dropped by the engine's clock. */
static void test_restart_identity_past_compacted(void)
{
    restart_identity(PAST, true);
}

/* The engine clock survives a restart: an entry expired by the clock before the restart stays
 * expired for an out-of-order article after it. */
static void test_restart_clock(void)
{
    char dir[] = "/tmp/nf-test-cluster-XXXXXX";
    NF_REQUIRE(mkdtemp(dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_cluster_t *cl = engine(st, 0);
    NF_REQUIRE(cl);
    uint32_t x[128], a[128];
    random_sig(x);
    random_sig(a);
    nf_cluster_result_t r;
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(1), FUTURE, x, &r), 0);
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(2), FUTURE + 10 * DAY, a, &r), 0);
    NF_CHECK_EQ(nf_testcluster_commit(cl, st, 1), 0);
    nf_cluster_free(cl);
    nf_store_close(st);
    st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    cl = engine(st, 0);
    NF_REQUIRE(cl);
    NF_CHECK_EQ(nf_cluster_add(cl, id_of(3), FUTURE + DAY, x, &r), 0);
    NF_CHECK_EQ(r.action, NF_CLUSTER_NEW); /* article 1 expired at day 7 of the clock (day 10) */
    NF_CHECK_EQ(r.candidates, 0);
    nf_cluster_free(cl);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* nf_cluster_id_hex writes what printf's "%016llx%016llx" does (it replaced it: one per item of
 * every feed answer), and nf_id128_from_hex reads it back. */
static void test_id_hex(void)
{
    uint64_t x = 0x853c49e6748fea9bull;
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        nf_id128_t id = {.hi = i % 3 ? x : x >> (i % 64), .lo = i % 5 ? x * 31 : (uint64_t)i};
        char got[33], want[33];
        nf_cluster_id_hex(id, got);
        snprintf(want, sizeof want, "%016llx%016llx", (unsigned long long)id.hi,
                 (unsigned long long)id.lo);
        nf_id128_t back;
        if (strcmp(got, want) != 0 || nf_id128_from_hex(got, &back) != 0 || back.hi != id.hi ||
            back.lo != id.lo) {
            fprintf(stderr, "id %016llx %016llx: wrote %s, want %s\n", (unsigned long long)id.hi,
                    (unsigned long long)id.lo, got, want);
            NF_CHECK(0);
            return;
        }
    }
}

int main(void)
{
    make_vocab();
    NF_RUN(test_merge_semantics);
    NF_RUN(test_bucket_cap);
    NF_RUN(test_ttl);
    NF_RUN(test_planted_groups);
    NF_RUN(test_restart_identity);
    NF_RUN(test_restart_identity_past_compacted);
    NF_RUN(test_restart_clock);
    NF_RUN(test_id_hex);
    return nf_test_report();
}
