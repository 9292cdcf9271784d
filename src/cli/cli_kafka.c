/* cli_kafka.c — `newsflow mock-kafka`: librdkafka's mock cluster in a process of its own, so that
 * tests can kill and restart the job while its Kafka (and the data in it) lives on.
 *
 * Prints "bootstrap=HOST:PORT" on stdout once the topics exist, then serves until SIGTERM or
 * SIGINT. Commands on stdin, one per line, inject broker faults through the mock API and answer
 * "ok" or "error: ..." on stdout:
 *   down ID | up ID                 a broker stops / starts answering
 *   rtt ID MS                       adds MS of round-trip time to a broker
 *   errors API COUNT ERROR          the next COUNT requests of API (produce, fetch, end_txn,
 *                                   add_partitions_to_txn, txn_offset_commit, init_producer_id,
 *                                   find_coordinator, metadata, offset_commit, offset_fetch,
 *                                   join_group, heartbeat, list_offsets) fail with ERROR (a
 *                                   librdkafka error name without RD_KAFKA_RESP_ERR_, e.g.
 *                                   NOT_LEADER_FOR_PARTITION, REQUEST_TIMED_OUT,
 *                                   COORDINATOR_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS) */
#include "cli/cli.h"
#include "io/kafka.h"

#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char mock_usage[] =
    "Usage: newsflow mock-kafka [--partitions N] [--brokers N] [--topic-prefix P]\n"
    "\n"
    "Runs librdkafka's mock Kafka cluster in this process, creates every newsflow topic\n"
    "(sources, read-events, articles, fetch-log, story-clusters, trending, interest-updates,\n"
    "dead-letters, breaking-news, notifications) with N partitions (default 4), prints "
    "bootstrap=HOST:PORT and\n"
    "serves until SIGTERM/SIGINT. Point the job at it with --set kafka.brokers=HOST:PORT.\n"
    "\n"
    "Broker faults, one command per line on stdin (answers ok / error: ...):\n"
    "  down ID | up ID          broker ID (1..N) stops / resumes answering\n"
    "  rtt ID MS                add MS milliseconds of round-trip time\n"
    "  errors API COUNT ERROR   fail the next COUNT requests of API (produce, fetch, end_txn,\n"
    "                           add_partitions_to_txn, txn_offset_commit, init_producer_id,\n"
    "                           find_coordinator, metadata, offset_commit, offset_fetch,\n"
    "                           join_group, heartbeat, list_offsets) with ERROR, e.g.\n"
    "                           NOT_LEADER_FOR_PARTITION or REQUEST_TIMED_OUT\n"
    "\n"
    "It is a test double: it keeps a few MB per partition in memory, does not hide aborted\n"
    "transactions from read_committed consumers and does not store transactional offset\n"
    "commits (newsflow's epochs stay exactly-once regardless; see src/io/kafka.h).\n";

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

static const struct {
    const char *name;
    int16_t key;
} apis[] = {{"produce", 0},
            {"fetch", 1},
            {"list_offsets", 2},
            {"metadata", 3},
            {"offset_commit", 8},
            {"offset_fetch", 9},
            {"find_coordinator", 10},
            {"join_group", 11},
            {"heartbeat", 12},
            {"init_producer_id", 22},
            {"add_partitions_to_txn", 24},
            {"end_txn", 26},
            {"txn_offset_commit", 28}};

static int error_code(const char *name)
{
    const struct rd_kafka_err_desc *d;
    size_t n;
    rd_kafka_get_err_descs(&d, &n);
    for (size_t i = 0; i < n; i++)
        if (d[i].name && !strcmp(d[i].name, name))
            return d[i].code;
    return -1;
}

static void command(rd_kafka_mock_cluster_t *mc, char *line)
{
    char verb[32] = "", a[64] = "", c[64] = "";
    long b = 0;
    int n = sscanf(line, "%31s %63s %ld %63s", verb, a, &b, c);
    if (n < 1) {
        return;
    }
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    if ((!strcmp(verb, "down") || !strcmp(verb, "up")) && n >= 2) {
        int32_t id = (int32_t)atoi(a);
        e = !strcmp(verb, "down") ? rd_kafka_mock_broker_set_down(mc, id)
                                  : rd_kafka_mock_broker_set_up(mc, id);
    } else if (!strcmp(verb, "rtt") && n >= 3) {
        e = rd_kafka_mock_broker_set_rtt(mc, (int32_t)atoi(a), (int)b);
    } else if (!strcmp(verb, "errors") && n == 4) {
        int16_t key = -1;
        for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++)
            if (!strcmp(apis[i].name, a))
                key = apis[i].key;
        int code = error_code(c);
        if (key < 0 || code < 0 || b <= 0 || b > 100000) {
            printf("error: unknown API \"%s\" or error \"%s\" or bad count %ld\n", a, c, b);
            fflush(stdout);
            return;
        }
        rd_kafka_resp_err_t *errs = malloc((size_t)b * sizeof *errs);
        if (!errs) {
            printf("error: out of memory\n");
            fflush(stdout);
            return;
        }
        for (long i = 0; i < b; i++)
            errs[i] = (rd_kafka_resp_err_t)code;
        rd_kafka_mock_push_request_errors_array(mc, key, (size_t)b, errs);
        free(errs);
    } else {
        printf("error: unknown command \"%s\" (down ID, up ID, rtt ID MS, errors API COUNT "
               "ERROR)\n",
               verb);
        fflush(stdout);
        return;
    }
    if (e)
        printf("error: %s\n", rd_kafka_err2str(e));
    else
        printf("ok\n");
    fflush(stdout);
}

int nf_cli_mock_kafka(int argc, char **argv)
{
    unsigned partitions = 4, brokers = 1;
    const char *prefix = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(mock_usage, stdout);
            return NF_EXIT_OK;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "newsflow mock-kafka: %s needs a value\n\n%s", a, mock_usage);
            return NF_EXIT_USAGE;
        }
        const char *v = argv[++i];
        char *end;
        unsigned long x = strtoul(v, &end, 10);
        if (!strcmp(a, "--partitions") && !*end && x >= 1 && x <= 1024)
            partitions = (unsigned)x;
        else if (!strcmp(a, "--brokers") && !*end && x >= 1 && x <= 16)
            brokers = (unsigned)x;
        else if (!strcmp(a, "--topic-prefix"))
            prefix = v;
        else {
            fprintf(stderr, "newsflow mock-kafka: bad option %s %s\n\n%s", a, v, mock_usage);
            return NF_EXIT_USAGE;
        }
    }
    char err[512];
    nf_kafka_mock_t *m = nf_kafka_mock_new(brokers, partitions, prefix, err, sizeof err);
    if (!m) {
        fprintf(stderr, "newsflow mock-kafka: %s\n", err);
        return NF_EXIT_RUNTIME;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    printf("bootstrap=%s\n", nf_kafka_mock_bootstrap(m));
    fflush(stdout);
    char line[256];
    size_t used = 0;
    bool stdin_open = true;
    while (!g_stop) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        if (!stdin_open || poll(&p, 1, 200) <= 0) {
            if (!stdin_open)
                usleep(200000);
            continue;
        }
        ssize_t r = read(0, line + used, sizeof line - 1 - used);
        if (r <= 0) {
            stdin_open = false; /* no controller: serve until a signal */
            continue;
        }
        used += (size_t)r;
        line[used] = 0;
        char *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            command(nf_kafka_mock_cluster(m), line);
            used -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, used + 1);
        }
        if (used == sizeof line - 1)
            used = 0; /* an over-long line: dropped */
    }
    nf_kafka_mock_free(m);
    return NF_EXIT_OK;
}
