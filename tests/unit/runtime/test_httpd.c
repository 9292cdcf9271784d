/* test_httpd.c — tests src/runtime/httpd.c over real sockets: a runtime of two shards takes the
 * admin server's listening socket and answers with test hooks (the hooks are the server's
 * interface: the job's are serve/api.c's). What is checked is what a client on the wire sees,
 * and the server's promises: answers in order on a connection (whether answered on a loop or by
 * a worker), no connection held up by another's slow request, 503 when the workers' queue is
 * full, the answers at the workers written before the shards stop, a client gone while its
 * request is at a worker, every answer to a client that half-closed. */
#include "nf_test.h"
#include "runtime/admin.h"
#include "runtime/httpd.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* /v1/loop/N is answered on a shard's loop, /v1/slow/N by a worker that waits for the test's
 * release, /v1/work/N by a worker at once; each answers {"route":"ROUTE"}. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int slow_in;    /* slow requests inside the hook */
static bool slow_open; /* released */

static bool on_loop(void *arg, const char *method, const char *url)
{
    (void)arg;
    (void)method;
    return strncmp(url, "/v1/loop/", 9) == 0 || strncmp(url, "/v1/big/", 8) == 0;
}

static int api(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    (void)arg;
    (void)req;
    if (strncmp(route, "slow/", 5) == 0) {
        pthread_mutex_lock(&mu);
        slow_in++;
        pthread_cond_broadcast(&cv);
        while (!slow_open)
            pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
    if (strncmp(route, "big/", 4) == 0) { /* N bytes of 'x' */
        *len = strtoul(route + 4, NULL, 10);
        *body = malloc(*len + 1);
        memset(*body, 'x', *len);
        return 200;
    }
    char b[256];
    int n = snprintf(b, sizeof b, "{\"route\":\"%s\"}", route);
    *body = strdup(b);
    *len = (size_t)n;
    return 200;
}

static void slow_wait_in(int n)
{
    pthread_mutex_lock(&mu);
    while (slow_in < n)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void slow_release(void)
{
    pthread_mutex_lock(&mu);
    slow_open = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

typedef struct {
    nf_runtime_t *rt;
    nf_admin_t *admin;
    nf_httpd_t *h;
    uint16_t port;
} server_t;

static void server_start(server_t *s, unsigned workers, unsigned queue)
{
    slow_in = 0;
    slow_open = false;
    NF_REQUIRE(nf_metrics_init(2) == 0);
    nf_runtime_opts_t ro;
    nf_runtime_opts_default(&ro);
    ro.shards = 2;
    char err[256];
    s->rt = nf_runtime_create(&ro, err, sizeof err);
    NF_REQUIRE(s->rt != NULL);
    nf_admin_hooks_t hooks = {.api = api, .on_loop = on_loop, .request_timeout_ms = 60000};
    s->admin = nf_admin_start("127.0.0.1", 0, &hooks, err, sizeof err);
    NF_REQUIRE(s->admin != NULL);
    s->port = nf_admin_port(s->admin);
    nf_httpd_opts_t o = {.hooks = hooks, .workers = workers, .queue = queue, .drain_ms = 10000};
    s->h = nf_httpd_new(s->rt, &o, err, sizeof err);
    NF_REQUIRE(s->h != NULL);
    NF_REQUIRE(nf_runtime_start(s->rt) == 0);
    NF_REQUIRE(nf_httpd_listen(s->h, nf_admin_hand_over(s->admin), err, sizeof err) == 0);
}

static void server_stop(server_t *s)
{
    nf_httpd_quiesce(s->h);
    nf_runtime_request_stop(s->rt);
    NF_CHECK_EQ(nf_runtime_wait(s->rt), 0);
    nf_admin_stop(s->admin);
    nf_runtime_destroy(s->rt);
    nf_httpd_free(s->h);
    nf_metrics_shutdown();
}

static int conn_to(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    NF_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        NF_REQUIRE(w > 0);
        s += w;
        n -= (size_t)w;
    }
}

/* Reads one answer: its status, its body into body (NUL-terminated). 0 at the end of the stream. */
static int read_answer(int fd, char *body, size_t cap)
{
    char head[4096];
    size_t n = 0;
    while (n < sizeof head - 1) {
        ssize_t r = recv(fd, head + n, 1, 0);
        if (r < 0 && errno == EINTR) /* a signal the runtime's threads take (SIGURG...) */
            continue;
        if (r <= 0)
            return 0;
        n++;
        head[n] = '\0';
        if (n >= 4 && strcmp(head + n - 4, "\r\n\r\n") == 0)
            break;
    }
    int status = 0;
    sscanf(head, "HTTP/1.1 %d", &status);
    const char *cl = strcasestr(head, "\r\nContent-Length: ");
    size_t len = cl ? strtoul(cl + 18, NULL, 10) : 0, got = 0;
    if (len >= cap)
        return 0;
    while (got < len) {
        ssize_t r = recv(fd, body + got, len - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        got += (size_t)r;
    }
    body[len] = '\0';
    return status;
}

static void get(int fd, const char *path)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    send_all(fd, req);
}

static void expect_route(int fd, const char *route)
{
    char body[512], want[256];
    snprintf(want, sizeof want, "{\"route\":\"%s\"}", route);
    NF_CHECK_EQ(read_answer(fd, body, sizeof body), 200);
    NF_CHECK_STR(body, want);
}

/* Requests answered on the loops and by workers, pipelined on one connection: answers in order. */
static void test_pipelined_in_order(void)
{
    server_t s;
    server_start(&s, 4, 64);
    int fd = conn_to(s.port);
    char buf[16384] = "";
    size_t n = 0;
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n,
                              "GET /v1/%s/%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                              i % 3 == 0 ? "work" : "loop", i);
    send_all(fd, buf);
    for (int i = 0; i < 40; i++) {
        char route[32];
        snprintf(route, sizeof route, "%s/%d", i % 3 == 0 ? "work" : "loop", i);
        expect_route(fd, route);
    }
    close(fd);
    server_stop(&s);
}

/* A connection whose request waits at a worker holds up its own later requests, nobody else's. */
static void test_slow_request_holds_only_its_connection(void)
{
    server_t s;
    server_start(&s, 2, 64);
    int a = conn_to(s.port), b = conn_to(s.port);
    get(a, "/v1/slow/1");
    get(a, "/v1/loop/after");
    slow_wait_in(1);
    for (int i = 0; i < 20; i++) {
        char p[32];
        snprintf(p, sizeof p, "/v1/loop/%d", i);
        get(b, p);
        expect_route(b, p + 4);
    }
    slow_release();
    expect_route(a, "slow/1");
    expect_route(a, "loop/after");
    close(a);
    close(b);
    server_stop(&s);
}

/* One worker, a queue of one: the third slow request is refused 503 with Retry-After. */
static void test_queue_full_is_503(void)
{
    server_t s;
    server_start(&s, 1, 1);
    int a = conn_to(s.port), b = conn_to(s.port), c = conn_to(s.port);
    get(a, "/v1/slow/a");
    slow_wait_in(1); /* a at the worker */
    get(b, "/v1/slow/b");
    /* b is queued once the metric says so: a condition, not a clock */
    for (int i = 0; i < 20000; i++) {
        char *text = NULL;
        NF_REQUIRE(nf_metrics_render(&text) > 0);
        bool queued = strstr(text, "\nnewsflow_http_worker_queue 1\n") != NULL;
        free(text);
        if (queued)
            break;
        usleep(1000);
    }
    get(c, "/v1/slow/c");
    char body[512];
    NF_CHECK_EQ(read_answer(c, body, sizeof body), 503);
    slow_release();
    expect_route(a, "slow/a");
    expect_route(b, "slow/b");
    close(a);
    close(b);
    close(c);
    server_stop(&s);
}

/* A stop while a request is at a worker: its answer still goes out (quiesce waits for it), and
 * a client that went away before its answer costs nothing (ASan watches the memory). */
static void test_stop_answers_what_workers_hold(void)
{
    server_t s;
    server_start(&s, 2, 64);
    int a = conn_to(s.port), gone = conn_to(s.port);
    get(a, "/v1/slow/stop");
    get(gone, "/v1/slow/gone");
    slow_wait_in(2);
    close(gone);
    slow_release();
    expect_route(a, "slow/stop");
    close(a);
    server_stop(&s);
}

/* A client that sends its requests and half-closes (shutdown(SHUT_WR)) before reading gets
 * every answer, whole — a 1 MB one it reads through a small window, one from a worker, one kept
 * behind them — and then the end of the stream. */
static void test_half_close_gets_every_answer(void)
{
    server_t s;
    server_start(&s, 2, 64);
    int fd = conn_to(s.port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    const size_t big = 1u << 20;
    send_all(fd, "GET /v1/big/1048576 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                 "GET /v1/work/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                 "GET /v1/loop/last HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    NF_REQUIRE(shutdown(fd, SHUT_WR) == 0);
    char *body = malloc(big + 1);
    NF_REQUIRE(body);
    NF_CHECK_EQ(read_answer(fd, body, big + 1), 200);
    size_t x = 0;
    while (x < big && body[x] == 'x')
        x++;
    NF_CHECK_EQ(x, big);
    free(body);
    expect_route(fd, "work/1");
    expect_route(fd, "loop/last");
    char tail[8];
    NF_CHECK_EQ(read_answer(fd, tail, sizeof tail), 0); /* and then the end */
    close(fd);
    server_stop(&s);
}

/* Pipelined requests whose answers back up past the server's high-water mark (256 kB) again and
 * again: every answer comes, none waits for the sweep. */
static void test_backed_up_answers_go_on(void)
{
    server_t s;
    server_start(&s, 2, 64);
    int fd = conn_to(s.port);
    char req[4096] = "";
    size_t n = 0;
    for (int i = 0; i < 12; i++)
        n += (size_t)snprintf(req + n, sizeof req - n,
                              "GET /v1/big/200000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    snprintf(req + n, sizeof req - n, "GET /v1/loop/last HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    send_all(fd, req);
    char *body = malloc(200001);
    NF_REQUIRE(body);
    for (int i = 0; i < 12; i++)
        NF_CHECK_EQ(read_answer(fd, body, 200001), 200);
    free(body);
    expect_route(fd, "loop/last");
    close(fd);
    server_stop(&s);
}

int main(void)
{
    NF_RUN(test_pipelined_in_order);
    NF_RUN(test_slow_request_holds_only_its_connection);
    NF_RUN(test_queue_full_is_503);
    NF_RUN(test_stop_answers_what_workers_hold);
    NF_RUN(test_half_close_gets_every_answer);
    NF_RUN(test_backed_up_answers_go_on);
    return nf_test_report();
}
