/* interest.c — the interest-update engine (interest.h). */
#include "engine/interest.h"
#include "algo/bytes.h"
#include "algo/hash.h"
#include "feed/dates.h"
#include "runtime/bigmem.h"
#include "runtime/slab.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seeds of the two 64-bit halves of the 128-bit keys: arbitrary, fixed forever
 * (persisted). */
#define SEED_USER_A 0x6e66696e74657231ull
#define SEED_USER_B 0x9e3779b97f4a7c15ull
#define SEED_SEEN_A 0x6e667365656e3031ull

#define MS_PER_DAY 86400000.0

/* ---------------------------------------------------------------- article
 * topic table */

/* One cached vector. The weights live in a block allocated at insert (articles
 * are few next to reads, and lookups never allocate). Records, index and weights are on huge
 * pages (bigmem, slab): every read looks up a random article. */
typedef struct tt_rec {
    nf_id128_t id;
    int64_t expires_at; /* 0 = never (broadcasts); loaded entries keep the stored
                           expiry */
    nf_topic_weight_t *w;
    uint8_t n;
    uint8_t ref; /* CLOCK bit: set on every hit, cleared by the sweeping hand */
} tt_rec_t;

typedef struct tt {
    tt_rec_t *recs;
    size_t nrecs, cap, max;
    uint32_t *idx; /* open addressing, linear probing: record index + 1, 0 = empty */
    size_t mask;
    size_t hand;
    nf_slab_t wslab; /* the weights */
} tt_t;

static size_t tt_home(const tt_t *t, nf_id128_t id)
{
    return (size_t)nf_mix64(id.hi ^ nf_mix64(id.lo)) & t->mask;
}

static bool id_eq(nf_id128_t a, nf_id128_t b)
{
    return a.hi == b.hi && a.lo == b.lo;
}

/* The slot holding id, or the empty slot where it would go. */
static size_t tt_slot(const tt_t *t, nf_id128_t id)
{
    size_t i = tt_home(t, id);
    while (t->idx[i] && !id_eq(t->recs[t->idx[i] - 1].id, id))
        i = (i + 1) & t->mask;
    return i;
}

/* Sizes the record array to cap and rebuilds the index at load <= 1/2. */
static int tt_resize(tt_t *t, size_t cap)
{
    size_t slots = 16;
    while (slots < 2 * cap)
        slots <<= 1;
    uint32_t *idx = nf_bigmem_alloc(slots * sizeof *idx);
    tt_rec_t *r = idx ? nf_bigmem_grow(t->recs, t->cap * sizeof *r, cap * sizeof *r) : NULL;
    if (!r) {
        nf_bigmem_free(idx, slots * sizeof *idx);
        return -ENOMEM;
    }
    t->recs = r;
    nf_bigmem_free(t->idx, (t->mask + 1) * sizeof *idx);
    t->idx = idx;
    t->mask = slots - 1;
    t->cap = cap;
    for (size_t k = 0; k < t->nrecs; k++)
        t->idx[tt_slot(t, t->recs[k].id)] = (uint32_t)(k + 1);
    return 0;
}

static int tt_init(tt_t *t, size_t max)
{
    memset(t, 0, sizeof *t);
    t->max = max;
    return tt_resize(t, max < 1024 ? max : 1024);
}

static void tt_free(tt_t *t)
{
    nf_slab_destroy(&t->wslab); /* every block of weights */
    nf_bigmem_free(t->recs, t->cap * sizeof *t->recs);
    nf_bigmem_free(t->idx, (t->mask + 1) * sizeof *t->idx);
}

static size_t wsize(unsigned n)
{
    return n * sizeof(nf_topic_weight_t);
}

/* Gives back a block of n weights (w may be NULL). */
static void tt_wfree(tt_t *t, nf_topic_weight_t *w, unsigned n)
{
    if (w)
        nf_slab_free(&t->wslab, w, nf_slab_class_size((uint32_t)wsize(n)));
}

/* Removes the index slot i (backward-shift deletion keeps every probe chain
 * unbroken). */
static void tt_unlink(tt_t *t, size_t i)
{
    for (;;) {
        size_t j = i;
        for (;;) {
            j = (j + 1) & t->mask;
            if (!t->idx[j]) {
                t->idx[i] = 0;
                return;
            }
            size_t k = tt_home(t, t->recs[t->idx[j] - 1].id);
            /* j's entry may stay if its home lies cyclically in (i, j]. */
            bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays)
                break;
        }
        t->idx[i] = t->idx[j];
        i = j;
    }
}

static tt_rec_t *tt_find(tt_t *t, nf_id128_t id)
{
    size_t i = tt_slot(t, id);
    return t->idx[i] ? &t->recs[t->idx[i] - 1] : NULL;
}

