/* metrics.c — see metrics.h. The process-wide metrics registry.
 *
 * Why it is shaped so. Every shard updates counters per message, so an update must be a few
 * instructions with no lock, no atomic read-modify-write and no cache line shared with another
 * core. Hence one cell array per writer (one per shard, plus one "external" array for every other
 * thread): a bound shard thread is the only writer of its array and updates a cell with a relaxed
 * load + store; unbound threads share the external array and use relaxed fetch-add. Arrays are
 * separate page-aligned mappings, so no two writers ever write the same cache line, and untouched
 * cells cost no memory. A series is the same cell index in every array; a scrape sums the cells
 * of all writers with relaxed loads. Every cell access goes through __atomic builtins, so the
 * code is data-race free in the C11 sense (and TSan-clean) even though the hot path compiles to
 * plain moves.
 *
 * The series table is fixed-capacity and only touched under one mutex (registration, render,
 * init/shutdown); the hot path never reads it, because a handle carries everything an update
 * needs (cell index, histogram bounds). Cells 0..NF_METRICS_SCRATCH-1 are never rendered: they
 * absorb updates through zero-initialised handles, so an unregistered handle is harmless.
 *
 * Histograms keep one non-cumulative count per bucket and the sum as double bits; _count is
 * rendered as the total of the buckets rather than kept in a cell of its own, so a scrape racing
 * with observations is still self-consistent (+Inf bucket == _count) and an observation costs one
 * store less. */
#include "runtime/metrics.h"

#include "runtime/log.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NF_METRICS_CELLS       16384u /* cells per writer */
#define NF_METRICS_MAX_SERIES  4096u
#define NF_METRICS_MAX_WRITERS 1024u
#define NF_METRICS_MAX_BOUNDS  256u
#define NF_METRICS_MAX_LABELS  32u
#define NF_METRICS_SCRATCH     8u /* cells reserved for zero-initialised handles */

enum { NF_MT_COUNTER = 0, NF_MT_GAUGE, NF_MT_HISTOGRAM };
static const char *const nf_metrics_type_names[] = {"counter", "gauge", "histogram"};

typedef struct {
    char *labels; /* canonical: sorted by label name; "" for none */
    unsigned flags;
    uint32_t cell; /* first cell; unused for fn series */
    uint32_t nbounds;
    const double *bounds;
    double (*fn)(void *arg); /* computed at scrape time when non-NULL */
    void *arg;
    int next; /* next series of the same family, -1 at the end */
} nf_series_t;

/* All series of one name: rendered together under one # HELP / # TYPE. */
typedef struct {
    char *name;
    char *help;
    int type;
    int head, tail;
} nf_family_t;

typedef struct {
    unsigned nwriters;
    uint32_t errors_cell; /* newsflow_metrics_registration_errors_total (0: not registered) */
    uint32_t ncells;      /* cells allocated so far, the same in every writer's array */
    unsigned nseries, nfamilies;
    nf_series_t *series;
    nf_family_t *families;
    uint64_t *cells[]; /* nwriters + 1 arrays; cells[nwriters] is the external writer's */
} nf_registry_t;

typedef struct {
    const char *name, *help, *labels;
    int type;
    unsigned flags;
    const double *bounds;
    unsigned nbounds;
    double (*fn)(void *arg);
    void *arg;
} nf_spec_t;

/* Guards the registry pointer and the series table. The pointers below are written under it and
 * read lock-free with acquire loads. */
static pthread_mutex_t nf_metrics_mu = PTHREAD_MUTEX_INITIALIZER;
static nf_registry_t *nf_metrics_reg;
static uint64_t *nf_metrics_ext;                /* == nf_metrics_reg->cells[nwriters] */
static _Thread_local uint64_t *nf_metrics_mine; /* this thread's writer array, NULL = external */
static double nf_metrics_start_time;

const double nf_metrics_latency_bounds[] = {10e-6,  25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,
                                            2.5e-3, 5e-3,  10e-3, 25e-3,  50e-3,  100e-3, 250e-3,
                                            500e-3, 1,     2.5,   5,      10};
const unsigned nf_metrics_latency_nbounds =
    sizeof nf_metrics_latency_bounds / sizeof nf_metrics_latency_bounds[0];

/* ---- hot path ------------------------------------------------------------------------------ */

