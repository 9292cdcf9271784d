/* admin.c — see admin.h. The admin HTTP server on libmicrohttpd.
 *
 * Why it is shaped so. Scrapes and probes are rare and small, but some wait on the shards
 * (/healthz, /v1/... through the runtime's cross-thread call), so each connection has a thread
 * of its own: a status request waiting on a busy shard never holds up a liveness probe or a
 * scrape. None of these threads is a shard, so they never touch shard memory: metrics come from
 * nf_metrics_render (atomic loads of the cells), health, readiness and /v1 from the hooks.
 * Connections are capped and time out, so a stuck or hostile client cannot pin threads or
 * exhaust descriptors; past the cap the oldest idle connection is closed rather than the new one
 * refused, so that idle or slow clients (a slowloris) never keep a liveness probe out.
 *
 * MHD binds the socket itself (MHD_OPTION_SOCK_ADDR) and only returns NULL when that fails;
 * the reason is recovered by repeating the bind on a probe socket, so the user sees "address in
 * use" or "cannot assign requested address" next to the address, not a bare failure. */
#include "runtime/admin.h"

#include "runtime/admin_req.h"

#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NF_ADMIN_CONN_DEFAULT    256u   /* admin.max_connections */
#define NF_ADMIN_REQUEST_DEFAULT 10000u /* admin.request_timeout_ms */
#define NF_ADMIN_CONN_TIMEOUT    10u    /* seconds without a byte: MHD closes the connection */
/* MHD's own cap, above ours: it refuses a connection only if the evictions cannot keep up. */
/* A burst of connections outruns the evictions for a while: each evicted connection's thread must
 * wake, see its socket shut and exit before MHD stops counting it, and under load hundreds can be
 * in that state at once. MHD's cap (which refuses the new connection, a probe's too) therefore
 * stands well above ours: max_connections + 256, at least 4 times it. It only bounds the threads
 * and descriptors of such a burst; our cap is the one that holds. */
#define NF_ADMIN_CONN_HEADROOM 256u
#define NF_ADMIN_LOG_EVERY_NS  (10ull * 1000000000ull) /* refusals: a line per 10 s at most */
#define NF_ADMIN_BODY_DEFAULT  (1u << 20)              /* nf_admin_hooks_t.max_body */

enum { NF_ADMIN_API = 3 }; /* nf_admin_path_of's /v1 */

/* One open connection, from MHD's STARTED notification to its CLOSED one (MHD closes the socket
 * after that notification, so a shutdown() under the lock never reaches a reused descriptor). */
typedef struct conn {
    struct conn *prev, *next; /* in opening order: the oldest first */
    int fd;
    bool busy;             /* a request is being answered */
    uint64_t upload_since; /* nf_now_ns when its body began to arrive, 0 when none is */
    bool closing;          /* shut down by us: counted once */
    uint64_t idle_since;   /* nf_now_ns of the connect or of the last answer */
} conn_t;

struct nf_admin {
    struct MHD_Daemon *daemon;
    nf_admin_hooks_t hooks;
    uint16_t port;
    unsigned max_conns;
    size_t max_body;
    uint64_t request_timeout_ns;
    pthread_mutex_t lock;
    conn_t head; /* list sentinel */
    unsigned nconns;
    pthread_t sweeper;
    bool sweeper_started, stopping;
    bool handed_over; /* the listening socket went to the shards' server (nf_admin_hand_over) */
    pthread_cond_t wake;
    nf_log_gate_t close_log, mhd_log; /* closed connections; libmicrohttpd's own warnings */
    nf_counter_t requests[NF_ADMIN_NPATHS];
    nf_counter_t closed_evicted, closed_timeout;
    nf_gauge_t open;
};

/* Queues an answer (nf_admin_respond's) with the headers the hooks added to req. */
static enum MHD_Result mhd_send(struct MHD_Connection *conn, const nf_admin_req_t *req,
                                nf_admin_resp_t *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r->len, r->body, r->owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        if (r->owned)
            free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->api) {
        /* read-only answers: a page served by one process may follow a redirect to another */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
        for (unsigned i = 0; req && i < req->nheaders; i++)
            MHD_add_response_header(resp, req->headers[i][0], req->headers[i][1]);
    }
    enum MHD_Result res = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return res;
}

static enum MHD_Result mhd_static(struct MHD_Connection *conn, int status, const char *body)
{
    nf_admin_resp_t r = {.status = status,
                         .ctype = "text/plain; charset=utf-8",
                         .body = (char *)body,
                         .len = strlen(body)};
    return mhd_send(conn, NULL, &r);
}

