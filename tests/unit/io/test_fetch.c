/* Tests src/io/fetch.c on a real shard against the loopback test server: every documented
 * outcome (200, 304 with the ETag, gzip, 5xx, 429/503 Retry-After in seconds and as a date,
 * redirect, redirect loop, redirect to a private address refused before connecting, oversized
 * bodies with and without Content-Length, stall -> low-speed timeout, refused connection, the
 * default guard refusing loopback, file:// disabled) and that slow and stalled transfers do not
 * hold up the others (ordering, not timing); the `sent` hook runs once per request that reaches
 * the server (once more per redirect followed, never for a refused connection). */
#include "io/fetch.h"
#include "nf_test.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "testhttpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXREQ 64

typedef struct {
    char url[256];
    char etag[64];
    bool default_guard;
    /* results */
    nf_fetch_result_t res;
    char body_head[64];
    uint64_t seq; /* completion order */
    _Atomic int done;
    _Atomic int sent; /* nf_fetch_opts_t.sent calls */
} req_t;

static req_t reqs[MAXREQ];
static _Atomic uint64_t completed;

typedef struct {
    nf_fetcher_t *guarded; /* allows 127.0.0.0/8 */
    nf_fetcher_t *strict;  /* the default guard */
    nf_addrguard_t guard;
} fx_t;

static int fx_actor;
static char fx_connect_to[96]; /* set before the runtime starts */

static void on_sent(void *user)
{
    req_t *r = user;
    atomic_fetch_add(&r->sent, 1);
}

/* An init's failure: reason in err, -1. */
static int init_failed(char *err, size_t errlen, const char *reason)
{
    snprintf(err, errlen, "%s", reason);
    return -1;
}

static int fx_init(nf_shard_t *sh, void *ctx, void **self, char *err, size_t errlen)
{
    (void)ctx;
    fx_t *fx = calloc(1, sizeof *fx);
    if (!fx)
        return init_failed(err, errlen, "out of memory");
    nf_addrguard_init(&fx->guard);
    nf_addrguard_allow(&fx->guard, "127.0.0.0/8");
    nf_fetch_opts_t o;
    nf_fetch_opts_default(&o);
    o.guard = &fx->guard;
    o.low_speed_time_s = 1; /* the stall gives up after ~1 s */
    o.low_speed_bytes = 1;
    o.total_timeout_ms = 20000;
    o.connect_to = fx_connect_to;
    o.sent = on_sent;
    fx->guarded = nf_fetcher_create(sh, &o);
    o.guard = NULL;
    fx->strict = nf_fetcher_create(sh, &o);
    if (!fx->guarded || !fx->strict) {
        nf_fetcher_destroy(fx->guarded);
        nf_fetcher_destroy(fx->strict);
        free(fx);
        return init_failed(err, errlen, "nf_fetcher_create failed");
    }
    *self = fx;
    return 0;
}

static void fx_fini(nf_shard_t *sh, void *self)
{
    fx_t *fx = self;
    nf_fetcher_destroy(fx->guarded);
    nf_fetcher_destroy(fx->strict);
    free(fx);
    (void)sh;
}

static void fx_handle(nf_shard_t *sh, void *self, const nf_msg_t *m)
{
    (void)sh;
    (void)self;
    (void)m;
}

static const nf_actor_ops_t fx_ops = {
    .name = "fetchtest", .init = fx_init, .handle = fx_handle, .fini = fx_fini};

static void on_done(nf_shard_t *sh, nf_fetch_result_t *res, void *user)
{
    req_t *r = user;
    r->res = *res;
    r->res.body = NULL;
    if (res->body)
        snprintf(r->body_head, sizeof r->body_head, "%.*s",
                 (int)(res->body_len < 60 ? res->body_len : 60), res->body);
    r->seq = atomic_fetch_add(&completed, 1);
    atomic_store(&r->done, 1);
    (void)sh;
}

static void start_on_shard(nf_shard_t *sh, void *arg)
{
    req_t *r = arg;
    fx_t *fx = nf_shard_actor(sh, fx_actor);
    int rc = nf_fetch_start(r->default_guard ? fx->strict : fx->guarded, r->url,
                            r->etag[0] ? r->etag : NULL, NULL, on_done, r);
    if (rc != 0) {
        r->res.error = NF_FETCH_E_OTHER;
        snprintf(r->res.message, sizeof r->res.message, "start failed %d", rc);
        atomic_store(&r->done, 1);
    }
}

