/* epoch.c — the epoch coordinator (epoch.h): cut, pending record, Kafka transaction, apply,
 * named checkpoints, roll-forward recovery. */
#include "state/epoch.h"
#include "io/outbuf.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/trace.h"
#include "state/changelog.h"
#include "state/checkpoint.h"
#include "state/standby.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_PARTICIPANTS 16
#define CALL_TIMEOUT_MS  30000
#define COMMIT_ATTEMPTS  20

typedef struct shard_part {
    const nf_epoch_participant_t *p[MAX_PARTICIPANTS];
    void *self[MAX_PARTICIPANTS];
    unsigned n;
    nf_outbuf_t out;   /* this epoch's outputs, appended to by the shard */
    nf_outbuf_t taken; /* the cut epoch's outputs, owned by the coordinator until committed */
    bool busy;         /* answer of the last busy round */
    bool writing;      /* a snapshot by reference is not written whole yet (last round) */
} shard_part_t;

struct nf_epoch {
    nf_runtime_t *rt;
    nf_store_t *st;
    const nf_kafka_ops_t *kafka; /* NULL, or &kafka_ops: Kafka attached */
    nf_kafka_ops_t kafka_ops;
    nf_sink_t *tee;
    nf_epoch_opts_t o;
    unsigned nshards;
    shard_part_t *shards;
    nf_store_batch_t **batches;
    bool batches_frozen; /* a snapshot by reference may still write into them (free_batches) */
    _Atomic int64_t offsets[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS];
    int64_t committed_offsets[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS];
    uint64_t epoch;               /* last committed (coordinator's owner thread) */
    _Atomic uint64_t epoch_pub;   /* the same, for other threads */
    _Atomic uint64_t deadline_ns; /* nf_epoch_set_deadline; 0: none */
    _Atomic bool timed_out;       /* a commit stopped at that deadline */
    uint64_t records_since_named; /* outputs committed since the last named checkpoint */
    uint64_t last_cut_ns;
    pthread_t thread;
    bool thread_started, final_done;
    _Atomic bool stop_requested, early, failed, fenced, refused;
    /* A committed epoch (its pending record written, its transaction committed) the store could
     * not apply: the next start rolls it forward. 0: none. */
    _Atomic uint64_t unapplied;
    /* A named checkpoint found the state's file system full (after its epoch committed): the
     * coordinator stops the job before the next epoch, with this message. */
    bool disk_full;
    char disk_full_err[512];
    bool force_scan;                    /* NF_TEST_FORCE_SCAN: recovery always reads back */
    _Atomic uint64_t last_commit_at_ns; /* nf_now_ns of the last commit (start before any) */
    nf_jw_t jw;
    nf_outbuf_t changelog; /* the cut epoch's changelog records (o.changelog) */
    nf_changelog_progress_t restore;
    nf_standby_t *standby; /* nf_epoch_attach_standby; NULL: none */
    /* stats */
    _Atomic(const char *) step;        /* nf_epoch_step: what the coordinator does now */
    _Atomic bool final_committed;      /* nf_epoch_stop's final epoch committed */
    _Atomic uint64_t discarded_epochs; /* pending records discarded at start (state.changelog) */
    _Atomic uint64_t committed, failures, checkpoints, outputs, recovered_epochs, recovered_records,
        last_pause_ns, last_commit_ns, cur_epoch;
    _Atomic uint64_t last_drain_ns, last_snapshot_ns; /* parts of the last pause */
    nf_histogram_t m_pause, m_commit, m_write;
    nf_counter_t m_epochs, m_failures, m_outputs, m_checkpoints, m_early, m_recovered;
    nf_counter_t m_drain_rounds;
    nf_counter_t m_ingested;
    nf_counter_t m_cl_records, m_cl_bytes, m_restored, m_rebalance_failures, m_guard_behind;
    nf_gauge_t m_restore_seconds;
    nf_gauge_t m_epoch, m_state_bytes;
};

/* ---------------------------------------------------------------- fault injection */

static char g_fault_point[32];
static uint64_t g_fault_epoch;    /* UINT64_MAX: any epoch (the point's g_fault_nth time) */
static uint64_t g_fault_nth = 1;  /* with EPOCH "+N": the point's Nth time, whatever the epoch */
static uint32_t g_fault_stall_ms; /* 0: exit (unless g_fault_until); else sleep this long, once */
static char g_fault_until[400];   /* "": none; else stall until this file exists, once */
static bool g_fault_poll;         /* poll_until=: the stall polls the consumer (fault_polling) */
static bool g_fault_records;      /* with EPOCH "~N": only epochs with records count */
static _Atomic uint64_t g_current_epoch;
static _Atomic uint64_t g_current_records; /* records (outputs) of the epoch being committed */

/* Sleeps until path exists (a test's signal that it acted meanwhile), at most 10 minutes; with
 * poll, calls it (50 ms) instead of sleeping, so that a consumer stays in its group meanwhile. */
static void stall_until(const char *path, void (*poll)(void *arg, int ms), void *arg)
{
    struct timespec ts = {0, 50 * 1000000L};
    for (int i = 0; i < 12000 && access(path, F_OK) != 0; i++)
        if (poll)
            poll(arg, 50);
        else
            nanosleep(&ts, NULL);
}

