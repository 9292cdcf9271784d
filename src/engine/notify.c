/* notify.c — see notify.h. */
#include "engine/notify.h"

#include "algo/bytes.h"
#include "algo/hash.h"
#include "engine/interest.h"
#include "io/streams.h"
#include "state/kstate.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_SEED 0x6e6f74696679ull /* "notify" */

/* One of the shard's subscribers: its state key, key group and topics. */
typedef struct sub {
    nf_id128_t key;
    uint64_t topics;
    uint16_t kg;
} sub_t;

/* The shard's subscribers: idx maps a state key to its slot in subs; a slot whose topics went to
 * 0 stays (a later subscribe takes it again). */
struct nf_notify {
    nf_kstate_t *ks;
    nf_store_t *st;
    unsigned cap;
    nf_idset_t idx;
    sub_t *subs;
    size_t n, subs_cap, live;
};

int32_t nf_notify_day(int64_t ms)
{
    int64_t d = ms / NF_NOTIFY_DAY_MS;
    if (ms < 0 && d * NF_NOTIFY_DAY_MS != ms)
        d--;
    return (int32_t)d;
}

static int story_cmp(const void *a, const void *b)
{
    const nf_notify_story_t *x = a, *y = b;
    if (x->reads != y->reads)
        return x->reads > y->reads ? -1 : 1;
    return nf_id128_cmp(x->story, y->story);
}

void nf_notify_window_sort(nf_notify_window_t *w)
{
    qsort(w->s, w->n, sizeof w->s[0], story_cmp);
}

nf_notify_outcome_t nf_notify_step(nf_notify_val_t *v, nf_id128_t story, int32_t day, unsigned cap)
{
    for (unsigned i = 0; i < v->nstories; i++)
        if (!nf_id128_cmp(v->stories[i], story))
            return NF_NOTIFY_REPEAT;
    if (day > v->day) {
        v->day = day;
        v->count = 0;
    }
    if (v->count >= cap)
        return NF_NOTIFY_CAPPED;
    v->count++;
    v->stories[v->next] = story;
    v->next = (uint8_t)((v->next + 1) % NF_NOTIFY_REMEMBER);
    if (v->nstories < NF_NOTIFY_REMEMBER)
        v->nstories++;
    return NF_NOTIFY_SENT;
}

bool nf_notify_subscribe(nf_notify_val_t *v, bool sub, unsigned topic, int64_t ts_ms)
{
    uint64_t bit = topic < 64 ? 1ull << topic : 0, was = v->topics;
    v->topics = sub ? v->topics | bit : v->topics & ~bit;
    if (ts_ms > v->updated_ms)
        v->updated_ms = ts_ms;
    return v->topics != was;
}

int nf_notify_decode(const void *val, size_t len, nf_notify_val_t *out)
{
    const unsigned char *p = val;
    if (len < NF_NOTIFY_HEADER || nf_get_le32(p) != NF_NOTIFY_MAGIC)
        return -EINVAL;
    out->topics = nf_get_le64(p + 4);
    out->updated_ms = (int64_t)nf_get_le64(p + 12);
    out->day = (int32_t)nf_get_le32(p + 20);
    out->count = nf_get_le16(p + 24);
    out->nstories = p[26];
    out->next = p[27];
    out->user_len = nf_get_le16(p + 28);
    if (out->nstories > NF_NOTIFY_REMEMBER || out->next >= NF_NOTIFY_REMEMBER ||
        out->user_len > NF_NOTIFY_USER_MAX ||
        len != NF_NOTIFY_HEADER + out->user_len + 16u * out->nstories)
        return -EINVAL;
    memcpy(out->user, p + NF_NOTIFY_HEADER, out->user_len);
    out->user[out->user_len] = 0;
    p += NF_NOTIFY_HEADER + out->user_len;
    for (unsigned i = 0; i < out->nstories; i++, p += 16)
        out->stories[i] = (nf_id128_t){nf_get_le64(p), nf_get_le64(p + 8)};
    return 0;
}

