/* rank.c — see rank.h. */
#include "serve/rank.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEEN_MAX 4096 /* entries a pruned list may have (a view's lists hold at most 1,000) */
#define SLACK    1e-9 /* relative: a bound computed in another order rounds differently */

int nf_rlist_add(nf_rlist_t *l, size_t *cap, size_t *wcap, nf_id128_t id, int64_t published,
                 int64_t expires, uint64_t trend, const nf_topic_vec_t *vec)
{
    if (l->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        nf_rentry_t *e = realloc(l->e, nc * sizeof *e);
        if (!e)
            return -ENOMEM;
        l->e = e;
        *cap = nc;
    }
    if (l->nw + vec->n > *wcap) {
        size_t nc = *wcap ? 2 * *wcap : 256;
        while (nc < l->nw + vec->n)
            nc *= 2;
        nf_topic_weight_t *w = realloc(l->w, nc * sizeof *w);
        if (!w)
            return -ENOMEM;
        l->w = w;
        *wcap = nc;
    }
    l->e[l->n++] = (nf_rentry_t){.id = id,
                                 .published_ms = published,
                                 .expires_ms = expires,
                                 .trend = trend,
                                 .off = (uint32_t)l->nw,
                                 .n = (uint16_t)vec->n};
    memcpy(l->w + l->nw, vec->t, vec->n * sizeof *vec->t);
    l->nw += vec->n;
    return 0;
}

void nf_rlist_free(nf_rlist_t *l)
{
    free(l->e);
    free(l->w);
    free(l->bound);
    free(l->by_trend);
    memset(l, 0, sizeof *l);
}

size_t nf_rlist_bytes(const nf_rlist_t *l)
{
    return l->n * (sizeof *l->e + 4 * sizeof *l->bound) + l->nw * sizeof *l->w +
           l->ntrend * sizeof *l->by_trend;
}

double nf_rank_decay(int64_t age_ms)
{
    return exp(-0.5 * ((double)(age_ms > 0 ? age_ms : 0) / 3600000.0));
}

typedef struct tpair {
    uint64_t trend;
    uint32_t i;
} tpair_t;

static int by_trend_desc(const void *a, const void *b)
{
    const tpair_t *x = a, *y = b;
    if (x->trend != y->trend)
        return x->trend > y->trend ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The suffix maxima of rank.h, from the last entry back. */
static void prepare_bounds(nf_rlist_t *l)
{
    double m[4] = {0, 0, 0, 0};
    for (size_t i = l->n; i-- > 0;) {
        const nf_rentry_t *e = &l->e[i];
        double l1 = 0, l2 = 0;
        for (uint32_t k = 0; k < e->n; k++) {
            double x = l->w[e->off + k].weight;
            l1 += fabs(x);
            l2 += x * x;
        }
        l2 = sqrt(l2);
        bool past = e->published_ms <= l->loaded_ms;
        double b[4] = {past ? l1 * e->decay : 0, past ? l2 * e->decay : 0, past ? 0 : l1,
                       past ? 0 : l2};
        for (int k = 0; k < 4; k++) {
            m[k] = b[k] > m[k] ? b[k] : m[k];
            l->bound[4 * i + k] = m[k];
        }
    }
}

static int prepare_trend_order(nf_rlist_t *l)
{
    tpair_t *p = malloc((l->n + 1) * sizeof *p);
    if (!p)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->e[i].trend)
            p[n++] = (tpair_t){.trend = l->e[i].trend, .i = (uint32_t)i};
    qsort(p, n, sizeof *p, by_trend_desc);
    for (size_t i = 0; i < n; i++)
        l->by_trend[i] = p[i].i;
    l->ntrend = n;
    free(p);
    return 0;
}

int nf_rlist_prepare(nf_rlist_t *l, uint64_t (*trend_of)(const void *arg, nf_id128_t id),
                     const void *arg, int64_t at_ms)
{
    l->loaded_ms = at_ms;
    for (size_t i = 0; i < l->n; i++) {
        nf_rentry_t *e = &l->e[i];
        e->trend = trend_of(arg, e->id);
        e->decay = nf_rank_decay(at_ms - e->published_ms);
    }
    free(l->bound);
    free(l->by_trend);
    l->bound = malloc((4 * l->n + 1) * sizeof *l->bound);
    l->by_trend = malloc((l->n + 1) * sizeof *l->by_trend);
    l->ntrend = 0;
    if (!l->bound || !l->by_trend)
        return -ENOMEM;
    prepare_bounds(l);
    return prepare_trend_order(l);
}

