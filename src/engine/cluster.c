/* cluster.c — LSH candidate search, verification and union-find over keyed state (cluster.h).
 *
 * One add reads the article's band buckets, verifies every distinct live candidate against its
 * stored signature, finds the clusters of the verified ones, rewrites the buckets (appending the
 * article, pruning ids whose signature expired) and links the clusters under the earliest
 * article. The work is bounded: at most bands x bucket_cap candidates per article. */
#include "engine/cluster.h"
#include "algo/bytes.h"

#include "algo/minhash.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_KG    0xFFFFu /* articles use 0..255: this group is the engine's own */
#define PARENT_LEN 24u     /* parent id (16) + ingested_ms (8) */

typedef struct cand {
    nf_id128_t id;
    unsigned band;
} cand_t;

typedef struct uniq {
    nf_id128_t id;
    int64_t ms;
    double sim;
    bool alive, self, verified;
} uniq_t;

typedef struct node {
    nf_id128_t id, parent;
    int64_t ms;
} node_t;

typedef struct root {
    nf_id128_t id;
    int64_t ms;
} root_t;

/* The engine clock at an epoch's snapshot: the store's TTL filter gets it once that epoch is
 * committed (a later clock could drop what a replay after a crash still sees live). */
typedef struct snap_clock {
    uint64_t epoch, clock;
} snap_clock_t;
enum { SNAP_CLOCKS = 16 };

struct nf_cluster {
    nf_cluster_opts_t o;
    nf_store_t *st;
    nf_kstate_t *sig, *bucket, *parent;
    uint64_t clock;
    bool clock_known;
    snap_clock_t snaps[SNAP_CLOCKS]; /* epochs snapshotted, not yet committed, oldest first */
    unsigned nsnaps;

    /* Scratch, sized at creation: a bounded add never allocates. */
    uint64_t *keys;     /* bands */
    uint32_t *ovf;      /* bands: overflow counters read from the buckets */
    cand_t *cand;       /* bands * bucket_cap */
    uniq_t *uniq;       /* bands * bucket_cap */
    root_t *roots;      /* bands * bucket_cap */
    unsigned char *val; /* a bucket or signature value being written */
    uint16_t *fkg;      /* bands * bucket_cap: keys for nf_kstate_fetch */
    nf_id128_t *fkey;
    node_t *path; /* find's walk, grown on demand (paths stay short) */
    size_t path_cap;

    uint64_t adds, news, joins, merges, duplicates, empty, candidates, verified, overflow;
    char err[320];
};

static inline void put_id(unsigned char *p, nf_id128_t id)
{
    nf_put_le64(p, id.hi);
    nf_put_le64(p + 8, id.lo);
}

static inline nf_id128_t get_id(const unsigned char *p)
{
    return (nf_id128_t){nf_get_le64(p), nf_get_le64(p + 8)};
}

static inline bool id_eq(nf_id128_t a, nf_id128_t b)
{
    return a.hi == b.hi && a.lo == b.lo;
}

static inline int id_cmp(nf_id128_t a, nf_id128_t b)
{
    if (a.hi != b.hi)
        return a.hi < b.hi ? -1 : 1;
    return a.lo < b.lo ? -1 : a.lo > b.lo;
}

/* Cluster order: earliest article first, ties by id. */
static inline bool root_before(int64_t ams, nf_id128_t a, int64_t bms, nf_id128_t b)
{
    return ams != bms ? ams < bms : id_cmp(a, b) < 0;
}

static inline uint16_t article_kg(const nf_cluster_t *c, nf_id128_t id)
{
    return c->o.key_group >= 0 ? (uint16_t)c->o.key_group : (uint16_t)(id.hi % 256);
}

void nf_cluster_opts_default(nf_cluster_opts_t *o)
{
    o->hashes = 128;
    o->bands = 16;
    o->rows = 8;
    o->threshold = 0.85;
    o->ttl_ms = 7 * NF_CLUSTER_DAY_MS;
    o->bucket_cap = 32;
    o->budget_bytes = 0;
    o->key_group = -1;
}

const char *nf_cluster_action_name(nf_cluster_action_t a)
{
    switch (a) {
    case NF_CLUSTER_NEW:
        return "new";
    case NF_CLUSTER_JOINED:
        return "joined";
    case NF_CLUSTER_MERGED:
        return "merged";
    case NF_CLUSTER_DUPLICATE:
        return "duplicate";
    }
    return "?";
}

