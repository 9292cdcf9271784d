/* trace.c — spans, their queue and the OTLP/HTTP exporter thread (trace.h). */
#include "runtime/trace.h"

#include "runtime/jsonw.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

enum { BATCH = 512, TIMEOUT_MS = 5000 };

static struct {
    _Atomic bool on;
    double ratio;
    uint64_t threshold; /* sampled when a random u64 is below it */
    uint64_t seed[3];   /* the epochs' trace ids */
    char *endpoint, *resource;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char **q, **take; /* the queue; the exporter's copy of it */
    unsigned n, cap, flush_ms;
    int64_t slow_ns;
    bool stop, started;
    pthread_t thread;
    nf_counter_t exported, dropped, failed;
    nf_log_gate_t gate;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .slow_ns = 500000000};

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void raw(nf_jw_t *w, const char *s)
{
    nf_jw_raw(w, s, strlen(s));
}

/* A thread's own sequence, seeded from the kernel once. */
static uint64_t rnd(void)
{
    static _Thread_local uint64_t s;
    if (!s) {
        while (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s)
            ;
        s |= 1;
    }
    return mix(s += 0x9e3779b97f4a7c15ull);
}

static uint64_t nonzero(void)
{
    uint64_t v;
    while (!(v = rnd()))
        ;
    return v;
}

int64_t nf_trace_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool nf_trace_slow(int64_t ns)
{
    return ns >= g.slow_ns;
}

bool nf_trace_on(void)
{
    return atomic_load_explicit(&g.on, memory_order_relaxed);
}

/* Everything but the ids. */
static void span_init(nf_span_t *s, const char *name, uint8_t kind, int64_t start_ns)
{
    s->name = name;
    s->kind = kind;
    s->start_ns = start_ns;
    s->end_ns = 0;
    s->error = false;
    s->status = NULL;
    s->nattrs = 0;
    s->link = (nf_trace_ctx_t){0};
}

void nf_span_root(nf_span_t *s, const char *name, uint8_t kind)
{
    s->ctx.hi = nonzero();
    s->ctx.lo = rnd();
    s->ctx.sampled = nf_trace_on() && rnd() < g.threshold;
    s->ctx.span = nonzero();
    s->parent = 0;
    span_init(s, name, kind, nf_trace_now_ns());
}

void nf_span_child(nf_span_t *s, const char *name, const nf_trace_ctx_t *parent, uint8_t kind)
{
    s->ctx = *parent;
    s->ctx.span = nonzero();
    s->parent = parent->span;
    span_init(s, name, kind, nf_trace_now_ns());
}

void nf_span_at(nf_span_t *s, const char *name, const nf_trace_ctx_t *ctx, uint64_t parent,
                int64_t start_ns, uint8_t kind)
{
    s->ctx = *ctx;
    s->parent = parent;
    span_init(s, name, kind, start_ns);
}

nf_trace_ctx_t nf_span_ctx(const nf_span_t *s)
{
    return s->ctx;
}

