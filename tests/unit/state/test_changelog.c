/* test_changelog.c — src/state/changelog.c without a broker: which topic and key group every
 * state kind's writes go to, a store batch turned into changelog records (puts, deletes as
 * tombstones, order kept, an incomplete batch refused and the output left as it was), the
 * outbuf's tombstone encoding, and the synced offsets kept in the store (prefix-free, only the
 * changelog topics), and a restore's durability: it writes without RocksDB's WAL, so a process
 * that dies right after the restore returned (no close) must still find every record it applied,
 * in order (a writer thread writes one batch while the next is gathered), and the offsets it
 * recorded (the flush before the offsets). The restore reads a changelog of
 * the test's own through the nf_kafka_ops table; against Apache Kafka it is tested by
 * tests/kafka/test_changelog.sh and test_scale_out.sh. */
#include "io/outbuf.h"
#include "nf_test.h"
#include "state/changelog.h"
#include "state/kstate.h"
#include "teststore.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_topics_and_key_groups(void)
{
    for (int k = 0; k < NF_KIND__COUNT; k++) {
        int t = nf_changelog_topic((nf_state_kind_t)k); /* every kind has one */
        NF_CHECK(nf_topic_is_changelog(t));
        NF_CHECK_EQ(nf_changelog_kind((nf_topic_t)t), k);
        NF_CHECK(strncmp(nf_topic_name((nf_topic_t)t), "changelog-", 10) == 0);
    }
    NF_CHECK_EQ(nf_changelog_kind(NF_TOPIC_ARTICLES), -1);
    /* keyed state: the key's own 2-byte key group */
    unsigned char kk[18];
    nf_kstate_encode_key(517, (nf_id128_t){1, 2}, kk);
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_INTEREST, kk, sizeof kk), 517);
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_EVENT_IDS, kk, sizeof kk), 517);
    /* trending: "C" + partition; the merger's "M" and "P": its own key group; anything else 0 */
    const unsigned char c[] = {'C', 0x01, 0x02};
    const unsigned char p[] = {'P', 0x00, 0x07, 1, 2, 3, 4, 5, 6, 7, 8};
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_TRENDING, c, sizeof c), 0x0102);
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_TRENDING, p, sizeof p), NF_CHANGELOG_MERGER_KG);
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_TRENDING, "M", 1), NF_CHANGELOG_MERGER_KG);
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_TRENDING, "C", 1), 0);
    NF_CHECK_EQ(nf_changelog_key_group(NF_KIND_TRENDING, "c\x01", 2), 0);
}

static void test_from_batch(void)
{
    nf_store_batch_t *b = nf_store_batch_new();
    NF_REQUIRE(b);
    unsigned char k1[18], k2[18];
    nf_kstate_encode_key(3, (nf_id128_t){10, 11}, k1);
    nf_kstate_encode_key(4, (nf_id128_t){12, 13}, k2);
    const char v1[] = "\0\0\0\0\0\0\0\0vector-one";
    nf_store_batch_put(b, NF_KIND_INTEREST, k1, sizeof k1, v1, sizeof v1);
    nf_store_batch_delete(b, NF_KIND_ARTICLE_KEY, k2, sizeof k2);
    nf_store_batch_put(b, NF_KIND_INTEREST, k1, sizeof k1, v1, 9); /* later write wins */
    nf_outbuf_t out = {0};
    NF_CHECK_EQ(nf_outbuf_add(&out, NF_TOPIC_ARTICLES, "a", 1, "{}", 2), 0);
    NF_REQUIRE(nf_changelog_from_batch(&out, b) == 0);
    NF_CHECK_EQ(out.count, 4u);
    size_t pos = 0;
    nf_outrec_t r;
    NF_REQUIRE(nf_outbuf_next(out.data, out.len, &pos, &r) == 1); /* the output before */
    NF_CHECK_EQ(r.topic, NF_TOPIC_ARTICLES);
    NF_REQUIRE(nf_outbuf_next(out.data, out.len, &pos, &r) == 1);
    NF_CHECK_EQ(r.topic, NF_TOPIC_CL_INTEREST);
    NF_CHECK(!r.tombstone);
    NF_CHECK_EQ(r.klen, 20u);
    NF_CHECK(r.key[0] == 0 && r.key[1] == 3 && !memcmp(r.key + 2, k1, sizeof k1));
    NF_CHECK_EQ(r.vlen, (uint32_t)sizeof v1);
    NF_CHECK(!memcmp(r.value, v1, sizeof v1));
    NF_REQUIRE(nf_outbuf_next(out.data, out.len, &pos, &r) == 1);
    NF_CHECK_EQ(r.topic, NF_TOPIC_CL_ARTICLE_KEY);
    NF_CHECK(r.tombstone);
    NF_CHECK_EQ(r.vlen, 0u);
    NF_CHECK(r.key[0] == 0 && r.key[1] == 4);
    NF_REQUIRE(nf_outbuf_next(out.data, out.len, &pos, &r) == 1);
    NF_CHECK_EQ(r.topic, NF_TOPIC_CL_INTEREST);
    NF_CHECK_EQ(r.vlen, 9u);
    NF_CHECK_EQ(nf_outbuf_next(out.data, out.len, &pos, &r), 0);
    /* an incomplete batch is refused and the buffer stays as it was */
    size_t len0 = out.len;
    nf_store_batch_fail(b);
    NF_CHECK_EQ(nf_changelog_from_batch(&out, b), -ENOMEM);
    NF_CHECK_EQ(out.len, len0);
    NF_CHECK_EQ(out.count, 4u);
    nf_store_batch_free(b);
    /* a tombstone that carries a value is a malformed buffer */
    unsigned char bad[9 + 1 + 1] = {
        (unsigned char)(NF_TOPIC_CL_INTEREST | 0x80), 1, 0, 0, 0, 1, 0, 0, 0, 'k', 'v'};
    pos = 0;
    NF_CHECK_EQ(nf_outbuf_next(bad, sizeof bad, &pos, &r), -EINVAL);
    nf_outbuf_free(&out);
}

