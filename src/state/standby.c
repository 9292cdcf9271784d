/* standby.c — see standby.h. */
#include "state/standby.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "state/changelog.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAXP = NF_EPOCH_MAX_PARTITIONS,
    MAXT = 8,              /* changelog topics keyed by the read-events partition */
    POLL_MS = 100,         /* the longest a hold waits for a poll to end */
    POLL_MAX = 20000,      /* records per poll, before the next look at holds */
    SAVE_NS = 1000000000,  /* offsets recorded at least this often while records come */
    START_NS = 30000000000 /* tailing starts without an assignment after this long */
};
_Static_assert(NF_CHANGELOG_MAX_PARTITIONS == NF_EPOCH_MAX_PARTITIONS, "one partition space");

struct nf_standby {
    nf_standby_opts_t o;
    nf_kafka_ops_t kops; /* o.kafka points here */
    int topics[MAXT], ntopics;
    pthread_t thread;
    bool thread_started;
    /* the coordinator's wishes, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool owned[MAXP], held[MAXP], started, stop;
    uint64_t gen, acked; /* a hold waits until the thread acted on its generation */
    _Atomic bool running;
    /* the thread's own */
    bool tailing[MAXP];
    int64_t pos[MAXT][MAXP];     /* next offset not applied, -1 unknown */
    int rec_topics[MAXT * MAXP]; /* save()'s offsets to record */
    int32_t rec_parts[MAXT * MAXP];
    int64_t rec_offsets[MAXT * MAXP];
    nf_changelog_applier_t ap;
    nf_changelog_stats_t stats;
    void *tail;
    /* published */
    _Atomic bool pub_tailing[MAXP];
    _Atomic unsigned pub_partitions;
    _Atomic uint64_t pub_lag, pub_records;
    _Atomic bool failed;
    nf_counter_t m_records;
    nf_gauge_t m_lag, m_partitions;
};

nf_standby_t *nf_standby_new(const nf_standby_opts_t *o, char *err, size_t errlen)
{
    if (!o->st || !o->kafka || !o->kafka->tail_new || o->partitions <= 0 || o->partitions > MAXP ||
        o->replicas == 0) {
        snprintf(err, errlen, "standby: needs a store, Kafka and 1..%d partitions", MAXP);
        return NULL;
    }
    nf_standby_t *sb = calloc(1, sizeof *sb);
    if (!sb) {
        snprintf(err, errlen, "standby: out of memory");
        return NULL;
    }
    sb->o = *o;
    sb->kops = *o->kafka;
    sb->o.kafka = &sb->kops;
    sb->ntopics = nf_changelog_input_topics(sb->topics, MAXT);
    pthread_mutex_init(&sb->mu, NULL);
    pthread_cond_init(&sb->cv, NULL);
    nf_metrics_counter("newsflow_standby_records_total",
                       "Changelog records a standby applied to the local state "
                       "(scale.standby_replicas): partitions owned by other processes.",
                       NULL, 0, &sb->m_records);
    nf_metrics_gauge("newsflow_standby_lag_records",
                     "Changelog records the standby is behind, summed over the partitions it "
                     "stands by for.",
                     NULL, 0, &sb->m_lag);
    nf_metrics_gauge("newsflow_standby_partitions",
                     "Read-events partitions whose changelogs the standby keeps applied.", NULL, 0,
                     &sb->m_partitions);
    return sb;
}

/* ---------------------------------------------------------------- the thread */

static int on_record(void *arg, int topic, int32_t partition, int64_t offset, const void *key,
                     size_t klen, const void *val, size_t vlen, bool tombstone)
{
    nf_standby_t *sb = arg;
    if (partition < 0 || partition >= MAXP || !sb->tailing[partition])
        return 0; /* let go a moment ago */
    char err[256];
    int r = nf_changelog_apply(&sb->ap, topic, partition, offset, key, klen, val, vlen, tombstone,
                               err, sizeof err);
    if (r != 0)
        nf_log(NF_LOG_ERROR, "standby", "standby: applying a changelog record failed",
               NF_LI("partition", partition), NF_LI("offset", offset), NF_LS("error", err),
               NF_LEND);
    return r;
}

/* Writes what is applied, then records the consumer's positions of the partitions tailed as
 * their synced offsets and publishes the lag. */
