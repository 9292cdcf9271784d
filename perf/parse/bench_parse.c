/* bench_parse.c — throughput of newsflow's parse + normalize (src/feed/feed.h) on one large feed
 * file; perf/run_parse.sh puts it side by side with xmllint and feedparser on the same file, and
 * perf/parse/RESULTS.md has the figures.
 *
 * Usage: bench_parse FILE [--runs K] [--url URL] [--no-sax] [--sha256 auto|portable|shani]
 *
 * The file is read into memory once; then nf_feed_parse() runs K times (default 7) on it with
 * the default limits except max_bytes and max_items, raised to the file's size and to "all",
 * so the whole document is parsed and every item normalized (text, dates, links, ids,
 * content_hash), exactly as the crawl actor does per fetched body. A run is timed from the call
 * to its return; nf_feed_free() is outside the timed span. Before the timed runs, one untimed
 * run warms caches and the allocator.
 *
 * As a floor, the same bytes also go through libxml2's SAX2 parser with the options
 * nf_feed_parse uses and no handlers at all (--no-sax skips it): what libxml2 costs on its own
 * in-process, without xmllint's process start, file read and xmlTextReader node building —
 * fed in chunks to the push parser as nf_feed_parse does (parse.libxml2_sax_only), and as one
 * memory input (parse.libxml2_sax_only_memory: what nf_feed_parse did before; see
 * perf/README "Parse").
 *
 * --sha256 forces SHA-256's compression function (algo/sha256.h) for an A/B in one build.
 *
 * Output: one JSON object per line on stdout, "bench" naming it; MB are 10^6 bytes. Progress
 * and errors go to stderr. Nothing here judges the timings. */
#include "algo/sha256.h"
#include "feed/feed.h"

#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS 1000

typedef struct {
    double min, median, max;
} stats_t;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this (single-threaded) process: unlike wall time, barely moved by other
 * processes competing for the cores, so ratios taken with it drift less on a shared machine. */