static void fault_polling(const char *point, void (*poll)(void *arg, int ms), void *arg)
{
    if (!g_fault_epoch || strcmp(point, g_fault_point) != 0 ||
        (g_fault_epoch != UINT64_MAX && g_fault_epoch != atomic_load(&g_current_epoch)))
        return;
    if (g_fault_records && atomic_load(&g_current_records) == 0)
        return;
    if (g_fault_epoch == UINT64_MAX && --g_fault_nth > 0)
        return;
    if (!g_fault_stall_ms && !g_fault_until[0]) {
        nf_log(NF_LOG_WARN, "epoch", "fault injection: exiting as if killed", NF_LS("point", point),
               NF_LI("epoch", atomic_load(&g_current_epoch)), NF_LEND);
        _exit(137);
    }
    /* A stall lets a test act on the outside world (kill a broker) at a known point of the
     * commit, then watch the protocol carry on from there. */
    uint32_t ms = g_fault_stall_ms;
    g_fault_stall_ms = 0;
    g_fault_epoch = 0;
    nf_log(NF_LOG_WARN, "epoch", "fault injection: stalling", NF_LS("point", point),
           NF_LI("epoch", atomic_load(&g_current_epoch)), NF_LI("ms", ms),
           NF_LS("until", g_fault_until), NF_LEND);
    if (g_fault_until[0]) {
        stall_until(g_fault_until, g_fault_poll ? poll : NULL, arg);
    } else {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    nf_log(NF_LOG_WARN, "epoch", "fault injection: stall over", NF_LS("point", point), NF_LEND);
}

static void fault_at(const char *point)
{
    fault_polling(point, NULL, NULL);
}

/* NF_FAULT = POINT:EPOCH[:stall=MS|:until=PATH|:poll_until=PATH], EPOCH a number, "*" (the
 * point's first time), "+N" (its Nth time: a process whose epoch numbers continue after the
 * group's) or "~N" (its Nth time in an epoch with records: a test that needs an epoch with
 * input whatever number the consumer's first fetch lands in). 0 or -EINVAL. */
static int fault_parse(const char *f)
{
    char buf[512];
    if (strlen(f) >= sizeof buf)
        return -EINVAL;
    snprintf(buf, sizeof buf, "%s", f);
    char *save = NULL, *point = strtok_r(buf, ":", &save), *epoch = strtok_r(NULL, ":", &save),
         *opt = strtok_r(NULL, ":", &save), *end = NULL;
    if (!point || !epoch || strlen(point) >= sizeof g_fault_point || strtok_r(NULL, ":", &save))
        return -EINVAL;
    unsigned long long e = UINT64_MAX, nth = 1;
    g_fault_records = epoch[0] == '~';
    if (epoch[0] == '+' || epoch[0] == '~')
        nth = strtoull(epoch + 1, &end, 10);
    else if (strcmp(epoch, "*") != 0)
        e = strtoull(epoch, &end, 10);
    if (!e || !nth || (end && *end) || epoch[0] == '-' || epoch[1] == '-')
        return -EINVAL;
    unsigned long ms = 0;
    bool poll = opt && !strncmp(opt, "poll_", 5);
    const char *o = opt && poll ? opt + 5 : opt;
    bool until = o && !strncmp(o, "until=", 6);
    if ((poll && !until) || (until && (!o[6] || strlen(o + 6) >= sizeof g_fault_until)))
        return -EINVAL;
    if (opt && !until &&
        (strncmp(opt, "stall=", 6) != 0 || !(ms = strtoul(opt + 6, &end, 10)) || *end ||
         ms > 600000))
        return -EINVAL;
    snprintf(g_fault_point, sizeof g_fault_point, "%s", point);
    snprintf(g_fault_until, sizeof g_fault_until, "%s", until ? o + 6 : "");
    g_fault_poll = poll;
    g_fault_epoch = e;
    g_fault_nth = nth;
    g_fault_stall_ms = (uint32_t)ms;
    return 0;
}

/* ---------------------------------------------------------------- set-up */

double nf_epoch_seconds_since_commit(const nf_epoch_t *ep)
{
    return (double)(nf_now_ns() - atomic_load(&ep->last_commit_at_ns)) / 1e9;
}

int64_t nf_epoch_position(const nf_epoch_t *ep, nf_input_t in, int32_t partition)
{
    if ((unsigned)in >= NF_INPUT__COUNT || partition < 0 || partition >= NF_EPOCH_MAX_PARTITIONS)
        return -1;
    return atomic_load_explicit(&ep->offsets[in][partition], memory_order_relaxed);
}

static double restore_remaining(void *arg)
{
    const nf_epoch_t *ep = arg;
    if (!atomic_load(&ep->restore.running))
        return 0;
    uint64_t t = atomic_load(&ep->restore.total), a = atomic_load(&ep->restore.applied);
    return t > a ? (double)(t - a) : 0;
}

static double epoch_interval_seconds(void *arg)
{
    const nf_epoch_t *ep = arg;
    return ep->o.interval_ms / 1000.0;
}

static double seconds_since_commit(void *arg)
{
    return nf_epoch_seconds_since_commit(arg);
}

nf_epoch_t *nf_epoch_new(nf_runtime_t *rt, nf_store_t *st, nf_sink_t *tee, const nf_epoch_opts_t *o,
                         char *err, size_t errlen)
{
    nf_epoch_t *ep = calloc(1, sizeof *ep);
    if (!ep) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ep->rt = rt;
    ep->st = st;
    if (st)
        nf_store_set_fault_hook(st, fault_at); /* "mid_apply" */
    ep->tee = tee;
    ep->o = *o;
    ep->nshards = nf_runtime_shard_count(rt);
    ep->shards = calloc(ep->nshards, sizeof *ep->shards);
    ep->batches = calloc(ep->nshards, sizeof *ep->batches);
    if (!ep->shards || !ep->batches) {
        snprintf(err, errlen, "out of memory");
        nf_epoch_free(ep);
        return NULL;
    }
    for (int i = 0; i < NF_INPUT__COUNT; i++)
        for (int p = 0; p < NF_EPOCH_MAX_PARTITIONS; p++) {
            atomic_init(&ep->offsets[i][p], -1);
            ep->committed_offsets[i][p] = -1;
        }
    nf_jw_init(&ep->jw);
    const char *f = getenv("NF_FAULT");
    if (f && *f) {
        if (fault_parse(f) != 0) {
            snprintf(err, errlen,
                     "NF_FAULT=\"%s\": expected POINT:EPOCH[:stall=MS|:until=PATH|:poll_until="
                     "PATH], EPOCH a number, * or +N (e.g. after_pending:3, "
                     "before_commit:8:stall=5000 or before_close:+2:until=/tmp/go)",
                     f);
            nf_epoch_free(ep);
            return NULL;
        }
        nf_log(NF_LOG_WARN, "epoch", "fault injection armed", NF_LS("point", g_fault_point),
               NF_LI("epoch", g_fault_epoch == UINT64_MAX ? -1 : (int64_t)g_fault_epoch),
               NF_LI("stall_ms", g_fault_stall_ms), NF_LS("until", g_fault_until), NF_LEND);
    }
    const char *fs = getenv("NF_TEST_FORCE_SCAN");
    ep->force_scan = fs && *fs && strcmp(fs, "0") != 0;
    ep->last_commit_at_ns = nf_now_ns();
    nf_metrics_histogram("newsflow_epoch_pause_seconds",
                         "Processing pause of an epoch cut (pause, drain, snapshot, resume).", NULL,
                         nf_metrics_latency_bounds, nf_metrics_latency_nbounds, &ep->m_pause);
    nf_metrics_histogram("newsflow_epoch_snapshot_write_seconds",
                         "After a cut, until the shards have written the state it froze into "
                         "the epoch's batches (between their messages: processing goes on); "
                         "part of the commit's time.",
                         NULL, nf_metrics_latency_bounds, nf_metrics_latency_nbounds, &ep->m_write);
    nf_metrics_histogram("newsflow_epoch_commit_seconds",
                         "Epoch commit: pending write, Kafka transaction, apply.", NULL,
                         nf_metrics_latency_bounds, nf_metrics_latency_nbounds, &ep->m_commit);
    nf_metrics_counter("newsflow_epoch_drain_rounds_total",
                       "Rounds of an epoch cut's drain (ask every shard, then check that no "
                       "message is in flight): one per cut when the shards settle at once; many "
                       "per cut means something keeps a shard busy while its inputs are paused.",
                       NULL, 0, &ep->m_drain_rounds);
    nf_metrics_counter("newsflow_epochs_committed_total", "Epochs committed.", NULL, 0,
                       &ep->m_epochs);
    nf_metrics_counter("newsflow_epoch_failures_total",
                       "Epoch commit attempts that failed (retried or fatal).", NULL, 0,
                       &ep->m_failures);
    nf_metrics_counter("newsflow_epoch_outputs_total", "Output records committed.", NULL, 0,
                       &ep->m_outputs);
    nf_metrics_counter("newsflow_rebalance_failures_total",
                       "Rebalances this process could not complete (gained partitions whose state "
                       "or positions could not be restored, revoked ones the shards did not let "
                       "go); each stops the job.",
                       NULL, 0, &ep->m_rebalance_failures);
    nf_metrics_counter("newsflow_state_behind_group_partitions_total",
                       "Input partitions where the consumer group's committed offset stood "
                       "further than the state's position (state.dir empty, lost, older or "
                       "another job's): the start refused, or --reset / --from-checkpoint chose.",
                       NULL, 0, &ep->m_guard_behind);
    nf_metrics_counter("newsflow_checkpoints_total", "Named checkpoints taken.", NULL, 0,
                       &ep->m_checkpoints);
    nf_metrics_counter("newsflow_epoch_early_total",
                       "Epochs started early because keyed state crossed its memory budget.", NULL,
                       0, &ep->m_early);
    nf_metrics_counter("newsflow_epoch_state_ingested_records_total",
                       "State records of committed epochs that went into the store as table "
                       "files, ingested (a kind with at least state.ingest_min_bytes of writes in "
                       "the epoch), rather than through RocksDB's memtable.",
                       NULL, 0, &ep->m_ingested);
    nf_metrics_counter("newsflow_epoch_recovered_records_total",
                       "Records of a pending epoch produced again at start (roll forward).", NULL,
                       0, &ep->m_recovered);
    nf_metrics_gauge("newsflow_epoch", "Last committed epoch.", NULL, 0, &ep->m_epoch);
    nf_metrics_counter("newsflow_changelog_records_total",
                       "State writes appended to the changelog topics (state.changelog), "
                       "committed with their epochs.",
                       NULL, 0, &ep->m_cl_records);
    nf_metrics_counter("newsflow_changelog_bytes_total",
                       "Key and value bytes of those changelog records.", NULL, 0, &ep->m_cl_bytes);
    nf_metrics_counter("newsflow_restore_records_total",
                       "Changelog records applied to the state directory by restores at start.",
                       NULL, 0, &ep->m_restored);
    nf_metrics_gauge_fn("newsflow_restore_remaining_records",
                        "Changelog records the restore in progress has still to apply (0 when "
                        "none runs).",
                        NULL, restore_remaining, ep);
    nf_metrics_gauge("newsflow_restore_seconds", "Duration of the last changelog restore, s.", NULL,
                     0, &ep->m_restore_seconds);
    nf_metrics_gauge_fn("newsflow_epoch_interval_seconds",
                        "The configured epoch interval (epoch.interval_ms), s: alert rules "
                        "compare newsflow_epoch_seconds_since_commit with it.",
                        NULL, epoch_interval_seconds, ep);
    nf_metrics_gauge_fn("newsflow_epoch_seconds_since_commit",
                        "Seconds since the last epoch committed (or since start): grows while "
                        "Kafka or the state cannot take a commit.",
                        NULL, seconds_since_commit, ep);
    return ep;
}

void nf_epoch_free(nf_epoch_t *ep)
{
    if (!ep)
        return;
    for (unsigned s = 0; ep->shards && s < ep->nshards; s++) {
        nf_outbuf_free(&ep->shards[s].out);
        nf_outbuf_free(&ep->shards[s].taken);
    }
    nf_outbuf_free(&ep->changelog);
    for (unsigned s = 0; ep->batches && s < ep->nshards; s++)
        if (ep->batches[s])
            nf_store_batch_free(ep->batches[s]);
    nf_jw_free(&ep->jw);
    free(ep->shards);
    free(ep->batches);
    free(ep);
}

/* ---------------------------------------------------------------- shard side */

int nf_epoch_participant_add(nf_epoch_t *ep, nf_shard_t *sh, const nf_epoch_participant_t *p,
                             void *self)
{
    shard_part_t *sp = &ep->shards[nf_shard_index(sh)];
    if (sp->n == MAX_PARTICIPANTS)
        return -ENOSPC;
    sp->p[sp->n] = p;
    sp->self[sp->n] = self;
    sp->n++;
    return 0;
}

int nf_epoch_emit(nf_epoch_t *ep, unsigned shard, nf_topic_t topic, const char *key, size_t klen,
                  const char *value, size_t vlen)
{
    return nf_outbuf_add(&ep->shards[shard].out, topic, key, klen, value, vlen);
}

void nf_epoch_set_offset(nf_epoch_t *ep, nf_input_t in, int32_t partition, int64_t next_offset)
{
    if (partition >= 0 && partition < NF_EPOCH_MAX_PARTITIONS)
        atomic_store_explicit(&ep->offsets[in][partition], next_offset, memory_order_relaxed);
}

/* ---------------------------------------------------------------- the cut */

static void call_pause(nf_shard_t *sh, void *arg)
{
    shard_part_t *sp = &((nf_epoch_t *)arg)->shards[nf_shard_index(sh)];
    for (unsigned i = 0; i < sp->n; i++)
        if (sp->p[i]->pause)
            sp->p[i]->pause(sh, sp->self[i]);
}

static void call_busy(nf_shard_t *sh, void *arg)
{
    shard_part_t *sp = &((nf_epoch_t *)arg)->shards[nf_shard_index(sh)];
    sp->busy = false;
    for (unsigned i = 0; i < sp->n && !sp->busy; i++)
        if (sp->p[i]->busy)
            sp->busy = sp->p[i]->busy(sh, sp->self[i]);
}

static void call_snapshot(nf_shard_t *sh, void *arg)
{
    nf_epoch_t *ep = arg;
    unsigned s = nf_shard_index(sh);
    shard_part_t *sp = &ep->shards[s];
    uint64_t e = atomic_load(&ep->cur_epoch);
    for (unsigned i = 0; i < sp->n; i++) /* the batch is NULL for memory-only state */
        sp->p[i]->snapshot(sh, sp->self[i], ep->batches[s], e);
    /* Hand the epoch's outputs over; the shard continues into the (empty) spare buffer. */
    nf_outbuf_t t = sp->taken;
    sp->taken = sp->out;
    nf_outbuf_reset(&t);
    sp->out = t;
}

/* Entries a participant writes per call after the cut (snapshot_more): a few milliseconds of a
 * shard's time, between its other messages. */
#define WRITE_SLICE 16384

static void call_snapshot_more(nf_shard_t *sh, void *arg)
{
    shard_part_t *sp = &((nf_epoch_t *)arg)->shards[nf_shard_index(sh)];
    sp->writing = false;
    for (unsigned i = 0; i < sp->n; i++)
        if (sp->p[i]->snapshot_more && !sp->p[i]->snapshot_more(sh, sp->self[i], WRITE_SLICE))
            sp->writing = true;
}

static void call_resume(nf_shard_t *sh, void *arg)
{
    shard_part_t *sp = &((nf_epoch_t *)arg)->shards[nf_shard_index(sh)];
    for (unsigned i = 0; i < sp->n; i++)
        if (sp->p[i]->resume)
            sp->p[i]->resume(sh, sp->self[i]);
}

static void call_committed(nf_shard_t *sh, void *arg)
{
    nf_epoch_t *ep = arg;
    shard_part_t *sp = &ep->shards[nf_shard_index(sh)];
    for (unsigned i = 0; i < sp->n; i++)
        if (sp->p[i]->committed)
            sp->p[i]->committed(sh, sp->self[i], ep->epoch);
}

/* fn on every shard at once (each touches only its own shard_part_t). */
static int call_all(nf_epoch_t *ep, nf_call_fn fn, const char *what, char *err, size_t errlen)
{
    unsigned s = 0;
    int r = nf_runtime_call_all(ep->rt, fn, ep, CALL_TIMEOUT_MS, &s);
    if (r != 0)
        snprintf(err, errlen, "epoch %" PRIu64 ": %s on shard %u failed: %s",
                 atomic_load(&ep->cur_epoch), what, s, strerror(-r));
    return r;
}

static size_t collect_offsets(nf_epoch_t *ep, nf_kafka_offset_t *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < NF_INPUT__COUNT; i++)
        for (int p = 0; p < NF_EPOCH_MAX_PARTITIONS && n < cap; p++) {
            int64_t v = atomic_load_explicit(&ep->offsets[i][p], memory_order_relaxed);
            if (v >= 0)
                out[n++] = (nf_kafka_offset_t){(nf_input_t)i, p, v};
        }
    return n;
}

