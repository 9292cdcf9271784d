/* test_admin.c — tests src/runtime/admin.c over real HTTP: a raw-socket client, so what is tested
 * is the bytes a Prometheus scraper or a kubelet probe sees. */
#include "nf_test.h"
#include "runtime/admin.h"
#include "runtime/metrics.h"
#include "testhttpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int status; /* 0 if no response */
    char *head; /* status line and headers */
    char *body;
} http_resp_t;

static void http_free(http_resp_t *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* One request on a fresh connection, read to EOF (Connection: close). */
static http_resp_t http_do(int family, uint16_t port, const char *method, const char *path)
{
    http_resp_t r = {0};
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        s6->sin6_addr = in6addr_loopback;
        len = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *s4;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return r;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return r;
    }
    char req[256];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                     method, path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return r;
    }
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    for (; buf;) {
        if (used + 1024 > cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                break;
            buf = nb;
        }
        ssize_t k = read(fd, buf + used, cap - used - 1);
        if (k <= 0)
            break;
        used += (size_t)k;
    }
    close(fd);
    if (!buf)
        return r;
    buf[used] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (sep && sscanf(buf, "HTTP/1.%*d %d", &r.status) == 1) {
        r.head = strndup(buf, (size_t)(sep - buf + 2));
        r.body = strdup(sep + 4);
    }
    free(buf);
    return r;
}

static http_resp_t http_get(uint16_t port, const char *path)
{
    return http_do(AF_INET, port, "GET", path);
}

/* The value of header `name` (case-insensitive), copied into out. */
static bool http_header(const http_resp_t *r, const char *name, char *out, size_t outlen)
{
    nf_testhttpc_resp_t t = {.status = r->status, .head = r->head, .body = r->body};
    return nf_testhttpc_header(&t, name, out, outlen);
}

static int health_state;  /* 0 healthy */
static int ready_state;   /* 1 ready */
static int hook_arg_seen; /* hooks got the arg */

static int health_hook(void *arg, char *why, size_t whylen)
{
    if (arg == &hook_arg_seen)
        __atomic_store_n(&hook_arg_seen, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&health_state, __ATOMIC_RELAXED) == 0)
        return 0;
    snprintf(why, whylen, "shard 2 did not answer within 1000 ms\nsecond line");
    return 1;
}

static bool ready_hook(void *arg, char *body, size_t bodylen)
{
    snprintf(body, bodylen, "{\"ready\":%s,\"waiting_for\":[%s]}",
             __atomic_load_n(&ready_state, __ATOMIC_RELAXED) ? "true" : "false",
             __atomic_load_n(&ready_state, __ATOMIC_RELAXED) ? "" : "\"assignment\"");
    return __atomic_load_n(&ready_state, __ATOMIC_RELAXED) != 0;
}

