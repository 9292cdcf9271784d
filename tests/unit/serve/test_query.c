/* Tests src/serve/query.c through the admin server it answers on (real HTTP with libcurl) over a
 * real store: 503 with Retry-After before the first committed view and the epoch of the view
 * after; answers that stay on the published view while newer state is applied; the interest
 * vector found in whichever owned partition's key group holds it (the latest updated when
 * several do, none from a partition this process does not own); the trending window with
 * topic vectors and the topic filter; and the 400s that name their parameter. Then, for a job
 * of several processes (test_owners): the reader's partition by the producers' partitioners
 * (vectors from zlib's CRC-32 and Kafka's murmur2), the 307 to the owner a group description
 * names (the description is the Kafka boundary: a fixed member table stands for the broker's
 * answer), 503 while the owner is unknown or still named as this process, and the global
 * routes sent to trending-panes 0's owner when this process holds no global state. */
#include "nf_test.h"
#include "teststore.h"

#include "actors/serve_state.h"
#include "algo/bytes.h"
#include "engine/interest.h"
#include "feed/text.h"
#include "runtime/admin.h"
#include "serve/query.h"
#include "state/kstate.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const g_topics[] = {"politics", "science", "sports"};
static bool g_owned[4] = {true, true, true, true};

static bool owns(void *arg, unsigned p)
{
    (void)arg;
    return p < 4 && g_owned[p];
}

static nf_query_t *g_query;

static int api(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    (void)arg;
    int s = nf_query_handle(g_query, route, req, body, len);
    return s ? s : 404;
}

typedef struct reply {
    long status;
    char body[8192];
    size_t len;
    char retry_after[32];
    char location[512];
} reply_t;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    reply_t *r = arg;
    size_t k = size * n;
    if (r->len + k < sizeof r->body) {
        memcpy(r->body + r->len, p, k);
        r->len += k;
        r->body[r->len] = '\0';
    }
    return k;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    reply_t *r = arg;
    size_t k = size * n;
    if (k > 13 && strncasecmp(p, "Retry-After: ", 13) == 0)
        snprintf(r->retry_after, sizeof r->retry_after, "%.*s", (int)(k - 13 - 2), p + 13);
    if (k > 10 && strncasecmp(p, "Location: ", 10) == 0)
        snprintf(r->location, sizeof r->location, "%.*s", (int)(k - 10 - 2), p + 10);
    return k;
}

/* GET path on the server; the parsed body (caller deletes) or NULL. */
static cJSON *get(uint16_t port, const char *path, reply_t *r)
{
    memset(r, 0, sizeof *r);
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    return cJSON_Parse(r->body);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

/* An interest value: [expiry 0][version][updated_ms][topic vector]. */
static void put_interest(nf_store_batch_t *b, unsigned kg, const char *user, uint64_t version,
                         int64_t updated_ms, const nf_topic_vec_t *vec)
{
    unsigned char key[18], val[24 + NF_TOPICS_ENC_MAX];
    nf_kstate_encode_key((uint16_t)kg, nf_interest_user_key(user), key);
    nf_put_le64(val, 0);
    nf_put_le64(val + 8, version);
    nf_put_le64(val + 16, (uint64_t)updated_ms);
    int n = nf_interest_topics_encode(vec, val + 24, NF_TOPICS_ENC_MAX);
    nf_store_batch_put(b, NF_KIND_INTEREST, key, sizeof key, val, 24 + (size_t)n);
}

static void put_topics_until(nf_store_batch_t *b, const char *hex, const nf_topic_vec_t *vec,
                             int64_t expires_ms)
{
    nf_id128_t id;
    nf_id128_from_hex32(hex, &id);
    unsigned char key[18], val[8 + NF_TOPICS_ENC_MAX];
    nf_kstate_encode_key((uint16_t)(id.hi % 256), id, key);
    nf_put_le64(val, (uint64_t)expires_ms);
    int n = nf_interest_topics_encode(vec, val + 8, NF_TOPICS_ENC_MAX);
    nf_store_batch_put(b, NF_KIND_ARTICLE_TOPICS, key, sizeof key, val, 8 + (size_t)n);
}

static void put_topics(nf_store_batch_t *b, const char *hex, const nf_topic_vec_t *vec)
{
    put_topics_until(b, hex, vec, 0);
}

static void put_trending(nf_store_batch_t *b, const char *json)
{
    size_t n = strlen(json);
    unsigned char *v = calloc(1, 8 + n);
    memcpy(v + 8, json, n);
    nf_store_batch_put(b, NF_KIND_TRENDING, "L", 1, v, 8 + n);
    free(v);
}

/* A store in a fresh directory, the query API on it (g_query), served on an ephemeral port. */
typedef struct served {
    char dir[128];
    nf_store_t *st;
    nf_admin_t *a;
    uint16_t port;
} served_t;

/* false if any of it failed (the test then stops: NF_REQUIRE) */
static bool serve_start(const char *name, served_t *s)
{
    if (!nf_teststore_tmpdir(name, s->dir, sizeof s->dir) || !(s->st = nf_teststore_open(s->dir)))
        return false;
    nf_query_opts_t qo = {
        .store = s->st, .topic_names = g_topics, .ntopics = 3, .read_partitions = 4, .owns = owns};
    nf_admin_hooks_t hooks = {.api = api};
    char err[256];
    if (!(g_query = nf_query_new(&qo)) ||
        !(s->a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err)))
        return false;
    s->port = nf_admin_port(s->a);
    return true;
}

