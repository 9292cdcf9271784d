/* bench_e2e.c — the job end to end through a real Kafka broker: a load generator produces
 * read-events at a target rate, the job (another process, started by perf/run_kafka.sh)
 * consumes them and commits interest-updates and trending lists in transactions, and a
 * read_committed consumer here measures when each output became visible.
 *
 * Load generator (one thread, librdkafka, batched): read-events keyed by user_id on
 * PREFIX"read-events", JSON as the job expects:
 *   {"event_id":"e<seq>","user_id":"u<n>","article_id":"<id>","session_id":"s<seq>","ts":<ms>}
 * ts is the wall-clock millisecond at which the event was handed to the producer; users are
 * uniform over --users; articles uniform over the ids read back from PREFIX"articles" (what the
 * job crawled: real topic vectors) or given with --articles. Every event is distinct (own
 * event_id and session), so the job makes one interest-updates record per event. --rate 0 =
 * as fast as the producer's queue takes them ("max" mode).
 * --update-frac F < 1: only a fraction F of the events is fresh; the others repeat a (user,
 * article, session) the job has already seen (session "r", article fixed per user; one such
 * event per user is produced before the warm-up), so trending counts them and interest drops
 * them as repeats: the job's cost with F as many interest-updates records as events, the
 * output volume that coalescing updates per user per epoch would leave.
 *
 * Consumer (another thread, isolation.level=read_committed, fetch.wait.max.ms 20): every record
 * of PREFIX"interest-updates" (its updated_at is the event's ts, so visible time minus
 * updated_at is produce -> visible) and PREFIX"trending" (visible minus window_end: includes the
 * allowed lateness, since a list is due only when the watermark passes the window end).
 *
 * Timeline: warm-up (--warmup s, unmeasured), then the window (--duration s) during which CPU is
 * accounted and events are tagged; then production stops and the consumer waits until the
 * output of every fresh event produced in the window is visible (or --drain s passed; default
 * 30 s + 4 x the interval). Latency percentiles are over the outputs of the window's events that
 * were seen by then (outputs_seen_frac: all of them when sustained); lat_cdf_ms is their whole
 * distribution, the latency at every 0.5 % of them (perf/report.py plots it). CPU seconds over the
 * window come from /proc/PID/stat (job and broker, --job-pid/--broker-pid), getrusage (this
 * process) and /proc/stat (the whole machine: "other" is what none of the three took — other
 * people's processes on a shared machine). Per-thread splits come from /proc/PID/task/ * /stat (the
 * job's "newsflow" thread is its main thread, which sleeps, and the epoch coordinator, unnamed).
 *
 * sustained = the producer achieved >= 97 % of the offered rate and the window's last outputs
 * were visible within 2 x interval + 2 s of the window's end (no backlog left to drain).
 *
 * --per-event 1 (for a job with interest.coalesce, whose record for a user carries the newest of
 * the user's reads that epoch, updated_at, and stands for the older ones too): the load
 * generator keeps each window event's ts in a queue per user; a record of user u with
 * updated_at T makes every queued event of u with ts <= T visible now (a user's events reach the
 * job in order: one key, one partition). Every event then gets exactly one latency, its own, and
 * "outputs" count events made visible, so the sustained rule above holds as it is.
 *
 * --job-log FILE: the job's stderr (JSON log lines); its epoch.committed lines within the window
 * give epochs, records per epoch, pause and commit times.
 *
 * One job in several processes (perf/run_kafka.sh --processes): --job-pid and --job-log take
 * comma-separated lists; cpu_job_s (and job_cpu_us_per_event) is the sum over the processes, the
 * per-thread split sums each thread name over them, and the epoch figures pool their epochs.
 * Nothing here needs the trending output: "sustained" and latency are interest-updates' (trending
 * lists are only counted: in a job split over processes only the owner of trending-panes emits
 * them).
 *
 * One JSON line on stdout ("bench":"kafka_e2e"); progress every 5 s on stderr.
 *   bench_e2e --brokers B --prefix P [--rate R|0] [--duration S] [--warmup S] [--drain S]
 *             [--users U] [--update-frac F] [--articles a,b,...] [--interval-ms I]
 *             [--linger-ms L] [--compression none|lz4|zstd|snappy|gzip] [--job-pid PID[,PID...]]
 *             [--broker-pid PID] [--job-log FILE[,FILE...]] [--label TEXT] [--seed N] */
#include <librdkafka/rdkafka.h>

#include "../bench_clock.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define LAT_MAX_MS     600000 /* histogram of 1 ms buckets; later ones go to the last bucket */
#define LAT_CDF_POINTS 201    /* latency at every 0.5 % of the outputs, in the JSON line */
#define MAX_SECONDS    3600
#define MAX_TREND      4096
#define MAX_JOBS       16 /* job processes whose CPU is summed (--job-pid P1,P2,...) */

typedef struct {
    const char *brokers, *prefix, *label, *job_log, *compression, *articles_arg;
    double rate, duration_s, warmup_s, drain_s, update_frac;
    bool per_event;
    unsigned users, interval_ms, linger_ms;
    uint64_t seed;
    int job_pids[MAX_JOBS], broker_pid;
    size_t njobs; /* --job-pid: one pid, or a comma-separated list (one job in N processes) */
} opts_t;

static opts_t o = {.prefix = "",
                   .label = "",
                   .compression = "none",
                   .rate = 100000,
                   .duration_s = 60,
                   .warmup_s = 15,
                   .drain_s = 0,
                   .update_frac = 1.0,
                   .users = 1000000,
                   .interval_ms = 1000,
                   .linger_ms = 10,
                   .seed = 42};

static char **articles;
static size_t narticles;

/* Wall-clock window (ms since the epoch), fixed before the producer starts. */
static int64_t t_start, t_ws, t_we;

static atomic_bool stop_producer, stop_consumer;
static atomic_uint_fast64_t produced, produced_window, produced_window_fresh, stalls, delivered,
    delivered_window, delivery_errors;
