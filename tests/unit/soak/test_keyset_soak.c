/* Soak (issue 17, label soak): a read-path dedup set (state/keyset.h) under a 4 MiB budget while
 * its live keys grow to 10x what that budget holds in memory (the unbounded set's ~54 bytes a
 * key: 77,000 keys), then slide: keys keep arriving as the oldest expire, for as many again.
 * A tenth of the adds repeat an earlier key — a recent one (in the ring), an old one (on disk), or
 * one past its TTL (absent again). Checked:
 *   - every add's answer equals the model's (added / present): exactness with most keys on disk;
 *   - the set's memory stays within the budget at every step, and the process's resident memory
 *     grows by less than the budget plus a quarter (the set's transient buffers included);
 *   - the disk holds about the live keys only: expired runs give their space back (the files'
 *     allocated blocks are checked, not only the set's count).
 * Deterministic; a few seconds. */
#include "algo/hash.h"
#include "nf_test.h"
#include "runtime/metrics.h"
#include "state/keyset.h"
#include "teststore.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { BUDGET = 4 << 20, LIVE = 800000, TOTAL = 2 * LIVE, SNAP = 5000 };

#define NEVER INT64_MIN

/* A sanitizer's shadow memory and quarantine are resident too: the RSS bound holds without. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_CHECKED 0
#else
#define RSS_CHECKED 1
#endif

static uint64_t rng = 0x6b657973657421ull;
static uint64_t rnd(void)
{
    rng += 0x9e3779b97f4a7c15ull;
    return nf_mix64(rng);
}

static nf_id128_t key_of(uint32_t i)
{
    /* as the seen set's: sixteen keys share a hi (a user), the lo tells them apart */
    return (nf_id128_t){nf_mix64(i / 16 + 1), nf_mix64((uint64_t)i * 0x9e3779b97f4a7c15ull + 7)};
}

/* Bytes allocated on disk to this process's open files under dir (the runs' segments are
 * unlinked: /proc/self/fd names them "dir/... (deleted)"). */
static size_t disk_used(const char *dir)
{
    size_t sum = 0, n = strlen(dir);
    for (int fd = 0; fd < 4096; fd++) {
        char link[64], target[512];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        struct stat sb;
        if (strncmp(target, dir, n) == 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
            sum += (size_t)sb.st_blocks * 512;
    }
    return sum;
}

static long rss_kib(void)
{
    double b = nf_resident_bytes();
    return isnan(b) ? -1 : (long)(b / 1024);
}

static void test_dedup_set_under_budget(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("soak-keyset", dir, sizeof dir));
    /* the model: when each key was added (NEVER: not yet), one TTL = LIVE adds of 1 ms; filled
     * (so resident) before the baseline of resident memory is taken */
    int64_t *added = malloc(TOTAL * sizeof *added);
    NF_REQUIRE(added);
    for (size_t i = 0; i < TOTAL; i++)
        added[i] = NEVER;
    const int64_t ttl = LIVE, t0 = 1700000000000;
    nf_keyset_opts_t o = {.kind = NF_KIND_INTEREST_SEEN,
                          .ttl_ms = (uint64_t)ttl,
                          .budget_bytes = BUDGET,
                          .spill_dir = dir};
    long rss0 = rss_kib();
    nf_keyset_t *ks = nf_keyset_new(NULL, &o);
    NF_REQUIRE(ks);
    int64_t now = t0;
    uint32_t next = 0;
    size_t peak = 0, peak_disk = 0;
    long peak_rss = 0;
    int bad = 0;
    uint64_t repeats[3] = {0, 0, 0}, epoch = 0;
    while (next < TOTAL && bad == 0) {
        uint64_t r = rnd();
        uint32_t i;
        int kind = -1;
        if (next > 1000 && r % 10 == 0) { /* a repeat: recent, old, or expired */
            kind = (int)((r >> 8) % 3);
            uint32_t back = kind == 0   ? 1 + (uint32_t)((r >> 16) % 1000)
                            : kind == 1 ? LIVE / 4 + (uint32_t)((r >> 16) % (LIVE / 2))
                                        : LIVE + 1000 + (uint32_t)((r >> 16) % (LIVE / 4));
            if (back > next)
                continue;
            i = next - back;
        } else {
            i = next++;
            now++;
        }
        int want = added[i] != NEVER && added[i] + ttl > now ? 1 : 0;
        int got = nf_keyset_add(ks, (uint16_t)(i % 8), key_of(i), now);
        if (got != want) {
            fprintf(stderr, "key %u (repeat kind %d) at %lld: %d, model %d\n", i, kind,
                    (long long)(now - t0), got, want);
            bad++;
        }
        if (!want)
            added[i] = now;
        else
            repeats[kind]++;
        if (kind < 0 && next % SNAP == 0) { /* an epoch's cut: its keys are written */
            NF_CHECK(nf_keyset_snapshot(ks, NULL, ++epoch) >= 0);
            nf_keyset_expire(ks, now, 0);
            nf_keyset_stats_t st;
            nf_keyset_stats(ks, &st);
            peak = st.bytes > peak ? st.bytes : peak;
            peak_disk = st.disk_bytes > peak_disk ? st.disk_bytes : peak_disk;
            long rss = rss_kib();
            peak_rss = rss > peak_rss ? rss : peak_rss;
        }
    }
    nf_keyset_stats_t st;
    nf_keyset_stats(ks, &st);
    printf("soak keyset: %u keys added, %zu live (%zu on disk, %zu unfiltered), peak memory %zu "
           "bytes of %d, peak rss +%ld KiB, peak disk %zu MB, cold lookups %llu, page reads "
           "%llu, cold hits %llu, repeats %llu/%llu/%llu\n",
           next, st.keys, st.cold_keys, st.unfiltered, peak, BUDGET, peak_rss - rss0,
           peak_disk >> 20, (unsigned long long)st.cold_lookups, (unsigned long long)st.cold_reads,
           (unsigned long long)st.cold_hits, (unsigned long long)repeats[0],
           (unsigned long long)repeats[1], (unsigned long long)repeats[2]);
    NF_CHECK_EQ(bad, 0);
    /* the keys outgrew memory tenfold: at the peak, LIVE live keys at ~54 bytes each in memory */
    NF_CHECK((size_t)LIVE * 54 >= 10 * (size_t)BUDGET);
    NF_CHECK(st.keys >= LIVE);
    NF_CHECK(peak <= BUDGET);
    NF_CHECK(!RSS_CHECKED || peak_rss - rss0 <= (BUDGET + BUDGET / 4) / 1024);
    NF_CHECK(!nf_keyset_over_budget(ks));
    NF_CHECK_EQ(st.spill_failures, 0);
    /* old keys were found on disk, and expired ones read as new */
    NF_CHECK(st.cold_hits > 10000 && repeats[1] > 10000 && repeats[0] > 10000);
    /* the disk: the live keys (24 bytes each in 4 KiB pages of 170) and the runs not yet expired
     * whole, not everything ever added */
    NF_CHECK(peak_disk < (size_t)LIVE * 24 * 2);
    /* and that is what the files hold: expired runs' space was given back (holes punched) */
    size_t used = disk_used(dir);
    printf("soak keyset: %zu MB allocated to the runs' files, %zu MB counted\n", used >> 20,
           st.disk_bytes >> 20);
    NF_CHECK(used <= st.disk_bytes + st.disk_bytes / 10 + (1 << 20));
    nf_keyset_free(ks);
    free(added);
    nf_teststore_rmtree(dir);
}

int main(void)
{
    NF_RUN(test_dedup_set_under_budget);
    return nf_test_report();
}
