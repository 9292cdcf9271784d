/* The sources topic applied to the crawl actors (src/actors/ingest.h, crawl.c), on real shards
 * with the real fetcher against the loopback test server. Records are routed exactly as
 * kafka_in routes them (nf_ingest_source_route + nf_ingest_source_msg, one message per shard)
 * and posted from the test thread; what a shard holds is read on the shard itself
 * (nf_ingest_source_info through nf_runtime_call, which queues behind the posted messages).
 * - upsert / update / pause / dead / tombstone of a topic source, counters and the gauge;
 * - a topic record overriding a configured source, and its tombstone giving the configuration
 *   back;
 * - a tombstone and a URL change while the fetch runs (the attempt is recorded, its result not
 *   applied, nothing leaks or is used after free: run it under ASan);
 * - invalid URLs refused with a reason (dead letters in kafka_in);
 * - durability: definitions and schedules restored from a real store after a restart with a
 *   real epoch (nf_epoch_run_once, no Kafka), across shard counts 2 -> 3 -> 1; a tombstone
 *   deletes the state key; a source moved to another shard by its URL is kept once. */
#include "actors/ingest.h"
#include "nf_test.h"
#include "state/kstate.h"
#include "testhttpd.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <unistd.h>

static char g_base[64];
static uint16_t g_port;
static nf_testhttpd_t *g_srv;
static int64_t g_spacing_ms; /* crawl.host_spacing_ms of the jobs (0: none) */

/* ---------------------------------------------------------------- helpers */

/* Routes one record like kafka_in and posts its messages (SET to the owner, FORGET to the
 * others). value NULL = tombstone. 0, or the decoder's / router's error. */
static int deliver(nf_runtime_t *rt, nf_ingest_t *in, const char *key, const char *value)
{
    nf_source_record_t rec;
    char err[512];
    int rc = nf_source_record_decode(key, strlen(key), value, value ? strlen(value) : 0, 0, &rec,
                                     err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "  decode %s: %s\n", key, err);
        return rc;
    }
    nf_source_route_t r;
    rc = nf_ingest_source_route(in, rt, &rec, &r, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "  route %s: %s\n", key, err);
        return rc;
    }
    for (unsigned d = 0; d < nf_runtime_shard_count(rt); d++) {
        nf_msg_t m;
        nf_ingest_source_msg(in, &r, d, &m);
        while ((rc = nf_runtime_post(rt, d, &m)) == -EAGAIN)
            usleep(1000);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int deliverf(nf_runtime_t *rt, nf_ingest_t *in, const char *key, const char *path,
                    const char *extra)
{
    char v[1200];
    snprintf(v, sizeof v, "{\"url\":\"%s%s\"%s%s}", path[0] == '/' ? g_base : "", path,
             extra ? "," : "", extra ? extra : "");
    return deliver(rt, in, key, v);
}

typedef struct query {
    nf_ingest_t *in;
    const char *id;
    nf_source_info_t info;
    unsigned holders;
} query_t;

static void query_fn(nf_shard_t *sh, void *arg)
{
    query_t *q = arg;
    nf_source_info_t tmp;
    if (nf_ingest_source_info(sh, q->in, q->id, &tmp)) {
        q->info = tmp;
        q->holders++;
    }
}

/* How many shards hold id (0 or 1 when all is well); *out gets the holder's view. */
static unsigned lookup(nf_runtime_t *rt, nf_ingest_t *in, const char *id, nf_source_info_t *out)
{
    query_t q = {.in = in, .id = id};
    for (unsigned s = 0; s < nf_runtime_shard_count(rt); s++)
        if (nf_runtime_call(rt, s, query_fn, &q, 10000) != 0)
            return 99;
    if (out)
        *out = q.info;
    return q.holders;
}

/* Fetch-log records for url in the JSON-lines sink file. */
static int fetchlogs_for(const char *path, const char *url)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char line[1 << 20];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j)
            continue;
        cJSON *t = cJSON_GetObjectItem(j, "topic"), *v = cJSON_GetObjectItem(j, "value");
        cJSON *u = v ? cJSON_GetObjectItem(v, "url") : NULL;
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "fetch-log") && cJSON_IsString(u) &&
            !strcmp(u->valuestring, url))
            n++;
        cJSON_Delete(j);
    }
    fclose(f);
    return n;
}

static bool wait_fetchlogs(const char *sinkpath, const char *path, int want)
{
    char url[300];
    snprintf(url, sizeof url, "%s%s", path[0] == '/' ? g_base : "", path);
    uint64_t deadline = nf_now_ns() + 30000000000ull;
    int n = 0;
    while ((n = fetchlogs_for(sinkpath, url)) < want && nf_now_ns() < deadline)
        usleep(20000);
    if (n != want)
        fprintf(stderr, "  %s: %d fetch-log records, want %d\n", url, n, want);
    return n == want;
}