static atomic_uint_fast64_t outputs_total, outputs_window, outputs_wall_window, trending_total;
static uint32_t *lat_hist; /* latency of the window's outputs, 1 ms buckets */
static uint64_t lat_max;
static uint64_t sec_n[MAX_SECONDS], sec_sum[MAX_SECONDS]; /* per second of the window */
static int64_t trend_lag[MAX_TREND], trend_end[MAX_TREND];
static size_t ntrend;
static char interest_topic[256], trending_topic[256], events_topic[256], articles_topic[256];

/* --per-event: the window's events per user, oldest first (singly linked through ev_next). */
#define EVQ_NONE UINT32_MAX
static pthread_mutex_t evq_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t *ev_ts;
static uint32_t *ev_next, *evq_head, *evq_tail, ev_n, ev_cap;
static uint64_t ev_dropped; /* window events beyond ev_cap (not measured) */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000),
                          (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    nanosleep(&ts, NULL);
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* ---- RFC 3339 to epoch ms ---- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int num(const char *p, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)p[i]))
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* "YYYY-MM-DDTHH:MM:SS[.fff...](Z|+hh:mm|-hh:mm)" -> ms; -1 if it is not that. */
static int64_t parse_rfc3339(const char *p, size_t len)
{
    if (len < 20 || p[4] != '-' || p[7] != '-' || (p[10] != 'T' && p[10] != 't') || p[13] != ':' ||
        p[16] != ':')
        return -1;
    int y = num(p, 4), mo = num(p + 5, 2), d = num(p + 8, 2), h = num(p + 11, 2),
        mi = num(p + 14, 2), s = num(p + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || mi < 0 || s < 0)
        return -1;
    size_t i = 19;
    int ms = 0, digits = 0;
    if (i < len && p[i] == '.') {
        for (i++; i < len && isdigit((unsigned char)p[i]); i++, digits++)
            if (digits < 3)
                ms = ms * 10 + (p[i] - '0');
        for (; digits < 3; digits++)
            ms *= 10;
    }
    int64_t off = 0;
    if (i < len && (p[i] == '+' || p[i] == '-') && i + 6 <= len) {
        int oh = num(p + i + 1, 2), om = num(p + i + 4, 2);
        if (oh < 0 || om < 0)
            return -1;
        off = (p[i] == '+' ? 1 : -1) * ((int64_t)oh * 60 + om) * 60000;
    } else if (i >= len || (p[i] != 'Z' && p[i] != 'z')) {
        return -1;
    }
    int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
    return ((days * 24 + h) * 60 + mi) * 60000 + (int64_t)s * 1000 + ms - off;
}

/* The string value of "field" in a flat JSON text: the last occurrence (outputs end with the
 * fields we look for); NULL if absent. */
static const char *json_str(const char *v, size_t len, const char *field, size_t *out_len)
{
    char pat[64];
    int pl = snprintf(pat, sizeof pat, "\"%s\":\"", field);
    if (pl <= 0 || (size_t)pl >= sizeof pat || len < (size_t)pl)
        return NULL;
    for (size_t i = len - (size_t)pl + 1; i-- > 0;) {
        if (v[i] == '"' && memcmp(v + i, pat, (size_t)pl) == 0) {
            const char *s = v + i + pl, *e = memchr(s, '"', len - (size_t)(s - v));
            if (!e)
                return NULL;
            *out_len = (size_t)(e - s);
            return s;
        }
    }
    return NULL;
}

/* ---- CPU accounting from /proc ---- */

static double clk_tck;

/* utime + stime (ticks) from a /proc/.../stat line: fields after the ")" of comm. */
static int64_t stat_ticks(const char *path, char *comm, size_t commlen)
{
    char buf[2048];
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (!l || !r)
        return -1;
    if (comm) {
        size_t cl = (size_t)(r - l - 1) < commlen - 1 ? (size_t)(r - l - 1) : commlen - 1;
        memcpy(comm, l + 1, cl);
        comm[cl] = 0;
    }
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15) */
    unsigned long long ut = 0, st = 0;
    if (sscanf(r + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (int64_t)(ut + st);
}

static double proc_cpu_s(int pid)
{
    if (pid <= 0)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int64_t t = stat_ticks(path, NULL, 0);
    return t < 0 ? -1 : (double)t / clk_tck;
}

/* The job's CPU seconds: the sum over its processes (0 without --job-pid). */
static double jobs_cpu_s(void)
{
    double s = 0;
    for (size_t i = 0; i < o.njobs; i++) {
        double c = proc_cpu_s(o.job_pids[i]);
        if (c > 0)
            s += c;
    }
    return s;
}

typedef struct {
    double busy_s, idle_s, steal_s;
} machine_t;

static machine_t machine_cpu(void)
{
    machine_t m = {0, 0, 0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return m;
    unsigned long long u = 0, ni = 0, sy = 0, id = 0, io = 0, irq = 0, sirq = 0, stl = 0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &u, &ni, &sy, &id, &io, &irq,
               &sirq, &stl) >= 4) {
        m.busy_s = (double)(u + ni + sy + irq + sirq) / clk_tck;
        m.idle_s = (double)(id + io) / clk_tck;
        m.steal_s = (double)stl / clk_tck;
    }
    fclose(f);
    return m;
}

typedef struct {
    int tid;
    int64_t ticks;
    char comm[32];
} thr_t;

typedef struct {
    thr_t *t;
    size_t n;
} thrs_t;

static thrs_t threads_of(int pid)
{
    thrs_t r = {NULL, 0};
    if (pid <= 0)
        return r;
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return r;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        if (r.n == cap) {
            cap = cap ? cap * 2 : 64;
            thr_t *nt = realloc(r.t, cap * sizeof *nt);
            if (!nt)
                break;
            r.t = nt;
        }
        thr_t *t = &r.t[r.n];
        t->tid = atoi(e->d_name);
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, t->tid);
        t->ticks = stat_ticks(path, t->comm, sizeof t->comm);
        if (t->ticks >= 0)
            r.n++;
    }
    closedir(d);
    return r;
}

typedef struct {
    char name[32];
    double s;
} group_t;

