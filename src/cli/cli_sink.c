/* cli_sink.c — `newsflow sink postgres`: the job's committed outputs into PostgreSQL, every
 * record once (sink/pg_sink.h, docs/sink.md). --migrate creates or upgrades the schema and
 * exits; without it the sink refuses a schema other than its own and runs until a signal, with
 * /metrics, /healthz, /readyz and /v1/status on admin.listen:admin.port. */
#include "cli/cli.h"
#include "runtime/admin.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "sink/pg_db.h"
#include "sink/pg_sink.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char sink_usage[] =
    "Usage: newsflow sink postgres [--migrate] [--config FILE] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Lands the job's committed outputs (articles, story-clusters, interest-updates, trending;\n"
    "read-events with postgres.read_events) from kafka.brokers in the PostgreSQL database of\n"
    "postgres.dsn, in the seed's data model (tables article, article_topic, story_cluster,\n"
    "story_member, user_interest, user_interest_version, trending_snapshot, trending_item,\n"
    "read_event; docs/sink.md). Each batch is one transaction that also stores the consumed\n"
    "offsets (newsflow_sink_offsets): a restart continues from there, every record lands once.\n"
    "Processes with the same postgres.group_id share the partitions.\n"
    "\n"
    "  --migrate         create the schema, or bring it up to this binary's version, and exit\n"
    "                    (without it the sink refuses a database whose schema is not its own)\n"
    "  --config FILE     configuration file (default: $NEWSFLOW_CONFIG, else built-in defaults)\n"
    "  --set K=V         override a configuration key (repeatable), e.g.\n"
    "                    --set postgres.dsn='host=127.0.0.1 dbname=news' "
    "--set kafka.brokers=HOST:9092\n"
    "Keys read: postgres.* (dsn, group_id, read_events, batch_rows, batch_ms, retry_max_ms,\n"
    "statement_timeout_ms, retention_days), kafka.brokers, kafka.topic_prefix,\n"
    "kafka.properties, kafka.max_event_bytes, admin.* (/metrics, /healthz, /readyz, /v1/status\n"
    "on admin.listen:admin.port), log.* (`newsflow config keys`).\n"
    "\n"
    "PostgreSQL unreachable or failing: the sink retries (postgres.retry_max_ms) and the job\n"
    "upstream is not slowed; newsflow_pgsink_lag_records and newsflow_pgsink_errors_total say so.\n"
    "A record PostgreSQL refuses goes to the dead-letters topic with the server's reason.\n"
    "\n"
    "Stops on SIGTERM/SIGINT after landing the batch in hand.\n"
    "Exit codes: 0 stopped by a signal (or migrated), 1 runtime failure (the database's schema\n"
    "is not this binary's; the message names the way out), 2 usage or configuration.\n";

/* Parses the arguments and the configuration. 0, -1 (--help printed) or an exit code. */
static int load(int argc, char **argv, nf_config_t *cfg, bool *migrate)
{
    if (argc < 2 || strcmp(argv[1], "postgres") != 0) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            fputs(sink_usage, stdout);
            return -1;
        }
        return nf_cli_bad_usage("sink", sink_usage,
                                "the only sink is postgres: newsflow sink postgres ...", NULL);
    }
    const char *config = nf_cli_config_default();
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    unsigned nsets = 0;
    int rc = sets ? 0 : NF_EXIT_RUNTIME;
    for (int i = 2; i < argc && rc == 0; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(sink_usage, stdout);
            rc = -1;
        } else if (!strcmp(argv[i], "--migrate")) {
            *migrate = true;
        } else {
            int r = nf_cli_config_opt(argc, argv, &i, &config, sets, &nsets);
            if (r != 1)
                rc = nf_cli_bad_usage("sink", sink_usage,
                                      r < 0 ? "option needs a value:" : "unknown option", argv[i]);
        }
    }
    char err[NF_CONFIG_ERRLEN];
    if (rc == 0 && nf_config_load(cfg, config, sets, nsets, true, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow sink: config error: %s\n", err);
        rc = NF_EXIT_USAGE;
    }
    free(sets);
    return rc;
}

