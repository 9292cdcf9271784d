/* test_kafka_close.c — a consumer that leaves its group between JoinGroup and its first
 * assignment is freed without a crash. librdkafka before 2.3.0 aborts in the cooperative-sticky
 * assignor's state destroy when the client is destroyed then (its state is still NULL; seen in
 * CI: a SIGTERM while a three-process group formed, tests/chaos); nf_kafka_free leaves such a
 * client to the process's exit instead (src/io/kafka.c, destroy_safe).
 *
 * Against librdkafka's mock cluster, whose coordinator is made to answer SyncGroup only after
 * 60 s: the consumer's statistics show it joined (join_state wait-sync), then it is freed. Each
 * case runs in a child process, so that an abort shows as the child's signal. */
#include "io/kafka.h"
#include "runtime/metrics.h"

#include "nf_test.h"

#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define SYNC_DELAY_MS 60000
#define JOIN_WAIT_MS  45000

/* Polls k until its group state names join_state (stats every 5 s), at most JOIN_WAIT_MS. */
static bool wait_join_state(nf_kafka_t *k, const char *join_state)
{
    char st[192];
    for (int waited = 0; waited < JOIN_WAIT_MS; waited += 100) {
        nf_kafka_poll(k, 100);
        nf_kafka_group_state(k, st, sizeof st);
        if (strstr(st, join_state))
            return true;
    }
    fprintf(stderr, "group state after %d ms: \"%s\", want %s\n", JOIN_WAIT_MS, st, join_state);
    return false;
}

/* The child: 0 when the consumer reached wait-sync and was freed; 2 when it never got there. */
static int child(void)
{
    char err[512];
    nf_kafka_mock_t *m = nf_kafka_mock_new(1, 2, "", err, sizeof err);
    if (!m) {
        fprintf(stderr, "mock: %s\n", err);
        return 3;
    }
    rd_kafka_mock_cluster_t *mc = nf_kafka_mock_cluster(m);
    /* The next SyncGroup (ApiKey 14) is answered, without error, after SYNC_DELAY_MS. */
    rd_kafka_mock_broker_push_request_error_rtts(mc, 1, 14, 1, RD_KAFKA_RESP_ERR_NO_ERROR,
                                                 SYNC_DELAY_MS);
    nf_kafka_opts_t ko = {.brokers = nf_kafka_mock_bootstrap(m),
                          .group_id = "close-before-assignment",
                          .shards = 1,
                          .consume = true};
    nf_kafka_t *k = nf_kafka_new(&ko, err, sizeof err);
    if (!k || nf_kafka_subscribe(k, err, sizeof err) != 0) {
        fprintf(stderr, "kafka: %s\n", err);
        return 3;
    }
    bool joined = wait_join_state(k, "/wait-sync");
    nf_kafka_free(k); /* leaves the group; before the fix: SIGABRT in rd_kafka_destroy */
    /* the mock stays up: the client left to the process's exit may still talk to it */
    return joined ? 0 : 2;
}

static void test_free_between_join_and_first_assignment(void)
{
    fflush(NULL);
    pid_t pid = fork();
    NF_REQUIRE(pid >= 0);
    if (pid == 0)
        _exit(child());
    int status = 0;
    NF_REQUIRE(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status))
        fprintf(stderr, "the child died of signal %d (%s)\n", WTERMSIG(status),
                strsignal(WTERMSIG(status)));
    NF_CHECK(WIFEXITED(status));
    NF_CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
}

int main(void)
{
    nf_metrics_init(1);
    NF_RUN(test_free_between_join_and_first_assignment);
    nf_metrics_shutdown();
    return nf_test_report();
}