static void test_policy(nf_ingest_t *in)
{
    nf_ingest_opts_default(&in->o);
    nf_addrguard_allow(&in->o.guard, "127.0.0.0/8");
    in->o.policy.host_max_concurrent = 64;
    in->o.policy.host_spacing_ms = g_spacing_ms;
    in->o.policy.breaker_failures = 0;
}

/* ---------------------------------------------------------------- router */

static void test_route_refuses(void)
{
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = 2;
    char err[512];
    nf_runtime_t *rt = nf_runtime_create(&ro, err, sizeof err);
    NF_REQUIRE(rt);
    nf_ingest_t in = {0};
    nf_source_record_t rec = {0};
    nf_source_route_t r;
    snprintf(rec.source_id, sizeof rec.source_id, "bad");
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"ftp://example.com/feed.xml", "scheme is not http or https"},
        {"file:///etc/passwd", "only http(s) URLs"},
        {"/etc/passwd", "only http(s) URLs"},
        {"http://", "host"},
        {"http://example.com:99999/x", "port"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(rec.url, sizeof rec.url, "%s", bad[i].url);
        err[0] = '\0';
        NF_CHECK_EQ(nf_ingest_source_route(&in, rt, &rec, &r, err, sizeof err), -EINVAL);
        NF_CHECK(r.set == NULL);
        if (!strstr(err, bad[i].why))
            fprintf(stderr, "  %s: error \"%s\", want \"%s\"\n", bad[i].url, err, bad[i].why),
                nf_test_failed_checks++;
    }
    /* Normalized like a configured source; the same host routes the same way. */
    snprintf(rec.url, sizeof rec.url, "HTTP://Example.COM:80/a/../feed.xml?utm_source=x");
    NF_REQUIRE(nf_ingest_source_route(&in, rt, &rec, &r, err, sizeof err) == 0);
    NF_REQUIRE(r.set);
    NF_CHECK_STR(r.set->url, "http://example.com/feed.xml");
    NF_CHECK_STR(r.set->host, "example.com");
    NF_CHECK_EQ(r.set->host_key, nf_sources_host_key("example.com"));
    NF_CHECK_EQ(r.owner, nf_route(rt, r.set->host_key));
    NF_CHECK(r.set->from_topic);
    nf_msg_t m;
    unsigned other = (unsigned)r.owner ^ 1u;
    nf_ingest_source_msg(&in, &r, other, &m);
    NF_CHECK_EQ(m.kind, NF_MSG_SOURCE_FORGET);
    NF_CHECK_EQ(m.flags, NF_SOURCE_FORGET_MOVED);
    nf_ingest_source_msg(&in, &r, (unsigned)r.owner, &m);
    NF_CHECK_EQ(m.kind, NF_MSG_SOURCE_SET);
    NF_CHECK(r.set == NULL); /* the message took it */
    free(m.body.ptr);
    /* A tombstone of an unknown id: FORGET (remove) everywhere. */
    rec.tombstone = true;
    NF_REQUIRE(nf_ingest_source_route(&in, rt, &rec, &r, err, sizeof err) == 0);
    NF_CHECK_EQ(r.owner, -1);
    NF_CHECK(r.set == NULL);
    nf_ingest_source_msg(&in, &r, 0, &m);
    NF_CHECK_EQ(m.kind, NF_MSG_SOURCE_FORGET);
    NF_CHECK_EQ(m.flags, 0);
    /* Keys: a configured-looking id keeps the pre-topic state key; others are hashed apart. */
    nf_id128_t k1 = nf_ingest_source_key("0123456789abcdef");
    NF_CHECK(k1.hi == 0x0123456789abcdefull && k1.lo == 0);
    nf_id128_t k2 = nf_ingest_source_key("0123456789ABCDEF"), k3 = nf_ingest_source_key("src-1");
    NF_CHECK(k2.lo & 1);
    NF_CHECK(k3.lo & 1);
    NF_CHECK(k2.hi != k3.hi);
    nf_runtime_destroy(rt);

    /* The configured list finds its sources by source_id (what a tombstone's revert needs). */
    nf_source_list_t l;
    nf_sources_init(&l);
    NF_CHECK(nf_sources_find(&l, "0123456789abcdef") == NULL);
    NF_REQUIRE(nf_sources_add(&l, "https://example.com/a.xml", "t", err, sizeof err) == 0);
    NF_REQUIRE(nf_sources_add(&l, "https://example.com/b.xml", "t", err, sizeof err) == 0);
    NF_CHECK(nf_sources_find(&l, l.items[1].source_id) == &l.items[1]);
    NF_CHECK(nf_sources_find(&l, l.items[0].source_id) == &l.items[0]);
    char upper[17];
    for (int i = 0; i < 17; i++)
        upper[i] = (char)toupper((unsigned char)l.items[0].source_id[i]);
    NF_CHECK(strcmp(upper, l.items[0].source_id) == 0 || nf_sources_find(&l, upper) == NULL);
    NF_CHECK(nf_sources_find(&l, "src-1") == NULL);
    nf_source_url_t u;
    NF_CHECK_EQ(nf_sources_check_url("  https://Example.com/a.xml  ", &u, err, sizeof err), 0);
    NF_CHECK_STR(u.url, "https://example.com/a.xml");
    NF_CHECK_EQ(u.host_key, l.items[0].host_key);
    nf_sources_free(&l);
}