void nf_span_str(nf_span_t *s, const char *key, const char *v)
{
    if (s->nattrs == NF_SPAN_ATTRS || !v)
        return;
    char *d = s->attr[s->nattrs].s;
    s->attr[s->nattrs].key = key;
    s->attr[s->nattrs++].is_int = false;
    size_t n = strlen(v);
    if (n >= NF_SPAN_ATTR_STR) { /* cut on a character's start: the collector wants UTF-8 */
        n = NF_SPAN_ATTR_STR - 1;
        while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(d, v, n);
    d[n] = '\0';
}

void nf_span_int(nf_span_t *s, const char *key, int64_t v)
{
    if (s->nattrs == NF_SPAN_ATTRS)
        return;
    s->attr[s->nattrs].key = key;
    s->attr[s->nattrs].is_int = true;
    s->attr[s->nattrs++].i = v;
}

void nf_span_end(nf_span_t *s, const char *error_msg)
{
    if (!s->end_ns)
        s->end_ns = nf_trace_now_ns();
    if (error_msg) {
        s->error = true;
        s->status = error_msg;
    }
}

static void hex(char *out, uint64_t v)
{
    static const char d[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = d[v & 15];
}

void nf_trace_id_hex(const nf_trace_ctx_t *c, char out[33])
{
    out[0] = '\0';
    if (!c->hi && !c->lo)
        return;
    hex(out, c->hi);
    hex(out + 16, c->lo);
    out[32] = '\0';
}

static void jw_id(nf_jw_t *w, const char *key, uint64_t hi, uint64_t lo, bool trace)
{
    char b[33];
    hex(b, hi);
    if (trace)
        hex(b + 16, lo);
    b[trace ? 32 : 16] = '\0';
    nf_jw_key(w, key);
    nf_jw_str(w, b);
}

/* "key": "v" — OTLP's JSON writes a 64-bit integer as a string (times, intValue). */
static void jw_i64_str(nf_jw_t *w, const char *key, int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%lld", (long long)v);
    nf_jw_key(w, key);
    nf_jw_str(w, b);
}

static void jw_attrs(nf_jw_t *w, const nf_span_t *s)
{
    nf_jw_key(w, "attributes");
    nf_jw_arr_open(w);
    for (unsigned i = 0; i < s->nattrs; i++) {
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        nf_jw_key(w, "key");
        nf_jw_str(w, s->attr[i].key);
        nf_jw_key(w, "value");
        nf_jw_obj_open(w);
        if (s->attr[i].is_int) {
            jw_i64_str(w, "intValue", s->attr[i].i);
        } else {
            nf_jw_key(w, "stringValue");
            nf_jw_str(w, s->attr[i].s);
        }
        nf_jw_obj_close(w);
        nf_jw_obj_close(w);
    }
    nf_jw_arr_close(w);
}

/* One span as OTLP JSON (a Span of opentelemetry/proto/trace/v1). */
static void jw_span(nf_jw_t *w, const nf_span_t *s)
{
    nf_jw_obj_open(w);
    jw_id(w, "traceId", s->ctx.hi, s->ctx.lo, true);
    jw_id(w, "spanId", s->ctx.span, 0, false);
    if (s->parent)
        jw_id(w, "parentSpanId", s->parent, 0, false);
    nf_jw_key(w, "name");
    nf_jw_str(w, s->name);
    nf_jw_key(w, "kind");
    nf_jw_i64(w, s->kind);
    jw_i64_str(w, "startTimeUnixNano", s->start_ns);
    jw_i64_str(w, "endTimeUnixNano", s->end_ns > s->start_ns ? s->end_ns : s->start_ns);
    jw_attrs(w, s);
    if (s->link.hi || s->link.lo) {
        nf_jw_key(w, "links");
        nf_jw_arr_open(w);
        nf_jw_elem(w);
        nf_jw_obj_open(w);
        jw_id(w, "traceId", s->link.hi, s->link.lo, true);
        jw_id(w, "spanId", s->link.span, 0, false);
        nf_jw_obj_close(w);
        nf_jw_arr_close(w);
    }
    nf_jw_key(w, "status");
    nf_jw_obj_open(w);
    if (s->error) {
        nf_jw_key(w, "code");
        nf_jw_i64(w, 2); /* STATUS_CODE_ERROR */
        nf_jw_key(w, "message");
        nf_jw_str(w, s->status);
    }
    nf_jw_obj_close(w);
    nf_jw_obj_close(w);
}

void nf_span_export(const nf_span_t *s, bool force)
{
    if (!nf_trace_on() || !(s->ctx.sampled || force))
        return;
    nf_jw_t w;
    nf_jw_init(&w);
    jw_span(&w, s);
    if (w.failed) {
        nf_jw_free(&w);
        nf_counter_inc(g.dropped);
        return;
    }
    pthread_mutex_lock(&g.mu);
    bool room = g.q && g.n < g.cap && !g.stop; /* no queue: stopped meanwhile */
    if (room) {
        g.q[g.n++] = w.buf; /* the queue owns it */
        if (g.n == BATCH)
            pthread_cond_signal(&g.cv);
    }
    pthread_mutex_unlock(&g.mu);
    if (!room) {
        nf_jw_free(&w);
        nf_counter_inc(g.dropped);
    }
}

nf_trace_ctx_t nf_trace_epoch(uint64_t e)
{
    nf_trace_ctx_t c = {.hi = mix(g.seed[0] ^ e) | 1, .lo = mix(g.seed[1] + e), .span = 0};
    c.span = mix(c.lo ^ g.seed[2]) | 1;
    c.sampled = nf_trace_on() && mix(e ^ g.seed[2]) < g.threshold;
    return c;
}

/* ---- the exporter thread ---- */

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* Posts spans[0..n) as one request; frees them. false: the collector did not take them. */
static bool post(CURL *c, char **spans, unsigned n)
{
    nf_jw_t w;
    nf_jw_init(&w);
    raw(&w, g.resource);
    for (unsigned i = 0; i < n; i++) {
        if (i)
            raw(&w, ",");
        raw(&w, spans[i]);
        free(spans[i]);
    }
    raw(&w, "]}]}]}");
    long code = 0;
    CURLcode rc = CURLE_OUT_OF_MEMORY;
    if (!w.failed) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, w.buf);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)w.len);
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    }
    nf_jw_free(&w);
    if (rc == CURLE_OK && code >= 200 && code < 300) {
        nf_counter_add(g.exported, n);
        return true;
    }
    nf_counter_add(g.failed, n);
    uint64_t held;
    if (nf_log_gate_pass(&g.gate, 60000000000ull, &held))
        nf_log(NF_LOG_WARN, "trace", "the collector did not take the spans (dropped)",
               NF_LS("endpoint", g.endpoint),
               NF_LS("error", rc != CURLE_OK ? curl_easy_strerror(rc) : "HTTP status"),
               NF_LI("status", code), NF_LI("spans", n), NF_LI("failures_not_logged", held),
               NF_LEND);
    return false;
}

