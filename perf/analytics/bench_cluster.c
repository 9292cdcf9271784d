/* bench_cluster.c — the story clustering engine on one thread: MinHash signing,
 * LSH + union-find, both together, the quality of the matches against exact
 * Jaccard, and memory per article.
 *
 * Corpus: random-word base articles of 250-350 words (vocabulary 50,000) and,
 * for 30% of the bases, 1-5 near-duplicates made by 1-10 word substitutions
 * (3-shingle Jaccard to the base ~0.82..0.98, straddling the 0.85 threshold),
 * shuffled, one article per second.
 *
 * Quality: the ground truth is exact Jaccard >= 0.85 on the exact shingle sets,
 * computed for every pair within a planted group and every LSH candidate pair
 * (a pair sharing a band key); every other pair is two unrelated random-word
 * articles (Jaccard ~0). "match" scores the engine's direct decisions
 * (candidate and estimate >= 0.85); "cluster" scores final clusters (same
 * cluster id) against the planted groups.
 *
 * Store and budget (issue 17): with --budget-mb M (repeatable), the same adds
 * again on a RocksDB store in a temporary directory under --dir (default $TMPDIR or
 * /tmp) with the index's kstates held to M MB each, an epoch committed every 1,000
 * articles (snapshot, pending write, apply, committed: what makes entries evictable),
 * every result compared with a memory-only engine's fed alongside (action, cluster
 * id, similarity, merged ids): "mismatches" must be 0. Both without a TTL: the
 * articles are 1 s apart, so with the 7-day TTL an index holds at most 604,800 of them and
 * these runs would not measure an index of N articles. (The store's filter drops by the
 * engine's clock, so a TTL is exact too: engine/test_cluster, times in 2023, compacted.)
 * Reports articles/s, memory, loads and evictions, and the process's peak RSS.
 *
 * --store-only: the store phase alone, without the reference (it needs ~2 KB of memory an
 * article) and with the signatures made a batch at a time (outside the clock): for 10M+ articles.
 *
 * --restore R (with --store-only): the restart of the index, checked. After the N articles
 * (committed), R more are added to the running engine and their results kept, never committed;
 * the engine is dropped, the store closed and (--drop-caches: as root, the kernel's page cache
 * dropped, so nothing of the store is in memory) opened again, a new engine made on it, and the
 * same R articles added: every result must equal the one before the restart ("restore_mismatches"
 * 0). Reports the close, the open (the restore: a job reopens its store the same way, and its
 * entries load on demand) and the R adds before and after (warm, then cold), and the store's size
 * on disk.
 *
 * --dump FILE: the corpus's exact shingle sets and this engine's pair decisions, for the
 * similarity peer (perf/cluster/datasketch_peer.py, datasketch's MinHashLSH; dump_corpus).
 *
 * Usage: bench_cluster [--quick] [--articles N] [--budget-mb M]... [--dir D] [--store-only
 * [--restore R [--drop-caches]]] [--dump FILE]. One JSON object per line on stdout. */
#include "algo/minhash.h"
#include "engine/cluster.h"
#include "state/store.h"
#include "testcluster.h"
#include "teststore.h"
#include "workload.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bench_clock.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { VOCAB = 50000, MAXW = 350, BATCH = 1000, TEXT_MAX = 4608 }; /* 350 x (10 + 1) + '.'s */
enum { PROGRESS = 1000000 }; /* --store-only: a progress line every million articles */

static char vocab[VOCAB][12];
static unsigned char vlen[VOCAB];

typedef struct art {
    uint32_t base;  /* base article index: the words' seed */
    uint32_t group; /* planted group (= base) */
    uint32_t edits; /* substitutions; 0 = the base itself */
    uint64_t seed;  /* of the substitutions */
} art_t;

static size_t words_of(const art_t *a, uint32_t *w)
{
    uint64_t r = 0x62617365ull * (a->base + 1);
    size_t n = 250 + nf_wl_rand(&r) % 101;
    for (size_t i = 0; i < n; i++)
        w[i] = (uint32_t)(nf_wl_rand(&r) % VOCAB);
    r = a->seed;
    for (uint32_t e = 0; e < a->edits; e++) {
        size_t at = nf_wl_rand(&r) % n;
        w[at] = (uint32_t)(nf_wl_rand(&r) % VOCAB);
    }
    return n;
}

/* Renders an article as text: a title (its first 8 words, capitalised) and a
 * body. */
