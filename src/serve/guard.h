/* guard.h — what every reader's request passes before its route answers (invariant I-10 and
 * fair use, issue 38): who is asking, whether they may, and whether they are asking too fast.
 *
 * Route classes (nf_guard_class):
 *   PUBLIC    trending, articles, stories, topics, search, the page: open to anyone
 *   READER    a reader's own data: GET /v1/feed/{user}, /v1/users/{user}/...: with
 *             authentication configured, a token (Authorization: Bearer <JWT>, serve/auth.h)
 *             whose subject is {user} — none 401, another's 403
 *   EVENTS    POST /v1/events, /v1/articles/{id}/read: a token whose subject is each event's
 *             user_id (the edge checks the events, serve/edge.h)
 *   OPERATOR  /v1/status, /v1/sources, /v1/ops/history (and /metrics, /healthz, /readyz,
 *             which never reach the guard): not readers' routes — admin.operator_port serves
 *             them apart
 * Without authentication configured (no auth.* key file) nothing is verified, and then the
 * server is for its own machine: a PUBLIC, READER or EVENTS request from a client that is not
 * on loopback — or that names another Host, or comes from a page of another Origin (a
 * cross-site request, a name rebound to 127.0.0.1) — is refused 403 naming the way out
 * (configure auth.*, or auth.open=true to serve everyone unauthenticated on purpose).
 *
 * Rate limits (serve/ratelimit.h): a token bucket per client — the token's subject when there
 * is one, else the client's address — and per class: PUBLIC and READER cost a request each,
 * EVENTS an event each, a refused token one (against the address: forged tokens are not free);
 * an IPv6 client is named by its /64; an empty bucket is 429 with Retry-After. A client on loopback
 * without a token (the machine's own probes, sidecars, benchmarks) is not limited unless
 * limit_loopback.
 *
 * Answers are JSON {"error": ...}: 401 with WWW-Authenticate: Bearer, 403, 429 with
 * Retry-After. Metrics: newsflow_auth_refused_total{reason} (reason: missing, expired, ...,
 * wrong_subject, not_loopback), newsflow_ratelimit_refused_total{class}.
 *
 * Threads: new/free from one thread; the rest from any number of HTTP threads at once. */
#ifndef NF_SERVE_GUARD_H
#define NF_SERVE_GUARD_H

#include "runtime/admin.h"
#include "runtime/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NF_GUARD_PUBLIC = 0,
    NF_GUARD_READER,
    NF_GUARD_EVENTS,
    NF_GUARD_OPERATOR,
    NF_GUARD__CLASSES
} nf_guard_class_t;

typedef struct nf_guard_opts {
    /* serve/auth.h's key sources; every one NULL or "": no authentication */
    const char *hs256_secret_file, *public_key_file, *jwks_file;
    const char *issuer, *audience;
    uint32_t max_skew_s;
    bool open;        /* no authentication and clients beyond loopback all the same */
    bool demo_tokens; /* GET /v1/auth/demo-token (nf_guard_demo_token) */
    /* requests (PUBLIC, READER) or events (EVENTS) per second per client; 0: no limit. The
     * bucket holds two seconds' worth, at least one. */
    double public_per_s, reader_per_s, events_per_s;
    bool limit_loopback; /* tokenless clients on loopback are limited too */
} nf_guard_opts_t;

/* The options of auth.* and limits.* (limits.enabled false: no limit). */
void nf_guard_opts_from_config(const nf_config_t *cfg, nf_guard_opts_t *o);

typedef struct nf_guard nf_guard_t;

/* NULL with a message (a key file that cannot be read or used). */
nf_guard_t *nf_guard_new(const nf_guard_opts_t *o, char *err, size_t errlen);
void nf_guard_free(nf_guard_t *g);
bool nf_guard_authenticates(const nf_guard_t *g);

/* The class of a /v1/ route (without "/v1/") and method ("GET", "POST"); for READER the user
 * the route names (*user, *ulen; URL-decoded as the route is). */
nf_guard_class_t nf_guard_classify(const char *method, const char *route, const char **user,
                                   size_t *ulen);

/* GET /v1/auth/demo-token?user=U: with demo_tokens and an HS256 secret, a token for reader U
 * valid one hour, {"user_id":U,"token":T,"expires_at":ISO}, to a client this machine trusts
 * (loopback, a local Host and Origin) — the page of a demo with authentication on signs its
 * reader in with it. 404 without demo_tokens or a secret, 403 for another client, 400 for a
 * bad user. The status, with the JSON body in *body. */
int nf_guard_demo_token(nf_guard_t *g, nf_admin_req_t *req, char **body, size_t *len);

/* Checks one request of class cls (user: READER's path user, else NULL; cost: 1, or a batch's
 * events). 0: go on, with the token's subject in sub (sublen bytes; "" without
 * authentication). Else the HTTP status, its malloc'ed JSON body in *body and headers added to
 * req. */
int nf_guard_check(nf_guard_t *g, nf_guard_class_t cls, const char *user, size_t ulen,
                   nf_admin_req_t *req, double cost, char *sub, size_t sublen, char **body,
                   size_t *len);

#endif
