/* test_keyset.c — src/state/keyset.c against a reference model: random adds, lookups and expiry
 * with the ring growing from 16; restarts through a real store at committed epochs, with the
 * keys split between two owners; per-key records kstate wrote before; the blob layout and the
 * store's TTL filter; corrupt input; a clock that steps back. */
#include "algo/bytes.h"
#include "nf_test.h"
#include "state/keyset.h"
#include "state/kstate.h"
#include "teststore.h"

#include <errno.h>
#include <stdlib.h>

#define UNIVERSE 20000 /* distinct (kg, key) pairs, so that keys repeat */

typedef struct model {
    int64_t exp[UNIVERSE]; /* 0 = absent */
} model_t;

/* Key i of the universe: 8 key groups; every 16 share a hi, as the seen set's keys of one user. */
static uint16_t kg_of(unsigned i)
{
    return (uint16_t)(i % 8);
}

static nf_id128_t key_of(unsigned i)
{
    return (nf_id128_t){0x1234567800000000ull + i / 16, 0xabcdef0000000000ull ^ (i * 2654435761u)};
}

static bool model_add(model_t *m, unsigned i, int64_t now, int64_t ttl)
{
    if (m->exp[i] > now)
        return true;
    m->exp[i] = now + ttl;
    return false;
}

/* Every key of the universe reads the same in the set and the model at now. */
static int compare(nf_keyset_t *ks, const model_t *m, int64_t now, bool even_only)
{
    int bad = 0;
    for (unsigned i = 0; i < UNIVERSE; i++) {
        if (even_only && kg_of(i) % 2 == 1)
            continue;
        bool want = m->exp[i] > now, got = nf_keyset_contains(ks, kg_of(i), key_of(i), now);
        if (want != got && bad++ < 5)
            fprintf(stderr, "key %u at %lld: set %d, model %d (exp %lld)\n", i, (long long)now, got,
                    want, (long long)m->exp[i]);
    }
    return bad;
}

static bool in_odd_group(uint16_t kg, nf_id128_t key, void *ctx)
{
    (void)key;
    (void)ctx;
    return kg % 2 == 1;
}

/* Random adds, lookups and expiry against the model. bounded: a budget small enough that most
 * keys live on disk (spill_dir), snapshots marking keys written (only those may spill), a drop
 * of half the key groups midway (whose keys are then no longer asked for: their events go to
 * the group's new owner), and an unbounded set fed alongside that must decide alike. */
