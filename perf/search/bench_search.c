/* bench_search — the search index (src/serve/search.h) on a generated corpus, in process.
 *
 *   bench_search --corpus FILE.jsonl --queries FILE.jsonl --dir DIR [--articles N]
 *                [--ingest N] [--ingest-rate R] [--threads T] [--seconds S] [--memory-mb M]
 *                [--scan-max N] [--reuse 1]
 *
 * Corpus lines are perf/search/gen_corpus.py's ({"id", "title", "summary", "published_ms",
 * "topics"}); queries {"q": ...} in the index's syntax. Phase 1 indexes the first N articles
 * (nf_search_add: the job's insert path without the state reads) and reports articles/s, CPU
 * per article and the file's bytes per article. Phase 2 runs T threads of queries (the query
 * API's path: parse, then nf_search_run for the best 20) for S seconds while another thread
 * indexes the next --ingest articles at --ingest-rate a second (default 1,000; 0: as fast as it
 * goes), and reports queries/s, p50/p99 and the articles/s indexed meanwhile. Between the two
 * (untimed), the first 300 queries' best 20 are compared with what an unbounded scan
 * (scan_max 10^8) gives: the cost in ranking of the bound. One JSON object on stdout. */
#include "runtime/metrics.h"
#include "serve/search.h"

#include "../bench_clock.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    nf_id128_t id;
    char *title, *summary;
    int64_t published_ms;
    uint32_t topics[4];
    unsigned ntopics;
} doc_t;

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool parse_doc(const char *line, doc_t *d)
{
    cJSON *j = cJSON_Parse(line);
    const cJSON *id = cJSON_GetObjectItem(j, "id"), *t = cJSON_GetObjectItem(j, "title"),
                *s = cJSON_GetObjectItem(j, "summary"), *p = cJSON_GetObjectItem(j, "published_ms"),
                *tp = cJSON_GetObjectItem(j, "topics");
    bool ok = cJSON_IsString(id) && strlen(id->valuestring) == 32 && cJSON_IsString(t) &&
              cJSON_IsString(s) && cJSON_IsNumber(p);
    if (ok) {
        memset(d, 0, sizeof *d);
        for (int i = 0; i < 32; i++) {
            int v = hexval(id->valuestring[i]);
            ok &= v >= 0;
            if (i < 16)
                d->id.hi = d->id.hi << 4 | (uint64_t)(v & 15);
            else
                d->id.lo = d->id.lo << 4 | (uint64_t)(v & 15);
        }
        d->title = strdup(t->valuestring);
        d->summary = strdup(s->valuestring);
        d->published_ms = (int64_t)p->valuedouble;
        const cJSON *x;
        cJSON_ArrayForEach(x, tp) if (cJSON_IsNumber(x) && d->ntopics < 4) d->topics[d->ntopics++] =
            (uint32_t)x->valueint;
    }
    cJSON_Delete(j);
    return ok;
}

/* Lines of path (each at most 64 KB), parsed by fn into an array of size elements. */
static size_t read_lines(const char *path, size_t max, void **out, size_t size,
                         bool (*fn)(const char *, void *))
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_search: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t n = 0, cap = 1024;
    char *arr = malloc(cap * size), *line = malloc(65536);
    while (n < max && fgets(line, 65536, f)) {
        if (n == cap) {
            char *grown = realloc(arr, (cap *= 2) * size);
            if (!grown) {
                fprintf(stderr, "bench_search: out of memory reading %s\n", path);
                exit(1);
            }
            arr = grown;
        }
        if (fn(line, arr + n * size))
            n++;
    }
    fclose(f);
    free(line);
    *out = arr;
    return n;
}

static bool doc_fn(const char *line, void *out)
{
    return parse_doc(line, out);
}

/* A query and its kind (gen_corpus.py's "kind": one, two, phrase, ...; per-kind figures). */
#define KINDS 8
typedef struct {
    char *q;
    int kind;
} query_t;
static char g_kinds[KINDS][16];
static int g_nkinds;