static void test_synced_offsets(void)
{
    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("changelog", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    char err[256];
    char *v = NULL;
    NF_CHECK_EQ(nf_store_meta_get(st, "changelog", &v, err, sizeof err), 0);
    NF_CHECK(v == NULL);
    NF_REQUIRE(nf_changelog_save_synced(st,
                                        "{\"pre.articles\":[5,6],\"pre.changelog-interest\":[7,8],"
                                        "\"pre.changelog-event-ids\":[1,2]}",
                                        NULL, false, err, sizeof err) == 0);
    /* a later epoch that wrote to one topic only keeps the other's offsets */
    NF_REQUIRE(nf_changelog_save_synced(st, "{\"pre.changelog-interest\":[9,10]}", NULL, false, err,
                                        sizeof err) == 0);
    NF_REQUIRE(nf_store_meta_get(st, "changelog", &v, err, sizeof err) == 1);
    cJSON *m = cJSON_Parse(v);
    NF_REQUIRE(m);
    NF_CHECK(cJSON_GetObjectItemCaseSensitive(m, "articles") == NULL);
    NF_CHECK(cJSON_GetObjectItemCaseSensitive(m, "pre.articles") == NULL);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(m, "changelog-interest");
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(m, "changelog-event-ids");
    NF_REQUIRE(cJSON_IsArray(in) && cJSON_IsArray(ev));
    NF_CHECK_EQ((int)cJSON_GetArrayItem(in, 1)->valuedouble, 10);
    NF_CHECK_EQ((int)cJSON_GetArrayItem(ev, 0)->valuedouble, 1);
    cJSON_Delete(m);
    free(v);
    /* in a group: only partitions assigned here move, and only for the kinds keyed by them */
    bool reads[NF_CHANGELOG_MAX_PARTITIONS] = {false}, srcs[NF_CHANGELOG_MAX_PARTITIONS] = {false};
    reads[0] = true;
    srcs[1] = true;
    const bool *owned[NF_INPUT__COUNT] = {NULL};
    owned[NF_INPUT_READ_EVENTS] = reads;
    owned[NF_INPUT_SOURCES] = srcs;
    NF_REQUIRE(nf_changelog_save_synced(st,
                                        "{\"pre.changelog-interest\":[20,30],"
                                        "\"pre.changelog-crawl-schedule\":[4,6],"
                                        "\"pre.changelog-article-key\":[5,5]}",
                                        owned, false, err, sizeof err) == 0);
    NF_REQUIRE(nf_store_meta_get(st, "changelog", &v, err, sizeof err) == 1);
    m = cJSON_Parse(v);
    NF_REQUIRE(m);
    in = cJSON_GetObjectItemCaseSensitive(m, "changelog-interest");
    NF_CHECK_EQ((int)cJSON_GetArrayItem(in, 0)->valuedouble, 20);
    NF_CHECK_EQ((int)cJSON_GetArrayItem(in, 1)->valuedouble, 10);
    /* crawl schedules follow the sources partitions: only the one assigned here moves (-1 =
     * nothing recorded for the other) */
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(m, "changelog-crawl-schedule");
    NF_REQUIRE(cJSON_IsArray(cs));
    NF_CHECK_EQ((int)cJSON_GetArrayItem(cs, 0)->valuedouble, -1);
    NF_CHECK_EQ((int)cJSON_GetArrayItem(cs, 1)->valuedouble, 6);
    NF_CHECK(cJSON_GetObjectItemCaseSensitive(m, "changelog-article-key") == NULL);
    cJSON_Delete(m);
    free(v);
    NF_CHECK_EQ(nf_changelog_save_synced(st, "not json", NULL, false, err, sizeof err), -EINVAL);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* A changelog-interest of one partition held in memory: record i < LOG_PUTS puts key group 7,
 * id i, a value of i's low byte after the expiry; the records after it delete ids 0, 1, ...
 * again (tombstones two batches after their puts: a restore must apply them in order). */
enum { LOG_RECORDS = 150000, LOG_PUTS = 140000, LOG_VALUE = 128 };

static void log_key(int64_t i, unsigned char key[20])
{
    key[0] = 0;
    key[1] = 7; /* the changelog key's key group, then the store key */
    nf_kstate_encode_key(7, (nf_id128_t){(uint64_t)i, 42}, key + 2);
}

static int log_partitions(void *arg, int topic)
{
    (void)arg;
    return topic == NF_TOPIC_CL_INTEREST ? 1 : 0;
}

static int log_ends(void *arg, int topic, int64_t *hi, int n, char *err, size_t errlen)
{
    (void)arg, (void)err, (void)errlen;
    for (int p = 0; p < n; p++)
        hi[p] = topic == NF_TOPIC_CL_INTEREST ? LOG_RECORDS : 0;
    return 0;
}

static int log_read(void *arg, const int *topics, int ntopics, const int *nparts, int stride,
                    const int64_t *from, int64_t *end, nf_kafka_record_fn rec, void *rarg,
                    char *err, size_t errlen)
{
    (void)arg, (void)err, (void)errlen;
    for (int t = 0; t < ntopics; t++) {
        if (topics[t] != NF_TOPIC_CL_INTEREST || nparts[t] < 1)
            continue;
        int64_t lo = from[t * stride] < 0 ? 0 : from[t * stride], hi = end[t * stride];
        for (int64_t i = lo; i < hi; i++) {
            unsigned char key[20], val[LOG_VALUE];
            bool del = i >= LOG_PUTS;
            log_key(del ? i - LOG_PUTS : i, key);
            memset(val, 0, sizeof val); /* expiry 0: never */
            memset(val + 8, (int)(i & 0xff), sizeof val - 8);
            int r = del ? rec(rarg, t, 0, i, key, sizeof key, NULL, 0, true)
                        : rec(rarg, t, 0, i, key, sizeof key, val, sizeof val, false);
            if (r)
                return r;
        }
    }
    return 0;
}

/* The child of test_restore_durable_without_close: restores into DIR, then dies as if killed
 * (no close, no flush of its own). */
static int restore_and_die(const char *dir)
{
    char err[256] = "";
    nf_kafka_ops_t ops = {
        .topic_partitions = log_partitions, .topic_ends = log_ends, .read_topics = log_read};
    nf_store_t *st = nf_teststore_open(dir);
    nf_changelog_stats_t cs;
    int r = st ? nf_changelog_restore(st, &ops, true, NULL, &cs, err, sizeof err) : -1;
    bool ok = r == 0 && cs.puts == LOG_PUTS && cs.deletes == LOG_RECORDS - LOG_PUTS;
    if (!ok)
        fprintf(stderr, "restore-and-die: %d, %s\n", r, err);
    _exit(ok ? 0 : 3);
}

static void test_restore_durable_without_close(void)
{
    char dir[128], err[256] = "";
    NF_REQUIRE(nf_teststore_tmpdir("changelog-crash", dir, sizeof dir));
    nf_kafka_ops_t ops = {
        .topic_partitions = log_partitions, .topic_ends = log_ends, .read_topics = log_read};
    /* A fresh process (fork + exec): RocksDB's background threads of the stores this process
     * opened before would not exist in a child that is only forked. */
    pid_t pid = fork();
    NF_REQUIRE(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_changelog", "--restore-and-die", dir, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    NF_REQUIRE(waitpid(pid, &status, 0) == pid);
    NF_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    int64_t off = -2;
    NF_CHECK_EQ(nf_changelog_synced_get(st, NF_TOPIC_CL_INTEREST, 0, &off, err, sizeof err), 0);
    NF_CHECK_EQ(off, LOG_RECORDS);
    size_t missing = 0, wrong = 0, deleted = 0;
    for (int64_t i = 0; i < LOG_PUTS; i++) {
        unsigned char key[20];
        log_key(i, key);
        void *v = NULL;
        size_t vlen = 0;
        int r =
            nf_store_get(st, NF_KIND_INTEREST, key + 2, sizeof key - 2, &v, &vlen, err, sizeof err);
        if (i < LOG_RECORDS - LOG_PUTS)
            deleted += r == 0;
        else if (r != 1)
            missing++;
        else if (vlen != LOG_VALUE || ((unsigned char *)v)[LOG_VALUE - 1] != (i & 0xff))
            wrong++;
        free(v);
    }
    NF_CHECK_EQ(missing, 0);
    NF_CHECK_EQ(wrong, 0);
    NF_CHECK_EQ(deleted, LOG_RECORDS - LOG_PUTS);
    /* and a second restore finds nothing to read */
    nf_changelog_stats_t cs;
    NF_CHECK_EQ(nf_changelog_restore(st, &ops, true, NULL, &cs, err, sizeof err), 0);
    NF_CHECK_EQ(cs.records, 0);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--restore-and-die") == 0)
        return restore_and_die(argv[2]);
    NF_RUN(test_topics_and_key_groups);
    NF_RUN(test_from_batch);
    NF_RUN(test_synced_offsets);
    NF_RUN(test_restore_durable_without_close);
    return nf_test_report();
}
