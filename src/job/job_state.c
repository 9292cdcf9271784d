/* job_state.c — the job's durable parts before any actor runs: a named checkpoint restored
 * (--from-checkpoint), the state opened and checked to be this job's, the epoch coordinator,
 * Kafka (or the embedded cluster) and the recovery of a pending epoch; then the warm standby
 * and the configured sources published to the sources topic. docs/ARCHITECTURE.md "The job". */
#include "job/job_priv.h"

#include "actors/sources_publish.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "state/checkpoint.h"
#include "state/identity.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static double store_sst_bytes(void *arg)
{
    const nf_job_t *j = arg;
    return j->store ? (double)nf_store_property_sum(j->store, "rocksdb.live-sst-files-size") : 0;
}

static double store_memtable_bytes(void *arg)
{
    const nf_job_t *j = arg;
    return j->store ? (double)nf_store_property_sum(j->store, "rocksdb.cur-size-all-mem-tables")
                    : 0;
}

/* --from-checkpoint: every check runs before anything moves (nf_checkpoint_restore); a refusal
 * leaves the state directory as it was. 0, NF_EXIT_USAGE (no such checkpoint) or
 * NF_EXIT_RUNTIME (refused or failed). */
static int restore_checkpoint(nf_job_t *j, char *err, size_t errlen)
{
    const nf_config_t *cfg = &j->cfg;
    /* No shard-count check: trending state is kept per input partition, so a checkpoint fits any
     * runtime.shards (state of the older per-shard layout is dropped at start, analytics.h). */
    nf_restore_opts_t o = {.keep_replaced = cfg->checkpoint.retain_count};
    nf_restore_result_t res;
    if (nf_checkpoint_restore(cfg->state.dir, j->args.from_checkpoint, &o, &res, err, errlen) !=
        0) {
        nf_log(NF_LOG_ERROR, "main",
               res.moved ? "restoring the checkpoint failed"
                         : "refusing to restore the checkpoint; the state directory is untouched",
               NF_LS("checkpoint", j->args.from_checkpoint), NF_LS("error", err), NF_LEND);
        return res.resolved ? NF_EXIT_RUNTIME : NF_EXIT_USAGE;
    }
    nf_log(NF_LOG_WARN, "main",
           "restored a named checkpoint: state and input positions roll back to it",
           NF_LS("checkpoint", j->args.from_checkpoint), NF_LS("id", res.id),
           NF_LI("epoch", res.epoch), NF_LI("next_epoch", res.next_epoch), NF_LEND);
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
int job_check_shared_sources(const nf_source_list_t *l)
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
int job_publish_sources(nf_job_t *j)
{
    char err[512];
    nf_sources_publish_stats_t ps;
    uint64_t t0 = nf_now_ns();
    if (nf_sources_publish(j->kafka, &j->sources, &ps, err, sizeof err) != 0) {
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

/* j->self_url: serve.advertised_url, else http://admin.listen:admin.port (the host name for a
 * wildcard address). With admin.port 0 the port is chosen here, before Kafka connects, so that
 * the consumer's client.id can advertise it (serve/owners.h); the admin server binds it a
 * moment later. 0 or an exit code. */
static int advertised_url(nf_job_t *j, char *err, size_t errlen)
{
    nf_config_t *cfg = &j->cfg;
    if (cfg->serve.advertised_url[0]) {
        snprintf(j->self_url, sizeof j->self_url, "%s", cfg->serve.advertised_url);
        size_t n = strlen(j->self_url);
        while (n && j->self_url[n - 1] == '/')
            j->self_url[--n] = 0;
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
    snprintf(j->self_url, sizeof j->self_url, v6 ? "http://[%s]:%u" : "http://%s:%u", host,
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

/* The start's options that cannot go together with state.changelog. 0 or NF_EXIT_USAGE. */
static int check_durability_args(const nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    if (cfg->state.changelog && !strcmp(cfg->kafka.brokers, "embedded")) {
        nf_log(NF_LOG_ERROR, "main",
               "state.changelog needs Apache Kafka: the embedded mock keeps no transactional "
               "offsets and shows aborted records, so a restore from it could not be trusted",
               NF_LS("hint", "set kafka.brokers, or state.changelog=false"), NF_LEND);
        return NF_EXIT_USAGE;
    }
    if (j->args.from_checkpoint && cfg->state.changelog) {
        /* The changelog topics hold the state after the checkpoint; the restore at start would
         * bring it back over the checkpoint's. */
        nf_log(NF_LOG_ERROR, "main",
               "--from-checkpoint is not supported with state.changelog=true: the changelog "
               "topics hold the newer state, which the start would restore over the checkpoint",
               NF_LS("checkpoint", j->args.from_checkpoint),
               NF_LS("hint", "run with --set state.changelog=false to roll back (the changelog "
                             "then no longer matches the state: recreate its topics)"),
               NF_LEND);
        return NF_EXIT_USAGE;
    }
    if (j->args.reset && cfg->state.changelog) {
        nf_log(NF_LOG_ERROR, "main",
               "--reset is for a job without state.changelog: with it, the start restores the "
               "state from the changelog topics and takes the group's positions itself",
               NF_LEND);
        return NF_EXIT_USAGE;
    }
    return 0;
}

/* The state under state.dir, checked to be this job's, with its gauges. 0 or an exit code. */
static int open_store(nf_job_t *j, char *err, size_t errlen)
{
    const nf_config_t *cfg = &j->cfg;
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    so.block_cache_mb = cfg->state.block_cache_mb;
    so.write_buffer_mb = cfg->state.write_buffer_mb;
    so.ingest_min_bytes = cfg->state.ingest_min_bytes;
    _Static_assert(NF_STORE_LOG_OFF == 0 && NF_STORE_LOG_WARN == 1 && NF_STORE_LOG_INFO == 2,
                   "state.rocksdb_log's choices (config.c) are indexed by nf_store_log_t");
    so.log = (nf_store_log_t)cfg->state.rocksdb_log;
    errno = 0;
    j->store = nf_store_open(cfg->state.dir, &so, err, errlen);
    if (!j->store) {
        bool lost = errno == EUCLEAN; /* a damaged or lost database: an operator's decision */
        nf_log(NF_LOG_ERROR, "main", "cannot open the state", NF_LS("state_dir", cfg->state.dir),
               NF_LS("error", err), NF_LEND);
        return lost ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    }
    nf_identity_t id = {cfg->kafka.group_id, cfg->kafka.topic_prefix, cfg->kafka.transactional_id};
    bool recorded = false;
    int ir = nf_identity_check(j->store, &id, &recorded, err, errlen);
    if (ir != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot start: the state is not this job's",
               NF_LS("state_dir", cfg->state.dir), NF_LS("error", err), NF_LEND);
        return ir == -EEXIST ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    }
    if (recorded)
        nf_log(NF_LOG_INFO, "main", "state identity recorded", NF_LS("state_dir", cfg->state.dir),
               NF_LS("group", id.group), NF_LS("topic_prefix", id.topic_prefix),
               NF_LS("writer", id.writer), NF_LI("format", NF_STATE_FORMAT), NF_LEND);
    /* Read by the admin and history threads, which job_release stops before the store closes. */
    nf_metrics_gauge_fn("newsflow_rocksdb_sst_bytes",
                        "Bytes of the state's live SST files on disk (RocksDB "
                        "rocksdb.live-sst-files-size over every column family; checkpoints hold "
                        "copies of their own).",
                        NULL, store_sst_bytes, j);
    nf_metrics_gauge_fn("newsflow_rocksdb_memtable_bytes",
                        "Bytes of the state's RocksDB memtables (rocksdb.cur-size-all-mem-tables).",
                        NULL, store_memtable_bytes, j);
    return 0;
}

static int new_epoch(nf_job_t *j, char *err, size_t errlen)
{
    const nf_config_t *cfg = &j->cfg;
    nf_epoch_opts_t eo = {.interval_ms = cfg->checkpoint.interval_ms,
                          .retain_every = cfg->checkpoint.retain_every,
                          .retain_count = cfg->checkpoint.retain_count,
                          .checkpoint_on_stop = cfg->checkpoint.on_stop,
                          .changelog = cfg->state.changelog,
                          .group = cfg->kafka.assignment != 1,
                          .config_hash = nf_config_hash(cfg),
                          .reset = j->args.reset,
                          .from_checkpoint = j->args.from_checkpoint != NULL,
                          .state_dir = cfg->state.dir,
                          .group_id = cfg->kafka.group_id};
    j->epoch = nf_epoch_new(j->rt, j->store, j->in.sink, &eo, err, errlen);
    if (!j->epoch) {
        nf_log(NF_LOG_ERROR, "main", "cannot create the epoch coordinator", NF_LS("error", err),
               NF_LEND);
        return NF_EXIT_USAGE;
    }
    return 0;
}

/* kafka.brokers "embedded": the in-process mock cluster; j->brokers either way. */
static int embedded_kafka(nf_job_t *j, char *err, size_t errlen)
{
    const nf_config_t *cfg = &j->cfg;
    j->brokers = cfg->kafka.brokers;
    if (strcmp(j->brokers, "embedded") != 0)
        return 0;
    j->mock = nf_kafka_mock_new(1, cfg->kafka.partitions, cfg->kafka.topic_prefix, err, errlen);
    if (!j->mock) {
        nf_log(NF_LOG_ERROR, "main", "cannot start the embedded Kafka", NF_LS("error", err),
               NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    j->brokers = nf_kafka_mock_bootstrap(j->mock);
    nf_log(NF_LOG_INFO, "main",
           "embedded Kafka started (mock cluster; data lives as long as this process)",
           NF_LS("bootstrap", j->brokers), NF_LEND);
    return 0;
}

/* The job's Kafka client, attached to the epoch coordinator. 0 or an exit code. */
static int connect_kafka(nf_job_t *j, char *err, size_t errlen)
{
    const nf_config_t *cfg = &j->cfg;
    char client_id[600] = "";
    if (cfg->kafka.assignment != 1 && cfg->admin.enabled) {
        int code = advertised_url(j, err, errlen);
        if (code != 0)
            return code;
        nf_owners_client_id(j->self_url, client_id, sizeof client_id);
    }
    nf_kafka_opts_t ko = {.brokers = j->brokers,
                          .client_id = client_id[0] ? client_id : NULL,
                          .exactly_once = cfg->kafka.exactly_once,
                          .topic_prefix = cfg->kafka.topic_prefix,
                          .group_id = cfg->kafka.group_id,
                          .transactional_id = cfg->kafka.transactional_id,
                          .group_instance_id =
                              cfg->kafka.static_membership ? cfg->kafka.transactional_id : NULL,
                          .properties = cfg->kafka.properties,
                          .shards = j->shards,
                          .consume = true,
                          .assign_all = cfg->kafka.assignment == 1,
                          .changelog = cfg->state.changelog,
                          .trending_panes = cfg->state.changelog && cfg->kafka.assignment != 1,
                          .position = nf_epoch_position_cb,
                          .assign = nf_epoch_assign_cb,
                          .revoke = nf_epoch_revoke_cb,
                          .fault = nf_epoch_fault_cb,
                          .arg = j->epoch};
    j->kafka = nf_kafka_new(&ko, err, errlen);
    if (!j->kafka) {
        nf_log(NF_LOG_ERROR, "main",
               errno == ENOENT ? "the job's Kafka topics are missing" : "cannot connect to Kafka",
               NF_LS("brokers", j->brokers), NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    nf_kafka_ops_t kops = nf_kafka_ops(j->kafka);
    nf_epoch_attach_kafka(j->epoch, &kops);
    return 0;
}

/* A pending epoch rolled forward; with kafka.assignment=all, the group's offsets checked
 * against the state's (in a consumer group the assign callback guards them as they come). */
static int recover(nf_job_t *j, char *err, size_t errlen)
{
    const nf_config_t *cfg = &j->cfg;
    int rr = nf_epoch_recover(j->epoch, err, errlen);
    if (rr == -ENOSPC) {
        log_recover_disk_full(cfg->state.dir, err);
        return NF_EXIT_RUNTIME;
    }
    if (rr != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot recover the state", NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    if (j->kafka && cfg->kafka.assignment == 1 && !j->mock &&
        (rr = nf_epoch_guard_positions(j->epoch, err, errlen)) != 0) {
        nf_log(NF_LOG_ERROR, "main",
               rr == -EEXIST ? "cannot start: the state stands behind the consumer group"
                             : "cannot start: the consumer group's offsets are not readable",
               NF_LS("error", err), NF_LEND);
        return rr == -EEXIST ? NF_EXIT_USAGE : NF_EXIT_RUNTIME;
    }
    return 0;
}

int job_setup_durability(nf_job_t *j)
{
    char err[NF_CONFIG_ERRLEN];
    int code = check_durability_args(j);
    if (!code && j->args.from_checkpoint)
        code = restore_checkpoint(j, err, sizeof err);
    if (!code)
        code = open_store(j, err, sizeof err);
    if (!code)
        code = new_epoch(j, err, sizeof err);
    if (!code)
        code = embedded_kafka(j, err, sizeof err);
    if (!code && j->brokers[0])
        code = connect_kafka(j, err, sizeof err);
    return code ? code : recover(j, err, sizeof err);
}
/* Warm standbys (state/standby.h), after the start's restore and before the coordinator: in a
 * consumer group with changelogs only. One that cannot start is logged: the job runs without. */
void job_start_standby(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    bool replica = cfg->serve.global_replica && cfg->admin.enabled && cfg->state.changelog &&
                   cfg->kafka.assignment != 1 && j->kafka && !j->mock;
    if (!cfg->scale.standby_replicas && !replica)
        return;
    if (!cfg->state.changelog || cfg->kafka.assignment == 1 || !j->kafka || j->mock) {
        nf_log(NF_LOG_WARN, "main",
               "scale.standby_replicas ignored: standbys need state.changelog=true, "
               "kafka.assignment=group and Apache Kafka",
               NF_LEND);
        return;
    }
    char err[256];
    nf_kafka_ops_t kops = nf_kafka_ops(j->kafka);
    nf_standby_opts_t so = {.st = j->store,
                            .kafka = &kops,
                            .partitions = nf_kafka_input_partitions(j->kafka, NF_INPUT_READ_EVENTS),
                            .source_partitions =
                                nf_kafka_input_partitions(j->kafka, NF_INPUT_SOURCES),
                            .replicas = cfg->scale.standby_replicas};
    j->standby = nf_standby_new(&so, err, sizeof err);
    if (j->standby && nf_standby_start(j->standby, err, sizeof err) != 0) {
        nf_standby_free(j->standby);
        j->standby = NULL;
    }
    if (!j->standby) {
        nf_log(NF_LOG_WARN, "main", "standby not started: failovers restore more",
               NF_LS("error", err), NF_LEND);
        return;
    }
    nf_epoch_attach_standby(j->epoch, j->standby);
}
