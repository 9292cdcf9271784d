/* cli_run.c — `newsflow run` and `newsflow version`.
 *
 * run: load the configuration once; open the state (RocksDB under state.dir, optionally
 * restored from a named checkpoint first); connect to Kafka (or start the embedded mock
 * cluster); create the runtime and the epoch coordinator; finish a pending epoch left by a crash;
 * register the actors; start shards, coordinator and admin server; then sit on the main thread
 * handling signals and printing a progress line until SIGTERM/SIGINT (or runtime.stop_after_ms).
 * A first signal commits a final epoch with input stopped, then drains the shards (bounded by
 * shutdown.timeout_ms); a second one exits at once (what was not committed is redone after a
 * restart). */
#include "cli/cli.h"

#include "actors/analytics.h"
#include "actors/ingest.h"
#include "actors/reads.h"
#include "actors/sources_publish.h"
#include "actors/topics_follow.h"
#include "algo/hash.h"
#include "cli/cli_fetch.h"
#include "feed/feed.h"
#include "io/demo.h"
#include "io/kafka.h"
#include "runtime/admin.h"
#include "runtime/buildinfo.h"
#include "runtime/config.h"
#include "runtime/history.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "serve/edge.h"
#include "serve/guard.h"
#include "serve/owners.h"
#include "serve/query.h"
#include "state/changelog.h"
#include "state/checkpoint.h"
#include "state/epoch.h"
#include "state/identity.h"
#include "state/standby.h"
#include "state/store.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char run_usage[] =
    "Usage: newsflow run [--config FILE] [--set SECTION.KEY=VALUE]... [--sink SPEC]\n"
    "                    [--from-checkpoint ID|latest] [--reset group|earliest]\n"
    "\n"
    "Runs the job until SIGTERM or SIGINT (a second signal exits at once), or for\n"
    "runtime.stop_after_ms milliseconds when that is set.\n"
    "\n"
    "  --config FILE   configuration file (default: $NEWSFLOW_CONFIG, else built-in defaults,\n"
    "                  which are config/newsflow.json)\n"
    "  --set K=V       override one key, e.g. --set runtime.shards=2 (repeatable; wins over\n"
    "                  the file and NEWSFLOW_* environment variables)\n"
    "  --sink SPEC     also write every committed output here: jsonl:PATH (one JSON object\n"
    "                  per line, - = stdout) or none; same as --set sink.spec=SPEC\n"
    "  --from-checkpoint ID\n"
    "                  before starting, make named checkpoint ID (chk-N, N, or latest) the live\n"
    "                  state: state, outputs and Kafka input positions roll back to it. It is\n"
    "                  verified in full (every checksum) first; a refusal (exit 1) changes\n"
    "                  nothing; any runtime.shards fits. The replaced state is kept as\n"
    "                  state.dir/db.replaced-UTCTIME-epochN (the newest checkpoint.retain_count\n"
    "                  of them); newer checkpoints are kept. See `newsflow checkpoints list`\n"
    "  --reset group|earliest\n"
    "                  start over on purpose where the state stands behind the consumer group\n"
    "                  (an empty, lost or older state.dir, without state.changelog): a start\n"
    "                  refuses that (exit 2) rather than emit again what the group committed.\n"
    "                  group = go on at the group's committed offsets with the state as it is\n"
    "                  (keyed outputs start again: versions from 1); earliest = read the inputs\n"
    "                  again from the state's positions (everything since is emitted again).\n"
    "                  See docs/runbooks.md \"Lost disk\"\n"
    "\n"
    "Feeds come from sources.urls, sources.file and the sources topic (which overrides a\n"
    "configured feed with the same source_id); read events from the read-events topic.\n"
    "Outputs — articles (one per URL), one fetch-log record per fetch attempt, story-clusters,\n"
    "trending lists, interest-updates, dead-letters for input records that cannot be\n"
    "decoded — go to Kafka (kafka.brokers; `newsflow topics create` makes them on a cluster;\n"
    "\"embedded\" runs an in-process mock cluster, \"\" runs without Kafka) in epochs of\n"
    "checkpoint.interval_ms: state (state.dir), outputs and input positions commit together,\n"
    "so a kill -9 at any instant loses and duplicates nothing after a restart.\n"
    "\n"
    "While running: JSON-lines logs on stderr, a progress line every log.progress_interval_ms,\n"
    "and http://ADMIN_LISTEN:ADMIN_PORT/metrics, /healthz, /readyz (default 127.0.0.1:9464).\n"
    "`newsflow config keys` lists every key with its default and range.\n"
    "\n"
    "Exit codes: 0 clean shutdown, 1 runtime failure or forced shutdown, 2 usage/config error.\n";

static volatile sig_atomic_t g_signals;

/* The main loop notices the first signal: it commits a final epoch before stopping shards. */
static void on_signal(int sig)
{
    (void)sig;
    if (++g_signals == 1)
        return;
    nf_log_signal_safe(NF_LOG_WARN, "main",
                       "second signal: exiting at once without draining (what the last committed "
                       "epoch does not hold is read again after a restart)");
    _exit(NF_EXIT_RUNTIME);
}

static void noop(nf_shard_t *sh, void *arg)
{
    (void)sh;
    (void)arg;
}

enum { PHASE_STARTING = 0, PHASE_RUNNING, PHASE_STOPPING };
static _Atomic int g_phase;

/* Liveness: every shard answers a call within a second (a stuck loop fails it). */
static int health(void *arg, char *why, size_t whylen)
{
    nf_runtime_t *rt = arg;
    if (atomic_load(&g_phase) == PHASE_STARTING)
        return 0; /* alive, restoring state (/readyz says how far): the shards do not run yet */
    for (unsigned i = 0; i < nf_runtime_shard_count(rt); i++) {
        int r = nf_runtime_call(rt, i, noop, NULL, 1000);
        if (r == -ESHUTDOWN) {
            snprintf(why, whylen, "shutting down");
            return 1;
        }
        if (r != 0) {
            snprintf(why, whylen, "shard %u did not answer within 1 s (%s)", i, strerror(-r));
            return 1;
        }
    }
    return 0;
}

/* Readiness. What the job waits for, as bits; /readyz (admin thread) and the main loop's
 * progress line both ask. */
enum {
    WAIT_RESTORE = 1,    /* recovering state before the shards start */
    WAIT_ASSIGNMENT = 2, /* no input partition assigned by the consumer group yet */
    WAIT_COMMIT = 4,     /* no epoch committed for 3 checkpoint intervals (at least 5 s) */
    WAIT_BROKER = 8,     /* a recent Kafka client error while one of the above holds */
    WAIT_SHUTDOWN = 16,  /* stopping */
};
static const char *const wait_names[] = {"restore", "assignment", "commit_overdue", "broker",
                                         "shutdown"};
#define READY_OVERDUE_MIN_S 5.0
static nf_kafka_t *_Atomic g_kafka;
static nf_epoch_t *_Atomic g_epoch;
static _Atomic unsigned g_interval_ms;

typedef struct readiness {
    int waiting; /* WAIT_* bits; 0 = ready */
    double since_commit_s, overdue_after_s, kafka_error_age_s;
    uint64_t epoch, partitions;
    char kafka_error[256];
} readiness_t;

static void readiness(readiness_t *r)
{
    memset(r, 0, sizeof *r);
    r->kafka_error_age_s = -1;
    int phase = atomic_load(&g_phase);
    if (phase == PHASE_STARTING)
        r->waiting |= WAIT_RESTORE;
    else if (phase == PHASE_STOPPING)
        r->waiting |= WAIT_SHUTDOWN;
    nf_epoch_t *ep = atomic_load(&g_epoch);
    if (ep && phase == PHASE_RUNNING) {
        r->epoch = nf_epoch_committed_epoch(ep);
        r->since_commit_s = nf_epoch_seconds_since_commit(ep);
        /* 3 intervals, but never less than a slow commit (fsync, a transaction) may take:
         * with short intervals readiness would flap */
        r->overdue_after_s = 3.0 * atomic_load(&g_interval_ms) / 1000.0;
        if (r->overdue_after_s < READY_OVERDUE_MIN_S)
            r->overdue_after_s = READY_OVERDUE_MIN_S;
        if (r->since_commit_s > r->overdue_after_s)
            r->waiting |= WAIT_COMMIT;
    }
    nf_kafka_t *k = atomic_load(&g_kafka);
    if (k && phase == PHASE_RUNNING) {
        nf_kafka_stats_t ks;
        nf_kafka_stats(k, &ks);
        r->partitions = ks.assigned > ks.revoked ? ks.assigned - ks.revoked : 0;
        if (!r->partitions)
            r->waiting |= WAIT_ASSIGNMENT;
        uint64_t age = nf_kafka_last_client_error(k, r->kafka_error, sizeof r->kafka_error);
        if (age != UINT64_MAX) {
            r->kafka_error_age_s = (double)age / 1e9;
            double recent = r->overdue_after_s > 10.0 ? r->overdue_after_s : 10.0;
            if (r->kafka_error_age_s < recent && (r->waiting & (WAIT_COMMIT | WAIT_ASSIGNMENT)))
                r->waiting |= WAIT_BROKER;
        }
    }
}

/* "a,b" of the WAIT_* bits into buf. */
static const char *wait_list(int waiting, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t n = 0;
    for (unsigned i = 0; i < sizeof wait_names / sizeof *wait_names; i++)
        if (waiting & (1 << i) && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", wait_names[i]);
    return buf;
}

/* /readyz: ready once state is restored, input partitions are assigned and epochs commit; the
 * JSON body names what it waits for. */
static bool ready(void *arg, char *body, size_t bodylen)
{
    (void)arg;
    readiness_t r;
    readiness(&r);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "ready");
    nf_jw_bool(&w, r.waiting == 0);
    nf_jw_key(&w, "waiting_for");
    nf_jw_arr_open(&w);
    for (unsigned i = 0; i < sizeof wait_names / sizeof *wait_names; i++)
        if (r.waiting & (1 << i)) {
            nf_jw_elem(&w);
            nf_jw_str(&w, wait_names[i]);
        }
    nf_jw_arr_close(&w);
    nf_epoch_t *ep = atomic_load(&g_epoch);
    uint64_t applied = 0, total = 0;
    bool restoring = false;
    if (ep)
        nf_epoch_restore_progress(ep, &applied, &total, &restoring);
    if (restoring) { /* state.changelog: the restore from the changelog topics */
        nf_jw_key(&w, "restore_records_applied");
        nf_jw_u64(&w, applied);
        nf_jw_key(&w, "restore_records_total");
        nf_jw_u64(&w, total);
    }
    if (atomic_load(&g_phase) == PHASE_RUNNING) {
        nf_jw_key(&w, "epoch");
        nf_jw_u64(&w, r.epoch);
        char num[32];
        nf_jw_key(&w, "seconds_since_commit");
        nf_jw_raw(&w, num, (size_t)snprintf(num, sizeof num, "%.3f", r.since_commit_s));
        nf_jw_key(&w, "commit_overdue_after_s");
        nf_jw_raw(&w, num, (size_t)snprintf(num, sizeof num, "%.3f", r.overdue_after_s));
        if (atomic_load(&g_kafka)) {
            nf_jw_key(&w, "partitions_assigned");
            nf_jw_u64(&w, r.partitions);
            if (r.kafka_error_age_s >= 0) {
                nf_jw_key(&w, "kafka_last_error");
                nf_jw_str(&w, r.kafka_error);
                nf_jw_key(&w, "kafka_last_error_age_s");
                nf_jw_raw(&w, num, (size_t)snprintf(num, sizeof num, "%.3f", r.kafka_error_age_s));
            }
        }
    }
    nf_jw_obj_close(&w);
    snprintf(body, bodylen, "%.*s", w.failed ? 0 : (int)w.len, w.buf ? w.buf : "");
    nf_jw_free(&w);
    return r.waiting == 0;
}

