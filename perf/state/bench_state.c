/* bench_state.c — keyed state (src/state/kstate.c) over the store (src/state/store.c): hot
 * gets and puts, cold gets from RocksDB, the epoch barrier's serialisation and commit, and the
 * time from a stopped process to serving state again. Figures and commentary: perf/README.md.
 *
 * Usage: bench_state [hot|cold|epoch|restore|checkpoint|all]... [--quick] [--dir DIR] [options]
 * (--help lists them). Every result is one JSON object per line on stdout, named by its "bench"
 * field; progress goes to stderr. Nothing here asserts on timings.
 *
 * How each figure is taken (one thread, the main one, standing in for a shard):
 * - hot (state.hot): a memory-only kstate (st == NULL, exactly the hit path a store-backed one
 *   takes) with --hot-keys keys of 16-byte values. put_insert: every key inserted once, the
 *   table grown from 16 slots. get_hit / put_update (same size: no allocation) / get_miss: keys
 *   drawn uniformly at random (xorshift inline), so most operations miss the CPU caches like a
 *   real working set bigger than the LLC. Wall time over the whole loop, no per-op clock.
 * - cold (state.cold): --cold-keys keys written to a fresh database (batches through the epoch
 *   protocol calls), the store closed; then a fresh kstate per variant gets --cold-gets distinct
 *   random keys, each one a miss in memory and a point read in RocksDB, timed one by one:
 *     page_cache dropped  the database's files evicted from the OS page cache first
 *                         (posix_fadvise DONTNEED on each file: no root, nothing else touched),
 *                         block cache empty (store just opened): reads go to the disk;
 *     page_cache warm     files read once beforehand, block cache empty (store just opened);
 *     block_cache warm    the same keys again through another fresh kstate on the same open
 *                         store: everything in RocksDB's block cache;
 *     absent              keys not in the database (the bloom filter answers), cache warm.
 * - epoch (state.epoch): a store-backed kstate with N keys in memory, all made dirty (a put of
 *   a 16-byte value each); `snapshot` is nf_kstate_snapshot into the shard's batch (reused,
 *   cleared between epochs, as epoch.c does): the processing pause. `commit` is
 *   nf_store_pending_write (synced) + nf_store_pending_apply + nf_kstate_committed: off the
 *   shard. One untimed warm-up epoch, then --epoch-runs timed ones; p50/p99 over those.
 * - restore (state.restore): databases of ~100 MB and ~1 GB of 1000-byte random
 *   (incompressible) values built through batches, closed; then "ready" = nf_store_open + a
 *   fresh kstate + the first --restore-gets cold gets of random keys. Two layouts: as built
 *   (the last writes only in the WAL, replayed by the open: what a kill -9 leaves) and
 *   compacted (nf_store_compact first); each with the page cache dropped and warm. The
 *   databases live under --dir and are deleted at the end.
 * - checkpoint (state.checkpoint): see run_checkpoint. */
#include "state/checkpoint.h"
#include "state/kstate.h"
#include "state/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#ifndef NF_ROCKSDB_VERSION
#define NF_ROCKSDB_VERSION "unknown"
#endif

typedef struct {
    bool quick;
    const char *dir;
    size_t hot_keys, hot_ops;
    size_t cold_keys, cold_gets;
    size_t epoch_sizes[3];
    unsigned epoch_runs[3];
    size_t restore_mb[2];
    size_t restore_gets;
    bool run_hot, run_cold, run_epoch, run_restore, run_checkpoint;
} opts_t;

/* ------------------------------------------------------------------ helpers */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline uint64_t xs(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Key i: uniform 128-bit id (splitmix64 of i), key group i % 16. */
static inline uint64_t splitmix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline nf_id128_t key_of(uint64_t i)
{
    return (nf_id128_t){splitmix(i), splitmix(i ^ 0x5555555555555555ull)};
}

static inline uint16_t kg_of(uint64_t i)
{
    return (uint16_t)(i % 16);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted samples. */
static double pct(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    size_t r = (size_t)ceil(p / 100.0 * (double)n);
    return sorted[r ? r - 1 : 0];
}

static void put_num(const char *key, double v, const char *fmt)
{
    printf(",\"%s\":", key);
    if (isnan(v))
        fputs("null", stdout);
    else
        printf(fmt, v);
}

static double load_1m(void)
{
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : NAN;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Page cache control over the database's own files only. */
static uint64_t walk_bytes;
static bool walk_drop;
static int walk_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag != FTW_F)
        return 0;
    walk_bytes += (uint64_t)sb->st_size;
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return 0;
    if (walk_drop) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    } else {
        static char buf[1 << 20];
        while (read(fd, buf, sizeof buf) > 0)
            ;
    }
    close(fd);
    return 0;
}

