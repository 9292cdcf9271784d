/* Tests src/state/kstate.c.
 *
 * The core is a reference-model property test: thousands of random operations (get, put,
 * delete, snapshot, commit, uncommit, expire, clock steps; with a store also eviction under a
 * tiny budget and restarts) run against the kstate and against a trivial model (an array over a
 * small key universe holding each key's live value, the values of the snapshots in flight and
 * the committed values). Every get must return the model's value, whatever was evicted and
 * reloaded; a fresh kstate over a reopened store must see exactly the model's committed state.
 * It runs memory-only and store-backed (a temporary directory), with and without TTL.
 *
 * Around it: the key encoding, the stored value format, value sizes 0..1000, in-place
 * replacement, snapshot in O(dirty), committing entries never evicted, over_budget, TTL and
 * the incremental expire sweep, uncommitted epochs, and a corrupt stored value.
 *
 * Deterministic: one seeded xorshift PRNG (seed printed; NF_KSTATE_SEED overrides it). */
#include "nf_test.h"
#include "state/kstate.h"
#include "state/store.h"
#include "teststore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}
static uint64_t below(uint64_t n)
{
    return rnd() % n;
}

/* ------------------------------------------------------------------ temp dirs */

static char *make_tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/nf-test-kstate-XXXXXX");
    return mkdtemp(buf);
}

/* ------------------------------------------------------------------ values */

/* Value bytes are a function of (version, length), so the model stores only those. */
static void gen_value(uint64_t ver, uint32_t len, unsigned char *out)
{
    uint64_t x = ver * 0x9e3779b97f4a7c15ull + len;
    for (uint32_t i = 0; i < len; i++) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull;
        out[i] = (unsigned char)(x >> 56);
    }
}

static uint32_t random_len(void)
{
    uint64_t r = below(100);
    if (r < 5)
        return 0;
    if (r < 10)
        return 24 + (uint32_t)below(2); /* the inline / out-of-line edge */
    if (r < 50)
        return (uint32_t)below(24);
    if (r < 85)
        return 25 + (uint32_t)below(100);
    return (uint32_t)below(1001);
}

/* Clock readings for store-backed TTL tests lie in 2100: the store's compaction filter drops
 * values expired by the wall clock, and these must only ever expire by the test's clock. */
#define FUTURE 4102444800000ull

static nf_id128_t id_of(uint64_t hi, uint64_t lo)
{
    return (nf_id128_t){hi, lo};
}

/* ------------------------------------------------------------------ the model */

enum { U = 600, MAXFLIGHT = 3 };

typedef struct {
    bool present;
    uint32_t len;
    uint64_t ver, exp;
} mval_t;

typedef struct {
    uint64_t epoch;
    nf_store_batch_t *b;
    bool touched[U];
    mval_t vals[U];
} flight_t;

typedef struct {
    uint16_t kg[U];
    nf_id128_t id[U];
    mval_t live[U], committed[U];
    bool touched[U];
    flight_t flight[MAXFLIGHT];
    unsigned nflight;
    bool frozen; /* the newest flight is a freeze not written whole yet (nf_kstate_freeze) */
    size_t frozen_n;
    uint64_t ver, epoch, now, ttl;
} model_t;

static bool mval_visible(const mval_t *m, uint64_t now)
{
    return m->present && !(m->exp != 0 && m->exp <= now);
}

static void model_init(model_t *m, uint64_t ttl)
{
    memset(m, 0, sizeof *m);
    m->ttl = ttl;
    m->now = FUTURE;
    for (int u = 0; u < U; u++) {
        /* Small kgs and his: ids colliding in one word, equal ids in different key groups,
         * and the all-zero key. */
        m->kg[u] = (uint16_t)below(4);
        m->id[u] = u == 0 ? id_of(0, 0) : id_of(below(64), below(1000000));
        for (int v = 0; v < u; v++)
            if (m->kg[v] == m->kg[u] && m->id[v].hi == m->id[u].hi && m->id[v].lo == m->id[u].lo)
                m->id[u].lo += 1000000 + (uint64_t)u; /* keep keys distinct */
    }
}

static unsigned touched_count(const bool *t)
{
    unsigned n = 0;
    for (int u = 0; u < U; u++)
        n += t[u];
    return n;
}

/* One get against the model. */
static bool check_get(nf_kstate_t *ks, const model_t *m, const mval_t *want, int u)
{
    static unsigned char buf[1001];
    uint32_t len = 12345;
    int err = 1;
    /* A third of the gets go through a hint: the one the prefetch finds, or any record index
     * (a stale hint must only cost a probe). */
    uint64_t r = rnd() % 6;
    const unsigned char *p;
    if (r == 0)
        p = nf_kstate_get_hint(
            ks, m->kg[u], m->id[u],
            nf_kstate_prefetch_value(ks, m->kg[u], m->id[u],
                                     rnd() % 2 ? NF_KSTATE_NO_HINT : (uint32_t)rnd() % 64),
            m->now, &len, &err);
    else if (r == 1)
        p = nf_kstate_get_hint(ks, m->kg[u], m->id[u], (uint32_t)rnd() % 64, m->now, &len, &err);
    else
        p = nf_kstate_get(ks, m->kg[u], m->id[u], m->now, &len, &err);
    bool ok = err == 0;
    if (mval_visible(want, m->now)) {
        gen_value(want->ver, want->len, buf);
        ok = ok && p && len == want->len && memcmp(p, buf, len) == 0;
    } else {
        ok = ok && p == NULL && len == 0;
    }
    if (!ok)
        fprintf(stderr,
                "key %d (kg %u, %llx/%llx): got %s len %u err %d, want %s len %u ver %llu exp "
                "%llu now %llu\n",
                u, m->kg[u], (unsigned long long)m->id[u].hi, (unsigned long long)m->id[u].lo,
                p ? "value" : "absent", len, err, mval_visible(want, m->now) ? "value" : "absent",
                want->len, (unsigned long long)want->ver, (unsigned long long)want->exp,
                (unsigned long long)m->now);
    return ok;
}