static void serve_stop(served_t *s)
{
    nf_admin_stop(s->a);
    nf_query_free(g_query);
    nf_store_close(s->st);
    nf_teststore_rmtree(s->dir);
}

#define A1 "0123456789abcdef0123456789abcdef"
#define A2 "fedcba9876543210fedcba9876543210"

static void test_query_api(void)
{
    served_t sv;
    NF_REQUIRE(serve_start("query", &sv));
    uint16_t port = sv.port;
    nf_store_t *st = sv.st;
    reply_t r;

    /* No committed view yet: 503, Retry-After. */
    cJSON *j = get(port, "/v1/trending", &r);
    NF_CHECK_EQ(r.status, 503);
    NF_CHECK_STR(r.retry_after, "1");
    NF_CHECK(strstr(str(j, "error"), "restoring") != NULL);
    cJSON_Delete(j);

    /* Epoch 1: reader "ann" in partitions 1 (older) and 2 (newer); "bob" only in partition 3. */
    nf_topic_vec_t old = {.n = 1, .t = {{0, 1.0}}};
    nf_topic_vec_t ann = {.n = 2, .t = {{1, 0.6}, {2, 0.8}}};
    nf_topic_vec_t bob = {.n = 1, .t = {{2, 1.0}}};
    nf_topic_vec_t sci = {.n = 1, .t = {{1, 1.0}}};
    nf_store_batch_t *b = nf_store_batch_new();
    put_interest(b, 1, "ann", 3, 1700000000000, &old);
    put_interest(b, 2, "ann", 7, 1700000500000, &ann);
    put_interest(b, 3, "bob", 1, 1700000000000, &bob);
    put_topics(b, A1, &sci);
    put_trending(
        b, "{\"window_start\":\"2026-11-26T10:00:00Z\",\"window_end\":\"2026-11-26T11:00:00Z\","
           "\"items\":[{\"article_id\":\"" A1 "\",\"score\":9},{\"article_id\":\"not-hex\","
           "\"score\":5},{\"article_id\":\"" A2 "\",\"score\":2}]}");
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 1) == 0);

    j = get(port, "/v1/users/ann/interest", &r);
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK_EQ(num(j, "epoch"), 1);
    NF_CHECK_EQ(num(j, "version"), 7); /* the newer of the two partitions' */
    const cJSON *vec = cJSON_GetObjectItemCaseSensitive(j, "vector");
    NF_CHECK(num(vec, "science") == 0.6 && num(vec, "sports") == 0.8);
    NF_CHECK_STR(str(j, "updated_at"), "2023-11-14T22:21:40Z");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(j, "top_topics");
    NF_CHECK(cJSON_GetArraySize(top) == 2 &&
             strcmp(cJSON_GetArrayItem(top, 0)->valuestring, "sports") == 0);
    cJSON_Delete(j);

    /* Partition 3 not owned: bob is not found here. */
    g_owned[3] = false;
    j = get(port, "/v1/users/bob/interest", &r);
    NF_CHECK_EQ(r.status, 404);
    NF_CHECK_STR(str(j, "parameter"), "user_id");
    cJSON_Delete(j);
    g_owned[3] = true;
    j = get(port, "/v1/users/bob/interest", &r);
    NF_CHECK_EQ(r.status, 200);
    cJSON_Delete(j);

    /* Trending: items in order with their vectors (null where unknown); the topic filter. */
    j = get(port, "/v1/trending", &r);
    NF_CHECK_EQ(r.status, 200);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
    NF_CHECK_EQ(cJSON_GetArraySize(items), 3);
    NF_CHECK_STR(str(cJSON_GetArrayItem(items, 0), "article_id"), A1);
    NF_CHECK_EQ(num(cJSON_GetArrayItem(items, 0), "score"), 9);
    NF_CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(items, 1), "topics")));
    NF_CHECK_STR(str(j, "window_end"), "2026-11-26T11:00:00Z");
    cJSON_Delete(j);
    j = get(port, "/v1/trending?topic=science", &r);
    items = cJSON_GetObjectItemCaseSensitive(j, "items");
    NF_CHECK_EQ(cJSON_GetArraySize(items), 1);
    NF_CHECK_STR(str(j, "topic"), "science");
    cJSON_Delete(j);
    j = get(port, "/v1/trending?limit=2", &r);
    NF_CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "items")), 2);
    cJSON_Delete(j);

    /* Bad parameters: 400 naming each. */
    const char *bad[][2] = {
        {"/v1/trending?limit=0", "limit"},     {"/v1/trending?limit=101", "limit"},
        {"/v1/trending?limit=abc", "limit"},   {"/v1/trending?limit=", "limit"},
        {"/v1/trending?limit=1%002", "limit"}, {"/v1/trending?topic=Science", "topic"},
        {"/v1/trending?topic=", "topic"},      {"/v1/users/a%01b/interest", "user_id"},
        {"/v1/users/%ff/interest", "user_id"}, {"/v1/users//interest", "user_id"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = get(port, bad[i][0], &r);
        NF_CHECK_EQ(r.status, 400);
        NF_CHECK_STR(str(j, "parameter"), bad[i][1]);
        cJSON_Delete(j);
    }

    /* A long multi-byte topic: the error quotes a prefix cut at a character boundary. */
    char path[512] = "/v1/trending?topic=a";
    for (int i = 0; i < 40; i++)
        strcat(path, "%C3%A9");
    j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 400);
    NF_CHECK(nf_utf8_valid(r.body, r.len));
    NF_CHECK(strstr(str(j, "error"), "unknown topic 'a") != NULL);
    cJSON_Delete(j);

    /* Epoch 2 applied but not yet published: answers stay on epoch 1. */
    nf_topic_vec_t ann2 = {.n = 1, .t = {{0, 1.0}}};
    b = nf_store_batch_new();
    put_interest(b, 2, "ann", 8, 1700000600000, &ann2);
    NF_REQUIRE(nf_teststore_commit(st, 2, b) == 0);
    nf_store_batch_free(b);
    j = get(port, "/v1/users/ann/interest", &r);
    NF_CHECK_EQ(num(j, "epoch"), 1);
    NF_CHECK_EQ(num(j, "version"), 7);
    cJSON_Delete(j);
    NF_REQUIRE(nf_store_view_publish(st, 2) == 0);
    j = get(port, "/v1/users/ann/interest", &r);
    NF_CHECK_EQ(num(j, "epoch"), 2);
    NF_CHECK_EQ(num(j, "version"), 8);
    cJSON_Delete(j);

    serve_stop(&sv);
}