static void test_endpoints(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    nf_counter_t probe;
    NF_REQUIRE(nf_metrics_counter("newsflow_test_probe_total", "Probe.", NULL, 0, &probe) == 0);
    nf_counter_add(probe, 41);
    nf_counter_inc(probe);

    nf_admin_hooks_t hooks = {.health = health_hook, .ready = ready_hook, .arg = &hook_arg_seen};
    char err[256] = "x";
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a != NULL);
    NF_CHECK_STR(err, "");
    uint16_t port = nf_admin_port(a);
    NF_CHECK(port != 0);

    http_resp_t r = http_get(port, "/metrics");
    char ct[128] = "";
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK(http_header(&r, "content-type", ct, sizeof ct));
    NF_CHECK_STR(ct, "text/plain; version=0.0.4; charset=utf-8");
    NF_CHECK(r.body && strstr(r.body, "\nnewsflow_test_probe_total 42\n"));
    NF_CHECK(r.body && strstr(r.body, "# TYPE newsflow_admin_requests_total counter\n"));
    NF_CHECK(r.body && strstr(r.body, "newsflow_admin_requests_total{path=\"/metrics\"} 1\n"));
    http_free(&r);

    r = http_get(port, "/healthz");
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK_STR(r.body, "ok\n");
    NF_CHECK(http_header(&r, "Content-Type", ct, sizeof ct));
    NF_CHECK_STR(ct, "text/plain; charset=utf-8");
    http_free(&r);
    NF_CHECK_EQ(__atomic_load_n(&hook_arg_seen, __ATOMIC_RELAXED), 1);
    __atomic_store_n(&health_state, 1, __ATOMIC_RELAXED);
    r = http_get(port, "/healthz");
    NF_CHECK_EQ(r.status, 503);
    NF_CHECK_STR(r.body, "unhealthy: shard 2 did not answer within 1000 ms second line\n");
    http_free(&r);

    r = http_get(port, "/readyz");
    NF_CHECK_EQ(r.status, 503);
    NF_CHECK_STR(r.body, "{\"ready\":false,\"waiting_for\":[\"assignment\"]}\n");
    http_free(&r);
    __atomic_store_n(&ready_state, 1, __ATOMIC_RELAXED);
    r = http_get(port, "/readyz");
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK_STR(r.body, "{\"ready\":true,\"waiting_for\":[]}\n");
    http_free(&r);

    r = http_get(port, "/nope");
    NF_CHECK_EQ(r.status, 404);
    http_free(&r);
    r = http_get(port, "/metrics/extra");
    NF_CHECK_EQ(r.status, 404);
    http_free(&r);
    r = http_get(port, "/readyz?verbose=1"); /* query strings do not change the path */
    NF_CHECK_EQ(r.status, 200);
    http_free(&r);

    r = http_do(AF_INET, port, "POST", "/metrics");
    NF_CHECK_EQ(r.status, 405);
    char allow[64] = "";
    NF_CHECK(http_header(&r, "Allow", allow, sizeof allow));
    NF_CHECK_STR(allow, "GET, HEAD");
    http_free(&r);
    r = http_do(AF_INET, port, "DELETE", "/nope");
    NF_CHECK_EQ(r.status, 405);
    http_free(&r);

    r = http_do(AF_INET, port, "HEAD", "/healthz");
    NF_CHECK_EQ(r.status, 503);
    NF_CHECK_STR(r.body, "");
    http_free(&r);

    /* Every request was counted under its path, unknown ones under "other". */
    r = http_get(port, "/metrics");
    NF_CHECK(r.body && strstr(r.body, "newsflow_admin_requests_total{path=\"/metrics\"} 3\n"));
    NF_CHECK(r.body && strstr(r.body, "newsflow_admin_requests_total{path=\"/healthz\"} 3\n"));
    NF_CHECK(r.body && strstr(r.body, "newsflow_admin_requests_total{path=\"/readyz\"} 3\n"));
    NF_CHECK(r.body && strstr(r.body, "newsflow_admin_requests_total{path=\"other\"} 3\n"));
    http_free(&r);

    /* A second server on the same port fails and names the address. */
    char want[64];
    snprintf(want, sizeof want, "admin: cannot listen on 127.0.0.1:%u: ", (unsigned)port);
    nf_admin_t *b = nf_admin_start("127.0.0.1", port, NULL, err, sizeof err);
    NF_CHECK(b == NULL);
    NF_CHECK(strncmp(err, want, strlen(want)) == 0);
    NF_CHECK(strstr(err, "in use") != NULL);
    fprintf(stderr, "second server: %s\n", err);
    nf_admin_stop(b);

    nf_admin_stop(a);
    nf_metrics_shutdown();
}

static void test_null_hooks_and_no_registry(void)
{
    /* Metrics never initialised: the server still serves, /metrics is empty. */
    char err[256];
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, NULL, err, sizeof err);
    NF_REQUIRE(a != NULL);
    uint16_t port = nf_admin_port(a);
    http_resp_t r = http_get(port, "/healthz");
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK_STR(r.body, "ok\n");
    http_free(&r);
    r = http_get(port, "/readyz");
    NF_CHECK_EQ(r.status, 200);
    http_free(&r);
    r = http_get(port, "/metrics");
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK_STR(r.body, "");
    http_free(&r);
    nf_admin_stop(a);
    nf_admin_stop(NULL);
    NF_CHECK_EQ(nf_admin_port(NULL), 0);
}

static void test_bad_addresses(void)
{
    char err[256];
    NF_CHECK(nf_admin_start("localhost", 9464, NULL, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "admin: cannot listen on localhost:9464: ") == err);
    fprintf(stderr, "bad address: %s\n", err);
    /* 192.0.2.1 (TEST-NET-1) is not an address of this host. */
    NF_CHECK(nf_admin_start("192.0.2.1", 0, NULL, err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "admin: cannot listen on 192.0.2.1:0: ") == err);
    fprintf(stderr, "foreign address: %s\n", err);
}

