/* bench_readpath.c — the read path in-process, through the job's own actors: read-events JSON
 * from memory -> decode -> event-id dedup -> trending counter (+ merger) -> route by user ->
 * interest update -> interest-updates JSON (serialized, then discarded: no Kafka here, whose
 * mock broker is far slower than this path). One run per shard count, each in a child process
 * (the metrics registry is per process).
 *
 * Workload (perf/analytics/workload.h): Zipf(s) users and articles, default 1M users, 100k
 * articles, every article with a topic vector known to every shard before the clock starts
 * (as the broadcasts of dedup would have made it), event time spread over --span-min minutes
 * (default 10: the window slides ~20 times; the Redis peer gets the same span).
 *
 *   bench_readpath [--events N] [--shards 1,2] [--users U] [--articles A] [--zipf S]
 *                  [--partitions P] [--exact] [--store DIR] [--budget-mb M]
 *                  [--warmup W --ttl-s T] [--populate] [--round-robin] [--quick]
 *                  [--redeliver-every K] [--dump DIR] [--epoch-ms MS] [--seed-topics DIR]
 *                  [--trace URL [--trace-ratio R]] [--stories K] [--by-story 0|1] [--breaking 0|1]
 * --stories K (with --store): every article in a story of K, as the story index's parent links;
 * --by-story 0|1: trending ranks stories (the job's default) or articles.
 * --breaking 0|1: the merger looks for breaking news in every window (engine/breaking.h: each
 *                 entry's lead's topic vector read from the last committed view).
 * --trace URL: spans (runtime/trace.h) to the OTLP/HTTP endpoint URL, sampled at --trace-ratio
 * (default 0.01, the job's): what tracing costs the read path (perf/run_trace.sh).
 * --redeliver-every K: after every K-th event the same event again (same event_id): the event-id
 * dedup then has duplicates to drop, as after a producer's retry.
 * --dump DIR (the stream peers' input, perf/run_stream.sh): writes the workload to
 * DIR/events.jsonl, DIR/topics.jsonl and DIR/meta.json, counts trending exactly (--exact), and
 * writes the outputs (trending, interest-updates) to DIR/newsflow-<shards>.jsonl through the
 * job's jsonl sink, for perf/stream/compare_stream.py to check against a peer's.
 * --store DIR: keyed state over a RocksDB store (created afresh in DIR/<shards>) as in the job,
 * where a user missing from memory is looked up in the store; without it, memory only.
 * --epoch-ms MS: the job's epochs (state/epoch.h) every MS ms, without Kafka: each cut writes the
 * dirty state to the store (with --store) and commits the outputs, which then go to the jsonl
 * sink (the epoch's tee) rather than straight from the shards. The line then also has the epochs
 * committed, their pause and commit p50/p99 (ms), and durable_events_per_s: all N events until
 * the final epoch (nf_epoch_stop) has committed them (the time between the last output and that
 * stop, when the bench only waits for trending's last windows and no epoch runs, left out) and
 * durable_cpu_ns_per_event, the process's CPU over the same time (RocksDB's threads too).
 * --seed-topics DIR: every article's topic vector written into a new store in DIR, as the job's
 * interest engine reads one on a table miss (engine/interest.h: kind NF_KIND_ARTICLE_TOPICS, key
 * group id.hi % 256, no expiry): the state.dir of a `newsflow run` fed the same read events
 * through a broker (perf/run_stream.sh, the broker_eos pair), whose articles were never crawled.
 * With --shards 0 nothing else runs.
 * --warmup W: W more events go first, untimed; the clock runs from then until the first shard
 * has taken all of its input (every shard had input all along, as in a live stream; "events" is
 * what was done meanwhile). drain_events_per_s times all N, until the last shard is done.
 * --ttl-s T: both dedup sets' TTL (processing time; default the job's 2 h and 24 h). With a
 * warm-up longer than T the sets reach the size they keep (keys expire as fast as they come)
 * before the clock starts. Without it, every event adds keys to sets that grow from empty, and
 * the figure includes the growth (and this VM's ~0.3 GB/s first touch of memory).
 * --populate: the warm-up starts with one read by every user (U more events), so that no user is
 * new once the clock runs: the steady state of a job that has served its readers for a while.
 * Without it a Zipf tail of users still arrives for the first time while the clock runs, and
 * their state's first touch of memory is timed (page_faults and the sys share below show it).
 * Partitions (default 8): read-events is keyed by user_id, so an event's partition is a hash
 * of its user_id, as Kafka's partitioner makes it; --round-robin deals events to partitions in
 * turn instead (as the figures of the first two rounds in perf/README did), which splits each
 * user's state over up to every partition (state is keyed by partition and user).
 *
 * One JSON line per shard count:
 *   {"bench":"readpath","shards":S,"events":N,"seconds":T,"events_per_s":R,
 *    "events_per_s_per_shard":R/S,"updates":U,"late":L,"windows":W,"rss_mb":M,...,
 *    "shard_events_updates_busy_sys":[[e0,u0,b0,s0],...],"page_faults":F,"messages":M,"wakeups":K,
 *    "ring_full":Q}
 * where e_i is the share of the timed events shard i decoded (its partitions' share), u_i the
 * share of the interest updates it made (its users' share of the reads), b_i the share of the wall
 * time its thread was on a CPU (below 1: it slept, waiting for work — the other shard, or its ring,
 * set the pace) and s_i the share in the kernel (page faults, wake-ups); F the process's page
 * faults, M the messages between shards, K the sleeping shards woken and Q the sends refused by a
 * full ring, all while the clock ran. */