size_t nf_notify_encode(const nf_notify_val_t *v, unsigned char out[NF_NOTIFY_VALUE_MAX])
{
    nf_put_le32(out, NF_NOTIFY_MAGIC);
    nf_put_le64(out + 4, v->topics);
    nf_put_le64(out + 12, (uint64_t)v->updated_ms);
    nf_put_le32(out + 20, (uint32_t)v->day);
    nf_put_le16(out + 24, v->count);
    out[26] = v->nstories;
    out[27] = v->next;
    nf_put_le16(out + 28, v->user_len);
    memcpy(out + NF_NOTIFY_HEADER, v->user, v->user_len);
    unsigned char *p = out + NF_NOTIFY_HEADER + v->user_len;
    for (unsigned i = 0; i < v->nstories; i++, p += 16) {
        nf_put_le64(p, v->stories[i].hi);
        nf_put_le64(p + 8, v->stories[i].lo);
    }
    return (size_t)(p - out);
}

nf_id128_t nf_notify_key(nf_id128_t user)
{
    unsigned char b[16];
    nf_put_le64(b, user.hi);
    nf_put_le64(b + 8, user.lo);
    return (nf_id128_t){0xFFFF000000000000ull | (nf_hash64(b, 16, KEY_SEED) >> 16),
                        nf_hash64(b, 16, KEY_SEED + 1)};
}

nf_notify_t *nf_notify_new(nf_store_t *st, size_t budget_bytes, unsigned cap)
{
    nf_notify_t *n = calloc(1, sizeof *n);
    nf_kstate_opts_t o = {
        .kind = NF_KIND_READS, .budget_bytes = budget_bytes, .initial_capacity = 1 << 10};
    if (!n)
        return NULL;
    n->st = st;
    n->cap = cap < 1 ? 1 : cap > NF_NOTIFY_CAP_MAX ? NF_NOTIFY_CAP_MAX : cap;
    if (nf_idset_init(&n->idx, 1024) != 0 || !(n->ks = nf_kstate_new(st, &o))) {
        nf_notify_free(n);
        return NULL;
    }
    return n;
}

void nf_notify_free(nf_notify_t *n)
{
    if (!n)
        return;
    nf_kstate_free(n->ks);
    nf_idset_free(&n->idx);
    free(n->subs);
    free(n);
}

