/* test_edge.c — src/serve/edge.c and src/io/edge_kafka.c over HTTP, into librdkafka's mock
 * cluster (its broker code, not ours): what is answered 202 is in the topic, once per accepted
 * event, in canonical form; a batch's bad events are named and not produced; a broker that does
 * not acknowledge gets 503 with Retry-After, and the same events are taken once it is back;
 * limits answer 413 and 503. The real broker's side (kill -9 after a 202) is
 * tests/kafka/test_edge.sh. */
#include "io/edge_kafka.h"
#include "io/events.h"
#include "io/kafka.h"
#include "nf_test.h"
#include "runtime/admin.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "serve/edge.h"
#include "testhttpc.h"

#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JSON_CT "Content-Type: application/json\r\n"
#define OWN_E1  "3774343e67c3b10d6792a9942b79bf29bc91ac8ca9c018658d9b4deacde7f726"

static nf_edge_t *g_edge;
static const char *g_subject; /* the verified token's subject the hook passes (NULL: none) */

static int post(void *arg, const char *route, nf_admin_req_t *req, const char *body, size_t len,
                char **out, size_t *outlen)
{
    (void)arg;
    int st = nf_edge_handle(g_edge, route, req, g_subject, body, len, out, outlen);
    return st ? st : 404;
}

typedef struct fixture {
    nf_kafka_mock_t *mock;
    nf_edge_kafka_t *kafka;
    nf_admin_t *admin;
    uint16_t port;
} fixture_t;

static void setup(fixture_t *f, uint32_t max_batch, uint64_t max_in_flight)
{
    char err[512];
    f->mock = nf_kafka_mock_new(1, 3, "t-", err, sizeof err);
    NF_REQUIRE(f->mock != NULL);
    nf_edge_kafka_opts_t ko = {.brokers = nf_kafka_mock_bootstrap(f->mock),
                               .topic = "t-read-events",
                               .delivery_timeout_ms = 1500,
                               .max_in_flight = max_in_flight};
    f->kafka = nf_edge_kafka_new(&ko, err, sizeof err);
    NF_REQUIRE(f->kafka != NULL);
    nf_edge_opts_t eo = {.kafka = f->kafka, .max_batch = max_batch, .retry_after_s = 2};
    g_edge = nf_edge_new(&eo);
    NF_REQUIRE(g_edge != NULL);
    nf_admin_hooks_t hooks = {.post = post};
    f->admin = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(f->admin != NULL);
    f->port = nf_admin_port(f->admin);
}

static void teardown(fixture_t *f)
{
    nf_admin_stop(f->admin);
    nf_edge_free(g_edge);
    nf_edge_kafka_free(f->kafka);
    nf_kafka_mock_free(f->mock);
}