static size_t render(const art_t *a, char *out, size_t *tlen)
{
    uint32_t w[MAXW];
    size_t n = words_of(a, w), len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 8)
            *tlen = len;
        memcpy(out + len, vocab[w[i]], vlen[w[i]]);
        if (i < 8)
            out[len] = (char)(out[len] - 'a' + 'A');
        len += vlen[w[i]];
        out[len++] = i % 11 == 10 ? '.' : ' ';
        if (i % 11 == 10)
            out[len++] = ' ';
    }
    return len;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Exact shingle set (sorted, unique) of an article. */
static size_t shingle_set(const nf_minhash_t *mh, nf_minhash_scratch_t *s, const art_t *a,
                          char *text, uint64_t *out)
{
    size_t tl = 0, len = render(a, text, &tl);
    long ns = nf_minhash_shingles(mh, s, text, tl, text + tl, len - tl);
    if (ns <= 0)
        return 0;
    memcpy(out, s->shingles, (size_t)ns * sizeof *out);
    qsort(out, (size_t)ns, sizeof *out, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < (size_t)ns; i++)
        if (u == 0 || out[u - 1] != out[i])
            out[u++] = out[i];
    return u;
}

static double jaccard(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    size_t i = 0, j = 0, inter = 0;
    while (i < na && j < nb) {
        if (a[i] == b[j]) {
            inter++;
            i++;
            j++;
        } else if (a[i] < b[j]) {
            i++;
        } else {
            j++;
        }
    }
    size_t uni = na + nb - inter;
    return uni ? (double)inter / (double)uni : 0.0;
}

static nf_id128_t id_of(size_t i)
{
    char hex[33];
    nf_wl_article_id((uint32_t)i, hex);
    nf_id128_t id = {0, 0};
    nf_id128_from_hex(hex, &id);
    return id;
}

typedef struct bk {
    uint64_t key;
    uint32_t doc;
} bk_t;

static int cmp_bk(const void *a, const void *b)
{
    const bk_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->doc < y->doc ? -1 : x->doc > y->doc;
}

typedef struct pair {
    uint32_t a, b;
} pair_t;

