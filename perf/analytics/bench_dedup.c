/* bench_dedup.c — the read path's two dedup sets (state/keyset.h) at the design's volume, bounded
 * by a memory budget with the keys past it on disk (state/coldset.h), beside the same sets held
 * wholly in memory when that fits.
 *
 * Workload (deterministic): read events of Zipf(s) users (default 10M) over Zipf(s) articles
 * (default 1M); each event adds
 *   - its event id to the event-id set (TTL 2 h): a fresh id, except 1 % that repeat one of the
 *     last 10,000 (a producer's retries) and 0.1 % one of the set's older keys (a replay);
 *   - (user, article, session) to the seen set (TTL 24 h): session = the user's half hour, so a
 *     user who reads an article twice in one half hour repeats a key.
 * The simulated clock runs so that the event-id set holds the last --ids-keys ids (2 h of them)
 * while the seen set keeps everything (the run spans less than its 24 h).
 *
 *   bench_dedup --events N [--ids-keys K] [--users U] [--articles A] [--zipf S]
 *               [--budget-mb-ids M] [--budget-mb-seen M] [--dir D] [--memory]
 * --dir D: the sets are bounded (their budgets) and spill to D; --memory: unbounded, no disk
 * (the reference). Events are generated a million at a time, untimed; the clock runs only over
 * the sets' calls (with the job's two-step prefetch over groups of 16).
 *
 * One JSON line:
 *   {"bench":"dedup","mode":"bounded|memory","events":N,"seconds":T,"events_per_s":R,
 *    "ids":{"keys":..,"disk_keys":..,"bytes":..,"disk_bytes":..,"present":..,"cold_lookups":..,
 *           "cold_reads":..,"cold_hits":..,"unfiltered":..},"seen":{...},"decisions":H,
 *    "rss_mb":M,"maxrss_mb":X}
 * where decisions is a hash of every add's answer in order: equal between the two modes on the
 * same workload iff every dedup decision was. */
#include "algo/hash.h"
#include "state/keyset.h"
#include "workload.h"

#include "../bench_clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BLOCK (1u << 20)
#define GROUP 16

typedef struct ev {
    nf_id128_t id, seen;
    uint16_t kg_id, kg; /* partitions: a retried event keeps its own; a read, its user's */
} ev_t;

static long rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib / 1024;
}

static void print_set(const char *name, const nf_keyset_t *ks, uint64_t present, const char *sep)
{
    nf_keyset_stats_t s;
    nf_keyset_stats(ks, &s);
    printf("\"%s\":{\"keys\":%zu,\"disk_keys\":%zu,\"bytes\":%zu,\"disk_bytes\":%zu,"
           "\"present\":%llu,\"cold_lookups\":%llu,\"cold_reads\":%llu,\"cold_hits\":%llu,"
           "\"unfiltered\":%zu,\"spill_failures\":%llu,\"spills\":%llu,\"spill_ms_mean\":%.1f,"
           "\"spill_ms_max\":%.1f}%s",
           name, s.keys, s.cold_keys, s.bytes, s.disk_bytes, (unsigned long long)present,
           (unsigned long long)s.cold_lookups, (unsigned long long)s.cold_reads,
           (unsigned long long)s.cold_hits, s.unfiltered, (unsigned long long)s.spill_failures,
           (unsigned long long)s.spills, s.spills ? (double)s.spill_ns / 1e6 / (double)s.spills : 0,
           (double)s.spill_ns_max / 1e6, sep);
}

