/* The ingest SLO's series (ingest_latency.h) against a reference model: whatever the order of
 * new articles, epoch cuts and commits, an article is observed exactly once, at the first commit
 * of an epoch at or after its own cut, with the latency from that commit; publication latency only
 * for articles with a date; past the bound, the unobserved counter takes the rest. */
#include "actors/ingest_latency.h"
#include "nf_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of a series line "name{labels} v" in the registry's text. */
static double series(const char *line)
{
    char *text = NULL;
    if (nf_metrics_render(&text) <= 0)
        return -1;
    const char *p = strstr(text, line);
    double v = p ? strtod(p + strlen(line), NULL) : -1;
    free(text);
    return v;
}

typedef struct {
    int64_t fetched, published;
    uint64_t epoch; /* 0: not cut yet */
} art_t;

static void test_model(void)
{
    static nf_ingest_latency_metrics_t m;
    nf_ingest_latency_metrics(&m);
    uint64_t seed = 44;
    for (int round = 0; round < 50; round++) {
        double base_f = series("newsflow_ingest_latency_seconds_count{from=\"fetched\"} ");
        double base_p = series("newsflow_ingest_latency_seconds_count{from=\"published\"} ");
        double base_fs = series("newsflow_ingest_latency_seconds_sum{from=\"fetched\"} ");
        nf_ingest_latency_t *l = nf_ingest_latency_new(&m, 1 << 16);
        NF_REQUIRE(l);
        enum { N = 4000 };
        static art_t model[N];
        size_t n = 0, observed_f = 0, observed_p = 0;
        double sum_f = 0;
        uint64_t epoch = 0, committed = 0;
        int64_t now = 1000000;
        while (n < N || committed < epoch) {
            uint64_t r = nf_test_rand(&seed) % 100;
            now += 1000 * (int64_t)(nf_test_rand(&seed) % 3); /* whole seconds: exact sums */
            if (r < 80 && n < N) {
                int64_t pub = nf_test_rand(&seed) % 2 ? now - 5000 : 0;
                model[n] = (art_t){now, pub, 0};
                nf_ingest_latency_add(l, now, pub);
                n++;
            } else if (r < 92 || n == N) {
                /* at most 15 epochs cut and not committed: more are merged (test_bound) */
                if ((r % 2 || committed == epoch) && epoch - committed < 15) {
                    epoch++;
                    nf_ingest_latency_cut(l, epoch);
                    for (size_t i = 0; i < n; i++)
                        if (!model[i].epoch)
                            model[i].epoch = epoch;
                } else {
                    committed += 1 + nf_test_rand(&seed) % (epoch - committed);
                    nf_ingest_latency_committed(l, committed, now);
                    for (size_t i = 0; i < n; i++)
                        if (model[i].epoch && model[i].epoch <= committed) {
                            observed_f++;
                            sum_f += (double)(now - model[i].fetched) / 1000;
                            observed_p += model[i].published != 0;
                            model[i].epoch = UINT64_MAX; /* observed */
                        }
                }
            }
        }
        size_t waiting = 0;
        for (size_t i = 0; i < n; i++)
            waiting += model[i].epoch != UINT64_MAX;
        NF_CHECK_EQ(nf_ingest_latency_waiting(l), waiting);
        NF_CHECK_EQ(series("newsflow_ingest_latency_seconds_count{from=\"fetched\"} ") - base_f,
                    (double)observed_f);
        NF_CHECK_EQ(series("newsflow_ingest_latency_seconds_count{from=\"published\"} ") - base_p,
                    (double)observed_p);
        NF_CHECK_EQ(series("newsflow_ingest_latency_seconds_sum{from=\"fetched\"} ") - base_fs,
                    sum_f);
        nf_ingest_latency_free(l);
    }
}

/* Past the bound, an article is counted as unobserved, and the ones kept are still observed. */
static void test_bound(void)
{
    static nf_ingest_latency_metrics_t m;
    nf_ingest_latency_metrics(&m);
    uint64_t lost0 = nf_counter_value(m.unobserved);
    double base = series("newsflow_ingest_latency_seconds_count{from=\"fetched\"} ");
    nf_ingest_latency_t *l = nf_ingest_latency_new(&m, 1000);
    NF_REQUIRE(l);
    for (int i = 0; i < 1500; i++)
        nf_ingest_latency_add(l, 1000, 0);
    NF_CHECK_EQ(nf_counter_value(m.unobserved) - lost0, 500u);
    nf_ingest_latency_cut(l, 7);
    nf_ingest_latency_committed(l, 6, 2000); /* an earlier epoch: nothing of 7's */
    NF_CHECK_EQ(nf_ingest_latency_waiting(l), 1000u);
    nf_ingest_latency_committed(l, 7, 2000);
    NF_CHECK_EQ(nf_ingest_latency_waiting(l), 0u);
    NF_CHECK_EQ(series("newsflow_ingest_latency_seconds_count{from=\"fetched\"} ") - base, 1000.0);
    /* Many cuts without a commit: merged, never lost. */
    for (uint64_t e = 8; e < 100; e++) {
        nf_ingest_latency_add(l, 1000, 0);
        nf_ingest_latency_cut(l, e);
    }
    nf_ingest_latency_committed(l, 99, 3000);
    NF_CHECK_EQ(nf_ingest_latency_waiting(l), 0u);
    NF_CHECK_EQ(series("newsflow_ingest_latency_seconds_count{from=\"fetched\"} ") - base, 1092.0);
    nf_ingest_latency_free(l);
}

int main(void)
{
    if (nf_metrics_init(1) != 0)
        return 1;
    NF_RUN(test_model);
    NF_RUN(test_bound);
    return nf_test_report();
}