/* start + ms milliseconds, in the monotonic clock's ns; UINT64_MAX (never) for ms 0 or when the
 * sum does not fit. The config caps runtime.stop_after_ms so that its ns fit in int64, but a
 * wrapped product or sum would stop the job at once, so saturate whatever the cap says. */
static uint64_t deadline_ns(uint64_t start, uint64_t ms)
{
    if (ms == 0 || ms > (UINT64_MAX - start) / 1000000ull)
        return UINT64_MAX;
    return start + ms * 1000000ull;
}

static double rss_mb(void)
{
    double b = nf_resident_bytes();
    return isnan(b) ? 0 : b / (1024.0 * 1024.0);
}

static const char *g_from_checkpoint;
static nf_reset_t g_reset;

static int parse_args(int argc, char **argv, const char **path, char ***sets, unsigned *nsets)
{
    *path = getenv("NEWSFLOW_CONFIG");
    if (*path && !**path)
        *path = NULL;
    *sets = calloc((size_t)argc, sizeof(char *));
    *nsets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(run_usage, stdout);
            return 1;
        }
        if ((!strcmp(a, "--config") || !strcmp(a, "--set")) && i + 1 >= argc) {
            fprintf(stderr, "newsflow run: %s needs a value\n\n%s", a, run_usage);
            return -1;
        }
        if (!strcmp(a, "--config"))
            *path = argv[++i];
        else if (!strncmp(a, "--config=", 9))
            *path = a + 9;
        else if (!strcmp(a, "--set"))
            (*sets)[(*nsets)++] = argv[++i];
        else if (!strcmp(a, "--from-checkpoint") || !strncmp(a, "--from-checkpoint=", 18)) {
            const char *v = a[17] == '=' ? a + 18 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v) {
                fprintf(stderr, "newsflow run: --from-checkpoint needs an id\n\n%s", run_usage);
                return -1;
            }
            g_from_checkpoint = v;
        } else if (!strcmp(a, "--reset") || !strncmp(a, "--reset=", 8)) {
            const char *v = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || (strcmp(v, "group") != 0 && strcmp(v, "earliest") != 0)) {
                fprintf(stderr, "newsflow run: --reset needs group or earliest\n\n%s", run_usage);
                return -1;
            }
            g_reset = !strcmp(v, "group") ? NF_RESET_GROUP : NF_RESET_EARLIEST;
        } else if (!strcmp(a, "--sink") || !strncmp(a, "--sink=", 7)) {
            const char *v = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) {
                fprintf(stderr, "newsflow run: --sink needs a value\n\n%s", run_usage);
                return -1;
            }
            static char sink_set[1100];
            snprintf(sink_set, sizeof sink_set, "sink.spec=%s", v);
            (*sets)[(*nsets)++] = sink_set;
        } else if (!strncmp(a, "--set=", 6))
            (*sets)[(*nsets)++] = (char *)a + 6;
        else {
            fprintf(stderr, "newsflow run: unknown option '%s'\n\n%s", a, run_usage);
            return -1;
        }
    }
    return 0;
}

/* Everything the ingestion actors need, from the configuration. 0, or -1 with a message that
 * names the key (a usage/config error). */
static int setup_ingest(const nf_config_t *cfg, nf_ingest_t *in, nf_source_list_t *src,
                        unsigned shards, char *err, size_t errlen)
{
    nf_ingest_opts_t *o = &in->o;
    nf_ingest_opts_default(o);
    nf_crawl_policy_t *p = &o->policy;
    p->interval_default_ms = (int64_t)cfg->crawl.interval_s * 1000;
    p->interval_floor_ms = (int64_t)cfg->crawl.interval_floor_s * 1000;
    p->interval_ceiling_ms = (int64_t)cfg->crawl.interval_ceiling_s * 1000;
    p->jitter_permille = cfg->crawl.jitter_permille;
    p->backoff_base_ms = (int64_t)cfg->crawl.backoff_base_s * 1000;
    p->backoff_cap_ms = (int64_t)cfg->crawl.backoff_cap_s * 1000;
    p->dead_after_failures = cfg->crawl.dead_after_failures;
    p->host_max_concurrent = cfg->crawl.host_max_concurrent;
    p->host_spacing_ms = cfg->crawl.host_spacing_ms;
    p->breaker_failures = cfg->crawl.breaker_failures;
    p->breaker_window_ms = (int64_t)cfg->crawl.breaker_window_s * 1000;
    p->breaker_open_ms = (int64_t)cfg->crawl.breaker_open_s * 1000;
    o->max_future_ms = cfg->trending.max_future_ms;
    if (p->breaker_open_max_ms < p->breaker_open_ms)
        p->breaker_open_max_ms = p->breaker_open_ms;
    const char *bad = nf_crawl_policy_validate(p);
    if (bad) {
        snprintf(err, errlen, "crawl: %s", bad);
        return -1;
    }
    if (nf_cli_fetch_setup(cfg, &o->fetch, &o->guard, err, errlen) != 0)
        return -1;
    o->max_in_flight = cfg->fetch.max_in_flight;
    o->limits.max_bytes = cfg->fetch.body_max_bytes;
    o->limits.max_items = cfg->parse.max_items;
    o->limits.max_body = cfg->parse.max_body_bytes;

    /* The same validation as `config check`: every bad line at once, then refuse the list. */
    nf_sources_init(src);
    nf_sources_report_t rep;
    int lr = nf_sources_load(src, cfg->sources.urls, cfg->sources.file, &rep);
    if (lr != 0) {
        fprintf(stderr, "newsflow: config error: %u bad line%s in the source list:\n%s",
                rep.nerrors, rep.nerrors == 1 ? "" : "s", rep.errors ? rep.errors : "");
        snprintf(err, errlen,
                 "%u bad source line%s (listed above; `newsflow config check` "
                 "lists them too)",
                 rep.nerrors, rep.nerrors == 1 ? "" : "s");
        nf_sources_report_free(&rep);
        return -1;
    }
    for (const char *w = rep.warnings; w && *w;) {
        size_t n = strcspn(w, "\n");
        char line[PATH_MAX + 1024];
        snprintf(line, sizeof line, "%.*s", (int)n, w);
        nf_log(NF_LOG_WARN, "main", "local source file missing: the source fails until it exists",
               NF_LS("detail", line), NF_LEND);
        w += n + (w[n] == '\n');
    }
    nf_sources_report_free(&rep);
    in->sources = src;
    /* One writer: the epoch coordinator writes committed outputs (shard slot 0). */
    in->sink = nf_sink_open(cfg->sink.spec, 1, err, errlen);
    (void)shards;
    if (!in->sink)
        return -1;
    return 0;
}

/* Everything `run` owns besides the runtime, torn down in reverse order by run_cleanup. */
typedef struct run_ctx run_ctx_t;
static int setup_analytics(run_ctx_t *c, char *err, size_t errlen);

/* Everything `run` owns besides the runtime, torn down in reverse order by run_cleanup. */
struct run_ctx {
    nf_config_t cfg;
    bool admin_file; /* this process wrote state.dir/admin.json (write_admin_file) */
    nf_ingest_t in;
    nf_source_list_t sources;
    nf_topics_follow_t *follow; /* in a consumer group: the articles' topic vectors */
    nf_reads_t reads;
    nf_analytics_t an;
    nf_classify_taxonomy_t *taxonomy;
    nf_store_t *store;
    nf_kafka_mock_t *mock;
    nf_kafka_t *kafka;
    nf_epoch_t *epoch;
    nf_standby_t *standby; /* scale.standby_replicas */
    nf_demo_t *demo;
    nf_edge_kafka_t *edge_kafka; /* the HTTP edge (serve/edge.h): edge.enabled with Kafka */
    nf_edge_t *edge;
    nf_guard_t *guard;    /* authentication and rate limits of readers' routes (serve/guard.h) */
    nf_admin_t *operator; /* admin.operator_port: the operators' routes apart from readers */
    nf_runtime_t *rt;
    nf_query_t *query;   /* the query API's routes on the admin server */
    nf_owners_t *owners; /* in a consumer group: who owns which partition (serve/owners.h) */
    nf_search_t *search; /* GET /v1/search: its index follows the committed views */
    char self_url[512];  /* this process's query API as the others name it; "" = none */
    nf_admin_t *admin;
    nf_admin_t *probe;     /* admin.probe_port's listener (NULL: none) */
    nf_history_t *history; /* GET /v1/ops/history: the page's graphs (admin.history_interval_ms) */
};

/* Where a client on this machine reaches the admin server: "HOST:PORT" ("[::1]:PORT" for IPv6),
 * a wildcard listen address replaced by loopback. */
