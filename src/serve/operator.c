/* operator.c — the operators' /v1/ routes (operator.h). */
#include "serve/operator.h"

#include "serve/api.h"

#include "runtime/jsonw.h"
#include "runtime/metrics.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct nf_operator {
    nf_operator_opts_t o;
    nf_standby_t *_Atomic standby;
};

nf_operator_t *nf_operator_new(const nf_operator_opts_t *o)
{
    nf_operator_t *op = calloc(1, sizeof *op);
    if (op)
        op->o = *o;
    return op;
}

void nf_operator_free(nf_operator_t *op)
{
    free(op);
}

void nf_operator_set_standby(nf_operator_t *op, nf_standby_t *sb)
{
    atomic_store(&op->standby, sb);
}

/* One shard's part of a sources listing. nf_runtime_call may give up waiting while the shard
 * still runs the call, so the caller and the shard each hold a reference; the last frees it. */
typedef struct part {
    _Atomic int refs;
    nf_ingest_t *in;
    bool failing;
    nf_jw_t w;
} part_t;

static void part_release(part_t *p)
{
    if (atomic_fetch_sub(&p->refs, 1) == 1) {
        nf_jw_free(&p->w);
        free(p);
    }
}

static void sources_on_shard(nf_shard_t *sh, void *arg)
{
    part_t *p = arg;
    nf_jw_arr_open(&p->w);
    nf_ingest_sources_json(sh, p->in, p->failing, &p->w);
    nf_jw_arr_close(&p->w);
    part_release(p);
}

/* One shard's sources appended to w (an array is open; *first: nothing written yet). 0 or
 * -errno. */
static int shard_sources(nf_operator_t *op, unsigned shard, bool failing, nf_jw_t *w, bool *first)
{
    part_t *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    atomic_init(&p->refs, 2);
    p->in = op->o.in;
    p->failing = failing;
    nf_jw_init(&p->w);
    int r = nf_runtime_call(op->o.rt, shard, sources_on_shard, p, 5000);
    if (r != 0) {
        if (r != -ETIMEDOUT) /* never queued: the shard holds no reference */
            part_release(p);
        part_release(p);
        return r;
    }
    if (p->w.failed) {
        part_release(p);
        return -ENOMEM;
    }
    if (p->w.len > 2) { /* "[...]" minus the brackets */
        if (!*first)
            nf_jw_raw(w, ",", 1);
        nf_jw_raw(w, p->w.buf + 1, p->w.len - 2);
        *first = false;
    }
    part_release(p);
    return 0;
}

/* The sources of every shard as array elements of w. 0, or -errno of the first shard that did
 * not answer. */
static int sources(nf_operator_t *op, bool failing, nf_jw_t *w)
{
    bool first = true;
    for (unsigned i = 0; i < nf_runtime_shard_count(op->o.rt); i++) {
        int r = shard_sources(op, i, failing, w, &first);
        if (r != 0)
            return r;
    }
    return 0;
}

static int error_reply(int err, char **body, size_t *len)
{
    return nf_api_error(503,
                        err == -ESHUTDOWN   ? "shutting down"
                        : err == -ETIMEDOUT ? "a shard did not answer within 5 s"
                                            : strerror(-err),
                        body, len);
}

static void partitions_json(const bool *flags, nf_jw_t *w)
{
    nf_jw_arr_open(w);
    for (int p = 0; p < NF_EPOCH_MAX_PARTITIONS; p++)
        if (flags[p]) {
            nf_jw_elem(w);
            nf_jw_i64(w, p);
        }
    nf_jw_arr_close(w);
}

