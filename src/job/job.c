/* job.c — the job's start, its main loop and its release (job.h). The start, in order:
 * the actors' options (config errors first, before anything opens), the runtime, the durable
 * parts (job_state.c), the actors registered, the HTTP servers (job_http.c), the restore from
 * the changelog topics, the sources published, the standby, then the shards and the epoch
 * coordinator. job_release undoes any prefix of it, in reverse. */
#include "job/job_priv.h"

#include "runtime/buildinfo.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int job_release(nf_job_t *j)
{
    nf_demo_stop(j->demo);
    j->demo = NULL;
    job_stop_http(j);
    nf_guard_free(j->guard);
    j->guard = NULL;
    nf_edge_free(j->edge); /* no request uses it now; its producer flushes what is in flight */
    nf_edge_kafka_free(j->edge_kafka);
    j->edge = NULL;
    j->edge_kafka = NULL;
    nf_history_stop(j->history);
    nf_query_free(j->query);
    nf_operator_free(j->op);
    nf_search_stop(j->search); /* before the store its thread reads views of */
    nf_owners_stop(j->owners); /* before the Kafka client it describes the group with */
    if (j->epoch) /* its coordinator has stopped: no rebalance callback reaches the standby */
        nf_epoch_attach_standby(j->epoch, NULL);
    nf_standby_free(j->standby); /* before the Kafka client and the store it uses */
    j->standby = NULL;
    nf_runtime_destroy(j->rt);
    j->rt = NULL;
    nf_httpd_free(j->httpd); /* after the shards and the admin server: it closes admin.port */
    j->httpd = NULL;
    nf_kafka_free(j->kafka);
    nf_analytics_free(&j->an);
    nf_classify_free(j->taxonomy);
    nf_epoch_free(j->epoch);
    nf_kafka_mock_free(j->mock);
    if (j->store)
        nf_store_close(j->store);
    j->store = NULL; /* the RocksDB gauges read it until the registry goes */
    nf_sources_free(&j->sources);
    nf_trace_stop(); /* after the shards and servers: no span comes after */
    return nf_sink_close(j->in.sink);
}

