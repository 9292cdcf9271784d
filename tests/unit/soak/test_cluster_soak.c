/* Soak (issue 17, label soak): the story-cluster index on a real store under a memory budget far
 * below what its keys need. 20,000 articles go into two engines side by side: one memory only,
 * one on a RocksDB store with a budget of 1 MiB per kstate (signatures, buckets, parents) and an
 * epoch committed every 500 articles (snapshot, pending write, apply, committed: what makes
 * entries evictable). A fifth of the articles are near-duplicates of an earlier one, a quarter
 * of those dated before their original, so that candidates, joins and merges happen. Checked:
 *   - every result of the budgeted engine equals the memory-only one's (action, cluster id,
 *     similarity, merged ids): exactness with most of the index on disk;
 *   - after every commit, each kstate's memory is within its budget plus half of it (one
 *     epoch's new entries cannot be evicted before their epoch commits);
 *   - the keys did outgrow the budget: the memory-only engine ends above 10x the budgets' sum.
 * Article times lie in 2100 (as in test_cluster): the store's compaction filter drops values by
 * the wall clock, and these must expire by the engine's clock only. Deterministic. */
#include "algo/hash.h"
#include "engine/cluster.h"
#include "nf_test.h"
#include "state/store.h"
#include "testcluster.h"
#include "teststore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 20000, EPOCH = 500, BUDGET = 1 << 20, H = 128 };

#define FUTURE 4102444800000ll

static uint64_t rng = 0x51ed270b3f2a6c55ull;
static uint64_t rnd(void)
{
    rng += 0x9e3779b97f4a7c15ull;
    return nf_mix64(rng);
}

static void test_cluster_index_under_budget(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("soak-cluster", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_cluster_opts_t o;
    nf_cluster_opts_default(&o);
    nf_cluster_t *mem = nf_cluster_new(NULL, &o);
    o.budget_bytes = BUDGET;
    nf_cluster_t *disk = nf_cluster_new(st, &o);
    uint32_t *sigs = malloc((size_t)N * H * sizeof *sigs);
    NF_REQUIRE(mem && disk && sigs);
    size_t mismatches = 0, over = 0, worst = 0, dup = 0;
    uint64_t e = 0;
    size_t actions[4] = {0};
    for (size_t i = 0; i < N; i++) {
        uint32_t *sig = sigs + i * H;
        int64_t ms = FUTURE + (int64_t)i * 1000;
        if (i > 0 && rnd() % 5 == 0) { /* a near-duplicate of an earlier article */
            size_t of = rnd() % i;
            memcpy(sig, sigs + of * H, H * sizeof *sig);
            for (unsigned k = 0, edits = (unsigned)(rnd() % 24); k < edits; k++)
                sig[rnd() % H] = (uint32_t)rnd();
            if (rnd() % 4 == 0) /* out of order: earlier than the original (a merge) */
                ms = FUTURE + (int64_t)of * 1000 - 500;
            dup++;
        } else {
            for (unsigned k = 0; k < H; k++)
                sig[k] = (uint32_t)rnd();
        }
        nf_id128_t id = {nf_mix64(i + 1), nf_mix64(~(uint64_t)i)};
        nf_cluster_result_t want, got;
        NF_CHECK_EQ(nf_cluster_add(mem, id, ms, sig, &want), 0);
        int r = nf_cluster_add(disk, id, ms, sig, &got);
        if (r != 0)
            fprintf(stderr, "add %zu: %s\n", i, nf_cluster_error(disk));
        NF_REQUIRE(r == 0);
        mismatches += !nf_testcluster_same(&got, &want);
        actions[want.action]++;
        if (i % EPOCH == EPOCH - 1) {
            NF_REQUIRE(nf_testcluster_commit(disk, st, ++e) == 0);
            nf_cluster_stats_t s;
            nf_cluster_stats(disk, &s);
            const nf_kstate_stats_t *k[3] = {&s.sig, &s.bucket, &s.parent};
            for (int j = 0; j < 3; j++) {
                if (k[j]->bytes > worst)
                    worst = k[j]->bytes;
                /* one epoch of new entries may sit above the budget until it commits */
                over += k[j]->bytes > (size_t)BUDGET + (size_t)BUDGET / 2;
            }
        }
    }
    nf_cluster_stats_t ms_, ds;
    nf_cluster_stats(mem, &ms_);
    nf_cluster_stats(disk, &ds);
    fprintf(stderr,
            "   %d articles (%zu near-duplicates: %zu joined, %zu merged): memory only %zu bytes "
            "(%.0f B/article), on the store %zu bytes (%.0f B/article; the largest kstate after "
            "a commit %zu, budget %d); loads %llu, evictions %llu; %zu mismatches\n",
            N, dup, actions[NF_CLUSTER_JOINED], actions[NF_CLUSTER_MERGED], ms_.bytes,
            (double)ms_.bytes / N, ds.bytes, (double)ds.bytes / N, worst, BUDGET,
            (unsigned long long)(ds.sig.loads + ds.bucket.loads + ds.parent.loads),
            (unsigned long long)(ds.sig.evictions + ds.bucket.evictions + ds.parent.evictions),
            mismatches);
    NF_CHECK_EQ(mismatches, 0);
    NF_CHECK_EQ(over, 0);
    NF_CHECK(actions[NF_CLUSTER_JOINED] > 100);    /* the near-duplicates did match */
    NF_CHECK(ms_.bytes > (size_t)10 * 3 * BUDGET); /* the keys outgrew the budget 10x */
    NF_CHECK(ds.sig.evictions + ds.bucket.evictions > 0 && ds.sig.loads + ds.bucket.loads > 0);
    free(sigs);
    nf_cluster_free(mem);
    nf_cluster_free(disk);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

int main(void)
{
    NF_RUN(test_cluster_index_under_budget);
    return nf_test_report();
}
