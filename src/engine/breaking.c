/* breaking.c — see breaking.h. */
#include "engine/breaking.h"
#include "algo/bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct broke {
    nf_id128_t story;
    int64_t at;
} broke_t;

struct nf_breaking {
    nf_breaking_opts_t o;
    broke_t *v;
    size_t n, cap;
    bool dirty;
};

nf_breaking_t *nf_breaking_new(const nf_breaking_opts_t *o)
{
    nf_breaking_t *b = calloc(1, sizeof *b);
    if (b)
        b->o = *o;
    return b;
}

void nf_breaking_free(nf_breaking_t *b)
{
    if (!b)
        return;
    free(b->v);
    free(b);
}

/* Forgets the stories whose cooldown is over at end_ms. */
static void expire(nf_breaking_t *b, int64_t end_ms)
{
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++)
        if (end_ms - b->v[i].at < b->o.cooldown_ms)
            b->v[k++] = b->v[i];
    b->dirty |= k != b->n;
    b->n = k;
}

static bool cooling(const nf_breaking_t *b, nf_id128_t story)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].story.hi == story.hi && b->v[i].story.lo == story.lo)
            return true;
    return false;
}

static int remember(nf_breaking_t *b, nf_id128_t story, int64_t at)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        broke_t *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = (broke_t){story, at};
    b->dirty = true;
    return 0;
}

/* An entry with a topic, as sorted: by topic, then reads. */
typedef struct tkey {
    int topic;
    uint32_t i;
    uint64_t reads;
} tkey_t;

static int by_topic_reads(const void *x, const void *y)
{
    const tkey_t *a = x, *c = y;
    if (a->topic != c->topic)
        return a->topic < c->topic ? -1 : 1;
    return a->reads < c->reads ? -1 : a->reads > c->reads;
}

/* The median of a topic's run r[0..m) of reads (sorted) less its element at p. */
static double median_without(const tkey_t *r, size_t m, size_t p)
{
    size_t n = m - 1;
#define AT(k) ((double)r[(k) < p ? (k) : (k) + 1].reads)
    return n % 2 ? AT(n / 2) : (AT(n / 2 - 1) + AT(n / 2)) / 2.0;
#undef AT
}

/* Whether r[k] (in its topic's run r[s..t)) breaks; its baseline and peers. */
static bool breaks(const nf_breaking_t *b, const tkey_t *r, size_t s, size_t t, size_t k,
                   double *base, unsigned *peers)
{
    *peers = (unsigned)(t - s - 1);
    if (r[k].reads < b->o.min_reads || *peers < b->o.min_peers)
        return false;
    *base = median_without(r + s, t - s, k - s);
    return (double)r[k].reads >= b->o.multiple * *base;
}

int nf_breaking_window(nf_breaking_t *b, int64_t end_ms, const nf_breaking_entry_t *e, size_t n,
                       int (*hit)(void *arg, size_t i, double baseline, unsigned peers), void *arg)
{
    expire(b, end_ms);
    if (n > 65536)
        n = 65536;
    tkey_t *r = malloc((n + 1) * sizeof *r);
    if (!r)
        return -ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].topic >= 0)
            r[m++] = (tkey_t){e[i].topic, (uint32_t)i, e[i].reads};
    qsort(r, m, sizeof *r, by_topic_reads);
    /* the entries that break, in the window's order: marked in their runs, then taken in order */
    double *base = malloc((n + 1) * sizeof *base);
    unsigned *peers = malloc((n + 1) * sizeof *peers);
    bool *hits = calloc(n + 1, sizeof *hits);
    int rc = base && peers && hits ? 0 : -ENOMEM;
    for (size_t s = 0; rc == 0 && s < m;) {
        size_t t = s;
        while (t < m && r[t].topic == r[s].topic)
            t++;
        for (size_t k = s; k < t; k++) {
            uint32_t i = r[k].i;
            hits[i] = breaks(b, r, s, t, k, &base[i], &peers[i]) && !cooling(b, e[i].story);
        }
        s = t;
    }
    int broke = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (hits[i] && (rc = hit(arg, i, base[i], peers[i])) == 0 &&
            (rc = remember(b, e[i].story, end_ms)) == 0)
            broke++;
    free(r);
    free(base);
    free(peers);
    free(hits);
    return rc < 0 ? rc : broke;
}

bool nf_breaking_dirty(const nf_breaking_t *b)
{
    return b->dirty;
}

void nf_breaking_clear(nf_breaking_t *b)
{
    b->n = 0;
    b->dirty = false;
}

size_t nf_breaking_size(const nf_breaking_t *b)
{
    return b->n;
}

int nf_breaking_save(nf_breaking_t *b, void **out, size_t *len)
{
    size_t n = 5 + 24 * b->n;
    unsigned char *p = malloc(n);
    if (!p)
        return -ENOMEM;
    p[0] = 1;
    nf_put_le32(p + 1, (uint32_t)b->n);
    for (size_t i = 0; i < b->n; i++) {
        nf_put_le64(p + 5 + 24 * i, b->v[i].story.hi);
        nf_put_le64(p + 13 + 24 * i, b->v[i].story.lo);
        nf_put_le64(p + 21 + 24 * i, (uint64_t)b->v[i].at);
    }
    *out = p;
    *len = n;
    b->dirty = false;
    return 0;
}

int nf_breaking_load(nf_breaking_t *b, const void *blob, size_t len)
{
    const unsigned char *p = blob;
    b->n = 0;
    b->dirty = false;
    if (len < 5 || p[0] != 1 || (len - 5) % 24 != 0 || nf_get_le32(p + 1) != (len - 5) / 24)
        return -EINVAL;
    for (size_t i = 0; i < (len - 5) / 24; i++) {
        nf_id128_t s = {nf_get_le64(p + 5 + 24 * i), nf_get_le64(p + 13 + 24 * i)};
        if (remember(b, s, (int64_t)nf_get_le64(p + 21 + 24 * i)) != 0) {
            b->n = 0;
            return -ENOMEM;
        }
    }
    b->dirty = false;
    return 0;
}