static bool past_deadline(const nf_epoch_t *ep)
{
    uint64_t d = atomic_load(&ep->deadline_ns);
    return d && nf_now_ns() >= d;
}

/* Stops input everywhere, waits until nothing is in flight, snapshots every shard, reads the
 * input positions the snapshot corresponds to, resumes (unless `final`). The positions must be
 * read before resuming: a record consumed after it belongs to the next epoch. */
static int cut(nf_epoch_t *ep, bool final, nf_kafka_offset_t *offs, size_t *noffs, char *err,
               size_t errlen)
{
    uint64_t t0 = nf_now_ns();
    atomic_store(&ep->step, "cutting: pausing and draining the shards");
    int r = call_all(ep, call_pause, "pause", err, errlen);
    for (unsigned spins = 0; r == 0; spins++) {
        nf_counter_inc(ep->m_drain_rounds);
        r = call_all(ep, call_busy, "drain", err, errlen);
        bool busy = false;
        for (unsigned s = 0; s < ep->nshards; s++)
            busy |= ep->shards[s].busy;
        if (r == 0 && !busy && nf_runtime_quiescent(ep->rt))
            break;
        if (r == 0 && past_deadline(ep)) { /* nothing is decided yet: the inputs are read again */
            snprintf(err, errlen,
                     "epoch %" PRIu64 ": the shards did not drain by the shutdown deadline",
                     atomic_load(&ep->cur_epoch));
            r = -ETIMEDOUT;
            break;
        }
        if (spins > 10) {
            struct timespec ts = {0, spins > 1000 ? 1000000 : 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (r == 0 && ep->batches_frozen) { /* cannot happen: an epoch that failed so is fatal */
        snprintf(err, errlen, "epoch %" PRIu64 ": the snapshot of an earlier cut was never written",
                 atomic_load(&ep->cur_epoch));
        r = -EIO;
    }
    for (unsigned s = 0; r == 0 && s < ep->nshards; s++)
        if (ep->st && !(ep->batches[s] = nf_store_batch_new()))
            r = -ENOMEM;
    ep->batches_frozen = r == 0; /* from the first shard's snapshot on (write_snapshots) */
    uint64_t t_drained = nf_now_ns();
    if (r == 0)
        r = call_all(ep, call_snapshot, "snapshot", err, errlen);
    atomic_store(&ep->last_drain_ns, t_drained - t0);
    atomic_store(&ep->last_snapshot_ns, nf_now_ns() - t_drained);
    if (r == 0)
        *noffs = collect_offsets(ep, offs, NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS);
    if (r == 0 && !final)
        r = call_all(ep, call_resume, "resume", err, errlen);
    uint64_t pause = nf_now_ns() - t0;
    atomic_store(&ep->last_pause_ns, pause);
    nf_histogram_observe(ep->m_pause, (double)pause / 1e9);
    return r;
}

/* After the cut: the shards write what their participants froze (snapshot by reference) into
 * the batches, a slice per call, processing their other messages in between; the batches are
 * whole when this returns 0. Until then a shard may write into them at any message (an entry
 * about to change): batches_frozen, and free_batches keeps them (the job fails). */
static int write_snapshots(nf_epoch_t *ep, char *err, size_t errlen)
{
    uint64_t t0 = nf_now_ns();
    atomic_store(&ep->step, "writing the cut's state into the epoch's batches");
    for (bool more = true; more;) {
        int r = call_all(ep, call_snapshot_more, "writing the snapshot", err, errlen);
        if (r != 0)
            return r; /* the batches stay frozen: free_batches keeps them */
        more = false;
        for (unsigned s = 0; s < ep->nshards; s++)
            more |= ep->shards[s].writing;
    }
    ep->batches_frozen = false; /* whole: no shard writes into them any more */
    nf_histogram_observe(ep->m_write, (double)(nf_now_ns() - t0) / 1e9);
    return 0;
}

/* ---------------------------------------------------------------- commit */

/* The pending record's header. nonce tells this epoch's transaction apart from an earlier one of
 * the same number (a restored checkpoint numbers epochs again from its own): it goes into the
 * offsets' commit metadata, which nf_kafka_epoch_outcome matches. */
static void header_json(nf_epoch_t *ep, uint64_t e, uint64_t nonce, const nf_kafka_offset_t *offs,
                        size_t noffs, uint64_t records)
{
    nf_jw_t *w = &ep->jw;
    nf_jw_reset(w);
    nf_jw_obj_open(w);
    nf_jw_key(w, "epoch");
    nf_jw_u64(w, e);
    nf_jw_key(w, "nonce");
    nf_jw_u64(w, nonce);
    nf_jw_key(w, "time_ms");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    nf_jw_i64(w, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    nf_jw_key(w, "records");
    nf_jw_u64(w, records);
    if (ep->o.changelog) { /* recovery: settled by discarding, as Kafka holds the state */
        nf_jw_key(w, "changelog");
        nf_jw_bool(w, true);
    }
    nf_jw_key(w, "offsets");
    nf_jw_obj_open(w);
    for (int i = 0; i < NF_INPUT__COUNT; i++) {
        nf_jw_key(w, nf_input_name((nf_input_t)i));
        nf_jw_obj_open(w);
        for (size_t k = 0; k < noffs; k++) {
            if (offs[k].input != (nf_input_t)i)
                continue;
            char pk[16];
            snprintf(pk, sizeof pk, "%d", offs[k].partition);
            nf_jw_key(w, pk);
            nf_jw_i64(w, offs[k].next);
        }
        nf_jw_obj_close(w);
    }
    nf_jw_obj_close(w);
    if (ep->kafka) {
        nf_jw_key(w, "positions");
        ep->kafka->positions_json(ep->kafka->arg, w);
    }
    nf_jw_obj_close(w);
}

static int parse_offsets(const cJSON *h, int64_t dst[NF_INPUT__COUNT][NF_EPOCH_MAX_PARTITIONS])
{
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(h, "offsets");
    for (int i = 0; i < NF_INPUT__COUNT; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(offs, nf_input_name((nf_input_t)i));
        const cJSON *it;
        cJSON_ArrayForEach(it, o)
        {
            long p = strtol(it->string, NULL, 10);
            if (p < 0 || p >= NF_EPOCH_MAX_PARTITIONS || !cJSON_IsNumber(it))
                return -EINVAL;
            dst[i][p] = (int64_t)it->valuedouble;
        }
    }
    return 0;
}

/* What of epoch e is in Kafka already, before (re)producing it: after a restart, after a failed
 * attempt, after the producer was replaced. On a broker that keeps transactional offset commits
 * the group's offsets answer without reading the outputs back; otherwise (the mock, another
 * writer's metadata) the outputs are scanned. 1: all of it (committed: nothing to do); 0: *present
 * marks what is there (NULL: nothing); <0: -errno with err (the scan failed). */
static int settle(nf_epoch_t *ep, uint64_t e, uint64_t nonce, uint64_t records,
                  const char *positions, const nf_kafka_offset_t *offs, size_t noffs,
                  uint8_t **present, char *err, size_t errlen)
{
    char why[200];
    nf_kafka_outcome_t oc = ep->force_scan ? NF_KAFKA_UNKNOWN
                                           : ep->kafka->epoch_outcome(ep->kafka->arg, e, nonce,
                                                                      offs, noffs, why, sizeof why);
    if (ep->force_scan)
        snprintf(why, sizeof why, "NF_TEST_FORCE_SCAN is set");
    nf_log(NF_LOG_INFO, "epoch", "pending epoch: outcome from the committed offsets",
           NF_LI("epoch", e),
           NF_LS("outcome", oc == NF_KAFKA_COMMITTED       ? "committed"
                            : oc == NF_KAFKA_NOT_COMMITTED ? "not committed"
                                                           : "unknown: reading the outputs back"),
           NF_LS("why", why), NF_LEND);
    uint64_t found = 0;
    if (oc == NF_KAFKA_COMMITTED) {
        found = records;
    } else if (oc == NF_KAFKA_NOT_COMMITTED) {
        free(*present); /* the transaction was aborted: none of its records count */
        *present = NULL;
    } else {
        if (!*present && !(*present = calloc(records / 8 + 1, 1)))
            return -ENOMEM;
        memset(*present, 0, records / 8 + 1);
        long n = ep->kafka->scan_epoch(ep->kafka->arg, e, nonce, positions, *present, records, err,
                                       errlen);
        if (n < 0)
            return (int)n;
        found = (uint64_t)n;
    }
    /* found: how many of the epoch's records Kafka already holds; the rest is produced now */
    nf_log(NF_LOG_INFO, "epoch", "pending epoch: its outputs counted in Kafka", NF_LI("epoch", e),
           NF_LI("records", records), NF_LI("found", found), NF_LI("to_produce", records - found),
           NF_LS("by", oc == NF_KAFKA_UNKNOWN ? "scan" : "offsets"), NF_LEND);
    atomic_fetch_add(&ep->recovered_records, records - found);
    nf_counter_add(ep->m_recovered, records - found);
    return oc == NF_KAFKA_COMMITTED;
}

static int deadline_err(uint64_t e, char *err, size_t errlen)
{
    snprintf(err, errlen, "epoch %" PRIu64 ": not committed by the shutdown deadline", e);
    return -ETIMEDOUT;
}

/* Produces an epoch's records to Kafka in a transaction. Retries settle what is in Kafka first
 * and produce the rest; a producer stuck in a fatal error (not fencing) is replaced, which
 * settles its transaction. 0, or -errno once retrying is hopeless (-ESTALE: fenced). */
static int produce(nf_epoch_t *ep, uint64_t e, uint64_t nonce, const nf_blob_t *bufs,
                   unsigned nbufs, uint64_t records, const char *positions,
                   const nf_kafka_offset_t *offs, size_t noffs, bool recovering, char *err,
                   size_t errlen)
{
    uint8_t *present = NULL;
    int r = 0;
    for (unsigned attempt = 0; attempt < COMMIT_ATTEMPTS; attempt++) {
        if (past_deadline(ep)) {
            if (attempt > 0) /* else err is not set yet */
                r = -ETIMEDOUT;
            else
                r = deadline_err(e, err, errlen);
            break;
        }
        if (recovering || attempt > 0) {
            r = settle(ep, e, nonce, records, positions, offs, noffs, &present, err, errlen);
            if (r == 1) {
                r = 0;
                break;
            }
            if (r < 0) {
                nf_log(NF_LOG_WARN, "epoch", "recovery scan failed; retrying", NF_LI("epoch", e),
                       NF_LS("error", err), NF_LEND);
                if (r == -ENOMEM)
                    break;
                sleep(1);
                continue;
            }
        }
        r = ep->kafka->produce_epoch(ep->kafka->arg, e, nonce, bufs, nbufs, present, offs, noffs,
                                     err, errlen);
        if (r == 0 || r == -ESTALE || r == -EOWNERDEAD) /* fenced, or evicted from the group */
            break;
        if (past_deadline(ep)) {
            r = -ETIMEDOUT;
            break;
        }
        nf_counter_inc(ep->m_failures);
        atomic_fetch_add(&ep->failures, 1);
        if (r == -EPIPE) {
            char rerr[256];
            if (ep->kafka->reset_producer(ep->kafka->arg, rerr, sizeof rerr) != 0) {
                nf_log(NF_LOG_ERROR, "epoch", "the Kafka producer failed and cannot be replaced",
                       NF_LI("epoch", e), NF_LS("error", err), NF_LS("replace_error", rerr),
                       NF_LEND);
                break;
            }
            nf_log(NF_LOG_WARN, "epoch",
                   "the Kafka producer hit a fatal error; replaced it (init_transactions settles "
                   "its transaction) and retrying the epoch",
                   NF_LI("epoch", e), NF_LS("error", err), NF_LEND);
            continue;
        }
        nf_log(NF_LOG_WARN, "epoch", "epoch commit to Kafka failed; retrying", NF_LI("epoch", e),
               NF_LI("attempt", attempt + 1), NF_LS("error", err), NF_LEND);
        struct timespec ts = {attempt < 3 ? 0 : 1, attempt < 3 ? 200000000 : 0};
        nanosleep(&ts, NULL);
    }
    free(present);
    return r;
}

static void tee_outputs(nf_epoch_t *ep, const nf_blob_t *bufs, unsigned nbufs)
{
    if (!ep->tee)
        return;
    char key[512];
    for (unsigned b = 0; b < nbufs; b++) {
        size_t pos = 0;
        nf_outrec_t r;
        while (nf_outbuf_next(bufs[b].data, bufs[b].len, &pos, &r) == 1) {
            if (nf_topic_is_changelog(r.topic))
                continue; /* state, not an output */
            size_t kl = r.klen < sizeof key - 1 ? r.klen : sizeof key - 1;
            memcpy(key, r.key, kl);
            key[kl] = 0;
            nf_sink_emit(ep->tee, 0, r.topic, key, r.value, r.vlen);
        }
    }
    if (nf_sink_flush(ep->tee, 0) != 0)
        nf_log(NF_LOG_WARN, "sink", "tee write failed; records kept for the next attempt", NF_LEND);
}

/* final: the last epoch of a clean stop, which takes a named checkpoint with checkpoint.on_stop
 * (a short run then leaves one: RocksDB checkpoints are hard links, cheap at a stop). */
/* The store as of epoch e becomes what queries read (store.h, "committed views"). Without one,
 * queries keep answering from the previous epoch's view, which stays true, only older. */
static void publish_view(nf_epoch_t *ep, uint64_t e)
{
    if (ep->st && nf_store_view_publish(ep->st, e) != 0)
        nf_log(NF_LOG_WARN, "epoch",
               "no memory for the committed view: queries show an older epoch", NF_LI("epoch", e),
               NF_LEND);
}

/* The pending record applied: its large kinds' table files, written before it, are ingested
 * (store_pending.c, "State written once"). */
static int apply_and_checkpoint(nf_epoch_t *ep, uint64_t e, bool final, char *err, size_t errlen)
{
    int r = 0;
    size_t ingested = 0;
    if (ep->st)
        r = nf_store_pending_apply_epoch(ep->st, e, &ingested, err, errlen);
    if (r != 0) {
        atomic_store(&ep->unapplied, e);
        return r;
    }
    nf_counter_add(ep->m_ingested, ingested);
    fault_at("after_apply");
    ep->epoch = e;
    atomic_store(&ep->epoch_pub, e);
    nf_gauge_set(ep->m_epoch, (int64_t)e);
    atomic_store(&ep->last_commit_at_ns, nf_now_ns());
    publish_view(ep, e); /* after epoch_pub: no answer names an epoch /v1/status does not yet */
    /* At a clean stop only if something was committed since the last named checkpoint: restarts
     * without traffic do not push the periodic checkpoints out of checkpoint.retain_count. */
    if (ep->st && ep->o.retain_every &&
        (e % ep->o.retain_every == 0 ||
         (final && ep->o.checkpoint_on_stop && ep->records_since_named > 0))) {
        char hash[24];
        snprintf(hash, sizeof hash, "%016" PRIx64, ep->o.config_hash);
        fault_at("mid_checkpoint");
        if ((r = nf_store_checkpoint(ep->st, e, hash, ep->nshards, err, errlen)) == -ENOSPC &&
            !final) {
            /* The state's file system is full: the next epoch's writes would fail too (or,
             * into space RocksDB set aside, a while later). The job stops before it, with
             * this epoch committed and applied: nothing pending for the restart. */
            ep->disk_full = true;
            snprintf(ep->disk_full_err, sizeof ep->disk_full_err, "%s", err);
        } else if (r != 0) {
            /* A missed named checkpoint is not a lost epoch: the live state is committed. */
            nf_log(NF_LOG_ERROR, "checkpoint", "named checkpoint failed", NF_LI("epoch", e),
                   NF_LS("error", err), NF_LEND);
        } else {
            nf_counter_inc(ep->m_checkpoints);
            atomic_fetch_add(&ep->checkpoints, 1);
            ep->records_since_named = 0;
            int pruned = nf_store_checkpoint_prune(nf_store_state_dir(ep->st), ep->o.retain_count);
            nf_log(NF_LOG_INFO, "checkpoint", "checkpoint.created", NF_LI("epoch", e),
                   NF_LI("pruned", pruned > 0 ? pruned : 0), NF_LEND);
        }
    }
    return 0;
}

/* A failed job (nf_runtime_fail) commits nothing more: the actor that failed did so while
 * handling an input it could not apply, and that input's position is in this epoch (the
 * failure was set before the actor's shard took the cut), so committing would lose it. The
 * epoch is dropped (no transaction was begun: outputs go to Kafka only in produce) and its
 * inputs are read again after a restart. -ECANCELED. */
static int job_failed(nf_epoch_t *ep, uint64_t e, char *err, size_t errlen)
{
    if (!nf_runtime_failed(ep->rt))
        return 0;
    snprintf(err, errlen,
             "epoch %" PRIu64 " not committed: the job failed (see the error before this one); "
             "its inputs are read again after a restart",
             e);
    return -ECANCELED;
}

/* After an epoch with changelog records committed: the producer's positions are now past this
 * process's own changelog records, which are applied; a restore starts there (changelog.h). A
 * failure to record it costs a longer restore, nothing else. */
static void save_synced(nf_epoch_t *ep)
{
    nf_jw_t pw;
    nf_jw_init(&pw);
    ep->kafka->positions_json(ep->kafka->arg, &pw);
    char err[256] = "out of memory";
    /* In a group, the partitions of each input that are assigned here (positioned). */
    bool *own = NULL;
    const bool *owned[NF_INPUT__COUNT] = {NULL};
    if (ep->o.group &&
        (own = calloc((size_t)NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS, sizeof *own)) != NULL)
        for (int in = 0; in < NF_INPUT__COUNT; in++) {
            owned[in] = own + (size_t)in * NF_EPOCH_MAX_PARTITIONS;
            for (int p = 0; p < NF_EPOCH_MAX_PARTITIONS; p++)
                own[(size_t)in * NF_EPOCH_MAX_PARTITIONS + (size_t)p] =
                    atomic_load(&ep->offsets[in][p]) >= 0;
        }
    bool merger = atomic_load(&ep->offsets[NF_INPUT_TRENDING_PANES][0]) >= 0;
    if (pw.failed || (ep->o.group && !own) ||
        nf_changelog_save_synced(ep->st, pw.buf, ep->o.group ? owned : NULL, merger, err,
                                 sizeof err) != 0)
        nf_log(NF_LOG_WARN, "changelog",
               "cannot record the changelog offsets reached; the next restore reads from older "
               "ones",
               NF_LS("error", err), NF_LEND);
    free(own);
    nf_jw_free(&pw);
}

/* Frees the epoch's batches, unless a participant may still write into them (a snapshot by
 * reference not written whole: the cut or the write failed, or the job failed meanwhile, and
 * the shards still run their queued messages): those stay until nf_epoch_free, after the
 * shards stopped; no epoch is cut after that (the job fails). */
static void free_batches(nf_epoch_t *ep)
{
    for (unsigned s = 0; s < ep->nshards && !ep->batches_frozen; s++) {
        nf_store_batch_free(ep->batches[s]);
        ep->batches[s] = NULL;
    }
}

/* The epoch's trace (runtime/trace.h, nf_trace_epoch: the ids articles' commit spans link to):
 * the root from the cut's pause to the end of the apply, a span per step. steps: monotonic ns of
 * the pause's start, then of the end of the pause, the snapshot writes, the pending record and
 * the Kafka transaction (0: the step before failed and this one was not reached). Sampled by
 * the head ratio; always when it failed or was slow. */
static void epoch_trace(uint64_t e, const uint64_t steps[5], uint64_t records, const char *failed)
{
    static const char *const names[] = {"epoch.cut", "epoch.write", "epoch.pending",
                                        "epoch.kafka_transaction", "epoch.apply"};
    uint64_t end = nf_now_ns();
    int64_t off = nf_trace_now_ns() - (int64_t)end; /* monotonic -> wall clock */
    nf_trace_ctx_t ctx = nf_trace_epoch(e);
    bool force = failed || nf_trace_slow((int64_t)(end - steps[0]));
    nf_span_t sp;
    nf_span_at(&sp, "epoch", &ctx, 0, (int64_t)steps[0] + off, NF_SPAN_INTERNAL);
    sp.end_ns = (int64_t)end + off;
    nf_span_int(&sp, "newsflow.epoch", (int64_t)e);
    nf_span_int(&sp, "newsflow.records", (int64_t)records);
    nf_span_end(&sp, failed);
    nf_span_export(&sp, force);
    for (int i = 0; i < 5; i++) {
        uint64_t to = i < 4 ? steps[i + 1] : end;
        bool here = failed && (!to || i == 4); /* the step that failed: it ran until the end */
        nf_span_child(&sp, names[i], &ctx, NF_SPAN_INTERNAL);
        sp.start_ns = (int64_t)steps[i] + off;
        sp.end_ns = (int64_t)(here || !to ? end : to > steps[i] ? to : steps[i]) + off;
        nf_span_end(&sp, here ? failed : NULL);
        nf_span_export(&sp, force);
        if (here)
            break; /* the steps after it did not run */
    }
}

/* One epoch: cut, then commit. */
static int run_epoch(nf_epoch_t *ep, bool final, char *err, size_t errlen)
{
    uint64_t e = ep->epoch + 1;
    atomic_store(&ep->cur_epoch, e);
    atomic_store(&g_current_epoch, e);
    /* one output buffer per shard, and the changelog's after them */
    nf_blob_t *bufs = calloc(ep->nshards + 1, sizeof *bufs);
    nf_kafka_offset_t *offs = calloc(NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS, sizeof *offs);
    if (!bufs || !offs) {
        free(bufs);
        free(offs);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    size_t noffs = 0;
    int r = job_failed(ep, e, err, errlen);
    if (r == 0) {
        r = cut(ep, final, offs, &noffs, err, errlen);
        int f = job_failed(ep, e, err, errlen); /* also what a cut that failed with it means */
        r = f ? f : r;
    }
    if (r != 0) {
        free_batches(ep);
        free(bufs);
        free(offs);
        return r;
    }
    uint64_t t0 = nf_now_ns();
    if ((r = write_snapshots(ep, err, errlen)) != 0) {
        free_batches(ep); /* kept: frozen */
        free(bufs);
        free(offs);
        return r;
    }
    fault_at("after_cut");
    uint64_t t_cut = nf_now_ns(), t_pend = 0, t_prod = 0; /* the steps' ends (0: not reached) */
    uint64_t records = 0;
    unsigned nbufs = ep->nshards;
    for (unsigned s = 0; s < ep->nshards; s++) {
        bufs[s] = (nf_blob_t){ep->shards[s].taken.data, ep->shards[s].taken.len};
        records += ep->shards[s].taken.count;
    }
    /* The changelog records go in the same pending record and transaction as the outputs
     * (numbered after them), so that state and its changelog commit or not together. */
    nf_outbuf_reset(&ep->changelog);
    for (unsigned s = 0; ep->o.changelog && ep->st && s < ep->nshards && r == 0; s++)
        if ((r = nf_changelog_from_batch(&ep->changelog, ep->batches[s])) != 0)
            snprintf(err, errlen, "epoch %" PRIu64 ": changelog records of shard %u: %s", e, s,
                     strerror(-r));
    if (r != 0) {
        free_batches(ep);
        free(bufs);
        free(offs);
        return r;
    }
    uint64_t cl_records = ep->changelog.count;
    if (ep->o.changelog && ep->st) {
        bufs[nbufs++] = (nf_blob_t){ep->changelog.data, ep->changelog.len};
        records += cl_records;
    }
    uint64_t nonce = 0;
    while (!nonce && getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
        ;
    nonce &= (1ull << 53) - 1; /* read back through cJSON's double */
    if (!nonce)
        nonce = 1;
    header_json(ep, e, nonce, offs, noffs, records);
    atomic_store(&g_current_records, records);
    atomic_store(&ep->step, "writing the pending record (synced)");
    if (ep->st) {
        r = nf_store_pending_write(ep->st, e, ep->jw.buf, ep->batches, ep->nshards, bufs, nbufs,
                                   err, errlen);
        free_batches(ep); /* the record (and its table files) hold the state now */
    }
    if (r == 0)
        r = job_failed(ep, e, err, errlen); /* a failure while the pending batch was written */
    if (r == 0) {
        fault_at("after_pending");
        t_pend = nf_now_ns();
        atomic_store(&ep->step, "producing the outputs and committing the Kafka transaction");
        if (ep->kafka) {
            /* a retry scans the outputs from where they stood at the cut, not from offset 0 */
            nf_jw_t pw;
            nf_jw_init(&pw);
            ep->kafka->positions_json(ep->kafka->arg, &pw);
            r = produce(ep, e, nonce, bufs, nbufs, records, pw.failed ? NULL : pw.buf, offs, noffs,
                        false, err, errlen);
            nf_jw_free(&pw);
        }
    }
    if (r == 0) {
        fault_at("after_commit");
        t_prod = nf_now_ns();
        atomic_store(&ep->step, "applying the epoch to the store (and any named checkpoint)");
        ep->records_since_named += records;
        r = apply_and_checkpoint(ep, e, final, err, errlen);
    }
    free_batches(ep);
    if (r == 0 && cl_records && ep->kafka)
        save_synced(ep);
    if (r == 0) {
        for (size_t i = 0; i < noffs; i++)
            ep->committed_offsets[offs[i].input][offs[i].partition] = offs[i].next;
        call_all(ep, call_committed, "committed", err, errlen);
        tee_outputs(ep, bufs, ep->nshards);
        uint64_t dt = nf_now_ns() - t0;
        atomic_store(&ep->last_commit_ns, dt);
        nf_histogram_observe(ep->m_commit, (double)dt / 1e9);
        nf_counter_inc(ep->m_epochs);
        nf_counter_add(ep->m_outputs, records - cl_records);
        nf_counter_add(ep->m_cl_records, cl_records);
        nf_counter_add(ep->m_cl_bytes, ep->changelog.len - 9ull * cl_records);
        atomic_fetch_add(&ep->committed, 1);
        atomic_fetch_add(&ep->outputs, records - cl_records);
        nf_log(records || final ? NF_LOG_INFO : NF_LOG_DEBUG, "epoch", "epoch.committed",
               NF_LI("epoch", e), NF_LI("records", records - cl_records),
               NF_LI("changelog_records", cl_records),
               NF_LF("pause_ms", (double)atomic_load(&ep->last_pause_ns) / 1e6),
               NF_LF("drain_ms", (double)atomic_load(&ep->last_drain_ns) / 1e6),
               NF_LF("snapshot_ms", (double)atomic_load(&ep->last_snapshot_ns) / 1e6),
               NF_LF("commit_ms", (double)dt / 1e6), NF_LF("write_ms", (double)(t_cut - t0) / 1e6),
               NF_LF("pending_ms", (double)(t_pend - t_cut) / 1e6),
               NF_LF("produce_ms", (double)(t_prod - t_pend) / 1e6),
               NF_LF("apply_ms", (double)(nf_now_ns() - t_prod) / 1e6), NF_LEND);
    }
    if (nf_trace_on()) {
        uint64_t steps[5] = {t0 - atomic_load(&ep->last_pause_ns), t0, t_cut, t_pend, t_prod};
        epoch_trace(e, steps, records - cl_records, r != 0 ? err : NULL);
    }
    atomic_store(&ep->step, "between epochs");
    free(bufs);
    free(offs);
    return r;
}

/* ---------------------------------------------------------------- recovery */

int nf_epoch_recover(nf_epoch_t *ep, char *err, size_t errlen)
{
    if (!ep->st)
        return 0;
    nf_store_pending_t p;
    int r = nf_store_pending_read(ep->st, &p, err, errlen);
    if (r < 0)
        return r;
    bool pending_cl = false;
    if (r == 1) {
        cJSON *h = cJSON_Parse(p.header_json);
        pending_cl = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "changelog"));
        cJSON_Delete(h);
    }
    if (r == 1 && pending_cl && !ep->o.changelog) {
        snprintf(err, errlen,
                 "state: pending epoch %" PRIu64 " was written with state.changelog=true; start "
                 "once more with it (the start settles the epoch), then turn it off",
                 p.epoch);
        nf_store_pending_free(&p);
        return -EINVAL;
    }
    if (r == 1 && pending_cl && ep->kafka) {
        /* With changelogs, Kafka holds the state: the epoch's transaction either committed (its
         * changelog records and input offsets are in Kafka, and the restore that follows
         * brings them here) or it did not (init_transactions aborted it, and whoever owns its
         * partitions now reads their input again from the committed offsets). Rolling it
         * forward instead could commit inputs that another process has taken over since. */
        nf_log(NF_LOG_WARN, "epoch",
               "pending epoch found at start: discarded (state.changelog: the changelog "
               "restore brings what of it committed)",
               NF_LI("epoch", p.epoch), NF_LEND);
        nf_store_pending_free(&p);
        if ((r = nf_store_pending_discard(ep->st, err, errlen)) != 0)
            return r;
        atomic_fetch_add(&ep->discarded_epochs, 1);
        r = 0;
    }
    if (r == 1) {
        cJSON *h = cJSON_Parse(p.header_json);
        const cJSON *rec = cJSON_GetObjectItemCaseSensitive(h, "records");
        uint64_t records = cJSON_IsNumber(rec) ? (uint64_t)rec->valuedouble : 0;
        nf_log(NF_LOG_WARN, "epoch", "pending epoch found at start: rolling it forward",
               NF_LI("epoch", p.epoch), NF_LI("records", records), NF_LEND);
        uint64_t t0 = nf_now_ns();
        int64_t(*offs_tab)[NF_EPOCH_MAX_PARTITIONS] = calloc(NF_INPUT__COUNT, sizeof *offs_tab);
        nf_kafka_offset_t *offs = calloc(NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS, sizeof *offs);
        size_t noffs = 0;
        if (!h || !offs_tab || !offs) {
            snprintf(err, errlen, "state: pending epoch %" PRIu64 " has an unreadable header",
                     p.epoch);
            r = -EINVAL;
        } else {
            for (int i = 0; i < NF_INPUT__COUNT; i++)
                for (int q = 0; q < NF_EPOCH_MAX_PARTITIONS; q++)
                    offs_tab[i][q] = -1;
            r = parse_offsets(h, offs_tab);
            for (int i = 0; i < NF_INPUT__COUNT; i++)
                for (int q = 0; q < NF_EPOCH_MAX_PARTITIONS; q++)
                    if (offs_tab[i][q] >= 0)
                        offs[noffs++] = (nf_kafka_offset_t){(nf_input_t)i, q, offs_tab[i][q]};
            if (r != 0)
                snprintf(err, errlen, "state: pending epoch %" PRIu64 ": bad offsets", p.epoch);
        }
        atomic_store(&g_current_epoch, p.epoch);
        atomic_store(&g_current_records, records);
        if (r == 0 && ep->kafka) {
            char *positions = NULL;
            const cJSON *pos = cJSON_GetObjectItemCaseSensitive(h, "positions");
            if (pos)
                positions = cJSON_PrintUnformatted(pos);
            const cJSON *nj = cJSON_GetObjectItemCaseSensitive(h, "nonce");
            uint64_t nonce = cJSON_IsNumber(nj) ? (uint64_t)nj->valuedouble : 0;
            r = produce(ep, p.epoch, nonce, p.outputs, p.noutputs, records, positions, offs, noffs,
                        true, err, errlen);
            free(positions);
        }
        if (r == 0)
            r = apply_and_checkpoint(ep, p.epoch, false, err, errlen);
        if (r == 0) { /* else it stays pending: the next start rolls it forward (and tees it) */
            tee_outputs(ep, p.outputs, p.noutputs);
            if (ep->o.changelog && ep->kafka)
                save_synced(ep);
            atomic_fetch_add(&ep->recovered_epochs, 1);
            nf_log(NF_LOG_INFO, "epoch", "pending epoch rolled forward", NF_LI("epoch", p.epoch),
                   NF_LI("records", records), NF_LF("ms", (double)(nf_now_ns() - t0) / 1e6),
                   NF_LEND);
        }
        cJSON_Delete(h);
        free(offs_tab);
        free(offs);
        nf_store_pending_free(&p);
        if (r != 0)
            return r;
    }
    uint64_t e = 0;
    char *hj = NULL;
    if (nf_store_committed(ep->st, &e, &hj, err, errlen) != 0)
        return -EIO;
    ep->epoch = e;
    atomic_store(&ep->epoch_pub, e);
    nf_gauge_set(ep->m_epoch, (int64_t)e);
    if (hj) {
        cJSON *h = cJSON_Parse(hj);
        if (!h || parse_offsets(h, ep->committed_offsets) != 0) {
            snprintf(err, errlen, "state: committed epoch %" PRIu64 " has an unreadable header", e);
            cJSON_Delete(h);
            free(hj);
            return -EINVAL;
        }
        cJSON_Delete(h);
        free(hj);
    }
    /* Epochs carry the positions of the partitions this process is assigned only: each is set
     * when the partition is positioned (nf_epoch_position_cb) and as its records are taken. */
    for (int i = 0; i < NF_INPUT__COUNT; i++)
        for (int q = 0; q < NF_EPOCH_MAX_PARTITIONS; q++)
            atomic_store(&ep->offsets[i][q], -1);
    nf_log(NF_LOG_INFO, "epoch", "state restored", NF_LI("epoch", e), NF_LEND);
    return 0;
}

int64_t nf_epoch_committed_offset(const nf_epoch_t *ep, nf_input_t in, int32_t partition)
{
    if (partition < 0 || partition >= NF_EPOCH_MAX_PARTITIONS)
        return -1;
    return ep->committed_offsets[in][partition];
}

/* The group's committed offsets of the input partitions in only[nonly] (only NULL: of every
 * input partition) into go (cap entries), and the highest epoch their metadata names. The group
 * answers with stable offsets only: while an epoch holding the offsets of one of them is still
 * deciding (its transaction open: a process cut off or stopped between its produce and its
 * commit) it waits, up to transaction.timeout.ms, after which the broker aborts that
 * transaction; each attempt lasts 30 s, so three cover it. Read before the changelog's ends,
 * they count no epoch the restore does not hold (see nf_epoch_assign_cb). */
static int read_group_offsets(nf_epoch_t *ep, const nf_kafka_offset_t *only, size_t nonly,
                              nf_kafka_offset_t *go, size_t cap, size_t *n, uint64_t *max_epoch,
                              char *err, size_t errlen)
{
    int r = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        r = ep->kafka->group_offsets(ep->kafka->arg, only, nonly, go, cap, n, max_epoch, err,
                                     errlen);
        if (r != -EIO || attempt == 2)
            break;
        nf_log(NF_LOG_WARN, "changelog", "the group's committed offsets: retrying",
               NF_LI("attempt", attempt + 1), NF_LS("error", err), NF_LEND);
    }
    return r;
}

void nf_epoch_adopt_positions(nf_epoch_t *ep, const nf_kafka_offset_t *go, size_t n,
                              uint64_t group_epoch, nf_log_level_t level)
{
    size_t moved = 0;
    for (size_t i = 0; i < n; i++) {
        if (go[i].partition < 0 || go[i].partition >= NF_EPOCH_MAX_PARTITIONS ||
            (unsigned)go[i].input >= NF_INPUT__COUNT)
            continue;
        int64_t *c = &ep->committed_offsets[go[i].input][go[i].partition];
        if (*c != go[i].next) {
            if (moved++ < 8)
                nf_log(level, "epoch", "input position taken from the consumer group",
                       NF_LS("input", nf_input_name(go[i].input)),
                       NF_LI("partition", go[i].partition), NF_LI("local", *c),
                       NF_LI("group", go[i].next), NF_LEND);
            *c = go[i].next;
        }
    }
    if (group_epoch > ep->epoch) {
        /* Epoch numbers continue after the last this writer committed, as they would have on the
         * lost state directory. */
        nf_log(NF_LOG_INFO, "epoch", "epochs continue after the group's last",
               NF_LI("local_epoch", ep->epoch), NF_LI("group_epoch", group_epoch), NF_LEND);
        ep->epoch = group_epoch;
        atomic_store(&ep->epoch_pub, group_epoch);
        nf_gauge_set(ep->m_epoch, (int64_t)group_epoch);
    }
}

/* The position guard over the partitions in only[nonly] (NULL: every input partition): see
 * nf_epoch_guard_positions. */
static int guard_positions(nf_epoch_t *ep, const nf_kafka_offset_t *only, size_t nonly, char *err,
                           size_t errlen)
{
    if (ep->o.changelog || !ep->kafka || !ep->kafka->group_offsets)
        return 0; /* a changelog restore takes the group's positions itself */
    size_t cap = NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS, n = 0, nbehind = 0;
    nf_kafka_offset_t *go = calloc(cap, sizeof *go);
    if (!go) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    uint64_t group_epoch = 0;
    char gerr[256];
    int r = read_group_offsets(ep, only, nonly, go, cap, &n, &group_epoch, gerr, sizeof gerr);
    if (r != 0) {
        snprintf(err, errlen, "the position guard: %s", gerr);
        free(go);
        return r;
    }
    char list[400] = "";
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned)go[i].input >= NF_INPUT__COUNT || go[i].partition < 0 ||
            go[i].partition >= NF_EPOCH_MAX_PARTITIONS)
            continue;
        int64_t l = ep->committed_offsets[go[i].input][go[i].partition];
        if (go[i].next <= (l < 0 ? 0 : l))
            continue;
        go[nbehind++] = go[i]; /* i >= nbehind: compacts in place */
        if (nbehind <= 4 && len < sizeof list - 1)
            len += (size_t)snprintf(list + len, sizeof list - len,
                                    "%s%s[%d]: state %" PRId64 "%s, group %" PRId64,
                                    nbehind > 1 ? "; " : "", nf_input_name(go[i].input),
                                    (int)go[i].partition, l, l < 0 ? " (none)" : "", go[i].next);
    }
    nf_counter_add(ep->m_guard_behind, nbehind);
    if (nbehind == 0) {
        free(go);
        return 0;
    }
    const char *sd = ep->o.state_dir ? ep->o.state_dir : "state.dir";
    const char *grp = ep->o.group_id ? ep->o.group_id : "?";
    if (ep->o.reset == NF_RESET_GROUP) {
        nf_log(NF_LOG_WARN, "epoch",
               "--reset=group: the state stands behind the consumer group; its positions are "
               "taken, with the state as it is (what the lost state held is gone)",
               NF_LS("state_dir", sd), NF_LS("group", grp), NF_LI("partitions", nbehind),
               NF_LS("behind", list), NF_LEND);
        nf_epoch_adopt_positions(ep, go, nbehind, group_epoch, NF_LOG_WARN);
    } else if (ep->o.reset == NF_RESET_EARLIEST || ep->o.from_checkpoint) {
        nf_log(NF_LOG_WARN, "epoch",
               ep->o.from_checkpoint
                   ? "--from-checkpoint: the inputs after the checkpoint are read again; what the "
                     "group committed after it is emitted once more"
                   : "--reset=earliest: the inputs are read again from the state's positions; "
                     "what the group committed after them is emitted once more",
               NF_LS("state_dir", sd), NF_LS("group", grp), NF_LI("partitions", nbehind),
               NF_LS("behind", list), NF_LEND);
    } else {
        snprintf(err, errlen,
                 "%s stands behind the consumer group %s in %zu input partition(s) (%s%s; the "
                 "group's last epoch of this writer: %" PRIu64 "): reading on from the state "
                 "would emit again what the group already committed. Is state.dir the right "
                 "directory? To go on, restore the state: from the changelog topics "
                 "(state.changelog=true, if the job wrote them) or a named checkpoint "
                 "(--from-checkpoint; `newsflow checkpoints list --state-dir %s`); or start over "
                 "on purpose: --reset=group (the group's positions, this state) or "
                 "--reset=earliest (everything emitted again). docs/runbooks.md \"Lost disk\"",
                 sd, grp, nbehind, list, nbehind > 4 ? "; ..." : "", group_epoch, sd);
        r = -EEXIST;
    }
    free(go);
    return r;
}