static void run_model(bool bounded)
{
    const int64_t ttl = 10000;
    char dir[128] = "";
    if (bounded)
        NF_REQUIRE(nf_teststore_tmpdir("keyset-cold", dir, sizeof dir));
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = ttl, .initial_capacity = 16};
    nf_keyset_t *ref = bounded ? nf_keyset_new(NULL, &o) : NULL;
    if (bounded) {
        o.budget_bytes = 512 << 10;
        o.spill_dir = dir;
    }
    nf_keyset_t *ks = nf_keyset_new(NULL, &o);
    NF_REQUIRE(ks);
    static model_t m;
    memset(&m, 0, sizeof m);
    uint64_t rng = 42, epoch = 0;
    int64_t now = 1700000000000;
    size_t grew_to = 0;
    bool dropped = false;
    for (int op = 0; op < 400000; op++) {
        uint64_t r = nf_test_rand(&rng);
        if (r % 100 < 2) /* time moves: mostly small steps, sometimes past the whole TTL */
            now += (r >> 8) % 100 == 0 ? 3 * ttl : (int64_t)((r >> 16) % 300);
        unsigned i = (unsigned)((r >> 32) % UNIVERSE);
        if (r & (1ull << 60)) { /* the hints read only (ASan checks where): the model holds */
            nf_keyset_prefetch(ks, kg_of(i), key_of(i));
            nf_keyset_prefetch_record(ks, kg_of(i), key_of(i));
        }
        if (bounded && op % 61 == 0)
            NF_CHECK(nf_keyset_snapshot(ks, NULL, ++epoch) >= 0);
        if (dropped && kg_of(i) % 2 == 1)
            continue;                  /* that group's events go to its new owner now */
        if (bounded && op == 200000) { /* the odd key groups move away */
            NF_CHECK(nf_keyset_drop(ks, in_odd_group, NULL, now) >= 0);
            NF_CHECK(nf_keyset_drop(ref, in_odd_group, NULL, now) >= 0);
            for (unsigned j = 0; j < UNIVERSE; j++)
                if (kg_of(j) % 2 == 1)
                    m.exp[j] = 0;
            dropped = true;
        }
        if (r % 100 < 90) {
            int got = nf_keyset_add(ks, kg_of(i), key_of(i), now);
            bool want = model_add(&m, i, now, ttl);
            int got_ref = ref ? nf_keyset_add(ref, kg_of(i), key_of(i), now) : got;
            if (got != (want ? 1 : 0) || got_ref != got) {
                fprintf(stderr, "op %d: add %u at %lld: %d (in memory %d), model %d\n", op, i,
                        (long long)now, got, got_ref, want);
                NF_CHECK(0);
                break;
            }
        } else if (r % 100 < 97) {
            bool want = m.exp[i] > now;
            if (nf_keyset_contains(ks, kg_of(i), key_of(i), now) != want) {
                NF_CHECK(0);
                break;
            }
        } else {
            nf_keyset_expire(ks, now, (size_t)((r >> 40) % 50));
        }
        nf_keyset_stats_t st;
        nf_keyset_stats(ks, &st);
        grew_to = st.bytes > grew_to ? st.bytes : grew_to;
    }
    NF_CHECK_EQ(compare(ks, &m, now, dropped), 0);
    nf_keyset_stats_t st;
    nf_keyset_stats(ks, &st);
    if (bounded) {
        /* Most keys went through the disk, and memory never passed the budget. */
        NF_CHECK(dropped && st.spills > 100 && st.cold_hits > 1000);
        NF_CHECK(grew_to <= o.budget_bytes);
        NF_CHECK_EQ(st.unfiltered, 0);
        NF_CHECK_EQ(st.spill_failures, 0);
        NF_CHECK(!nf_keyset_over_budget(ks));
    }
    /* Everything expires, and an idle set gives its keys up to the expire call. */
    now += ttl;
    nf_keyset_expire(ks, now, 0);
    nf_keyset_stats(ks, &st);
    NF_CHECK_EQ(st.keys, 0);
    NF_CHECK_EQ(st.disk_bytes, 0);
    NF_CHECK(grew_to > 16 * 40); /* the ring grew from 16 */
    NF_CHECK(st.added > 0 && st.present > 0 && st.expired > 0);
    nf_keyset_free(ks);
    nf_keyset_free(ref);
    if (bounded)
        nf_teststore_rmtree(dir);
}

/* Keys move to disk only once a snapshot wrote them: a bounded set fed without snapshots grows
 * past its budget (exact, and saying why); after one it spills and shrinks back within it. */
static void test_spill_waits_for_snapshot(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("keyset-defer", dir, sizeof dir));
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS,
                          .ttl_ms = 1000000,
                          .initial_capacity = 16,
                          .budget_bytes = 256 << 10, /* a ring of 512 */
                          .spill_dir = dir};
    nf_keyset_t *ks = nf_keyset_new(NULL, &o);
    NF_REQUIRE(ks);
    int64_t now = 1000;
    for (uint64_t i = 0; i < 5000; i++)
        NF_CHECK_EQ(nf_keyset_add(ks, 1, (nf_id128_t){i, i * 7}, now), 0);
    nf_keyset_stats_t st;
    nf_keyset_stats(ks, &st);
    NF_CHECK(nf_keyset_over_budget(ks) && st.spill_deferred > 0 && st.cold_keys == 0);
    NF_CHECK(nf_keyset_snapshot(ks, NULL, 1) == 5000);
    for (uint64_t i = 5000; i < 5200; i++) /* new ones, which stay: under half a ring */
        NF_CHECK_EQ(nf_keyset_add(ks, 1, (nf_id128_t){i, i * 7}, now), 0);
    nf_keyset_expire(ks, now, 0); /* the owner's timer: the written keys leave the ring */
    nf_keyset_stats(ks, &st);
    NF_CHECK(!nf_keyset_over_budget(ks) && st.cold_keys >= 4000);
    for (uint64_t i = 0; i < 5200; i++)
        NF_CHECK_EQ(nf_keyset_add(ks, 1, (nf_id128_t){i, i * 7}, now), 1);
    nf_keyset_free(ks);
    nf_teststore_rmtree(dir);
}

static void test_model(void)
{
    run_model(false);
}

static void test_model_bounded(void)
{
    run_model(true);
}

/* A batch's writes, in order, as bytes (to compare two batches). */
typedef struct {
    unsigned char *p;
    size_t n, cap;
} bytes_t;

static void bytes_add(bytes_t *o, const void *d, size_t n)
{
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2;
        o->p = realloc(o->p, o->cap);
    }
    memcpy(o->p + o->n, d, n);
    o->n += n;
}