/* The subscriber key's topics in the index (inserted if new). 0 or -ENOMEM. */
static int index_set(nf_notify_t *n, uint16_t kg, nf_id128_t key, uint64_t topics)
{
    uint64_t slot;
    if (!nf_idset_get(&n->idx, key, &slot)) {
        if (!topics)
            return 0;
        if (n->n == n->subs_cap) {
            size_t cap = n->subs_cap ? n->subs_cap * 2 : 256;
            sub_t *v = realloc(n->subs, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            n->subs = v;
            n->subs_cap = cap;
        }
        slot = n->n;
        if (nf_idset_insert(&n->idx, key, slot, NULL) < 0)
            return -ENOMEM;
        n->subs[n->n++] = (sub_t){.key = key};
    }
    sub_t *e = &n->subs[slot];
    n->live += (topics != 0) - (e->topics != 0);
    e->kg = kg;
    e->topics = topics;
    return 0;
}

/* The reader's value: 1 (present), 0 (absent: v zeroed), or < 0. */
static int value_get(nf_notify_t *n, uint16_t kg, nf_id128_t key, nf_notify_val_t *v)
{
    uint32_t len = 0;
    int err = 0;
    const void *p = nf_kstate_get(n->ks, kg, key, 0, &len, &err);
    if (!err && p && nf_notify_decode(p, len, v) == 0)
        return 1;
    memset(v, 0, sizeof *v);
    return err;
}

static int value_put(nf_notify_t *n, uint16_t kg, nf_id128_t key, const nf_notify_val_t *v)
{
    if (!v->topics)
        return nf_kstate_delete(n->ks, kg, key) ? -ENOMEM : 0;
    unsigned char enc[NF_NOTIFY_VALUE_MAX];
    size_t len = nf_notify_encode(v, enc);
    return nf_kstate_put(n->ks, kg, key, enc, (uint32_t)len, 0) ? -ENOMEM : 0;
}

int nf_notify_apply(nf_notify_t *n, uint16_t kg, nf_id128_t user, const char *user_id, size_t ulen,
                    bool sub, unsigned topic, int64_t ts_ms)
{
    if (ulen > NF_NOTIFY_USER_MAX)
        return -EINVAL;
    nf_id128_t key = nf_notify_key(user);
    nf_notify_val_t v;
    int r = value_get(n, kg, key, &v);
    if (r < 0)
        return r;
    memcpy(v.user, user_id, ulen); /* the id as the latest event spells it */
    v.user[ulen] = 0;
    v.user_len = (uint16_t)ulen;
    bool changed = nf_notify_subscribe(&v, sub, topic, ts_ms);
    if ((r = value_put(n, kg, key, &v)) != 0 || (r = index_set(n, kg, key, v.topics)) != 0)
        return r;
    return changed;
}

/* The topics of the window's stories. */
static uint64_t window_topics(const nf_notify_window_t *w)
{
    uint64_t m = 0;
    for (size_t i = 0; i < w->n; i++)
        m |= w->s[i].topic < 64 ? 1ull << w->s[i].topic : 0;
    return m;
}

/* One subscriber through the window. 0, fn's non-zero or < 0. */
static int reader_window(nf_notify_t *n, const sub_t *e, const nf_notify_window_t *w, int32_t day,
                         nf_notify_fn fn, void *arg, uint64_t counts[NF_NOTIFY__OUTCOMES])
{
    nf_notify_val_t v;
    int r = value_get(n, e->kg, e->key, &v);
    if (r <= 0) /* absent: the index outlived a delete (cannot happen) — nothing to send */
        return r;
    bool dirty = false;
    for (size_t i = 0; i < w->n; i++) {
        const nf_notify_story_t *s = &w->s[i];
        if (s->topic >= 64 || !(v.topics & (1ull << s->topic)))
            continue;
        nf_notify_outcome_t o = nf_notify_step(&v, s->story, day, n->cap);
        counts[o]++;
        if (o != NF_NOTIFY_SENT)
            continue;
        dirty = true;
        if ((r = fn(arg, v.user, v.user_len, s, w->end_ms)) != 0)
            return r;
    }
    return dirty ? value_put(n, e->kg, e->key, &v) : 0;
}

struct nf_notify_run {
    nf_notify_window_t *w; /* a copy */
    uint64_t topics;       /* of its stories */
    int32_t day;
    size_t *slots; /* the subscribers of its topics when it came (slots never move) */
    size_t n, at;
};

nf_notify_run_t *nf_notify_run_new(nf_notify_t *n, const nf_notify_window_t *w)
{
    nf_notify_run_t *r = calloc(1, sizeof *r);
    size_t wsize = sizeof *w + w->n * sizeof w->s[0];
    if (!r || !(r->w = malloc(wsize)))
        goto fail;
    memcpy(r->w, w, wsize);
    r->topics = window_topics(w);
    r->day = nf_notify_day(w->end_ms);
    size_t cap = 0;
    for (size_t i = 0; i < n->n; i++) {
        if (!(n->subs[i].topics & r->topics))
            continue;
        if (r->n == cap) {
            size_t c = cap ? cap * 2 : 64;
            size_t *v = realloc(r->slots, c * sizeof *v);
            if (!v)
                goto fail;
            r->slots = v;
            cap = c;
        }
        r->slots[r->n++] = i;
    }
    return r;
fail:
    nf_notify_run_free(r);
    return NULL;
}

int nf_notify_run_step(nf_notify_t *n, nf_notify_run_t *r, size_t max, nf_notify_fn fn, void *arg,
                       uint64_t counts[NF_NOTIFY__OUTCOMES])
{
    for (size_t done = 0; r->at < r->n && done < max; done++) {
        const sub_t *e = &n->subs[r->slots[r->at++]];
        if (!(e->topics & r->topics))
            continue; /* unsubscribed since, or its key group left this process */
        int rc = reader_window(n, e, r->w, r->day, fn, arg, counts);
        if (rc != 0)
            return rc < 0 ? rc : -ECANCELED; /* fn's positive answer is no "more left" */
    }
    return r->at < r->n;
}

size_t nf_notify_run_left(const nf_notify_run_t *r)
{
    return r->n - r->at;
}

void nf_notify_run_free(nf_notify_run_t *r)
{
    if (!r)
        return;
    free(r->w);
    free(r->slots);
    free(r);
}

int nf_notify_window(nf_notify_t *n, const nf_notify_window_t *w, nf_notify_fn fn, void *arg,
                     uint64_t counts[NF_NOTIFY__OUTCOMES])
{
    nf_notify_run_t *r = nf_notify_run_new(n, w);
    if (!r)
        return -ENOMEM;
    int rc = nf_notify_run_step(n, r, SIZE_MAX, fn, arg, counts);
    nf_notify_run_free(r);
    return rc;
}

typedef struct load_ctx {
    nf_notify_t *n;
    bool (*owns)(uint16_t kg, nf_id128_t user, void *ctx);
    void *ctx;
    long found;
    int rc;
} load_ctx_t;

static int load_one(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    load_ctx_t *c = arg;
    const unsigned char *k = key;
    nf_notify_val_t v;
    if (klen != 18 || vlen < 8 || nf_notify_decode((const char *)val + 8, vlen - 8, &v) != 0 ||
        !v.topics)
        return 0; /* a history entry, a reader's follows, or a user key that starts 0xFFFF */
    uint16_t kg = (uint16_t)(k[0] << 8 | k[1]);
    nf_id128_t skey = {nf_get_be64(k + 2), nf_get_be64(k + 10)};
    nf_id128_t user = nf_interest_user_key(v.user);
    if (nf_id128_cmp(skey, nf_notify_key(user)) != 0 || !c->owns(kg, user, c->ctx))
        return 0;
    if ((c->rc = index_set(c->n, kg, skey, v.topics)) != 0)
        return 1;
    c->found++;
    return 0;
}

long nf_notify_load(nf_notify_t *n, const uint16_t *kgs, size_t nkgs,
                    bool (*owns)(uint16_t kg, nf_id128_t user, void *ctx), void *ctx, char *err,
                    size_t errlen)
{
    if (!n->st)
        return 0;
    load_ctx_t c = {n, owns, ctx, 0, 0};
    size_t count = kgs ? nkgs : NF_EPOCH_MAX_PARTITIONS;
    for (size_t i = 0; i < count; i++) {
        uint16_t kg = kgs ? kgs[i] : (uint16_t)i;
        unsigned char prefix[4] = {(unsigned char)(kg >> 8), (unsigned char)kg, 0xFF, 0xFF};
        int r = nf_store_scan_prefix(n->st, NF_KIND_READS, prefix, sizeof prefix, load_one, &c);
        if (c.rc)
            return c.rc;
        if (r < 0) {
            snprintf(err, errlen, "reading the subscriptions of key group %u failed", kg);
            return -EIO;
        }
    }
    return c.found;
}

size_t nf_notify_snapshot(nf_notify_t *n, nf_store_batch_t *b, uint64_t epoch)
{
    return nf_kstate_snapshot(n->ks, b, epoch);
}

void nf_notify_committed(nf_notify_t *n, uint64_t epoch)
{
    nf_kstate_committed(n->ks, epoch);
}

size_t nf_notify_drop_groups(nf_notify_t *n, bool (*match)(uint16_t kg, void *ctx), void *ctx,
                             size_t *kept)
{
    for (size_t i = 0; i < n->n; i++)
        if (n->subs[i].topics && match(n->subs[i].kg, ctx)) {
            n->subs[i].topics = 0;
            n->live--;
        }
    return nf_kstate_drop_groups(n->ks, match, ctx, kept);
}

bool nf_notify_over_budget(const nf_notify_t *n)
{
    return nf_kstate_over_budget(n->ks);
}

size_t nf_notify_subscribers(const nf_notify_t *n)
{
    return n->live;
}

const char *nf_notify_error(const nf_notify_t *n)
{
    return nf_kstate_error(n->ks);
}