int nf_epoch_guard_positions(nf_epoch_t *ep, char *err, size_t errlen)
{
    return guard_positions(ep, NULL, 0, err, errlen);
}

bool nf_epoch_refused(const nf_epoch_t *ep)
{
    return atomic_load(&ep->refused);
}

int nf_epoch_restore_changelog(nf_epoch_t *ep, char *err, size_t errlen)
{
    if (!ep->o.changelog || !ep->st || !ep->kafka) {
        publish_view(ep, ep->epoch); /* what the store holds at start */
        return 0;
    }
    /* The group's committed offsets were committed in the very transactions whose changelog
     * records the restore applies: they, not this directory's header, say where the restored
     * state stands in the inputs. Read first (read_group_offsets). Where the group has none (a
     * broker that keeps no transactional offsets, or offsets expired), the local position
     * stays. */
    nf_kafka_offset_t *go = calloc(NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS, sizeof *go);
    if (!go) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    size_t n = 0;
    uint64_t max_epoch = 0;
    char gerr[256];
    int r = read_group_offsets(ep, NULL, 0, go, NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS, &n,
                               &max_epoch, gerr, sizeof gerr);
    if (r != 0) {
        snprintf(err, errlen, "before the changelog restore: %s", gerr);
        free(go);
        return r;
    }
    nf_changelog_stats_t cs;
    nf_log(NF_LOG_INFO, "changelog", "restoring the state from the changelog topics", NF_LEND);
    r = nf_changelog_restore(ep->st, ep->kafka, !ep->o.group, &ep->restore, &cs, err, errlen);
    if (r != 0) {
        free(go);
        return r;
    }
    nf_counter_add(ep->m_restored, cs.records);
    nf_gauge_set(ep->m_restore_seconds, (int64_t)(cs.ns / 1000000000u));
    double s = (double)cs.ns / 1e9;
    nf_log(NF_LOG_INFO, "changelog", "state restored from the changelog topics",
           NF_LI("records", cs.records), NF_LI("bytes", cs.bytes), NF_LI("puts", cs.puts),
           NF_LI("deletes", cs.deletes), NF_LI("expired", cs.expired), NF_LI("skipped", cs.skipped),
           NF_LI("partitions", cs.partitions_read), NF_LF("seconds", s),
           NF_LF("records_per_s", s > 0 ? (double)cs.records / s : 0), NF_LEND);
    nf_epoch_adopt_positions(ep, go, n, max_epoch, cs.records ? NF_LOG_INFO : NF_LOG_WARN);
    free(go);
    publish_view(ep, ep->epoch);
    return 0;
}

