/* readers.c — see readers.h. */
#include "serve/readers.h"

#include "algo/bytes.h"
#include "runtime/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define STRIPES 64

typedef struct entry {
    nf_id128_t user;
    uint64_t tag;   /* the view's write count it was read at (nf_store_view_wseq) */
    uint64_t owned; /* the owned partitions' signature */
    int64_t until_ms;
    uint64_t version, follow, mute;
    int64_t updated_ms;
    uint16_t nvec, nhidden, nmsrc, msrc_text_len;
    bool used, found;
    /* nvec nf_topic_weight_t, nhidden nf_id128_t, nmsrc uint64_t, then msrc_text_len bytes */
    void *blob;
} entry_t;

struct nf_readers {
    entry_t *e;
    size_t mask; /* of the set index: entries / 2 - 1 */
    pthread_mutex_t mu[STRIPES];
    _Atomic size_t bytes;
    nf_counter_t m_hit, m_changed, m_miss;
    nf_gauge_t m_bytes;
};

nf_readers_t *nf_readers_new(size_t entries)
{
    if (entries == 0)
        return NULL;
    size_t sets = 1;
    while (2 * sets < entries)
        sets *= 2;
    nf_readers_t *c = calloc(1, sizeof *c);
    if (!c || !(c->e = calloc(2 * sets, sizeof *c->e))) {
        free(c);
        return NULL;
    }
    c->mask = sets - 1;
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&c->mu[i], NULL);
    static const char *const outcome[3] = {"outcome=\"hit\"", "outcome=\"changed\"",
                                           "outcome=\"miss\""};
    nf_counter_t *const m[3] = {&c->m_hit, &c->m_changed, &c->m_miss};
    nf_metrics_counters("newsflow_query_reader_cache_total",
                        "Feeds by what they found of their reader's interest and hidden "
                        "articles kept from an earlier view: still valid (hit), written or "
                        "expired since (changed), none (miss); the last two read the view.",
                        outcome, 3, 0, m);
    nf_metrics_gauge("newsflow_query_reader_cache_bytes",
                     "Memory the readers' kept interest and hidden articles take "
                     "(serve.reader_cache entries).",
                     NULL, 0, &c->m_bytes);
    atomic_store(&c->bytes, 2 * sets * sizeof *c->e);
    nf_gauge_set(c->m_bytes, (int64_t)atomic_load(&c->bytes));
    return c;
}

void nf_readers_free(nf_readers_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i <= 2 * c->mask + 1; i++)
        free(c->e[i].blob);
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_destroy(&c->mu[i]);
    free(c->e);
    free(c);
}

static size_t set_of(const nf_readers_t *c, nf_id128_t u)
{
    return (size_t)((u.hi * 0x9e3779b97f4a7c15ull ^ u.lo) >> 17) & c->mask;
}

static void id_bytes(nf_id128_t u, unsigned char out[16])
{
    nf_put_be64(out, u.hi);
    nf_put_be64(out + 8, u.lo);
}

/* Whether e holds user's inputs. */
static bool holds(const entry_t *e, nf_id128_t user)
{
    return e->used && nf_id128_cmp(e->user, user) == 0;
}

static size_t blob_bytes(unsigned nvec, unsigned nhidden, unsigned nmsrc, size_t text)
{
    return nvec * sizeof(nf_topic_weight_t) + nhidden * sizeof(nf_id128_t) +
           nmsrc * sizeof(uint64_t) + text;
}