static int group_cmp(const void *a, const void *b)
{
    double x = ((const group_t *)a)->s, y = ((const group_t *)b)->s;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The threads of every job process in one list (tids are unique across processes, so
 * threads_json matches them as it does for one process; a name sums over the processes). */
static thrs_t jobs_threads(void)
{
    thrs_t r = {NULL, 0};
    for (size_t i = 0; i < o.njobs; i++) {
        thrs_t one = threads_of(o.job_pids[i]);
        thr_t *nt = one.n ? realloc(r.t, (r.n + one.n) * sizeof *nt) : r.t;
        if (nt) {
            r.t = nt;
            memcpy(r.t + r.n, one.t, one.n * sizeof *nt);
            r.n += one.n;
        }
        free(one.t);
    }
    return r;
}

/* CPU seconds per thread name between two snapshots, as a JSON object (top 12, the rest as
 * "(other)"); collapse = digit runs become "N" (a pool of numbered threads is one entry). */
static void threads_json(char *out, size_t cap, const thrs_t *a, const thrs_t *b, bool collapse)
{
    group_t g[256];
    memset(g, 0, sizeof g);
    size_t ng = 0;
    for (size_t i = 0; i < b->n; i++) {
        int64_t before = 0;
        for (size_t j = 0; j < a->n; j++)
            if (a->t[j].tid == b->t[i].tid) {
                before = a->t[j].ticks;
                break;
            }
        double s = (double)(b->t[i].ticks - before) / clk_tck;
        char name[32];
        size_t k = 0;
        for (const char *c = b->t[i].comm; *c && k + 1 < sizeof name; c++) {
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                continue;
            if (collapse && isdigit((unsigned char)*c)) {
                if (k == 0 || name[k - 1] != 'N')
                    name[k++] = 'N';
                continue;
            }
            name[k++] = *c;
        }
        name[k] = 0;
        size_t x = 0;
        while (x < ng && strcmp(g[x].name, name) != 0)
            x++;
        if (x == ng) {
            if (ng == sizeof g / sizeof g[0])
                x = ng - 1;
            else {
                snprintf(g[ng].name, sizeof g[ng].name, "%s", name);
                g[ng++].s = 0;
            }
        }
        g[x].s += s;
    }
    qsort(g, ng, sizeof g[0], group_cmp);
    size_t at = 0;
    double rest = 0;
    at += (size_t)snprintf(out + at, cap - at, "{");
    for (size_t i = 0; i < ng; i++) {
        if (i >= 12) {
            rest += g[i].s;
            continue;
        }
        if (at < cap)
            at += (size_t)snprintf(out + at, cap - at, "%s\"%s\":%.2f", i ? "," : "", g[i].name,
                                   g[i].s);
    }
    if (rest > 0 && at < cap)
        at += (size_t)snprintf(out + at, cap - at, ",\"(other)\":%.2f", rest);
    if (at < cap)
        snprintf(out + at, cap - at, "}");
}

static void loadavg(double v[3])
{
    v[0] = v[1] = v[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &v[0], &v[1], &v[2]) != 3)
            v[0] = v[1] = v[2] = -1;
        fclose(f);
    }
}

/* ---- Kafka ---- */

static void conf_or_die(rd_kafka_conf_t *c, const char *k, const char *v)
{
    char err[256];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "bench_e2e: librdkafka %s=%s: %s\n", k, v, err);
        exit(2);
    }
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (level <= 4)
        fprintf(stderr, "bench_e2e: librdkafka %s: %s\n", fac, buf);
}

static rd_kafka_t *consumer_new(void)
{
    char err[256];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    conf_or_die(c, "bootstrap.servers", o.brokers);
    conf_or_die(c, "group.id", "nf-bench-e2e"); /* never joined: partitions are assigned */
    conf_or_die(c, "isolation.level", "read_committed");
    conf_or_die(c, "enable.auto.commit", "false");
    conf_or_die(c, "enable.auto.offset.store", "false");
    conf_or_die(c, "fetch.wait.max.ms", "20");
    conf_or_die(c, "fetch.error.backoff.ms", "20");
    rd_kafka_conf_set_log_cb(c, log_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "bench_e2e: consumer: %s\n", err);
        exit(1);
    }
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* Assigns every partition of the named topics from the beginning. */
static void assign_all(rd_kafka_t *rk, const char *const *topics, int n)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    for (int t = 0; t < n; t++) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topics[t], NULL);
        const rd_kafka_metadata_t *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        if (e || md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt < 1) {
            fprintf(stderr, "bench_e2e: topic %s: %s\n", topics[t],
                    e ? rd_kafka_err2str(e)
                      : rd_kafka_err2str(md->topic_cnt ? md->topics[0].err
                                                       : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
            exit(1);
        }
        for (int p = 0; p < md->topics[0].partition_cnt; p++)
            rd_kafka_topic_partition_list_add(l, topics[t], p)->offset = RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e) {
        fprintf(stderr, "bench_e2e: assign: %s\n", rd_kafka_err2str(e));
        exit(1);
    }
}

static void add_article(const char *s, size_t n)
{
    for (size_t i = 0; i < narticles; i++)
        if (strlen(articles[i]) == n && memcmp(articles[i], s, n) == 0)
            return;
    char **na = realloc(articles, (narticles + 1) * sizeof *na);
    if (!na)
        exit(1);
    articles = na;
    articles[narticles] = strndup(s, n);
    narticles++;
}

/* The article ids the job committed on PREFIX"articles": read until 3 s pass without a new one
 * (after the first), at most 120 s. */
static void load_articles_from_topic(void)
{
    rd_kafka_t *rk = consumer_new();
    const char *t[] = {articles_topic};
    assign_all(rk, t, 1);
    int64_t start = wall_ms(), last = 0;
    while (wall_ms() - start < 120000 && (narticles == 0 || wall_ms() - last < 3000)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m)
            continue;
        size_t n;
        const char *id;
        if (!m->err && m->payload &&
            (id = json_str(m->payload, m->len, "article_id", &n)) != NULL && n > 0) {
            size_t before = narticles;
            add_article(id, n);
            if (narticles != before)
                last = wall_ms();
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err) {
        atomic_fetch_add(&delivery_errors, 1);
        return;
    }
    atomic_fetch_add(&delivered, 1);
    if (m->_private) /* a fresh event of the window: its output is expected */
        atomic_fetch_add(&delivered_window, 1);
}