static int cmp_pair(const void *x, const void *y)
{
    const pair_t *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

static pair_t *pairs;
static size_t npairs, pcap;

static void push_pair(uint32_t a, uint32_t b)
{
    if (npairs == pcap) {
        size_t ncap = pcap ? 2 * pcap : 1u << 16;
        pair_t *p = realloc(pairs, ncap * sizeof *p);
        if (!p) {
            fprintf(stderr, "bench_cluster: out of memory\n");
            exit(1);
        }
        pairs = p;
        pcap = ncap;
    }
    pairs[npairs++] = a < b ? (pair_t){a, b} : (pair_t){b, a};
}

typedef struct rg {
    uint32_t root, group;
} rg_t;

/* Whether two signatures share one of the 16 band keys (8 rows each): a candidate pair. */
static bool shares_band(const uint32_t *x, const uint32_t *y)
{
    for (unsigned b = 0; b < 16; b++)
        if (nf_minhash_band_key(x, b, 8) == nf_minhash_band_key(y, b, 8))
            return true;
    return false;
}

/* --dump FILE: the corpus as perf/cluster/datasketch_peer.py reads it, with this engine's
 * decisions, all little-endian: "NFSHINGL" u64 N, then per article u32 planted group, u32 n,
 * n x u64 (its exact shingle set, sorted), then u64 P and P x (u32 a, u32 b, u32 matched) for
 * every candidate pair (a < b, sharing one of the 16 band keys; matched: its MinHash estimate
 * >= the threshold too), as the quality pass decided them (recs). The peer is judged on the
 * same sets, by the same code. 0 or 1. */
static int dump_corpus(const char *path, const art_t *arts, size_t N, const nf_minhash_t *mh,
                       nf_minhash_scratch_t *s, char *text, const uint32_t *recs, uint64_t nrecs)
{
    FILE *f = fopen(path, "wb");
    static uint64_t set[MAXW];
    uint64_t n64 = N;
    bool ok = f && fwrite("NFSHINGL", 1, 8, f) == 8 && fwrite(&n64, 8, 1, f) == 1;
    for (size_t i = 0; ok && i < N; i++) {
        uint32_t hdr[2] = {arts[i].group, (uint32_t)shingle_set(mh, s, &arts[i], text, set)};
        ok = fwrite(hdr, 4, 2, f) == 2 && fwrite(set, 8, hdr[1], f) == hdr[1];
    }
    ok = ok && fwrite(&nrecs, 8, 1, f) == 1 && fwrite(recs, 12, nrecs, f) == nrecs;
    if (!f || fclose(f) != 0 || !ok) {
        fprintf(stderr, "bench_cluster: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int cmp_rg(const void *x, const void *y)
{
    const rg_t *p = x, *q = y;
    if (p->root != q->root)
        return p->root < q->root ? -1 : 1;
    return p->group < q->group ? -1 : p->group > q->group;
}

static nf_id128_t *g_ids; /* for qsort */
static int cmp_id_idx(const void *x, const void *y)
{
    nf_id128_t a = g_ids[*(const uint32_t *)x], b = g_ids[*(const uint32_t *)y];
    if (a.hi != b.hi)
        return a.hi < b.hi ? -1 : 1;
    return a.lo < b.lo ? -1 : a.lo > b.lo;
}

static uint64_t du_total;
static int du_add(const char *path, const struct stat *sb, int type, struct FTW *f)
{
    (void)path;
    (void)f;
    if (type == FTW_F)
        du_total += (uint64_t)sb->st_blocks * 512;
    return 0;
}

/* Bytes allocated on disk under dir. */
static uint64_t disk_bytes(const char *dir)
{
    du_total = 0;
    nftw(dir, du_add, 16, FTW_PHYS);
    return du_total;
}

/* The process's resident memory now. */
static double rss_mb(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

/* true if the kernel dropped its page cache (root only). */
static bool drop_page_cache(void)
{
    sync();
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    bool ok = f && fputs("3\n", f) != EOF;
    if ((f && fclose(f) != 0) || !ok) {
        fprintf(stderr, "bench_cluster: cannot drop the page cache (%s): the reopen is warm\n",
                strerror(errno));
        return false;
    }
    return true;
}

typedef struct restore_opts {
    size_t held;      /* R: articles N..N+R-1, added before and after the restart */
    bool drop_caches; /* drop the page cache between close and open */
} restore_opts_t;

/* Renders and signs articles [from, from + n) into sig (n x 128). */
static void sign_range(const art_t *arts, size_t from, size_t n, nf_minhash_t *mh,
                       nf_minhash_scratch_t *scr, char *texts, uint32_t *sig)
{
    for (size_t k = 0; k < n; k++) {
        size_t ttl;
        size_t len = render(&arts[from + k], texts, &ttl);
        nf_minhash_sign_text(mh, scr, texts, ttl, texts + ttl, len - ttl, sig + k * 128);
    }
}

/* Adds articles [N, N + R) (signatures hsig) to cl, results into res (or compared with res:
 * the number that differ into *differ). Returns seconds, or -1 on an error. */
static double add_held(nf_cluster_t *cl, const nf_id128_t *ids, size_t N, size_t R,
                       const uint32_t *hsig, nf_cluster_result_t *res, size_t *differ)
{
    double t0 = bench_now_s();
    for (size_t k = 0; k < R; k++) {
        nf_cluster_result_t got;
        if (nf_cluster_add(cl, ids[N + k], 1700000000000 + (int64_t)(N + k) * 1000, hsig + k * 128,
                           differ ? &got : &res[k]) != 0) {
            fprintf(stderr, "bench_cluster: add: %s\n", nf_cluster_error(cl));
            return -1;
        }
        if (differ)
            *differ += !nf_testcluster_same(&got, &res[k]);
    }
    return bench_now_s() - t0;
}

/* (e) the restart: see the top. cl (committed up to its last epoch) is freed here; *stp is
 * closed and reopened. */
static int restore_phase(nf_cluster_t *cl, nf_store_t **stp, const char *dir,
                         const nf_store_opts_t *so, const nf_cluster_opts_t *co,
                         const nf_id128_t *ids, size_t N, const restore_opts_t *ro,
                         const art_t *arts, nf_minhash_t *mh, nf_minhash_scratch_t *scr,
                         char *texts)
{
    size_t R = ro->held;
    uint32_t *hsig = malloc(R * 128 * sizeof *hsig);
    nf_cluster_result_t *res = malloc(R * sizeof *res);
    if (!hsig || !res) {
        free(hsig);
        free(res);
        nf_cluster_free(cl);
        fprintf(stderr, "bench_cluster: out of memory\n");
        return 1;
    }
    sign_range(arts, N, R, mh, scr, texts, hsig);
    double warm = add_held(cl, ids, N, R, hsig, res, NULL);
    nf_cluster_free(cl); /* its R adds were never committed */
    double c0 = bench_now_s();
    nf_store_close(*stp);
    double close_s = bench_now_s() - c0;
    uint64_t disk = disk_bytes(dir);
    bool dropped = ro->drop_caches && drop_page_cache();
    char err[512];
    double o0 = bench_now_s();
    *stp = nf_store_open(dir, so, err, sizeof err);
    nf_cluster_t *re = *stp ? nf_cluster_new(*stp, co) : NULL;
    double open_s = bench_now_s() - o0;
    size_t differ = 0;
    double cold = -1;
    if (!*stp)
        fprintf(stderr, "bench_cluster: reopening the store: %s\n", err);
    else if (re)
        cold = add_held(re, ids, N, R, hsig, res, &differ);
    printf("{\"bench\":\"cluster\",\"phase\":\"restart on the store\",\"articles\":%zu,"
           "\"held_back\":%zu,\"disk_bytes\":%llu,\"disk_bytes_per_article\":%.0f,"
           "\"close_seconds\":%.3f,\"open_seconds\":%.3f,\"page_cache_dropped\":%s,"
           "\"held_adds_per_s_before\":%.0f,\"held_adds_per_s_after\":%.0f,"
           "\"restore_mismatches\":%zu}\n",
           N, R, (unsigned long long)disk, (double)disk / (double)N, close_s, open_s,
           dropped ? "true" : "false", warm > 0 ? (double)R / warm : 0,
           cold > 0 ? (double)R / cold : 0, differ);
    fflush(stdout);
    nf_cluster_free(re);
    free(hsig);
    free(res);
    if (differ)
        fprintf(stderr, "bench_cluster: %zu of %zu results differ after the restart\n", differ, R);
    return warm < 0 || cold < 0 || differ ? 1 : 0;
}

/* (d) the adds again on a store with a budget, compared with a memory-only engine's fed
 * alongside. sigs NULL (--store-only): no reference (it would need ~2 KB an article), and the
 * articles rendered and signed a batch at a time, outside the clock; then, with ro->held, (e). */
static int store_phase(size_t N, const nf_id128_t *ids, const uint32_t *sigs, size_t budget_mb,
                       const char *base, const art_t *arts, nf_minhash_t *mh,
                       const restore_opts_t *ro)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/nf-bench-cluster-%d-%zu", base, (int)getpid(), budget_mb);
    nf_teststore_rmtree(dir);
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    so.block_cache_mb = 32;
    char err[512];
    nf_store_t *st = nf_store_open(dir, &so, err, sizeof err);
    if (!st) {
        fprintf(stderr, "bench_cluster: store: %s\n", err);
        return 1;
    }
    nf_cluster_opts_t co;
    nf_cluster_opts_default(&co);
    co.ttl_ms = 0; /* see the top: an index of N articles */
    /* the reference: memory only, the same options */
    nf_cluster_t *ref = sigs ? nf_cluster_new(NULL, &co) : NULL;
    co.budget_bytes = budget_mb << 20;
    nf_cluster_t *cl = nf_cluster_new(st, &co);
    uint32_t *bsig = sigs ? NULL : malloc((size_t)BATCH * 128 * sizeof *bsig);
    char *texts = sigs ? NULL : malloc((size_t)BATCH * TEXT_MAX);
    nf_minhash_scratch_t scr = {0};
    if (!cl || (sigs && !ref) || (!sigs && (!bsig || !texts))) {
        nf_cluster_free(cl);
        nf_cluster_free(ref);
        nf_store_close(st);
        return 1;
    }
    nf_cluster_result_t want;
    nf_cluster_stats_t rs;
    size_t mismatches = 0, peak = 0;
    uint64_t e = 0;
    int rc = 0;
    double t0 = bench_now_s(), commit_s = 0, sign_s = 0;
    for (size_t i = 0; i < N && rc == 0; i++) {
        const uint32_t *sig = sigs ? sigs + i * 128 : bsig + (i % BATCH) * 128;
        if (!sigs && i % BATCH == 0) {
            double s0 = bench_now_s();
            sign_range(arts, i, BATCH < N - i ? BATCH : N - i, mh, &scr, texts, bsig);
            sign_s += bench_now_s() - s0;
        }
        nf_cluster_result_t got;
        if ((rc = nf_cluster_add(cl, ids[i], 1700000000000 + (int64_t)i * 1000, sig, &got)) != 0) {
            fprintf(stderr, "bench_cluster: add: %s\n", nf_cluster_error(cl));
            break;
        }
        if (ref) {
            nf_cluster_add(ref, ids[i], 1700000000000 + (int64_t)i * 1000, sig, &want);
            mismatches += !nf_testcluster_same(&got, &want);
        }
        if (i % 1000 == 999 || i + 1 == N) {
            nf_cluster_stats_t cs;
            nf_cluster_stats(cl, &cs);
            if (cs.bytes > peak)
                peak = cs.bytes;
            double c0 = bench_now_s();
            rc = nf_testcluster_commit(cl, st, ++e);
            commit_s += bench_now_s() - c0;
        }
        if (!sigs && (i + 1) % PROGRESS == 0 && i + 1 < N) { /* long runs: figures on the way */
            printf("{\"bench\":\"cluster\",\"phase\":\"progress on the store\",\"articles\":%zu,"
                   "\"seconds\":%.3f,\"commit_seconds\":%.3f,\"peak_bytes\":%zu,"
                   "\"rss_mb\":%.0f,\"disk_bytes\":%llu}\n",
                   i + 1, bench_now_s() - t0 - sign_s, commit_s, peak, rss_mb(),
                   (unsigned long long)disk_bytes(dir));
            fflush(stdout);
        }
    }
    double t = bench_now_s() - t0 - sign_s;
    char mtext[24];
    snprintf(mtext, sizeof mtext, "%zu", mismatches);
    nf_cluster_stats_t st_;
    nf_cluster_stats(cl, &st_);
    if (ref)
        nf_cluster_stats(ref, &rs);
    else
        rs.bytes = 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"bench\":\"cluster\",\"phase\":\"lsh+unionfind on a store\",\"articles\":%zu,"
           "\"budget_mb_per_kstate\":%zu,\"seconds\":%.3f,\"commit_seconds\":%.3f,"
           "\"articles_per_s\":%.0f,\"mismatches\":%s,\"bytes\":%zu,\"peak_bytes\":%zu,"
           "\"bytes_per_article\":%.0f,\"loads\":%llu,\"evictions\":%llu,"
           "\"hits\":%llu,\"misses\":%llu,\"max_rss_mb\":%.0f,"
           "\"memory_only_bytes_per_article\":%.0f,\"candidates_per_article\":%.3f,"
           "\"news\":%llu,\"joins\":%llu,\"merges\":%llu}\n",
           N, budget_mb, t, commit_s, (double)N / t, ref ? mtext : "null", st_.bytes, peak,
           (double)peak / (double)N,
           (unsigned long long)(st_.sig.loads + st_.bucket.loads + st_.parent.loads),
           (unsigned long long)(st_.sig.evictions + st_.bucket.evictions + st_.parent.evictions),
           (unsigned long long)(st_.sig.hits + st_.bucket.hits + st_.parent.hits),
           (unsigned long long)(st_.sig.misses + st_.bucket.misses + st_.parent.misses),
           (double)ru.ru_maxrss / 1024.0, (double)rs.bytes / (double)N,
           (double)st_.candidates / (double)N, (unsigned long long)st_.news,
           (unsigned long long)st_.joins, (unsigned long long)st_.merges);
    fflush(stdout);
    if (rc == 0 && ro->held && !sigs) {
        rc = restore_phase(cl, &st, dir, &so, &co, ids, N, ro, arts, mh, &scr, texts);
        cl = NULL;
    }
    nf_cluster_free(cl);
    nf_cluster_free(ref);
    free(bsig);
    free(texts);
    nf_minhash_scratch_free(&scr);
    if (st)
        nf_store_close(st);
    nf_teststore_rmtree(dir);
    if (mismatches)
        fprintf(stderr, "bench_cluster: %zu results differ on a store with %zu MB\n", mismatches,
                budget_mb);
    return rc || mismatches ? 1 : 0;
}

int main(int argc, char **argv)
{
    size_t N = 100000, budgets[8], nbudgets = 0;
    bool store_only = false;
    restore_opts_t ro = {0};
    const char *tmp = getenv("TMPDIR"), *dir = tmp && *tmp ? tmp : "/tmp", *dump_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            N = 10000;
        else if (strcmp(argv[i], "--articles") == 0 && i + 1 < argc)
            N = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--budget-mb") == 0 && i + 1 < argc && nbudgets < 8)
            budgets[nbudgets++] = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
            dump_path = argv[++i];
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--store-only") == 0)
            store_only = true;
        else if (strcmp(argv[i], "--restore") == 0 && i + 1 < argc)
            ro.held = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--drop-caches") == 0)
            ro.drop_caches = true;
        else {
            fprintf(stderr,
                    "usage: bench_cluster [--quick] [--articles N] [--budget-mb M]... "
                    "[--dir D] [--store-only [--restore R [--drop-caches]]] [--dump FILE]\n");
            return 2;
        }
    }
    if (ro.held && !store_only) {
        fprintf(stderr, "bench_cluster: --restore needs --store-only\n");
        return 2;
    }
    uint64_t r = 42;
    for (int i = 0; i < VOCAB; i++) {
        int len = 3 + (int)(nf_wl_rand(&r) % 8);
        for (int k = 0; k < len; k++)
            vocab[i][k] = (char)('a' + nf_wl_rand(&r) % 26);
        vlen[i] = (unsigned char)len;
    }

    /* The corpus: bases, 30% of them with 1-5 near-duplicates, shuffled. */
    size_t NA = N + ro.held; /* the held-back articles come after the N */
    art_t *arts = calloc(NA, sizeof *arts);
    size_t n = 0;
    for (uint32_t b = 0; n < NA; b++) {
        unsigned copies = nf_wl_rand(&r) % 10 < 3 ? 1 + (unsigned)(nf_wl_rand(&r) % 5) : 0;
        for (unsigned k = 0; k <= copies && n < NA; k++)
            arts[n++] =
                (art_t){b, b, k == 0 ? 0 : 1 + (uint32_t)(nf_wl_rand(&r) % 10), nf_wl_rand(&r)};
    }
    for (size_t i = NA; i > 1; i--) {
        size_t j = nf_wl_rand(&r) % i;
        art_t t = arts[i - 1];
        arts[i - 1] = arts[j];
        arts[j] = t;
    }
    nf_id128_t *ids = malloc(NA * sizeof *ids);
    for (size_t i = 0; i < NA; i++)
        ids[i] = id_of(i);

    nf_minhash_opts_t mo;
    nf_minhash_opts_default(&mo);
    char err[256];
    nf_minhash_t *mh = nf_minhash_new(&mo, err, sizeof err);
    nf_cluster_opts_t co;
    nf_cluster_opts_default(&co);
    if (store_only) { /* (d) alone, unchecked: the sizes where the others do not fit */
        int rc = 0;
        for (size_t k = 0; k < nbudgets; k++)
            rc |= store_phase(N, ids, NULL, budgets[k], dir, arts, mh, &ro);
        return rc;
    }
    uint32_t *sigs = malloc(N * 128 * sizeof *sigs);
    char *texts = malloc((size_t)BATCH * TEXT_MAX);
    size_t *toff = malloc(BATCH * sizeof *toff), *tlen = malloc(BATCH * sizeof *tlen),
           *ttl = malloc(BATCH * sizeof *ttl);
    if (!mh || !arts || !ids || !sigs || !texts || !toff || !tlen || !ttl) {
        fprintf(stderr, "bench_cluster: out of memory\n");
        return 1;
    }
    nf_minhash_scratch_t s = {0};

    /* (a) signing alone; (c) signing + LSH + union-find, texts rendered outside
     * the clock. */
    for (int phase = 0; phase < 2; phase++) {
        nf_cluster_t *cl = phase == 1 ? nf_cluster_new(NULL, &co) : NULL;
        double t = 0;
        uint64_t shingles = 0;
        for (size_t at = 0; at < N; at += BATCH) {
            size_t m = N - at < BATCH ? N - at : BATCH;
            for (size_t i = 0; i < m; i++) {
                toff[i] = i * TEXT_MAX;
                tlen[i] = render(&arts[at + i], texts + toff[i], &ttl[i]);
            }
            double t0 = bench_now_s();
            for (size_t i = 0; i < m; i++) {
                const char *p = texts + toff[i];
                uint32_t *sig = sigs + (at + i) * 128;
                nf_minhash_sign_text(mh, &s, p, ttl[i], p + ttl[i], tlen[i] - ttl[i], sig);
                shingles += s.nshingles;
                if (cl) {
                    nf_cluster_result_t res;
                    nf_cluster_add(cl, ids[at + i], 1700000000000 + (int64_t)(at + i) * 1000, sig,
                                   &res);
                }
            }
            t += bench_now_s() - t0;
        }
        printf("{\"bench\":\"cluster\",\"phase\":\"%s\",\"articles\":%zu,"
               "\"seconds\":%.3f,"
               "\"articles_per_s\":%.0f,\"shingles_per_article\":%.1f}\n",
               phase == 0 ? "sign" : "sign+lsh+unionfind", N, t, (double)N / t,
               (double)shingles / (double)N);
        fflush(stdout);
        nf_cluster_free(cl);
    }

    /* (b) LSH + union-find alone over the signatures. */
    nf_cluster_t *cl = nf_cluster_new(NULL, &co);
    nf_cluster_result_t res;
    uint64_t actions[4] = {0};
    double t0 = bench_now_s();
    for (size_t i = 0; i < N; i++) {
        nf_cluster_add(cl, ids[i], 1700000000000 + (int64_t)i * 1000, sigs + i * 128, &res);
        actions[res.action]++;
    }
    double t = bench_now_s() - t0;
    nf_cluster_stats_t st;
    nf_cluster_stats(cl, &st);
    printf("{\"bench\":\"cluster\",\"phase\":\"lsh+unionfind\",\"articles\":%zu,"
           "\"seconds\":%.3f,"
           "\"articles_per_s\":%.0f,\"new\":%llu,\"joined\":%llu,\"merged\":%llu,"
           "\"candidates_per_article\":%.3f}\n",
           N, t, (double)N / t, (unsigned long long)actions[0], (unsigned long long)actions[1],
           (unsigned long long)actions[2], (double)st.candidates / (double)N);
    printf("{\"bench\":\"cluster\",\"metric\":\"memory\",\"articles\":%zu,"
           "\"entries\":%zu,"
           "\"bytes\":%zu,\"bytes_per_article\":%.0f,\"mb_per_million_articles\":"
           "%.1f,"
           "\"sig_bytes\":%zu,\"bucket_bytes\":%zu,\"parent_bytes\":%zu}\n",
           N, st.entries, st.bytes, (double)st.bytes / (double)N,
           (double)st.bytes / (double)N * 1e6 / 1048576.0, st.sig.bytes, st.bucket.bytes,
           st.parent.bytes);
    fflush(stdout);
    int store_rc = 0;
    for (size_t k = 0; k < nbudgets; k++)
        store_rc |= store_phase(N, ids, sigs, budgets[k], dir, arts, mh, &ro);

    /* Final clusters as indices. */
    uint32_t *byid = malloc(N * sizeof *byid), *root = malloc(N * sizeof *root);
    for (size_t i = 0; i < N; i++)
        byid[i] = (uint32_t)i;
    g_ids = ids;
    qsort(byid, N, sizeof *byid, cmp_id_idx);
    for (size_t i = 0; i < N; i++) {
        nf_id128_t cid;
        nf_cluster_find(cl, ids[i], &cid);
        /* the index of the cluster id, by binary search over byid */
        size_t lo = 0, hi = N;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            nf_id128_t x = ids[byid[mid]];
            if (x.hi < cid.hi || (x.hi == cid.hi && x.lo < cid.lo))
                lo = mid + 1;
            else
                hi = mid;
        }
        root[i] = byid[lo];
    }

    /* Candidate pairs: sharing a band key. */
    bk_t *bk = malloc(N * sizeof *bk);
    for (unsigned b = 0; b < 16; b++) {
        for (size_t i = 0; i < N; i++)
            bk[i] = (bk_t){nf_minhash_band_key(sigs + i * 128, b, 8), (uint32_t)i};
        qsort(bk, N, sizeof *bk, cmp_bk);
        for (size_t i = 0; i < N; i++)
            for (size_t j = i + 1; j < N && bk[j].key == bk[i].key; j++)
                push_pair(bk[i].doc, bk[j].doc);
    }
    /* Plus every pair within a planted group: rg as (group, article), sorted by group. */
    rg_t *rg = malloc(N * sizeof *rg);
    for (size_t i = 0; i < N; i++)
        rg[i] = (rg_t){arts[i].group, (uint32_t)i};
    qsort(rg, N, sizeof *rg, cmp_rg);
    for (size_t i = 0; i < N; i++)
        for (size_t j = i + 1; j < N && rg[j].root == rg[i].root; j++)
            push_pair(rg[i].group, rg[j].group);
    qsort(pairs, npairs, sizeof *pairs, cmp_pair);
    uint64_t tp = 0, fp = 0, fn = 0, cand = 0, truth = 0;
    /* Where the errors lie: false matches' lowest exact Jaccard, missed pairs'
     * highest. */
    double fp_min = 1.0, fn_max = 0.0;
    static uint64_t sa[MAXW], sb[MAXW];
    char *text = malloc(TEXT_MAX);
    /* --dump: every candidate pair's decision, as (a, b, matched) */
    uint32_t *recs = dump_path ? malloc(npairs * 3 * sizeof *recs) : NULL;
    if (dump_path && !recs) {
        fprintf(stderr, "bench_cluster: out of memory\n");
        return 1;
    }
    for (size_t k = 0; k < npairs; k++) {
        if (k > 0 && pairs[k].a == pairs[k - 1].a && pairs[k].b == pairs[k - 1].b)
            continue;
        const uint32_t *x = sigs + (size_t)pairs[k].a * 128, *y = sigs + (size_t)pairs[k].b * 128;
        bool shared = shares_band(x, y);
        bool matched = shared && nf_minhash_similarity(x, y, 128) >= co.threshold;
        if (recs && shared)
            memcpy(recs + 3 * cand, (uint32_t[3]){pairs[k].a, pairs[k].b, matched},
                   3 * sizeof *recs);
        cand += shared;
        size_t na = shingle_set(mh, &s, &arts[pairs[k].a], text, sa);
        size_t nb = shingle_set(mh, &s, &arts[pairs[k].b], text, sb);
        double j = jaccard(sa, na, sb, nb);
        bool is = j >= 0.85;
        if (matched && !is && j < fp_min)
            fp_min = j;
        if (!matched && is && j > fn_max)
            fn_max = j;
        truth += is;
        tp += matched && is;
        fp += matched && !is;
        fn += !matched && is;
    }
    printf("{\"bench\":\"cluster\",\"metric\":\"quality\",\"level\":\"match\","
           "\"articles\":%zu,"
           "\"candidate_pairs\":%llu,\"true_pairs\":%llu,\"matched_pairs\":%llu,"
           "\"precision\":%.4f,\"recall\":%.4f,\"false_match_min_jaccard\":%.4f,"
           "\"missed_max_jaccard\":%.4f}\n",
           N, (unsigned long long)cand, (unsigned long long)truth, (unsigned long long)(tp + fp),
           tp + fp ? (double)tp / (double)(tp + fp) : 1.0,
           tp + fn ? (double)tp / (double)(tp + fn) : 1.0, fp_min, fn_max);
    if (dump_path && dump_corpus(dump_path, arts, N, mh, &s, text, recs, cand) != 0)
        return 1;
    free(recs);

    /* Final clusters against planted groups, pairwise: counts of (cluster, group)
     * cells. */
    for (size_t i = 0; i < N; i++)
        rg[i] = (rg_t){root[i], arts[i].group};
    qsort(rg, N, sizeof *rg, cmp_rg);
    uint64_t same_c = 0, same_cg = 0, same_g = 0;
    for (size_t i = 0, j; i < N; i = j) {
        for (j = i; j < N && rg[j].root == rg[i].root; j++)
            ;
        uint64_t m = j - i;
        same_c += m * (m - 1) / 2;
        for (size_t a = i, bnd; a < j; a = bnd) {
            for (bnd = a; bnd < j && rg[bnd].group == rg[a].group; bnd++)
                ;
            uint64_t q = bnd - a;
            same_cg += q * (q - 1) / 2;
        }
    }
    for (size_t i = 0; i < N; i++)
        rg[i] = (rg_t){arts[i].group, 0};
    qsort(rg, N, sizeof *rg, cmp_rg);
    for (size_t i = 0, j; i < N; i = j) {
        for (j = i; j < N && rg[j].root == rg[i].root; j++)
            ;
        uint64_t m = j - i;
        same_g += m * (m - 1) / 2;
    }
    printf("{\"bench\":\"cluster\",\"metric\":\"quality\",\"level\":\"cluster_vs_"
           "planted\","
           "\"articles\":%zu,\"planted_pairs\":%llu,\"clustered_pairs\":%llu,"
           "\"precision\":%.4f,\"recall\":%.4f}\n",
           N, (unsigned long long)same_g, (unsigned long long)same_c,
           same_c ? (double)same_cg / (double)same_c : 1.0,
           same_g ? (double)same_cg / (double)same_g : 1.0);

    nf_cluster_free(cl);
    nf_minhash_scratch_free(&s);
    nf_minhash_free(mh);
    free(text);
    free(rg);
    free(pairs);
    free(bk);
    free(byid);
    free(root);
    free(sigs);
    free(texts);
    free(toff);
    free(tlen);
    free(ttl);
    free(ids);
    free(arts);
    return store_rc;
}
