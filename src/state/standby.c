/* standby.c — see standby.h. */
#include "state/standby.h"

#include "io/sink.h"
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
    MAXT = NF_TOPIC_CL_END - NF_TOPIC_CL_FIRST, /* changelog topics keyed by one input, at most:
                                                 * all of them (a smaller bound silently left
                                                 * the ninth global kind, search_log, untailed) */
    NU = 2 * MAXP + 1, /* units: read-events p, sources MAXP + p, the global key group */
    U_GLOBAL = 2 * MAXP,
    POLL_MS = 100,         /* the longest a hold waits for a poll to end */
    POLL_MAX = 20000,      /* records per poll, before the next look at holds */
    SAVE_NS = 1000000000,  /* offsets recorded at least this often while records come */
    START_NS = 30000000000 /* tailing starts without an assignment after this long */
};
_Static_assert(NF_CHANGELOG_MAX_PARTITIONS == NF_EPOCH_MAX_PARTITIONS, "one partition space");

/* A unit is what one input partition's owner writes: the changelog partitions of the kinds
 * keyed by that input, at that partition (read-events, sources) or at the global key group's
 * (trending-panes 0). */
struct nf_standby {
    nf_standby_opts_t o;
    nf_kafka_ops_t kops; /* o.kafka points here */
    int topics[NF_INPUT__COUNT][MAXT], ntopics[NF_INPUT__COUNT];
    int nunits[NF_INPUT__COUNT]; /* units per input: its partitions (trending-panes: 1) */
    int global_part;             /* the changelog partition of the global key group */
    pthread_t thread;
    bool thread_started;
    /* the coordinator's wishes, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool owned[NU], held[NU], started, stop;
    uint64_t gen, acked; /* a hold waits until the thread acted on its generation */
    _Atomic bool running;
    /* the thread's own */
    bool tailing[NU];
    int64_t pos[NU][MAXT];     /* next offset not applied, -1 unknown */
    int rec_topics[MAXT * NU]; /* save()'s offsets to record */
    int32_t rec_parts[MAXT * NU];
    int64_t rec_offsets[MAXT * NU];
    nf_changelog_applier_t ap;
    nf_changelog_stats_t stats;
    void *tail;
    /* published */
    _Atomic bool pub_tailing[NU];
    _Atomic unsigned pub_partitions;
    _Atomic uint64_t pub_lag, pub_records;
    _Atomic bool failed;
    nf_counter_t m_records;
    nf_gauge_t m_lag, m_partitions;
};

static int unit_of(int input, int32_t p)
{
    return input == NF_INPUT_TRENDING_PANES ? U_GLOBAL : input * MAXP + p;
}

static int unit_input(int u)
{
    return u == U_GLOBAL ? NF_INPUT_TRENDING_PANES : u / MAXP;
}

/* The unit's partition of its changelog topics. */
static int32_t unit_clpart(const nf_standby_t *sb, int u)
{
    return u == U_GLOBAL ? sb->global_part : u % MAXP;
}

static bool unit_exists(const nf_standby_t *sb, int u)
{
    int in = unit_input(u);
    if (u != U_GLOBAL && sb->o.replicas == 0)
        return false; /* the global key group only */
    return u == U_GLOBAL ? sb->nunits[in] > 0 : u % MAXP < sb->nunits[in];
}

nf_standby_t *nf_standby_new(const nf_standby_opts_t *o, char *err, size_t errlen)
{
    if (!o->st || !o->kafka || !o->kafka->tail_new || o->partitions <= 0 || o->partitions > MAXP) {
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
    for (int in = 0; in < NF_INPUT__COUNT; in++)
        sb->ntopics[in] = nf_changelog_input_topics(in, sb->topics[in], MAXT);
    /* the changelog topics have the read-events partitions' count: a sources partition beyond
     * it has no changelog partition of its own (changelog.c part_wanted) */
    sb->nunits[NF_INPUT_READ_EVENTS] = o->partitions;
    sb->nunits[NF_INPUT_SOURCES] =
        o->source_partitions < o->partitions ? o->source_partitions : o->partitions;
    sb->nunits[NF_INPUT_TRENDING_PANES] = 1;
    sb->global_part = (int)(NF_CHANGELOG_GLOBAL_KG % (unsigned)o->partitions);
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
                     "Input partitions whose changelogs the standby keeps applied: read-events "
                     "and sources partitions, and trending-panes 0 for the global key group.",
                     NULL, 0, &sb->m_partitions);
    return sb;
}