static double cpu_s(void)
{
    return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static stats_t summarize(double *t, unsigned n)
{
    qsort(t, n, sizeof *t, cmp_double);
    stats_t s = {t[0], n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2, t[n - 1]};
    return s;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        perror(path);
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    rewind(f);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "bench_parse: cannot read %s\n", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static void print_array(const char *key, const double *t, unsigned n)
{
    printf(",\"%s\":[", key);
    for (unsigned i = 0; i < n; i++)
        printf("%s%.4f", i ? "," : "", t[i]);
    putchar(']');
}

/* The common fields, from wall times t and CPU times c (both [0..runs), sorted here); the
 * caller adds its own and closes the object. Returns the median wall time. */
static double print_stats(const char *bench, const char *path, size_t len, double *t, double *c,
                          unsigned runs)
{
    stats_t s = summarize(t, runs), cs = summarize(c, runs);
    printf("{\"bench\":\"%s\",\"file\":\"%s\",\"bytes\":%zu,\"runs\":%u,\"min_s\":%.4f,"
           "\"median_s\":%.4f,\"max_s\":%.4f,\"mb_per_s\":%.1f,\"mb_per_s_best\":%.1f,"
           "\"cpu_median_s\":%.4f,\"mb_per_cpu_s\":%.1f",
           bench, path, len, runs, s.min, s.median, s.max, (double)len / 1e6 / s.median,
           (double)len / 1e6 / s.min, cs.median, (double)len / 1e6 / cs.median);
    print_array("times_s", t, runs);
    print_array("cpu_times_s", c, runs);
    return s.median;
}

/* One SAX2 pass with no handlers: libxml2's tokenizer, UTF-8 checks and name interning only.
 * push: as nf_feed_parse feeds it (xmlParseChunk, NF_FEED_XML_CHUNK bytes a call); else the
 * whole document as one memory input (xmlParseDocument), as it did before. */
static double sax_only(const char *data, size_t len, bool push, double *cpu)
{
    double t0 = now_s(), c0 = cpu_s();
    size_t first = len < 4 ? len : 4;
    xmlParserCtxtPtr ctxt = push ? xmlCreatePushParserCtxt(NULL, NULL, data, (int)first, NULL)
                                 : xmlCreateMemoryParserCtxt(data, (int)len);
    if (!ctxt)
        return -1;
    xmlCtxtUseOptions(ctxt, XML_PARSE_RECOVER | XML_PARSE_NONET | XML_PARSE_NOERROR |
                                XML_PARSE_NOWARNING);
    memset(ctxt->sax, 0, sizeof *ctxt->sax);
    ctxt->sax->initialized = XML_SAX2_MAGIC;
    if (push) {
        for (size_t off = first; off < len;) {
            size_t k = len - off < NF_FEED_XML_CHUNK ? len - off : NF_FEED_XML_CHUNK;
            xmlParseChunk(ctxt, data + off, (int)k, 0);
            off += k;
        }
        xmlParseChunk(ctxt, NULL, 0, 1);
    } else {
        xmlParseDocument(ctxt);
    }
    int ok = ctxt->wellFormed;
    xmlFreeParserCtxt(ctxt);
    double t = now_s() - t0;
    *cpu = cpu_s() - c0;
    return ok ? t : -1;
}

static void usage(FILE *f)
{
    fputs("usage: bench_parse FILE [--runs K] [--url URL] [--no-sax] [--sha256 IMPL]\n"
          "  --runs K   timed runs of nf_feed_parse (default 7), after one warm-up run\n"
          "  --url URL  feed URL given to the parser (base of relative links)\n"
          "  --no-sax   skip the libxml2 SAX2-only floor\n"
          "  --sha256 auto|portable|shani   SHA-256 compression function (default auto)\n",
          f);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *url = "https://news.example.com/rss.xml";
    unsigned runs = 7;
    bool sax = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--runs") && v) {
            runs = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (!strcmp(a, "--url") && v) {
            url = v, i++;
        } else if (!strcmp(a, "--sha256") && v) {
            nf_sha256_impl_t which = !strcmp(v, "portable") ? NF_SHA256_PORTABLE
                                     : !strcmp(v, "shani")  ? NF_SHA256_SHANI
                                                            : NF_SHA256_AUTO;
            if (nf_sha256_use(which) != 0) {
                fprintf(stderr, "bench_parse: --sha256 %s: not available on this CPU\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--no-sax")) {
            sax = false;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (a[0] != '-' && !path) {
            path = a;
        } else {
            fprintf(stderr, "bench_parse: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!path || runs == 0 || runs > MAX_RUNS) {
        usage(stderr);
        return 2;
    }
    size_t len;
    char *data = read_file(path, &len);
    if (!data)
        return 1;
    nf_feed_global_init();
    nf_feed_limits_t lim;
    nf_feed_limits_default(&lim);
    lim.max_bytes = len;
    lim.max_items = ~0u;

    static double t[MAX_RUNS], c[MAX_RUNS];
    char err[256];
    nf_feed_t f;
    size_t nitems = 0, nlinked = 0;
    unsigned warnings = 0;
    const char *format = "?";
    for (unsigned r = 0; r <= runs; r++) { /* r == 0: warm-up */
        double t0 = now_s(), c0 = cpu_s();
        int rc = nf_feed_parse(&f, data, len, url, 1763719200000, &lim, err, sizeof err);
        double dt = now_s() - t0, dc = cpu_s() - c0;
        if (rc != NF_FEED_OK) {
            fprintf(stderr, "bench_parse: %s: %s (%s)\n", path, nf_feed_strerror(rc), err);
            free(data);
            return 1;
        }
        nitems = f.nitems;
        nlinked = 0;
        for (size_t i = 0; i < f.nitems; i++)
            nlinked += f.items[i].url != NULL;
        warnings = f.warnings;
        format = nf_feed_format_name(f.format);
        nf_feed_free(&f);
        if (r > 0) {
            t[r - 1] = dt;
            c[r - 1] = dc;
        }
        fprintf(stderr, "bench_parse: %s run %u: %.3f s\n", r ? "timed" : "warm-up", r, dt);
    }
    double median = print_stats("parse.newsflow", path, len, t, c, runs);
    printf(",\"format\":\"%s\",\"items\":%zu,\"items_with_url\":%zu,\"warnings\":%u,"
           "\"items_per_s\":%.0f,\"sha256\":\"%s\"}\n",
           format, nitems, nlinked, warnings, (double)nitems / median,
           nf_sha256_impl() == NF_SHA256_SHANI ? "shani" : "portable");

    for (int push = 1; sax && push >= 0; push--) {
        unsigned n = 0;
        for (unsigned r = 0; r <= runs; r++) {
            double dc, dt = sax_only(data, len, push, &dc);
            if (dt < 0) {
                fprintf(stderr, "bench_parse: libxml2 found %s not well-formed\n", path);
                break;
            }
            if (r > 0) {
                c[n] = dc;
                t[n++] = dt;
            }
        }
        if (n) {
            (void)print_stats(push ? "parse.libxml2_sax_only" : "parse.libxml2_sax_only_memory",
                              path, len, t, c, n);
            puts("}");
        }
    }
    fflush(stdout);
    free(data);
    xmlCleanupParser();
    return 0;
}