void nf_epoch_restore_progress(const nf_epoch_t *ep, uint64_t *applied, uint64_t *total,
                               bool *running)
{
    *applied = atomic_load(&ep->restore.applied);
    *total = atomic_load(&ep->restore.total);
    *running = atomic_load(&ep->restore.running);
}

uint64_t nf_epoch_committed_epoch(const nf_epoch_t *ep)
{
    return atomic_load(&ep->epoch_pub);
}

uint64_t nf_epoch_unapplied(const nf_epoch_t *ep)
{
    return atomic_load(&ep->unapplied);
}

/* ---------------------------------------------------------------- the coordinator thread */

/* What failed, for fail()'s log line and counters. */
typedef enum { FAILED_COMMIT, FAILED_REBALANCE } failed_t;

/* fail_as for a full state.dir: a message of its own, naming the file system. Counted as an epoch
 * failure when an epoch failed (not after a named checkpoint of a committed one). */
static void fail_disk_full(nf_epoch_t *ep, uint64_t cur, uint64_t done, const char *err)
{
    if (cur > done)
        nf_counter_inc(ep->m_failures);
    nf_store_space_t sp;
    char fs[1400] = "";
    if (nf_store_space(nf_store_state_dir(ep->st), &sp) == 0)
        nf_store_space_text(&sp, fs, sizeof fs);
    uint64_t un = atomic_load(&ep->unapplied);
    nf_log(NF_LOG_ERROR, "epoch",
           un ? "state.dir's file system is full: stopping the job; the last epoch committed but "
                "could not be applied to the state, and the next start applies it (rolls it "
                "forward). Free space, then restart (docs/runbooks.md \"Disk full on state.dir\")"
           : cur > done
               ? "state.dir's file system is full: stopping the job; this epoch was not committed "
                 "and its inputs are read again after a restart. Free space, then restart "
                 "(docs/runbooks.md \"Disk full on state.dir\")"
               : "state.dir's file system is full: stopping the job after its last epoch "
                 "(committed and applied; its named checkpoint could not be written). Free "
                 "space, then restart (docs/runbooks.md \"Disk full on state.dir\")",
           NF_LS("file_system", sp.mount), NF_LS("device", sp.device),
           NF_LI("free_bytes", (int64_t)sp.free_bytes), NF_LI("size_bytes", (int64_t)sp.size_bytes),
           NF_LS("space", fs), NF_LI("epoch", un ? un : cur),
           NF_LI("committed_epoch", un ? un : done), NF_LS("error", err), NF_LEND);
}