static void test_ipv6(void)
{
    char err[256];
    nf_admin_t *a = nf_admin_start("::1", 0, NULL, err, sizeof err);
    if (!a) {
        NF_CHECK(strstr(err, "admin: cannot listen on [::1]:0: ") == err);
        fprintf(stderr, "no IPv6 loopback here, skipped (%s)\n", err);
        return;
    }
    http_resp_t r = http_do(AF_INET6, nf_admin_port(a), "GET", "/healthz");
    NF_CHECK_EQ(r.status, 200);
    http_free(&r);
    nf_admin_stop(a);
}

/* A connected TCP socket to 127.0.0.1:port that sends nothing; -1 on failure. */
static int idle_conn(uint16_t port)
{
    struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons(port)};
    s4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&s4, sizeof s4) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Whether the server has closed fd (a read sees the end of the stream), waiting up to 10 s. */
static bool closed_by_server(int fd)
{
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    return read(fd, &c, 1) <= 0;
}

/* Issue 37 case 4: held idle connections (far more than the cap) must not keep a probe out;
 * the oldest idle ones are closed, each counted, and the probe answers 200. */
static void test_idle_connections_do_not_block_probes(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    char err[256];
    nf_admin_hooks_t hooks = {.max_connections = 8, .request_timeout_ms = 60000};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a != NULL);
    uint16_t port = nf_admin_port(a);
    enum { HELD = 200 };
    int fds[HELD];
    int opened = 0;
    for (int i = 0; i < HELD; i++)
        opened += (fds[i] = idle_conn(port)) >= 0;
    NF_CHECK_EQ(opened, HELD);
    for (int i = 0; i < 20; i++) { /* every probe gets in, however many are held */
        http_resp_t r = http_get(port, "/healthz");
        NF_CHECK_EQ(r.status, 200);
        http_free(&r);
    }
    NF_CHECK(closed_by_server(fds[0])); /* the oldest went first */
    char *text = NULL;
    NF_REQUIRE(nf_metrics_render(&text) > 0);
    const char *m = strstr(text, "newsflow_admin_connections_closed_total{reason=\"evicted\"} ");
    long evicted = m ? strtol(m + strlen("newsflow_admin_connections_closed_total{reason="
                                         "\"evicted\"} "),
                              NULL, 10)
                     : -1;
    NF_CHECK(evicted >= HELD - 8);
    free(text);
    for (int i = 0; i < HELD; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    nf_admin_stop(a);
    nf_metrics_shutdown();
}

/* An api hook that holds every request until released (readers whose queries take long). */
static pthread_mutex_t busy_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t busy_cv = PTHREAD_COND_INITIALIZER;
static int busy_in;
static bool busy_release;

static int busy_api(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    (void)arg, (void)route, (void)req;
    pthread_mutex_lock(&busy_mu);
    busy_in++;
    pthread_cond_broadcast(&busy_cv);
    while (!busy_release)
        pthread_cond_wait(&busy_cv, &busy_mu);
    pthread_mutex_unlock(&busy_mu);
    *body = strdup("{}");
    *len = 2;
    return 200;
}

