/* history.c — see history.h. */
#include "runtime/history.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { H_RATE, H_GAUGE };

/* What the page graphs: the sum of the series of one metric (label filters: a series must
 * contain `with` and none of `without`), as a per-second rate (counters) or a value, scaled. */
static const struct {
    const char *name, *metric, *with, *without[2];
    int kind;
    double scale;
    const char *unit, *help;
} series[] = {
    {"articles_per_s",
     "newsflow_dedup_articles_total",
     "result=\"new\"",
     {NULL, NULL},
     H_RATE,
     1,
     "1/s",
     "new articles (one per URL) per second"},
    {"read_events_per_s",
     "newsflow_read_events_total",
     NULL,
     {NULL, NULL},
     H_RATE,
     1,
     "1/s",
     "read events per second"},
    {"dead_letters_per_s",
     "newsflow_dead_letters_total",
     NULL,
     {NULL, NULL},
     H_RATE,
     1,
     "1/s",
     "input records set aside per second"},
    {"fetch_errors_per_s",
     "newsflow_fetch_requests_total",
     NULL,
     {"result=\"http_2xx\"", "result=\"http_3xx\""},
     H_RATE,
     1,
     "1/s",
     "fetches that got no document per second"},
    {"epochs_per_s",
     "newsflow_epochs_committed_total",
     NULL,
     {NULL, NULL},
     H_RATE,
     1,
     "1/s",
     "epochs committed per second"},
    {"consumer_lag",
     "newsflow_kafka_consumer_lag",
     NULL,
     {NULL, NULL},
     H_GAUGE,
     1,
     "records",
     "input records behind, all partitions this process owns"},
    {"seconds_since_commit",
     "newsflow_epoch_seconds_since_commit",
     NULL,
     {NULL, NULL},
     H_GAUGE,
     1,
     "s",
     "seconds since the last committed epoch"},
    {"cpu_cores",
     "newsflow_process_cpu_seconds_total",
     NULL,
     {NULL, NULL},
     H_RATE,
     1,
     "cores",
     "CPU used, in cores"},
    {"rss_mb",
     "newsflow_process_resident_memory_bytes",
     NULL,
     {NULL, NULL},
     H_GAUGE,
     1e-6,
     "MB",
     "resident memory"},
};
#define NSERIES (sizeof series / sizeof *series)

struct nf_history {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    unsigned interval_ms;
    /* ring, under mu */
    unsigned head, count;
    int64_t t[NF_HISTORY_SAMPLES];
    double v[NF_HISTORY_SAMPLES][NSERIES];
    /* the previous raw sums and when, for rates (sampling thread only) */
    double prev[NSERIES];
    uint64_t prev_ns;
    bool have_prev;
};

/* Sums of each entry's series in a rendered /metrics text. */
static void history_sums(const char *text, double *sum)
{
    for (size_t k = 0; k < NSERIES; k++)
        sum[k] = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (*line != '#') {
            const char *sp = memchr(line, ' ', n), *br = memchr(line, '{', n);
            size_t nl = br && (!sp || br < sp) ? (size_t)(br - line) : sp ? (size_t)(sp - line) : 0;
            for (size_t k = 0; sp && nl && k < NSERIES; k++) {
                if (strlen(series[k].metric) != nl || strncmp(line, series[k].metric, nl) != 0)
                    continue;
                const char *lab = br && br < sp ? br : NULL;
                size_t ll = lab ? (size_t)(sp - lab) : 0;
                bool ok = !series[k].with ||
                          (lab && memmem(lab, ll, series[k].with, strlen(series[k].with)));
                for (int x = 0; ok && x < 2 && series[k].without[x]; x++)
                    ok = !(lab &&
                           memmem(lab, ll, series[k].without[x], strlen(series[k].without[x])));
                if (ok)
                    sum[k] += strtod(sp + 1, NULL);
            }
        }
        line += n + (end ? 1 : 0);
    }
}

