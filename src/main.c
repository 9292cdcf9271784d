/* main.c — the newsflow command: dispatches to the subcommands in src/cli/. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "newsflow — stream job for a news aggregator: feeds and reader clicks in, deduplicated\n"
    "articles, story clusters, trending lists and reader interest vectors out.\n"
    "\n"
    "Usage: newsflow <command> [options]\n"
    "\n"
    "Commands:\n"
    "  run [--config FILE] [--set SECTION.KEY=VALUE]... [--sink SPEC] [--from-checkpoint ID]\n"
    "      [--reset group|earliest]\n"
    "                      run the job until SIGTERM/SIGINT (or runtime.stop_after_ms)\n"
    "  ingest [--config FILE] [--set ...]\n"
    "                      the HTTP edge alone: readers' events (POST /v1/events) into the\n"
    "                      read-events topic of kafka.brokers, 202 once the broker has them\n"
    "  sink postgres [--migrate] [--config FILE] [--set ...]\n"
    "                      the job's committed outputs into PostgreSQL (postgres.dsn), every\n"
    "                      record once; --migrate creates or upgrades its schema\n"
    "  parse FILE|-|URL [--base URL] [--fetched-at RFC3339|MS] [--taxonomy FILE] [--compact]\n"
    "                      parse one saved feed the way the job does; print it as JSON\n"
    "  config check FILE [--set ...] [--print]\n"
    "                      validate a config file; --print shows the effective config\n"
    "  config defaults     print the default configuration (config/newsflow.json)\n"
    "  config keys         every key with its type, default, range and meaning\n"
    "  checkpoints list [--json] | show ID | verify ID | delete ID [--force]\n"
    "              | export ID DIR | import DIR\n"
    "                      [--state-dir DIR] [--config FILE] [--set ...]\n"
    "                      inspect, verify, delete, export or import the named checkpoints\n"
    "                      of state.dir\n"
    "  topics create [--partitions N] [--replication R] | list   [--config FILE] [--set ...]\n"
    "                      create (or list) the job's topics on the cluster of kafka.brokers\n"
    "  mock-kafka [--partitions N] [--brokers N] [--topic-prefix P]\n"
    "                      a mock Kafka cluster (librdkafka's) in its own process, for tests\n"
    "                      that kill and restart the job; prints bootstrap=HOST:PORT\n"
    "  status [--json]     the running job (else its committed state): partitions, lag,\n"
    "                      epoch, seconds since the last commit, restore state, failing sources\n"
    "  sources list [--failing] [--json]\n"
    "                      every source (or the failing ones): ok, backoff, dead; last error\n"
    "  sources partition --partitions N URL|HOST...\n"
    "                      the sources topic's partition of each feed's host (consumer group)\n"
    "  sources add URL | pause|resume|remove|crawl-now ID|URL... | import FILE.opml | export\n"
    "                      change the sources topic, read back what the job applied\n"
    "  routes              every HTTP route: method, path, who may ask (docs/routes.md)\n"
    "  version             version, git commit and library versions\n"
    "  help                this text; `newsflow <command> --help` for a command's options\n"
    "\n"
    "Configuration is read once at start: built-in defaults, then the file (--config or\n"
    "$NEWSFLOW_CONFIG), then environment variables NEWSFLOW_<SECTION>_<KEY> (e.g.\n"
    "NEWSFLOW_RUNTIME_SHARDS=2), then --set options, later ones winning. Unknown keys and bad\n"
    "values are errors naming the key, file and line.\n"
    "\n"
    "Observability: JSON-lines logs on stderr; Prometheus metrics, /healthz and /readyz on\n"
    "http://127.0.0.1:9464 (admin.listen, admin.port).\n"
    "\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return NF_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage, stdout);
        return NF_EXIT_OK;
    }
    if (!strcmp(cmd, "run"))
        return nf_cli_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "config"))
        return nf_cli_config(argc - 1, argv + 1);
    if (!strcmp(cmd, "parse"))
        return nf_cli_parse(argc - 1, argv + 1);
    if (!strcmp(cmd, "checkpoints"))
        return nf_cli_checkpoints(argc - 1, argv + 1);
    if (!strcmp(cmd, "topics"))
        return nf_cli_topics(argc - 1, argv + 1);
    if (!strcmp(cmd, "mock-kafka"))
        return nf_cli_mock_kafka(argc - 1, argv + 1);
    if (!strcmp(cmd, "ingest"))
        return nf_cli_ingest(argc - 1, argv + 1);
    if (!strcmp(cmd, "sink"))
        return nf_cli_sink(argc - 1, argv + 1);
    if (!strcmp(cmd, "status"))
        return nf_cli_status(argc - 1, argv + 1);
    if (!strcmp(cmd, "sources"))
        return nf_cli_sources(argc - 1, argv + 1);
    if (!strcmp(cmd, "routes"))
        return nf_cli_routes(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version"))
        return nf_cli_version(argc - 1, argv + 1);
    fprintf(stderr, "newsflow: unknown command '%s'\n\n%s", cmd, usage);
    return NF_EXIT_USAGE;
}