static void local_address(const nf_config_t *cfg, uint16_t port, char *out, size_t outlen)
{
    const char *host = cfg->admin.listen;
    bool v6 = strchr(host, ':') != NULL;
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
        host = v6 ? "::1" : "127.0.0.1";
    snprintf(out, outlen, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", (unsigned)port);
}

/* state.dir/admin.json: where this process's admin server listens, so that `newsflow status`
 * and `sources list` find a running job whose admin.port differs from theirs (or is 0). The
 * reader trusts it only while its pid holds state.dir/db/LOCK. Written atomically. */
static bool write_admin_file(const nf_config_t *cfg, uint16_t port)
{
    char path[PATH_MAX], tmp[PATH_MAX + 16], addr[96];
    local_address(cfg, port, addr, sizeof addr);
    snprintf(path, sizeof path, "%s/admin.json", cfg->state.dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return false;
    fprintf(f, "{\"pid\":%ld,\"address\":\"%s\"}\n", (long)getpid(), addr);
    if (fclose(f) == 0 && rename(tmp, path) == 0)
        return true;
    unlink(tmp);
    return false;
}

/* Removes state.dir/admin.json if this process wrote it (never another job's: a start refused
 * on a state.dir that a running job holds leaves that job's file alone). */
static void remove_admin_file(run_ctx_t *c)
{
    if (!c->admin_file)
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/admin.json", c->cfg.state.dir);
    unlink(path);
    c->admin_file = false;
}

/* admin.probe_port: /healthz, /readyz and /metrics on a listener of their own (no /v1, no
 * page), so that however many readers hold the admin port, a probe finds a free connection. */
static int start_probe(run_ctx_t *c, char *err, size_t errlen)
{
    const nf_config_t *cfg = &c->cfg;
    nf_admin_hooks_t hooks = {.health = health,
                              .ready = ready,
                              .arg = c->rt,
                              .max_connections = 16,
                              .request_timeout_ms = cfg->admin.request_timeout_ms,
                              .listener = "probe"};
    c->probe =
        nf_admin_start(cfg->admin.listen, (uint16_t)cfg->admin.probe_port, &hooks, err, errlen);
    if (!c->probe) {
        nf_log(NF_LOG_ERROR, "main", "cannot start the probe listener", NF_LS("error", err),
               NF_LS("hint", "set admin.probe_port to a free port, or 0 for none"), NF_LEND);
        return -1;
    }
    nf_log(NF_LOG_INFO, "main", "probe listener: /healthz, /readyz and /metrics",
           NF_LI("port", nf_admin_port(c->probe)), NF_LEND);
    return 0;
}

/* The HTTP edge on the job's own server: readers' events into read-events (serve/edge.h). One
 * that cannot start is logged: the job runs without (POST answers 404). */
static void start_edge(run_ctx_t *c, const char *brokers)
{
    const nf_config_t *cfg = &c->cfg;
    char err[512];
    nf_edge_kafka_opts_t ko = {.brokers = brokers,
                               .properties = cfg->kafka.properties,
                               .topic = nf_kafka_input_topic(c->kafka, NF_INPUT_READ_EVENTS),
                               .partitioner =
                                   cfg->serve.partitioner ? "murmur2_random" : "consistent_random",
                               .delivery_timeout_ms = cfg->edge.delivery_timeout_ms,
                               .max_in_flight = cfg->edge.max_in_flight};
    c->edge_kafka = nf_edge_kafka_new(&ko, err, sizeof err);
    nf_edge_opts_t eo = {.kafka = c->edge_kafka,
                         .max_batch = cfg->edge.max_batch,
                         .max_event_bytes = cfg->kafka.max_event_bytes,
                         .max_future_ms = cfg->trending.max_future_ms,
                         .retry_after_s = cfg->edge.retry_after_s};
    if (c->edge_kafka && !(c->edge = nf_edge_new(&eo)))
        snprintf(err, sizeof err, "out of memory");
    if (!c->edge) {
        nf_log(NF_LOG_WARN, "main", "the HTTP edge (POST /v1/events) is not taking events",
               NF_LS("error", err), NF_LEND);
        nf_edge_kafka_free(c->edge_kafka);
        c->edge_kafka = NULL;
    }
}

static size_t demo_article_ids(const nf_source_list_t *l, char ***out);

/* The demo's readers (demo.read_events_per_s, the embedded cluster only: a demo needs no real
 * broker): they post to this job's own edge, as a reader's browser would. */
static void start_demo(run_ctx_t *c)
{
    const nf_config_t *cfg = &c->cfg;
    if (!c->kafka || !c->mock || !cfg->demo.read_events_per_s)
        return;
    if (!c->edge) {
        nf_log(NF_LOG_WARN, "main",
               "demo readers not started: they post to the HTTP edge, which is off (edge.enabled, "
               "admin.enabled)",
               NF_LEND);
        return;
    }
    char addr[96], url[128], err[256];
    local_address(cfg, nf_admin_port(c->admin), addr, sizeof addr);
    snprintf(url, sizeof url, "http://%s/v1/events", addr);
    char **ids = NULL;
    size_t nids = demo_article_ids(&c->sources, &ids);
    c->demo = nf_demo_start(url, cfg->demo.read_events_per_s, cfg->demo.users, cfg->demo.events,
                            (const char *const *)ids, nids, err, sizeof err);
    for (size_t i = 0; i < nids; i++)
        free(ids[i]);
    free(ids);
    if (!c->demo)
        nf_log(NF_LOG_WARN, "main", "demo readers not started", NF_LS("error", err), NF_LEND);
}

/* POST /v1/...: the HTTP edge's routes, past the guard (the token, the events' rate). */
static int post(void *arg, const char *route, nf_admin_req_t *req, const char *body, size_t len,
                char **out, size_t *outlen)
{
    run_ctx_t *c = arg;
    char sub[NF_EVENT_FIELD_MAX + 1] = "";
    int status = 0;
    if (c->edge) {
        double cost = (double)nf_edge_events_in(c->edge, route, body, len);
        status = nf_guard_check(c->guard, NF_GUARD_EVENTS, NULL, 0, req, cost, sub, sizeof sub, out,
                                outlen);
        if (!status)
            status = nf_edge_handle(c->edge, route, req, sub, body, len, out, outlen);
    }
    if (status)
        return status;
    static const char none[] = "{\"error\":\"no such route\"}\n";
    *out = strdup(none);
    *outlen = *out ? sizeof none - 1 : 0;
    return 404;
}

/* The guard of readers' routes from auth.* and limits.* (serve/guard.h). */
static nf_guard_t *new_guard(const nf_config_t *cfg, char *err, size_t errlen)
{
    nf_guard_opts_t go;
    nf_guard_opts_from_config(cfg, &go);
    return nf_guard_new(&go, err, errlen);
}

static int api_operator(void *arg, const char *route, nf_admin_req_t *req, char **body,
                        size_t *len);

/* admin.operator_port: /metrics, /healthz, /readyz and the operators' /v1/ routes on a listener
 * of their own, so that admin.port can face readers. */
static int start_operator(run_ctx_t *c, char *err, size_t errlen)
{
    const nf_config_t *cfg = &c->cfg;
    nf_admin_hooks_t hooks = {.health = health,
                              .ready = ready,
                              .arg = c->rt,
                              .api = api_operator,
                              .api_arg = c,
                              .max_connections = 32,
                              .request_timeout_ms = cfg->admin.request_timeout_ms,
                              .listener = "operator"};
    c->operator=
        nf_admin_start(cfg->admin.listen, (uint16_t)cfg->admin.operator_port, &hooks, err, errlen);
    if (!c->operator) {
        nf_log(NF_LOG_ERROR, "main", "cannot start the operator listener", NF_LS("error", err),
               NF_LS("hint", "set admin.operator_port to a free port, or 0 for none"), NF_LEND);
        return -1;
    }
    nf_log(NF_LOG_INFO, "main",
           "operator listener: /metrics, /healthz, /readyz, /v1/status, /v1/sources, "
           "/v1/ops/history (admin.port faces readers)",
           NF_LI("port", nf_admin_port(c->operator)), NF_LEND);
    return 0;
}

static void run_cleanup(run_ctx_t *c)
{
    remove_admin_file(c);
    nf_demo_stop(c->demo);
    nf_admin_stop(c->probe);
    nf_admin_stop(c->operator);
    nf_admin_stop(c->admin); /* its requests have released their views: the store may close */
    nf_guard_free(c->guard);
    c->guard = NULL;
    nf_edge_free(c->edge); /* no request uses it now; its producer flushes what is in flight */
    nf_edge_kafka_free(c->edge_kafka);
    c->edge = NULL;
    c->edge_kafka = NULL;
    nf_history_stop(c->history);
    nf_query_free(c->query);
    nf_search_stop(c->search); /* before the store its thread reads views of */
    nf_owners_stop(c->owners); /* before the Kafka client it describes the group with */
    if (c->epoch) /* its coordinator has stopped: no rebalance callback reaches the standby */
        nf_epoch_attach_standby(c->epoch, NULL);
    nf_standby_free(c->standby); /* before the Kafka client and the store it uses */
    c->standby = NULL;
    if (c->rt)
        nf_runtime_destroy(c->rt);
    nf_kafka_free(c->kafka);
    nf_analytics_free(&c->an);
    nf_classify_free(c->taxonomy);
    nf_epoch_free(c->epoch);
    nf_kafka_mock_free(c->mock);
    if (c->store)
        nf_store_close(c->store);
    c->store = NULL; /* the RocksDB gauges read it until the registry goes */
    nf_sources_free(&c->sources);
}

/* ---------------------------------------------------------------- admin API (/v1/) */

/* One shard's part of a sources listing. nf_runtime_call may give up waiting while the shard
 * still runs the call, so the caller and the shard each hold a reference; the last frees it. */
typedef struct api_part {
    _Atomic int refs;
    nf_ingest_t *in;
    bool failing;
    nf_jw_t w;
} api_part_t;

static void api_part_release(api_part_t *p)
{
    if (atomic_fetch_sub(&p->refs, 1) == 1) {
        nf_jw_free(&p->w);
        free(p);
    }
}

static void api_sources_on_shard(nf_shard_t *sh, void *arg)
{
    api_part_t *p = arg;
    nf_jw_arr_open(&p->w);
    nf_ingest_sources_json(sh, p->in, p->failing, &p->w);
    nf_jw_arr_close(&p->w);
    api_part_release(p);
}

/* Appends the sources of every shard as array elements to w (an array is open). 0, or -errno
 * of the first shard that did not answer. */
static int api_sources(run_ctx_t *c, bool failing, nf_jw_t *w)
{
    bool first = true;
    for (unsigned i = 0; i < nf_runtime_shard_count(c->rt); i++) {
        api_part_t *p = calloc(1, sizeof *p);
        if (!p)
            return -ENOMEM;
        atomic_init(&p->refs, 2);
        p->in = &c->in;
        p->failing = failing;
        nf_jw_init(&p->w);
        int r = nf_runtime_call(c->rt, i, api_sources_on_shard, p, 5000);
        if (r != 0) {
            if (r != -ETIMEDOUT) /* never queued: the shard holds no reference */
                api_part_release(p);
            api_part_release(p);
            return r;
        }
        if (p->w.failed) {
            api_part_release(p);
            return -ENOMEM;
        }
        if (p->w.len > 2) { /* "[...]" minus the brackets */
            if (!first)
                nf_jw_raw(w, ",", 1);
            nf_jw_raw(w, p->w.buf + 1, p->w.len - 2);
            first = false;
        }
        api_part_release(p);
    }
    return 0;
}

static int api_reply(nf_jw_t *w, int status, char **body, size_t *len)
{
    if (w->failed) {
        nf_jw_free(w);
        return 500;
    }
    nf_jw_raw(w, "\n", 1);
    *body = w->buf; /* the server frees it */
    *len = w->len;
    return status;
}

static int api_error(int err, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, err == -ESHUTDOWN   ? "shutting down"
                  : err == -ETIMEDOUT ? "a shard did not answer within 5 s"
                                      : strerror(-err));
    nf_jw_obj_close(&w);
    return api_reply(&w, 503, body, len);
}

/* /v1/status "standby": null without standbys, else the partitions stood by for and the lag. */
static void api_standby(run_ctx_t *c, nf_jw_t *w)
{
    nf_jw_key(w, "standby");
    if (!c->standby) {
        nf_jw_null(w);
        return;
    }
    bool parts[NF_EPOCH_MAX_PARTITIONS], sources[NF_EPOCH_MAX_PARTITIONS];
    nf_standby_status_t s;
    nf_standby_status(c->standby, &s, parts, sources);
    nf_jw_obj_open(w);
    nf_jw_key(w, "replicas");
    nf_jw_u64(w, c->cfg.scale.standby_replicas);
    for (int i = 0; i < 2; i++) {
        const bool *flags = i ? sources : parts;
        nf_jw_key(w, i ? "sources_partitions" : "partitions");
        nf_jw_arr_open(w);
        for (int p = 0; p < NF_EPOCH_MAX_PARTITIONS; p++)
            if (flags[p]) {
                nf_jw_elem(w);
                nf_jw_i64(w, p);
            }
        nf_jw_arr_close(w);
    }
    nf_jw_key(w, "global_key_group");
    nf_jw_bool(w, s.global);
    nf_jw_key(w, "lag_records");
    nf_jw_u64(w, s.lag);
    nf_jw_key(w, "records_applied");
    nf_jw_u64(w, s.records);
    nf_jw_key(w, "failed");
    nf_jw_bool(w, s.failed);
    nf_jw_obj_close(w);
}

static double store_sst_bytes(void *arg)
{
    const run_ctx_t *c = arg;
    return c->store ? (double)nf_store_property_sum(c->store, "rocksdb.live-sst-files-size") : 0;
}

static double store_memtable_bytes(void *arg)
{
    const run_ctx_t *c = arg;
    return c->store ? (double)nf_store_property_sum(c->store, "rocksdb.cur-size-all-mem-tables")
                    : 0;
}

static int api_routes(run_ctx_t *c, const char *route, nf_admin_req_t *req, char **body,
                      size_t *len)
{
    const char *failing = nf_admin_req_arg(req, "failing");
    bool only_failing = failing && strcmp(failing, "0") != 0 && strcmp(failing, "false") != 0;
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    int r = 0;
    if (!strcmp(route, "sources")) {
        nf_jw_key(&w, "sources");
        nf_jw_arr_open(&w);
        r = api_sources(c, only_failing, &w);
        nf_jw_arr_close(&w);
    } else if (!strcmp(route, "ops/history") && c->history) {
        nf_history_json(c->history, &w);
    } else if (!strcmp(route, "status")) {
        nf_epoch_stats_t es;
        nf_epoch_stats(c->epoch, &es);
        nf_jw_key(&w, "source");
        nf_jw_str(&w, "admin");
        nf_jw_key(&w, "version");
        nf_jw_str(&w, NF_VERSION);
        nf_jw_key(&w, "commit");
        nf_jw_str(&w, NF_GIT_COMMIT);
        nf_jw_key(&w, "pid");
        nf_jw_i64(&w, getpid());
        readiness_t rd;
        readiness(&rd);
        char wl[128];
        nf_jw_key(&w, "ready");
        nf_jw_bool(&w, rd.waiting == 0);
        nf_jw_key(&w, "waiting_for");
        nf_jw_str(&w, wait_list(rd.waiting, wl, sizeof wl));
        if (c->kafka) {
            char group[192];
            nf_kafka_group_state(c->kafka, group, sizeof group);
            nf_jw_key(&w, "group");
            nf_jw_str(&w, group);
        }
        nf_jw_key(&w, "shards");
        nf_jw_u64(&w, nf_runtime_shard_count(c->rt));
        nf_jw_key(&w, "state_dir");
        nf_jw_str(&w, c->cfg.state.dir);
        nf_jw_key(&w, "epoch");
        nf_jw_u64(&w, es.epoch);
        nf_jw_key(&w, "seconds_since_commit");
        char secs[32];
        int sl = snprintf(secs, sizeof secs, "%.3f", nf_epoch_seconds_since_commit(c->epoch));
        nf_jw_raw(&w, secs, (size_t)sl);
        nf_jw_key(&w, "restore");
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "state");
        nf_jw_str(&w, atomic_load(&g_phase) == PHASE_STARTING ? "restoring" : "restored");
        uint64_t cl_applied = 0, cl_total = 0;
        bool cl_running = false;
        nf_epoch_restore_progress(c->epoch, &cl_applied, &cl_total, &cl_running);
        nf_jw_key(&w, "changelog");
        nf_jw_bool(&w, c->cfg.state.changelog);
        nf_jw_key(&w, "changelog_restore_running");
        nf_jw_bool(&w, cl_running);
        nf_jw_key(&w, "changelog_records_applied"); /* the last (or current) restore's */
        nf_jw_u64(&w, cl_applied);
        nf_jw_key(&w, "changelog_records_total");
        nf_jw_u64(&w, cl_total);
        nf_jw_key(&w, "from_checkpoint");
        nf_jw_str(&w, g_from_checkpoint);
        nf_jw_key(&w, "pending_epochs_rolled_forward");
        nf_jw_u64(&w, es.recovered_epochs);
        nf_jw_obj_close(&w);
        api_standby(c, &w);
        nf_jw_key(&w, "partitions");
        nf_jw_arr_open(&w);
        for (int in = 0; c->kafka && in < NF_INPUT__COUNT; in++)
            for (int p = 0; p < nf_kafka_input_partitions(c->kafka, (nf_input_t)in); p++) {
                if (!nf_kafka_assigned(c->kafka, (nf_input_t)in, p))
                    continue;
                nf_jw_elem(&w);
                nf_jw_obj_open(&w);
                nf_jw_key(&w, "topic");
                nf_jw_str(&w, nf_kafka_input_topic(c->kafka, (nf_input_t)in));
                nf_jw_key(&w, "partition");
                nf_jw_i64(&w, p);
                nf_jw_key(&w, "position");
                nf_jw_i64(&w, nf_epoch_position(c->epoch, (nf_input_t)in, p));
                nf_jw_key(&w, "lag");
                int64_t lag = nf_kafka_lag(c->kafka, (nf_input_t)in, p);
                if (lag < 0)
                    nf_jw_null(&w);
                else
                    nf_jw_i64(&w, lag);
                nf_jw_obj_close(&w);
            }
        nf_jw_arr_close(&w);
        nf_jw_key(&w, "sources");
        nf_jw_obj_open(&w);
        for (int h = 0; h < NF_CRAWL_HEALTH_N; h++) {
            nf_jw_key(&w, nf_crawl_health_name(h));
            nf_jw_i64(&w, nf_gauge_value(c->in.m.sources_by_health[h]));
        }
        nf_jw_obj_close(&w);
        nf_jw_key(&w, "failing");
        nf_jw_arr_open(&w);
        r = api_sources(c, true, &w);
        nf_jw_arr_close(&w);
    } else {
        nf_jw_free(&w);
        int qs = c->query ? nf_query_handle(c->query, route, req, body, len) : 0;
        if (qs)
            return qs;
        nf_jw_init(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "error");
        nf_jw_str(
            &w,
            "unknown route; routes: /v1/status, /v1/sources[?failing=1], "
            "/v1/feed/{user_id}, /v1/users/{user_id}/interest, "
            "/v1/trending[?limit=&topic=], /v1/articles/{article_id}, /v1/stories/{cluster_id}, "
            "/v1/topics, /v1/topics/{topic}/recent, /v1/search?q=, /v1/ops/history "
            "(docs/openapi.json)");
        nf_jw_obj_close(&w);
        return api_reply(&w, 404, body, len);
    }
    if (r != 0) {
        nf_jw_free(&w);
        return api_error(r, body, len);
    }
    nf_jw_obj_close(&w);
    return api_reply(&w, 200, body, len);
}