/* Inserts or replaces (v canonical). Evicts with CLOCK when full. */
static int tt_put(tt_t *t, nf_id128_t id, const nf_topic_vec_t *v, int64_t expires_at,
                  uint64_t *evictions)
{
    nf_topic_weight_t *w = NULL;
    if (v->n) {
        w = nf_slab_alloc(&t->wslab, (uint32_t)wsize(v->n));
        if (!w)
            return -ENOMEM;
        memcpy(w, v->t, wsize(v->n));
    }
    tt_rec_t *r = tt_find(t, id);
    if (!r) {
        if (t->nrecs == t->cap && t->cap < t->max) {
            size_t nc = t->cap * 2 < t->max ? t->cap * 2 : t->max;
            if (tt_resize(t, nc) != 0) {
                tt_wfree(t, w, v->n);
                return -ENOMEM;
            }
        }
        if (t->nrecs < t->cap) {
            r = &t->recs[t->nrecs++];
        } else {
            /* Full: the hand clears reference bits until it finds an entry not used
             * since its last pass (at most two turns). */
            while (t->recs[t->hand].ref) {
                t->recs[t->hand].ref = 0;
                t->hand = (t->hand + 1) % t->nrecs;
            }
            r = &t->recs[t->hand];
            t->hand = (t->hand + 1) % t->nrecs;
            tt_unlink(t, tt_slot(t, r->id));
            tt_wfree(t, r->w, r->n);
            (*evictions)++;
        }
        r->id = id;
        t->idx[tt_slot(t, id)] = (uint32_t)(r - t->recs + 1);
    } else {
        tt_wfree(t, r->w, r->n);
    }
    r->w = w;
    r->n = (uint8_t)v->n;
    r->ref = 1;
    r->expires_at = expires_at;
    return 0;
}

/* Drops record r; the last record moves into its place so records stay dense.
 */
static void tt_remove(tt_t *t, tt_rec_t *r)
{
    tt_unlink(t, tt_slot(t, r->id));
    tt_wfree(t, r->w, r->n);
    size_t last = --t->nrecs, at = (size_t)(r - t->recs);
    if (at != last) {
        size_t ls = tt_slot(t, t->recs[last].id);
        t->recs[at] = t->recs[last];
        t->idx[ls] = (uint32_t)(at + 1);
    }
    if (t->hand >= t->nrecs)
        t->hand = 0;
}

/* ---------------------------------------------------------------- encoding */

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static int cmp_topic(const void *a, const void *b)
{
    const nf_topic_weight_t *x = a, *y = b;
    return (x->topic > y->topic) - (x->topic < y->topic);
}

/* Canonical copy of v into c: sorted, zero weights dropped. -EINVAL on a bad
 * vector. */
static int canonical(const nf_topic_vec_t *v, nf_topic_vec_t *c)
{
    if (v->n > NF_TOPICS_MAX)
        return -EINVAL;
    c->n = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->t[i].topic >= NF_TOPICS_MAX || !isfinite(v->t[i].weight))
            return -EINVAL;
        if (v->t[i].weight != 0.0)
            c->t[c->n++] = v->t[i];
    }
    qsort(c->t, c->n, sizeof c->t[0], cmp_topic);
    for (uint32_t i = 1; i < c->n; i++)
        if (c->t[i].topic == c->t[i - 1].topic)
            return -EINVAL;
    return 0;
}

/* Encoding of an already canonical vector; out has room for 1 + 9 n bytes. */
static size_t enc_canonical(const nf_topic_vec_t *c, unsigned char *out)
{
    unsigned char *p = out;
    *p++ = (unsigned char)c->n;
    for (uint32_t i = 0; i < c->n; i++) {
        *p++ = (unsigned char)c->t[i].topic;
        nf_put_le64(p, dbits(c->t[i].weight));
        p += 8;
    }
    return (size_t)(p - out);
}

int nf_interest_topics_encode(const nf_topic_vec_t *v, unsigned char *out, size_t cap)
{
    nf_topic_vec_t c;
    int rc = canonical(v, &c);
    if (rc != 0)
        return rc;
    if (cap < 1 + 9 * (size_t)c.n)
        return -ENOSPC;
    return (int)enc_canonical(&c, out);
}

int nf_interest_view_topics(nf_store_view_t *v, uint16_t kg, nf_id128_t id, int64_t at_ms,
                            nf_topic_vec_t *vec, int64_t *expires, char *err, size_t errlen)
{
    unsigned char key[18];
    nf_kstate_encode_key(kg, id, key);
    void *val = NULL;
    size_t len = 0;
    int r = nf_store_view_get(v, NF_KIND_ARTICLE_TOPICS, key, sizeof key, &val, &len, err, errlen);
    if (r == 1) {
        uint64_t exp = len >= 8 ? nf_get_le64(val) : 0;
        r = len >= 8 && (exp == 0 || (int64_t)exp > at_ms) &&
                    nf_interest_topics_decode((unsigned char *)val + 8, len - 8, vec) == 0
                ? 1
                : 0;
        if (r == 1 && expires)
            *expires = (int64_t)exp;
    }
    free(val);
    return r;
}

