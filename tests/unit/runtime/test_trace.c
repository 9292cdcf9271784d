/* The span exporter (runtime/trace.h) against a real HTTP receiver in the process: the admin
 * server (runtime/admin.h, libmicrohttpd) with a POST hook that parses each request as OTLP
 * JSON. Threads export at once (the TSan job runs this label); every span arrives once with
 * well-formed ids, a refused post is counted as failed, a full queue as dropped, head sampling
 * keeps its ratio, and a long UTF-8 string is cut on a character's start. The collector
 * itself is tests/integration/test_traces.sh's. */
#include "nf_test.h"
#include "runtime/admin.h"
#include "runtime/metrics.h"
#include "runtime/trace.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pthread_mutex_t mu;
    size_t spans, posts, bad;
    int status; /* what the receiver answers */
} rx_t;

static bool hex_of(const cJSON *o, const char *k, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsString(v) || strlen(v->valuestring) != n)
        return false;
    return strspn(v->valuestring, "0123456789abcdef") == n;
}

/* Spans in an ExportTraceServiceRequest, or -1 when it is not one. */
static long count_spans(const char *body, size_t len)
{
    cJSON *j = cJSON_ParseWithLength(body, len);
    const cJSON *rs = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "resourceSpans"), 0);
    const cJSON *ss = cJSON_GetArrayItem(cJSON_GetObjectItem(rs, "scopeSpans"), 0);
    const cJSON *spans = cJSON_GetObjectItem(ss, "spans"), *sp;
    long n = cJSON_IsArray(spans) ? 0 : -1;
    cJSON_ArrayForEach(sp, spans)
    {
        const cJSON *p = cJSON_GetObjectItem(sp, "parentSpanId");
        bool ok = hex_of(sp, "traceId", 32) && hex_of(sp, "spanId", 16) &&
                  (!p || hex_of(sp, "parentSpanId", 16)) &&
                  cJSON_IsString(cJSON_GetObjectItem(sp, "startTimeUnixNano"));
        n = ok && n >= 0 ? n + 1 : -1;
    }
    cJSON_Delete(j);
    return n;
}

static int on_post(void *arg, const char *route, nf_admin_req_t *req, const char *body, size_t len,
                   char **out, size_t *outlen)
{
    (void)req;
    rx_t *rx = arg;
    long n = strcmp(route, "traces") == 0 ? count_spans(body, len) : -1;
    pthread_mutex_lock(&rx->mu);
    rx->posts++;
    if (n < 0)
        rx->bad++;
    else
        rx->spans += (size_t)n;
    int st = rx->status;
    pthread_mutex_unlock(&rx->mu);
    *out = strdup("{}");
    *outlen = *out ? 2 : 0;
    return st;
}

static rx_t g_rx = {.mu = PTHREAD_MUTEX_INITIALIZER, .status = 200};
static char g_endpoint[96];

/* The receiver's counts, read under its lock (its threads wrote them). */
static size_t received(size_t *bad)
{
    pthread_mutex_lock(&g_rx.mu);
    size_t n = g_rx.spans;
    if (bad)
        *bad = g_rx.bad;
    pthread_mutex_unlock(&g_rx.mu);
    return n;
}

static void answer_with(int status)
{
    pthread_mutex_lock(&g_rx.mu);
    g_rx.status = status;
    pthread_mutex_unlock(&g_rx.mu);
}

/* The counter's value in the registry's text (a result of newsflow_trace_spans_total; 0 before
 * the first nf_trace_start registers it). */
static double spans_total(const char *result)
{
    char *text = NULL, line[96];
    if (nf_metrics_render(&text) <= 0)
        return -1;
    snprintf(line, sizeof line, "newsflow_trace_spans_total{result=\"%s\"} ", result);
    const char *p = strstr(text, line);
    double v = p ? strtod(p + strlen(line), NULL) : 0;
    free(text);
    return v;
}

static void start(unsigned queue, unsigned flush_ms, double ratio)
{
    nf_trace_opts_t o = {.endpoint = g_endpoint,
                         .sample_ratio = ratio,
                         .service_name = "test",
                         .queue = queue,
                         .flush_ms = flush_ms};
    char err[256];
    NF_REQUIRE(nf_trace_start(&o, err, sizeof err) == 0);
    NF_CHECK(nf_trace_on());
}

enum { THREADS = 4, PER_THREAD = 1000 };

static void *exporter_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < PER_THREAD / 2; i++) {
        nf_span_t root, child;
        nf_span_root(&root, "root", NF_SPAN_SERVER);
        nf_trace_ctx_t ctx = nf_span_ctx(&root);
        nf_span_child(&child, "child", &ctx, NF_SPAN_INTERNAL);
        nf_span_int(&child, "i", i);
        nf_span_end(&child, i % 7 ? NULL : "an error");
        nf_span_export(&child, false);
        nf_span_str(&root, "s", "value");
        nf_span_end(&root, NULL);
        nf_span_export(&root, false);
    }
    return NULL;
}