static int not_here(const char *what, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, what);
    nf_jw_obj_close(&w);
    return api_reply(&w, 404, body, len);
}

/* GET /v1/...: past the guard (a reader's token, the client's rate), the route. With
 * admin.operator_port the operators' routes are answered there, not here. */
static int api(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    run_ctx_t *c = arg;
    const char *user;
    size_t ulen;
    if (!strcmp(route, "auth/demo-token"))
        return nf_guard_demo_token(c->guard, req, body, len);
    nf_guard_class_t cls = nf_guard_classify("GET", route, &user, &ulen);
    if (cls == NF_GUARD_OPERATOR && c->cfg.admin.operator_port)
        return not_here("an operators' route: on admin.operator_port", body, len);
    char sub[NF_EVENT_FIELD_MAX + 1];
    int st = nf_guard_check(c->guard, cls, user, ulen, req, 1, sub, sizeof sub, body, len);
    return st ? st : api_routes(c, route, req, body, len);
}

/* GET /v1/... on admin.operator_port: the operators' routes only. */
static int api_operator(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    const char *user;
    size_t ulen;
    if (nf_guard_classify("GET", route, &user, &ulen) != NF_GUARD_OPERATOR)
        return not_here("a readers' route: on admin.port", body, len);
    return api_routes(arg, route, req, body, len);
}

/* Whether this process owns read-events partition p now (a consumer group's assignment). */
static bool query_owns(void *arg, unsigned p)
{
    const run_ctx_t *c = arg;
    return nf_kafka_owns(c->kafka, NF_INPUT_READ_EVENTS, (int32_t)p);
}

/* Whether this process holds the global key group's state: it owns trending-panes 0, or its
 * standby keeps that changelog applied (serve.global_replica, scale.standby_replicas). */
static bool query_global_here(void *arg)
{
    const run_ctx_t *c = arg;
    if (nf_kafka_owns(c->kafka, NF_INPUT_TRENDING_PANES, 0))
        return true;
    nf_standby_status_t s;
    nf_standby_status(c->standby, &s, NULL, NULL);
    return s.global && !s.failed;
}

static int describe_group(void *arg, int timeout_ms,
                          void (*cb)(void *cbarg, const char *client_id, nf_input_t in,
                                     int32_t partition),
                          void *cbarg, char *err, size_t errlen)
{
    return nf_kafka_members(arg, timeout_ms, cb, cbarg, err, errlen);
}

/* The search index's thread (search.enabled, with a state directory); NULL without one, or
 * when it cannot start (logged: search then answers 404). */
static nf_search_t *start_search(run_ctx_t *c)
{
    const nf_config_t *cfg = &c->cfg;
    if (!cfg->search.enabled || !c->store)
        return NULL;
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/search.db", cfg->state.dir);
    uint32_t retention = cfg->search.retention_s;
    if (retention > cfg->cluster.ttl_s) {
        nf_log(NF_LOG_WARN, "main",
               "search.retention_s is longer than cluster.ttl_s, the articles' metadata TTL: "
               "searching the metadata's span only",
               NF_LI("search_retention_s", retention), NF_LI("cluster_ttl_s", cfg->cluster.ttl_s),
               NF_LEND);
        retention = cfg->cluster.ttl_s;
    }
    nf_search_opts_t so = {.store = c->store,
                           .path = path,
                           .retention_ms = (int64_t)retention * 1000,
                           .max_articles = cfg->search.max_articles,
                           .memory_mb = cfg->search.memory_mb,
                           .readers = cfg->search.readers,
                           .scan_max = cfg->search.scan_max};
    nf_search_t *s = nf_search_start(&so, err, sizeof err);
    if (!s)
        nf_log(NF_LOG_ERROR, "main", "search cannot start: GET /v1/search answers 404",
               NF_LS("error", err), NF_LEND);
    return s;
}

static nf_query_t *new_query(run_ctx_t *c)
{
    unsigned ntopics = 0;
    while (ntopics < NF_TOPICS_MAX && c->an.topic_names[ntopics])
        ntopics++;
    int parts = c->kafka ? nf_kafka_input_partitions(c->kafka, NF_INPUT_READ_EVENTS) : 0;
    bool group = c->cfg.kafka.assignment != 1 && c->kafka;
    nf_query_opts_t qo = {.store = c->store,
                          .topic_names = c->an.topic_names,
                          .ntopics = ntopics,
                          .read_partitions = parts > 0 ? (unsigned)parts : 1,
                          .owns = group ? query_owns : NULL,
                          .owns_arg = c,
                          .global_articles = c->in.in_partitions,
                          .partitioner = c->cfg.serve.partitioner,
                          .global_here = group && c->in.in_partitions ? query_global_here : NULL,
                          .self_url = c->self_url,
                          .search = c->search = start_search(c)};
    if (group && c->self_url[0] && !c->mock) { /* the embedded cluster is one process */
        char err[256];
        nf_owners_opts_t oo = {.describe = describe_group, .arg = c->kafka};
        if (!(c->owners = nf_owners_start(&oo, err, sizeof err)))
            nf_log(NF_LOG_WARN, "main",
                   "the query API cannot find other processes: it answers 503 for keys they own",
                   NF_LS("error", err), NF_LEND);
        qo.owners = c->owners;
    }
    return nf_query_new(&qo);
}