/* Every record of t-read-events now: keys and values, in one string per record "KEY\tVALUE". */
static size_t read_topic(fixture_t *f, char ***out)
{
    char err[256];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", nf_kafka_mock_bootstrap(f->mock), err, sizeof err);
    rd_kafka_conf_set(c, "group.id", "test-edge-reader", err, sizeof err);
    rd_kafka_conf_set(c, "enable.partition.eof", "true", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(3);
    for (int p = 0; p < 3; p++)
        rd_kafka_topic_partition_list_add(l, "t-read-events", p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    size_t n = 0, cap = 0;
    char **recs = NULL;
    int eofs = 0;
    for (int polls = 0; eofs < 3 && polls < 600; polls++) { /* 60 s only turns a hang into a fail */
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            eofs++;
        } else if (!m->err) {
            if (n == cap) {
                char **more = realloc(recs, (cap = cap ? cap * 2 : 64) * sizeof *recs);
                if (!more)
                    abort();
                recs = more;
            }
            recs[n] = malloc(m->key_len + m->len + 2);
            memcpy(recs[n], m->key, m->key_len);
            recs[n][m->key_len] = '\t';
            memcpy(recs[n] + m->key_len + 1, m->payload, m->len);
            recs[n][m->key_len + 1 + m->len] = '\0';
            n++;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    *out = recs;
    return n;
}

static void free_recs(char **recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(recs[i]);
    free(recs);
}

static nf_testhttpc_resp_t post_events(fixture_t *f, const char *body)
{
    return nf_testhttpc(f->port, "POST", "/v1/events", "Content-Type: application/json\r\n", body,
                        strlen(body));
}

/* A batch of a good read, a bad event, a save (NDJSON and array alike): 202 names the bad one;
 * the topic holds the two good ones, keyed by user, in canonical form, each decoding to the
 * event_id the decoder computes. */
static void test_batch(void)
{
    fixture_t f;
    setup(&f, 1000, 1000);
    char now[32], body[1024];
    snprintf(now, sizeof now, "%lld", (long long)nf_wall_ms());
    snprintf(body, sizeof body,
             "[{\"user_id\":\"u1\",\"article_id\":\"0123456789abcdef0123456789abcdef\","
             "\"session_id\":\"s\",\"ts\":%s},\n {\"user_id\":\"u2\",\"ts\":%s},"
             "{\"user_id\":\"u\\u00e9\",\"article_id\":\"a2\",\"kind\":\"save\",\"ts\":%s}]",
             now, now, now);
    nf_testhttpc_resp_t r = post_events(&f, body);
    NF_CHECK_EQ(r.status, 202);
    NF_CHECK_STR(r.body ? r.body : "",
                 "{\"accepted\":2,\"rejected\":[{\"index\":1,\"field\":\"article_id\",\"error\":"
                 "\"missing required field \\\"article_id\\\"\"}]}\n");
    nf_testhttpc_free(&r);
    char **recs;
    size_t n = read_topic(&f, &recs);
    NF_CHECK_EQ(n, 2);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        char *tab = strchr(recs[i], '\t');
        nf_read_event_t e;
        char err[256];
        NF_REQUIRE(tab &&
                   nf_read_event_decode(tab + 1, strlen(tab + 1), 0, &e, err, sizeof err) == 0);
        NF_CHECK(e.event_id_given);
        NF_CHECK(strncmp(recs[i], e.user_id, (size_t)(tab - recs[i])) == 0); /* key = user */
        char id[65];
        nf_read_event_id(e.user_id, e.article_id, e.session_id, e.kind, e.ts_ms, id);
        NF_CHECK_STR(e.event_id, id);
        seen |= e.kind == NF_READ_KIND_SAVE ? 2 : 1;
    }
    NF_CHECK_EQ(seen, 3);
    free_recs(recs, n);
    /* nothing valid: 400, nothing produced */
    r = post_events(&f, "{\"user_id\":\"u1\"}\n{\"kind\":\"like\"}\n");
    NF_CHECK_EQ(r.status, 400);
    NF_CHECK(r.body && strstr(r.body, "\"index\":1,\"field\":\"kind\"") != NULL);
    nf_testhttpc_free(&r);
    const char *ev = "{\"user_id\":\"u1\",\"article_id\":\"a\",\"ts\":1700000000000}";
    r = nf_testhttpc(f.port, "POST", "/v1/events", "Content-Type: text/plain\r\n", ev,
                     strlen(ev)); /* what another site's page may send unasked */
    NF_CHECK_EQ(r.status, 415);
    nf_testhttpc_free(&r);
    r = nf_testhttpc(f.port, "POST", "/v1/events", NULL, ev, strlen(ev));
    NF_CHECK_EQ(r.status, 415);
    nf_testhttpc_free(&r);
    r = post_events(&f, "[{\"user_id\":\"u1\"},");
    NF_CHECK_EQ(r.status, 400);
    NF_CHECK(r.body && strstr(r.body, "unterminated array") != NULL);
    nf_testhttpc_free(&r);
    n = read_topic(&f, &recs);
    NF_CHECK_EQ(n, 2);
    free_recs(recs, n);
    teardown(&f);
}

/* The single-read route: the path's article, the body's user (or the query's), ts = now. */
static void test_single_read(void)
{
    fixture_t f;
    setup(&f, 1000, 1000);
    const char *body = "{\"user_id\":\"u7\",\"session_id\":\"s1\"}";
    nf_testhttpc_resp_t r =
        nf_testhttpc(f.port, "POST", "/v1/articles/abc/read", JSON_CT, body, strlen(body));
    NF_CHECK_EQ(r.status, 202);
    char id[65], want[128];
    nf_read_event_id("u7", "abc", "s1", NF_READ_KIND_READ, 0, id);
    snprintf(want, sizeof want, "\"event_id\":\"%s\"", id);
    NF_CHECK(r.body && strstr(r.body, want) != NULL);
    nf_testhttpc_free(&r);
    r = nf_testhttpc(f.port, "POST", "/v1/articles/abc/read?user_id=u8", NULL, "", 0);
    NF_CHECK_EQ(r.status, 202);
    nf_testhttpc_free(&r);
    r = nf_testhttpc(f.port, "POST", "/v1/articles/abc/read", NULL, "", 0); /* no user */
    NF_CHECK_EQ(r.status, 400);
    NF_CHECK(r.body && strstr(r.body, "user_id") != NULL);
    nf_testhttpc_free(&r);
    body = "{\"user_id\":\"u7\",\"kind\":\"hide\"}";
    r = nf_testhttpc(f.port, "POST", "/v1/articles/abc/read", JSON_CT, body, strlen(body));
    NF_CHECK_EQ(r.status, 400);
    nf_testhttpc_free(&r);
    char **recs;
    size_t n = read_topic(&f, &recs);
    NF_CHECK_EQ(n, 2);
    free_recs(recs, n);
    teardown(&f);
}

/* No broker acknowledges: 503 with Retry-After within the delivery timeout; the same events are
 * taken once it is back. Limits: 413 past max_batch, 503 past max_in_flight. */
static void test_unavailable_and_limits(void)
{
    fixture_t f;
    setup(&f, 4, 3);
    char body[512];
    snprintf(body, sizeof body,
             "{\"user_id\":\"u1\",\"article_id\":\"a\",\"ts\":%lld}\n"
             "{\"user_id\":\"u2\",\"article_id\":\"a\",\"ts\":%lld}\n",
             (long long)nf_wall_ms(), (long long)nf_wall_ms());
    rd_kafka_mock_broker_set_down(nf_kafka_mock_cluster(f.mock), 1);
    nf_testhttpc_resp_t r = post_events(&f, body);
    NF_CHECK_EQ(r.status, 503);
    char ra[16] = "";
    NF_CHECK(nf_testhttpc_header(&r, "Retry-After", ra, sizeof ra));
    NF_CHECK_STR(ra, "2");
    NF_CHECK(r.body && strstr(r.body, "not delivered") != NULL);
    nf_testhttpc_free(&r);
    rd_kafka_mock_broker_set_up(nf_kafka_mock_cluster(f.mock), 1);
    /* reconnecting: 503 (at once, for a delivery timeout after the failure) until the broker
     * answers again; the bound turns a hang into a failure */
    int st = 0;
    for (int i = 0; i < 600 && st != 202; i++) {
        r = post_events(&f, body);
        st = r.status;
        nf_testhttpc_free(&r);
        if (st != 202) {
            NF_CHECK_EQ(st, 503);
            struct timespec pause = {.tv_nsec = 100 * 1000000L};
            nanosleep(&pause, NULL);
        }
    }
    NF_CHECK_EQ(st, 202);
    char **recs;
    size_t n = read_topic(&f, &recs);
    NF_CHECK(n >= 2); /* a timed-out record may also have landed: the event_id dedups it */
    for (size_t i = 0; i < n; i++) {
        char *tab = strchr(recs[i], '\t');
        nf_read_event_t e;
        char err[128];
        NF_CHECK(tab &&
                 nf_read_event_decode(tab + 1, strlen(tab + 1), 0, &e, err, sizeof err) == 0);
    }
    free_recs(recs, n);
    char big[1024] = "";
    for (int i = 0; i < 5; i++)
        strcat(big, "{\"user_id\":\"u\",\"article_id\":\"a\",\"ts\":1700000000000}\n");
    r = post_events(&f, big);
    NF_CHECK_EQ(r.status, 413);
    NF_CHECK(r.body && strstr(r.body, "edge.max_batch") != NULL);
    nf_testhttpc_free(&r);
    big[strlen(big) / 5 * 4] = '\0'; /* 4 events: within the batch, over 3 in flight */
    r = post_events(&f, big);
    NF_CHECK_EQ(r.status, 503);
    NF_CHECK(r.body && strstr(r.body, "over capacity") != NULL);
    nf_testhttpc_free(&r);
    teardown(&f);
}

/* A client's own event_id is made the reader's: SHA-256(user_id NUL event_id NUL). */
static void test_given_event_id(void)
{
    fixture_t f;
    setup(&f, 1000, 1000);
    char body[256];
    snprintf(body, sizeof body,
             "{\"user_id\":\"u1\",\"article_id\":\"a\",\"event_id\":\"e-1\",\"ts\":%lld}",
             (long long)nf_wall_ms());
    nf_testhttpc_resp_t r = post_events(&f, body);
    NF_CHECK_EQ(r.status, 202);
    nf_testhttpc_free(&r);
    char **recs;
    size_t n = read_topic(&f, &recs);
    NF_CHECK_EQ(n, 1);
    /* python3 -c "import hashlib; print(hashlib.sha256(b'u1\0e-1\0').hexdigest())" */
    NF_CHECK(n == 1 && strstr(recs[0], "\"event_id\":\"" OWN_E1 "\"") != NULL);
    free_recs(recs, n);
    teardown(&f);
}

/* With a token (serve/guard.h passes its subject): a reader sends only their own events;
 * another's are rejected by index, and a request of nothing else is 403. */
static void test_subject(void)
{
    fixture_t f;
    setup(&f, 1000, 1000);
    g_subject = "alice";
    char body[512];
    long long now = (long long)nf_wall_ms();
    snprintf(body, sizeof body,
             "{\"user_id\":\"alice\",\"article_id\":\"a\",\"ts\":%lld}\n"
             "{\"user_id\":\"bob\",\"article_id\":\"a\",\"ts\":%lld}\n",
             now, now);
    nf_testhttpc_resp_t r = post_events(&f, body);
    NF_CHECK_EQ(r.status, 202);
    NF_CHECK(r.body && strstr(r.body, "\"accepted\":1,") &&
             strstr(r.body, "\"index\":1,\"field\":\"user_id\""));
    nf_testhttpc_free(&r);
    snprintf(body, sizeof body, "[{\"user_id\":\"bob\",\"article_id\":\"a\",\"ts\":%lld}]", now);
    r = post_events(&f, body);
    NF_CHECK_EQ(r.status, 403);
    nf_testhttpc_free(&r);
    r = nf_testhttpc(f.port, "POST", "/v1/articles/abc/read?user_id=bob", NULL, "", 0);
    NF_CHECK_EQ(r.status, 403);
    nf_testhttpc_free(&r);
    g_subject = NULL;
    char **recs;
    size_t n = read_topic(&f, &recs);
    NF_CHECK_EQ(n, 1);
    NF_CHECK(n == 1 && strncmp(recs[0], "alice\t", 6) == 0);
    free_recs(recs, n);
    teardown(&f);
}

int main(void)
{
    nf_metrics_init(1);
    NF_RUN(test_batch);
    NF_RUN(test_single_read);
    NF_RUN(test_unavailable_and_limits);
    NF_RUN(test_subject);
    NF_RUN(test_given_event_id);
    nf_metrics_shutdown();
    return nf_test_report();
}