int nf_interest_topics_decode(const void *p, size_t len, nf_topic_vec_t *out)
{
    const unsigned char *b = p;
    if (len < 1 || b[0] > NF_TOPICS_MAX || len != 1 + 9 * (size_t)b[0])
        return -EINVAL;
    out->n = b[0];
    for (uint32_t i = 0; i < out->n; i++) {
        const unsigned char *q = b + 1 + 9 * i;
        double w = bitsd(nf_get_le64(q + 1));
        /* the canonical form only (enc_canonical): a zero weight is never written */
        if (q[0] >= NF_TOPICS_MAX || (i > 0 && q[0] <= out->t[i - 1].topic) || !isfinite(w) ||
            w == 0.0)
            return -EINVAL;
        out->t[i].topic = q[0];
        out->t[i].weight = w;
    }
    return 0;
}

/* ---------------------------------------------------------------- the engine
 */

struct nf_interest {
    nf_interest_opts_t o;
    nf_store_t *st;
    nf_kstate_t *users;
    nf_keyset_t *seen;
    tt_t tt;
    uint64_t table_hits, table_misses, table_loads, table_evictions;
    uint64_t updated, duplicates, unknown;
    char err[512];
};

void nf_interest_opts_default(nf_interest_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->alpha = 0.1;
    o->gamma = 0.95;
    o->seen_ttl_ms = 24ull * 3600 * 1000;
    o->table_max = 1u << 20;
    o->topics_key_group = -1;
    static const double w[NF_READ_KIND__COUNT] = {1.0, 2.0, 3.0, -1.0, -2.0};
    memcpy(o->weights, w, sizeof w);
}

nf_interest_t *nf_interest_new(nf_store_t *st, const nf_interest_opts_t *o)
{
    nf_interest_opts_t def;
    if (!o) {
        nf_interest_opts_default(&def);
        o = &def;
    }
    bool ok = o->gamma > 0.0 && o->gamma <= 1.0 && isfinite(o->alpha) && o->table_max != 0 &&
              o->table_max <= UINT32_MAX - 1;
    for (int k = 0; k < NF_READ_KIND__COUNT; k++)
        ok = ok && isfinite(o->weights[k]);
    if (o->err) /* the reason unless a more precise one replaces it */
        snprintf(o->err, o->errlen, "%s",
                 ok ? "out of memory"
                    : "interest options out of range (gamma in (0, 1], finite alpha and "
                      "weights, table_max >= 1)");
    if (!ok)
        return NULL;
    nf_interest_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->o = *o;
    e->o.err = NULL;
    e->st = st;
    nf_kstate_opts_t ku = {
        .kind = NF_KIND_INTEREST, .budget_bytes = o->users_budget_bytes, .initial_capacity = 1024};
    nf_keyset_opts_t ks = {.kind = NF_KIND_INTEREST_SEEN,
                           .ttl_ms = o->seen_ttl_ms,
                           .budget_bytes = o->seen_budget_bytes,
                           .initial_capacity = 1024,
                           .writer = o->writer,
                           .process = o->process,
                           .spill_dir = o->seen_spill_dir,
                           .err = o->err,
                           .errlen = o->errlen};
    e->users = nf_kstate_new(st, &ku);
    e->seen = nf_keyset_new(st, &ks);
    if (!e->users || !e->seen || tt_init(&e->tt, o->table_max) != 0) {
        nf_interest_free(e);
        return NULL;
    }
    return e;
}

void nf_interest_free(nf_interest_t *e)
{
    if (!e)
        return;
    nf_kstate_free(e->users);
    nf_keyset_free(e->seen);
    tt_free(&e->tt);
    free(e);
}

static nf_id128_t user_key(const char *user_id, size_t n)
{
    return nf_hash128(user_id, n, SEED_USER_A, SEED_USER_B);
}

nf_id128_t nf_interest_user_key(const char *user_id)
{
    return user_key(user_id, strlen(user_id));
}

void nf_interest_read_init(nf_interest_read_t *r, uint16_t kg, const char *user_id,
                           const char *article_id, const char *session_id, int64_t ts_ms)
{
    if (!session_id)
        session_id = "";
    nf_interest_read_init_n(r, kg, user_id, strlen(user_id), article_id, strlen(article_id),
                            session_id, strlen(session_id), ts_ms);
}

void nf_interest_read_init_n(nf_interest_read_t *r, uint16_t kg, const char *user_id, size_t ulen,
                             const char *article_id, size_t la, const char *session_id, size_t slen,
                             int64_t ts_ms)
{
    r->user = user_key(user_id, ulen);
    /* Each field hashed with the previous result as its seed; nf_hash64 mixes in the length,
     * so ("ab", "c") and ("a", "bc") differ. The user's half keeps the key on the user's shard. */
    uint64_t h = nf_hash64(article_id, la, r->user.lo ^ SEED_SEEN_A);
    r->seen = (nf_id128_t){r->user.hi, nf_hash64(session_id, slen, h)};
    r->article_ok = la == 32 && nf_id128_from_hex32(article_id, &r->article) == 0;
    if (!r->article_ok)
        r->article = (nf_id128_t){0, 0};
    r->ts_ms = ts_ms;
    r->kg = kg;
    r->kind = NF_READ_KIND_READ;
    r->user_hint = NF_KSTATE_NO_HINT;
    r->article_hint = 0;
}