/* The article ids of the configured local feed files (the demo's example feeds), parsed with
 * the job's own parser, so the demo's read events name articles the job will crawl. At most
 * 200; a file that does not read or parse is skipped (the crawl reports it). */
static size_t demo_article_ids(const nf_source_list_t *l, char ***out)
{
    size_t n = 0, cap = 200;
    char **ids = calloc(cap, sizeof *ids);
    if (!ids)
        return 0;
    for (size_t i = 0; i < l->n && n < cap; i++) {
        if (!l->items[i].is_file || strncmp(l->items[i].url, "file://", 7) != 0)
            continue;
        FILE *f = fopen(l->items[i].url + 7, "rb");
        if (!f)
            continue;
        static char buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        nf_feed_t feed;
        if (nf_feed_parse(&feed, buf, len, l->items[i].url, 0, NULL, NULL, 0) != NF_FEED_OK)
            continue;
        for (size_t k = 0; k < feed.nitems && n < cap; k++)
            if (feed.items[k].article_id[0] && (ids[n] = strdup(feed.items[k].article_id)))
                n++;
        nf_feed_free(&feed);
    }
    *out = ids;
    return n;
}

/* The analytics options from the config (analytics.h), the taxonomy loaded once, and the
 * stories and trending actors registered. 0, or -1 with the reason in err (a config error). */
static int setup_analytics(run_ctx_t *c, char *err, size_t errlen)
{
    const nf_config_t *cfg = &c->cfg;
    nf_analytics_t *an = &c->an;
    nf_analytics_defaults(an);
    an->epoch = c->epoch;
    /* several processes may share the job: trending panes through Kafka to one merger */
    an->panes_topic = cfg->state.changelog && cfg->kafka.assignment != 1 && c->kafka;
    an->sink = c->in.sink;
    an->store = c->store;
    an->budget_bytes = (size_t)cfg->state.budget_mb << 20;
    if (cfg->classify.taxonomy[0]) {
        c->taxonomy = strcmp(cfg->classify.taxonomy, "builtin") == 0
                          ? nf_classify_load_text("builtin taxonomy", nf_classify_builtin,
                                                  nf_classify_builtin_len, err, errlen)
                          : nf_classify_load(cfg->classify.taxonomy, err, errlen);
        if (!c->taxonomy)
            return -1;
        if (nf_classify_topic_count(c->taxonomy) > NF_TOPICS_MAX) {
            snprintf(err, errlen, "classify.taxonomy: more than %d topics", NF_TOPICS_MAX);
            return -1;
        }
    }
    an->taxonomy = c->taxonomy;
    an->minhash.shingle_words = cfg->cluster.shingle_words;
    an->minhash.hashes = an->cluster.hashes = cfg->cluster.hashes;
    an->minhash.bands = an->cluster.bands = cfg->cluster.bands;
    an->minhash.rows = an->cluster.rows = cfg->cluster.rows;
    an->cluster.threshold = cfg->cluster.threshold;
    an->cluster.ttl_ms = an->topics_ttl_ms = (uint64_t)cfg->cluster.ttl_s * 1000u;
    an->history_ttl_ms = cfg->interest.history ? (uint64_t)cfg->interest.history_ttl_s * 1000u : 0;
    an->history_reads = cfg->interest.history == 2;
    an->cluster_shard = cfg->cluster.shard;
    if (c->in.in_partitions) { /* the articles' state belongs to the one-partition topic */
        an->cluster.key_group = NF_CHANGELOG_GLOBAL_KG;
        an->interest.topics_key_group = NF_CHANGELOG_GLOBAL_KG;
    }
    an->trend.window_ms = (int64_t)cfg->trending.window_s * 1000;
    an->trend.slide_ms = (int64_t)cfg->trending.slide_s * 1000;
    an->trend.lateness_ms = cfg->trending.lateness_ms;
    an->trend.idle_ms = cfg->trending.idle_ms;
    an->trend.cms_width = cfg->trending.cms_width;
    an->trend.cms_depth = cfg->trending.cms_depth;
    an->trend.top_k = cfg->trending.top_k;
    an->trend.exact = cfg->trending.exact;
    an->event_id_ttl_ms = (uint64_t)cfg->trending.event_id_ttl_s * 1000u;
    an->max_future_ms = cfg->trending.max_future_ms;
    an->max_age_ms =
        cfg->trending.backfill ? 0 : an->trend.window_ms + (int64_t)cfg->trending.lateness_ms;
    an->interest.alpha = cfg->interest.alpha;
    an->interest.gamma = cfg->interest.gamma;
    const double weights[NF_READ_KIND__COUNT] = {
        cfg->interest.weight_read, cfg->interest.weight_save, cfg->interest.weight_share,
        cfg->interest.weight_dislike, cfg->interest.weight_hide};
    memcpy(an->interest.weights, weights, sizeof weights);
    an->interest.seen_ttl_ms = (uint64_t)cfg->interest.seen_ttl_s * 1000u;
    an->interest.table_max = cfg->interest.table_max;
    an->interest.unknown_as_empty = cfg->interest.unknown_articles == 1;
    if (cfg->interest.gamma <= 0.0) {
        snprintf(err, errlen, "interest.gamma must be in (0, 1]");
        return -1;
    }
    return nf_analytics_register(c->rt, an, err, errlen) == 0 ? 0 : -1;
}

/* Bounds the whole shutdown by shutdown.timeout_ms, counted from the stop request. Each step
 * bounds itself too (the Kafka calls of the final epoch by nf_epoch_set_deadline, the shards'
 * drain by the runtime's shutdown timeout); this thread is the backstop for what cannot be
 * bounded: a consumer close that waits for an unreachable broker, or librdkafka 2.0.2's
 * rd_kafka_destroy() that can wait forever on the consumer after partitions were paused and
 * resumed. Past the deadline the process exits with what is committed, and says so. */
typedef struct stop_watch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    unsigned timeout_ms;
    struct timespec until;    /* CLOCK_MONOTONIC */
    const char *phase;        /* under lock */
    bool final_done;          /* under lock: nf_epoch_stop returned (nothing more commits) */
    uint64_t committed_epoch; /* under lock, once final_done (then epoch may be freed) */
    int exit_code;            /* under lock: the code once final_done */
    nf_epoch_t *epoch;
} stop_watch_t;

static void *stop_watchdog(void *arg)
{
    stop_watch_t *w = arg;
    pthread_mutex_lock(&w->lock);
    int r = 0;
    while (!w->done && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&w->cond, &w->lock, &w->until);
    bool done = w->done, final_done = w->final_done;
    const char *phase = w->phase;
    int code = final_done ? w->exit_code : NF_EXIT_RUNTIME;
    /* before final_done the epoch object lives on (run_cleanup frees it later) */
    uint64_t last = final_done ? w->committed_epoch : nf_epoch_committed_epoch(w->epoch);
    const char *step = final_done ? "stopped" : nf_epoch_step(w->epoch);
    bool committed = !final_done && nf_epoch_final_committed(w->epoch);
    pthread_mutex_unlock(&w->lock);
    if (done)
        return NULL;
    if (committed) { /* what is left (leaving the group) loses nothing if cut short */
        code = NF_EXIT_OK;
        nf_log(NF_LOG_WARN, "main",
               "shutdown.timeout_ms passed after the final epoch committed; exiting now (state "
               "and outputs are committed)",
               NF_LI("timeout_ms", w->timeout_ms), NF_LS("epoch_step", step),
               NF_LI("committed_epoch", last), NF_LI("exit_code", code), NF_LEND);
    } else if (final_done && code == NF_EXIT_OK)
        nf_log(NF_LOG_WARN, "main",
               "shutdown.timeout_ms passed after the final epoch committed; exiting now (state "
               "and outputs are committed)",
               NF_LI("timeout_ms", w->timeout_ms), NF_LS("phase", phase),
               NF_LI("committed_epoch", last), NF_LI("exit_code", code), NF_LEND);
    else if (final_done)
        nf_log(NF_LOG_ERROR, "main",
               "shutdown.timeout_ms passed after the final epoch failed or was skipped; exiting "
               "now with what is committed (the next start settles the rest)",
               NF_LI("timeout_ms", w->timeout_ms), NF_LS("phase", phase),
               NF_LI("committed_epoch", last), NF_LI("exit_code", code), NF_LEND);
    else
        nf_log(NF_LOG_ERROR, "main",
               "shutdown.timeout_ms passed before the final epoch committed; exiting now with "
               "what is committed (the next start rolls a pending epoch forward or reads its "
               "inputs again)",
               NF_LI("timeout_ms", w->timeout_ms), NF_LS("phase", phase), NF_LS("epoch_step", step),
               NF_LI("committed_epoch", last), NF_LI("exit_code", code), NF_LEND);
    _exit(code);
}

/* The Kafka calls of the final epoch stop this long before the hard deadline, so that the
 * job exits through its own path (and logs what happened) rather than the watchdog's. */
static unsigned stop_margin_ms(unsigned timeout_ms)
{
    unsigned m = timeout_ms / 4;
    return m > 2000 ? 2000 : m;
}

/* --from-checkpoint: every check runs before anything moves (nf_checkpoint_restore); a refusal
 * leaves the state directory as it was. 0, NF_EXIT_USAGE (no such checkpoint) or
 * NF_EXIT_RUNTIME (refused or failed). */
static int restore_checkpoint(const nf_config_t *cfg, char *err, size_t errlen)
{
    /* No shard-count check: trending state is kept per input partition, so a checkpoint fits any
     * runtime.shards (state of the older per-shard layout is dropped at start, analytics.h). */
    nf_restore_opts_t o = {.keep_replaced = cfg->checkpoint.retain_count};
    nf_restore_result_t res;
    if (nf_checkpoint_restore(cfg->state.dir, g_from_checkpoint, &o, &res, err, errlen) != 0) {
        nf_log(NF_LOG_ERROR, "main",
               res.moved ? "restoring the checkpoint failed"
                         : "refusing to restore the checkpoint; the state directory is untouched",
               NF_LS("checkpoint", g_from_checkpoint), NF_LS("error", err), NF_LEND);
        return res.resolved ? NF_EXIT_RUNTIME : NF_EXIT_USAGE;
    }
    nf_log(NF_LOG_WARN, "main",
           "restored a named checkpoint: state and input positions roll back to it",
           NF_LS("checkpoint", g_from_checkpoint), NF_LS("id", res.id), NF_LI("epoch", res.epoch),
           NF_LI("next_epoch", res.next_epoch), NF_LEND);
    if (res.replaced[0])
        nf_log(NF_LOG_WARN, "main", "the replaced state is kept", NF_LS("path", res.replaced),
               NF_LS("hint", "delete it with rm -rf once it is not needed; the newest "
                             "checkpoint.retain_count are kept, older ones deleted"),
               NF_LEND);
    if (res.kept_newer)
        nf_log(NF_LOG_WARN, "main",
               "checkpoints newer than the restored one are kept (another timeline); epochs "
               "continue after the newest of them",
               NF_LI("count", res.kept_newer), NF_LS("newest", res.newest_kept),
               NF_LI("next_epoch", res.next_epoch),
               NF_LS("hint", "`newsflow checkpoints list` marks them; `newsflow checkpoints delete "
                             "ID` removes one; checkpoint.retain_count prunes them as new "
                             "checkpoints are taken"),
               NF_LEND);
    if (res.pruned)
        nf_log(NF_LOG_INFO, "main", "deleted older replaced states beyond checkpoint.retain_count",
               NF_LI("count", res.pruned), NF_LS("deleted", res.pruned_names), NF_LEND);
    return 0;
}