static int serialize_one(void *arg, bool del, nf_state_kind_t kind, const void *key, size_t klen,
                         const void *val, size_t vlen)
{
    size_t head[4] = {del, (size_t)kind, klen, vlen};
    bytes_add(arg, head, sizeof head);
    bytes_add(arg, key, klen);
    if (val)
        bytes_add(arg, val, vlen);
    return 0;
}

/* A batch's blobs' keys unexpired at now, as sorted {kg, hi, lo, expiry} (a set whose ring
 * grew where the other spilled left expired keys behind that the other still wrote). */
typedef struct {
    bytes_t *out;
    int64_t now;
} live_t;

static int live_one(void *arg, bool del, nf_state_kind_t kind, const void *key, size_t klen,
                    const void *val, size_t vlen)
{
    live_t *l = arg;
    const unsigned char *k = key, *v = val;
    (void)kind;
    if (del || klen < 12 || vlen < 13)
        return -EINVAL;
    uint64_t kg = (uint64_t)k[0] << 8 | k[1];
    for (const unsigned char *p = v + 13; p + 24 <= v + vlen; p += 24) {
        uint64_t rec[4] = {kg, nf_get_le64(p), nf_get_le64(p + 8), nf_get_le64(p + 16)};
        if ((int64_t)rec[3] > l->now)
            bytes_add(l->out, rec, sizeof rec);
    }
    return 0;
}

static int cmp_rec(const void *a, const void *b)
{
    return memcmp(a, b, 4 * sizeof(uint64_t));
}

static int live_keys(const nf_store_batch_t *b, int64_t now, bytes_t *out)
{
    live_t l = {out, now};
    int r = nf_store_batch_foreach(b, live_one, &l);
    if (out->n)
        qsort(out->p, out->n / 32, 32, cmp_rec);
    return r;
}

/* Both batches hold the same writes in the same order (now >= 0: the same keys unexpired at
 * now); then both are freed. */
static bool same_batches(nf_store_batch_t *a, nf_store_batch_t *b, int64_t now)
{
    bytes_t x = {0}, y = {0};
    int ra = now < 0 ? nf_store_batch_foreach(a, serialize_one, &x) : live_keys(a, now, &x);
    int rb = now < 0 ? nf_store_batch_foreach(b, serialize_one, &y) : live_keys(b, now, &y);
    bool same = ra == 0 && rb == 0 && x.n == y.n && (x.n == 0 || memcmp(x.p, y.p, x.n) == 0);
    if (!same)
        fprintf(stderr, "batches differ: %d/%d, %zu/%zu bytes, %zu/%zu writes\n", ra, rb, x.n, y.n,
                nf_store_batch_count(a), nf_store_batch_count(b));
    free(x.p);
    free(y.p);
    nf_store_batch_free(a);
    nf_store_batch_free(b);
    return same;
}

/* The snapshot by reference writes what the snapshot at the cut would have: a set snapshotted
 * at each cut and one frozen there and written in random slices between its other operations
 * (adds that grow the ring from 16, expiry, clock jumps past the TTL that take marked keys out
 * of the tail, a drop, spills when bounded) answer alike, and every epoch's batches are equal
 * byte for byte. */
