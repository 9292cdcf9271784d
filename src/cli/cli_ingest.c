/* cli_ingest.c — `newsflow ingest`: the HTTP edge alone (serve/edge.h), stateless, so that the
 * tier taking readers' events scales apart from the stream job (many replicas behind a load
 * balancer, each a producer of read-events). The same code answers POST /v1/events inside
 * `newsflow run`; here it has a server of its own on admin.listen:admin.port, with /metrics,
 * /healthz and /readyz (ready once the broker answers and the topic exists). */
#include "cli/cli.h"
#include "io/edge_kafka.h"
#include "io/events.h"
#include "io/kafka.h"
#include "runtime/admin.h"
#include "runtime/config.h"
#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "serve/api.h"
#include "serve/edge.h"
#include "serve/guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char ingest_usage[] =
    "Usage: newsflow ingest [--config FILE] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Takes readers' events over HTTP and produces them to the read-events topic of\n"
    "kafka.brokers, answering 202 only once the broker has acknowledged every accepted event\n"
    "(idempotent producer, acks=all). Stateless: run as many as the traffic needs.\n"
    "\n"
    "  POST /v1/events                a JSON array or NDJSON of events (edge.max_batch)\n"
    "  POST /v1/articles/{id}/read    one read: {\"user_id\":..., \"session_id\":..., \"ts\":...}\n"
    "  GET  /metrics /healthz /readyz\n"
    "on admin.listen:admin.port (default 127.0.0.1:9464). An event: user_id, article_id,\n"
    "session_id, kind (read, save, share, dislike, hide), ts, event_id (computed when absent).\n"
    "Answers: 202 {\"accepted\":N,\"rejected\":[...]}, 400 nothing valid, 413 too big, 503 with\n"
    "Retry-After when the broker has not acknowledged within edge.delivery_timeout_ms or more\n"
    "than edge.max_in_flight events wait (send the same events again: their event_ids make the\n"
    "repeat harmless).\n"
    "\n"
    "  --config FILE     configuration file (default: $NEWSFLOW_CONFIG, else built-in defaults)\n"
    "  --set K=V         override a configuration key (repeatable), e.g.\n"
    "                    --set kafka.brokers=HOST:9092 --set admin.port=8080\n"
    "Keys read: kafka.brokers (a real cluster), kafka.topic_prefix, kafka.properties,\n"
    "kafka.max_event_bytes, serve.partitioner, trending.max_future_ms, admin.*, edge.*, auth.*,\n"
    "limits.events_per_s, log.* (`newsflow config keys`). With auth.* a token (Authorization:\n"
    "Bearer) is needed, and each event's user_id must be its subject.\n"
    "\n"
    "Stops on SIGTERM/SIGINT after answering the requests in progress.\n"
    "Exit codes: 0 stopped by a signal, 1 the server could not start, 2 usage or configuration.\n";

typedef struct ingest {
    nf_edge_t *edge;
    nf_guard_t *guard; /* tokens (auth.*) and the events' rate per client (limits.*) */
} ingest_t;

static int health(void *arg, char *why, size_t len)
{
    (void)arg, (void)why, (void)len;
    return 0;
}

static bool ready(void *arg, char *body, size_t len)
{
    ingest_t *in = arg;
    char why[256];
    bool ok = nf_edge_ready(in->edge, why, sizeof why);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "ready");
    nf_jw_bool(&w, ok);
    if (!ok) {
        nf_jw_key(&w, "waiting_for");
        nf_jw_str(&w, "kafka");
        nf_jw_key(&w, "error");
        nf_jw_str(&w, why);
    }
    nf_jw_obj_close(&w);
    snprintf(body, len, "%.*s\n", w.failed ? 0 : (int)w.len, w.buf ? w.buf : "");
    nf_jw_free(&w);
    return ok;
}

