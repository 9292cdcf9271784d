/* test_standby.c — src/state/standby.c against a fake Kafka tail (the nf_kafka_ops_t tail_*
 * entries): a partition not owned is tailed from its synced offset, its records reach the store
 * (an expired value does not) and its synced offset follows; a hold stops it before returning
 * and records how far it got; an owned partition is never tailed, nor is anything before the
 * first assignment; a revoked one is tailed again from its synced offset. The failover itself is
 * tests/kafka/test_standby.sh, on Apache Kafka. */
#include "algo/bytes.h"
#include "nf_test.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "state/changelog.h"
#include "state/standby.h"
#include "teststore.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NP = 2, MAXREC = 16 };

typedef struct {
    int32_t partition;
    char key[16];
    size_t klen;
    unsigned char val[16];
    size_t vlen;
} fake_rec_t;

/* One changelog topic (changelog-interest) is fed; the others stay empty. */
static struct {
    pthread_mutex_t mu;
    bool assigned[NP];
    int64_t from[NP]; /* as last set */
    int64_t next[NP]; /* next offset to deliver */
    fake_rec_t recs[NP][MAXREC];
    int n[NP];
    int sets, stops;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void add(int32_t p, const char *user, uint64_t expiry, const char *v)
{
    pthread_mutex_lock(&g.mu);
    fake_rec_t *r = &g.recs[p][g.n[p]++];
    r->partition = p;
    /* the changelog's key group, then the store key (which starts with it too) */
    r->key[0] = r->key[2] = 0;
    r->key[1] = r->key[3] = (char)p;
    r->klen = 4 + (size_t)snprintf(r->key + 4, sizeof r->key - 4, "%s", user);
    nf_put_le64(r->val, expiry);
    r->vlen = 8 + (size_t)snprintf((char *)r->val + 8, sizeof r->val - 8, "%s", v);
    pthread_mutex_unlock(&g.mu);
}

static void *tail_new(void *arg, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    return arg;
}

static int tail_set(void *t, int topic, int32_t partition, int64_t from, char *err, size_t errlen)
{
    (void)t;
    (void)err;
    (void)errlen;
    if (topic != NF_TOPIC_CL_INTEREST)
        return 0;
    pthread_mutex_lock(&g.mu);
    g.assigned[partition] = from != NF_KAFKA_TAIL_STOP;
    if (from != NF_KAFKA_TAIL_STOP) {
        g.from[partition] = from;
        g.next[partition] = from < 0 ? 0 : from;
        g.sets++;
    } else
        g.stops++;
    pthread_mutex_unlock(&g.mu);
    return 0;
}

static int tail_poll(void *t, int timeout_ms, int max, nf_kafka_record_fn rec, void *rarg,
                     char *err, size_t errlen)
{
    (void)t;
    (void)err;
    (void)errlen;
    int n = 0, r = 0;
    pthread_mutex_lock(&g.mu);
    for (int p = 0; p < NP && r == 0; p++)
        while (g.assigned[p] && g.next[p] < g.n[p] && n < max && r == 0) {
            fake_rec_t *x = &g.recs[p][g.next[p]];
            r = rec(rarg, NF_TOPIC_CL_INTEREST, p, g.next[p]++, x->key, x->klen, x->val, x->vlen,
                    false);
            n++;
        }
    pthread_mutex_unlock(&g.mu);
    if (!n) {
        struct timespec ts = {0, (long)(timeout_ms < 20 ? timeout_ms : 20) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return r ? r : n;
}

static int tail_position(void *t, int topic, int32_t partition, int64_t *pos, int64_t *hi)
{
    (void)t;
    pthread_mutex_lock(&g.mu);
    bool fed = topic == NF_TOPIC_CL_INTEREST;
    *pos = fed ? g.next[partition] : -1;
    *hi = fed ? g.n[partition] : -1;
    pthread_mutex_unlock(&g.mu);
    return 0;
}

static void tail_free(void *t)
{
    (void)t;
}

static int64_t synced(nf_store_t *st, int32_t p)
{
    char err[256];
    int64_t off = -2;
    NF_CHECK_EQ(nf_changelog_synced_get(st, NF_TOPIC_CL_INTEREST, p, &off, err, sizeof err), 0);
    return off;
}

/* Up to 5 s for partition p's synced offset to reach want. */
static bool wait_synced(nf_store_t *st, int32_t p, int64_t want)
{
    for (int i = 0; i < 500; i++) {
        if (synced(st, p) == want)
            return true;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static bool has(nf_store_t *st, int32_t p, const char *user)
{
    char key[16], err[256];
    key[0] = 0;
    key[1] = (char)p;
    size_t klen = 2 + (size_t)snprintf(key + 2, sizeof key - 2, "%s", user);
    void *v = NULL;
    size_t len = 0;
    int r = nf_store_get(st, NF_KIND_INTEREST, key, klen, &v, &len, err, sizeof err);
    free(v);
    return r == 1;
}

static void test_standby(void)
{
    char dir[128], err[256];
    NF_REQUIRE(nf_teststore_tmpdir("standby", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_kafka_ops_t k = {.arg = &g,
                        .tail_new = tail_new,
                        .tail_set = tail_set,
                        .tail_poll = tail_poll,
                        .tail_position = tail_position,
                        .tail_free = tail_free};
    nf_standby_opts_t o = {.st = st, .kafka = &k, .partitions = NP, .replicas = 1};
    nf_standby_t *sb = nf_standby_new(&o, err, sizeof err);
    NF_REQUIRE(sb);
    add(1, "u1", 0, "v1");
    add(1, "u2", 1, "old"); /* expired long ago: skipped */
    add(0, "u0", 0, "mine");
    NF_REQUIRE(nf_standby_start(sb, err, sizeof err) == 0);

    /* nothing before the first assignment */
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    NF_CHECK_EQ(g.sets, 0);

    nf_kafka_offset_t p0 = {NF_INPUT_READ_EVENTS, 0, 0}, p1 = {NF_INPUT_READ_EVENTS, 1, 0};
    nf_standby_assigned(sb, &p0, 1);
    NF_CHECK(wait_synced(st, 1, 2));
    NF_CHECK(has(st, 1, "u1"));
    NF_CHECK(!has(st, 1, "u2"));
    NF_CHECK(!has(st, 0, "u0")); /* owned here: never tailed */
    NF_CHECK_EQ(synced(st, 0), -1);
    NF_CHECK_EQ(g.from[1], -1); /* from its first offset: none was recorded */

    /* a record arrives, then a hold: applied and recorded before the hold returns */
    add(1, "u3", 0, "v3");
    bool only[NF_EPOCH_MAX_PARTITIONS] = {false};
    only[1] = true;
    nf_standby_hold(sb, only);
    NF_CHECK(!g.assigned[1]);
    int64_t at = synced(st, 1);
    NF_CHECK(at == 2 || at == 3);
    NF_CHECK_EQ(has(st, 1, "u3"), at == 3);
    add(1, "u4", 0, "v4"); /* the restore's, not the standby's */
    nf_standby_assigned(sb, &p1, 1);
    nanosleep(&ts, NULL);
    NF_CHECK(!g.assigned[1] && !has(st, 1, "u4"));

    /* revoked: tailed again from the offset recorded */
    char terr[256];
    int64_t off[1] = {4};
    int topics[1] = {NF_TOPIC_CL_INTEREST};
    int32_t parts[1] = {1};
    NF_REQUIRE(nf_changelog_synced_set(st, topics, parts, off, 1, terr, sizeof terr) == 0);
    add(1, "u5", 0, "v5");
    nf_standby_revoked(sb, &p1, 1);
    NF_CHECK(wait_synced(st, 1, 5));
    NF_CHECK_EQ(g.from[1], 4);
    NF_CHECK(has(st, 1, "u5"));
    NF_CHECK(!has(st, 1, "u4"));
    nf_standby_status_t s;
    bool tailed[NF_EPOCH_MAX_PARTITIONS];
    nf_standby_status(sb, &s, tailed);
    NF_CHECK(tailed[1] && !tailed[0]);
    NF_CHECK(!s.failed);
    NF_CHECK(s.records >= 3);
    nf_standby_free(sb);
    NF_CHECK(!g.assigned[1]); /* stopped at the end */
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

int main(void)
{
    nf_metrics_init(1);
    NF_RUN(test_standby);
    return nf_test_report();
}
