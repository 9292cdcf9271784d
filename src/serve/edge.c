/* edge.c — see edge.h. A request is read in one pass: split the batch, decode and check each
 * event, write the accepted ones in canonical form into one buffer, produce them all, wait for
 * the broker, answer. The rejected ones are listed in the answer, never produced. */
#include "serve/edge.h"
#include "serve/routes.h"

#include "algo/sha256.h"
#include "io/event_batch.h"
#include "io/events.h"
#include "runtime/jsonw.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/timer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { C_202, C_400, C_403, C_404, C_413, C_415, C_503, C__N };
static const int codes[C__N] = {202, 400, 403, 404, 413, 415, 503};

struct nf_edge {
    nf_edge_opts_t o;
    nf_counter_t requests[C__N];
    nf_counter_t accepted, rejected, refused;
    nf_histogram_t ack_seconds;
    nf_gauge_t in_flight;
};

/* The edge's series; a failure is the registry's to report (metrics.h). */
static void edge_metrics(nf_edge_t *e)
{
    static const double bounds[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                    0.2,   0.5,   1,     2,    5,    10};
    for (int i = 0; i < C__N; i++) {
        char label[32];
        snprintf(label, sizeof label, "code=\"%d\"", codes[i]);
        nf_metrics_counter("newsflow_edge_requests_total",
                           "requests to the HTTP edge's POST routes, by answer", label, 0,
                           &e->requests[i]);
    }
    static const char help[] = "readers' events the HTTP edge saw: accepted (acknowledged by "
                               "the broker), rejected (invalid, listed in the answer), refused "
                               "(in a 413 or 503 answer: the client sends them again)";
    nf_metrics_counter("newsflow_edge_events_total", help, "result=\"accepted\"", 0, &e->accepted);
    nf_metrics_counter("newsflow_edge_events_total", help, "result=\"rejected\"", 0, &e->rejected);
    nf_metrics_counter("newsflow_edge_events_total", help, "result=\"refused\"", 0, &e->refused);
    nf_metrics_histogram("newsflow_edge_ack_seconds",
                         "from producing a request's events to the broker's last "
                         "acknowledgement of them",
                         NULL, bounds, sizeof bounds / sizeof bounds[0], &e->ack_seconds);
    nf_metrics_gauge("newsflow_edge_in_flight_events",
                     "events produced by the edge and not yet acknowledged", NULL, 0,
                     &e->in_flight);
}

void nf_edge_opts_from_config(const nf_config_t *cfg, const char *brokers, const char *topic,
                              nf_edge_kafka_opts_t *ko, nf_edge_opts_t *eo)
{
    *ko = (nf_edge_kafka_opts_t){.brokers = brokers,
                                 .properties = cfg->kafka.properties,
                                 .topic = topic,
                                 .partitioner = cfg->serve.partitioner ? "murmur2_random"
                                                                       : "consistent_random",
                                 .delivery_timeout_ms = cfg->edge.delivery_timeout_ms,
                                 .max_in_flight = cfg->edge.max_in_flight};
    *eo = (nf_edge_opts_t){.max_batch = cfg->edge.max_batch,
                           .max_event_bytes = cfg->kafka.max_event_bytes,
                           .max_future_ms = cfg->trending.max_future_ms,
                           .retry_after_s = cfg->edge.retry_after_s};
}

nf_edge_t *nf_edge_new(const nf_edge_opts_t *o)
{
    nf_edge_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->o = *o;
    if (!e->o.max_batch)
        e->o.max_batch = 1000;
    if (!e->o.max_event_bytes)
        e->o.max_event_bytes = 65536;
    if (!e->o.retry_after_s)
        e->o.retry_after_s = 1;
    edge_metrics(e);
    return e;
}

void nf_edge_free(nf_edge_t *e)
{
    free(e);
}

bool nf_edge_ready(nf_edge_t *e, char *why, size_t whylen)
{
    return nf_edge_kafka_ready(e->o.kafka, why, whylen);
}

/* ---- one request's events ---- */

typedef struct span {
    size_t koff, klen, voff, vlen;
} span_t;

typedef struct batch {
    nf_jw_t buf;    /* each accepted event's raw user_id (its key), then its canonical value */
    nf_jw_t answer; /* "rejected" entries */
    span_t *spans;
    size_t n, cap, nrejected;
    const char *subject;                   /* the token's subject, NULL without authentication */
    size_t foreign;                        /* rejected as another reader's */
    char event_id[NF_EVENT_FIELD_MAX + 1]; /* the last accepted one's */
} batch_t;