int nf_interest_topics_put(nf_interest_t *e, nf_id128_t id, const nf_topic_vec_t *v, int64_t now_ms)
{
    nf_topic_vec_t c;
    int rc = canonical(v, &c);
    (void)now_ms;
    return rc ? rc : tt_put(&e->tt, id, &c, 0, &e->table_evictions);
}

/* The article's vector: table, else store. 1 (found: *w, *n point into the
 * table until its next insert), 0 (unknown), -EIO, -ENOMEM. */
static int article_vec(nf_interest_t *e, nf_id128_t id, uint32_t hint, int64_t now_ms,
                       const nf_topic_weight_t **w, uint8_t *n)
{
    tt_rec_t *r = hint && hint <= e->tt.nrecs && id_eq(e->tt.recs[hint - 1].id, id)
                      ? &e->tt.recs[hint - 1] /* ids are unique in the table: its record */
                      : tt_find(&e->tt, id);
    if (r && r->expires_at != 0 && r->expires_at <= now_ms) {
        /* Expired upstream: forget it and ask the store (which may hold a newer
         * copy). */
        tt_remove(&e->tt, r);
        r = NULL;
    }
    if (r) {
        e->table_hits++;
        r->ref = 1;
        *w = r->w;
        *n = r->n;
        return 1;
    }
    e->table_misses++;
    if (!e->st)
        return 0;
    unsigned char key[18];
    nf_kstate_encode_key(e->o.topics_key_group >= 0 ? (uint16_t)e->o.topics_key_group
                                                    : (uint16_t)(id.hi % 256),
                         id, key);
    void *val = NULL;
    size_t len = 0;
    char err[384] = "";
    int rc =
        nf_store_get(e->st, NF_KIND_ARTICLE_TOPICS, key, sizeof key, &val, &len, err, sizeof err);
    if (rc < 0) {
        snprintf(e->err, sizeof e->err, "reading the topic vector of article %016llx%016llx: %s",
                 (unsigned long long)id.hi, (unsigned long long)id.lo, err);
        return -EIO;
    }
    if (rc == 0)
        return 0;
    nf_topic_vec_t v;
    int64_t exp = len >= 8 ? (int64_t)nf_get_le64(val) : 0;
    if (len < 8 || nf_interest_topics_decode((unsigned char *)val + 8, len - 8, &v) != 0) {
        snprintf(e->err, sizeof e->err,
                 "stored topic vector of article %016llx%016llx is corrupt (%zu bytes)",
                 (unsigned long long)id.hi, (unsigned long long)id.lo, len);
        free(val);
        return -EIO;
    }
    free(val);
    if (exp != 0 && exp <= now_ms)
        return 0;
    rc = tt_put(&e->tt, id, &v, exp, &e->table_evictions);
    if (rc != 0)
        return rc;
    e->table_loads++;
    r = tt_find(&e->tt, id);
    assert(r);
    *w = r->w;
    *n = r->n;
    return 1;
}

/* A stored user value that does not decode: -EIO with the reason. */
static int corrupt_user(nf_interest_t *e, nf_id128_t key, uint32_t len)
{
    snprintf(e->err, sizeof e->err,
             "stored interest state of user key %016llx%016llx is corrupt (%u bytes)",
             (unsigned long long)key.hi, (unsigned long long)key.lo, len);
    return -EIO;
}

typedef struct user_state {
    uint64_t version;
    int64_t updated_ms;
    nf_topic_vec_t v;
} user_state_t;

/* 1 found, 0 absent, -EIO. */
static int user_load(nf_interest_t *e, uint16_t kg, nf_id128_t key, int64_t now_ms,
                     user_state_t *us)
{
    uint32_t len = 0;
    int err = 0;
    const unsigned char *p = nf_kstate_get(e->users, kg, key, (uint64_t)now_ms, &len, &err);
    if (err) {
        snprintf(e->err, sizeof e->err, "reading interest state: %s", nf_kstate_error(e->users));
        return err == -ENOMEM ? -ENOMEM : -EIO;
    }
    if (!p) {
        us->version = 0;
        us->updated_ms = 0;
        us->v.n = 0;
        return 0;
    }
    if (len < 16 || nf_interest_topics_decode(p + 16, len - 16, &us->v) != 0) {
        snprintf(e->err, sizeof e->err,
                 "stored interest state of user key %016llx%016llx is corrupt (%u "
                 "bytes)",
                 (unsigned long long)key.hi, (unsigned long long)key.lo, len);
        return -EIO;
    }
    us->version = nf_get_le64(p);
    us->updated_ms = (int64_t)nf_get_le64(p + 8);
    return 1;
}