/* ---------------------------------------------------------------- live changes */

/* A running job of two shards with the crawl actors, configured sources (NULL: none) and its
 * outputs in a JSON-lines file in a fresh directory; live_stop stops it and removes that. */
typedef struct live {
    char dir[64], sinkpath[600];
    nf_runtime_t *rt;
    nf_ingest_t in;
} live_t;

static void live_start(live_t *l, const char *name, const nf_source_list_t *sources)
{
    char spec[640], err[512];
    snprintf(l->dir, sizeof l->dir, "/tmp/nf-%s-XXXXXX", name);
    NF_REQUIRE(mkdtemp(l->dir));
    snprintf(l->sinkpath, sizeof l->sinkpath, "%s/out.jsonl", l->dir);
    snprintf(spec, sizeof spec, "jsonl:%s", l->sinkpath);
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = 2;
    NF_REQUIRE((l->rt = nf_runtime_create(&ro, err, sizeof err)) != NULL);
    memset(&l->in, 0, sizeof l->in);
    test_policy(&l->in);
    l->in.sources = sources;
    NF_REQUIRE((l->in.sink = nf_sink_open(spec, ro.shards, err, sizeof err)) != NULL);
    NF_REQUIRE(nf_ingest_register(l->rt, &l->in) == 0);
}

static void live_stop(live_t *l)
{
    nf_runtime_request_stop(l->rt);
    NF_CHECK_EQ(nf_runtime_wait(l->rt), 0);
    nf_runtime_destroy(l->rt);
    NF_CHECK_EQ(nf_sink_close(l->in.sink), 0);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", l->dir);
    NF_CHECK(system(cmd) == 0);
}