void nf_cluster_id_hex(nf_id128_t id, char out[33])
{
    nf_id128_hex(id, out);
}

nf_cluster_t *nf_cluster_new(nf_store_t *st, const nf_cluster_opts_t *o)
{
    if (o->hashes == 0 || o->bands == 0 || o->rows == 0 || o->bands * o->rows != o->hashes ||
        o->bucket_cap == 0 || o->bucket_cap > 4096 || !(o->threshold > 0 && o->threshold <= 1))
        return NULL;
    nf_cluster_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->o = *o;
    c->st = st;
    nf_kstate_opts_t ko = {.ttl_ms = o->ttl_ms, .budget_bytes = o->budget_bytes};
    ko.kind = NF_KIND_CLUSTER_SIG;
    c->sig = nf_kstate_new(st, &ko);
    ko.kind = NF_KIND_CLUSTER_BUCKET;
    c->bucket = nf_kstate_new(st, &ko);
    ko.kind = NF_KIND_CLUSTER_PARENT;
    c->parent = nf_kstate_new(st, &ko);
    size_t ncand = (size_t)o->bands * o->bucket_cap;
    size_t vlen = 4 + (size_t)(o->bucket_cap + 1) * 16;
    if (vlen < 8 + (size_t)o->hashes * 4)
        vlen = 8 + (size_t)o->hashes * 4;
    c->keys = malloc(o->bands * sizeof *c->keys);
    c->ovf = malloc(o->bands * sizeof *c->ovf);
    c->cand = malloc(ncand * sizeof *c->cand);
    c->uniq = malloc(ncand * sizeof *c->uniq);
    c->roots = malloc(ncand * sizeof *c->roots);
    c->val = malloc(vlen);
    c->fkg = malloc(ncand * sizeof *c->fkg);
    c->fkey = malloc(ncand * sizeof *c->fkey);
    c->path_cap = 16;
    c->path = malloc(c->path_cap * sizeof *c->path);
    if (!c->sig || !c->bucket || !c->parent || !c->keys || !c->ovf || !c->cand || !c->uniq ||
        !c->roots || !c->val || !c->fkg || !c->fkey || !c->path) {
        nf_cluster_free(c);
        return NULL;
    }
    return c;
}

void nf_cluster_free(nf_cluster_t *c)
{
    if (!c)
        return;
    if (c->sig)
        nf_kstate_free(c->sig);
    if (c->bucket)
        nf_kstate_free(c->bucket);
    if (c->parent)
        nf_kstate_free(c->parent);
    free(c->keys);
    free(c->ovf);
    free(c->cand);
    free(c->uniq);
    free(c->roots);
    free(c->val);
    free(c->fkg);
    free(c->fkey);
    free(c->path);
    free(c);
}

const char *nf_cluster_error(const nf_cluster_t *c)
{
    return c->err;
}

static int read_failed(nf_cluster_t *c, nf_kstate_t *ks, int err, const char *what)
{
    if (err == -EIO)
        snprintf(c->err, sizeof c->err, "cluster: reading %s: %s", what, nf_kstate_error(ks));
    else
        snprintf(c->err, sizeof c->err, "cluster: reading %s: out of memory", what);
    return err;
}

static int put_failed(nf_cluster_t *c, const char *what)
{
    snprintf(c->err, sizeof c->err, "cluster: writing %s: out of memory", what);
    return -ENOMEM;
}

/* The engine clock: the largest ingested_ms seen, kept in the parent kstate so a restarted
 * engine reads entries against the same time as an uninterrupted one. */
/* The store's TTL filter drops the index's values by the engine clock, not the wall clock
 * (nf_state_kind_owner_clock): with the wall clock it dropped entries the engine still counted
 * live whenever ingest times lagged it (a replay, a backfill). */
static void set_store_clock(nf_cluster_t *c, uint64_t clock)
{
    if (!c->st || clock == 0 || c->o.ttl_ms == 0)
        return;
    nf_store_set_clock(c->st, NF_KIND_CLUSTER_SIG, clock);
    nf_store_set_clock(c->st, NF_KIND_CLUSTER_BUCKET, clock);
    nf_store_set_clock(c->st, NF_KIND_CLUSTER_PARENT, clock);
}