static rd_kafka_t *producer_new(void)
{
    char err[256], v[32];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    conf_or_die(c, "bootstrap.servers", o.brokers);
    conf_or_die(c, "acks", "all");
    conf_or_die(c, "enable.idempotence", "true");
    snprintf(v, sizeof v, "%u", o.linger_ms);
    conf_or_die(c, "linger.ms", v);
    conf_or_die(c, "batch.size", "1000000");
    conf_or_die(c, "batch.num.messages", "10000");
    conf_or_die(c, "compression.type", o.compression);
    conf_or_die(c, "queue.buffering.max.messages", "2000000");
    conf_or_die(c, "queue.buffering.max.kbytes", "1048576");
    rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
    rd_kafka_conf_set_log_cb(c, log_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "bench_e2e: producer: %s\n", err);
        exit(1);
    }
    return rk;
}

static size_t event_bytes_sum, event_count_sample;

/* Produces one event; fresh: own session (a new (user, article, session)), else the user's
 * repeat triple. Returns after the producer's queue took it. */
static void produce_one(rd_kafka_t *rk, rd_kafka_topic_t *rkt, uint64_t seq, uint32_t user,
                        bool fresh, int64_t ts, bool in_window)
{
    char key[16], buf[512];
    int kl = snprintf(key, sizeof key, "u%" PRIu32, user);
    const char *art = fresh ? articles[rnd() % narticles] : articles[user % narticles];
    int n;
    if (fresh)
        n = snprintf(buf, sizeof buf,
                     "{\"event_id\":\"e%" PRIu64 "\",\"user_id\":\"%s\",\"article_id\":\"%s\","
                     "\"session_id\":\"s%" PRIu64 "\",\"ts\":%" PRId64 "}",
                     seq, key, art, seq, ts);
    else
        n = snprintf(buf, sizeof buf,
                     "{\"event_id\":\"e%" PRIu64 "\",\"user_id\":\"%s\",\"article_id\":\"%s\","
                     "\"session_id\":\"r\",\"ts\":%" PRId64 "}",
                     seq, key, art, ts);
    if ((seq & 1023) == 0) {
        event_bytes_sum += (size_t)n;
        event_count_sample++;
    }
    for (;;) {
        rd_kafka_resp_err_t e =
            rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, buf, (size_t)n, key,
                             (size_t)kl, in_window && fresh ? (void *)1 : NULL);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        e = rd_kafka_last_error();
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "bench_e2e: produce: %s\n", rd_kafka_err2str(e));
            exit(1);
        }
        atomic_fetch_add(&stalls, 1);
        rd_kafka_poll(rk, 1);
    }
}

static rd_kafka_t *prod;
static rd_kafka_topic_t *prod_topic;
static uint64_t seq_next;

/* One repeat-triple event per user, as fast as the queue takes them, before the warm-up. */
static void prime_users(void)
{
    int64_t ts = wall_ms();
    for (uint32_t u = 0; u < o.users; u++) {
        if ((u & 255) == 0) {
            ts = wall_ms();
            rd_kafka_poll(prod, 0);
        }
        produce_one(prod, prod_topic, seq_next++, u, false, ts, false);
    }
    rd_kafka_flush(prod, 60000);
}

static void evq_push(uint32_t user, int64_t ts)
{
    pthread_mutex_lock(&evq_lock);
    if (ev_n < ev_cap) {
        uint32_t i = ev_n++;
        ev_ts[i] = ts;
        ev_next[i] = EVQ_NONE;
        if (evq_tail[user] == EVQ_NONE)
            evq_head[user] = i;
        else
            ev_next[evq_tail[user]] = i;
        evq_tail[user] = i;
    } else {
        ev_dropped++;
    }
    pthread_mutex_unlock(&evq_lock);
}

static void record_latency(int64_t now, int64_t ts)
{
    uint64_t lat = now > ts ? (uint64_t)(now - ts) : 0;
    lat_hist[lat < LAT_MAX_MS ? lat : LAT_MAX_MS]++;
    if (lat > lat_max)
        lat_max = lat;
    size_t sec = (size_t)((ts - t_ws) / 1000);
    if (sec < MAX_SECONDS) {
        sec_n[sec]++;
        sec_sum[sec] += lat;
    }
    atomic_fetch_add_explicit(&outputs_window, 1, memory_order_relaxed);
}

/* --per-event: a record of user u with updated_at T makes u's queued events with ts <= T
 * visible now. */
static void evq_cover(const char *user_id, size_t n, int64_t T, int64_t now)
{
    if (n < 2 || user_id[0] != 'u')
        return;
    uint64_t u = 0;
    for (size_t i = 1; i < n; i++)
        u = u * 10 + (uint64_t)(user_id[i] - '0');
    if (u >= o.users)
        return;
    pthread_mutex_lock(&evq_lock);
    uint32_t i = evq_head[u];
    while (i != EVQ_NONE && ev_ts[i] <= T) {
        record_latency(now, ev_ts[i]);
        i = ev_next[i];
    }
    evq_head[u] = i;
    if (i == EVQ_NONE)
        evq_tail[u] = EVQ_NONE;
    pthread_mutex_unlock(&evq_lock);
}

static void *producer_main(void *arg)
{
    (void)arg;
    uint64_t n0 = 0;
    int64_t ts = wall_ms();
    struct timespec m0;
    clock_gettime(CLOCK_MONOTONIC, &m0);
    uint64_t fresh_cut = (uint64_t)(o.update_frac * 4294967296.0);
    while (!atomic_load(&stop_producer)) {
        ts = wall_ms();
        if (ts >= t_we)
            break;
        uint64_t want;
        if (o.rate > 0) {
            struct timespec m;
            clock_gettime(CLOCK_MONOTONIC, &m);
            double el = (double)(m.tv_sec - m0.tv_sec) + (double)(m.tv_nsec - m0.tv_nsec) / 1e9;
            uint64_t target = (uint64_t)(el * o.rate);
            if (target <= n0) {
                rd_kafka_poll(prod, 0);
                sleep_ms(0.5);
                continue;
            }
            want = target - n0 > 4096 ? 4096 : target - n0;
        } else {
            want = 4096;
        }
        for (uint64_t i = 0; i < want; i++) {
            if ((i & 127) == 0)
                ts = wall_ms();
            bool in_window = ts >= t_ws && ts < t_we;
            uint32_t user = (uint32_t)(rnd() % o.users);
            bool fresh = o.update_frac >= 1.0 || (rnd() & 0xffffffffu) < fresh_cut;
            produce_one(prod, prod_topic, seq_next++, user, fresh, ts, in_window);
            if (in_window) {
                atomic_fetch_add_explicit(&produced_window, 1, memory_order_relaxed);
                if (fresh)
                    atomic_fetch_add_explicit(&produced_window_fresh, 1, memory_order_relaxed);
                if (fresh && o.per_event)
                    evq_push(user, ts);
            }
        }
        n0 += want;
        atomic_store_explicit(&produced, n0, memory_order_relaxed);
        rd_kafka_poll(prod, 0);
    }
    rd_kafka_flush(prod, 60000);
    return NULL;
}

