/* api.c — every /v1/ request's way to its answer (api.h). */
#include "serve/api.h"

#include "io/events.h"
#include "runtime/jsonw.h"
#include "runtime/trace.h"
#include "serve/routes.h"

#include <stdio.h>
#include <string.h>

int nf_api_reply(nf_jw_t *w, int status, char **body, size_t *len)
{
    if (w->failed) {
        nf_jw_free(w);
        return 500;
    }
    nf_jw_raw(w, "\n", 1);
    *body = w->buf; /* the server frees it */
    *len = w->len;
    return status;
}

int nf_api_error(int status, const char *what, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, what);
    nf_jw_obj_close(&w);
    return nf_api_reply(&w, status, body, len);
}

static int not_here(const char *what, char **body, size_t *len)
{
    return nf_api_error(404, what, body, len);
}

/* No route for this path (404 with the table), or not for this method (405 with Allow). */
static int no_route(const char *allow, nf_admin_req_t *req, char **body, size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    if (*allow) {
        nf_admin_req_header(req, "Allow", allow);
        char what[64];
        snprintf(what, sizeof what, "this route takes %s only", allow);
        nf_route_list_json(&w, what);
        return nf_api_reply(&w, 405, body, len);
    }
    nf_route_list_json(&w, "unknown route");
    return nf_api_reply(&w, 404, body, len);
}

/* The listener's rule: 0 (served here) or the 404 written. */
static int wrong_listener(const nf_api_t *a, const nf_route_t *r, char **body, size_t *len)
{
    bool operators = r->guard == NF_GUARD_OPERATOR;
    if (a->listener == NF_API_OPERATORS && !operators)
        return not_here("a readers' route: on admin.port", body, len);
    if (a->listener == NF_API_READERS && operators)
        return not_here("an operators' route: on admin.operator_port", body, len);
    return 0;
}

/* The part that answers a GET route; 0 when this process does not run it. */
static int answer_get(nf_api_t *a, const nf_route_t *r, const char *route, nf_admin_req_t *req,
                      char **body, size_t *len)
{
    switch (r->by) {
    case NF_SERVED_BY_QUERY:
        return a->query ? nf_query_handle(a->query, route, req, body, len) : 0;
    case NF_SERVED_BY_OPERATOR:
        return a->op ? nf_operator_handle(a->op, r->id, req, body, len) : 0;
    case NF_SERVED_BY_GUARD:
        return a->guard ? nf_guard_demo_token(a->guard, req, body, len) : 0;
    default:
        return 0;
    }
}

bool nf_api_on_loop(void *arg, const char *method, const char *url)
{
    (void)arg;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return false;
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
        return true;
    if (strncmp(url, "/v1/", 4) != 0)
        return false;
    const char *p, *allow;
    size_t pl;
    const nf_route_t *r = nf_route_match("GET", url + 4, &p, &pl, &allow);
    return !r || (r->by == NF_SERVED_BY_QUERY && r->id != NF_ROUTE_SEARCH);
}

void nf_api_observe(void *arg, const nf_admin_req_t *req, int route, const char *url, int status,
                    uint64_t ns)
{
    (void)arg;
    nf_route_observe(route, url, status, (double)ns / 1e9);
    unsigned n = 0;
    nf_span_t *sp = req ? nf_admin_req_spans(req, &n) : NULL;
    if (!n)
        return;
    /* The root spans the whole request, from its last byte to its answer queued. */
    nf_span_end(&sp[0], status >= 500 ? "5xx" : NULL);
    sp[0].start_ns = sp[0].end_ns - (int64_t)ns;
    nf_span_int(&sp[0], "http.response.status_code", status);
    bool force = status >= 500 || nf_trace_slow((int64_t)ns);
    for (unsigned i = 0; i < n; i++)
        nf_span_export(&sp[i], force);
}

/* A feed or a search is a trace of its own (docs/slo.md, "Traces"): the root here, ended by
 * nf_api_observe; the answer's part a child. NULL: not a traced route. */
static nf_span_t *trace_route(const nf_route_t *r, nf_admin_req_t *req)
{
    if (r->id != NF_ROUTE_FEED && r->id != NF_ROUTE_SEARCH)
        return NULL;
    unsigned n = 0;
    nf_admin_req_spans(req, &n);
    if (n + 2 > NF_ADMIN_REQ_SPANS) /* the root and its child, or none (nf_api_observe ends all) */
        return NULL;
    nf_span_t *root = nf_admin_req_span(req), *child = nf_admin_req_span(req);
    nf_span_root(root, r->id == NF_ROUTE_FEED ? "feed.request" : "search.request", NF_SPAN_SERVER);
    nf_span_str(root, "http.route", r->path);
    nf_span_str(root, "http.request.method", "GET");
    nf_trace_ctx_t ctx = nf_span_ctx(root);
    nf_span_child(child, "query.answer", &ctx, NF_SPAN_INTERNAL);
    return child;
}

int nf_api_get(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    nf_api_t *a = arg;
    const char *p, *allow;
    size_t pl;
    const nf_route_t *r = nf_route_match("GET", route, &p, &pl, &allow);
    if (!r)
        return no_route(allow, req, body, len);
    nf_admin_req_set_route(req, (int)r->id);
    int st = wrong_listener(a, r, body, len);
    if (st)
        return st;
    if (a->listener != NF_API_OPERATORS) {
        char sub[NF_EVENT_FIELD_MAX + 1];
        bool reader = r->guard == NF_GUARD_READER;
        st = nf_guard_check(a->guard, r->guard, reader ? p : NULL, reader ? pl : 0, req, 1, sub,
                            sizeof sub, body, len);
        if (st)
            return st;
    }
    nf_span_t *sp = trace_route(r, req);
    st = answer_get(a, r, route, req, body, len);
    if (sp)
        nf_span_end(sp, st >= 500 ? "5xx" : NULL);
    return st ? st : not_here("not served by this process", body, len);
}

int nf_api_post(void *arg, const char *route, nf_admin_req_t *req, const char *body, size_t len,
                char **out, size_t *outlen)
{
    nf_api_t *a = arg;
    const char *p, *allow;
    size_t pl;
    const nf_route_t *r = nf_route_match("POST", route, &p, &pl, &allow);
    if (!r)
        return no_route(allow, req, out, outlen);
    nf_admin_req_set_route(req, (int)r->id);
    int st = wrong_listener(a, r, out, outlen);
    if (st)
        return st;
    if (!a->edge)
        return not_here("the HTTP edge is not taking events here (edge.enabled, kafka.brokers)",
                        out, outlen);
    char sub[NF_EVENT_FIELD_MAX + 1] = "";
    double cost = (double)nf_edge_events_in(a->edge, route, body, len);
    st =
        nf_guard_check(a->guard, NF_GUARD_EVENTS, NULL, 0, req, cost, sub, sizeof sub, out, outlen);
    if (!st)
        st = nf_edge_handle(a->edge, route, req, sub, body, len, out, outlen);
    return st ? st : not_here("no such route", out, outlen);
}