typedef struct {
    bool store;
    uint64_t ttl;
    size_t budget;
    int steps;
} prop_cfg_t;

typedef struct {
    uint64_t gets, puts, deletes, snapshots, commits, uncommits, expired, restarts, evictions;
    uint64_t loads, over_budget, freezes, freeze_steps;
} prop_counts_t;

static nf_kstate_t *new_ks(nf_store_t *st, const prop_cfg_t *c)
{
    nf_kstate_opts_t o = {
        .kind = NF_KIND_READS, .ttl_ms = c->ttl, .budget_bytes = c->budget, .initial_capacity = 4};
    return nf_kstate_new(st, &o);
}

static void add_stats(prop_counts_t *pc, nf_kstate_t *ks)
{
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    pc->evictions += s.evictions;
    pc->loads += s.loads;
}

/* Writes the rest of the frozen snapshot (the newest flight) and checks its batch: every entry
 * handed over, but those that expired meanwhile. */
static void finish_freeze(nf_kstate_t *ks, model_t *m)
{
    if (!m->frozen)
        return;
    NF_CHECK_EQ(nf_kstate_freeze_step(ks, 0), 0);
    size_t got = nf_store_batch_count(m->flight[m->nflight - 1].b);
    NF_CHECK(got <= m->frozen_n);
    if (m->ttl == 0)
        NF_CHECK_EQ(got, m->frozen_n);
    m->frozen = false;
}

