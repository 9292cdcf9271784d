/* httpd.c — see httpd.h. One actor instance per shard: the listening socket's watch, the
 * shard's connections (a list in opening order, for the cap and the deadline sweep), and each
 * connection's bytes: read into the shard's scratch buffer, fed to the connection's parser, each
 * whole request answered (here or by a worker) before the next one is taken, the answers
 * written in order. */
#include "runtime/httpd.h"

#include "runtime/httpd_int.h"
#include "runtime/log.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SCRATCH      (64u * 1024u)  /* one read */
#define OUT_HIGH     (256u * 1024u) /* answers waiting to be written: stop reading requests */
#define ACCEPT_BATCH 64u
#define SWEEP_NS     1000000000ull
#define FD_PAUSE_NS  100000000ull /* out of descriptors: the listener rests this long */
#define LOG_EVERY_NS (10ull * 1000000000ull)

struct hshard {
    nf_httpd_t *h;
    nf_shard_t *sh;
    nf_watch_t *lw; /* the listening socket's */
    conn_t head;    /* list sentinel */
    unsigned nconns, cap;
    conn_t *deferred; /* connections waiting for the next iteration's budget */
    nf_timer_t sweep, rest;
    uint64_t loop;     /* the iteration `answered` counts in */
    unsigned answered; /* requests answered in it */
    nf_log_gate_t accept_log;
    bool stopping;
    char scratch[SCRATCH];
};

/* Time the shards spent answering on their loops (process-wide: see runtime.c's busy time). */
static _Atomic uint64_t g_loop_ns;

static double loop_seconds(void *arg)
{
    (void)arg;
    return (double)atomic_load_explicit(&g_loop_ns, memory_order_relaxed) / 1e9;
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 307:
        return "Temporary Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Status";
    }
}

/* ---- connections ---- */

static void conn_free(conn_t *c)
{
    nf_http_parser_free(&c->hp);
    free(c->in);
    free(c->out);
    free(c);
}

static void conn_unlink(conn_t *c)
{
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

/* Closes c's socket. A connection whose request is at a worker, or that waits in the deferred
 * list, stays listed (closed) until its answer comes back or its turn comes; any other is freed. */
static void conn_close(conn_t *c)
{
    hshard_t *s = c->s;
    if (c->closed)
        return;
    c->closed = true;
    nf_watch_remove(s->sh, c->w);
    close(c->fd);
    s->nconns--;
    nf_gauge_add(s->h->conns, -1);
    if (!c->pending && !c->deferred) {
        conn_unlink(c);
        conn_free(c);
    }
}

/* May c be closed for a new connection? Not while an answer is owed or being written; a request
 * still arriving (a slowloris) may be, as the admin server does. */
static bool conn_evictable(const conn_t *c)
{
    return !c->closed && !c->pending && !c->deferred && c->out_len == c->out_off;
}

static bool budget_spent(hshard_t *s)
{
    uint64_t loop = nf_shard_loops(s->sh);
    if (loop != s->loop) {
        s->loop = loop;
        s->answered = 0;
    }
    return s->answered >= s->h->o.budget;
}

/* What c waits for: requests while it can take them, the socket's room while answers wait. */
static void conn_events(conn_t *c)
{
    unsigned ev = 0;
    if (!c->pending && !c->close_after && !c->eof && !c->in_len &&
        c->out_len - c->out_off < OUT_HIGH)
        ev |= POLLIN;
    if (c->out_len > c->out_off)
        ev |= POLLOUT;
    if (ev != c->events) {
        c->events = ev;
        nf_watch_modify(c->s->sh, c->w, ev);
    }
}

static bool out_add(conn_t *c, const char *p, size_t n)
{
    if (!nf_http_reserve(&c->out, &c->out_cap, c->out_len + n, 4096))
        return false;
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return true;
}

/* An answer is still to be made or written for what c has sent. */
static bool conn_owes(const conn_t *c)
{
    return c->pending || c->deferred || c->in_len || c->out_len > c->out_off;
}

/* Writes what it can. false: c was closed (an error, the end of a last answer, or of the last
 * one owed to a client that half-closed). */
static bool conn_flush(conn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w > 0)
            c->out_off += (size_t)w;
        else if (w < 0 && errno == EINTR)
            continue;
        else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        else {
            conn_close(c);
            return false;
        }
    }
    c->out_len = c->out_off = 0;
    if (c->out_cap > OUT_HIGH) { /* a big answer went out: give its room back */
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
    if (c->close_after || (c->eof && !conn_owes(c))) {
        shutdown(c->fd, SHUT_WR);
        conn_close(c);
        return false;
    }
    return true;
}