static int load(int argc, char **argv, nf_config_t *cfg)
{
    const char *config = nf_cli_config_default();
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    unsigned nsets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(ingest_usage, stdout);
            free(sets);
            return -1;
        }
        int r = nf_cli_config_opt(argc, argv, &i, &config, sets, &nsets);
        if (r != 1) {
            free(sets);
            return nf_cli_bad_usage("ingest", ingest_usage,
                                    r < 0 ? "option needs a value:" : "unknown option", argv[i]);
        }
    }
    char err[NF_CONFIG_ERRLEN];
    int rc = nf_config_load(cfg, config, sets, nsets, true, err, sizeof err);
    free(sets);
    if (rc != 0) {
        fprintf(stderr, "newsflow ingest: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }
    if (!cfg->kafka.brokers[0] || !strcmp(cfg->kafka.brokers, "embedded")) {
        fprintf(stderr,
                "newsflow ingest: kafka.brokers is \"%s\": name the job's Kafka cluster, e.g. "
                "--set kafka.brokers=127.0.0.1:9092 (the embedded cluster lives inside `newsflow "
                "run`, whose own server takes the same POST routes)\n",
                cfg->kafka.brokers);
        return NF_EXIT_USAGE;
    }
    return 0;
}

/* The edge's producer and server; the loop until a signal. */
static int serve(const nf_config_t *cfg)
{
    char topic[160], err[512];
    snprintf(topic, sizeof topic, "%sread-events", cfg->kafka.topic_prefix);
    nf_edge_kafka_opts_t ko;
    nf_edge_opts_t eo;
    nf_edge_opts_from_config(cfg, cfg->kafka.brokers, topic, &ko, &eo);
    nf_edge_kafka_t *k = nf_edge_kafka_new(&ko, err, sizeof err);
    if (!k) {
        nf_log(NF_LOG_ERROR, "ingest", err, NF_LEND);
        return NF_EXIT_USAGE;
    }
    eo.kafka = k;
    nf_guard_opts_t go; /* only the events' routes here: their class's limit is the one used */
    nf_guard_opts_from_config(cfg, &go);
    ingest_t in = {.edge = nf_edge_new(&eo), .guard = nf_guard_new(&go, err, sizeof err)};
    nf_api_t api = {.listener = NF_API_ALL, .guard = in.guard, .edge = in.edge};
    if (!in.guard) {
        nf_log(NF_LOG_ERROR, "ingest", "cannot set up the readers' authentication",
               NF_LS("error", err), NF_LEND);
        nf_edge_free(in.edge);
        nf_edge_kafka_free(k);
        return NF_EXIT_USAGE;
    }
    nf_admin_hooks_t hooks = {.health = health,
                              .ready = ready,
                              .arg = &in,
                              .api = nf_api_get,
                              .post = nf_api_post,
                              .api_arg = &api,
                              .max_body = cfg->edge.max_body_bytes,
                              .drain_ms = cfg->edge.delivery_timeout_ms + 2000,
                              .max_connections = cfg->admin.max_connections,
                              .request_timeout_ms = cfg->admin.request_timeout_ms};
    nf_admin_t *a = in.edge ? nf_admin_start(cfg->admin.listen, (uint16_t)cfg->admin.port, &hooks,
                                             err, sizeof err)
                            : NULL;
    int rc = NF_EXIT_OK;
    if (!a) {
        nf_log(NF_LOG_ERROR, "ingest", in.edge ? err : "out of memory", NF_LEND);
        rc = NF_EXIT_RUNTIME;
    } else {
        nf_log(NF_LOG_INFO, "ingest", "taking events", NF_LS("listen", cfg->admin.listen),
               NF_LI("port", nf_admin_port(a)), NF_LS("topic", topic),
               NF_LS("brokers", cfg->kafka.brokers), NF_LEND);
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        int sig = 0;
        sigwait(&stop, &sig); /* blocked in every thread since the start: none is lost */
        nf_log(NF_LOG_INFO, "ingest", "stopping: answering the requests in progress",
               NF_LS("signal", sig == SIGINT ? "SIGINT" : "SIGTERM"), NF_LEND);
        nf_admin_stop(a);
    }
    nf_guard_free(in.guard);
    nf_edge_free(in.edge);
    nf_edge_kafka_free(k);
    return rc;
}

int nf_cli_ingest(int argc, char **argv)
{
    nf_config_t cfg;
    int rc = load(argc, argv, &cfg);
    if (rc != 0)
        return rc < 0 ? NF_EXIT_OK : rc;
    nf_log_set_level(cfg.log.level);
    if (nf_metrics_init(1) != 0) {
        fprintf(stderr, "newsflow ingest: cannot create the metrics registry\n");
        return NF_EXIT_RUNTIME;
    }
    /* SIGTERM and SIGINT are taken by sigwait in serve(): blocked here, before any thread
     * starts, so every thread inherits the mask and the signal waits for sigwait */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    return serve(&cfg);
}
