/* guard.c — see guard.h. */
#include "serve/guard.h"

#include "runtime/jsonw.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/timer.h"
#include "serve/auth.h"
#include "serve/ratelimit.h"
#include "serve/routes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const class_names[NF_GUARD__CLASSES] = {"public", "reader", "events",
                                                           "operator"};

struct nf_guard {
    nf_auth_t *auth; /* NULL: no authentication */
    bool open, limit_loopback, demo_tokens;
    nf_ratelimit_t *limit[NF_GUARD__CLASSES]; /* NULL: no limit */
    nf_counter_t limited[NF_GUARD__CLASSES];
    nf_counter_t not_loopback, wrong_subject, token[NF_AUTH_NERRORS]; /* token: by -code */
};

static bool given(const char *s)
{
    return s && *s;
}

static void guard_metrics(nf_guard_t *g)
{
    for (int c = 0; c < NF_GUARD__CLASSES; c++) {
        char label[40];
        snprintf(label, sizeof label, "class=\"%s\"", class_names[c]);
        nf_metrics_counter("newsflow_ratelimit_refused_total",
                           "requests answered 429: the client's token bucket of the route "
                           "class was empty (limits.*)",
                           label, 0, &g->limited[c]);
    }
    static const char help[] = "readers' requests refused 401 or 403, by reason (the token's "
                               "fault, another reader's data, or no authentication configured "
                               "for a client beyond loopback)";
    for (int e = 1; e < NF_AUTH_NERRORS; e++) {
        char label[48];
        snprintf(label, sizeof label, "reason=\"%s\"", nf_auth_error_name(-e));
        nf_metrics_counter("newsflow_auth_refused_total", help, label, 0, &g->token[e]);
    }
    nf_metrics_counter("newsflow_auth_refused_total", help, "reason=\"not_loopback\"", 0,
                       &g->not_loopback);
    nf_metrics_counter("newsflow_auth_refused_total", help, "reason=\"wrong_subject\"", 0,
                       &g->wrong_subject);
}

void nf_guard_opts_from_config(const nf_config_t *cfg, nf_guard_opts_t *o)
{
    bool on = cfg->limits.enabled;
    *o = (nf_guard_opts_t){.hs256_secret_file = cfg->auth.hs256_secret_file,
                           .public_key_file = cfg->auth.public_key_file,
                           .jwks_file = cfg->auth.jwks_file,
                           .issuer = cfg->auth.issuer,
                           .audience = cfg->auth.audience,
                           .max_skew_s = cfg->auth.max_skew_s,
                           .open = cfg->auth.open,
                           .demo_tokens = cfg->auth.demo_tokens,
                           .public_per_s = on ? cfg->limits.public_per_s : 0,
                           .reader_per_s = on ? cfg->limits.reader_per_s : 0,
                           .events_per_s = on ? cfg->limits.events_per_s : 0,
                           .limit_loopback = cfg->limits.loopback};
}

nf_guard_t *nf_guard_new(const nf_guard_opts_t *o, char *err, size_t errlen)
{
    nf_guard_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->open = o->open;
    g->limit_loopback = o->limit_loopback;
    g->demo_tokens = o->demo_tokens;
    if (given(o->hs256_secret_file) || given(o->public_key_file) || given(o->jwks_file)) {
        nf_auth_opts_t ao = {.hs256_secret_file = o->hs256_secret_file,
                             .public_key_file = o->public_key_file,
                             .jwks_file = o->jwks_file,
                             .issuer = o->issuer,
                             .audience = o->audience,
                             .max_skew_s = o->max_skew_s};
        if (!(g->auth = nf_auth_new(&ao, err, errlen))) {
            free(g);
            return NULL;
        }
    }
    const double rates[NF_GUARD__CLASSES] = {o->public_per_s, o->reader_per_s, o->events_per_s, 0};
    for (int c = 0; c < NF_GUARD__CLASSES; c++)
        if (rates[c] > 0 &&
            !(g->limit[c] = nf_ratelimit_new(rates[c], rates[c] < 0.5 ? 1 : 2 * rates[c], 65536))) {
            snprintf(err, errlen, "out of memory");
            nf_guard_free(g);
            return NULL;
        }
    guard_metrics(g);
    return g;
}

void nf_guard_free(nf_guard_t *g)
{
    if (!g)
        return;
    nf_auth_free(g->auth);
    for (int c = 0; c < NF_GUARD__CLASSES; c++)
        nf_ratelimit_free(g->limit[c]);
    free(g);
}

