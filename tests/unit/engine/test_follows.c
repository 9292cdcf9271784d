/* Tests src/engine/follows.c against a reference model: random follow / unfollow / mute /
 * unmute events of 60 readers over 64 topics, and mute_source / unmute_source events over 48
 * sources (a few readers mute past NF_FOLLOWS_SOURCES_MAX), in four key groups, each applied to
 * the engine and to a model written here from the rule in follows.h (two sets and a list, oldest
 * first, per reader). After every event
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

enum { READERS = 60, TOPICS = 64, EVENTS = 6000, SOURCES = 48 };

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

typedef struct model {
    bool follow[TOPICS], mute[TOPICS];
    unsigned src[NF_FOLLOWS_SOURCES_MAX], nsrc; /* muted sources' numbers, oldest first */
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

static void source_name(unsigned n, char out[16])
{
    snprintf(out, 16, "wire-%02u", n);
}

/* The rule for sources, as a list: a mute appends (moving a muted one to the end, dropping the
 * oldest when full), an unmute removes. Whether the set changed; *evicted. */
static bool model_source(model_t *m, int kind, unsigned n, int64_t ts, bool *evicted)
{
    *evicted = false;
    if (ts > m->updated)
        m->updated = ts;
    unsigned at = 0;
    while (at < m->nsrc && m->src[at] != n)
        at++;
    bool had = at < m->nsrc;
    if (had) {
        memmove(&m->src[at], &m->src[at + 1], (m->nsrc - at - 1) * sizeof m->src[0]);
        m->nsrc--;
    }
    if (kind == NF_READ_KIND_UNMUTE_SOURCE)
        return had;
    if (m->nsrc == NF_FOLLOWS_SOURCES_MAX) {
        memmove(&m->src[0], &m->src[1], (m->nsrc - 1) * sizeof m->src[0]);
        m->nsrc--;
        *evicted = true;
    }
    m->src[m->nsrc++] = n;
    return !had;
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
    if (m->nsrc != v->nsrc)
        return false;
    for (unsigned i = 0; i < m->nsrc; i++) {
        char name[16];
        source_name(m->src[i], name);
        if (strcmp(name, v->src[i]) != 0 || v->src_len[i] != strlen(name))
            return false;
    }
    return !with_time || m->updated == v->updated_ms;
}

static bool empty(const model_t *m)
{
    for (unsigned t = 0; t < TOPICS; t++)
        if (m->follow[t] || m->mute[t])
            return false;
    return m->nsrc == 0;
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
        rc = len >= 8 + NF_FOLLOWS_VALUE_LEN &&
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
    int wrong = 0, changed = 0, evictions = 0;
    for (int i = 0; i < EVENTS; i++) {
        unsigned r = (unsigned)(rnd() % READERS), t = (unsigned)(rnd() % 6); /* few topics: */
        if (rnd() % 4 == 0)                                                  /* they repeat */
            t = (unsigned)(rnd() % TOPICS);
        int64_t ts = 1767225600000ll + (int64_t)(rnd() % 100000);
        model_t before = model[r];
        nf_follows_val_t v;
        int rc;
        bool src_changed = false;
        /* readers 0..5 mostly mute sources (past the limit), the others now and then */
        if (rnd() % (r < 6 ? 10 : 4) < (r < 6 ? 9u : 1u)) {
            int kind = rnd() % 3 ? NF_READ_KIND_MUTE_SOURCE : NF_READ_KIND_UNMUTE_SOURCE;
            unsigned n = (unsigned)(rnd() % SOURCES);
            char name[16];
            source_name(n, name);
            bool ev = false, model_ev;
            src_changed = model_source(&model[r], kind, n, ts, &model_ev);
            rc = nf_follows_apply_source(f, kg_of(r), user(r), kind, name, strlen(name), ts, &v,
                                         &ev);
            wrong += ev != model_ev;
            evictions += ev;
        } else {
            int kind = NF_READ_KIND_FOLLOW + (int)(rnd() % 4);
            model_step(&model[r], kind, t, ts);
            rc = nf_follows_apply(f, kg_of(r), user(r), kind, t, ts, &v);
        }
        wrong += rc < 0 || !same(&model[r], &v, !empty(&model[r]));
        changed += rc == 1;
        model_forget_empty(&model[r]);
        wrong += (rc == 1) !=
                 (src_changed || memcmp(before.follow, model[r].follow, sizeof before.follow) ||
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
    NF_CHECK(evictions > 0);                            /* the limit was reached */
    nf_follows_free(f);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* The codec refuses what the rule never writes, and a value without sources is the 24 bytes a
 * build of state format 1 wrote. */
static void test_follows_codec(void)
{
    nf_follows_val_t v = {.follow = 5, .mute = 2, .updated_ms = 77}, w;
    unsigned char b[NF_FOLLOWS_VALUE_MAX];
    NF_CHECK_EQ(nf_follows_encode(&v, b), NF_FOLLOWS_VALUE_LEN);
    NF_CHECK_EQ(nf_follows_decode(b, NF_FOLLOWS_VALUE_LEN, &w), 0);
    NF_CHECK(w.follow == 5 && w.mute == 2 && w.updated_ms == 77 && w.nsrc == 0);
    NF_CHECK(nf_follows_decode(b, NF_FOLLOWS_VALUE_LEN - 1, &w) != 0);
    bool ev;
    nf_follows_step_source(&v, NF_READ_KIND_MUTE_SOURCE, "wire-a", 6, 78, &ev);
    nf_follows_step_source(&v, NF_READ_KIND_MUTE_SOURCE, "b", 1, 79, &ev);
    size_t n = nf_follows_encode(&v, b);
    NF_CHECK_EQ(n, NF_FOLLOWS_VALUE_LEN + 1 + 7 + 2);
    NF_CHECK_EQ(nf_follows_decode(b, n, &w), 0);
    NF_CHECK(w.nsrc == 2 && !strcmp(w.src[0], "wire-a") && !strcmp(w.src[1], "b") &&
             w.updated_ms == 79);
    for (size_t cut = NF_FOLLOWS_VALUE_LEN + 1; cut < n; cut++)
        NF_CHECK(nf_follows_decode(b, cut, &w) != 0); /* every truncation */
    b[NF_FOLLOWS_VALUE_LEN + 1 + 7] = 0;              /* a source of no bytes */
    NF_CHECK(nf_follows_decode(b, n, &w) != 0);
    memcpy(b + NF_FOLLOWS_VALUE_LEN + 1 + 7, "\x06wire-a", 7); /* the same source twice */
    NF_CHECK(nf_follows_decode(b, NF_FOLLOWS_VALUE_LEN + 1 + 14, &w) != 0);
    b[NF_FOLLOWS_VALUE_LEN] = 0; /* "no sources" in the long form */
    NF_CHECK(nf_follows_decode(b, NF_FOLLOWS_VALUE_LEN + 1, &w) != 0);
    v.nsrc = 0;
    v.mute = 4; /* topic 2 both followed and muted */
    nf_follows_encode(&v, b);
    NF_CHECK(nf_follows_decode(b, NF_FOLLOWS_VALUE_LEN, &w) != 0);
    NF_CHECK(!nf_follows_step_source(&v, NF_READ_KIND_MUTE_SOURCE, "", 0, 80, &ev));
}

int main(void)
{
    NF_RUN(test_follows_model);
    NF_RUN(test_follows_codec);
    return nf_test_report();
}
