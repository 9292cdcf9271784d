/* admin_respond.c — the answers of the admin hooks (admin.h), whichever server carries them:
 * libmicrohttpd's (admin.c) or the shards' (httpd.c). One dispatch: the paths the server answers
 * itself (/metrics, /healthz, /readyz, the page), the /v1/ hooks, 404 and 405; and the request's
 * accessors the hooks read, for either kind of request. */
#include "runtime/admin.h"
#include "runtime/admin_req.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { P_METRICS = 0, P_HEALTHZ, P_READYZ, P_API, P_PAGE, P_OTHER };
static const char *const paths[NF_ADMIN_NPATHS] = {"/metrics", "/healthz", "/readyz",
                                                   "/v1",      "/",        "other"};
static const char text[] = "text/plain; charset=utf-8";

int nf_admin_path_of(const char *url)
{
    if (strncmp(url, "/v1/", 4) == 0)
        return P_API;
    if (strcmp(url, "/index.html") == 0)
        return P_PAGE;
    for (int i = 0; i < P_OTHER; i++)
        if (i != P_API && strcmp(url, paths[i]) == 0)
            return i;
    return P_OTHER; /* "/v1" alone included: no route */
}

const char *nf_admin_path_name(int path)
{
    return path >= 0 && path < NF_ADMIN_NPATHS ? paths[path] : "other";
}

static void resp_static(nf_admin_resp_t *o, int status, const char *body)
{
    *o = (nf_admin_resp_t){
        .status = status, .ctype = text, .body = (char *)body, .len = strlen(body)};
}

/* A copy of n bytes of body: owned. */
static void resp_copy(nf_admin_resp_t *o, int status, const char *ctype, const char *body, size_t n)
{
    char *b = malloc(n ? n : 1);
    if (!b) {
        resp_static(o, 503, "out of memory\n");
        return;
    }
    memcpy(b, body, n);
    *o = (nf_admin_resp_t){.status = status, .ctype = ctype, .body = b, .len = n, .owned = true};
}

void nf_admin_resp_413(size_t max_body, nf_admin_resp_t *out)
{
    char body[128];
    int n =
        snprintf(body, sizeof body, "{\"error\":\"body over the limit of %zu bytes\"}\n", max_body);
    resp_copy(out, 413, "application/json", body, (size_t)n);
}

static void resp_metrics(nf_admin_resp_t *o)
{
    char *body;
    long n = nf_metrics_render(&body);
    if (n < 0) {
        nf_log(NF_LOG_ERROR, "admin", "cannot render metrics", NF_LI("errno", -n), NF_LEND);
        resp_static(o, 500, "cannot render metrics\n");
        return;
    }
    *o = (nf_admin_resp_t){.status = 200,
                           .ctype = "text/plain; version=0.0.4; charset=utf-8",
                           .body = body,
                           .len = (size_t)n,
                           .owned = true};
}

static void resp_healthz(const nf_admin_hooks_t *h, nf_admin_resp_t *o)
{
    char why[256] = "";
    if (!h->health || h->health(h->arg, why, sizeof why) == 0) {
        resp_static(o, 200, "ok\n");
        return;
    }
    why[sizeof why - 1] = '\0';
    for (char *p = why; *p; p++) /* the reason is one line */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    char body[sizeof why + 32];
    int n = snprintf(body, sizeof body, "unhealthy: %s\n", why[0] ? why : "no reason given");
    resp_copy(o, 503, text, body, (size_t)n);
}

static void resp_readyz(const nf_admin_hooks_t *h, nf_admin_resp_t *o)
{
    if (!h->ready) {
        resp_static(o, 200, "{\"ready\":true}\n");
        o->ctype = "application/json";
        return;
    }
    char body[1024];
    body[0] = '\0';
    bool ok = h->ready(h->arg, body, sizeof body - 1);
    body[sizeof body - 2] = '\0';
    size_t n = strlen(body);
    body[n++] = '\n';
    resp_copy(o, ok ? 200 : 503, "application/json", body, n);
}

