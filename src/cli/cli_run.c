/* cli_run.c — `newsflow run` and `newsflow version`.
 *
 * run: load the configuration once, start the metrics registry, the shard runtime and the admin
 * server, then sit on the main thread handling signals and printing a progress line until
 * SIGTERM/SIGINT (or runtime.stop_after_ms). A first signal starts a graceful shutdown (actors
 * stop intake, rings drain, bounded by shutdown.timeout_ms); a second one exits at once. */
#include "cli/cli.h"

#include "runtime/admin.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char run_usage[] =
    "Usage: newsflow run [--config FILE] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Runs the job until SIGTERM or SIGINT (a second signal exits at once), or for\n"
    "runtime.stop_after_ms milliseconds when that is set.\n"
    "\n"
    "  --config FILE   configuration file (default: $NEWSFLOW_CONFIG, else built-in defaults,\n"
    "                  which are config/newsflow.json)\n"
    "  --set K=V       override one key, e.g. --set runtime.shards=2 (repeatable; wins over\n"
    "                  the file and NEWSFLOW_* environment variables)\n"
    "\n"
    "While running: JSON-lines logs on stderr, a progress line every log.progress_interval_ms,\n"
    "and http://ADMIN_LISTEN:ADMIN_PORT/metrics, /healthz, /readyz (default 127.0.0.1:9464).\n"
    "`newsflow config keys` lists every key with its default and range.\n"
    "\n"
    "Exit codes: 0 clean shutdown, 1 runtime failure or forced shutdown, 2 usage/config error.\n";

static nf_runtime_t *g_rt;
static volatile sig_atomic_t g_signals;

static void on_signal(int sig)
{
    (void)sig;
    if (++g_signals == 1) {
        if (g_rt)
            nf_runtime_request_stop(g_rt);
        return;
    }
    static const char msg[] = "newsflow: second signal, exiting without draining\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(NF_EXIT_RUNTIME);
}

static void noop(nf_shard_t *sh, void *arg)
{
    (void)sh;
    (void)arg;
}

/* Liveness: every shard answers a call within a second (a stuck loop fails it). */
static int health(void *arg, char *why, size_t whylen)
{
    nf_runtime_t *rt = arg;
    for (unsigned i = 0; i < nf_runtime_shard_count(rt); i++) {
        int r = nf_runtime_call(rt, i, noop, NULL, 1000);
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

static atomic_bool g_ready;

static bool ready(void *arg)
{
    (void)arg;
    return atomic_load(&g_ready);
}

static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (double)rss * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static int parse_args(int argc, char **argv, const char **path, char ***sets, unsigned *nsets)
{
    *path = getenv("NEWSFLOW_CONFIG");
    if (*path && !**path)
        *path = NULL;
    *sets = calloc((size_t)argc, sizeof(char *));
    *nsets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(run_usage, stdout);
            return 1;
        }
        if ((!strcmp(a, "--config") || !strcmp(a, "--set")) && i + 1 >= argc) {
            fprintf(stderr, "newsflow run: %s needs a value\n\n%s", a, run_usage);
            return -1;
        }
        if (!strcmp(a, "--config"))
            *path = argv[++i];
        else if (!strncmp(a, "--config=", 9))
            *path = a + 9;
        else if (!strcmp(a, "--set"))
            (*sets)[(*nsets)++] = argv[++i];
        else if (!strncmp(a, "--set=", 6))
            (*sets)[(*nsets)++] = (char *)a + 6;
        else {
            fprintf(stderr, "newsflow run: unknown option '%s'\n\n%s", a, run_usage);
            return -1;
        }
    }
    return 0;
}

