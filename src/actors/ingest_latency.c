/* ingest_latency.c — articles waiting for their epoch's commit, then observed
 * (ingest_latency.h). */
#include "actors/ingest_latency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double nf_ingest_latency_bounds[] = {0.5, 1,   2.5, 5,    10,   15,   30,    60,   120,
                                           300, 600, 900, 1800, 3600, 7200, 21600, 86400};
const unsigned nf_ingest_latency_nbounds =
    sizeof nf_ingest_latency_bounds / sizeof nf_ingest_latency_bounds[0];

enum {
    MARKS = 16,
    TRACES = 256
}; /* epochs cut and not yet committed (more are merged into
    * the last); sampled articles waiting */

typedef struct {
    nf_trace_ctx_t ctx;
    int64_t start_ns;
    uint64_t epoch; /* 0: not cut yet */
    char article_id[33];
} traced_t;

typedef struct {
    int64_t fetched_ms, published_ms;
} entry_t;

struct nf_ingest_latency {
    const nf_ingest_latency_metrics_t *m;
    entry_t *e;
    size_t n, cap, max;
    struct {
        uint64_t epoch;
        size_t end; /* the epoch's articles: e[previous mark's end .. end) */
    } marks[MARKS];
    unsigned nmarks;
    traced_t traced[TRACES];
    unsigned ntraced;
};

void nf_ingest_latency_metrics(nf_ingest_latency_metrics_t *m)
{
    static const char help[] =
        "Time from an article's fetch (from=fetched) or its feed's publication date "
        "(from=published: items with a real date only) to the commit of the epoch that carried "
        "it out: the ingest SLO (docs/slo.md). New articles only; observed at the commit.";
    nf_metrics_histogram("newsflow_ingest_latency_seconds", help, "from=\"fetched\"",
                         nf_ingest_latency_bounds, nf_ingest_latency_nbounds, &m->fetched);
    nf_metrics_histogram("newsflow_ingest_latency_seconds", help, "from=\"published\"",
                         nf_ingest_latency_bounds, nf_ingest_latency_nbounds, &m->published);
    nf_metrics_counter("newsflow_ingest_latency_unobserved_total",
                       "New articles newsflow_ingest_latency_seconds did not observe: more were "
                       "waiting for their epoch's commit on one shard than it keeps (65536).",
                       NULL, 0, &m->unobserved);
}

nf_ingest_latency_t *nf_ingest_latency_new(const nf_ingest_latency_metrics_t *m, size_t max)
{
    nf_ingest_latency_t *l = calloc(1, sizeof *l);
    if (l) {
        l->m = m;
        l->max = max;
    }
    return l;
}

void nf_ingest_latency_free(nf_ingest_latency_t *l)
{
    if (l)
        free(l->e);
    free(l);
}

void nf_ingest_latency_add(nf_ingest_latency_t *l, int64_t fetched_ms, int64_t published_ms)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        entry_t *e =
            l->n < l->max ? realloc(l->e, (cap < l->max ? cap : l->max) * sizeof *e) : NULL;
        if (!e) {
            nf_counter_inc(l->m->unobserved);
            return;
        }
        l->e = e;
        l->cap = cap < l->max ? cap : l->max;
    }
    l->e[l->n++] = (entry_t){fetched_ms, published_ms};
}

void nf_ingest_latency_trace(nf_ingest_latency_t *l, const nf_trace_ctx_t *ctx, int64_t start_ns,
                             const char *article_id)
{
    if (l->ntraced == TRACES)
        return;
    traced_t *t = &l->traced[l->ntraced++];
    t->ctx = *ctx;
    t->start_ns = start_ns;
    t->epoch = 0;
    snprintf(t->article_id, sizeof t->article_id, "%s", article_id);
}

/* The sampled articles of epochs up to `epoch`: their article.commit spans. */
static void traces_committed(nf_ingest_latency_t *l, uint64_t epoch)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < l->ntraced; i++) {
        traced_t *t = &l->traced[i];
        if (!t->epoch || t->epoch > epoch) {
            l->traced[kept++] = *t;
            continue;
        }
        nf_span_t sp;
        nf_span_child(&sp, "article.commit", &t->ctx, NF_SPAN_INTERNAL);
        sp.start_ns = t->start_ns;
        sp.link = nf_trace_epoch(t->epoch);
        nf_span_str(&sp, "newsflow.article_id", t->article_id);
        nf_span_int(&sp, "newsflow.epoch", (int64_t)t->epoch);
        nf_span_end(&sp, NULL);
        nf_span_export(&sp, false);
    }
    l->ntraced = kept;
}

void nf_ingest_latency_cut(nf_ingest_latency_t *l, uint64_t epoch)
{
    for (unsigned i = 0; i < l->ntraced; i++)
        if (!l->traced[i].epoch)
            l->traced[i].epoch = epoch;
    size_t from = l->nmarks ? l->marks[l->nmarks - 1].end : 0;
    if (from == l->n)
        return; /* no article in this epoch */
    unsigned last = l->nmarks - 1;
    if (l->nmarks == MARKS) { /* commits fell far behind: observed with the later epoch */
        l->marks[last].epoch = epoch;
        l->marks[last].end = l->n;
        return;
    }
    l->marks[l->nmarks].epoch = epoch;
    l->marks[l->nmarks++].end = l->n;
}

static void observe(const nf_ingest_latency_t *l, const entry_t *e, int64_t now_ms)
{
    int64_t f = now_ms - e->fetched_ms;
    nf_histogram_observe(l->m->fetched, f > 0 ? (double)f / 1000 : 0);
    if (e->published_ms) {
        int64_t p = now_ms - e->published_ms;
        nf_histogram_observe(l->m->published, p > 0 ? (double)p / 1000 : 0);
    }
}

void nf_ingest_latency_committed(nf_ingest_latency_t *l, uint64_t epoch, int64_t now_ms)
{
    if (l->ntraced)
        traces_committed(l, epoch);
    unsigned k = 0;
    while (k < l->nmarks && l->marks[k].epoch <= epoch)
        k++;
    if (!k)
        return;
    size_t done = l->marks[k - 1].end;
    for (size_t i = 0; i < done; i++)
        observe(l, &l->e[i], now_ms);
    memmove(l->e, l->e + done, (l->n - done) * sizeof *l->e);
    l->n -= done;
    for (unsigned i = k; i < l->nmarks; i++) {
        l->marks[i - k].epoch = l->marks[i].epoch;
        l->marks[i - k].end = l->marks[i].end - done;
    }
    l->nmarks -= k;
}

size_t nf_ingest_latency_waiting(const nf_ingest_latency_t *l)
{
    return l->n;
}