static nf_runtime_t *rt;
static unsigned nreq;
static uint16_t port;

static req_t *add(const char *path, const char *etag, bool default_guard)
{
    req_t *r = &reqs[nreq++];
    if (strncmp(path, "http", 4) == 0 || strncmp(path, "file", 4) == 0)
        snprintf(r->url, sizeof r->url, "%s", path);
    else
        snprintf(r->url, sizeof r->url, "http://127.0.0.1:%u%s", port, path);
    snprintf(r->etag, sizeof r->etag, "%s", etag ? etag : "");
    r->default_guard = default_guard;
    NF_CHECK_EQ(nf_runtime_call(rt, 0, start_on_shard, r, 5000), 0);
    return r;
}

static void wait_all(void)
{
    uint64_t deadline = nf_now_ns() + 60000000000ull;
    for (unsigned i = 0; i < nreq; i++)
        while (!atomic_load(&reqs[i].done) && nf_now_ns() < deadline)
            usleep(2000);
}

static void expect(const req_t *r, nf_fetch_error_t err, int status)
{
    if (r->res.error != err || r->res.http_status != status)
        fprintf(stderr, "  %s: got %s/%d (%s), want %s/%d\n", r->url,
                nf_fetch_error_name(r->res.error), r->res.http_status, r->res.message,
                nf_fetch_error_name(err), status);
    NF_CHECK_EQ(r->res.error, err);
    NF_CHECK_EQ(r->res.http_status, status);
}

static uint16_t closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(s, (struct sockaddr *)&a, sizeof a);
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