static void run_property(const prop_cfg_t *c, prop_counts_t *pc)
{
    static model_t m;
    static unsigned char buf[1001];
    model_init(&m, c->ttl);
    memset(pc, 0, sizeof *pc);
    char dir[64] = "";
    nf_store_t *st = NULL;
    if (c->store) {
        NF_REQUIRE(make_tmpdir(dir, sizeof dir));
        st = nf_teststore_open(dir);
        NF_REQUIRE(st);
    }
    nf_kstate_t *ks = new_ks(st, c);
    NF_REQUIRE(ks);
    const int fails0 = nf_test_failed_checks;

    for (int step = 0; step < c->steps && nf_test_failed_checks == fails0; step++) {
        uint64_t r = below(1000);
        int u = (int)below(U);
        if (r < 40) { /* a batch of keys fetched for the gets that follow (or not) */
            uint16_t kgs[80];
            nf_id128_t ids[80];
            size_t n = (size_t)below(80) + 1;
            for (size_t i = 0; i < n; i++) {
                int v = (int)below(U);
                kgs[i] = m.kg[v];
                ids[i] = m.id[v];
            }
            NF_CHECK_EQ(nf_kstate_fetch(ks, n, kgs, ids), 0);
        } else if (r < 400) { /* get */
            pc->gets++;
            NF_CHECK(check_get(ks, &m, &m.live[u], u));
        } else if (r < 700) { /* put */
            pc->puts++;
            uint32_t len = random_len();
            gen_value(++m.ver, len, buf);
            NF_CHECK_EQ(nf_kstate_put(ks, m.kg[u], m.id[u], buf, len, m.now), 0);
            m.live[u] = (mval_t){true, len, m.ver, m.ttl ? m.now + m.ttl : 0};
            m.touched[u] = true;
        } else if (r < 780) { /* delete */
            pc->deletes++;
            NF_CHECK_EQ(nf_kstate_delete(ks, m.kg[u], m.id[u]), 0);
            m.live[u] = (mval_t){0};
            m.touched[u] = true;
        } else if (r < 820) { /* snapshot, or freeze (written by the steps that follow) */
            if (m.nflight == MAXFLIGHT)
                continue;
            finish_freeze(ks, &m);
            pc->snapshots++;
            nf_kstate_stats_t s;
            nf_kstate_stats(ks, &s);
            flight_t *f = &m.flight[m.nflight++];
            f->epoch = ++m.epoch;
            f->b = nf_store_batch_new();
            bool freeze = below(2) == 0;
            size_t n = freeze ? nf_kstate_freeze(ks, f->b, f->epoch)
                              : nf_kstate_snapshot(ks, f->b, f->epoch);
            NF_CHECK_EQ(n, s.dirty);
            if (!freeze)
                NF_CHECK_EQ(nf_store_batch_count(f->b), n);
            unsigned want = touched_count(m.touched);
            NF_CHECK(n <= want);
            if (m.ttl == 0)
                NF_CHECK_EQ(n, want); /* nothing expired: exactly what changed */
            memcpy(f->touched, m.touched, sizeof m.touched);
            memcpy(f->vals, m.live, sizeof m.live);
            memset(m.touched, 0, sizeof m.touched);
            nf_kstate_stats(ks, &s);
            NF_CHECK_EQ(s.dirty, freeze ? n : 0);
            m.frozen = freeze && n > 0;
            m.frozen_n = n;
            pc->freezes += m.frozen;
        } else if (r < 850) { /* commit the oldest in-flight epoch */
            if (m.nflight == 0)
                continue;
            pc->commits++;
            flight_t *f = &m.flight[0];
            if (m.nflight == 1)
                finish_freeze(ks, &m); /* the coordinator's protocol: written, then applied */
            if (st)
                NF_CHECK_EQ(nf_teststore_commit(st, f->epoch, f->b), 0);
            nf_kstate_committed(ks, f->epoch);
            for (int v = 0; v < U; v++)
                if (f->touched[v])
                    m.committed[v] = f->vals[v];
            nf_store_batch_free(f->b);
            memmove(&m.flight[0], &m.flight[1], (m.nflight - 1) * sizeof m.flight[0]);
            m.nflight--;
        } else if (r < 855) { /* the newest epoch is never applied (test-only path) */
            if (m.nflight != 1)
                continue;
            pc->uncommits++;
            finish_freeze(ks, &m);
            flight_t *f = &m.flight[0];
            nf_kstate_uncommitted(ks, f->epoch);
            for (int v = 0; v < U; v++)
                m.touched[v] |= f->touched[v];
            nf_store_batch_free(f->b);
            m.nflight = 0;
        } else if (r < 900) { /* time passes */
            m.now += below(m.ttl ? m.ttl / 4 + 1 : 1000);
        } else if (r < 930) { /* expire sweep */
            size_t n = nf_kstate_expire(ks, m.now, (size_t)below(3) * 50);
            pc->expired += n;
            if (!m.ttl)
                NF_CHECK_EQ(n, 0);
        } else if (r < 960 && m.frozen) { /* some of the frozen entries written */
            pc->freeze_steps++;
            if (nf_kstate_freeze_step(ks, (size_t)below(40) + 1) == 0)
                finish_freeze(ks, &m);
        } else if (r < 990) { /* invariants */
            nf_kstate_stats_t s;
            nf_kstate_stats(ks, &s);
            NF_CHECK(s.dirty <=
                     touched_count(m.touched) +
                         (m.frozen ? touched_count(m.flight[m.nflight - 1].touched) : 0));
            NF_CHECK(s.entries <= U);
            if (nf_kstate_over_budget(ks)) {
                pc->over_budget++;
                /* Nothing clean is left (but the one a get just loaded, and fewer than a 64th
                 * of the records: not worth a sweep past the pinned ones). */
                if (st)
                    NF_CHECK(s.entries <= s.dirty + s.committing + 1 + s.records / 64);
            }
            if (!st)
                NF_CHECK_EQ(s.evictions, 0);
        } else if (r < 998) { /* full check */
            for (int v = 0; v < U; v++)
                NF_CHECK(check_get(ks, &m, &m.live[v], v));
        } else if (st && below(3) == 0) { /* restart: what is not committed is lost */
            pc->restarts++;
            add_stats(pc, ks);
            nf_kstate_free(ks);
            for (unsigned i = 0; i < m.nflight; i++)
                nf_store_batch_free(m.flight[i].b);
            m.nflight = 0;
            m.frozen = false;
            nf_store_close(st);
            st = nf_teststore_open(dir);
            NF_REQUIRE(st);
            ks = new_ks(st, c);
            NF_REQUIRE(ks);
            memcpy(m.live, m.committed, sizeof m.live);
            memset(m.touched, 0, sizeof m.touched);
            for (int v = 0; v < U; v++)
                NF_CHECK(check_get(ks, &m, &m.committed[v], v));
        }
    }
    if (nf_test_failed_checks == fails0 && st) {
        /* Commit everything, restart, and compare the whole committed state. */
        finish_freeze(ks, &m);
        while (m.nflight) {
            flight_t *f = &m.flight[0];
            NF_CHECK_EQ(nf_teststore_commit(st, f->epoch, f->b), 0);
            nf_kstate_committed(ks, f->epoch);
            for (int v = 0; v < U; v++)
                if (f->touched[v])
                    m.committed[v] = f->vals[v];
            nf_store_batch_free(f->b);
            memmove(&m.flight[0], &m.flight[1], (m.nflight - 1) * sizeof m.flight[0]);
            m.nflight--;
        }
        nf_store_batch_t *b = nf_store_batch_new();
        nf_kstate_snapshot(ks, b, ++m.epoch);
        NF_CHECK_EQ(nf_teststore_commit(st, m.epoch, b), 0);
        nf_kstate_committed(ks, m.epoch);
        nf_store_batch_free(b);
        add_stats(pc, ks);
        nf_kstate_free(ks);
        nf_store_close(st);
        st = nf_teststore_open(dir);
        NF_REQUIRE(st);
        ks = new_ks(st, c);
        NF_REQUIRE(ks);
        for (int v = 0; v < U; v++)
            NF_CHECK(check_get(ks, &m, &m.live[v], v));
    }
    for (unsigned i = 0; i < m.nflight; i++)
        nf_store_batch_free(m.flight[i].b);
    add_stats(pc, ks);
    nf_kstate_free(ks);
    if (st) {
        nf_store_close(st);
        nf_teststore_rmtree(dir);
    }
}

static void report(const char *name, const prop_counts_t *pc)
{
    fprintf(stderr,
            "     %s: %llu gets %llu puts %llu deletes %llu snapshots %llu commits %llu "
            "uncommits %llu expired %llu evictions %llu loads %llu restarts %llu over-budget "
            "%llu freezes %llu freeze steps\n",
            name, (unsigned long long)pc->gets, (unsigned long long)pc->puts,
            (unsigned long long)pc->deletes, (unsigned long long)pc->snapshots,
            (unsigned long long)pc->commits, (unsigned long long)pc->uncommits,
            (unsigned long long)pc->expired, (unsigned long long)pc->evictions,
            (unsigned long long)pc->loads, (unsigned long long)pc->restarts,
            (unsigned long long)pc->over_budget, (unsigned long long)pc->freezes,
            (unsigned long long)pc->freeze_steps);
    NF_CHECK(pc->freezes > 0 && pc->freeze_steps > 0); /* the snapshot by reference was tried */
}