/* Drops (or warms) the page cache for every file under dir; returns their total size. */
static uint64_t page_cache(const char *dir, bool drop)
{
    walk_bytes = 0;
    walk_drop = drop;
    nftw(dir, walk_one, 16, FTW_PHYS);
    return walk_bytes;
}

static nf_store_t *open_store(const char *dir)
{
    nf_store_opts_t o;
    nf_store_opts_default(&o);
    char err[512] = "";
    nf_store_t *st = nf_store_open(dir, &o, err, sizeof err);
    if (!st) {
        fprintf(stderr, "bench_state: nf_store_open(%s): %s\n", dir, err);
        exit(1);
    }
    return st;
}

static void commit(nf_store_t *st, uint64_t epoch, nf_store_batch_t *b, double *write_s,
                   double *apply_s)
{
    char err[512] = "";
    nf_store_batch_t *bs[1] = {b};
    double t0 = now_s();
    if (nf_store_pending_write(st, epoch, "{}", bs, 1, NULL, 0, err, sizeof err) != 0) {
        fprintf(stderr, "bench_state: pending_write: %s\n", err);
        exit(1);
    }
    double t1 = now_s();
    if (nf_store_pending_apply(st, err, sizeof err) != 0) {
        fprintf(stderr, "bench_state: pending_apply: %s\n", err);
        exit(1);
    }
    double t2 = now_s();
    if (write_s)
        *write_s = t1 - t0;
    if (apply_s)
        *apply_s = t2 - t1;
}

static void compact(nf_store_t *st)
{
    char err[512] = "";
    double t0 = now_s();
    if (nf_store_compact(st, err, sizeof err) != 0) {
        fprintf(stderr, "bench_state: nf_store_compact: %s\n", err);
        exit(1);
    }
    fprintf(stderr, "bench_state: compacted in %.1f s\n", now_s() - t0);
}

/* Writes keys [0, n) with vlen-byte values (random bytes if random_vals, else the key index)
 * in the stored format, chunk_bytes of values per epoch. */
static void fill_store(nf_store_t *st, uint64_t n, uint32_t vlen, bool random_vals,
                       size_t chunk_bytes, uint64_t *epoch)
{
    nf_store_batch_t *b = nf_store_batch_new();
    unsigned char *val = calloc(1, 8 + (size_t)vlen); /* expiry 0: never */
    uint64_t rs = 0x9e3779b97f4a7c15ull;
    size_t in_batch = 0;
    double t0 = now_s(), last = t0;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char k[18];
        nf_kstate_encode_key(kg_of(i), key_of(i), k);
        if (random_vals) {
            for (uint32_t j = 0; j + 8 <= vlen; j += 8) {
                uint64_t r = xs(&rs);
                memcpy(val + 8 + j, &r, 8);
            }
        } else {
            memcpy(val + 8, &i, vlen < 8 ? vlen : 8);
        }
        nf_store_batch_put(b, NF_KIND_READS, k, sizeof k, val, 8 + (size_t)vlen);
        in_batch += vlen + 26;
        if (in_batch >= chunk_bytes || i + 1 == n) {
            commit(st, ++*epoch, b, NULL, NULL);
            nf_store_batch_clear(b);
            in_batch = 0;
            if (now_s() - last > 5) {
                last = now_s();
                fprintf(stderr, "bench_state: filled %llu / %llu keys (%.0f s)\n",
                        (unsigned long long)i + 1, (unsigned long long)n, last - t0);
            }
        }
    }
    free(val);
    nf_store_batch_free(b);
}

/* ------------------------------------------------------------------ hot */

