/* Tests src/serve/rank.c: on random views (topic lists newest first over 60 hours, some entries
 * expired, some published after the lists were loaded, trending scores on a few, readers with
 * 1 to 8 topics, hidden articles), the pruned ranking keeps exactly the candidates that scoring
 * every entry keeps, in the same order; and those scores are the feed's formula, computed here
 * from the entries' times directly (a reference model, not the module's factorization). */
#include "nf_test.h"
#include "serve/rank.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#define HOUR 3600000LL

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static double unit(void)
{
    return (double)(next() >> 11) / 9007199254740992.0;
}

typedef struct view {
    nf_rlist_t lists[8];
    unsigned nl;
    nf_id128_t trending[64];
    uint64_t tscore[64];
    size_t nt;
} view_t;

static uint64_t trend_of(const void *arg, nf_id128_t id)
{
    const view_t *v = arg;
    for (size_t i = 0; i < v->nt; i++)
        if (v->trending[i].hi == id.hi && v->trending[i].lo == id.lo)
            return v->tscore[i];
    return 0;
}

/* Articles 0..na-1, each under 1..3 topics of nl, published over 60 h before at (a few after
 * it), expiring 48 h after; every list newest first. */
static void make_view(view_t *v, unsigned nl, size_t na, int64_t at)
{
    memset(v, 0, sizeof *v);
    v->nl = nl;
    size_t cap[8] = {0}, wcap[8] = {0};
    int64_t pub = at + 2 * HOUR; /* newest first: decreasing times */
    for (size_t a = 0; a < na; a++) {
        pub -= (int64_t)(next() % (uint64_t)(120 * HOUR / (int64_t)(na + 1))) + 1;
        nf_id128_t id = {.hi = next(), .lo = a};
        nf_topic_vec_t vec = {.n = 0};
        unsigned k = 1 + (unsigned)(next() % 3);
        double sq = 0;
        for (unsigned j = 0; j < k; j++) {
            unsigned t = (unsigned)(next() % nl);
            bool dup = false;
            for (uint32_t x = 0; x < vec.n; x++)
                dup |= vec.t[x].topic == t;
            if (dup)
                continue;
            vec.t[vec.n++] = (nf_topic_weight_t){.topic = (uint16_t)t, .weight = unit()};
            sq += vec.t[vec.n - 1].weight * vec.t[vec.n - 1].weight;
        }
        for (uint32_t x = 0; x < vec.n; x++)
            vec.t[x].weight /= sqrt(sq);
        if (next() % 8 == 0 && v->nt < 64) {
            v->trending[v->nt] = id;
            v->tscore[v->nt++] = next() % 20000;
        }
        int64_t expires = next() % 16 ? pub + 48 * HOUR : 0;
        for (uint32_t x = 0; x < vec.n; x++) {
            unsigned t = vec.t[x].topic;
            NF_REQUIRE(nf_rlist_add(&v->lists[t], &cap[t], &wcap[t], id, pub, expires, 0, &vec) ==
                       0);
        }
    }
    for (unsigned t = 0; t < nl; t++)
        NF_REQUIRE(nf_rlist_prepare(&v->lists[t], trend_of, v, at) == 0);
}

static void free_view(view_t *v)
{
    for (unsigned t = 0; t < v->nl; t++)
        nf_rlist_free(&v->lists[t]);
}

static bool hidden(const void *arg, nf_id128_t id)
{
    return (id.lo ^ *(const uint64_t *)arg) % 11 == 0;
}

/* The round's weights: the seed's, or a ranking variant's (engine/variants.h). */
static double g_trend_w = 0.1, g_decay = 0.5;

static void rank(const view_t *v, const double *dense, int64_t now, uint64_t *hide, bool prune,
                 nf_cand_t *c, size_t m, nf_rank_t *r, nf_cand_t *out)
{
    nf_rank_init(r, dense, now, c, m);
    r->trend_w = g_trend_w;
    r->decay = g_decay;
    r->skip = hidden;
    r->skip_arg = hide;
    for (unsigned t = 0; t < v->nl; t++)
        nf_rank_list(r, &v->lists[t], prune);
    nf_rank_finish(r);
    /* popped best first into out[] */
    size_t n = 0;
    nf_cand_t x;
    while (nf_rank_next(r, &x))
        out[n++] = x;
    r->n = n;
}

/* The feed's score of e for a reader, from the formula (rank.h). */
static double model_score(const nf_rlist_t *l, const nf_rentry_t *e, const double *dense,
                          int64_t now)
{
    double dot = 0;
    for (uint32_t j = 0; j < e->n; j++)
        dot += dense[l->w[e->off + j].topic] * l->w[e->off + j].weight;
    double hours = (double)(now > e->published_ms ? now - e->published_ms : 0) / HOUR;
    return dot * exp(-g_decay * hours) + g_trend_w * (double)e->trend / 1000.0;
}