static void test_model_memory(void)
{
    prop_counts_t pc;
    run_property(&(prop_cfg_t){.store = false, .steps = 60000}, &pc);
    report("memory", &pc);
    NF_CHECK(pc.snapshots > 100 && pc.commits > 100 && pc.uncommits > 5);
}

static void test_model_memory_ttl(void)
{
    prop_counts_t pc;
    run_property(&(prop_cfg_t){.store = false, .ttl = 5000, .steps = 60000}, &pc);
    report("memory+ttl", &pc);
    NF_CHECK(pc.expired > 0);
}

static void test_model_store_tiny_budget(void)
{
    prop_counts_t pc;
    run_property(&(prop_cfg_t){.store = true, .budget = 12 * 1024, .steps = 30000}, &pc);
    report("store, 12 KB budget", &pc);
    NF_CHECK(pc.evictions > 1000 && pc.loads > 1000 && pc.restarts > 0);
}

static void test_model_store_ttl(void)
{
    prop_counts_t pc;
    run_property(&(prop_cfg_t){.store = true, .ttl = 5000, .budget = 16 * 1024, .steps = 30000},
                 &pc);
    report("store+ttl, 16 KB budget", &pc);
    NF_CHECK(pc.evictions > 0 && pc.expired > 0);
}

static void test_model_store_unlimited(void)
{
    prop_counts_t pc;
    run_property(&(prop_cfg_t){.store = true, .steps = 20000}, &pc);
    report("store, no budget", &pc);
    NF_CHECK_EQ(pc.evictions, 0);
}

/* ------------------------------------------------------------------ focused tests */

static void test_encode_key(void)
{
    unsigned char k[18];
    nf_kstate_encode_key(0x0102, id_of(0x1112131415161718ull, 0x2122232425262728ull), k);
    const unsigned char want[18] = {0x01, 0x02, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
                                    0x18, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28};
    NF_CHECK(memcmp(k, want, 18) == 0);
}

static void test_value_sizes_memory(void)
{
    nf_kstate_opts_t o = {.kind = NF_KIND_ARTICLE_KEY};
    nf_kstate_t *ks = nf_kstate_new(NULL, &o);
    NF_REQUIRE(ks);
    static unsigned char buf[1001];
    /* Each length on its own key, then every key rewritten with another length (inline <->
     * out-of-line transitions in both directions). */
    for (uint32_t len = 0; len <= 1000; len++) {
        gen_value(len, len, buf);
        NF_CHECK_EQ(nf_kstate_put(ks, 1, id_of(7, len), buf, len, 0), 0);
    }
    for (uint32_t len = 0; len <= 1000; len++) {
        uint32_t got = 99;
        const unsigned char *p = nf_kstate_get(ks, 1, id_of(7, len), 0, &got, NULL);
        gen_value(len, len, buf);
        NF_CHECK(p != NULL);
        NF_CHECK_EQ(got, len);
        NF_CHECK(p && memcmp(p, buf, len) == 0);
    }
    for (uint32_t len = 0; len <= 1000; len++) {
        uint32_t nl = 1000 - len;
        gen_value(len + 5000, nl, buf);
        NF_CHECK_EQ(nf_kstate_put(ks, 1, id_of(7, len), buf, nl, 0), 0);
    }
    for (uint32_t len = 0; len <= 1000; len++) {
        uint32_t got = 0, nl = 1000 - len;
        const unsigned char *p = nf_kstate_get(ks, 1, id_of(7, len), 0, &got, NULL);
        gen_value(len + 5000, nl, buf);
        NF_CHECK(p && got == nl && memcmp(p, buf, nl) == 0);
    }
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.entries, 1001);
    NF_CHECK_EQ(s.dirty, 1001);
    /* Values over 24 bytes are out of line and counted: ~ sum of 25..1000. */
    NF_CHECK(s.bytes > 1001 * 64 + 490000);
    nf_kstate_free(ks);
}

/* Replacing a value with one of the same size reuses its memory (no allocation: the block,
 * the pointer and the byte count stay), and putting back what get returned works. */
static void test_replace_in_place(void)
{
    nf_kstate_opts_t o = {.kind = NF_KIND_READS};
    nf_kstate_t *ks = nf_kstate_new(NULL, &o);
    NF_REQUIRE(ks);
    unsigned char a[300], b[300];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), a, 300, 0), 0);
    uint32_t len;
    const void *p1 = nf_kstate_get(ks, 0, id_of(1, 1), 0, &len, NULL);
    nf_kstate_stats_t s1, s2;
    nf_kstate_stats(ks, &s1);
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), b, 300, 0), 0);
    const void *p2 = nf_kstate_get(ks, 0, id_of(1, 1), 0, &len, NULL);
    nf_kstate_stats(ks, &s2);
    NF_CHECK(p1 == p2);
    NF_CHECK_EQ(s1.bytes, s2.bytes);
    NF_CHECK(p2 && memcmp(p2, b, 300) == 0);
    /* A slightly smaller value fits the same block too. */
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), a, 290, 0), 0);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(1, 1), 0, &len, NULL) == p1 && len == 290);
    /* Self-puts: out of line -> out of line, out of line -> inline (prefix), inline -> inline. */
    const void *p = nf_kstate_get(ks, 0, id_of(1, 1), 0, &len, NULL);
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), p, 280, 0), 0);
    p = nf_kstate_get(ks, 0, id_of(1, 1), 0, &len, NULL);
    NF_CHECK(p && len == 280 && memcmp(p, a, 280) == 0);
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), p, 10, 0), 0);
    p = nf_kstate_get(ks, 0, id_of(1, 1), 0, &len, NULL);
    NF_CHECK(p && len == 10 && memcmp(p, a, 10) == 0);
    NF_REQUIRE(p);
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), (const char *)p + 2, 8, 0), 0);
    p = nf_kstate_get(ks, 0, id_of(1, 1), 0, &len, NULL);
    NF_CHECK(p && len == 8 && memcmp(p, a, 8) == 0);
    /* An empty value is present (non-NULL), a deleted one absent. */
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(2, 2), NULL, 0, 0), 0);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(2, 2), 0, &len, NULL) != NULL && len == 0);
    NF_CHECK_EQ(nf_kstate_delete(ks, 0, id_of(2, 2)), 0);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(2, 2), 0, &len, NULL) == NULL);
    nf_kstate_free(ks);
}