static void out_of(const user_state_t *us, nf_interest_out_t *out)
{
    out->version = us->version;
    out->updated_ms = us->updated_ms;
    out->vec.n = us->v.n;
    memcpy(out->vec.t, us->v.t, us->v.n * sizeof us->v.t[0]);
}

void nf_interest_prefetch(nf_interest_t *e, nf_interest_read_t *r, unsigned stage)
{
    const tt_t *t = &e->tt;
    if (stage == 0) {
        nf_keyset_prefetch(e->seen, r->kg, r->seen);
        nf_kstate_prefetch(e->users, r->kg, r->user);
        if (r->article_ok)
            __builtin_prefetch(&t->idx[tt_home(t, r->article)]);
    } else if (stage == 1) {
        r->user_hint = nf_kstate_prefetch_record(e->users, r->kg, r->user);
        nf_keyset_prefetch_record(e->seen, r->kg, r->seen);
        uint32_t i = r->article_ok ? t->idx[tt_home(t, r->article)] : 0;
        if (i) /* the home slot's record: the table is at most half full */
            __builtin_prefetch(&t->recs[i - 1]);
        r->article_hint = i; /* for stage 2, which checks it */
    } else {
        r->user_hint = nf_kstate_prefetch_value(e->users, r->kg, r->user, r->user_hint);
        uint32_t i = r->article_hint;
        r->article_hint = 0;
        if (i && i <= t->nrecs && id_eq(t->recs[i - 1].id, r->article)) {
            r->article_hint = i;
            if (t->recs[i - 1].w)
                __builtin_prefetch(t->recs[i - 1].w);
        }
    }
}

void nf_interest_prefetch_step(nf_interest_t *e, nf_interest_read_t *first, size_t stride, size_t n,
                               size_t i)
{
    for (unsigned st = 0; st < NF_INTEREST_PREFETCH_STAGES; st++) {
        size_t d = (size_t)st * NF_INTEREST_PREFETCH_DIST;
        if (i >= d && i - d < n)
            nf_interest_prefetch(e, (nf_interest_read_t *)((char *)first + (i - d) * stride), st);
    }
}

int nf_interest_apply(nf_interest_t *e, uint16_t kg, const char *user_id, const char *article_id,
                      const char *session_id, int64_t ts_ms, int64_t now_ms, nf_interest_out_t *out)
{
    nf_interest_read_t r;
    nf_interest_read_init(&r, kg, user_id, article_id, session_id, ts_ms);
    return nf_interest_apply_read(e, &r, now_ms, out);
}

void nf_interest_read_set_kind(nf_interest_read_t *r, int kind)
{
    if (kind <= NF_READ_KIND_READ || kind >= NF_READ_KIND__COUNT)
        return; /* a read's key is the one init made (and the one kept before kinds existed) */
    const char *name = nf_read_kind_name(kind);
    r->kind = (uint8_t)kind;
    r->seen.lo = nf_hash64(name, strlen(name), r->seen.lo ^ SEED_SEEN_A);
}