static void run_freeze(bool bounded, uint64_t process)
{
    const int64_t ttl = 10000;
    char dir[2][128] = {"", ""};
    nf_keyset_opts_t o = {.kind = NF_KIND_INTEREST_SEEN,
                          .ttl_ms = ttl,
                          .initial_capacity = 16,
                          .writer = 3,
                          .process = process};
    nf_keyset_t *ks[2];
    for (int k = 0; k < 2; k++) {
        if (bounded) {
            NF_REQUIRE(nf_teststore_tmpdir("keyset-freeze", dir[k], sizeof dir[k]));
            o.budget_bytes = 512 << 10;
            o.spill_dir = dir[k];
        }
        NF_REQUIRE((ks[k] = nf_keyset_new(NULL, &o)));
    }
    nf_store_batch_t *b[2] = {NULL, NULL};
    uint64_t rng = 7 + process, epoch = 0;
    int64_t now = 1700000000000, cut_at = 0;
    unsigned cuts = 0, equal = 0;
    for (int op = 0; op < 300000; op++) {
        uint64_t r = nf_test_rand(&rng);
        if (r % 1000 < 3 || op == 299999) { /* a cut: the last epoch's batches compare first */
            if (b[0] && b[1]) {
                NF_CHECK_EQ(nf_keyset_freeze_step(ks[1], 0), 0);
                equal += same_batches(b[0], b[1], bounded ? cut_at : -1);
                cuts++;
            }
            b[0] = nf_store_batch_new();
            b[1] = nf_store_batch_new();
            epoch++;
            cut_at = now;
            long n0 = nf_keyset_snapshot(ks[0], b[0], epoch);
            long n1 = nf_keyset_freeze(ks[1], b[1], epoch);
            NF_CHECK(bounded ? n1 >= 0 : n1 == n0);
            continue;
        }
        if (r % 100 < 2)
            now += (r >> 8) % 200 == 0 ? 2 * ttl : (int64_t)((r >> 16) % 300);
        unsigned i = (unsigned)((r >> 32) % UNIVERSE);
        if (op == 150000) {
            for (int k = 0; k < 2; k++)
                NF_CHECK(nf_keyset_drop(ks[k], in_odd_group, NULL, now) >= 0);
            continue;
        }
        if (r % 100 < 80) {
            int a = nf_keyset_add(ks[0], kg_of(i), key_of(i), now);
            NF_CHECK_EQ(nf_keyset_add(ks[1], kg_of(i), key_of(i), now), a);
        } else if (r % 100 < 90) {
            int a = nf_keyset_contains(ks[0], kg_of(i), key_of(i), now);
            NF_CHECK_EQ(nf_keyset_contains(ks[1], kg_of(i), key_of(i), now), a);
        } else if (r % 100 < 95) {
            long left = nf_keyset_freeze_step(ks[1], 1 + (size_t)((r >> 40) % 64));
            NF_CHECK(left >= 0);
        } else {
            /* (in memory both drop the same keys; bounded, their spills differ: a frozen set
             * spills only once its keys are written) */
            size_t max = (size_t)((r >> 40) % 50), e0 = nf_keyset_expire(ks[0], now, max);
            size_t e1 = nf_keyset_expire(ks[1], now, max);
            NF_CHECK(bounded || e0 == e1);
        }
    }
    if (b[0]) {
        NF_CHECK_EQ(nf_keyset_freeze_step(ks[1], 0), 0);
        equal += same_batches(b[0], b[1], bounded ? cut_at : -1);
        cuts++;
    }
    fprintf(stderr, "  %s, process %llu: %u epochs, %u equal\n", bounded ? "bounded" : "in memory",
            (unsigned long long)process, cuts, equal);
    NF_CHECK(cuts > 500);
    NF_CHECK_EQ(equal, cuts);
    for (int k = 0; k < 2; k++) {
        nf_keyset_free(ks[k]);
        if (bounded)
            nf_teststore_rmtree(dir[k]);
    }
}

/* Marked keys that expire and leave the tail before they are written, their ring positions
 * then taken by new keys (a ring of 16, never grown): they are written first, as they were. */
static void test_freeze_then_expiry_wraps_the_ring(void)
{
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000, .initial_capacity = 16};
    nf_keyset_t *ks[2] = {nf_keyset_new(NULL, &o), nf_keyset_new(NULL, &o)};
    NF_REQUIRE(ks[0] && ks[1]);
    nf_store_batch_t *b[2] = {nf_store_batch_new(), nf_store_batch_new()};
    for (int k = 0; k < 2; k++)
        for (uint64_t i = 0; i < 12; i++)
            NF_CHECK_EQ(nf_keyset_add(ks[k], (uint16_t)(i % 3), (nf_id128_t){i, ~i}, 1000), 0);
    NF_CHECK_EQ(nf_keyset_snapshot(ks[0], b[0], 1), 12);
    NF_CHECK_EQ(nf_keyset_freeze(ks[1], b[1], 1), 12);
    NF_CHECK_EQ(nf_keyset_freeze_step(ks[1], 1), 12); /* counted a little, nothing written */
    for (uint64_t i = 100; i < 116; i++) /* all 12 expired; 16 new take every position */
        NF_CHECK_EQ(nf_keyset_add(ks[1], 0, (nf_id128_t){i, i}, 5000 + (int64_t)i), 0);
    NF_CHECK_EQ(nf_keyset_freeze_step(ks[1], 0), 0);
    NF_CHECK(same_batches(b[0], b[1], -1));
    nf_keyset_stats_t st;
    nf_keyset_stats(ks[1], &st);
    NF_CHECK_EQ(st.bytes, 16 * 40); /* the ring did not grow: the positions were reused */
    nf_keyset_free(ks[0]);
    nf_keyset_free(ks[1]);
}

static void test_freeze_writes_the_cut(void)
{
    run_freeze(false, 0);
    run_freeze(false, 0x123456789abcull);
    run_freeze(true, 0);
}

/* Two owners (as two shards) split the universe by key; epochs commit through a real store;
 * at random moments both "crash" (uncommitted keys are lost with their epoch) and reload. */