#include "actors/analytics.h"
#include "actors/reads.h"
#include "algo/bytes.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/trace.h"
#include "state/epoch.h"
#include "state/kstate.h"
#include "state/store.h"
#include "workload.h"

#include "../bench_clock.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* CPU time of the whole process (its shards, and the polling main thread, which sleeps). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Page faults of the whole process so far: memory touched for the first time costs one each
 * (2 MiB at a time where huge pages back it), and this VM clears the page on its first touch. */
static long faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* CPU seconds (user + system, in clock ticks) of each thread named nf-shard-<i>, i < n, from
 * /proc/self/task: with wall time, how busy each shard was (a shard that waits sleeps). */
static void shard_cpu(unsigned n, double *out, double *sys)
{
    for (unsigned i = 0; i < n; i++)
        out[i] = sys[i] = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        unsigned shard;
        unsigned long long ut, st;
        if (!open || !close || sscanf(open + 1, "nf-shard-%u", &shard) != 1 || shard >= n ||
            sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) !=
                2)
            continue;
        out[shard] = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
        sys[shard] = (double)st / (double)sysconf(_SC_CLK_TCK);
    }
    if (d)
        closedir(d);
}

static void post(nf_runtime_t *rt, unsigned shard, const nf_msg_t *m)
{
    while (nf_runtime_post(rt, shard, m) == -EAGAIN)
        usleep(100);
}

static void noop(nf_shard_t *sh, void *arg)
{
    (void)sh;
    (void)arg;
}

typedef struct params {
    size_t events, warmup;
    uint32_t users, articles, partitions;
    double zipf, span_min, ttl_s;
    bool exact, populate, round_robin;
    const uint16_t *part; /* each event's partition, by a hash of its user_id */
    const char *store_dir, *dump_dir, *seed_dir;
    size_t budget_mb, redeliver_every;
    uint32_t epoch_ms;  /* 0: no epochs */
    const char *trace;  /* --trace: an OTLP/HTTP endpoint (runtime/trace.h), else NULL */
    double trace_ratio; /* --trace-ratio, the job's default 0.01 */
    uint32_t stories;   /* --stories K: articles in stories of K (parents in the store) */
    bool by_story;      /* --by-story 0|1: trending.by_story, the job's default 1 */
    bool breaking;      /* --breaking 0|1: breaking.enabled (engine/breaking.h), default 0 */
} params_t;

/* What the bench reads at the start and end of its clock. */
typedef struct snap {
    double t, cpu, busy[NF_MAX_SHARDS], sys[NF_MAX_SHARDS];
    uint64_t events, done, updates, dups, events_of[NF_MAX_SHARDS], updates_of[NF_MAX_SHARDS];
    int64_t users; /* interest state entries */
    long faults;
    nf_runtime_stats_t rs;
} snap_t;

static void snap(snap_t *s, nf_runtime_t *rt, const nf_reads_t *r, const nf_analytics_t *an,
                 unsigned shards)
{
    s->t = bench_now_s();
    s->cpu = cpu_s();
    s->events = nf_counter_value(r->m.events);
    s->updates = nf_counter_value(r->m.updates);
    s->dups = nf_counter_value(an->m.interest_duplicates);
    s->done = s->updates + s->dups + nf_counter_value(an->m.interest_unknown) +
              nf_counter_value(an->m.event_duplicates);
    for (unsigned i = 0; i < shards; i++) {
        s->events_of[i] = nf_counter_value_of(r->m.events, i);
        s->updates_of[i] = nf_counter_value_of(r->m.updates, i);
    }
    shard_cpu(shards, s->busy, s->sys);
    s->users = nf_gauge_value(r->m.state_entries) - nf_gauge_value(r->m.seen_m.keys);
    s->faults = faults();
    nf_runtime_stats(rt, &s->rs);
}