/* Traces (runtime/trace.h) and the sampling of the named log events, before any work. */
static int start_tracing(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    nf_log_set_sample_every(cfg->log.sample_every);
    nf_trace_opts_t o = {.endpoint = cfg->trace.endpoint,
                         .sample_ratio = cfg->trace.sample_ratio,
                         .service_name = "newsflow",
                         .instance = cfg->kafka.transactional_id,
                         .queue = cfg->trace.queue,
                         .flush_ms = cfg->trace.flush_ms,
                         .slow_ms = cfg->trace.slow_ms};
    char err[256];
    if (nf_trace_start(&o, err, sizeof err) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot start tracing", NF_LS("error", err),
               NF_LS("hint", "set trace.endpoint to \"\" to run without traces"), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    return 0;
}

unsigned nf_job_shards(const nf_config_t *cfg)
{
    if (cfg->runtime.shards)
        return cfg->runtime.shards;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 ? (unsigned)cpus : 1;
}

static int start_runtime(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = j->shards;
    ro.pin = cfg->runtime.pin;
    ro.ring_capacity = cfg->runtime.ring_capacity;
    ro.batch = cfg->runtime.batch;
    ro.budget = cfg->runtime.budget;
    ro.spin_ns = (uint64_t)cfg->runtime.spin_us * 1000u;
    ro.shutdown_timeout_ms = cfg->shutdown.timeout_ms;
    char err[256];
    j->rt = nf_runtime_create(&ro, err, sizeof err);
    if (!j->rt) {
        nf_log(NF_LOG_ERROR, "main", "cannot create the runtime", NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    return 0;
}

/* The changelog restore, the sources topic, the standby, the shards and the coordinator. */
static int start_processing(nf_job_t *j)
{
    char err[NF_CONFIG_ERRLEN];
    /* After the admin server is up, so that /readyz and the metrics show its progress. */
    atomic_store(&j->epoch_ready, j->epoch);
    if (nf_epoch_restore_changelog(j->epoch, err, sizeof err) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot restore the state from the changelog topics",
               NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    int code = j->in.in_partitions ? job_publish_sources(j) : 0;
    if (code)
        return code;
    job_start_standby(j);
    if (j->op)
        nf_operator_set_standby(j->op, j->standby);
    /* The epoch starts after the runtime: a failed init leaves participants registered by the
     * inits that succeeded, which only an epoch never started may hold (runtime.h). */
    if (nf_runtime_start(j->rt) != 0 || nf_epoch_start(j->epoch) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot start the shards",
               NF_LS("error", nf_runtime_start_error(j->rt)), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    job_http_to_shards(j);
    if (j->in.in_partitions && j->an.interest_actor >= 0 && j->an.taxonomy &&
        !(j->follow = nf_topics_follow_start(j->kafka, j->rt, &j->an, err, sizeof err))) {
        /* Interest would count the other processes' articles as unknown: stop instead. */
        nf_log(NF_LOG_ERROR, "main", "cannot follow the articles topic for topic vectors",
               NF_LS("error", err), NF_LEND);
        nf_runtime_fail(j->rt);
    }
    return 0;
}

static void log_started(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)nf_config_hash(cfg));
    nf_log(NF_LOG_INFO, "main", "newsflow started", NF_LS("version", NF_VERSION),
           NF_LS("commit", NF_GIT_COMMIT), NF_LI("shards", j->shards),
           NF_LS("config", j->args.config_path ? j->args.config_path : "(defaults)"),
           NF_LS("config_hash", hash), NF_LI("sources", j->sources.n),
           NF_LI("duplicate_sources", j->sources.duplicates), NF_LS("state_dir", cfg->state.dir),
           NF_LI("epoch", nf_epoch_committed_epoch(j->epoch)),
           NF_LS("kafka", cfg->kafka.brokers[0] ? cfg->kafka.brokers : "off"),
           NF_LS("sink", cfg->sink.spec),
           NF_LS("admin", cfg->admin.enabled ? cfg->admin.listen : "off"),
           NF_LI("admin_port", j->admin ? nf_admin_port(j->admin) : 0),
           NF_LI("operator_port", j->operator? nf_admin_port(j->operator) : 0), NF_LEND);
    if (j->admin) {
        /* Where a person looks: the page (trending stories, a reader's feed) and the API. */
        char addr[96], url[128];
        job_local_address(cfg, nf_admin_port(j->admin), addr, sizeof addr);
        snprintf(url, sizeof url, "http://%s/", addr);
        nf_log(NF_LOG_INFO, "main", "the page: trending stories and readers' feeds",
               NF_LS("url", url), NF_LS("api", "docs/openapi.json, docs/routes.md"), NF_LEND);
    }
}

int nf_job_start(const nf_config_t *cfg, const nf_job_args_t *a, nf_job_t **out)
{
    nf_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        nf_log(NF_LOG_ERROR, "main", "out of memory", NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    j->cfg = *cfg;
    j->args = *a;
    j->started_ns = nf_now_ns();
    j->shards = nf_job_shards(cfg);
    int code = start_tracing(j);
    if (!code)
        code = job_setup_ingest(j);
    if (!code)
        code = start_runtime(j);
    if (!code)
        code = job_setup_durability(j);
    if (!code)
        code = job_setup_actors(j);
    if (!code)
        code = job_start_http(j);
    if (!code)
        code = start_processing(j);
    if (code) {
        job_release(j);
        free(j);
        return code;
    }
    log_started(j);
    atomic_store(&j->kafka_ready, j->kafka);
    atomic_store(&j->phase, PHASE_RUNNING);
    *out = j;
    return NF_EXIT_OK;
}

/* Every readiness change, with what it waits for. */
static void log_readiness(const job_readiness_t *rd, int was_waiting)
{
    char wl[128];
    if (rd->waiting)
        nf_log(was_waiting == 0 ? NF_LOG_WARN : NF_LOG_INFO, "main",
               "not ready: /readyz answers 503",
               NF_LS("waiting_for", job_wait_list(rd->waiting, wl, sizeof wl)),
               NF_LI("epoch", rd->epoch), NF_LF("seconds_since_commit", rd->since_commit_s),
               NF_LI("partitions_assigned", rd->partitions),
               NF_LS("kafka_last_error", rd->kafka_error), NF_LEND);
    else
        nf_log(NF_LOG_INFO, "main", "ready: /readyz answers 200", NF_LI("epoch", rd->epoch),
               NF_LI("partitions_assigned", rd->partitions), NF_LEND);
}

static double rss_mb(void)
{
    double b = nf_resident_bytes();
    return isnan(b) ? 0 : b / (1024.0 * 1024.0);
}

static void log_progress(nf_job_t *j, const job_readiness_t *rd, uint64_t now, double secs,
                         nf_runtime_stats_t *prev)
{
    nf_runtime_stats_t st;
    nf_runtime_stats(j->rt, &st);
    nf_epoch_stats_t es;
    nf_epoch_stats(j->epoch, &es);
    char wl[128], group[192] = "";
    if (j->kafka)
        nf_kafka_group_state(j->kafka, group, sizeof group);
    nf_log(
        NF_LOG_INFO, "main", "progress", NF_LI("uptime_s", (now - j->started_ns) / 1000000000ull),
        NF_LI("epoch", es.epoch), NF_LI("articles", nf_counter_value(j->in.m.dedup_new)),
        NF_LI("duplicates", nf_counter_value(j->in.m.dedup_duplicate)),
        NF_LI("read_events", nf_counter_value(j->reads.m.events)),
        NF_LI("dead_letters", nf_counter_value(j->reads.m.dead_letters) +
                                  nf_counter_value(j->reads.m.dead_letters_time)),
        NF_LI("outputs_committed", es.outputs), NF_LF("pause_ms", (double)es.last_pause_ns / 1e6),
        NF_LF("messages_per_s", (double)(st.received - prev->received) / secs),
        NF_LI("ring_full", st.ring_full), NF_LF("rss_mb", rss_mb()),
        NF_LS("waiting_for", job_wait_list(rd->waiting, wl, sizeof wl)),
        NF_LS("epoch_step", nf_epoch_step(j->epoch)), NF_LS("group", group), NF_LEND);
    *prev = st;
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

void nf_job_wait(nf_job_t *j, volatile sig_atomic_t *signals)
{
    const nf_config_t *cfg = &j->cfg;
    int was_waiting = -1; /* readiness last logged */
    uint64_t start = nf_now_ns();
    uint64_t stop_at = deadline_ns(start, cfg->runtime.stop_after_ms);
    uint64_t progress_every = (uint64_t)cfg->log.progress_interval_ms * 1000000ull;
    uint64_t next_progress = progress_every ? start + progress_every : UINT64_MAX;
    nf_runtime_stats_t prev = {0};
    while (!*signals && !nf_runtime_stop_requested(j->rt)) {
        uint64_t now = nf_now_ns();
        if (now >= stop_at) {
            nf_log(NF_LOG_INFO, "main", "runtime.stop_after_ms reached; stopping",
                   NF_LI("stop_after_ms", cfg->runtime.stop_after_ms), NF_LEND);
            return;
        }
        job_readiness_t rd;
        job_readiness(j, &rd);
        if (rd.waiting != was_waiting) {
            log_readiness(&rd, was_waiting);
            was_waiting = rd.waiting;
        }
        if (now >= next_progress) {
            log_progress(j, &rd, now, (double)progress_every / 1e9, &prev);
            next_progress += progress_every;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}