static bool query_fn(const char *line, void *out)
{
    cJSON *j = cJSON_Parse(line);
    const cJSON *q = cJSON_GetObjectItem(j, "q"), *k = cJSON_GetObjectItem(j, "kind");
    bool ok = cJSON_IsString(q);
    if (ok) {
        query_t *qq = out;
        qq->q = strdup(q->valuestring);
        qq->kind = 0;
        const char *name = cJSON_IsString(k) ? k->valuestring : "any";
        while (qq->kind < g_nkinds && strcmp(g_kinds[qq->kind], name) != 0)
            qq->kind++;
        if (qq->kind == g_nkinds && g_nkinds < KINDS)
            snprintf(g_kinds[g_nkinds++], sizeof g_kinds[0], "%s", name);
        if (qq->kind == KINDS)
            qq->kind = KINDS - 1;
    }
    cJSON_Delete(j);
    return ok;
}

typedef struct {
    nf_search_t *s;
    query_t *queries;
    size_t nq;
    double until;
    unsigned index;
    int64_t now_ms;
    double *lat; /* seconds per query */
    size_t n, cap;
    uint64_t matches, capped, errors, hits;
    double kind_s[KINDS];
    uint64_t kind_n[KINDS];
} qthread_t;

static bool keep_all(void *arg, const nf_search_hit_t *h)
{
    (void)arg;
    (void)h;
    return true;
}

static void *query_loop(void *arg)
{
    qthread_t *t = arg;
    size_t i = t->index * 7919;
    while (bench_now_s() < t->until) {
        const query_t *qq = &t->queries[i++ % t->nq];
        const char *q = qq->q;
        double t0 = bench_now_s();
        nf_search_query_t sq;
        nf_search_result_t res;
        char err[256];
        if (nf_search_query_parse(q, strlen(q), &sq, err, sizeof err) != 0 ||
            nf_search_run(t->s, &sq, -1, 0, t->now_ms, 20, keep_all, NULL, &res, err, sizeof err) !=
                0) {
            t->errors++;
            continue;
        }
        t->matches += res.matches;
        t->capped += res.capped;
        t->hits += res.n;
        nf_search_result_free(&res);
        if (t->n == t->cap)
            t->lat = realloc(t->lat, (t->cap = t->cap ? t->cap * 2 : 65536) * sizeof *t->lat);
        t->lat[t->n++] = bench_now_s() - t0;
        t->kind_s[qq->kind] += t->lat[t->n - 1];
        t->kind_n[qq->kind]++;
    }
    return NULL;
}

typedef struct {
    nf_search_t *s;
    doc_t *docs;
    size_t n;
    double until, rate; /* articles/s; 0: as fast as it goes */
    atomic_size_t done;
} ithread_t;