static int advance_clock(nf_cluster_t *c, int64_t ingested_ms)
{
    if (!c->clock_known) {
        uint32_t len;
        int err;
        /* now_ms 0: the clock entry itself never reads as expired here. */
        const unsigned char *v =
            nf_kstate_get(c->parent, META_KG, (nf_id128_t){0, 0}, 0, &len, &err);
        if (err)
            return read_failed(c, c->parent, err, "the engine clock");
        if (v && len == 8)
            c->clock = nf_get_le64(v);
        c->clock_known = true;
        set_store_clock(c, c->clock); /* the committed clock: what the store holds */
    }
    uint64_t t = ingested_ms > 0 ? (uint64_t)ingested_ms : 0;
    if (t > c->clock) {
        c->clock = t;
        unsigned char b[8];
        nf_put_le64(b, t);
        if (nf_kstate_put(c->parent, META_KG, (nf_id128_t){0, 0}, b, 8, c->clock) != 0)
            return put_failed(c, "the engine clock");
    }
    return 0;
}

static int put_parent(nf_cluster_t *c, nf_id128_t id, nf_id128_t parent, int64_t ms)
{
    unsigned char b[PARENT_LEN];
    put_id(b, parent);
    nf_put_le64(b + 16, (uint64_t)ms);
    if (nf_kstate_put(c->parent, article_kg(c, id), id, b, PARENT_LEN, c->clock) != 0)
        return put_failed(c, "a union-find parent");
    return 0;
}

/* Union-find root of x: 1 (root and its earliest ms in *r), 0 (x has no live parent record),
 * or a negative errno. Compresses the path: every node walked ends up pointing at the root. */
static int find_root(nf_cluster_t *c, nf_id128_t x, root_t *r)
{
    size_t n = 0;
    nf_id128_t cur = x;
    for (;;) {
        uint32_t len;
        int err;
        const unsigned char *v =
            nf_kstate_get(c->parent, article_kg(c, cur), cur, c->clock, &len, &err);
        if (err)
            return read_failed(c, c->parent, err, "a union-find parent");
        if (!v || len != PARENT_LEN) {
            if (n == 0)
                return 0;
            /* cur's record expired before its child's (cannot happen with the engine's
             * monotone clock; see cluster.h): the last live node stands in as the root. */
            break;
        }
        if (n == c->path_cap) {
            node_t *p = realloc(c->path, 2 * c->path_cap * sizeof *p);
            if (!p)
                return put_failed(c, "the find path");
            c->path = p;
            c->path_cap *= 2;
        }
        node_t *nd = &c->path[n++];
        nd->id = cur;
        nd->parent = get_id(v);
        nd->ms = (int64_t)nf_get_le64(v + 16);
        if (id_eq(nd->parent, cur))
            break;
        assert(n < (1u << 24)); /* a cycle would be a bug: parents only point to earlier roots */
        cur = nd->parent;
    }
    const node_t *top = &c->path[n - 1];
    r->id = top->id;
    r->ms = top->ms;
    if (!id_eq(top->parent, top->id)) {
        int e = put_parent(c, top->id, top->id, top->ms);
        if (e)
            return e;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        if (!id_eq(c->path[i].parent, r->id)) {
            int e = put_parent(c, c->path[i].id, r->id, c->path[i].ms);
            if (e)
                return e;
        }
    }
    return 1;
}

int nf_cluster_find(nf_cluster_t *c, nf_id128_t article, nf_id128_t *cluster_id)
{
    c->err[0] = '\0';
    int e = advance_clock(c, 0);
    if (e)
        return e;
    root_t r;
    int f = find_root(c, article, &r);
    if (f == 1)
        *cluster_id = r.id;
    return f;
}

static int cmp_uniq(const void *a, const void *b)
{
    return id_cmp(((const uniq_t *)a)->id, ((const uniq_t *)b)->id);
}

static int cmp_root(const void *a, const void *b)
{
    const root_t *x = a, *y = b;
    if (root_before(x->ms, x->id, y->ms, y->id))
        return -1;
    return root_before(y->ms, y->id, x->ms, x->id) ? 1 : 0;
}

static uniq_t *uniq_find(nf_cluster_t *c, size_t nu, nf_id128_t id)
{
    uniq_t key = {.id = id};
    return bsearch(&key, c->uniq, nu, sizeof *c->uniq, cmp_uniq);
}

static unsigned equal_slots(const uint32_t *sig, const unsigned char *stored, unsigned n)
{
    unsigned eq = 0;
    for (unsigned i = 0; i < n; i++)
        eq += sig[i] == nf_get_le32(stored + 4 * (size_t)i);
    return eq;
}

