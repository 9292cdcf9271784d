/* bench_crawl.c — the crawl farm: newsflow's ingestion actors (src/actors/ingest.h) on one
 * shard against a loopback server with 100,000 distinct small feeds, at the rate their
 * schedule asks for; perf/run_crawl.sh runs it and perf/crawl/RESULTS.md has the figures.
 *
 * Usage: bench_crawl [--sources N] [--interval S] [--seconds T] [--window W] [--shards K]
 *                    [--sink SPEC] [--change S] [--sample-every S]       (--help lists them)
 *
 * Set-up, as the job runs in production except where a loopback farm needs otherwise:
 * - the test server (tests/support/testhttpd.h, libmicrohttpd) runs in a child process forked
 *   first, so this process's CPU time and RSS are newsflow's alone; the child's are reported
 *   apart (crawl.server). It serves /feed/N.xml: 3 items, an ETag that changes every --change
 *   seconds (default 60);
 * - N sources (default 100,000) http://feed-N.farm.test:PORT/feed/N.xml: every source is its
 *   own host, so per-host politeness never holds a fetch back and no connection is reused, as
 *   with a real fleet of mostly distinct sites. fetch.connect_to "::127.0.0.1:PORT" sends them
 *   all to the server without DNS; the address guard allows 127.0.0.0/8;
 * - crawl interval --interval (default 900 s) for every source, so the schedule asks for
 *   N / interval fetches per second (111/s by default). The first crawls are spread over the
 *   interval by the policy (crawl.c's 10 ms-per-source cap is 1000 s for 100k sources, longer
 *   than 900 s), so the rate holds from the first second; a source is fetched about once per
 *   run. Below the policy's 5 min floor the floor is lowered to the interval (>= 60 s);
 * - one shard (--shards), sink "none" (--sink jsonl:/dev/null to include the sink's
 *   formatting and writes), every other option at its default.
 *
 * Measurement: the run lasts --seconds (75); the first seconds - window (15) are warm-up, and
 * the figures are the differences between two snapshots taken --window (60) seconds apart:
 * counters and histograms from the metrics registry (lateness is read from the rendered
 * newsflow_crawl_lateness_seconds histogram, whose bounds include 0.5, 1 and 2 s: percentiles
 * are given as the bucket's upper bound and as a linear estimate inside it), CPU seconds from
 * getrusage(RUSAGE_SELF) (every thread: the shard, curl, the main thread's 1 s sampling), RSS
 * from /proc/self/status (VmRSS, and VmHWM for the peak). The server's CPU comes from
 * /proc/PID/stat at the same two instants.
 *
 * Output: JSON lines on stdout: crawl.config, crawl.sample every --sample-every seconds, then
 * crawl.result (newsflow) and crawl.server. Progress goes to stderr. No timing is judged here:
 * crawl.result carries the targets beside the figures. meets_rate says the schedule
 * asks for >= 111 fetches/s and the shard kept up with it (>= 98 %): which sources fall due in
 * a given minute is random (first crawls are spread uniformly), so the count in a 60 s window
 * varies by about +-1.2 % (sqrt(6667)) around the schedule's mean. */
#include "actors/ingest.h"
#include "runtime/metrics.h"
#include "testhttpd.h"

#include "../bench_clock.h"
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TARGET_RATE     111.0 /* fetches/s: 100,000 sources every 15 min */
#define TARGET_P99_LATE 1.0   /* s */
#define TARGET_WINDOW_S 60.0
#define MAX_BUCKETS     64

typedef struct {
    unsigned sources, interval_s, seconds, window, shards, change_s, sample_every;
    const char *sink;
} opts_t;

/* ------------------------------------------------------------------ helpers */

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* A "Key:   N kB" line of /proc/<pid>/status, in kB (-1 if absent). */
static long proc_status_kb(const char *pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* utime + stime of a process, from /proc/PID/stat (fields 14 and 15). */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p)
        return NAN;
    unsigned long ut = 0, st = 0;
    /* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15) */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ------------------------------------------------------------------ the server, in a child */

typedef struct {
    uint64_t requests;
    double cpu_s;
} server_report_t;

typedef struct {
    pid_t pid;
    int ctl;    /* closing it tells the child to report and stop */
    int report; /* the child writes its port, then a server_report_t */
    uint16_t port;
    char pidstr[16];
} server_t;

static bool read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static void write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        p += r;
        n -= (size_t)r;
    }
}