int nf_cli_run(int argc, char **argv)
{
    const char *path;
    char **sets;
    unsigned nsets;
    int pa = parse_args(argc, argv, &path, &sets, &nsets);
    if (pa != 0) {
        free(sets);
        return pa > 0 ? NF_EXIT_OK : NF_EXIT_USAGE;
    }
    nf_config_t cfg;
    char err[NF_CONFIG_ERRLEN];
    int lr = nf_config_load(&cfg, path, sets, nsets, true, err, sizeof err);
    free(sets);
    if (lr != 0) {
        fprintf(stderr, "newsflow: config error: %s\n", err);
        return NF_EXIT_USAGE;
    }
    nf_log_set_level(cfg.log.level);

    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = cfg.runtime.shards;
    ro.pin = cfg.runtime.pin;
    ro.ring_capacity = cfg.runtime.ring_capacity;
    ro.batch = cfg.runtime.batch;
    ro.budget = cfg.runtime.budget;
    ro.shutdown_timeout_ms = cfg.shutdown.timeout_ms;
    if (ro.shards == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        ro.shards = cpus > 0 ? (unsigned)cpus : 1;
    }
    int mr = nf_metrics_init(ro.shards);
    if (mr != 0) {
        fprintf(stderr, "newsflow: cannot create the metrics registry: %s\n", strerror(-mr));
        return NF_EXIT_RUNTIME;
    }
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    if (!rt) {
        nf_log(NF_LOG_ERROR, "main", "cannot create the runtime", NF_LS("error", err), NF_LEND);
        return NF_EXIT_RUNTIME;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    g_rt = rt;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int exit_code = NF_EXIT_OK;
    nf_admin_t *admin = NULL;
    if (cfg.admin.enabled) {
        nf_admin_hooks_t hooks = {.health = health, .ready = ready, .arg = rt};
        admin = nf_admin_start(cfg.admin.listen, (uint16_t)cfg.admin.port, &hooks, err, sizeof err);
        if (!admin) {
            nf_log(NF_LOG_ERROR, "main", "cannot start the admin server", NF_LS("error", err),
                   NF_LS("hint", "set admin.port (0 = any free port) or admin.enabled=false"),
                   NF_LEND);
            g_rt = NULL;
            nf_runtime_destroy(rt);
            return NF_EXIT_RUNTIME;
        }
    }
    if (nf_runtime_start(rt) != 0) {
        nf_log(NF_LOG_ERROR, "main", "cannot start the shards", NF_LEND);
        nf_admin_stop(admin);
        g_rt = NULL;
        nf_runtime_destroy(rt);
        return NF_EXIT_RUNTIME;
    }
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)nf_config_hash(&cfg));
    nf_log(NF_LOG_INFO, "main", "newsflow started", NF_LS("version", NF_VERSION),
           NF_LS("commit", NF_GIT_COMMIT), NF_LI("shards", ro.shards),
           NF_LS("config", path ? path : "(defaults)"), NF_LS("config_hash", hash),
           NF_LS("admin", cfg.admin.enabled ? cfg.admin.listen : "off"),
           NF_LI("admin_port", admin ? nf_admin_port(admin) : 0), NF_LEND);
    atomic_store(&g_ready, true);

    uint64_t start = nf_now_ns();
    uint64_t stop_at =
        cfg.runtime.stop_after_ms ? start + cfg.runtime.stop_after_ms * 1000000ull : UINT64_MAX;
    uint64_t progress_every = (uint64_t)cfg.log.progress_interval_ms * 1000000ull;
    uint64_t next_progress = progress_every ? start + progress_every : UINT64_MAX;
    nf_runtime_stats_t prev = {0};
    while (!g_signals) {
        uint64_t now = nf_now_ns();
        if (now >= stop_at) {
            nf_log(NF_LOG_INFO, "main", "runtime.stop_after_ms reached; stopping",
                   NF_LI("stop_after_ms", cfg.runtime.stop_after_ms), NF_LEND);
            nf_runtime_request_stop(rt);
            break;
        }
        if (now >= next_progress) {
            nf_runtime_stats_t st;
            nf_runtime_stats(rt, &st);
            double secs = (double)progress_every / 1e9;
            nf_log(NF_LOG_INFO, "main", "progress",
                   NF_LI("uptime_s", (now - start) / 1000000000ull), NF_LI("messages", st.received),
                   NF_LF("messages_per_s", (double)(st.received - prev.received) / secs),
                   NF_LI("ring_full", st.ring_full), NF_LF("rss_mb", rss_mb()), NF_LEND);
            prev = st;
            next_progress += progress_every;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (g_signals)
        nf_log(NF_LOG_INFO, "main", "signal received; draining (a second signal exits at once)",
               NF_LI("timeout_ms", cfg.shutdown.timeout_ms), NF_LEND);
    atomic_store(&g_ready, false);
    int wr = nf_runtime_wait(rt);
    if (wr == -ETIMEDOUT)
        exit_code = NF_EXIT_RUNTIME;
    nf_runtime_stats_t st;
    nf_runtime_stats(rt, &st);
    nf_admin_stop(admin);
    g_rt = NULL;
    nf_runtime_destroy(rt);
    nf_log(exit_code ? NF_LOG_ERROR : NF_LOG_INFO, "main", "newsflow stopped",
           NF_LI("exit_code", exit_code), NF_LI("messages", st.received),
           NF_LI("dropped_at_shutdown", st.dropped_at_shutdown),
           NF_LF("uptime_s", (double)(nf_now_ns() - start) / 1e9), NF_LEND);
    nf_metrics_shutdown();
    return exit_code;
}

int nf_cli_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("newsflow %s\n", NF_VERSION);
    printf("commit    %s\n", NF_GIT_COMMIT);
    printf("liburing  %s (built against)\n", NF_LIBURING_VERSION);
    printf("cJSON     %s\n", cJSON_Version());
    printf("libmicrohttpd %s\n", MHD_get_version());
    return NF_EXIT_OK;
}