/* nf_kstate_snapshot writes the dirty entries and nothing else. */
static void test_snapshot_is_o_dirty(void)
{
    char dir[64];
    NF_REQUIRE(make_tmpdir(dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_kstate_opts_t o = {.kind = NF_KIND_ARTICLE_KEY};
    nf_kstate_t *ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    uint64_t v = 1;
    for (uint64_t i = 0; i < 20000; i++)
        NF_CHECK_EQ(nf_kstate_put(ks, (uint16_t)(i % 8), id_of(i, ~i), &v, sizeof v, 0), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 1), 20000);
    NF_CHECK_EQ(nf_store_batch_count(b), 20000);
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_kstate_committed(ks, 1);
    nf_store_batch_clear(b);
    /* 10 changes among 20000 entries: 10 written. */
    for (uint64_t i = 0; i < 10; i++) {
        v = 2;
        NF_CHECK_EQ(
            nf_kstate_put(ks, (uint16_t)(i * 977 % 8), id_of(i * 977, ~(i * 977)), &v, sizeof v, 0),
            0);
    }
    NF_CHECK_EQ(nf_kstate_delete(ks, 3, id_of(3, ~3ull)), 0);
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.dirty, 11);
    NF_CHECK_EQ(s.entries, 20000);
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 2), 11);
    NF_CHECK_EQ(nf_store_batch_count(b), 11);
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.dirty, 0);
    NF_CHECK_EQ(s.committing, 11);
    /* Nothing dirty: nothing written. */
    nf_store_batch_t *b3 = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b3, 3), 0);
    NF_CHECK_EQ(nf_store_batch_count(b3), 0);
    NF_CHECK_EQ(nf_teststore_commit(st, 2, b), 0);
    nf_kstate_committed(ks, 3);
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.committing, 0);
    NF_CHECK_EQ(s.entries, 19999); /* the tombstone vanished */
    nf_store_batch_free(b);
    nf_store_batch_free(b3);
    nf_kstate_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* The store holds [expires_at LE][value]; deletes remove the key. */
static void test_store_format(void)
{
    char dir[64];
    NF_REQUIRE(make_tmpdir(dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_kstate_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000};
    nf_kstate_t *ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    NF_CHECK_EQ(nf_kstate_put(ks, 0x0203, id_of(5, 6), "hello", 5, FUTURE + 0x1122334455ull), 0);
    NF_CHECK_EQ(nf_kstate_put(ks, 1, id_of(7, 8), "gone", 4, 0), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 1), 2);
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_kstate_committed(ks, 1);
    nf_store_batch_clear(b);
    NF_CHECK_EQ(nf_kstate_delete(ks, 1, id_of(7, 8)), 0);
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 2), 1);
    NF_CHECK_EQ(nf_teststore_commit(st, 2, b), 0);
    nf_kstate_committed(ks, 2);

    unsigned char k[18];
    nf_kstate_encode_key(0x0203, id_of(5, 6), k);
    void *val = NULL;
    size_t len = 0;
    char err[256];
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_EVENT_IDS, k, sizeof k, &val, &len, err, sizeof err), 1);
    const uint64_t exp = FUTURE + 0x1122334455ull + 1000;
    unsigned char want[13];
    for (int i = 0; i < 8; i++)
        want[i] = (unsigned char)(exp >> (8 * i));
    memcpy(want + 8, "hello", 5);
    NF_CHECK_EQ(len, 13);
    NF_CHECK(val && len == 13 && memcmp(val, want, 13) == 0);
    free(val);
    nf_kstate_encode_key(1, id_of(7, 8), k);
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_EVENT_IDS, k, sizeof k, &val, &len, err, sizeof err), 0);
    nf_store_batch_free(b);
    nf_kstate_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* Committing entries stay in memory under any eviction pressure: the store has their older
 * value, so a reload would go back in time. */