int nf_interest_apply_read(nf_interest_t *e, const nf_interest_read_t *r, int64_t now_ms,
                           nf_interest_out_t *out)
{
    uint16_t kg = r->kg;
    int64_t ts_ms = r->ts_ms;
    nf_id128_t sk = r->seen;
    const nf_topic_weight_t *aw = NULL;
    uint8_t an = 0;
    int rc = r->article_ok ? article_vec(e, r->article, r->article_hint, now_ms, &aw, &an) : 0;
    if (rc < 0)
        return rc;
    if (rc == 0 && !e->o.unknown_as_empty) {
        /* Nothing to count: a duplicate still reads as one (it was counted once). */
        int seen = nf_keyset_contains(e->seen, kg, sk, now_ms);
        if (seen < 0) {
            snprintf(e->err, sizeof e->err, "reading the seen set's keys on disk failed");
            return seen;
        }
        if (seen) {
            e->duplicates++;
            return NF_INTEREST_DUPLICATE;
        }
        e->unknown++;
        return NF_INTEREST_UNKNOWN_ARTICLE;
    }
    /* The user's stored value, read where it is: [version][updated_ms][n][topic, weight]... */
    nf_id128_t uk = r->user;
    uint32_t len = 0;
    int err = 0;
    const unsigned char *p =
        nf_kstate_get_hint(e->users, kg, uk, r->user_hint, (uint64_t)now_ms, &len, &err);
    if (err) {
        snprintf(e->err, sizeof e->err, "reading interest state: %s", nf_kstate_error(e->users));
        return err == -ENOMEM ? -ENOMEM : -EIO;
    }
    uint64_t version = 0;
    int64_t updated_ms = 0;
    uint32_t un = 0;
    uint64_t um = 0; /* the user's topics as a bit set */
    if (p) {
        if (len < 17 || p[16] > NF_TOPICS_MAX || len != 17 + 9 * (uint32_t)p[16])
            return corrupt_user(e, uk, len);
        version = nf_get_le64(p);
        updated_ms = (int64_t)nf_get_le64(p + 8);
        un = p[16];
        p += 17;
        /* Checked as the decoder does (in range, strictly increasing, finite) before anything
         * changes: a damaged value is -EIO and the read is not marked seen. */
        for (uint32_t k = 0; k < un; k++) {
            if (p[9 * k] >= NF_TOPICS_MAX || (k && p[9 * k] <= p[9 * (k - 1)]) ||
                !isfinite(bitsd(nf_get_le64(p + 9 * k + 1))))
                return corrupt_user(e, uk, len);
            um |= 1ull << p[9 * k];
        }
    }

    /* Marked seen before the update: if the user's put then fails (no memory) the caller stops
     * the job and the epoch holding both does not commit. */
    int seen = nf_keyset_add(e->seen, kg, sk, now_ms);
    if (seen < 0) {
        snprintf(e->err, sizeof e->err, "%s",
                 seen == -EIO ? "reading the seen set's keys on disk failed"
                              : "out of memory in the seen set");
        return seen;
    }
    if (seen == 1) {
        e->duplicates++;
        return NF_INTEREST_DUPLICATE;
    }
    if (rc == 0) {
        e->unknown++; /* read as an article with an empty vector (opts.unknown_as_empty) */
        aw = NULL;
        an = 0;
    }

    /* The definition's operations in its order, over the union of the two sparse vectors, the
     * norm summed in topic order: bit for bit what the dense loop over all 64 topics gives,
     * since a topic in neither adds exactly 0 everywhere, and y + 0 is y (a zero's sign aside,
     * and zeros are left out). Dense scratch cleared at the union's topics only, then filled,
     * then read in topic order: no branch on which vector has the next topic (a sorted merge
     * mispredicted several times per event). */
    double days = ts_ms > updated_ms ? (double)(ts_ms - updated_ms) / MS_PER_DAY : 0.0;
    double decay = version == 0 ? 1.0 : pow(e->o.gamma, days);
    double alpha = e->o.alpha * e->o.weights[r->kind < NF_READ_KIND__COUNT ? r->kind : 0];
    uint64_t am = 0;
    for (uint32_t j = 0; j < an; j++)
        am |= 1ull << aw[j].topic;
    double du[NF_TOPICS_MAX], da[NF_TOPICS_MAX];
    for (uint64_t m = um | am; m; m &= m - 1) {
        unsigned t = (unsigned)__builtin_ctzll(m);
        du[t] = 0.0;
        da[t] = 0.0;
    }
    for (uint32_t k = 0; k < un; k++)
        du[p[9 * k]] = bitsd(nf_get_le64(p + 9 * k + 1)) * decay;
    for (uint32_t j = 0; j < an; j++)
        da[aw[j].topic] = alpha * aw[j].weight;
    nf_topic_weight_t v[NF_TOPICS_MAX];
    uint32_t nv = 0;
    double ss = 0.0;
    for (uint64_t m = um | am; m; m &= m - 1) {
        unsigned t = (unsigned)__builtin_ctzll(m);
        double x = du[t] + da[t];
        ss += x * x;
        v[nv++] = (nf_topic_weight_t){(uint16_t)t, x};
    }
    nf_interest_out_t local;
    if (!out)
        out = &local;
    double norm = sqrt(ss);
    out->vec.n = 0;
    for (uint32_t k = 0; k < nv; k++) {
        double x = norm > 0.0 ? v[k].weight / norm : v[k].weight;
        if (x != 0.0)
            out->vec.t[out->vec.n++] = (nf_topic_weight_t){v[k].topic, x};
    }
    out->version = version + 1;
    out->updated_ms = version == 0 || ts_ms > updated_ms ? ts_ms : updated_ms;

    /* Written where it goes (p is not read after this). */
    unsigned char *w = nf_kstate_put_ref(e->users, kg, uk, 17 + 9 * out->vec.n, (uint64_t)now_ms);
    if (!w)
        return -ENOMEM;
    nf_put_le64(w, out->version);
    nf_put_le64(w + 8, (uint64_t)out->updated_ms);
    enc_canonical(&out->vec, w + 16);
    e->updated++;
    return NF_INTEREST_UPDATED;
}

int nf_interest_get_key(nf_interest_t *e, uint16_t kg, nf_id128_t user, int64_t now_ms,
                        nf_interest_out_t *out)
{
    user_state_t us;
    int rc = user_load(e, kg, user, now_ms, &us);
    if (rc == 1)
        out_of(&us, out);
    return rc;
}

int nf_interest_get(nf_interest_t *e, uint16_t kg, const char *user_id, int64_t now_ms,
                    nf_interest_out_t *out)
{
    return nf_interest_get_key(e, kg, nf_interest_user_key(user_id), now_ms, out);
}

size_t nf_interest_snapshot(nf_interest_t *e, nf_store_batch_t *b, uint64_t epoch)
{
    long seen = nf_keyset_snapshot(e->seen, b, epoch); /* < 0: b is marked failed */
    return nf_kstate_snapshot(e->users, b, epoch) + (seen > 0 ? (size_t)seen : 0);
}