/* In a consumer group the sources live in the sources topic, shared by every process: a local
 * file of one machine cannot be. 0 or NF_EXIT_USAGE (logged). */
static int check_shared_sources(const nf_source_list_t *l)
{
    size_t files = 0;
    const char *first = NULL;
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i].is_file && files++ == 0)
            first = l->items[i].url;
    if (!files)
        return 0;
    nf_log(NF_LOG_ERROR, "main",
           "local feed files cannot be shared by the processes of a consumer group (state."
           "changelog with kafka.assignment=group): the sources go through the sources topic",
           NF_LS("first", first), NF_LI("files", files),
           NF_LS("hint", "serve them over http(s), or run one process with kafka.assignment=all"),
           NF_LEND);
    return NF_EXIT_USAGE;
}

/* The configured sources into the sources topic (sources_publish.h), before the shards start.
 * 0 or NF_EXIT_RUNTIME (logged). */
static int publish_sources(run_ctx_t *c)
{
    char err[512];
    nf_sources_publish_stats_t ps;
    uint64_t t0 = nf_now_ns();
    if (nf_sources_publish(c->kafka, &c->sources, &ps, err, sizeof err) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot publish the configured sources to the sources topic",
               NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    nf_log(NF_LOG_INFO, "main", "configured sources published to the sources topic",
           NF_LI("configured", ps.configured), NF_LI("published", ps.published),
           NF_LI("unchanged", ps.unchanged), NF_LI("operator_records", ps.operator),
           NF_LI("records_read", ps.records), NF_LF("seconds", (double)(nf_now_ns() - t0) / 1e9),
           NF_LEND);
    return 0;
}

/* c->self_url: serve.advertised_url, else http://admin.listen:admin.port (the host name for a
 * wildcard address). With admin.port 0 the port is chosen here, before Kafka connects, so that
 * the consumer's client.id can advertise it (serve/owners.h); the admin server binds it a
 * moment later. 0 or an exit code. */
static int advertised_url(run_ctx_t *c, char *err, size_t errlen)
{
    nf_config_t *cfg = &c->cfg;
    if (cfg->serve.advertised_url[0]) {
        snprintf(c->self_url, sizeof c->self_url, "%s", cfg->serve.advertised_url);
        size_t n = strlen(c->self_url);
        while (n && c->self_url[n - 1] == '/')
            c->self_url[--n] = 0;
        return 0;
    }
    const char *host = cfg->admin.listen;
    bool v6 = strchr(host, ':') != NULL;
    if (cfg->admin.port == 0) {
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof ss);
        socklen_t sl;
        if (v6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            a->sin6_family = AF_INET6;
            sl = sizeof *a;
            inet_pton(AF_INET6, host, &a->sin6_addr);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            a->sin_family = AF_INET;
            sl = sizeof *a;
            inet_pton(AF_INET, host, &a->sin_addr);
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&ss, sl) != 0 ||
            getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
            snprintf(err, errlen, "cannot choose a free port on %s: %s", host, strerror(errno));
            if (fd >= 0)
                close(fd);
            nf_log(NF_LOG_ERROR, "main", "cannot start the admin server", NF_LS("error", err),
                   NF_LEND);
            return NF_EXIT_RUNTIME;
        }
        cfg->admin.port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                   : ((struct sockaddr_in *)&ss)->sin_port);
        close(fd);
    }
    char name[256];
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::")) {
        if (gethostname(name, sizeof name) != 0)
            snprintf(name, sizeof name, "localhost");
        name[sizeof name - 1] = 0;
        host = name;
        v6 = false;
    }
    snprintf(c->self_url, sizeof c->self_url, v6 ? "http://[%s]:%u" : "http://%s:%u", host,
             (unsigned)cfg->admin.port);
    return 0;
}

/* nf_epoch_recover found state.dir's file system full: one error line naming it. */
static void log_recover_disk_full(const char *state_dir, const char *err)
{
    nf_store_space_t sp;
    char fs[1400] = "";
    if (nf_store_space(state_dir, &sp) == 0)
        nf_store_space_text(&sp, fs, sizeof fs);
    nf_log(NF_LOG_ERROR, "main",
           "cannot recover the state: state.dir's file system is full (a pending epoch stays "
           "pending for the next start). Free space, then restart (docs/runbooks.md \"Disk full "
           "on state.dir\")",
           NF_LS("file_system", sp.mount), NF_LS("device", sp.device),
           NF_LI("free_bytes", (int64_t)sp.free_bytes), NF_LS("space", fs), NF_LS("error", err),
           NF_LEND);
}

/* State, Kafka and the epoch coordinator, before any actor runs. 0 or an exit code. */
static int setup_durability(run_ctx_t *c, unsigned shards, char *err, size_t errlen)
{
    const nf_config_t *cfg = &c->cfg;
    if (cfg->state.changelog && !strcmp(cfg->kafka.brokers, "embedded")) {
        nf_log(NF_LOG_ERROR, "main",
               "state.changelog needs Apache Kafka: the embedded mock keeps no transactional "
               "offsets and shows aborted records, so a restore from it could not be trusted",
               NF_LS("hint", "set kafka.brokers, or state.changelog=false"), NF_LEND);
        return NF_EXIT_USAGE;
    }
    if (g_from_checkpoint && cfg->state.changelog) {
        /* The changelog topics hold the state after the checkpoint; the restore at start would
         * bring it back over the checkpoint's. */
        nf_log(NF_LOG_ERROR, "main",
               "--from-checkpoint is not supported with state.changelog=true: the changelog "
               "topics hold the newer state, which the start would restore over the checkpoint",
               NF_LS("checkpoint", g_from_checkpoint),
               NF_LS("hint", "run with --set state.changelog=false to roll back (the changelog "
                             "then no longer matches the state: recreate its topics)"),
               NF_LEND);
        return NF_EXIT_USAGE;
    }
    if (g_reset && cfg->state.changelog) {
        nf_log(NF_LOG_ERROR, "main",
               "--reset is for a job without state.changelog: with it, the start restores the "
               "state from the changelog topics and takes the group's positions itself",
               NF_LEND);
        return NF_EXIT_USAGE;
    }
    if (g_from_checkpoint) {
        int code = restore_checkpoint(cfg, err, errlen);
        if (code != 0)
            return code;
    }
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    so.block_cache_mb = cfg->state.block_cache_mb;
    _Static_assert(NF_STORE_LOG_OFF == 0 && NF_STORE_LOG_WARN == 1 && NF_STORE_LOG_INFO == 2,
                   "state.rocksdb_log's choices (config.c) are indexed by nf_store_log_t");
    so.log = (nf_store_log_t)cfg->state.rocksdb_log;
    errno = 0;
    c->store = nf_store_open(cfg->state.dir, &so, err, errlen);
    if (!c->store) {
        bool lost = errno == EUCLEAN; /* a damaged or lost database: an operator's decision */
        nf_log(NF_LOG_ERROR, "main", "cannot open the state", NF_LS("state_dir", cfg->state.dir),
               NF_LS("error", err), NF_LEND);
        return lost ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    }
    nf_identity_t id = {cfg->kafka.group_id, cfg->kafka.topic_prefix, cfg->kafka.transactional_id};
    bool recorded = false;
    int ir = nf_identity_check(c->store, &id, &recorded, err, errlen);
    if (ir != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot start: the state is not this job's",
               NF_LS("state_dir", cfg->state.dir), NF_LS("error", err), NF_LEND);
        return ir == -EEXIST ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    }
    if (recorded)
        nf_log(NF_LOG_INFO, "main", "state identity recorded", NF_LS("state_dir", cfg->state.dir),
               NF_LS("group", id.group), NF_LS("topic_prefix", id.topic_prefix),
               NF_LS("writer", id.writer), NF_LI("format", NF_STATE_FORMAT), NF_LEND);
    /* Read by the admin and history threads, which run_cleanup stops before the store closes. */
    nf_metrics_gauge_fn("newsflow_rocksdb_sst_bytes",
                        "Bytes of the state's live SST files on disk (RocksDB "
                        "rocksdb.live-sst-files-size over every column family; checkpoints hold "
                        "copies of their own).",
                        NULL, store_sst_bytes, c);
    nf_metrics_gauge_fn("newsflow_rocksdb_memtable_bytes",
                        "Bytes of the state's RocksDB memtables (rocksdb.cur-size-all-mem-tables).",
                        NULL, store_memtable_bytes, c);
    nf_epoch_opts_t eo = {.interval_ms = cfg->checkpoint.interval_ms,
                          .retain_every = cfg->checkpoint.retain_every,
                          .retain_count = cfg->checkpoint.retain_count,
                          .checkpoint_on_stop = cfg->checkpoint.on_stop,
                          .changelog = cfg->state.changelog,
                          .group = cfg->kafka.assignment != 1,
                          .config_hash = nf_config_hash(cfg),
                          .reset = g_reset,
                          .from_checkpoint = g_from_checkpoint != NULL,
                          .state_dir = cfg->state.dir,
                          .group_id = cfg->kafka.group_id};
    c->epoch = nf_epoch_new(c->rt, c->store, c->in.sink, &eo, err, errlen);
    if (!c->epoch) {
        nf_log(NF_LOG_ERROR, "main", "cannot create the epoch coordinator", NF_LS("error", err),
               NF_LEND);
        return NF_EXIT_USAGE;
    }
    const char *brokers = cfg->kafka.brokers;
    if (!strcmp(brokers, "embedded")) {
        c->mock = nf_kafka_mock_new(1, cfg->kafka.partitions, cfg->kafka.topic_prefix, err, errlen);
        if (!c->mock) {
            nf_log(NF_LOG_ERROR, "main", "cannot start the embedded Kafka", NF_LS("error", err),
                   NF_LEND);
            return NF_EXIT_RUNTIME;
        }
        brokers = nf_kafka_mock_bootstrap(c->mock);
        nf_log(NF_LOG_INFO, "main",
               "embedded Kafka started (mock cluster; data lives as long "
               "as this process)",
               NF_LS("bootstrap", brokers), NF_LEND);
    }
    char client_id[600];
    client_id[0] = 0;
    if (brokers[0] && cfg->kafka.assignment != 1 && cfg->admin.enabled) {
        int code = advertised_url(c, err, errlen);
        if (code != 0)
            return code;
        nf_owners_client_id(c->self_url, client_id, sizeof client_id);
    }
    if (brokers[0]) {
        nf_kafka_opts_t ko = {.brokers = brokers,
                              .client_id = client_id[0] ? client_id : NULL,
                              .exactly_once = cfg->kafka.exactly_once,
                              .topic_prefix = cfg->kafka.topic_prefix,
                              .group_id = cfg->kafka.group_id,
                              .transactional_id = cfg->kafka.transactional_id,
                              .group_instance_id =
                                  cfg->kafka.static_membership ? cfg->kafka.transactional_id : NULL,
                              .properties = cfg->kafka.properties,
                              .shards = shards,
                              .consume = true,
                              .assign_all = cfg->kafka.assignment == 1,
                              .changelog = cfg->state.changelog,
                              .trending_panes = cfg->state.changelog && cfg->kafka.assignment != 1,
                              .position = nf_epoch_position_cb,
                              .assign = nf_epoch_assign_cb,
                              .revoke = nf_epoch_revoke_cb,
                              .fault = nf_epoch_fault_cb,
                              .arg = c->epoch};
        c->kafka = nf_kafka_new(&ko, err, errlen);
        if (!c->kafka) {
            nf_log(NF_LOG_ERROR, "main",
                   errno == ENOENT ? "the job's Kafka topics are missing"
                                   : "cannot connect to Kafka",
                   NF_LS("brokers", brokers), NF_LS("error", err), NF_LEND);
            return NF_EXIT_RUNTIME;
        }
        nf_kafka_ops_t kops = nf_kafka_ops(c->kafka);
        nf_epoch_attach_kafka(c->epoch, &kops);
    }
    int rr = nf_epoch_recover(c->epoch, err, errlen);
    if (rr == -ENOSPC) {
        log_recover_disk_full(cfg->state.dir, err);
        return NF_EXIT_RUNTIME;
    }
    if (rr != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot recover the state", NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    /* In a consumer group the assign callback guards the partitions as they come. */
    if (c->kafka && cfg->kafka.assignment == 1 && !c->mock &&
        (rr = nf_epoch_guard_positions(c->epoch, err, errlen)) != 0) {
        nf_log(NF_LOG_ERROR, "main",
               rr == -EEXIST ? "cannot start: the state stands behind the consumer group"
                             : "cannot start: the consumer group's offsets are not readable",
               NF_LS("error", err), NF_LEND);
        return rr == -EEXIST ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    }
    if (c->kafka && cfg->edge.enabled && cfg->admin.enabled)
        start_edge(c, brokers);
    return 0;
}

