/* bench_trend.c — the trending engine (src/engine/trend.c) on one thread: nf_trend_count
 * throughput on a Zipf(1.0) workload over 100k articles, sketch and exact modes; the cost of
 * handing panes over (take + merger add) and of one slide's merge (emit = score and rank one
 * window); memory of the counters and of the merger holding a full window.
 *
 * Events: 8 partitions split over 2 counters (by partition parity), event times spread evenly
 * over `span` with up to 2 s of disorder, processing time = event time. Every 10000 events both
 * counters hand over their final panes, the merger gets the watermarks and emits.
 *
 * Usage: bench_trend [events] [reps]   (defaults 2000000 and 3). One JSON object per line. */
#include "engine/trend.h"
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ARTICLES = 100000, PARTS = 8, COUNTERS = 2, ROUND = 10000 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct bench {
    nf_trend_merger_t *m;
    unsigned cur;
    size_t panes, pane_bytes, windows;
    double add_s;
    int errors;
} bench_t;

static int on_pane(void *ctx, int64_t start, const void *blob, size_t len)
{
    bench_t *b = ctx;
    (void)start;
    double t0 = now_s();
    if (nf_trend_merger_add_pane(b->m, b->cur, blob, len) != 0)
        b->errors++;
    b->add_s += now_s() - t0;
    b->panes++;
    b->pane_bytes += len;
    return 0;
}

static int on_window(void *ctx, int64_t start, int64_t end, const nf_trend_ranked_t *items,
                     size_t n)
{
    bench_t *b = ctx;
    (void)start;
    (void)end;
    (void)items;
    (void)n;
    b->windows++;
    return 0;
}

int main(int argc, char **argv)
{
    size_t nev = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    const int64_t t0 = 1700000000000ll, span = 2 * 3600000ll;

    static char ids[ARTICLES][33];
    for (uint32_t i = 0; i < ARTICLES; i++)
        nf_wl_article_id(i, ids[i]);
    nf_zipf_t z;
    if (nf_zipf_init(&z, ARTICLES, 1.0))
        return 1;
    uint32_t *art = malloc(sizeof *art * nev);
    int64_t *ts = malloc(sizeof *ts * nev);
    if (!art || !ts)
        return 1;
    uint64_t rng = 42;
    for (size_t i = 0; i < nev; i++) {
        art[i] = nf_zipf_next(&z, &rng);
        ts[i] = t0 + (int64_t)((double)i * (double)span / (double)nev) -
                (int64_t)(nf_wl_rand(&rng) % 2000);
    }

    for (int rep = 0; rep < reps; rep++) {
        for (int exact = 0; exact <= 1; exact++) {
            nf_trend_opts_t o;
            nf_trend_opts_default(&o);
            o.exact = exact;
            nf_trend_counter_t *c[COUNTERS];
            for (int i = 0; i < COUNTERS; i++)
                c[i] = nf_trend_counter_new(&o);
            bench_t b = {.m = nf_trend_merger_new(&o, COUNTERS)};
            double count_s = 0, take_s = 0, emit_s = 0, emit_max_s = 0;
            size_t late = 0, merger_max = 0, counter_max = 0, emits = 0;
            for (size_t i = 0; i < nev; i += ROUND) {
                size_t end = i + ROUND < nev ? i + ROUND : nev;
                double s0 = now_s();
                for (size_t k = i; k < end; k++) {
                    int32_t p = (int32_t)(k % PARTS);
                    int r = nf_trend_count(c[p % COUNTERS], p, ids[art[k]], 32, ts[k], ts[k]);
                    late += r == 1;
                    b.errors += r < 0;
                }
                double s1 = now_s();
                count_s += s1 - s0;
                int64_t now = ts[end - 1];
                for (unsigned k = 0; k < COUNTERS; k++) {
                    int64_t wm;
                    b.cur = k;
                    if (nf_trend_counter_take(c[k], now, on_pane, &b, &wm) < 0)
                        b.errors++;
                    nf_trend_merger_set_watermark(b.m, k, wm);
                    nf_trend_counter_stats_t cs;
                    nf_trend_counter_stats(c[k], &cs);
                    counter_max = cs.bytes > counter_max ? cs.bytes : counter_max;
                }
                double s2 = now_s();
                take_s += s2 - s1;
                size_t before = b.windows;
                if (nf_trend_merger_emit(b.m, on_window, NULL, &b) < 0)
                    b.errors++;
                double s3 = now_s();
                if (b.windows > before) {
                    emit_s += s3 - s2;
                    emits += b.windows - before;
                    double per = (s3 - s2) / (double)(b.windows - before);
                    emit_max_s = per > emit_max_s ? per : emit_max_s;
                }
                nf_trend_merger_stats_t ms;
                nf_trend_merger_stats(b.m, &ms);
                merger_max = ms.bytes > merger_max ? ms.bytes : merger_max;
            }
            take_s -= b.add_s;
            printf("{\"bench\":\"trend\",\"mode\":\"%s\",\"rep\":%d,\"events\":%zu,"
                   "\"articles\":%d,\"zipf_s\":1.0,\"partitions\":%d,\"counters\":%d,"
                   "\"window_ms\":%lld,\"slide_ms\":%lld,\"cms_width\":%u,\"cms_depth\":%u,"
                   "\"top_k\":%u,\"count_events_per_s\":%.0f,\"count_ns_per_event\":%.1f,"
                   "\"late\":%zu,\"panes\":%zu,\"pane_bytes_avg\":%.0f,"
                   "\"take_us_per_pane\":%.1f,\"merger_add_us_per_pane\":%.1f,"
                   "\"windows\":%zu,\"emit_ms_per_slide\":%.3f,\"emit_ms_max\":%.3f,"
                   "\"merger_bytes_full_window\":%zu,\"counter_bytes_max\":%zu,"
                   "\"errors\":%d}\n",
                   exact ? "exact" : "cms", rep, nev, ARTICLES, PARTS, COUNTERS,
                   (long long)o.window_ms, (long long)o.slide_ms, o.cms_width, o.cms_depth, o.top_k,
                   (double)nev / count_s, count_s * 1e9 / (double)nev, late, b.panes,
                   b.panes ? (double)b.pane_bytes / (double)b.panes : 0.0,
                   b.panes ? take_s * 1e6 / (double)b.panes : 0.0,
                   b.panes ? b.add_s * 1e6 / (double)b.panes : 0.0, b.windows,
                   emits ? emit_s * 1e3 / (double)emits : 0.0, emit_max_s * 1e3, merger_max,
                   counter_max, b.errors);
            fflush(stdout);
            for (int i = 0; i < COUNTERS; i++)
                nf_trend_counter_free(c[i]);
            nf_trend_merger_free(b.m);
        }
    }
    free(art);
    free(ts);
    nf_zipf_free(&z);
    return 0;
}