/* --epoch-ms: the coordinator, and each committed epoch's pause and commit as the polling thread
 * sees them (one commit every MS ms: a 1 ms poll misses none). */
#define EPOCHS_KEPT 4096
typedef struct epochs {
    nf_epoch_t *ep;
    uint32_t ms;
    uint64_t committed;
    unsigned n;
    uint64_t pause_ns[EPOCHS_KEPT], commit_ns[EPOCHS_KEPT];
    /* the quiet time before the stop: from `idle_from` (the last output), if no epoch was in
     * flight then (`idle_committed` epochs committed); the process's CPU then */
    double idle_from, idle_cpu;
    uint64_t idle_committed;
    bool idle_between;
} epochs_t;

/* Creates the coordinator (no Kafka: the store, or memory, and the tee) and recovers, before the
 * runtime starts. NULL with a message. */
static nf_epoch_t *epoch_open(nf_runtime_t *rt, nf_store_t *st, nf_sink_t *tee, uint32_t ms)
{
    char err[512];
    nf_epoch_opts_t eo = {.interval_ms = ms};
    nf_log_set_level(NF_LOG_WARN); /* not a line per epoch and per restored set on stderr */
    nf_epoch_t *ep = nf_epoch_new(rt, st, tee, &eo, err, sizeof err);
    if (ep && nf_epoch_recover(ep, err, sizeof err) != 0) {
        nf_epoch_free(ep);
        ep = NULL;
    }
    if (!ep)
        fprintf(stderr, "bench_readpath: %s\n", err);
    return ep;
}

static void epoch_sample(epochs_t *e)
{
    nf_epoch_stats_t es;
    if (!e->ep)
        return;
    nf_epoch_stats(e->ep, &es);
    if (es.committed != e->committed && e->n < EPOCHS_KEPT) {
        e->pause_ns[e->n] = es.last_pause_ns;
        e->commit_ns[e->n++] = es.last_commit_ns;
    }
    e->committed = es.committed;
}

/* The last output came now: the quiet time before the stop starts here. */
static void epoch_mark_idle(epochs_t *e, double t)
{
    if (!e->ep)
        return;
    epoch_sample(e);
    e->idle_from = t;
    e->idle_cpu = cpu_s();
    e->idle_committed = e->committed;
    e->idle_between = !strcmp(nf_epoch_step(e->ep), "between epochs");
}

/* The final epoch (nf_epoch_stop). *secs, *cpu: wall and CPU time from (t0, cpu0) until it
 * committed, less the quiet time before the stop if no epoch ran in it (else that epoch's work
 * would be left out). 0 or -1. */
static int epoch_stop(epochs_t *e, double t0, double cpu0, double *secs, double *cpu)
{
    double stop0 = bench_now_s(), cpu_stop0 = cpu_s();
    epoch_sample(e);
    bool quiet = e->idle_between && e->committed == e->idle_committed &&
                 !strcmp(nf_epoch_step(e->ep), "between epochs");
    int rc = nf_epoch_stop(e->ep);
    double stop1 = bench_now_s();
    epoch_sample(e);
    *secs = stop1 - t0 - (quiet ? stop0 - e->idle_from : 0.0);
    *cpu = cpu_s() - cpu0 - (quiet ? cpu_stop0 - e->idle_cpu : 0.0);
    if (rc != 0)
        fprintf(stderr, "bench_readpath: the final epoch failed: %s\n", strerror(-rc));
    return rc != 0 ? -1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The p-th quantile of v[0..n) in ms (sorts v); 0 when n == 0. */
static double pct_ms(uint64_t *v, unsigned n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_u64);
    return (double)v[(unsigned)(p * (n - 1) + 0.5)] / 1e6;
}

/* The JSON keys --epoch-ms adds to the line (none without it). */
static void epoch_json(epochs_t *e, double secs, double cpu, uint64_t events, char *out, size_t len)
{
    out[0] = 0;
    if (!e->ep)
        return;
    snprintf(out, len,
             ",\"epoch_ms\":%u,\"epochs\":%llu,\"pause_ms_p50\":%.3f,\"pause_ms_p99\":%.3f,"
             "\"commit_ms_p50\":%.3f,\"commit_ms_p99\":%.3f,\"durable_seconds\":%.3f,"
             "\"durable_events_per_s\":%.0f,\"durable_cpu_ns_per_event\":%.0f",
             e->ms, (unsigned long long)e->committed, pct_ms(e->pause_ns, e->n, 0.5),
             pct_ms(e->pause_ns, e->n, 0.99), pct_ms(e->commit_ns, e->n, 0.5),
             pct_ms(e->commit_ns, e->n, 0.99), secs, (double)events / secs,
             cpu * 1e9 / (double)events);
}

