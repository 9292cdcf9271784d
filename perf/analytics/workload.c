/* workload.c — generated workloads (workload.h). */
#include "workload.h"
#include "algo/hash.h"
#include "engine/interest.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t nf_wl_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double nf_wl_uniform(uint64_t *state)
{
    return (double)(nf_wl_rand(state) >> 11) * (1.0 / 9007199254740992.0);
}

int nf_zipf_init(nf_zipf_t *z, uint32_t n, double s)
{
    z->n = n;
    z->cdf = malloc(sizeof *z->cdf * n);
    if (!z->cdf)
        return -ENOMEM;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        sum += 1.0 / pow((double)(i + 1), s);
        z->cdf[i] = sum;
    }
    for (uint32_t i = 0; i < n; i++)
        z->cdf[i] /= sum;
    return 0;
}

uint32_t nf_zipf_next(const nf_zipf_t *z, uint64_t *rng)
{
    double u = nf_wl_uniform(rng);
    uint32_t lo = 0, hi = z->n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void nf_zipf_free(nf_zipf_t *z)
{
    free(z->cdf);
    z->cdf = NULL;
}

void nf_wl_article_id(uint32_t i, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)nf_mix64(i + 1ull),
             (unsigned long long)nf_mix64(~(uint64_t)i));
}

int nf_wl_read_events(nf_wl_events_t *e, size_t n, uint32_t users, uint32_t articles, double zipf_s,
                      int64_t t0_ms, int64_t span_ms, uint64_t seed, bool every_user_first)
{
    memset(e, 0, sizeof *e);
    if (every_user_first && n < users)
        return -EINVAL;
    nf_zipf_t zu, za;
    if (nf_zipf_init(&zu, users, zipf_s) || nf_zipf_init(&za, articles, zipf_s))
        return -ENOMEM;
    size_t cap = n * 160 + 1;
    e->buf = malloc(cap);
    e->off = malloc(sizeof *e->off * n);
    e->len = malloc(sizeof *e->len * n);
    e->user_of = malloc(sizeof *e->user_of * n);
    e->article_of = malloc(sizeof *e->article_of * n);
    e->ts = malloc(sizeof *e->ts * n);
    if (!e->buf || !e->off || !e->len || !e->user_of || !e->article_of || !e->ts) {
        nf_zipf_free(&zu);
        nf_zipf_free(&za);
        nf_wl_events_free(e);
        return -ENOMEM;
    }
    uint64_t rng = seed;
    size_t at = 0, first = every_user_first ? users : 0;
    for (size_t i = 0; i < first; i++) /* user_of as the permutation: Fisher-Yates */
        e->user_of[i] = (uint32_t)i;
    for (size_t i = first; i > 1; i--) {
        size_t j = nf_wl_rand(&rng) % i;
        uint32_t t = e->user_of[i - 1];
        e->user_of[i - 1] = e->user_of[j];
        e->user_of[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u = i < first ? e->user_of[i] : nf_zipf_next(&zu, &rng);
        uint32_t a = nf_zipf_next(&za, &rng);
        char aid[33];
        nf_wl_article_id(a, aid);
        int64_t ts = t0_ms + (int64_t)((double)i * (double)span_ms / (double)n);
        int k = snprintf(e->buf + at, cap - at,
                         "{\"event_id\":\"e%zu\",\"user_id\":\"u%u\",\"article_id\":\"%s\","
                         "\"session_id\":\"s%u\",\"ts\":%lld}",
                         i, u, aid, (unsigned)(nf_wl_rand(&rng) % 4), (long long)ts);
        e->off[i] = at;
        e->len[i] = (uint32_t)k;
        e->user_of[i] = u;
        e->article_of[i] = a;
        e->ts[i] = ts;
        at += (size_t)k;
    }
    e->n = n;
    nf_zipf_free(&zu);
    nf_zipf_free(&za);
    return 0;
}

int nf_wl_add_redeliveries(nf_wl_events_t *e, size_t every)
{
    if (every == 0 || e->n == 0)
        return 0;
    size_t n = e->n + e->n / every;
    size_t *off = malloc(sizeof *off * n);
    uint32_t *len = malloc(sizeof *len * n), *uo = malloc(sizeof *uo * n),
             *ao = malloc(sizeof *ao * n);
    int64_t *ts = malloc(sizeof *ts * n);
    if (!off || !len || !uo || !ao || !ts) {
        free(off);
        free(len);
        free(uo);
        free(ao);
        free(ts);
        return -ENOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < e->n; i++) {
        for (int copy = 0; copy < ((i + 1) % every == 0 ? 2 : 1); copy++, j++) {
            off[j] = e->off[i]; /* the same bytes: a redelivery is the same record */
            len[j] = e->len[i];
            uo[j] = e->user_of[i];
            ao[j] = e->article_of[i];
            ts[j] = e->ts[i];
        }
    }
    free(e->off);
    free(e->len);
    free(e->user_of);
    free(e->article_of);
    free(e->ts);
    e->off = off;
    e->len = len;
    e->user_of = uo;
    e->article_of = ao;
    e->ts = ts;
    e->n = j;
    return 0;
}

void nf_wl_events_free(nf_wl_events_t *e)
{
    free(e->buf);
    free(e->off);
    free(e->len);
    free(e->user_of);
    free(e->article_of);
    free(e->ts);
    memset(e, 0, sizeof *e);
}

uint16_t nf_wl_partition_of(uint32_t user, uint32_t partitions)
{
    char uid[16];
    int n = snprintf(uid, sizeof uid, "u%u", user); /* the user_id the events carry */
    return (uint16_t)(nf_hash64(uid, (size_t)n, 0x6b61666b61ull) % partitions);
}

void nf_wl_article_topics(uint32_t i, nf_topic_vec_t *v)
{
    uint64_t rng = 0x70706963ull ^ i;
    unsigned n = 1 + (unsigned)(nf_wl_rand(&rng) % 3);
    double w[20] = {0}, norm = 0;
    for (unsigned k = 0; k < n; k++)
        w[nf_wl_rand(&rng) % 20] += 0.2 + nf_wl_uniform(&rng);
    for (unsigned t = 0; t < 20; t++)
        norm += w[t] * w[t];
    norm = norm > 0 ? 1.0 / sqrt(norm) : 0;
    v->n = 0;
    for (unsigned t = 0; t < 20; t++)
        if (w[t] > 0)
            v->t[v->n++] = (nf_topic_weight_t){(uint16_t)t, w[t] * norm};
}
