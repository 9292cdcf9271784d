/* test_coldset.c — src/state/coldset.c against a reference model: runs spilled with filters of
 * every size (none, one that fills up early so later keys stay unfiltered, one with room for
 * all), lookups of present, absent and expired keys, runs dropped as they
 * expire (and their disk space with them). */
#include "nf_test.h"
#include "state/coldset.h"
#include "teststore.h"

#include <stdlib.h>
#include <string.h>

#define KEYS 60000
#define RUN  3000

typedef struct model {
    int64_t exp[KEYS]; /* 0 = never spilled */
} model_t;

/* Key i: 4 key groups; every 32 share a hi (as one user's seen keys). */
static nf_coldrec_t rec_of(unsigned i, int64_t exp)
{
    return (nf_coldrec_t){0x5000000000000000ull + i / 32, 0x77000000ull ^ (i * 2654435761u),
                          (uint64_t)exp << 16 | (i % 4)};
}

static int check_all(nf_coldset_t *cs, const model_t *m, int64_t now)
{
    int bad = 0;
    for (unsigned i = 0; i < KEYS; i++) {
        nf_coldrec_t r = rec_of(i, 0);
        int got =
            nf_coldset_contains(cs, (uint16_t)(r.expkg & 0xFFFF), (nf_id128_t){r.hi, r.lo}, now);
        int want = m->exp[i] > now;
        if (got != want && bad++ < 5)
            fprintf(stderr, "key %u at %lld: %d, model %d\n", i, (long long)now, got, want);
    }
    return bad;
}

/* Spills KEYS keys in runs of RUN (each run's keys expiring over a window later than the last),
 * then checks every key at several times, expires everything. */
static void run_filter(size_t filter_bytes, bool want_unfiltered)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("coldset", dir, sizeof dir));
    char err[256];
    nf_coldset_opts_t o = {.dir = dir, .filter_max_bytes = filter_bytes};
    nf_coldset_t *cs = nf_coldset_new(&o, err, sizeof err);
    NF_REQUIRE(cs);
    static model_t m;
    memset(&m, 0, sizeof m);
    static nf_coldrec_t buf[RUN];
    uint64_t rng = filter_bytes + 1;
    const int64_t t0 = 1000000;
    unsigned order[KEYS];
    for (unsigned i = 0; i < KEYS; i++)
        order[i] = i;
    for (unsigned i = KEYS - 1; i > 0; i--) { /* keys arrive in random order */
        unsigned j = (unsigned)(nf_test_rand(&rng) % (i + 1));
        unsigned t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (unsigned r = 0; r < KEYS / RUN; r++) {
        for (unsigned k = 0; k < RUN; k++) {
            unsigned i = order[r * RUN + k];
            m.exp[i] = t0 + r * 100 + (int64_t)(nf_test_rand(&rng) % 200);
            buf[k] = rec_of(i, m.exp[i]);
        }
        NF_CHECK_EQ(nf_coldset_spill(cs, buf, RUN), 0);
    }
    nf_coldset_stats_t st;
    nf_coldset_stats(cs, &st);
    NF_CHECK_EQ(st.keys, KEYS);
    NF_CHECK_EQ(st.runs, KEYS / RUN);
    NF_CHECK(want_unfiltered ? st.unfiltered > 0 : st.unfiltered == 0);
    /* the filter's share (which holds the fixed part, ~100 KiB, when it can) + the page index */
    size_t share = filter_bytes > (128u << 10) ? filter_bytes : (128u << 10);
    NF_CHECK(st.bytes <= share + KEYS / 20 + 4096);
    /* absent keys (never spilled) read no page when the filter holds everything */
    for (unsigned i = 0; i < 1000; i++) {
        nf_coldrec_t r = rec_of(KEYS + i, 0);
        NF_CHECK_EQ(
            nf_coldset_contains(cs, (uint16_t)(r.expkg & 0xFFFF), (nf_id128_t){r.hi, r.lo}, t0), 0);
    }
    nf_coldset_stats_t st2;
    nf_coldset_stats(cs, &st2);
    if (!want_unfiltered && filter_bytes > 0)
        NF_CHECK(st2.reads - st.reads < 5);
    for (int64_t now = t0 - 1; now < t0 + (KEYS / RUN) * 100 + 300; now += 700)
        NF_CHECK_EQ(check_all(cs, &m, now), 0);

    /* runs leave as their last key expires, and their disk space with them */
    nf_coldset_stats(cs, &st);
    long dropped = nf_coldset_expire(cs, t0 + 1000);
    nf_coldset_stats(cs, &st2);
    NF_CHECK(dropped > 0 && st2.runs < st.runs && st2.disk_bytes < st.disk_bytes);
    NF_CHECK_EQ(check_all(cs, &m, t0 + 1000), 0);
    NF_CHECK(nf_coldset_expire(cs, t0 + 1000000) >= 0);
    nf_coldset_stats(cs, &st2);
    NF_CHECK_EQ(st2.keys, 0);
    NF_CHECK_EQ(st2.disk_bytes, 0);
    NF_CHECK_EQ(st2.unfiltered, 0);
    nf_coldset_free(cs);
    nf_teststore_rmtree(dir);
}

static void test_filter_holds_all(void)
{
    run_filter(1 << 20, false); /* ~58,000 buckets: room for every key */
}

static void test_filter_fills_up(void)
{
    run_filter(160 << 10, true); /* room for ~13,000 keys: most stay unfiltered */
}

static void test_filter_none(void)
{
    run_filter(0, true);
}

static void test_bad_dir(void)
{
    char err[256] = "";
    nf_coldset_opts_t o = {.dir = "/nonexistent/newsflow-cold", .filter_max_bytes = 1 << 20};
    NF_CHECK(nf_coldset_new(&o, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "/nonexistent/newsflow-cold") != NULL);
}

int main(void)
{
    NF_RUN(test_filter_holds_all);
    NF_RUN(test_filter_fills_up);
    NF_RUN(test_filter_none);
    NF_RUN(test_bad_dir);
    return nf_test_report();
}