static void test_live_changes(void)
{
    char err[512];
    nf_source_list_t sources;
    nf_sources_init(&sources);
    char url[300];
    snprintf(url, sizeof url, "%s/feed/1.xml", g_base);
    NF_REQUIRE(nf_sources_add(&sources, url, "test", err, sizeof err) == 0);
    const char *cfg_id = sources.items[0].source_id;

    live_t l = {0};
    live_start(&l, "srctopic", &sources);
    nf_runtime_t *rt = l.rt;
    nf_ingest_t *in = &l.in;
    const char *sinkpath = l.sinkpath;
    uint64_t added0 = nf_counter_value(in->m.sources_added);
    uint64_t updated0 = nf_counter_value(in->m.sources_updated);
    uint64_t removed0 = nf_counter_value(in->m.sources_removed);
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/1.xml", 1));

    /* Upsert: a new source, crawled soon, held by exactly one shard. */
    nf_source_info_t info;
    NF_CHECK_EQ(deliverf(rt, in, "t-a", "/feed/2.xml", NULL), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-a", &info), 1);
    NF_CHECK(info.from_topic);
    NF_CHECK_EQ(info.want, NF_SOURCE_ACTIVE);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/2.xml", 1));
    NF_CHECK_EQ(nf_counter_value(in->m.sources_added) - added0, 1);
    NF_CHECK_EQ(nf_gauge_value(in->m.sources), 2);

    /* Pause: not due any more. */
    NF_CHECK_EQ(deliverf(rt, in, "t-a", "/feed/2.xml", "\"status\":\"paused\""), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-a", &info), 1);
    NF_CHECK_EQ(info.sched.status, NF_CRAWL_PAUSED);
    NF_CHECK_EQ(info.want, NF_SOURCE_PAUSED);

    /* New URL and interval, active again: a new schedule, crawled soon. */
    NF_CHECK_EQ(deliverf(rt, in, "t-a", "/feed/3.xml", "\"interval_s\":7200,\"type\":\"rss\""), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/3.xml", 1));
    NF_CHECK_EQ(lookup(rt, in, "t-a", &info), 1);
    snprintf(url, sizeof url, "%s/feed/3.xml", g_base);
    NF_CHECK_STR(info.url, url);
    NF_CHECK_EQ(info.sched.status, NF_CRAWL_ACTIVE);
    NF_CHECK_EQ(info.interval_s, 7200);
    NF_CHECK_EQ(info.sched.interval_ms, 7200000);
    NF_CHECK_EQ(info.type, NF_SOURCE_RSS);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/2.xml", 1)); /* the old URL is not crawled again */

    /* Interval only: takes effect at the next result, next_crawl_at untouched. */
    int64_t next = info.sched.next_crawl_at_ms;
    NF_CHECK_EQ(deliverf(rt, in, "t-a", "/feed/3.xml", "\"interval_s\":3600,\"type\":\"rss\""), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-a", &info), 1);
    NF_CHECK_EQ(info.sched.interval_ms, 3600000);
    NF_CHECK_EQ(info.sched.next_crawl_at_ms, next);

    /* Dead, then the same record again: stays dead. */
    NF_CHECK_EQ(deliverf(rt, in, "t-a", "/feed/3.xml", "\"status\":\"dead\""), 0);
    NF_CHECK_EQ(deliverf(rt, in, "t-a", "/feed/3.xml", "\"status\":\"dead\""), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-a", &info), 1);
    NF_CHECK_EQ(info.sched.status, NF_CRAWL_DEAD);

    /* Tombstone: gone from every shard. */
    NF_CHECK_EQ(deliver(rt, in, "t-a", NULL), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-a", NULL), 0);
    NF_CHECK_EQ(nf_counter_value(in->m.sources_removed) - removed0, 1);
    NF_CHECK_EQ(nf_gauge_value(in->m.sources), 1);

    /* The topic overrides a configured source with the same id; its tombstone gives the
     * configuration back (the configured URL is crawled afresh). */
    NF_CHECK_EQ(deliverf(rt, in, cfg_id, "/feed/4.xml", "\"interval_s\":1800"), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/4.xml", 1));
    NF_CHECK_EQ(lookup(rt, in, cfg_id, &info), 1);
    NF_CHECK(info.from_topic);
    NF_CHECK_EQ(info.interval_s, 1800);
    NF_CHECK_EQ(deliver(rt, in, cfg_id, NULL), 0);
    NF_CHECK_EQ(lookup(rt, in, cfg_id, &info), 1);
    NF_CHECK(!info.from_topic);
    snprintf(url, sizeof url, "%s/feed/1.xml", g_base);
    NF_CHECK_STR(info.url, url);
    NF_CHECK_EQ(info.interval_s, 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/1.xml", 2));

    /* Tombstone while the fetch runs: the attempt is recorded, the source is gone. */
    NF_CHECK_EQ(deliverf(rt, in, "t-slow", "/slow", NULL), 0);
    uint64_t deadline = nf_now_ns() + 10000000000ull;
    while (lookup(rt, in, "t-slow", &info) == 1 && !info.in_flight && nf_now_ns() < deadline)
        usleep(5000);
    NF_CHECK(info.in_flight);
    NF_CHECK_EQ(deliver(rt, in, "t-slow", NULL), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-slow", NULL), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/slow", 1));

    /* URL change while the fetch runs: that result is not applied, the new URL is crawled. */
    NF_CHECK_EQ(deliverf(rt, in, "t-slow2", "/slow", NULL), 0);
    deadline = nf_now_ns() + 10000000000ull;
    while (lookup(rt, in, "t-slow2", &info) == 1 && !info.in_flight && nf_now_ns() < deadline)
        usleep(5000);
    NF_CHECK(info.in_flight);
    NF_CHECK_EQ(deliverf(rt, in, "t-slow2", "/feed/5.xml", NULL), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/slow", 2));
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/5.xml", 1));
    NF_CHECK_EQ(lookup(rt, in, "t-slow2", &info), 1);
    NF_CHECK_STR(info.sched.etag, "\"5-v0\"");
    NF_CHECK_EQ(info.sched.failures, 0);

    NF_CHECK_EQ(nf_counter_value(in->m.sources_added) - added0, 3); /* t-a, t-slow, t-slow2 */
    /* t-a: pause, URL, interval, dead twice; the configured one twice; t-slow2's URL. */
    NF_CHECK_EQ(nf_counter_value(in->m.sources_updated) - updated0, 8);
    NF_CHECK_EQ(nf_counter_value(in->m.sources_removed) - removed0, 2);
    NF_CHECK_EQ(nf_gauge_value(in->m.sources), 2);

    live_stop(&l);
    nf_sources_free(&sources);
}

/* crawl_at_ms (`newsflow sources crawl-now`): a request newer than the last one applied makes
 * an active source due at once; the same record again does nothing; a paused or dead source
 * ignores it. Each step is read back on the shard (lookup queues behind the records). */
static void test_crawl_now(void)
{
    char extra[160];
    live_t l = {0};
    live_start(&l, "srccrawl", NULL);
    nf_runtime_t *rt = l.rt;
    nf_ingest_t *in = &l.in;
    const char *sinkpath = l.sinkpath;
    NF_REQUIRE(nf_runtime_start(rt) == 0);

    /* An hourly source: its first crawl comes soon, the next one an hour later. */
    NF_CHECK_EQ(deliverf(rt, in, "t-now", "/feed/6.xml", "\"interval_s\":3600"), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/6.xml", 1));
    nf_source_info_t info;
    uint64_t deadline = nf_now_ns() + 10000000000ull;
    while (lookup(rt, in, "t-now", &info) == 1 && info.in_flight && nf_now_ns() < deadline)
        usleep(5000);
    NF_CHECK(info.sched.next_crawl_at_ms > nf_wall_ms() + 3000000); /* an hour off */
    NF_CHECK_EQ(info.crawl_at_ms, 0);

    int64_t t1 = nf_wall_ms();
    snprintf(extra, sizeof extra, "\"interval_s\":3600,\"crawl_at_ms\":%lld", (long long)t1);
    NF_CHECK_EQ(deliverf(rt, in, "t-now", "/feed/6.xml", extra), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/6.xml", 2)); /* crawled at once */
    deadline = nf_now_ns() + 10000000000ull;
    while (lookup(rt, in, "t-now", &info) == 1 && info.in_flight && nf_now_ns() < deadline)
        usleep(5000);
    NF_CHECK_EQ(info.crawl_at_ms, t1);
    int64_t next = info.sched.next_crawl_at_ms;
    NF_CHECK(next > nf_wall_ms() + 3000000);

    NF_CHECK_EQ(info.crawl_answered_ms, t1);

    /* The same request again (a record republished): nothing changes. */
    NF_CHECK_EQ(deliverf(rt, in, "t-now", "/feed/6.xml", extra), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-now", &info), 1);
    NF_CHECK(!info.in_flight);
    NF_CHECK_EQ(info.sched.next_crawl_at_ms, next);

    /* Another request stamped earlier (a writer's clock behind): still a request. */
    snprintf(extra, sizeof extra, "\"interval_s\":3600,\"crawl_at_ms\":%lld", (long long)t1 - 5000);
    NF_CHECK_EQ(deliverf(rt, in, "t-now", "/feed/6.xml", extra), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/6.xml", 3));

    /* Paused, then a newer request: ignored (the source stays paused, not due). */
    NF_CHECK_EQ(
        deliverf(rt, in, "t-now", "/feed/6.xml", "\"interval_s\":3600,\"status\":\"paused\""), 0);
    snprintf(extra, sizeof extra, "\"interval_s\":3600,\"status\":\"paused\",\"crawl_at_ms\":%lld",
             (long long)t1 + 1);
    NF_CHECK_EQ(deliverf(rt, in, "t-now", "/feed/6.xml", extra), 0);
    NF_CHECK_EQ(lookup(rt, in, "t-now", &info), 1);
    NF_CHECK_EQ(info.sched.status, NF_CRAWL_PAUSED);
    NF_CHECK(!info.in_flight);

    /* A bad value is the decoder's error (a dead letter in kafka_in). */
    NF_CHECK(deliverf(rt, in, "t-now", "/feed/6.xml", "\"crawl_at_ms\":\"soon\"") != 0);
    NF_CHECK(deliverf(rt, in, "t-now", "/feed/6.xml", "\"crawl_at_ms\":-1") != 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/feed/6.xml", 3));

    /* A request while a fetch runs: that fetch began before it, another one answers it. */
    NF_CHECK_EQ(deliverf(rt, in, "t-slow3", "/slow", "\"interval_s\":3600"), 0);
    uint64_t until = nf_now_ns() + 10000000000ull;
    while (lookup(rt, in, "t-slow3", &info) == 1 && !info.in_flight && nf_now_ns() < until)
        usleep(5000);
    NF_CHECK(info.in_flight);
    int64_t t2 = nf_wall_ms();
    snprintf(extra, sizeof extra, "\"interval_s\":3600,\"crawl_at_ms\":%lld", (long long)t2);
    NF_CHECK_EQ(deliverf(rt, in, "t-slow3", "/slow", extra), 0);
    NF_CHECK(wait_fetchlogs(sinkpath, "/slow", 2));
    until = nf_now_ns() + 30000000000ull;
    while (lookup(rt, in, "t-slow3", &info) == 1 && info.crawl_answered_ms != t2 &&
           nf_now_ns() < until)
        usleep(5000);
    NF_CHECK_EQ(info.crawl_answered_ms, t2);

    live_stop(&l);
}

/* Many sources on many hosts, removed and moved between shards: the shard's index (removals
 * with backward shift), the pointer array and the growing host table stay consistent. Paused,
 * so nothing is fetched. */
static void test_many_sources(void)
{
    live_t l = {0};
    live_start(&l, "srcmany", NULL);
    nf_runtime_t *rt = l.rt;
    nf_ingest_t *in = &l.in;
    NF_REQUIRE(nf_runtime_start(rt) == 0);
    enum { N = 600, HOSTS = 150 };
    char id[32], url[128];
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "m-%d", i);
        snprintf(url, sizeof url, "http://h%d.example/feed.xml", i % HOSTS);
        NF_CHECK_EQ(deliverf(rt, in, id, url, "\"status\":\"paused\""), 0);
    }
    for (int i = 1; i < N; i += 2) {
        snprintf(id, sizeof id, "m-%d", i);
        NF_CHECK_EQ(deliver(rt, in, id, NULL), 0);
    }
    for (int i = 0; i < N; i += 6) { /* another host: some move to the other shard */
        snprintf(id, sizeof id, "m-%d", i);
        snprintf(url, sizeof url, "http://h%d.example/feed.xml", HOSTS + i);
        NF_CHECK_EQ(deliverf(rt, in, id, url, "\"status\":\"paused\""), 0);
    }
    int bad = 0;
    for (int i = 0; i < N; i++) {
        nf_source_info_t info;
        snprintf(id, sizeof id, "m-%d", i);
        unsigned holders = lookup(rt, in, id, &info);
        snprintf(url, sizeof url, "http://h%d.example/feed.xml", i % 6 ? i % HOSTS : HOSTS + i);
        if (i % 2 ? holders != 0
                  : holders != 1 || strcmp(info.url, url) || info.sched.status != NF_CRAWL_PAUSED)
            bad++;
    }
    NF_CHECK_EQ(bad, 0);
    NF_CHECK_EQ(nf_gauge_value(in->m.sources), N / 2);
    live_stop(&l);
}

/* ---------------------------------------------------------------- durability */

typedef struct job {
    nf_store_t *st;
    nf_runtime_t *rt;
    nf_epoch_t *ep;
    nf_ingest_t in;
} job_t;

static int job_open(job_t *j, const char *dir, unsigned shards, const nf_source_list_t *cfg)
{
    char err[512];
    memset(j, 0, sizeof *j);
    nf_store_opts_t so;
    nf_store_opts_default(&so);
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = shards;
    nf_epoch_opts_t eo = {.interval_ms = 1000000, .retain_every = 0, .retain_count = 0};
    if (!(j->st = nf_store_open(dir, &so, err, sizeof err)) ||
        !(j->rt = nf_runtime_create(&ro, err, sizeof err)) ||
        !(j->ep = nf_epoch_new(j->rt, j->st, NULL, &eo, err, sizeof err)) ||
        nf_epoch_recover(j->ep, err, sizeof err) != 0) {
        fprintf(stderr, "  job_open: %s\n", err);
        return -1;
    }
    test_policy(&j->in);
    j->in.sources = cfg;
    j->in.epoch = j->ep;
    j->in.store = j->st;
    if (nf_ingest_register(j->rt, &j->in) != 0 || nf_runtime_start(j->rt) != 0)
        return -1;
    return 0;
}

static int job_commit(job_t *j)
{
    char err[512];
    int r = nf_epoch_run_once(j->ep, err, sizeof err);
    if (r != 0)
        fprintf(stderr, "  epoch: %s\n", err);
    return r;
}

static void job_close(job_t *j)
{
    nf_runtime_request_stop(j->rt);
    nf_runtime_wait(j->rt);
    nf_runtime_destroy(j->rt);
    nf_epoch_free(j->ep);
    nf_store_close(j->st);
}

/* Whether the store holds a CrawlSchedule value for source_id. */
static int stored(nf_store_t *st, const char *source_id)
{
    unsigned char key[18];
    nf_id128_t id = nf_ingest_source_key(source_id);
    nf_kstate_encode_key((uint16_t)(id.hi % 256), id, key);
    void *v = NULL;
    size_t len = 0;
    char err[256];
    int r = nf_store_get(st, NF_KIND_CRAWL_SCHEDULE, key, sizeof key, &v, &len, err, sizeof err);
    free(v);
    return r;
}

static bool wait_etag(job_t *j, const char *id, const char *etag)
{
    nf_source_info_t info = {0};
    uint64_t deadline = nf_now_ns() + 30000000000ull;
    while (nf_now_ns() < deadline) {
        if (lookup(j->rt, &j->in, id, &info) == 1 && !strcmp(info.sched.etag, etag))
            return true;
        usleep(20000);
    }
    fprintf(stderr, "  %s: etag \"%s\", want %s\n", id, info.sched.etag, etag);
    return false;
}

static void test_restart(void)
{
    char dir[] = "/tmp/nf-srcstate-XXXXXX";
    NF_REQUIRE(mkdtemp(dir));
    char err[512], url[300];
    nf_source_list_t sources;
    nf_sources_init(&sources);
    snprintf(url, sizeof url, "%s/feed/1.xml", g_base);
    NF_REQUIRE(nf_sources_add(&sources, url, "test", err, sizeof err) == 0);
    const char *cfg_id = sources.items[0].source_id;

    /* Run 1, two shards. */
    job_t j;
    NF_REQUIRE(job_open(&j, dir, 2, &sources) == 0);
    /* A second loopback host that the first shard count routes to the other shard: nothing
     * listens there (its fetches fail), it only has to live on the right shard. */
    char moved_url[300] = "";
    unsigned home = nf_route(j.rt, nf_sources_host_key("127.0.0.1"));
    for (int n = 2; n < 200 && !moved_url[0]; n++) {
        char host[32];
        snprintf(host, sizeof host, "127.0.0.%d", n);
        if (nf_route(j.rt, nf_sources_host_key(host)) != home)
            snprintf(moved_url, sizeof moved_url, "http://%s:%u/feed/6.xml", host, g_port);
    }
    NF_REQUIRE(moved_url[0]);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, "src-a", "/feed/2.xml", "\"interval_s\":3600"), 0);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, "src-b", "/feed/3.xml", "\"status\":\"paused\""), 0);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, cfg_id, "/feed/4.xml", "\"interval_s\":1800"), 0);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, "src-c", "/feed/5.xml", NULL), 0);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, "src-m", "/feed/6.xml", NULL), 0);
    NF_CHECK(wait_etag(&j, "src-a", "\"2-v0\""));
    NF_CHECK(wait_etag(&j, cfg_id, "\"4-v0\""));
    NF_CHECK_EQ(job_commit(&j), 0);
    NF_CHECK_EQ(stored(j.st, "src-c"), 1);
    /* In one epoch: src-c removed, src-m moved to the other shard (delete vs put race). */
    NF_CHECK_EQ(deliver(j.rt, &j.in, "src-c", NULL), 0);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, "src-m", moved_url, NULL), 0);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-m", NULL), 1);
    NF_CHECK_EQ(job_commit(&j), 0);
    NF_CHECK_EQ(stored(j.st, "src-c"), 0);
    nf_source_info_t a1;
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-a", &a1), 1);
    job_close(&j);

    /* Run 2, three shards: everything from the store. */
    nf_source_info_t info;
    NF_REQUIRE(job_open(&j, dir, 3, &sources) == 0);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-a", &info), 1);
    snprintf(url, sizeof url, "%s/feed/2.xml", g_base);
    NF_CHECK_STR(info.url, url);
    NF_CHECK(info.from_topic);
    NF_CHECK_EQ(info.interval_s, 3600);
    NF_CHECK_EQ(info.sched.interval_ms, 3600000);
    NF_CHECK_STR(info.sched.etag, "\"2-v0\"");
    NF_CHECK_EQ(info.sched.next_crawl_at_ms, a1.sched.next_crawl_at_ms);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-b", &info), 1);
    NF_CHECK_EQ(info.sched.status, NF_CRAWL_PAUSED);
    NF_CHECK_EQ(info.want, NF_SOURCE_PAUSED);
    NF_CHECK_EQ(lookup(j.rt, &j.in, cfg_id, &info), 1);
    snprintf(url, sizeof url, "%s/feed/4.xml", g_base);
    NF_CHECK_STR(info.url, url);
    NF_CHECK(info.from_topic);
    NF_CHECK_EQ(info.interval_s, 1800);
    NF_CHECK_STR(info.sched.etag, "\"4-v0\"");
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-c", NULL), 0);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-m", &info), 1);
    NF_CHECK_STR(info.url, moved_url);
    NF_CHECK_EQ(nf_gauge_value(j.in.m.sources), 4);
    /* Remove src-a, give the configured source its configuration back. */
    NF_CHECK_EQ(deliver(j.rt, &j.in, "src-a", NULL), 0);
    NF_CHECK_EQ(deliver(j.rt, &j.in, cfg_id, NULL), 0);
    NF_CHECK_EQ(job_commit(&j), 0);
    NF_CHECK_EQ(stored(j.st, "src-a"), 0);
    NF_CHECK_EQ(stored(j.st, cfg_id), 1);
    job_close(&j);

    /* Run 3, one shard. */
    NF_REQUIRE(job_open(&j, dir, 1, &sources) == 0);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-a", NULL), 0);
    NF_CHECK_EQ(lookup(j.rt, &j.in, cfg_id, &info), 1);
    snprintf(url, sizeof url, "%s/feed/1.xml", g_base);
    NF_CHECK_STR(info.url, url);
    NF_CHECK(!info.from_topic);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-b", &info), 1);
    NF_CHECK_EQ(info.sched.status, NF_CRAWL_PAUSED);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-m", NULL), 1);
    NF_CHECK_EQ(nf_gauge_value(j.in.m.sources), 3);
    job_close(&j);

    nf_sources_free(&sources);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    NF_CHECK(system(cmd) == 0);
}

