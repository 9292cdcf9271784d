/* metrics.h — process-wide metrics registry, lock-free on the hot path, Prometheus text out.
 *
 * Each metric series gets one 64-bit cell per *writer*: writer i (0..nwriters-1) is shard i,
 * bound to its thread with nf_metrics_bind_thread(); every other thread shares one extra
 * "external" writer whose updates are atomic read-modify-writes. A shard updates only its own
 * cells with relaxed atomic load+store (single writer: no lock prefix, no contention), so an
 * increment costs a few instructions. A scrape (any thread) sums the cells with relaxed loads.
 *
 * Registration (nf_metrics_counter/gauge/histogram/gauge_fn) takes a mutex and may allocate:
 * do it at start-up, before the hot path. Registering the same (name, labels) twice returns the
 * same series. Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*); labels are given
 * pre-rendered, e.g. "kind=\"timeout\"" (or NULL). Series of one name are rendered together
 * under one # HELP/# TYPE.
 *
 * Flags: NF_METRIC_PER_SHARD renders one sample per writer with a shard="i" label (and
 * shard="external" for the external writer when non-zero) instead of their sum — for gauges
 * such as queue depths where the sum hides a hot shard. */
#ifndef NF_METRICS_H
#define NF_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum { NF_METRIC_PER_SHARD = 1 };

typedef struct {
    uint32_t cell;
} nf_counter_t;
typedef struct {
    uint32_t cell;
} nf_gauge_t;
typedef struct {
    uint32_t cell; /* first of nbounds+1 bucket cells, then sum (as double bits), then count */
    uint32_t nbounds;
    const double *bounds;
} nf_histogram_t;

/* Creates the process registry with nwriters shard writers (+1 external). Idempotent for the
 * same nwriters; returns 0 or -errno. nf_metrics_shutdown frees it (tests). */
int nf_metrics_init(unsigned nwriters);
void nf_metrics_shutdown(void);

/* Binds the calling thread to writer w (< nwriters). Unbound threads use the external writer. */
void nf_metrics_bind_thread(unsigned w);

/* 0 or -errno (-EINVAL bad name, -ENOSPC registry full, -EEXIST same name with another type). */
int nf_metrics_counter(const char *name, const char *help, const char *labels, unsigned flags,
                       nf_counter_t *out);
int nf_metrics_gauge(const char *name, const char *help, const char *labels, unsigned flags,
                     nf_gauge_t *out);
/* bounds: strictly increasing upper bounds (the +Inf bucket is implicit); the array must
 * outlive the registry. */
int nf_metrics_histogram(const char *name, const char *help, const char *labels,
                         const double *bounds, unsigned nbounds, nf_histogram_t *out);
/* A gauge computed at scrape time on the scraping thread (process RSS, uptime, ...). */
int nf_metrics_gauge_fn(const char *name, const char *help, const char *labels,
                        double (*fn)(void *arg), void *arg);

void nf_counter_add(nf_counter_t c, uint64_t n);
static inline void nf_counter_inc(nf_counter_t c)
{
    nf_counter_add(c, 1);
}
void nf_gauge_set(nf_gauge_t g, int64_t v);
void nf_gauge_add(nf_gauge_t g, int64_t delta);
void nf_histogram_observe(nf_histogram_t h, double v);

/* Sum over writers, for tests and progress lines. */
uint64_t nf_counter_value(nf_counter_t c);
int64_t nf_gauge_value(nf_gauge_t g);

/* Renders every series as Prometheus text exposition format 0.0.4 into a malloc'ed,
 * NUL-terminated buffer (*out, caller frees); returns its length or -errno. */
long nf_metrics_render(char **out);

/* Common latency buckets in seconds: 10us .. 10s. */
extern const double nf_metrics_latency_bounds[];
extern const unsigned nf_metrics_latency_nbounds;

#endif