/* The group as the broker would describe it: "other" owns read-events 0 and 2 and
 * trending-panes 0, this process ("self") 1 and 3; a member of an older version advertises
 * nothing. */
static int g_describes;
static int describe(void *arg, int timeout_ms,
                    void (*cb)(void *cbarg, const char *client_id, nf_input_t in,
                               int32_t partition),
                    void *cbarg, char *err, size_t errlen)
{
    (void)arg, (void)timeout_ms, (void)err, (void)errlen;
    char other[128], self[128];
    nf_owners_client_id("http://10.0.0.2:9464", other, sizeof other);
    nf_owners_client_id("http://10.0.0.1:9464", self, sizeof self);
    cb(cbarg, other, NF_INPUT_READ_EVENTS, 0);
    cb(cbarg, other, NF_INPUT_READ_EVENTS, 2);
    cb(cbarg, other, NF_INPUT_TRENDING_PANES, 0);
    cb(cbarg, self, NF_INPUT_READ_EVENTS, 1);
    cb(cbarg, self, NF_INPUT_READ_EVENTS, 3);
    cb(cbarg, "rdkafka", NF_INPUT_SOURCES, 5);
    __atomic_add_fetch(&g_describes, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static bool g_global_here;
static bool global_here(void *arg)
{
    (void)arg;
    return g_global_here;
}

static bool owns_odd(void *arg, unsigned p)
{
    (void)arg;
    return p % 2 == 1;
}

/* The first user id "uN" whose partition (of 4, CRC-32) is p. */
static void user_in(unsigned p, char *out, size_t n)
{
    for (unsigned i = 0;; i++) {
        snprintf(out, n, "u%u", i);
        if (nf_query_partition(0, out, strlen(out), 4) == (int32_t)p)
            return;
    }
}

static void test_owners(void)
{
    /* zlib.crc32(b"demo-user-0") = 237682939, crc32(b"foobar") = 2666930069; Kafka's
     * Utils.murmur2("foobar") = -790332482, ("21") = -973932308 */
    NF_CHECK_EQ(nf_query_partition(0, "demo-user-0", 11, 1000), 237682939 % 1000);
    NF_CHECK_EQ(nf_query_partition(0, "foobar", 6, 1000), (int32_t)(2666930069u % 1000));
    NF_CHECK_EQ(nf_query_partition(1, "foobar", 6, 1000), (-790332482 & 0x7fffffff) % 1000);
    NF_CHECK_EQ(nf_query_partition(1, "21", 2, 1000), (-973932308 & 0x7fffffff) % 1000);
    NF_CHECK_EQ(nf_query_partition(0, "x", 1, 1), 0);

    char dir[128];
    NF_REQUIRE(nf_teststore_tmpdir("owners", dir, sizeof dir));
    nf_store_t *st = nf_teststore_open(dir);
    NF_REQUIRE(st);
    char err[256];
    nf_owners_opts_t oo = {.describe = describe, .refresh_ms = 50};
    nf_owners_t *ow = nf_owners_start(&oo, err, sizeof err);
    NF_REQUIRE(ow);
    nf_query_opts_t qo = {.store = st,
                          .topic_names = g_topics,
                          .ntopics = 3,
                          .read_partitions = 4,
                          .owns = owns_odd,
                          .partitioner = 0,
                          .owners = ow,
                          .global_here = global_here,
                          .self_url = "http://10.0.0.1:9464"};
    g_query = nf_query_new(&qo);
    NF_REQUIRE(g_query);
    nf_admin_hooks_t hooks = {.api = api};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a);
    uint16_t port = nf_admin_port(a);
    nf_store_batch_t *b = nf_store_batch_new();
    put_trending(b, "{\"window_start\":\"2026-11-26T10:00:00Z\",\"window_end\":"
                    "\"2026-11-26T11:00:00Z\",\"items\":[]}");
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 1) == 0);
    char u0[32], u1[32], path[256], want[512];
    user_in(0, u0, sizeof u0);
    user_in(1, u1, sizeof u1);
    reply_t r;
    /* Nothing described before a look-up needs it; the first one finds no owner yet. */
    usleep(100000);
    NF_CHECK_EQ(__atomic_load_n(&g_describes, __ATOMIC_SEQ_CST), 0);
    snprintf(path, sizeof path, "/v1/feed/%s", u0);
    cJSON *j0 = get(port, path, &r);
    cJSON_Delete(j0);
    /* The owners thread has stored the first description once it starts the second (a first
     * that has only begun leaves the owner unknown: 503). */
    for (int i = 0; i < 1000 && __atomic_load_n(&g_describes, __ATOMIC_SEQ_CST) < 2; i++)
        usleep(10000);
    NF_REQUIRE(__atomic_load_n(&g_describes, __ATOMIC_SEQ_CST) >= 2);
    /* A reader of partition 0: 307 to the other process, the arguments kept. */
    snprintf(path, sizeof path, "/v1/feed/%s?limit=5&junk=1", u0);
    cJSON *j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 307);
    snprintf(want, sizeof want, "http://10.0.0.2:9464/v1/feed/%s?limit=5", u0);
    NF_CHECK_STR(r.location, want);
    NF_CHECK_STR(str(j, "owner"), "http://10.0.0.2:9464");
    NF_CHECK_STR(str(j, "input"), "read-events");
    NF_CHECK_EQ(num(j, "partition"), 0);
    cJSON_Delete(j);
    snprintf(path, sizeof path, "/v1/users/%s/interest", u0);
    j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 307);
    cJSON_Delete(j);
    /* A reader of partition 1 is this process's: answered here (no vector: 404). */
    snprintf(path, sizeof path, "/v1/users/%s/interest", u1);
    j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 404);
    cJSON_Delete(j);
    /* ... and its feed needs the global state, which this process does not hold yet. */
    snprintf(path, sizeof path, "/v1/feed/%s", u1);
    j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 503);
    NF_CHECK(strstr(str(j, "error"), "global") != NULL);
    cJSON_Delete(j);
    /* Global routes: to trending-panes 0's owner, the path percent-encoded. */
    j = get(port, "/v1/topics/sports/recent?limit=3", &r);
    NF_CHECK_EQ(r.status, 307);
    NF_CHECK_STR(r.location, "http://10.0.0.2:9464/v1/topics/sports/recent?limit=3");
    cJSON_Delete(j);
    j = get(port, "/v1/trending?topic=a%20b", &r);
    NF_CHECK_EQ(r.status, 307);
    NF_CHECK_STR(r.location, "http://10.0.0.2:9464/v1/trending?topic=a%20b");
    cJSON_Delete(j);
    /* Held here (its owner, or a replica): answered. */
    g_global_here = true;
    j = get(port, "/v1/trending", &r);
    NF_CHECK_EQ(r.status, 200);
    cJSON_Delete(j);
    snprintf(path, sizeof path, "/v1/feed/%s", u1);
    j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK_STR(str(j, "source"), "trending"); /* a cold reader */
    cJSON_Delete(j);
    /* A reader of partition 3 is owned here; of 2 named "other"; a partition nobody is known
     * to own (the description is older than a rebalance): 503 Retry-After. */
    nf_query_free(g_query);
    qo.read_partitions = 8;
    g_query = nf_query_new(&qo);
    NF_REQUIRE(g_query);
    char u6[32];
    for (unsigned i = 0;; i++) {
        snprintf(u6, sizeof u6, "u%u", i);
        if (nf_query_partition(0, u6, strlen(u6), 8) == 6)
            break;
    }
    snprintf(path, sizeof path, "/v1/feed/%s", u6);
    j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 503);
    NF_CHECK_STR(r.retry_after, "1");
    NF_CHECK_EQ(num(j, "partition"), 6);
    cJSON_Delete(j);
    /* The table naming this process for a partition it does not own (it has just let it go):
     * 503, never a redirect to itself. */
    qo.self_url = "http://10.0.0.2:9464";
    nf_query_free(g_query);
    g_query = nf_query_new(&qo);
    NF_REQUIRE(g_query);
    snprintf(path, sizeof path, "/v1/feed/%s", u0);
    j = get(port, path, &r);
    NF_CHECK_EQ(r.status, 503);
    cJSON_Delete(j);

    nf_admin_stop(a);
    nf_query_free(g_query);
    nf_owners_stop(ow);
    nf_store_close(st);
    nf_teststore_rmtree(dir);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* /v1/trending is computed once per view, limit and topic, and kept (query.c, answer_t) only
 * until the first of its articles' vectors expires: after that the article is listed without
 * topics and no longer under its topic; a new view's window replaces the answer. */