/* A process does not know when its previous run, or a partition's previous owner, last sent a
 * host a request: its first request to a host waits a full crawl.host_spacing_ms from when it
 * took the host on (crawl_policy.h nf_host_adopted). A source stored paused by run 1 is revived
 * as soon as run 2 has started, which makes it due at once: its request must still come a
 * spacing after run 2 began. */
static void test_spacing_after_restart(void)
{
    char dir[] = "/tmp/nf-srcspace-XXXXXX";
    NF_REQUIRE(mkdtemp(dir));
    g_spacing_ms = 1000;
    job_t j;
    NF_REQUIRE(job_open(&j, dir, 1, NULL) == 0);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, "src-p", "/feed/9.xml", "\"status\":\"paused\""), 0);
    NF_CHECK_EQ(lookup(j.rt, &j.in, "src-p", NULL), 1);
    NF_CHECK_EQ(job_commit(&j), 0);
    job_close(&j);

    uint64_t before = nf_testhttpd_requests(g_srv);
    int64_t t0 = nf_wall_ms();
    NF_REQUIRE(job_open(&j, dir, 1, NULL) == 0);
    NF_CHECK_EQ(deliverf(j.rt, &j.in, "src-p", "/feed/9.xml", NULL), 0); /* active: due now */
    uint64_t deadline = nf_now_ns() + 30000000000ull;
    while (nf_testhttpd_requests(g_srv) == before && nf_now_ns() < deadline)
        usleep(1000);
    int64_t seen = nf_wall_ms() - t0; /* at or after the request came */
    NF_CHECK(nf_testhttpd_requests(g_srv) > before);
    NF_CHECK(seen >= g_spacing_ms);
    fprintf(stderr, "  first request of run 2 seen %lld ms after it started\n", (long long)seen);
    job_close(&j);
    g_spacing_ms = 0;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    NF_CHECK(system(cmd) == 0);
}