static int save(nf_standby_t *sb)
{
    char err[256];
    int r = nf_changelog_applier_flush(&sb->ap, err, sizeof err);
    if (r != 0) {
        nf_log(NF_LOG_ERROR, "standby", "standby: state write failed", NF_LS("error", err),
               NF_LEND);
        return r;
    }
    int *tt = sb->rec_topics;
    int32_t *tp = sb->rec_parts;
    int64_t *to = sb->rec_offsets;
    size_t n = 0;
    uint64_t lag = 0;
    unsigned parts = 0;
    for (int p = 0; p < sb->o.partitions; p++) {
        if (!sb->tailing[p])
            continue;
        parts++;
        for (int t = 0; t < sb->ntopics; t++) {
            int64_t pos, hi;
            sb->o.kafka->tail_position(sb->tail, sb->topics[t], p, &pos, &hi);
            if (pos >= 0 && pos != sb->pos[t][p]) {
                sb->pos[t][p] = pos;
                tt[n] = sb->topics[t];
                tp[n] = p;
                to[n++] = pos;
            }
            int64_t at = sb->pos[t][p] < 0 ? 0 : sb->pos[t][p];
            if (hi > at)
                lag += (uint64_t)(hi - at);
        }
    }
    if (n && (r = nf_changelog_synced_set(sb->o.st, tt, tp, to, n, err, sizeof err)) != 0)
        nf_log(NF_LOG_WARN, "standby", "standby: cannot record the changelog offsets reached",
               NF_LS("error", err), NF_LEND);
    atomic_store(&sb->pub_lag, lag);
    atomic_store(&sb->pub_partitions, parts);
    nf_gauge_set(sb->m_lag, (int64_t)lag);
    nf_gauge_set(sb->m_partitions, parts);
    return 0;
}

/* Stops tailing what it should not tail, starts tailing what it should. 0 or -errno. */
static int reconcile(nf_standby_t *sb, const bool *want)
{
    char err[256];
    bool leaving = false;
    for (int p = 0; p < sb->o.partitions && !leaving; p++)
        leaving = sb->tailing[p] && !want[p];
    int r = leaving ? save(sb) : 0;
    for (int p = 0; p < sb->o.partitions && r == 0; p++) {
        if (sb->tailing[p] == want[p])
            continue;
        for (int t = 0; t < sb->ntopics && r == 0; t++) {
            int64_t from = NF_KAFKA_TAIL_STOP;
            if (want[p] &&
                (r = nf_changelog_synced_get(sb->o.st, sb->topics[t], p, &from, err, sizeof err)))
                break;
            sb->pos[t][p] = want[p] ? from : -1;
            r = sb->o.kafka->tail_set(sb->tail, sb->topics[t], p, from, err, sizeof err);
        }
        if (r != 0) {
            nf_log(NF_LOG_ERROR, "standby", "standby: cannot change the partitions it reads",
                   NF_LI("partition", p), NF_LS("error", err), NF_LEND);
            break;
        }
        sb->tailing[p] = want[p];
        atomic_store(&sb->pub_tailing[p], want[p]);
        nf_log(NF_LOG_DEBUG, "standby", want[p] ? "standing by for" : "no longer standing by for",
               NF_LI("partition", p), NF_LEND);
    }
    return r;
}

static void *standby_main(void *arg)
{
    nf_standby_t *sb = arg;
    char err[256];
    bool want[MAXP];
    uint64_t t0 = nf_now_ns(), last_save = t0;
    int r = 0;
    for (;;) {
        pthread_mutex_lock(&sb->mu);
        if (!sb->started && nf_now_ns() - t0 > (uint64_t)START_NS)
            sb->started = true;
        bool stop = sb->stop;
        for (int p = 0; p < sb->o.partitions; p++)
            want[p] = !stop && sb->started && !sb->owned[p] && !sb->held[p];
        uint64_t gen = sb->gen;
        pthread_mutex_unlock(&sb->mu);

        r = reconcile(sb, want);

        pthread_mutex_lock(&sb->mu);
        sb->acked = gen;
        pthread_cond_broadcast(&sb->cv);
        pthread_mutex_unlock(&sb->mu);
        if (stop || r != 0)
            break;

        uint64_t before = sb->stats.records;
        int n = sb->o.kafka->tail_poll(sb->tail, POLL_MS, POLL_MAX, on_record, sb, err, sizeof err);
        if (n < 0) {
            if (n == -EIO)
                nf_log(NF_LOG_ERROR, "standby", "standby: the consumer failed", NF_LS("error", err),
                       NF_LEND);
            r = n;
            break;
        }
        uint64_t applied = sb->stats.records - before;
        if (applied) {
            nf_counter_add(sb->m_records, applied);
            atomic_fetch_add(&sb->pub_records, applied);
        }
        uint64_t now = nf_now_ns();
        if (now - last_save >= (uint64_t)SAVE_NS) {
            if ((r = save(sb)) != 0)
                break;
            last_save = now;
        }
    }
    if (r != 0) {
        atomic_store(&sb->failed, true);
        nf_log(NF_LOG_ERROR, "standby",
               "standby stopped: the job goes on, and a failover restores the whole tail "
               "since the last recorded offsets",
               NF_LEND);
    }
    pthread_mutex_lock(&sb->mu);
    atomic_store(&sb->running, false);
    pthread_cond_broadcast(&sb->cv);
    pthread_mutex_unlock(&sb->mu);
    return NULL;
}