/* Reads the article's buckets into c->cand (in band order) and c->ovf; returns the count. */
static int read_buckets(nf_cluster_t *c, size_t *ncand)
{
    /* The cold ones in one batched read: most of a new article's band keys are in no bucket,
     * so on a store most of these gets would each be a point read. */
    for (unsigned b = 0; b < c->o.bands; b++) {
        c->fkey[b] = (nf_id128_t){c->keys[b], b};
        c->fkg[b] = article_kg(c, c->fkey[b]);
    }
    int fe = nf_kstate_fetch(c->bucket, c->o.bands, c->fkg, c->fkey);
    if (fe)
        return read_failed(c, c->bucket, fe, "LSH buckets");
    size_t n = 0;
    for (unsigned b = 0; b < c->o.bands; b++) {
        nf_id128_t key = {c->keys[b], b};
        uint32_t len;
        int err;
        const unsigned char *v =
            nf_kstate_get(c->bucket, article_kg(c, key), key, c->clock, &len, &err);
        if (err)
            return read_failed(c, c->bucket, err, "an LSH bucket");
        c->ovf[b] = 0;
        if (!v || len < 4)
            continue;
        c->ovf[b] = nf_get_le32(v);
        size_t m = (len - 4) / 16;
        if (m > c->o.bucket_cap)
            m = c->o.bucket_cap; /* a bucket written under a larger cap: keep what fits */
        for (size_t i = 0; i < m; i++)
            c->cand[n++] = (cand_t){get_id(v + 4 + 16 * i), b};
    }
    *ncand = n;
    return 0;
}

/* Rewrites every band's bucket: live ids in their order, then the article if absent. */
static int write_buckets(nf_cluster_t *c, size_t ncand, size_t nu, nf_id128_t article)
{
    size_t i = 0;
    for (unsigned b = 0; b < c->o.bands; b++) {
        size_t m = 0;
        bool has_self = false;
        uint32_t ovf = c->ovf[b];
        for (; i < ncand && c->cand[i].band == b; i++) {
            const uniq_t *u = uniq_find(c, nu, c->cand[i].id);
            assert(u);
            if (!u->alive && !u->self)
                continue;
            has_self |= u->self;
            put_id(c->val + 4 + 16 * m, c->cand[i].id);
            m++;
        }
        if (!has_self) {
            if (m < c->o.bucket_cap) {
                put_id(c->val + 4 + 16 * m, article);
                m++;
            } else {
                ovf++;
                c->overflow++;
            }
        }
        nf_put_le32(c->val, ovf);
        nf_id128_t key = {c->keys[b], b};
        if (nf_kstate_put(c->bucket, article_kg(c, key), key, c->val, (uint32_t)(4 + 16 * m),
                          c->clock) != 0)
            return put_failed(c, "an LSH bucket");
    }
    return 0;
}

