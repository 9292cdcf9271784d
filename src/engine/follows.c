/* follows.c — see follows.h. */
#include "engine/follows.h"

#include "algo/bytes.h"
#include "io/events.h"
#include "state/kstate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct nf_follows {
    nf_kstate_t *ks;
};

bool nf_follows_step(nf_follows_val_t *v, int kind, unsigned topic, int64_t ts_ms)
{
    uint64_t bit = topic < 64 ? 1ull << topic : 0, f = v->follow, m = v->mute;
    switch (kind) {
    case NF_READ_KIND_FOLLOW:
        v->follow |= bit;
        v->mute &= ~bit;
        break;
    case NF_READ_KIND_UNFOLLOW:
        v->follow &= ~bit;
        break;
    case NF_READ_KIND_MUTE:
        v->mute |= bit;
        v->follow &= ~bit;
        break;
    case NF_READ_KIND_UNMUTE:
        v->mute &= ~bit;
        break;
    default:
        break;
    }
    if (ts_ms > v->updated_ms)
        v->updated_ms = ts_ms;
    return v->follow != f || v->mute != m;
}

/* The index of src in v's muted sources, or -1. */
static int source_at(const nf_follows_val_t *v, const char *src, size_t len)
{
    for (unsigned i = 0; i < v->nsrc; i++)
        if (v->src_len[i] == len && memcmp(v->src[i], src, len) == 0)
            return (int)i;
    return -1;
}

static void source_remove(nf_follows_val_t *v, unsigned at)
{
    for (unsigned i = at; i + 1 < v->nsrc; i++) {
        v->src_len[i] = v->src_len[i + 1];
        memcpy(v->src[i], v->src[i + 1], sizeof v->src[i]);
    }
    v->nsrc--;
}

bool nf_follows_step_source(nf_follows_val_t *v, int kind, const char *src, size_t len,
                            int64_t ts_ms, bool *evicted)
{
    *evicted = false;
    if (ts_ms > v->updated_ms)
        v->updated_ms = ts_ms;
    if (!len || len > NF_FOLLOWS_SOURCE_MAX)
        return false;
    int at = source_at(v, src, len);
    if (kind == NF_READ_KIND_UNMUTE_SOURCE) {
        if (at >= 0)
            source_remove(v, (unsigned)at);
        return at >= 0;
    }
    if (kind != NF_READ_KIND_MUTE_SOURCE)
        return false;
    if (at >= 0) {
        source_remove(v, (unsigned)at); /* made the newest, below */
    } else if (v->nsrc == NF_FOLLOWS_SOURCES_MAX) {
        source_remove(v, 0);
        *evicted = true;
    }
    v->src_len[v->nsrc] = (uint8_t)len;
    memcpy(v->src[v->nsrc], src, len);
    v->src[v->nsrc++][len] = '\0';
    return at < 0;
}

bool nf_follows_empty(const nf_follows_val_t *v)
{
    return !v->follow && !v->mute && !v->nsrc;
}

int nf_follows_decode(const void *val, size_t len, nf_follows_val_t *out)
{
    const unsigned char *p = val;
    if (len < NF_FOLLOWS_VALUE_LEN || len == NF_FOLLOWS_VALUE_LEN + 1)
        return -EINVAL;
    out->follow = nf_get_le64(p);
    out->mute = nf_get_le64(p + 8);
    out->updated_ms = (int64_t)nf_get_le64(p + 16);
    out->nsrc = 0;
    if (out->follow & out->mute)
        return -EINVAL; /* the rule never makes both */
    if (len == NF_FOLLOWS_VALUE_LEN)
        return 0;
    size_t at = NF_FOLLOWS_VALUE_LEN + 1;
    unsigned n = p[NF_FOLLOWS_VALUE_LEN];
    if (!n || n > NF_FOLLOWS_SOURCES_MAX)
        return -EINVAL; /* a value without sources is the short one */
    for (unsigned i = 0; i < n; i++) {
        if (at >= len || !p[at] || p[at] > NF_FOLLOWS_SOURCE_MAX || len - at - 1 < p[at] ||
            source_at(out, (const char *)p + at + 1, p[at]) >= 0)
            return -EINVAL;
        out->src_len[i] = p[at];
        memcpy(out->src[i], p + at + 1, p[at]);
        out->src[i][p[at]] = '\0';
        out->nsrc = i + 1;
        at += 1 + (size_t)p[at];
    }
    return at == len ? 0 : -EINVAL;
}

