/* follows.c — see follows.h. */
#include "engine/follows.h"

#include "algo/bytes.h"
#include "io/events.h"
#include "state/kstate.h"

#include <errno.h>
#include <stdlib.h>

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

int nf_follows_decode(const void *val, size_t len, nf_follows_val_t *out)
{
    const unsigned char *p = val;
    if (len != NF_FOLLOWS_VALUE_LEN)
        return -EINVAL;
    out->follow = nf_get_le64(p);
    out->mute = nf_get_le64(p + 8);
    out->updated_ms = (int64_t)nf_get_le64(p + 16);
    return (out->follow & out->mute) ? -EINVAL : 0; /* the rule never makes both */
}

void nf_follows_encode(const nf_follows_val_t *v, unsigned char out[NF_FOLLOWS_VALUE_LEN])
{
    nf_put_le64(out, v->follow);
    nf_put_le64(out + 8, v->mute);
    nf_put_le64(out + 16, (uint64_t)v->updated_ms);
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

int nf_follows_apply(nf_follows_t *f, uint16_t kg, nf_id128_t user, int kind, unsigned topic,
                     int64_t ts_ms, nf_follows_val_t *out)
{
    uint32_t len = 0;
    int err = 0;
    const void *v = nf_kstate_get(f->ks, kg, user, 0, &len, &err);
    if (err)
        return err;
    *out = (nf_follows_val_t){0};
    if (v && nf_follows_decode(v, len, out) != 0)
        *out = (nf_follows_val_t){0}; /* not a value of this version: the events start again */
    bool changed = nf_follows_step(out, kind, topic, ts_ms);
    if (!out->follow && !out->mute)
        return nf_kstate_delete(f->ks, kg, user) ? -ENOMEM : changed;
    unsigned char enc[NF_FOLLOWS_VALUE_LEN];
    nf_follows_encode(out, enc);
    return nf_kstate_put(f->ks, kg, user, enc, sizeof enc, 0) ? -ENOMEM : changed;
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
