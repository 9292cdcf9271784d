/* Tests src/engine/follows.c against a reference model: random follow / unfollow / mute /
 * unmute events of 60 readers over 64 topics in four key groups, each applied to the engine and
 * to a model written here from the rule in follows.h (two sets per reader). After every event
 * the engine's answer equals the model's; every 500 events the state goes through an epoch into
 * a real store, and every 1500 the engine is dropped and a new one reads the readers back from
 * the store (a restart): the answers go on equal, and every reader's stored value decodes to the
 * model's. A key group dropped after its epoch committed reads back from the store too. */
#include "engine/follows.h"
#include "engine/interest.h"
#include "io/events.h"
#include "nf_test.h"
#include "state/kstate.h"
#include "teststore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { READERS = 60, TOPICS = 64, EVENTS = 6000 };

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

typedef struct model {
    bool follow[TOPICS], mute[TOPICS];
    int64_t updated;
} model_t;

static model_t model[READERS];

static bool empty(const model_t *m);

/* The rule, stated as sets (follows.h). */
static void model_step(model_t *m, int kind, unsigned t, int64_t ts)
{
    if (kind == NF_READ_KIND_FOLLOW) {
        m->follow[t] = true;
        m->mute[t] = false;
    } else if (kind == NF_READ_KIND_UNFOLLOW) {
        m->follow[t] = false;
    } else if (kind == NF_READ_KIND_MUTE) {
        m->mute[t] = true;
        m->follow[t] = false;
    } else {
        m->mute[t] = false;
    }
    if (ts > m->updated)
        m->updated = ts;
}

/* A reader left with nothing followed or muted is forgotten: its time starts again. */
static void model_forget_empty(model_t *m)
{
    if (empty(m))
        m->updated = 0;
}

static bool same(const model_t *m, const nf_follows_val_t *v, bool with_time)
{
    for (unsigned t = 0; t < TOPICS; t++)
        if (m->follow[t] != ((v->follow >> t) & 1) || m->mute[t] != ((v->mute >> t) & 1))
            return false;
    return !with_time || m->updated == v->updated_ms;
}

static bool empty(const model_t *m)
{
    for (unsigned t = 0; t < TOPICS; t++)
        if (m->follow[t] || m->mute[t])
            return false;
    return true;
}

static nf_id128_t user(unsigned r)
{
    char id[32];
    snprintf(id, sizeof id, "reader-%u", r);
    return nf_interest_user_key(id);
}

static uint16_t kg_of(unsigned r)
{
    return (uint16_t)(r % 4);
}

/* The reader's value as the store holds it: 1 (into *v), 0 (none). */
static int stored(nf_store_t *st, unsigned r, nf_follows_val_t *v)
{
    unsigned char key[18];
    nf_kstate_encode_key(kg_of(r), user(r), key);
    void *val = NULL;
    size_t len = 0;
    char err[128];
    int rc = nf_store_get(st, NF_KIND_READS, key, sizeof key, &val, &len, err, sizeof err);
    if (rc == 1)
        rc = len == 8 + NF_FOLLOWS_VALUE_LEN &&
                     nf_follows_decode((unsigned char *)val + 8, len - 8, v) == 0
                 ? 1
                 : -1;
    free(val);
    return rc;
}

static bool group_two(uint16_t kg, void *ctx)
{
    (void)ctx;
    return kg == 2;
}

static void test_follows_model(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("follows", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_follows_t *f = nf_follows_new(st, 0);
    NF_REQUIRE(f);
    uint64_t epoch = 0;
    int wrong = 0, changed = 0;
    for (int i = 0; i < EVENTS; i++) {
        unsigned r = (unsigned)(rnd() % READERS), t = (unsigned)(rnd() % 6); /* few topics: */
        if (rnd() % 4 == 0)                                                  /* they repeat */
            t = (unsigned)(rnd() % TOPICS);
        int kind = NF_READ_KIND_FOLLOW + (int)(rnd() % 4);
        int64_t ts = 1767225600000ll + (int64_t)(rnd() % 100000);
        model_t before = model[r];
        model_step(&model[r], kind, t, ts);
        nf_follows_val_t v;
        int rc = nf_follows_apply(f, kg_of(r), user(r), kind, t, ts, &v);
        wrong += rc < 0 || !same(&model[r], &v, !empty(&model[r]));
        changed += rc == 1;
        model_forget_empty(&model[r]);
        wrong += (rc == 1) != (memcmp(before.follow, model[r].follow, sizeof before.follow) ||
                               memcmp(before.mute, model[r].mute, sizeof before.mute));
        if (i % 500 == 499) { /* an epoch */
            nf_store_batch_t *b = nf_store_batch_new();
            nf_follows_snapshot(f, b, ++epoch);
            NF_REQUIRE(nf_teststore_commit(st, epoch, b) == 0);
            nf_store_batch_free(b);
            nf_follows_committed(f, epoch);
            size_t kept = 9;
            nf_follows_drop_groups(f, group_two, NULL, &kept);
            NF_CHECK_EQ(kept, 0);
        }
        if (i % 1500 == 1499) { /* a restart: everything from the store */
            nf_follows_free(f);
            NF_REQUIRE((f = nf_follows_new(st, 0)) != NULL);
            for (unsigned u = 0; u < READERS; u++) {
                nf_follows_val_t sv;
                int s = stored(st, u, &sv);
                wrong += empty(&model[u]) ? s != 0 : (s != 1 || !same(&model[u], &sv, true));
            }
        }
    }
    NF_CHECK_EQ(wrong, 0);
    NF_CHECK(changed > EVENTS / 4 && changed < EVENTS); /* both kinds of answer were given */
    nf_follows_free(f);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* The codec refuses what the rule never writes. */
static void test_follows_codec(void)
{
    nf_follows_val_t v = {.follow = 5, .mute = 2, .updated_ms = 77}, w;
    unsigned char b[NF_FOLLOWS_VALUE_LEN];
    nf_follows_encode(&v, b);
    NF_CHECK_EQ(nf_follows_decode(b, sizeof b, &w), 0);
    NF_CHECK(w.follow == 5 && w.mute == 2 && w.updated_ms == 77);
    NF_CHECK(nf_follows_decode(b, sizeof b - 1, &w) != 0);
    v.mute = 4; /* topic 2 both followed and muted */
    nf_follows_encode(&v, b);
    NF_CHECK(nf_follows_decode(b, sizeof b, &w) != 0);
}

int main(void)
{
    NF_RUN(test_follows_model);
    NF_RUN(test_follows_codec);
    return nf_test_report();
}