static void test_trending_answer_kept(void)
{
    served_t sv;
    NF_REQUIRE(serve_start("query_kept", &sv));
    uint16_t port = sv.port;
    nf_store_t *st = sv.st;
    reply_t r;
    nf_topic_vec_t sci = {.n = 1, .t = {{1, 1.0}}};
    nf_store_batch_t *b = nf_store_batch_new();
    put_topics_until(b, A1, &sci, wall_ms() + 1500);
    put_topics(b, A2, &sci);
    put_trending(b, "{\"window_start\":\"2026-11-26T10:00:00Z\",\"window_end\":"
                    "\"2026-11-26T11:00:00Z\",\"items\":[{\"article_id\":\"" A1 "\",\"score\":9},"
                    "{\"article_id\":\"" A2 "\",\"score\":2}]}");
    NF_REQUIRE(nf_teststore_commit(st, 1, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 1) == 0);
    for (int round = 0; round < 2; round++) { /* computed, then kept: the same answer */
        cJSON *j = get(port, "/v1/trending?topic=science", &r);
        NF_CHECK_EQ(r.status, 200);
        NF_CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "items")), 2);
        cJSON_Delete(j);
    }
    /* A1's vector expires: the kept answers end with it (both of them) */
    int64_t deadline = wall_ms() + 30000;
    int n = 2;
    while (n == 2 && wall_ms() < deadline) {
        cJSON *j = get(port, "/v1/trending?topic=science", &r);
        n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "items"));
        cJSON_Delete(j);
        if (n == 2)
            usleep(50000);
    }
    NF_CHECK_EQ(n, 1);
    cJSON *j = get(port, "/v1/trending", &r);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "items"), 0);
    NF_CHECK_STR(str(first, "article_id"), A1);
    NF_CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(first, "topics")));
    cJSON_Delete(j);
    /* a new view, a new window: its answer, not the kept one */
    b = nf_store_batch_new();
    put_trending(b,
                 "{\"window_start\":\"2026-11-26T11:00:00Z\",\"window_end\":"
                 "\"2026-11-26T12:00:00Z\",\"items\":[{\"article_id\":\"" A2 "\",\"score\":4}]}");
    NF_REQUIRE(nf_teststore_commit(st, 2, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(st, 2) == 0);
    j = get(port, "/v1/trending?topic=science", &r);
    NF_CHECK_EQ(num(j, "epoch"), 2);
    NF_CHECK_STR(str(j, "window_end"), "2026-11-26T12:00:00Z");
    NF_CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "items")), 1);
    cJSON_Delete(j);
    serve_stop(&sv);
}