size_t nf_interest_freeze(nf_interest_t *e, nf_store_batch_t *b, uint64_t epoch)
{
    long seen = nf_keyset_freeze(e->seen, b, epoch); /* < 0: b is marked failed */
    return nf_kstate_freeze(e->users, b, epoch) + (seen > 0 ? (size_t)seen : 0);
}

size_t nf_interest_freeze_step(nf_interest_t *e, size_t max)
{
    size_t left = nf_kstate_freeze_step(e->users, max);
    long seen = nf_keyset_freeze_step(e->seen, max); /* < 0: b is marked failed, nothing left */
    return left + (seen > 0 ? (size_t)seen : 0);
}

void nf_interest_committed(nf_interest_t *e, uint64_t epoch)
{
    nf_kstate_committed(e->users, epoch);
}

long nf_interest_load(nf_interest_t *e, nf_keyset_owns_fn owns, void *ctx, int64_t now_ms,
                      char *err, size_t errlen)
{
    return nf_keyset_load(e->seen, owns, ctx, now_ms, err, errlen);
}

typedef struct {
    const bool *groups;
} groups_ctx_t;

static bool in_groups(uint16_t kg, void *ctx)
{
    return ((const groups_ctx_t *)ctx)->groups[kg];
}

static bool key_in_groups(uint16_t kg, nf_id128_t key, void *ctx)
{
    (void)key;
    return in_groups(kg, ctx);
}

long nf_interest_groups_gained(nf_interest_t *e, const uint16_t *kgs, size_t n,
                               nf_keyset_owns_fn owns, void *ctx, int64_t now_ms, char *err,
                               size_t errlen)
{
    return nf_keyset_load_groups(e->seen, kgs, n, owns, ctx, now_ms, err, errlen);
}

long nf_interest_groups_lost(nf_interest_t *e, const bool groups[65536], int64_t now_ms,
                             size_t *kept)
{
    groups_ctx_t g = {groups};
    size_t users = nf_kstate_drop_groups(e->users, in_groups, &g, kept);
    long seen = nf_keyset_drop(e->seen, key_in_groups, &g, now_ms);
    return seen < 0 ? seen : (long)users + seen;
}

size_t nf_interest_expire(nf_interest_t *e, int64_t now_ms, size_t max_entries)
{
    return nf_keyset_expire(e->seen, now_ms, max_entries);
}

bool nf_interest_over_budget(const nf_interest_t *e)
{
    return nf_kstate_over_budget(e->users);
}

bool nf_interest_seen_over_budget(const nf_interest_t *e)
{
    return nf_keyset_over_budget(e->seen);
}

void nf_interest_stats(const nf_interest_t *e, nf_interest_stats_t *out)
{
    memset(out, 0, sizeof *out);
    nf_kstate_stats(e->users, &out->users);
    nf_keyset_stats(e->seen, &out->seen);
    out->table_entries = e->tt.nrecs;
    out->table_bytes = e->tt.cap * sizeof(tt_rec_t) + (e->tt.mask + 1) * sizeof(uint32_t) +
                       nf_slab_bytes(&e->tt.wslab);
    out->table_hits = e->table_hits;
    out->table_misses = e->table_misses;
    out->table_loads = e->table_loads;
    out->table_evictions = e->table_evictions;
    out->updated = e->updated;
    out->duplicates = e->duplicates;
    out->unknown = e->unknown;
}

const char *nf_interest_error(const nf_interest_t *e)
{
    return e->err;
}

int nf_interest_keys_init(nf_interest_keys_t *k, const char *const *topic_names)
{
    nf_jw_t w;
    nf_jw_init(&w);
    for (unsigned t = 0; t < NF_TOPICS_MAX; t++) {
        char num[8];
        const char *name = topic_names ? topic_names[t] : NULL;
        if (!name) {
            snprintf(num, sizeof num, "%u", t);
            name = num;
        }
        size_t at = w.len;
        nf_jw_str(&w, name);
        nf_jw_raw(&w, ":", 1);
        k->at[t] = (uint32_t)at;
        k->len[t] = (uint32_t)(w.len - at);
    }
    /* 16 bytes of slack: the writer copies a key of up to 16 bytes as one 16-byte block. */
    nf_jw_raw(&w, "                ", 16);
    if (w.failed) {
        nf_jw_free(&w);
        k->text = NULL;
        return -ENOMEM;
    }
    k->text = w.buf; /* the writer's buffer, kept */
    k->day = INT64_MIN;
    return 0;
}

void nf_interest_keys_free(nf_interest_keys_t *k)
{
    free(k->text);
    k->text = NULL;
}