bool nf_guard_authenticates(const nf_guard_t *g)
{
    return g->auth != NULL;
}

/* The reader a route names, read exactly as the query API's router reads it (query.c match:
 * a user id may hold '/'): feed/{user} is everything after "feed/"; users/{user}/SUFFIX is what
 * lies between "users/" and the last of the routes' suffixes (/interest, /reads), else
 * everything after "users/" (no such route: the router answers 404, after the guard). */
static void route_user(const char *route, const char **user, size_t *ulen)
{
    static const char *const suffixes[] = {"/interest", "/reads"};
    if (!strncmp(route, "feed/", 5)) {
        *user = route + 5;
        *ulen = strlen(*user);
        return;
    }
    *user = route + 6; /* "users/" */
    *ulen = strlen(*user);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t sl = strlen(suffixes[i]);
        if (*ulen >= sl && !strcmp(*user + *ulen - sl, suffixes[i])) {
            *ulen -= sl;
            return;
        }
    }
}

nf_guard_class_t nf_guard_classify(const char *method, const char *route, const char **user,
                                   size_t *ulen)
{
    *user = NULL;
    *ulen = 0;
    const char *p;
    size_t pl;
    const nf_route_t *r = nf_route_match(method, route, &p, &pl, NULL);
    if (r) {
        if (r->guard == NF_GUARD_READER) {
            *user = p;
            *ulen = pl;
        }
        return r->guard;
    }
    if (strcmp(method, "POST") == 0)
        return NF_GUARD_EVENTS;
    /* every route under feed/ or users/ is a reader's, even one naming nobody (an empty user
     * matches no token's subject) */
    if (!strncmp(route, "feed/", 5) || !strncmp(route, "users/", 6)) {
        route_user(route, user, ulen);
        return NF_GUARD_READER;
    }
    return NF_GUARD_PUBLIC;
}

static bool loopback(const char *peer)
{
    return !strncmp(peer, "127.", 4) || !strcmp(peer, "::1") || !strncmp(peer, "::ffff:127.", 11);
}

/* host (a Host header, or an Origin's host:port after its scheme) names this machine: a local
 * name or a loopback address, any port. */
static bool local_host(const char *host)
{
    static const char *const names[] = {"localhost", "127.", "[::1]", "[::ffff:127."};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (!strncasecmp(host, names[i], n) &&
            (names[i][n - 1] == '.' || names[i][n - 1] == ':' || host[n] == '\0' || host[n] == ':'))
            return true;
    }
    return false;
}

/* A request the loopback rule may trust: from a loopback address, for a local Host, and, when a
 * browser says where the page came from (Origin), from a local page. A page elsewhere in a
 * browser on this machine (a cross-site request, or a name rebound to 127.0.0.1) is not. */
static bool trusted_local(nf_admin_req_t *req)
{
    char peer[64];
    if (!loopback(nf_admin_req_peer(req, peer, sizeof peer)))
        return false;
    const char *host = nf_admin_req_header_in(req, "Host");
    const char *origin = nf_admin_req_header_in(req, "Origin");
    if (host && !local_host(host))
        return false;
    if (!origin)
        return true;
    const char *sep = strstr(origin, "://");
    return sep && local_host(sep + 3);
}

/* The client's name in the rate limiter: its address, an IPv6 one by its /64 (a client holds a
 * whole /64, and would otherwise have 2^64 names). */
static const char *limit_key(nf_admin_req_t *req, char *buf, size_t len)
{
    nf_admin_req_peer(req, buf, len);
    struct in6_addr a;
    if (!strchr(buf, ':') || !strncmp(buf, "::ffff:", 7) || inet_pton(AF_INET6, buf, &a) != 1)
        return buf;
    memset(a.s6_addr + 8, 0, 8);
    inet_ntop(AF_INET6, &a, buf, (socklen_t)len);
    return buf;
}

static int refuse(int status, const char *msg, const char *reason, nf_admin_req_t *req, char **body,
                  size_t *len)
{
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "error");
    nf_jw_str(&w, msg);
    if (reason) {
        nf_jw_key(&w, "reason");
        nf_jw_str(&w, reason);
    }
    nf_jw_obj_close(&w);
    nf_jw_raw(&w, "\n", 1);
    if (status == 401)
        nf_admin_req_header(req, "WWW-Authenticate", "Bearer");
    *body = w.failed ? NULL : w.buf;
    *len = w.failed ? 0 : w.len;
    if (w.failed)
        nf_jw_free(&w);
    return status;
}

