/* job_http.c — the job's HTTP servers: admin.port (the page, the query API, the edge, and the
 * operators' routes unless admin.operator_port takes them), admin.operator_port and
 * admin.probe_port; what /healthz and /readyz answer; state.dir/admin.json. Routes: serve/. */
#include "job/job_priv.h"

#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "serve/routes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const wait_names[] = {"restore", "assignment", "commit_overdue", "broker",
                                         "shutdown"};
#define READY_OVERDUE_MIN_S 5.0

/* Commits overdue: 3 intervals, but never less than a slow commit (fsync, a transaction) may
 * take: with short intervals readiness would flap. */
static void readiness_commit(nf_job_t *j, nf_epoch_t *ep, job_readiness_t *r)
{
    r->epoch = nf_epoch_committed_epoch(ep);
    r->since_commit_s = nf_epoch_seconds_since_commit(ep);
    r->overdue_after_s = 3.0 * j->cfg.checkpoint.interval_ms / 1000.0;
    if (r->overdue_after_s < READY_OVERDUE_MIN_S)
        r->overdue_after_s = READY_OVERDUE_MIN_S;
    if (r->since_commit_s > r->overdue_after_s)
        r->waiting |= WAIT_COMMIT;
}

static void readiness_kafka(nf_kafka_t *k, job_readiness_t *r)
{
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

void job_readiness(nf_job_t *j, job_readiness_t *r)
{
    memset(r, 0, sizeof *r);
    r->kafka_error_age_s = -1;
    int phase = atomic_load(&j->phase);
    if (phase == PHASE_STARTING)
        r->waiting |= WAIT_RESTORE;
    else if (phase == PHASE_STOPPING)
        r->waiting |= WAIT_SHUTDOWN;
    nf_epoch_t *ep = atomic_load(&j->epoch_ready);
    if (ep && phase == PHASE_RUNNING)
        readiness_commit(j, ep, r);
    nf_kafka_t *k = atomic_load(&j->kafka_ready);
    if (k && phase == PHASE_RUNNING)
        readiness_kafka(k, r);
}

const char *job_wait_list(int waiting, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t n = 0;
    for (unsigned i = 0; i < sizeof wait_names / sizeof *wait_names; i++)
        if (waiting & (1 << i) && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", wait_names[i]);
    return buf;
}

/* Liveness: every shard answers a call within a second (a stuck loop fails it). */
static void noop(nf_shard_t *sh, void *arg)
{
    (void)sh;
    (void)arg;
}

static int health(void *arg, char *why, size_t whylen)
{
    nf_job_t *j = arg;
    if (atomic_load(&j->phase) == PHASE_STARTING)
        return 0; /* alive, restoring state (/readyz says how far): the shards do not run yet */
    for (unsigned i = 0; i < nf_runtime_shard_count(j->rt); i++) {
        int r = nf_runtime_call(j->rt, i, noop, NULL, 1000);
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

/* /readyz's details once running: the epoch, the commit's age, the partitions, Kafka's error. */
static void ready_running(nf_job_t *j, const job_readiness_t *r, nf_jw_t *w)
{
    nf_jw_key(w, "epoch");
    nf_jw_u64(w, r->epoch);
    nf_jw_key(w, "seconds_since_commit");
    nf_jw_fixed3(w, r->since_commit_s);
    nf_jw_key(w, "commit_overdue_after_s");
    nf_jw_fixed3(w, r->overdue_after_s);
    if (!atomic_load(&j->kafka_ready))
        return;
    nf_jw_key(w, "partitions_assigned");
    nf_jw_u64(w, r->partitions);
    if (r->kafka_error_age_s >= 0) {
        nf_jw_key(w, "kafka_last_error");
        nf_jw_str(w, r->kafka_error);
        nf_jw_key(w, "kafka_last_error_age_s");
        nf_jw_fixed3(w, r->kafka_error_age_s);
    }
}

/* /readyz: ready once state is restored, input partitions are assigned and epochs commit; the
 * JSON body names what it waits for. */
static bool ready(void *arg, char *body, size_t bodylen)
{
    nf_job_t *j = arg;
    job_readiness_t r;
    job_readiness(j, &r);
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
    nf_epoch_t *ep = atomic_load(&j->epoch_ready);
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
    if (atomic_load(&j->phase) == PHASE_RUNNING)
        ready_running(j, &r, &w);
    nf_jw_obj_close(&w);
    snprintf(body, bodylen, "%.*s", w.failed ? 0 : (int)w.len, w.buf ? w.buf : "");
    nf_jw_free(&w);
    return r.waiting == 0;
}

/* /v1/status's view of readiness (serve/operator.h). */
static bool status_ready(void *arg, char *waiting, size_t len, bool *restoring)
{
    nf_job_t *j = arg;
    job_readiness_t r;
    job_readiness(j, &r);
    job_wait_list(r.waiting, waiting, len);
    *restoring = atomic_load(&j->phase) == PHASE_STARTING;
    return r.waiting == 0;
}

void job_local_address(const nf_config_t *cfg, uint16_t port, char *out, size_t outlen)
{
    const char *host = cfg->admin.listen;
    bool v6 = strchr(host, ':') != NULL;
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
        host = v6 ? "::1" : "127.0.0.1";
    snprintf(out, outlen, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", (unsigned)port);
}

/* state.dir/admin.json: where this process's admin server listens, so that `newsflow status`
 * and `sources list` find a running job whose admin.port differs from theirs (or is 0), and,
 * when the job runs its embedded cluster (mock_brokers), that cluster's bootstrap address, so
 * that `sources add` and the other topic writers reach it. The reader trusts it only while its
 * pid holds state.dir/db/LOCK. Written atomically. */
static bool write_admin_file(const nf_config_t *cfg, uint16_t port, const char *mock_brokers)
{
    char path[PATH_MAX], tmp[PATH_MAX + 16], addr[96];
    job_local_address(cfg, port, addr, sizeof addr);
    snprintf(path, sizeof path, "%s/admin.json", cfg->state.dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return false;
    if (mock_brokers)
        fprintf(f, "{\"pid\":%ld,\"address\":\"%s\",\"embedded_brokers\":\"%s\"}\n", (long)getpid(),
                addr, mock_brokers);
    else
        fprintf(f, "{\"pid\":%ld,\"address\":\"%s\"}\n", (long)getpid(), addr);
    if (fclose(f) == 0 && rename(tmp, path) == 0)
        return true;
    unlink(tmp);
    return false;
}

/* Removes state.dir/admin.json if this process wrote it (never another job's: a start refused
 * on a state.dir that a running job holds leaves that job's file alone). */
static void remove_admin_file(nf_job_t *j)
{
    if (!j->admin_file)
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/admin.json", j->cfg.state.dir);
    unlink(path);
    j->admin_file = false;
}

/* One listener; NULL with the reason logged (what names the listener, hint the way out). */
static nf_admin_t *listener(nf_job_t *j, unsigned port, const nf_admin_hooks_t *hooks,
                            const char *what, const char *hint)
{
    char err[512];
    nf_admin_t *a = nf_admin_start(j->cfg.admin.listen, (uint16_t)port, hooks, err, sizeof err);
    if (!a)
        nf_log(NF_LOG_ERROR, "main", what, NF_LS("error", err), NF_LS("hint", hint), NF_LEND);
    return a;
}

/* admin.operator_port: /metrics, /healthz, /readyz and the operators' /v1/ routes on a listener
 * of their own, so that admin.port can face readers. */
static int start_operator(nf_job_t *j)
{
    nf_route_metrics_init();
    j->api_op = (nf_api_t){.listener = NF_API_OPERATORS, .op = j->op};
    nf_admin_hooks_t hooks = {.health = health,
                              .ready = ready,
                              .arg = j,
                              .api = nf_api_get,
                              .api_arg = &j->api_op,
                              .observe = nf_api_observe,
                              .max_connections = 32,
                              .request_timeout_ms = j->cfg.admin.request_timeout_ms,
                              .listener = "operator"};
    j->operator=
        listener(j, j->cfg.admin.operator_port, &hooks, "cannot start the operator listener",
                 "set admin.operator_port to a free port, or 0 for none");
    if (!j->operator)
        return NF_EXIT_RUNTIME;
    nf_log(NF_LOG_INFO, "main",
           "operator listener: /metrics, /healthz, /readyz and the operators' /v1/ routes "
           "(admin.port faces readers; docs/routes.md)",
           NF_LI("port", nf_admin_port(j->operator)), NF_LEND);
    return 0;
}

/* admin.probe_port: /healthz, /readyz and /metrics on a listener of their own (no /v1, no
 * page), so that however many readers hold the admin port, a probe finds a free connection. */
static int start_probe(nf_job_t *j)
{
    nf_admin_hooks_t hooks = {.health = health,
                              .ready = ready,
                              .arg = j,
                              .max_connections = 16,
                              .request_timeout_ms = j->cfg.admin.request_timeout_ms,
                              .listener = "probe"};
    j->probe = listener(j, j->cfg.admin.probe_port, &hooks, "cannot start the probe listener",
                        "set admin.probe_port to a free port, or 0 for none");
    if (!j->probe)
        return NF_EXIT_RUNTIME;
    nf_log(NF_LOG_INFO, "main", "probe listener: /healthz, /readyz and /metrics",
           NF_LI("port", nf_admin_port(j->probe)), NF_LEND);
    return 0;
}

static int start_httpd(nf_job_t *j, const nf_admin_hooks_t *hooks);

/* admin.port: the page, the readers' routes and, without admin.operator_port, the operators'. */
static int start_admin(nf_job_t *j)
{
    nf_route_metrics_init();
    const nf_config_t *cfg = &j->cfg;
    j->api = (nf_api_t){.listener = cfg->admin.operator_port ? NF_API_READERS : NF_API_ALL,
                        .guard = j->guard,
                        .query = j->query,
                        .edge = j->edge,
                        .op = j->op};
    nf_admin_hooks_t hooks = {.health = health,
                              .ready = ready,
                              .arg = j,
                              .api = nf_api_get,
                              .post = nf_api_post,
                              .max_body = cfg->edge.max_body_bytes,
                              .drain_ms = cfg->edge.delivery_timeout_ms + 2000,
                              .api_arg = &j->api,
                              .observe = nf_api_observe,
                              .page = nf_serve_page,
                              .page_len = nf_serve_page_len,
                              .readers_only = cfg->admin.operator_port != 0,
                              .max_connections = cfg->admin.max_connections,
                              .request_timeout_ms = cfg->admin.request_timeout_ms};
    j->admin = listener(j, cfg->admin.port, &hooks, "cannot start the admin server",
                        "set admin.port (0 = any free port) or admin.enabled=false");
    if (!j->admin)
        return NF_EXIT_RUNTIME;
    return cfg->http.shards ? start_httpd(j, &hooks) : 0;
}

/* The server that takes admin.port over once the shards run (job_http_to_shards). */
static int start_httpd(nf_job_t *j, const nf_admin_hooks_t *hooks)
{
    const nf_config_t *cfg = &j->cfg;
    nf_httpd_opts_t ho = {.hooks = *hooks,
                          .max_connections = cfg->admin.max_connections,
                          .request_timeout_ms = cfg->admin.request_timeout_ms,
                          .max_head = cfg->http.max_header_bytes,
                          .budget = cfg->http.budget,
                          .workers = cfg->http.workers,
                          .queue = cfg->http.queue,
                          .drain_ms = hooks->drain_ms};
    ho.hooks.on_loop = nf_api_on_loop;
    char err[256];
    j->httpd = nf_httpd_new(j->rt, &ho, err, sizeof err);
    if (!j->httpd) {
        nf_log(NF_LOG_ERROR, "main", "cannot start the shards' HTTP server", NF_LS("error", err),
               NF_LS("hint", "http.shards=false serves admin.port with libmicrohttpd"), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    return 0;
}

void job_http_to_shards(nf_job_t *j)
{
    if (!j->httpd || !j->admin)
        return;
    char err[256] = "the admin server has no listening socket to hand over";
    int fd = nf_admin_hand_over(j->admin);
    if (fd < 0 || nf_httpd_listen(j->httpd, fd, err, sizeof err) != 0) {
        nf_log(NF_LOG_ERROR, "main", "admin.port could not move to the shards' loops",
               NF_LS("error", err), NF_LEND);
        return;
    }
    nf_log(NF_LOG_INFO, "main", "admin.port is served on the shards' loops from now on (http.*)",
           NF_LI("port", nf_admin_port(j->admin)), NF_LI("shards", j->shards), NF_LEND);
}

int job_start_http(nf_job_t *j)
{
    const nf_config_t *cfg = &j->cfg;
    if (!cfg->admin.enabled)
        return 0;
    int code = job_serve_setup(j);
    nf_operator_opts_t oo = {.cfg = cfg,
                             .rt = j->rt,
                             .in = &j->in,
                             .epoch = j->epoch,
                             .kafka = j->kafka,
                             .history = j->history,
                             .from_checkpoint = j->args.from_checkpoint,
                             .ready = status_ready,
                             .arg = j};
    if (!code && !(j->op = nf_operator_new(&oo))) {
        nf_log(NF_LOG_ERROR, "main", "out of memory", NF_LEND);
        code = NF_EXIT_RUNTIME;
    }
    if (!code)
        code = start_admin(j);
    if (!code && cfg->admin.operator_port)
        code = start_operator(j);
    if (code)
        return code;
    /* `newsflow status` asks there for /v1/status */
    j->admin_file = write_admin_file(cfg, nf_admin_port(j->operator ? j->operator : j->admin),
                                     j->mock ? j->brokers : NULL);
    job_start_demo(j);
    return cfg->admin.probe_port ? start_probe(j) : 0;
}

void job_stop_http(nf_job_t *j)
{
    nf_admin_stop(j->probe);
    j->probe = NULL;
    nf_admin_stop(j->operator);
    j->operator= NULL;
    nf_admin_stop(j->admin); /* its requests have released their views: the store may close */
    j->admin = NULL;
    remove_admin_file(j);
}