static void history_sample(nf_history_t *h)
{
    char *text = NULL;
    long n = nf_metrics_render(&text);
    if (n < 0)
        return;
    double raw[NSERIES], val[NSERIES];
    history_sums(text, raw);
    free(text);
    uint64_t now = nf_now_ns();
    double dt = h->have_prev ? (double)(now - h->prev_ns) / 1e9 : 0;
    for (size_t k = 0; k < NSERIES; k++) {
        if (series[k].kind == H_GAUGE)
            val[k] = raw[k] * series[k].scale;
        else if (dt > 0 && raw[k] >= h->prev[k]) /* a counter only goes down on a restart */
            val[k] = (raw[k] - h->prev[k]) / dt * series[k].scale;
        else
            val[k] = NAN;
        h->prev[k] = raw[k];
    }
    h->prev_ns = now;
    h->have_prev = true;
    pthread_mutex_lock(&h->mu);
    h->t[h->head] = nf_wall_ms();
    memcpy(h->v[h->head], val, sizeof val);
    h->head = (h->head + 1) % NF_HISTORY_SAMPLES;
    if (h->count < NF_HISTORY_SAMPLES)
        h->count++;
    pthread_mutex_unlock(&h->mu);
}

static void *history_main(void *arg)
{
    nf_history_t *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        pthread_mutex_unlock(&h->mu);
        history_sample(h);
        pthread_mutex_lock(&h->mu);
        struct timespec until = nf_deadline_after(CLOCK_MONOTONIC, h->interval_ms);
        while (!h->stop && pthread_cond_timedwait(&h->cv, &h->mu, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

nf_history_t *nf_history_start(unsigned interval_ms)
{
    nf_history_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->interval_ms = interval_ms < 100 ? 100 : interval_ms;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&h->thread, NULL, history_main, h);
    if (rc != 0) {
        nf_log(NF_LOG_WARN, "admin", "ops history not kept: no thread", NF_LI("errno", rc),
               NF_LEND);
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    return h;
}

void nf_history_stop(nf_history_t *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* Six significant digits (a graph needs no more); null for none. */
static void history_number(nf_jw_t *w, double v)
{
    char b[32];
    int n = isfinite(v) ? snprintf(b, sizeof b, "%.6g", v) : 0;
    if (n > 0)
        nf_jw_raw(w, b, (size_t)n);
    else
        nf_jw_null(w);
}

void nf_history_json(nf_history_t *h, nf_jw_t *w)
{
    pthread_mutex_lock(&h->mu);
    unsigned first = (h->head + NF_HISTORY_SAMPLES - h->count) % NF_HISTORY_SAMPLES;
    nf_jw_key(w, "interval_s");
    nf_jw_unit(w, h->interval_ms / 1000.0);
    nf_jw_key(w, "samples");
    nf_jw_u64(w, h->count);
    nf_jw_key(w, "t");
    nf_jw_arr_open(w);
    for (unsigned i = 0; i < h->count; i++) {
        nf_jw_elem(w);
        nf_jw_i64(w, h->t[(first + i) % NF_HISTORY_SAMPLES]);
    }
    nf_jw_arr_close(w);
    nf_jw_key(w, "series");
    nf_jw_arr_open(w);
    for (size_t k = 0; k < NSERIES; k++) {
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "name");
        nf_jw_str(w, series[k].name);
        nf_jw_key(w, "unit");
        nf_jw_str(w, series[k].unit);
        nf_jw_key(w, "help");
        nf_jw_str(w, series[k].help);
        nf_jw_key(w, "values");
        nf_jw_arr_open(w);
        for (unsigned i = 0; i < h->count; i++) {
            nf_jw_elem(w);
            history_number(w, h->v[(first + i) % NF_HISTORY_SAMPLES][k]);
        }
        nf_jw_arr_close(w);
        nf_jw_obj_close(w);
    }
    nf_jw_arr_close(w);
    pthread_mutex_unlock(&h->mu);
}