/* The field a decoder message names (`field "ts": ...`), or NULL. */
static const char *field_of(const char *msg, char *buf, size_t cap)
{
    const char *f = strstr(msg, "field \"");
    if (!f)
        return NULL;
    f += 7;
    const char *q = strchr(f, '"');
    if (!q || (size_t)(q - f) >= cap)
        return NULL;
    memcpy(buf, f, (size_t)(q - f));
    buf[q - f] = '\0';
    return buf;
}

static void reject(batch_t *b, size_t index, const char *msg)
{
    char fbuf[32];
    const char *field = field_of(msg, fbuf, sizeof fbuf);
    nf_jw_elem(&b->answer);
    nf_jw_obj_open(&b->answer);
    nf_jw_key(&b->answer, "index");
    nf_jw_u64(&b->answer, index);
    if (field) {
        nf_jw_key(&b->answer, "field");
        nf_jw_str(&b->answer, field);
    }
    nf_jw_key(&b->answer, "error");
    nf_jw_str(&b->answer, msg);
    nf_jw_obj_close(&b->answer);
    b->nrejected++;
}

/* A client's own event_id, made the reader's: hex SHA-256(user_id NUL event_id NUL). The job
 * drops a repeated event_id within a partition whoever sent it, so an id taken as given would let
 * one reader post another's ids and have their events dropped; namespaced, a client's retry is
 * still the same event, and no two readers' ids meet. */
static void own_event_id(nf_read_event_t *r)
{
    nf_sha256_t c;
    uint8_t h[32];
    nf_sha256_init(&c);
    nf_sha256_update(&c, r->user_id, (size_t)r->user_len + 1);
    nf_sha256_update(&c, r->event_id, (size_t)r->event_id_len + 1);
    nf_sha256_final(&c, h);
    nf_hex(h, sizeof h, r->event_id);
    r->event_id_len = 64;
}

/* Checks one event's bytes; an accepted event is appended to the batch. */
static void take(nf_edge_t *e, batch_t *b, size_t index, const char *ev, size_t len, int64_t now_ms)
{
    nf_read_event_t r;
    char err[256];
    if (nf_read_event_decode(ev, len, e->o.max_event_bytes, &r, err, sizeof err) != 0 ||
        nf_read_event_check_time(r.ts_ms, now_ms, e->o.max_future_ms, err, sizeof err) != 0) {
        reject(b, index, err);
        return;
    }
    if (r.event_id_given)
        own_event_id(&r);
    if (b->subject && strcmp(r.user_id, b->subject) != 0) {
        reject(b, index,
               "field \"user_id\": a reader may send only their own events (not the "
               "token's subject)");
        b->foreign++;
        return;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        span_t *spans = realloc(b->spans, cap * sizeof *spans);
        if (!spans) {
            reject(b, index, "out of memory");
            return;
        }
        b->spans = spans;
        b->cap = cap;
    }
    span_t *sp = &b->spans[b->n++];
    sp->koff = b->buf.len;
    sp->klen = r.user_len;
    nf_jw_raw(&b->buf, r.user_id, r.user_len);
    sp->voff = b->buf.len;
    nf_read_event_json(&b->buf, &r);
    sp->vlen = b->buf.len - sp->voff;
    if (sp->vlen > e->o.max_event_bytes) { /* the event_id written in may pass the job's limit */
        b->buf.len = sp->koff;
        b->n--;
        snprintf(err, sizeof err,
                 "the event written with its event_id is %zu bytes, over the "
                 "limit of %u (kafka.max_event_bytes)",
                 sp->vlen, e->o.max_event_bytes);
        reject(b, index, err);
        return;
    }
    memcpy(b->event_id, r.event_id, (size_t)r.event_id_len + 1);
}

static void batch_free(batch_t *b)
{
    nf_jw_free(&b->buf);
    nf_jw_free(&b->answer);
    free(b->spans);
}

/* ---- answers ---- */

static int reply(nf_edge_t *e, int status, nf_jw_t *w, char **out, size_t *outlen)
{
    for (int i = 0; i < C__N; i++)
        if (codes[i] == status)
            nf_counter_inc(e->requests[i]);
    nf_jw_raw(w, "\n", 1);
    if (w->failed) {
        nf_jw_free(w);
        *out = NULL;
        *outlen = 0;
        return 503;
    }
    *out = w->buf; /* the answer's buffer becomes the body: admin.c frees it */
    *outlen = w->len;
    return status;
}