/* The observe hook, for the request c is answering (if any: c->req_ns). */
static void observe(conn_t *c, const nf_admin_req_t *req, int status)
{
    const nf_admin_hooks_t *hk = &c->s->h->o.hooks;
    if (!c->req_ns)
        return;
    if (hk->observe)
        hk->observe(hk->api_arg, req, req ? req->route : -1, req ? c->hp.msg.path : NULL, status,
                    nf_now_ns() - c->req_ns);
    c->req_ns = 0;
}

/* An answer: status line, headers, body (none for HEAD). Frees an owned body. */
static void send_resp(conn_t *c, const nf_admin_req_t *req, nf_admin_resp_t *r, bool keep)
{
    char hdr[4096];
    size_t n = (size_t)snprintf(hdr, sizeof hdr,
                                "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                                "Cache-Control: no-store\r\n",
                                r->status, reason_phrase(r->status), r->ctype, r->len);
    if (r->allow)
        n += (size_t)snprintf(hdr + n, sizeof hdr - n, "Allow: %s\r\n", r->allow);
    if (r->api) {
        n += (size_t)snprintf(hdr + n, sizeof hdr - n, "Access-Control-Allow-Origin: *\r\n");
        for (unsigned i = 0; req && i < req->nheaders && n < sizeof hdr; i++)
            n += (size_t)snprintf(hdr + n, sizeof hdr - n, "%s: %s\r\n", req->headers[i][0],
                                  req->headers[i][1]);
    }
    if (!keep || c->s->stopping) {
        c->close_after = true;
        if (n < sizeof hdr)
            n += (size_t)snprintf(hdr + n, sizeof hdr - n, "Connection: close\r\n");
    }
    if (n < sizeof hdr)
        n += (size_t)snprintf(hdr + n, sizeof hdr - n, "\r\n");
    if (n >= sizeof hdr || !out_add(c, hdr, n) || (!c->head && !out_add(c, r->body, r->len)))
        c->close_after = true; /* out of memory: this connection ends here */
    observe(c, req, r->status);
    if (r->owned)
        free(r->body);
    c->since = nf_shard_now(c->s->sh);
}

/* A plain-text answer of the server's own. */
static void send_plain(conn_t *c, int status, const char *body, bool keep)
{
    nf_admin_resp_t r = {.status = status,
                         .ctype = "text/plain; charset=utf-8",
                         .body = (char *)body,
                         .len = strlen(body)};
    send_resp(c, NULL, &r, keep);
}

/* The request the hooks see: m, with no header added yet. */
static void req_init(nf_admin_req_t *r, const nf_http_msg_t *m)
{
    r->conn = NULL;
    r->msg = m;
    r->route = -1;
    r->nheaders = 0;
    r->nspans = 0;
}

/* ---- requests ---- */

static void offload(conn_t *c)
{
    nf_httpd_t *h = c->s->h;
    httpd_job_t *j = malloc(sizeof *j);
    if (j) {
        j->c = c;
        j->shard = nf_shard_index(c->s->sh);
        req_init(&j->req, &c->hp.msg);
    }
    if (j && httpd_workers_submit(h, j)) {
        c->pending = true;
        return;
    }
    free(j);
    nf_counter_inc(h->refused[REFUSED_BUSY]);
    nf_admin_req_t req;
    req_init(&req, &c->hp.msg);
    nf_admin_req_header(&req, "Retry-After", "1");
    static const char busy[] = "server busy: try again\n";
    nf_admin_resp_t r = {.status = 503,
                         .ctype = "text/plain; charset=utf-8",
                         .body = (char *)busy,
                         .len = sizeof busy - 1,
                         .api = true};
    send_resp(c, &req, &r, c->hp.msg.keep_alive);
}