static void test_outcomes(void)
{
    nf_testhttpd_t *srv = nf_testhttpd_start(NULL, 0);
    NF_REQUIRE(srv);
    port = nf_testhttpd_port(srv);
    snprintf(fx_connect_to, sizeof fx_connect_to, "feed-7.farm.test:%u:127.0.0.1:%u", port, port);
    nf_runtime_opts_t o;
    nf_runtime_opts_default(&o);
    o.shards = 1;
    char err[256];
    rt = nf_runtime_create(&o, err, sizeof err);
    NF_REQUIRE(rt);
    fx_actor = nf_runtime_register(rt, &fx_ops, NULL);
    NF_REQUIRE(nf_runtime_start(rt) == 0);

    /* The slow ones first: everything started after them must still finish before them. */
    req_t *stall = add("/stall", NULL, false);
    req_t *slow = add("/slow", NULL, false);
    req_t *quick[20];
    for (int i = 0; i < 20; i++) {
        char p[32];
        snprintf(p, sizeof p, "/feed/%d.xml", 100 + i);
        quick[i] = add(p, NULL, false);
    }
    req_t *feed = add("/feed/1.xml", NULL, false);
    req_t *cond = add("/feed/1.xml", "\"1-v0\"", false);
    req_t *gz = add("/gzip", NULL, false);
    req_t *e500 = add("/status/500", NULL, false);
    req_t *r429 = add("/429", NULL, false);
    req_t *r503 = add("/503-date", NULL, false);
    req_t *loop = add("/loop", NULL, false);
    req_t *priv = add("/to-private", NULL, false);
    req_t *huge = add("/huge", NULL, false);
    req_t *chunked = add("/huge-chunked", NULL, false);
    req_t *html = add("/html", NULL, false);
    req_t *redir = add("/redirect", NULL, false);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/feed/1.xml", closed_port());
    req_t *refused = add(url, NULL, false);
    req_t *strict = add("/feed/1.xml", NULL, true);
    req_t *file = add("file:///etc/hostname", NULL, false);
    snprintf(url, sizeof url, "http://feed-7.farm.test:%u/feed/7.xml", port);
    req_t *named = add(url, NULL, false); /* no DNS: connect_to sends it to the test server */
    wait_all();

    expect(feed, NF_FETCH_OK, 200);
    NF_CHECK_STR(feed->res.etag, "\"1-v0\"");
    NF_CHECK(strstr(feed->body_head, "<?xml") == feed->body_head);
    NF_CHECK(strstr(feed->res.content_type, "application/rss+xml") != NULL);
    expect(cond, NF_FETCH_OK, 304);
    NF_CHECK(cond->res.not_modified);
    expect(gz, NF_FETCH_OK, 200);
    NF_CHECK(strstr(gz->body_head, "<?xml") == gz->body_head); /* decoded */
    expect(e500, NF_FETCH_OK, 500);
    expect(r429, NF_FETCH_OK, 429);
    NF_CHECK_EQ(r429->res.retry_after_s, 120);
    expect(r503, NF_FETCH_OK, 503);
    NF_CHECK(r503->res.retry_after_s > 200 && r503->res.retry_after_s <= 301);
    expect(loop, NF_FETCH_E_REDIRECTS, 302);
    expect(priv, NF_FETCH_E_REFUSED_ADDRESS, 302); /* the redirect that pointed there */
    NF_CHECK(strstr(priv->res.message, "10.255.255.1 is private") != NULL);
    NF_CHECK(huge->res.error == NF_FETCH_E_TOO_LARGE);
    NF_CHECK(chunked->res.error == NF_FETCH_E_TOO_LARGE);
    NF_CHECK(strstr(chunked->res.message, "fetch.body_max_bytes") != NULL);
    expect(html, NF_FETCH_OK, 200);
    NF_CHECK(strstr(html->res.content_type, "text/html") != NULL);
    expect(redir, NF_FETCH_OK, 200);
    NF_CHECK_EQ(redir->res.redirects, 1);
    NF_CHECK(strstr(redir->res.effective_url, "/feed/1.xml") != NULL);
    expect(refused, NF_FETCH_E_CONNECT, 0);
    expect(strict, NF_FETCH_E_REFUSED_ADDRESS, 0);
    NF_CHECK(strstr(strict->res.message, "127.0.0.1 is loopback") != NULL);
    expect(file, NF_FETCH_E_PROTOCOL, 0);
    expect(named, NF_FETCH_OK, 200);
    NF_CHECK(strstr(named->body_head, "<?xml") == named->body_head);
    expect(slow, NF_FETCH_OK, 200);
    NF_CHECK_EQ(slow->res.bytes, 160);
    expect(stall, NF_FETCH_E_TIMEOUT, 200);
    for (int i = 0; i < 20; i++) {
        expect(quick[i], NF_FETCH_OK, 200);
        NF_CHECK(quick[i]->seq < slow->seq);  /* not held up by the slow body */
        NF_CHECK(quick[i]->seq < stall->seq); /* nor by the stalled one */
    }
    fprintf(stderr, "  stall: %s after %.2f s; slow body took %.2f s\n", stall->res.message,
            (double)stall->res.duration_ns / 1e9, (double)slow->res.duration_ns / 1e9);

    /* `sent`: once per request written to a connection, so the server saw exactly as many */
    NF_CHECK_EQ(atomic_load(&feed->sent), 1);
    NF_CHECK_EQ(atomic_load(&redir->sent), 2); /* the 301, then its target */
    NF_CHECK_EQ(atomic_load(&priv->sent), 1);  /* its redirect was refused before connecting */
    NF_CHECK_EQ(atomic_load(&loop->sent), 6);  /* max_redirects (5) followed, then refused */
    NF_CHECK_EQ(atomic_load(&refused->sent), 0);
    NF_CHECK_EQ(atomic_load(&named->sent), 1);
    NF_CHECK_EQ(atomic_load(&strict->sent), 0); /* no hook on that fetcher, and refused */
    uint64_t sent = 0;
    for (unsigned i = 0; i < nreq; i++)
        sent += (uint64_t)atomic_load(&reqs[i].sent);
    NF_CHECK_EQ(sent, nf_testhttpd_requests(srv));

    nf_runtime_request_stop(rt);
    NF_CHECK_EQ(nf_runtime_wait(rt), 0);
    nf_runtime_destroy(rt);
    nf_testhttpd_stop(srv);
}

int main(void)
{
    nf_fetch_global_init();
    nf_metrics_init(1);
    NF_RUN(test_outcomes);
    nf_metrics_shutdown();
    return nf_test_report();
}