/* Who asks: the verified subject, or (no authentication) nobody. 0, or the refusal. */
static int identify(nf_guard_t *g, nf_guard_class_t cls, const char *user, size_t ulen,
                    nf_admin_req_t *req, char *sub, size_t sublen, char **body, size_t *len)
{
    sub[0] = '\0';
    if (!g->auth) {
        if (g->open || trusted_local(req))
            return 0;
        nf_counter_inc(g->not_loopback);
        return refuse(403,
                      "this server answers readers on its own machine only: authentication is "
                      "not configured (set auth.hs256_secret_file, auth.public_key_file or "
                      "auth.jwks_file; or auth.open=true to serve everyone unauthenticated)",
                      "not_loopback", req, body, len);
    }
    if (cls == NF_GUARD_PUBLIC)
        return 0;
    char err[256];
    int rc = nf_auth_verify(g->auth, nf_admin_req_header_in(req, "Authorization"),
                            nf_wall_ms() / 1000, sub, sublen, err, sizeof err);
    if (rc != 0) {
        if (rc < 0 && rc > -NF_AUTH_NERRORS)
            nf_counter_inc(g->token[-rc]);
        return refuse(401, err, nf_auth_error_name(rc), req, body, len);
    }
    if (user && (strlen(sub) != ulen || memcmp(sub, user, ulen) != 0)) {
        nf_counter_inc(g->wrong_subject);
        return refuse(403, "the token's subject may read only its own data", "wrong_subject", req,
                      body, len);
    }
    return 0;
}

int nf_guard_check(nf_guard_t *g, nf_guard_class_t cls, const char *user, size_t ulen,
                   nf_admin_req_t *req, double cost, char *sub, size_t sublen, char **body,
                   size_t *len)
{
    *body = NULL;
    *len = 0;
    if (cls == NF_GUARD_OPERATOR) {
        sub[0] = '\0';
        return 0;
    }
    int rc = identify(g, cls, user, ulen, req, sub, sublen, body, len);
    if ((rc != 0 && rc != 401) || !g->limit[cls])
        return rc;
    /* a refused token costs its address a token too: forged tokens are not free to send */
    char peer[64];
    const char *who = sub[0] ? sub : limit_key(req, peer, sizeof peer);
    if (!sub[0] && !g->limit_loopback && loopback(who))
        return rc;
    unsigned ra = 0;
    if (nf_ratelimit_take(g->limit[cls], who, strlen(who), rc ? 1 : cost, nf_now_ns(), &ra))
        return rc;
    if (rc) { /* the 401 is replaced by the 429 */
        free(*body);
        *body = NULL;
        *len = 0;
    }
    nf_counter_inc(g->limited[cls]);
    char v[16], msg[160];
    snprintf(v, sizeof v, "%u", ra);
    nf_admin_req_header(req, "Retry-After", v);
    snprintf(msg, sizeof msg, "too many %s requests from this client: try again in %u s (limits.*)",
             class_names[cls], ra);
    return refuse(429, msg, NULL, req, body, len);
}

int nf_guard_demo_token(nf_guard_t *g, nf_admin_req_t *req, char **body, size_t *len)
{
    *body = NULL;
    *len = 0;
    if (!g->demo_tokens || !g->auth)
        return refuse(404, "no demo tokens here (auth.demo_tokens, auth.hs256_secret_file)", NULL,
                      req, body, len);
    if (!trusted_local(req))
        return refuse(403, "demo tokens are for a client on this machine only", "not_loopback", req,
                      body, len);
    const char *user = nf_admin_req_arg(req, "user");
    size_t ulen = user ? strlen(user) : 0;
    if (!ulen || ulen > NF_AUTH_SUB_MAX || strchr(user, 0x7f))
        return refuse(400, "user= names the reader, 1 to 256 bytes", NULL, req, body, len);
    int64_t exp = nf_wall_ms() / 1000 + 3600;
    char tok[2048];
    if (nf_auth_sign_hs256(g->auth, user, exp, tok, sizeof tok) < 0)
        return refuse(404, "no demo tokens here: they are signed with auth.hs256_secret_file", NULL,
                      req, body, len);
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "user_id");
    nf_jw_str(&w, user);
    nf_jw_key(&w, "token");
    nf_jw_str(&w, tok);
    nf_jw_key(&w, "expires_in_s");
    nf_jw_u64(&w, 3600);
    nf_jw_obj_close(&w);
    nf_jw_raw(&w, "\n", 1);
    if (w.failed) {
        nf_jw_free(&w);
        return 503;
    }
    *body = w.buf;
    *len = w.len;
    return 200;
}