/* A request sent on a connection of its own, not read: the connection stays busy. */
static int busy_conn(uint16_t port)
{
    int fd = idle_conn(port);
    static const char req[] = "GET /v1/slow HTTP/1.1\r\nHost: x\r\n\r\n";
    if (fd >= 0 && write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Issue 37: liveness never shares connections with reader traffic. Requests in progress are
 * never evicted, so readers busy on every connection of the admin server keep a probe there
 * out; the probe listener (admin.probe_port), connections of its own, answers /healthz,
 * /readyz and /metrics and nothing else, its series labelled listener="probe". */
static void test_probe_listener_apart_from_readers(void)
{
    NF_REQUIRE(nf_metrics_init(1) == 0);
    char err[256];
    nf_admin_hooks_t main_hooks = {.health = health_hook,
                                   .arg = &hook_arg_seen,
                                   .api = busy_api,
                                   .max_connections = 4,
                                   .request_timeout_ms = 60000};
    nf_admin_hooks_t probe_hooks = {.health = health_hook,
                                    .ready = ready_hook,
                                    .arg = &hook_arg_seen,
                                    .max_connections = 4,
                                    .listener = "probe"};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &main_hooks, err, sizeof err);
    nf_admin_t *p = nf_admin_start("127.0.0.1", 0, &probe_hooks, err, sizeof err);
    NF_REQUIRE(a && p);
    health_state = 0;
    ready_state = 1;
    /* the cap and MHD's headroom above it (admin.c, NF_ADMIN_CONN_HEADROOM): every slot busy */
    enum { READERS = 4 + 256 };
    int fds[READERS];
    for (int i = 0; i < READERS; i++) {
        /* one at a time: a connection whose request is not read yet counts as idle (it would
         * be evicted by the next); a condition, not a clock: this reader is in the hook */
        fds[i] = busy_conn(nf_admin_port(a));
        NF_REQUIRE(fds[i] >= 0);
        pthread_mutex_lock(&busy_mu);
        while (busy_in < i + 1)
            pthread_cond_wait(&busy_cv, &busy_mu);
        pthread_mutex_unlock(&busy_mu);
    }
    http_resp_t r = http_get(nf_admin_port(a), "/healthz");
    NF_CHECK(r.status != 200); /* the shared server is full: what the probe listener is for */
    http_free(&r);
    for (int i = 0; i < 10; i++) {
        r = http_get(nf_admin_port(p), "/healthz");
        NF_CHECK_EQ(r.status, 200);
        http_free(&r);
    }
    r = http_get(nf_admin_port(p), "/readyz");
    NF_CHECK_EQ(r.status, 200);
    http_free(&r);
    r = http_get(nf_admin_port(p), "/v1/slow"); /* readers' routes are not there */
    NF_CHECK_EQ(r.status, 404);
    http_free(&r);
    r = http_get(nf_admin_port(p), "/metrics");
    NF_CHECK_EQ(r.status, 200);
    NF_CHECK(r.body && strstr(r.body, "newsflow_admin_connections{listener=\"probe\"} "));
    NF_CHECK(r.body && strstr(r.body, "newsflow_admin_connections 260\n"));
    http_free(&r);
    pthread_mutex_lock(&busy_mu);
    busy_release = true;
    pthread_cond_broadcast(&busy_cv);
    pthread_mutex_unlock(&busy_mu);
    for (int i = 0; i < READERS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    nf_admin_stop(p);
    nf_admin_stop(a);
    nf_metrics_shutdown();
}

/* A client that trickles a header, a byte at a time, is closed at the request deadline (MHD's
 * own idle timeout restarts with every byte and would never close it). */
static void test_slow_header_closed_at_deadline(void)
{
    char err[256];
    nf_admin_hooks_t hooks = {.request_timeout_ms = 300};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a != NULL);
    int fd = idle_conn(nf_admin_port(a));
    NF_REQUIRE(fd >= 0);
    NF_REQUIRE(send(fd, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL) == 23);
    struct timeval tv = {.tv_usec = 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    bool closed = false;
    /* a byte per 100 ms; the bound only turns a hang into a failure (300 s) */
    for (int i = 0; i < 3000 && !closed; i++) {
        char c;
        if (send(fd, "X", 1, MSG_NOSIGNAL) != 1)
            closed = true; /* EPIPE: the server closed it */
        else if (read(fd, &c, 1) == 0)
            closed = true;
    }
    NF_CHECK(closed);
    close(fd);
    /* and the server still answers */
    http_resp_t r = http_get(nf_admin_port(a), "/healthz");
    NF_CHECK_EQ(r.status, 200);
    http_free(&r);
    nf_admin_stop(a);
}

/* ---- POST: bodies whole, bounded, and within the deadline ---- */

static http_resp_t http_raw(uint16_t port, const char *bytes, size_t n)
{
    nf_testhttpc_resp_t t = nf_testhttpc_raw(port, bytes, n);
    return (http_resp_t){.status = t.status, .head = t.head, .body = t.body};
}

/* Answers with what it got: route, body length, a checksum of the body, the Authorization
 * header and the peer. */
static int post_hook(void *arg, const char *route, nf_admin_req_t *req, const char *body,
                     size_t len, char **out, size_t *outlen)
{
    (void)arg;
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++)
        sum = sum * 31 + (unsigned char)body[i];
    const char *auth = nf_admin_req_header_in(req, "authorization");
    char peer[64];
    *out = malloc(512);
    int n = snprintf(*out, 512,
                     "{\"route\":\"%s\",\"len\":%zu,\"sum\":%llu,\"auth\":\"%s\",\"peer\":\"%s\"}",
                     route, len, (unsigned long long)sum, auth ? auth : "",
                     nf_admin_req_peer(req, peer, sizeof peer));
    *outlen = (size_t)n;
    return 202;
}

static void test_post(void)
{
    char err[256];
    nf_admin_hooks_t hooks = {.post = post_hook, .max_body = 300000};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a != NULL);
    uint16_t port = nf_admin_port(a);
    size_t blen = 200000;
    char *req = malloc(blen + 512);
    NF_REQUIRE(req != NULL);
    uint64_t sum = 0;
    int h = snprintf(req, 512,
                     "POST /v1/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Authorization: Bearer abc\r\nContent-Length: %zu\r\n\r\n",
                     blen);
    for (size_t i = 0; i < blen; i++) {
        req[h + i] = (char)('a' + i % 26);
        sum = sum * 31 + (unsigned char)req[h + i];
    }
    http_resp_t r = http_raw(port, req, (size_t)h + blen);
    NF_CHECK_EQ(r.status, 202);
    char want[256];
    snprintf(want, sizeof want,
             "{\"route\":\"events\",\"len\":%zu,\"sum\":%llu,\"auth\":\"Bearer abc\","
             "\"peer\":\"127.0.0.1\"}",
             blen, (unsigned long long)sum);
    NF_CHECK_STR(r.body ? r.body : "", want);
    http_free(&r);
    /* chunked: the body arrives in pieces, the hook gets it whole */
    const char *chunked = "POST /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    r = http_raw(port, chunked, strlen(chunked));
    NF_CHECK_EQ(r.status, 202);
    NF_CHECK(r.body && strstr(r.body, "\"route\":\"x\",\"len\":5,") != NULL);
    http_free(&r);
    /* over the limit by Content-Length: 413 before the body is read */
    h = snprintf(req, 512,
                 "POST /v1/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 "Content-Length: 300001\r\n\r\n");
    r = http_raw(port, req, (size_t)h);
    NF_CHECK_EQ(r.status, 413);
    NF_CHECK(r.body && strstr(r.body, "over the limit of 300000 bytes") != NULL);
    http_free(&r);
    /* over the limit in chunks (no length said): 413 once it passes */
    size_t at = (size_t)snprintf(req, blen + 512,
                                 "POST /v1/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 4; i++) {
        at += (size_t)sprintf(req + at, "%x\r\n", 40000);
        memset(req + at, 'z', 40000);
        at += 40000;
        at += (size_t)sprintf(req + at, "\r\n");
    }
    at += (size_t)sprintf(req + at, "0\r\n\r\n");
    hooks.max_body = 100000;
    nf_admin_t *b = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(b != NULL);
    r = http_raw(nf_admin_port(b), req, at);
    NF_CHECK_EQ(r.status, 413);
    http_free(&r);
    nf_admin_stop(b);
    /* POST elsewhere: 405, naming what is allowed */
    r = http_do(AF_INET, port, "POST", "/metrics");
    NF_CHECK_EQ(r.status, 405);
    http_free(&r);
    free(req);
    nf_admin_stop(a);
    /* no post hook: POST /v1/ is 405 with Allow: GET, HEAD */
    nf_admin_hooks_t none = {0};
    a = nf_admin_start("127.0.0.1", 0, &none, err, sizeof err);
    NF_REQUIRE(a != NULL);
    r = http_do(AF_INET, nf_admin_port(a), "POST", "/v1/events");
    NF_CHECK_EQ(r.status, 405);
    char allow[64] = "";
    NF_CHECK(http_header(&r, "Allow", allow, sizeof allow));
    NF_CHECK_STR(allow, "GET, HEAD");
    http_free(&r);
    nf_admin_stop(a);
}

/* A body trickled a byte at a time is cut at the request deadline: a slow sender may not hold
 * a connection thread. */
static void test_slow_body_closed_at_deadline(void)
{
    char err[256];
    nf_admin_hooks_t hooks = {.post = post_hook, .request_timeout_ms = 300};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a != NULL);
    int fd = idle_conn(nf_admin_port(a));
    NF_REQUIRE(fd >= 0);
    const char *head = "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n";
    NF_REQUIRE(send(fd, head, strlen(head), MSG_NOSIGNAL) == (ssize_t)strlen(head));
    struct timeval tv = {.tv_usec = 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    bool closed = false;
    for (int i = 0; i < 3000 && !closed; i++) { /* 100000 bytes would take 10,000 s */
        char c;
        if (send(fd, "{", 1, MSG_NOSIGNAL) != 1)
            closed = true;
        else if (read(fd, &c, 1) == 0)
            closed = true;
    }
    NF_CHECK(closed);
    close(fd);
    http_resp_t r = http_do(AF_INET, nf_admin_port(a), "POST", "/v1/ok");
    NF_CHECK_EQ(r.status, 202);
    http_free(&r);
    nf_admin_stop(a);
}

/* A stop while a request is being answered: the server stops taking connections, waits for
 * the answer (drain_ms), and only then closes: the client gets its 202, not a cut connection. */
static atomic_int slow_entered;

static int slow_post(void *arg, const char *route, nf_admin_req_t *req, const char *body,
                     size_t len, char **out, size_t *outlen)
{
    (void)arg, (void)route, (void)req, (void)body, (void)len;
    atomic_store(&slow_entered, 1);
    struct timespec t = {.tv_nsec = 300 * 1000000L}; /* a broker's acknowledgement, say */
    nanosleep(&t, NULL);
    *out = strdup("{\"accepted\":1}");
    *outlen = strlen(*out);
    return 202;
}

typedef struct {
    uint16_t port;
    int status;
} slow_client_t;

static void *slow_client(void *arg)
{
    slow_client_t *c = arg;
    http_resp_t r = http_do(AF_INET, c->port, "POST", "/v1/events");
    c->status = r.status;
    http_free(&r);
    return NULL;
}

static void test_stop_answers_requests_in_progress(void)
{
    char err[256];
    nf_admin_hooks_t hooks = {.post = slow_post, .drain_ms = 30000};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a != NULL);
    slow_client_t c = {.port = nf_admin_port(a)};
    pthread_t t;
    NF_REQUIRE(pthread_create(&t, NULL, slow_client, &c) == 0);
    for (int i = 0; i < 30000 && !atomic_load(&slow_entered); i++) { /* a bound, not a clock */
        struct timespec p = {.tv_nsec = 1000000L};
        nanosleep(&p, NULL);
    }
    NF_CHECK(atomic_load(&slow_entered));
    nf_admin_stop(a); /* while the hook still works on the answer */
    pthread_join(t, NULL);
    NF_CHECK_EQ(c.status, 202);
}

