/* cli_run.c — `newsflow run`, `newsflow routes` and `newsflow version`.
 *
 * run: parse the arguments, load the configuration once, create the metrics registry, start the
 * job (job/job.h: state, Kafka, the epoch coordinator, the shards, the HTTP servers), wait for
 * SIGTERM/SIGINT (or runtime.stop_after_ms), stop it. A first signal commits a final epoch with
 * input stopped, then drains the shards (bounded by shutdown.timeout_ms); a second one exits at
 * once (what was not committed is redone after a restart). */
#include "cli/cli.h"

#include "feed/feed.h"
#include "io/fetch.h"
#include "job/job.h"
#include "runtime/buildinfo.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "serve/routes.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char run_usage[] =
    "Usage: newsflow run [--config FILE] [--set SECTION.KEY=VALUE]... [--sink SPEC]\n"
    "                    [--from-checkpoint ID|latest] [--reset group|earliest]\n"
    "\n"
    "Runs the job until SIGTERM or SIGINT (a second signal exits at once), or for\n"
    "runtime.stop_after_ms milliseconds when that is set.\n"
    "\n"
    "  --config FILE   configuration file (default: $NEWSFLOW_CONFIG, else built-in defaults,\n"
    "                  which are config/newsflow.json)\n"
    "  --set K=V       override one key, e.g. --set runtime.shards=2 (repeatable; wins over\n"
    "                  the file and NEWSFLOW_* environment variables)\n"
    "  --sink SPEC     also write every committed output here: jsonl:PATH (one JSON object\n"
    "                  per line, - = stdout) or none; same as --set sink.spec=SPEC\n"
    "  --from-checkpoint ID\n"
    "                  before starting, make named checkpoint ID (chk-N, N, or latest) the live\n"
    "                  state: state, outputs and Kafka input positions roll back to it. It is\n"
    "                  verified in full (every checksum) first; a refusal (exit 1) changes\n"
    "                  nothing; any runtime.shards fits. The replaced state is kept as\n"
    "                  state.dir/db.replaced-UTCTIME-epochN (the newest checkpoint.retain_count\n"
    "                  of them); newer checkpoints are kept. See `newsflow checkpoints list`\n"
    "  --reset group|earliest\n"
    "                  start over on purpose where the state stands behind the consumer group\n"
    "                  (an empty, lost or older state.dir, without state.changelog): a start\n"
    "                  refuses that (exit 2) rather than emit again what the group committed.\n"
    "                  group = go on at the group's committed offsets with the state as it is\n"
    "                  (keyed outputs start again: versions from 1); earliest = read the inputs\n"
    "                  again from the state's positions (everything since is emitted again).\n"
    "                  See docs/runbooks.md \"Lost disk\"\n"
    "\n"
    "Feeds come from sources.urls, sources.file and the sources topic (which overrides a\n"
    "configured feed with the same source_id); read events from the read-events topic.\n"
    "Outputs — articles (one per URL), one fetch-log record per fetch attempt, story-clusters,\n"
    "trending lists, interest-updates, breaking-news (stories read far faster than their "
    "topic's),\n"
    "notifications (breaking news to the readers subscribed to its topic, capped per day),\n"
    "dead-letters for input records that cannot be decoded — go to Kafka (kafka.brokers; `newsflow "
    "topics create` makes them on a cluster;\n"
    "\"embedded\" runs an in-process mock cluster, \"\" runs without Kafka) in epochs of\n"
    "checkpoint.interval_ms: state (state.dir), outputs and input positions commit together,\n"
    "so a kill -9 at any instant loses and duplicates nothing after a restart.\n"
    "\n"
    "While running: JSON-lines logs on stderr, a progress line every log.progress_interval_ms,\n"
    "and http://ADMIN_LISTEN:ADMIN_PORT/metrics, /healthz, /readyz (default 127.0.0.1:9464).\n"
    "`newsflow config keys` lists every key with its default and range.\n"
    "\n"
    "Exit codes: 0 clean shutdown, 1 runtime failure or forced shutdown, 2 usage/config error.\n";

static volatile sig_atomic_t g_signals;

/* The main loop notices the first signal: it commits a final epoch before stopping shards. */
static void on_signal(int sig)
{
    (void)sig;
    if (++g_signals == 1)
        return;
    nf_log_signal_safe(NF_LOG_WARN, "main",
                       "second signal: exiting at once without draining (what the last committed "
                       "epoch does not hold is read again after a restart)");
    _exit(NF_EXIT_RUNTIME);
}

typedef struct run_args {
    const char *config;
    char **sets;
    unsigned nsets;
    char sink_set[1100]; /* --sink SPEC as sink.spec=SPEC */
    nf_job_args_t job;
} run_args_t;