static void test_committing_never_evicted(void)
{
    char dir[64];
    NF_REQUIRE(make_tmpdir(dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    enum { N = 200, COLD = 3000 };
    /* The store: every key has value "old". */
    {
        nf_kstate_opts_t o = {.kind = NF_KIND_READS};
        nf_kstate_t *ks = nf_kstate_new(st, &o);
        NF_REQUIRE(ks);
        for (uint64_t i = 0; i < N + COLD; i++)
            NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(i, i), "old", 3, 0), 0);
        nf_store_batch_t *b = nf_store_batch_new();
        NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 1), N + COLD);
        NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
        nf_store_batch_free(b);
        nf_kstate_free(ks);
    }
    nf_kstate_opts_t o = {.kind = NF_KIND_READS, .budget_bytes = 32 * 1024};
    nf_kstate_t *ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    for (uint64_t i = 0; i < N; i++)
        NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(i, i), "new", 3, 0), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 2), N);
    /* Epoch 2 is in flight (not in the store). Pressure: load every cold key, twice. */
    for (int round = 0; round < 2; round++)
        for (uint64_t i = N; i < N + COLD; i++) {
            uint32_t len;
            const void *p = nf_kstate_get(ks, 0, id_of(i, i), 0, &len, NULL);
            NF_CHECK(p && len == 3 && memcmp(p, "old", 3) == 0);
        }
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK(s.evictions > COLD);
    NF_CHECK_EQ(s.committing, N);
    uint64_t loads = s.loads;
    for (uint64_t i = 0; i < N; i++) {
        uint32_t len;
        const void *p = nf_kstate_get(ks, 0, id_of(i, i), 0, &len, NULL);
        NF_CHECK(p && len == 3 && memcmp(p, "new", 3) == 0);
    }
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.loads, loads); /* all hits */
    /* Once committed they are evictable, and reloads give the new value. */
    NF_CHECK_EQ(nf_teststore_commit(st, 2, b), 0);
    nf_kstate_committed(ks, 2);
    for (uint64_t i = N; i < N + COLD; i++) {
        uint32_t len;
        NF_CHECK(nf_kstate_get(ks, 0, id_of(i, i), 0, &len, NULL) != NULL);
    }
    nf_kstate_stats(ks, &s);
    loads = s.loads;
    for (uint64_t i = 0; i < N; i++) {
        uint32_t len;
        const void *p = nf_kstate_get(ks, 0, id_of(i, i), 0, &len, NULL);
        NF_CHECK(p && len == 3 && memcmp(p, "new", 3) == 0);
    }
    nf_kstate_stats(ks, &s);
    NF_CHECK(s.loads > loads + N / 2); /* they had been evicted */
    nf_store_batch_free(b);
    nf_kstate_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* Dirty state over the budget: over_budget() turns true and nothing is lost; a checkpoint makes
 * the entries clean, eviction brings memory back under the budget. Memory only: never evicts. */
static void test_over_budget(void)
{
    char dir[64];
    NF_REQUIRE(make_tmpdir(dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    const size_t budget = 64 * 1024;
    nf_kstate_opts_t o = {.kind = NF_KIND_READS, .budget_bytes = budget};
    nf_kstate_t *ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    unsigned char val[100];
    memset(val, 7, sizeof val);
    uint64_t n = 0;
    while (!nf_kstate_over_budget(ks) && n < 100000) {
        NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(n, 0), val, sizeof val, 0), 0);
        n++;
    }
    NF_CHECK(nf_kstate_over_budget(ks));
    NF_CHECK(n > 100 && n < 1000);
    /* Still more puts succeed (memory beyond the budget) and every value stays. */
    for (uint64_t i = n; i < n + 100; i++)
        NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(i, 0), val, sizeof val, 0), 0);
    n += 100;
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.entries, n);
    NF_CHECK_EQ(s.evictions, 0);
    NF_CHECK(s.bytes > budget);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 1), n);
    NF_CHECK(nf_kstate_over_budget(ks)); /* committing is not evictable either */
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_kstate_committed(ks, 1);
    NF_CHECK(!nf_kstate_over_budget(ks));
    nf_kstate_stats(ks, &s);
    NF_CHECK(s.evictions > 0);
    NF_CHECK(s.entries < n);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t len;
        const unsigned char *p = nf_kstate_get(ks, 0, id_of(i, 0), 0, &len, NULL);
        NF_CHECK(p && len == sizeof val && p[99] == 7);
        NF_CHECK(!nf_kstate_over_budget(ks));
    }
    nf_store_batch_free(b);
    nf_kstate_free(ks);

    /* Steady state with clean entries: allocated memory stays near the budget. */
    ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    for (int round = 0; round < 3; round++)
        for (uint64_t i = 0; i < n; i++) {
            uint32_t len;
            NF_CHECK(nf_kstate_get(ks, 0, id_of(i, 0), 0, &len, NULL) != NULL);
        }
    nf_kstate_stats(ks, &s);
    NF_CHECK(!nf_kstate_over_budget(ks));
    NF_CHECK(s.bytes <= budget + budget / 4);
    NF_CHECK(s.entries > 100);
    nf_kstate_free(ks);

    /* Memory only: over budget, nothing evicted. */
    ks = nf_kstate_new(NULL, &o);
    NF_REQUIRE(ks);
    for (uint64_t i = 0; i < 2000; i++)
        NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(i, 0), val, sizeof val, 0), 0);
    b = nf_store_batch_new();
    nf_kstate_snapshot(ks, b, 1);
    nf_kstate_committed(ks, 1);
    NF_CHECK(nf_kstate_over_budget(ks));
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.evictions, 0);
    NF_CHECK_EQ(s.entries, 2000);
    nf_store_batch_free(b);
    nf_kstate_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

