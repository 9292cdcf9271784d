/* fetch.c — see fetch.h. The glue is the multi-socket API: curl tells us which sockets it wants
 * to wait on (sock_cb) and when it next needs a timeout (timer_cb); the shard's io_uring reports
 * readiness (on_sock) and the wheel fires the timeout (on_timer); both hand control back to curl
 * with curl_multi_socket_action() and then collect finished transfers. Easy handles are pooled
 * per fetcher so connection reuse and per-request set-up stay cheap. */
#include "io/fetch.h"

#include "runtime/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

typedef struct nf_xfer nf_xfer_t;

struct nf_xfer {
    nf_fetcher_t *f;
    CURL *easy;
    struct curl_slist *headers;
    nf_fetch_done_fn done;
    void *user;
    char *body;
    size_t len, cap;
    bool too_large;
    bool refused;
    char refused_why[192];
    char errbuf[CURL_ERROR_SIZE];
    uint64_t start_ns;
    nf_xfer_t *next, *prev; /* active list, or free list (next only) */
    nf_xfer_t *sent_next;   /* fetcher's sent list (on_prereq -> flush_sent) */
    unsigned sent_pending;  /* requests written in the current curl call (redirects: > 1) */
};

typedef struct nf_fsock {
    nf_fetcher_t *f;
    curl_socket_t fd;
    nf_watch_t *w;
    struct nf_fsock *next, *prev;
} nf_fsock_t;

struct nf_fetcher {
    nf_shard_t *sh;
    CURLM *multi;
    nf_timer_t timer;
    nf_fetch_opts_t opts;
    nf_addrguard_t default_guard;
    struct curl_slist *connect_to;
    const nf_addrguard_t *guard;
    char user_agent[160];
    unsigned active;
    nf_xfer_t *active_list;
    nf_xfer_t *free_list;
    nf_fsock_t *socks;
    nf_xfer_t *sent_head; /* requests written in the current curl call, for opts.sent */
    bool destroying;
};

void nf_fetch_opts_default(nf_fetch_opts_t *o)
{
    *o = (nf_fetch_opts_t){.user_agent = NULL,
                           .connect_timeout_ms = 10000,
                           .total_timeout_ms = 30000,
                           .low_speed_bytes = 64,
                           .low_speed_time_s = 10,
                           .max_redirects = 5,
                           .body_max_bytes = 16ull << 20,
                           .allow_file = false,
                           .guard = NULL};
}

const char *nf_fetch_error_name(nf_fetch_error_t e)
{
    static const char *const names[] = {
        "ok",  "timeout",  "dns",       "connect", "refused_address", "too_large", "redirects",
        "tls", "protocol", "cancelled", "other"};
    return (unsigned)e < sizeof names / sizeof names[0] ? names[e] : "?";
}

/* ---------------------------------------------------------------- curl -> shard */

static void drain_done(nf_fetcher_t *f);

static void on_sock(nf_shard_t *sh, int fd, unsigned revents, void *arg)
{
    nf_fsock_t *s = arg;
    nf_fetcher_t *f = s->f;
    int flags = 0, running;
    if (revents & POLLIN)
        flags |= CURL_CSELECT_IN;
    if (revents & POLLOUT)
        flags |= CURL_CSELECT_OUT;
    if (revents & (POLLERR | POLLHUP))
        flags |= CURL_CSELECT_ERR;
    curl_multi_socket_action(f->multi, fd, flags, &running);
    drain_done(f);
    (void)sh;
}

static int sock_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    nf_fetcher_t *f = userp;
    nf_fsock_t *s = socketp;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            nf_watch_remove(f->sh, s->w);
            if (s->prev)
                s->prev->next = s->next;
            else
                f->socks = s->next;
            if (s->next)
                s->next->prev = s->prev;
            free(s);
            curl_multi_assign(f->multi, fd, NULL);
        }
        return 0;
    }
    unsigned events = (what & CURL_POLL_IN ? POLLIN : 0) | (what & CURL_POLL_OUT ? POLLOUT : 0);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        s->f = f;
        s->fd = fd;
        s->w = nf_watch_add(f->sh, fd, events, on_sock, s);
        if (!s->w) {
            free(s);
            return -1;
        }
        s->next = f->socks;
        if (s->next)
            s->next->prev = s;
        f->socks = s;
        curl_multi_assign(f->multi, fd, s);
    } else {
        nf_watch_modify(f->sh, s->w, events);
    }
    return 0;
}