static int error_reply(nf_edge_t *e, int status, const char *msg, batch_t *b, char **out,
                       size_t *outlen)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, msg);
    if (b && b->nrejected) {
        nf_jw_key(&w, "rejected");
        nf_jw_arr_open(&w);
        nf_jw_raw(&w, b->answer.buf, b->answer.len);
        nf_jw_arr_close(&w);
    }
    if (status == 503 || status == 413) {
        nf_jw_key(&w, "accepted");
        nf_jw_u64(&w, 0);
    }
    nf_jw_obj_close(&w);
    return reply(e, status, &w, out, outlen);
}

static int unavailable(nf_edge_t *e, nf_admin_req_t *req, const char *msg, batch_t *b, char **out,
                       size_t *outlen)
{
    char ra[16];
    snprintf(ra, sizeof ra, "%u", e->o.retry_after_s);
    nf_admin_req_header(req, "Retry-After", ra);
    nf_counter_add(e->refused, b->n);
    return error_reply(e, 503, msg, NULL, out, outlen);
}

/* Produces the batch's accepted events and answers once the broker has them all. */
static int produce(nf_edge_t *e, nf_admin_req_t *req, batch_t *b, bool single, char **out,
                   size_t *outlen)
{
    if (b->buf.failed)
        return unavailable(e, req, "out of memory", b, out, outlen);
    nf_edge_rec_t *recs = malloc((b->n ? b->n : 1) * sizeof *recs);
    if (!recs)
        return unavailable(e, req, "out of memory", b, out, outlen);
    for (size_t i = 0; i < b->n; i++)
        recs[i] = (nf_edge_rec_t){.key = b->buf.buf + b->spans[i].koff,
                                  .keylen = b->spans[i].klen,
                                  .value = b->buf.buf + b->spans[i].voff,
                                  .len = b->spans[i].vlen};
    char err[256] = "";
    size_t acked = 0;
    uint64_t t0 = nf_now_ns();
    nf_gauge_add(e->in_flight, (int64_t)b->n);
    int rc = nf_edge_kafka_send(e->o.kafka, recs, b->n, &acked, err, sizeof err);
    nf_gauge_add(e->in_flight, -(int64_t)b->n);
    free(recs);
    if (rc != NF_EDGE_OK) {
        char msg[320];
        snprintf(msg, sizeof msg, "%s: %s", rc == NF_EDGE_BUSY ? "over capacity" : "not delivered",
                 err);
        return unavailable(e, req, msg, b, out, outlen);
    }
    nf_histogram_observe(e->ack_seconds, (double)(nf_now_ns() - t0) / 1e9);
    nf_counter_add(e->accepted, b->n);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "accepted");
    nf_jw_u64(&w, b->n);
    if (single) {
        nf_jw_key(&w, "event_id");
        nf_jw_str(&w, b->event_id);
    }
    nf_jw_key(&w, "rejected");
    nf_jw_arr_open(&w);
    nf_jw_raw(&w, b->answer.buf ? b->answer.buf : "", b->answer.len);
    nf_jw_arr_close(&w);
    nf_jw_obj_close(&w);
    return reply(e, 202, &w, out, outlen);
}

/* ---- routes ---- */

static int post_events(nf_edge_t *e, nf_admin_req_t *req, const char *subject, const char *body,
                       size_t len, char **out, size_t *outlen)
{
    batch_t b = {.subject = subject};
    nf_jw_init(&b.buf);
    nf_jw_init(&b.answer);
    nf_event_batch_t it;
    char err[256];
    const char *ev;
    size_t evlen, index = 0;
    int64_t now = nf_wall_ms();
    int rc = nf_event_batch_init(&it, body, len, err, sizeof err), status;
    while (rc == 0 && (rc = nf_event_batch_next(&it, &ev, &evlen, err, sizeof err)) == 1) {
        if (index == e->o.max_batch) {
            snprintf(err, sizeof err, "more than %u events in one request (edge.max_batch)",
                     e->o.max_batch);
            nf_counter_add(e->refused, index);
            status = error_reply(e, 413, err, NULL, out, outlen);
            batch_free(&b);
            return status;
        }
        take(e, &b, index++, ev, evlen, now);
        rc = 0;
    }
    nf_counter_add(e->rejected, b.nrejected);
    if (rc < 0)
        status = error_reply(e, 400, err, NULL, out, outlen);
    else if (b.n == 0 && b.foreign && b.foreign == b.nrejected)
        status = error_reply(e, 403, "every event is another reader's", &b, out, outlen);
    else if (b.n == 0)
        status = error_reply(e, 400, index ? "no event of the batch is valid" : "no events", &b,
                             out, outlen);
    else
        status = produce(e, req, &b, false, out, outlen);
    batch_free(&b);
    return status;
}