/* A whole request in c's parser: answered here when the hooks allow, else by a worker. */
static void answer(conn_t *c)
{
    hshard_t *s = c->s;
    nf_httpd_t *h = s->h;
    nf_http_msg_t *m = &c->hp.msg;
    s->answered++;
    c->req_ns = nf_now_ns();
    c->head = strcmp(m->method, "HEAD") == 0;
    nf_counter_inc(h->req[nf_admin_path_of(m->path)]);
    if (m->path_nul) {
        nf_counter_inc(h->refused[REFUSED_BAD_REQUEST]);
        static const char nul[] = "{\"error\":\"the path holds a NUL byte (%00)\"}\n";
        nf_admin_resp_t r = {.status = 400,
                             .ctype = "application/json",
                             .body = (char *)nul,
                             .len = sizeof nul - 1,
                             .api = true};
        send_resp(c, NULL, &r, m->keep_alive);
        return;
    }
    if (!h->o.hooks.on_loop || !h->o.hooks.on_loop(h->o.hooks.api_arg, m->method, m->path)) {
        offload(c);
        return;
    }
    uint64_t t0 = c->req_ns;
    nf_admin_req_t req;
    req_init(&req, m);
    nf_admin_resp_t r;
    nf_admin_respond(&h->o.hooks, &req, m->method, m->path, m->body, m->body_len, &r);
    send_resp(c, &req, &r, m->keep_alive);
    atomic_fetch_add_explicit(&g_loop_ns, nf_now_ns() - t0, memory_order_relaxed);
}

/* The parser refused the request: its status, then the connection ends. */
static void refuse(conn_t *c)
{
    int st = c->hp.status;
    int why = st == 413   ? REFUSED_TOO_LARGE
              : st == 414 ? REFUSED_URI_TOO_LONG
              : st == 431 ? REFUSED_HEAD_TOO_LARGE
                          : REFUSED_BAD_REQUEST;
    nf_counter_inc(c->s->h->refused[why]);
    c->req_ns = nf_now_ns();
    char body[160];
    snprintf(body, sizeof body, "%s: %s\n", reason_phrase(st), c->hp.why ? c->hp.why : "");
    c->head = false;
    send_plain(c, st, body, false);
}

static void defer(conn_t *c)
{
    hshard_t *s = c->s;
    if (c->deferred)
        return;
    c->deferred = true;
    c->dnext = s->deferred;
    s->deferred = c;
    nf_counter_inc(s->h->deferred);
    nf_actor_schedule(s->sh, s->h->actor);
}

/* Appends bytes c cannot take now to those it kept (a read that raced with its wait for a
 * worker's answer may bring more). Past what one request may hold, the client is flooding: the
 * connection ends. */
static void keep(conn_t *c, const char *data, size_t n)
{
    size_t cap = c->s->h->o.max_head + c->s->h->o.hooks.max_body + SCRATCH;
    char *in = c->in_len + n <= cap ? realloc(c->in, c->in_len + n) : NULL;
    if (!in) {
        c->close_after = true;
        return;
    }
    memcpy(in + c->in_len, data, n);
    c->in = in;
    c->in_len += n;
}

/* Feeds bytes to c's parser and answers each whole request, until c must wait (a request at a
 * worker, the budget spent, answers backed up); the bytes not taken are kept in c->in. */