int nf_cluster_add(nf_cluster_t *c, nf_id128_t article, int64_t ingested_ms, const uint32_t *sig,
                   nf_cluster_result_t *out)
{
    memset(out, 0, sizeof *out);
    c->err[0] = '\0';
    int e = advance_clock(c, ingested_ms);
    if (e)
        return e;
    c->adds++;

    /* Already indexed: report, change nothing. */
    root_t r;
    int f = find_root(c, article, &r);
    if (f < 0)
        return f;
    if (f == 1) {
        out->action = NF_CLUSTER_DUPLICATE;
        out->cluster_id = r.id;
        out->similarity = 1.0;
        c->duplicates++;
        return 0;
    }

    const unsigned n = c->o.hashes;
    size_t nu = 0, nroots = 0;
    double best = 0.0;
    if (nf_minhash_is_empty(sig, n)) {
        c->empty++;
    } else {
        for (unsigned b = 0; b < c->o.bands; b++)
            c->keys[b] = nf_minhash_band_key(sig, b, c->o.rows);
        size_t ncand;
        if ((e = read_buckets(c, &ncand)) != 0)
            return e;
        for (size_t i = 0; i < ncand; i++)
            c->uniq[i] = (uniq_t){.id = c->cand[i].id};
        qsort(c->uniq, ncand, sizeof *c->uniq, cmp_uniq);
        for (size_t i = 0; i < ncand; i++)
            if (nu == 0 || !id_eq(c->uniq[nu - 1].id, c->uniq[i].id))
                c->uniq[nu++] = c->uniq[i];
        /* Verify each distinct candidate against its stored signature. */
        unsigned need = 0; /* equal slots for threshold: the smallest eq with eq/n >= thr */
        while (need < n && (double)need / n < c->o.threshold)
            need++;
        if (nu > 1) {
            for (size_t i = 0; i < nu; i++) {
                c->fkey[i] = c->uniq[i].id;
                c->fkg[i] = article_kg(c, c->uniq[i].id);
            }
            if ((e = nf_kstate_fetch(c->sig, nu, c->fkg, c->fkey)) != 0)
                return read_failed(c, c->sig, e, "signatures");
        }
        for (size_t i = 0; i < nu; i++) {
            uniq_t *u = &c->uniq[i];
            if (id_eq(u->id, article)) {
                u->self = true; /* left by an add that failed half-way */
                continue;
            }
            uint32_t len;
            int err;
            const unsigned char *v =
                nf_kstate_get(c->sig, article_kg(c, u->id), u->id, c->clock, &len, &err);
            if (err)
                return read_failed(c, c->sig, err, "a signature");
            if (!v || len != 8 + 4 * n)
                continue; /* expired: pruned from the bucket below */
            u->alive = true;
            u->ms = (int64_t)nf_get_le64(v);
            unsigned eq = equal_slots(sig, v + 8, n);
            u->sim = (double)eq / n;
            out->candidates++;
            if (eq >= need) {
                u->verified = true;
                c->verified++;
                if (u->sim > best)
                    best = u->sim;
            }
        }
        c->candidates += out->candidates;
        for (size_t i = 0; i < nu; i++) {
            const uniq_t *u = &c->uniq[i];
            if (!u->verified)
                continue;
            root_t cr;
            f = find_root(c, u->id, &cr);
            if (f < 0)
                return f;
            if (f == 0) /* signature without parent: only after a failed add; it is a root */
                cr = (root_t){u->id, u->ms};
            bool seen = false;
            for (size_t k = 0; k < nroots && !seen; k++)
                seen = id_eq(c->roots[k].id, cr.id);
            if (!seen)
                c->roots[nroots++] = cr;
        }
        if ((e = write_buckets(c, ncand, nu, article)) != 0)
            return e;
        /* The signature, so later articles can verify against this one. */
        nf_put_le64(c->val, (uint64_t)ingested_ms);
        for (unsigned i = 0; i < n; i++)
            nf_put_le32(c->val + 8 + 4 * (size_t)i, sig[i]);
        if (nf_kstate_put(c->sig, article_kg(c, article), article, c->val, 8 + 4 * n, c->clock) !=
            0)
            return put_failed(c, "a signature");
    }

    /* Union by earliest article: the new root is the earliest of the matched roots and the
     * article itself; every other root (a disappearing cluster id) is linked under it. */
    root_t self = {article, ingested_ms};
    qsort(c->roots, nroots, sizeof *c->roots, cmp_root);
    root_t top = self;
    if (nroots > 0 && root_before(c->roots[0].ms, c->roots[0].id, self.ms, self.id))
        top = c->roots[0];
    for (size_t k = 0; k < nroots; k++) {
        if (id_eq(c->roots[k].id, top.id))
            continue;
        if ((e = put_parent(c, c->roots[k].id, top.id, c->roots[k].ms)) != 0)
            return e;
        if (out->merged_count < NF_CLUSTER_MERGED_MAX)
            out->merged_from[out->merged_count++] = c->roots[k].id;
        else
            out->merged_more++;
    }
    /* The article last: its parent record is what marks it indexed (see DUPLICATE). The root is
     * re-put so it outlives every member (cluster.h). */
    if ((e = put_parent(c, article, top.id, ingested_ms)) != 0)
        return e;
    if (!id_eq(top.id, article) && (e = put_parent(c, top.id, top.id, top.ms)) != 0)
        return e;

    out->cluster_id = top.id;
    out->similarity = best;
    if (nroots == 0) {
        out->action = NF_CLUSTER_NEW;
        c->news++;
    } else if (out->merged_count == 0) {
        out->action = NF_CLUSTER_JOINED;
        c->joins++;
    } else {
        out->action = NF_CLUSTER_MERGED;
        c->merges++;
    }
    return 0;
}