int nf_cand_cmp(const void *a, const void *b)
{
    const nf_cand_t *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->e->published_ms != y->e->published_ms)
        return x->e->published_ms > y->e->published_ms ? -1 : 1;
    return nf_id128_cmp(x->e->id, y->e->id);
}

/* Restores the heap c[0..m) below k: the worst at the root (worst_up: the ranking's bounded
 * heap) or the best (the answer's, popped best first). */
static void sift_down(nf_cand_t *c, size_t m, size_t k, bool worst_up)
{
    int s = worst_up ? 1 : -1;
    for (;;) {
        size_t l = 2 * k + 1, r = l + 1, w = k;
        if (l < m && s * nf_cand_cmp(&c[l], &c[w]) > 0)
            w = l;
        if (r < m && s * nf_cand_cmp(&c[r], &c[w]) > 0)
            w = r;
        if (w == k)
            return;
        nf_cand_t t = c[k];
        c[k] = c[w];
        c[w] = t;
        k = w;
    }
}

void nf_rank_init(nf_rank_t *r, const double *dense, int64_t now, nf_cand_t *c, size_t m)
{
    memset(r, 0, sizeof *r);
    r->dense = dense;
    r->now = now;
    r->c = c;
    r->m = m;
    r->trend_w = 0.1;
    r->decay = NF_RANK_LIST_DECAY;
    double sq = 0;
    for (unsigned t = 0; dense && t < NF_TOPICS_MAX; t++) {
        double a = fabs(dense[t]);
        r->maxw = a > r->maxw ? a : r->maxw;
        sq += dense[t] * dense[t];
    }
    r->norm = sqrt(sq);
}

/* Whether x's article is kept already (listed under another topic: the same score). */
static bool kept(const nf_rank_t *r, const nf_cand_t *x)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->c[i].score == x->score && r->c[i].e->id.lo == x->e->id.lo &&
            r->c[i].e->id.hi == x->e->id.hi)
            return true;
    return false;
}

/* Keeps x if it is among the best m so far, once per article: an article listed under several
 * of the reader's topics would otherwise take a place for each. */
static void offer(nf_rank_t *r, const nf_cand_t *x)
{
    if (r->n < r->m) {
        if (kept(r, x))
            return;
        r->c[r->n++] = *x;
        if (r->n == r->m)
            for (size_t i = r->m / 2; i-- > 0;)
                sift_down(r->c, r->m, i, true);
        return;
    }
    int worse = r->m ? nf_cand_cmp(x, &r->c[0]) : 1;
    if (worse == 0 || (worse < 0 && kept(r, x)))
        return; /* the worst kept is this article, or it is kept elsewhere in the heap */
    r->dropped = true;
    if (worse > 0)
        return; /* no better than the worst kept */
    r->c[0] = *x;
    sift_down(r->c, r->m, 0, true);
}

/* Scores l->e[i] (live: not expired, or a cold reader's) and offers it unless left out. */
static void score(nf_rank_t *r, const nf_rlist_t *l, size_t i, double since, bool gone)
{
    const nf_rentry_t *e = &l->e[i];
    if (r->skip && r->skip(r->skip_arg, e->id))
        return;
    nf_cand_t x = {.e = e, .w = l->w + e->off, .nw = gone ? 0 : e->n};
    for (uint32_t j = 0; r->mute && j < x.nw; j++)
        if (x.w[j].weight > 0 && ((r->mute >> x.w[j].topic) & 1))
            return; /* a muted topic's */
    r->scored++;
    if (!r->dense) { /* a cold reader: the trending window's order */
        x.score = (double)e->trend;
        offer(r, &x);
        return;
    }
    double dot = 0;
    for (uint32_t j = 0; j < x.nw; j++)
        dot += r->dense[x.w[j].topic] * x.w[j].weight;
    /* exp(-0.5 h) = the decay at the list's loaded_ms × exp(-0.5 h since then), for entries
     * published by then (and a list not loaded in the future) */
    int64_t loaded = l->loaded_ms;
    double decay;
    if (r->decay != NF_RANK_LIST_DECAY) /* a variant's own rate (engine/variants.h) */
        decay = exp(-r->decay * (double)(r->now > e->published_ms ? r->now - e->published_ms : 0) /
                    3600000.0);
    else
        decay = e->published_ms <= loaded && r->now >= loaded
                    ? e->decay * since
                    : nf_rank_decay(r->now - e->published_ms);
    x.score = dot * decay + r->trend_w * (double)e->trend / 1000.0;
    offer(r, &x);
}