/* --stories K: the story index's parent links as the stories actor leaves them, every article in
 * a story of K (its first article the root), so that trending by story reads what it would in the
 * job (engine/cluster.h, NF_KIND_CLUSTER_PARENT). 0 or 1. */
static int seed_stories(nf_store_t *st, uint32_t articles, uint32_t k)
{
    char err[256];
    nf_store_batch_t *b = nf_store_batch_new();
    for (uint32_t a = 0; b && a < articles; a++) {
        char hex[33];
        nf_id128_t id, root;
        nf_wl_article_id(a, hex);
        nf_id128_from_hex(hex, &id);
        nf_wl_article_id(a - a % k, hex);
        nf_id128_from_hex(hex, &root);
        unsigned char key[18], val[8 + 24] = {0}; /* [expires 0: never][parent LE][ingested] */
        nf_kstate_encode_key((uint16_t)(id.hi % 256), id, key);
        nf_put_le64(val + 8, root.hi);
        nf_put_le64(val + 16, root.lo);
        nf_store_batch_put(b, NF_KIND_CLUSTER_PARENT, key, sizeof key, val, sizeof val);
    }
    int rc = b ? nf_store_write(st, b, err, sizeof err) : -1;
    if (rc != 0)
        fprintf(stderr, "bench_readpath: cannot seed the stories: %s\n", b ? err : "no memory");
    nf_store_batch_free(b);
    return rc != 0;
}