static void *consumer_main(void *arg)
{
    rd_kafka_t *rk = arg;
    rd_kafka_message_t *batch[1024];
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
    while (!atomic_load(&stop_consumer)) {
        ssize_t got = rd_kafka_consume_batch_queue(q, 100, batch, 1024);
        if (got <= 0)
            continue;
        int64_t now = wall_ms();
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = batch[i];
            if (m->err || !m->payload) {
                if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    fprintf(stderr, "bench_e2e: consume: %s\n", rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
                continue;
            }
            const char *tn = rd_kafka_topic_name(m->rkt);
            size_t n;
            const char *s;
            if (strcmp(tn, interest_topic) == 0) {
                atomic_fetch_add_explicit(&outputs_total, 1, memory_order_relaxed);
                if (now >= t_ws && now < t_we)
                    atomic_fetch_add_explicit(&outputs_wall_window, 1, memory_order_relaxed);
                s = json_str(m->payload, m->len, "updated_at", &n);
                int64_t ts = s ? parse_rfc3339(s, n) : -1;
                if (o.per_event) {
                    size_t un;
                    const char *uid = json_str(m->payload, m->len, "user_id", &un);
                    if (uid && ts >= 0)
                        evq_cover(uid, un, ts, now);
                } else if (ts >= t_ws && ts < t_we) {
                    record_latency(now, ts);
                }
            } else if (strcmp(tn, trending_topic) == 0) {
                atomic_fetch_add_explicit(&trending_total, 1, memory_order_relaxed);
                s = json_str(m->payload, m->len, "window_end", &n);
                int64_t we = s ? parse_rfc3339(s, n) : -1;
                if (we >= 0 && ntrend < MAX_TREND) {
                    trend_lag[ntrend] = now - we;
                    trend_end[ntrend++] = we;
                }
            }
            rd_kafka_message_destroy(m);
        }
    }
    rd_kafka_queue_destroy(q);
    return NULL;
}

static uint64_t hist_pct(const uint32_t *h, uint64_t total, double p)
{
    if (!total)
        return 0;
    uint64_t want = (uint64_t)(p * (double)total + 0.5), acc = 0;
    if (want < 1)
        want = 1;
    for (uint64_t i = 0; i <= LAT_MAX_MS; i++) {
        acc += h[i];
        if (acc >= want)
            return i;
    }
    return LAT_MAX_MS;
}

/* ",\"lat_cdf_ms\":[q0,q0.005,...,q1]": the latency at every 0.5 % of the outputs (the CDF that
 * perf/report.py plots; q0 is the fastest, q1 the slowest). */
static void cdf_json(char *out, size_t cap, const uint32_t *h, uint64_t total)
{
    size_t w = (size_t)snprintf(out, cap, ",\"lat_cdf_ms\":[");
    uint64_t acc = 0, i = 0;
    for (int k = 0; k < LAT_CDF_POINTS && w < cap; k++) {
        uint64_t want = k ? (uint64_t)((double)k / (LAT_CDF_POINTS - 1) * (double)total + 0.5) : 1;
        while (i < LAT_MAX_MS && acc + h[i] < want)
            acc += h[i++];
        w += (size_t)snprintf(out + w, cap - w, "%s%" PRIu64, k ? "," : "", i);
    }
    if (w < cap)
        snprintf(out + w, cap - w, "]");
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct_d(double *v, size_t n, double p)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_d);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