/* ---- a story's articles (serve_state.h, NF_KIND_STORY) ---- */

enum { STORY_ARTS = 9 };

static nf_id128_t story_id(unsigned i)
{
    return (nf_id128_t){0x1000 + 37ull * i, 0xabc0 + i};
}

static void story_hex(unsigned i, char out[33])
{
    nf_id128_t id = story_id(i);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)id.hi, (unsigned long long)id.lo);
}

static void put_meta(nf_store_batch_t *b, unsigned i)
{
    char hex[33], v[256];
    story_hex(i, hex);
    int n =
        snprintf(v + 8, sizeof v - 8,
                 "{\"article_id\":\"%s\",\"title\":\"t%u\",\"source_id\":\"s%u\"}", hex, i, i % 4);
    memset(v, 0, 8);
    unsigned char key[18];
    nf_kstate_encode_key((uint16_t)(story_id(i).hi % 256), story_id(i), key);
    nf_store_batch_put(b, NF_KIND_ARTICLE_META, key, sizeof key, v, 8 + (size_t)n);
}

static void put_parent(nf_store_batch_t *b, unsigned i, unsigned parent)
{
    unsigned char key[18], v[8 + 24] = {0};
    nf_kstate_encode_key((uint16_t)(story_id(i).hi % 256), story_id(i), key);
    nf_put_le64(v + 8, story_id(parent).hi);
    nf_put_le64(v + 16, story_id(parent).lo);
    nf_store_batch_put(b, NF_KIND_CLUSTER_PARENT, key, sizeof key, v, sizeof v);
}