static void feed(conn_t *c, const char *data, size_t n)
{
    while (n > 0 && !c->pending && !c->close_after) {
        if (c->out_len - c->out_off >= OUT_HIGH)
            break;
        if (budget_spent(c->s)) {
            defer(c);
            break;
        }
        size_t used = 0;
        nf_http_step_t st = nf_http_parse(&c->hp, data, n, &used);
        data += used;
        n -= used;
        if (st == NF_HTTP_REQUEST)
            answer(c);
        else if (st == NF_HTTP_CONTINUE)
            out_add(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        else if (st == NF_HTTP_ERROR) {
            refuse(c);
            n = 0;
        }
    }
    if (n > 0 && !c->close_after)
        keep(c, data, n);
}

/* Takes up the bytes c kept, writes what is ready, again while answers backed up stopped it and
 * went out at once (nothing else would wake it: kept bytes turn reading off), and sets what c
 * waits for. */
static void resume(conn_t *c)
{
    do {
        char *kept = c->in;
        size_t n = c->in_len;
        c->in = NULL;
        c->in_len = 0;
        if (n)
            feed(c, kept, n);
        free(kept);
        if (!conn_flush(c))
            return;
    } while (c->in_len && !c->pending && !c->deferred && !c->close_after &&
             c->out_len - c->out_off < OUT_HIGH);
    conn_events(c);
}

static void on_conn(nf_shard_t *sh, int fd, unsigned revents, void *arg)
{
    conn_t *c = arg;
    hshard_t *s = c->s;
    if ((revents & POLLOUT) && !conn_flush(c))
        return;
    if (revents & (POLLIN | POLLERR | POLLHUP)) {
        ssize_t n = recv(fd, s->scratch, sizeof s->scratch, 0);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_close(c); /* the client is gone (a request at a worker: freed when back) */
            return;
        }
        if (n == 0) { /* all it will send: what came whole is still answered */
            c->eof = true;
            if (!conn_owes(c)) {
                conn_close(c);
                return;
            }
        }
        if (n > 0 && (c->in_len || c->pending)) /* bytes kept come first */
            keep(c, s->scratch, (size_t)n);
        else if (n > 0)
            feed(c, s->scratch, (size_t)n);
    }
    (void)sh;
    if (!conn_flush(c))
        return;
    if (c->in_len && !c->pending && !c->deferred && c->out_len - c->out_off < OUT_HIGH)
        resume(c); /* the answers it waited behind are written: take up what it kept */
    else
        conn_events(c);
}

/* Over the cap: the oldest connection not being answered goes for the new one. */
static void make_room(hshard_t *s, conn_t *fresh)
{
    if (s->nconns <= s->cap)
        return;
    for (conn_t *o = s->head.next; o != &s->head && o != fresh; o = o->next)
        if (conn_evictable(o)) {
            nf_counter_inc(s->h->closed[CLOSED_EVICTED]);
            conn_close(o);
            return;
        }
    if (s->nconns > 2 * s->cap) {
        nf_counter_inc(s->h->refused[REFUSED_CONNECTIONS]);
        conn_close(fresh);
    }
}

static void conn_open(hshard_t *s, int fd, const struct sockaddr_storage *peer)
{
    nf_httpd_t *h = s->h;
    conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        nf_counter_inc(h->refused[REFUSED_DESCRIPTORS]);
        return;
    }
    nf_http_limits_t lim = {.max_head = h->o.max_head, .max_body = h->o.hooks.max_body};
    nf_http_parser_init(&c->hp, &lim);
    c->hp.msg.peer = *peer;
    c->s = s;
    c->fd = fd;
    c->since = nf_shard_now(s->sh);
    c->events = POLLIN;
    c->w = nf_watch_add(s->sh, fd, POLLIN, on_conn, c);
    if (!c->w) {
        close(fd);
        conn_free(c);
        return;
    }
    nf_watch_quiet(c->w); /* answers send no message: a flood must not hold an epoch's drain */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->next = &s->head;
    c->prev = s->head.prev;
    s->head.prev->next = c;
    s->head.prev = c;
    s->nconns++;
    nf_gauge_add(h->conns, 1);
    make_room(s, c);
}

static void rest_over(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    hshard_t *s = arg;
    (void)t;
    if (s->lw && !s->stopping)
        nf_watch_modify(sh, s->lw, POLLIN);
}

