/* test_kafka_scan.c — the recovery scan (nf_kafka_scan_epoch) tells an epoch from an earlier
 * one of the same number by the records' nf-nonce header: after a state directory is put back
 * from an older copy, epoch N comes a second time while the output topics still hold the first
 * epoch N's records, and a scan that took those for the second one's would leave its records
 * unproduced. Runs against librdkafka's mock cluster (which shows committed records to the
 * scan's read_committed consumer as a broker does). */
#include "io/kafka.h"
#include "io/outbuf.h"
#include "runtime/metrics.h"

#include "nf_test.h"

#include <stdlib.h>

#define N 5

static nf_kafka_t *g_k;

/* Produces and commits epoch e (nonce) of N records to articles. */
static int produce(uint64_t e, uint64_t nonce)
{
    nf_outbuf_t b = {0};
    for (int i = 0; i < N; i++) {
        char key[32], value[64];
        int kl = snprintf(key, sizeof key, "a-%d", i);
        int vl =
            snprintf(value, sizeof value, "{\"epoch\":%llu,\"i\":%d}", (unsigned long long)e, i);
        if (nf_outbuf_add(&b, NF_TOPIC_ARTICLES, key, (size_t)kl, value, (size_t)vl) != 0)
            return -1;
    }
    nf_blob_t blob = {b.data, b.len};
    char err[512];
    int r = nf_kafka_produce_epoch(g_k, e, nonce, &blob, 1, NULL, NULL, 0, err, sizeof err);
    if (r != 0)
        fprintf(stderr, "produce epoch %llu: %s\n", (unsigned long long)e, err);
    nf_outbuf_free(&b);
    return r;
}

static long scan(uint64_t e, uint64_t nonce)
{
    uint8_t present[N / 8 + 1] = {0};
    char err[512];
    long n = nf_kafka_scan_epoch(g_k, e, nonce, NULL, present, N, err, sizeof err);
    if (n < 0)
        fprintf(stderr, "scan epoch %llu: %s\n", (unsigned long long)e, err);
    return n;
}

static void test_nonce_tells_epochs_apart(void)
{
    NF_REQUIRE(produce(7, 1111) == 0); /* the first epoch 7, committed */
    NF_CHECK_EQ(scan(7, 1111), N);     /* its own records: all found */
    NF_CHECK_EQ(scan(7, 2222), 0);     /* a second epoch 7 (another nonce): none of them */
    NF_CHECK_EQ(scan(7, 0), N);        /* nonce 0: epoch and seq alone, as before nf-nonce */
    NF_CHECK_EQ(scan(8, 1111), 0);     /* another epoch */
    NF_REQUIRE(produce(7, 2222) == 0); /* the second epoch 7 reaches the log too */
    NF_CHECK_EQ(scan(7, 2222), N);
    NF_CHECK_EQ(scan(7, 1111), N);
}

int main(void)
{
    char err[512];
    nf_metrics_init(1);
    nf_kafka_mock_t *m = nf_kafka_mock_new(1, 1, "", err, sizeof err);
    if (!m) {
        fprintf(stderr, "mock: %s\n", err);
        return 1;
    }
    nf_kafka_opts_t ko = {.brokers = nf_kafka_mock_bootstrap(m),
                          .exactly_once = true,
                          .group_id = "scan-test",
                          .transactional_id = "scan-test-writer",
                          .shards = 1};
    g_k = nf_kafka_new(&ko, err, sizeof err);
    if (!g_k) {
        fprintf(stderr, "kafka: %s\n", err);
        nf_kafka_mock_free(m);
        return 1;
    }
    NF_RUN(test_nonce_tells_epochs_apart);
    nf_kafka_free(g_k);
    nf_kafka_mock_free(m);
    nf_metrics_shutdown();
    return nf_test_report();
}