/* Four threads export 4,000 spans: every one arrives, once, as OTLP JSON. */
static void test_threads(void)
{
    double e0 = spans_total("exported");
    size_t s0 = received(NULL), bad = 0;
    start(8192, 50, 1.0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        NF_REQUIRE(pthread_create(&t[i], NULL, exporter_thread, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    nf_trace_stop(); /* posts what is queued */
    NF_CHECK(!nf_trace_on());
    NF_CHECK_EQ(received(&bad) - s0, (size_t)THREADS * PER_THREAD);
    NF_CHECK_EQ(bad, 0u);
    NF_CHECK_EQ(spans_total("exported") - e0, (double)THREADS * PER_THREAD);
}

/* A receiver that refuses: the spans are counted as failed, the caller never waits. */
static void test_refused(void)
{
    double f0 = spans_total("failed");
    answer_with(500);
    start(1024, 50, 1.0);
    for (int i = 0; i < 100; i++) {
        nf_span_t s;
        nf_span_root(&s, "refused", NF_SPAN_INTERNAL);
        nf_span_end(&s, NULL);
        nf_span_export(&s, false);
    }
    nf_trace_stop();
    answer_with(200);
    NF_CHECK_EQ(spans_total("failed") - f0, 100.0);
}

/* A full queue drops and counts; what it held is posted at the stop. */
static void test_queue_full(void)
{
    double d0 = spans_total("dropped"), e0 = spans_total("exported");
    start(16, 60000, 1.0); /* no periodic flush within the test */
    for (int i = 0; i < 600; i++) {
        nf_span_t s;
        nf_span_root(&s, "full", NF_SPAN_INTERNAL);
        nf_span_end(&s, NULL);
        nf_span_export(&s, false);
    }
    nf_trace_stop();
    NF_CHECK_EQ(spans_total("dropped") - d0, 584.0);
    NF_CHECK_EQ(spans_total("exported") - e0, 16.0);
}

/* Head sampling keeps its ratio (within 6 standard deviations of 20,000 draws); an unsampled
 * span is exported only when forced; a child takes its root's decision. */
static void test_sampling(void)
{
    start(1024, 50, 0.25);
    int sampled = 0, inherited = 1;
    for (int i = 0; i < 20000; i++) {
        nf_span_t s, c;
        nf_span_root(&s, "r", NF_SPAN_INTERNAL);
        nf_trace_ctx_t ctx = nf_span_ctx(&s);
        nf_span_child(&c, "c", &ctx, NF_SPAN_INTERNAL);
        sampled += s.ctx.sampled;
        inherited &= c.ctx.sampled == s.ctx.sampled && c.ctx.hi == s.ctx.hi &&
                     c.ctx.lo == s.ctx.lo && c.parent == s.ctx.span;
    }
    NF_CHECK(sampled > 5000 - 367 && sampled < 5000 + 367);
    NF_CHECK(inherited);
    size_t s0 = received(NULL);
    nf_span_t s;
    do
        nf_span_root(&s, "unsampled", NF_SPAN_INTERNAL);
    while (s.ctx.sampled);
    nf_span_end(&s, NULL);
    nf_span_export(&s, false); /* not kept */
    nf_span_export(&s, true);  /* forced: an error, a slow request */
    nf_trace_stop();
    NF_CHECK_EQ(received(NULL) - s0, 1u);
}

/* A string attribute over the limit is cut on a character's start, not inside one. */
static void test_utf8_cut(void)
{
    char v[401];
    for (int i = 0; i < 200; i++)
        memcpy(v + 2 * i, "\xc3\xa9", 2); /* é */
    v[400] = '\0';
    nf_span_t s;
    nf_span_root(&s, "u", NF_SPAN_INTERNAL);
    nf_span_str(&s, "k", v);
    size_t n = strlen(s.attr[0].s);
    NF_CHECK(n < NF_SPAN_ATTR_STR && n % 2 == 0 && n >= NF_SPAN_ATTR_STR - 2);
}

int main(void)
{
    if (nf_metrics_init(1) != 0)
        return 1;
    nf_admin_hooks_t hooks = {.post = on_post, .api_arg = &g_rx, .max_connections = 16};
    char err[256];
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    if (!a) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    snprintf(g_endpoint, sizeof g_endpoint, "http://127.0.0.1:%u/v1/traces", nf_admin_port(a));
    NF_RUN(test_threads);
    NF_RUN(test_refused);
    NF_RUN(test_queue_full);
    NF_RUN(test_sampling);
    NF_RUN(test_utf8_cut);
    nf_admin_stop(a);
    nf_metrics_shutdown();
    return nf_test_report();
}