/* A whole request answered through nf_admin_respond (post: a POST's body, else NULL). */
static enum MHD_Result mhd_respond(const nf_admin_t *a, struct MHD_Connection *conn,
                                   const char *url, const char *method, const char *post,
                                   size_t post_len)
{
    nf_admin_req_t *req = calloc(1, sizeof *req);
    if (!req)
        return mhd_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
    uint64_t t0 = nf_now_ns();
    req->conn = conn;
    req->route = -1;
    nf_admin_resp_t r;
    nf_admin_respond(&a->hooks, req, method, url, post, post_len, &r);
    int status = r.status;
    enum MHD_Result res = mhd_send(conn, req, &r);
    if (a->hooks.observe)
        a->hooks.observe(a->hooks.api_arg, req, req->route, url, status, nf_now_ns() - t0);
    free(req);
    return res;
}

/* ---- connections: a cap that closes the oldest idle one, and a request deadline ----
 * A probe must get through however many connections a client holds open (a slowloris against a
 * liveness probe is a restart loop): above max_connections the oldest connection without a
 * request in progress is shut down, so a new one is always taken; and a connection that has not
 * sent a whole request within request_timeout_ms of its connect or its last answer is shut down
 * (MHD's own timeout restarts with every byte, so a client trickling a header never meets it). */

static conn_t *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (conn_t *)ci->socket_context : NULL;
}

static void conn_busy(nf_admin_t *a, struct MHD_Connection *c, bool busy)
{
    conn_t *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&a->lock);
    k->busy = busy;
    if (!busy)
        k->idle_since = nf_now_ns();
    pthread_mutex_unlock(&a->lock);
}

/* Shuts k down (its thread sees the end of the stream and MHD closes it); under a->lock. */
static void conn_close(nf_admin_t *a, conn_t *k, bool evicted)
{
    if (k->closing)
        return;
    k->closing = true;
    shutdown(k->fd, SHUT_RDWR);
    nf_counter_inc(evicted ? a->closed_evicted : a->closed_timeout);
    uint64_t held = 0;
    if (nf_log_gate_pass(&a->close_log, NF_ADMIN_LOG_EVERY_NS, &held))
        nf_log(NF_LOG_WARN, "admin",
               "connections closed: over admin.max_connections (the oldest idle ones) or no "
               "whole request within admin.request_timeout_ms (a line per 10 s at most)",
               NF_LI("closed", (int64_t)held + 1), NF_LI("open", a->nconns),
               NF_LI("max_connections", a->max_conns), NF_LEND);
}

static void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    nf_admin_t *a = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_t *k = calloc(1, sizeof *k);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!k)
            return; /* untracked: MHD's own limits still hold */
        k->fd = ci ? ci->connect_fd : -1;
        k->idle_since = nf_now_ns();
        *socket_context = k;
        pthread_mutex_lock(&a->lock);
        k->next = &a->head;
        k->prev = a->head.prev;
        a->head.prev->next = k;
        a->head.prev = k;
        a->nconns++;
        nf_gauge_set(a->open, a->nconns);
        /* over the cap: the oldest idle connections go, never the new one */
        unsigned open = a->nconns;
        for (conn_t *o = a->head.next; o != k && open > a->max_conns; o = o->next)
            if (!o->busy && !o->closing && o->fd >= 0) {
                conn_close(a, o, true);
                open--;
            }
        pthread_mutex_unlock(&a->lock);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conn_t *k = *socket_context;
        pthread_mutex_lock(&a->lock);
        k->prev->next = k->next;
        k->next->prev = k->prev;
        a->nconns--;
        nf_gauge_set(a->open, a->nconns);
        pthread_mutex_unlock(&a->lock);
        free(k);
        *socket_context = NULL;
    }
}

/* ---- POST bodies: collected whole, up to max_body, within the request deadline ---- */

typedef struct upload {
    char *buf;
    size_t len, cap;
    bool too_big;
} upload_t;

static void upload_mark(nf_admin_t *a, struct MHD_Connection *c, bool started)
{
    conn_t *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&a->lock);
    k->upload_since = started ? nf_now_ns() : 0;
    pthread_mutex_unlock(&a->lock);
}

/* Appends a piece of the body; past max_body the body is only counted as too big. */
static void upload_add(const nf_admin_t *a, upload_t *u, const char *data, size_t n)
{
    if (u->too_big || u->len + n > a->max_body) {
        u->too_big = true;
        return;
    }
    if (!nf_http_reserve(&u->buf, &u->cap, u->len + n, 4096)) {
        u->too_big = true; /* answered 413: the client may send less */
        return;
    }
    memcpy(u->buf + u->len, data, n);
    u->len += n;
}

static bool post_route(const nf_admin_t *a, const char *url, const char *method)
{
    return a->hooks.post && strcmp(method, MHD_HTTP_METHOD_POST) == 0 &&
           strncmp(url, "/v1/", 4) == 0;
}