/* accept failed for want of descriptors or memory: say so (a line per 10 s), rest the listener */
static void accept_starved(hshard_t *s, int err)
{
    nf_counter_inc(s->h->refused[REFUSED_DESCRIPTORS]);
    uint64_t now = nf_shard_now(s->sh), held = 0;
    if (nf_log_gate_pass(&s->accept_log, LOG_EVERY_NS, &held))
        nf_log(NF_LOG_WARN, "http",
               "cannot accept connections: raise the descriptor limit (ulimit -n) or lower "
               "admin.max_connections (a line per 10 s at most)",
               NF_LS("error", strerror(err)), NF_LI("shard", nf_shard_index(s->sh)),
               NF_LI("open", s->nconns), NF_LI("suppressed_before", (int64_t)held), NF_LEND);
    nf_watch_modify(s->sh, s->lw, 0);
    nf_timer_arm(s->sh, &s->rest, now + FD_PAUSE_NS, 0);
}

static void on_accept(nf_shard_t *sh, int fd, unsigned revents, void *arg)
{
    hshard_t *s = arg;
    (void)revents;
    for (unsigned i = 0; i < ACCEPT_BATCH && !s->stopping; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        memset(&ss, 0, sizeof ss);
        int cfd = accept4(fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd >= 0) {
            conn_open(s, cfd, &ss);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            accept_starved(s, errno);
        break; /* EAGAIN: none left (another shard may have taken it) */
    }
    (void)sh;
}

/* Once a second: a connection without a whole request within the timeout is closed (its
 * answers not taken by the client count too); one at a worker waits for its answer. */
static void sweep(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    hshard_t *s = arg;
    (void)t;
    uint64_t now = nf_shard_now(sh);
    uint64_t limit = (uint64_t)s->h->o.request_timeout_ms * 1000000ull;
    conn_t *next;
    for (conn_t *c = s->head.next; c != &s->head; c = next) {
        next = c->next;
        if (!c->closed && !c->pending && !c->deferred && now - c->since > limit) {
            nf_counter_inc(s->h->closed[CLOSED_TIMEOUT]);
            conn_close(c);
        }
    }
}

/* ---- the actor ---- */

static int shard_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    nf_httpd_t *h = ctx;
    hshard_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->h = h;
    s->sh = sh;
    s->head.next = s->head.prev = &s->head;
    unsigned n = nf_runtime_shard_count(nf_shard_runtime(sh));
    s->cap = (h->o.max_connections + n - 1) / n;
    nf_timer_init(&s->sweep, sweep, s);
    nf_timer_init(&s->rest, rest_over, s);
    nf_timer_arm(sh, &s->sweep, nf_shard_now(sh) + SWEEP_NS, SWEEP_NS);
    *self = s;
    return 0;
}

/* A worker's answer, back on the connection's shard. */
static void shard_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    (void)sh;
    (void)self;
    if (m->kind != HTTPD_REPLY)
        return;
    httpd_job_t *j = m->body.ptr;
    conn_t *c = j->c;
    c->pending = false;
    if (c->closed) {
        observe(c, &j->req, j->resp.status); /* the client left: its wait still counts */
        if (j->resp.owned)
            free(j->resp.body);
        free(j);
        if (!c->deferred) {
            conn_unlink(c);
            conn_free(c);
        }
        return;
    }
    send_resp(c, &j->req, &j->resp, c->hp.msg.keep_alive);
    free(j);
    resume(c);
}

/* The deferred connections' turn (a new iteration, a new budget). */
static void shard_run(nf_shard_t *sh, void *self)
{
    hshard_t *s = self;
    (void)sh;
    conn_t *list = s->deferred;
    s->deferred = NULL;
    while (list) {
        conn_t *c = list;
        list = c->dnext;
        c->deferred = false;
        if (c->closed) {
            if (!c->pending) {
                conn_unlink(c);
                conn_free(c);
            }
            continue;
        }
        resume(c);
    }
}

