/* test_epoch.c — the epoch protocol end to end in one process, so that ASan/UBSan and TSan see
 * the coordinator, the cut across shards, the store and the Kafka producer together:
 *   - epochs commit keyed state and outputs; a fresh coordinator over the same state sees the
 *     committed epoch and positions;
 *   - after a failure of the job (nf_runtime_fail) nothing more commits;
 *   - a producer in a fatal error (not fencing) is replaced and its epoch still commits once;
 *   - a child process killed (fault injection) at each point of the commit protocol leaves a
 *     state from which recovery produces every output exactly once (read back from the embedded
 *     mock cluster) and applies the pending state (roll forward).
 * Kafka is librdkafka's mock cluster, started in this (parent) process. */
#include "io/kafka.h"
#include "nf_test.h"
#include "runtime/runtime.h"
#include "state/epoch.h"
#include "state/kstate.h"
#include "state/store.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHARDS    2
#define PER_EPOCH 40

typedef struct job {
    nf_store_t *st;
    nf_epoch_t *ep;
    nf_kafka_t *k;
    nf_runtime_t *rt;
    nf_kstate_t *ks[SHARDS];
    unsigned next; /* next record number to emit */
} job_t;

static const char *g_boot;

/* The participant takes its snapshot by reference (as the job's read path does): the cut only
 * freezes the kstate, snapshot_more writes it. test_snapshot_by_reference sets g_poke: the
 * shard's keys are changed to that value after each call of snapshot_more wrote its slice, as
 * events taken after the resume would. */
static uint64_t g_poke;
static bool g_fail_at_snapshot; /* test_job_fails_at_the_cut: a shard fails right after it froze */
static unsigned g_poke_keys;    /* keys {2, i}, i < g_poke_keys, key group = the shard's index */

static void p_snapshot(nf_shard_t *sh, void *self, nf_store_batch_t *b, uint64_t epoch)
{
    nf_kstate_freeze(self, b, epoch);
    if (g_fail_at_snapshot)
        nf_runtime_fail(nf_shard_runtime(sh));
}

static bool p_snapshot_more(nf_shard_t *sh, void *self, size_t max)
{
    size_t left = nf_kstate_freeze_step(self, max);
    for (unsigned i = 0; g_poke && i < g_poke_keys; i++)
        if (nf_kstate_put(self, (uint16_t)nf_shard_index(sh), (nf_id128_t){2, i}, &g_poke,
                          sizeof g_poke, 0) != 0)
            abort();
    return left == 0;
}

static void p_committed(nf_shard_t *sh, void *self, uint64_t epoch)
{
    nf_kstate_committed(self, epoch);
    (void)sh;
}

static const nf_epoch_participant_t part = {
    .snapshot = p_snapshot, .snapshot_more = p_snapshot_more, .committed = p_committed};

static int a_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    job_t *j = ctx;
    unsigned s = nf_shard_index(sh);
    nf_kstate_opts_t o = {.kind = NF_KIND_READS, .initial_capacity = 64};
    j->ks[s] = nf_kstate_new(j->st, &o);
    if (!j->ks[s] || nf_epoch_participant_add(j->ep, sh, &part, j->ks[s]) != 0) {
        nf_kstate_free(j->ks[s]);
        j->ks[s] = NULL;
        snprintf(err, errlen, "out of memory or too many epoch participants");
        return -1;
    }
    *self = j->ks[s];
    return 0;
}

static void a_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    (void)sh;
    (void)self;
    (void)m;
}

static void a_fini(nf_shard_t *sh, void *self)
{
    nf_kstate_free(self);
    (void)sh;
}

static const nf_actor_ops_t ops = {
    .name = "epoch_test", .init = a_init, .handle = a_handle, .fini = a_fini};

/* On shard s: one output per record number i with i % SHARDS == s, and state key 0 holding the
 * count of records this shard emitted. */