/* One "name": number field of a log line; -1 if absent. */
static double log_num(const char *line, const char *field)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", field);
    const char *p = strstr(line, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

enum { E_PAUSE, E_DRAIN, E_SNAP, E_COMMIT, E_WRITE, E_PEND, E_PROD, E_APPLY, E_N };

/* The job's epoch.committed log lines within the window: epochs, records, pause (and its
 * drain and snapshot parts), commit (and its write, pending, produce and apply parts). --job-log
 * may name several files (one per process, comma-separated): their epochs are pooled
 * (records_per_epoch is then per process's epoch). */
static void job_log_json(char *out, size_t cap)
{
    static const char *const fields[E_N] = {"pause_ms", "drain_ms",   "snapshot_ms", "commit_ms",
                                            "write_ms", "pending_ms", "produce_ms",  "apply_ms"};
    snprintf(out, cap, "null");
    if (!o.job_log)
        return;
    size_t cap_n = 4096, n = 0, warns = 0, files = 0;
    double *v[E_N] = {0};
    for (int f = 0; f < E_N; f++)
        v[f] = malloc(cap_n * sizeof *v[f]);
    double records = 0;
    char *line = NULL, *paths = strdup(o.job_log);
    size_t lcap = 0;
    bool ok = paths != NULL;
    for (int f = 0; f < E_N; f++)
        ok &= v[f] != NULL;
    for (char *save = NULL, *path = ok ? strtok_r(paths, ",", &save) : NULL; path;
         path = strtok_r(NULL, ",", &save)) {
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        files++;
        ssize_t ll;
        while ((ll = getline(&line, &lcap, f)) > 0) {
            size_t tl;
            const char *ts = json_str(line, (size_t)ll, "ts", &tl);
            int64_t t = ts ? parse_rfc3339(ts, tl) : -1;
            if (t < t_ws || t >= t_we)
                continue;
            if (strstr(line, "\"level\":\"warn\"") || strstr(line, "\"level\":\"error\""))
                warns++;
            if (!strstr(line, "\"msg\":\"epoch.committed\"") || n == cap_n)
                continue;
            double r = log_num(line, "records"), p = log_num(line, "pause_ms"),
                   c = log_num(line, "commit_ms");
            if (r < 0 || p < 0 || c < 0)
                continue;
            records += r;
            for (int k = 0; k < E_N; k++)
                v[k][n] = log_num(line, fields[k]); /* -1: a build before drain/snapshot */
            n++;
        }
        fclose(f);
    }
    free(line);
    free(paths);
    if (files)
        snprintf(out, cap,
                 "{\"epochs\":%zu,\"records_per_epoch\":%.0f,\"commit_ms_p50\":%.1f,"
                 "\"commit_ms_p99\":%.1f,\"commit_ms_max\":%.1f,\"pause_ms_p50\":%.2f,"
                 "\"pause_ms_max\":%.2f,\"drain_ms_p50\":%.2f,\"snapshot_ms_p50\":%.2f,"
                 "\"snapshot_ms_max\":%.2f,\"write_ms_p50\":%.1f,\"pending_ms_p50\":%.1f,"
                 "\"produce_ms_p50\":%.1f,\"apply_ms_p50\":%.1f,\"warnings\":%zu}",
                 n, n ? records / (double)n : 0, pct_d(v[E_COMMIT], n, 0.5),
                 pct_d(v[E_COMMIT], n, 0.99), pct_d(v[E_COMMIT], n, 1.0), pct_d(v[E_PAUSE], n, 0.5),
                 pct_d(v[E_PAUSE], n, 1.0), pct_d(v[E_DRAIN], n, 0.5), pct_d(v[E_SNAP], n, 0.5),
                 pct_d(v[E_SNAP], n, 1.0), pct_d(v[E_WRITE], n, 0.5), pct_d(v[E_PEND], n, 0.5),
                 pct_d(v[E_PROD], n, 0.5), pct_d(v[E_APPLY], n, 0.5), warns);
    for (int f = 0; f < E_N; f++)
        free(v[f]);
}

static void usage(void)
{
    fprintf(
        stderr,
        "usage: bench_e2e --brokers B --prefix P [--rate R|0] [--duration S] [--warmup S]\n"
        "                 [--drain S] [--users U] [--update-frac F] [--articles a,b,...]\n"
        "                 [--interval-ms I] [--linger-ms L] [--compression C]\n"
        "                 [--job-pid PID[,PID...]] [--broker-pid PID] [--job-log FILE[,FILE...]]\n"
        "                 [--label T]\n"
        "                 [--seed N] [--per-event 1]\n"
        "  --rate 0 = as fast as the producer takes them; --interval-ms is the job's\n"
        "  checkpoint.interval_ms (recorded, and it sets the sustained criterion).\n"
        "  Several --job-pid (and --job-log) values: one job in several processes; their CPU\n"
        "  and epochs are summed.\n"
        "  --per-event 1: each event's own latency when records stand for several (a job\n"
        "  with interest.coalesce): a user's record covers its queued events up to updated_at.\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            usage();
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--brokers"))
            o.brokers = v;
        else if (!strcmp(a, "--prefix"))
            o.prefix = v;
        else if (!strcmp(a, "--rate"))
            o.rate = strtod(v, NULL);
        else if (!strcmp(a, "--duration"))
            o.duration_s = strtod(v, NULL);
        else if (!strcmp(a, "--warmup"))
            o.warmup_s = strtod(v, NULL);
        else if (!strcmp(a, "--drain"))
            o.drain_s = strtod(v, NULL);
        else if (!strcmp(a, "--users"))
            o.users = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--per-event"))
            o.per_event = atoi(v) != 0;
        else if (!strcmp(a, "--update-frac"))
            o.update_frac = strtod(v, NULL);
        else if (!strcmp(a, "--articles"))
            o.articles_arg = v;
        else if (!strcmp(a, "--interval-ms"))
            o.interval_ms = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--linger-ms"))
            o.linger_ms = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--compression"))
            o.compression = v;
        else if (!strcmp(a, "--job-pid")) {
            char *copy = strdup(v);
            o.njobs = 0;
            for (char *save = NULL, *t = strtok_r(copy, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                if (o.njobs == MAX_JOBS || atoi(t) <= 0)
                    usage();
                o.job_pids[o.njobs++] = atoi(t);
            }
            free(copy);
        } else if (!strcmp(a, "--broker-pid"))
            o.broker_pid = atoi(v);
        else if (!strcmp(a, "--job-log"))
            o.job_log = v;
        else if (!strcmp(a, "--label"))
            o.label = v;
        else if (!strcmp(a, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else
            usage();
    }
    if (!o.brokers || o.users == 0 || o.duration_s <= 0 || o.duration_s >= MAX_SECONDS ||
        o.warmup_s < 0 || o.rate < 0 || o.update_frac <= 0 || o.update_frac > 1 ||
        o.interval_ms == 0 || strchr(o.label, '"') || strchr(o.label, '\\'))
        usage();
    if (o.drain_s <= 0)
        o.drain_s = 30 + 4.0 * o.interval_ms / 1000;
    clk_tck = (double)sysconf(_SC_CLK_TCK);
    rng_state = o.seed * 0x9e3779b97f4a7c15ull + 1;
    snprintf(interest_topic, sizeof interest_topic, "%sinterest-updates", o.prefix);
    snprintf(trending_topic, sizeof trending_topic, "%strending", o.prefix);
    snprintf(events_topic, sizeof events_topic, "%sread-events", o.prefix);
    snprintf(articles_topic, sizeof articles_topic, "%sarticles", o.prefix);
    lat_hist = calloc(LAT_MAX_MS + 1, sizeof *lat_hist);
    if (!lat_hist)
        return 1;
    if (o.per_event) {
        double cap = (o.rate > 0 ? o.rate : 1e6) * o.duration_s * 1.1 + 1e6;
        ev_cap = cap < 4e9 ? (uint32_t)cap : 4000000000u;
        ev_ts = malloc((size_t)ev_cap * sizeof *ev_ts);
        ev_next = malloc((size_t)ev_cap * sizeof *ev_next);
        evq_head = malloc((size_t)o.users * sizeof *evq_head);
        evq_tail = malloc((size_t)o.users * sizeof *evq_tail);
        if (!ev_ts || !ev_next || !evq_head || !evq_tail) {
            fprintf(stderr, "bench_e2e: no memory for --per-event queues\n");
            return 1;
        }
        memset(evq_head, 0xff, (size_t)o.users * sizeof *evq_head);
        memset(evq_tail, 0xff, (size_t)o.users * sizeof *evq_tail);
    }

    if (o.articles_arg) {
        char *copy = strdup(o.articles_arg);
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            add_article(t, strlen(t));
        free(copy);
    } else {
        load_articles_from_topic();
    }
    if (narticles == 0) {
        fprintf(stderr, "bench_e2e: no article ids (none on %s within 120 s, no --articles)\n",
                articles_topic);
        return 1;
    }
    fprintf(stderr, "bench_e2e: %zu article ids (%s)\n", narticles,
            o.articles_arg ? "--articles" : articles_topic);

    rd_kafka_t *cons = consumer_new();
    const char *outs[] = {interest_topic, trending_topic};
    assign_all(cons, outs, 2);
    pthread_t ct, pt;
    if (pthread_create(&ct, NULL, consumer_main, cons) != 0)
        return 1;

    prod = producer_new();
    prod_topic = rd_kafka_topic_new(prod, events_topic, NULL);
    if (o.update_frac < 1.0) {
        fprintf(stderr, "bench_e2e: priming %u users with their repeat (user, article, session)\n",
                o.users);
        prime_users();
    }

    t_start = wall_ms();
    t_ws = t_start + (int64_t)(o.warmup_s * 1000);
    t_we = t_ws + (int64_t)(o.duration_s * 1000);
    if (pthread_create(&pt, NULL, producer_main, NULL) != 0)
        return 1;

    double la0[3], la1[3];
    double job0 = 0, brk0 = 0, self0 = 0, job1, brk1, self1;
    machine_t m0 = {0, 0, 0}, m1;
    thrs_t jt0 = {NULL, 0}, bt0 = {NULL, 0}, jt1, bt1;
    int64_t cpu_t0 = 0, cpu_t1;
    bool sampled = false;
    uint64_t prev_prod = 0, prev_out = 0;
    int64_t prev_t = t_start, next_progress = t_start + 5000;
    for (;;) {
        int64_t now = wall_ms();
        if (!sampled && now >= t_ws) {
            loadavg(la0);
            job0 = jobs_cpu_s();
            brk0 = proc_cpu_s(o.broker_pid);
            self0 = bench_cpu_s();
            m0 = machine_cpu();
            jt0 = jobs_threads();
            bt0 = threads_of(o.broker_pid);
            cpu_t0 = wall_ms();
            sampled = true;
        }
        if (now >= t_we)
            break;
        if (now >= next_progress) {
            uint64_t p = atomic_load(&produced), out = atomic_load(&outputs_total);
            double dt = (double)(now - prev_t) / 1000;
            fprintf(
                stderr,
                "bench_e2e: %5.1f s %s: produced %.0f/s, outputs %.0f/s, in flight %" PRIu64 "\n",
                (double)(now - t_start) / 1000, now < t_ws ? "warm-up" : "window",
                (double)(p - prev_prod) / dt, (double)(out - prev_out) / dt, p > out ? p - out : 0);
            prev_prod = p;
            prev_out = out;
            prev_t = now;
            next_progress += 5000;
        }
        int64_t until = !sampled ? t_ws : t_we;
        if (until > next_progress)
            until = next_progress;
        sleep_ms(until - now > 100 ? 100 : (double)(until - now));
    }
    job1 = jobs_cpu_s();
    brk1 = proc_cpu_s(o.broker_pid);
    self1 = bench_cpu_s();
    m1 = machine_cpu();
    jt1 = jobs_threads();
    bt1 = threads_of(o.broker_pid);
    cpu_t1 = wall_ms();
    loadavg(la1);
    uint64_t backlog_at_end = atomic_load(&produced_window_fresh) - atomic_load(&outputs_window);

    pthread_join(pt, NULL);
    uint64_t expect = atomic_load(&delivered_window);
    int64_t deadline = t_we + (int64_t)(o.drain_s * 1000), drain_ms = -1;
    while (wall_ms() < deadline) {
        if (atomic_load(&outputs_window) >= expect) {
            drain_ms = wall_ms() - t_we;
            break;
        }
        sleep_ms(20);
    }
    sleep_ms(200); /* trending lists committed in the same epoch */
    atomic_store(&stop_consumer, true);
    pthread_join(ct, NULL);

    double window_s = (double)(t_we - t_ws) / 1000, cpu_window_s = (double)(cpu_t1 - cpu_t0) / 1000;
    uint64_t pw = atomic_load(&produced_window), ow = atomic_load(&outputs_window),
             pwf = atomic_load(&produced_window_fresh);
    double produce_rate = (double)pw / window_s;
    double cpu_job = o.njobs ? job1 - job0 : 0, cpu_broker = o.broker_pid ? brk1 - brk0 : 0,
           cpu_loadgen = self1 - self0, cpu_machine = m1.busy_s - m0.busy_s;
    double cpu_other = cpu_machine - cpu_job - cpu_broker - cpu_loadgen;
    bool produce_ok = o.rate <= 0 || produce_rate >= 0.97 * o.rate;
    bool drained = drain_ms >= 0 && drain_ms <= 2 * (int64_t)o.interval_ms + 2000;
    uint64_t lat_n = 0;
    for (size_t i = 0; i <= LAT_MAX_MS; i++)
        lat_n += lat_hist[i];
    /* mean latency of the window's first and last 10 s of events: growing = falling behind */
    uint64_t fn = 0, fs = 0, ln = 0, ls = 0;
    size_t secs = (size_t)o.duration_s;
    for (size_t s = 0; s < secs && s < MAX_SECONDS; s++) {
        if (s < 10) {
            fn += sec_n[s];
            fs += sec_sum[s];
        }
        if (s + 10 >= secs) {
            ln += sec_n[s];
            ls += sec_sum[s];
        }
    }
    double tl[MAX_TREND];
    size_t nt = 0;
    for (size_t i = 0; i < ntrend; i++)
        if (trend_end[i] >= t_ws - 5000 && trend_end[i] < t_we)
            tl[nt++] = (double)trend_lag[i];
    char jthr[2048], bthr[2048], jlog[512];
    threads_json(jthr, sizeof jthr, &jt0, &jt1, false);
    threads_json(bthr, sizeof bthr, &bt0, &bt1, true);
    job_log_json(jlog, sizeof jlog);
    double evcpu = cpu_job + cpu_broker;
    /* Latency over the window's outputs that became visible before the drain ended (all of them
     * when sustained; when not, the late ones are missing and the figures flatter the run:
     * outputs_seen_frac says how many were seen). */
    char lat[512 + LAT_CDF_POINTS * 12];
    if (lat_n) {
        int w = snprintf(
            lat, sizeof lat,
            "\"lat_samples\":%" PRIu64 ",\"outputs_seen_frac\":%.4f,\"lat_ms_p50\":%" PRIu64
            ",\"lat_ms_p90\":%" PRIu64 ",\"lat_ms_p99\":%" PRIu64 ",\"lat_ms_max\":%" PRIu64
            ",\"lat_ms_mean_first10s\":%.0f,\"lat_ms_mean_last10s\":%.0f,"
            "\"p99_over_interval\":%.2f",
            lat_n, pwf ? (double)ow / (double)pwf : 0, hist_pct(lat_hist, lat_n, 0.5),
            hist_pct(lat_hist, lat_n, 0.9), hist_pct(lat_hist, lat_n, 0.99), lat_max,
            fn ? (double)fs / (double)fn : -1, ln ? (double)ls / (double)ln : -1,
            (double)hist_pct(lat_hist, lat_n, 0.99) / o.interval_ms);
        cdf_json(lat + w, sizeof lat - (size_t)w, lat_hist, lat_n);
    } else
        snprintf(lat, sizeof lat,
                 "\"lat_samples\":0,\"outputs_seen_frac\":0,\"lat_ms_p50\":null,"
                 "\"lat_ms_p90\":null,\"lat_ms_p99\":null,\"lat_ms_max\":null,"
                 "\"lat_ms_mean_first10s\":null,\"lat_ms_mean_last10s\":null,"
                 "\"p99_over_interval\":null,\"lat_cdf_ms\":null");
    printf("{\"bench\":\"kafka_e2e\",\"label\":\"%s\",\"interval_ms\":%u,\"mode\":\"%s\","
           "\"offered_per_s\":%.0f,\"duration_s\":%.1f,\"warmup_s\":%.1f,\"users\":%u,"
           "\"articles\":%zu,\"update_frac\":%.3f,\"compression\":\"%s\",\"linger_ms\":%u,"
           "\"per_event\":%s,\"per_event_unmeasured\":%" PRIu64 ",\"event_bytes\":%.0f,"
           "\"produced\":%" PRIu64 ",\"produced_fresh\":%" PRIu64
           ",\"produce_per_s\":%.0f,\"produce_stalls\":%" PRIu64 ",\"delivery_errors\":%" PRIu64
           ",\"outputs\":%" PRIu64 ",\"outputs_per_s\":%.0f,"
           "\"outputs_of_window_events\":%" PRIu64 ",\"backlog_at_end\":%" PRIu64
           ",\"drain_ms\":%" PRId64 ",\"sustained\":%s,"
           "%s,\"trending_lists\":%zu,\"trending_lag_ms_max\":%.0f,"
           "\"job_processes\":%zu,\"cpu_window_s\":%.1f,\"cpu_job_s\":%.2f,\"cpu_broker_s\":%.2f,"
           "\"cpu_loadgen_s\":%.2f,"
           "\"cpu_machine_s\":%.2f,\"cpu_other_s\":%.2f,\"cpu_steal_s\":%.2f,"
           "\"job_cpu_us_per_event\":%.2f,\"broker_cpu_us_per_event\":%.2f,"
           "\"events_per_cpu_s\":%.0f,\"job_threads\":%s,\"broker_threads\":%s,\"job_log\":%s,"
           "\"loadavg_start\":[%.2f,%.2f,%.2f],\"loadavg_end\":[%.2f,%.2f,%.2f]}\n",
           o.label, o.interval_ms, o.rate > 0 ? "rate" : "max", o.rate, window_s, o.warmup_s,
           o.users, narticles, o.update_frac, o.compression, o.linger_ms,
           o.per_event ? "true" : "false", ev_dropped,
           event_count_sample ? (double)event_bytes_sum / (double)event_count_sample : 0, pw, pwf,
           produce_rate, atomic_load(&stalls), atomic_load(&delivery_errors),
           atomic_load(&outputs_wall_window), (double)atomic_load(&outputs_wall_window) / window_s,
           ow, backlog_at_end, drain_ms, produce_ok && drained ? "true" : "false", lat, nt,
           pct_d(tl, nt, 1.0), o.njobs, cpu_window_s, cpu_job, cpu_broker, cpu_loadgen, cpu_machine,
           cpu_other, m1.steal_s - m0.steal_s, pw ? cpu_job * 1e6 / (double)pw : 0,
           pw ? cpu_broker * 1e6 / (double)pw : 0, evcpu > 0 ? (double)pw / evcpu : 0, jthr, bthr,
           jlog, la0[0], la0[1], la0[2], la1[0], la1[1], la1[2]);
    fflush(stdout);
    fprintf(stderr,
            "bench_e2e: %.0f events/s offered, %.0f produced, %.0f outputs/s, p50 %" PRIu64
            " ms, p99 %" PRIu64 " ms, sustained %s; CPU job %.1f s, broker %.1f s, loadgen "
            "%.1f s, other %.1f s of %.0f CPU-s\n",
            o.rate, produce_rate, (double)atomic_load(&outputs_wall_window) / window_s,
            hist_pct(lat_hist, lat_n, 0.5), hist_pct(lat_hist, lat_n, 0.99),
            produce_ok && drained ? "yes" : "no", cpu_job, cpu_broker, cpu_loadgen, cpu_other,
            cpu_window_s * (double)sysconf(_SC_NPROCESSORS_ONLN));
    rd_kafka_topic_destroy(prod_topic);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    free(jt0.t);
    free(jt1.t);
    free(bt0.t);
    free(bt1.t);
    free(lat_hist);
    for (size_t i = 0; i < narticles; i++)
        free(articles[i]);
    free(articles);
    return 0;
}