static int run_one(const nf_wl_events_t *ev, unsigned shards, const params_t *pa)
{
    nf_store_t *st = NULL;
    char err[256];
    if (pa->store_dir) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%u", pa->store_dir, shards);
        nf_store_opts_t so;
        nf_store_opts_default(&so);
        if (!(st = nf_store_open(dir, &so, err, sizeof err))) {
            fprintf(stderr, "bench_readpath: %s\n", err);
            return 1;
        }
        if (pa->stories > 1 && seed_stories(st, pa->articles, pa->stories))
            return 1;
    }
    if (nf_metrics_init(shards) != 0)
        return 1;
    nf_trace_opts_t to = {.endpoint = pa->trace, .sample_ratio = pa->trace_ratio};
    if (nf_trace_start(&to, err, sizeof err) != 0) {
        fprintf(stderr, "bench_readpath: %s\n", err);
        return 1;
    }
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = shards;
    ro.ring_capacity = 4096;
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    if (!rt) {
        fprintf(stderr, "bench_readpath: %s\n", err);
        return 1;
    }
    static nf_analytics_t an;
    nf_analytics_defaults(&an);
    an.trend.exact = pa->exact;
    an.trend_by_story = pa->by_story;
    an.breaking = pa->breaking;
    nf_sink_t *sink = NULL;
    if (pa->dump_dir) { /* the outputs, for perf/stream/compare_stream.py */
        char spec[600];
        snprintf(spec, sizeof spec, "jsonl:%s/newsflow-%u.jsonl", pa->dump_dir, shards);
        if (!(sink = nf_sink_open(spec, shards, err, sizeof err))) {
            fprintf(stderr, "bench_readpath: %s\n", err);
            return 1;
        }
    }
    static epochs_t eps;
    memset(&eps, 0, sizeof eps);
    eps.ms = pa->epoch_ms;
    if (pa->epoch_ms && !(eps.ep = epoch_open(rt, st, sink, pa->epoch_ms)))
        return 1;
    an.epoch = eps.ep; /* the outputs go through the epochs, which tee the committed ones to sink */
    an.sink = eps.ep ? NULL : sink;
    an.store = st;
    an.budget_bytes = pa->budget_mb << 20;
    if (pa->ttl_s > 0)
        an.event_id_ttl_ms = an.interest.seen_ttl_ms = (uint64_t)(pa->ttl_s * 1000.0);
    if (nf_analytics_register(rt, &an, err, sizeof err) != 0) {
        fprintf(stderr, "bench_readpath: %s\n", err);
        return 1;
    }
    static const char *const names[20] = {
        "politics", "world",  "business",  "economy", "markets",  "technology", "science",
        "health",   "sports", "entertain", "culture", "environ",  "education",  "crime",
        "travel",   "life",   "energy",    "autos",   "religion", "local"};
    for (unsigned t = 0; t < 20; t++)
        an.topic_names[t] = names[t]; /* as a taxonomy would name them */
    static nf_reads_t r;
    memset(&r, 0, sizeof r);
    r.an = &an;
    r.store = st;
    r.epoch = eps.ep;
    r.budget_bytes = pa->budget_mb << 20;
    r.max_event_bytes = 65536;
    r.pause_high_water = 1u << 30;
    r.pause_low_water = 1u << 29;
    r.mem.buf = ev->buf;
    r.mem.off = ev->off;
    r.mem.len = ev->len;
    r.mem.n = ev->n;
    r.mem.partitions = pa->partitions;
    r.mem.part = pa->round_robin ? NULL : pa->part;
    if (nf_reads_register(rt, &r) != 0 || nf_runtime_start(rt) != 0 ||
        (eps.ep && nf_epoch_start(eps.ep) != 0)) {
        fprintf(stderr, "bench_readpath: cannot start the runtime\n");
        return 1;
    }
    /* Every shard learns every article's vector, as dedup's broadcasts would do. */
    for (uint32_t a = 0; a < pa->articles; a++) {
        char hex[33];
        nf_wl_article_id(a, hex);
        for (unsigned s = 0; s < shards; s++) {
            nf_topics_msg_t *t = malloc(sizeof *t);
            if (!t)
                return 1;
            nf_id128_from_hex(hex, &t->id);
            nf_wl_article_topics(a, &t->vec);
            nf_msg_t m = {.actor = (uint16_t)an.interest_actor, .kind = NF_MSG_TOPICS};
            m.body.ptr = t;
            post(rt, s, &m);
        }
    }
    for (unsigned s = 0; s < shards; s++)
        nf_runtime_call(rt, s, noop, NULL, 600000); /* the inbox is FIFO: topics are in */
    for (unsigned s = 0; s < shards; s++) {
        nf_msg_t m = {.actor = (uint16_t)r.in_actor, .kind = NF_MSG_MEM_START};
        post(rt, s, &m);
    }
    /* Events are done once counted as an update, a duplicate or an unknown article. The clock
     * starts when the warm-up's are done and stops when the first shard has taken all of its
     * input (each to the poll's millisecond): the window in which every shard had input, as in
     * a live stream. Draining the rest, one shard may be left alone with its partitions' tail
     * while the other idles — drain_events_per_s times that too (until all events are done). */
    snap_t s0, s1 = {0}, s2 = {0};
    snap(&s0, rt, &r, &an, shards);
    bool warm = pa->warmup == 0, first = false;
    for (;;) {
        snap_t now;
        snap(&now, rt, &r, &an, shards);
        epoch_sample(&eps);
        if (!warm && now.done >= pa->warmup) {
            warm = true;
            s0 = now;
        }
        if (warm && !first && atomic_load(&r.mem_shards_done) >= 1) {
            first = true;
            s1 = now;
        }
        if (atomic_load(&r.mem_shards_done) == shards &&
            now.done == now.events + nf_counter_value(an.m.event_duplicates)) {
            s2 = now;
            if (!first)
                s1 = now;
            break;
        }
        usleep(1000); /* this thread shares the 2 vCPUs with the shards: poll gently */
    }
    double secs = s1.t - s0.t, cpu = s1.cpu - s0.cpu;
    uint64_t timed = s1.done - s0.done, updates = s1.updates - s0.updates;
    if (timed == 0 || secs <= 0) { /* every rate below would be NaN: no JSON to print */
        fprintf(stderr, "bench_readpath: no event was timed (the first shard took all of its "
                        "input during the warm-up): run it with more --events\n");
        return 1;
    }
    /* Per shard: the share of the events it decoded (its partitions' share), of the interest
     * updates it made (its users'), of the wall time its thread was on a CPU (the rest it
     * slept, waiting for work) and of the wall time in the kernel. */
    char per[NF_MAX_SHARDS * 48] = "";
    size_t pl = 0;
    for (unsigned i = 0; i < shards && pl < sizeof per; i++) {
        uint64_t u = s1.updates_of[i] - s0.updates_of[i], e = s1.events_of[i] - s0.events_of[i];
        uint64_t eall = s1.events - s0.events;
        pl += (size_t)snprintf(per + pl, sizeof per - pl, "%s[%.3f,%.3f,%.3f,%.3f]", i ? "," : "",
                               eall ? (double)e / (double)eall : 0.0,
                               updates ? (double)u / (double)updates : 0.0,
                               (s1.busy[i] - s0.busy[i]) / secs, (s1.sys[i] - s0.sys[i]) / secs);
    }
    long rss = rss_kb();
    epoch_mark_idle(&eps, s2.t);
    if (sink) { /* the trending merger's last windows: until none came for 300 ms (30 s at most) */
        uint64_t w = nf_counter_value(an.m.windows);
        for (int quiet = 0, i = 0; quiet < 300 && i < 30000; i++, usleep(1000)) {
            uint64_t now = nf_counter_value(an.m.windows);
            quiet = now == w ? quiet + 1 : 0;
            if (now != w)
                epoch_mark_idle(&eps, bench_now_s());
            else
                epoch_sample(&eps);
            w = now;
        }
    }
    double durable_s = 0, durable_cpu = 0;
    char ej[512];
    if (eps.ep && epoch_stop(&eps, s0.t, s0.cpu, &durable_s, &durable_cpu) != 0)
        return 1;
    epoch_json(&eps, durable_s, durable_cpu, ev->n - s0.done, ej, sizeof ej);
    nf_runtime_request_stop(rt);
    nf_runtime_wait(rt);
    printf("{\"bench\":\"readpath\",\"shards\":%u,\"events\":%llu,\"warmup\":%llu,"
           "\"dedup_ttl_s\":%g,\"seconds\":%.3f,\"events_per_s\":%.0f,"
           "\"events_per_s_per_shard\":%.0f,\"drain_events_per_s\":%.0f,\"updates\":%llu,"
           "\"interest_duplicates\":%llu,"
           "\"unknown\":%llu,\"event_id_duplicates\":%llu,\"late\":%llu,\"counted\":%llu,"
           "\"windows\":%llu,\"folded\":%llu,\"by_story\":%s,\"breaking\":%s,"
           "\"breaking_news\":%llu,\"breaking_cpu_ns_per_event\":%.2f,"
           "\"breaking_cpu_us_per_window\":%.1f,\"exact\":%s,\"store\":%s,"
           "\"populated\":%s,\"partitioning\":\"%s\","
           "\"event_id_keys\":%llu,"
           "\"seen_keys\":%llu,\"users\":[%lld,%lld],\"cpu_ns_per_event\":%.0f,\"rss_mb\":%.0f,"
           "\"shard_events_updates_busy_sys\":[%s],\"page_faults\":%ld,\"messages\":%llu,"
           "\"wakeups\":%llu,\"ring_full\":%llu%s}\n",
           shards, (unsigned long long)timed, (unsigned long long)s0.done,
           pa->ttl_s > 0 ? pa->ttl_s : -1.0, secs, (double)timed / secs,
           (double)timed / secs / shards, (double)(ev->n - s0.done) / (s2.t - s0.t),
           (unsigned long long)updates, (unsigned long long)(s1.dups - s0.dups),
           (unsigned long long)nf_counter_value(an.m.interest_unknown),
           (unsigned long long)nf_counter_value(an.m.event_duplicates),
           (unsigned long long)nf_counter_value(an.m.late_events),
           (unsigned long long)nf_counter_value(an.m.counted_events),
           (unsigned long long)nf_counter_value(an.m.windows),
           (unsigned long long)nf_counter_value(an.m.trend_stories_folded),
           pa->by_story ? "true" : "false", pa->breaking ? "true" : "false",
           (unsigned long long)nf_counter_value(an.m.breaking_news),
           (double)atomic_load(&an.breaking_cpu_ns) / (double)ev->n,
           (double)atomic_load(&an.breaking_cpu_ns) / 1e3 /
               (double)(nf_counter_value(an.m.windows) ? nf_counter_value(an.m.windows) : 1),
           pa->exact ? "true" : "false", st ? "true" : "false", pa->populate ? "true" : "false",
           pa->round_robin ? "round_robin" : "user",
           (unsigned long long)nf_gauge_value(r.m.ids_m.keys),
           (unsigned long long)nf_gauge_value(r.m.seen_m.keys), (long long)s0.users,
           (long long)s2.users, cpu * 1e9 / (double)timed, (double)rss / 1024.0, per,
           s1.faults - s0.faults, (unsigned long long)(s1.rs.sent - s0.rs.sent),
           (unsigned long long)(s1.rs.wakeups - s0.rs.wakeups),
           (unsigned long long)(s1.rs.ring_full - s0.rs.ring_full), ej);
    fflush(stdout);
    nf_runtime_destroy(rt);
    nf_analytics_free(&an);
    if (eps.ep)
        nf_epoch_free(eps.ep);
    nf_store_close(st);
    nf_trace_stop();
    if (sink && nf_sink_close(sink) != 0) {
        fprintf(stderr, "bench_readpath: cannot write the outputs to %s\n", pa->dump_dir);
        return 1;
    }
    return 0;
}