static bool gone_at(const nf_rentry_t *e, int64_t now)
{
    return e->expires_ms && e->expires_ms <= now;
}

/* The most any entry of l from ia on (newest-first order) and from ib on (trending order)
 * could score. */
static double bound(const nf_rank_t *r, const nf_rlist_t *l, size_t ia, size_t ib, double since)
{
    const double *b = &l->bound[4 * ia];
    double p1 = since * b[0], p2 = since * b[1];
    double a1 = r->maxw * (p1 > b[2] ? p1 : b[2]), a2 = r->norm * (p2 > b[3] ? p2 : b[3]);
    double t = ib < l->ntrend ? r->trend_w * (double)l->e[l->by_trend[ib]].trend / 1000.0 : 0;
    return (a1 < a2 ? a1 : a2) + t;
}

static bool below(double bound, double score)
{
    return bound + fabs(bound) * SLACK < score;
}

/* Every live entry of l (and a cold reader's expired ones, without their vectors). */
static void rank_all(nf_rank_t *r, const nf_rlist_t *l, double since)
{
    for (size_t i = 0; i < l->n; i++) {
        bool gone = gone_at(&l->e[i], r->now);
        if (!gone || !r->dense)
            score(r, l, i, since, gone);
    }
}

void nf_rank_list(nf_rank_t *r, const nf_rlist_t *l, bool prune)
{
    double since = nf_rank_decay(r->now - l->loaded_ms);
    /* the bounds hold for a decay at least the lists' (exp(-d h) <= exp(-0.5 h) for h >= 0) */
    if (!prune || !r->dense || !l->bound || l->n > SEEN_MAX || r->now < l->loaded_ms ||
        r->decay < NF_RANK_LIST_DECAY) {
        rank_all(r, l, since);
        return;
    }
    uint64_t seen[SEEN_MAX / 64] = {0};
#define SEEN(i) (seen[(i) / 64] >> ((i) % 64) & 1)
#define MARK(i) (seen[(i) / 64] |= 1ull << ((i) % 64))
    size_t ia = 0, ib = 0;
    for (;;) {
        while (ia < l->n && (SEEN(ia) || gone_at(&l->e[ia], r->now)))
            ia++;
        if (ia == l->n)
            return; /* nothing unseen is live */
        while (ib < l->ntrend && SEEN(l->by_trend[ib]))
            ib++;
        if (r->n == r->m && below(bound(r, l, ia, ib, since), r->c[0].score)) {
            r->dropped = true; /* what is left could not enter */
            return;
        }
        MARK(ia);
        score(r, l, ia, since, false);
        while (ib < l->ntrend && SEEN(l->by_trend[ib]))
            ib++;
        if (ib < l->ntrend) {
            size_t j = l->by_trend[ib++];
            MARK(j);
            if (!gone_at(&l->e[j], r->now))
                score(r, l, j, since, false);
        }
    }
#undef SEEN
#undef MARK
}

void nf_rank_finish(nf_rank_t *r)
{
    for (size_t i = r->n / 2; i-- > 0;)
        sift_down(r->c, r->n, i, false);
}

bool nf_rank_next(nf_rank_t *r, nf_cand_t *out)
{
    if (r->n == 0)
        return false;
    *out = r->c[0];
    r->c[0] = r->c[--r->n];
    sift_down(r->c, r->n, 0, false);
    return true;
}
