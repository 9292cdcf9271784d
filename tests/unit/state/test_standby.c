/* test_standby.c — src/state/standby.c against a fake Kafka tail (the nf_kafka_ops_t tail_*
 * entries): a partition not owned is tailed from its synced offset, its records reach the store
 * (an expired value does not) and its synced offset follows; a hold stops it before returning
 * and records how far it got; an owned partition is never tailed, nor is anything before the
 * first assignment; a revoked one is tailed again from its synced offset; sources partitions and
 * the global key group likewise. The failover itself is tests/kafka/test_standby.sh, on Apache
 * Kafka. */
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

enum { NP = 2, MAXREC = 16, NT = 3 };

/* The fed changelog topics, one per input: interest (read-events), crawl schedules (sources),
 * article keys (the global key group, in partition GP); the others stay empty. */
static const int fed[NT] = {NF_TOPIC_CL_INTEREST, NF_TOPIC_CL_CRAWL_SCHEDULE,
                            NF_TOPIC_CL_ARTICLE_KEY};
static const nf_state_kind_t fed_kind[NT] = {NF_KIND_INTEREST, NF_KIND_CRAWL_SCHEDULE,
                                             NF_KIND_ARTICLE_KEY};
#define GP ((int32_t)(NF_CHANGELOG_GLOBAL_KG % NP))

typedef struct {
    char key[16];
    size_t klen;
    unsigned char val[16];
    size_t vlen;
} fake_rec_t;

