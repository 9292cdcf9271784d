/* test_guard.c — src/serve/guard.c over real HTTP: invariant I-10 (a reader's own data 200,
 * another's 403, no token 401, public routes open), tokens refused for what is wrong with them,
 * the loopback-only rule without authentication, and the per-client rate limit (429 with
 * Retry-After). Tokens are made with the configured secret (nf_auth_sign_hs256) or by hand. */
#include "nf_test.h"
#include "runtime/admin.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "serve/auth.h"
#include "serve/guard.h"
#include "testhttpc.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static nf_guard_t *g_guard;

/* GET: the guard, then 200 {"sub": ...} */
static int api(void *arg, const char *route, nf_admin_req_t *req, char **body, size_t *len)
{
    (void)arg;
    const char *user;
    size_t ulen;
    if (!strcmp(route, "auth/demo-token"))
        return nf_guard_demo_token(g_guard, req, body, len);
    nf_guard_class_t cls = nf_guard_classify("GET", route, &user, &ulen);
    char sub[300];
    int st = nf_guard_check(g_guard, cls, user, ulen, req, 1, sub, sizeof sub, body, len);
    if (st)
        return st;
    *body = malloc(400);
    *len = (size_t)snprintf(*body, 400, "{\"sub\":\"%s\"}", sub);
    return 200;
}

static char secret_path[64];

static nf_admin_t *serve(const char *listen, const nf_guard_opts_t *o)
{
    char err[512];
    g_guard = nf_guard_new(o, err, sizeof err);
    if (!g_guard)
        fprintf(stderr, "guard: %s\n", err);
    NF_CHECK(g_guard != NULL);
    nf_admin_hooks_t hooks = {.api = api};
    return nf_admin_start(listen, 0, &hooks, err, sizeof err);
}

static void stop(nf_admin_t *a)
{
    nf_admin_stop(a);
    nf_guard_free(g_guard);
}

static int get(uint16_t port, const char *path, const char *token, nf_testhttpc_resp_t *out)
{
    char h[4096] = "";
    if (token)
        snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", token);
    *out = nf_testhttpc(port, "GET", path, h, "", 0);
    return out->status;
}

static void test_i10(void)
{
    nf_guard_opts_t o = {.hs256_secret_file = secret_path};
    nf_admin_t *a = serve("127.0.0.1", &o);
    NF_REQUIRE(a != NULL);
    uint16_t port = nf_admin_port(a);
    char err[256];
    nf_auth_opts_t ao = {.hs256_secret_file = secret_path};
    nf_auth_t *auth = nf_auth_new(&ao, err, sizeof err);
    NF_REQUIRE(auth != NULL);
    char alice[1024], bob[1024], old[1024];
    int64_t now = nf_wall_ms() / 1000;
    NF_REQUIRE(nf_auth_sign_hs256(auth, "alice", now + 3600, alice, sizeof alice) > 0);
    NF_REQUIRE(nf_auth_sign_hs256(auth, "bob", now + 3600, bob, sizeof bob) > 0);
    NF_REQUIRE(nf_auth_sign_hs256(auth, "alice", now - 7200, old, sizeof old) > 0);
    nf_testhttpc_resp_t r;
    NF_CHECK_EQ(get(port, "/v1/feed/alice", alice, &r), 200); /* own data */
    NF_CHECK(r.body && strstr(r.body, "\"sub\":\"alice\""));
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/users/alice/interest", alice, &r), 200);
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/feed/alice", bob, &r), 403); /* another's */
    NF_CHECK(r.body && strstr(r.body, "wrong_subject"));
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/users/alice/interest", bob, &r), 403);
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/feed/alice/x", alice, &r), 403); /* reader "alice/x" */
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/feed//bob", NULL, &r), 401); /* reader "/bob", not public */
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/feed/alice", NULL, &r), 401); /* none */
    char www[64] = "";
    NF_CHECK(nf_testhttpc_header(&r, "WWW-Authenticate", www, sizeof www));
    NF_CHECK_STR(www, "Bearer");
    NF_CHECK(r.body && strstr(r.body, "\"reason\":\"missing\""));
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/feed/alice", old, &r), 401); /* expired */
    NF_CHECK(r.body && strstr(r.body, "\"reason\":\"expired\""));
    nf_testhttpc_free(&r);
    /* alg none, and a token signed with another secret */
    const char *none = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5"
                       "OTk5OX0.";
    NF_CHECK_EQ(get(port, "/v1/feed/alice", none, &r), 401);
    NF_CHECK(r.body && strstr(r.body, "\"reason\":\"alg\""));
    nf_testhttpc_free(&r);
    char forged[1024];
    snprintf(forged, sizeof forged, "%s", alice);
    char *dot = strrchr(forged, '.');
    NF_REQUIRE(dot && dot[1]);
    dot[1] = dot[1] == 'A' ? 'B' : 'A';
    NF_CHECK_EQ(get(port, "/v1/feed/alice", forged, &r), 401);
    NF_CHECK(r.body && strstr(r.body, "\"reason\":\"signature\""));
    nf_testhttpc_free(&r);
    /* no demo tokens unless auth.demo_tokens */
    NF_CHECK_EQ(get(port, "/v1/auth/demo-token?user=alice", NULL, &r), 404);
    nf_testhttpc_free(&r);
    /* public routes stay open */
    NF_CHECK_EQ(get(port, "/v1/trending", NULL, &r), 200);
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/articles/0123", NULL, &r), 200);
    nf_testhttpc_free(&r);
    nf_auth_free(auth);
    stop(a);
}