static void hot_line(const char *op, size_t keys, size_t ops, double s, const nf_kstate_t *ks,
                     uint64_t sum)
{
    nf_kstate_stats_t st;
    nf_kstate_stats(ks, &st);
    printf("{\"bench\":\"state.hot\",\"op\":\"%s\",\"keys\":%zu,\"value_bytes\":16,\"ops\":%zu", op,
           keys, ops);
    put_num("seconds", s, "%.4f");
    put_num("ops_per_s", (double)ops / s, "%.0f");
    put_num("ns_per_op", s * 1e9 / (double)ops, "%.1f");
    printf(",\"entries\":%zu,\"bytes\":%zu", st.entries, st.bytes);
    put_num("bytes_per_key", st.entries ? (double)st.bytes / (double)st.entries : NAN, "%.1f");
    printf(",\"checksum\":%llu}\n", (unsigned long long)sum);
    fflush(stdout);
}

static void run_hot(const opts_t *o)
{
    const size_t n = o->hot_keys, ops = o->hot_ops;
    fprintf(stderr, "bench_state: hot, %zu keys, %zu ops per figure\n", n, ops);
    nf_id128_t *keys = malloc(n * sizeof *keys);
    uint16_t *kgs = malloc(n * sizeof *kgs);
    for (size_t i = 0; i < n; i++) {
        keys[i] = key_of(i);
        kgs[i] = kg_of(i);
    }
    nf_kstate_opts_t ko = {.kind = NF_KIND_READS};
    nf_kstate_t *ks = nf_kstate_new(NULL, &ko);
    unsigned char val[16] = {1};
    uint64_t sum = 0;

    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        memcpy(val, &i, 8);
        if (nf_kstate_put(ks, kgs[i], keys[i], val, 16, 0) != 0)
            abort();
    }
    hot_line("put_insert", n, n, now_s() - t0, ks, 0);
    /* Make everything clean, as between epochs. */
    nf_kstate_snapshot(ks, NULL, 1);
    nf_kstate_committed(ks, 1);

    uint64_t r = 88172645463325252ull;
    t0 = now_s();
    for (size_t i = 0; i < ops; i++) {
        size_t k = (size_t)(xs(&r) % n);
        uint32_t len;
        const unsigned char *p = nf_kstate_get(ks, kgs[k], keys[k], 0, &len, NULL);
        sum += p[0] + len;
    }
    hot_line("get_hit", n, ops, now_s() - t0, ks, sum);

    t0 = now_s();
    for (size_t i = 0; i < ops; i++) {
        size_t k = (size_t)(xs(&r) % n);
        memcpy(val, &i, 8);
        if (nf_kstate_put(ks, kgs[k], keys[k], val, 16, 0) != 0)
            abort();
    }
    hot_line("put_update", n, ops, now_s() - t0, ks, 0);

    sum = 0;
    t0 = now_s();
    for (size_t i = 0; i < ops; i++) {
        uint32_t len;
        nf_id128_t k = {xs(&r), r ^ 1};
        sum += nf_kstate_get(ks, 3, k, 0, &len, NULL) != NULL;
    }
    hot_line("get_miss", n, ops, now_s() - t0, ks, sum);

    nf_kstate_free(ks);
    free(keys);
    free(kgs);
}

/* ------------------------------------------------------------------ cold */

static uint64_t gcd(uint64_t x, uint64_t y)
{
    while (y) {
        uint64_t t = x % y;
        x = y;
        y = t;
    }
    return x;
}

/* ngets gets of keys drawn from [lo, lo + span) (distinct: a random stride permutation) through
 * a fresh kstate; per-get latencies into lat (µs). Returns the number found. */
static size_t cold_gets(nf_store_t *st, uint64_t lo, uint64_t span, size_t ngets, uint64_t seed,
                        double *lat, double *total_s)
{
    nf_kstate_opts_t ko = {.kind = NF_KIND_READS};
    nf_kstate_t *ks = nf_kstate_new(st, &ko);
    /* i -> (a * i + seed) mod span is a permutation when gcd(a, span) = 1. */
    uint64_t a = (0x9e3779b9ull + seed * 1000003ull) % span;
    while (a < 2 || gcd(a, span) != 1)
        a++;
    size_t found = 0;
    double t0 = now_s();
    for (size_t i = 0; i < ngets; i++) {
        uint64_t k = lo + (a * (uint64_t)i + seed) % span;
        uint32_t len;
        int err;
        uint64_t s = now_ns();
        const void *p = nf_kstate_get(ks, kg_of(k), key_of(k), 0, &len, &err);
        lat[i] = (double)(now_ns() - s) / 1e3;
        if (err) {
            fprintf(stderr, "bench_state: get: %s\n", nf_kstate_error(ks));
            exit(1);
        }
        found += p != NULL;
    }
    *total_s = now_s() - t0;
    nf_kstate_free(ks);
    return found;
}