static void *ingest_loop(void *arg)
{
    ithread_t *t = arg;
    double start = bench_now_s();
    for (size_t i = 0; i < t->n && bench_now_s() < t->until; i++) {
        if (t->rate > 0) {
            double due = start + (double)i / t->rate, wait = due - bench_now_s();
            if (wait > 0)
                usleep((useconds_t)(wait * 1e6));
        }
        doc_t *d = &t->docs[i];
        nf_search_add(t->s, d->id, d->title, d->summary, d->published_ms, d->topics, d->ntopics);
        atomic_store(&t->done, i + 1);
    }
    nf_search_flush(t->s);
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int64_t file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    const char *corpus = NULL, *qpath = NULL, *dir = NULL;
    size_t articles = (size_t)-1, ingest = 100000;
    unsigned threads = 2, memory_mb = 64;
    unsigned scan_max = 0;
    bool reuse = false; /* --reuse 1: keep DIR's index from a run before (phase 1 skipped) */
    double seconds = 10, rate = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--corpus"))
            corpus = argv[i + 1];
        else if (!strcmp(argv[i], "--queries"))
            qpath = argv[i + 1];
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--articles"))
            articles = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--ingest"))
            ingest = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--threads"))
            threads = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--scan-max"))
            scan_max = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ingest-rate"))
            rate = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--reuse"))
            reuse = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--memory-mb"))
            memory_mb = (unsigned)atoi(argv[i + 1]);
    }
    if (!corpus || !qpath || !dir || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: bench_search --corpus F --queries F --dir D [--articles N] "
                        "[--ingest N] [--ingest-rate R] [--threads T] [--seconds S] "
                        "[--memory-mb M] [--scan-max N] [--reuse 1]\n");
        return 2;
    }
    doc_t *docs;
    query_t *queries;
    size_t want = articles == (size_t)-1 ? (size_t)-1 : articles + ingest;
    size_t nd = read_lines(corpus, want, (void **)&docs, sizeof *docs, doc_fn);
    size_t nq = read_lines(qpath, 1000000, (void **)&queries, sizeof *queries, query_fn);
    if (articles > nd)
        articles = nd > ingest ? nd - ingest : nd;
    if (nq == 0 || articles == 0) {
        fprintf(stderr, "bench_search: no queries or no articles\n");
        return 2;
    }
    nf_metrics_init(1);
    char path[4096];
    snprintf(path, sizeof path, "%s/search.db", dir);
    if (!reuse)
        unlink(path);
    int64_t newest = 0;
    for (size_t i = 0; i < nd; i++)
        newest = docs[i].published_ms > newest ? docs[i].published_ms : newest;
    nf_search_opts_t o = {.path = path,
                          .retention_ms = 3650ll * 24 * 3600 * 1000, /* the corpus's dates stand */
                          .max_articles = 1000000000,
                          .memory_mb = memory_mb,
                          .readers = threads,
                          .scan_max = scan_max};
    char err[256];
    nf_search_t *s = nf_search_start(&o, err, sizeof err);
    if (!s) {
        fprintf(stderr, "bench_search: %s\n", err);
        return 1;
    }
    for (int i = 0; i < 500; i++) { /* the thread opens the file */
        nf_search_result_t r;
        nf_search_query_t q;
        nf_search_query_parse("x", 1, &q, err, sizeof err);
        if (nf_search_run(s, &q, -1, 0, newest, 1, keep_all, NULL, &r, err, sizeof err) == 0) {
            nf_search_result_free(&r);
            break;
        }
        usleep(10000);
    }

    double c0 = bench_cpu_s(), t0 = bench_now_s();
    for (size_t i = 0; i < articles && !reuse; i++)
        if (nf_search_add(s, docs[i].id, docs[i].title, docs[i].summary, docs[i].published_ms,
                          docs[i].topics, docs[i].ntopics) < 0) {
            fprintf(stderr, "bench_search: indexing failed at %zu\n", i);
            return 1;
        }
    nf_search_flush(s);
    double index_s = bench_now_s() - t0, index_cpu = bench_cpu_s() - c0;
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    int64_t disk = file_size(path) + file_size(wal);

    /* What the bound on scored matches costs in ranking: the first 300 queries' best 20 with
     * the bound and with none (a second index object on the same file), compared. */
    nf_search_opts_t uo = o;
    uo.scan_max = 100000000;
    nf_search_t *su = nf_search_start(&uo, err, sizeof err);
    double jsum = 0;
    size_t jn = 0, jsame = 0;
    for (size_t i = 0; su && i < nq && i < 300; i++) {
        nf_search_query_t q;
        nf_search_result_t a, b;
        if (nf_search_query_parse(queries[i].q, strlen(queries[i].q), &q, err, sizeof err) != 0)
            continue;
        int ra = -1, rb = -1;
        for (int t = 0; t < 200; t++) {
            ra = nf_search_run(s, &q, -1, 0, newest, 20, keep_all, NULL, &a, err, sizeof err);
            if (ra != -EAGAIN)
                break;
            usleep(10000);
        }
        for (int t = 0; t < 200; t++) {
            rb = nf_search_run(su, &q, -1, 0, newest, 20, keep_all, NULL, &b, err, sizeof err);
            if (rb != -EAGAIN)
                break;
            usleep(10000);
        }
        if (ra == 0 && rb == 0) {
            size_t common = 0;
            for (size_t x = 0; x < a.n; x++)
                for (size_t y = 0; y < b.n; y++)
                    common +=
                        a.hits[x].id.hi == b.hits[y].id.hi && a.hits[x].id.lo == b.hits[y].id.lo;
            size_t uni = a.n + b.n - common;
            jsum += uni ? (double)common / (double)uni : 1;
            jsame += common == a.n && common == b.n;
            jn++;
        }
        if (ra == 0)
            nf_search_result_free(&a);
        if (rb == 0)
            nf_search_result_free(&b);
    }
    nf_search_stop(su);

    ithread_t it = {.s = s, .docs = docs + articles, .n = nd - articles};
    qthread_t *qt = calloc(threads, sizeof *qt);
    pthread_t *th = calloc(threads + 1, sizeof *th);
    double start = bench_now_s(), until = start + seconds;
    it.until = until;
    it.rate = rate;
    double c1 = bench_cpu_s();
    for (unsigned i = 0; i < threads; i++) {
        qt[i] = (qthread_t){
            .s = s, .queries = queries, .nq = nq, .until = until, .index = i, .now_ms = newest};
        pthread_create(&th[i], NULL, query_loop, &qt[i]);
    }
    if (it.n)
        pthread_create(&th[threads], NULL, ingest_loop, &it);
    for (unsigned i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double run_s = bench_now_s() - start;
    if (it.n)
        pthread_join(th[threads], NULL);
    double run_cpu = bench_cpu_s() - c1;
    size_t total = 0;
    uint64_t matches = 0, capped = 0, errors = 0, hits = 0;
    for (unsigned i = 0; i < threads; i++)
        total += qt[i].n, matches += qt[i].matches, capped += qt[i].capped, errors += qt[i].errors,
            hits += qt[i].hits;
    double *lat = malloc((total ? total : 1) * sizeof *lat);
    size_t k = 0;
    for (unsigned i = 0; i < threads; i++) {
        memcpy(lat + k, qt[i].lat, qt[i].n * sizeof *lat);
        k += qt[i].n;
    }
    qsort(lat, total, sizeof *lat, by_value);
    double p50 = total ? lat[total / 2] : 0, p99 = total ? lat[(size_t)((double)total * 0.99)] : 0;
    size_t ingested = atomic_load(&it.done);
    uint64_t n_articles, epoch;
    nf_search_status(s, &n_articles, &epoch);
    printf("{\"bench\":\"search\",\"engine\":\"newsflow (SQLite FTS5 %s)\",\"articles\":%zu,"
           "\"index_s\":%.3f,\"articles_per_s\":%.0f,\"index_cpu_us_per_article\":%.2f,"
           "\"disk_bytes\":%lld,\"bytes_per_article\":%.0f,\"sqlite_memory_bytes\":%lld,"
           "\"rss_kb\":%ld,\"threads\":%u,\"seconds\":%.2f,\"queries\":%zu,\"qps\":%.0f,"
           "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"cpu_ms_per_query_with_ingest\":%.3f,\"mean_matches\":"
           "%.1f,"
           "\"capped_share\":%.4f,\"mean_hits\":%.2f,\"errors\":%llu,"
           "\"ingested_while_querying\":%zu,\"ingest_articles_per_s\":%.0f,"
           "\"ingest_rate_asked\":%.0f,\"articles_at_end\":%llu,\"scan_max\":%u,\"top20_vs_"
           "unbounded_jaccard\":%.4f,"
           "\"top20_vs_unbounded_same_share\":%.4f,\"top20_compared\":%zu}\n",
           sqlite3_libversion(), articles, index_s, (double)articles / index_s,
           index_cpu * 1e6 / (double)articles, (long long)disk, (double)disk / (double)articles,
           (long long)nf_search_memory_bytes(), rss_kb(), threads, run_s, total,
           (double)total / run_s, p50 * 1e3, p99 * 1e3, total ? run_cpu * 1e3 / (double)total : 0,
           total ? (double)matches / (double)total : 0, total ? (double)capped / (double)total : 0,
           total ? (double)hits / (double)total : 0, (unsigned long long)errors, ingested,
           (double)ingested / run_s, rate, (unsigned long long)n_articles,
           scan_max ? scan_max : NF_SEARCH_SCAN_MAX, jn ? jsum / (double)jn : 0,
           jn ? (double)jsame / (double)jn : 0, jn);
    fflush(stdout);
    /* per kind: queries and mean ms, as one more JSON object */
    printf("{\"bench\":\"search_by_kind\"");
    for (int kk = 0; kk < g_nkinds; kk++) {
        double sum = 0;
        uint64_t n = 0;
        for (unsigned i = 0; i < threads; i++)
            sum += qt[i].kind_s[kk], n += qt[i].kind_n[kk];
        printf(",\"%s\":{\"queries\":%llu,\"mean_ms\":%.3f}", g_kinds[kk], (unsigned long long)n,
               n ? sum * 1e3 / (double)n : 0);
    }
    printf("}\n");
    nf_search_stop(s);
    return errors ? 1 : 0;
}