static bool owns_even(uint16_t kg, nf_id128_t key, void *ctx)
{
    (void)kg;
    return (key.hi & 1) == (uint64_t)(uintptr_t)ctx;
}

static void run_restarts(bool bounded)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("keyset", dir, sizeof dir));
    size_t budget = bounded ? 256u << 10 : 0; /* a ring of 512: most keys go to disk */
    const char *spill = bounded ? dir : NULL;
    size_t cold_seen = 0;
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    const int64_t ttl = 5000;
    nf_keyset_t *ks[2];
    for (unsigned w = 0; w < 2; w++) {
        nf_keyset_opts_t o = {.kind = NF_KIND_INTEREST_SEEN,
                              .ttl_ms = ttl,
                              .initial_capacity = 64,
                              .writer = (uint16_t)w,
                              .budget_bytes = budget,
                              .spill_dir = spill};
        ks[w] = nf_keyset_new(st, &o);
        NF_REQUIRE(ks[w]);
    }
    static model_t m, committed;
    memset(&m, 0, sizeof m);
    memset(&committed, 0, sizeof committed);
    uint64_t rng = 7, epoch = 0;
    int64_t now = 1700000000000;
    int restarts = 0, bad = 0;
    for (int op = 0; op < 60000 && !bad; op++) {
        uint64_t r = nf_test_rand(&rng);
        now += (int64_t)(r % 3);
        unsigned i = (unsigned)((r >> 32) % UNIVERSE);
        unsigned w = (unsigned)(key_of(i).hi & 1);
        int got = nf_keyset_add(ks[w], kg_of(i), key_of(i), now);
        if (got != (model_add(&m, i, now, ttl) ? 1 : 0))
            bad++;
        if (r % 500 == 0) { /* a cut: both owners' keys in one epoch */
            nf_store_batch_t *b = nf_store_batch_new();
            epoch++;
            for (unsigned k = 0; k < 2; k++)
                NF_CHECK(nf_keyset_snapshot(ks[k], b, epoch) >= 0);
            NF_CHECK_EQ(nf_teststore_commit(st, epoch, b), 0);
            nf_store_batch_free(b);
            committed = m;
        }
        if (r % 4000 == 1) { /* crash: the uncommitted epoch is gone */
            restarts++;
            m = committed;
            for (unsigned k = 0; k < 2; k++) {
                nf_keyset_free(ks[k]);
                nf_keyset_opts_t o = {.kind = NF_KIND_INTEREST_SEEN,
                                      .ttl_ms = ttl,
                                      .writer = (uint16_t)k,
                                      .budget_bytes = budget,
                                      .spill_dir = spill};
                ks[k] = nf_keyset_new(st, &o);
                NF_REQUIRE(ks[k]);
                char err[256];
                long n =
                    nf_keyset_load(ks[k], owns_even, (void *)(uintptr_t)k, now, err, sizeof err);
                if (n < 0)
                    fprintf(stderr, "load: %s\n", err);
                NF_CHECK(n >= 0);
                nf_keyset_stats_t kst;
                nf_keyset_stats(ks[k], &kst);
                cold_seen += kst.cold_keys; /* bounded: the loaded keys went to disk */
                NF_CHECK(!nf_keyset_over_budget(ks[k]));
            }
            for (unsigned j = 0; j < UNIVERSE; j++) {
                unsigned k = (unsigned)(key_of(j).hi & 1);
                bool want = m.exp[j] > now;
                if (nf_keyset_contains(ks[k], kg_of(j), key_of(j), now) != want ||
                    nf_keyset_contains(ks[1 - k], kg_of(j), key_of(j), now))
                    bad++;
            }
        }
    }
    NF_CHECK_EQ(bad, 0);
    NF_CHECK(restarts >= 5);
    NF_CHECK(bounded ? cold_seen > 1000 : cold_seen == 0);
    for (unsigned k = 0; k < 2; k++)
        nf_keyset_free(ks[k]);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

static void test_restart_through_store(void)
{
    run_restarts(false);
}

static void test_restart_bounded(void)
{
    run_restarts(true);
}

/* The blob layout (keyset.h), and the store's TTL filter dropping a blob whose keys expired. */
typedef struct scan {
    int blobs, other;
    unsigned char key[12];
    unsigned char head[13];
    size_t vlen;
} scan_t;

static int scan_fn(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
    scan_t *s = arg;
    if (klen != 12) {
        s->other++;
        return 0;
    }
    s->blobs++;
    memcpy(s->key, key, 12);
    memcpy(s->head, val, vlen < 13 ? vlen : 13);
    s->vlen = vlen;
    return 0;
}