static void cold_line(const char *variant, const char *page, const char *block, size_t keys,
                      size_t ngets, size_t found, double *lat, double total_s, uint64_t db_bytes)
{
    qsort(lat, ngets, sizeof *lat, cmp_double);
    printf("{\"bench\":\"state.cold\",\"variant\":\"%s\",\"page_cache\":\"%s\","
           "\"block_cache\":\"%s\",\"keys_in_store\":%zu,\"value_bytes\":16,\"db_bytes\":%llu,"
           "\"gets\":%zu,\"found\":%zu",
           variant, page, block, keys, (unsigned long long)db_bytes, ngets, found);
    put_num("seconds", total_s, "%.4f");
    put_num("gets_per_s", (double)ngets / total_s, "%.0f");
    put_num("p50_us", pct(lat, ngets, 50), "%.2f");
    put_num("p99_us", pct(lat, ngets, 99), "%.2f");
    put_num("p999_us", pct(lat, ngets, 99.9), "%.2f");
    put_num("max_us", lat[ngets - 1], "%.1f");
    printf("}\n");
    fflush(stdout);
}

static void run_cold(const opts_t *o)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/nf-bench-state-cold-%d", o->dir, (int)getpid());
    rm_rf(dir);
    const size_t n = o->cold_keys, g = o->cold_gets < o->cold_keys ? o->cold_gets : o->cold_keys;
    fprintf(stderr, "bench_state: cold, filling %zu keys into %s\n", n, dir);
    nf_store_t *st = open_store(dir);
    uint64_t epoch = 0;
    double t0 = now_s();
    fill_store(st, n, 16, false, 32u << 20, &epoch);
    fprintf(stderr, "bench_state: filled in %.1f s\n", now_s() - t0);
    compact(st); /* every key in table files: nothing left in the WAL or memtables */
    nf_store_close(st);
    double *lat = malloc(g * sizeof *lat), s;

    /* Page cache dropped, block cache empty. */
    uint64_t db_bytes = page_cache(dir, true);
    st = open_store(dir);
    size_t f = cold_gets(st, 0, n, g, 1, lat, &s);
    cold_line("present", "dropped", "empty", n, g, f, lat, s, db_bytes);
    nf_store_close(st);

    /* Page cache warm, block cache empty; then block cache warm (same keys). */
    page_cache(dir, false);
    st = open_store(dir);
    f = cold_gets(st, 0, n, g, 7, lat, &s);
    cold_line("present", "warm", "empty", n, g, f, lat, s, db_bytes);
    f = cold_gets(st, 0, n, g, 7, lat, &s);
    cold_line("present", "warm", "warm", n, g, f, lat, s, db_bytes);
    /* Keys that are not there. */
    f = cold_gets(st, n, 1u << 30, g, 3, lat, &s);
    cold_line("absent", "warm", "warm", n, g, f, lat, s, db_bytes);
    nf_store_close(st);
    free(lat);
    rm_rf(dir);
}

/* ------------------------------------------------------------------ epoch */