/* A non-loopback address of this machine, or "" (then the loopback rule is checked only from
 * loopback). */
static void outside_addr(char *out, size_t len)
{
    struct ifaddrs *ifs, *i;
    out[0] = '\0';
    if (getifaddrs(&ifs) != 0)
        return;
    for (i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            struct in_addr in = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((ntohl(in.s_addr) >> 24) != 127) {
                inet_ntop(AF_INET, &in, out, (socklen_t)len);
                break;
            }
        }
    freeifaddrs(ifs);
}

/* Without authentication: loopback clients are served, others refused 403 (auth.open lifts it). */
static void test_loopback_only(void)
{
    char addr[64];
    outside_addr(addr, sizeof addr);
    nf_guard_opts_t o = {0};
    nf_admin_t *a = serve("0.0.0.0", &o);
    NF_REQUIRE(a != NULL);
    nf_testhttpc_resp_t r;
    NF_CHECK_EQ(get(nf_admin_port(a), "/v1/feed/anyone", NULL, &r), 200);
    nf_testhttpc_free(&r);
    /* from loopback, but for another Host (a name rebound to 127.0.0.1) or from a page of
     * another Origin (a cross-site request): not this machine's own */
    const struct {
        const char *headers;
        int want;
    } hs[] = {{"Origin: http://localhost:8080\r\n", 200},
              {"Origin: http://127.0.0.1:9464\r\n", 200},
              {"Origin: http://evil.example\r\n", 403},
              {"Origin: null\r\n", 403}};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        r = nf_testhttpc(nf_admin_port(a), "GET", "/v1/feed/anyone", hs[i].headers, "", 0);
        NF_CHECK_EQ(r.status, hs[i].want);
        nf_testhttpc_free(&r);
    }
    const char *rebound = "GET /v1/feed/anyone HTTP/1.1\r\nHost: evil.example:9464\r\n"
                          "Connection: close\r\n\r\n";
    r = nf_testhttpc_raw(nf_admin_port(a), rebound, strlen(rebound));
    NF_CHECK_EQ(r.status, 403);
    nf_testhttpc_free(&r);
    if (!addr[0]) {
        fprintf(stderr, "test_loopback_only: no non-loopback IPv4 address here: checked from "
                        "loopback only\n");
        stop(a);
        return;
    }
    /* the client connects to the machine's own outside address: its peer address is that */
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /v1/trending HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    (void)n;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(nf_admin_port(a))};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    NF_REQUIRE(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    NF_REQUIRE(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    char buf[2048] = "";
    size_t used = 0;
    ssize_t k;
    while (used + 1 < sizeof buf && (k = read(fd, buf + used, sizeof buf - used - 1)) > 0)
        used += (size_t)k;
    close(fd);
    NF_CHECK(strncmp(buf, "HTTP/1.1 403", 12) == 0);
    NF_CHECK(strstr(buf, "auth.open=true") != NULL);
    stop(a);
}

/* One request a hundred seconds per client: the second is 429 with Retry-After; another client
 * (subject) has its own bucket; tokenless loopback clients are not limited by default. */
static void test_rate_limit(void)
{
    nf_guard_opts_t o = {
        .hs256_secret_file = secret_path, .reader_per_s = 0.01, .public_per_s = 0.01};
    nf_admin_t *a = serve("127.0.0.1", &o);
    NF_REQUIRE(a != NULL);
    uint16_t port = nf_admin_port(a);
    char err[256], alice[1024], bob[1024];
    nf_auth_opts_t ao = {.hs256_secret_file = secret_path};
    nf_auth_t *auth = nf_auth_new(&ao, err, sizeof err);
    NF_REQUIRE(auth != NULL);
    int64_t now = nf_wall_ms() / 1000;
    nf_auth_sign_hs256(auth, "alice", now + 3600, alice, sizeof alice);
    nf_auth_sign_hs256(auth, "bob", now + 3600, bob, sizeof bob);
    nf_testhttpc_resp_t r;
    NF_CHECK_EQ(get(port, "/v1/feed/alice", alice, &r), 200);
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/feed/alice", alice, &r), 429);
    char ra[16] = "";
    NF_CHECK(nf_testhttpc_header(&r, "Retry-After", ra, sizeof ra));
    NF_CHECK(atoi(ra) >= 1 && atoi(ra) <= 100);
    nf_testhttpc_free(&r);
    NF_CHECK_EQ(get(port, "/v1/feed/bob", bob, &r), 200);
    nf_testhttpc_free(&r);
    for (int i = 0; i < 5; i++) { /* tokenless, on loopback: not limited */
        NF_CHECK_EQ(get(port, "/v1/trending", NULL, &r), 200);
        nf_testhttpc_free(&r);
    }
    nf_auth_free(auth);
    stop(a);
}

/* The reader a route names, read as the query API's router reads it: a user id may hold '/',
 * so "feed/alice/x" is reader "alice/x" (not alice), and "feed//bob" is reader "/bob" (not a
 * public route). */
static void test_classify(void)
{
    static const struct {
        const char *method, *route;
        nf_guard_class_t cls;
        const char *user;
    } cases[] = {
        {"GET", "feed/alice", NF_GUARD_READER, "alice"},
        {"GET", "feed/alice/x", NF_GUARD_READER, "alice/x"},
        {"GET", "feed//bob", NF_GUARD_READER, "/bob"},
        {"GET", "feed/", NF_GUARD_READER, ""},
        {"GET", "users/alice/interest", NF_GUARD_READER, "alice"},
        {"GET", "users/alice/reads", NF_GUARD_READER, "alice"},
        {"GET", "users/alice/x/interest", NF_GUARD_READER, "alice/x"},
        {"GET", "users//bob/interest", NF_GUARD_READER, "/bob"},
        {"GET", "users/alice", NF_GUARD_READER, "alice"},
        {"GET", "users/interest", NF_GUARD_READER, "interest"},
        {"GET", "feedx", NF_GUARD_PUBLIC, NULL},
        {"GET", "trending", NF_GUARD_PUBLIC, NULL},
        {"GET", "articles/0123", NF_GUARD_PUBLIC, NULL},
        {"GET", "status", NF_GUARD_OPERATOR, NULL},
        {"GET", "ops/history", NF_GUARD_OPERATOR, NULL},
        {"POST", "events", NF_GUARD_EVENTS, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *u;
        size_t ul;
        nf_guard_class_t c = nf_guard_classify(cases[i].method, cases[i].route, &u, &ul);
        bool ok = c == cases[i].cls &&
                  (cases[i].user ? u && ul == strlen(cases[i].user) && !memcmp(u, cases[i].user, ul)
                                 : u == NULL);
        if (!ok) {
            fprintf(stderr, "%s %s: class %d user %.*s\n", cases[i].method, cases[i].route, c,
                    u ? (int)ul : 6, u ? u : "(null)");
            nf_test_failed_checks++;
        }
    }
}

int main(void)
{
    nf_metrics_init(1);
    snprintf(secret_path, sizeof secret_path, "/tmp/nf_test_guard_%d", (int)getpid());
    FILE *f = fopen(secret_path, "w");
    if (!f)
        return 1;
    fputs("0123456789abcdef0123456789abcdef-test-secret\n", f);
    fclose(f);
    NF_RUN(test_classify);
    NF_RUN(test_i10);
    NF_RUN(test_loopback_only);
    NF_RUN(test_rate_limit);
    unlink(secret_path);
    nf_metrics_shutdown();
    return nf_test_report();
}