static void test_blob_layout_and_ttl_filter(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("keyset-blob", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000, .writer = 0x0102};
    nf_keyset_t *ks = nf_keyset_new(st, &o);
    NF_REQUIRE(ks);
    /* Times near 1970: the blob is long expired by the wall clock the filter uses. */
    NF_CHECK_EQ(nf_keyset_add(ks, 0x0305, (nf_id128_t){1, 2}, 5000), 0);
    NF_CHECK_EQ(nf_keyset_add(ks, 0x0305, (nf_id128_t){3, 4}, 5007), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_CHECK_EQ(nf_keyset_snapshot(ks, b, 0x0a0b0c0d), 2);
    NF_CHECK_EQ(nf_keyset_snapshot(ks, b, 0x0a0b0c0e), 0); /* nothing new since */
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_store_batch_free(b);
    scan_t s = {0};
    NF_CHECK_EQ(nf_store_scan(st, NF_KIND_EVENT_IDS, scan_fn, &s), 0);
    NF_CHECK_EQ(s.blobs, 1);
    const unsigned char want_key[12] = {0x03, 0x05, 0, 0, 0, 0, 0x0a, 0x0b, 0x0c, 0x0d, 0x01, 0x02};
    NF_CHECK(memcmp(s.key, want_key, 12) == 0);
    NF_CHECK_EQ(s.vlen, 13 + 2 * 24);
    NF_CHECK_EQ(s.head[0] | s.head[1] << 8, 6007); /* the latest expiry: 5007 + 1000 */
    NF_CHECK_EQ(s.head[8], 1);                     /* format */
    NF_CHECK_EQ(s.head[9], 2);                     /* count */
    /* Loaded at 5500 both keys are back; at 6001 only the later one. */
    for (int64_t at = 5500; at <= 6001; at += 501) {
        nf_keyset_t *k2 = nf_keyset_new(st, &o);
        NF_REQUIRE(k2);
        NF_CHECK_EQ(nf_keyset_load(k2, NULL, NULL, at, NULL, 0), at == 5500 ? 2 : 1);
        NF_CHECK_EQ(nf_keyset_add(k2, 0x0305, (nf_id128_t){3, 4}, at), 1);
        NF_CHECK_EQ(nf_keyset_add(k2, 0x0305, (nf_id128_t){1, 2}, at), at == 5500 ? 1 : 0);
        nf_keyset_free(k2);
    }
    char err[256];
    NF_CHECK_EQ(nf_store_compact(st, err, sizeof err), 0);
    s = (scan_t){0};
    NF_CHECK_EQ(nf_store_scan(st, NF_KIND_EVENT_IDS, scan_fn, &s), 0);
    NF_CHECK_EQ(s.blobs, 0); /* every key expired in 1970: the filter dropped the blob */
    nf_keyset_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* Keys kstate wrote one by one before the kind became a keyset are loaded too. */
static void test_legacy_records(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("keyset-legacy", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    int64_t now = 1700000000000;
    nf_kstate_opts_t ko = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 7200000};
    nf_kstate_t *old = nf_kstate_new(st, &ko);
    NF_REQUIRE(old);
    for (unsigned i = 0; i < 100; i++)
        NF_CHECK_EQ(nf_kstate_put(old, kg_of(i), key_of(i), NULL, 0, (uint64_t)now), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    nf_kstate_snapshot(old, b, 1);
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_store_batch_free(b);
    nf_kstate_free(old);
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 7200000};
    nf_keyset_t *ks = nf_keyset_new(st, &o);
    NF_REQUIRE(ks);
    NF_CHECK_EQ(nf_keyset_load(ks, NULL, NULL, now + 1000, NULL, 0), 100);
    for (unsigned i = 0; i < 100; i++)
        NF_CHECK(nf_keyset_contains(ks, kg_of(i), key_of(i), now + 1000));
    NF_CHECK(!nf_keyset_contains(ks, kg_of(100), key_of(100), now + 1000));
    NF_CHECK(!nf_keyset_contains(ks, kg_of(1), key_of(1), now + 7200000)); /* the kstate TTL */
    NF_CHECK_EQ(nf_keyset_load(ks, NULL, NULL, now, NULL, 0), -ENOTEMPTY);
    nf_keyset_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

static void test_corrupt(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("keyset-corrupt", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_store_batch_t *b = nf_store_batch_new();
    const unsigned char k[12] = {0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0};
    unsigned char v[13 + 24] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 1, 2, 0, 0, 0};
    nf_store_batch_put(b, NF_KIND_EVENT_IDS, k, sizeof k, v, sizeof v); /* count 2, room for 1 */
    NF_CHECK_EQ(nf_teststore_commit(st, 1, b), 0);
    nf_store_batch_free(b);
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000};
    nf_keyset_t *ks = nf_keyset_new(st, &o);
    NF_REQUIRE(ks);
    char err[256] = "";
    NF_CHECK_EQ(nf_keyset_load(ks, NULL, NULL, 1, err, sizeof err), -EIO);
    NF_CHECK(strstr(err, "event_ids") && strstr(err, "does not match its key count"));
    nf_keyset_free(ks);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* The wall clock steps back: a younger key behind an older one in the ring still expires on
 * time; the tail drops both once the older one expires. */
static void test_clock_step_back(void)
{
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000, .initial_capacity = 16};
    nf_keyset_t *ks = nf_keyset_new(NULL, &o);
    NF_REQUIRE(ks);
    NF_CHECK_EQ(nf_keyset_add(ks, 0, (nf_id128_t){1, 1}, 1000), 0); /* expires 2000 */
    NF_CHECK_EQ(nf_keyset_add(ks, 0, (nf_id128_t){2, 2}, 500), 0);  /* expires 1500 */
    NF_CHECK(nf_keyset_contains(ks, 0, (nf_id128_t){2, 2}, 1499));
    NF_CHECK(!nf_keyset_contains(ks, 0, (nf_id128_t){2, 2}, 1500));
    NF_CHECK_EQ(nf_keyset_add(ks, 0, (nf_id128_t){2, 2}, 1600), 0); /* counts again */
    NF_CHECK_EQ(nf_keyset_expire(ks, 1700, 0), 0);                  /* the tail is not due */
    NF_CHECK_EQ(nf_keyset_expire(ks, 2000, 0), 2); /* the older key and the replaced copy */
    NF_CHECK(nf_keyset_contains(ks, 0, (nf_id128_t){2, 2}, 2000)); /* the copy of 1600 */
    NF_CHECK_EQ(nf_keyset_expire(ks, 2600, 0), 1);
    nf_keyset_stats_t s;
    nf_keyset_stats(ks, &s);
    NF_CHECK_EQ(s.keys, 0);
    nf_keyset_free(ks);
}

static void test_budget(void)
{
    nf_keyset_opts_t o = {
        .kind = NF_KIND_EVENT_IDS, .ttl_ms = 1000000, .initial_capacity = 16, .budget_bytes = 4096};
    nf_keyset_t *ks = nf_keyset_new(NULL, &o);
    NF_REQUIRE(ks);
    NF_CHECK(!nf_keyset_over_budget(ks));
    for (uint64_t i = 0; i < 1000; i++)
        NF_CHECK_EQ(nf_keyset_add(ks, 0, (nf_id128_t){i, i}, 1), 0);
    NF_CHECK(nf_keyset_over_budget(ks)); /* reported, and nothing forgotten */
    for (uint64_t i = 0; i < 1000; i++)
        NF_CHECK(nf_keyset_contains(ks, 0, (nf_id128_t){i, i}, 2));
    o.ttl_ms = 0;
    NF_CHECK(nf_keyset_new(NULL, &o) == NULL);
    nf_keyset_free(ks);
}

/* A rebalance: the keys of revoked key groups leave memory (nf_keyset_drop) and nothing else
 * does; gained key groups are read back by prefix into a set that holds other keys
 * (nf_keyset_load_groups), keys already held are not doubled, and the model agrees throughout. */
static void test_groups_move(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("keyset-groups", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    const int64_t ttl = 100000;
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = ttl, .initial_capacity = 16};
    nf_keyset_t *a = nf_keyset_new(st, &o);
    NF_REQUIRE(a);
    for (unsigned i = 0; i < UNIVERSE; i++)
        NF_CHECK_EQ(nf_keyset_add(a, kg_of(i), key_of(i), 10), 0);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_REQUIRE(b);
    NF_CHECK_EQ(nf_keyset_snapshot(a, b, 1), (long)UNIVERSE);
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    /* revoked: the odd groups */
    long dropped = nf_keyset_drop(a, in_odd_group, NULL, 20);
    NF_CHECK_EQ(dropped, (long)UNIVERSE / 2);
    for (unsigned i = 0; i < UNIVERSE; i++)
        NF_CHECK_EQ(nf_keyset_contains(a, kg_of(i), key_of(i), 20), kg_of(i) % 2 == 0);
    /* new keys in an even group after the drop, not snapshotted yet */
    NF_CHECK_EQ(nf_keyset_add(a, 2, (nf_id128_t){1, 1}, 20), 0);
    /* gained again: groups 1 and 5 only, by prefix */
    uint16_t gained[] = {1, 5};
    char err[256] = "";
    long n = nf_keyset_load_groups(a, gained, 2, NULL, NULL, 30, err, sizeof err);
    NF_CHECK_EQ(n, (long)(UNIVERSE / 8) * 2);
    for (unsigned i = 0; i < UNIVERSE; i++) {
        uint16_t kg = kg_of(i);
        NF_CHECK_EQ(nf_keyset_contains(a, kg, key_of(i), 30), kg % 2 == 0 || kg == 1 || kg == 5);
    }
    NF_CHECK(nf_keyset_contains(a, 2, (nf_id128_t){1, 1}, 30));
    /* loading groups already held changes nothing */
    NF_CHECK_EQ(nf_keyset_load_groups(a, gained, 2, NULL, NULL, 30, err, sizeof err), 0);
    nf_keyset_stats_t ks;
    nf_keyset_stats(a, &ks);
    NF_CHECK_EQ(ks.keys, (size_t)(UNIVERSE / 2 + 1 + (UNIVERSE / 8) * 2));
    /* the next snapshot writes the key added since the last one (and, as documented, the loaded
     * ones again, since a new key preceded them) */
    b = nf_store_batch_new();
    NF_REQUIRE(b);
    NF_CHECK(nf_keyset_snapshot(a, b, 2) >= 1);
    nf_store_batch_free(b);
    nf_keyset_free(a);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* With a process id: 20-byte keys naming the process, a key group's keys of one epoch split in
 * blobs of at most 400,000 (one changelog record each), and another process's blob of the same
 * key group and epoch number beside it, not over it; both load. */
static void test_process_keys_and_chunks(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("keyset-chunks", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    const uint32_t n = 900001;
    nf_keyset_opts_t o = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 100000, .process = 0xabc};
    nf_keyset_t *a = nf_keyset_new(st, &o);
    NF_REQUIRE(a);
    for (uint32_t i = 0; i < n; i++)
        NF_REQUIRE(nf_keyset_add(a, 3, (nf_id128_t){i, i * 7u}, 10) == 0);
    nf_store_batch_t *b = nf_store_batch_new();
    NF_REQUIRE(b);
    NF_CHECK_EQ(nf_keyset_snapshot(a, b, 5), (long)n);
    NF_CHECK_EQ(nf_store_batch_count(b), (size_t)3); /* 400,000 + 400,000 + 100,001 */
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    /* another process, the same key group and epoch number, the same shard index */
    o.process = 0xdef;
    nf_keyset_t *other = nf_keyset_new(st, &o);
    NF_REQUIRE(other);
    NF_CHECK_EQ(nf_keyset_add(other, 3, (nf_id128_t){UINT64_MAX, 1}, 10), 0);
    b = nf_store_batch_new();
    NF_REQUIRE(b);
    NF_CHECK_EQ(nf_keyset_snapshot(other, b, 5), 1);
    NF_REQUIRE(nf_teststore_commit(st, 2, b) == 0);
    nf_store_batch_free(b);
    nf_keyset_t *c = nf_keyset_new(st, &o);
    NF_REQUIRE(c);
    char err[256];
    NF_CHECK_EQ(nf_keyset_load(c, NULL, NULL, 20, err, sizeof err), (long)n + 1);
    NF_CHECK(nf_keyset_contains(c, 3, (nf_id128_t){0, 0}, 20));
    NF_CHECK(nf_keyset_contains(c, 3, (nf_id128_t){n - 1, (n - 1) * 7u}, 20));
    NF_CHECK(nf_keyset_contains(c, 3, (nf_id128_t){UINT64_MAX, 1}, 20));
    nf_keyset_free(a);
    nf_keyset_free(other);
    nf_keyset_free(c);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

int main(void)
{
    NF_RUN(test_model);
    NF_RUN(test_model_bounded);
    NF_RUN(test_freeze_writes_the_cut);
    NF_RUN(test_freeze_then_expiry_wraps_the_ring);
    NF_RUN(test_spill_waits_for_snapshot);
    NF_RUN(test_restart_through_store);
    NF_RUN(test_restart_bounded);
    NF_RUN(test_blob_layout_and_ttl_filter);
    NF_RUN(test_legacy_records);
    NF_RUN(test_corrupt);
    NF_RUN(test_clock_step_back);
    NF_RUN(test_budget);
    NF_RUN(test_groups_move);
    NF_RUN(test_process_keys_and_chunks);
    return nf_test_report();
}