/* --dump: the workload as the peers read it. DIR/events.jsonl (the read events in the order
 * newsflow consumes them, one per line), DIR/topics.jsonl (every article's topic vector:
 * {"article_id":"..","topics":[[t,w],..]}, weights to 17 digits: bit-exact), DIR/meta.json. */
static int dump(const char *dir, const nf_wl_events_t *ev, const params_t *pa)
{
    char path[600];
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    FILE *f = fopen(path, "w");
    int64_t max_ts = INT64_MIN;
    for (size_t i = 0; f && i < ev->n; i++) {
        fwrite(ev->buf + ev->off[i], 1, ev->len[i], f);
        fputc('\n', f);
        max_ts = ev->ts[i] > max_ts ? ev->ts[i] : max_ts;
    }
    if (!f || fclose(f) != 0)
        goto fail;
    snprintf(path, sizeof path, "%s/topics.jsonl", dir);
    if (!(f = fopen(path, "w")))
        goto fail;
    for (uint32_t a = 0; a < pa->articles; a++) {
        char hex[33];
        nf_topic_vec_t v;
        nf_wl_article_id(a, hex);
        nf_wl_article_topics(a, &v);
        fprintf(f, "{\"article_id\":\"%s\",\"topics\":[", hex);
        for (uint32_t k = 0; k < v.n; k++)
            fprintf(f, "%s[%u,%.17g]", k ? "," : "", v.t[k].topic, v.t[k].weight);
        fputs("]}\n", f);
    }
    if (fclose(f) != 0)
        goto fail;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!(f = fopen(path, "w")))
        goto fail;
    /* The last window end newsflow's watermark (max ts - 5 s lateness) can pass. */
    int64_t wm = max_ts - 5000;
    fprintf(f,
            "{\"events\":%zu,\"users\":%u,\"articles\":%u,\"zipf\":%g,\"redeliver_every\":%zu,"
            "\"max_ts\":%lld,\"last_window_end\":%lld}\n",
            ev->n, pa->users, pa->articles, pa->zipf, pa->redeliver_every, (long long)max_ts,
            (long long)(wm - (wm % 30000 + 30000) % 30000));
    if (fclose(f) != 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "bench_readpath: cannot write %s\n", path);
    return 1;
}