static void stop_listening(hshard_t *s)
{
    if (s->lw) {
        nf_watch_remove(s->sh, s->lw);
        s->lw = NULL;
    }
    nf_timer_cancel(s->sh, &s->rest);
}

/* No new connection; idle ones close, one at a worker closes after its answer. */
static void shard_stop(nf_shard_t *sh, void *self)
{
    hshard_t *s = self;
    s->stopping = true;
    stop_listening(s);
    nf_timer_cancel(sh, &s->sweep);
    conn_t *next;
    for (conn_t *c = s->head.next; c != &s->head; c = next) {
        next = c->next;
        if (!c->pending && !c->closed) {
            c->close_after = true;
            if (conn_flush(c)) /* answers the client does not take: cut */
                conn_close(c);
        }
    }
}

/* After the drain. A connection whose request is still at a worker (a forced end) becomes an
 * orphan: the worker reads its request until it ends, so nf_httpd_free frees it. */
static void shard_fini(nf_shard_t *sh, void *self)
{
    hshard_t *s = self;
    stop_listening(s);
    nf_timer_cancel(sh, &s->sweep);
    for (conn_t *c = s->deferred; c; c = c->dnext)
        c->deferred = false;
    s->deferred = NULL;
    while (s->head.next != &s->head) {
        conn_t *c = s->head.next;
        if (!c->closed && !c->pending) {
            conn_close(c); /* unlinked and freed */
            continue;
        }
        conn_close(c); /* a pending one stays listed */
        conn_unlink(c);
        if (!c->pending) {
            conn_free(c);
            continue;
        }
        pthread_mutex_lock(&s->h->mu);
        c->next = s->h->orphans;
        s->h->orphans = c;
        pthread_mutex_unlock(&s->h->mu);
    }
    free(s);
}

static void shard_drop(void *ctx, const nf_msg_t *m)
{
    (void)ctx;
    httpd_job_t *j = m->body.ptr;
    if (m->kind == HTTPD_REPLY && j) {
        if (j->resp.owned)
            free(j->resp.body);
        free(j);
    }
}

static const nf_actor_ops_t httpd_ops = {.name = "http",
                                         .init = shard_init,
                                         .handle = shard_handle,
                                         .run = shard_run,
                                         .stop = shard_stop,
                                         .fini = shard_fini,
                                         .drop = shard_drop,
                                         .quiet_run = true};

/* ---- the server ---- */

static void register_metrics(nf_httpd_t *h)
{
    for (int i = 0; i < NF_ADMIN_NPATHS; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "path=\"%s\"", nf_admin_path_name(i));
        nf_metrics_counter("newsflow_http_requests_total",
                           "Requests to the public listener served on the shards' loops, by path.",
                           labels, 0, &h->req[i]);
    }
    nf_metrics_counter("newsflow_http_worker_requests_total",
                       "Requests answered by the HTTP workers, not on a shard's loop (POSTs, "
                       "/healthz, /v1/status, search).",
                       NULL, 0, &h->worker_req);
    nf_metrics_counter("newsflow_http_deferred_total",
                       "Times a connection's next request waited for the next loop iteration: "
                       "the shard had answered http.budget requests in this one.",
                       NULL, 0, &h->deferred);
    static const char *const refused[REFUSED__N] = {
        "bad_request", "body_too_large", "uri_too_long", "headers_too_large",
        "busy",        "connections",    "descriptors"};
    for (int i = 0; i < REFUSED__N; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", refused[i]);
        nf_metrics_counter(
            "newsflow_http_refused_total",
            "Requests or connections the public listener refused: bad_request 400, "
            "body_too_large 413, uri_too_long 414, headers_too_large 431, busy 503 (the workers' "
            "queue full), connections (over twice admin.max_connections), "
            "descriptors (accept failed).",
            labels, 0, &h->refused[i]);
    }
    static const char *const closed[CLOSED__N] = {"evicted", "timeout"};
    for (int i = 0; i < CLOSED__N; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "reason=\"%s\"", closed[i]);
        nf_metrics_counter(
            "newsflow_http_connections_closed_total",
            "Connections the public listener closed: evicted, the oldest one not "
            "being answered over admin.max_connections; timeout, no whole request within "
            "admin.request_timeout_ms.",
            labels, 0, &h->closed[i]);
    }
    nf_metrics_gauge("newsflow_http_connections", "Open connections to the public listener.", NULL,
                     0, &h->conns);
    nf_metrics_gauge("newsflow_http_worker_queue", "Requests waiting for an HTTP worker.", NULL, 0,
                     &h->queued);
    nf_metrics_counter_fn("newsflow_http_loop_seconds_total",
                          "Time the shards spent answering requests on their loops; against "
                          "newsflow_runtime_busy_seconds_total, the HTTP side's share.",
                          NULL, loop_seconds, NULL);
}