/* ---------------------------------------------------------------- the thread */

static int on_record(void *arg, int topic, int32_t partition, int64_t offset, const void *key,
                     size_t klen, const void *val, size_t vlen, bool tombstone)
{
    nf_standby_t *sb = arg;
    int in = nf_changelog_topic_input(topic);
    if (in < 0 || partition < 0 || partition >= MAXP ||
        (in == NF_INPUT_TRENDING_PANES && partition != sb->global_part))
        return 0;
    if (!sb->tailing[unit_of(in, partition)])
        return 0; /* let go a moment ago */
    char err[256];
    int r = nf_changelog_apply(&sb->ap, topic, partition, offset, key, klen, val, vlen, tombstone,
                               err, sizeof err);
    if (r != 0)
        nf_log(NF_LOG_ERROR, "standby", "standby: applying a changelog record failed",
               NF_LS("topic", nf_topic_name((nf_topic_t)topic)), NF_LI("partition", partition),
               NF_LI("offset", offset), NF_LS("error", err), NF_LEND);
    return r;
}

/* Writes what is applied, then records the consumer's positions of the units tailed as their
 * synced offsets and publishes the lag. */
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
    unsigned units = 0;
    for (int u = 0; u < NU; u++) {
        if (!sb->tailing[u])
            continue;
        units++;
        int in = unit_input(u);
        int32_t p = unit_clpart(sb, u);
        for (int t = 0; t < sb->ntopics[in]; t++) {
            int64_t pos, hi;
            sb->o.kafka->tail_position(sb->tail, sb->topics[in][t], p, &pos, &hi);
            if (pos >= 0 && pos != sb->pos[u][t]) {
                sb->pos[u][t] = pos;
                tt[n] = sb->topics[in][t];
                tp[n] = p;
                to[n++] = pos;
            }
            int64_t at = sb->pos[u][t] < 0 ? 0 : sb->pos[u][t];
            if (hi > at)
                lag += (uint64_t)(hi - at);
        }
    }
    if (n && (r = nf_changelog_synced_set(sb->o.st, tt, tp, to, n, err, sizeof err)) != 0)
        nf_log(NF_LOG_WARN, "standby", "standby: cannot record the changelog offsets reached",
               NF_LS("error", err), NF_LEND);
    atomic_store(&sb->pub_lag, lag);
    atomic_store(&sb->pub_partitions, units);
    nf_gauge_set(sb->m_lag, (int64_t)lag);
    nf_gauge_set(sb->m_partitions, units);
    return 0;
}

/* Stops tailing what it should not tail, starts tailing what it should. 0 or -errno. */
static int reconcile(nf_standby_t *sb, const bool *want)
{
    char err[256];
    bool leaving = false;
    for (int u = 0; u < NU && !leaving; u++)
        leaving = sb->tailing[u] && !want[u];
    int r = leaving ? save(sb) : 0;
    for (int u = 0; u < NU && r == 0; u++) {
        if (sb->tailing[u] == want[u])
            continue;
        int in = unit_input(u);
        int32_t p = unit_clpart(sb, u);
        for (int t = 0; t < sb->ntopics[in] && r == 0; t++) {
            int64_t from = NF_KAFKA_TAIL_STOP;
            if (want[u] && (r = nf_changelog_synced_get(sb->o.st, sb->topics[in][t], p, &from, err,
                                                        sizeof err)))
                break;
            sb->pos[u][t] = want[u] ? from : -1;
            r = sb->o.kafka->tail_set(sb->tail, sb->topics[in][t], p, from, err, sizeof err);
        }
        if (r != 0) {
            nf_log(NF_LOG_ERROR, "standby", "standby: cannot change the partitions it reads",
                   NF_LS("input", nf_input_name((nf_input_t)in)), NF_LI("partition", u % MAXP),
                   NF_LS("error", err), NF_LEND);
            break;
        }
        sb->tailing[u] = want[u];
        atomic_store(&sb->pub_tailing[u], want[u]);
        nf_log(NF_LOG_DEBUG, "standby", want[u] ? "standing by for" : "no longer standing by for",
               NF_LS("input", nf_input_name((nf_input_t)in)),
               NF_LI("partition", u == U_GLOBAL ? 0 : u % MAXP), NF_LEND);
    }
    return r;
}