/* Stops the job after a failure nothing retries: the runtime fails, nothing more commits. */
static void fail_as(nf_epoch_t *ep, failed_t what, int r, const char *err)
{
    atomic_store(&ep->failed, true);
    if (r == -ESTALE)
        atomic_store(&ep->fenced, true);
    uint64_t cur = atomic_load(&ep->cur_epoch), done = atomic_load(&ep->epoch_pub);
    if (r == -ETIMEDOUT && past_deadline(ep)) {
        /* Shutdown ran out of time: what is pending stays pending, and the next start settles
         * it (recovery rolls it forward or reads its inputs again). */
        atomic_store(&ep->timed_out, true);
        nf_log(NF_LOG_ERROR, "epoch",
               what == FAILED_REBALANCE
                   ? "shutdown.timeout_ms passed while partitions were being assigned to this "
                     "process; stopping with the last epoch committed (their next owner, or the "
                     "next start, takes them from the group's committed offsets)"
                   : "shutdown.timeout_ms passed before this epoch committed; stopping with the "
                     "previous epoch committed (the next start rolls this one forward or reads "
                     "its inputs again)",
               NF_LI("epoch", cur), NF_LI("committed_epoch", done), NF_LS("error", err), NF_LEND);
    } else if (r ==
               -ECANCELED) { /* job_failed: the failure was counted and logged where it happened */
        nf_log(NF_LOG_ERROR, "epoch", "epoch.dropped", NF_LI("epoch", cur), NF_LS("error", err),
               NF_LEND);
    } else if (r == -ESTALE) {
        /* A zombie: its successor owns the transactional id (and rolls forward whatever this
         * one left pending); restarting this one would fence the successor in turn. */
        nf_counter_inc(ep->m_failures);
        nf_log(NF_LOG_ERROR, "epoch",
               "fenced by the broker: another process now runs with this transactional.id "
               "(group.instance.id); stopping without committing (restart this one only once "
               "the other has stopped, or give each process its own kafka.transactional_id; "
               "if none does, the broker ended this process's transaction after "
               "transaction.timeout.ms — it was stopped, starved or cut off that long — and a "
               "restart is safe)",
               NF_LI("epoch", cur), NF_LS("error", err), NF_LEND);
    } else if (r == -ENOSPC && ep->st) {
        fail_disk_full(ep, cur, done, err);
    } else if (r == -EEXIST) { /* the position guard refused gained partitions */
        nf_counter_inc(ep->m_rebalance_failures);
        nf_log(NF_LOG_ERROR, "epoch",
               "assigned partitions refused: the state stands behind the consumer group; "
               "stopping the job (exit 2)",
               NF_LI("committed_epoch", done), NF_LS("error", err), NF_LEND);
    } else if (what == FAILED_REBALANCE) {
        nf_counter_inc(ep->m_rebalance_failures);
        nf_log(NF_LOG_ERROR, "epoch",
               "rebalance failed; stopping the job (restart recovers: the partitions are taken "
               "from the group's committed offsets)",
               NF_LI("committed_epoch", done), NF_LS("error", err), NF_LEND);
    } else if (atomic_load(&ep->unapplied)) {
        nf_counter_inc(ep->m_failures);
        nf_log(NF_LOG_ERROR, "epoch",
               "epoch committed but not applied to the state; stopping the job (the next start "
               "applies it: rolls it forward)",
               NF_LI("epoch", atomic_load(&ep->unapplied)), NF_LS("error", err), NF_LEND);
    } else {
        nf_counter_inc(ep->m_failures);
        nf_log(NF_LOG_ERROR, "epoch", "epoch commit failed; stopping the job (restart recovers)",
               NF_LI("epoch", cur), NF_LS("error", err), NF_LEND);
    }
    nf_runtime_fail(ep->rt);
}