size_t nf_follows_encode(const nf_follows_val_t *v, unsigned char out[NF_FOLLOWS_VALUE_MAX])
{
    nf_put_le64(out, v->follow);
    nf_put_le64(out + 8, v->mute);
    nf_put_le64(out + 16, (uint64_t)v->updated_ms);
    if (!v->nsrc)
        return NF_FOLLOWS_VALUE_LEN;
    size_t at = NF_FOLLOWS_VALUE_LEN;
    out[at++] = (unsigned char)v->nsrc;
    for (unsigned i = 0; i < v->nsrc; i++) {
        out[at++] = v->src_len[i];
        memcpy(out + at, v->src[i], v->src_len[i]);
        at += v->src_len[i];
    }
    return at;
}

nf_follows_t *nf_follows_new(nf_store_t *st, size_t budget_bytes)
{
    nf_follows_t *f = calloc(1, sizeof *f);
    nf_kstate_opts_t o = {
        .kind = NF_KIND_READS, .budget_bytes = budget_bytes, .initial_capacity = 1 << 10};
    if (f && !(f->ks = nf_kstate_new(st, &o))) {
        free(f);
        return NULL;
    }
    return f;
}

void nf_follows_free(nf_follows_t *f)
{
    if (!f)
        return;
    nf_kstate_free(f->ks);
    free(f);
}

/* The reader's settings into *out (none, or a damaged value: empty). 0 or the kstate's error. */
static int value_get(nf_follows_t *f, uint16_t kg, nf_id128_t user, nf_follows_val_t *out)
{
    uint32_t len = 0;
    int err = 0;
    const void *v = nf_kstate_get(f->ks, kg, user, 0, &len, &err);
    if (err)
        return err;
    if (!v || nf_follows_decode(v, len, out) != 0) {
        out->follow = out->mute = 0;
        out->updated_ms = 0;
        out->nsrc = 0;
    }
    return 0;
}

/* *v back into the state (deleted when it holds nothing): changed, or -ENOMEM. */
static int value_put(nf_follows_t *f, uint16_t kg, nf_id128_t user, const nf_follows_val_t *v,
                     bool changed)
{
    if (nf_follows_empty(v))
        return nf_kstate_delete(f->ks, kg, user) ? -ENOMEM : changed;
    unsigned char enc[NF_FOLLOWS_VALUE_MAX];
    size_t n = nf_follows_encode(v, enc);
    return nf_kstate_put(f->ks, kg, user, enc, (uint32_t)n, 0) ? -ENOMEM : changed;
}

int nf_follows_apply(nf_follows_t *f, uint16_t kg, nf_id128_t user, int kind, unsigned topic,
                     int64_t ts_ms, nf_follows_val_t *out)
{
    int err = value_get(f, kg, user, out);
    if (err)
        return err;
    bool changed = nf_follows_step(out, kind, topic, ts_ms);
    return value_put(f, kg, user, out, changed);
}

int nf_follows_apply_source(nf_follows_t *f, uint16_t kg, nf_id128_t user, int kind,
                            const char *src, size_t len, int64_t ts_ms, nf_follows_val_t *out,
                            bool *evicted)
{
    *evicted = false;
    if (!len || len > NF_FOLLOWS_SOURCE_MAX)
        return -EINVAL;
    int err = value_get(f, kg, user, out);
    if (err)
        return err;
    bool changed = nf_follows_step_source(out, kind, src, len, ts_ms, evicted);
    return value_put(f, kg, user, out, changed);
}

size_t nf_follows_snapshot(nf_follows_t *f, nf_store_batch_t *b, uint64_t epoch)
{
    return nf_kstate_snapshot(f->ks, b, epoch);
}

void nf_follows_committed(nf_follows_t *f, uint64_t epoch)
{
    nf_kstate_committed(f->ks, epoch);
}

size_t nf_follows_drop_groups(nf_follows_t *f, bool (*match)(uint16_t kg, void *ctx), void *ctx,
                              size_t *kept)
{
    return nf_kstate_drop_groups(f->ks, match, ctx, kept);
}

bool nf_follows_over_budget(const nf_follows_t *f)
{
    return nf_kstate_over_budget(f->ks);
}

size_t nf_follows_entries(const nf_follows_t *f)
{
    nf_kstate_stats_t s;
    nf_kstate_stats(f->ks, &s);
    return s.entries;
}

const char *nf_follows_error(const nf_follows_t *f)
{
    return nf_kstate_error(f->ks);
}