static void emit_some(nf_shard_t *sh, void *arg)
{
    job_t *j = arg;
    unsigned s = nf_shard_index(sh);
    for (unsigned i = j->next; i < j->next + PER_EPOCH; i++) {
        if (i % SHARDS != s)
            continue;
        char key[32], val[64];
        int kl = snprintf(key, sizeof key, "r%u", i);
        int vl = snprintf(val, sizeof val, "{\"i\":%u}", i);
        if (nf_epoch_emit(j->ep, s, NF_TOPIC_TRENDING, key, (size_t)kl, val, (size_t)vl) != 0)
            abort();
        nf_id128_t id = {1, s}; /* one counter per shard */
        uint32_t len = 0;
        uint64_t n = 0;
        const void *v = nf_kstate_get(j->ks[s], 0, id, 0, &len, NULL);
        if (v && len == sizeof n)
            memcpy(&n, v, sizeof n);
        n++;
        if (nf_kstate_put(j->ks[s], 0, id, &n, sizeof n, 0) != 0)
            abort();
    }
}

/* Set in the crashing children: every epoch's state goes in as table files (the apply from the
 * batches in hand), while the parents apply through the memtable (the default for epochs this
 * small) and roll forward from the pending record's copies. */
static size_t g_ingest_min = NF_STORE_INGEST_MIN_BYTES;

static int job_open(job_t *j, const char *dir, char *err, size_t errlen)
{
    memset(j, 0, sizeof *j);
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    so.ingest_min_bytes = g_ingest_min;
    if (!(j->st = nf_store_open(dir, &so, err, errlen)))
        return -1;
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = SHARDS;
    if (!(j->rt = nf_runtime_create(&ro, err, errlen)))
        return -1;
    nf_epoch_opts_t eo = {.interval_ms = 1000000, .retain_every = 2, .retain_count = 2};
    if (!(j->ep = nf_epoch_new(j->rt, j->st, NULL, &eo, err, errlen)))
        return -1;
    nf_kafka_opts_t ko = {.brokers = g_boot,
                          .exactly_once = true,
                          .group_id = "epoch-test",
                          .transactional_id = "epoch-test-writer",
                          .shards = SHARDS,
                          .fault = nf_epoch_fault_cb,
                          .arg = j->ep};
    if (!(j->k = nf_kafka_new(&ko, err, errlen)))
        return -1;
    nf_kafka_ops_t kops = nf_kafka_ops(j->k);
    nf_epoch_attach_kafka(j->ep, &kops);
    if (nf_epoch_recover(j->ep, err, errlen) != 0)
        return -1;
    if (nf_runtime_register(j->rt, &ops, j) < 0 || nf_runtime_start(j->rt) != 0)
        return -1;
    return 0;
}

static void job_close(job_t *j)
{
    nf_runtime_request_stop(j->rt);
    nf_runtime_wait(j->rt);
    nf_runtime_destroy(j->rt);
    nf_kafka_free(j->k);
    nf_epoch_free(j->ep);
    nf_store_close(j->st);
}

/* Runs `epochs` epochs of PER_EPOCH records each, starting at record number `first`. */
static int job_epochs(job_t *j, unsigned first, unsigned epochs, char *err, size_t errlen)
{
    j->next = first;
    for (unsigned e = 0; e < epochs; e++) {
        for (unsigned s = 0; s < SHARDS; s++)
            if (nf_runtime_call(j->rt, s, emit_some, j, 10000) != 0)
                return -1;
        if (nf_epoch_run_once(j->ep, err, errlen) != 0)
            return -1;
        j->next += PER_EPOCH;
    }
    return 0;
}