static void fail(nf_epoch_t *ep, int r, const char *err)
{
    /* -EOWNERDEAD: the group evicted this process while it committed (kafka.h) */
    fail_as(ep, r == -EOWNERDEAD ? FAILED_REBALANCE : FAILED_COMMIT, r, err);
}

static void *coordinator(void *arg)
{
    nf_epoch_t *ep = arg;
    char err[512];
    int r;
    if (ep->kafka && (r = ep->kafka->subscribe(ep->kafka->arg, err, sizeof err)) != 0) {
        fail(ep, r, err);
        return NULL;
    }
    ep->last_cut_ns = nf_now_ns();
    uint64_t interval = (uint64_t)ep->o.interval_ms * 1000000ull;
    while (!atomic_load(&ep->stop_requested)) {
        if (ep->disk_full) { /* apply_and_checkpoint: an epoch (or the start's) committed */
            fail(ep, -ENOSPC, ep->disk_full_err);
            return NULL;
        }
        uint64_t now = nf_now_ns();
        bool early = atomic_exchange(&ep->early, false);
        if (now - ep->last_cut_ns < interval && !early) {
            uint64_t left_ms = (interval - (now - ep->last_cut_ns)) / 1000000ull + 1;
            int wait = (int)(left_ms < 50 ? left_ms : 50);
            if (ep->kafka) {
                ep->kafka->poll(ep->kafka->arg, wait);
                if ((r = ep->kafka->fatal(ep->kafka->arg, err, sizeof err)) != 0) {
                    fail(ep, r, err);
                    return NULL;
                }
            } else {
                struct timespec ts = {0, (long)wait * 1000000L};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        if (early)
            nf_counter_inc(ep->m_early);
        ep->last_cut_ns = nf_now_ns();
        if ((r = run_epoch(ep, false, err, sizeof err)) != 0) {
            fail(ep, r, err);
            return NULL;
        }
        if (ep->kafka)
            ep->kafka->update_lag(ep->kafka->arg); /* against the positions just committed */
    }
    return NULL;
}

/* The partitions of one input a rebalance moves, for the shards' `partitions` hooks. */
typedef struct moved {
    nf_epoch_t *ep;
    nf_input_t in;
    int32_t parts[NF_EPOCH_MAX_PARTITIONS];
    size_t n;
    bool gained;
} moved_t;

static void call_partitions(nf_shard_t *sh, void *arg)
{
    moved_t *m = arg;
    shard_part_t *sp = &m->ep->shards[nf_shard_index(sh)];
    for (unsigned i = 0; i < sp->n; i++)
        if (sp->p[i]->partitions)
            sp->p[i]->partitions(sh, sp->self[i], m->in, m->parts, m->n, m->gained);
}

/* Every shard's `partitions` hook for the partitions of `in` among parts. */
static int tell_shards(nf_epoch_t *ep, nf_input_t in, const nf_kafka_offset_t *parts, size_t n,
                       bool gained)
{
    moved_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    *m = (moved_t){.ep = ep, .in = in, .gained = gained};
    for (size_t i = 0; i < n; i++)
        if (parts[i].input == in && parts[i].partition >= 0 &&
            parts[i].partition < NF_EPOCH_MAX_PARTITIONS)
            m->parts[m->n++] = parts[i].partition;
    int r = 0;
    for (unsigned s = 0; m->n && s < ep->nshards && r == 0; s++)
        r = nf_runtime_call(ep->rt, s, call_partitions, m, CALL_TIMEOUT_MS);
    free(m);
    return r;
}

/* Every input's partitions among parts, one input after the other (read-events first). */
static int tell_all_shards(nf_epoch_t *ep, const nf_kafka_offset_t *parts, size_t n, bool gained)
{
    int r = 0;
    for (int in = 0; in < NF_INPUT__COUNT && r == 0; in++)
        r = tell_shards(ep, (nf_input_t)in, parts, n, gained);
    return r;
}

/* "p,p,..." of one input's partitions among parts into list. */
static void list_parts(char *list, size_t cap, nf_input_t in, const nf_kafka_offset_t *parts,
                       size_t n)
{
    size_t len = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        if (parts[i].input == in)
            len +=
                (size_t)snprintf(list + len, cap - len, "%s%d", len ? "," : "", parts[i].partition);
}

static void log_moved(const char *msg, const nf_kafka_offset_t *parts, size_t n)
{
    char reads[512], srcs[512];
    bool panes = false;
    list_parts(reads, sizeof reads, NF_INPUT_READ_EVENTS, parts, n);
    list_parts(srcs, sizeof srcs, NF_INPUT_SOURCES, parts, n);
    for (size_t i = 0; i < n; i++)
        panes |= parts[i].input == NF_INPUT_TRENDING_PANES;
    nf_log(NF_LOG_INFO, "epoch", msg, NF_LS("read_events_partitions", reads),
           NF_LS("sources_partitions", srcs), NF_LI("trending_panes", panes), NF_LEND);
}

void nf_epoch_revoke_cb(void *arg, const nf_kafka_offset_t *parts, size_t n, bool lost)
{
    nf_epoch_t *ep = arg;
    char err[512];
    if (atomic_load(&ep->failed))
        return;
    if (lost) {
        snprintf(err, sizeof err,
                 "the consumer group evicted this process and its partitions were lost (its "
                 "session or max.poll.interval.ms ran out): nothing more can be committed; what "
                 "it took since its last epoch is read again by their new owners. Restart it");
        fail_as(ep, FAILED_REBALANCE, -EPIPE, err);
        return;
    }
    int r = run_epoch(ep, false, err, sizeof err);
    if (r != 0) {
        fail(ep, r, err);
        return;
    }
    /* Committed: the next owner starts where this epoch stopped. Positions of partitions this
     * process no longer reads must not be committed again by its later epochs. */
    for (size_t i = 0; i < n; i++) {
        if ((unsigned)parts[i].input >= NF_INPUT__COUNT || parts[i].partition < 0 ||
            parts[i].partition >= NF_EPOCH_MAX_PARTITIONS)
            continue;
        atomic_store(&ep->offsets[parts[i].input][parts[i].partition], -1);
    }
    if ((r = tell_all_shards(ep, parts, n, false)) != 0) {
        snprintf(err, sizeof err, "revoked partitions: the shards did not let go: %s",
                 strerror(-r));
        fail_as(ep, FAILED_REBALANCE, r, err);
        return;
    }
    nf_standby_revoked(ep->standby, parts, n); /* let go: tailed from here on */
    log_moved("partitions revoked: their epoch committed, their key groups let go", parts, n);
}

bool nf_epoch_assign_cb(void *arg, const nf_kafka_offset_t *parts, size_t n)
{
    nf_epoch_t *ep = arg;
    char err[2048];
    if (atomic_load(&ep->failed))
        return false;
    int r = 0;
    if (ep->o.changelog && ep->st && ep->kafka) {
        /* The key groups to restore: read-events partitions (and the merger's, which comes
         * with trending-panes: changelog.h) and sources partitions (crawl schedules). */
        bool *reads = calloc(NF_EPOCH_MAX_PARTITIONS, sizeof *reads);
        bool *srcs = calloc(NF_EPOCH_MAX_PARTITIONS, sizeof *srcs);
        bool *only = reads && srcs ? reads : NULL;
        bool panes[1] = {false}; /* trending-panes 0: the global key group (changelog.h) */
        const bool *want[NF_INPUT__COUNT] = {NULL};
        want[NF_INPUT_READ_EVENTS] = reads;
        want[NF_INPUT_SOURCES] = srcs;
        want[NF_INPUT_TRENDING_PANES] = panes;
        nf_kafka_offset_t *go = calloc(NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS, sizeof *go);
        size_t ngo = 0, nread = 0;
        uint64_t max_epoch = 0;
        int ncl = ep->kafka->topic_partitions(ep->kafka->arg, NF_TOPIC_CL_TRENDING);
        for (size_t i = 0; only && i < n; i++) {
            bool in_range = parts[i].partition >= 0 && parts[i].partition < NF_EPOCH_MAX_PARTITIONS;
            if (parts[i].input == NF_INPUT_READ_EVENTS && in_range) {
                reads[parts[i].partition] = true;
                nread++;
            }
            if (parts[i].input == NF_INPUT_SOURCES && in_range) {
                srcs[parts[i].partition] = true;
                nread++;
            }
            if (parts[i].input == NF_INPUT_TRENDING_PANES && parts[i].partition == 0 && ncl > 0) {
                reads[NF_CHANGELOG_MERGER_KG % (unsigned)ncl] = true;
                panes[0] = true;
                nread++;
            }
        }
        nf_changelog_stats_t cs = {0};
        if (!only || !go) {
            snprintf(err, sizeof err, "out of memory");
            r = -ENOMEM;
        }
        if (r == 0 && nread)
            log_moved("partitions gained: reading the group's offsets, then restoring their state",
                      parts, n);
        if (r == 0 && nread && ep->standby)
            nf_standby_hold(ep->standby, want); /* it stops writing them first */
        /* The group's offsets first, then the changelog: the group's stable offsets wait for
         * the previous owner's last epoch to be decided, and the changelog's ends, read after
         * that, hold every epoch they count. The other way round, a restore that ended before
         * an epoch which then committed was followed by offsets past that epoch's input: its
         * state updates lost, its outputs emitted again (the chaos test, seed 162754619;
         * tests/kafka/restore_race.py). Only the gained partitions' offsets, and only when
         * there are any: the stable offsets of the others would wait for the other processes'
         * epochs in flight (at every rebalance, on every member, under load for seconds). */
        if (r == 0 && nread) {
            atomic_store(&ep->step, "rebalance: reading the group's offsets of gained partitions");
            r = read_group_offsets(ep, parts, n, go, NF_INPUT__COUNT * NF_EPOCH_MAX_PARTITIONS,
                                   &ngo, &max_epoch, err, sizeof err);
        }
        if (r == 0 && nread) {
            atomic_store(&ep->step, "rebalance: restoring gained partitions from the changelog");
            r = nf_changelog_restore_partitions(ep->st, ep->kafka, want, &ep->restore, &cs, err,
                                                sizeof err);
        }
        atomic_store(&ep->step, "between epochs");
        if (r == 0 && nread)
            fault_at("assign_restored"); /* tests/kafka/restore_race.py */
        /* The group's offsets of the gained partitions: where the restored state stands. */
        for (size_t i = 0; r == 0 && i < ngo; i++)
            for (size_t j = 0; j < n; j++)
                if (parts[j].input == go[i].input && parts[j].partition == go[i].partition &&
                    go[i].partition < NF_EPOCH_MAX_PARTITIONS) {
                    ep->committed_offsets[go[i].input][go[i].partition] = go[i].next;
                }
        if (r == 0 && nread) {
            nf_counter_add(ep->m_restored, cs.records);
            nf_log(NF_LOG_INFO, "changelog", "gained partitions restored from the changelog",
                   NF_LI("records", cs.records),
                   NF_LI("records_read_events", cs.by_input[NF_INPUT_READ_EVENTS]),
                   NF_LI("records_sources", cs.by_input[NF_INPUT_SOURCES]),
                   NF_LI("records_global", cs.by_input[NF_INPUT_TRENDING_PANES]),
                   NF_LI("bytes", cs.bytes), NF_LF("seconds", (double)cs.ns / 1e9), NF_LEND);
        }
        free(reads);
        free(srcs);
        free(go);
    }
    if (!ep->o.changelog && (r = guard_positions(ep, parts, n, err, sizeof err)) == -EEXIST) {
        atomic_store(&ep->refused, true);
        fail_as(ep, FAILED_REBALANCE, -EEXIST, err);
        return false;
    }
    if (r == 0 && (r = tell_all_shards(ep, parts, n, true)) != 0)
        snprintf(err, sizeof err, "gained partitions: the shards did not load them: %s",
                 strerror(-r));
    if (r != 0) {
        /* Taking the partitions without their state would count their events on an empty
         * state: stop instead (a restart restores again). */
        char why[2200];
        snprintf(why, sizeof why, "assigned partitions: their state cannot be restored: %s", err);
        fail_as(ep, FAILED_REBALANCE, r, why);
        return false;
    }
    nf_standby_assigned(ep->standby, parts, n); /* owned now: no longer tailed */
    log_moved("partitions assigned: their key groups loaded", parts, n);
    return true;
}

int nf_epoch_start(nf_epoch_t *ep)
{
    int r = pthread_create(&ep->thread, NULL, coordinator, ep);
    if (r != 0)
        return -r;
    ep->thread_started = true;
    return 0;
}

void nf_epoch_request(nf_epoch_t *ep)
{
    atomic_store(&ep->early, true);
}

int nf_epoch_run_once(nf_epoch_t *ep, char *err, size_t errlen)
{
    return run_epoch(ep, false, err, errlen);
}

int nf_epoch_stop(nf_epoch_t *ep)
{
    atomic_store(&ep->stop_requested, true);
    if (ep->thread_started) {
        atomic_store(&ep->step, "waiting for the epoch in flight");
        pthread_join(ep->thread, NULL);
        ep->thread_started = false;
    }
    if (atomic_load(&ep->failed) || ep->final_done)
        return atomic_load(&ep->failed) ? -EIO : 0;
    ep->final_done = true;
    char err[512];
    int r = run_epoch(ep, true, err, sizeof err); /* after a failure: -ECANCELED, no cut */
    if (r != 0)
        fail(ep, r, err);
    else
        atomic_store(&ep->final_committed, true);
    /* with poll_until, the stall polls: a rebalance may reach the process while it stops */
    fault_polling("before_close", ep->kafka ? ep->kafka->poll : NULL,
                  ep->kafka ? ep->kafka->arg : NULL);
    atomic_store(&ep->step, "closing the Kafka consumer (leaving the group)");
    if (ep->kafka)
        ep->kafka->close_consumer(ep->kafka->arg);
    atomic_store(&ep->step, "stopped");
    return r;
}

bool nf_epoch_final_committed(const nf_epoch_t *ep)
{
    return atomic_load(&ep->final_committed);
}

const char *nf_epoch_step(const nf_epoch_t *ep)
{
    const char *s = atomic_load(&ep->step);
    return s ? s : "between epochs";
}

bool nf_epoch_failed(const nf_epoch_t *ep)
{
    return atomic_load(&ep->failed);
}

void nf_epoch_set_deadline(nf_epoch_t *ep, uint64_t deadline_ns)
{
    atomic_store(&ep->deadline_ns, deadline_ns);
    if (ep->kafka)
        ep->kafka->set_deadline(ep->kafka->arg, deadline_ns);
}

bool nf_epoch_timed_out(const nf_epoch_t *ep)
{
    return atomic_load(&ep->timed_out);
}

bool nf_epoch_fenced(const nf_epoch_t *ep)
{
    return atomic_load(&ep->fenced);
}

void nf_epoch_stats(const nf_epoch_t *ep, nf_epoch_stats_t *out)
{
    out->epoch = atomic_load(&ep->epoch_pub);
    out->committed = atomic_load(&ep->committed);
    out->failed = atomic_load(&ep->failures);
    out->checkpoints = atomic_load(&ep->checkpoints);
    out->outputs = atomic_load(&ep->outputs);
    out->recovered_epochs = atomic_load(&ep->recovered_epochs);
    out->recovered_records = atomic_load(&ep->recovered_records);
    out->last_pause_ns = atomic_load(&ep->last_pause_ns);
    out->last_commit_ns = atomic_load(&ep->last_commit_ns);
}

void nf_epoch_attach_kafka(nf_epoch_t *ep, const nf_kafka_ops_t *kafka)
{
    ep->kafka_ops = *kafka;
    ep->kafka = &ep->kafka_ops;
}

void nf_epoch_attach_standby(nf_epoch_t *ep, nf_standby_t *sb)
{
    ep->standby = sb;
}

int64_t nf_epoch_position_cb(void *arg, nf_input_t in, int32_t partition)
{
    nf_epoch_t *ep = arg;
    int64_t v = nf_epoch_committed_offset(ep, in, partition);
    /* A partition being positioned is ours from here: epochs commit its position. Only when it
     * has none yet: the lag computation asks too, and a position taken since must stay. */
    int64_t none = -1;
    if (v >= 0 && (unsigned)in < NF_INPUT__COUNT && partition >= 0 &&
        partition < NF_EPOCH_MAX_PARTITIONS)
        atomic_compare_exchange_strong(&ep->offsets[in][partition], &none, v);
    return v;
}

void nf_epoch_fault_cb(const char *point)
{
    fault_at(point);
}