static void run_epoch(const opts_t *o)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/nf-bench-state-epoch-%d", o->dir, (int)getpid());
    rm_rf(dir);
    nf_store_t *st = open_store(dir);
    uint64_t epoch = 0;
    for (int si = 0; si < 3; si++) {
        const size_t n = o->epoch_sizes[si];
        const unsigned runs = o->epoch_runs[si];
        if (n == 0)
            continue;
        fprintf(stderr, "bench_state: epoch, %zu dirty keys, %u runs\n", n, runs);
        nf_kstate_opts_t ko = {.kind = NF_KIND_READS, .initial_capacity = n};
        nf_kstate_t *ks = nf_kstate_new(st, &ko);
        nf_store_batch_t *b = nf_store_batch_new();
        double *snap = calloc(runs, sizeof *snap), *com = calloc(runs, sizeof *com);
        double *wr = calloc(runs, sizeof *wr), *ap = calloc(runs, sizeof *ap);
        unsigned char val[16] = {0};
        size_t written = 0, batch_bytes = 0;
        for (unsigned run = 0; run <= runs; run++) { /* run 0: warm-up */
            for (size_t i = 0; i < n; i++) {
                memcpy(val, &run, sizeof run);
                memcpy(val + 8, &i, 8);
                /* Keys distinct per size, so every size starts from the same state. */
                uint64_t k = (uint64_t)si << 40 | i;
                if (nf_kstate_put(ks, kg_of(k), key_of(k), val, 16, 0) != 0)
                    abort();
            }
            nf_store_batch_clear(b);
            ++epoch;
            double t0 = now_s();
            written = nf_kstate_snapshot(ks, b, epoch);
            double t1 = now_s();
            batch_bytes = nf_store_batch_bytes(b);
            double w, a;
            commit(st, epoch, b, &w, &a);
            double t2 = now_s();
            nf_kstate_committed(ks, epoch);
            double t3 = now_s();
            if (run == 0)
                continue;
            snap[run - 1] = (t1 - t0) * 1e3;
            wr[run - 1] = w * 1e3;
            ap[run - 1] = a * 1e3;
            com[run - 1] = (t3 - t1) * 1e3;
            (void)t2;
        }
        double snap_mean = 0;
        for (unsigned i = 0; i < runs; i++)
            snap_mean += snap[i] / runs;
        qsort(snap, runs, sizeof *snap, cmp_double);
        qsort(com, runs, sizeof *com, cmp_double);
        qsort(wr, runs, sizeof *wr, cmp_double);
        qsort(ap, runs, sizeof *ap, cmp_double);
        printf("{\"bench\":\"state.epoch\",\"dirty\":%zu,\"written\":%zu,\"value_bytes\":16,"
               "\"runs\":%u,\"batch_bytes\":%zu",
               n, written, runs, batch_bytes);
        put_num("snapshot_ms_p50", pct(snap, runs, 50), "%.3f");
        put_num("snapshot_ms_p99", pct(snap, runs, 99), "%.3f");
        put_num("snapshot_ms_max", snap[runs - 1], "%.3f");
        put_num("snapshot_ns_per_entry", snap_mean * 1e6 / (double)n, "%.1f");
        put_num("commit_ms_p50", pct(com, runs, 50), "%.2f");
        put_num("commit_ms_p99", pct(com, runs, 99), "%.2f");
        put_num("pending_write_ms_p50", pct(wr, runs, 50), "%.2f");
        put_num("apply_ms_p50", pct(ap, runs, 50), "%.2f");
        printf("}\n");
        fflush(stdout);
        free(snap);
        free(com);
        free(wr);
        free(ap);
        nf_store_batch_free(b);
        nf_kstate_free(ks);
    }
    nf_store_close(st);
    rm_rf(dir);
}

/* ------------------------------------------------------------------ restore */

static void run_restore(const opts_t *o)
{
    const uint32_t vlen = 1000;
    for (int si = 0; si < 2; si++) {
        if (o->restore_mb[si] == 0)
            continue;
        char dir[512];
        snprintf(dir, sizeof dir, "%s/nf-bench-state-restore-%d", o->dir, (int)getpid());
        rm_rf(dir);
        const uint64_t n = (uint64_t)o->restore_mb[si] * 1000000ull / vlen;
        fprintf(stderr, "bench_state: restore, building %zu MB (%llu keys) in %s\n",
                o->restore_mb[si], (unsigned long long)n, dir);
        nf_store_t *st = open_store(dir);
        uint64_t epoch = 0;
        double t0 = now_s();
        fill_store(st, n, vlen, true, 64u << 20, &epoch);
        double build_s = now_s() - t0;
        t0 = now_s();
        nf_store_close(st);
        double close_s = now_s() - t0;
        const size_t g = o->restore_gets;
        double *lat = malloc(g * sizeof *lat);
        /* As built (the last memtables' worth of writes only in the WAL, replayed by the open:
         * what a kill -9 leaves), then fully compacted (table files only). */
        for (int layout = 0; layout < 2; layout++) {
            double compact_s = NAN;
            if (layout == 1) {
                st = open_store(dir);
                t0 = now_s();
                compact(st);
                compact_s = now_s() - t0;
                nf_store_close(st);
            }
            for (int warm = 0; warm < 2; warm++) {
                uint64_t db_bytes = page_cache(dir, !warm);
                t0 = now_s();
                st = open_store(dir);
                double open_s = now_s() - t0, gets_s;
                size_t f = cold_gets(st, 0, n, g, 11 + (uint64_t)warm, lat, &gets_s);
                double ready_s = now_s() - t0;
                qsort(lat, g, sizeof *lat, cmp_double);
                printf("{\"bench\":\"state.restore\",\"target_mb\":%zu,\"keys\":%llu,"
                       "\"value_bytes\":%u,\"layout\":\"%s\",\"db_bytes\":%llu,"
                       "\"page_cache\":\"%s\"",
                       o->restore_mb[si], (unsigned long long)n, vlen,
                       layout ? "compacted" : "as_built", (unsigned long long)db_bytes,
                       warm ? "warm" : "dropped");
                put_num("build_s", build_s, "%.2f");
                put_num("close_s", close_s, "%.3f");
                put_num("compact_s", compact_s, "%.2f");
                put_num("open_ms", open_s * 1e3, "%.1f");
                printf(",\"first_gets\":%zu,\"found\":%zu", g, f);
                put_num("first_gets_ms", gets_s * 1e3, "%.1f");
                put_num("get_p50_us", pct(lat, g, 50), "%.1f");
                put_num("get_p99_us", pct(lat, g, 99), "%.1f");
                put_num("ready_ms", ready_s * 1e3, "%.1f");
                printf("}\n");
                fflush(stdout);
                nf_store_close(st);
            }
        }
        free(lat);
        rm_rf(dir);
    }
}