int nf_standby_start(nf_standby_t *sb, char *err, size_t errlen)
{
    if (nf_changelog_applier_init(&sb->ap, sb->o.st, NULL, &sb->stats) != 0) {
        snprintf(err, errlen, "standby: out of memory");
        return -ENOMEM;
    }
    for (int t = 0; t < MAXT; t++)
        for (int p = 0; p < MAXP; p++)
            sb->pos[t][p] = -1;
    if (!(sb->tail = sb->o.kafka->tail_new(sb->o.kafka->arg, err, errlen)))
        return -EIO;
    atomic_store(&sb->running, true);
    int r = pthread_create(&sb->thread, NULL, standby_main, sb);
    if (r != 0) {
        atomic_store(&sb->running, false);
        snprintf(err, errlen, "standby: thread: %s", strerror(r));
        return -r;
    }
    sb->thread_started = true;
    nf_log(NF_LOG_INFO, "standby",
           "standby on: the changelogs of the read-events partitions assigned to other processes "
           "are kept applied here",
           NF_LI("replicas", sb->o.replicas), NF_LI("partitions", sb->o.partitions), NF_LEND);
    return 0;
}

/* ---------------------------------------------------------------- the coordinator's calls */

/* Under mu: a new generation, and wait until the thread acted on it (or is gone). */
static void changed_and_wait(nf_standby_t *sb, bool wait)
{
    uint64_t g = ++sb->gen;
    while (wait && atomic_load(&sb->running) && sb->acked < g)
        pthread_cond_wait(&sb->cv, &sb->mu);
}

void nf_standby_hold(nf_standby_t *sb, const bool *parts)
{
    if (!sb)
        return;
    pthread_mutex_lock(&sb->mu);
    for (int p = 0; p < sb->o.partitions; p++)
        sb->held[p] |= parts[p];
    changed_and_wait(sb, true);
    pthread_mutex_unlock(&sb->mu);
}

/* The read-events partitions among parts are owned (or no longer); tailing starts. */
static void set_owned(nf_standby_t *sb, const nf_kafka_offset_t *parts, size_t n, bool owned)
{
    pthread_mutex_lock(&sb->mu);
    for (size_t i = 0; i < n; i++)
        if (parts[i].input == NF_INPUT_READ_EVENTS && parts[i].partition >= 0 &&
            parts[i].partition < MAXP)
            sb->owned[parts[i].partition] = owned;
    if (owned) /* the restore that held them is over */
        memset(sb->held, 0, sizeof sb->held);
    sb->started = true;
    changed_and_wait(sb, false);
    pthread_mutex_unlock(&sb->mu);
}

void nf_standby_assigned(nf_standby_t *sb, const nf_kafka_offset_t *parts, size_t n)
{
    if (sb)
        set_owned(sb, parts, n, true);
}

void nf_standby_revoked(nf_standby_t *sb, const nf_kafka_offset_t *parts, size_t n)
{
    if (sb)
        set_owned(sb, parts, n, false);
}

void nf_standby_status(const nf_standby_t *sb, nf_standby_status_t *out, bool *parts)
{
    memset(out, 0, sizeof *out);
    if (!sb)
        return;
    out->partitions = atomic_load(&sb->pub_partitions);
    out->lag = atomic_load(&sb->pub_lag);
    out->records = atomic_load(&sb->pub_records);
    out->failed = atomic_load(&sb->failed);
    for (int p = 0; parts && p < MAXP; p++)
        parts[p] = p < sb->o.partitions && atomic_load(&sb->pub_tailing[p]);
}

void nf_standby_free(nf_standby_t *sb)
{
    if (!sb)
        return;
    if (sb->thread_started) {
        pthread_mutex_lock(&sb->mu);
        sb->stop = true;
        sb->gen++;
        pthread_mutex_unlock(&sb->mu);
        pthread_join(sb->thread, NULL);
    }
    if (sb->tail)
        sb->o.kafka->tail_free(sb->tail);
    nf_changelog_applier_free(&sb->ap);
    pthread_cond_destroy(&sb->cv);
    pthread_mutex_destroy(&sb->mu);
    free(sb);
}