/* A header flood (thousands of header lines, far past what a connection may hold): a 4xx or a
 * closed connection, never a crash or a hang, and the server answers the next request. */
static void test_header_flood(void)
{
    char err[256];
    nf_admin_hooks_t hooks = {.post = post_hook};
    nf_admin_t *a = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(a != NULL);
    size_t cap = 3000 * 128 + 256, at = 0;
    char *req = malloc(cap);
    NF_REQUIRE(req != NULL);
    at += (size_t)snprintf(req, cap, "POST /v1/events HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 3000; i++)
        at += (size_t)snprintf(req + at, cap - at, "X-Flood-%d: %0100d\r\n", i, i);
    at += (size_t)snprintf(req + at, cap - at, "Content-Length: 0\r\n\r\n");
    http_resp_t r = http_raw(nf_admin_port(a), req, at);
    NF_CHECK(r.status == 0 || r.status == 413 || r.status == 431);
    http_free(&r);
    free(req);
    r = http_do(AF_INET, nf_admin_port(a), "POST", "/v1/ok");
    NF_CHECK_EQ(r.status, 202);
    http_free(&r);
    nf_admin_stop(a);
}

int main(void)
{
    NF_RUN(test_endpoints);
    NF_RUN(test_null_hooks_and_no_registry);
    NF_RUN(test_bad_addresses);
    NF_RUN(test_ipv6);
    NF_RUN(test_idle_connections_do_not_block_probes);
    NF_RUN(test_probe_listener_apart_from_readers);
    NF_RUN(test_slow_header_closed_at_deadline);
    NF_RUN(test_post);
    NF_RUN(test_slow_body_closed_at_deadline);
    NF_RUN(test_header_flood);
    NF_RUN(test_stop_answers_requests_in_progress);
    return nf_test_report();
}