/* The general writer: any weight (outside [0, 1] nf_jw_unit writes %.17g or null). */
static void json_any(const nf_interest_out_t *o, const nf_interest_keys_t *k, nf_jw_t *w)
{
    char ts[40];
    nf_jw_raw(w, ",\"version\":", 11);
    nf_jw_u64(w, o->version);
    nf_jw_raw(w, ",\"vector\":{", 11);
    for (uint32_t i = 0; i < o->vec.n; i++) {
        unsigned t = o->vec.t[i].topic;
        if (i)
            nf_jw_raw(w, ",", 1);
        nf_jw_raw(w, k->text + k->at[t], k->len[t]);
        nf_jw_unit(w, o->vec.t[i].weight);
    }
    nf_jw_raw(w, "},\"updated_at\":\"", 16);
    size_t n = nf_date_format(o->updated_ms, ts, sizeof ts); /* RFC 3339: nothing to escape */
    nf_jw_raw(w, ts, n);
    nf_jw_raw(w, "\"}", 2);
}

/* updated_at as nf_date_format writes it, the date part from the writer's cache when the day
 * is the one it last wrote (timestamps of a stream are close together). Returns the end. */
static char *json_time(char *p, int64_t ms, nf_interest_keys_t *k)
{
    int64_t day = ms / 86400000, rem = ms % 86400000;
    if (rem < 0) {
        rem += 86400000;
        day--;
    }
    if (day != k->day) {
        size_t n = nf_date_format(ms, p, 40);
        if (n >= 20 && n < 40 && p[10] == 'T') { /* years 0..9999: the fixed shape */
            memcpy(k->date, p, sizeof k->date);
            k->day = day;
        }
        return p + (n < 40 ? n : 39);
    }
    uint32_t r = (uint32_t)rem;
    memcpy(p, k->date, sizeof k->date);
    p += sizeof k->date;
    nf_jw_put2(p, r / 3600000);
    p[2] = ':';
    nf_jw_put2(p + 3, r / 60000 % 60);
    p[5] = ':';
    nf_jw_put2(p + 6, r / 1000 % 60);
    p += 8;
    if (r % 1000) {
        *p++ = '.';
        *p++ = (char)('0' + r % 1000 / 100);
        nf_jw_put2(p, r % 100);
        p += 2;
    }
    *p++ = 'Z';
    return p;
}

void nf_interest_json_keys(const nf_interest_out_t *o, const char *user_id, nf_interest_keys_t *k,
                           nf_jw_t *w)
{
    nf_jw_raw(w, "{\"user_id\":", 11);
    nf_jw_str(w, user_id);
    /* The rest in one reservation, written in place (one value per event: the read path's
     * largest output). Weights of a normalised vector of non-negative topic weights are in
     * [0, 1]; anything else takes the general writer. */
    size_t need = 11 + 20 + 11 + 16 + 40 + 2 + 16; /* + a key copy's overshoot */
    bool units = true;
    for (uint32_t i = 0; i < o->vec.n; i++) {
        need += 1 + k->len[o->vec.t[i].topic] + 17;
        units = units && o->vec.t[i].weight >= 0.0 && o->vec.t[i].weight <= 1.0;
    }
    char *p = units ? nf_jw_reserve(w, need) : NULL;
    if (!p) {
        if (!w->failed)
            json_any(o, k, w);
        w->first = false;
        return;
    }
    memcpy(p, ",\"version\":", 11);
    p += 11;
    char digits[20];
    size_t nd = 0;
    uint64_t v = o->version;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (nd)
        *p++ = digits[--nd];
    memcpy(p, ",\"vector\":{", 11);
    p += 11;
    /* The numbers first, each into its own buffer, then the copies: written straight into the
     * output, each number's work waited on the previous one's length (where it goes); apart,
     * the conversions overlap and only the copies follow one another. */
    char num[NF_TOPICS_MAX][17];
    uint8_t nlen[NF_TOPICS_MAX];
    for (uint32_t i = 0; i < o->vec.n; i++)
        nlen[i] = (uint8_t)(nf_jw_unit_put(num[i], o->vec.t[i].weight) - num[i]);
    for (uint32_t i = 0; i < o->vec.n; i++) {
        unsigned t = o->vec.t[i].topic;
        if (i)
            *p++ = ',';
        if (k->len[t] <= 16) /* one block (keys have 16 bytes of slack, so has the output) */
            memcpy(p, k->text + k->at[t], 16);
        else
            memcpy(p, k->text + k->at[t], k->len[t]);
        p += k->len[t];
        if (nlen[i] == 1) /* "0" or "1" */
            *p = num[i][0];
        else
            memcpy(p, num[i], 17); /* all 17 written: "0." and 15 digits, trailing 0s cut */
        p += nlen[i];
    }
    memcpy(p, "},\"updated_at\":\"", 16);
    p += 16;
    p = json_time(p, o->updated_ms, k); /* RFC 3339: nothing to escape */
    *p++ = '"';
    *p++ = '}';
    nf_jw_commit(w, p);
    w->first = false;
}

void nf_interest_json(const nf_interest_out_t *o, const char *user_id,
                      const char *const *topic_names, nf_jw_t *w)
{
    nf_interest_keys_t k;
    if (nf_interest_keys_init(&k, topic_names) != 0) {
        w->failed = true;
        return;
    }
    nf_interest_json_keys(o, user_id, &k, w);
    nf_interest_keys_free(&k);
}
