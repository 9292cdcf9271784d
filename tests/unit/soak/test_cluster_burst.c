/* Soak (issue 36, label soak): the story-cluster index under a burst — 200 feeds of 250 articles
 * crawled at once, 50,000 new articles — with a budget of 2 MiB per kstate (state.budget_mb=2) on
 * a RocksDB store, epochs committed as the job commits them:
 *   1. the burst with early epochs: LAG articles after the engine first says it is over its
 *      budget (nf_cluster_over_budget, on which the stories actor asks for one; the coordinator
 *      cuts at its next poll, the actor adding meanwhile), else every INTERVAL articles;
 *   2. a second burst, of BURST2, in one epoch: at start every feed is fetched and parsed at once
 *      and the first cut drains every article in flight (perf/README "Memory under a burst"), so
 *      all of the index's new entries wait, pinned, for that one commit.
 * A tenth of the articles are near-duplicates of an earlier one, a quarter of those dated
 * before it (joins and merges). Checked:
 *   - 1: the index never holds more than 400 B per article of the burst (issue 36's bound), nor
 *     any of its kstates more than its budget plus nf_kstate_slack (kstate.h), at any add; the
 *     process's resident memory never exceeds what it was before by more than the budgets, the
 *     store's block cache and memtables (the default family, which holds the pending records,
 *     and the index's three: two memtables each) and a constant of 32 MiB: what the allocator
 *     keeps of the epochs' transient buffers, RocksDB's table readers and its flush and
 *     compaction buffers (+51 to +59 MiB were measured in all; not checked under a sanitizer,
 *     whose shadow memory and quarantine are resident too);
 *   - 2: after the commit, each of the index's kstates within its budget plus nf_kstate_slack
 *     again: what the burst grew is given back (the resident memory is only reported: RocksDB
 *     holds the whole epoch in its memtables until they are flushed);
 *   - every result equals a memory-only engine's, fed the same articles afterwards (action,
 *     cluster id, similarity, merged ids, candidates): the budget changes memory, never results.
 * Deterministic; the signatures are made from the article's number, none is kept. */
#include "algo/hash.h"
#include "engine/cluster.h"
#include "nf_test.h"
#include "runtime/metrics.h"
#include "state/kstate.h"
#include "state/store.h"
#include "testcluster.h"
#include "teststore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BURST = 50000, BURST2 = 10000, N = BURST + BURST2, BUDGET = 2 << 20, H = 128 };
enum { INTERVAL = 25000, LAG = 256 };
/* teststore.h's store: its block cache and per column family its memtable size */
enum { CACHE = 8 << 20, MEMTABLE = 4 << 20, FAMILIES = 4, RSS_CONST = 32 << 20 };
#define PER_ARTICLE_MAX 400
#define KSTATE_MAX      ((size_t)BUDGET + nf_kstate_slack(BUDGET))

#define FUTURE 4102444800000ll

/* A sanitizer's shadow memory and quarantine are resident too: the RSS bound holds without. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_CHECKED 0
#else
#define RSS_CHECKED 1
#endif

static long rss_bytes(void)
{
    double b = nf_resident_bytes();
    return isnan(b) ? -1 : (long)b;
}

/* Article i: a near-duplicate of an earlier original (one in ten), or an original. */
static bool is_copy(size_t i)
{
    return i > 0 && nf_mix64(i ^ 0xc0c0ull) % 10 == 0;
}

static size_t original_of(size_t i)
{
    size_t of = i ? (size_t)(nf_mix64(i ^ 0x0f0full) % i) : 0;
    while (is_copy(of))
        of--; /* article 0 is an original */
    return of;
}

static int64_t ms_of(size_t i)
{
    return FUTURE + (int64_t)i;
}

/* The signature and time of article i, made from i alone. */
static int64_t article(size_t i, uint32_t *sig)
{
    size_t of = is_copy(i) ? original_of(i) : i;
    for (unsigned k = 0; k < H; k++)
        sig[k] = (uint32_t)nf_mix64((uint64_t)of * H + k + 0x5eedull);
    if (of == i)
        return ms_of(i);
    uint64_t r = nf_mix64(i);
    for (unsigned k = 0, edits = (unsigned)(r % 24); k < edits; k++) {
        r = nf_mix64(r + k);
        sig[r % H] = (uint32_t)(r >> 32);
    }
    return r % 4 == 0 ? ms_of(of) - 1 : ms_of(i); /* a quarter dated before the original */
}

static nf_id128_t id_of(size_t i)
{
    return (nf_id128_t){nf_mix64(i + 1), nf_mix64(~(uint64_t)i)};
}

/* A result in 64 bits, to compare with the reference's. */
static uint64_t digest(const nf_cluster_result_t *r)
{
    uint64_t d = nf_mix64(r->action + 1) ^ nf_mix64(r->cluster_id.hi) ^ r->cluster_id.lo;
    d = nf_mix64(d ^ (uint64_t)(r->similarity * 1e6)) ^ r->candidates;
    for (unsigned k = 0; k < r->merged_count; k++)
        d = nf_mix64(d ^ r->merged_from[k].hi) ^ r->merged_from[k].lo;
    return d;
}

typedef struct run {
    nf_cluster_t *c;
    nf_store_t *st;
    uint64_t *dig, epoch;
    size_t peak, worst, early; /* 1: the index's and its largest kstate's peaks; early epochs */
    size_t after2, worst2;     /* 2: the index and its largest kstate after its commit */
    long rss0, rss_peak, rss2; /* resident bytes: before, 1's peak, after 2 */
} run_t;