/* Warm standbys (state/standby.h), after the start's restore and before the coordinator: in a
 * consumer group with changelogs only. One that cannot start is logged: the job runs without. */
static void start_standby(run_ctx_t *c)
{
    const nf_config_t *cfg = &c->cfg;
    bool replica = cfg->serve.global_replica && cfg->admin.enabled && cfg->state.changelog &&
                   cfg->kafka.assignment != 1 && c->kafka && !c->mock;
    if (!cfg->scale.standby_replicas && !replica)
        return;
    if (!cfg->state.changelog || cfg->kafka.assignment == 1 || !c->kafka || c->mock) {
        nf_log(NF_LOG_WARN, "main",
               "scale.standby_replicas ignored: standbys need state.changelog=true, "
               "kafka.assignment=group and Apache Kafka",
               NF_LEND);
        return;
    }
    char err[256];
    nf_kafka_ops_t kops = nf_kafka_ops(c->kafka);
    nf_standby_opts_t so = {.st = c->store,
                            .kafka = &kops,
                            .partitions = nf_kafka_input_partitions(c->kafka, NF_INPUT_READ_EVENTS),
                            .source_partitions =
                                nf_kafka_input_partitions(c->kafka, NF_INPUT_SOURCES),
                            .replicas = cfg->scale.standby_replicas};
    c->standby = nf_standby_new(&so, err, sizeof err);
    if (c->standby && nf_standby_start(c->standby, err, sizeof err) != 0) {
        nf_standby_free(c->standby);
        c->standby = NULL;
    }
    if (!c->standby) {
        nf_log(NF_LOG_WARN, "main", "standby not started: failovers restore more",
               NF_LS("error", err), NF_LEND);
        return;
    }
    nf_epoch_attach_standby(c->epoch, c->standby);
}