static void test_pruned_equals_all(void)
{
    size_t saved = 0, total = 0;
    for (int round = 0; round < 400; round++) {
        view_t v;
        unsigned nl = 1 + (unsigned)(next() % 8);
        int64_t at = 1795989326110LL;
        make_view(&v, nl, 10 + next() % 1500, at);
        /* one round in three a variant's weights: decays below the lists' rank unpruned */
        static const double trend_ws[] = {0, 0.4, 2.5}, decays[] = {0.2, 0.5, 1.5, 3};
        g_trend_w = round % 3 ? 0.1 : trend_ws[next() % 3];
        g_decay = round % 3 ? 0.5 : decays[next() % 4];
        double dense[NF_TOPICS_MAX] = {0};
        for (unsigned t = 0; t < nl; t++)
            if (next() % 3)
                dense[t] = round % 10 == 0 ? unit() - 0.2 : unit(); /* some negative */
        int64_t now = at + (int64_t)(next() % (6 * HOUR));
        uint64_t hide = next();
        size_t m = 1 + next() % 120, cap = 0;
        for (unsigned t = 0; t < nl; t++)
            cap += v.lists[t].n;
        nf_cand_t *heap = malloc((cap + 1) * sizeof *heap);
        nf_cand_t *a = malloc((cap + 1) * sizeof *a), *b = malloc((cap + 1) * sizeof *b);
        NF_REQUIRE(heap && a && b);
        nf_rank_t ra, rb;
        rank(&v, dense, now, &hide, true, heap, m, &ra, a);
        rank(&v, dense, now, &hide, false, heap, m, &rb, b);
        NF_CHECK_EQ(ra.n, rb.n);
        for (size_t i = 0; i < ra.n && i < rb.n; i++) {
            for (size_t k = 0; k < i; k++)
                if (b[k].e->id.lo == b[i].e->id.lo)
                    NF_CHECK(0); /* an article once */
            if (nf_cand_cmp(&a[i], &b[i]) != 0 || a[i].e->id.lo != b[i].e->id.lo) {
                fprintf(stderr, "round %d: #%zu pruned %.17g (article %llu), all %.17g (%llu)\n",
                        round, i, a[i].score, (unsigned long long)a[i].e->id.lo, b[i].score,
                        (unsigned long long)b[i].e->id.lo);
                NF_CHECK(0);
                break;
            }
            if (i && nf_cand_cmp(&b[i - 1], &b[i]) > 0)
                NF_CHECK(0); /* best first */
        }
        /* the scores are the formula's (the lists it came from: find its entry's list) */
        for (size_t i = 0; i < rb.n; i++) {
            const nf_rlist_t *l = NULL;
            for (unsigned t = 0; t < nl && !l; t++)
                if (b[i].e >= v.lists[t].e && b[i].e < v.lists[t].e + v.lists[t].n)
                    l = &v.lists[t];
            NF_REQUIRE(l);
            double want = model_score(l, b[i].e, dense, now);
            if (fabs(b[i].score - want) > 1e-12 * fmax(1.0, fabs(want))) {
                fprintf(stderr, "score %.17g, model %.17g\n", b[i].score, want);
                NF_CHECK(0);
                break;
            }
        }
        /* the model: every live, visible article once (scored by the formula), best first */
        nf_cand_t *want = malloc((cap + 1) * sizeof *want);
        NF_REQUIRE(want);
        size_t nwant = 0;
        for (unsigned t = 0; t < nl; t++)
            for (size_t i = 0; i < v.lists[t].n; i++) {
                const nf_rentry_t *e = &v.lists[t].e[i];
                bool dup = false;
                for (size_t k = 0; k < nwant && !dup; k++)
                    dup = want[k].e->id.lo == e->id.lo;
                if (dup || hidden(&hide, e->id) || (e->expires_ms && e->expires_ms <= now))
                    continue;
                want[nwant++] =
                    (nf_cand_t){.e = e, .score = model_score(&v.lists[t], e, dense, now)};
            }
        qsort(want, nwant, sizeof *want, nf_cand_cmp);
        NF_CHECK_EQ(rb.n, nwant < m ? nwant : m);
        for (size_t i = 0; i < rb.n && i < nwant; i++)
            if (b[i].e->id.lo != want[i].e->id.lo &&
                fabs(b[i].score - want[i].score) > 1e-12 * fmax(1.0, fabs(want[i].score))) {
                fprintf(stderr, "round %d: #%zu ranked article %llu, model %llu\n", round, i,
                        (unsigned long long)b[i].e->id.lo, (unsigned long long)want[i].e->id.lo);
                NF_CHECK(0);
                break;
            }
        free(want);
        saved += rb.scored - ra.scored;
        total += rb.scored;
        NF_CHECK(ra.scored <= rb.scored);
        free(heap);
        free(a);
        free(b);
        free_view(&v);
    }
    g_trend_w = 0.1;
    g_decay = 0.5;
    fprintf(stderr, "pruning scored %zu of %zu entries\n", total - saved, total);
    NF_CHECK(saved > total / 4); /* the lists span 60 h: most of a long list cannot enter */
}

/* A cold reader (no weights): every entry, expired ones included, by trending score. */
static void test_cold_reader(void)
{
    view_t v;
    int64_t at = 1795989326110LL;
    make_view(&v, 3, 200, at);
    static nf_cand_t heap[700], c[700];
    nf_rank_t r;
    uint64_t hide = 1;
    rank(&v, NULL, at + 100 * HOUR, &hide, true, heap, 700, &r, c);
    size_t live = 0; /* articles: one listed under several topics is kept once */
    for (unsigned t = 0; t < 3; t++)
        for (size_t i = 0; i < v.lists[t].n; i++) {
            nf_id128_t id = v.lists[t].e[i].id;
            bool earlier = false;
            for (unsigned u = 0; u < t && !earlier; u++)
                for (size_t k = 0; k < v.lists[u].n && !earlier; k++)
                    earlier = v.lists[u].e[k].id.lo == id.lo;
            live += !hidden(&hide, id) && !earlier;
        }
    NF_CHECK_EQ(r.n, live);
    for (size_t i = 0; i < r.n; i++) {
        NF_CHECK(c[i].score == (double)c[i].e->trend);
        NF_CHECK(c[i].nw == 0 || !c[i].e->expires_ms); /* expired: no vector */
        NF_CHECK(i == 0 || nf_cand_cmp(&c[i - 1], &c[i]) <= 0);
    }
    free_view(&v);
}

int main(void)
{
    NF_RUN(test_pruned_equals_all);
    NF_RUN(test_cold_reader);
    return nf_test_report();
}