/* ------------------------------------------------------------------ checkpoint */

/* A named checkpoint (nf_store_checkpoint): its wall time. */
static double checkpoint_s(nf_store_t *st, uint64_t epoch)
{
    char err[512] = "";
    double t0 = now_s();
    if (nf_store_checkpoint(st, epoch, NULL, 0, err, sizeof err) != 0) {
        fprintf(stderr, "bench_state: checkpoint: %s\n", err);
        exit(1);
    }
    return now_s() - t0;
}

/* state.checkpoint: named checkpoints now hold copies of the table files (issue 37), shared
 * among checkpoints, never with the live database. A database of --restore-mb (first size) of
 * 1000-byte random values, compacted; then: "first" (every table file copied and read back),
 * "after_1pct" (1 % of the keys rewritten and flushed: only the new table files copied),
 * "unchanged" (nothing new: every table file a link to the previous checkpoint's copy, which
 * is what every checkpoint cost before copies: links and a manifest). */
static void run_checkpoint(const opts_t *o)
{
    const uint32_t vlen = 1000;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/nf-bench-state-checkpoint-%d", o->dir, (int)getpid());
    rm_rf(dir);
    const uint64_t n = (uint64_t)o->restore_mb[0] * 1000000ull / vlen;
    fprintf(stderr, "bench_state: checkpoint, building %zu MB (%llu keys) in %s\n",
            o->restore_mb[0], (unsigned long long)n, dir);
    nf_store_t *st = open_store(dir);
    uint64_t epoch = 0;
    fill_store(st, n, vlen, true, 64u << 20, &epoch);
    compact(st);
    char db[600];
    snprintf(db, sizeof db, "%s/db", dir);
    uint64_t db_bytes = page_cache(db, false);
    double first = checkpoint_s(st, ++epoch);
    fill_store(st, n / 100, vlen, true, 64u << 20, &epoch);
    char err[256];
    nf_store_flush(st, err, sizeof err);
    double inc = checkpoint_s(st, ++epoch);
    double same = checkpoint_s(st, ++epoch);
    printf("{\"bench\":\"state.checkpoint\",\"db_bytes\":%llu,\"value_bytes\":%u",
           (unsigned long long)db_bytes, vlen);
    put_num("first_ms", first * 1e3, "%.1f");
    put_num("first_mb_per_s", (double)db_bytes / 1e6 / first, "%.0f");
    put_num("after_1pct_ms", inc * 1e3, "%.1f");
    put_num("unchanged_ms", same * 1e3, "%.1f");
    printf("}\n");
    fflush(stdout);
    nf_store_close(st);
    rm_rf(dir);
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_state [hot|cold|epoch|restore|checkpoint|all]... [options]\n"
               "  --quick             small sizes (a smoke run: well under a minute)\n"
               "  --dir DIR           where the databases go (default /tmp; deleted at the end)\n"
               "  --hot-keys N        keys in the hot table (default 1000000)\n"
               "  --hot-ops N         operations per hot figure (default 5000000)\n"
               "  --cold-keys N       keys in the cold database (default 2000000)\n"
               "  --cold-gets N       gets per cold figure (default 50000)\n"
               "  --epoch-sizes A,B,C dirty keys per epoch (default 10000,100000,1000000)\n"
               "  --restore-mb A,B    database sizes (default 100,1000)\n"
               "  --restore-gets N    first gets after the open (default 10000)\n");
}

