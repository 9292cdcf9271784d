/* job_stop.c — the job's stop (job.h): a final epoch with input stopped, the shards drained,
 * everything released, all of it bounded by shutdown.timeout_ms. */
#include "job/job_priv.h"

#include "runtime/log.h"
#include "runtime/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* The watchdog's thread over the rest of the stop; false if it could not start. */
static bool watch_start(nf_job_t *j, stop_watch_t *sw, pthread_t *t)
{
    const nf_config_t *cfg = &j->cfg;
    pthread_condattr_t
        ca; /* a monotonic deadline: a wall-clock step neither hastens nor delays it */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sw->cond, &ca);
    pthread_condattr_destroy(&ca);
    sw->timeout_ms = cfg->shutdown.timeout_ms;
    sw->phase = "committing the final epoch";
    sw->epoch = j->epoch;
    sw->exit_code = NF_EXIT_OK;
    sw->until = nf_deadline_after(CLOCK_MONOTONIC, cfg->shutdown.timeout_ms);
    nf_epoch_set_deadline(j->epoch,
                          nf_now_ns() + (uint64_t)(cfg->shutdown.timeout_ms -
                                                   stop_margin_ms(cfg->shutdown.timeout_ms)) *
                                            1000000ull);
    return pthread_create(t, NULL, stop_watchdog, sw) == 0;
}

static void watch_phase(stop_watch_t *sw, const char *phase, int exit_code)
{
    pthread_mutex_lock(&sw->lock);
    sw->exit_code = exit_code;
    sw->phase = phase;
    pthread_mutex_unlock(&sw->lock);
}

static void watch_end(stop_watch_t *sw, pthread_t t, bool watching)
{
    if (watching) {
        pthread_mutex_lock(&sw->lock);
        sw->done = true;
        pthread_cond_signal(&sw->cond);
        pthread_mutex_unlock(&sw->lock);
        pthread_join(t, NULL);
    }
    pthread_cond_destroy(&sw->cond);
}

/* Why the final epoch did not commit, or what a failed job left behind. */
static void log_final_epoch(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    if (nf_epoch_timed_out(j->epoch))
        nf_log(NF_LOG_ERROR, "main",
               "stopped at shutdown.timeout_ms without committing the final epoch (is the "
               "Kafka cluster reachable?); the next start settles it",
               NF_LI("timeout_ms", cfg->shutdown.timeout_ms),
               NF_LI("committed_epoch", nf_epoch_committed_epoch(j->epoch)), NF_LEND);
    else if (nf_epoch_fenced(j->epoch))
        nf_log(NF_LOG_ERROR, "main",
               "stopped: fenced by a newer process with the same kafka.transactional_id, which "
               "now owns this job's work and completes what this one left uncommitted; do not "
               "restart this one while that one runs (if none runs, the broker ended this "
               "one's transaction after transaction.timeout.ms: a restart is safe)",
               NF_LS("transactional_id", cfg->kafka.transactional_id),
               NF_LI("last_epoch", nf_epoch_committed_epoch(j->epoch)), NF_LEND);
    else if (nf_runtime_failed(j->rt) && nf_epoch_unapplied(j->epoch))
        nf_log(NF_LOG_ERROR, "main",
               "the job failed (see the first error above); its last epoch committed (outputs "
               "and input positions) but is not applied to state.dir yet: the next start applies "
               "it from its pending record (rolls it forward), and reads again what the job did "
               "after it",
               NF_LI("last_epoch", nf_epoch_unapplied(j->epoch)), NF_LEND);
    else if (nf_runtime_failed(j->rt))
        nf_log(NF_LOG_ERROR, "main",
               "the job failed (see the first error above); stopped without committing what it "
               "did after its last epoch: those inputs are read again after a restart",
               NF_LI("last_epoch", nf_epoch_committed_epoch(j->epoch)), NF_LEND);
}

/* The final epoch with input stopped: the exit code so far. */
static int final_epoch(nf_job_t *j, stop_watch_t *sw)
{
    atomic_store(&j->phase, PHASE_STOPPING);
    atomic_store(&j->kafka_ready, NULL);
    nf_demo_stop(j->demo);
    j->demo = NULL;
    nf_topics_follow_stop(j->follow);
    j->follow = NULL;
    int code = NF_EXIT_OK;
    if (nf_epoch_stop(j->epoch) != 0 || nf_runtime_failed(j->rt))
        code = nf_epoch_refused(j->epoch) ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    pthread_mutex_lock(&sw->lock);
    sw->final_done = true; /* committed or not, nothing more will be */
    sw->committed_epoch = nf_epoch_committed_epoch(j->epoch); /* freed before the end */
    sw->exit_code = code;
    sw->phase = "draining the shards";
    pthread_mutex_unlock(&sw->lock);
    log_final_epoch(j);
    return code;
}

int nf_job_stop(nf_job_t *j, bool signalled)
{
    const nf_config_t *cfg = &j->cfg;
    /* From here on everything is bounded by shutdown.timeout_ms (stop_watchdog). One job per
     * process: the watch outlives nothing it reads (it is joined before the job is freed). */
    static stop_watch_t watch = {.lock = PTHREAD_MUTEX_INITIALIZER};
    stop_watch_t *sw = &watch;
    pthread_t swt;
    bool watching = watch_start(j, sw, &swt);
    if (signalled && !nf_runtime_failed(j->rt))
        nf_log(NF_LOG_INFO, "main",
               "signal received; committing a final epoch and draining within "
               "shutdown.timeout_ms (a second signal exits at once)",
               NF_LI("timeout_ms", cfg->shutdown.timeout_ms), NF_LEND);
    int exit_code = final_epoch(j, sw);
    nf_httpd_quiesce(j->httpd); /* the answers at its workers go out while the shards run */
    nf_runtime_request_stop(j->rt);
    if (nf_runtime_wait(j->rt) == -ETIMEDOUT)
        exit_code = NF_EXIT_RUNTIME;
    nf_runtime_stats_t st;
    nf_runtime_stats(j->rt, &st);
    nf_epoch_stats_t es;
    nf_epoch_stats(j->epoch, &es);
    job_stop_http(j);
    watch_phase(sw, "closing the Kafka clients and the store", exit_code);
    int sr = job_release(j);
    watch_end(sw, swt, watching);
    if (sr != 0) {
        nf_log(NF_LOG_ERROR, "main", "sink close failed: outputs may be incomplete",
               NF_LS("sink", cfg->sink.spec), NF_LS("error", strerror(-sr)), NF_LEND);
        exit_code = NF_EXIT_RUNTIME;
    }
    nf_log(exit_code ? NF_LOG_ERROR : NF_LOG_INFO, "main", "newsflow stopped",
           NF_LI("epoch", es.epoch), NF_LI("outputs_committed", es.outputs),
           NF_LI("articles", nf_counter_value(j->in.m.dedup_new)), NF_LI("exit_code", exit_code),
           NF_LI("messages", st.received), NF_LI("dropped_at_shutdown", st.dropped_at_shutdown),
           NF_LF("uptime_s", (double)(nf_now_ns() - j->started_ns) / 1e9), NF_LEND);
    free(j);
    return exit_code;
}