/* The value of --NAME V or --NAME=V at argv[*i] (NAME without dashes); NULL if it is not that
 * option, "" + error when its value is missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *missing)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    *missing = false;
    if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
        return NULL;
    if (a[2 + n] == '=')
        return a + 3 + n;
    if (a[2 + n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

/* One of run's own options at argv[*i]: 1 taken, 0 not one of them, or an exit code. */
static int run_opt(int argc, char **argv, int *i, run_args_t *a)
{
    bool missing;
    const char *v;
    if ((v = opt_value(argc, argv, i, "from-checkpoint", &missing)) || missing) {
        if (!v || !*v)
            return nf_cli_bad_usage("run", run_usage, "--from-checkpoint needs an id", NULL);
        a->job.from_checkpoint = v;
    } else if ((v = opt_value(argc, argv, i, "reset", &missing)) || missing) {
        if (!v || (strcmp(v, "group") != 0 && strcmp(v, "earliest") != 0))
            return nf_cli_bad_usage("run", run_usage, "--reset needs group or earliest", NULL);
        a->job.reset = !strcmp(v, "group") ? NF_RESET_GROUP : NF_RESET_EARLIEST;
    } else if ((v = opt_value(argc, argv, i, "sink", &missing)) || missing) {
        if (!v)
            return nf_cli_bad_usage("run", run_usage, "--sink needs a value", NULL);
        snprintf(a->sink_set, sizeof a->sink_set, "sink.spec=%s", v);
        a->sets[a->nsets++] = a->sink_set;
    } else {
        return 0;
    }
    return 1;
}

/* -1: --help printed; 0 ok; else an exit code (the usage error printed). */
static int parse_args(int argc, char **argv, run_args_t *a)
{
    a->config = nf_cli_config_default();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(run_usage, stdout);
            return -1;
        }
        int r = nf_cli_config_opt(argc, argv, &i, &a->config, a->sets, &a->nsets);
        if (r < 0)
            return nf_cli_bad_usage("run", run_usage, "option needs a value:", argv[i]);
        if (r == 0 && (r = run_opt(argc, argv, &i, a)) == 0)
            return nf_cli_bad_usage("run", run_usage, "unknown option", argv[i]);
        if (r > 1)
            return r;
    }
    a->job.config_path = a->config;
    return 0;
}

/* The process's side of a run: the metrics registry, the libraries' global state, signals. */
static int process_setup(const nf_config_t *cfg)
{
    nf_log_set_level(cfg->log.level);
    int mr = nf_metrics_init(nf_job_shards(cfg));
    if (mr != 0) {
        fprintf(stderr, "newsflow: cannot create the metrics registry: %s\n", strerror(-mr));
        return NF_EXIT_RUNTIME;
    }
    nf_fetch_global_init();
    nf_feed_global_init();
    if ((mr = nf_buildinfo_register_metric()) != 0)
        nf_log(NF_LOG_WARN, "main", "newsflow_build_info not registered", NF_LI("errno", -mr),
               NF_LEND);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int nf_cli_run(int argc, char **argv)
{
    static run_args_t a; /* the job keeps pointers into it (the checkpoint id, the path) */
    a.sets = calloc((size_t)argc + 1, sizeof(char *));
    if (!a.sets)
        return NF_EXIT_RUNTIME;
    int pa = parse_args(argc, argv, &a);
    if (pa != 0) {
        free(a.sets);
        return pa < 0 ? NF_EXIT_OK : pa;
    }
    static nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    int lr = nf_config_load(&cfg, a.config, a.sets, a.nsets, true, err, sizeof err);
    free(a.sets);
    if (lr != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }
    int code = process_setup(&cfg);
    nf_job_t *job = NULL;
    if (!code)
        code = nf_job_start(&cfg, &a.job, &job);
    if (!code) {
        nf_job_wait(job, &g_signals);
        code = nf_job_stop(job, g_signals != 0);
    }
    nf_metrics_shutdown();
    return code;
}

static const char routes_usage[] =
    "Usage: newsflow routes\n"
    "\n"
    "Prints every HTTP route of the job's servers as a Markdown table: method, path, who may\n"
    "ask, which part answers it. docs/routes.md is this output; docs/openapi.json describes\n"
    "each route's parameters and answers.\n";

int nf_cli_routes(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(routes_usage, stdout);
        return NF_EXIT_OK;
    }
    if (argc > 1)
        return nf_cli_bad_usage("routes", routes_usage, "unexpected argument", argv[1]);
    nf_route_markdown(stdout);
    return NF_EXIT_OK;
}

int nf_cli_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    nf_buildinfo_item_t items[NF_BUILDINFO_MAX];
    size_t n = nf_buildinfo(items);
    /* "newsflow VERSION" first: scripts read the version from that line. */
    printf("newsflow %s\n", items[0].value);
    for (size_t i = 1; i < n; i++)
        printf("%-10s %s%s\n", items[i].name, items[i].value,
               items[i].built && i > 1 ? " (built against)" : "");
    return NF_EXIT_OK;
}