static int migrate(const nf_config_t *cfg)
{
    char err[1024];
    nf_pg_t *pg =
        nf_pg_connect(cfg->postgres.dsn, cfg->postgres.statement_timeout_ms, err, sizeof err);
    if (!pg) {
        nf_log(NF_LOG_ERROR, "sink", "cannot connect to PostgreSQL", NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    int from = 0, to = 0, rc = nf_pg_migrate(pg, &from, &to, err, sizeof err);
    if (rc == 0)
        nf_log(NF_LOG_INFO, "sink", from == to ? "schema up to date" : "schema migrated",
               NF_LS("db", nf_pg_where(pg)), NF_LI("from_version", from), NF_LI("to_version", to),
               NF_LEND);
    else
        nf_log(NF_LOG_ERROR, "sink", "migration failed; nothing was changed",
               NF_LS("db", nf_pg_where(pg)), NF_LS("error", err), NF_LEND);
    nf_pg_close(pg);
    return rc == 0 ? NF_EXIT_OK : NF_EXIT_RUNTIME;
}

/* At start: a reachable database whose schema is not this binary's is refused at once (one
 * that cannot be reached is the loop's to retry). */
static bool schema_refused(const nf_config_t *cfg)
{
    char err[1024];
    nf_pg_t *pg =
        nf_pg_connect(cfg->postgres.dsn, cfg->postgres.statement_timeout_ms, err, sizeof err);
    if (!pg) {
        nf_log(NF_LOG_WARN, "sink", "PostgreSQL unreachable at start; the sink retries",
               NF_LS("error", err), NF_LEND);
        return false;
    }
    int rc = nf_pg_schema_check(pg, err, sizeof err);
    bool refused = rc == NF_PG_SCHEMA;
    if (rc != 0)
        nf_log(refused ? NF_LOG_ERROR : NF_LOG_WARN, "sink",
               refused ? "the database's schema is not this binary's; not starting"
                       : "PostgreSQL failed at start; the sink retries",
               NF_LS("error", err), NF_LEND);
    nf_pg_close(pg);
    return refused;
}

static int health(void *arg, char *why, size_t len)
{
    (void)arg, (void)why, (void)len;
    return 0;
}

static bool ready(void *arg, char *body, size_t len)
{
    return nf_pgsink_ready(arg, body, len);
}

static int api(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    (void)req;
    if (strcmp(route, "status") != 0)
        return 404;
    *body = nf_pgsink_status(arg, len);
    return *body ? 200 : 500;
}

typedef struct waiter {
    nf_pgsink_t *s;
    int rc;
} waiter_t;

static void *run_thread(void *arg)
{
    waiter_t *w = arg;
    w->rc = nf_pgsink_run(w->s);
    /* the sink stopped by itself (a schema it does not know): wake the signal wait */
    if (w->rc != 0)
        kill(getpid(), SIGTERM);
    return NULL;
}

/* The sink on a thread of its own, its server, and a wait for the signal to stop. */
static int serve(const nf_config_t *cfg, nf_pgsink_t *s)
{
    char err[512];
    nf_admin_hooks_t hooks = {.health = health,
                              .ready = ready,
                              .arg = s,
                              .api = api,
                              .api_arg = s,
                              .max_connections = cfg->admin.max_connections,
                              .request_timeout_ms = cfg->admin.request_timeout_ms};
    nf_admin_t *a =
        cfg->admin.enabled
            ? nf_admin_start(cfg->admin.listen, (uint16_t)cfg->admin.port, &hooks, err, sizeof err)
            : NULL;
    if (cfg->admin.enabled && !a) {
        nf_log(NF_LOG_ERROR, "sink", err, NF_LEND);
        return NF_EXIT_RUNTIME;
    }
    waiter_t w = {.s = s};
    pthread_t t;
    if (pthread_create(&t, NULL, run_thread, &w) != 0) {
        nf_admin_stop(a);
        return NF_EXIT_RUNTIME;
    }
    nf_log(NF_LOG_INFO, "sink", "landing the job's outputs in PostgreSQL",
           NF_LS("group", cfg->postgres.group_id), NF_LS("brokers", cfg->kafka.brokers),
           NF_LI("port", a ? nf_admin_port(a) : 0), NF_LEND);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    int sig = 0;
    sigwait(&stop, &sig);
    nf_log(NF_LOG_INFO, "sink", "stopping: landing the batch in hand", NF_LEND);
    nf_pgsink_stop(s);
    pthread_join(t, NULL);
    nf_admin_stop(a);
    return w.rc == 0 ? NF_EXIT_OK : NF_EXIT_RUNTIME;
}

int nf_cli_sink(int argc, char **argv)
{
    nf_config_t cfg;
    bool mig = false;
    int rc = load(argc, argv, &cfg, &mig);
    if (rc != 0)
        return rc < 0 ? NF_EXIT_OK : rc;
    nf_log_set_level(cfg.log.level);
    if (mig)
        return migrate(&cfg);
    if (!cfg.kafka.brokers[0] || !strcmp(cfg.kafka.brokers, "embedded")) {
        fprintf(stderr,
                "newsflow sink: kafka.brokers is \"%s\": name the job's Kafka cluster, e.g. "
                "--set kafka.brokers=127.0.0.1:9092 (the embedded cluster lives inside "
                "`newsflow run` and no other process can read it)\n",
                cfg.kafka.brokers);
        return NF_EXIT_USAGE;
    }
    if (schema_refused(&cfg))
        return NF_EXIT_RUNTIME;
    if (nf_metrics_init(1) != 0) {
        fprintf(stderr, "newsflow sink: cannot create the metrics registry\n");
        return NF_EXIT_RUNTIME;
    }
    sigset_t stop; /* taken by sigwait in serve(); blocked before any thread starts */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    nf_pgsink_opts_t o = {.brokers = cfg.kafka.brokers,
                          .properties = cfg.kafka.properties,
                          .topic_prefix = cfg.kafka.topic_prefix,
                          .group = cfg.postgres.group_id,
                          .dsn = cfg.postgres.dsn,
                          .read_events = cfg.postgres.read_events,
                          .batch_rows = cfg.postgres.batch_rows,
                          .batch_ms = cfg.postgres.batch_ms,
                          .retry_max_ms = cfg.postgres.retry_max_ms,
                          .statement_timeout_ms = cfg.postgres.statement_timeout_ms,
                          .retention_days = cfg.postgres.retention_days,
                          .max_event_bytes = cfg.kafka.max_event_bytes};
    char err[512];
    nf_pgsink_t *s = nf_pgsink_new(&o, err, sizeof err);
    if (!s) {
        nf_log(NF_LOG_ERROR, "sink", err, NF_LEND);
        return NF_EXIT_USAGE;
    }
    rc = serve(&cfg, s);
    nf_pgsink_free(s);
    return rc;
}