static void test_ttl(void)
{
    nf_kstate_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000};
    nf_kstate_t *ks = nf_kstate_new(NULL, &o);
    NF_REQUIRE(ks);
    uint32_t len;
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), "x", 1, 5000), 0);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(1, 1), 5999, &len, NULL) != NULL);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(1, 1), 6000, &len, NULL) == NULL);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(1, 1), 5999, &len, NULL) == NULL); /* dropped */
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.entries, 0);
    NF_CHECK_EQ(s.dirty, 0);
    NF_CHECK_EQ(s.expired, 1);

    /* The sweep: 1000 entries, put at 10000 + i; a bounded sweep at 10000 + 1000 + 500
     * drops exactly the 501 expired ones over several calls. */
    for (uint64_t i = 0; i < 1000; i++)
        NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(i + 10, 0), "y", 1, 10000 + i), 0);
    size_t total = 0, calls = 0;
    for (; calls < 1000; calls++) {
        size_t d = nf_kstate_expire(ks, 11500, 64);
        NF_CHECK(d <= 64);
        total += d;
        nf_kstate_stats(ks, &s);
        if (s.entries == 499)
            break;
    }
    NF_CHECK_EQ(total, 501);
    NF_CHECK(calls > 5);
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.dirty, 499);
    for (uint64_t i = 0; i < 1000; i++)
        NF_CHECK((nf_kstate_get(ks, 0, id_of(i + 10, 0), 11500, &len, NULL) != NULL) == (i > 500));
    NF_CHECK_EQ(nf_kstate_expire(ks, 11500, 0), 0);
    /* Committing entries are not dropped until committed. */
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 1), 499);
    NF_CHECK_EQ(nf_kstate_expire(ks, 1 << 30, 0), 0);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(999 + 10, 0), 1 << 30, &len, NULL) == NULL);
    nf_kstate_committed(ks, 1);
    NF_CHECK_EQ(nf_kstate_expire(ks, 1 << 30, 0), 499);
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.entries, 0);
    nf_store_batch_free(b);
    nf_kstate_free(ks);
}

/* An evicted entry that expired in the meantime reloads as absent (the store keeps it until
 * compaction). */
static void test_ttl_store(void)
{
    char dir[64];
    NF_REQUIRE(make_tmpdir(dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_kstate_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000};
    nf_kstate_t *ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(1, 1), "x", 1, FUTURE + 5000), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b, 1), 1);
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_kstate_committed(ks, 1);
    nf_kstate_free(ks);
    ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    uint32_t len;
    NF_CHECK(nf_kstate_get(ks, 0, id_of(1, 1), FUTURE + 5999, &len, NULL) != NULL);
    nf_kstate_free(ks);
    ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    NF_CHECK(nf_kstate_get(ks, 0, id_of(1, 1), FUTURE + 6000, &len, NULL) == NULL);
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.entries, 0);
    NF_CHECK_EQ(s.misses, 1);
    nf_store_batch_free(b);
    nf_kstate_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* An epoch that will never be applied: its entries are written again by the next snapshot. */
static void test_uncommitted(void)
{
    nf_kstate_opts_t o = {.kind = NF_KIND_READS};
    nf_kstate_t *ks = nf_kstate_new(NULL, &o);
    NF_REQUIRE(ks);
    for (uint64_t i = 0; i < 10; i++)
        NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(i, 0), "v", 1, 0), 0);
    NF_CHECK_EQ(nf_kstate_delete(ks, 0, id_of(3, 0)), 0);
    NF_CHECK_EQ(nf_kstate_snapshot(ks, NULL, 1), 10);
    NF_CHECK_EQ(nf_kstate_put(ks, 0, id_of(4, 0), "w", 1, 0), 0); /* dirty and committing */
    nf_kstate_uncommitted(ks, 1);
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.dirty, 10);
    NF_CHECK_EQ(s.committing, 0);
    NF_CHECK_EQ(nf_kstate_snapshot(ks, NULL, 2), 10);
    nf_kstate_committed(ks, 2);
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.entries, 9); /* the tombstone is gone */
    uint32_t len;
    const char *p = nf_kstate_get(ks, 0, id_of(4, 0), 0, &len, NULL);
    NF_CHECK(p && len == 1 && *p == 'w');
    NF_CHECK(nf_kstate_get(ks, 0, id_of(3, 0), 0, &len, NULL) == NULL);
    nf_kstate_free(ks);
}