int nf_cli_run(int argc, char **argv)
{
    const char *path;
    char **sets;
    unsigned nsets;
    int pa = parse_args(argc, argv, &path, &sets, &nsets);
    if (pa != 0) {
        free(sets);
        return pa > 0 ? NF_EXIT_OK : NF_EXIT_USAGE;
    }
    static run_ctx_t c;
    nf_config_t *cfg = &c.cfg;
    char err[NF_CONFIG_ERRLEN];
    int lr = nf_config_load(cfg, path, sets, nsets, true, err, sizeof err);
    free(sets);
    if (lr != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }
    nf_log_set_level(cfg->log.level);

    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = cfg->runtime.shards;
    ro.pin = cfg->runtime.pin;
    ro.ring_capacity = cfg->runtime.ring_capacity;
    ro.batch = cfg->runtime.batch;
    ro.budget = cfg->runtime.budget;
    ro.spin_ns = (uint64_t)cfg->runtime.spin_us * 1000u;
    ro.shutdown_timeout_ms = cfg->shutdown.timeout_ms;
    if (ro.shards == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        ro.shards = cpus > 0 ? (unsigned)cpus : 1;
    }
    int mr = nf_metrics_init(ro.shards);
    if (mr != 0) {
        fprintf(stderr, "newsflow: cannot create the metrics registry: %s\n", strerror(-mr));
        return NF_EXIT_RUNTIME;
    }
    nf_fetch_global_init();
    nf_feed_global_init();
    if ((mr = nf_buildinfo_register_metric()) != 0)
        nf_log(NF_LOG_WARN, "main", "newsflow_build_info not registered", NF_LI("errno", -mr),
               NF_LEND);
    if (setup_ingest(cfg, &c.in, &c.sources, ro.shards, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        nf_sources_free(&c.sources);
        return NF_EXIT_USAGE;
    }
    if (c.sources.n == 0)
        nf_log(NF_LOG_WARN, "main", "no sources configured: nothing will be crawled",
               NF_LS("hint", "set sources.file or sources.urls"), NF_LEND);
    c.rt = nf_runtime_create(&ro, err, sizeof err);
    if (!c.rt) {
        nf_log(NF_LOG_ERROR, "main", "cannot create the runtime", NF_LS("error", err), NF_LEND);
        nf_sink_close(c.in.sink);
        run_cleanup(&c);
        return NF_EXIT_RUNTIME;
    }
    int code = setup_durability(&c, ro.shards, err, sizeof err);
    if (code != 0) {
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return code;
    }
    c.in.epoch = c.epoch;
    c.in.store = c.store;
    c.in.budget_bytes = (size_t)cfg->state.budget_mb << 20;
    /* Several processes may share the job: sources follow the sources partitions (ingest.h). */
    c.in.in_partitions = cfg->state.changelog && cfg->kafka.assignment != 1 && c.kafka;
    c.in.kafka = c.kafka;
    if (c.in.in_partitions && (code = check_shared_sources(&c.sources)) != 0) {
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return code;
    }
    if (setup_analytics(&c, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return NF_EXIT_USAGE;
    }
    c.in.an = &c.an;
    c.reads = (nf_reads_t){
        .kafka = c.kafka,
        .ingest = &c.in,
        .epoch = c.epoch,
        .an = &c.an,
        .store = c.store,
        /* the transactional id is the process's stable identity in the job */
        .process_id = cfg->state.changelog && cfg->kafka.assignment != 1
                          ? nf_hash64_str(cfg->kafka.transactional_id, 0x6b6579736574ull) | 1
                          : 0,
        .max_event_bytes = cfg->kafka.max_event_bytes,
        .pause_high_water = cfg->kafka.pause_high_water,
        .pause_low_water = cfg->kafka.pause_low_water,
        .budget_bytes = (size_t)cfg->state.budget_mb << 20,
        .coalesce_max = cfg->interest.coalesce ? cfg->interest.coalesce_max_users : 0};
    const char *slow = getenv("NF_TEST_SLOW_READS_US"); /* backpressure test knob */
    if (slow)
        c.reads.slow_us = (uint32_t)strtoul(slow, NULL, 10);
    if (nf_ingest_register(c.rt, &c.in) != 0 || nf_reads_register(c.rt, &c.reads) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot register the actors", NF_LEND);
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return NF_EXIT_RUNTIME;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int exit_code = NF_EXIT_OK;
    if (cfg->admin.enabled && !(c.guard = new_guard(cfg, err, sizeof err))) {
        nf_log(NF_LOG_ERROR, "main", "cannot set up the readers' authentication",
               NF_LS("error", err), NF_LEND);
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return NF_EXIT_USAGE;
    }
    if (cfg->admin.enabled && !(c.query = new_query(&c))) {
        nf_log(NF_LOG_ERROR, "main", "out of memory", NF_LEND);
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return NF_EXIT_RUNTIME;
    }
    if (cfg->admin.enabled && cfg->admin.history_interval_ms)
        c.history = nf_history_start(cfg->admin.history_interval_ms);
    if (cfg->admin.enabled) {
        nf_admin_hooks_t hooks = {.health = health,
                                  .ready = ready,
                                  .arg = c.rt,
                                  .api = api,
                                  .post = post,
                                  .max_body = cfg->edge.max_body_bytes,
                                  .drain_ms = cfg->edge.delivery_timeout_ms + 2000,
                                  .api_arg = &c,
                                  .page = nf_serve_page,
                                  .page_len = nf_serve_page_len,
                                  .readers_only = cfg->admin.operator_port != 0,
                                  .max_connections = cfg->admin.max_connections,
                                  .request_timeout_ms = cfg->admin.request_timeout_ms};
        c.admin =
            nf_admin_start(cfg->admin.listen, (uint16_t)cfg->admin.port, &hooks, err, sizeof err);
        if (!c.admin) {
            nf_log(NF_LOG_ERROR, "main", "cannot start the admin server", NF_LS("error", err),
                   NF_LS("hint", "set admin.port (0 = any free port) or admin.enabled=false"),
                   NF_LEND);
            run_cleanup(&c);
            nf_sink_close(c.in.sink);
            return NF_EXIT_RUNTIME;
        }
        if (cfg->admin.operator_port && start_operator(&c, err, sizeof err) != 0) {
            run_cleanup(&c);
            nf_sink_close(c.in.sink);
            return NF_EXIT_RUNTIME;
        }
        /* `newsflow status` asks there for /v1/status */
        c.admin_file =
            write_admin_file(cfg, nf_admin_port(c.operator ? c.operator : c.admin));
        start_demo(&c);
        if (cfg->admin.probe_port && start_probe(&c, err, sizeof err) != 0) {
            run_cleanup(&c);
            nf_sink_close(c.in.sink);
            return NF_EXIT_RUNTIME;
        }
    }
    /* After the admin server is up, so that /readyz and the metrics show its progress. */
    atomic_store(&g_epoch, c.epoch);
    if (nf_epoch_restore_changelog(c.epoch, err, sizeof err) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot restore the state from the changelog topics",
               NF_LS("error", err), NF_LEND);
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return NF_EXIT_RUNTIME;
    }
    if (c.in.in_partitions && (code = publish_sources(&c)) != 0) {
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return code;
    }
    start_standby(&c);
    if (nf_runtime_start(c.rt) != 0 || nf_epoch_start(c.epoch) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot start the shards",
               NF_LS("error", nf_runtime_start_error(c.rt)), NF_LEND);
        nf_runtime_request_stop(c.rt);
        nf_runtime_wait(c.rt);
        run_cleanup(&c);
        nf_sink_close(c.in.sink);
        return NF_EXIT_RUNTIME;
    }
    if (c.in.in_partitions && c.an.interest_actor >= 0 && c.an.taxonomy &&
        !(c.follow = nf_topics_follow_start(c.kafka, c.rt, &c.an, err, sizeof err))) {
        /* Interest would count the other processes' articles as unknown: stop instead. */
        nf_log(NF_LOG_ERROR, "main", "cannot follow the articles topic for topic vectors",
               NF_LS("error", err), NF_LEND);
        nf_runtime_fail(c.rt);
    }
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)nf_config_hash(cfg));
    nf_log(NF_LOG_INFO, "main", "newsflow started", NF_LS("version", NF_VERSION),
           NF_LS("commit", NF_GIT_COMMIT), NF_LI("shards", ro.shards),
           NF_LS("config", path ? path : "(defaults)"), NF_LS("config_hash", hash),
           NF_LI("sources", c.sources.n), NF_LI("duplicate_sources", c.sources.duplicates),
           NF_LS("state_dir", cfg->state.dir), NF_LI("epoch", nf_epoch_committed_epoch(c.epoch)),
           NF_LS("kafka", cfg->kafka.brokers[0] ? cfg->kafka.brokers : "off"),
           NF_LS("sink", cfg->sink.spec),
           NF_LS("admin", cfg->admin.enabled ? cfg->admin.listen : "off"),
           NF_LI("admin_port", c.admin ? nf_admin_port(c.admin) : 0),
           NF_LI("operator_port", c.operator? nf_admin_port(c.operator) : 0), NF_LEND);
    if (c.admin) {
        /* Where a person looks: the page (trending stories, a reader's feed) and the API. */
        char addr[96], url[128];
        local_address(cfg, nf_admin_port(c.admin), addr, sizeof addr);
        snprintf(url, sizeof url, "http://%s/", addr);
        nf_log(NF_LOG_INFO, "main", "the page: trending stories and readers' feeds",
               NF_LS("url", url), NF_LS("api", "docs/openapi.json"), NF_LEND);
    }
    atomic_store(&g_interval_ms, cfg->checkpoint.interval_ms);
    atomic_store(&g_epoch, c.epoch);
    atomic_store(&g_kafka, c.kafka);
    atomic_store(&g_phase, PHASE_RUNNING);
    int was_waiting = -1; /* readiness last logged */

    uint64_t start = nf_now_ns();
    uint64_t stop_at = deadline_ns(start, cfg->runtime.stop_after_ms);
    uint64_t progress_every = (uint64_t)cfg->log.progress_interval_ms * 1000000ull;
    uint64_t next_progress = progress_every ? start + progress_every : UINT64_MAX;
    nf_runtime_stats_t prev = {0};
    while (!g_signals && !nf_runtime_stop_requested(c.rt)) {
        uint64_t now = nf_now_ns();
        if (now >= stop_at) {
            nf_log(NF_LOG_INFO, "main", "runtime.stop_after_ms reached; stopping",
                   NF_LI("stop_after_ms", cfg->runtime.stop_after_ms), NF_LEND);
            break;
        }
        readiness_t rd;
        readiness(&rd);
        if (rd.waiting != was_waiting) { /* every change, with what it waits for */
            char wl[128];
            if (rd.waiting)
                nf_log(was_waiting == 0 ? NF_LOG_WARN : NF_LOG_INFO, "main",
                       "not ready: /readyz answers 503",
                       NF_LS("waiting_for", wait_list(rd.waiting, wl, sizeof wl)),
                       NF_LI("epoch", rd.epoch), NF_LF("seconds_since_commit", rd.since_commit_s),
                       NF_LI("partitions_assigned", rd.partitions),
                       NF_LS("kafka_last_error", rd.kafka_error), NF_LEND);
            else
                nf_log(NF_LOG_INFO, "main", "ready: /readyz answers 200", NF_LI("epoch", rd.epoch),
                       NF_LI("partitions_assigned", rd.partitions), NF_LEND);
            was_waiting = rd.waiting;
        }
        if (now >= next_progress) {
            nf_runtime_stats_t st;
            nf_runtime_stats(c.rt, &st);
            nf_epoch_stats_t es;
            nf_epoch_stats(c.epoch, &es);
            double secs = (double)progress_every / 1e9;
            char wl[128], group[192] = "";
            if (c.kafka)
                nf_kafka_group_state(c.kafka, group, sizeof group);
            nf_log(NF_LOG_INFO, "main", "progress",
                   NF_LI("uptime_s", (now - start) / 1000000000ull), NF_LI("epoch", es.epoch),
                   NF_LI("articles", nf_counter_value(c.in.m.dedup_new)),
                   NF_LI("duplicates", nf_counter_value(c.in.m.dedup_duplicate)),
                   NF_LI("read_events", nf_counter_value(c.reads.m.events)),
                   NF_LI("dead_letters", nf_counter_value(c.reads.m.dead_letters) +
                                             nf_counter_value(c.reads.m.dead_letters_time)),
                   NF_LI("outputs_committed", es.outputs),
                   NF_LF("pause_ms", (double)es.last_pause_ns / 1e6),
                   NF_LF("messages_per_s", (double)(st.received - prev.received) / secs),
                   NF_LI("ring_full", st.ring_full), NF_LF("rss_mb", rss_mb()),
                   NF_LS("waiting_for", wait_list(rd.waiting, wl, sizeof wl)),
                   NF_LS("epoch_step", nf_epoch_step(c.epoch)), NF_LS("group", group), NF_LEND);
            prev = st;
            next_progress += progress_every;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* From here on everything is bounded by shutdown.timeout_ms (stop_watchdog). */
    static stop_watch_t sw = {.lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_condattr_t
        ca; /* a monotonic deadline: a wall-clock step neither hastens nor delays it */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sw.cond, &ca);
    pthread_condattr_destroy(&ca);
    sw.timeout_ms = cfg->shutdown.timeout_ms;
    sw.phase = "committing the final epoch";
    sw.epoch = c.epoch;
    sw.exit_code = exit_code;
    sw.until = nf_deadline_after(CLOCK_MONOTONIC, cfg->shutdown.timeout_ms);
    nf_epoch_set_deadline(c.epoch,
                          nf_now_ns() + (uint64_t)(cfg->shutdown.timeout_ms -
                                                   stop_margin_ms(cfg->shutdown.timeout_ms)) *
                                            1000000ull);
    pthread_t swt;
    bool watching = pthread_create(&swt, NULL, stop_watchdog, &sw) == 0;
    if (g_signals && !nf_runtime_failed(c.rt))
        nf_log(NF_LOG_INFO, "main",
               "signal received; committing a final epoch and draining within "
               "shutdown.timeout_ms (a second signal exits at once)",
               NF_LI("timeout_ms", cfg->shutdown.timeout_ms), NF_LEND);
    atomic_store(&g_phase, PHASE_STOPPING);
    atomic_store(&g_kafka, NULL);
    nf_demo_stop(c.demo);
    c.demo = NULL;
    nf_topics_follow_stop(c.follow);
    c.follow = NULL;
    if (nf_epoch_stop(c.epoch) != 0 || nf_runtime_failed(c.rt))
        exit_code = nf_epoch_refused(c.epoch) ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    pthread_mutex_lock(&sw.lock);
    sw.final_done = true; /* committed or not, nothing more will be */
    sw.committed_epoch = nf_epoch_committed_epoch(c.epoch); /* c.epoch is freed before the end */
    sw.exit_code = exit_code;
    sw.phase = "draining the shards";
    pthread_mutex_unlock(&sw.lock);
    if (nf_epoch_timed_out(c.epoch))
        nf_log(NF_LOG_ERROR, "main",
               "stopped at shutdown.timeout_ms without committing the final epoch (is the "
               "Kafka cluster reachable?); the next start settles it",
               NF_LI("timeout_ms", cfg->shutdown.timeout_ms),
               NF_LI("committed_epoch", nf_epoch_committed_epoch(c.epoch)), NF_LEND);
    else if (nf_epoch_fenced(c.epoch))
        nf_log(NF_LOG_ERROR, "main",
               "stopped: fenced by a newer process with the same kafka.transactional_id, which "
               "now owns this job's work and completes what this one left uncommitted; do not "
               "restart this one while that one runs (if none runs, the broker ended this "
               "one's transaction after transaction.timeout.ms: a restart is safe)",
               NF_LS("transactional_id", cfg->kafka.transactional_id),
               NF_LI("last_epoch", nf_epoch_committed_epoch(c.epoch)), NF_LEND);
    else if (nf_runtime_failed(c.rt) && nf_epoch_unapplied(c.epoch))
        nf_log(NF_LOG_ERROR, "main",
               "the job failed (see the first error above); its last epoch committed (outputs "
               "and input positions) but is not applied to state.dir yet: the next start applies "
               "it from its pending record (rolls it forward), and reads again what the job did "
               "after it",
               NF_LI("last_epoch", nf_epoch_unapplied(c.epoch)), NF_LEND);
    else if (nf_runtime_failed(c.rt))
        nf_log(NF_LOG_ERROR, "main",
               "the job failed (see the first error above); stopped without committing what it "
               "did after its last epoch: those inputs are read again after a restart",
               NF_LI("last_epoch", nf_epoch_committed_epoch(c.epoch)), NF_LEND);
    nf_runtime_request_stop(c.rt);
    int wr = nf_runtime_wait(c.rt);
    if (wr == -ETIMEDOUT)
        exit_code = NF_EXIT_RUNTIME;
    nf_runtime_stats_t st;
    nf_runtime_stats(c.rt, &st);
    nf_epoch_stats_t es;
    nf_epoch_stats(c.epoch, &es);
    nf_admin_stop(c.probe);
    c.probe = NULL;
    nf_admin_stop(c.admin);
    c.admin = NULL;
    remove_admin_file(&c);
    nf_runtime_destroy(c.rt);
    c.rt = NULL;
    pthread_mutex_lock(&sw.lock);
    sw.exit_code = exit_code;
    sw.phase = "closing the Kafka clients and the store";
    pthread_mutex_unlock(&sw.lock);
    run_cleanup(&c);
    if (watching) {
        pthread_mutex_lock(&sw.lock);
        sw.done = true;
        pthread_cond_signal(&sw.cond);
        pthread_mutex_unlock(&sw.lock);
        pthread_join(swt, NULL);
    }
    int sr = nf_sink_close(c.in.sink);
    if (sr != 0) {
        nf_log(NF_LOG_ERROR, "main", "sink close failed: outputs may be incomplete",
               NF_LS("sink", cfg->sink.spec), NF_LS("error", strerror(-sr)), NF_LEND);
        exit_code = NF_EXIT_RUNTIME;
    }
    nf_log(exit_code ? NF_LOG_ERROR : NF_LOG_INFO, "main", "newsflow stopped",
           NF_LI("epoch", es.epoch), NF_LI("outputs_committed", es.outputs),
           NF_LI("articles", nf_counter_value(c.in.m.dedup_new)), NF_LI("exit_code", exit_code),
           NF_LI("messages", st.received), NF_LI("dropped_at_shutdown", st.dropped_at_shutdown),
           NF_LF("uptime_s", (double)(nf_now_ns() - start) / 1e9), NF_LEND);
    nf_metrics_shutdown();
    return exit_code;
}

int nf_cli_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    nf_buildinfo_item_t items[NF_BUILDINFO_MAX];
    size_t n = nf_buildinfo(items);
    /* "newsflow VERSION" first: scripts read the version from that line. */
    printf("newsflow %s\n", items[0].value);
    for (size_t i = 1; i < n; i++)
        printf("%-10s %s%s\n", items[i].name, items[i].value,
               items[i].built && i > 1 ? " (built against)" : "");
    return NF_EXIT_OK;
}