static void parse_list(const char *s, size_t *out, int n)
{
    for (int i = 0; i < n; i++) {
        out[i] = 0;
        if (s && *s) {
            char *end;
            out[i] = (size_t)strtoull(s, &end, 10);
            s = *end == ',' ? end + 1 : NULL;
        }
    }
}

int main(int argc, char **argv)
{
    opts_t o = {
        .dir = "/tmp",
        .hot_keys = 1000000,
        .hot_ops = 5000000,
        .cold_keys = 2000000,
        .cold_gets = 50000,
        .epoch_sizes = {10000, 100000, 1000000},
        .epoch_runs = {30, 15, 5},
        .restore_mb = {100, 1000},
        .restore_gets = 10000,
    };
    bool any = false, quick = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick"))
            quick = true;
    if (quick) {
        o.quick = true;
        o.hot_keys = 100000;
        o.hot_ops = 1000000;
        o.cold_keys = 100000;
        o.cold_gets = 10000;
        o.epoch_sizes[2] = 0;
        o.epoch_runs[0] = 10;
        o.epoch_runs[1] = 5;
        o.restore_mb[0] = 20;
        o.restore_mb[1] = 0;
        o.restore_gets = 2000;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick"))
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "hot") || !strcmp(a, "all"))
            o.run_hot = any = true;
        if (!strcmp(a, "cold") || !strcmp(a, "all"))
            o.run_cold = any = true;
        if (!strcmp(a, "epoch") || !strcmp(a, "all"))
            o.run_epoch = any = true;
        if (!strcmp(a, "restore") || !strcmp(a, "all"))
            o.run_restore = any = true;
        if (!strcmp(a, "checkpoint") || !strcmp(a, "all"))
            o.run_checkpoint = any = true;
        if (!strcmp(a, "hot") || !strcmp(a, "cold") || !strcmp(a, "epoch") ||
            !strcmp(a, "restore") || !strcmp(a, "checkpoint") || !strcmp(a, "all"))
            continue;
        if (!v || a[0] != '-') {
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--dir"))
            o.dir = v;
        else if (!strcmp(a, "--hot-keys"))
            o.hot_keys = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--hot-ops"))
            o.hot_ops = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--cold-keys"))
            o.cold_keys = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--cold-gets"))
            o.cold_gets = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--epoch-sizes"))
            parse_list(v, o.epoch_sizes, 3);
        else if (!strcmp(a, "--restore-mb"))
            parse_list(v, o.restore_mb, 2);
        else if (!strcmp(a, "--restore-gets"))
            o.restore_gets = strtoull(v, NULL, 10);
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!any)
        o.run_hot = o.run_cold = o.run_epoch = o.run_restore = o.run_checkpoint = true;
    if (o.hot_keys == 0 || o.cold_keys == 0 || o.cold_gets == 0 || o.restore_gets == 0) {
        usage(stderr);
        return 2;
    }

    struct utsname u;
    if (uname(&u) != 0)
        memset(&u, 0, sizeof u);
#ifdef NDEBUG
    const char *asserts = "false";
#else
    const char *asserts = "true";
#endif
    printf("{\"bench\":\"state.env\",\"version\":\"%s\",\"commit\":\"%s\",\"kernel\":\"%s\","
           "\"online_cpus\":%ld,\"rocksdb\":\"%s\",\"asserts\":%s,\"quick\":%s,\"dir\":\"%s\"",
           NF_VERSION, NF_GIT_COMMIT, u.release, sysconf(_SC_NPROCESSORS_ONLN), NF_ROCKSDB_VERSION,
           asserts, o.quick ? "true" : "false", o.dir);
    put_num("loadavg_1m", load_1m(), "%.2f");
    printf("}\n");
    fflush(stdout);

    double t0 = now_s();
    if (o.run_hot)
        run_hot(&o);
    if (o.run_cold)
        run_cold(&o);
    if (o.run_epoch)
        run_epoch(&o);
    if (o.run_restore)
        run_restore(&o);
    if (o.run_checkpoint)
        run_checkpoint(&o);
    printf("{\"bench\":\"state.done\",\"seconds\":%.1f", now_s() - t0);
    put_num("loadavg_1m", load_1m(), "%.2f");
    printf("}\n");
    return 0;
}