/* The sources topic's partition of a host is Kafka's default partitioner's for a record keyed by
 * the host: Kafka's own murmur2 test vectors (Utils.murmur2 in its UtilsTest), then librdkafka's
 * murmur2 partitioner as the reference over many hosts and partition counts. */
static void test_host_partition(void)
{
    static const struct {
        const char *s;
        int32_t h;
    } v[] = {{"21", -973932308},
             {"foobar", -790332482},
             {"a-little-bit-long-string", -985981536},
             {"a-little-bit-longer-string", -1486304829},
             {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
             {"abc", 479470107}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        NF_CHECK_EQ(nf_murmur2(v[i].s, strlen(v[i].s)), v[i].h);
    uint64_t x = 0x243f6a8885a308d3ull;
    char host[64];
    size_t differ = 0;
    for (int i = 0; i < 20000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int len = snprintf(host, sizeof host, "feeds%llu.example-%u.com",
                           (unsigned long long)(x >> 40), (unsigned)(x >> 20) % 997);
        int32_t n = 1 + (int32_t)(x % 64);
        int32_t want = rd_kafka_msg_partitioner_murmur2(NULL, host, (size_t)len, n, NULL, NULL);
        int32_t got = nf_sources_partition(host, n);
        if (got != want && differ++ < 5)
            fprintf(stderr, "  %s over %d: %d, librdkafka %d\n", host, n, got, want);
        NF_CHECK(got >= 0 && got < n);
    }
    NF_CHECK_EQ(differ, 0);
    NF_CHECK_EQ(nf_sources_partition("example.com", 1), 0);
}

int main(void)
{
    nf_fetch_global_init();
    nf_feed_global_init();
    nf_metrics_init(4);
    nf_testhttpd_t *srv = g_srv = nf_testhttpd_start(NULL, 0);
    if (!srv) {
        fprintf(stderr, "cannot start the test HTTP server\n");
        return 1;
    }
    g_port = nf_testhttpd_port(srv);
    snprintf(g_base, sizeof g_base, "http://127.0.0.1:%u", g_port);
    NF_RUN(test_host_partition);
    NF_RUN(test_route_refuses);
    NF_RUN(test_live_changes);
    NF_RUN(test_crawl_now);
    NF_RUN(test_many_sources);
    NF_RUN(test_restart);
    NF_RUN(test_spacing_after_restart);
    nf_testhttpd_stop(srv);
    nf_metrics_shutdown();
    return nf_test_report();
}
