/* admin.c — see admin.h. The admin HTTP server on libmicrohttpd.
 *
 * Why it is shaped so. Scrapes and probes are rare and small, but some wait on the shards
 * (/healthz, /v1/... through the runtime's cross-thread call), so each connection has a thread
 * of its own: a status request waiting on a busy shard never holds up a liveness probe or a
 * scrape. None of these threads is a shard, so they never touch shard memory: metrics come from
 * nf_metrics_render (atomic loads of the cells), health, readiness and /v1 from the hooks.
 * Connections are capped and time out, so a stuck or hostile client cannot pin threads or
 * exhaust descriptors.
 *
 * MHD binds the socket itself (MHD_OPTION_SOCK_ADDR) and only returns NULL when that fails;
 * the reason is recovered by repeating the bind on a probe socket, so the user sees "address in
 * use" or "cannot assign requested address" next to the address, not a bare failure. */
#include "runtime/admin.h"

#include "runtime/log.h"
#include "runtime/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NF_ADMIN_CONN_LIMIT   64u
#define NF_ADMIN_CONN_TIMEOUT 10u /* seconds */

enum {
    NF_ADMIN_METRICS = 0,
    NF_ADMIN_HEALTHZ,
    NF_ADMIN_READYZ,
    NF_ADMIN_API,
    NF_ADMIN_PAGE,
    NF_ADMIN_OTHER,
    NF_ADMIN_NPATHS
};
static const char *const nf_admin_paths[NF_ADMIN_NPATHS] = {"/metrics", "/healthz", "/readyz",
                                                            "/v1",      "/",        "other"};

struct nf_admin {
    struct MHD_Daemon *daemon;
    nf_admin_hooks_t hooks;
    uint16_t port;
    nf_counter_t requests[NF_ADMIN_NPATHS];
};

static const char nf_admin_text[] = "text/plain; charset=utf-8";
static const char nf_admin_405[] = "method not allowed\n";

static enum MHD_Result nf_admin_reply(struct MHD_Connection *conn, unsigned status,
                                      const char *ctype, char *body, size_t len,
                                      enum MHD_ResponseMemoryMode mode, const char *allow)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result r = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* body: a string literal (MHD sends it without copying). */
static enum MHD_Result nf_admin_static(struct MHD_Connection *conn, unsigned status,
                                       const char *body)
{
    return nf_admin_reply(conn, status, nf_admin_text, (char *)body, strlen(body),
                          MHD_RESPMEM_PERSISTENT, NULL);
}

static enum MHD_Result nf_admin_metrics(struct MHD_Connection *conn)
{
    char *body;
    long n = nf_metrics_render(&body);
    if (n < 0) {
        nf_log(NF_LOG_ERROR, "admin", "cannot render metrics", NF_LI("errno", -n), NF_LEND);
        return nf_admin_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render metrics\n");
    }
    return nf_admin_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body,
                          (size_t)n, MHD_RESPMEM_MUST_FREE, NULL);
}

static enum MHD_Result nf_admin_healthz(const nf_admin_t *a, struct MHD_Connection *conn)
{
    if (!a->hooks.health)
        return nf_admin_static(conn, MHD_HTTP_OK, "ok\n");
    char why[256] = "";
    if (a->hooks.health(a->hooks.arg, why, sizeof why) == 0)
        return nf_admin_static(conn, MHD_HTTP_OK, "ok\n");
    why[sizeof why - 1] = '\0';
    for (char *p = why; *p; p++) /* the reason is one line */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    char body[sizeof why + 32];
    int n = snprintf(body, sizeof body, "unhealthy: %s\n", why[0] ? why : "no reason given");
    return nf_admin_reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, nf_admin_text, body, (size_t)n,
                          MHD_RESPMEM_MUST_COPY, NULL);
}

static enum MHD_Result nf_admin_readyz(const nf_admin_t *a, struct MHD_Connection *conn)
{
    if (!a->hooks.ready)
        return nf_admin_static(conn, MHD_HTTP_OK, "{\"ready\":true}\n");
    char body[1024];
    body[0] = '\0';
    bool ok = a->hooks.ready(a->hooks.arg, body, sizeof body - 1);
    body[sizeof body - 2] = '\0';
    size_t n = strlen(body);
    body[n++] = '\n';
    return nf_admin_reply(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "application/json",
                          body, n, MHD_RESPMEM_MUST_COPY, NULL);
}

#define NF_ADMIN_REQ_HEADERS 4

struct nf_admin_req {
    struct MHD_Connection *conn;
    unsigned nheaders;
    char headers[NF_ADMIN_REQ_HEADERS][2][512];
};