static enum MHD_Result nf_admin_413(const nf_admin_t *a, struct MHD_Connection *conn)
{
    nf_admin_resp_t r;
    nf_admin_resp_413(a->max_body, &r);
    return mhd_send(conn, NULL, &r);
}

/* The first call of a POST (headers only): 413 now if Content-Length is over the limit. */
static enum MHD_Result post_begin(nf_admin_t *a, struct MHD_Connection *conn, void **req_cls)
{
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    upload_t *u = NULL;
    if ((cl && strtoull(cl, NULL, 10) > a->max_body) || !(u = calloc(1, sizeof *u))) {
        *req_cls = a; /* the answer below ends the request, the unread body with it */
        nf_counter_inc(a->requests[NF_ADMIN_API]);
        return cl && strtoull(cl, NULL, 10) > a->max_body
                   ? nf_admin_413(a, conn)
                   : mhd_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
    }
    *req_cls = u;
    upload_mark(a, conn, true);
    return MHD_YES;
}

static enum MHD_Result post_end(nf_admin_t *a, struct MHD_Connection *conn, const char *url,
                                upload_t *u)
{
    upload_mark(a, conn, false);
    nf_counter_inc(a->requests[NF_ADMIN_API]);
    if (u->too_big)
        return nf_admin_413(a, conn);
    return mhd_respond(a, conn, url, MHD_HTTP_METHOD_POST, u->buf ? u->buf : "", u->len);
}

static void request_done(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    if (*req_cls && *req_cls != cls) {
        upload_t *u = *req_cls;
        free(u->buf);
        free(u);
        *req_cls = NULL;
        upload_mark(cls, c, false);
    }
    conn_busy(cls, c, false);
}

/* Once a second: connections idle past the request deadline are shut down. */
static void *sweeper(void *arg)
{
    nf_admin_t *a = arg;
    pthread_mutex_lock(&a->lock);
    while (!a->stopping) {
        struct timespec until = nf_deadline_after(CLOCK_MONOTONIC, 1000);
        pthread_cond_timedwait(&a->wake, &a->lock, &until);
        uint64_t now = nf_now_ns();
        for (conn_t *k = a->head.next; k != &a->head; k = k->next)
            if (!k->closing && k->fd >= 0 &&
                ((!k->busy && now - k->idle_since > a->request_timeout_ns) ||
                 (k->upload_since && now - k->upload_since > a->request_timeout_ns)))
                conn_close(a, k, false);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
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
        conn_busy(a, conn, true);
        if (post_route(a, url, method))
            return post_begin(a, conn, req_cls);
        *req_cls = a;
        return MHD_YES;
    }
    if (*req_cls != a) { /* a POST's body */
        if (*upload_data_size) {
            upload_add(a, *req_cls, upload_data, *upload_data_size);
            *upload_data_size = 0;
            return MHD_YES;
        }
        return post_end(a, conn, url, *req_cls);
    }
    if (*upload_data_size) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    nf_counter_inc(a->requests[nf_admin_path_of(url)]);
    return mhd_respond(a, conn, url, method, NULL, 0);
}

static void nf_admin_mhd_log(void *cls, const char *fmt, va_list ap)
{
    nf_admin_t *a = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    /* A request the server refused (too big, malformed) is the client's doing: a flood of them
     * must not flood the log. */
    bool client = strncmp(msg, "Error processing request", 24) == 0;
    /* ... nor a flood of connections ("Server reached connection limit"): a warning per 10 s. */
    uint64_t held = 0;
    if (!client && !nf_log_gate_pass(&a->mhd_log, NF_ADMIN_LOG_EVERY_NS, &held))
        client = true;
    nf_log(client ? NF_LOG_DEBUG : NF_LOG_WARN, "admin", "http server", NF_LS("detail", msg),
           NF_LI("suppressed_before", (int64_t)held), NF_LEND);
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
    char lst[64] = "", lsts[80] = "";
    if (a->hooks.listener) {
        snprintf(lst, sizeof lst, "listener=\"%s\"", a->hooks.listener);
        snprintf(lsts, sizeof lsts, ",%s", lst);
    }
    char ev[112], to[112];
    snprintf(ev, sizeof ev, "reason=\"evicted\"%s", lsts);
    snprintf(to, sizeof to, "reason=\"timeout\"%s", lsts);
    for (int i = 0; i < NF_ADMIN_NPATHS; i++) {
        char labels[144];
        snprintf(labels, sizeof labels, "path=\"%s\"%s", nf_admin_path_name(i), lsts);
        nf_metrics_counter("newsflow_admin_requests_total",
                           "HTTP requests to the admin server, by path.", labels, 0,
                           &a->requests[i]);
    }
    const char *help = "Admin server connections this process shut down: reason=evicted, the "
                       "oldest idle ones over admin.max_connections; reason=timeout, no whole "
                       "request within admin.request_timeout_ms (a slow or idle client).";
    nf_metrics_counter("newsflow_admin_connections_closed_total", help, ev, 0, &a->closed_evicted);
    nf_metrics_counter("newsflow_admin_connections_closed_total", help, to, 0, &a->closed_timeout);
    nf_metrics_gauge("newsflow_admin_connections", "Open connections to the admin server.",
                     lst[0] ? lst : NULL, 0, &a->open);
}