/* At the stop, after a post failed: the rest is not tried (a collector that hangs would hold
 * the job's exit for the timeout of every batch), only counted. */
static void drop(char **spans, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        free(spans[i]);
    nf_counter_add(g.failed, n);
}

static void *exporter(void *arg)
{
    CURL *c = arg;
    char **take = g.take;
    bool failed_at_stop = false;
    pthread_mutex_lock(&g.mu);
    for (;;) {
        if (!g.stop && g.n < BATCH) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)g.flush_ms * 1000000ull;
            until.tv_sec += (time_t)(ns / 1000000000ull);
            until.tv_nsec = (long)(ns % 1000000000ull);
            pthread_cond_timedwait(&g.cv, &g.mu, &until);
        }
        unsigned n = g.n;
        bool stop = g.stop;
        memcpy(take, g.q, n * sizeof *take);
        g.n = 0;
        pthread_mutex_unlock(&g.mu);
        if (stop) /* the last posts: one second each at most */
            curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
        for (unsigned i = 0; i < n; i += BATCH) {
            unsigned k = n - i < BATCH ? n - i : BATCH;
            if (failed_at_stop)
                drop(take + i, k);
            else if (!post(c, take + i, k) && stop)
                failed_at_stop = true;
        }
        pthread_mutex_lock(&g.mu);
        if (stop && !g.n)
            break;
    }
    pthread_mutex_unlock(&g.mu);
    curl_easy_cleanup(c);
    return NULL;
}