static struct {
    pthread_mutex_t mu;
    bool assigned[NT][NP];
    int64_t from[NT][NP]; /* as last set */
    int64_t next[NT][NP]; /* next offset to deliver */
    fake_rec_t recs[NT][NP][MAXREC];
    int n[NT][NP];
    int sets, stops;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int slot(int topic)
{
    for (int t = 0; t < NT; t++)
        if (fed[t] == topic)
            return t;
    return -1;
}

/* A record of topic slot t, partition p: the store key is [key group][name] (the global key
 * group's for article keys), the changelog key that with the key group in front again. */
static void add_to(int t, int32_t p, const char *name, uint64_t expiry, const char *v)
{
    pthread_mutex_lock(&g.mu);
    fake_rec_t *r = &g.recs[t][p][g.n[t][p]++];
    uint16_t kg = t == 2 ? (uint16_t)NF_CHANGELOG_GLOBAL_KG : (uint16_t)p;
    r->key[0] = r->key[2] = (char)(kg >> 8);
    r->key[1] = r->key[3] = (char)(kg & 0xff);
    r->klen = 4 + (size_t)snprintf(r->key + 4, sizeof r->key - 4, "%s", name);
    nf_put_le64(r->val, expiry);
    r->vlen = 8 + (size_t)snprintf((char *)r->val + 8, sizeof r->val - 8, "%s", v);
    pthread_mutex_unlock(&g.mu);
}

static void add(int32_t p, const char *user, uint64_t expiry, const char *v)
{
    add_to(0, p, user, expiry, v);
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
    int i = slot(topic);
    if (i < 0)
        return 0;
    pthread_mutex_lock(&g.mu);
    g.assigned[i][partition] = from != NF_KAFKA_TAIL_STOP;
    if (from != NF_KAFKA_TAIL_STOP) {
        g.from[i][partition] = from;
        g.next[i][partition] = from < 0 ? 0 : from;
        if (i == 0)
            g.sets++;
    } else if (i == 0)
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
    for (int i = 0; i < NT && r == 0; i++)
        for (int p = 0; p < NP && r == 0; p++)
            while (g.assigned[i][p] && g.next[i][p] < g.n[i][p] && n < max && r == 0) {
                fake_rec_t *x = &g.recs[i][p][g.next[i][p]];
                r = rec(rarg, fed[i], p, g.next[i][p]++, x->key, x->klen, x->val, x->vlen, false);
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
    int i = slot(topic);
    *pos = i >= 0 ? g.next[i][partition] : -1;
    *hi = i >= 0 ? g.n[i][partition] : -1;
    pthread_mutex_unlock(&g.mu);
    return 0;
}

static void tail_free(void *t)
{
    (void)t;
}

static int64_t synced_of(nf_store_t *st, int t, int32_t p)
{
    char err[256];
    int64_t off = -2;
    NF_CHECK_EQ(nf_changelog_synced_get(st, fed[t], p, &off, err, sizeof err), 0);
    return off;
}

static int64_t synced(nf_store_t *st, int32_t p)
{
    return synced_of(st, 0, p);
}

/* Up to 5 s for slot t's partition p's synced offset to reach want. */
static bool wait_synced_of(nf_store_t *st, int t, int32_t p, int64_t want)
{
    for (int i = 0; i < 500; i++) {
        if (synced_of(st, t, p) == want)
            return true;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static bool wait_synced(nf_store_t *st, int32_t p, int64_t want)
{
    return wait_synced_of(st, 0, p, want);
}

static bool has_in(nf_store_t *st, int t, int32_t p, const char *name)
{
    char key[16], err[256];
    uint16_t kg = t == 2 ? (uint16_t)NF_CHANGELOG_GLOBAL_KG : (uint16_t)p;
    key[0] = (char)(kg >> 8);
    key[1] = (char)(kg & 0xff);
    size_t klen = 2 + (size_t)snprintf(key + 2, sizeof key - 2, "%s", name);
    void *v = NULL;
    size_t len = 0;
    int r = nf_store_get(st, fed_kind[t], key, klen, &v, &len, err, sizeof err);
    free(v);
    return r == 1;
}

static bool has(nf_store_t *st, int32_t p, const char *user)
{
    return has_in(st, 0, p, user);
}

static nf_kafka_ops_t fake_ops(void)
{
    return (nf_kafka_ops_t){.arg = &g,
                            .tail_new = tail_new,
                            .tail_set = tail_set,
                            .tail_poll = tail_poll,
                            .tail_position = tail_position,
                            .tail_free = tail_free};
}

static void fake_reset(void)
{
    pthread_mutex_lock(&g.mu);
    memset(g.assigned, 0, sizeof g.assigned);
    memset(g.from, 0, sizeof g.from);
    memset(g.next, 0, sizeof g.next);
    memset(g.n, 0, sizeof g.n);
    g.sets = g.stops = 0;
    pthread_mutex_unlock(&g.mu);
}

static void test_standby(void)
{
    char dir[128], err[256];
    NF_REQUIRE(nf_teststore_tmpdir("standby", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_kafka_ops_t k = fake_ops();
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
    NF_CHECK_EQ(g.from[0][1], -1); /* from its first offset: none was recorded */

    /* a record arrives, then a hold: applied and recorded before the hold returns */
    add(1, "u3", 0, "v3");
    bool only[NF_EPOCH_MAX_PARTITIONS] = {false};
    only[1] = true;
    const bool *hold[NF_INPUT__COUNT] = {[NF_INPUT_READ_EVENTS] = only};
    nf_standby_hold(sb, hold);
    NF_CHECK(!g.assigned[0][1]);
    int64_t at = synced(st, 1);
    NF_CHECK(at == 2 || at == 3);
    NF_CHECK_EQ(has(st, 1, "u3"), at == 3);
    add(1, "u4", 0, "v4"); /* the restore's, not the standby's */
    nf_standby_assigned(sb, &p1, 1);
    nanosleep(&ts, NULL);
    NF_CHECK(!g.assigned[0][1] && !has(st, 1, "u4"));

    /* revoked: tailed again from the offset recorded */
    char terr[256];
    int64_t off[1] = {4};
    int topics[1] = {NF_TOPIC_CL_INTEREST};
    int32_t parts[1] = {1};
    NF_REQUIRE(nf_changelog_synced_set(st, topics, parts, off, 1, terr, sizeof terr) == 0);
    add(1, "u5", 0, "v5");
    nf_standby_revoked(sb, &p1, 1);
    NF_CHECK(wait_synced(st, 1, 5));
    NF_CHECK_EQ(g.from[0][1], 4);
    NF_CHECK(has(st, 1, "u5"));
    NF_CHECK(!has(st, 1, "u4"));
    nf_standby_status_t s;
    bool tailed[NF_EPOCH_MAX_PARTITIONS];
    nf_standby_status(sb, &s, tailed, NULL);
    NF_CHECK(tailed[1] && !tailed[0]);
    NF_CHECK(!s.failed);
    NF_CHECK(s.records >= 3);
    nf_standby_free(sb);
    NF_CHECK(!g.assigned[0][1]); /* stopped at the end */
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

/* Sources partitions (crawl schedules) and the global key group (trending-panes 0: article keys,
 * the cluster index, topic vectors) are units as read-events partitions are: tailed while owned
 * elsewhere, held for a restore, not tailed once owned, tailed again once revoked. */
static void test_sources_and_global(void)
{
    fake_reset();
    char dir[128], err[256];
    NF_REQUIRE(nf_teststore_tmpdir("standby2", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    nf_kafka_ops_t k = fake_ops();
    nf_standby_opts_t o = {
        .st = st, .kafka = &k, .partitions = NP, .source_partitions = NP, .replicas = 1};
    nf_standby_t *sb = nf_standby_new(&o, err, sizeof err);
    NF_REQUIRE(sb);
    add_to(1, 0, "s0", 0, "sched0");
    add_to(1, 1, "s1", 0, "sched1");
    add_to(2, GP, "a1", 0, "art1");
    add_to(2, 1 - GP, "x", 0, "nokg"); /* not the global key group's partition: not read */
    NF_REQUIRE(nf_standby_start(sb, err, sizeof err) == 0);
    nf_kafka_offset_t mine[2] = {{NF_INPUT_READ_EVENTS, 0, 0}, {NF_INPUT_SOURCES, 1, 0}};
    nf_standby_assigned(sb, mine, 2);
    NF_CHECK(wait_synced_of(st, 1, 0, 1));
    NF_CHECK(wait_synced_of(st, 2, GP, 1));
    NF_CHECK(has_in(st, 1, 0, "s0"));
    NF_CHECK(!has_in(st, 1, 1, "s1")); /* owned here */
    NF_CHECK_EQ(synced_of(st, 1, 1), -1);
    NF_CHECK(has_in(st, 2, GP, "a1"));
    NF_CHECK(!g.assigned[2][1 - GP]);
    nf_standby_status_t s;
    bool parts[NF_EPOCH_MAX_PARTITIONS], sources[NF_EPOCH_MAX_PARTITIONS];
    nf_standby_status(sb, &s, parts, sources);
    NF_CHECK(s.global && sources[0] && !sources[1] && parts[1] && !parts[0]);

    /* the global key group gained: held (written and recorded), then owned */
    add_to(2, GP, "a2", 0, "art2");
    bool panes[1] = {true};
    const bool *hold[NF_INPUT__COUNT] = {[NF_INPUT_TRENDING_PANES] = panes};
    nf_standby_hold(sb, hold);
    NF_CHECK(!g.assigned[2][GP]);
    int64_t at = synced_of(st, 2, GP);
    NF_CHECK(at == 1 || at == 2);
    NF_CHECK_EQ(has_in(st, 2, GP, "a2"), at == 2);
    NF_CHECK(g.assigned[1][0]); /* the others go on */
    nf_kafka_offset_t panes0 = {NF_INPUT_TRENDING_PANES, 0, 0};
    nf_standby_assigned(sb, &panes0, 1);
    add_to(2, GP, "a3", 0, "art3");
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    NF_CHECK(!g.assigned[2][GP] && !has_in(st, 2, GP, "a3"));
    nf_standby_status(sb, &s, NULL, NULL);
    NF_CHECK(!s.global);

    /* revoked: tailed again from its synced offset */
    nf_standby_revoked(sb, &panes0, 1);
    NF_CHECK(wait_synced_of(st, 2, GP, 3));
    NF_CHECK(has_in(st, 2, GP, "a3"));
    NF_CHECK_EQ(g.from[2][GP], at);
    nf_standby_free(sb);
    NF_CHECK(!g.assigned[1][0] && !g.assigned[2][GP]);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

int main(void)
{
    nf_metrics_init(1);
    NF_RUN(test_standby);
    NF_RUN(test_sources_and_global);
    return nf_test_report();
}