static unsigned mhd_cap(unsigned max_conns)
{
    unsigned a = max_conns + NF_ADMIN_CONN_HEADROOM, b = max_conns * 4u;
    return a > b ? a : b;
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
    /* ITC: MHD_quiesce_daemon at stop (the requests in progress are answered first) */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_AUTO | MHD_USE_ERROR_LOG | MHD_USE_ITC;
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
    a->max_conns = a->hooks.max_connections ? a->hooks.max_connections : NF_ADMIN_CONN_DEFAULT;
    a->max_body = a->hooks.max_body ? a->hooks.max_body : NF_ADMIN_BODY_DEFAULT;
    a->request_timeout_ns = (uint64_t)(a->hooks.request_timeout_ms ? a->hooks.request_timeout_ms
                                                                   : NF_ADMIN_REQUEST_DEFAULT) *
                            1000000ull;
    a->head.next = a->head.prev = &a->head;
    pthread_mutex_init(&a->lock, NULL);
    pthread_condattr_t ca; /* the sweeper's wait runs on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->wake, &ca);
    pthread_condattr_destroy(&ca);
    nf_admin_register_metrics(a);

    a->daemon = MHD_start_daemon(
        flags, port, NULL, NULL, nf_admin_handle, a, MHD_OPTION_EXTERNAL_LOGGER, nf_admin_mhd_log,
        a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
        mhd_cap(a->max_conns), MHD_OPTION_CONNECTION_TIMEOUT, NF_ADMIN_CONN_TIMEOUT,
        MHD_OPTION_NOTIFY_CONNECTION, conn_notify, a, MHD_OPTION_NOTIFY_COMPLETED, request_done, a,
        MHD_OPTION_END);
    if (!a->daemon) {
        nf_admin_fail(err, errlen, addr, port, nf_admin_bind_error((struct sockaddr *)&ss, salen));
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->wake);
        free(a);
        return NULL;
    }
    a->sweeper_started = pthread_create(&a->sweeper, NULL, sweeper, a) == 0;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_BIND_PORT);
    a->port = info && info->port ? info->port : port;
    return a;
}

uint16_t nf_admin_port(const nf_admin_t *a)
{
    return a ? a->port : 0;
}

/* Stops taking connections, then waits (up to hooks.drain_ms) until no request is in progress:
 * MHD_stop_daemon shuts every connection's socket before it joins the threads, so a request
 * still being answered (a POST waiting on the broker's acknowledgement) would lose its answer. */
static void drain(nf_admin_t *a)
{
    if (!a->handed_over) {
        MHD_socket s = MHD_quiesce_daemon(a->daemon);
        if (s != MHD_INVALID_SOCKET)
            close(s);
    }
    uint64_t until = nf_now_ns() + (uint64_t)a->hooks.drain_ms * 1000000ull;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        bool busy = false;
        for (conn_t *k = a->head.next; k != &a->head && !busy; k = k->next)
            busy = k->busy && !k->closing;
        if (!busy || nf_now_ns() >= until)
            break;
        struct timespec t = nf_deadline_after(CLOCK_MONOTONIC, 20);
        pthread_cond_timedwait(&a->wake, &a->lock, &t);
    }
    pthread_mutex_unlock(&a->lock);
}

int nf_admin_hand_over(nf_admin_t *a)
{
    if (!a || a->handed_over)
        return -1;
    MHD_socket s = MHD_quiesce_daemon(a->daemon);
    if (s == MHD_INVALID_SOCKET)
        return -1;
    a->handed_over = true;
    return s;
}

void nf_admin_stop(nf_admin_t *a)
{
    if (!a)
        return;
    if (a->hooks.drain_ms)
        drain(a);
    if (a->sweeper_started) {
        pthread_mutex_lock(&a->lock);
        a->stopping = true;
        pthread_cond_signal(&a->wake);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->sweeper, NULL);
    }
    MHD_stop_daemon(a->daemon); /* closes every connection: each CLOSED notification frees it */
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->wake);
    free(a);
}