/* --seed-topics: the articles' vectors into a new store at dir. 0 or 1. */
static int seed_topics(const char *dir, uint32_t articles)
{
    char err[512];
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    nf_store_t *st = nf_store_open(dir, &so, err, sizeof err);
    nf_store_batch_t *b = nf_store_batch_new();
    for (uint32_t a = 0; st && b && a < articles; a++) {
        char hex[33];
        nf_id128_t id;
        nf_topic_vec_t v;
        unsigned char key[18], val[8 + NF_TOPICS_ENC_MAX] = {0}; /* [expires_at 0: never][vec] */
        nf_wl_article_id(a, hex);
        nf_id128_from_hex(hex, &id);
        nf_wl_article_topics(a, &v);
        nf_kstate_encode_key((uint16_t)(id.hi % 256), id, key);
        int len = nf_interest_topics_encode(&v, val + 8, sizeof val - 8);
        if (len < 0)
            break;
        nf_store_batch_put(b, NF_KIND_ARTICLE_TOPICS, key, sizeof key, val, 8 + (size_t)len);
    }
    int rc = st && b && nf_store_batch_count(b) == articles ? nf_store_write(st, b, err, sizeof err)
                                                            : -1;
    if (rc != 0)
        fprintf(stderr, "bench_readpath: cannot seed the topic vectors in %s: %s\n", dir,
                st ? err : "cannot open the store");
    nf_store_batch_free(b);
    nf_store_close(st);
    return rc != 0;
}