static inline uint64_t *nf_metrics_ext_cells(void)
{
    return __atomic_load_n(&nf_metrics_ext, __ATOMIC_ACQUIRE);
}

/* Single-writer add: no lock prefix, the cell is never written by another thread. */
static inline void nf_cell_add_mine(uint64_t *p, uint64_t n)
{
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

void nf_counter_add(nf_counter_t c, uint64_t n)
{
    assert(c.cell < NF_METRICS_CELLS);
    uint64_t *mine = nf_metrics_mine;
    if (mine) {
        nf_cell_add_mine(&mine[c.cell], n);
        return;
    }
    uint64_t *ext = nf_metrics_ext_cells();
    if (ext)
        __atomic_fetch_add(&ext[c.cell], n, __ATOMIC_RELAXED);
}

void nf_gauge_set(nf_gauge_t g, int64_t v)
{
    assert(g.cell < NF_METRICS_CELLS);
    uint64_t *cells = nf_metrics_mine;
    if (!cells)
        cells = nf_metrics_ext_cells();
    if (cells)
        __atomic_store_n(&cells[g.cell], (uint64_t)v, __ATOMIC_RELAXED);
}

void nf_gauge_add(nf_gauge_t g, int64_t delta)
{
    assert(g.cell < NF_METRICS_CELLS);
    uint64_t *mine = nf_metrics_mine;
    if (mine) {
        nf_cell_add_mine(&mine[g.cell], (uint64_t)delta);
        return;
    }
    uint64_t *ext = nf_metrics_ext_cells();
    if (ext)
        __atomic_fetch_add(&ext[g.cell], (uint64_t)delta, __ATOMIC_RELAXED);
}

static inline double nf_bits_to_double(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static inline uint64_t nf_double_to_bits(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return bits;
}

/* Index of the first bucket whose upper bound is >= v; nbounds (the +Inf bucket) if none, which
 * is also where NaN goes, as in the reference Prometheus clients. */
static inline uint32_t nf_bucket_index(const double *bounds, uint32_t nbounds, double v)
{
    uint32_t lo = 0, hi = nbounds;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v <= bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void nf_histogram_observe(nf_histogram_t h, double v)
{
    assert(h.cell + h.nbounds + 1 < NF_METRICS_CELLS);
    uint32_t bucket = h.cell + nf_bucket_index(h.bounds, h.nbounds, v);
    uint32_t sum = h.cell + h.nbounds + 1;
    uint64_t *mine = nf_metrics_mine;
    if (mine) {
        nf_cell_add_mine(&mine[bucket], 1);
        double s = nf_bits_to_double(__atomic_load_n(&mine[sum], __ATOMIC_RELAXED)) + v;
        __atomic_store_n(&mine[sum], nf_double_to_bits(s), __ATOMIC_RELAXED);
        return;
    }
    uint64_t *ext = nf_metrics_ext_cells();
    if (!ext)
        return;
    __atomic_fetch_add(&ext[bucket], 1, __ATOMIC_RELAXED);
    uint64_t old = __atomic_load_n(&ext[sum], __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&ext[sum], &old,
                                        nf_double_to_bits(nf_bits_to_double(old) + v), true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* ---- reading ------------------------------------------------------------------------------- */

static inline uint64_t nf_cell_load(const nf_registry_t *r, unsigned w, uint32_t cell)
{
    return __atomic_load_n(&r->cells[w][cell], __ATOMIC_RELAXED);
}

/* Wrapping sum over all writers, external included; as int64 it is the sum of gauge parts. */
static uint64_t nf_cell_sum(const nf_registry_t *r, uint32_t cell)
{
    uint64_t s = 0;
    for (unsigned w = 0; w <= r->nwriters; w++)
        s += nf_cell_load(r, w, cell);
    return s;
}

static double nf_cell_sum_double(const nf_registry_t *r, uint32_t cell)
{
    double s = 0;
    for (unsigned w = 0; w <= r->nwriters; w++)
        s += nf_bits_to_double(nf_cell_load(r, w, cell));
    return s;
}

/* The registry, or NULL when there is none or cell is a scratch cell (a zero handle's, whose
 * updates are discarded: it reads 0). */
static const nf_registry_t *nf_registry_for(uint32_t cell)
{
    const nf_registry_t *r = __atomic_load_n(&nf_metrics_reg, __ATOMIC_ACQUIRE);
    return cell < NF_METRICS_SCRATCH ? NULL : r;
}

uint64_t nf_counter_value(nf_counter_t c)
{
    const nf_registry_t *r = nf_registry_for(c.cell);
    return r ? nf_cell_sum(r, c.cell) : 0;
}

uint64_t nf_counter_value_of(nf_counter_t c, unsigned writer)
{
    const nf_registry_t *r = nf_registry_for(c.cell);
    return r && writer <= r->nwriters ? nf_cell_load(r, writer, c.cell) : 0;
}

int64_t nf_gauge_value(nf_gauge_t g)
{
    const nf_registry_t *r = nf_registry_for(g.cell);
    return r ? (int64_t)nf_cell_sum(r, g.cell) : 0;
}

/* ---- process metrics (scrape-time functions) ----------------------------------------------- */

/* Reads a small /proc file into buf (NUL-terminated); 0 or -1. */
static int nf_read_small_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

double nf_resident_bytes(void)
{
    char buf[256];
    unsigned long size, resident;
    if (nf_read_small_file("/proc/self/statm", buf, sizeof buf) != 0 ||
        sscanf(buf, "%lu %lu", &size, &resident) != 2)
        return NAN;
    return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

static double nf_proc_resident_bytes(void *arg)
{
    (void)arg;
    return nf_resident_bytes();
}

static double nf_proc_cpu_seconds(void *arg)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return NAN;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double nf_proc_open_fds(void *arg)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return NAN;
    double n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

static double nf_proc_read_double(void *arg)
{
    return *(const double *)arg;
}

/* Process start in seconds since the epoch: boot time + the start tick in /proc/self/stat, as
 * node/process exporters compute it; the current time if /proc is unavailable. */
static double nf_proc_start_time(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double fallback = (double)now.tv_sec + (double)now.tv_nsec / 1e9;

    char stat[1024];
    if (nf_read_small_file("/proc/self/stat", stat, sizeof stat) != 0)
        return fallback;
    const char *p = strrchr(stat, ')'); /* the command name may contain spaces and ')' */
    if (!p)
        return fallback;
    p++;
    for (int field = 2; field < 22 && p; field++) { /* starttime is field 22 */
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    if (!p)
        return fallback;
    unsigned long long ticks = strtoull(p, NULL, 10);

    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return fallback;
    char line[256];
    unsigned long long btime = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (btime == 0 || hz <= 0)
        return fallback;
    return (double)btime + (double)ticks / (double)hz;
}

/* ---- registration -------------------------------------------------------------------------- */

static bool nf_is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool nf_is_name_char(char c)
{
    return nf_is_name_start(c) || (c >= '0' && c <= '9');
}

static bool nf_metric_name_valid(const char *name)
{
    if (!name || !(nf_is_name_start(name[0]) || name[0] == ':'))
        return false;
    for (const char *p = name + 1; *p; p++)
        if (!nf_is_name_char(*p) && *p != ':')
            return false;
    return true;
}

typedef struct {
    const char *name; /* points into the input */
    size_t nlen;
    const char *pair; /* name="value" */
    size_t plen;
} nf_label_t;

static int nf_label_cmp(const nf_label_t *a, const nf_label_t *b)
{
    size_t n = a->nlen < b->nlen ? a->nlen : b->nlen;
    int c = memcmp(a->name, b->name, n);
    if (c)
        return c;
    return a->nlen < b->nlen ? -1 : a->nlen > b->nlen;
}

static bool nf_label_is(const nf_label_t *l, const char *name)
{
    return l->nlen == strlen(name) && memcmp(l->name, name, l->nlen) == 0;
}

/* Checks pre-rendered labels (`a="x",b="y"`, values escaped with \\, \" and \n) and returns
 * them sorted by name in a malloc'ed string, so equal label sets given in different orders name
 * the same series. "le" is reserved for histogram buckets, "shard" for per-shard series, and
 * names starting with "__" for Prometheus itself. */
static int nf_labels_canon(const char *in, bool per_shard, char **out)
{
    nf_label_t l[NF_METRICS_MAX_LABELS];
    size_t n = 0, total = 1;
    const char *s = in ? in : "";
    while (*s) {
        if (n == NF_METRICS_MAX_LABELS || !nf_is_name_start(*s))
            return -EINVAL;
        const char *start = s;
        while (nf_is_name_char(*s))
            s++;
        l[n].name = start;
        l[n].nlen = (size_t)(s - start);
        if ((l[n].nlen >= 2 && start[0] == '_' && start[1] == '_') || nf_label_is(&l[n], "le") ||
            (per_shard && nf_label_is(&l[n], "shard")))
            return -EINVAL;
        if (s[0] != '=' || s[1] != '"')
            return -EINVAL;
        s += 2;
        while (*s != '"') {
            if (*s == '\0' || *s == '\n')
                return -EINVAL;
            if (*s == '\\') {
                if (s[1] != '\\' && s[1] != '"' && s[1] != 'n')
                    return -EINVAL;
                s++;
            }
            s++;
        }
        s++;
        l[n].pair = start;
        l[n].plen = (size_t)(s - start);
        total += l[n].plen + 1;
        n++;
        if (*s == ',') {
            if (!*++s)
                return -EINVAL;
        } else if (*s) {
            return -EINVAL;
        }
    }
    for (size_t i = 1; i < n; i++) { /* insertion sort: a handful of labels */
        nf_label_t t = l[i];
        size_t j = i;
        for (; j > 0 && nf_label_cmp(&l[j - 1], &t) > 0; j--)
            l[j] = l[j - 1];
        l[j] = t;
    }
    for (size_t i = 1; i < n; i++)
        if (nf_label_cmp(&l[i - 1], &l[i]) == 0)
            return -EINVAL;
    char *buf = malloc(total);
    if (!buf)
        return -ENOMEM;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            buf[len++] = ',';
        memcpy(buf + len, l[i].pair, l[i].plen);
        len += l[i].plen;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

/* True if name is base_bucket, base_sum or base_count: the names a histogram renders. */
static bool nf_is_histogram_part(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0)
        return false;
    const char *rest = name + n;
    return !strcmp(rest, "_bucket") || !strcmp(rest, "_sum") || !strcmp(rest, "_count");
}

static bool nf_bounds_equal(const double *a, unsigned na, const double *b, unsigned nb)
{
    if (na != nb)
        return false;
    for (unsigned i = 0; i < na; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* Adds or finds a series. labels (canonical, malloc'ed) is consumed on 0 only; 1 means the
 * series already existed. */
static int nf_register_locked(nf_registry_t *r, const nf_spec_t *s, char *labels, uint32_t *cell)
{
    nf_family_t *f = NULL;
    for (unsigned i = 0; i < r->nfamilies && !f; i++)
        if (strcmp(r->families[i].name, s->name) == 0)
            f = &r->families[i];
    if (f) {
        if (f->type != s->type)
            return -EEXIST;
        for (int i = f->head; i >= 0; i = r->series[i].next) {
            const nf_series_t *e = &r->series[i];
            if (strcmp(e->labels, labels) != 0)
                continue;
            if (e->flags != s->flags || e->fn != s->fn || e->arg != s->arg ||
                !nf_bounds_equal(e->bounds, e->nbounds, s->bounds, s->nbounds))
                return -EEXIST;
            *cell = e->cell;
            return 1;
        }
    } else {
        for (unsigned i = 0; i < r->nfamilies; i++) {
            const nf_family_t *g = &r->families[i];
            if ((g->type == NF_MT_HISTOGRAM && nf_is_histogram_part(s->name, g->name)) ||
                (s->type == NF_MT_HISTOGRAM && nf_is_histogram_part(g->name, s->name)))
                return -EEXIST;
        }
    }
    uint32_t need = s->fn ? 0 : s->type == NF_MT_HISTOGRAM ? s->nbounds + 2 : 1;
    if (r->nseries == NF_METRICS_MAX_SERIES || need > NF_METRICS_CELLS - r->ncells)
        return -ENOSPC;
    if (!f) {
        char *name = strdup(s->name);
        char *help = strdup(s->help ? s->help : "");
        if (!name || !help) {
            free(name);
            free(help);
            return -ENOMEM;
        }
        f = &r->families[r->nfamilies++];
        *f = (nf_family_t){.name = name, .help = help, .type = s->type, .head = -1, .tail = -1};
    }
    int idx = (int)r->nseries++;
    nf_series_t *e = &r->series[idx];
    *e = (nf_series_t){.labels = labels,
                       .flags = s->flags,
                       .cell = need ? r->ncells : 0,
                       .nbounds = s->nbounds,
                       .bounds = s->bounds,
                       .fn = s->fn,
                       .arg = s->arg,
                       .next = -1};
    r->ncells += need;
    if (f->tail >= 0)
        r->series[f->tail].next = idx;
    else
        f->head = idx;
    f->tail = idx;
    *cell = e->cell;
    return 0;
}

/* Why a registration failed, in the registry's terms (rc as nf_register returns it). */
static const char *nf_register_reason(int rc)
{
    switch (rc) {
    case -EINVAL:
        return "invalid name, labels, flags or bounds";
    case -EEXIST:
        return "the name is registered with another type (or is a name a histogram renders), or "
               "the series with other flags, bounds or function";
    case -ENOSPC:
        return "the registry is full (4096 series, 16384 cells per writer)";
    case -ENODEV:
        return "registered before nf_metrics_init";
    case -ENOMEM:
        return "out of memory";
    default:
        return "unexpected error";
    }
}

/* The one place a failed registration is reported (metrics.h): counted, unless there is no
 * registry to count in, and logged. r is the registry, its mutex held; NULL for none. */
static void nf_register_failed_locked(nf_registry_t *r, const nf_spec_t *s, int rc)
{
    if (r && r->errors_cell)
        __atomic_fetch_add(&r->cells[r->nwriters][r->errors_cell], 1, __ATOMIC_RELAXED);
    nf_log(NF_LOG_ERROR, "metrics", "metric not registered: its updates are discarded",
           NF_LS("metric", s->name ? s->name : "(null)"),
           NF_LS("type", nf_metrics_type_names[s->type]),
           NF_LS("labels", s->labels ? s->labels : ""), NF_LS("reason", nf_register_reason(rc)),
           NF_LI("errno", -rc), NF_LEND);
}

static int nf_register_checked(const nf_spec_t *s, uint32_t *cell)
{
    if (!nf_metric_name_valid(s->name) || (s->flags & ~(unsigned)NF_METRIC_PER_SHARD))
        return -EINVAL;
    if (s->type == NF_MT_HISTOGRAM) {
        if (s->nbounds > NF_METRICS_MAX_BOUNDS || (s->nbounds && !s->bounds))
            return -EINVAL;
        for (unsigned i = 0; i < s->nbounds; i++)
            if (!isfinite(s->bounds[i]) || (i && !(s->bounds[i - 1] < s->bounds[i])))
                return -EINVAL;
    }
    char *labels;
    int rc = nf_labels_canon(s->labels, s->flags & NF_METRIC_PER_SHARD, &labels);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&nf_metrics_mu);
    rc = nf_metrics_reg ? nf_register_locked(nf_metrics_reg, s, labels, cell) : -ENODEV;
    pthread_mutex_unlock(&nf_metrics_mu);
    if (rc != 0)
        free(labels);
    return rc < 0 ? rc : 0;
}

/* Returns rc, having reported it if it is a failure. */
static int nf_register_report(const nf_spec_t *s, int rc)
{
    if (rc < 0) {
        pthread_mutex_lock(&nf_metrics_mu);
        nf_register_failed_locked(nf_metrics_reg, s, rc);
        pthread_mutex_unlock(&nf_metrics_mu);
    }
    return rc;
}

static int nf_register(const nf_spec_t *s, uint32_t *cell)
{
    *cell = 0;
    return nf_register_report(s, nf_register_checked(s, cell));
}

int nf_metrics_counter(const char *name, const char *help, const char *labels, unsigned flags,
                       nf_counter_t *out)
{
    nf_spec_t s = {
        .name = name, .help = help, .labels = labels, .type = NF_MT_COUNTER, .flags = flags};
    return nf_register(&s, &out->cell);
}

int nf_metrics_counters(const char *name, const char *help, const char *const *labels, unsigned n,
                        unsigned flags, nf_counter_t *const *outs)
{
    int r = 0;
    for (unsigned i = 0; i < n; i++) {
        int k = nf_metrics_counter(name, help, labels[i], flags, outs[i]);
        r = r ? r : k;
    }
    return r;
}

int nf_metrics_gauge(const char *name, const char *help, const char *labels, unsigned flags,
                     nf_gauge_t *out)
{
    nf_spec_t s = {
        .name = name, .help = help, .labels = labels, .type = NF_MT_GAUGE, .flags = flags};
    return nf_register(&s, &out->cell);
}

int nf_metrics_histogram(const char *name, const char *help, const char *labels,
                         const double *bounds, unsigned nbounds, nf_histogram_t *out)
{
    nf_spec_t s = {.name = name,
                   .help = help,
                   .labels = labels,
                   .type = NF_MT_HISTOGRAM,
                   .bounds = bounds,
                   .nbounds = nbounds};
    uint32_t cell;
    int rc = nf_register(&s, &cell);
    *out =
        (nf_histogram_t){.cell = cell, .nbounds = rc ? 0 : nbounds, .bounds = rc ? NULL : bounds};
    return rc;
}

int nf_metrics_gauge_fn(const char *name, const char *help, const char *labels,
                        double (*fn)(void *arg), void *arg)
{
    nf_spec_t s = {
        .name = name, .help = help, .labels = labels, .type = NF_MT_GAUGE, .fn = fn, .arg = arg};
    uint32_t cell;
    return fn ? nf_register(&s, &cell) : nf_register_report(&s, -EINVAL);
}

int nf_metrics_counter_fn(const char *name, const char *help, const char *labels,
                          double (*fn)(void *arg), void *arg)
{
    nf_spec_t s = {
        .name = name, .help = help, .labels = labels, .type = NF_MT_COUNTER, .fn = fn, .arg = arg};
    uint32_t cell;
    return fn ? nf_register(&s, &cell) : nf_register_report(&s, -EINVAL);
}

size_t nf_metrics_label_escape(char *dst, size_t dstlen, const char *value)
{
    size_t n = 0;
    for (const char *p = value ? value : ""; *p; p++) {
        const char *rep = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
        size_t k = rep ? 2 : 1;
        if (n + k < dstlen)
            memcpy(dst + n, rep ? rep : p, k);
        n += k;
    }
    if (dstlen)
        dst[n < dstlen ? n : dstlen - 1] = '\0';
    return n;
}

/* ---- init / shutdown ----------------------------------------------------------------------- */

static void nf_registry_free(nf_registry_t *r)
{
    for (unsigned i = 0; r->series && i < r->nseries; i++)
        free(r->series[i].labels);
    for (unsigned i = 0; r->families && i < r->nfamilies; i++) {
        free(r->families[i].name);
        free(r->families[i].help);
    }
    for (unsigned w = 0; w <= r->nwriters; w++)
        if (r->cells[w])
            munmap(r->cells[w], NF_METRICS_CELLS * sizeof(uint64_t));
    free(r->series);
    free(r->families);
    free(r);
}

/* Registers one of the registry's own series (no labels; fn NULL: a cell) and returns its cell,
 * 0 when it failed (reported as any other failure). */
static uint32_t nf_register_builtin_locked(nf_registry_t *r, const char *name, const char *help,
                                           int type, double (*fn)(void *arg), void *arg)
{
    nf_spec_t s = {.name = name, .help = help, .type = type, .fn = fn, .arg = arg};
    uint32_t cell = 0;
    char *labels = strdup("");
    int rc = labels ? nf_register_locked(r, &s, labels, &cell) : -ENOMEM;
    if (rc != 0)
        free(labels);
    if (rc < 0)
        nf_register_failed_locked(r, &s, rc);
    return rc < 0 ? 0 : cell;
}

static void nf_register_builtins_locked(nf_registry_t *r)
{
    r->errors_cell = nf_register_builtin_locked(
        r, "newsflow_metrics_registration_errors_total",
        "Metric registrations that failed (each also logged at error, component metrics): the "
        "metric is missing from /metrics and its updates are discarded.",
        NF_MT_COUNTER, NULL, NULL);
    nf_metrics_start_time = nf_proc_start_time();
    nf_register_builtin_locked(r, "newsflow_process_resident_memory_bytes",
                               "Resident memory size of the process in bytes.", NF_MT_GAUGE,
                               nf_proc_resident_bytes, NULL);
    nf_register_builtin_locked(r, "newsflow_process_cpu_seconds_total",
                               "Total user and system CPU time spent by the process in seconds.",
                               NF_MT_COUNTER, nf_proc_cpu_seconds, NULL);
    nf_register_builtin_locked(r, "newsflow_process_start_time_seconds",
                               "Start time of the process since the Unix epoch in seconds.",
                               NF_MT_GAUGE, nf_proc_read_double, &nf_metrics_start_time);
    nf_register_builtin_locked(r, "newsflow_process_open_fds",
                               "Number of open file descriptors of the process.", NF_MT_GAUGE,
                               nf_proc_open_fds, NULL);
}

int nf_metrics_init(unsigned nwriters)
{
    if (nwriters > NF_METRICS_MAX_WRITERS)
        return -EINVAL;
    pthread_mutex_lock(&nf_metrics_mu);
    if (nf_metrics_reg) {
        int rc = nf_metrics_reg->nwriters == nwriters ? 0 : -EBUSY;
        pthread_mutex_unlock(&nf_metrics_mu);
        return rc;
    }
    nf_registry_t *r = calloc(1, sizeof *r + (nwriters + 1) * sizeof(uint64_t *));
    if (!r) {
        pthread_mutex_unlock(&nf_metrics_mu);
        return -ENOMEM;
    }
    r->nwriters = nwriters;
    r->ncells = NF_METRICS_SCRATCH;
    r->series = calloc(NF_METRICS_MAX_SERIES, sizeof *r->series);
    r->families = calloc(NF_METRICS_MAX_SERIES, sizeof *r->families);
    bool ok = r->series && r->families;
    /* One private mapping per writer: page-aligned (so no cache line is shared between
     * writers), zeroed, and committed only as cells are touched. */
    for (unsigned w = 0; ok && w <= nwriters; w++) {
        void *p = mmap(NULL, NF_METRICS_CELLS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            ok = false;
        else
            r->cells[w] = p;
    }
    if (!ok) {
        nf_registry_free(r);
        pthread_mutex_unlock(&nf_metrics_mu);
        return -ENOMEM;
    }
    __atomic_store_n(&nf_metrics_ext, r->cells[nwriters], __ATOMIC_RELEASE);
    __atomic_store_n(&nf_metrics_reg, r, __ATOMIC_RELEASE);
    nf_register_builtins_locked(r);
    pthread_mutex_unlock(&nf_metrics_mu);
    return 0;
}

void nf_metrics_shutdown(void)
{
    pthread_mutex_lock(&nf_metrics_mu);
    nf_registry_t *r = nf_metrics_reg;
    __atomic_store_n(&nf_metrics_ext, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&nf_metrics_reg, NULL, __ATOMIC_RELEASE);
    if (r)
        nf_registry_free(r);
    pthread_mutex_unlock(&nf_metrics_mu);
    nf_metrics_mine = NULL;
}

void nf_metrics_bind_thread(unsigned w)
{
    const nf_registry_t *r = __atomic_load_n(&nf_metrics_reg, __ATOMIC_ACQUIRE);
    if (!r || w >= r->nwriters) {
        nf_log(NF_LOG_WARN, "metrics",
               "cannot bind thread to metrics writer; it will use the shared external writer",
               NF_LI("writer", w), NF_LI("nwriters", r ? r->nwriters : 0), NF_LEND);
        nf_metrics_mine = NULL;
        return;
    }
    nf_metrics_mine = r->cells[w];
}

/* ---- rendering ----------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} nf_buf_t;

static void nf_buf_put(nf_buf_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void nf_buf_str(nf_buf_t *b, const char *s)
{
    nf_buf_put(b, s, strlen(s));
}

/* Shortest decimal that reads back as the same double (at most %.17g), Prometheus spellings for
 * the non-finite values. */
static void nf_fmt_double(char *buf, size_t len, double v)
{
    if (isnan(v)) {
        snprintf(buf, len, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* name[suffix]{labels[,xk="xv"]} value */
static void nf_put_sample(nf_buf_t *b, const char *name, const char *suffix, const char *labels,
                          const char *xk, const char *xv, const char *value)
{
    nf_buf_str(b, name);
    if (suffix)
        nf_buf_str(b, suffix);
    if (labels[0] || xk) {
        nf_buf_put(b, "{", 1);
        nf_buf_str(b, labels);
        if (xk) {
            if (labels[0])
                nf_buf_put(b, ",", 1);
            nf_buf_str(b, xk);
            nf_buf_put(b, "=\"", 2);
            nf_buf_str(b, xv);
            nf_buf_put(b, "\"", 1);
        }
        nf_buf_put(b, "}", 1);
    }
    nf_buf_put(b, " ", 1);
    nf_buf_str(b, value);
    nf_buf_put(b, "\n", 1);
}

static void nf_fmt_cell(char *buf, size_t len, int type, uint64_t v)
{
    if (type == NF_MT_GAUGE)
        snprintf(buf, len, "%" PRId64, (int64_t)v);
    else
        snprintf(buf, len, "%" PRIu64, v);
}

static void nf_render_histogram(nf_buf_t *b, const nf_registry_t *r, const char *name,
                                const nf_series_t *e)
{
    char v[48], le[48];
    uint64_t cum = 0;
    for (uint32_t i = 0; i <= e->nbounds; i++) {
        cum += nf_cell_sum(r, e->cell + i);
        if (i < e->nbounds)
            nf_fmt_double(le, sizeof le, e->bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        snprintf(v, sizeof v, "%" PRIu64, cum);
        nf_put_sample(b, name, "_bucket", e->labels, "le", le, v);
    }
    nf_fmt_double(v, sizeof v, nf_cell_sum_double(r, e->cell + e->nbounds + 1));
    nf_put_sample(b, name, "_sum", e->labels, NULL, NULL, v);
    snprintf(v, sizeof v, "%" PRIu64, cum);
    nf_put_sample(b, name, "_count", e->labels, NULL, NULL, v);
}

static void nf_render_series(nf_buf_t *b, const nf_registry_t *r, const nf_family_t *f,
                             const nf_series_t *e)
{
    char v[48];
    if (e->fn) {
        nf_fmt_double(v, sizeof v, e->fn(e->arg));
        nf_put_sample(b, f->name, NULL, e->labels, NULL, NULL, v);
    } else if (f->type == NF_MT_HISTOGRAM) {
        nf_render_histogram(b, r, f->name, e);
    } else if (e->flags & NF_METRIC_PER_SHARD) {
        char shard[16];
        for (unsigned w = 0; w < r->nwriters; w++) {
            snprintf(shard, sizeof shard, "%u", w);
            nf_fmt_cell(v, sizeof v, f->type, nf_cell_load(r, w, e->cell));
            nf_put_sample(b, f->name, NULL, e->labels, "shard", shard, v);
        }
        uint64_t ext = nf_cell_load(r, r->nwriters, e->cell);
        if (ext) {
            nf_fmt_cell(v, sizeof v, f->type, ext);
            nf_put_sample(b, f->name, NULL, e->labels, "shard", "external", v);
        }
    } else {
        nf_fmt_cell(v, sizeof v, f->type, nf_cell_sum(r, e->cell));
        nf_put_sample(b, f->name, NULL, e->labels, NULL, NULL, v);
    }
}

static void nf_render_help(nf_buf_t *b, const char *help)
{
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            nf_buf_put(b, "\\\\", 2);
        else if (*p == '\n')
            nf_buf_put(b, "\\n", 2);
        else
            nf_buf_put(b, p, 1);
    }
}

long nf_metrics_render(char **out)
{
    nf_buf_t b = {0};
    nf_buf_put(&b, "", 0); /* an empty registry still yields "" */
    /* The exposition format wants '.' whatever LC_NUMERIC the process runs with. */
    locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old_locale = c_locale ? uselocale(c_locale) : (locale_t)0;
    pthread_mutex_lock(&nf_metrics_mu);
    const nf_registry_t *r = nf_metrics_reg;
    for (unsigned i = 0; r && i < r->nfamilies; i++) {
        const nf_family_t *f = &r->families[i];
        if (f->help[0]) {
            nf_buf_str(&b, "# HELP ");
            nf_buf_str(&b, f->name);
            nf_buf_put(&b, " ", 1);
            nf_render_help(&b, f->help);
            nf_buf_put(&b, "\n", 1);
        }
        nf_buf_str(&b, "# TYPE ");
        nf_buf_str(&b, f->name);
        nf_buf_put(&b, " ", 1);
        nf_buf_str(&b, nf_metrics_type_names[f->type]);
        nf_buf_put(&b, "\n", 1);
        for (int s = f->head; s >= 0; s = r->series[s].next)
            nf_render_series(&b, r, f, &r->series[s]);
    }
    pthread_mutex_unlock(&nf_metrics_mu);
    if (c_locale) {
        uselocale(old_locale);
        freelocale(c_locale);
    }
    if (b.oom) {
        free(b.p);
        *out = NULL;
        return -ENOMEM;
    }
    *out = b.p;
    return (long)b.len;
}