/* The api hook (GET) or the post hook (POST, with its body). */
static void resp_hook(const nf_admin_hooks_t *h, nf_admin_req_t *req, const char *route,
                      const char *post, size_t post_len, nf_admin_resp_t *o)
{
    char *body = NULL;
    size_t len = 0;
    int status = post ? h->post(h->api_arg, route, req, post, post_len, &body, &len)
                      : h->api(h->api_arg, route, req, &body, &len);
    *o = (nf_admin_resp_t){.status = status,
                           .ctype = body ? "application/json" : text,
                           .body = body ? body : "",
                           .len = body ? len : 0,
                           .owned = body != NULL,
                           .api = true};
}

void nf_admin_respond(const nf_admin_hooks_t *h, nf_admin_req_t *req, const char *method,
                      const char *url, const char *body, size_t len, nf_admin_resp_t *out)
{
    int path = nf_admin_path_of(url);
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (path == P_API && h->post && strcmp(method, "POST") == 0) {
        resp_hook(h, req, url + 4, body ? body : "", len, out);
        return;
    }
    if (!get) {
        resp_static(out, 405, "method not allowed\n");
        out->allow = path == P_API && h->post ? "GET, HEAD, POST" : "GET, HEAD";
        return;
    }
    if (h->readers_only && path < P_API) { /* metrics, healthz, readyz */
        resp_static(out, 404, "not found: operators' routes are on admin.operator_port\n");
        return;
    }
    switch (path) {
    case P_METRICS:
        resp_metrics(out);
        return;
    case P_HEALTHZ:
        resp_healthz(h, out);
        return;
    case P_READYZ:
        resp_readyz(h, out);
        return;
    case P_API:
        if (h->api)
            resp_hook(h, req, url + 4, NULL, 0, out);
        else
            resp_static(out, 404, "not found\n");
        return;
    case P_PAGE:
        if (h->page)
            *out = (nf_admin_resp_t){.status = 200,
                                     .ctype = "text/html; charset=utf-8",
                                     .body = (char *)h->page,
                                     .len = h->page_len};
        else
            resp_static(out, 404, "not found\n");
        return;
    default:
        resp_static(out, 404, "not found\n");
    }
}

/* ---- the request's accessors ---- */

const char *nf_admin_req_arg(const nf_admin_req_t *r, const char *name)
{
    if (r->msg) {
        for (unsigned i = 0; i < r->msg->nargs; i++)
            if (strcmp(r->msg->arg[i].name, name) == 0)
                return r->msg->arg_nul[i] ? "\x7f" : r->msg->arg[i].value;
        return NULL;
    }
    const char *v = NULL;
    size_t n = 0;
    if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name), &v, &n) !=
        MHD_YES)
        return NULL;
    if (!v)
        return "";
    return strlen(v) == n ? v : "\x7f";
}

void nf_admin_req_header(nf_admin_req_t *r, const char *name, const char *value)
{
    if (r->nheaders == NF_ADMIN_REQ_HEADERS || strpbrk(name, "\r\n") || strpbrk(value, "\r\n"))
        return;
    snprintf(r->headers[r->nheaders][0], sizeof r->headers[0][0], "%s", name);
    snprintf(r->headers[r->nheaders][1], sizeof r->headers[0][1], "%s", value);
    r->nheaders++;
}

void nf_admin_req_set_route(nf_admin_req_t *r, int route)
{
    r->route = route;
}

nf_span_t *nf_admin_req_span(nf_admin_req_t *r)
{
    return r->nspans < NF_ADMIN_REQ_SPANS ? &r->spans[r->nspans++] : NULL;
}

nf_span_t *nf_admin_req_spans(const nf_admin_req_t *r, unsigned *n)
{
    *n = r->nspans;
    return (nf_span_t *)r->spans;
}

nf_trace_ctx_t nf_admin_req_trace(const nf_admin_req_t *r)
{
    return r->nspans ? r->spans[0].ctx : (nf_trace_ctx_t){0};
}

const char *nf_admin_req_header_in(const nf_admin_req_t *r, const char *name)
{
    if (r->msg)
        return nf_http_msg_header(r->msg, name);
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *nf_admin_req_peer(const nf_admin_req_t *r, char *buf, size_t len)
{
    const struct sockaddr *sa = NULL;
    if (r->msg) {
        sa = (const struct sockaddr *)&r->msg->peer;
    } else {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        sa = ci ? ci->client_addr : NULL;
    }
    buf[0] = '\0';
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len);
    return buf;
}