size_t nf_cluster_snapshot(nf_cluster_t *c, nf_store_batch_t *b, uint64_t epoch)
{
    if (c->nsnaps == SNAP_CLOCKS) { /* more epochs in flight than ever happens: keep the newest */
        memmove(&c->snaps[0], &c->snaps[1], (SNAP_CLOCKS - 1) * sizeof c->snaps[0]);
        c->nsnaps--;
    }
    c->snaps[c->nsnaps++] = (snap_clock_t){epoch, c->clock};
    return nf_kstate_snapshot(c->sig, b, epoch) + nf_kstate_snapshot(c->bucket, b, epoch) +
           nf_kstate_snapshot(c->parent, b, epoch);
}

void nf_cluster_committed(nf_cluster_t *c, uint64_t epoch)
{
    unsigned keep = 0;
    for (unsigned i = 0; i < c->nsnaps; i++) {
        if (c->snaps[i].epoch <= epoch)
            set_store_clock(c, c->snaps[i].clock);
        else
            c->snaps[keep++] = c->snaps[i];
    }
    c->nsnaps = keep;
    nf_kstate_committed(c->sig, epoch);
    nf_kstate_committed(c->bucket, epoch);
    nf_kstate_committed(c->parent, epoch);
}

size_t nf_cluster_expire(nf_cluster_t *c, uint64_t now_ms, size_t max)
{
    if (now_ms > c->clock) /* the engine's reads go by its clock: what it still sees stays */
        now_ms = c->clock;
    return nf_kstate_expire(c->sig, now_ms, max) + nf_kstate_expire(c->bucket, now_ms, max) +
           nf_kstate_expire(c->parent, now_ms, max);
}

void nf_cluster_stats(const nf_cluster_t *c, nf_cluster_stats_t *out)
{
    memset(out, 0, sizeof *out);
    nf_kstate_stats(c->sig, &out->sig);
    nf_kstate_stats(c->bucket, &out->bucket);
    nf_kstate_stats(c->parent, &out->parent);
    out->entries = out->sig.entries + out->bucket.entries + out->parent.entries;
    out->bytes = out->sig.bytes + out->bucket.bytes + out->parent.bytes;
    out->used = out->sig.used + out->bucket.used + out->parent.used;
    out->adds = c->adds;
    out->news = c->news;
    out->joins = c->joins;
    out->merges = c->merges;
    out->duplicates = c->duplicates;
    out->empty = c->empty;
    out->candidates = c->candidates;
    out->verified = c->verified;
    out->bucket_overflow = c->overflow;
}

bool nf_cluster_over_budget(const nf_cluster_t *c)
{
    return nf_kstate_over_budget(c->sig) || nf_kstate_over_budget(c->bucket) ||
           nf_kstate_over_budget(c->parent);
}

/* ---- reads from a committed view ---- */

#define VIEW_EXPIRY_LEN 8 /* a stored value starts with its expiry (store.h) */
#define VIEW_FIND_MAX   64

uint64_t nf_cluster_view_clock(nf_store_view_t *v)
{
    unsigned char key[18];
    nf_kstate_encode_key(META_KG, (nf_id128_t){0, 0}, key);
    void *val = NULL;
    size_t len = 0;
    uint64_t clock = 0;
    if (nf_store_view_get(v, NF_KIND_CLUSTER_PARENT, key, sizeof key, &val, &len, NULL, 0) == 1 &&
        len == VIEW_EXPIRY_LEN + 8)
        clock = nf_get_le64((unsigned char *)val + VIEW_EXPIRY_LEN);
    free(val);
    return clock;
}

int nf_cluster_view_root(nf_store_view_t *v, int32_t key_group, uint64_t clock, nf_id128_t id,
                         nf_id128_t *root, char *err, size_t errlen)
{
    nf_id128_t cur = id;
    for (int i = 0; i < VIEW_FIND_MAX; i++) {
        unsigned char key[18];
        uint16_t kg = key_group >= 0 ? (uint16_t)key_group : (uint16_t)(cur.hi % 256);
        nf_kstate_encode_key(kg, cur, key);
        void *val = NULL;
        size_t len = 0;
        int r =
            nf_store_view_get(v, NF_KIND_CLUSTER_PARENT, key, sizeof key, &val, &len, err, errlen);
        if (r < 0)
            return r;
        const unsigned char *x = val;
        bool live = r == 1 && len == VIEW_EXPIRY_LEN + PARENT_LEN &&
                    !(nf_get_le64(x) != 0 && nf_get_le64(x) <= clock);
        nf_id128_t parent = live ? get_id(x + VIEW_EXPIRY_LEN) : cur;
        free(val);
        if (id_eq(parent, cur))
            break;
        cur = parent;
    }
    *root = cur;
    return 0;
}