const char *nf_admin_req_arg(const nf_admin_req_t *r, const char *name)
{
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

static enum MHD_Result nf_admin_api(const nf_admin_t *a, struct MHD_Connection *conn,
                                    const char *route)
{
    if (!a->hooks.api)
        return nf_admin_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    nf_admin_req_t *req = calloc(1, sizeof *req);
    if (!req)
        return nf_admin_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
    req->conn = conn;
    char *body = NULL;
    size_t len = 0;
    int status = a->hooks.api(a->hooks.api_arg, route, req, &body, &len);
    struct MHD_Response *resp =
        body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        free(req);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            body ? "application/json" : nf_admin_text);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    /* read-only answers: a page served by one process may follow a redirect to another */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    for (unsigned i = 0; i < req->nheaders; i++)
        MHD_add_response_header(resp, req->headers[i][0], req->headers[i][1]);
    free(req);
    enum MHD_Result r = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result nf_admin_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_data_size,
                                       void **req_cls)
{
    nf_admin_t *a = cls;
    /* MHD calls this first with the headers alone: a response queued then makes it close the
     * connection (it cannot know the request has no body), so every request would cost a TCP
     * handshake and a thread. Answer on the next call; a body (no route takes one) is read and
     * dropped. */
    if (!*req_cls) {
        *req_cls = a;
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    (void)upload_data;
    int path = NF_ADMIN_OTHER;
    for (int i = 0; i < NF_ADMIN_OTHER; i++)
        if (strcmp(url, nf_admin_paths[i]) == 0)
            path = i;
    if (strncmp(url, "/v1/", 4) == 0)
        path = NF_ADMIN_API;
    else if (strcmp(url, "/index.html") == 0)
        path = NF_ADMIN_PAGE;
    else if (path == NF_ADMIN_API) /* "/v1" alone: no route */
        path = NF_ADMIN_OTHER;
    nf_counter_inc(a->requests[path]);

    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return nf_admin_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, nf_admin_text,
                              (char *)nf_admin_405, sizeof nf_admin_405 - 1, MHD_RESPMEM_PERSISTENT,
                              "GET, HEAD");
    switch (path) {
    case NF_ADMIN_METRICS:
        return nf_admin_metrics(conn);
    case NF_ADMIN_HEALTHZ:
        return nf_admin_healthz(a, conn);
    case NF_ADMIN_READYZ:
        return nf_admin_readyz(a, conn);
    case NF_ADMIN_API:
        return nf_admin_api(a, conn, url + 4);
    case NF_ADMIN_PAGE:
        if (!a->hooks.page)
            return nf_admin_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
        return nf_admin_reply(conn, MHD_HTTP_OK, "text/html; charset=utf-8", (char *)a->hooks.page,
                              a->hooks.page_len, MHD_RESPMEM_PERSISTENT, NULL);
    default:
        return nf_admin_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    }
}

static void nf_admin_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    /* A request the server refused (too big, malformed) is the client's doing: a flood of them
     * must not flood the log. */
    bool client = strncmp(msg, "Error processing request", 24) == 0;
    nf_log(client ? NF_LOG_DEBUG : NF_LOG_WARN, "admin", "http server", NF_LS("detail", msg),
           NF_LEND);
}

/* Why binding addr failed, found by trying it on a throwaway socket. */
static const char *nf_admin_bind_error(const struct sockaddr *sa, socklen_t salen)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return strerror(errno);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* as MHD does */
    const char *why = "the HTTP server could not start (see the log)";
    if (bind(fd, sa, salen) != 0)
        why = strerror(errno);
    close(fd);
    return why;
}

static void nf_admin_fail(char *err, size_t errlen, const char *addr, uint16_t port,
                          const char *why)
{
    char msg[256];
    snprintf(msg, sizeof msg, "admin: cannot listen on %s%s%s:%u: %s", strchr(addr, ':') ? "[" : "",
             addr, strchr(addr, ':') ? "]" : "", (unsigned)port, why);
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    else
        nf_log(NF_LOG_ERROR, "admin", msg, NF_LEND);
}

static void nf_admin_register_metrics(nf_admin_t *a)
{
    for (int i = 0; i < NF_ADMIN_NPATHS; i++) {
        char labels[32];
        snprintf(labels, sizeof labels, "path=\"%s\"", nf_admin_paths[i]);
        int rc = nf_metrics_counter("newsflow_admin_requests_total",
                                    "HTTP requests to the admin server, by path.", labels, 0,
                                    &a->requests[i]);
        if (rc < 0) /* the handle stays a zero handle: requests are just not counted */
            nf_log(NF_LOG_DEBUG, "admin", "admin request counter not registered",
                   NF_LI("errno", -rc), NF_LEND);
    }
}

nf_admin_t *nf_admin_start(const char *addr, uint16_t port, const nf_admin_hooks_t *hooks,
                           char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!addr)
        addr = "";
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t salen;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        salen = sizeof *sin;
    } else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        salen = sizeof *sin6;
        flags |= MHD_USE_IPv6;
    } else {
        nf_admin_fail(err, errlen, addr, port, "not an IPv4 or IPv6 address literal");
        return NULL;
    }

    nf_admin_t *a = calloc(1, sizeof *a);
    if (!a) {
        nf_admin_fail(err, errlen, addr, port, strerror(ENOMEM));
        return NULL;
    }
    if (hooks)
        a->hooks = *hooks;
    nf_admin_register_metrics(a);

    a->daemon = MHD_start_daemon(
        flags, port, NULL, NULL, nf_admin_handle, a, MHD_OPTION_EXTERNAL_LOGGER, nf_admin_mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
        NF_ADMIN_CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT, NF_ADMIN_CONN_TIMEOUT, MHD_OPTION_END);
    if (!a->daemon) {
        nf_admin_fail(err, errlen, addr, port, nf_admin_bind_error((struct sockaddr *)&ss, salen));
        free(a);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_BIND_PORT);
    a->port = info && info->port ? info->port : port;
    return a;
}

uint16_t nf_admin_port(const nf_admin_t *a)
{
    return a ? a->port : 0;
}

void nf_admin_stop(nf_admin_t *a)
{
    if (!a)
        return;
    MHD_stop_daemon(a->daemon);
    free(a);
}
