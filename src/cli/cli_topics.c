/* cli_topics.c — `newsflow topics create|list`: the job's Kafka topics (docs/topics.md,
 * docs/ARCHITECTURE.md §5) on a real cluster. The job itself never creates topics (a missing one
 * stops it at start with its name), so an operator makes them once with the partition count the
 * deployment needs; the embedded and `mock-kafka` clusters create their own. Names, brokers and
 * librdkafka properties come from the configuration, loaded exactly as `newsflow run` loads it. */
#include "cli/cli.h"
#include "io/kafka.h"
#include "runtime/config.h"
#include "runtime/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char topics_usage[] =
    "Usage: newsflow topics create [--partitions N] [--replication R] [OPTIONS]\n"
    "       newsflow topics list [OPTIONS]\n"
    "\n"
    "The job's topics on the Kafka cluster of kafka.brokers, named with kafka.topic_prefix:\n"
    "read-events and sources (inputs; sources is compacted), articles, fetch-log,\n"
    "story-clusters, trending, interest-updates, dead-letters, breaking-news and notifications "
    "(outputs).\n"
    "\n"
    "  create   creates the topics that do not exist (those that do are left as they are),\n"
    "           then lists them; one line per topic: NAME created|exists|failed PARTITIONS\n"
    "  list     one line per topic: NAME exists|missing PARTITIONS (exit 1 if one is missing)\n"
    "\n"
    "  --partitions N    partitions of each new topic (default: kafka.partitions, 4). Input\n"
    "                    partitions bound how many processes and shards share the work.\n"
    "  --replication R   replicas of each new topic (default: the broker's\n"
    "                    default.replication.factor); 3 with min.insync.replicas 2 is the usual\n"
    "                    production choice\n"
    "  --config FILE     configuration file (default: $NEWSFLOW_CONFIG, else built-in defaults)\n"
    "  --set K=V         override a configuration key, e.g. --set kafka.brokers=HOST:9092\n"
    "                    (repeatable; NEWSFLOW_<SECTION>_<KEY> variables apply as for run)\n"
    "\n"
    "kafka.brokers must name a real cluster: \"embedded\" and \"\" have nothing to create.\n"
    "\n"
    "Exit codes: 0 every topic exists, 1 a topic is missing or could not be created, or the\n"
    "cluster did not answer, 2 usage or configuration error.\n";

static void print_topic(void *arg, const char *topic, const char *outcome, int partitions,
                        const char *error)
{
    (void)arg;
    if (error)
        printf("%s %s: %s\n", topic, outcome, error);
    else
        printf("%s %s %d\n", topic, outcome, partitions);
}

static bool parse_count(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* What the options after the subcommand say. */
typedef struct {
    const char *config;
    char **sets; /* room for argc entries; freed once the configuration is loaded */
    unsigned nsets;
    long partitions, replication; /* 0 and -1: not given */
} topics_args_t;

/* The count after --partitions or --replication at argv[*i] (*i moved past it): 1..hi, else a
 * usage error that says so with `what`. */
static int count_opt(int argc, char **argv, int *i, long hi, const char *what, long *out)
{
    const char *opt = argv[*i];
    if (*i + 1 >= argc)
        return nf_cli_bad_usage("topics", topics_usage, "option needs a value:", opt);
    const char *v = argv[++*i];
    if (!parse_count(v, 1, hi, out))
        return nf_cli_bad_usage("topics", topics_usage, what, v);
    return NF_EXIT_OK;
}

/* The options after the subcommand: NF_EXIT_OK, NF_EXIT_USAGE (said on stderr), or -1 when
 * --help printed the usage. */
static int topics_args(int argc, char **argv, bool create, topics_args_t *t)
{
    int rc = NF_EXIT_OK;
    for (int i = 2; i < argc && rc == NF_EXIT_OK; i++) {
        const char *a = argv[i];
        int co = nf_cli_config_opt(argc, argv, &i, &t->config, t->sets, &t->nsets);
        if (co != 0) { /* --config or --set, taken */
            if (co < 0)
                rc = nf_cli_bad_usage("topics", topics_usage, "option needs a value:", a);
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(topics_usage, stdout);
            rc = -1;
        } else if (create && !strcmp(a, "--partitions")) {
            rc = count_opt(argc, argv, &i, NF_EPOCH_MAX_PARTITIONS,
                           "--partitions takes 1..1024, not", &t->partitions);
        } else if (create && !strcmp(a, "--replication")) {
            rc = count_opt(argc, argv, &i, 32767, "--replication takes a number of replicas, not",
                           &t->replication);
        } else {
            rc = nf_cli_bad_usage("topics", topics_usage, "unknown option", a);
        }
    }
    return rc;
}

/* Parses the options and loads the configuration as `run` does ($NEWSFLOW_CONFIG, --config,
 * NEWSFLOW_* variables, --set): NF_EXIT_OK, an exit code (said on stderr), or -1 after --help. */
static int topics_load(int argc, char **argv, bool create, topics_args_t *t, nf_config_t *cfg)
{
    t->config = nf_cli_config_default();
    if (!(t->sets = calloc((size_t)argc, sizeof *t->sets))) {
        fputs("newsflow topics: out of memory\n", stderr);
        return NF_EXIT_RUNTIME;
    }
    int rc = topics_args(argc, argv, create, t);
    char err[NF_CONFIG_ERRLEN];
    if (rc == NF_EXIT_OK &&
        nf_config_load(cfg, t->config, t->sets, t->nsets, true, err, sizeof err) != 0) {
        fprintf(stderr, "newsflow topics: config error: %s\n", err);
        rc = NF_EXIT_USAGE;
    }
    free(t->sets);
    return rc;
}

int nf_cli_topics(int argc, char **argv)
{
    if (argc < 2)
        return nf_cli_bad_usage("topics", topics_usage, "missing subcommand (create or list)",
                                NULL);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(topics_usage, stdout);
        return NF_EXIT_OK;
    }
    bool create = !strcmp(argv[1], "create");
    if (!create && strcmp(argv[1], "list") != 0)
        return nf_cli_bad_usage("topics", topics_usage, "unknown subcommand", argv[1]);
    topics_args_t t = {.replication = -1};
    nf_config_t cfg;
    int rc = topics_load(argc, argv, create, &t, &cfg);
    if (rc != NF_EXIT_OK)
        return rc < 0 ? NF_EXIT_OK : rc;
    nf_log_set_level(cfg.log.level);
    if (!cfg.kafka.brokers[0] || !strcmp(cfg.kafka.brokers, "embedded")) {
        fprintf(stderr,
                "newsflow topics: kafka.brokers is \"%s\": name a Kafka cluster, e.g. --set "
                "kafka.brokers=127.0.0.1:9092 (the embedded cluster creates its own topics)\n",
                cfg.kafka.brokers);
        return NF_EXIT_USAGE;
    }
    nf_kafka_topics_opts_t o = {.brokers = cfg.kafka.brokers,
                                .properties = cfg.kafka.properties,
                                .prefix = cfg.kafka.topic_prefix,
                                .partitions =
                                    t.partitions ? (unsigned)t.partitions : cfg.kafka.partitions,
                                .replication = (int)t.replication,
                                .timeout_ms = 10000};
    char err[NF_CONFIG_ERRLEN];
    int r = nf_kafka_topics(&o, create, print_topic, NULL, err, sizeof err);
    fflush(stdout);
    if (r != 0) {
        fprintf(stderr, "newsflow topics: %s\n", err);
        return NF_EXIT_RUNTIME;
    }
    return NF_EXIT_OK;
}