int main(int argc, char **argv)
{
    params_t pa = {.events = 4000000,
                   .users = 1000000,
                   .articles = 100000,
                   .partitions = 8,
                   .zipf = 1.0,
                   .span_min = 10,
                   .budget_mb = 1024,
                   .trace_ratio = 0.01,
                   .by_story = true};
    char shard_list[64] = "1,2";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--events") && i + 1 < argc)
            pa.events = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            pa.warmup = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--ttl-s") && i + 1 < argc)
            pa.ttl_s = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--users") && i + 1 < argc)
            pa.users = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--articles") && i + 1 < argc)
            pa.articles = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--partitions") && i + 1 < argc)
            pa.partitions = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--span-min") && i + 1 < argc)
            pa.span_min = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--zipf") && i + 1 < argc)
            pa.zipf = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--shards") && i + 1 < argc)
            snprintf(shard_list, sizeof shard_list, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--store") && i + 1 < argc)
            pa.store_dir = argv[++i];
        else if (!strcmp(argv[i], "--budget-mb") && i + 1 < argc)
            pa.budget_mb = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
            pa.dump_dir = argv[++i];
        else if (!strcmp(argv[i], "--seed-topics") && i + 1 < argc)
            pa.seed_dir = argv[++i];
        else if (!strcmp(argv[i], "--epoch-ms") && i + 1 < argc)
            pa.epoch_ms = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--redeliver-every") && i + 1 < argc)
            pa.redeliver_every = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--exact"))
            pa.exact = true;
        else if (!strcmp(argv[i], "--populate"))
            pa.populate = true;
        else if (!strcmp(argv[i], "--round-robin"))
            pa.round_robin = true;
        else if (!strcmp(argv[i], "--quick"))
            pa.events = 400000;
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc)
            pa.trace = argv[++i];
        else if (!strcmp(argv[i], "--trace-ratio") && i + 1 < argc)
            pa.trace_ratio = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--stories") && i + 1 < argc)
            pa.stories = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--by-story") && i + 1 < argc)
            pa.by_story = strtoul(argv[++i], NULL, 10) != 0;
        else if (!strcmp(argv[i], "--breaking") && i + 1 < argc)
            pa.breaking = strtoul(argv[++i], NULL, 10) != 0;
        else {
            fprintf(stderr, "usage: bench_readpath [--events N] [--shards 1,2] [--users U] "
                            "[--articles A] [--zipf S] [--span-min M] [--partitions P] [--exact] "
                            "[--store DIR] [--budget-mb M] [--warmup W --ttl-s T] [--populate] "
                            "[--round-robin] [--quick] [--redeliver-every K] [--dump DIR] "
                            "[--epoch-ms MS] [--seed-topics DIR] [--trace URL] "
                            "[--trace-ratio R] [--stories K] [--by-story 0|1] "
                            "[--breaking 0|1]\n");
            return 2;
        }
    }
    nf_wl_events_t ev;
    if (pa.populate)
        pa.warmup += pa.users; /* one read per user, before the rest of the warm-up */
    size_t total = pa.events + pa.warmup;
    fprintf(stderr,
            "bench_readpath: %zu events (after %zu of warm-up), %u users, %u articles, zipf "
            "%.2f, %.1f min\n",
            pa.events, pa.warmup, pa.users, pa.articles, pa.zipf, pa.span_min);
    /* span_min of event time (default 10: the window slides 20 times), from a round hour; the
     * warm-up's events come first, in the same proportion. */
    int64_t span_ms = (int64_t)(pa.span_min * 60000.0 * (double)total / (double)pa.events);
    if (nf_wl_read_events(&ev, total, pa.users, pa.articles, pa.zipf, 1767225600000LL, span_ms, 42,
                          pa.populate) != 0) {
        fprintf(stderr, "bench_readpath: out of memory generating the workload\n");
        return 1;
    }
    if (pa.dump_dir)
        pa.exact = true; /* the peers count exactly: so does newsflow then */
    if (nf_wl_add_redeliveries(&ev, pa.redeliver_every) != 0 ||
        (pa.dump_dir && dump(pa.dump_dir, &ev, &pa) != 0) ||
        (pa.seed_dir && seed_topics(pa.seed_dir, pa.articles) != 0)) {
        fprintf(stderr, "bench_readpath: out of memory, or cannot write --dump's files\n");
        return 1;
    }
    uint16_t *part = malloc(sizeof *part * ev.n);
    if (!part || pa.partitions == 0 || pa.partitions > 65536) {
        fprintf(stderr, "bench_readpath: out of memory, or --partitions not in 1..65536\n");
        return 1;
    }
    for (size_t i = 0; i < ev.n; i++)
        part[i] = nf_wl_partition_of(ev.user_of[i], pa.partitions);
    pa.part = part;
    int rc = 0;
    for (char *p = shard_list; *p;) {
        unsigned s = (unsigned)strtoul(p, &p, 10);
        if (*p == ',')
            p++;
        if (s == 0)
            continue;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            _exit(run_one(&ev, s, &pa));
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    nf_wl_events_free(&ev);
    free(part);
    return rc;
}