/* A story tree as the stories actor writes one: story 0 holds articles 0, 1, 2; story 3 (with
 * article 4) merged into 0; story 5 (with 6) merged into 3 before; story 7 merged into 0 with
 * no member entries of its own. Article 8 was never clustered. Published times: 6 and 1 tie
 * (listed by id). The whole tree, paged one, two and a hundred at a time from any member's id,
 * lists articles 0..6 newest first; every story id answers as story 0. */
static void test_story_articles(void)
{
    served_t sv;
    NF_REQUIRE(serve_start("query_story", &sv));
    static const int64_t pub[STORY_ARTS] = {1000, 5000, 3000, 2000, 7000, 4000, 5000, 0, 0};
    /* the story each article joined (its member entry), its union-find parent (compressed or
     * not: the query walks either) */
    static const unsigned owner[STORY_ARTS] = {0, 0, 0, 3, 3, 5, 5, 7, 8};
    static const unsigned parent[STORY_ARTS] = {0, 0, 0, 0, 3, 3, 5, 0, 8};
    nf_store_batch_t *b = nf_store_batch_new();
    for (unsigned i = 0; i < STORY_ARTS; i++) {
        put_meta(b, i);
        if (i != 8)
            put_parent(b, i, parent[i]);
        if (i < 7)
            nf_serve_put_member(b, (uint16_t)(story_id(owner[i]).hi % 256), story_id(owner[i]),
                                pub[i], story_id(i), 0);
    }
    nf_serve_put_child(b, (uint16_t)(story_id(0).hi % 256), story_id(0), story_id(3), 0);
    nf_serve_put_child(b, (uint16_t)(story_id(3).hi % 256), story_id(3), story_id(5), 0);
    nf_serve_put_child(b, (uint16_t)(story_id(0).hi % 256), story_id(0), story_id(7), 0);
    nf_serve_story_t rec;
    nf_serve_story_init(&rec);
    rec.size = 8;
    for (unsigned i = 0; i < 8; i++)
        nf_serve_story_add_source(&rec, nf_serve_source_hash(i % 2 ? "s1" : "s2", 2));
    unsigned char v[8 + 8 * NF_SERVE_STORY_SOURCES_MAX] = {0}, key[18];
    size_t vl = 8 + nf_serve_story_encode(&rec, v + 8);
    nf_kstate_encode_key((uint16_t)(story_id(0).hi % 256), story_id(0), key);
    nf_store_batch_put(b, NF_KIND_STORY, key, sizeof key, v, vl);
    NF_REQUIRE(nf_teststore_commit(sv.st, 1, b) == 0);
    nf_store_batch_free(b);
    NF_REQUIRE(nf_store_view_publish(sv.st, 1) == 0);

    static const unsigned want[] = {4, 1, 6, 5, 2, 3, 0}; /* newest first; 1 < 6 by id */
    char root[33], hex[33], path[256];
    story_hex(0, root);
    static const unsigned limits[] = {1, 2, 100};
    for (unsigned from = 0; from < 8; from++) {
        story_hex(from, hex);
        unsigned li = limits[from % 3], got = 0;
        char next[64] = "";
        for (int page = 0; page < 10; page++) {
            reply_t r;
            snprintf(path, sizeof path, "/v1/stories/%s?limit=%u%s%s", hex, li,
                     next[0] ? "&after=" : "", next);
            cJSON *j = get(sv.port, path, &r);
            NF_REQUIRE(r.status == 200);
            NF_CHECK_STR(str(j, "cluster_id"), root);
            NF_CHECK_EQ(num(j, "size"), 8);
            NF_CHECK_EQ(num(j, "sources"), 2);
            const cJSON *it;
            cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "articles"))
            {
                char w[33];
                story_hex(got < 7 ? want[got] : 0, w);
                NF_CHECK(got < 7);
                NF_CHECK_STR(str(it, "article_id"), w);
                got++;
            }
            const cJSON *nx = cJSON_GetObjectItemCaseSensitive(j, "next");
            bool more = cJSON_IsString(nx);
            if (more)
                snprintf(next, sizeof next, "%s", nx->valuestring);
            cJSON_Delete(j);
            if (!more)
                break;
        }
        NF_CHECK_EQ(got, 7);
    }
    /* never clustered: itself alone; a bad cursor or limit: 400 */
    reply_t r;
    story_hex(8, hex);
    snprintf(path, sizeof path, "/v1/stories/%s", hex);
    cJSON *j = get(sv.port, path, &r);
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "articles")), 1);
    NF_CHECK_EQ(num(j, "sources"), 0);
    cJSON_Delete(j);
    snprintf(path, sizeof path, "/v1/stories/%s?after=zz", root);
    cJSON_Delete(get(sv.port, path, &r));
    NF_CHECK_EQ(r.status, 400);
    snprintf(path, sizeof path, "/v1/stories/%s?limit=0", root);
    cJSON_Delete(get(sv.port, path, &r));
    NF_CHECK_EQ(r.status, 400);
    serve_stop(&sv);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    NF_RUN(test_query_api);
    NF_RUN(test_owners);
    NF_RUN(test_trending_answer_kept);
    NF_RUN(test_story_articles);
    curl_global_cleanup();
    return nf_test_report();
}