static size_t largest(const nf_cluster_stats_t *s)
{
    size_t m = s->sig.bytes > s->bucket.bytes ? s->sig.bytes : s->bucket.bytes;
    return m > s->parent.bytes ? m : s->parent.bytes;
}

static void add(run_t *r, size_t i)
{
    uint32_t sig[H];
    nf_cluster_result_t res;
    int64_t ms = article(i, sig);
    int rc = nf_cluster_add(r->c, id_of(i), ms, sig, &res);
    if (rc != 0)
        fprintf(stderr, "add %zu: %s\n", i, nf_cluster_error(r->c));
    NF_REQUIRE(rc == 0);
    r->dig[i] = digest(&res);
}

static void commit(run_t *r)
{
    NF_REQUIRE(nf_testcluster_commit(r->c, r->st, ++r->epoch) == 0);
}

/* 1: the burst, early epochs as the stories actor asks for them. */
static void with_early_epochs(run_t *r)
{
    size_t since = 0, cut_at = SIZE_MAX;
    r->rss_peak = r->rss0;
    for (size_t i = 0; i < BURST; i++) {
        add(r, i);
        nf_cluster_stats_t s;
        nf_cluster_stats(r->c, &s);
        r->peak = s.bytes > r->peak ? s.bytes : r->peak;
        r->worst = largest(&s) > r->worst ? largest(&s) : r->worst;
        if (i % 500 == 0) {
            long rss = rss_bytes();
            r->rss_peak = rss > r->rss_peak ? rss : r->rss_peak;
        }
        if (cut_at == SIZE_MAX && nf_cluster_over_budget(r->c))
            cut_at = i + LAG;
        if (++since == INTERVAL || i == cut_at || i + 1 == BURST) {
            r->early += i == cut_at;
            commit(r);
            since = 0;
            cut_at = SIZE_MAX;
        }
    }
}

/* 2: a burst in one epoch. */
static void in_one_epoch(run_t *r)
{
    for (size_t i = BURST; i < N; i++)
        add(r, i);
    commit(r);
    nf_cluster_stats_t s;
    nf_cluster_stats(r->c, &s);
    r->after2 = s.bytes;
    r->worst2 = largest(&s);
    r->rss2 = rss_bytes();
}

/* The same articles into a memory-only engine: how many results differ (*differ). */
static void compare(const uint64_t *dig, size_t *differ)
{
    nf_cluster_opts_t o;
    nf_cluster_opts_default(&o);
    nf_cluster_t *mem = nf_cluster_new(NULL, &o);
    NF_REQUIRE(mem);
    uint32_t sig[H];
    *differ = 0;
    for (size_t i = 0; i < N; i++) {
        nf_cluster_result_t res;
        int64_t ms = article(i, sig);
        NF_REQUIRE(nf_cluster_add(mem, id_of(i), ms, sig, &res) == 0);
        *differ += digest(&res) != dig[i];
    }
    nf_cluster_free(mem);
}

static void test_burst_within_budget(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("soak-burst", dir, sizeof dir));
    run_t r = {.st = nf_teststore_open(dir), .dig = malloc(N * sizeof *r.dig)};
    nf_cluster_opts_t o;
    nf_cluster_opts_default(&o);
    o.budget_bytes = BUDGET;
    r.c = r.st ? nf_cluster_new(r.st, &o) : NULL;
    NF_REQUIRE(r.c && r.dig);
    r.rss0 = rss_bytes();
    with_early_epochs(&r);
    in_one_epoch(&r);
    nf_cluster_stats_t s;
    nf_cluster_stats(r.c, &s);
    long allowed = 3L * BUDGET + CACHE + FAMILIES * 2L * MEMTABLE + RSS_CONST;
    fprintf(stderr,
            "   %d articles in %zu epochs (%zu early): the index held at most %zu bytes (%.0f "
            "B/article), its largest kstate %zu (each may hold %zu); RSS %+.1f MB at most "
            "(allowed %+.1f MB%s). %d more in one epoch: after it the index holds %zu bytes, "
            "its largest kstate %zu; RSS %+.1f MB. %zu entries in memory, %llu evicted\n",
            BURST, (size_t)r.epoch - 1, r.early, r.peak, (double)r.peak / BURST, r.worst,
            KSTATE_MAX, (double)(r.rss_peak - r.rss0) / 1048576, (double)allowed / 1048576,
            RSS_CHECKED ? "" : ", not checked under a sanitizer", BURST2, r.after2, r.worst2,
            (double)(r.rss2 - r.rss0) / 1048576, s.entries,
            (unsigned long long)(s.sig.evictions + s.bucket.evictions + s.parent.evictions));
    nf_cluster_free(r.c);
    nf_store_close(r.st);
    nf_teststore_rmtree(dir);
    NF_CHECK(r.peak <= (size_t)PER_ARTICLE_MAX * BURST);
    NF_CHECK(r.worst <= KSTATE_MAX);
    NF_CHECK(r.early > 0); /* the budget did bite */
    if (RSS_CHECKED)
        NF_CHECK(r.rss_peak - r.rss0 <= allowed);
    NF_CHECK(r.worst2 <= KSTATE_MAX);
    size_t differ = N;
    compare(r.dig, &differ);
    NF_CHECK_EQ(differ, 0);
    free(r.dig);
}

int main(void)
{
    NF_RUN(test_burst_within_budget);
    return nf_test_report();
}