/* The request's head, up to the spans: the resource and the scope. */
static char *resource_json(const nf_trace_opts_t *o)
{
    nf_jw_t w;
    nf_jw_init(&w);
    raw(&w, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
    const char *keys[] = {"service.name", "service.instance.id"};
    const char *vals[] = {o->service_name ? o->service_name : "newsflow", o->instance};
    for (int i = 0; i < 2; i++) {
        if (!vals[i] || !*vals[i])
            continue;
        if (i && w.buf[w.len - 1] != '[')
            raw(&w, ",");
        raw(&w, "{\"key\":");
        nf_jw_str(&w, keys[i]);
        raw(&w, ",\"value\":{\"stringValue\":");
        nf_jw_str(&w, vals[i]);
        raw(&w, "}}");
    }
    raw(&w, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"newsflow\"},\"spans\":[");
    if (w.failed) {
        nf_jw_free(&w);
        return NULL;
    }
    return w.buf;
}

static void register_metrics(void)
{
    static const char help[] =
        "Spans for the OTLP collector (trace.*): exported (the collector took them), dropped "
        "(the queue of trace.queue spans was full), failed (the collector was unreachable or "
        "refused them).";
    nf_metrics_counter("newsflow_trace_spans_total", help, "result=\"exported\"", 0, &g.exported);
    nf_metrics_counter("newsflow_trace_spans_total", help, "result=\"dropped\"", 0, &g.dropped);
    nf_metrics_counter("newsflow_trace_spans_total", help, "result=\"failed\"", 0, &g.failed);
}

static CURL *make_curl(const char *endpoint)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    static struct curl_slist *headers; /* process lifetime */
    if (!headers)
        headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, endpoint);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    return c;
}

int nf_trace_start(const nf_trace_opts_t *o, char *err, size_t errlen)
{
    register_metrics();
    for (int i = 0; i < 3; i++)
        g.seed[i] = nonzero();
    if (!o->endpoint || !*o->endpoint)
        return 0;
    g.ratio = o->sample_ratio < 0 ? 0 : o->sample_ratio > 1 ? 1 : o->sample_ratio;
    g.threshold = g.ratio >= 1 ? UINT64_MAX : (uint64_t)(g.ratio * 18446744073709551616.0);
    g.cap = o->queue ? o->queue : 4096;
    g.flush_ms = o->flush_ms ? o->flush_ms : 1000;
    g.slow_ns = (int64_t)(o->slow_ms ? o->slow_ms : 500) * 1000000;
    g.q = calloc(g.cap, sizeof *g.q);
    g.take = calloc(g.cap, sizeof *g.take);
    g.endpoint = strdup(o->endpoint);
    g.resource = resource_json(o);
    CURL *c = g.q && g.take && g.endpoint && g.resource ? make_curl(o->endpoint) : NULL;
    int r = c ? pthread_create(&g.thread, NULL, exporter, c) : -1;
    if (r != 0) {
        snprintf(err, errlen, "trace: cannot start the exporter for %s: %s", o->endpoint,
                 c ? strerror(r) : "out of memory");
        if (c)
            curl_easy_cleanup(c);
        return -1;
    }
    g.started = true;
    atomic_store(&g.on, true);
    nf_log(NF_LOG_INFO, "trace", "exporting spans over OTLP/HTTP", NF_LS("endpoint", o->endpoint),
           NF_LF("sample_ratio", g.ratio), NF_LEND);
    return 0;
}

void nf_trace_stop(void)
{
    if (!g.started)
        return;
    atomic_store(&g.on, false);
    pthread_mutex_lock(&g.mu);
    g.stop = true;
    pthread_cond_signal(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(g.thread, NULL);
    g.started = false;
    pthread_mutex_lock(&g.mu); /* a span that passed nf_trace_on() before the stop finds none */
    free(g.q);
    g.q = NULL;
    g.n = 0;
    g.stop = false;
    pthread_mutex_unlock(&g.mu);
    free(g.take);
    free(g.endpoint);
    free(g.resource);
    g.take = NULL;
    g.endpoint = g.resource = NULL;
}