/* Reads the whole trending topic: how many times each record number r<i> occurs. */
static int read_back(unsigned *seen, unsigned max)
{
    char err[256];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", g_boot, err, sizeof err);
    rd_kafka_conf_set(c, "group.id", "epoch-test-reader", err, sizeof err);
    rd_kafka_conf_set(c, "isolation.level", "read_committed", err, sizeof err);
    rd_kafka_conf_set(c, "enable.partition.eof", "true", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk)
        return -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(2);
    for (int p = 0; p < 2; p++)
        rd_kafka_topic_partition_list_add(l, "trending", p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    int eofs = 0, total = 0;
    for (int idle = 0; eofs < 2 && idle < 200;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            idle++; /* 20 s without a message or end of partition: give up */
            continue;
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            eofs++;
        } else if (!m->err && m->key_len > 1 && m->key_len < 16) {
            char k[16];
            memcpy(k, m->key, m->key_len);
            k[m->key_len] = 0;
            unsigned i = (unsigned)strtoul(k + 1, NULL, 10);
            if (i < max)
                seen[i]++;
            total++;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return eofs == 2 ? total : -1;
}

static char g_dir[] = "/tmp/nf_test_epoch_XXXXXX";

/* The state under dir: committed epoch `epoch`, with positions, and shard 0's count `count`. */
static void check_stored(const char *dir, uint64_t epoch, uint64_t count)
{
    char err[512];
    uint64_t e = 0;
    char *h = NULL;
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    nf_store_t *st = nf_store_open(dir, &so, err, sizeof err);
    NF_REQUIRE(st);
    NF_CHECK(nf_store_committed(st, &e, &h, err, sizeof err) == 0);
    NF_CHECK_EQ(e, epoch);
    NF_CHECK(h && strstr(h, "\"positions\""));
    free(h);
    unsigned char key[18];
    nf_kstate_encode_key(0, (nf_id128_t){1, 0}, key);
    void *v = NULL;
    size_t len = 0;
    NF_CHECK_EQ(nf_store_get(st, NF_KIND_READS, key, sizeof key, &v, &len, err, sizeof err), 1);
    uint64_t n = 0;
    if (v && len == 16)
        memcpy(&n, (char *)v + 8, 8);
    NF_CHECK_EQ(n, count);
    free(v);
    nf_store_close(st);
}
static unsigned g_emitted; /* records emitted by committed or rolled-forward epochs so far */

static void test_epochs_commit(void)
{
    char err[512], dir[600];
    snprintf(dir, sizeof dir, "%s/clean", g_dir);
    job_t j;
    NF_REQUIRE(job_open(&j, dir, err, sizeof err) == 0);
    NF_REQUIRE(job_epochs(&j, g_emitted, 3, err, sizeof err) == 0);
    NF_CHECK_EQ(nf_epoch_committed_epoch(j.ep), 3);
    nf_epoch_stats_t es;
    nf_epoch_stats(j.ep, &es);
    NF_CHECK_EQ(es.outputs, 3 * PER_EPOCH);
    NF_CHECK_EQ(es.checkpoints, 1); /* retain_every 2 */
    job_close(&j);
    g_emitted += 3 * PER_EPOCH;

    /* A new coordinator over the same state: epoch 3, state as committed. */
    NF_REQUIRE(job_open(&j, dir, err, sizeof err) == 0);
    NF_CHECK_EQ(nf_epoch_committed_epoch(j.ep), 3);
    job_close(&j);
    check_stored(dir, 3, 3 * PER_EPOCH / SHARDS);
}

static void put_keys(nf_shard_t *sh, void *arg)
{
    job_t *j = arg;
    uint64_t v = 1;
    unsigned s = nf_shard_index(sh);
    for (unsigned i = 0; i < g_poke_keys; i++)
        if (nf_kstate_put(j->ks[s], (uint16_t)s, (nf_id128_t){2, i}, &v, sizeof v, 0) != 0)
            abort();
}

/* Every key {2, i} of every shard holds `want` in the store. */
static void check_keys(nf_store_t *st, uint64_t want)
{
    char err[512];
    unsigned bad = 0;
    for (unsigned i = 0; i < g_poke_keys * SHARDS; i++) {
        unsigned char key[18];
        nf_kstate_encode_key((uint16_t)(i % SHARDS), (nf_id128_t){2, i / SHARDS}, key);
        void *v = NULL;
        size_t len = 0;
        uint64_t n = 0;
        if (nf_store_get(st, NF_KIND_READS, key, sizeof key, &v, &len, err, sizeof err) == 1 &&
            len == 16)
            memcpy(&n, (char *)v + 8, 8);
        bad += n != want;
        free(v);
    }
    NF_CHECK_EQ(bad, 0);
}

/* A snapshot by reference commits the state of the cut, whatever the shards change while they
 * write it (after the resume): their changes go to the next epoch. 40,000 keys per shard: the
 * first call of snapshot_more writes a slice of them (16,384), then all keys are changed: the
 * slice's after they were written, the others before (copy on write). */
static void test_snapshot_by_reference(void)
{
    char err[512], dir[600];
    snprintf(dir, sizeof dir, "%s/byref", g_dir);
    job_t j;
    NF_REQUIRE(job_open(&j, dir, err, sizeof err) == 0);
    g_poke_keys = 40000;
    g_poke = 0;
    for (unsigned s = 0; s < SHARDS; s++) /* the cut's values: 1 */
        NF_REQUIRE(nf_runtime_call(j.rt, s, put_keys, &j, 10000) == 0);
    g_poke = 7; /* changed to 7 while the snapshot is written */
    NF_REQUIRE(nf_epoch_run_once(j.ep, err, sizeof err) == 0);
    check_keys(j.st, 1);
    g_poke = 0;
    NF_REQUIRE(nf_epoch_run_once(j.ep, err, sizeof err) == 0); /* the 7s: in the next epoch */
    check_keys(j.st, 7);
    g_poke_keys = 0;
    job_close(&j);
}

static void fail_job(nf_shard_t *sh, void *arg)
{
    (void)arg;
    nf_runtime_fail(nf_shard_runtime(sh));
}

/* A job that failed (an actor called nf_runtime_fail: an input it could not apply) commits
 * nothing after the failure, neither the epoch in flight nor a final one: its outputs never
 * reach Kafka, its state and positions stay as the last epoch left them. */
static void test_failed_job_commits_nothing(void)
{
    char err[512], dir[600];
    snprintf(dir, sizeof dir, "%s/failed", g_dir);
    job_t j;
    NF_REQUIRE(job_open(&j, dir, err, sizeof err) == 0);
    NF_REQUIRE(job_epochs(&j, g_emitted, 1, err, sizeof err) == 0);
    g_emitted += PER_EPOCH;
    NF_CHECK(!nf_runtime_failed(j.rt));
    j.next = g_emitted; /* the next epoch's records and state changes, then a shard fails */
    for (unsigned s = 0; s < SHARDS; s++)
        NF_REQUIRE(nf_runtime_call(j.rt, s, emit_some, &j, 10000) == 0);
    NF_REQUIRE(nf_runtime_call(j.rt, 1, fail_job, &j, 10000) == 0);
    NF_CHECK(nf_runtime_failed(j.rt));
    NF_CHECK(nf_runtime_stop_requested(j.rt));
    NF_CHECK_EQ(nf_epoch_run_once(j.ep, err, sizeof err), -ECANCELED);
    NF_CHECK(strstr(err, "epoch 2 not committed") != NULL);
    NF_CHECK_EQ(nf_epoch_stop(j.ep), -ECANCELED); /* no final epoch either */
    NF_CHECK(nf_epoch_failed(j.ep));
    NF_CHECK_EQ(nf_epoch_committed_epoch(j.ep), 1);
    job_close(&j);
    check_stored(dir, 1, PER_EPOCH / SHARDS);
    unsigned *seen = calloc(g_emitted + PER_EPOCH, sizeof *seen);
    NF_REQUIRE(seen);
    NF_CHECK_EQ(read_back(seen, g_emitted + PER_EPOCH), (int)g_emitted);
    unsigned late = 0;
    for (unsigned i = g_emitted; i < g_emitted + PER_EPOCH; i++)
        late += seen[i];
    NF_CHECK_EQ(late, 0);
    free(seen);
}

/* A shard fails at the cut, right after its state was frozen: nothing of the epoch commits, and
 * the shards, which go on with their queued messages, change frozen entries (each written into
 * the epoch's batch first) without touching freed memory (ASan): the batches are kept until
 * the coordinator is freed. */
static void test_job_fails_at_the_cut(void)
{
    char err[512], dir[600];
    snprintf(dir, sizeof dir, "%s/failcut", g_dir);
    job_t j;
    NF_REQUIRE(job_open(&j, dir, err, sizeof err) == 0);
    unsigned first = g_emitted;
    NF_REQUIRE(job_epochs(&j, first, 1, err, sizeof err) == 0);
    j.next = first + PER_EPOCH;
    for (unsigned s = 0; s < SHARDS; s++)
        NF_REQUIRE(nf_runtime_call(j.rt, s, emit_some, &j, 10000) == 0);
    g_fail_at_snapshot = true;
    NF_CHECK_EQ(nf_epoch_run_once(j.ep, err, sizeof err), -ECANCELED);
    g_fail_at_snapshot = false;
    j.next += PER_EPOCH; /* the frozen counters change: written into the kept batches */
    for (unsigned s = 0; s < SHARDS; s++)
        NF_CHECK(nf_runtime_call(j.rt, s, emit_some, &j, 10000) == 0);
    NF_CHECK_EQ(nf_epoch_stop(j.ep), -ECANCELED);
    NF_CHECK_EQ(nf_epoch_committed_epoch(j.ep), 1);
    job_close(&j);
    check_stored(dir, 1, PER_EPOCH / SHARDS);
    g_emitted += PER_EPOCH; /* epoch 1's records; the failed epochs' never reached Kafka */
}

static nf_kafka_mock_t *g_mock;

/* A transactional producer stuck in a fatal error that is not fencing (here EndTxn answered
 * INVALID_TXN_STATE) is replaced by a new one under the same transactional id, and the epoch is
 * settled and committed without a restart: every record once. */
static void test_fatal_producer_replaced(void)
{
    char err[512], dir[600];
    snprintf(dir, sizeof dir, "%s/fatal", g_dir);
    job_t j;
    NF_REQUIRE(job_open(&j, dir, err, sizeof err) == 0);
    NF_REQUIRE(job_epochs(&j, g_emitted, 1, err, sizeof err) == 0);
    rd_kafka_mock_push_request_errors(nf_kafka_mock_cluster(g_mock), 26 /* EndTxn */, 1,
                                      RD_KAFKA_RESP_ERR_INVALID_TXN_STATE);
    NF_CHECK(job_epochs(&j, g_emitted + PER_EPOCH, 2, err, sizeof err) == 0);
    NF_CHECK_EQ(nf_epoch_committed_epoch(j.ep), 3);
    nf_epoch_stats_t es;
    nf_epoch_stats(j.ep, &es);
    NF_CHECK(es.failed >= 1); /* the attempt that hit the fatal error */
    NF_CHECK(!nf_epoch_failed(j.ep));
    job_close(&j);
    g_emitted += 3 * PER_EPOCH;
    unsigned *seen = calloc(g_emitted, sizeof *seen);
    NF_REQUIRE(seen);
    NF_CHECK_EQ(read_back(seen, g_emitted), (int)g_emitted);
    unsigned bad = 0;
    for (unsigned i = 0; i < g_emitted; i++)
        bad += seen[i] != 1;
    NF_CHECK_EQ(bad, 0);
    free(seen);
}

/* A producer fenced by the broker (EndTxn answered PRODUCER_FENCED: another incarnation took
 * over the transactional id) is not replaced: the epoch fails with -ESTALE, nothing more
 * commits. */
static void test_fenced_fails(void)
{
    char err[512], dir[600];
    snprintf(dir, sizeof dir, "%s/fenced", g_dir);
    job_t j;
    NF_REQUIRE(job_open(&j, dir, err, sizeof err) == 0);
    NF_REQUIRE(job_epochs(&j, g_emitted, 1, err, sizeof err) == 0);
    g_emitted += PER_EPOCH;
    rd_kafka_mock_push_request_errors(nf_kafka_mock_cluster(g_mock), 26 /* EndTxn */, 1,
                                      RD_KAFKA_RESP_ERR_PRODUCER_FENCED);
    NF_CHECK_EQ(job_epochs(&j, g_emitted, 1, err, sizeof err), -1);
    NF_CHECK(strstr(err, "fenced") != NULL);
    NF_CHECK_EQ(nf_epoch_committed_epoch(j.ep), 1);
    char ferr[256];
    NF_CHECK_EQ(nf_kafka_fatal(j.k, ferr, sizeof ferr), -ESTALE);
    job_close(&j);
    /* The fenced epoch's records stay in a transaction that never commits. The mock shows them
     * to read_committed readers all the same (once each), so the later read-backs count them;
     * on Apache Kafka they stay invisible (tests/kafka/zombie.py checks that). */
    g_emitted += PER_EPOCH;
}

/* The child: 4 epochs from record `first` with NF_FAULT at `point` of epoch 3. A fresh process
 * (fork + exec of this binary), since RocksDB's background threads do not survive a fork. */
static int child_main(const char *point, const char *dir, unsigned first)
{
    char err[512], f[64];
    snprintf(f, sizeof f, "%s:3", point);
    setenv("NF_FAULT", f, 1);
    g_ingest_min = 1;
    job_t j;
    if (job_open(&j, dir, err, sizeof err) != 0 || job_epochs(&j, first, 4, err, sizeof err) != 0) {
        fprintf(stderr, "child: %s\n", err);
        return 3;
    }
    return 0; /* the fault did not fire */
}

/* A child runs 4 epochs with NF_FAULT at `point` of epoch 3 and dies there; the parent then
 * recovers over the same state and checks the outputs and the state. */
static void crash_at(const char *point)
{
    char err[512], dir[600];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, point);
    fflush(NULL);
    pid_t pid = fork();
    NF_REQUIRE(pid >= 0);
    if (pid == 0) {
        char first[24];
        snprintf(first, sizeof first, "%u", g_emitted);
        execl("/proc/self/exe", "test_epoch", "--child", point, dir, first, g_boot, (char *)NULL);
        _exit(4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    NF_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 137);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 137) {
        fprintf(stderr, "  child for %s: status %d\n", point, status);
        return;
    }
    job_t j;
    int jr = job_open(&j, dir, err, sizeof err);
    if (jr != 0)
        fprintf(stderr, "  restart after %s: %s\n", point, err);
    NF_REQUIRE(jr == 0);
    nf_epoch_stats_t es;
    nf_epoch_stats(j.ep, &es);
    bool pending = strcmp(point, "after_cut") && strcmp(point, "after_apply") &&
                   strcmp(point, "mid_checkpoint");
    NF_CHECK_EQ(es.recovered_epochs, pending ? 1 : 0);
    /* Epoch 3 is committed now unless the crash came before its pending record existed. */
    NF_CHECK_EQ(nf_epoch_committed_epoch(j.ep), strcmp(point, "after_cut") ? 3 : 2);
    unsigned done = strcmp(point, "after_cut") ? 3 : 2;
    /* The job goes on after recovery: one more epoch. */
    NF_CHECK(job_epochs(&j, g_emitted + done * PER_EPOCH, 1, err, sizeof err) == 0);
    job_close(&j);
    /* every committed epoch's state is there once: the child's (applied from its batches in
     * hand, or rolled forward from the pending record's copies) and the parent's */
    check_stored(dir, done + 1, (done + 1) * PER_EPOCH / SHARDS);
    g_emitted += (done + 1) * PER_EPOCH;
    unsigned *seen = calloc(g_emitted + PER_EPOCH, sizeof *seen);
    NF_REQUIRE(seen);
    int total = read_back(seen, g_emitted + PER_EPOCH);
    NF_CHECK_EQ(total, (int)g_emitted);
    unsigned dup = 0, missing = 0;
    for (unsigned i = 0; i < g_emitted; i++) {
        dup += seen[i] > 1;
        missing += seen[i] == 0;
    }
    NF_CHECK_EQ(dup, 0);
    NF_CHECK_EQ(missing, 0);
    if (dup || missing)
        fprintf(stderr, "  %s: %u duplicated, %u missing of %u\n", point, dup, missing, g_emitted);
    free(seen);
}

static void test_crash_after_cut(void)
{
    crash_at("after_cut");
}
static void test_crash_after_pending(void)
{
    crash_at("after_pending");
}
static void test_crash_mid_produce(void)
{
    crash_at("mid_produce");
}
static void test_crash_before_commit(void)
{
    crash_at("before_commit");
}
static void test_crash_after_commit(void)
{
    crash_at("after_commit");
}
static void test_crash_mid_apply(void)
{
    crash_at("mid_apply"); /* the child's epoch 3 ingested, its committed mark not written */
}
static void test_crash_after_apply(void)
{
    crash_at("after_apply");
}

int main(int argc, char **argv)
{
    char err[256];
    if (argc == 6 && !strcmp(argv[1], "--child")) {
        g_boot = argv[5];
        return child_main(argv[2], argv[3], (unsigned)strtoul(argv[4], NULL, 10));
    }
    if (!mkdtemp(g_dir))
        return 1;
    nf_kafka_mock_t *m = nf_kafka_mock_new(1, 2, "", err, sizeof err);
    if (!m) {
        fprintf(stderr, "mock: %s\n", err);
        return 1;
    }
    g_boot = nf_kafka_mock_bootstrap(m);
    g_mock = m;
    NF_RUN(test_epochs_commit);
    NF_RUN(test_snapshot_by_reference);
    NF_RUN(test_failed_job_commits_nothing);
    NF_RUN(test_job_fails_at_the_cut);
    NF_RUN(test_fatal_producer_replaced);
    NF_RUN(test_fenced_fails);
    NF_RUN(test_crash_after_cut);
    NF_RUN(test_crash_after_pending);
    NF_RUN(test_crash_mid_produce);
    NF_RUN(test_crash_before_commit);
    NF_RUN(test_crash_after_commit);
    NF_RUN(test_crash_mid_apply);
    NF_RUN(test_crash_after_apply);
    nf_kafka_mock_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        return 1;
    return nf_test_report();
}