int main(int argc, char **argv)
{
    uint64_t events = 10000000, ids_keys = 0;
    uint32_t users = 10000000, articles = 1000000;
    double zipf = 1.0;
    size_t budget_ids = 1024, budget_seen = 3072;
    const char *dir = NULL;
    bool memory = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--memory")) {
            memory = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_dedup: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--events"))
            events = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--ids-keys"))
            ids_keys = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--users"))
            users = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--articles"))
            articles = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--zipf"))
            zipf = strtod(v, NULL);
        else if (!strcmp(a, "--budget-mb-ids"))
            budget_ids = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--budget-mb-seen"))
            budget_seen = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--dir"))
            dir = v;
        else {
            fprintf(stderr, "bench_dedup: unknown option %s (see the top of bench_dedup.c)\n", a);
            return 2;
        }
    }
    if (!memory && !dir) {
        fprintf(stderr, "bench_dedup: give --dir D (bounded, spilling to D) or --memory\n");
        return 2;
    }
    if (!ids_keys)
        ids_keys = events / 5;
    /* the simulated clock: ids_keys events per 2 h */
    const double dt_ms = 7200000.0 / (double)ids_keys;
    const int64_t t0 = 1700000000000;
    nf_zipf_t zu, za;
    if (nf_zipf_init(&zu, users, zipf) != 0 || nf_zipf_init(&za, articles, zipf) != 0) {
        fprintf(stderr, "bench_dedup: out of memory\n");
        return 1;
    }
    nf_keyset_opts_t oi = {.kind = NF_KIND_EVENT_IDS, .ttl_ms = 2 * 3600 * 1000};
    nf_keyset_opts_t os = {.kind = NF_KIND_INTEREST_SEEN, .ttl_ms = 24ull * 3600 * 1000};
    if (!memory) {
        oi.budget_bytes = budget_ids << 20;
        os.budget_bytes = budget_seen << 20;
        oi.spill_dir = os.spill_dir = dir;
    }
    nf_keyset_t *ids = nf_keyset_new(NULL, &oi), *seen = nf_keyset_new(NULL, &os);
    ev_t *blk = malloc(BLOCK * sizeof *blk);
    if (!ids || !seen || !blk) {
        fprintf(stderr, "bench_dedup: cannot create the sets\n");
        return 1;
    }
    uint64_t rng = 0x6465647570ull, next_id = 0, present_ids = 0, present_seen = 0;
    uint64_t decisions = 0xcbf29ce484222325ull;
    double timed = 0;
    for (uint64_t done = 0; done < events;) {
        uint32_t n = events - done < BLOCK ? (uint32_t)(events - done) : BLOCK;
        for (uint32_t j = 0; j < n; j++) {
            uint64_t e = done + j, r = nf_wl_rand(&rng);
            uint64_t id = next_id;
            if (r % 1000 < 10 && next_id > 10000)
                id = next_id - 1 - (r >> 10) % 10000;
            else if (r % 1000 == 10 && next_id > ids_keys)
                id = next_id - 10000 - (r >> 10) % (ids_keys - 10000);
            else
                next_id++;
            uint32_t u = nf_zipf_next(&zu, &rng), a = nf_zipf_next(&za, &rng);
            int64_t now = t0 + (int64_t)((double)e * dt_ms);
            uint64_t session = (uint64_t)(now / 1800000 + u % 1800000);
            blk[j].kg = (uint16_t)(u % 8);
            blk[j].kg_id = (uint16_t)(id % 8);
            blk[j].id = (nf_id128_t){nf_mix64(id ^ 0x6576656e74ull), nf_mix64(id + 17)};
            blk[j].seen = (nf_id128_t){nf_mix64(u + 1), nf_mix64((uint64_t)a << 32 ^ session)};
        }
        double t = bench_now_s();
        for (uint32_t g = 0; g < n; g += GROUP) {
            uint32_t m = n - g < GROUP ? n - g : GROUP;
            const ev_t *x = &blk[g];
            for (uint32_t j = 0; j < m; j++) {
                nf_keyset_prefetch(ids, x[j].kg_id, x[j].id);
                nf_keyset_prefetch(seen, x[j].kg, x[j].seen);
            }
            for (uint32_t j = 0; j < m; j++) {
                nf_keyset_prefetch_record(ids, x[j].kg_id, x[j].id);
                nf_keyset_prefetch_record(seen, x[j].kg, x[j].seen);
            }
            for (uint32_t j = 0; j < m; j++) {
                int64_t now = t0 + (int64_t)((double)(done + g + j) * dt_ms);
                int a = nf_keyset_add(ids, x[j].kg_id, x[j].id, now);
                int b = nf_keyset_add(seen, x[j].kg, x[j].seen, now);
                if (a < 0 || b < 0) {
                    fprintf(stderr, "bench_dedup: add failed (%d, %d)\n", a, b);
                    return 1;
                }
                present_ids += (uint64_t)a;
                present_seen += (uint64_t)b;
                decisions = (decisions ^ (uint64_t)(a << 1 | b)) * 0x100000001b3ull;
            }
            /* an epoch's cut every ~64k events: its keys are written (and may move to disk) */
            if (((done + g) & 0xFFFF) < GROUP) {
                nf_keyset_snapshot(ids, NULL, done + g);
                nf_keyset_snapshot(seen, NULL, done + g);
            }
        }
        int64_t now = t0 + (int64_t)((double)(done + n) * dt_ms);
        nf_keyset_expire(ids, now, 0);
        nf_keyset_expire(seen, now, 0);
        timed += bench_now_s() - t;
        done += n;
        if ((done >> 20) % 64 == 0)
            fprintf(stderr, "bench_dedup: %llu events, %.0f/s, rss %ld MB\n",
                    (unsigned long long)done, (double)done / timed, rss_mb());
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"bench\":\"dedup\",\"mode\":\"%s\",\"events\":%llu,\"users\":%u,\"articles\":%u,"
           "\"zipf\":%.2f,\"budget_mb\":[%zu,%zu],\"seconds\":%.2f,\"events_per_s\":%.0f,",
           memory ? "memory" : "bounded", (unsigned long long)events, users, articles, zipf,
           memory ? 0 : budget_ids, memory ? 0 : budget_seen, timed, (double)events / timed);
    print_set("ids", ids, present_ids, ",");
    print_set("seen", seen, present_seen, ",");
    printf("\"decisions\":\"%016llx\",\"rss_mb\":%ld,\"maxrss_mb\":%ld}\n",
           (unsigned long long)decisions, rss_mb(), ru.ru_maxrss / 1024);
    nf_keyset_free(ids);
    nf_keyset_free(seen);
    free(blk);
    nf_zipf_free(&zu);
    nf_zipf_free(&za);
    return 0;
}