static void on_timer(nf_shard_t *sh, nf_timer_t *t, void *arg)
{
    nf_fetcher_t *f = arg;
    int running;
    curl_multi_socket_action(f->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    drain_done(f);
    (void)sh;
    (void)t;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    nf_fetcher_t *f = userp;
    (void)multi;
    if (timeout_ms < 0)
        nf_timer_cancel(f->sh, &f->timer);
    else
        nf_timer_arm(f->sh, &f->timer, nf_now_ns() + (uint64_t)timeout_ms * 1000000ull, 0);
    return 0;
}

/* ---------------------------------------------------------------- per transfer */

static size_t on_body(char *data, size_t size, size_t n, void *userp)
{
    nf_xfer_t *x = userp;
    size_t bytes = size * n;
    if (x->len + bytes > x->f->opts.body_max_bytes) {
        x->too_large = true;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    if (x->len + bytes + 1 > x->cap) {
        size_t cap = x->cap ? x->cap : 16384;
        while (cap < x->len + bytes + 1)
            cap *= 2;
        if (cap > x->f->opts.body_max_bytes + 1)
            cap = x->f->opts.body_max_bytes + 1;
        char *nb = realloc(x->body, cap);
        if (!nb)
            return 0;
        x->body = nb;
        x->cap = cap;
    }
    memcpy(x->body + x->len, data, bytes);
    x->len += bytes;
    return bytes;
}

/* Every connection curl opens, redirects included, passes the address guard first. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    nf_xfer_t *x = clientp;
    if (purpose == CURLSOCKTYPE_IPCXN &&
        !nf_addrguard_check(x->f->guard, &addr->addr, x->refused_why, sizeof x->refused_why)) {
        x->refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

static nf_fetch_error_t map_error(const nf_xfer_t *x, CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return NF_FETCH_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return NF_FETCH_E_TIMEOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return NF_FETCH_E_DNS;
    case CURLE_COULDNT_CONNECT:
        return x->refused ? NF_FETCH_E_REFUSED_ADDRESS : NF_FETCH_E_CONNECT;
    case CURLE_FILESIZE_EXCEEDED:
        return NF_FETCH_E_TOO_LARGE;
    case CURLE_WRITE_ERROR:
        return x->too_large ? NF_FETCH_E_TOO_LARGE : NF_FETCH_E_OTHER;
    case CURLE_TOO_MANY_REDIRECTS:
        return NF_FETCH_E_REDIRECTS;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
        return NF_FETCH_E_TLS;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_FILE_COULDNT_READ_FILE:
        return NF_FETCH_E_PROTOCOL;
    default:
        return NF_FETCH_E_OTHER;
    }
}

static void copy_header(CURL *easy, const char *name, char *out, size_t outlen)
{
    struct curl_header *h;
    out[0] = '\0';
    if (curl_easy_header(easy, name, 0, CURLH_HEADER, -1, &h) == CURLHE_OK && h->value)
        snprintf(out, outlen, "%s", h->value);
}

/* Off the active list and back to the pool (the easy handle keeps its connection cache). */
static void xfer_release(nf_fetcher_t *f, nf_xfer_t *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        f->active_list = x->next;
    if (x->next)
        x->next->prev = x->prev;
    f->active--;
    curl_slist_free_all(x->headers);
    x->headers = NULL;
    x->next = f->free_list;
    x->prev = NULL;
    f->free_list = x;
}

static void flush_sent(nf_fetcher_t *f);

static void finish(nf_fetcher_t *f, nf_xfer_t *x, CURLcode rc)
{
    if (x->sent_pending) /* its request went out before it ended (cancelled transfers) */
        flush_sent(f);
    nf_fetch_result_t res;
    memset(&res, 0, sizeof res);
    res.retry_after_s = -1;
    res.error = f->destroying ? NF_FETCH_E_CANCELLED : map_error(x, rc);
    long status = 0, redirects = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(x->easy, CURLINFO_REDIRECT_COUNT, &redirects);
    /* A file:// read has no status line: report a successful one as 200, so callers handle
     * every scheme alike. */
    char *scheme = NULL;
    curl_easy_getinfo(x->easy, CURLINFO_SCHEME, &scheme);
    if (rc == CURLE_OK && status == 0 && scheme && !strcasecmp(scheme, "file"))
        status = 200;
    res.http_status = (int)status;
    res.redirects = (unsigned)redirects;
    res.not_modified = res.error == NF_FETCH_OK && status == 304;
    char *eff = NULL, *ct = NULL;
    curl_easy_getinfo(x->easy, CURLINFO_EFFECTIVE_URL, &eff);
    curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(res.effective_url, sizeof res.effective_url, "%s", eff ? eff : "");
    snprintf(res.content_type, sizeof res.content_type, "%s", ct ? ct : "");
    curl_off_t retry = -1;
    if (curl_easy_getinfo(x->easy, CURLINFO_RETRY_AFTER, &retry) == CURLE_OK && retry > 0)
        res.retry_after_s = (int64_t)retry;
    if (status > 0) {
        copy_header(x->easy, "ETag", res.etag, sizeof res.etag);
        copy_header(x->easy, "Last-Modified", res.last_modified, sizeof res.last_modified);
        if (res.retry_after_s < 0) {
            char ra[64];
            copy_header(x->easy, "Retry-After", ra, sizeof ra);
            if (ra[0] == '0' && ra[1] == '\0')
                res.retry_after_s = 0;
        }
    }
    res.duration_ns = nf_now_ns() - x->start_ns;
    res.bytes = x->len;
    switch (res.error) {
    case NF_FETCH_OK:
        break;
    case NF_FETCH_E_REFUSED_ADDRESS:
        snprintf(res.message, sizeof res.message, "address guard: %s", x->refused_why);
        break;
    case NF_FETCH_E_TOO_LARGE:
        snprintf(res.message, sizeof res.message, "body larger than fetch.body_max_bytes (%llu)",
                 (unsigned long long)f->opts.body_max_bytes);
        break;
    case NF_FETCH_E_CANCELLED:
        snprintf(res.message, sizeof res.message, "cancelled");
        break;
    default:
        snprintf(res.message, sizeof res.message, "%s",
                 x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    }
    if (res.error == NF_FETCH_OK) {
        if (!x->body)
            x->body = calloc(1, 1);
        else
            x->body[x->len] = '\0';
        res.body = x->body;
        res.body_len = x->len;
        x->body = NULL;
    }
    free(x->body);
    x->body = NULL;
    x->len = x->cap = 0;

    /* Off the active list and back to the pool before the callback, which may start more. */
    curl_multi_remove_handle(f->multi, x->easy);
    nf_fetch_done_fn done = x->done;
    void *user = x->user;
    xfer_release(f, x);

    done(f->sh, &res, user);
    free(res.body);
}

/* Reports the requests written by the curl call that just returned (on_prereq). */
static void flush_sent(nf_fetcher_t *f)
{
    while (f->sent_head) {
        nf_xfer_t *x = f->sent_head;
        f->sent_head = x->sent_next;
        x->sent_next = NULL;
        for (; x->sent_pending; x->sent_pending--)
            f->opts.sent(x->user);
    }
}

static void drain_done(nf_fetcher_t *f)
{
    CURLMsg *m;
    int left;
    flush_sent(f); /* before their completions */
    while ((m = curl_multi_info_read(f->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        nf_xfer_t *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        finish(f, x, m->data.result);
    }
}

/* ---------------------------------------------------------------- API */

void nf_fetch_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

nf_fetcher_t *nf_fetcher_create(nf_shard_t *sh, const nf_fetch_opts_t *o)
{
    nf_fetcher_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->sh = sh;
    f->opts = *o;
    nf_addrguard_init(&f->default_guard);
    f->guard = o->guard ? o->guard : &f->default_guard;
    snprintf(f->user_agent, sizeof f->user_agent, "%s",
             o->user_agent && *o->user_agent ? o->user_agent
                                             : "newsflow/" NF_VERSION " (+feed crawler)");
    if (o->connect_to && *o->connect_to) {
        f->connect_to = curl_slist_append(NULL, o->connect_to);
        if (!f->connect_to) {
            free(f);
            return NULL;
        }
    }
    f->multi = curl_multi_init();
    if (!f->multi) {
        curl_slist_free_all(f->connect_to);
        free(f);
        return NULL;
    }
    curl_multi_setopt(f->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
    curl_multi_setopt(f->multi, CURLMOPT_SOCKETDATA, f);
    curl_multi_setopt(f->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(f->multi, CURLMOPT_TIMERDATA, f);
    curl_multi_setopt(f->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    nf_timer_init(&f->timer, on_timer, f);
    return f;
}

/* CURLOPT_PREREQFUNCTION: the request is about to be written, within the current
 * curl_multi_socket_action call; opts.sent runs once that call has returned (flush_sent), so a
 * caller stamping the time then has a time at or after the write, even if the thread was
 * preempted in between. */
static int on_prereq(void *clientp, char *primary_ip, char *local_ip, int primary_port,
                     int local_port)
{
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    nf_xfer_t *x = clientp;
    nf_fetcher_t *f = x->f;
    if (!x->sent_pending++) {
        x->sent_next = f->sent_head;
        f->sent_head = x;
    }
    return CURL_PREREQFUNC_OK;
}

static nf_xfer_t *xfer_get(nf_fetcher_t *f)
{
    nf_xfer_t *x = f->free_list;
    if (x) {
        f->free_list = x->next;
        curl_easy_reset(x->easy);
    } else {
        x = calloc(1, sizeof *x);
        if (!x)
            return NULL;
        x->easy = curl_easy_init();
        if (!x->easy) {
            free(x);
            return NULL;
        }
        x->f = f;
    }
    x->next = x->prev = x->sent_next = NULL;
    x->sent_pending = 0;
    x->too_large = x->refused = false;
    x->refused_why[0] = x->errbuf[0] = '\0';
    return x;
}

int nf_fetch_start(nf_fetcher_t *f, const char *url, const char *etag, const char *last_modified,
                   nf_fetch_done_fn done, void *user)
{
    if (!url || !*url)
        return -EINVAL;
    nf_xfer_t *x = xfer_get(f);
    if (!x)
        return -ENOMEM;
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR,
                     f->opts.allow_file ? "http,https,file" : "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)f->opts.max_redirects);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* every encoding libcurl decodes */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_USERAGENT, f->user_agent);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)f->opts.connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)f->opts.total_timeout_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, (long)f->opts.low_speed_bytes);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)f->opts.low_speed_time_s);
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)f->opts.body_max_bytes);
    if (etag && *etag) {
        char h[320];
        snprintf(h, sizeof h, "If-None-Match: %s", etag);
        x->headers = curl_slist_append(x->headers, h);
    }
    if (last_modified && *last_modified) {
        char h[128];
        snprintf(h, sizeof h, "If-Modified-Since: %s", last_modified);
        x->headers = curl_slist_append(x->headers, h);
    }
    if (x->headers)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    if (f->connect_to)
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, f->connect_to);
    if (f->opts.sent) {
        curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
        curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
    }
    x->done = done;
    x->user = user;
    x->start_ns = nf_now_ns();
    x->next = f->active_list;
    if (x->next)
        x->next->prev = x;
    f->active_list = x;
    f->active++;
    CURLMcode mc = curl_multi_add_handle(f->multi, e);
    if (mc != CURLM_OK) {
        nf_log(NF_LOG_ERROR, "fetch", "curl_multi_add_handle failed", NF_LS("url", url),
               NF_LS("error", curl_multi_strerror(mc)), NF_LEND);
        xfer_release(f, x);
        return -EIO;
    }
    return 0;
}

unsigned nf_fetcher_active(const nf_fetcher_t *f)
{
    return f->active;
}

void nf_fetcher_destroy(nf_fetcher_t *f)
{
    if (!f)
        return;
    f->destroying = true;
    while (f->active_list)
        finish(f, f->active_list, CURLE_ABORTED_BY_CALLBACK);
    nf_timer_cancel(f->sh, &f->timer);
    while (f->free_list) {
        nf_xfer_t *x = f->free_list;
        f->free_list = x->next;
        curl_easy_cleanup(x->easy);
        free(x);
    }
    curl_multi_cleanup(f->multi);
    curl_slist_free_all(f->connect_to);
    /* Sockets curl did not report removed before cleanup. */
    while (f->socks) {
        nf_fsock_t *s = f->socks;
        f->socks = s->next;
        nf_watch_remove(f->sh, s->w);
        free(s);
    }
    free(f);
}