/* The single read's event as JSON: the body's object (or none) with the path's article id, the
 * query's user_id when the body has none, and ts = now when it has none. NULL with err. */
static char *read_event_json(const char *article, nf_admin_req_t *req, const char *body, size_t len,
                             int64_t now_ms, char *err, size_t errlen)
{
    cJSON *j = len ? cJSON_ParseWithLength(body, len) : cJSON_CreateObject();
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        snprintf(err, errlen, "the body is not a JSON object");
        return NULL;
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    if (kind && !cJSON_IsNull(kind) &&
        !(cJSON_IsString(kind) && strcmp(kind->valuestring, "read") == 0)) {
        cJSON_Delete(j);
        snprintf(err, errlen,
                 "field \"kind\": this route records reads; feedback goes to POST "
                 "/v1/events");
        return NULL;
    }
    const char *quser = nf_admin_req_arg(req, "user_id");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "article_id");
    cJSON_AddStringToObject(j, "article_id", article);
    if (quser && !cJSON_GetObjectItemCaseSensitive(j, "user_id"))
        cJSON_AddStringToObject(j, "user_id", quser);
    if (!cJSON_GetObjectItemCaseSensitive(j, "ts"))
        cJSON_AddNumberToObject(j, "ts", (double)now_ms);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        snprintf(err, errlen, "out of memory");
    return s;
}

static int post_read(nf_edge_t *e, nf_admin_req_t *req, const char *subject, const char *article,
                     const char *body, size_t len, char **out, size_t *outlen)
{
    batch_t b = {.subject = subject};
    nf_jw_init(&b.buf);
    nf_jw_init(&b.answer);
    char err[256];
    int64_t now = nf_wall_ms();
    char *ev = read_event_json(article, req, body, len, now, err, sizeof err);
    if (ev)
        take(e, &b, 0, ev, strlen(ev), now);
    else
        reject(&b, 0, err);
    free(ev);
    nf_counter_add(e->rejected, b.nrejected);
    int status = b.n         ? produce(e, req, &b, true, out, outlen)
                 : b.foreign ? error_reply(e, 403, "the read is another reader's", &b, out, outlen)
                             : error_reply(e, 400, "the read is not valid", &b, out, outlen);
    batch_free(&b);
    return status;
}

size_t nf_edge_events_in(const nf_edge_t *e, const char *route, const char *body, size_t len)
{
    if (strcmp(route, "events") != 0)
        return 1;
    nf_event_batch_t it;
    const char *ev;
    size_t n = 0, evlen;
    if (nf_event_batch_init(&it, body, len, NULL, 0) != 0)
        return 1;
    while (n <= e->o.max_batch && nf_event_batch_next(&it, &ev, &evlen, NULL, 0) == 1)
        n++;
    return n ? n : 1;
}

/* Whether the body is declared JSON or NDJSON (a charset or other parameter allowed): a form
 * or text/plain body is what a page of another site can post without asking first (a CORS
 * "simple" request), so it is never taken. An empty single read needs none. */
static bool json_body(nf_admin_req_t *req, size_t len)
{
    static const char *const types[] = {"application/json", "application/x-ndjson"};
    const char *ct = nf_admin_req_header_in(req, "Content-Type");
    if (!ct)
        return len == 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t n = strlen(types[i]);
        if (!strncasecmp(ct, types[i], n) && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '))
            return true;
    }
    return false;
}

int nf_edge_handle(nf_edge_t *e, const char *route, nf_admin_req_t *req, const char *subject,
                   const char *body, size_t len, char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    const char *p = NULL;
    size_t pl = 0;
    const nf_route_t *r = nf_route_match("POST", route, &p, &pl, NULL);
    if (!r || r->by != NF_SERVED_BY_EDGE)
        return 0;
    if (!json_body(req, len))
        return error_reply(e, 415,
                           "the body must be Content-Type application/json or "
                           "application/x-ndjson",
                           NULL, out, outlen);
    if (subject && !*subject)
        subject = NULL;
    if (r->id == NF_ROUTE_EVENTS)
        return post_events(e, req, subject, body, len, out, outlen);
    char article[NF_EVENT_FIELD_MAX + 2];
    if (pl == 0 || pl > NF_EVENT_FIELD_MAX || memchr(p, '/', pl))
        return error_reply(e, 404, "no such route", NULL, out, outlen);
    memcpy(article, p, pl);
    article[pl] = '\0';
    return post_read(e, req, subject, article, body, len, out, outlen);
}