/* Forks before this process has any thread, so the child starts clean. */
static int server_start(server_t *sv, unsigned change_s)
{
    int ctl[2], rep[2];
    if (pipe2(ctl, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        close(ctl[1]);
        close(rep[0]);
        nf_testhttpd_t *s = nf_testhttpd_start(NULL, change_s);
        uint16_t port = s ? nf_testhttpd_port(s) : 0;
        write_full(rep[1], &port, sizeof port);
        if (!s)
            _exit(1);
        char c;
        for (;;) { /* until the parent closes its end (or dies) */
            ssize_t n = read(ctl[0], &c, 1);
            if (n == 0 || (n < 0 && errno != EINTR))
                break;
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        server_report_t r = {
            .requests = nf_testhttpd_requests(s),
            .cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
        };
        write_full(rep[1], &r, sizeof r);
        nf_testhttpd_stop(s);
        _exit(0);
    }
    close(ctl[0]);
    close(rep[1]);
    sv->pid = pid;
    sv->ctl = ctl[1];
    sv->report = rep[0];
    snprintf(sv->pidstr, sizeof sv->pidstr, "%d", (int)pid);
    if (!read_full(sv->report, &sv->port, sizeof sv->port) || sv->port == 0)
        return -EIO;
    return 0;
}

static void server_stop(server_t *sv, server_report_t *r)
{
    close(sv->ctl);
    if (!read_full(sv->report, r, sizeof *r))
        memset(r, 0, sizeof *r);
    close(sv->report);
    int st;
    while (waitpid(sv->pid, &st, 0) < 0 && errno == EINTR)
        ;
}

/* ------------------------------------------------------------------ histograms, from render */

typedef struct {
    unsigned n;                /* buckets, +Inf included */
    double le[MAX_BUCKETS];    /* upper bounds; the last is INFINITY */
    uint64_t cum[MAX_BUCKETS]; /* cumulative counts */
} hist_t;

/* Reads name's _bucket lines (a histogram without labels) from a Prometheus text render. */
static void hist_parse(const char *text, const char *name, hist_t *h)
{
    char prefix[160];
    int pl = snprintf(prefix, sizeof prefix, "%s_bucket{le=\"", name);
    h->n = 0;
    for (const char *p = text; p && *p && h->n < MAX_BUCKETS;) {
        if (!strncmp(p, prefix, (size_t)pl)) {
            const char *v = p + pl;
            h->le[h->n] = !strncmp(v, "+Inf", 4) ? INFINITY : strtod(v, NULL);
            const char *sp = strstr(v, "} ");
            h->cum[h->n++] = sp ? strtoull(sp + 2, NULL, 10) : 0;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
}

static hist_t hist_delta(const hist_t *a, const hist_t *b)
{
    hist_t d = *b;
    for (unsigned i = 0; i < d.n && i < a->n; i++)
        d.cum[i] = b->cum[i] - a->cum[i];
    return d;
}

static uint64_t hist_count(const hist_t *h)
{
    return h->n ? h->cum[h->n - 1] : 0;
}

/* q-quantile: *upper = the bound of the bucket it falls in; returns a linear estimate inside
 * that bucket (NAN if empty; the lower bound for +Inf). */
static double hist_quantile(const hist_t *h, double q, double *upper)
{
    uint64_t total = hist_count(h);
    *upper = NAN;
    if (!total)
        return NAN;
    double rank = q * (double)total;
    for (unsigned i = 0; i < h->n; i++) {
        if ((double)h->cum[i] < rank)
            continue;
        double lo = i ? h->le[i - 1] : 0, below = i ? (double)h->cum[i - 1] : 0;
        *upper = h->le[i];
        if (isinf(h->le[i]))
            return lo;
        double in = (double)h->cum[i] - below;
        return in > 0 ? lo + (h->le[i] - lo) * (rank - below) / in : h->le[i];
    }
    return NAN;
}

/* Observations above bound b (b must be one of the bounds). */
static uint64_t hist_above(const hist_t *h, double b)
{
    for (unsigned i = 0; i < h->n; i++)
        if (h->le[i] == b)
            return hist_count(h) - h->cum[i];
    return 0;
}

static void put_num(const char *key, double v, int prec)
{
    if (isnan(v) || isinf(v))
        printf(",\"%s\":null", key);
    else
        printf(",\"%s\":%.*f", key, prec, v);
}

/* ------------------------------------------------------------------ snapshots */

typedef struct {
    double t, cpu_s, server_cpu_s;
    uint64_t http[6], err[NF_FETCH_E_OTHER + 1];
    uint64_t articles, no_link, dedup_new, dedup_dup, parse_ok, parse_bad, bytes;
    uint64_t deferred_host, deferred_breaker, deferred_capacity, ring_full, sink_errors;
    int64_t in_flight, pending;
    hist_t late, fetch, parse;
    long rss_kb;
} snap_t;

static void snap_take(snap_t *s, const nf_ingest_metrics_t *m, pid_t server)
{
    memset(s, 0, sizeof *s);
    char *text = NULL;
    if (nf_metrics_render(&text) >= 0) {
        hist_parse(text, "newsflow_crawl_lateness_seconds", &s->late);
        hist_parse(text, "newsflow_fetch_duration_seconds", &s->fetch);
        hist_parse(text, "newsflow_parse_duration_seconds", &s->parse);
    }
    free(text);
    s->t = bench_now_s();
    s->cpu_s = self_cpu_s();
    s->server_cpu_s = proc_cpu_s(server);
    for (int i = 0; i < 6; i++)
        s->http[i] = nf_counter_value(m->fetch_http[i]);
    for (int e = 1; e <= NF_FETCH_E_OTHER; e++)
        s->err[e] = nf_counter_value(m->fetch_result[e]);
    s->articles = nf_counter_value(m->parse_articles);
    s->no_link = nf_counter_value(m->parse_no_link);
    s->dedup_new = nf_counter_value(m->dedup_new);
    s->dedup_dup = nf_counter_value(m->dedup_duplicate);
    s->parse_ok = nf_counter_value(m->parse_result[0]);
    for (int i = 1; i < 6; i++)
        s->parse_bad += nf_counter_value(m->parse_result[i]);
    s->bytes = nf_counter_value(m->fetch_bytes);
    s->deferred_host = nf_counter_value(m->deferred_host);
    s->deferred_breaker = nf_counter_value(m->deferred_breaker);
    s->deferred_capacity = nf_counter_value(m->deferred_capacity);
    s->ring_full = nf_counter_value(m->ring_full_articles);
    s->sink_errors = nf_counter_value(m->sink_errors);
    s->in_flight = nf_gauge_value(m->in_flight);
    s->pending = nf_gauge_value(m->pending_articles);
    s->rss_kb = proc_status_kb("self", "VmRSS");
}

static uint64_t snap_fetches(const snap_t *s)
{
    uint64_t n = 0;
    for (int i = 0; i < 6; i++)
        n += s->http[i];
    for (int e = 1; e <= NF_FETCH_E_OTHER; e++)
        n += e == NF_FETCH_E_CANCELLED ? 0 : s->err[e];
    return n;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fputs("usage: bench_crawl [options]\n"
          "  --sources N       feeds, each on its own host (default 100000)\n"
          "  --interval S      crawl interval of every source, seconds (default 900; >= 60)\n"
          "  --seconds T       run time (default 75)\n"
          "  --window W        measured seconds at the end of the run (default 60)\n"
          "  --shards K        runtime shards (default 1)\n"
          "  --sink SPEC       none (default) or jsonl:PATH, e.g. jsonl:/dev/null\n"
          "  --change S        the server changes each feed every S seconds (default 60)\n"
          "  --sample-every S  a crawl.sample line every S seconds (default 5)\n",
          f);
}

static unsigned arg_u(const char *name, const char *v)
{
    char *end;
    unsigned long x = v ? strtoul(v, &end, 10) : 0;
    if (!v || *end || x == 0 || x > 100000000ul) {
        fprintf(stderr, "bench_crawl: %s needs a positive integer\n", name);
        exit(2);
    }
    return (unsigned)x;
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

int main(int argc, char **argv)
{
    opts_t o = {.sources = 100000,
                .interval_s = 900,
                .seconds = 75,
                .window = 60,
                .shards = 1,
                .change_s = 60,
                .sample_every = 5,
                .sink = "none"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--sink") && v)
            o.sink = v;
        else if (!strcmp(a, "--sources"))
            o.sources = arg_u(a, v);
        else if (!strcmp(a, "--interval"))
            o.interval_s = arg_u(a, v);
        else if (!strcmp(a, "--seconds"))
            o.seconds = arg_u(a, v);
        else if (!strcmp(a, "--window"))
            o.window = arg_u(a, v);
        else if (!strcmp(a, "--shards"))
            o.shards = arg_u(a, v);
        else if (!strcmp(a, "--change"))
            o.change_s = arg_u(a, v);
        else if (!strcmp(a, "--sample-every"))
            o.sample_every = arg_u(a, v);
        else {
            fprintf(stderr, "bench_crawl: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        i++; /* every option takes a value */
    }
    if (o.window > o.seconds || o.interval_s < 60) {
        fprintf(stderr, "bench_crawl: need --window <= --seconds and --interval >= 60\n");
        return 2;
    }

    server_t sv;
    int r = server_start(&sv, o.change_s);
    if (r != 0) {
        fprintf(stderr, "bench_crawl: cannot start the test server: %s\n", strerror(-r));
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    nf_fetch_global_init();
    nf_feed_global_init();
    if (nf_metrics_init(o.shards) != 0) {
        fprintf(stderr, "bench_crawl: metrics init failed\n");
        return 1;
    }

    /* Sources. */
    long rss_before_sources = proc_status_kb("self", "VmRSS");
    double t0 = bench_now_s();
    nf_source_list_t sources;
    nf_sources_init(&sources);
    char url[256], err[512];
    for (unsigned i = 0; i < o.sources; i++) {
        snprintf(url, sizeof url, "http://feed-%u.farm.test:%u/feed/%u.xml", i, sv.port, i);
        if (nf_sources_add(&sources, url, "bench", err, sizeof err) != 0) {
            fprintf(stderr, "bench_crawl: %s\n", err);
            return 1;
        }
    }
    double sources_s = bench_now_s() - t0;
    long rss_sources = proc_status_kb("self", "VmRSS");

    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = o.shards;
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    if (!rt) {
        fprintf(stderr, "bench_crawl: %s\n", err);
        return 1;
    }
    static nf_ingest_t in; /* big, and must outlive the runtime */
    nf_ingest_opts_default(&in.o);
    in.o.policy.interval_default_ms = (int64_t)o.interval_s * 1000;
    if (in.o.policy.interval_floor_ms > in.o.policy.interval_default_ms)
        in.o.policy.interval_floor_ms = in.o.policy.interval_default_ms;
    const char *bad = nf_crawl_policy_validate(&in.o.policy);
    if (bad) {
        fprintf(stderr, "bench_crawl: %s\n", bad);
        return 2;
    }
    nf_addrguard_allow(&in.o.guard, "127.0.0.0/8");
    char connect_to[64];
    snprintf(connect_to, sizeof connect_to, "::127.0.0.1:%u", sv.port);
    in.o.fetch.connect_to = connect_to;
    in.sources = &sources;
    in.sink = nf_sink_open(o.sink, o.shards, err, sizeof err);
    if (!in.sink) {
        fprintf(stderr, "bench_crawl: %s\n", err);
        return 1;
    }
    if ((r = nf_ingest_register(rt, &in)) != 0 || (r = nf_runtime_start(rt)) != 0) {
        fprintf(stderr, "bench_crawl: cannot start the runtime: %s\n", strerror(-r));
        return 1;
    }
    double start = bench_now_s();
    double rate = (double)o.sources / o.interval_s;
    unsigned warmup = o.seconds - o.window;
    printf("{\"bench\":\"crawl.config\",\"sources\":%u,\"interval_s\":%u,"
           "\"schedule_fetches_per_s\":%.2f,\"shards\":%u,\"sink\":\"%s\",\"seconds\":%u,"
           "\"warmup_s\":%u,\"window_s\":%u,\"server\":\"libmicrohttpd thread-per-connection, "
           "child process\",\"feed_change_s\":%u,\"sources_load_s\":%.3f,"
           "\"source_def_bytes\":%zu,\"libcurl\":\"%s\",\"cpus\":%ld}\n",
           o.sources, o.interval_s, rate, o.shards, o.sink, o.seconds, warmup, o.window, o.change_s,
           sources_s, sizeof(nf_source_def_t), curl_version_info(CURLVERSION_NOW)->version,
           sysconf(_SC_NPROCESSORS_ONLN));
    fflush(stdout);

    snap_t first, w0, w1, prev, cur;
    snap_take(&first, &in.m, sv.pid);
    prev = w0 = cur = first; /* cur: what the window ends on if interrupted at once */
    bool in_window = warmup == 0;
    long server_threads_peak = 0;
    int64_t in_flight_peak = 0;
    for (unsigned sec = 1; sec <= o.seconds && !interrupted; sec++) {
        double until = start + sec;
        for (double now = bench_now_s(); now < until; now = bench_now_s())
            usleep((useconds_t)((until - now) * 1e6) + 100);
        snap_take(&cur, &in.m, sv.pid);
        long th = proc_status_kb(sv.pidstr, "Threads");
        if (th > server_threads_peak)
            server_threads_peak = th;
        if (cur.in_flight > in_flight_peak)
            in_flight_peak = cur.in_flight;
        if (sec == warmup) {
            w0 = cur;
            in_window = true;
        }
        if (sec % o.sample_every == 0 || sec == o.seconds) {
            double dt = cur.t - prev.t;
            hist_t late = hist_delta(&prev.late, &cur.late);
            double up99, p99 = hist_quantile(&late, 0.99, &up99);
            printf("{\"bench\":\"crawl.sample\",\"t_s\":%u,\"in_window\":%s", sec,
                   in_window && sec > warmup ? "true" : "false");
            put_num("fetches_per_s", (double)(snap_fetches(&cur) - snap_fetches(&prev)) / dt, 1);
            put_num("starts_per_s", (double)(hist_count(&cur.late) - hist_count(&prev.late)) / dt,
                    1);
            put_num("articles_per_s", (double)(cur.articles - prev.articles) / dt, 1);
            put_num("lateness_p99_s", p99, 4);
            put_num("cpu_pct", 100 * (cur.cpu_s - prev.cpu_s) / dt, 1);
            put_num("server_cpu_pct", 100 * (cur.server_cpu_s - prev.server_cpu_s) / dt, 1);
            printf(",\"in_flight\":%lld,\"rss_mb\":%.1f,\"server_threads\":%ld}\n",
                   (long long)cur.in_flight, (double)cur.rss_kb / 1024, th);
            fflush(stdout);
            fprintf(stderr,
                    "bench_crawl: %3u s: %.1f fetches/s, p99 lateness <= %g s, cpu %.0f%%\n", sec,
                    (double)(snap_fetches(&cur) - snap_fetches(&prev)) / dt, up99,
                    100 * (cur.cpu_s - prev.cpu_s) / dt);
            prev = cur;
        }
    }
    w1 = cur;
    long rss_peak = proc_status_kb("self", "VmHWM");
    long server_rss = proc_status_kb(sv.pidstr, "VmRSS");
    long server_rss_peak = proc_status_kb(sv.pidstr, "VmHWM");

    nf_runtime_request_stop(rt);
    int wr = nf_runtime_wait(rt);
    nf_runtime_destroy(rt);
    nf_sink_close(in.sink);
    server_report_t srep;
    server_stop(&sv, &srep);

    /* The window's figures. */
    double win = w1.t - w0.t;
    uint64_t fetches = snap_fetches(&w1) - snap_fetches(&w0);
    hist_t late = hist_delta(&w0.late, &w1.late), fetch = hist_delta(&w0.fetch, &w1.fetch),
           parse = hist_delta(&w0.parse, &w1.parse);
    double u50, u99, u999, fu50, fu99, pu50, pu99;
    double l50 = hist_quantile(&late, 0.5, &u50), l99 = hist_quantile(&late, 0.99, &u99);
    (void)hist_quantile(&late, 0.999, &u999);
    double f50 = hist_quantile(&fetch, 0.5, &fu50), f99 = hist_quantile(&fetch, 0.99, &fu99);
    double p50 = hist_quantile(&parse, 0.5, &pu50), p99 = hist_quantile(&parse, 0.99, &pu99);
    double fps = (double)fetches / win, cpu = w1.cpu_s - w0.cpu_s;
    printf("{\"bench\":\"crawl.result\",\"sources\":%u,\"interval_s\":%u,\"shards\":%u,"
           "\"sink\":\"%s\",\"window_s\":%.1f,\"fetches\":%llu",
           o.sources, o.interval_s, o.shards, o.sink, win, (unsigned long long)fetches);
    put_num("fetches_per_s", fps, 2);
    put_num("schedule_fetches_per_s", rate, 2);
    put_num("ratio_vs_schedule", fps / rate, 3);
    put_num("starts_per_s", (double)hist_count(&late) / win, 2);
    put_num("lateness_p50_s", l50, 4);
    put_num("lateness_p50_le_s", u50, 3);
    put_num("lateness_p99_s", l99, 4);
    put_num("lateness_p99_le_s", u99, 3);
    put_num("lateness_p999_le_s", u999, 3);
    printf(",\"late_over_1s\":%llu,\"late_over_0_5s\":%llu",
           (unsigned long long)hist_above(&late, 1.0), (unsigned long long)hist_above(&late, 0.5));
    put_num("fetch_p50_s", f50, 5);
    put_num("fetch_p99_s", f99, 5);
    put_num("fetch_p99_le_s", fu99, 4);
    put_num("parse_p50_s", p50, 6);
    put_num("parse_p99_s", p99, 6);
    put_num("articles_per_s", (double)(w1.articles - w0.articles) / win, 1);
    put_num("dedup_new_per_s", (double)(w1.dedup_new - w0.dedup_new) / win, 1);
    put_num("dedup_duplicate_per_s", (double)(w1.dedup_dup - w0.dedup_dup) / win, 1);
    put_num("body_kb_per_s", (double)(w1.bytes - w0.bytes) / 1024 / win, 1);
    printf(",\"http\":{");
    static const char *const cls[] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int i = 0, k = 0; i < 6; i++)
        if (w1.http[i] - w0.http[i])
            printf("%s\"%s\":%llu", k++ ? "," : "", cls[i],
                   (unsigned long long)(w1.http[i] - w0.http[i]));
    printf("},\"errors\":{");
    for (int e = 1, k = 0; e <= NF_FETCH_E_OTHER; e++)
        if (w1.err[e] - w0.err[e])
            printf("%s\"%s\":%llu", k++ ? "," : "", nf_fetch_error_name(e),
                   (unsigned long long)(w1.err[e] - w0.err[e]));
    printf("},\"parse_failed\":%llu,\"deferred\":{\"host\":%llu,\"breaker\":%llu,"
           "\"capacity\":%llu},\"ring_full_articles\":%llu,\"sink_errors\":%llu",
           (unsigned long long)(w1.parse_bad - w0.parse_bad),
           (unsigned long long)(w1.deferred_host - w0.deferred_host),
           (unsigned long long)(w1.deferred_breaker - w0.deferred_breaker),
           (unsigned long long)(w1.deferred_capacity - w0.deferred_capacity),
           (unsigned long long)(w1.ring_full - w0.ring_full),
           (unsigned long long)(w1.sink_errors - w0.sink_errors));
    printf(",\"in_flight_peak\":%lld", (long long)in_flight_peak);
    put_num("cpu_s", cpu, 2);
    put_num("cpu_pct", 100 * cpu / win, 1);
    put_num("cpu_ms_per_fetch", fetches ? 1000 * cpu / (double)fetches : NAN, 3);
    put_num("rss_mb_end", (double)w1.rss_kb / 1024, 1);
    put_num("rss_mb_peak", (double)rss_peak / 1024, 1);
    put_num("rss_mb_sources_loaded", (double)rss_sources / 1024, 1);
    put_num("rss_mb_before_sources", (double)rss_before_sources / 1024, 1);
    put_num("target_fetches_per_s", TARGET_RATE, 0);
    put_num("target_p99_lateness_s", TARGET_P99_LATE, 1);
    printf(",\"meets_rate\":%s,\"meets_p99_lateness\":%s,\"window_ge_60s\":%s,"
           "\"clean_shutdown\":%s}\n",
           rate >= TARGET_RATE && fps >= 0.98 * rate ? "true" : "false",
           !isnan(u99) && u99 <= TARGET_P99_LATE ? "true" : "false",
           win >= TARGET_WINDOW_S - 0.5 ? "true" : "false", wr == 0 ? "true" : "false");
    printf("{\"bench\":\"crawl.server\",\"requests\":%llu", (unsigned long long)srep.requests);
    put_num("cpu_s_window", w1.server_cpu_s - w0.server_cpu_s, 2);
    put_num("cpu_pct_window", 100 * (w1.server_cpu_s - w0.server_cpu_s) / win, 1);
    put_num("cpu_s_total", srep.cpu_s, 2);
    put_num("rss_mb_end", (double)server_rss / 1024, 1);
    put_num("rss_mb_peak", (double)server_rss_peak / 1024, 1);
    printf(",\"threads_peak\":%ld}\n", server_threads_peak);
    fflush(stdout);
    nf_sources_free(&sources);
    nf_metrics_shutdown();
    return interrupted ? 1 : 0;
}