int nf_readers_get(nf_readers_t *c, const nf_store_view_t *v, nf_id128_t user, uint64_t owned,
                   int64_t now, nf_reader_t *out)
{
    if (!c)
        return 0;
    size_t s = set_of(c, user);
    unsigned char id[16];
    id_bytes(user, id);
    int r = 0;
    pthread_mutex_lock(&c->mu[s % STRIPES]);
    for (size_t k = 2 * s; k < 2 * s + 2; k++) {
        const entry_t *e = &c->e[k];
        if (!holds(e, user))
            continue;
        r = -1; /* kept, not (yet) valid */
        if (e->owned != owned || (e->until_ms && e->until_ms <= now) ||
            !nf_store_view_unchanged(v, id, e->tag))
            break;
        out->found = e->found;
        out->version = e->version;
        out->follow = e->follow;
        out->mute = e->mute;
        out->updated_ms = e->updated_ms;
        out->vec.n = e->nvec;
        memcpy(out->vec.t, e->blob, e->nvec * sizeof *out->vec.t);
        out->nhidden = e->nhidden;
        const char *at = (const char *)e->blob + e->nvec * sizeof *out->vec.t;
        memcpy(out->hidden, at, e->nhidden * sizeof *out->hidden);
        at += e->nhidden * sizeof *out->hidden;
        out->nmsrc = e->nmsrc;
        memcpy(out->msrc, at, e->nmsrc * sizeof *out->msrc);
        at += e->nmsrc * sizeof *out->msrc;
        out->msrc_text_len = e->msrc_text_len;
        memcpy(out->msrc_text, at, e->msrc_text_len);
        out->until_ms = e->until_ms;
        out->keep = true;
        r = 1;
        break;
    }
    pthread_mutex_unlock(&c->mu[s % STRIPES]);
    nf_counter_inc(r == 1 ? c->m_hit : r < 0 ? c->m_changed : c->m_miss);
    return r == 1;
}

void nf_readers_put(nf_readers_t *c, const nf_store_view_t *v, nf_id128_t user, uint64_t owned,
                    const nf_reader_t *r)
{
    if (!c || !r->keep || r->nhidden > NF_READER_HIDDEN_KEPT || r->vec.n > NF_TOPICS_MAX)
        return;
    if (r->nmsrc > NF_FOLLOWS_SOURCES_MAX || r->msrc_text_len > sizeof r->msrc_text)
        return;
    size_t bytes = blob_bytes(r->vec.n, (unsigned)r->nhidden, r->nmsrc, r->msrc_text_len);
    char *blob = malloc(bytes ? bytes : 1), *at = blob;
    if (!blob)
        return;
    memcpy(at, r->vec.t, r->vec.n * sizeof *r->vec.t);
    at += r->vec.n * sizeof *r->vec.t;
    memcpy(at, r->hidden, r->nhidden * sizeof *r->hidden);
    at += r->nhidden * sizeof *r->hidden;
    memcpy(at, r->msrc, r->nmsrc * sizeof *r->msrc);
    at += r->nmsrc * sizeof *r->msrc;
    memcpy(at, r->msrc_text, r->msrc_text_len);
    uint64_t tag = nf_store_view_wseq(v);
    size_t s = set_of(c, user);
    pthread_mutex_lock(&c->mu[s % STRIPES]);
    entry_t *a = &c->e[2 * s], *b = a + 1, *e = NULL;
    if (holds(a, user))
        e = a;
    else if (holds(b, user))
        e = b;
    else
        e = !a->used ? a : !b->used ? b : a->tag <= b->tag ? a : b; /* the older goes */
    if (holds(e, user) && e->tag > tag) {
        pthread_mutex_unlock(&c->mu[s % STRIPES]); /* a newer view's is kept already */
        free(blob);
        return;
    }
    size_t freed = e->used ? blob_bytes(e->nvec, e->nhidden, e->nmsrc, e->msrc_text_len) : 0;
    free(e->blob);
    *e = (entry_t){.user = user,
                   .tag = tag,
                   .owned = owned,
                   .until_ms = r->until_ms,
                   .version = r->version,
                   .follow = r->follow,
                   .mute = r->mute,
                   .updated_ms = r->updated_ms,
                   .nvec = (uint16_t)r->vec.n,
                   .nhidden = (uint16_t)r->nhidden,
                   .nmsrc = (uint16_t)r->nmsrc,
                   .msrc_text_len = (uint16_t)r->msrc_text_len,
                   .used = true,
                   .found = r->found,
                   .blob = blob};
    pthread_mutex_unlock(&c->mu[s % STRIPES]);
    size_t delta = bytes - freed; /* modulo: a smaller blob subtracts */
    nf_gauge_set(c->m_bytes, (int64_t)(atomic_fetch_add(&c->bytes, delta) + delta));
}

void nf_readers_stats(nf_readers_t *c, nf_readers_stats_t *s)
{
    memset(s, 0, sizeof *s);
    if (!c)
        return;
    s->hits = nf_counter_value(c->m_hit);
    s->changed = nf_counter_value(c->m_changed);
    s->misses = nf_counter_value(c->m_miss);
    s->bytes = atomic_load(&c->bytes);
}