/* "standby": null without standbys, else the partitions stood by for and the lag. */
static void standby_json(nf_operator_t *op, nf_jw_t *w)
{
    nf_jw_key(w, "standby");
    nf_standby_t *sb = atomic_load(&op->standby);
    if (!sb) {
        nf_jw_null(w);
        return;
    }
    bool parts[NF_EPOCH_MAX_PARTITIONS], srcs[NF_EPOCH_MAX_PARTITIONS];
    nf_standby_status_t s;
    nf_standby_status(sb, &s, parts, srcs);
    nf_jw_obj_open(w);
    nf_jw_key(w, "replicas");
    nf_jw_u64(w, op->o.cfg->scale.standby_replicas);
    nf_jw_key(w, "partitions");
    partitions_json(parts, w);
    nf_jw_key(w, "sources_partitions");
    partitions_json(srcs, w);
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

/* The process, its readiness and its epoch. */
static void status_head(nf_operator_t *op, const nf_epoch_stats_t *es, bool *restoring, nf_jw_t *w)
{
    nf_jw_key(w, "source");
    nf_jw_str(w, "admin");
    nf_jw_key(w, "version");
    nf_jw_str(w, NF_VERSION);
    nf_jw_key(w, "commit");
    nf_jw_str(w, NF_GIT_COMMIT);
    nf_jw_key(w, "pid");
    nf_jw_i64(w, getpid());
    char waiting[128] = "";
    *restoring = false;
    bool ready = op->o.ready ? op->o.ready(op->o.arg, waiting, sizeof waiting, restoring) : true;
    nf_jw_key(w, "ready");
    nf_jw_bool(w, ready);
    nf_jw_key(w, "waiting_for");
    nf_jw_str(w, waiting);
    if (op->o.kafka) {
        char group[192];
        nf_kafka_group_state(op->o.kafka, group, sizeof group);
        nf_jw_key(w, "group");
        nf_jw_str(w, group);
    }
    nf_jw_key(w, "shards");
    nf_jw_u64(w, nf_runtime_shard_count(op->o.rt));
    nf_jw_key(w, "state_dir");
    nf_jw_str(w, op->o.cfg->state.dir);
    nf_jw_key(w, "epoch");
    nf_jw_u64(w, es->epoch);
    nf_jw_key(w, "seconds_since_commit");
    nf_jw_fixed3(w, nf_epoch_seconds_since_commit(op->o.epoch));
}

/* "restore": how the state came back at start. */
static void status_restore(nf_operator_t *op, const nf_epoch_stats_t *es, bool restoring,
                           nf_jw_t *w)
{
    nf_jw_key(w, "restore");
    nf_jw_obj_open(w);
    nf_jw_key(w, "state");
    nf_jw_str(w, restoring ? "restoring" : "restored");
    uint64_t applied = 0, total = 0;
    bool running = false;
    nf_epoch_restore_progress(op->o.epoch, &applied, &total, &running);
    nf_jw_key(w, "changelog");
    nf_jw_bool(w, op->o.cfg->state.changelog);
    nf_jw_key(w, "changelog_restore_running");
    nf_jw_bool(w, running);
    nf_jw_key(w, "changelog_records_applied"); /* the last (or current) restore's */
    nf_jw_u64(w, applied);
    nf_jw_key(w, "changelog_records_total");
    nf_jw_u64(w, total);
    nf_jw_key(w, "from_checkpoint");
    nf_jw_str(w, op->o.from_checkpoint);
    nf_jw_key(w, "pending_epochs_rolled_forward");
    nf_jw_u64(w, es->recovered_epochs);
    nf_jw_obj_close(w);
}

/* "partitions": the input partitions assigned here, with positions and lag. */
static void status_partitions(nf_operator_t *op, nf_jw_t *w)
{
    nf_kafka_t *k = op->o.kafka;
    nf_jw_key(w, "partitions");
    nf_jw_arr_open(w);
    for (int in = 0; k && in < NF_INPUT__COUNT; in++)
        for (int p = 0; p < nf_kafka_input_partitions(k, (nf_input_t)in); p++) {
            if (!nf_kafka_assigned(k, (nf_input_t)in, p))
                continue;
            nf_jw_elem(w);
            nf_jw_obj_open(w);
            nf_jw_key(w, "topic");
            nf_jw_str(w, nf_kafka_input_topic(k, (nf_input_t)in));
            nf_jw_key(w, "partition");
            nf_jw_i64(w, p);
            nf_jw_key(w, "position");
            nf_jw_i64(w, nf_epoch_position(op->o.epoch, (nf_input_t)in, p));
            nf_jw_key(w, "lag");
            int64_t lag = nf_kafka_lag(k, (nf_input_t)in, p);
            if (lag < 0)
                nf_jw_null(w);
            else
                nf_jw_i64(w, lag);
            nf_jw_obj_close(w);
        }
    nf_jw_arr_close(w);
}

static int status(nf_operator_t *op, nf_jw_t *w)
{
    nf_epoch_stats_t es;
    nf_epoch_stats(op->o.epoch, &es);
    bool restoring;
    status_head(op, &es, &restoring, w);
    status_restore(op, &es, restoring, w);
    standby_json(op, w);
    status_partitions(op, w);
    nf_jw_key(w, "sources");
    nf_jw_obj_open(w);
    for (int h = 0; h < NF_CRAWL_HEALTH_N; h++) {
        nf_jw_key(w, nf_crawl_health_name(h));
        nf_jw_i64(w, nf_gauge_value(op->o.in->m.sources_by_health[h]));
    }
    nf_jw_obj_close(w);
    nf_jw_key(w, "failing");
    nf_jw_arr_open(w);
    int r = sources(op, true, w);
    nf_jw_arr_close(w);
    return r;
}

static bool flag_arg(nf_admin_req_t *req, const char *name)
{
    const char *v = nf_admin_req_arg(req, name);
    return v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
}

int nf_operator_handle(nf_operator_t *op, nf_route_id_t id, nf_admin_req_t *req, char **body,
                       size_t *len)
{
    if (id == NF_ROUTE_HISTORY && !op->o.history)
        return 0;
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    int r = 0;
    if (id == NF_ROUTE_SOURCES) {
        nf_jw_key(&w, "sources");
        nf_jw_arr_open(&w);
        r = sources(op, flag_arg(req, "failing"), &w);
        nf_jw_arr_close(&w);
    } else if (id == NF_ROUTE_HISTORY) {
        nf_history_json(op->o.history, &w);
    } else {
        r = status(op, &w);
    }
    if (r != 0) {
        nf_jw_free(&w);
        return error_reply(r, body, len);
    }
    nf_jw_obj_close(&w);
    return nf_api_reply(&w, 200, body, len);
}