static void defaults(nf_httpd_opts_t *o)
{
    if (!o->max_connections)
        o->max_connections = 10000;
    if (!o->request_timeout_ms)
        o->request_timeout_ms = 10000;
    if (!o->max_head)
        o->max_head = 16384;
    if (!o->budget)
        o->budget = 64;
    if (!o->workers)
        o->workers = 8;
    if (!o->queue)
        o->queue = 1024;
    if (!o->hooks.max_body)
        o->hooks.max_body = 1u << 20;
}

nf_httpd_t *nf_httpd_new(nf_runtime_t *rt, const nf_httpd_opts_t *o, char *err, size_t errlen)
{
    nf_httpd_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "http: out of memory");
        return NULL;
    }
    h->rt = rt;
    h->o = *o;
    h->fd = -1;
    defaults(&h->o);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    register_metrics(h);
    h->actor = nf_runtime_register(rt, &httpd_ops, h);
    if (h->actor < 0) {
        snprintf(err, errlen, "http: cannot register the shards' actor: %s", strerror(-h->actor));
        nf_httpd_free(h);
        return NULL;
    }
    if (httpd_workers_start(h, err, errlen) != 0) {
        nf_httpd_free(h);
        return NULL;
    }
    return h;
}

static void listen_on_shard(nf_shard_t *sh, void *arg)
{
    nf_httpd_t *h = arg;
    hshard_t *s = nf_shard_actor(sh, h->actor);
    if (s && !s->lw && !s->stopping && !atomic_load(&h->quiescing))
        if ((s->lw = nf_watch_add(sh, h->fd, POLLIN, on_accept, s)))
            nf_watch_quiet(s->lw);
}

static void unlisten_on_shard(nf_shard_t *sh, void *arg)
{
    nf_httpd_t *h = arg;
    hshard_t *s = nf_shard_actor(sh, h->actor);
    if (s)
        stop_listening(s);
}

static void each_shard(nf_httpd_t *h, nf_call_fn fn)
{
    unsigned n = nf_runtime_shard_count(h->rt);
    for (unsigned i = 0; i < n; i++)
        (void)nf_runtime_call(h->rt, i, fn, h, 5000); /* -ESHUTDOWN: that shard is gone */
}

int nf_httpd_listen(nf_httpd_t *h, int fd, char *err, size_t errlen)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "http: the listening socket: %s", strerror(errno));
        close(fd);
        return -1;
    }
    h->fd = fd;
    each_shard(h, listen_on_shard);
    return 0;
}

void nf_httpd_quiesce(nf_httpd_t *h)
{
    if (!h || atomic_exchange(&h->quiescing, 1))
        return;
    each_shard(h, unlisten_on_shard);
    uint64_t until = nf_now_ns() + (uint64_t)h->o.drain_ms * 1000000ull;
    while (atomic_load(&h->inflight) && nf_now_ns() < until) {
        struct timespec ms = {0, 5000000};
        nanosleep(&ms, NULL);
    }
}

void nf_httpd_free(nf_httpd_t *h)
{
    if (!h)
        return;
    httpd_workers_stop(h);
    while (h->orphans) {
        conn_t *c = h->orphans;
        h->orphans = c->next;
        conn_free(c);
    }
    if (h->fd >= 0)
        close(h->fd);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}
