/* metrics.h — process-wide metrics registry, lock-free on the hot path, Prometheus text out.
 *
 * Each metric series gets one 64-bit cell per *writer*: writer i (0..nwriters-1) is shard i,
 * bound to its thread with nf_metrics_bind_thread(); every other thread shares one extra
 * "external" writer whose updates are atomic read-modify-writes. A shard updates only its own
 * cells with relaxed atomic load+store (single writer: no lock prefix, no contention), so an
 * increment costs a few instructions. A scrape (any thread) sums the cells with relaxed loads.
 *
 * Registration (nf_metrics_counter/gauge/histogram/gauge_fn/counter_fn) takes a mutex and may
 * allocate: do it at start-up, before the hot path. Registering the same (name, labels) twice
 * returns the same series. Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*); counter names
 * should end in _total and carry a base unit (_seconds, _bytes), as `promtool check metrics`
 * expects (not enforced). Labels are given pre-rendered, e.g. "kind=\"timeout\"" (or NULL): label
 * names [a-zA-Z_][a-zA-Z0-9_]*, values escaped as in the exposition format (\\, \" and \n; see
 * nf_metrics_label_escape); their order does not matter. "le" and names starting with "__" are
 * reserved, as is "shard" with NF_METRIC_PER_SHARD. Series of one name are rendered together
 * under one # HELP/# TYPE, with the help text of the first registration.
 *
 * Capacity: 4096 series and 16384 cells per writer (a counter or gauge takes one cell, a
 * histogram nbounds + 2); beyond, registration fails with -ENOSPC.
 *
 * A failed registration is the registry's to report, not the caller's. The registry logs each
 * one once (error, component "metrics": the metric, type, labels, reason and errno) and counts it
 * in newsflow_metrics_registration_errors_total (registered by nf_metrics_init; a failure before
 * init, -ENODEV, is logged only). The handle is then a zero handle whose updates are discarded,
 * so a component runs on without that metric. Call sites therefore ignore the result (tests
 * check it): they do not log it again, and a missing metric fails neither a component nor the
 * job. test_ops_metrics checks that a whole job registers every metric without a failure.
 *
 * Updates and reads. Any thread may update any handle after nf_metrics_init; a zero-initialised
 * (never registered, or failed) handle is valid and its updates are discarded. Updates before
 * init are undefined (today: dropped). A gauge is the sum of its writers' parts: nf_gauge_set on a
 * shard sets that shard's part, so a gauge should be set by one shard (or be PER_SHARD), while
 * nf_gauge_add works from anywhere.
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
    uint32_t cell; /* first of nbounds+1 bucket cells (non-cumulative), then the sum as double
                    * bits; _count is rendered as the total of the buckets, so a scrape racing
                    * with observations still has +Inf == _count */
    uint32_t nbounds;
    const double *bounds;
} nf_histogram_t;

/* Creates the process registry with nwriters shard writers (+1 external) and registers the
 * process metrics (newsflow_process_{resident_memory_bytes,cpu_seconds_total,
 * start_time_seconds,open_fds}) and newsflow_metrics_registration_errors_total. Idempotent for the
 * same nwriters; -EBUSY for another, -EINVAL above 1024, -ENOMEM. nf_metrics_shutdown frees it
 * (tests): no other thread may update or read metrics then, and handles from before are void; the
 * calling thread is unbound. */
int nf_metrics_init(unsigned nwriters);
void nf_metrics_shutdown(void);

/* The process's resident set in bytes (/proc/self/statm), as newsflow_process_resident_memory_bytes
 * reports it; NAN when it cannot be read. Needs no registry. */
double nf_resident_bytes(void);

/* Binds the calling thread to writer w (< nwriters; otherwise a warning is logged and the thread
 * stays unbound). Unbound threads use the external writer. At most one live thread per writer:
 * a bound thread's updates are plain load+store, two threads on one writer lose updates. */
void nf_metrics_bind_thread(unsigned w);

/* 0 or -errno: -EINVAL bad name, labels, flags or bounds; -ENOSPC registry full; -EEXIST same
 * name with another type (or a name a histogram renders, name_bucket/_sum/_count), or the same
 * series with other flags, bounds or function; -ENODEV before nf_metrics_init; -ENOMEM. On
 * failure *out is a zero handle, whose updates are discarded, and the failure is logged and
 * counted here: callers ignore the result (see the rule above). */
int nf_metrics_counter(const char *name, const char *help, const char *labels, unsigned flags,
                       nf_counter_t *out);
/* A labelled family: one counter per label set, labels[i] into *outs[i] (the first failure's
 * code; every one is tried). */
int nf_metrics_counters(const char *name, const char *help, const char *const *labels, unsigned n,
                        unsigned flags, nf_counter_t *const *outs);
int nf_metrics_gauge(const char *name, const char *help, const char *labels, unsigned flags,
                     nf_gauge_t *out);
/* bounds: strictly increasing upper bounds (the +Inf bucket is implicit); the array must
 * outlive the registry. */
int nf_metrics_histogram(const char *name, const char *help, const char *labels,
                         const double *bounds, unsigned nbounds, nf_histogram_t *out);
/* A gauge computed at scrape time on the scraping thread (process RSS, uptime, ...). fn runs
 * with the registry mutex held: it must be quick and must not register metrics. fn and arg must
 * outlive the registry. NaN renders as NaN. */
int nf_metrics_gauge_fn(const char *name, const char *help, const char *labels,
                        double (*fn)(void *arg), void *arg);
/* The same for a counter kept elsewhere (CPU seconds, a library's own totals): fn must return
 * a value that never decreases. */
int nf_metrics_counter_fn(const char *name, const char *help, const char *labels,
                          double (*fn)(void *arg), void *arg);

/* Escapes value for use between the quotes of a label (\\, \" and \n), snprintf-style: writes at
 * most dstlen bytes including the NUL and returns the length the whole escape needs. */
size_t nf_metrics_label_escape(char *dst, size_t dstlen, const char *value);

void nf_counter_add(nf_counter_t c, uint64_t n);
static inline void nf_counter_inc(nf_counter_t c)
{
    nf_counter_add(c, 1);
}
void nf_gauge_set(nf_gauge_t g, int64_t v);
void nf_gauge_add(nf_gauge_t g, int64_t delta);
void nf_histogram_observe(nf_histogram_t h, double v);

/* Sum over writers, for tests and progress lines (0 for a zero handle). */
uint64_t nf_counter_value(nf_counter_t c);
/* One writer's part (writer == nwriters: the external one; beyond: 0), for benchmarks that
 * want to see a hot shard. */
uint64_t nf_counter_value_of(nf_counter_t c, unsigned writer);
int64_t nf_gauge_value(nf_gauge_t g);

/* Renders every series as Prometheus text exposition format 0.0.4 into a malloc'ed,
 * NUL-terminated buffer (*out, caller frees); returns its length or -ENOMEM. Any thread; safe to
 * run concurrently with registration and updates (takes the registry mutex, reads cells with
 * relaxed loads). Before init it renders an empty document. Integers print as integers, doubles
 * as the shortest decimal that reads back exactly. */
long nf_metrics_render(char **out);

/* Common latency buckets in seconds: 10us .. 10s. */
extern const double nf_metrics_latency_bounds[];
extern const unsigned nf_metrics_latency_nbounds;

#endif