/* A stored value too short for its expiry header is a read error, with a message. */
static void test_corrupt_value(void)
{
    char dir[64];
    NF_REQUIRE(make_tmpdir(dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    unsigned char k[18];
    nf_kstate_encode_key(9, id_of(9, 9), k);
    nf_store_batch_t *b = nf_store_batch_new();
    nf_store_batch_put(b, NF_KIND_READS, k, sizeof k, "abc", 3);
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_kstate_opts_t o = {.kind = NF_KIND_READS};
    nf_kstate_t *ks = nf_kstate_new(st, &o);
    NF_REQUIRE(ks);
    uint32_t len = 5;
    int err = 0;
    NF_CHECK(nf_kstate_get(ks, 9, id_of(9, 9), 0, &len, &err) == NULL);
    NF_CHECK_EQ(err, -EIO);
    NF_CHECK_EQ(len, 0);
    NF_CHECK(strstr(nf_kstate_error(ks), "reads") != NULL);
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.load_errors, 1);
    NF_CHECK_EQ(s.entries, 0);
    /* A put over it repairs the key. */
    NF_CHECK_EQ(nf_kstate_put(ks, 9, id_of(9, 9), "ok", 2, 0), 0);
    NF_CHECK(nf_kstate_get(ks, 9, id_of(9, 9), 0, &len, &err) != NULL && err == 0);
    nf_store_batch_free(b);
    nf_kstate_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* ------------------------------------------------------------------ a burst given back */

enum { BURST_KEYS = 40000, BURST_BUDGET = 1 << 20 };

typedef struct {
    uint64_t ver; /* 0: absent */
    uint32_t len;
} bval_t;

static nf_id128_t burst_id(uint64_t k)
{
    return id_of(k + 1, k * 0xbf58476d1ce4e5b9ull);
}

static void burst_put(nf_kstate_t *ks, bval_t *m, uint64_t k, uint64_t ver)
{
    unsigned char v[1001];
    m[k] = (bval_t){ver, random_len()};
    gen_value(ver, m[k].len, v);
    NF_CHECK_EQ(nf_kstate_put(ks, (uint16_t)(k % 4), burst_id(k), v, m[k].len, 0), 0);
}

/* Every key reads as the model says (evicted ones are read back from the store). */
static size_t burst_wrong(nf_kstate_t *ks, const bval_t *m)
{
    size_t wrong = 0;
    unsigned char v[1001];
    for (uint64_t k = 0; k < BURST_KEYS; k++) {
        uint32_t len;
        int err;
        const unsigned char *p = nf_kstate_get(ks, (uint16_t)(k % 4), burst_id(k), 0, &len, &err);
        if (!m[k].ver) {
            wrong += p != NULL || err != 0;
            continue;
        }
        gen_value(m[k].ver, m[k].len, v);
        wrong += !p || len != m[k].len || (len && memcmp(p, v, len) != 0);
    }
    return wrong;
}

static void burst_commit(nf_store_t *st, nf_store_batch_t *b, uint64_t epoch)
{
    NF_CHECK_EQ(nf_teststore_commit(st, epoch, b), 0);
    nf_store_batch_free(b);
}

/* A burst (issue 36): one epoch's dirty entries outgrow a 1 MiB budget 4x, growing the record
 * array, the slot table, the value blocks and the vectors. A shrink waits while a snapshot is
 * in flight; the commit that leaves none evicts down to the budget and gives the rest back, to
 * within nf_kstate_slack(used) of what is used. Entries dirtied after the last snapshot (their
 * records move: the dirty vector follows), deletes, and every value read back from the store
 * stay exact, and the next snapshot writes what the model holds. */
static void test_shrink_after_burst(void)
{
    char dir[64];
    NF_REQUIRE(make_tmpdir(dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    bval_t *m = calloc(BURST_KEYS, sizeof *m);
    nf_kstate_opts_t o = {.kind = NF_KIND_READS, .budget_bytes = BURST_BUDGET};
    nf_kstate_t *ks = st ? nf_kstate_new(st, &o) : NULL;
    NF_REQUIRE(st && m && ks);
    uint64_t ver = 0;
    for (uint64_t k = 0; k < BURST_KEYS; k++)
        burst_put(ks, m, k, ++ver);
    nf_store_batch_t *b1 = nf_store_batch_new(), *b2 = nf_store_batch_new();
    NF_CHECK_EQ(nf_kstate_snapshot(ks, b1, 1), BURST_KEYS);
    for (uint64_t k = 0; k < BURST_KEYS; k += 7) /* epoch 2: a seventh rewritten, some deleted */
        if (k % 3 == 0) {
            m[k].ver = 0;
            NF_CHECK_EQ(nf_kstate_delete(ks, (uint16_t)(k % 4), burst_id(k)), 0);
        } else {
            burst_put(ks, m, k, ++ver);
        }
    nf_kstate_snapshot(ks, b2, 2);
    nf_kstate_stats_t s;
    nf_kstate_stats(ks, &s);
    NF_CHECK(s.bytes > 4 * (size_t)BURST_BUDGET); /* the burst grew it */
    burst_commit(st, b1, 1);
    nf_kstate_committed(ks, 1);
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.shrinks, 0);                    /* epoch 2 still names records by index */
    for (uint64_t k = 3; k < BURST_KEYS; k += 11) /* dirty while the shrink moves records */
        burst_put(ks, m, k, ++ver);
    burst_commit(st, b2, 2);
    nf_kstate_committed(ks, 2);
    nf_kstate_stats(ks, &s);
    NF_CHECK_EQ(s.shrinks, 1);
    NF_CHECK(s.used <= BURST_BUDGET);
    NF_CHECK(s.bytes <= s.used + nf_kstate_slack(s.used));
    NF_CHECK(s.dirty > 0);
    NF_CHECK_EQ(burst_wrong(ks, m), 0);
    nf_store_batch_t *b3 = nf_store_batch_new();
    nf_kstate_snapshot(ks, b3, 3);
    burst_commit(st, b3, 3);
    nf_kstate_committed(ks, 3);
    nf_kstate_free(ks);
    ks = nf_kstate_new(st, &o); /* what the store holds */
    NF_REQUIRE(ks);
    NF_CHECK_EQ(burst_wrong(ks, m), 0);
    nf_kstate_free(ks);
    free(m);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

int main(void)
{
    uint64_t seed = 0x5eed0fca7e5ull;
    const char *env = getenv("NF_KSTATE_SEED");
    if (env && *env)
        seed = strtoull(env, NULL, 0);
    if (seed == 0)
        seed = 1;
    fprintf(stderr, "test_kstate: seed 0x%llx (NF_KSTATE_SEED to change)\n",
            (unsigned long long)seed);
    rng = seed;
    NF_RUN(test_encode_key);
    NF_RUN(test_value_sizes_memory);
    NF_RUN(test_replace_in_place);
    NF_RUN(test_ttl);
    NF_RUN(test_uncommitted);
    NF_RUN(test_model_memory);
    NF_RUN(test_model_memory_ttl);
    NF_RUN(test_snapshot_is_o_dirty);
    NF_RUN(test_store_format);
    NF_RUN(test_committing_never_evicted);
    NF_RUN(test_over_budget);
    NF_RUN(test_shrink_after_burst);
    NF_RUN(test_ttl_store);
    NF_RUN(test_corrupt_value);
    NF_RUN(test_model_store_tiny_budget);
    NF_RUN(test_model_store_ttl);
    NF_RUN(test_model_store_unlimited);
    return nf_test_report();
}