static void *standby_main(void *arg)
{
    nf_standby_t *sb = arg;
    char err[256];
    bool want[NU];
    uint64_t t0 = nf_now_ns(), last_save = t0;
    int r = 0;
    for (;;) {
        pthread_mutex_lock(&sb->mu);
        if (!sb->started && nf_now_ns() - t0 > (uint64_t)START_NS)
            sb->started = true;
        bool stop = sb->stop;
        for (int u = 0; u < NU; u++)
            want[u] = !stop && sb->started && unit_exists(sb, u) && !sb->owned[u] && !sb->held[u];
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
    for (int u = 0; u < NU; u++)
        for (int t = 0; t < MAXT; t++)
            sb->pos[u][t] = -1;
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
           sb->o.replicas
               ? "standby on: the changelogs of the read-events and sources partitions and of "
                 "the global key group assigned to other processes are kept applied here"
               : "global replica on: the global key group's changelog is kept applied here "
                 "while another process owns it (the query API's articles, stories, trending)",
           NF_LI("replicas", sb->o.replicas), NF_LI("partitions", sb->o.partitions),
           NF_LI("sources_partitions", sb->nunits[NF_INPUT_SOURCES]), NF_LEND);
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

void nf_standby_hold(nf_standby_t *sb, const bool *const parts[NF_INPUT__COUNT])
{
    if (!sb)
        return;
    pthread_mutex_lock(&sb->mu);
    for (int in = 0; in < NF_INPUT__COUNT; in++)
        for (int p = 0; parts[in] && p < sb->nunits[in]; p++)
            if (parts[in][p])
                sb->held[unit_of(in, p)] = true;
    changed_and_wait(sb, true);
    pthread_mutex_unlock(&sb->mu);
}

/* The input partitions among parts are owned (or no longer); tailing starts. */
static void set_owned(nf_standby_t *sb, const nf_kafka_offset_t *parts, size_t n, bool owned)
{
    pthread_mutex_lock(&sb->mu);
    for (size_t i = 0; i < n; i++) {
        int in = (int)parts[i].input;
        int32_t p = parts[i].partition;
        if (in >= 0 && in < NF_INPUT__COUNT && p >= 0 && p < sb->nunits[in])
            sb->owned[unit_of(in, p)] = owned;
    }
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

void nf_standby_status(const nf_standby_t *sb, nf_standby_status_t *out, bool *parts, bool *sources)
{
    memset(out, 0, sizeof *out);
    if (!sb)
        return;
    out->partitions = atomic_load(&sb->pub_partitions);
    out->lag = atomic_load(&sb->pub_lag);
    out->records = atomic_load(&sb->pub_records);
    out->failed = atomic_load(&sb->failed);
    out->global = atomic_load(&sb->pub_tailing[U_GLOBAL]);
    for (int p = 0; p < MAXP; p++) {
        if (parts)
            parts[p] = atomic_load(&sb->pub_tailing[unit_of(NF_INPUT_READ_EVENTS, p)]);
        if (sources)
            sources[p] = atomic_load(&sb->pub_tailing[unit_of(NF_INPUT_SOURCES, p)]);
    }
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
